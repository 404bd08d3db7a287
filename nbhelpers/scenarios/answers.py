"""Answer the metric catalog's range queries from a scenario's raw series, as Prometheus would.

Only the PromQL the catalog uses is needed: instant selectors with the 5-minute
lookback, ``rate`` with Prometheus' extrapolation, ``sum/max/min/avg by``, and
``histogram_quantile`` over summed bucket rates. Every catalog id needs an
entry in :data:`EVALUATORS`; a new id without one stops generation with a
message instead of leaving a silent gap in the bundles.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import pairwise

from nbhelpers.metrics import catalog
from nbhelpers.metrics.openmetrics import Family, HistogramFamily
from nbhelpers.sources.base import SeriesData

LOOKBACK_SECONDS = 300.0
_RATE_RANGE = re.compile(r"\[(\d+)s\]")
Labels = tuple[tuple[str, str], ...]
Vector = list[tuple[dict[str, str], float]]


@dataclass(frozen=True)
class _Series:
    labels: dict[str, str]
    times: tuple[float, ...]
    values: tuple[float, ...]


class RawStore:
    """Raw samples by sample name (counters with ``_total``, histograms as ``_bucket``/``_sum``/``_count``)."""

    def __init__(self, families: Iterable[Family]) -> None:
        self.by_name: dict[str, list[_Series]] = {}
        for family in families:
            if isinstance(family, HistogramFamily):
                self._add_histogram(family)
                continue
            sample_name = f"{family.name}_total" if family.type == "counter" else family.name
            for series in family.series:
                ordered = sorted(series.samples)
                self._add(sample_name, dict(series.labels), ordered)

    def _add(self, name: str, labels: dict[str, str], samples: list[tuple[float, float]]) -> None:
        self.by_name.setdefault(name, []).append(
            _Series(labels, tuple(t for t, _ in samples), tuple(v for _, v in samples))
        )

    def _add_histogram(self, family: HistogramFamily) -> None:
        for series in family.series:
            points = sorted(series.points, key=lambda point: point.timestamp)
            if not points:
                continue
            bounds = [bound for bound, _ in points[0].buckets]
            for index, bound in enumerate(bounds):
                labels = {**series.labels, "le": _le(bound)}
                self._add(f"{family.name}_bucket", labels, [(p.timestamp, p.buckets[index][1]) for p in points])
            self._add(
                f"{family.name}_bucket", {**series.labels, "le": "+Inf"}, [(p.timestamp, p.count) for p in points]
            )
            self._add(f"{family.name}_sum", dict(series.labels), [(p.timestamp, p.sum) for p in points])
            self._add(f"{family.name}_count", dict(series.labels), [(p.timestamp, p.count) for p in points])

    def instant(self, name: str, at: float, where: dict[str, str] | None = None) -> Vector:
        """The latest sample of each series at ``at`` (within the lookback)."""
        vector: Vector = []
        for series in self._select(name, where):
            index = bisect.bisect_right(series.times, at) - 1
            if index >= 0 and at - series.times[index] <= LOOKBACK_SECONDS:
                vector.append((series.labels, series.values[index]))
        return vector

    def rate(self, name: str, at: float, range_seconds: float) -> Vector:
        vector: Vector = []
        for series in self._select(name, None):
            low = bisect.bisect_left(series.times, at - range_seconds)
            high = bisect.bisect_right(series.times, at)
            value = extrapolated_rate(
                list(zip(series.times[low:high], series.values[low:high], strict=True)), at - range_seconds, at
            )
            if value is not None:
                vector.append((series.labels, value))
        return vector

    def _select(self, name: str, where: dict[str, str] | None) -> list[_Series]:
        return [
            series
            for series in self.by_name.get(name, [])
            if not where or all(series.labels.get(key) == value for key, value in where.items())
        ]


def _le(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else repr(bound)


def extrapolated_rate(samples: list[tuple[float, float]], start: float, end: float) -> float | None:
    """Prometheus' ``rate()``: counter resets handled, extrapolated towards the range edges."""
    if len(samples) < 2:
        return None
    increase = samples[-1][1] - samples[0][1]
    for (_, earlier), (_, later) in pairwise(samples):
        if later < earlier:
            increase += earlier
    first_time, first_value = samples[0]
    last_time = samples[-1][0]
    sampled = last_time - first_time
    average_step = sampled / (len(samples) - 1)
    to_start, to_end = first_time - start, end - last_time
    if increase > 0 and first_value >= 0:
        to_start = min(to_start, sampled * (first_value / increase))
    threshold = average_step * 1.1
    extended = sampled + (to_start if to_start < threshold else average_step / 2)
    extended += to_end if to_end < threshold else average_step / 2
    return increase * (extended / sampled) / (end - start)


def aggregate(vector: Vector, operation: str, by: tuple[str, ...]) -> Vector:
    groups: dict[Labels, list[float]] = {}
    for labels, value in vector:
        key = tuple((label, labels.get(label, "")) for label in by)
        groups.setdefault(key, []).append(value)
    combine: dict[str, Callable[[list[float]], float]] = {
        "sum": sum,
        "max": max,
        "min": min,
        "avg": lambda values: sum(values) / len(values),
    }
    return [
        ({label: value for label, value in key if value}, combine[operation](values))
        for key, values in sorted(groups.items())
    ]


def histogram_quantile(quantile: float, buckets: Vector) -> float:
    """Prometheus' bucket interpolation over ``le``-labelled cumulative rates."""
    points = sorted((float(labels["le"]), value) for labels, value in buckets)
    if len(points) < 2 or not math.isinf(points[-1][0]):
        return math.nan
    counts = [value for _, value in points]
    for index in range(1, len(counts)):
        counts[index] = max(counts[index], counts[index - 1])
    total = counts[-1]
    if total == 0:
        return math.nan
    rank = quantile * total
    chosen = bisect.bisect_left(counts, rank)
    if chosen == len(points) - 1:
        return points[-2][0]
    if chosen == 0 and points[0][0] <= 0:
        return points[0][0]
    start, end, count = 0.0, points[chosen][0], counts[chosen]
    if chosen > 0:
        start = points[chosen - 1][0]
        count -= counts[chosen - 1]
        rank -= counts[chosen - 1]
    return start + (end - start) * (rank / count)


Evaluator = Callable[[RawStore, float, float], Vector]


def _gauge(name: str, operation: str, by: tuple[str, ...], where: dict[str, str] | None = None) -> Evaluator:
    return lambda store, at, _range: aggregate(store.instant(name, at, where), operation, by)


def _rate(name: str, by: tuple[str, ...] = ()) -> Evaluator:
    return lambda store, at, range_seconds: aggregate(store.rate(name, at, range_seconds), "sum", by)


def _quantile(quantile: float, name: str) -> Evaluator:
    def evaluate(store: RawStore, at: float, range_seconds: float) -> Vector:
        buckets = aggregate(store.rate(name, at, range_seconds), "sum", ("le",))
        return [({}, histogram_quantile(quantile, buckets))] if buckets else []

    return evaluate


def _outer_gateway(store: RawStore, at: float, range_seconds: float) -> Vector:
    """``istio_outer_gateway_by_code``: the gateway's requests to knative-local-gateway, by code and host."""
    to_local = [
        (labels, value)
        for labels, value in store.rate("istio_requests_total", at, range_seconds)
        if labels.get("reporter") == "source" and labels.get("destination_service_name") == "knative-local-gateway"
    ]
    return aggregate(to_local, "sum", ("response_code", "response_flags", "request_host"))


LATENCY_HISTOGRAMS = (
    "vllm:e2e_request_latency_seconds_bucket",
    "vllm:request_queue_time_seconds_bucket",
    "vllm:time_to_first_token_seconds_bucket",
)


_BOUNDS_FROM_TEN = re.compile(r"[1-9][0-9]+([.][0-9]+)?")


def _bucket_bounds(store: RawStore, at: float, _range: float) -> Vector:
    """``vllm_latency_buckets``: how many series carry each (histogram, le) from 10 s up, as ``count by``."""
    counts: dict[tuple[str, str], int] = {}
    for name in LATENCY_HISTOGRAMS:
        for labels, _value in store.instant(name, at):
            if _BOUNDS_FROM_TEN.fullmatch(labels["le"]):
                counts[(name, labels["le"])] = counts.get((name, labels["le"]), 0) + 1
    return [({"__name__": name, "le": le}, float(count)) for (name, le), count in sorted(counts.items())]


EVALUATORS: dict[str, Evaluator] = {
    "vllm_running": _gauge("vllm:num_requests_running", "sum", ("pod",)),
    "vllm_waiting": _gauge("vllm:num_requests_waiting", "sum", ("pod",)),
    "vllm_kv_cache_usage": _gauge("vllm:kv_cache_usage_perc", "max", ("pod",)),
    "vllm_preemptions_rate": _rate("vllm:num_preemptions_total"),
    "vllm_ttft_p95": _quantile(0.95, "vllm:time_to_first_token_seconds_bucket"),
    "vllm_e2e_p95": _quantile(0.95, "vllm:e2e_request_latency_seconds_bucket"),
    "vllm_e2e_p99": _quantile(0.99, "vllm:e2e_request_latency_seconds_bucket"),
    "vllm_queue_time_p95": _quantile(0.95, "vllm:request_queue_time_seconds_bucket"),
    "vllm_itl_p95": _quantile(0.95, "vllm:inter_token_latency_seconds_bucket"),
    "vllm_request_rate": _rate("vllm:request_success_total"),
    "vllm_prompt_tokens_rate": _rate("vllm:prompt_tokens_total"),
    "vllm_generation_tokens_rate": _rate("vllm:generation_tokens_total"),
    "vllm_cache_config": _gauge(
        "vllm:cache_config_info",
        "max",
        ("pod", "block_size", "num_gpu_blocks", "gpu_memory_utilization", "cache_dtype"),
    ),
    "pod_restarts": _gauge("kube_pod_container_status_restarts_total", "max", ("pod", "container")),
    "pod_last_terminated_reason": _gauge(
        "kube_pod_container_status_last_terminated_reason", "max", ("pod", "container", "reason")
    ),
    "pod_ready": _gauge("kube_pod_status_ready", "sum", (), {"condition": "true"}),
    "hpa_current_replicas": _gauge("kube_horizontalpodautoscaler_status_current_replicas", "max", ()),
    "hpa_desired_replicas": _gauge("kube_horizontalpodautoscaler_status_desired_replicas", "max", ()),
    "deployment_available_replicas": _gauge("kube_deployment_status_replicas_available", "sum", ()),
    "gpu_fb_used_mib": _gauge("DCGM_FI_DEV_FB_USED", "max", ("pod",)),
    "gpu_fb_free_mib": _gauge("DCGM_FI_DEV_FB_FREE", "min", ("pod",)),
    "gpu_util": _gauge("DCGM_FI_DEV_GPU_UTIL", "avg", ("pod",)),
    "istio_requests_by_code": _rate("istio_requests_total", ("response_code", "response_flags")),
    "nginx_requests_by_status": _rate("nginx_ingress_controller_requests", ("status",)),
    "knative_requests_by_code": _rate("revision_app_request_count", ("response_code",)),
    "knative_queue_requests_by_code": _rate("revision_request_count", ("response_code", "response_code_class")),
    "knative_activator_requests_by_code": _rate("activator_request_count", ("response_code", "response_code_class")),
    "istio_outer_gateway_by_code": _outer_gateway,
    "vllm_latency_buckets": _bucket_bounds,
}


def answer(store: RawStore, query_id: str, start: float, end: float, step: int) -> tuple[SeriesData, ...]:
    """The query_range answer of one catalog id over [start, end] at ``step``."""
    evaluate = EVALUATORS.get(query_id)
    if evaluate is None:
        raise KeyError(f"no scenario evaluator for catalog id {query_id!r}: add one to nbhelpers/scenarios/answers.py")
    # The rate range is whatever the rendered catalog query asks for.
    promql = catalog.render(catalog.BY_ID[query_id], 0, "ns", "isvc", step)
    range_match = _RATE_RANGE.search(promql)
    range_seconds = float(range_match.group(1)) if range_match else 0.0
    by_labels: dict[Labels, list[tuple[float, float]]] = {}
    steps = int((end - start) // step)
    for index in range(steps + 1):
        at = start + index * step
        for labels, value in evaluate(store, at, range_seconds):
            by_labels.setdefault(tuple(sorted(labels.items())), []).append((at, value))
    return tuple(SeriesData(dict(labels), tuple(samples)) for labels, samples in sorted(by_labels.items()))
