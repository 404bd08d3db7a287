"""``nbhelpers.models.kpa``: the Knative KPA replay.

The first part reproduces cases from upstream's own unit tests with upstream's numbers
(knative/serving ``pkg/autoscaler/scaling/autoscaler_test.go`` for the decider,
``pkg/autoscaler/aggregation/bucketing_test.go`` for the window average). Upstream builds its test
deciders with ``newTestAutoscalerWithScalingMetric``: TotalValue = target / 0.75, PanicThreshold 2,
MaxScaleUpRate and MaxScaleDownRate 10, a 60 s stable window, reachable; ``expectedEBC`` is
floor(total × ready − TBC − panic), compared within ±1 as upstream does. The rest replays whole
series and parses manifests.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from nbhelpers.errors import RunbookError
from nbhelpers.models.kpa import (
    Decider,
    KpaSpec,
    KpaTick,
    ScaleResult,
    WindowAverager,
    _floor_digits,
    kpa_spec_from_manifests,
    replay_kpa,
)

UPSTREAM_UTILIZATION = 0.75


def _test_spec(target: float, tbc: float, metric: str = "concurrency", **overrides: Any) -> KpaSpec:
    """Upstream's ``newTestAutoscalerWithScalingMetric`` decider spec."""
    values: dict[str, Any] = {
        "metric": metric,
        "target": target,
        "total": target / UPSTREAM_UTILIZATION,
        "target_burst_capacity": tbc,
        "panic_threshold": 2.0,
        "max_scale_up_rate": 10.0,
        "max_scale_down_rate": 10.0,
        "stable_window": 60.0,
    }
    values.update(overrides)
    return KpaSpec(**values)


def _expected_ebc(target: float, tbc: float, panic: float, ready: float) -> int:
    """Upstream's ``expectedEBC``."""
    return math.floor(target / UPSTREAM_UTILIZATION * ready - tbc - panic)


def _assert_scale(got: ScaleResult, desired: int, ebc: int) -> None:
    assert got.desired_pods == desired
    assert abs(got.excess_burst_capacity - ebc) <= 1


# --- upstream: pkg/autoscaler/scaling/autoscaler_test.go -----------------------------------------------------


def test_stable_mode_increase_with_concurrency_default() -> None:
    """TestAutoscalerStableModeIncreaseWithConcurrencyDefault (knative/serving
    pkg/autoscaler/scaling/autoscaler_test.go): target 10, TBC 101, stable 50 → 5 pods, stable 100 → 10."""
    decider = Decider(_test_spec(10, 101), ready_at_creation=1)
    _assert_scale(decider.scale(0.0, 1, stable=50, panic=10), 5, _expected_ebc(10, 101, 10, 1))
    _assert_scale(decider.scale(0.0, 1, stable=100, panic=10), 10, _expected_ebc(10, 101, 10, 1))
    assert not decider.in_panic


def test_stable_mode_increase_with_rps() -> None:
    """TestAutoscalerStableModeIncreaseWithRPS (knative/serving pkg/autoscaler/scaling/autoscaler_test.go):
    the rps metric goes through the same arithmetic: 50 rps → 5 pods, then 100 / 99 → 10."""
    decider = Decider(_test_spec(10, 101, metric="rps"), ready_at_creation=1)
    _assert_scale(decider.scale(0.0, 1, stable=50, panic=50), 5, _expected_ebc(10, 101, 50, 1))
    _assert_scale(decider.scale(0.0, 1, stable=100, panic=99), 10, _expected_ebc(10, 101, 99, 1))


def test_stable_mode_decrease() -> None:
    """TestAutoscalerStableModeDecrease (knative/serving pkg/autoscaler/scaling/autoscaler_test.go):
    8 ready pods, concurrency 100 → 10 pods, then 50 → 5."""
    decider = Decider(_test_spec(10, 98), ready_at_creation=1)
    _assert_scale(decider.scale(0.0, 8, stable=100, panic=100), 10, _expected_ebc(10, 98, 100, 8))
    _assert_scale(decider.scale(0.0, 8, stable=50, panic=50), 5, _expected_ebc(10, 98, 50, 8))


def test_stable_mode_no_traffic_scale_to_zero() -> None:
    """TestAutoscalerStableModeNoTrafficScaleToZero (knative/serving pkg/autoscaler/scaling/autoscaler_test.go):
    stable 1 → 1 pod; stable 0 → 0 pods."""
    decider = Decider(_test_spec(10, 75), ready_at_creation=1)
    _assert_scale(decider.scale(0.0, 1, stable=1, panic=0), 1, _expected_ebc(10, 75, 0, 1))
    _assert_scale(decider.scale(0.0, 1, stable=0, panic=0), 0, _expected_ebc(10, 75, 0, 1))


def test_panic_then_unpanic_scale_down() -> None:
    """TestAutoscalerPanicThenUnPanicScaleDown (knative/serving pkg/autoscaler/scaling/autoscaler_test.go):
    a panic surge to 100 pods holds while traffic drops and is released a stable window later."""
    decider = Decider(_test_spec(10, 93), ready_at_creation=1)
    _assert_scale(decider.scale(0.0, 1, stable=100, panic=100), 10, _expected_ebc(10, 93, 100, 1))
    panic_time = 1.0
    _assert_scale(decider.scale(panic_time, 10, stable=100, panic=1000), 100, _expected_ebc(10, 93, 1000, 10))
    # Traffic dropped off, scale stays as we're still in panic.
    _assert_scale(decider.scale(panic_time + 30, 10, stable=1, panic=1), 100, _expected_ebc(10, 93, 1, 10))
    assert decider.in_panic
    # Scale down after the stable window.
    _assert_scale(decider.scale(panic_time + 61, 10, stable=1, panic=1), 1, _expected_ebc(10, 93, 1, 10))
    assert not decider.in_panic


def test_rate_limit_scale_up() -> None:
    """TestAutoscalerRateLimitScaleUp (knative/serving pkg/autoscaler/scaling/autoscaler_test.go):
    100 pods needed but the scale-up rate 10 allows ×10 per decision."""
    decider = Decider(_test_spec(10, 61), ready_at_creation=1)
    _assert_scale(decider.scale(0.0, 1, stable=1000, panic=1001), 10, _expected_ebc(10, 61, 1001, 1))
    _assert_scale(decider.scale(0.0, 10, stable=1000, panic=1001), 100, _expected_ebc(10, 61, 1001, 10))


def test_rate_limit_scale_down() -> None:
    """TestAutoscalerRateLimitScaleDown (knative/serving pkg/autoscaler/scaling/autoscaler_test.go):
    1 pod needed but the scale-down rate 10 allows ÷10 per decision: 100 → 10 → 1."""
    decider = Decider(_test_spec(10, 61), ready_at_creation=1)
    _assert_scale(decider.scale(0.0, 100, stable=1, panic=1), 10, _expected_ebc(10, 61, 1, 100))
    _assert_scale(decider.scale(0.0, 10, stable=1, panic=1), 1, _expected_ebc(10, 61, 1, 10))


def test_use_one_pod_as_minimum_if_endpoints_not_found() -> None:
    """TestAutoscalerUseOnePodAsMinimumIfEndpointsNotFound (knative/serving
    pkg/autoscaler/scaling/autoscaler_test.go): with 0 ready pods the rate limit counts one pod (×10 → 10)."""
    decider = Decider(_test_spec(10, 81), ready_at_creation=1)
    _assert_scale(decider.scale(0.0, 0, stable=1000, panic=888), 10, _expected_ebc(10, 81, 888, 0))


def test_unpanic_after_slow_increase() -> None:
    """TestAutoscalerUnpanicAfterSlowIncrease (knative/serving pkg/autoscaler/scaling/autoscaler_test.go):
    a panic that is not renewed ends a stable window after it started, even while pods keep growing."""
    decider = Decider(_test_spec(1, 98), ready_at_creation=1)
    start = 0.0
    _assert_scale(decider.scale(start, 10, stable=11, panic=25), 25, _expected_ebc(1, 98, 25, 10))
    assert decider.panic_time == start
    now = start + 30
    _assert_scale(decider.scale(now, 40, stable=30, panic=41), 41, _expected_ebc(1, 98, 41, 40))
    assert decider.panic_time == start  # not moved: 41 / 40 is under the threshold
    now += 30 + 2
    _assert_scale(decider.scale(now, 55, stable=50, panic=56), 50, _expected_ebc(1, 98, 56, 55))
    assert decider.panic_time is None


def test_extend_panic_window() -> None:
    """TestAutoscalerExtendPanicWindow (knative/serving pkg/autoscaler/scaling/autoscaler_test.go):
    a tick still over the threshold moves the panic start to now."""
    decider = Decider(_test_spec(1, 98), ready_at_creation=1)
    _assert_scale(decider.scale(0.0, 10, stable=11, panic=25), 25, _expected_ebc(1, 98, 25, 10))
    _assert_scale(decider.scale(30.0, 40, stable=30, panic=80), 80, _expected_ebc(1, 98, 80, 40))
    assert decider.panic_time == 30.0


def test_panic_mode_exponential_track_and_stabilize() -> None:
    """TestAutoscalerPanicModeExponentialTrackAndStabilize (knative/serving
    pkg/autoscaler/scaling/autoscaler_test.go): load ×6 per step is tracked 6 → 36 → 216 → 1296 in panic."""
    decider = Decider(_test_spec(1, 101), ready_at_creation=1)
    _assert_scale(decider.scale(0.0, 1, stable=6, panic=6), 6, _expected_ebc(1, 101, 6, 1))
    now = 10.0
    for ready, load in ((6, 36), (36, 216), (216, 1296)):
        _assert_scale(decider.scale(now, ready, stable=load, panic=load), load, _expected_ebc(1, 101, load, ready))
        assert decider.panic_time == now
    _assert_scale(decider.scale(now + 1, 1296, stable=1296, panic=1296), 1296, _expected_ebc(1, 101, 1296, 1296))


@pytest.mark.parametrize(
    ("label", "target", "tbc", "stable", "panic", "ready", "overrides", "want", "want_ebc"),
    [
        ("AutoscalerStableModeUnlimitedTBC", 181, -1, 21.0, 26, 1, {}, 1, -1),
        ("Autoscaler0TBC", 10, 0, 50.0, 49, 1, {}, 5, 0),
        ("AutoscalerStableModeNoChange", 10, 100, 50.0, 50, 1, {}, 5, _expected_ebc(10, 100, 50, 1)),
        ("AutoscalerStableModeNoChangeAlreadyScaled", 10, 100, 50.0, 50, 5, {}, 5, _expected_ebc(10, 100, 50, 5)),
        (
            "AutoscalerStableModeIncreaseWithSmallScaleUpRate",
            1,
            1982,
            3,
            3.1,
            2,
            {"max_scale_up_rate": 1.1},
            3,
            _expected_ebc(1, 1982, 3.1, 2),
        ),
        (
            "AutoscalerStableModeDecreaseWithSmallScaleDownRate",
            10,
            1982,
            1,
            1,
            100,
            {"max_scale_down_rate": 1.1},
            90,
            _expected_ebc(10, 1982, 1, 100),
        ),
        ("AutoscalerPanicModeDoublePodCount", 10, 84, 50, 100, 1, {}, 10, _expected_ebc(10, 84, 100, 1)),
    ],
)
def test_autoscaler_scale_table(
    label: str,
    target: float,
    tbc: float,
    stable: float,
    panic: float,
    ready: int,
    overrides: dict[str, Any],
    want: int,
    want_ebc: int,
) -> None:
    """TestAutoscalerScale table entries (knative/serving pkg/autoscaler/scaling/autoscaler_test.go), named
    by upstream's labels; AutoscalerStableModeDecreaseNonReachable is left out (the replay is reachable)."""
    decider = Decider(_test_spec(target, tbc, **overrides), ready_at_creation=1)
    _assert_scale(decider.scale(0.0, ready, stable=stable, panic=panic), want, want_ebc)


@pytest.mark.parametrize(("stable", "want"), [(50, 50), (20, 30)])
def test_panic_uses_the_larger_of_stable_and_panic(stable: float, want: int) -> None:
    """TestAutoscalerScale AutoscalerPanicStableLargerThanPanic / ...LessThanPanic (knative/serving
    pkg/autoscaler/scaling/autoscaler_test.go): in panic (started 5 s ago, 5 pods) the larger count wins."""
    decider = Decider(_test_spec(1, 100), ready_at_creation=1)
    decider.panic_time, decider.max_panic_pods = -5.0, 5
    _assert_scale(decider.scale(0.0, 5, stable=stable, panic=30), want, _expected_ebc(1, 100, 30, 5))


def test_scale_down_delay() -> None:
    """TestAutoscalerScaleDownDelay, subtests simple and gradual (knative/serving
    pkg/autoscaler/scaling/autoscaler_test.go): a 5-minute delay keeps the largest recommendation of the
    last 5 minutes (2 s slots)."""
    spec = KpaSpec(
        target=10,
        total=0,
        target_burst_capacity=0,
        panic_threshold=100,
        max_scale_up_rate=10,
        max_scale_down_rate=10,
        scale_down_delay=300,
    )
    decider = Decider(spec)
    minute = 60.0
    assert decider.scale(2.0, 0, stable=40, panic=40) == ScaleResult(4, 0)
    assert decider.scale(5 * minute, 0, stable=0, panic=0).desired_pods == 4
    assert decider.scale(5 * minute + 2, 0, stable=0, panic=0).desired_pods == 0
    # gradual
    assert decider.scale(9 * minute, 0, stable=40, panic=40).desired_pods == 4
    assert decider.scale(10 * minute, 0, stable=30, panic=30).desired_pods == 4
    assert decider.scale(11 * minute, 0, stable=0, panic=0).desired_pods == 4
    assert decider.scale(14 * minute, 0, stable=0, panic=0).desired_pods == 3
    assert decider.scale(15 * minute, 0, stable=0, panic=0).desired_pods == 0


def test_scale_down_delay_zero() -> None:
    """TestAutoscalerScaleDownDelayZero (knative/serving pkg/autoscaler/scaling/autoscaler_test.go): without a
    delay the scale-down applies at once, even within the same 2 s slot."""
    spec = KpaSpec(
        target=10, total=0, target_burst_capacity=0, panic_threshold=100, max_scale_up_rate=10, max_scale_down_rate=10
    )
    decider = Decider(spec)
    assert decider.scale(0.0, 0, stable=40, panic=40).desired_pods == 4
    assert decider.scale(0.5, 0, stable=20, panic=20).desired_pods == 2


def test_activation_scale_raises_a_non_zero_recommendation() -> None:
    """``activation-scale`` (autoscaler.go, ``ActivationScale > 1``): one pod's worth of load asks for the
    activation scale; no load still asks for zero."""
    decider = Decider(_test_spec(10, 0, activation_scale=3), ready_at_creation=1)
    assert decider.scale(0.0, 1, stable=1, panic=1).desired_pods == 3
    assert decider.scale(2.0, 1, stable=0, panic=0).desired_pods == 0
    spec = kpa_spec_from_manifests(_isvc(**{"autoscaling.knative.dev/activation-scale": "3"}))
    assert spec.activation_scale == 3


def test_start_in_panic_mode() -> None:
    """TestStartInPanicMode (knative/serving pkg/autoscaler/scaling/autoscaler_test.go): a decider created
    with 0 or 1 ready pods starts calm; with 2 it starts in panic holding 2 pods."""
    spec = KpaSpec(target=100, total=120, target_burst_capacity=11, panic_threshold=220)
    for ready in (0, 1):
        calm = Decider(spec, ready_at_creation=ready)
        assert not calm.in_panic
        assert calm.max_panic_pods == ready
    panicking = Decider(spec, ready_at_creation=2)
    assert panicking.in_panic
    assert panicking.max_panic_pods == 2


# --- upstream: pkg/autoscaler/aggregation/bucketing_test.go --------------------------------------------------


def test_window_average() -> None:
    """TestTimedFloat64BucketsWindowAverage (knative/serving pkg/autoscaler/aggregation/bucketing_test.go),
    the in-order part: partial window after the first write, a lagging now, a short hole, a long hole,
    a write after a hole, a restart after a window of silence."""
    now = 100.0
    buckets = WindowAverager(5)
    buckets.record(now, 1)
    assert buckets.average(now) == 1.0  # the first write alone, not 1/5
    for i in range(1, 5):
        buckets.record(now + i, i + 1)
    assert buckets.average(now + 4) == 15 / 5
    assert buckets.average(now + 3.6) == 15 / 5
    assert buckets.average(now + 6) == (15 - 1 - 2) / (5 - 2)
    assert buckets.average(now + 10) == 0.0
    buckets.record(now + 6, 91)
    assert buckets.average(now + 6) == (15 - 1 - 2 + 91) / 5
    now += 60
    buckets.record(now, 1984)
    assert buckets.average(now) == 1984.0


def test_window_average_over_a_recent_partial_window_with_a_gap() -> None:
    """The partial-window rule of ``WindowAverage`` (knative/serving pkg/autoscaler/aggregation/bucketing.go):
    data that started 3 s ago and stopped 2 s ago averages over the 3 valid seconds, not the 58 left."""
    buckets = WindowAverager(60)
    for second, value in enumerate((1.0, 2.0, 3.0)):
        buckets.record(float(second), value)
    assert buckets.average(4.0) == 2.0
    assert not buckets.is_empty(62.0)
    assert buckets.is_empty(63.0)


def test_round_to_n_digits() -> None:
    """TestRoundToNDigits (knative/serving pkg/autoscaler/aggregation/bucketing_test.go), six digits."""
    assert _floor_digits(3.6e-17) == 0.0
    assert _floor_digits(12345) == 12345.0
    assert _floor_digits(1 / 3) == 0.333333


# --- replays -----------------------------------------------------------------------------------------------------


def _first(rows: list[KpaTick], predicate: Callable[[KpaTick], bool]) -> KpaTick:
    return next(row for row in rows if predicate(row))


def test_scale_from_zero_at_the_first_request() -> None:
    """At zero pods the activator's stat pokes the decider: the pod is asked for when the request arrives,
    not at the next tick, and is ready a cold start later."""
    series = {"concurrency": [(0.0, 0.0), (10.5, 3.0), (60.0, 3.0)]}
    rows = replay_kpa(KpaSpec(), series, 0, pod_ready_delay=30.0)
    assert all(row.desired_pods == 0 for row in rows if row.t < 10.5)
    poke = _first(rows, lambda row: row.desired_pods > 0)
    assert (poke.t, poke.desired_pods, poke.ready_pods) == (10.5, 1, 0)
    assert [row.t for row in rows].count(10.5) == 1
    assert _first(rows, lambda row: row.ready_pods == 1).t == 42.0  # 10.5 + 30, next tick
    assert [row.t for row in rows if row.t != 10.5] == [2.0 * i for i in range(31)]


def test_scale_to_zero_after_stable_window_and_grace_period() -> None:
    """No traffic, one pod, the activator not in the path (target-burst-capacity 0): the PodAutoscaler must
    be Active a stable window (60 s) before turning Inactive, then Inactive for the grace period (30 s)."""
    spec = KpaSpec(target_burst_capacity=0)
    rows = replay_kpa(spec, {"concurrency": [(0.0, 0.0)]}, 1, end=120.0)
    assert _first(rows, lambda row: row.desired_pods == 0).t == 90.0
    assert all(row.ready_pods == 1 for row in rows if row.t < 90.0)
    assert all(row.ready_pods == 0 for row in rows if row.t >= 90.0)


def test_scale_to_zero_fast_path_when_the_activator_is_already_in_the_path() -> None:
    """With the default target-burst-capacity (200) one pod of 100 leaves the activator in the path, so the
    grace period has already passed when the PodAutoscaler turns Inactive at 60 s: the pod goes at 62 s."""
    rows = replay_kpa(KpaSpec(), {"concurrency": [(0.0, 0.0)]}, 1, end=120.0)
    assert _first(rows, lambda row: row.desired_pods == 0).t == 62.0


def test_scale_to_zero_waits_for_the_pod_retention_period() -> None:
    """scale-to-zero-pod-retention-period 120 s: the last pod stays 120 s after the PodAutoscaler turns
    Inactive (at 60 s)."""
    spec = KpaSpec(scale_to_zero_pod_retention_period=120.0)
    rows = replay_kpa(spec, {"concurrency": [(0.0, 0.0)]}, 1, end=240.0)
    assert _first(rows, lambda row: row.desired_pods == 0).t == 180.0


def test_scale_to_zero_disabled_or_min_scale_keeps_pods() -> None:
    """enable-scale-to-zero false keeps one pod; min-scale 2 keeps two."""
    idle = {"concurrency": [(0.0, 0.0)]}
    no_zero = replay_kpa(KpaSpec(enable_scale_to_zero=False), idle, 3, end=400.0)
    assert min(row.desired_pods for row in no_zero) == 1
    assert no_zero[-1].desired_pods == 1
    floor = replay_kpa(KpaSpec(min_scale=2), idle, 3, end=400.0)
    assert min(row.desired_pods for row in floor) == 2


def test_max_scale_caps_a_burst_and_panic_holds_it() -> None:
    """A burst of 500 in flight against a target of 70 wants 8 pods: max-scale 3 caps it; once the burst is
    over, panic mode keeps the count until a stable window after the last tick over the threshold."""
    series = {"concurrency": [(0.0, 50.0), (100.0, 500.0), (130.0, 50.0), (300.0, 50.0)]}
    capped = replay_kpa(KpaSpec(max_scale=3), series, 1)
    assert max(row.desired_pods for row in capped) == 3
    rows = replay_kpa(KpaSpec(), series, 1)
    assert max(row.desired_pods for row in rows) == 8  # ceil(500 / 70)
    # Over the threshold at 100 s (2 pods needed, 1 ready) and 102 s (4 needed, 2 ready); from 104 s the
    # pods have caught up, so panic ends on the first tick more than 60 s after 102 s.
    assert [row.t for row in rows if row.panic] == [100.0 + 2 * i for i in range(32)]
    assert [row.desired_pods for row in rows if 100.0 <= row.t <= 106.0] == [2, 4, 7, 8]
    assert all(row.desired_pods == 8 for row in rows if 106.0 <= row.t <= 162.0)
    # Then the stable average rules, at most halving per tick (max-scale-down-rate 2).
    assert [row.desired_pods for row in rows if 164.0 <= row.t <= 168.0] == [4, 4, 3]


def test_pod_ready_delay_holds_new_pods() -> None:
    """Pods the autoscaler asks for at a tick count as ready pod_ready_delay later, and the decider keeps
    seeing the old ready count meanwhile."""
    series = {"concurrency": [(0.0, 0.0), (20.0, 140.0), (200.0, 140.0)]}
    rows = replay_kpa(KpaSpec(), series, 1, pod_ready_delay=45.0)
    asked = _first(rows, lambda row: row.desired_pods >= 2)
    assert (asked.t, asked.ready_pods, asked.panic) == (24.0, 1, True)  # panic: ceil(117 / 70) / 1 ≥ 2
    assert _first(rows, lambda row: row.ready_pods >= 2).t == 70.0  # ready at 69 s, seen at the next tick
    assert all(row.desired_pods == 2 for row in rows if 24.0 <= row.t <= 70.0)


def test_scale_down_removes_pods_that_are_not_ready_first() -> None:
    """A surge asks for 5 pods that need 300 s to get ready; when panic ends the KPA scales back to
    min-scale 1 and the ReplicaSet removes the waiting pods, keeping the one that serves."""
    series = {"concurrency": [(0.0, 0.0), (20.0, 300.0), (30.0, 0.0)]}
    rows = replay_kpa(KpaSpec(min_scale=1), series, 1, pod_ready_delay=300.0, end=120.0)
    assert max(row.desired_pods for row in rows) == 5
    back = _first(rows, lambda row: row.t > 30.0 and row.desired_pods == 1)
    assert (back.t, back.ready_pods, back.panic) == (94.0, 1, False)


def test_no_data_keeps_the_last_recommendation_and_activation_can_time_out() -> None:
    """A request pokes a revision at zero awake, then leaves (last recorded second 11) while the pod needs
    1000 s. After a stable window without data the collector answers "no data" and the recommendation of 1
    stands, so the pod keeps starting; when it is finally ready the PodAutoscaler has been activating longer
    than the progress deadline + 30 s and the zero recommendation applies at once (kpa/scaler.go). With
    target-burst-capacity -1 no scrape target exists, the empty window reads as 0, and the activation
    times out at 10.5 + 630 s."""
    series = {"concurrency": [(0.0, 0.0), (10.5, 1.0), (12.0, 0.0)]}
    rows = replay_kpa(KpaSpec(), series, 0, pod_ready_delay=1000.0, end=1100.0)
    assert all(row.desired_pods == 1 and row.ready_pods == 0 for row in rows if 10.5 <= row.t < 1012.0)
    assert _first(rows, lambda row: row.t > 10.5 and row.desired_pods == 0).t == 1012.0
    unlimited = replay_kpa(KpaSpec(target_burst_capacity=-1), series, 0, pod_ready_delay=1000.0, end=1100.0)
    assert _first(unlimited, lambda row: row.t > 10.5 and row.desired_pods == 0).t == 642.0


def test_rps_series_is_used_for_an_rps_revision() -> None:
    """An rps revision reads the rps series: 700 rps at 140 per pod is 5 pods."""
    series = {"rps": [(0.0, 700.0), (120.0, 700.0)], "concurrency": [(0.0, 0.0)]}
    rows = replay_kpa(KpaSpec(metric="rps", target=140.0, total=200.0), series, 5)
    assert rows[-1].desired_pods == 5


@pytest.mark.parametrize(
    ("series", "initial", "kwargs", "message"),
    [
        ({"rps": [(0.0, 1.0)]}, 1, {}, "scales on concurrency"),
        ({"concurrency": [(0.0, -1.0)]}, 1, {}, "≥ 0"),
        ({"concurrency": []}, 1, {}, "empty"),
        ({"concurrency": [(0.0, 1.0)]}, -1, {}, "initial replicas"),
        ({"concurrency": [(0.0, 1.0)]}, 1, {"tick": 0.0}, "tick"),
        ({"concurrency": [(0.0, 1.0)]}, 1, {"pod_ready_delay": -5.0}, "pod ready delay"),
        ({"concurrency": [(-10.0, 1.0)]}, 1, {}, "t ≥ 0"),
    ],
)
def test_replay_refuses_bad_input(series: Any, initial: int, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(RunbookError, match=message):
        replay_kpa(KpaSpec(), series, initial, **kwargs)


# --- settings from the manifests ---------------------------------------------------------------------------


def _isvc(predictor: dict[str, Any] | None = None, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "llm", "namespace": "ml", "annotations": annotations},
        "spec": {"predictor": {"model": {"modelFormat": {"name": "huggingface"}}, **(predictor or {})}},
    }


def _configmap(**data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "config-autoscaler"}, "data": data}


A = "autoscaling.knative.dev/"


def test_defaults_are_knatives_with_kserves_min_replicas() -> None:
    """No settings: Knative's defaults, and min-scale 1 because KServe writes minReplicas (default 1)."""
    assert kpa_spec_from_manifests(_isvc()) == KpaSpec(min_scale=1)
    assert kpa_spec_from_manifests(_isvc({"minReplicas": 0}), _configmap()) == KpaSpec()


def test_configmap_then_annotations() -> None:
    """The ConfigMap replaces defaults; the revision's annotations replace the ConfigMap."""
    config = _configmap(
        **{
            "container-concurrency-target-default": "10",
            "container-concurrency-target-percentage": "80",
            "stable-window": "2m",
            "panic-window-percentage": "5.0",
            "target-burst-capacity": "0",
            "scale-to-zero-grace-period": "45s",
            "enable-scale-to-zero": "false",
            "max-scale": "9",
        }
    )
    spec = kpa_spec_from_manifests(_isvc(), config)
    assert (spec.target, spec.total) == (8.0, 10.0)
    assert (spec.stable_window, spec.panic_window) == (120.0, 6.0)
    assert (spec.target_burst_capacity, spec.scale_to_zero_grace_period, spec.enable_scale_to_zero) == (0, 45, False)
    assert spec.max_scale == 9
    overridden = kpa_spec_from_manifests(
        _isvc(
            **{
                A + "window": "30s",
                A + "target-utilization-percentage": "50",
                A + "panic-threshold-percentage": "300",
                A + "max-scale": "4",
                A + "scale-down-delay": "1m",
            }
        ),
        config,
    )
    assert (overridden.stable_window, overridden.panic_window) == (30.0, 2.0)  # 1.5 s rounds to 2 s
    assert (overridden.target, overridden.panic_threshold) == (5.0, 3.0)
    assert (overridden.max_scale, overridden.scale_down_delay) == (4, 60.0)


def test_kserve_fields_win_over_annotations() -> None:
    """KServe writes scaleTarget, scaleMetric, minReplicas and maxReplicas over same-named annotations;
    containerConcurrency caps a concurrency target; the predictor's annotations win over the ISVC's."""
    isvc = _isvc(
        {"minReplicas": 0, "maxReplicas": 5, "scaleTarget": 4, "containerConcurrency": 2},
        **{A + "target": "50", A + "min-scale": "3", A + "max-scale": "20"},
    )
    spec = kpa_spec_from_manifests(isvc)
    assert (spec.min_scale, spec.max_scale) == (0, 5)
    assert (spec.total, spec.target) == (2.0, pytest.approx(1.4))
    rps = kpa_spec_from_manifests(_isvc({"scaleMetric": "rps", "scaleTarget": 30}))
    assert (rps.metric, rps.total, rps.target) == ("rps", 30.0, pytest.approx(21.0))
    isvc = _isvc({"annotations": {A + "window": "90s"}}, **{A + "window": "30s"})
    assert kpa_spec_from_manifests(isvc).stable_window == 90.0


def test_legacy_annotation_keys() -> None:
    """The camelCase keys still work; the kebab-case key wins when both are set."""
    spec = kpa_spec_from_manifests(_isvc(**{A + "maxScale": "7", A + "panicWindowPercentage": "20"}))
    assert (spec.max_scale, spec.panic_window) == (7, 12.0)
    both = kpa_spec_from_manifests(_isvc(**{A + "maxScale": "7", A + "max-scale": "6"}))
    assert both.max_scale == 6


@pytest.mark.parametrize(
    ("isvc", "config", "message"),
    [
        (_isvc(**{A + "window": "5s"}), None, "window"),
        (_isvc(**{A + "window": "61.5s"}), None, "whole seconds"),
        (_isvc(**{A + "panic-threshold-percentage": "100"}), None, "110"),
        (_isvc(**{A + "target": "0"}), None, "target"),
        (_isvc(**{A + "target-burst-capacity": "-2"}), None, "-1"),
        (_isvc(**{A + "scale-down-delay": "30"}), None, "duration"),
        (_isvc(**{A + "metric-aggregation-algorithm": "weighted-exponential"}), None, "linear"),
        (_isvc(**{A + "class": "hpa.autoscaling.knative.dev"}), None, "HPA"),
        (_isvc({"scaleMetric": "cpu"}), None, "concurrency or rps"),
        (_isvc({"minReplicas": -1}), None, "minReplicas"),
        (_isvc({"minReplicas": 4, "maxReplicas": 2}), None, "less than min-scale"),
        (_isvc(**{"serving.kserve.io/deploymentMode": "RawDeployment"}), None, "RawDeployment"),
        (_isvc(), _configmap(**{"max-scale-up-rate": "1"}), "max-scale-up-rate"),
        (_isvc(), _configmap(**{"stable-window": "3s"}), "stable-window"),
        (_isvc(), _configmap(**{"enable-scale-to-zero": "maybe"}), "boolean"),
        (_isvc(), _configmap(**{"container-concurrency-target-default": "ten"}), "not a number"),
        (_isvc(), {"kind": "Secret"}, "ConfigMap"),
        ({"kind": "Deployment"}, None, "InferenceService"),
    ],
)
def test_bad_settings_raise_runbook_error(isvc: dict[str, Any], config: Any, message: str) -> None:
    with pytest.raises(RunbookError, match=message):
        kpa_spec_from_manifests(isvc, config)
