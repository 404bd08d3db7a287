"""End to end against the fixture API server and the real Prometheus: the CLI, capture, and bundle replay.

These run `kserve-runbook` as a user does (a subprocess: kernel, papermill, nbconvert) against a live
cluster that happens to be a fixture server on 127.0.0.1.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from builders import comparable
from conftest import CLUSTER_FIXTURES
from fakeapi import FakeApiServer
from promharness import PrometheusServer, prometheus_server  # noqa: F401  (pytest fixture)

from nbhelpers.render.findings_json import findings_schema
from nbhelpers.triage import TriageParams, params_from_text, run

pytestmark = pytest.mark.integration

FIXTURE_WINDOW = ["--start", "2026-01-15T10:00:00Z", "--end", "2026-01-15T12:00:00Z"]
CHECK_FIXTURES = CLUSTER_FIXTURES.parent / "checks"


def kserve_runbook(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nbhelpers", *arguments], capture_output=True, text=True, timeout=180, cwd=cwd
    )


def live_options(kubeconfig: Path, prometheus: PrometheusServer) -> list[str]:
    return ["--kubeconfig", str(kubeconfig), "-n", "llm", "--isvc", "vllm-llm", "--prometheus", prometheus.url]


def read_report(out: Path) -> dict[str, object]:
    assert sorted(path.name for path in out.iterdir()) == [
        "evidence.tar.gz",
        "findings.json",
        "report.html",
        "summary.md",
        "triage.ipynb",
    ]
    document: dict[str, object] = json.loads((out / "findings.json").read_text())
    jsonschema.validate(document, findings_schema())
    return document


def test_triage_on_a_live_cluster_writes_the_four_outputs(
    serverless_api: FakeApiServer,
    kubeconfig: Path,
    prometheus_server: PrometheusServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    out = tmp_path / "report"
    result = kserve_runbook(
        "triage", *live_options(kubeconfig, prometheus_server), *FIXTURE_WINDOW, "--out", str(out), cwd=tmp_path
    )
    # The cluster's objects are healthy, but the real Prometheus recorded (tests/promharness.py) an OOM kill at 11:30
    # and, during the 11:20-11:40 incident, KV cache usage at 0.97 with preemptions: findings only the metrics can
    # show. The OOM kill is critical, so the exit code is 1.
    assert result.returncode == 1, result.stderr
    assert f"report: {out / 'report.html'}" in result.stdout
    document = read_report(out)
    assert document["root_causes"] == ["RESOURCES_HOST_OOMKILLED", "KV_CACHE_PRESSURE"]
    assert document["sources"] == {"cluster": "live", "prometheus": "live"}
    assert document["partial"] is False
    statuses = {step["id"]: step["status"] for step in document["steps"]}  # type: ignore[attr-defined]
    assert statuses["endpoints"] == "ok" and statuses["ports"] == "ok"
    summary = (out / "summary.md").read_text()
    assert "5xx responses at the Istio proxies" in summary  # impact numbers come from the real Prometheus
    assert {request.method for request in serverless_api.requests} == {"GET"}


def test_triage_with_since_counts_back_from_now(
    serverless_api: FakeApiServer,
    kubeconfig: Path,
    prometheus_server: PrometheusServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    out = tmp_path / "report"
    result = kserve_runbook(
        "triage",
        *live_options(kubeconfig, prometheus_server),
        "--since",
        "2h",
        "--out",
        str(out),
        "--quiet",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    document = read_report(out)
    window = document["window"]
    assert isinstance(window, dict) and window["start"] < window["end"]
    # The fixture's events and metrics are from January: none falls in the last two hours.
    assert "no events" in (out / "summary.md").read_text() or "Timeline" in (out / "summary.md").read_text()


def test_a_captured_bundle_gives_the_findings_of_the_live_run(
    fake_api: FakeApiServer,
    kubeconfig: Path,
    prometheus_server: PrometheusServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    fake_api.load(CLUSTER_FIXTURES / "common", CHECK_FIXTURES / "healthy" / "raw.yaml")
    fake_api.load(CHECK_FIXTURES / "PORT_MISMATCH" / "raw_vllm_default_port.yaml")
    params = params_from_text(
        {
            "kubeconfig": str(kubeconfig),
            "namespace": "llm",
            "isvc": "vllm-llm",
            "prometheus": prometheus_server.url,
            "start": FIXTURE_WINDOW[1],
            "end": FIXTURE_WINDOW[3],
        }
    )
    live = run(params)
    assert "PORT_MISMATCH" in live.root_causes

    bundle = tmp_path / "incident.tar.gz"
    captured = kserve_runbook(
        "capture", *live_options(kubeconfig, prometheus_server), *FIXTURE_WINDOW, "--out", str(bundle), cwd=tmp_path
    )
    assert captured.returncode == 0, captured.stderr
    replayed = run(TriageParams(bundle=str(bundle)))
    live_document, replayed_document = comparable(live.to_json()), comparable(replayed.to_json())
    assert replayed_document.pop("sources") == {"cluster": "bundle", "prometheus": "bundle"}
    assert live_document.pop("sources") == {"cluster": "live", "prometheus": "live"}
    assert replayed_document == live_document

    out = tmp_path / "report"
    triaged = kserve_runbook("triage", "--bundle", str(bundle), "--out", str(out), cwd=tmp_path)
    assert triaged.returncode == 1, triaged.stderr  # PORT_MISMATCH is critical
    assert comparable(read_report(out)) == comparable(replayed.to_json())


def test_the_deadline_stops_a_run_on_a_slow_api_server(
    serverless_api: FakeApiServer,
    kubeconfig: Path,
    tmp_path: Path,
) -> None:
    serverless_api.inject("/api/v1/namespaces/llm/pods", delay=6.0)
    arguments = ["--kubeconfig", str(kubeconfig), "-n", "llm", "--isvc", "vllm-llm", "--request-timeout", "20s"]
    out = tmp_path / "out"
    result = kserve_runbook("triage", *arguments, "--deadline", "2s", "--out", str(out), cwd=tmp_path)
    # The verdict is written whatever the deadline cut (issue #19): partial, saying why; the report is what waits.
    assert result.returncode in (0, 1), result.stderr
    assert json.loads((out / "findings.json").read_text())["partial"] is True
    assert "deadline" in (out / "summary.md").read_text()
    assert "report: not rendered (the --deadline was reached" in result.stdout
