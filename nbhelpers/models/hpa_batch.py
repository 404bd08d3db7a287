"""Replay many HPA specs over the same series at once: the fast path of :func:`nbhelpers.models.hpa.replay_hpa`.

The loop runs over syncs; every step works on numpy arrays with one entry per spec, so 1,000 candidate
specs cost about as much Python as one. The result equals the reference replay sync by sync (tests
compare them on random specs and series); the arithmetic is the reference's, in the same order:
integer milli-units, integer-percent utilization, float64 ratios.

What the fast path covers: specs with exactly one metric (Resource Utilization or AverageValue, with
the CPU unready rule; Pods AverageValue; Object or External Value or AverageValue), ``minReplicas``
of 1 or more, the legacy path and the ``behavior`` path (windows, Pods/Percent policies, Max / Min /
Disabled, per-direction tolerance), ``pod_ready_delay`` and ``per_pod_from_total``, and a sync period
of whole seconds. Anything else is **rejected** with a RunbookError naming the spec and the reason;
replay such a spec with the reference :func:`~nbhelpers.models.hpa.replay_hpa`.

How the history is kept without per-spec Python:

- Windows over past recommendations (max over the scale-down window, min over the scale-up window)
  and over past replica counts (how many pods are older than the ready delay) use a doubling table:
  level ℓ holds, for each past sync, the extreme of the 2^ℓ syncs ending there, so any window length
  is two lookups.
- Replicas added or removed within a policy's period are differences of a running total.
- On a regular grid of whole seconds, "stamp s inside window W at sync t" (s > t − W) is "lag d
  inside W" (d × period < W), the same comparison the reference makes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from nbhelpers.errors import RunbookError
from nbhelpers.models.hpa import (
    DOWNSCALE_STABILIZATION_SECONDS,
    LEGACY_SCALE_UP_FACTOR,
    LEGACY_SCALE_UP_MINIMUM,
    MAX_INT32,
    Behavior,
    HpaSpec,
    HpaSync,
    ScalingRules,
    Series,
    series_key,
    series_milli,
    sync_times,
    validate_spec,
)

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

UTILIZATION, PLAIN, VALUE, AVERAGE_VALUE = 0, 1, 2, 3  # which replica_calculator function a spec uses
SELECT_MAX, SELECT_MIN, SELECT_DISABLED = 0, 1, 2
_SELECT_CODES = {"Max": SELECT_MAX, "Min": SELECT_MIN, "Disabled": SELECT_DISABLED}
_EMPTY_HIGH = np.int64(2**62)  # identity of min
_EMPTY_LOW = np.int64(-1)  # identity of max (recommendations are never negative)
_VERY_LOW = np.int64(-(2**62))  # identity of max for policy limits, which can go below 0


@dataclass(frozen=True)
class BatchReplay:
    """``current[i, k]`` / ``desired[i, k]``: spec i after the sync at ``times[k]`` (read-only arrays).

    They hold the same numbers, as in the reference: status.desiredReplicas is the count the sync decided.
    """

    times: FloatArray
    current: IntArray
    desired: IntArray

    def syncs(self, spec_index: int) -> list[HpaSync]:
        """One spec's replay in the reference's form."""
        return [
            HpaSync(float(t), int(c), int(d))
            for t, c, d in zip(self.times, self.current[spec_index], self.desired[spec_index], strict=True)
        ]


def unsupported_reason(spec: HpaSpec) -> str | None:
    """Why the fast path cannot replay ``spec`` (None: it can)."""
    if len(spec.metrics) != 1:
        return f"it has {len(spec.metrics)} metrics (the fast path takes exactly one)"
    if spec.min_replicas < 1:
        return "minReplicas is 0 (scale to zero is replayed by the reference only)"
    return None


class _WindowExtreme:
    """Per spec, the max (or min) over the last L entries pushed, L chosen per spec; a doubling table.

    Level ℓ, slot s holds the extreme of slots s − 2^ℓ + 1 … s. Slots live in a ring; a slot's row is
    contiguous over specs so one push touches one row per level.
    """

    def __init__(self, n_specs: int, longest: int, *, take_max: bool) -> None:
        self.n_specs = n_specs
        self.levels = max(1, longest).bit_length()
        self.size = 1 << max(1, longest + 1).bit_length()  # ring length > longest window
        self.mask = self.size - 1
        self.empty = _EMPTY_LOW if take_max else _EMPTY_HIGH
        self.combine = np.maximum if take_max else np.minimum
        self.table = np.full((self.levels, self.size, n_specs), self.empty, dtype=np.int64)
        self.flat = self.table.reshape(-1)

    def push(self, slot: int, values: IntArray) -> None:
        """Store the entries of ``slot`` (overwriting it) and refresh every level there."""
        column = slot & self.mask
        self.table[0, column] = values
        for level in range(1, self.levels):
            earlier = (slot - (1 << (level - 1))) & self.mask
            self.combine(self.table[level - 1, column], self.table[level - 1, earlier], out=self.table[level, column])

    def lookup(self, lengths: IntArray) -> _Lookup:
        """Precomputed addressing for windows of ``lengths`` entries (0: empty) per spec."""
        safe = np.maximum(lengths, 1)
        level = np.floor(np.log2(safe)).astype(np.int64)
        base = level * self.size * self.n_specs + np.arange(self.n_specs)
        return _Lookup(base, (1 << level) - safe, lengths > 0)

    def query(self, last_slot: int, where: _Lookup) -> IntArray:
        """Extreme of slots (last_slot − L, last_slot] per spec; the identity where L is 0."""
        first = self.flat[where.base + (last_slot & self.mask) * self.n_specs]
        second = self.flat[where.base + ((last_slot + where.shift) & self.mask) * self.n_specs]
        return np.where(where.nonempty, self.combine(first, second), self.empty)


@dataclass(frozen=True)
class _Lookup:
    base: IntArray  # flat offset of (level, slot 0, spec)
    shift: IntArray  # 2^level − L: the second block ends at last_slot + shift
    nonempty: BoolArray


class _RunningTotal:
    """Per spec, the sum of a per-sync quantity over the last L syncs, as a difference of running totals."""

    def __init__(self, n_specs: int, longest: int) -> None:
        self.n_specs = n_specs
        self.size = 1 << max(1, longest + 1).bit_length()
        self.mask = self.size - 1
        self.history = np.zeros((self.size, n_specs), dtype=np.int64)  # running total after each sync
        self.flat = self.history.reshape(-1)
        self.total = np.zeros(n_specs, dtype=np.int64)
        self.columns = np.arange(n_specs)

    def add(self, sync: int, amounts: IntArray) -> None:
        self.total = self.total + amounts
        self.history[sync & self.mask] = self.total

    def last(self, sync: int, lengths: IntArray) -> IntArray:
        """Sum over syncs [sync − L, sync − 1] for each (row of ``lengths``, spec)."""
        before = sync - 1 - lengths
        earlier = self.flat[(before & self.mask) * self.n_specs + self.columns]
        return self.total - np.where(before >= 0, earlier, 0)


def _past_syncs_inside(window: float, period: float) -> int:
    """How many earlier syncs (lag d ≥ 1) are inside ``window``: d × period < window, compared as the reference does."""
    lag = 0
    while (lag + 1) * period < window:
        lag += 1
    return lag


def _first_old_lag(delay: float, period: float) -> int:
    """The smallest lag d at which a pod created d syncs ago counts as ready: d × period ≥ delay."""
    lag = 0
    while lag * period < delay:
        lag += 1
    return lag


@dataclass(frozen=True)
class _PolicyArrays:
    """Every spec's policies as (column, spec) arrays: scale-up columns first, then scale-down columns."""

    is_pods: BoolArray
    is_up: BoolArray
    pods_change: IntArray  # +value (up) or −value (down) for Pods policies
    factor: FloatArray  # 1 + value / 100 (up) or 1 − value / 100 (down) for Percent policies
    lags: IntArray  # earlier syncs inside the policy's period
    active: BoolArray  # False for padding


@dataclass(frozen=True)
class _SpecArrays:
    """The specs as columns: one entry per spec."""

    kind: IntArray
    is_cpu: BoolArray
    target: IntArray
    total_scale: IntArray  # 1000 for utilization (percent × 1000), 1 for milli-unit values
    missing_fallback: IntArray  # what a missing pod counts on a scale-down, in the total's unit
    series_index: IntArray
    min_replicas: IntArray
    max_replicas: IntArray
    scales_from_one: BoolArray  # minReplicas != 0: a target at 0 replicas is not autoscaled
    has_behavior: BoolArray
    lowest_kept: FloatArray  # 1 − scale-down tolerance: ratios in [lowest_kept, highest_kept] keep the count
    highest_kept: FloatArray  # 1 + scale-up tolerance
    up_window: IntArray  # earlier syncs inside the stabilization window (legacy: none)
    down_window: IntArray
    initial_up: BoolArray  # the t = 0 recommendation is inside the window at t = 0
    initial_down: BoolArray
    policies: _PolicyArrays
    up_policy_count: int
    up_select: IntArray
    down_select: IntArray
    reads_object: BoolArray  # Object or External metrics: computable without pods
    any_value: bool
    any_average_value: bool
    any_behavior: bool
    all_behavior: bool


def _policy_columns(rules: Sequence[ScalingRules | None], period: float, *, up: bool) -> dict[str, Any]:
    width = max((len(r.policies) for r in rules if r is not None), default=1)
    shape = (len(rules), width)
    columns: dict[str, Any] = {
        "is_pods": np.zeros(shape, dtype=np.bool_),
        "value": np.ones(shape, dtype=np.int64),
        "lags": np.zeros(shape, dtype=np.int64),
        "active": np.zeros(shape, dtype=np.bool_),
        "select": np.full(len(rules), SELECT_MAX, dtype=np.int64),
    }
    for row, rule in enumerate(rules):
        if rule is None:
            continue
        columns["select"][row] = _SELECT_CODES[rule.select_policy]
        for column, policy in enumerate(rule.policies):
            columns["is_pods"][row, column] = policy.type == "Pods"
            columns["value"][row, column] = policy.value
            columns["lags"][row, column] = _past_syncs_inside(policy.period_seconds, period)
            columns["active"][row, column] = True
    value = columns["value"]
    columns["pods_change"] = value if up else -value
    columns["factor"] = 1 + value / 100 if up else 1 - value / 100
    columns["is_up"] = np.full(shape, up, dtype=np.bool_)
    return columns


def _policy_arrays(
    behaviors: Sequence[Behavior | None], period: float
) -> tuple[_PolicyArrays, int, IntArray, IntArray]:
    up = _policy_columns([None if b is None else b.scale_up for b in behaviors], period, up=True)
    down = _policy_columns([None if b is None else b.scale_down for b in behaviors], period, up=False)
    joined = {
        name: np.ascontiguousarray(np.concatenate([up[name], down[name]], axis=1).T)
        for name in ("is_pods", "is_up", "pods_change", "factor", "lags", "active")
    }
    return _PolicyArrays(**joined), int(up["lags"].shape[1]), up["select"], down["select"]


def _kind(spec: HpaSpec) -> int:
    metric = spec.metrics[0]
    if metric.source in ("Object", "External"):
        return VALUE if metric.target_type == "Value" else AVERAGE_VALUE
    return UTILIZATION if metric.target_type == "Utilization" else PLAIN


def _spec_arrays(specs: Sequence[HpaSpec], keys: list[str], period: float) -> _SpecArrays:
    behaviors = [spec.behavior for spec in specs]
    legacy_window = _past_syncs_inside(DOWNSCALE_STABILIZATION_SECONDS, period)
    up_seconds = [0 if b is None else b.scale_up.stabilization_window_seconds for b in behaviors]
    down_seconds = [
        DOWNSCALE_STABILIZATION_SECONDS if b is None else b.scale_down.stabilization_window_seconds for b in behaviors
    ]
    kind = np.array([_kind(s) for s in specs], dtype=np.int64)
    target = np.array([s.metrics[0].target for s in specs], dtype=np.int64)
    utilization = kind == UTILIZATION
    min_replicas = np.array([s.min_replicas for s in specs], dtype=np.int64)
    policies, up_policy_count, up_select, down_select = _policy_arrays(behaviors, period)
    return _SpecArrays(
        kind=kind,
        is_cpu=np.array([s.metrics[0].is_cpu for s in specs], dtype=np.bool_),
        target=target,
        total_scale=np.where(utilization, 1000, 1),
        missing_fallback=np.where(utilization, np.maximum(100, target) * 1000, target),
        series_index=np.array([keys.index(series_key(s.metrics[0])) for s in specs], dtype=np.int64),
        min_replicas=min_replicas,
        max_replicas=np.array([s.max_replicas for s in specs], dtype=np.int64),
        scales_from_one=min_replicas != 0,
        has_behavior=np.array([b is not None for b in behaviors], dtype=np.bool_),
        lowest_kept=1.0 - np.array([s.tolerances.scale_down for s in specs], dtype=np.float64),
        highest_kept=1.0 + np.array([s.tolerances.scale_up for s in specs], dtype=np.float64),
        up_window=np.array([_past_syncs_inside(w, period) for w in up_seconds], dtype=np.int64),
        down_window=np.array(
            [
                legacy_window if b is None else _past_syncs_inside(w, period)
                for b, w in zip(behaviors, down_seconds, strict=True)
            ],
            dtype=np.int64,
        ),
        initial_up=np.array([w > 0 for w in up_seconds], dtype=np.bool_),
        initial_down=np.array([w > 0 for w in down_seconds], dtype=np.bool_),
        policies=policies,
        up_policy_count=up_policy_count,
        up_select=up_select,
        down_select=down_select,
        reads_object=kind >= VALUE,
        any_value=bool((kind == VALUE).any()),
        any_average_value=bool((kind == AVERAGE_VALUE).any()),
        any_behavior=any(b is not None for b in behaviors),
        all_behavior=all(b is not None for b in behaviors),
    )


def _values_at_syncs(series: Series, keys: list[str], times: Sequence[float]) -> tuple[IntArray, BoolArray]:
    """(series, sync) → the latest value at or before the sync in milli-units, and whether there is one."""
    values = np.zeros((len(keys), len(times)), dtype=np.int64)
    present = np.zeros((len(keys), len(times)), dtype=np.bool_)
    grid = np.asarray(times, dtype=np.float64)
    for row, key in enumerate(keys):
        samples = series.get(key, [])
        if not samples:
            continue
        sample_times = np.array([s[0] for s in samples], dtype=np.float64)
        index = np.searchsorted(sample_times, grid, side="right") - 1
        present[row] = index >= 0
        milli = {i: series_milli(key, samples[i][1]) for i in np.unique(index[index >= 0]).tolist()}
        values[row] = [milli.get(i, 0) for i in index.tolist()]
    return values, present


def _ceil_replicas(value: FloatArray) -> IntArray:
    return np.minimum(np.ceil(value), MAX_INT32).astype(np.int64)


def _within(ratio: FloatArray, arrays: _SpecArrays) -> BoolArray:
    return (arrays.lowest_kept <= ratio) & (ratio <= arrays.highest_kept)


def _pod_metric_proposal(
    arrays: _SpecArrays, value: IntArray, current: IntArray, young: IntArray, per_pod_from_total: bool
) -> tuple[IntArray, BoolArray]:
    """GetResourceReplicas / calcPlainMetricReplicas for every spec at once (meaningful for pod-read metrics)."""
    young_counts = arrays.is_cpu | per_pod_from_total  # young pods are unready (CPU) or missing (totals)
    ready = np.where(young_counts, current - young, current)
    valid = (current > 0) & (ready > 0)
    safe_ready = np.maximum(ready, 1)
    total = value if per_pod_from_total else value * ready
    ratio = (total // (safe_ready * arrays.total_scale)) / arrays.target
    result = np.where(_within(ratio, arrays), current, _ceil_replicas(ratio * ready))
    set_aside = young_counts & (young > 0)
    if not set_aside.any():
        return result, valid
    unready = np.where(arrays.is_cpu, young, 0)
    missing = np.where(arrays.is_cpu, 0, young) if per_pod_from_total else np.zeros_like(young)
    with_unready = (unready > 0) & (ratio > 1.0)
    below, above = (missing > 0) & (ratio < 1.0), (missing > 0) & (ratio > 1.0)
    new_total = total + np.where(below, missing * arrays.missing_fallback, 0)
    counted = ready + np.where(below | above, missing, 0) + np.where(with_unready, unready, 0)
    new_ratio = (new_total // (np.maximum(counted, 1) * arrays.total_scale)) / arrays.target
    flipped = ((ratio < 1.0) & (new_ratio > 1.0)) | ((ratio > 1.0) & (new_ratio < 1.0))
    recomputed = _ceil_replicas(new_ratio * counted)
    wrong_way = ((new_ratio < 1.0) & (recomputed > current)) | ((new_ratio > 1.0) & (recomputed < current))
    keep = _within(new_ratio, arrays) | flipped | wrong_way
    recomputes = with_unready | (missing > 0)
    return np.where(recomputes, np.where(keep, current, recomputed), result), valid


def _proposal(
    arrays: _SpecArrays, value: IntArray, current: IntArray, young: IntArray, per_pod_from_total: bool
) -> tuple[IntArray, BoolArray]:
    """Every spec's proposal at one sync and whether it could be computed (pods to read from, for pod metrics)."""
    result, valid = _pod_metric_proposal(arrays, value, current, young, per_pod_from_total)
    if arrays.any_value:
        ratio = value / arrays.target
        kept = np.where(_within(ratio, arrays), current, _ceil_replicas(ratio * (current - young)))
        value_result = np.where(current == 0, _ceil_replicas(ratio), kept)
        result = np.where(arrays.kind == VALUE, value_result, result)
    if arrays.any_average_value:
        per_pod_ratio = value / (arrays.target * np.maximum(current, 1))
        keeps = (current > 0) & _within(per_pod_ratio, arrays)
        average_result = np.where(keeps, current, _ceil_replicas(value / arrays.target))
        result = np.where(arrays.kind == AVERAGE_VALUE, average_result, result)
    return result, valid | arrays.reads_object


def _policy_limits(arrays: _SpecArrays, history: _History, sync: int, current: IntArray) -> tuple[IntArray, IntArray]:
    """calculateScaleUpLimitWithScalingRules and calculateScaleDownLimitWithBehaviors for every spec."""
    policies = arrays.policies  # (column, spec); scale-up columns first, then scale-down columns
    # upstream's periodStartReplicas = current − added + removed, i.e. current − the net change in the period
    period_start = current - history.changes.last(sync, policies.lags)
    scaled = period_start * policies.factor
    by_policy = np.where(
        policies.is_pods,
        period_start + policies.pods_change,
        np.where(policies.is_up, np.ceil(scaled), np.trunc(scaled)).astype(np.int64),
    )
    highest = np.where(policies.active, by_policy, _VERY_LOW)
    lowest = np.where(policies.active, by_policy, _EMPTY_HIGH)
    split = arrays.up_policy_count
    up_select, down_select = arrays.up_select, arrays.down_select
    # scale-up: Max takes the highest proposal; scale-down: Max takes the lowest (the largest change)
    up_limit = np.where(up_select == SELECT_MIN, lowest[:split].min(axis=0), highest[:split].max(axis=0))
    down_limit = np.where(down_select == SELECT_MIN, highest[split:].max(axis=0), lowest[split:].min(axis=0))
    return (
        np.where(up_select == SELECT_DISABLED, current, up_limit),
        np.where(down_select == SELECT_DISABLED, current, down_limit),
    )


@dataclass
class _History:
    highest: _WindowExtreme  # recommendations, for the scale-down window
    lowest: _WindowExtreme  # recommendations, for the scale-up window
    counts: _WindowExtreme  # replica counts, for the pods older than the ready delay
    changes: _RunningTotal  # replicas added (+) or removed (−) by each sync


def replay_hpa_batch(
    specs: Sequence[HpaSpec],
    series: Series,
    initial_replicas: int,
    *,
    pod_ready_delay: float = 0.0,
    sync_period: float = 15.0,
    end: float | None = None,
    per_pod_from_total: bool = False,
) -> BatchReplay:
    """Replay every spec over ``series``; same arguments and result per spec as the reference ``replay_hpa``."""
    for index, spec in enumerate(specs):
        validate_spec(spec)
        reason = unsupported_reason(spec)
        if reason is not None:
            raise RunbookError(f"spec {index} cannot take the fast path: {reason}; replay it with replay_hpa")
    if not float(sync_period).is_integer() or sync_period <= 0:
        raise RunbookError("the fast path needs a sync period of whole seconds; use replay_hpa")
    if initial_replicas < 0:
        raise RunbookError("the initial replica count must be 0 or more")
    times = sync_times(series, sync_period, end)
    keys = sorted({series_key(spec.metrics[0]) for spec in specs})
    arrays = _spec_arrays(specs, keys, sync_period)
    values, present = _values_at_syncs(series, keys, times)
    values_by_sync, present_by_sync = np.ascontiguousarray(values.T), np.ascontiguousarray(present.T)
    ready_lag = _first_old_lag(pod_ready_delay, sync_period)
    n_specs = len(specs)
    history = _History(
        highest=_WindowExtreme(n_specs, int(arrays.down_window.max(initial=1)), take_max=True),
        lowest=_WindowExtreme(n_specs, int(arrays.up_window.max(initial=1)), take_max=False),
        counts=_WindowExtreme(n_specs, ready_lag, take_max=False),
        changes=_RunningTotal(n_specs, int(arrays.policies.lags.max(initial=1))),
    )
    windows = _Windows(
        initial_down=history.highest.lookup(arrays.initial_down.astype(np.int64)),
        initial_up=history.lowest.lookup(arrays.initial_up.astype(np.int64)),
        down=history.highest.lookup(arrays.down_window),
        up=history.lowest.lookup(arrays.up_window),
        ready=history.counts.lookup(np.full(n_specs, ready_lag, dtype=np.int64)) if ready_lag else None,
    )
    current = np.full(n_specs, initial_replicas, dtype=np.int64)
    history.counts.push(0, current)  # slot j + 1 holds the count after sync j; slot 0 the initial pods
    out = np.zeros((len(times), n_specs), dtype=np.int64)
    for sync in range(len(times)):
        current = _sync(
            arrays,
            history,
            windows,
            sync,
            current,
            values_by_sync[sync][arrays.series_index],
            present_by_sync[sync][arrays.series_index],
            per_pod_from_total,
        )
        history.counts.push(sync + 1, current)
        out[sync] = current
    out.flags.writeable = False  # current and desired share it: upstream writes the decision to both
    return BatchReplay(np.asarray(times, dtype=np.float64), out.T, out.T)


@dataclass(frozen=True)
class _Windows:
    """Precomputed addressing of every window the syncs query."""

    initial_down: _Lookup
    initial_up: _Lookup
    down: _Lookup
    up: _Lookup
    ready: _Lookup | None  # None: no ready delay, every pod is ready


def _sync(
    arrays: _SpecArrays,
    history: _History,
    windows: _Windows,
    sync: int,
    current: IntArray,
    value: IntArray,
    present: BoolArray,
    per_pod_from_total: bool,
) -> IntArray:
    """One reconcileAutoscaler for every spec; returns the replica counts after it and records history."""
    if windows.ready is None:
        young = np.zeros_like(current)
    else:  # a scale-down removes the youngest pods, so the pods old enough are a running minimum
        young = current - np.minimum(history.counts.query(sync, windows.ready), current)
    if (
        not per_pod_from_total
    ):  # docs/contracts.md#what-if-replay: young pods are set aside only for a CPU metric on scale-up
        scales_up = arrays.is_cpu & (value // arrays.total_scale > arrays.target)
        young = np.where(scales_up, young, 0)
    proposal, computable = _proposal(arrays, value, current, young, per_pod_from_total)
    disabled = (current == 0) & arrays.scales_from_one
    above = current > arrays.max_replicas
    below = current < arrays.min_replicas
    decides = ~(disabled | above | below) & present & computable
    desired = np.maximum(proposal, 0)
    if sync == 0:  # recordInitialRecommendation: stamped 0, inside a window W at t = 0 iff W > 0
        history.highest.push(0, current)
        history.lowest.push(0, current)
        down = history.highest.query(0, windows.initial_down)
        up = history.lowest.query(0, windows.initial_up)
    else:
        down = history.highest.query(sync - 1, windows.down)
        up = history.lowest.query(sync - 1, windows.up)
    if arrays.any_behavior:
        normalized = _with_behavior(arrays, history, sync, current, desired, up, down)
        if not arrays.all_behavior:
            normalized = np.where(arrays.has_behavior, normalized, _legacy(arrays, current, np.maximum(desired, down)))
    else:
        normalized = _legacy(arrays, current, np.maximum(desired, down))
    _record(history, sync, current, desired, decides)
    after = np.where(
        decides,
        normalized,
        np.where(above, arrays.max_replicas, np.where(below & ~disabled, arrays.min_replicas, current)),
    )
    history.changes.add(sync, after - current)
    return after


def _record(history: _History, sync: int, current: IntArray, desired: IntArray, recorded: BoolArray) -> None:
    """Store this sync's recommendation where one was made; at sync 0 it shares its slot with the initial one."""
    highest = np.where(recorded, desired, _EMPTY_LOW)
    lowest = np.where(recorded, desired, _EMPTY_HIGH)
    if sync == 0:
        highest, lowest = np.maximum(highest, current), np.minimum(lowest, current)
    history.highest.push(sync, highest)
    history.lowest.push(sync, lowest)


def _legacy(arrays: _SpecArrays, current: IntArray, stabilized: IntArray) -> IntArray:
    """convertDesiredReplicasWithRules."""
    limit = np.maximum(LEGACY_SCALE_UP_FACTOR * current, LEGACY_SCALE_UP_MINIMUM).astype(np.int64)
    clamped = np.minimum(stabilized, np.minimum(arrays.max_replicas, limit))
    return np.where(stabilized < arrays.min_replicas, arrays.min_replicas, clamped)


def _with_behavior(
    arrays: _SpecArrays,
    history: _History,
    sync: int,
    current: IntArray,
    desired: IntArray,
    up: IntArray,
    down: IntArray,
) -> IntArray:
    """stabilizeRecommendationWithBehaviors, then convertDesiredReplicasWithBehaviorRate."""
    stabilized = np.minimum(np.maximum(current, np.minimum(desired, up)), np.maximum(desired, down))
    up_limit, down_limit = _policy_limits(arrays, history, sync, current)
    raised = np.minimum(stabilized, np.minimum(arrays.max_replicas, np.maximum(current, up_limit)))
    lowered = np.maximum(stabilized, np.maximum(arrays.min_replicas, np.minimum(current, down_limit)))
    return np.where(stabilized > current, raised, np.where(stabilized < current, lowered, stabilized))
