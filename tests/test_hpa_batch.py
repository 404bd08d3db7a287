"""The fast path (nbhelpers.models.hpa_batch) must equal the reference replay (nbhelpers.models.hpa) sync by sync.

Specs and series are drawn from seeded generators: every metric kind the fast path takes, legacy and
behavior paths (windows, Pods/Percent policies, Max/Min/Disabled, per-direction tolerances), ready
delays, closed-loop totals, series that start late, and values with fractional milli-units.
"""

from __future__ import annotations

import itertools
import math
import random

import pytest

from nbhelpers.errors import RunbookError
from nbhelpers.models.hpa import (
    Behavior,
    HpaSpec,
    MetricSpec,
    ScalingPolicy,
    ScalingRules,
    make_metric,
    replay_hpa,
)
from nbhelpers.models.hpa_batch import replay_hpa_batch, unsupported_reason

Series = dict[str, list[tuple[float, float]]]

METRICS = [
    MetricSpec("Resource", "cpu", "Utilization", 50),
    MetricSpec("Resource", "cpu", "Utilization", 80),
    MetricSpec("Resource", "cpu", "Utilization", 150),
    MetricSpec("Resource", "cpu", "AverageValue", 500),
    MetricSpec("Resource", "memory", "Utilization", 70),
    MetricSpec("Resource", "memory", "AverageValue", 2000),
    MetricSpec("Pods", "running", "AverageValue", 1000),
    MetricSpec("Pods", "running", "AverageValue", 4500),
    MetricSpec("Object", "total", "Value", 3000),
    MetricSpec("Object", "total", "AverageValue", 1500),
    MetricSpec("External", "total", "Value", 8000),
    MetricSpec("External", "total", "AverageValue", 2500),
]
SCALES = {"cpu": 120.0, "memory": 100.0, "running": 6.0, "total": 25.0}


def random_rules(rng: random.Random, *, up: bool) -> ScalingRules:
    policies = tuple(
        ScalingPolicy(
            rng.choice(["Pods", "Percent"]),
            rng.choice([1, 2, 4, 10, 25, 50, 100, 300]),
            rng.choice([15, 30, 45, 60, 120, 600]),
        )
        for _ in range(rng.randint(1, 3))
    )
    window = rng.choice([0, 0, 30, 60, 300]) if up else rng.choice([0, 45, 60, 120, 300, 600])
    select = rng.choice(["Max", "Max", "Min", "Disabled"])
    return ScalingRules(window, select, policies, rng.choice([None, None, 0.0, 0.05, 0.25]))


def random_spec(rng: random.Random) -> HpaSpec:
    minimum = rng.randint(1, 4)
    behavior = None if rng.random() < 0.3 else Behavior(random_rules(rng, up=True), random_rules(rng, up=False))
    return HpaSpec(
        max_replicas=rng.randint(minimum, 40),
        min_replicas=minimum,
        metrics=(rng.choice(METRICS),),
        behavior=behavior,
    )


def random_series(rng: random.Random, duration: float) -> Series:
    series: Series = {}
    for key, scale in SCALES.items():
        t = rng.choice([0.0, 0.0, 7.0, 40.0])  # some metrics have no sample at the first syncs
        value = rng.random() * scale
        samples = []
        while t <= duration:
            value = max(0.0, value + rng.gauss(0.0, scale / 4))
            samples.append((t, round(value, rng.choice([0, 1, 3, 4]))))
            t += rng.choice([5.0, 10.0, 15.0, 20.0, 60.0])
        series[key] = samples
    return series


@pytest.mark.parametrize("seed", range(60))
def test_batch_equals_reference_on_random_specs(seed: int) -> None:
    rng = random.Random(seed)
    specs = [random_spec(rng) for _ in range(10)]
    series = random_series(rng, rng.choice([300.0, 900.0, 1800.0]))
    options = {
        "pod_ready_delay": rng.choice([0.0, 0.0, 15.0, 20.0, 45.0, 120.0]),
        "per_pod_from_total": rng.random() < 0.5,
        "sync_period": rng.choice([15.0, 15.0, 10.0, 30.0]),
    }
    initial = rng.randint(0, 15)
    batch = replay_hpa_batch(specs, series, initial, **options)  # type: ignore[arg-type]
    for index, spec in enumerate(specs):
        assert batch.syncs(index) == replay_hpa(spec, series, initial, **options), (seed, index, spec)  # type: ignore[arg-type]


def test_batch_equals_reference_past_the_history_ring() -> None:
    """Two hours with 3600 s windows and 1800 s policy periods: the history rings wrap many times."""
    long_down = ScalingRules(3600, "Max", (ScalingPolicy("Pods", 2, 1800), ScalingPolicy("Percent", 10, 900)))
    long_up = ScalingRules(1200, "Min", (ScalingPolicy("Pods", 3, 1800), ScalingPolicy("Percent", 50, 600)))
    specs = [
        HpaSpec(max_replicas=60, metrics=(make_metric("Pods", "running", "AverageValue", "2"),), behavior=b)
        for b in (Behavior(long_up, long_down), Behavior(scale_down=long_down), None)
    ]
    series = {"running": [(t * 15.0, 40.0 + 36.0 * math.sin(t / 25.0)) for t in range(480)]}
    batch = replay_hpa_batch(specs, series, 4, pod_ready_delay=300.0, per_pod_from_total=True)
    changes = 0
    for index, spec in enumerate(specs):
        reference = replay_hpa(spec, series, 4, pod_ready_delay=300.0, per_pod_from_total=True)
        assert batch.syncs(index) == reference
        changes += sum(a.current_replicas != b.current_replicas for a, b in itertools.pairwise(reference))
    assert changes > 30  # the replay moved: the comparison covered scale-ups and scale-downs


def test_batch_rejects_what_it_does_not_model() -> None:
    two_metrics = HpaSpec(max_replicas=5, metrics=(MetricSpec("Resource", "cpu", "Utilization", 50),) * 2)
    to_zero = HpaSpec(max_replicas=5, min_replicas=0, metrics=(make_metric("External", "q", "Value", "1"),))
    assert unsupported_reason(two_metrics) is not None
    assert unsupported_reason(to_zero) is not None
    with pytest.raises(RunbookError, match="spec 1 cannot take the fast path"):
        replay_hpa_batch([to_zero.__class__(max_replicas=5), two_metrics], {"cpu": [(0.0, 1.0)]}, 1)
    with pytest.raises(RunbookError, match="whole seconds"):
        replay_hpa_batch([HpaSpec(max_replicas=5)], {"cpu": [(0.0, 1.0)]}, 1, sync_period=7.5)
