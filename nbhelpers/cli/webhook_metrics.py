"""The receiver's own Prometheus metrics, served on ``GET /metrics`` (text exposition format).

Each receiver has its own registry (not prometheus_client's global one), so several receivers in one
process, as in the tests, count separately.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

PREFIX = "kserve_runbook_webhook"
# A run is a triage (seconds) and, with --reports html, a notebook render (tens of seconds).
DURATION_BUCKETS = (1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600)
# The classic text format, which every Prometheus version scrapes (the metric names need no escaping).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class ReceiverMetrics:
    """Counters of alerts and runs, the run duration histogram and the queue length."""

    def __init__(self, queue_length: Callable[[], float]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.alerts_received = Counter(
            f"{PREFIX}_alerts_received",
            "Alerts received in POST /alerts payloads, by status (firing, resolved).",
            ["status"],
            registry=self.registry,
        )
        self.alerts_queued = Counter(f"{PREFIX}_alerts_queued", "Alerts that queued a triage.", registry=self.registry)
        self.runs_started = Counter(f"{PREFIX}_runs_started", "Triage runs started.", registry=self.registry)
        self.runs_failed = Counter(
            f"{PREFIX}_runs_failed", "Triage runs that could not run and wrote nothing.", registry=self.registry
        )
        self.reports_failed = Counter(
            f"{PREFIX}_reports_failed",
            "Runs whose verdict was written but whose report.html could not be rendered.",
            registry=self.registry,
        )
        self.run_duration = Histogram(
            f"{PREFIX}_run_duration_seconds",
            "Time from the start of a run to its last file written.",
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.queue_length = Gauge(f"{PREFIX}_queue_length", "Services waiting for the worker.", registry=self.registry)
        self.queue_length.set_function(queue_length)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
