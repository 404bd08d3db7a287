"""Where vLLM's latency histograms end, and whether a quantile read from them only says "at least".

``histogram_quantile`` cannot place a rank that falls in the ``+Inf`` bucket: it answers the largest finite
bound. Until vllm-project/vllm PR #15202 (issue #15167: "Very long running tail requests ... report a p99 tail
latency of 60s, when the real value is often much higher"), vLLM's e2e-latency and queue-time histograms ended
at 60 s and time to first token at 10 s (``vllm/engine/metrics.py``: ``request_latency_buckets = [0.3, ..., 50.0,
60.0]``); the PR added 120 s to 7680 s and 20 s to 2560 s. On those versions a p99 of exactly 60 s is the end of
the histogram, not a 60 s timeout: the latency above it is unknown.

The bounds are read from the series' own ``le`` labels (catalog id ``vllm_latency_buckets``), which works for any
version and for patched builds; the version printed at start-up (or the image tag) is the fallback.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from nbhelpers.errors import EvidenceMissing, RunbookError, StepSkipped
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common, engine

E2E = "vllm:e2e_request_latency_seconds_bucket"
QUEUE = "vllm:request_queue_time_seconds_bucket"
TTFT = "vllm:time_to_first_token_seconds_bucket"

# PR #15202 was still in review on 2025-04-03, after 0.8.2 shipped: every release before 0.8.3 has the short
# buckets. Whether 0.8.3 itself has the new ones is not settled here, so from 0.8.3 on only the le labels decide.
EXTENDED_SINCE = (0, 8, 3)
TOP_BEFORE = {E2E: 60.0, QUEUE: 60.0, TTFT: 10.0}

# A quantile within this fraction of the top bound is taken as sitting on it (histogram_quantile returns the
# bound itself; the tolerance only absorbs float formatting).
AT_TOP = 1e-6


@dataclass(frozen=True)
class TopBucket:
    """The largest finite bucket bound of one histogram, and how it was found."""

    seconds: float
    origin: str

    def holds(self, value: float | None) -> bool:
        """Whether ``value`` (a quantile from this histogram) sits on the top bound: then it is a lower bound."""
        return value is not None and value >= self.seconds * (1 - AT_TOP)

    def describe(self, what: str) -> str:
        return (
            f"{what} sits on the top bucket of vLLM's histogram ({self.seconds:g} s, {self.origin}): "
            f"the latency is at least {self.seconds:g} s and unknown above it"
        )


def top_bucket(evidence: Evidence, histogram: str) -> TopBucket | None:
    """The top finite bound of ``histogram`` from its ``le`` labels, else from vLLM's version; None if unknown."""
    data = evidence.metrics.get("vllm_latency_buckets")
    if data is not None and data.status == "ok":
        bounds = [_bound(item.labels.get("le")) for item in data.series if item.labels.get("__name__") == histogram]
        finite = [bound for bound in bounds if bound is not None and math.isfinite(bound)]
        if finite:
            return TopBucket(max(finite), f"the largest finite le of {histogram}")
    version = _version(evidence)
    if version is not None and version.number < EXTENDED_SINCE:
        return TopBucket(
            TOP_BEFORE[histogram], f"vLLM {version.text}: the buckets before vllm-project/vllm PR #15202 end there"
        )
    return None


def _bound(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _version(evidence: Evidence) -> engine.VersionSeen | None:
    try:
        return engine.vllm_version(evidence, common.current_workload(evidence))
    except (RunbookError, StepSkipped, EvidenceMissing):  # no version to read: the bounds stay unknown
        return None
