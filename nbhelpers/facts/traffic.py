"""Traffic and restarts in the window, from the metrics in the evidence: the arithmetic behind the numbers.

Request rates by HTTP status at the first edge that counted them (Istio, ingress-nginx, Knative),
the increases of counters (container restarts), series added up sample by sample, peaks. The
functions work on :class:`~nbhelpers.metrics.series.MetricData` only (no I/O); summary.md, the
charts and the what-if all read them from here, so their numbers agree.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
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
