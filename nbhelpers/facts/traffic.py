"""Traffic and restarts in the window, from the metrics in the evidence: the arithmetic behind the numbers.

Request rates by HTTP status at the first edge that counted them (Istio, ingress-nginx, Knative),
the increases of counters (container restarts), series added up sample by sample, peaks. The
functions work on :class:`~nbhelpers.metrics.series.MetricData` only (no I/O); summary.md, the
charts and the what-if all read them from here, so their numbers agree.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from nbhelpers.evidence.model import Evidence
from nbhelpers.metrics.series import MetricData, SamplePairs
from nbhelpers.sources.base import SeriesData

# Edge request metrics by preference: (catalog id, status label, where the requests were counted).
STATUS_QUERIES: tuple[tuple[str, str, str], ...] = (
    ("istio_requests_by_code", "response_code", "the Istio proxies"),
    ("nginx_requests_by_status", "status", "ingress-nginx"),
    ("knative_requests_by_code", "response_code", "Knative"),
)


def finite(samples: Iterable[tuple[float, float]]) -> SamplePairs:
    """The samples with a finite value (NaN and infinities dropped)."""
    return [(t, v) for t, v in samples if math.isfinite(v)]


def sum_by_time(series: Iterable[SeriesData]) -> SamplePairs:
    """Add the series sample by sample (Prometheus range answers share one step grid)."""
    totals: dict[float, float] = {}
    for item in series:
        for t, v in finite(item.samples):
            totals[t] = totals.get(t, 0.0) + v
    return sorted(totals.items())


def usable(evidence: Evidence, query_id: str) -> MetricData | None:
    """The query's answer when it has series."""
    data = evidence.metrics.get(query_id)
    return data if data is not None and data.status == "ok" and data.series else None


@dataclass(frozen=True)
class StatusRates:
    """Request rates by HTTP status at the first edge that reported any."""

    query_id: str
    where: str
    step: int
    by_code: dict[str, SamplePairs]

    def matching(self, prefix: str) -> SamplePairs:
        """The rates of every code starting with ``prefix`` (``"5"``: the 5xx), added up by time."""
        totals: dict[float, float] = {}
        for code, samples in self.by_code.items():
            if code.startswith(prefix):
                for t, v in samples:
                    totals[t] = totals.get(t, 0.0) + v
        return sorted(totals.items())


def status_rates(evidence: Evidence) -> StatusRates | None:
    """Request rates by status code at the first edge in :data:`STATUS_QUERIES` that has series."""
    for query_id, label, where in STATUS_QUERIES:
        data = usable(evidence, query_id)
        if data is None:
            continue
        grouped: dict[str, list[SeriesData]] = {}
        for item in data.series:
            grouped.setdefault(item.labels.get(label, "unknown"), []).append(item)
        by_code = {code: sum_by_time(items) for code, items in sorted(grouped.items())}
        return StatusRates(query_id, where, data.step, by_code)
    return None


def counter_increases(samples: Sequence[tuple[float, float]]) -> SamplePairs:
    """(time, increase since the previous sample) for every sample where a counter went up (resets count)."""
    increases = []
    clean = finite(samples)
    for (_, before), (t, after) in pairwise(clean):
        delta = after - before if after >= before else after
        if delta > 0:
            increases.append((t, delta))
    return increases


def restart_increases(evidence: Evidence) -> list[tuple[float, float, str]]:
    """(time, restarts, pod) for every rise of a restart counter in the window, by time."""
    data = usable(evidence, "pod_restarts")
    if data is None:
        return []
    rises = [
        (t, delta, item.labels.get("pod", "?")) for item in data.series for t, delta in counter_increases(item.samples)
    ]
    return sorted(rises)


def peak_sample(samples: SamplePairs) -> tuple[float, float] | None:
    """The (time, value) sample with the highest value; None without samples."""
    return max(samples, key=lambda sample: sample[1]) if samples else None


# --- 5xx by the layer that answered them ----------------------------------------------------------------------


def answered_in_window(data: MetricData | None, label: str, keep: Callable[[str], bool]) -> float | None:
    """Requests whose ``label`` value passes ``keep``, over the window: per-second rates × the step, summed.
    None when the query was not read (no answer, or a failed one); 0 for an empty answer."""
    if data is None or data.status not in ("ok", "empty"):
        return None
    return sum(
        value * data.step
        for item in data.series
        if keep(str(item.labels.get(label) or ""))
        for _, value in finite(item.samples)
    )


def _code(*codes: str) -> Callable[[str], bool]:
    return lambda code: code in codes


def _server_error(code: str) -> bool:
    return code.startswith("5")


def _describe(value: float | None) -> str:
    return "not read" if value is None else f"≈{value:.0f}"


@dataclass(frozen=True)
class KnativeLayers:
    """Knative's 5xx in the window, each at the layer that produced it (≈ counts; None: that counter was not read).

    knative/serving (up to 1.18, pkg/queue/sharedmain/handlers.go) counts each request twice in queue-proxy:
    ``revision_app_request_count`` inside the revision's timeout handler and ``revision_request_count`` outside it.
    A request cut by the revision timeout is answered 504 by the timeout handler, while the reverse proxy inside it
    writes 502 for the cancelled request (network/error_handler.go, the stack trace in knative/serving#15352):
    so the cut requests are 504 outside and 502 inside. The activator counts ``activator_request_count`` outside
    its own timeout handler (cmd/activator/main.go): 503 when it could not get capacity in time (scale from
    zero, a full queue; pkg/activator/handler/handler.go), 504 when the revision timeout fired while it held or
    proxied the request. What the activator proxied to queue-proxy is counted at both, so the activator's own
    answers are its count beyond queue-proxy's for the same code (a lower bound).
    """

    revision_timeouts: float | None  # queue-proxy 504: the revision timeout (or response-start / idle) fired
    queue_proxy_other: float | None  # other queue-proxy 5xx beyond the app's (503: its request queue was full)
    app: float | None  # the server's own 5xx behind queue-proxy, less the 502s written for cut requests
    activator_no_capacity: float | None  # activator 503 beyond queue-proxy's
    activator_timeouts: float | None  # activator 504 beyond queue-proxy's

    @property
    def read(self) -> bool:
        """Whether an outer layer (queue-proxy's outer counter or the activator) was read at all."""
        return self.revision_timeouts is not None or self.activator_timeouts is not None

    @property
    def timeouts(self) -> float | None:
        """Requests Knative cut with its revision timeout (queue-proxy's and the activator's own)."""
        if not self.read:
            return None
        return (self.revision_timeouts or 0.0) + (self.activator_timeouts or 0.0)

    def describe(self) -> str:
        return (
            "Knative 5xx by layer: queue-proxy revision timeout (504 in revision_request_count) "
            f"{_describe(self.revision_timeouts)}; queue-proxy other 5xx {_describe(self.queue_proxy_other)}; "
            f"the server behind queue-proxy {_describe(self.app)} (the 502s revision_app_request_count writes for "
            "cut requests excluded); activator 503, no capacity in time (scale from zero, queue full) "
            f"{_describe(self.activator_no_capacity)}; activator 504, revision timeout while it held the request "
            f"{_describe(self.activator_timeouts)}"
        )


def knative_layers(evidence: Evidence) -> KnativeLayers | None:
    """Knative's 5xx by layer; None when neither queue-proxy's outer counter nor the activator's has series (not
    Serverless, not scraped, or Knative 1.19+, whose OpenTelemetry metrics have other names)."""
    outer = evidence.metrics.get("knative_queue_requests_by_code")
    activator = evidence.metrics.get("knative_activator_requests_by_code")
    if usable(evidence, "knative_queue_requests_by_code") is None and (
        usable(evidence, "knative_activator_requests_by_code") is None
    ):
        return None
    app = evidence.metrics.get("knative_requests_by_code")
    if app is not None and app.template_index != 0:
        app = None  # the fallback template is the activator's counter, read on its own above
    timeouts = answered_in_window(outer, "response_code", _code("504"))
    outer_503 = answered_in_window(outer, "response_code", _code("503"))
    outer_5xx = answered_in_window(outer, "response_code", _server_error)
    app_5xx = answered_in_window(app, "response_code", _server_error)
    app_502 = answered_in_window(app, "response_code", _code("502"))
    app_own = None if app_5xx is None else max(0.0, app_5xx - min(app_502 or 0.0, timeouts or 0.0))
    other = None if outer_5xx is None else max(0.0, outer_5xx - (timeouts or 0.0) - (app_own or 0.0))
    activator_503 = answered_in_window(activator, "response_code", _code("503"))
    activator_504 = answered_in_window(activator, "response_code", _code("504"))
    layers = KnativeLayers(
        revision_timeouts=timeouts,
        queue_proxy_other=other,
        app=app_own,
        activator_no_capacity=None if activator_503 is None else max(0.0, activator_503 - (outer_503 or 0.0)),
        activator_timeouts=None if activator_504 is None else max(0.0, activator_504 - (timeouts or 0.0)),
    )
    return layers if layers.read else None


@dataclass(frozen=True)
class OuterGateway:
    """5xx the external gateway answered on its way to knative-local-gateway (Serverless), in the window.

    KServe's VirtualService sends the external gateway's requests to knative-local-gateway, so Istio labels them
    with that destination, not the predictor (kserve/kserve pkg/controller/v1beta1/inferenceservice/reconcilers/
    ingress/ingress_reconciler.go). Istio's standard labels do not carry the request's host: only where a
    Telemetry override adds ``request_host`` can they be given to one service (``by_host``); otherwise they are
    the gateway's, shared by every Serverless service behind it.
    """

    host: str  # the InferenceService's URL host ("" when unknown)
    by_host: bool
    server_errors: float  # 5xx: this host's when by_host, else every service's
    timeouts: float  # 504 with Envoy's flag UT (a route timeout fired at the gateway), likewise

    def describe(self) -> str:
        scope = (
            f"for {self.host} (request_host)"
            if self.by_host
            else "for every Serverless service behind the gateway: the series carry no request_host, so the "
            "attribution is by gateway, not by service"
        )
        return (
            f"external gateway → knative-local-gateway: 5xx ≈{self.server_errors:.0f}, 504 with flag UT "
            f"≈{self.timeouts:.0f}, {scope}"
        )


def outer_gateway(evidence: Evidence, host: str) -> OuterGateway | None:
    """The outer gateway's 5xx towards knative-local-gateway, for ``host`` when the series say the host."""
    data = usable(evidence, "istio_outer_gateway_by_code")
    if data is None:
        return None
    by_host = bool(host) and any(item.labels.get("request_host") for item in data.series)
    mine = [
        item
        for item in data.series
        if not by_host or str(item.labels.get("request_host") or "").split(":")[0].lower() == host
    ]
    errors = sum(
        v * data.step
        for item in mine
        if str(item.labels.get("response_code", "")).startswith("5")
        for _, v in finite(item.samples)
    )
    cut = sum(
        v * data.step
        for item in mine
        if item.labels.get("response_code") == "504" and "UT" in str(item.labels.get("response_flags") or "").split(",")
        for _, v in finite(item.samples)
    )
    return OuterGateway(host, by_host, errors, cut)
