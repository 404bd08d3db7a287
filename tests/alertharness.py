"""Real parts for the alert-to-report test: a loopback exporter the test drives, Prometheus scraping it
with the shipped rule file, and Alertmanager routing to the receiver (tests/test_alert_e2e.py).

Everything listens on 127.0.0.1. Prometheus comes from Debian's ``prometheus`` package, Alertmanager from
``prometheus-alertmanager`` (``./dev test`` installs both). The rule file is the shipped one with only its
``for:`` periods shortened, so the test runs in seconds and still exercises the shipped expressions.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from promharness import free_port, serving_process

ROOT = Path(__file__).parents[1]
SHIPPED_RULES = ROOT / "deploy" / "alerts" / "kserve-vllm.rules.yaml"
START_TIMEOUT_SECONDS = 30.0


def require_alerting_binaries() -> tuple[str, str]:
    """(prometheus, alertmanager): a missing binary fails the run in CI and skips the test elsewhere."""
    prometheus = shutil.which("prometheus")
    alertmanager = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    if prometheus and alertmanager:
        return prometheus, alertmanager
    message = "apt-get install --no-install-recommends prometheus prometheus-alertmanager"
    if os.environ.get("CI") == "true":
        pytest.fail(f"Prometheus or Alertmanager is not installed: {message}")
    pytest.skip(f"Prometheus or Alertmanager is not installed: {message}")


class Exporter:
    """A /metrics endpoint whose exposition text the test sets (``exporter.text = ...``)."""

    def __init__(self) -> None:
        self.text = ""
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                body = owner.text.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def address(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    def __enter__(self) -> Exporter:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def fast_rules(for_period: str = "2s") -> dict[str, Any]:
    """The shipped rule file with every ``for:`` set to ``for_period`` (the expressions stay as shipped)."""
    document: dict[str, Any] = yaml.safe_load(SHIPPED_RULES.read_text())
    for group in document["groups"]:
        group["interval"] = "1s"
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = for_period
    return document


@dataclass
class Alerting:
    prometheus_url: str
    alertmanager_url: str
    workdir: Path

    def logs(self) -> str:
        return "\n".join(path.read_text(errors="replace")[-3000:] for path in sorted(self.workdir.glob("*.log")))


@contextmanager
def alerting(exporter: Exporter, receiver_url: str, workdir: Path, repeat_interval: str = "2s") -> Iterator[Alerting]:
    """Alertmanager (group_wait and group_interval 1 s) sending to ``receiver_url``, and Prometheus scraping
    ``exporter`` every second, evaluating the fast copy of the shipped rules and alerting that Alertmanager."""
    prometheus, alertmanager = require_alerting_binaries()
    am_port, prom_port = free_port(), free_port()
    am_url, prom_url = f"http://127.0.0.1:{am_port}", f"http://127.0.0.1:{prom_port}"
    route = {
        "receiver": "kserve-runbook",
        "group_by": ["namespace", "inferenceservice"],
        "group_wait": "1s",
        "group_interval": "1s",
        "repeat_interval": repeat_interval,
    }
    receivers = [{"name": "kserve-runbook", "webhook_configs": [{"url": receiver_url, "send_resolved": True}]}]
    (workdir / "alertmanager.yml").write_text(yaml.safe_dump({"route": route, "receivers": receivers}))
    (workdir / "rules.yml").write_text(yaml.safe_dump(fast_rules(), sort_keys=False))
    prometheus_config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(workdir / "rules.yml")],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]},
        "scrape_configs": [
            {"job_name": "vllm", "honor_labels": True, "static_configs": [{"targets": [exporter.address]}]}
        ],
    }
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(prometheus_config))
    (workdir / "am-data").mkdir()
    am_command = [
        alertmanager,
        f"--config.file={workdir / 'alertmanager.yml'}",
        f"--storage.path={workdir / 'am-data'}",
        f"--web.listen-address=127.0.0.1:{am_port}",
        "--cluster.listen-address=",  # a single Alertmanager: no gossip port
    ]
    prom_command = [
        prometheus,
        f"--config.file={workdir / 'prometheus.yml'}",
        f"--storage.tsdb.path={workdir / 'prom-data'}",
        f"--web.listen-address=127.0.0.1:{prom_port}",
    ]
    with (
        serving_process(am_command, am_url, workdir / "alertmanager.log", START_TIMEOUT_SECONDS),
        serving_process(prom_command, prom_url, workdir / "prometheus.log", START_TIMEOUT_SECONDS),
    ):
        yield Alerting(prom_url, am_url, workdir)
