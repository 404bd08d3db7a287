"""The regime arithmetic: sustained queues at the ceiling, plateaus, KV pressure, and the regime order."""

from __future__ import annotations

import pytest

from nbhelpers.models import regime
from nbhelpers.models.regime import PodSample, QueueFacts, Regime

STEP = 15.0


def _samples(running: list[float], waiting: list[float], kv: list[float] | None = None) -> list[PodSample]:
    usage = kv or [None] * len(running)  # type: ignore[list-item]
    return [PodSample(i * STEP, r, w, k) for i, (r, w, k) in enumerate(zip(running, waiting, usage, strict=True))]


def _facts(samples: list[PodSample], ceiling: float | None, **series: list[tuple[float, float]]) -> QueueFacts:
    return QueueFacts(step=STEP, rate_range=60.0, pods={"p": samples}, ceiling=ceiling, **series)  # type: ignore[arg-type]


def test_episodes_split_on_a_failing_sample_and_on_a_gap() -> None:
    samples = _samples([64] * 6, [0, 3, 4, 0, 5, 6])
    samples.append(PodSample(20 * STEP, 64, 7))  # after a gap of 14 steps
    found = regime.episodes("p", samples, STEP, lambda s: s.waiting >= 1)
    assert [(e.start, e.end, e.samples, e.peak_waiting) for e in found] == [
        (15.0, 30.0, 2, 4.0),
        (60.0, 75.0, 2, 6.0),
        (300.0, 300.0, 1, 7.0),
    ]
    assert found[0].seconds == 30.0


def test_sustained_deep_queue_at_the_ceiling_is_saturation() -> None:
    # Two minutes at 15 s are eight samples: waiting grows from 3 to 24 while running sits at 63-64 of 64.
    running = [40.0] * 4 + [63.0, 64.0] * 5 + [40.0] * 4
    waiting = [0.0] * 4 + [3.0, 5.0, 8.0, 10.0, 12.0, 15.0, 18.0, 20.0, 22.0, 24.0] + [0.0] * 4
    analysis = regime.analyse(_facts(_samples(running, waiting), 64))
    assert len(analysis.saturated) == 1
    saturation = analysis.saturated[0]
    assert saturation.episode.samples == 10 and saturation.episode.peak_waiting == 24
    assert saturation.deep and saturation.ceiling == 64
    assert regime.decide(analysis, gpu_oom=False, cannot_fit=False) == (Regime.CAPACITY,)


def test_a_queue_that_drains_within_two_minutes_is_not_sustained() -> None:
    running = [64.0] * 12
    waiting = [0.0, 30.0, 28.0, 12.0, 2.0, 0.0, 0.0, 25.0, 9.0, 0.0, 0.0, 0.0]
    analysis = regime.analyse(_facts(_samples(running, waiting), 64))
    assert analysis.saturations == ()
    assert analysis.short_queues == 2
    assert regime.decide(analysis, False, False) == (Regime.HEALTHY,)


def test_a_short_steady_queue_at_the_ceiling_is_not_felt_unless_slow_or_failing() -> None:
    running = [63.0, 64.0] * 10
    waiting = [1.0, 2.0] * 10
    quiet = regime.analyse(_facts(_samples(running, waiting), 64, queue_time_p95=[(i * STEP, 0.3) for i in range(20)]))
    assert len(quiet.saturations) == 1 and quiet.saturated == ()
    slow = regime.analyse(_facts(_samples(running, waiting), 64, queue_time_p95=[(i * STEP, 2.5) for i in range(20)]))
    assert slow.saturated and slow.saturated[0].queue_time_peak == 2.5
    failing = regime.analyse(_facts(_samples(running, waiting), 64, failed_requests=[(5 * STEP, 0.4)]))
    # One sample at 0.4/s stands for one 15 s step: six answers.
    assert failing.saturated and failing.saturated[0].failed == 6.0


def test_deep_queue_threshold_scales_with_the_ceiling() -> None:
    assert regime.deep_queue(16) == 2.0
    assert regime.deep_queue(256) == 12.8


def test_the_plateau_stands_in_for_an_unknown_ceiling() -> None:
    running = [10.0, 30.0, 48.0, 47.0, 48.0, 48.0, 47.0, 48.0, 48.0, 48.0, 47.0, 48.0]
    waiting = [0.0, 0.0, 6.0, 9.0, 12.0, 14.0, 15.0, 15.0, 16.0, 17.0, 18.0, 19.0]
    samples = _samples(running, waiting, [0.6] * 12)
    assert regime.plateau(samples, STEP) == 48.0
    analysis = regime.analyse(_facts(samples, None))
    assert [s.ceiling for s in analysis.saturated] == [48.0]


def test_a_peak_that_is_not_held_is_no_plateau() -> None:
    samples = _samples([10.0, 48.0, 12.0, 11.0, 9.0, 10.0, 12.0, 10.0, 11.0], [0.0] * 9)
    assert regime.plateau(samples, STEP) is None


def test_running_above_the_configured_ceiling_falls_back_to_the_plateau() -> None:
    samples = _samples([48.0] * 10, [8.0] * 10, [0.6] * 10)
    assert regime.pod_ceiling(samples, 40, STEP) == 48.0
    assert regime.pod_ceiling(samples, 64, STEP) == 64


def test_full_cache_with_preemptions_is_kv_pressure_not_capacity() -> None:
    # Running stalls at 48 (ceiling 64) because the cache is full; vLLM preempts about 0.3 per second.
    samples = _samples([48.0] * 12, [0.0, 0.0] + [8.0] * 10, [0.97] * 12)
    preemptions = [(i * STEP, 0.3) for i in range(12)]
    analysis = regime.analyse(_facts(samples, 64, preemptions=preemptions))
    assert analysis.saturated == ()
    assert len(analysis.kv_pressures) == 1
    pressure = analysis.kv_pressures[0]
    assert pressure.preemptions == pytest.approx(0.3 * 12 * STEP)
    assert pressure.blocked_queue
    assert regime.decide(analysis, False, False) == (Regime.KV_PRESSURE,)


def test_full_cache_under_an_unknown_ceiling_is_not_read_as_a_plateau() -> None:
    samples = _samples([24.0] * 12, [6.0] * 12, [0.99] * 12)
    analysis = regime.analyse(_facts(samples, None))
    assert analysis.saturations == ()
    assert len(analysis.kv_pressures) == 1 and analysis.kv_pressures[0].blocked_queue


def test_full_cache_without_preemptions_or_queue_is_fine() -> None:
    samples = _samples([40.0] * 12, [0.0] * 12, [0.98] * 12)
    analysis = regime.analyse(_facts(samples, 64, preemptions=[(i * STEP, 0.0) for i in range(12)]))
    assert analysis.kv_pressures == ()


def test_regimes_are_ordered_cause_first() -> None:
    running = [64.0] * 10
    analysis = regime.analyse(_facts(_samples(running, [20.0] * 10, [0.99] * 10), 64, preemptions=[(0.0, 1.0)]))
    assert regime.decide(analysis, gpu_oom=True, cannot_fit=True) == (
        Regime.CANNOT_FIT,
        Regime.GPU_OOM,
        Regime.KV_PRESSURE,
        Regime.CAPACITY,
    )
    assert "add replicas" in regime.explain([Regime.CAPACITY])
    assert regime.decide(None, False, False) == (Regime.HEALTHY,)
