"""Which regime a vLLM service was in: capacity, KV-cache pressure, GPU OOM, or a configuration that
cannot fit one request. Pure arithmetic on numbers the check has already read; no evidence objects.

The queue criteria, and why:

- **Pinned.** A pod is at its ceiling when ``running >= 95 %`` of the ``--max-num-seqs`` in effect:
  vLLM's scheduler admits a waiting request only below that ceiling, so running a little under it
  (requests finishing between two scrapes) still means "full".
- **Sustained.** One scrape with requests waiting is normal batching: a burst arrives between two
  scheduler steps and drains in the next ones. A queue counts only when every consecutive sample
  for at least :data:`MIN_EPISODE_SECONDS` (and at least :data:`MIN_EPISODE_SAMPLES` samples) shows
  it. Two minutes is longer than an HPA sync (15 s) plus a KPA stable window (60 s): a queue that
  outlives it is one the autoscaler did not absorb.
- **Felt.** A short steady queue at the ceiling of a busy service (a few requests waiting a fraction
  of a second) is the service working as sized. Saturation is reported only when the queue is deep
  (at least :func:`deep_queue` requests, i.e. more than the slack one scheduler step clears), or
  requests waited :data:`SLOW_QUEUE_SECONDS` or more (queue-time p95), or 503/504 answers were
  counted during the episode.
- **KV pressure.** KV-cache usage is a 0-1 fraction. At :data:`KV_FULL` or more for a sustained
  episode, with preemptions counted during it (vLLM evicted running requests to make room), or
  with requests waiting while running stays below the ceiling (admission blocked by the cache,
  not by ``--max-num-seqs``). High usage without either is a full but working cache: not reported.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

PINNED = 0.95
KV_FULL = 0.95
MIN_EPISODE_SECONDS = 120.0
MIN_EPISODE_SAMPLES = 3
SLOW_QUEUE_SECONDS = 1.0
DEEP_QUEUE_MIN = 2.0
DEEP_QUEUE_FRACTION = 0.05
OVER_CEILING = 1.05  # running above the configured ceiling by more than this: the ceiling did not apply

Series = Sequence[tuple[float, float]]  # (unix seconds, value)


class Regime(str, enum.Enum):
    CANNOT_FIT = "configuration that cannot fit"
    GPU_OOM = "GPU out of memory"
    KV_PRESSURE = "KV-cache pressure"
    CAPACITY = "capacity"
    HEALTHY = "healthy"


@dataclass(frozen=True)
class PodSample:
    """One scrape of one pod: requests running and waiting, KV usage (0-1, None when not scraped)."""

    t: float
    running: float
    waiting: float
    kv_usage: float | None = None


@dataclass(frozen=True)
class Episode:
    """Consecutive samples of one pod that meet a criterion."""

    pod: str
    start: float
    end: float  # time of the last sample in the episode
    samples: int
    step: float
    peak_waiting: float
    peak_running: float
    peak_kv: float | None

    @property
    def seconds(self) -> float:
        """How long the condition held: each sample stands for one step."""
        return self.samples * self.step

    def overlaps(self, t: float, slack: float) -> bool:
        return self.start <= t <= self.end + slack


@dataclass(frozen=True)
class QueueFacts:
    """What the check read, as numbers."""

    step: float
    rate_range: float  # seconds a rate() sample looks back: a counter step shows up until then
    pods: Mapping[str, Sequence[PodSample]]
    ceiling: float | None  # --max-num-seqs in effect per pod; None when unknown
    preemptions: Series = ()  # preemptions per second, all pods
    queue_time_p95: Series = ()
    failed_requests: Series = ()  # 503 and 504 answers per second at the edge
    # The ceiling of pods whose workload sets its own (an LLMInferenceService's prefill and decode roles), by pod.
    pod_ceilings: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Saturation:
    episode: Episode
    ceiling: float
    deep: bool
    queue_time_peak: float | None
    failed: float  # 503/504 answers counted during the episode

    @property
    def felt(self) -> bool:
        slow = self.queue_time_peak is not None and self.queue_time_peak >= SLOW_QUEUE_SECONDS
        return self.deep or slow or self.failed >= 1


@dataclass(frozen=True)
class KvPressure:
    episode: Episode
    preemptions: float  # preemptions counted during the episode
    blocked_queue: bool  # requests waited while running stayed below the ceiling


@dataclass(frozen=True)
class QueueAnalysis:
    ceiling: float | None
    saturations: tuple[Saturation, ...]
    kv_pressures: tuple[KvPressure, ...]
    short_queues: int  # episodes with requests waiting that drained before counting as sustained

    @property
    def saturated(self) -> tuple[Saturation, ...]:
        return tuple(s for s in self.saturations if s.felt)


def deep_queue(ceiling: float) -> float:
    """Requests waiting that one scheduler step cannot be expected to clear."""
    return max(DEEP_QUEUE_MIN, DEEP_QUEUE_FRACTION * ceiling)


def min_episode_seconds(step: float) -> float:
    return max(MIN_EPISODE_SECONDS, MIN_EPISODE_SAMPLES * step)


def episodes(pod: str, samples: Sequence[PodSample], step: float, keep: Callable[[PodSample], bool]) -> list[Episode]:
    """Runs of consecutive samples that satisfy ``keep``; a gap of more than 1.5 steps ends a run."""
    found: list[Episode] = []
    run: list[PodSample] = []

    def close() -> None:
        if run:
            kv_values = [s.kv_usage for s in run if s.kv_usage is not None]
            found.append(
                Episode(
                    pod,
                    run[0].t,
                    run[-1].t,
                    len(run),
                    step,
                    max(s.waiting for s in run),
                    max(s.running for s in run),
                    max(kv_values) if kv_values else None,
                )
            )
            run.clear()

    for sample in sorted(samples, key=lambda s: s.t):
        if run and sample.t - run[-1].t > 1.5 * step:
            close()
        if keep(sample):
            run.append(sample)
        else:
            close()
    close()
    return found


def plateau(samples: Sequence[PodSample], step: float) -> float | None:
    """The running level a pod held at its top for a sustained time: the observed ceiling, or None.

    Samples with a full KV cache are left out: there the cache, not ``--max-num-seqs``, held running down.
    """
    samples = [s for s in samples if s.kv_usage is None or s.kv_usage < KV_FULL]
    values = [s.running for s in samples if math.isfinite(s.running)]
    if not values or max(values) < 1:
        return None
    top = max(values)
    held = episodes("", samples, step, lambda s: s.running >= PINNED * top)
    return top if any(e.seconds >= min_episode_seconds(step) for e in held) else None


def pod_ceiling(samples: Sequence[PodSample], configured: float | None, step: float) -> float | None:
    """The configured ceiling, unless the pod ran clearly above it (the window saw other flags, or more engines
    per pod): then, as when nothing is configured, the observed plateau."""
    peak = max((s.running for s in samples), default=0.0)
    if configured is not None and peak <= configured * OVER_CEILING:
        return configured
    return plateau(samples, step)


def _during(series: Series, episode: Episode, slack: float) -> list[float]:
    return [value for t, value in series if episode.overlaps(t, slack) and math.isfinite(value)]


def _count(series: Series, episode: Episode, slack: float) -> float:
    """Events in the episode from a per-second rate: each sample stands for one step."""
    return sum(max(0.0, value) for value in _during(series, episode, slack)) * episode.step


def count_during(series: Series, spans: Sequence[Episode], slack: float) -> float:
    """Events from a per-second rate while any of ``spans`` lasted (overlapping episodes counted once)."""
    if not spans:
        return 0.0
    step = spans[0].step
    inside = [max(0.0, v) for t, v in series if math.isfinite(v) and any(e.overlaps(t, slack) for e in spans)]
    return sum(inside) * step


def analyse(facts: QueueFacts) -> QueueAnalysis:
    saturations: list[Saturation] = []
    pressures: list[KvPressure] = []
    short = 0
    needed = min_episode_seconds(facts.step)
    slack = facts.rate_range
    ceilings = {
        pod: pod_ceiling(samples, facts.pod_ceilings.get(pod, facts.ceiling), facts.step)
        for pod, samples in facts.pods.items()
    }
    for pod, samples in sorted(facts.pods.items()):
        ceiling = ceilings[pod]
        queued = episodes(pod, samples, facts.step, lambda s: s.waiting >= 1)
        short += sum(1 for e in queued if e.seconds < needed)
        if ceiling is not None:
            for episode in episodes(pod, samples, facts.step, _pinned_with_queue(ceiling)):
                if episode.seconds < needed:
                    continue
                queue_times = _during(facts.queue_time_p95, episode, 0.0)
                saturations.append(
                    Saturation(
                        episode,
                        ceiling,
                        episode.peak_waiting >= deep_queue(ceiling),
                        max(queue_times) if queue_times else None,
                        _count(facts.failed_requests, episode, slack),
                    )
                )
        full = episodes(pod, samples, facts.step, lambda s: s.kv_usage is not None and s.kv_usage >= KV_FULL)
        for episode in full:
            if episode.seconds < needed:
                continue
            preempted = _count(facts.preemptions, episode, slack)
            blocked = _blocked_queue(samples, episode, ceiling, needed)
            if preempted >= 1 or blocked:
                pressures.append(KvPressure(episode, preempted, blocked))
    return QueueAnalysis(facts.ceiling, tuple(saturations), tuple(pressures), short)


def _pinned_with_queue(ceiling: float) -> Callable[[PodSample], bool]:
    def pinned(sample: PodSample) -> bool:
        return sample.waiting >= 1 and sample.running >= PINNED * ceiling

    return pinned


def _blocked_queue(samples: Sequence[PodSample], full: Episode, ceiling: float | None, needed: float) -> bool:
    """Inside a full-cache episode, requests waited for a sustained time while running stayed under the ceiling."""

    def blocked(sample: PodSample) -> bool:
        below = ceiling is None or sample.running < PINNED * ceiling
        return full.start <= sample.t <= full.end and sample.waiting >= 1 and below

    return any(e.seconds >= needed for e in episodes(full.pod, samples, full.step, blocked))


def decide(analysis: QueueAnalysis | None, gpu_oom: bool, cannot_fit: bool) -> tuple[Regime, ...]:
    """The regimes present, the one that explains the others first.

    A configuration that cannot fit one request never serves, so it explains everything; a GPU that
    runs out of memory crashes the engine, which then cannot queue or preempt; KV pressure makes
    requests wait below the ceiling; capacity is what remains when requests wait at the ceiling.
    """
    regimes = []
    if cannot_fit:
        regimes.append(Regime.CANNOT_FIT)
    if gpu_oom:
        regimes.append(Regime.GPU_OOM)
    if analysis is not None and analysis.kv_pressures:
        regimes.append(Regime.KV_PRESSURE)
    if analysis is not None and analysis.saturated:
        regimes.append(Regime.CAPACITY)
    return tuple(regimes) or (Regime.HEALTHY,)


def explain(regimes: Sequence[Regime]) -> str:
    """One sentence per regime: what it means and which way the fix goes."""
    texts = {
        Regime.CANNOT_FIT: "the KV cache cannot hold one request of --max-model-len, so the engine refuses to "
        "start: lower --max-model-len or give the cache more memory",
        Regime.GPU_OOM: "the GPU ran out of memory and the engine crashed: choose flags (or GPUs) that fit the card",
        Regime.KV_PRESSURE: "the KV cache was full and vLLM preempted or held back requests: lower --max-num-seqs "
        "or --max-model-len, or give the cache more memory",
        Regime.CAPACITY: "requests queued while every pod ran at its concurrency ceiling: add replicas, or raise "
        "--max-num-seqs where the KV cache has room",
        Regime.HEALTHY: "no sustained queue at the ceiling, no KV pressure and no GPU out-of-memory in the window",
    }
    return "; ".join(f"{regime.value}: {texts[regime]}" for regime in regimes)
