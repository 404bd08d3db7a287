"""One catalog query's answer (:class:`MetricData`) and readers over it: per pod, summed, peak.

Only answers with status ``ok`` hold numbers; any other status reads as no samples. Samples that are not
finite (NaN from a division by zero in PromQL, +Inf) are dropped so that they cannot poison a sum or a peak.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nbhelpers.sources.base import SeriesData

SampleMap = dict[float, float]  # unix seconds -> value
SamplePairs = Sequence[tuple[float, float]]  # (unix seconds, value) pairs, in time order


@dataclass(frozen=True)
class MetricData:
    """One catalog query's answer for the window."""

    id: str
    promql: str
    template_index: int
    step: int
    status: str  # ok | empty | error | missing (not in the bundle) | unreachable | timeout
    series: tuple[SeriesData, ...] = ()
    error: str = ""


def ok(data: MetricData | None) -> MetricData | None:
    """The answer when it holds numbers (status ``ok``), else None."""
    return data if data is not None and data.status == "ok" else None


def pod_of(labels: Mapping[str, str]) -> str:
    """The pod a series belongs to: DCGM's ``exported_pod`` when the exporter's own pod took ``pod``."""
    return labels.get("exported_pod") or labels.get("pod") or ""


def by_pod(data: MetricData | None) -> dict[str, SampleMap]:
    """Per pod, the values of its series summed at each sample time (a pod may export several series)."""
    values: dict[str, SampleMap] = {}
    answer = ok(data)
    for series in answer.series if answer is not None else ():
        per_pod = values.setdefault(pod_of(series.labels), {})
        for moment, value in series.samples:
            if math.isfinite(value):
                per_pod[moment] = per_pod.get(moment, 0.0) + value
    return values


def summed(data: MetricData | None) -> SampleMap:
    """The sum over all series at each sample time, in time order."""
    total: SampleMap = {}
    answer = ok(data)
    for series in answer.series if answer is not None else ():
        for moment, value in series.samples:
            if math.isfinite(value):
                total[moment] = total.get(moment, 0.0) + value
    return dict(sorted(total.items()))


def peak(values: Mapping[float, float]) -> float | None:
    return max(values.values()) if values else None
