"""The queries of KEDA ``prometheus`` triggers, read over the window next to the catalog's.

A ScaledObject's prometheus trigger carries its own PromQL (``metadata.query``). ``gather()`` runs each one over
the analysis window against the configured Prometheus and files the answer under :func:`query_id`, so the checks
can tell a query that selects no series (KEDA's scaler then reads 0: ``ignoreNullValues`` defaults to true,
keda.sh docs/scalers/prometheus) from one that has data. The answer lives in ``Evidence.metrics`` and in bundles
like any catalog query.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

PREFIX = "keda-trigger"
# At most this many trigger queries per run: a namespace full of ScaledObjects must not cost a query each.
MAX_QUERIES = 8
# Series the predictor's own pods export: with no pod running there is none of them.
_POD_SERIES = re.compile(r"\bvllm[:_][A-Za-z0-9_:]*")


def query_id(scaled_object: str, index: int) -> str:
    """``keda-trigger.<ScaledObject name>.<trigger index>``."""
    return f"{PREFIX}.{scaled_object}.{index}"


def prometheus_queries(scaled_object: Mapping[str, Any]) -> list[tuple[int, str]]:
    """(trigger index, PromQL) of each prometheus trigger of a ScaledObject that has a query."""
    found = []
    for index, trigger in enumerate((scaled_object.get("spec") or {}).get("triggers") or []):
        if not isinstance(trigger, Mapping) or trigger.get("type") != "prometheus":
            continue
        query = (trigger.get("metadata") or {}).get("query")
        if isinstance(query, str) and query.strip():
            found.append((index, query))
    return found


def pod_series(query: str) -> list[str]:
    """The series of ``query`` that the vLLM pods themselves export (none exists while no pod runs)."""
    return sorted(set(_POD_SERIES.findall(query)))
