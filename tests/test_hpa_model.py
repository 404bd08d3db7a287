"""Fidelity tests for the HPA replay (nbhelpers.models.hpa).

Numbers come from two sources, cited per test:
- the Kubernetes documentation, https://kubernetes.io/docs/concepts/workloads/autoscaling/horizontal-pod-autoscale/
  ("Algorithm details", "Scaling policies", "Stabilization window", "Default Behavior", "Example: ...") and
  the v1.33 configurable-tolerance post, https://kubernetes.io/blog/2025/04/28/kubernetes-v1-33-hpa-configurable-tolerance/;
- the controller's own unit tests, kubernetes/kubernetes pkg/controller/podautoscaler/horizontal_test.go.
  Those tests run one reconcile, with scaleUpLimitFactor raised to 8 and, for scale-downs, an empty
  recommendation list; where a replay's t = 0 rules differ (the initial recommendation), the test calls
  the same step functions the replay uses, with the upstream inputs.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from nbhelpers.errors import RunbookError
from nbhelpers.models.hpa import (
    DEFAULT_SCALE_DOWN_RULES,
    DEFAULT_SCALE_UP_RULES,
    Behavior,
    HpaSpec,
    HpaSync,
    MetricSpec,
    PodGroups,
    ScalingPolicy,
    ScalingRules,
    TimedCount,
    Tolerances,
    average_value_replicas,
    convert_with_behavior_rate,
    convert_with_rules,
    hpa_spec_from_manifest,
    make_metric,
    plain_replicas,
    replay_hpa,
    replicas_changed_in_period,
    scale_down_limit,
    scale_up_limit,
    series_key,
    stabilize_legacy,
    stabilize_with_behavior,
    utilization_replicas,
    value_replicas,
)

TOL = Tolerances()
NOW = 1000.0  # a sync time well after t = 0 for the step-function tests


def cpu(percent: int) -> MetricSpec:
    return MetricSpec("Resource", "cpu", "Utilization", percent)


def first_sync(spec: HpaSpec, initial: int, **values: float) -> HpaSync:
    """The decision of a fresh controller's first sync (t = 0) on constant metric values."""
    series = {name: [(0.0, value)] for name, value in values.items()}
    return replay_hpa(spec, series, initial, end=0.0)[0]


def currents(syncs: Sequence[HpaSync]) -> list[int]:
    return [sync.current_replicas for sync in syncs]


def rules(
    pods: int = 0, pods_period: int = 0, percent: int = 0, percent_period: int = 0, window: int = 0
) -> ScalingRules:
    """horizontal_test.go generateScalingRules: a Pods policy then a Percent policy (0: absent), Max."""
    policies = []
    if pods:
        policies.append(ScalingPolicy("Pods", pods, pods_period))
    if percent:
        policies.append(ScalingPolicy("Percent", percent, percent_period))
    return ScalingRules(window, "Max", tuple(policies))


def uniform_events(changes: Sequence[int], period: float, now: float = NOW) -> list[TimedCount]:
    """horizontal_test.go generateEventsUniformDistribution: events centred in equal segments of the period."""
    segment = period / len(changes)
    return [
        TimedCount(now - (period - segment * (index + 1) + segment / 2), change) for index, change in enumerate(changes)
    ]


# --- Kubernetes documentation ---------------------------------------------------------------------


def test_docs_algorithm_double_and_halve() -> None:
    """Docs, "Algorithm details": current 200m against a 100m target doubles the replicas; 50m halves them."""
    target = make_metric("Pods", "m", "AverageValue", "100m").target
    assert plain_replicas(3, target, 200 * 3, PodGroups(3), TOL) == 6
    assert plain_replicas(4, target, 50 * 4, PodGroups(4), TOL) == 2


def test_docs_tolerance_blog_example() -> None:
    """Tolerance blog: 50 replicas at 90 % CPU against 75 % → 50 × 90/75 = 60; 10 % by default."""
    spec = HpaSpec(max_replicas=100, metrics=(cpu(75),))
    assert first_sync(spec, 50, cpu=90).current_replicas == 60
    assert utilization_replicas(50, 75, 80_000 * 50, PodGroups(50), TOL) == 50  # 80/75 = 1.067: within 10 %


def test_docs_tolerance_blog_manifest() -> None:
    """Tolerance blog: scaleDown tolerance 0.05 and scaleUp tolerance 0; the band is [1 − down, 1 + up]."""
    manifest = hpa_manifest(behavior={"scaleDown": {"tolerance": 0.05}, "scaleUp": {"tolerance": 0}})
    spec = hpa_spec_from_manifest(manifest)
    assert spec.tolerances == Tolerances(scale_up=0.0, scale_down=0.05)
    assert utilization_replicas(10, 100, 101_000 * 10, PodGroups(10), spec.tolerances) == 11  # any rise scales up
    assert utilization_replicas(10, 100, 96_000 * 10, PodGroups(10), spec.tolerances) == 10  # 4 % below: kept
    assert utilization_replicas(10, 100, 94_000 * 10, PodGroups(10), spec.tolerances) == 10  # outside, but ceil(9.4)
    assert utilization_replicas(20, 100, 94_000 * 20, PodGroups(20), spec.tolerances) == 19


def test_docs_default_behavior() -> None:
    """Docs, "Default Behavior": scale-up 0 s window, Percent 100 / 15 s and Pods 4 / 15 s, Max;
    scale-down 300 s window, Percent 100 / 15 s."""
    spec = hpa_spec_from_manifest(hpa_manifest(behavior={}))
    assert spec.behavior == Behavior(DEFAULT_SCALE_UP_RULES, DEFAULT_SCALE_DOWN_RULES)
    assert DEFAULT_SCALE_UP_RULES.stabilization_window_seconds == 0
    assert set(DEFAULT_SCALE_UP_RULES.policies) == {ScalingPolicy("Percent", 100, 15), ScalingPolicy("Pods", 4, 15)}
    assert ScalingRules(300, "Max", (ScalingPolicy("Percent", 100, 15),)) == DEFAULT_SCALE_DOWN_RULES


def test_docs_scale_down_policies_80_to_10() -> None:
    """Docs, "Scaling policies": Pods 4 / 60 s and Percent 10 / 60 s. From 80 replicas toward 10, the first
    step removes 8; at 72, 10 % is 7.2, rounded up to 8 removed; below 40 the Pods policy removes 4 at a time."""
    scale_down = ScalingRules(0, "Max", (ScalingPolicy("Pods", 4, 60), ScalingPolicy("Percent", 10, 60)))
    spec = HpaSpec(
        max_replicas=100,
        metrics=(make_metric("External", "queue", "AverageValue", "1"),),  # ceil(10 / 1) = 10 wanted
        behavior=Behavior(scale_down=scale_down),
    )
    syncs = replay_hpa(spec, {"queue": [(0.0, 10.0)]}, 80, end=1800.0)
    by_time = {sync.t: sync.current_replicas for sync in syncs}
    assert by_time[0.0] == 72  # 8 removed
    assert by_time[45.0] == 72  # the 8 removed at t = 0 are still inside the 60 s period
    assert by_time[60.0] == 64  # 72 × 0.9 = 64.8: 8 removed
    steps = sorted({sync.current_replicas for sync in syncs}, reverse=True)
    assert steps[:5] == [72, 64, 57, 51, 45]
    below_40 = [count for count in steps if count < 40]
    assert below_40[:4] == [36, 32, 28, 24]  # 4 per period once 10 % is fewer than 4 pods
    assert syncs[-1].current_replicas == 10


def test_docs_select_policy_min_limits_to_5_pods() -> None:
    """Docs, "Example: limit scale down rate": Percent 10 / 60 s and Pods 5 / 60 s with selectPolicy Min
    removes at most 5 pods a minute (from 100: Percent allows 10, Pods 5, Min picks 5)."""
    scale_down = ScalingRules(300, "Min", (ScalingPolicy("Percent", 10, 60), ScalingPolicy("Pods", 5, 60)))
    assert scale_down_limit(100, [], [], scale_down, NOW) == 95
    assert convert_with_behavior_rate(100, 10, 1, 100, [], [], Behavior(scale_down=scale_down), NOW) == 95


def test_docs_disable_scale_down() -> None:
    """Docs, "Example: disable scale down": selectPolicy Disabled keeps the count however low the metric."""
    spec = hpa_spec_from_manifest(hpa_manifest(behavior={"scaleDown": {"selectPolicy": "Disabled"}}))
    syncs = replay_hpa(spec, {"cpu": [(0.0, 5.0)]}, 8, end=900.0)
    assert set(currents(syncs)) == {8}


def test_docs_stabilization_window() -> None:
    """Docs, "Stabilization window": with a 300 s scale-down window the controller uses the highest
    recommendation of the last 300 s, so a drop scales down only once the high ones left the window."""
    spec = HpaSpec(max_replicas=20, metrics=(cpu(50),), behavior=Behavior())
    series = {"cpu": [(0.0, 50.0), (100.0, 25.0)]}  # at 10 replicas: 10 wanted, then 5 from t = 105
    syncs = replay_hpa(spec, series, 10, end=600.0)
    by_time = {sync.t: sync.current_replicas for sync in syncs}
    assert by_time[375.0] == 10  # the last recommendation of 10, stamped 90, is inside (90 > 375 − 300)
    assert by_time[390.0] == 5  # and out at 390 (90 > 90 is false): every remaining recommendation is 5


# --- horizontal_test.go: whole reconciles, replayed as the first sync -----------------------------


def test_upstream_scale_up() -> None:
    """horizontal_test.go TestScaleUp: 3 pods at 300/500/700m of 1 CPU (50 %), target 30 % → 5."""
    assert first_sync(HpaSpec(min_replicas=2, max_replicas=6, metrics=(cpu(30),)), 3, cpu=50).current_replicas == 5


def test_upstream_scale_up_custom_metrics() -> None:
    """horizontal_test.go TestScaleUpCM / TestScaleUpCMObject / TestScaleUpPerPodCMObject / TestScaleUpCMExternal /
    TestScaleUpPerPodCMExternal: 3 replicas, each → 4."""
    cases = [
        (make_metric("Pods", "qps", "AverageValue", "15"), 20.0),  # qps 20/10/30 per pod
        (make_metric("Object", "qps", "Value", "15"), 20.0),
        (make_metric("Object", "qps", "AverageValue", "10"), 40.0),
        (make_metric("External", "qps", "Value", "6666m"), 8.6),
        (make_metric("External", "qps", "AverageValue", "2222m"), 8.6),
    ]
    for metric, value in cases:
        spec = HpaSpec(min_replicas=2, max_replicas=6, metrics=(metric,))
        assert first_sync(spec, 3, qps=value).current_replicas == 4, metric


def test_upstream_tolerance() -> None:
    """horizontal_test.go TestTolerance (102 % vs 100 %), TestToleranceCM (20.333 vs 20),
    TestToleranceCMObject (20.05 vs 20), TestToleranceCMExternal (8.6 vs 8.666, 4 replicas): no change."""
    assert first_sync(HpaSpec(max_replicas=5, metrics=(cpu(100),)), 3, cpu=102).current_replicas == 3
    pods = HpaSpec(max_replicas=5, metrics=(make_metric("Pods", "qps", "AverageValue", "20"),))
    assert first_sync(pods, 3, qps=20.333).current_replicas == 3
    obj = HpaSpec(max_replicas=5, metrics=(make_metric("Object", "qps", "Value", "20"),))
    assert first_sync(obj, 3, qps=20.05).current_replicas == 3
    external = HpaSpec(min_replicas=2, max_replicas=6, metrics=(make_metric("External", "qps", "Value", "8666m"),))
    assert first_sync(external, 4, qps=8.6).current_replicas == 4


def test_upstream_replica_bounds() -> None:
    """horizontal_test.go TestZeroReplicas (0 replicas, min 3: autoscaling disabled, stays 0), TestTooFewReplicas
    (2 → min 3), TestTooManyReplicas (10 → max 5), TestMaxReplicas (616 % vs 90 % from 3 → max 5)."""
    bounded = HpaSpec(min_replicas=3, max_replicas=5, metrics=(cpu(90),))
    assert first_sync(bounded, 0) == HpaSync(0.0, 0, 0)
    assert first_sync(bounded, 2).current_replicas == 3
    assert first_sync(bounded, 10).current_replicas == 5
    spec = HpaSpec(min_replicas=2, max_replicas=5, metrics=(cpu(90),))
    assert first_sync(spec, 3, cpu=616).current_replicas == 5


def test_upstream_upscale_cap() -> None:
    """horizontal_test.go TestUpscaleCap: scaleUp Percent 700 / 60 s, 3 pods at 200 % vs 10 % → 24 (cap);
    TestUpscaleCapGreaterThanMaxReplicas: the same with maxReplicas 20 → 20."""
    behavior = Behavior(scale_up=rules(percent=700, percent_period=60))
    spec = HpaSpec(max_replicas=100, metrics=(cpu(10),), behavior=behavior)
    assert first_sync(spec, 3, cpu=200).current_replicas == 24
    capped = HpaSpec(max_replicas=20, metrics=(cpu(10),), behavior=behavior)
    assert first_sync(capped, 3, cpu=200).current_replicas == 20


def test_upstream_scale_from_zero_object() -> None:
    """horizontal_test.go TestScaleUpFromZeroCMObject (20 vs 15, min 0 → 2) and
    TestScaleUpFromZeroIgnoresToleranceCMObject (1 vs 1 → 1: no tolerance from zero)."""
    spec = HpaSpec(min_replicas=0, max_replicas=6, metrics=(make_metric("Object", "qps", "Value", "15"),))
    assert first_sync(spec, 0, qps=20).current_replicas == 2
    exact = HpaSpec(min_replicas=0, max_replicas=6, metrics=(make_metric("Object", "qps", "Value", "1"),))
    assert first_sync(exact, 0, qps=1).current_replicas == 1


def test_upstream_scale_down_stabilize_initial_size() -> None:
    """horizontal_test.go TestScaleDownStabilizeInitialSize: 5 pods at 28 % vs 50 % would go to 3, but the
    controller's first sync records the current 5 as a recommendation, so the count stays 5 (docs/contracts.md#what-if-replay)."""
    spec = HpaSpec(min_replicas=2, max_replicas=6, metrics=(cpu(50),))
    assert first_sync(spec, 5, cpu=28) == HpaSync(0.0, 5, 5)


def test_upstream_one_metric_invalid() -> None:
    """horizontal_test.go TestScaleUpOneMetricInvalid (cpu 40 % vs 30 % and an unreadable metric: 3 → 4) and
    TestNoScaleDownOneMetricInvalid (cpu wants 3 of 5, another metric fails: no scale-down)."""
    unreadable = make_metric("Pods", "qps", "AverageValue", "1")
    up = HpaSpec(min_replicas=2, max_replicas=6, metrics=(cpu(30), unreadable))
    assert first_sync(up, 3, cpu=40).current_replicas == 4
    no_window = Behavior(scale_down=ScalingRules(0, "Max", DEFAULT_SCALE_DOWN_RULES.policies))
    down = HpaSpec(min_replicas=2, max_replicas=6, metrics=(cpu(50), unreadable), behavior=no_window)
    assert first_sync(down, 5, cpu=28).current_replicas == 5
    alone = HpaSpec(min_replicas=2, max_replicas=6, metrics=(cpu(50),), behavior=no_window)
    assert first_sync(alone, 5, cpu=28).current_replicas == 3  # the same spec without the failing metric


# --- horizontal_test.go / replica_calculator: proposals ------------------------------------------


def test_upstream_unready_pods() -> None:
    """horizontal_test.go TestScaleUpUnreadyLessScale (2 ready at 60 % vs 30 %, 1 unready → 4, not 6),
    TestScaleUpUnreadyNoScale (1 ready at 40 %, 2 unready: recomputed 13 % flips the direction → 3),
    TestScaleDownIncludeUnreadyPods (3 ready at 30 % vs 50 %, 2 unready → 2)."""
    assert utilization_replicas(3, 30, 60_000 * 2, PodGroups(2, unready=1), TOL) == 4
    assert utilization_replicas(3, 30, 40_000 * 1, PodGroups(1, unready=2), TOL) == 3
    assert utilization_replicas(5, 50, 30_000 * 3, PodGroups(3, unready=2), TOL) == 2


def test_upstream_missing_metrics() -> None:
    """horizontal_test.go TestMissingMetrics: 4 pods, 2 report 400m and 95m of 1 CPU (24 %) vs 100 %: on a
    scale-down the 2 without metrics count at 100 %, giving 62 % → 3."""
    assert utilization_replicas(4, 100, 40_000 + 9_500, PodGroups(2, missing=2), TOL) == 3


def test_upstream_scale_down_proposals() -> None:
    """horizontal_test.go TestScaleDown (28 % vs 50 % of 5 → 3), TestScaleDownCM (12 vs 20 → 3),
    TestScaleDownCMObject (12 vs 20 → 3), TestScaleDownPerPodCMObject (60 / 20 → 3), TestScaleDownCMExternal
    (8.6 vs 14.4 → 3), TestScaleDownPerPodCMExternal (8.6 / 3 → 3), TestScaleDownToZeroCMObject (0 → 0),
    TestMinReplicas (3 % vs 90 % → 1, then min 2)."""
    assert utilization_replicas(5, 50, 28_000 * 5, PodGroups(5), TOL) == 3
    assert plain_replicas(5, 20_000, 12_000 * 5, PodGroups(5), TOL) == 3
    assert value_replicas(5, 20_000, 12_000, 5, TOL) == 3
    assert average_value_replicas(5, 20_000, 60_000, TOL) == 3
    assert value_replicas(5, 14_400, 8_600, 5, TOL) == 3
    assert average_value_replicas(5, 3_000, 8_600, TOL) == 3
    assert value_replicas(5, 20_000, 0, 5, TOL) == 0
    assert convert_with_rules(5, 0, 0, 6) == 0
    assert utilization_replicas(3, 90, 3_000 * 3, PodGroups(3), TOL) == 1
    assert convert_with_rules(3, 1, 2, 5) == 2


# --- horizontal_test.go: normalization -------------------------------------------------------------


def test_upstream_convert_desired_replicas_with_rules() -> None:
    """horizontal_test.go TestConvertDesiredReplicasWithRules (with upstream's real scaleUpLimitFactor 2:
    the last case is calculateScaleUpLimit(3) = max(6, 4) = 6)."""
    assert convert_with_rules(5, 7, 3, 8) == 7
    assert convert_with_rules(3, 1, 2, 8) == 2
    assert convert_with_rules(1, 0, 0, 10) == 0
    assert convert_with_rules(20, 1000, 1, 10) == 10
    assert convert_with_rules(3, 1000, 1, 2000) == 6


def test_upstream_normalize_desired_replicas_legacy() -> None:
    """horizontal_test.go TestNormalizeDesiredReplicas (300 s window): "stabilize" 4@−2m, 5@−1m, 3 → 5;
    "no stabilize" 1, 2, 3 → 3; "no stabilize - old recommendations" 10@−10m, 9@−9m → 3;
    "stabilize - old recommendations" → 5."""
    minute = 60.0
    assert stabilize_legacy([TimedCount(NOW - 2 * minute, 4), TimedCount(NOW - minute, 5)], NOW, 3, 300) == 5
    assert stabilize_legacy([TimedCount(NOW - 2 * minute, 1), TimedCount(NOW - minute, 2)], NOW, 3, 300) == 3
    old = [TimedCount(NOW - 10 * minute, 10), TimedCount(NOW - 9 * minute, 9)]
    assert stabilize_legacy(old, NOW, 3, 300) == 3
    mixed = [*old, TimedCount(NOW - minute, 4), TimedCount(NOW - 2 * minute, 5)]
    assert stabilize_legacy(mixed, NOW, 3, 300) == 5


@pytest.mark.parametrize(
    ("name", "recommendations", "current", "desired", "up_window", "down_window", "expected"),
    [
        ("empty recommendations for scaling down", [], 100, 5, 0, 0, 5),
        ("simple scale down stabilization", [(-120, 4), (-60, 5)], 100, 3, 0, 180, 5),
        ("simple scale up stabilization", [(-120, 4), (-60, 5)], 1, 7, 300, 0, 4),
        ("no scale down stabilization", [(-120, 1), (-60, 2)], 100, 3, 300, 0, 3),
        ("no scale up stabilization", [(-120, 4), (-60, 5)], 1, 3, 0, 300, 3),
        ("no scale down stabilization, reuse recommendation element", [(-600, 10), (-540, 9)], 100, 3, 0, 0, 3),
        ("no scale up stabilization, reuse recommendation element", [(-600, 10), (-540, 9)], 1, 100, 0, 0, 100),
        (
            "scale down stabilization, reuse one of obsolete recommendation element",
            [(-600, 10), (-60, 4), (-120, 5), (-540, 9)],
            100,
            3,
            0,
            180,
            5,
        ),
        (
            "scale up stabilization, reuse one of obsolete recommendation element",
            [(-6000, 10), (-60, 6), (-120, 5), (-180, 9)],
            1,
            100,
            300,
            0,
            5,
        ),
    ],
)
def test_upstream_stabilize_with_behavior(
    name: str,
    recommendations: list[tuple[float, int]],
    current: int,
    desired: int,
    up_window: int,
    down_window: int,
    expected: int,
) -> None:
    """horizontal_test.go TestNormalizeDesiredReplicasWithBehavior (stabilizeRecommendationWithBehaviors)."""
    behavior = Behavior(
        scale_up=ScalingRules(up_window, "Max", DEFAULT_SCALE_UP_RULES.policies),
        scale_down=ScalingRules(down_window, "Max", DEFAULT_SCALE_DOWN_RULES.policies),
    )
    history = [TimedCount(NOW + offset, count) for offset, count in recommendations]
    assert stabilize_with_behavior(history, NOW, current, desired, behavior) == expected, name


SCALING_WITH_RULES = [
    # name, up events, down events, min, max, scale-up rules, scale-down rules, current, desired, expected
    ("scaleUp with default behavior", [], [], 1, 1000, None, None, 10, 50, 20),
    (
        "scaleUp with pods policy larger than percent policy",
        [],
        [],
        1,
        1000,
        rules(100, 60, 100, 60),
        None,
        10,
        500,
        110,
    ),
    ("scaleUp with percent policy larger than pods policy", [], [], 1, 1000, rules(2, 60, 100, 60), None, 10, 500, 20),
    ("scaleUp with pod policy limitation", [], [], 1, 1000, rules(30, 60), None, 10, 50, 40),
    ("scaleUp with percent policy limitation", [], [], 1, 1000, rules(0, 0, 200, 60), None, 10, 50, 30),
    (
        "scaleDown with percent policy larger than pod policy",
        [],
        [],
        1,
        1000,
        None,
        rules(20, 60, 1, 60, 300),
        100,
        2,
        80,
    ),
    (
        "scaleDown with pod policy larger than percent policy",
        [],
        [],
        1,
        1000,
        None,
        rules(2, 60, 1, 60, 300),
        100,
        2,
        98,
    ),
    (
        "scaleDown with spec MinReplicas limitation with large percent policy",
        [],
        [],
        5,
        1000,
        None,
        rules(0, 0, 100, 60, 300),
        10,
        2,
        5,
    ),
    (
        "scaleUp with currentReplicas limitation with rate.PeriodSeconds with a lot of recent scale up events",
        [1, 5, 9],
        [],
        1,
        1000,
        rules(5, 120),
        None,
        100,
        500,
        100,
    ),
    (
        "scaleUp with pod policy and previous scale up events",
        [1, 5, 9],
        [],
        1,
        1000,
        rules(150, 120),
        None,
        100,
        500,
        235,
    ),
    (
        "scaleUp with percent policy and previous scale up events",
        [1, 5, 9],
        [],
        1,
        1000,
        rules(0, 0, 200, 120),
        None,
        100,
        500,
        255,
    ),
    (
        "scaleDown with pod policy limitation and previous events",
        [],
        [1, 5, 9],
        1,
        1000,
        None,
        rules(5, 120, 0, 0, 300),
        100,
        2,
        100,
    ),
    (
        "scaleDown with percent policy limitation and previous events",
        [],
        [2, 4, 6],
        1,
        1000,
        None,
        rules(0, 0, 50, 120, 300),
        100,
        0,
        56,
    ),
    (
        "scaleDown with previous events preventing further scale down",
        [],
        [10, 10, 10],
        1,
        1000,
        None,
        rules(0, 0, 10, 120, 300),
        100,
        0,
        100,
    ),
    (
        "scaleDown with with previous events still allowing more scale down",
        [],
        [10, 10, 10],
        1,
        1000,
        None,
        rules(0, 0, 1000, 120, 300),
        10,
        5,
        5,
    ),
    (
        "check that events were not marked 'outdated' for two different policies in the behavior for up",
        [8, 12, 9, 11],
        [],
        1,
        1000,
        rules(1000, 120, 100, 60),
        None,
        100,
        200,
        200,
    ),
    (
        "scaleUp with spec MaxReplicas limitation with large pod policy and events",
        [1, 5, 9],
        [],
        1,
        200,
        rules(300, 60),
        None,
        100,
        500,
        200,
    ),
]


@pytest.mark.parametrize(
    ("name", "up", "down", "minimum", "maximum", "up_rules", "down_rules", "current", "desired", "expected"),
    SCALING_WITH_RULES,
)
def test_upstream_scaling_with_rules(
    name: str,
    up: list[int],
    down: list[int],
    minimum: int,
    maximum: int,
    up_rules: ScalingRules | None,
    down_rules: ScalingRules | None,
    current: int,
    desired: int,
    expected: int,
) -> None:
    """horizontal_test.go TestScalingWithRules (convertDesiredReplicasWithBehaviorRate; events spread over 120 s
    as generateEventsUniformDistribution does; unset rules take the API server's defaults)."""
    behavior = Behavior(up_rules or DEFAULT_SCALE_UP_RULES, down_rules or DEFAULT_SCALE_DOWN_RULES)
    up_events = uniform_events(up, 120) if up else []
    down_events = uniform_events(down, 120) if down else []
    result = convert_with_behavior_rate(current, desired, minimum, maximum, up_events, down_events, behavior, NOW)
    assert result == expected, name


def test_upstream_calculate_limits_with_min_select() -> None:
    """horizontal_test.go TestCalculateScaleUpLimitWithScalingRules (Min of Pods 2 and Percent 50 from 1 → 2) and
    TestCalculateScaleDownLimitWithBehaviors (Min from 5 → 3)."""
    min_rules = ScalingRules(300, "Min", (ScalingPolicy("Pods", 2, 60), ScalingPolicy("Percent", 50, 60)))
    assert scale_up_limit(1, [], [], min_rules, NOW) == 2
    assert scale_down_limit(5, [], [], min_rules, NOW) == 3


def test_upstream_replicas_changed_per_period() -> None:
    """horizontal_test.go TestStoreScaleEvents (getReplicasChangePerPeriod over 60 s): an event 61 s old is out,
    58 s old is in; 8@−29 s + 6@−59 s count 14, 7@−61 s and 9@−61 s do not."""
    assert replicas_changed_in_period([TimedCount(NOW - 61, 7)], NOW, 60) == 0
    assert replicas_changed_in_period([TimedCount(NOW - 58, 7)], NOW, 60) == 7
    assert replicas_changed_in_period([TimedCount(NOW - 61, 7), TimedCount(NOW - 59, 6)], NOW, 60) == 6
    events = [TimedCount(NOW - 29, 8), TimedCount(NOW - 59, 6), TimedCount(NOW - 61, 7), TimedCount(NOW - 61, 9)]
    assert replicas_changed_in_period(events, NOW, 60) == 14


# --- Replay semantics (docs/contracts.md#what-if-replay) ----------------------------------------------------------------


def test_first_sync_records_initial_recommendation_only_inside_a_window() -> None:
    """The initial count is a recommendation stamped 0: a 0 s scale-down window (0 > 0 − 0 is false) does not
    see it, so the first sync can already scale down; the legacy 300 s window does."""
    no_window = Behavior(scale_down=ScalingRules(0, "Max", DEFAULT_SCALE_DOWN_RULES.policies))
    spec = HpaSpec(min_replicas=2, max_replicas=6, metrics=(cpu(50),), behavior=no_window)
    assert first_sync(spec, 5, cpu=28) == HpaSync(0.0, 3, 3)


def test_window_edge_is_exclusive() -> None:
    """A recommendation stamped s is inside window W at sync t iff s > t − W: with a 60 s scale-down window,
    the recommendation of 10 stamped 0 still holds at t = 45 and is out at t = 60."""
    behavior = Behavior(scale_down=ScalingRules(60, "Max", DEFAULT_SCALE_DOWN_RULES.policies))
    spec = HpaSpec(max_replicas=20, metrics=(cpu(50),), behavior=behavior)
    syncs = replay_hpa(spec, {"cpu": [(0.0, 50.0), (10.0, 25.0)]}, 10, end=75.0)
    assert currents(syncs) == [10, 10, 10, 10, 5, 5]


def test_policy_period_edge_and_no_events_before_start() -> None:
    """No scale event exists before t = 0, so Pods 1 / 60 s allows +1 at t = 0; that event is inside the period
    at t = 45 (0 > −15) and out at t = 60 (0 > 0 is false)."""
    behavior = Behavior(scale_up=ScalingRules(0, "Max", (ScalingPolicy("Pods", 1, 60),)))
    spec = HpaSpec(max_replicas=20, metrics=(cpu(50),), behavior=behavior)
    syncs = replay_hpa(spec, {"cpu": [(0.0, 100.0)]}, 2, end=120.0)
    assert currents(syncs) == [3, 3, 3, 3, 4, 4, 4, 4, 5]


def test_legacy_scale_up_limit() -> None:
    """Without behavior a sync scales up to at most max(2 × current, 4): 1 → 4 → 8 → 16."""
    spec = HpaSpec(max_replicas=100, metrics=(cpu(10),))
    syncs = replay_hpa(spec, {"cpu": [(0.0, 1000.0)]}, 1, end=30.0)
    assert currents(syncs) == [4, 8, 16]
    assert [sync.desired_replicas for sync in syncs] == [4, 8, 16]


def test_pod_ready_delay_sets_new_cpu_pods_aside() -> None:
    """CPU at 100 % against 50 % from 2 pods: 2 → 4 at t = 0. The 2 new pods are unready until 60 s: the
    recomputed ratio (2 ready at 100 %, 2 at 0 %) is 1.0, so the count holds; at t = 60 they are ready → 8.
    Without a delay the second sync already goes to 8."""
    spec = HpaSpec(max_replicas=20, metrics=(cpu(50),), behavior=Behavior())
    series = {"cpu": [(0.0, 100.0)]}
    assert currents(replay_hpa(spec, series, 2, pod_ready_delay=60, end=60.0)) == [4, 4, 4, 4, 8]
    assert currents(replay_hpa(spec, series, 2, end=15.0)) == [4, 8]


def test_pod_ready_delay_counts_every_pod_outside_a_cpu_scale_up() -> None:
    """docs/contracts.md#what-if-replay: young pods are set aside for a CPU metric on scale-up only; otherwise all pods count.

    CPU at 100 % of 50 %, 2 → 4 at t = 0; at t = 15 utilization falls to 20 %: a scale-down that counts
    all 4 pods wants ceil(0.4 × 4) = 2 (upstream would count the 2 old pods only: ceil(0.4 × 2) = 1).
    An External Value metric at twice its target doubles the 4 pods at t = 15 although 2 are young."""
    no_wait = Behavior(scale_down=ScalingRules(0, "Max", DEFAULT_SCALE_DOWN_RULES.policies))
    spec = HpaSpec(max_replicas=20, metrics=(cpu(50),), behavior=no_wait)
    series = {"cpu": [(0.0, 100.0), (15.0, 20.0)]}
    assert currents(replay_hpa(spec, series, 2, pod_ready_delay=60, end=15.0)) == [4, 2]
    external = HpaSpec(max_replicas=20, metrics=(make_metric("External", "queue", "Value", "10"),), behavior=Behavior())
    syncs = replay_hpa(external, {"queue": [(0.0, 20.0)]}, 2, pod_ready_delay=60, end=15.0)
    assert currents(syncs) == [4, 8]


def test_per_pod_from_total_converges_on_total_over_target() -> None:
    """Closed loop: 10 requests in flight in total, 1 per pod wanted, pods ready after 60 s. New pods report
    nothing yet (missing: 0 on a scale-up), so the count settles at 10 instead of running away."""
    spec = HpaSpec(max_replicas=50, metrics=(make_metric("Pods", "running", "AverageValue", "1"),), behavior=Behavior())
    syncs = replay_hpa(spec, {"running": [(0.0, 10.0)]}, 2, pod_ready_delay=60, end=300.0, per_pod_from_total=True)
    assert currents(syncs)[:3] == [6, 10, 10]
    assert set(currents(syncs)[1:]) == {10}


def test_metric_without_sample_gives_no_proposal() -> None:
    """A metric with no sample at or before t cannot be computed: the count holds until the first sample;
    then 2 → 6 (+4 pods) and 6 → 12 (+100 %, the default scale-up policies)."""
    spec = HpaSpec(max_replicas=20, metrics=(make_metric("Pods", "qps", "AverageValue", "1"),), behavior=Behavior())
    syncs = replay_hpa(spec, {"qps": [(20.0, 4.0)]}, 2, end=45.0)
    assert currents(syncs) == [2, 2, 6, 12]


def test_non_finite_series_value_is_a_runbook_error() -> None:
    spec = HpaSpec(max_replicas=5, metrics=(cpu(50),))
    with pytest.raises(RunbookError, match="series cpu: value nan is not a finite number"):
        replay_hpa(spec, {"cpu": [(0.0, float("nan"))]}, 1)


def test_series_key() -> None:
    assert series_key(cpu(50)) == "cpu"
    assert series_key(make_metric("External", "queue_depth", "Value", "3")) == "queue_depth"


# --- hpa_spec_from_manifest ------------------------------------------------------------------------


def hpa_manifest(**spec: object) -> dict[str, object]:
    body: dict[str, object] = {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"}}
    body["maxReplicas"] = 10
    body.update(spec)
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "x"}, "spec": body}


def test_manifest_defaults() -> None:
    """API server defaults: minReplicas 1, a CPU 80 % metric when none, no behavior → legacy path."""
    spec = hpa_spec_from_manifest(hpa_manifest())
    assert spec == HpaSpec(max_replicas=10, min_replicas=1, metrics=(cpu(80),), behavior=None)


def test_manifest_partial_behavior_is_filled_field_by_field() -> None:
    """copyHPAScalingRules: set fields win; scaleDown's window comes from the controller's 300 s."""
    manifest = hpa_manifest(
        metrics=[
            {
                "type": "Pods",
                "pods": {
                    "metric": {"name": "vllm:num_requests_running"},
                    "target": {"type": "AverageValue", "averageValue": "8"},
                },
            },
            {
                "type": "External",
                "external": {"metric": {"name": "queue"}, "target": {"type": "Value", "value": "500m"}},
            },
        ],
        behavior={
            "scaleDown": {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]},
            "scaleUp": {"stabilizationWindowSeconds": 30, "tolerance": "50m"},
        },
    )
    spec = hpa_spec_from_manifest(manifest)
    assert spec.metrics == (
        MetricSpec("Pods", "vllm:num_requests_running", "AverageValue", 8000),
        MetricSpec("External", "queue", "Value", 500),
    )
    assert spec.behavior is not None
    assert spec.behavior.scale_down == ScalingRules(300, "Max", (ScalingPolicy("Pods", 1, 60),))
    assert spec.behavior.scale_up == ScalingRules(30, "Max", DEFAULT_SCALE_UP_RULES.policies, 0.05)
    assert spec.tolerances == Tolerances(scale_up=0.05, scale_down=0.1)


def test_manifest_v1_maps_to_cpu_utilization() -> None:
    manifest = {
        "apiVersion": "autoscaling/v1",
        "kind": "HorizontalPodAutoscaler",
        "spec": {"maxReplicas": 4, "minReplicas": 2, "targetCPUUtilizationPercentage": 60},
    }
    assert hpa_spec_from_manifest(manifest) == HpaSpec(max_replicas=4, min_replicas=2, metrics=(cpu(60),))


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        ({**hpa_manifest(), "kind": "Deployment"}, "kind is 'Deployment'"),
        ({**hpa_manifest(), "apiVersion": "autoscaling/v2beta1"}, "autoscaling/v2beta1"),
        (hpa_manifest(maxReplicas=None), "spec.maxReplicas is required"),
        (hpa_manifest(minReplicas=11), "minReplicas must be between"),
        (hpa_manifest(minReplicas=0), "minReplicas 0 needs"),
        (
            hpa_manifest(metrics=[{"type": "ContainerResource", "containerResource": {}}]),
            "ContainerResource metrics are not modeled",
        ),
        (
            hpa_manifest(
                metrics=[
                    {
                        "type": "Pods",
                        "pods": {"metric": {"name": "q"}, "target": {"type": "Utilization", "averageUtilization": 5}},
                    }
                ]
            ),
            "target type Utilization is not allowed",
        ),
        (
            hpa_manifest(
                metrics=[{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization"}}}]
            ),
            "needs target.averageUtilization",
        ),
        (
            hpa_manifest(
                metrics=[
                    {
                        "type": "Resource",
                        "resource": {"name": "cpu", "target": {"type": "AverageValue", "averageValue": "lots"}},
                    }
                ]
            ),
            "is not a Kubernetes quantity",
        ),
        (hpa_manifest(behavior={"scaleDown": {"policies": []}}), "at least one policy"),
        (
            hpa_manifest(behavior={"scaleUp": {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 0}]}}),
            "periodSeconds must be between 1 and 1800",
        ),
        (hpa_manifest(behavior={"scaleUp": {"selectPolicy": "Fastest"}}), "selectPolicy must be Max, Min or Disabled"),
        (hpa_manifest(behavior={"scaleUp": {"stabilizationWindowSeconds": 4000}}), "between 0 and 3600"),
        (hpa_manifest(behavior={"scaleDown": {"tolerance": "-1"}}), "tolerance must be 0 or more"),
    ],
)
def test_manifest_errors(manifest: dict[str, object], message: str) -> None:
    with pytest.raises(RunbookError, match=message):
        hpa_spec_from_manifest(manifest)
