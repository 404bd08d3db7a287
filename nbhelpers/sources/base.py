"""The two source interfaces. Checks never see them: ``gather()`` does.

A cluster source lists and gets Kubernetes objects as plain dicts (the JSON
the API server returns, camelCase keys) and reads container logs. A metrics
source answers range queries by PromQL. Both raise :class:`ReadFailed` for a
read that cannot be done; the caller records it and goes on.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from nbhelpers.errors import ReadFailed
from nbhelpers.sources.kinds import Kind
from nbhelpers.sources.kube import KubeObject


@dataclass(frozen=True)
class LogRequest:
    namespace: str
    pod: str
    container: str
    previous: bool = False
    tail_lines: int = 5000
    limit_bytes: int = 4 * 1024 * 1024


class ClusterSource(Protocol):
    """Read-only access to one cluster (live API server or a bundle)."""

    mode: str  # "live" | "bundle"
    # gather() starts this many independent reads at once (1: one after the other, nothing to wait for).
    parallel_reads: int

    def server_version(self) -> str | None: ...

    def list(self, kind: Kind, namespace: str | None, label_selector: str | None = None) -> list[KubeObject]:
        """All objects of ``kind`` (in ``namespace``, or cluster-wide for ``None``)."""
        ...

    def get(self, kind: Kind, namespace: str | None, name: str) -> KubeObject | None:
        """One object, or ``None`` when it does not exist (the kind itself is served)."""
        ...

    def logs(self, request: LogRequest) -> str:
        """A container's log text; ``ReadFailed`` with status ``missing`` when there is none."""
        ...

    def close(self) -> None:
        """Release connections (nothing to do for file-backed sources)."""
        ...


@dataclass(frozen=True)
class SeriesData:
    """One time series of a range query: labels and (unix seconds, value) samples."""

    labels: dict[str, str]
    samples: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class RangeResult:
    """A range query answer as recorded in a bundle (``metrics/<id>.json``)."""

    promql: str
    series: tuple[SeriesData, ...] = ()


class MetricsSource(Protocol):
    """Range queries against Prometheus (live) or recorded answers (bundle)."""

    mode: str  # "live" | "bundle"
    # Range queries gather() may have in flight at once: more than one only where answers wait on a network.
    parallel_queries: int

    def query_range(self, query_id: str, promql: str, start: datetime, end: datetime, step_seconds: int) -> RangeResult:
        """The answer to one range query; ``ReadFailed`` when it could not be answered."""
        ...

    def close(self) -> None:
        """Release connections (nothing to do for file-backed sources)."""
        ...


def describe_list(kind: Kind, namespace: str | None, label_selector: str | None = None) -> str:
    """The name a list read is recorded under (shared by gather and the bundle reader)."""
    where = f" in {namespace}" if namespace else ""
    return f"{kind.key}{where}" + (f" ({label_selector})" if label_selector else "")


def describe_get(kind: Kind, namespace: str | None, name: str) -> str:
    return f"{kind.key}/{namespace}/{name}" if namespace else f"{kind.key}/{name}"


def describe_logs(request: LogRequest) -> str:
    return f"logs {request.namespace}/{request.pod}/{request.container}" + (" (previous)" if request.previous else "")


def series_from_matrix(raw: dict[str, Any], promql: str) -> RangeResult:
    """Build a :class:`RangeResult` from a Prometheus ``/api/v1/query_range`` JSON answer."""
    data = raw.get("data") or {}
    series = []
    for item in data.get("result") or []:
        samples = tuple((float(t), float(v)) for t, v in item.get("values") or [])
        series.append(SeriesData(labels=dict(item.get("metric") or {}), samples=samples))
    return RangeResult(promql=promql, series=tuple(series))


def request_timeout(what: str, timeout_seconds: float, deadline: float | None) -> float:
    """The timeout of one request: ``timeout_seconds``, or less when the run's deadline is nearer.

    Once the deadline has passed nothing more is sent: the read fails with status ``timeout``.
    """
    if deadline is None:
        return timeout_seconds
    left = deadline - time.monotonic()
    if left <= 0:
        raise ReadFailed(what, "timeout", "not read: the run reached its --deadline")
    return min(timeout_seconds, round(left, 3))
