"""An alert becomes a report with real parts only: the shipped rule file in a real Prometheus, a real
Alertmanager, the ``kserve-runbook webhook`` command, and the kubernetes client against the fixture
API server (tests/alertharness.py).

The story: vLLM on ``raw/vllm-raw`` (the RawDeployment fixture: one pod that restarted three times)
starts queueing requests. KServeVLLMRequestsWaiting fires, Alertmanager sends it, the receiver
triages that service once however often Alertmanager repeats itself, and when the queue drains the
resolve triages it again over the incident as it was.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from alertharness import Alerting, Exporter, alerting
from fakeapi import FakeApiServer
from promharness import free_port

from nbhelpers.util.times import parse_k8s_time

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

POD = "vllm-raw-predictor-5f8b9c7d64-h8d2x"
WAITING = 'vllm:num_requests_waiting{{namespace="raw",pod="{pod}",model_name="llama"}} {value}\n'
LOOKBACK = timedelta(minutes=30)
CLUSTER_FIXTURES = Path(__file__).parent / "fixtures" / "cluster"


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.load(answer)


def _wait_for(what: str, probe: Callable[[], Any], timeout: float, logs: Callable[[], str]) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.25)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}\n{logs()}")


def _firing_since(stack: Alerting, name: str) -> datetime | None:
    alerts = _get(f"{stack.prometheus_url}/api/v1/alerts")["data"]["alerts"]
    for alert in alerts:
        if alert["labels"]["alertname"] == name and alert["state"] == "firing":
            return parse_k8s_time(alert["activeAt"])
    return None


def _webhook_notifications(stack: Alerting) -> float:
    with urllib.request.urlopen(f"{stack.alertmanager_url}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("alertmanager_notifications_total") and 'integration="webhook"' in line
    )


def _runs(out: Path) -> list[Path]:
    return sorted(folder for folder in out.glob("*-raw-vllm-raw") if (folder / "findings.json").is_file())


@contextmanager
def _receiver(
    kubeconfig: Path, tmp_path: Path, port: int, prometheus: str, reports: str
) -> Iterator[tuple[Path, Path]]:
    """``kserve-runbook webhook`` on 127.0.0.1:``port`` as a process: (its --out, its log)."""
    out, log = tmp_path / "reports", tmp_path / "receiver.log"
    command = [
        str(Path(sys.executable).with_name("kserve-runbook")),
        "webhook",
        "--listen",
        f"127.0.0.1:{port}",
        "--kubeconfig",
        str(kubeconfig),
        "--out",
        str(out),
        "--lookback",
        "30m",
        "--cooldown",
        "10m",
        "--reports",
        reports,
        "--prometheus",
        prometheus,
    ]
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    try:
        _wait_for(
            "the receiver's /healthz",
            lambda: _healthy(f"http://127.0.0.1:{port}/healthz"),
            30,
            lambda: log.read_text(errors="replace"),
        )
        yield out, log
    finally:
        process.terminate()
        process.wait(timeout=20)


def _text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as answer:
        return str(answer.read().decode())


def _namespace_of(path: str) -> str:
    parts = path.split("/")
    return parts[parts.index("namespaces") + 1] if "namespaces" in parts[:-1] else ""


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def test_a_firing_alert_is_triaged_once_its_resolve_once_more_and_both_are_listed(
    raw_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/alerts"
    with (
        Exporter() as exporter,
        alerting(exporter, url, tmp_path) as stack,
        _receiver(kubeconfig, tmp_path, port, stack.prometheus_url, reports="html") as (out, log),
    ):

        def logs() -> str:
            return stack.logs() + "\n" + log.read_text(errors="replace")

        exporter.text = WAITING.format(pod=POD, value=40)
        fired_at = _wait_for(
            "KServeVLLMRequestsWaiting to fire", lambda: _firing_since(stack, "KServeVLLMRequestsWaiting"), 60, logs
        )
        fired_clock = time.monotonic()
        runs = _wait_for("the receiver's first report", lambda: _runs(out), 90, logs)
        seconds_to_report = time.monotonic() - fired_clock
        print(f"alert firing -> findings.json on disk: {seconds_to_report:.1f} s")

        findings = json.loads((runs[0] / "findings.json").read_text())
        assert findings["target"]["namespace"] == "raw" and findings["target"]["isvc"] == "vllm-raw"
        window_start = parse_k8s_time(findings["window"]["start"])
        # Alertmanager's startsAt is the moment Prometheus saw the rule fire: the window reaches 30 min before it.
        assert abs((fired_at - LOOKBACK) - window_start) < timedelta(seconds=5)
        assert (runs[0] / "summary.md").is_file()

        _wait_for("the first run's report.html", lambda: (runs[0] / "report.html").is_file(), 90, logs)
        print(f"alert firing -> report.html on disk: {time.monotonic() - fired_clock:.1f} s")

        # Alertmanager repeats the notification every 2 s while the alert fires: still one run.
        first_count = _webhook_notifications(stack)
        _wait_for("two repeated notifications", lambda: _webhook_notifications(stack) >= first_count + 2, 30, logs)
        assert len(_runs(out)) == 1, logs()

        # The queue drains: the resolve is triaged once more, over the incident from start to end.
        exporter.text = WAITING.format(pod=POD, value=0)
        runs = _wait_for("the run over the resolved incident", lambda: _runs(out)[1:] and _runs(out), 90, logs)
        resolved = json.loads((runs[1] / "findings.json").read_text())
        assert resolved["incident"]["start"] == findings["incident"]["start"]
        incident_end = parse_k8s_time(resolved["incident"]["end"])
        assert fired_at < incident_end <= datetime.now(timezone.utc)
        assert resolved["window"] == {"start": findings["window"]["start"], "end": resolved["incident"]["end"]}
        _wait_for("the resolved run's report.html", lambda: (runs[1] / "report.html").is_file(), 90, logs)
        time.sleep(3)  # longer than the repeat interval: nothing more is triaged
        assert len(_runs(out)) == 2, logs()

        # The receiver's index lists both runs, each linking to its report.
        index = _text(url.removesuffix("/alerts") + "/")
        for run in runs:
            assert f"runs/{run.name}/report.html" in index
            assert _text(url.removesuffix("/alerts") + f"/runs/{run.name}/findings.json").startswith("{")


def _minimal_isvc(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"predictor": {"model": {"modelFormat": {"name": "huggingface"}}}},
    }


def test_an_alert_storm_queues_and_the_api_server_sees_one_triage_at_a_time(
    fake_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    """300 alerts for 20 services through Alertmanager: 20 runs, one after another."""
    namespaces = [f"team-{index:02d}" for index in range(20)]
    fake_api.load(CLUSTER_FIXTURES / "common")  # the CRDs and KServe's config
    for namespace in namespaces:
        fake_api.cluster.add(_minimal_isvc(namespace, "chat"))
    port = free_port()
    with (
        Exporter() as exporter,
        alerting(exporter, f"http://127.0.0.1:{port}/alerts", tmp_path) as stack,
        _receiver(kubeconfig, tmp_path, port, stack.prometheus_url, reports="none") as (_out, log),
    ):
        now = datetime.now(timezone.utc)
        storm = [
            {
                "labels": {"alertname": f"Storm{kind:02d}", "namespace": namespace, "inferenceservice": "chat"},
                "startsAt": (now - timedelta(minutes=1)).isoformat(),
            }
            for namespace in namespaces
            for kind in range(15)
        ]
        request = urllib.request.Request(
            f"{stack.alertmanager_url}/api/v2/alerts",
            data=json.dumps(storm).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        fake_api.clear_requests()
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 200

        def finished() -> bool:
            text = log.read_text(errors="replace")
            return text.count("webhook: done ") + text.count("webhook: failed ") >= len(namespaces)

        _wait_for("20 runs", finished, 120, lambda: stack.logs() + log.read_text(errors="replace"))
    order = [_namespace_of(request.path) for request in fake_api.requests]
    visited = [namespace for namespace in order if namespace in namespaces]
    blocks = [namespace for index, namespace in enumerate(visited) if index == 0 or visited[index - 1] != namespace]
    assert sorted(blocks) == namespaces  # each service's reads form one block: never two triages at once
    assert {request.method for request in fake_api.requests} == {"GET"}
