"""A small writer of OpenMetrics text for backfilling Prometheus.

The output is what ``promtool tsdb create-blocks-from openmetrics`` reads: one
``# TYPE`` line per metric family, the family's samples kept together, every
sample stamped (unix seconds), each series in time order, and a closing
``# EOF``. It serves the test harness and the scenario generator, so both
describe metrics the same way: gauges and counters as series of samples,
histograms as series of cumulative bucket points.

Counters are named without ``_total`` (the writer appends it, as OpenMetrics
requires). Counters that an exporter publishes without that suffix, such as
``nginx_ingress_controller_requests``, are written as type ``unknown``: PromQL
treats them the same way, and the name stays the one the catalog queries.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

SampleType = Literal["gauge", "counter", "unknown"]

_METRIC_NAME = re.compile(r"^[A-Za-z_:][A-Za-z0-9_:]*$")
_LABEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Series:
    """One gauge, counter or unknown series: labels and (unix seconds, value) samples."""

    labels: Mapping[str, str]
    samples: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class SampleFamily:
    """A gauge, counter or unknown metric family. ``name`` of a counter has no ``_total``."""

    name: str
    type: SampleType
    series: tuple[Series, ...]
    help: str = ""


@dataclass(frozen=True)
class HistogramPoint:
    """One scrape of a histogram: cumulative counts per finite upper bound, the sum and the count.

    ``buckets`` holds (upper bound, cumulative count) in ascending bound order; the
    ``+Inf`` bucket is written from ``count``, so the two can never disagree.
    """

    timestamp: float
    buckets: tuple[tuple[float, float], ...]
    sum: float
    count: float


@dataclass(frozen=True)
class HistogramSeries:
    labels: Mapping[str, str]
    points: tuple[HistogramPoint, ...]


@dataclass(frozen=True)
class HistogramFamily:
    """A histogram family; ``name`` is the base name (samples get ``_bucket``, ``_sum``, ``_count``)."""

    name: str
    series: tuple[HistogramSeries, ...]
    help: str = ""


Family = SampleFamily | HistogramFamily


def render(families: Iterable[Family]) -> str:
    """The OpenMetrics text of ``families``, ending with ``# EOF``. Raises ``ValueError`` on invalid input."""
    lines: list[str] = []
    seen: set[str] = set()
    for family in families:
        _check_metric_name(family.name)
        if family.name in seen:
            raise ValueError(f"metric family {family.name!r} given twice: OpenMetrics needs each family in one block")
        seen.add(family.name)
        if isinstance(family, HistogramFamily):
            lines.extend(_histogram_lines(family))
        else:
            lines.extend(_sample_lines(family))
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def _header(name: str, type_name: str, help_text: str) -> list[str]:
    header = [f"# TYPE {name} {type_name}"]
    if help_text:
        header.append(f"# HELP {name} {_escape(help_text)}")
    return header


def _sample_lines(family: SampleFamily) -> list[str]:
    if family.type == "counter" and family.name.endswith("_total"):
        raise ValueError(f"counter {family.name!r}: name the family without _total, the writer appends it")
    sample_name = f"{family.name}_total" if family.type == "counter" else family.name
    lines = _header(family.name, family.type, family.help)
    for series in family.series:
        labels = _labels(series.labels)
        for timestamp, value in _in_time_order(series.samples, family.name):
            lines.append(f"{sample_name}{labels} {_number(value)} {_number(timestamp)}")
    return lines


def _histogram_lines(family: HistogramFamily) -> list[str]:
    lines = _header(family.name, "histogram", family.help)
    for series in family.series:
        if "le" in series.labels:
            raise ValueError(f"histogram {family.name!r}: the label 'le' is reserved for buckets")
        labels = _labels(series.labels)
        bucket_labels: dict[float, str] = {}  # the label set of each bound, built once per series, not per point
        inf_labels = _labels({**series.labels, "le": "+Inf"})
        for point in sorted(series.points, key=lambda item: item.timestamp):
            _check_buckets(family.name, point)
            stamp = _number(point.timestamp)
            for bound, cumulative in point.buckets:
                if bound not in bucket_labels:
                    bucket_labels[bound] = _labels({**series.labels, "le": _number(bound)})
                lines.append(f"{family.name}_bucket{bucket_labels[bound]} {_number(cumulative)} {stamp}")
            lines.append(f"{family.name}_bucket{inf_labels} {_number(point.count)} {stamp}")
            lines.append(f"{family.name}_sum{labels} {_number(point.sum)} {stamp}")
            lines.append(f"{family.name}_count{labels} {_number(point.count)} {stamp}")
    return lines


def _check_buckets(name: str, point: HistogramPoint) -> None:
    bounds = [bound for bound, _ in point.buckets]
    counts = [count for _, count in point.buckets] + [point.count]
    if any(not math.isfinite(bound) for bound in bounds) or bounds != sorted(set(bounds)):
        raise ValueError(f"histogram {name!r}: bucket bounds must be finite, unique and ascending")
    if any(later < earlier for earlier, later in itertools.pairwise(counts)):
        raise ValueError(f"histogram {name!r} at {point.timestamp}: bucket counts must be cumulative")


def _in_time_order(samples: tuple[tuple[float, float], ...], name: str) -> list[tuple[float, float]]:
    ordered = sorted(samples)
    stamps = [timestamp for timestamp, _ in ordered]
    if len(set(stamps)) != len(stamps):
        raise ValueError(f"series of {name!r} has two samples with the same timestamp")
    return ordered


def _check_metric_name(name: str) -> None:
    if not _METRIC_NAME.match(name):
        raise ValueError(f"invalid metric name {name!r}")


def _labels(labels: Mapping[str, str]) -> str:
    for label in labels:
        if not _LABEL_NAME.match(label):
            raise ValueError(f"invalid label name {label!r}")
    if not labels:
        return ""
    return "{" + ",".join(f'{label}="{_escape(value)}"' for label, value in sorted(labels.items())) + "}"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    """A number as OpenMetrics spells it: integers without a fraction, ``+Inf``/``-Inf``/``NaN``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))
