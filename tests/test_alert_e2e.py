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
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
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


@pytest.fixture
def receiver(raw_api: FakeApiServer, kubeconfig: Path, tmp_path: Path) -> Iterator[tuple[str, Path, Path]]:
    """``kserve-runbook webhook`` on 127.0.0.1 as a process: (its /alerts URL, its --out, its log)."""
    out, log = tmp_path / "reports", tmp_path / "receiver.log"
    port = free_port()
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
    ]
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, "NO_COLOR": "1"})
    try:
        _wait_for(
            "the receiver's /healthz",
            lambda: _healthy(f"http://127.0.0.1:{port}/healthz"),
            30,
            lambda: log.read_text(errors="replace"),
        )
        yield f"http://127.0.0.1:{port}/alerts", out, log
    finally:
        process.terminate()
        process.wait(timeout=20)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def test_a_firing_alert_is_triaged_once_and_its_report_written(
    receiver: tuple[str, Path, Path], tmp_path: Path
) -> None:
    url, out, log = receiver
    with Exporter() as exporter, alerting(exporter, url, tmp_path) as stack:

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

        # Alertmanager repeats the notification every 2 s while the alert fires: still one run.
        first_count = _webhook_notifications(stack)
        _wait_for("two repeated notifications", lambda: _webhook_notifications(stack) >= first_count + 2, 30, logs)
        assert len(_runs(out)) == 1, logs()
