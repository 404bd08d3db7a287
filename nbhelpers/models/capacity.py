"""Pod capacity, demand and a fluid queue: what a replica timeline does to the requests (pure math, no I/O).

**Capacity.** One pod runs at most ``concurrency`` requests at once (vLLM's running-request ceiling) and, with
its batch full, completes ``throughput`` requests per second; a request then spends
``service_seconds = concurrency / throughput`` in the engine (Little's law on the running requests).

**Fluid queue.** Time advances in small steps. Arrivals join the requests in the system; the ready pods run up
to ``ready × concurrency`` of them and finish the running ones at ``running / service_seconds`` per second; the
rest wait. A request that arrives while ``waiting`` requests are ahead of it starts once the ready pods have
finished that many (first come, first served): its queueing delay is the time the cumulative capacity
``∫ ready(t) × throughput dt`` takes to grow by ``waiting`` (with a constant capacity, ``waiting / (ready ×
throughput)``: Little's law for the queue), and at least until a pod is ready at all. A request whose delay
plus service time would exceed the timeout gives up: it is counted as timed out, waits (and is counted as
waiting, as an autoscaler or Knative's activator sees it) until its timeout, then leaves; since its client
closed the connection (vLLM aborts a request whose client went away), it takes no capacity from the others.
A request that would take longer than the timeout even without waiting is a latency problem for the timeouts
step, not a queueing one, and is not counted.

**Recommendations** (all numbers come from the incident):
- ``maxReplicas``: the peak demand over what a pod completes at ``TARGET_FRACTION`` of its capacity.
- ``minReplicas``: a new pod serves only after one cold start, so the pods already running must carry the
  steepest rise of demand seen within one cold start: the demand reached at the end of that rise over a pod's
  full throughput.
- per-pod target: ``TARGET_FRACTION`` of the concurrency ceiling on a concurrency metric, so the autoscaler
  adds a pod before the engine saturates.
- HPA scale-up behavior: no stabilization and a Pods policy as large as the burst in pods, when the current
  rules are slower than that.
"""

from __future__ import annotations

import bisect
import collections
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nbhelpers.metrics.series import SamplePairs
from nbhelpers.models.hpa import HPA_DEFAULT_SCALE_UP
from nbhelpers.models.kpa import (
    KNATIVE_METRIC_ANNOTATION,
    KNATIVE_TARGET_ANNOTATION,
    KNATIVE_UTILIZATION_DEFAULT,
    KNATIVE_WINDOW_ANNOTATION,
)

# Pods are sized to run at this fraction of their capacity: room for the autoscaler's reaction and the HPA's
# 10 % tolerance (the same fraction the scale_target step recommends targets with).
TARGET_FRACTION = 0.8


# --- capacity -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodCapacity:
    """What one pod serves, and how each number was found."""

    concurrency: float
    concurrency_origin: str
    throughput: float  # completed requests per second with the batch full
    throughput_origin: str
    tokens_per_second: float | None = None  # generated tokens per second with the batch full
    saturated: bool = True  # the throughput was measured on saturated pods (else estimated)

    @property
    def service_seconds(self) -> float:
        """Seconds a request spends in the engine with the batch full (Little's law)."""
        return self.concurrency / self.throughput

    def describe(self) -> str:
        tokens = f", {self.tokens_per_second:,.0f} generated tokens/s" if self.tokens_per_second else ""
        return (
            f"one pod runs {self.concurrency:g} requests at once ({self.concurrency_origin}) and completes "
            f"{self.throughput:.2f} requests/s{tokens} ({self.throughput_origin}); a request takes "
            f"{self.service_seconds:.1f} s in the engine"
        )


def saturated_times(
    running: Mapping[str, Mapping[float, float]], waiting: Mapping[str, Mapping[float, float]]
) -> dict[float, int]:
    """Times at which every pod that reported running requests also had requests waiting: {t: pods}."""
    pods_at: dict[float, list[str]] = {}
    for pod, samples in running.items():
        for moment in samples:
            pods_at.setdefault(moment, []).append(pod)
    found = {}
    for moment, pods in pods_at.items():
        if pods and all(waiting.get(pod, {}).get(moment, 0.0) > 0 for pod in pods):
            found[moment] = len(pods)
    return found


def saturated_concurrency(
    running: Mapping[str, Mapping[float, float]],
    waiting: Mapping[str, Mapping[float, float]],
    saturated: Mapping[float, int] | None = None,
) -> float | None:
    """The most requests a pod ran at a moment when every pod had requests waiting (:func:`saturated_times`):
    what a pod really holds at once, which the KV cache may keep below the request ceiling. None without any
    such moment."""
    moments = saturated_times(running, waiting) if saturated is None else saturated
    values = [running[pod][moment] for pod in running for moment in running[pod] if moment in moments]
    return max(values) if values else None


def measure_capacity(
    running: Mapping[str, Mapping[float, float]],
    waiting: Mapping[str, Mapping[float, float]],
    completions: Mapping[float, float],
    generated_tokens: Mapping[float, float],
    ceiling: float | None,
    ceiling_origin: str,
) -> PodCapacity | None:
    """A pod's capacity from the incident's vLLM series (per pod running / waiting; summed completion and token
    rates) and the request ceiling in effect (None when unknown).

    With saturated samples (every pod with requests waiting) the throughput is the median completion rate per
    pod there, and the concurrency the most requests a pod ran while requests waited. Without any, the
    concurrency is the ceiling and the throughput is estimated: Little's law on the running requests and the
    completions gives the time a request takes, and a full batch is taken to finish ``ceiling`` requests in that
    time (an upper bound: a fuller batch runs each request slower). None when nothing can be measured.
    """
    saturated = saturated_times(running, waiting)
    per_pod_rates = sorted(
        completions[moment] / pods for moment, pods in saturated.items() if completions.get(moment, 0.0) > 0
    )
    plateau = saturated_concurrency(running, waiting, saturated)
    if per_pod_rates and plateau is not None:
        token_rates = sorted(
            generated_tokens[moment] / pods for moment, pods in saturated.items() if generated_tokens.get(moment)
        )
        return PodCapacity(
            concurrency=plateau,
            concurrency_origin="the most requests a pod ran while requests waited",
            throughput=_median(per_pod_rates),
            throughput_origin=f"median completions per pod over {len(per_pod_rates)} samples with every pod saturated",
            tokens_per_second=_median(token_rates) if token_rates else None,
            saturated=True,
        )
    if ceiling is None or ceiling <= 0:
        return None
    totals: dict[float, float] = {}
    for samples in running.values():
        for moment, value in samples.items():
            totals[moment] = totals.get(moment, 0.0) + value
    busy = [moment for moment, rate in completions.items() if rate > 0 and totals.get(moment, 0.0) > 0]
    if not busy:
        return None
    latency = sum(totals[moment] for moment in busy) / sum(completions[moment] for moment in busy)
    tokens_per_request = [generated_tokens[m] / completions[m] for m in busy if generated_tokens.get(m)]
    throughput = ceiling / latency
    return PodCapacity(
        concurrency=ceiling,
        concurrency_origin=ceiling_origin,
        throughput=throughput,
        throughput_origin=(
            f"estimated: the pods never saturated; requests took {latency:.1f} s on average (running requests over "
            f"completions), so a full batch of {ceiling:g} would finish {throughput:.2f}/s at best"
        ),
        tokens_per_second=throughput * _median(sorted(tokens_per_request)) if tokens_per_request else None,
        saturated=False,
    )


def _median(values: Sequence[float]) -> float:
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


# --- demand -------------------------------------------------------------------------------------------


def demand_from_conservation(completions: SamplePairs, in_system: SamplePairs) -> list[tuple[float, float]]:
    """Arrivals per second as completions plus the growth of the requests in the engines (running + waiting):
    what came in either finished or is still there. Used when no edge layer counts the requests."""
    system = dict(in_system)
    arrivals = []
    previous: tuple[float, float] | None = None
    for moment, rate in completions:
        held = system.get(moment)
        growth = 0.0
        if held is not None and previous is not None and moment > previous[0]:
            growth = (held - previous[1]) / (moment - previous[0])
        if held is not None:
            previous = (moment, held)
        arrivals.append((moment, max(0.0, rate + growth)))
    return arrivals


def value_at(samples: SamplePairs, moment: float, times: Sequence[float] | None = None, default: float = 0.0) -> float:
    """The latest sample at or before ``moment`` (``default`` before the first one)."""
    keys = times if times is not None else [t for t, _ in samples]
    index = bisect.bisect_right(keys, moment) - 1
    return samples[index][1] if index >= 0 else default


# --- the fluid queue ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueStep:
    t: float
    ready: int
    demand: float  # arrivals per second
    running: float
    waiting: float  # requests waiting, those that will give up included (they wait until their timeout)
    delay: float  # queueing delay of a request arriving now, seconds (inf: no pod ever becomes ready)
    timed_out: float  # requests that arrived in this step and will give up
    giving_up: float = 0.0  # of ``waiting``, the requests that will give up

    @property
    def in_flight(self) -> float:
        """Requests in the system as an autoscaler counts them (running + waiting)."""
        return self.running + self.waiting


@dataclass(frozen=True)
class QueueForecast:
    steps: tuple[QueueStep, ...]
    timeout_seconds: float
    service_seconds: float
    arrivals: float
    timed_out: float

    @property
    def peak_waiting(self) -> float:
        return max((step.waiting for step in self.steps), default=0.0)

    @property
    def peak_delay(self) -> float:
        finite = [step.delay for step in self.steps if step.demand > 0]
        return max(finite, default=0.0)

    @property
    def timed_out_share(self) -> float:
        return self.timed_out / self.arrivals if self.arrivals > 0 else 0.0


@dataclass
class _Capacity:
    """Cumulative service capacity on the grid, for the first-come-first-served delay."""

    times: list[float]
    cumulative: list[float]  # capacity served from the grid start to times[i]
    next_ready: list[int | None]  # the first grid index at or after i with a ready pod
    final_rate: float  # capacity per second after the grid ends (the last ready count holds)

    @classmethod
    def build(cls, times: list[float], pods: list[int], per_pod: float, step: float) -> _Capacity:
        cumulative = [0.0]
        for pods_now in pods[:-1]:
            cumulative.append(cumulative[-1] + pods_now * per_pod * step)
        next_ready: list[int | None] = [None] * len(pods)
        following: int | None = None
        for index in range(len(pods) - 1, -1, -1):
            if pods[index] > 0:
                following = index
            next_ready[index] = following
        return cls(times, cumulative, next_ready, pods[-1] * per_pod)

    def delay(self, index: int, waiting: float) -> float:
        """Seconds from times[index] until a pod is ready and the capacity has finished ``waiting`` requests."""
        start = self.cumulative[index]
        first_ready = self.next_ready[index]
        if first_ready is None:
            return math.inf
        wanted = start + waiting
        position = bisect.bisect_left(self.cumulative, wanted, lo=index)
        if position >= len(self.cumulative):
            # Past the grid's end: the last ready count goes on serving (first_ready exists, so it is > 0).
            return self.times[-1] + (wanted - self.cumulative[-1]) / self.final_rate - self.times[index]
        moment = self.times[position]
        if position > index and self.cumulative[position] > self.cumulative[position - 1]:
            # Interpolate inside the step where the capacity crosses the wanted amount.
            before = self.cumulative[position - 1]
            moment = self.times[position - 1] + (wanted - before) / (self.cumulative[position] - before) * (
                self.times[position] - self.times[position - 1]
            )
        return max(moment, self.times[first_ready]) - self.times[index]


def predict_queue(
    demand: SamplePairs,
    ready: SamplePairs,
    capacity: PodCapacity,
    timeout_seconds: float,
    *,
    start: float | None = None,
    end: float | None = None,
    step: float = 5.0,
    initial_in_flight: float = 0.0,
) -> QueueForecast:
    """Queue length, queueing delay and timed-out requests for ``demand`` (arrivals/s) served by ``ready`` pods.

    Both series are step functions (the latest sample holds). The grid runs from ``start`` (default: the first
    demand sample) to ``end`` (default: the last one) in ``step`` seconds; ``initial_in_flight`` requests are in
    the system at the start.
    """
    if step <= 0:
        raise ValueError("step must be positive")
    if not demand:
        return QueueForecast((), timeout_seconds, capacity.service_seconds, 0.0, 0.0)
    first = demand[0][0] if start is None else start
    last = demand[-1][0] if end is None else end
    count = max(1, math.floor((last - first) / step) + 1)
    times = [first + i * step for i in range(count)]
    demand_times = [t for t, _ in demand]
    ready_times = [t for t, _ in ready]
    pods = [max(0, round(value_at(ready, t, ready_times))) for t in times]
    rates = [max(0.0, value_at(demand, t, demand_times)) for t in times]
    grid = _Capacity.build(times, pods, capacity.throughput, step)
    service = capacity.service_seconds
    patience = timeout_seconds - service
    in_system = max(0.0, initial_in_flight)
    leaving: collections.deque[tuple[float, float]] = collections.deque()  # (time it gives up, requests)
    steps = []
    arrivals_total = timed_out_total = 0.0
    for index, moment in enumerate(times):
        while leaving and leaving[0][0] <= moment:
            leaving.popleft()
        slots = pods[index] * capacity.concurrency
        waiting = max(0.0, in_system - slots)
        arriving = rates[index] * step
        delay = grid.delay(index, waiting) if arriving > 0 or waiting > 0 else 0.0
        gave_up = arriving if arriving > 0 and delay > 0 and delay > patience else 0.0
        if gave_up:
            leaving.append((moment + timeout_seconds, gave_up))
        in_system += arriving - gave_up
        running = min(in_system, slots)
        finished = min(in_system, running / service * step) if service > 0 else in_system
        abandoning = sum(amount for _, amount in leaving)
        steps.append(
            QueueStep(
                moment,
                pods[index],
                rates[index],
                running,
                max(0.0, in_system - slots) + abandoning,
                delay,
                gave_up,
                abandoning,
            )
        )
        in_system -= finished
        arrivals_total += arriving
        timed_out_total += gave_up
    return QueueForecast(tuple(steps), timeout_seconds, service, arrivals_total, timed_out_total)


# --- ready pods from a replica timeline ---------------------------------------------------------------


def ready_timeline(
    replicas: SamplePairs, pod_ready_delay: float, initial_ready: int | None = None
) -> list[tuple[float, float]]:
    """Ready pods over time from the replica count in effect: a pod added at t is ready at t + delay; a scale
    down removes the youngest pods first (not-ready ones before ready ones, as a ReplicaSet does). The pods of
    the first sample are ready from the start (``initial_ready`` of them when given)."""
    if not replicas:
        return []
    start, initial = replicas[0]
    born = [start - pod_ready_delay] * int(initial_ready if initial_ready is not None else initial)
    changes: list[float] = [start + pod_ready_delay] if len(born) < int(initial) else []
    born += [start] * max(0, int(initial) - len(born))
    marks = []
    for moment, count in replicas:
        wanted = int(count)
        while len(born) < wanted:
            born.append(moment)
            changes.append(moment + pod_ready_delay)
        if len(born) > wanted:
            born.sort()
            del born[wanted:]
        marks.append((moment, tuple(born)))
        changes.append(moment)
    points = sorted(set(changes) | {start})
    timeline = []
    mark_times = [moment for moment, _ in marks]
    for moment in points:
        index = bisect.bisect_right(mark_times, moment) - 1
        alive = marks[max(0, index)][1]
        timeline.append((moment, float(sum(1 for created in alive if created + pod_ready_delay <= moment))))
    return changes_only(timeline)


def changes_only(samples: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The first sample and every sample whose value differs from the one before."""
    kept: list[tuple[float, float]] = []
    for moment, value in samples:
        if not kept or kept[-1][1] != value:
            kept.append((moment, value))
    return kept


# --- recommendations ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScalerSetup:
    """The autoscaler as the recommendations need it (built from the evidence by :mod:`nbhelpers.whatif`).

    ``kind`` is ``hpa`` or ``kpa``. ``isvc_ref`` / ``hpa_ref`` are docs/contracts.md#object-references; ``hpa_user_owned``:
    the HPA has no KServe or Knative owner, so the user patches it directly. ``target`` is the per-pod target
    on ``target_metric`` when that metric counts requests (running or in flight), else None. ``hpa_metrics`` is
    the HPA's ``spec.metrics`` as written (a patch carries the whole list); ``scale_up`` its
    ``behavior.scaleUp`` (None: not written, the defaults apply).
    """

    kind: str
    isvc_ref: str
    min_replicas: int
    max_replicas: int | None
    target: float | None = None
    target_metric: str | None = None
    hpa_ref: str | None = None
    hpa_user_owned: bool = False
    hpa_metrics: tuple[Mapping[str, Any], ...] = ()
    scale_up: Mapping[str, Any] | None = None
    uses_scale_target_field: bool = False  # KPA: the ISVC sets spec.predictor.scaleTarget (else the annotation)
    knative_utilization: float = KNATIVE_UTILIZATION_DEFAULT


@dataclass(frozen=True)
class Recommendation:
    """One proposed setting: its value, the merge patch that sets it on ``target``, why, and the numbers."""

    setting: str  # minReplicas | maxReplicas | target | scaleUp
    value: Any
    target: str
    patch: Mapping[str, Any]
    reason: str
    numbers: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Burst:
    """The steepest rise of demand within one cold start: from ``base`` at ``start`` to ``peak``."""

    start: float
    base: float
    peak: float

    @property
    def rise(self) -> float:
        return self.peak - self.base


def steepest_burst(demand: SamplePairs, window_seconds: float) -> Burst | None:
    """The largest ``max(demand over [t, t + window]) − demand(t)`` over the samples (None without demand)."""
    if not demand:
        return None
    best: Burst | None = None
    values = list(demand)
    for index, (moment, base) in enumerate(values):
        peak = base
        for later, value in values[index:]:
            if later > moment + window_seconds:
                break
            peak = max(peak, value)
        if best is None or peak - base > best.rise:
            best = Burst(moment, base, peak)
    return best


def _pods(count: int) -> str:
    return f"{count} pod" if count == 1 else f"{count} pods"


def replicas_for(rate: float, per_pod: float) -> int:
    """Pods needed to complete ``rate`` requests/s at ``per_pod`` each (0 for no demand)."""
    if rate <= 0:
        return 0
    return max(1, math.ceil(rate / per_pod - 1e-9))


def recommend(
    setup: ScalerSetup,
    demand: SamplePairs,
    capacity: PodCapacity,
    cold_start_seconds: float | None,
) -> list[Recommendation]:
    """The settings that would have carried the incident's demand, each only when it differs from the current."""
    found: list[Recommendation] = []
    peak = max((value for _, value in demand), default=0.0)
    comfortable = capacity.throughput * TARGET_FRACTION
    needed_max = replicas_for(peak, comfortable)
    burst = steepest_burst(demand, cold_start_seconds) if cold_start_seconds else None
    needed_min = replicas_for(burst.peak, capacity.throughput) if burst is not None else 0
    maximum = setup.max_replicas
    if needed_max and (maximum is None or needed_max > maximum):
        maximum = max(needed_max, setup.min_replicas, needed_min)
        found.append(
            replicas_change(
                "maxReplicas",
                maximum,
                setup,
                (
                    f"the peak demand of {peak:.2f} requests/s needs {_pods(maximum)} at {TARGET_FRACTION:.0%} of a pod's "
                    f"{capacity.throughput:.2f} completions/s (max now {setup.max_replicas})"
                ),
                {"peak_demand_rps": peak, "per_pod_rps": capacity.throughput, "fraction": TARGET_FRACTION},
            )
        )
    if burst is not None and cold_start_seconds and needed_min > setup.min_replicas:
        minimum = min(needed_min, maximum) if maximum is not None else needed_min
        if minimum > setup.min_replicas:
            found.append(
                replicas_change(
                    "minReplicas",
                    minimum,
                    setup,
                    (
                        f"a new pod serves only {cold_start_seconds:.0f} s after it is created; the steepest rise of demand "
                        f"within that time went from {burst.base:.2f} to {burst.peak:.2f} requests/s, which takes "
                        f"{_pods(minimum)} already running at {capacity.throughput:.2f} completions/s each (min now "
                        f"{setup.min_replicas})"
                    ),
                    {
                        "cold_start_s": cold_start_seconds,
                        "burst_from_rps": burst.base,
                        "burst_to_rps": burst.peak,
                        "per_pod_rps": capacity.throughput,
                    },
                )
            )
    target = _target(setup, capacity)
    if target is not None:
        found.append(target)
    if setup.kind == "hpa" and burst is not None and cold_start_seconds:
        behavior = _scale_up(setup, replicas_for(burst.rise, capacity.throughput), cold_start_seconds)
        if behavior is not None:
            found.append(behavior)
    return found


def replicas_change(
    setting: str, value: int, setup: ScalerSetup, reason: str, numbers: Mapping[str, float]
) -> Recommendation:
    if setup.kind == "hpa" and setup.hpa_user_owned and setup.hpa_ref is not None:
        return Recommendation(
            setting,
            value,
            setup.hpa_ref,
            {"spec": {setting: value}},
            reason + "; the HPA is your own (no KServe owner), so it is patched directly",
            numbers,
        )
    where = (
        "KServe writes it into the Knative min-scale / max-scale annotations"
        if setup.kind == "kpa"
        else "KServe carries it to the autoscaler it generates for the predictor"
    )
    return Recommendation(
        setting, value, setup.isvc_ref, {"spec": {"predictor": {setting: value}}}, f"{reason}; {where}", numbers
    )


def _target(setup: ScalerSetup, capacity: PodCapacity) -> Recommendation | None:
    """A per-pod target at TARGET_FRACTION of the ceiling, when the current one is at or above 90 % of it."""
    ceiling = capacity.concurrency
    wanted = max(1, math.floor(ceiling * TARGET_FRACTION))
    numbers = {"ceiling": ceiling, "fraction": TARGET_FRACTION}
    if setup.kind == "kpa":
        utilization = setup.knative_utilization
        current = setup.target if setup.target is not None else 100.0
        if current * utilization < 0.9 * ceiling:
            return None
        total = max(1, math.floor(wanted / utilization))
        reason = (
            f"Knative aims at target × utilization = {current:g} × {utilization:g} = {current * utilization:.0f} "
            f"requests per pod, but a pod runs at most {ceiling:g}: it scales only once pods queue. Target {total} "
            f"aims at {total * utilization:.0f} ({TARGET_FRACTION:.0%} of the ceiling)"
        )
        return target_change(setup, total, reason, {**numbers, "utilization": utilization, "current": current})
    if setup.target is None or setup.target < 0.9 * ceiling:
        return None
    reason = (
        f"the per-pod target {setup.target:g} on {setup.target_metric} is at or above 90 % of the {ceiling:g} "
        f"requests a pod runs at most: the HPA adds pods only once they queue. {wanted} keeps "
        f"{TARGET_FRACTION:.0%} of the ceiling"
    )
    return target_change(setup, wanted, reason, numbers)


def target_change(setup: ScalerSetup, value: float, reason: str, numbers: Mapping[str, float]) -> Recommendation | None:
    """The patch that sets the per-pod target to ``value`` (None: the autoscaler has no request-count target)."""
    whole = max(1, round(value))
    if setup.kind == "kpa":
        patch: dict[str, Any]
        if setup.uses_scale_target_field:
            patch = {"spec": {"predictor": {"scaleMetric": "concurrency", "scaleTarget": whole}}}
        else:
            patch = {
                "metadata": {
                    "annotations": {
                        KNATIVE_METRIC_ANNOTATION: "concurrency",
                        KNATIVE_TARGET_ANNOTATION: str(whole),
                    }
                }
            }
        return Recommendation("target", whole, setup.isvc_ref, patch, reason, numbers)
    if setup.target_metric is None or not setup.hpa_metrics:
        return None
    metrics = [_with_target(metric, setup.target_metric, whole) for metric in setup.hpa_metrics]
    if setup.hpa_ref is None:
        return None
    change = {"spec": {"metrics": metrics}}
    return Recommendation("target", whole, setup.hpa_ref, change, _hpa_note(setup, reason, METRIC_NOT_ON_ISVC), numbers)


def stabilization_change(setup: ScalerSetup, seconds: float, reason: str) -> Recommendation | None:
    """HPA: ``behavior.scaleUp.stabilizationWindowSeconds`` (policies kept); KPA: the stable window annotation."""
    whole = max(0, round(seconds))
    if setup.kind == "kpa":
        patch = {"metadata": {"annotations": {KNATIVE_WINDOW_ANNOTATION: f"{max(6, whole)}s"}}}
        return Recommendation(
            "window", max(6, whole), setup.isvc_ref, patch, reason + " (Knative accepts 6 s to 1 h)", {}
        )
    if setup.hpa_ref is None:
        return None
    scale_up = {**HPA_DEFAULT_SCALE_UP, **(setup.scale_up or {}), "stabilizationWindowSeconds": whole}
    return Recommendation(
        "scaleUp",
        scale_up,
        setup.hpa_ref,
        {"spec": {"behavior": {"scaleUp": scale_up}}},
        _hpa_note(setup, reason, BEHAVIOR_NOT_ON_ISVC),
        {},
    )


BEHAVIOR_NOT_ON_ISVC = "an InferenceService has no field for HPA behavior"
METRIC_NOT_ON_ISVC = (
    "no InferenceService field carries an HPA Pods metric (spec.predictor.autoScaling.metrics takes a cpu/memory "
    "Resource, or External / PodMetric sources that only KEDA reads)"
)


def _hpa_note(setup: ScalerSetup, reason: str, missing: str) -> str:
    """``reason``, and for an HPA KServe generated: why the patch is not on the InferenceService, and the risk."""
    if setup.hpa_user_owned:
        return reason
    return f"{reason}; {missing}, so the patch goes on the HPA KServe generated, and KServe may reconcile it back"


def _with_target(metric: Mapping[str, Any], name: str | None, value: int) -> dict[str, Any]:
    copied: dict[str, Any] = {key: (dict(item) if isinstance(item, Mapping) else item) for key, item in metric.items()}
    for source in ("pods", "object", "external"):
        body = copied.get(source)
        if isinstance(body, dict) and (body.get("metric") or {}).get("name") == name:
            target = dict(body.get("target") or {})
            key = "averageValue" if target.get("type", "AverageValue") == "AverageValue" else "value"
            target[key] = str(value)
            body["target"] = target
    return copied


def pods_per_period(scale_up: Mapping[str, Any], replicas: int, seconds: float) -> float:
    """Pods the scale-up policies let the HPA add within ``seconds`` starting from ``replicas`` (policies apply
    per period; Percent policies compound on the growing count)."""
    totals = []
    for policy in scale_up.get("policies") or []:
        period = max(1.0, float(policy.get("periodSeconds") or 15))
        value = float(policy.get("value") or 0)
        count = float(replicas)
        for _ in range(max(1, int(seconds // period))):
            count += value if policy.get("type") == "Pods" else math.ceil(count * value / 100)
        totals.append(count - replicas)
    if not totals:
        return 0.0
    return min(totals) if scale_up.get("selectPolicy") == "Min" else max(totals)


def _scale_up(setup: ScalerSetup, burst_pods: int, cold_start_seconds: float) -> Recommendation | None:
    """No stabilization and a Pods policy of ``burst_pods`` per sync, when the current rules add fewer in a minute."""
    current = {**HPA_DEFAULT_SCALE_UP, **(setup.scale_up or {})}  # unset fields take the API server's defaults
    stabilization = float(current.get("stabilizationWindowSeconds") or 0)
    allowed = pods_per_period(current, max(1, setup.min_replicas), 60.0)
    if stabilization <= 0 and allowed >= burst_pods:
        return None
    pods = max(4, burst_pods)
    scale_up = {
        "stabilizationWindowSeconds": 0,
        "selectPolicy": "Max",
        "policies": [
            {"type": "Pods", "value": pods, "periodSeconds": 15},
            {"type": "Percent", "value": 100, "periodSeconds": 15},
        ],
    }
    reason = (
        f"the steepest burst needed {_pods(burst_pods)} more within one cold start ({cold_start_seconds:.0f} s); the "
        f"current scale-up waits {stabilization:g} s and adds at most {allowed:g} pods a minute"
    )
    numbers = {"burst_pods": float(burst_pods), "stabilization_s": stabilization, "pods_per_minute": allowed}
    if setup.hpa_ref is None:
        return None
    reason = _hpa_note(setup, reason, BEHAVIOR_NOT_ON_ISVC)
    return Recommendation(
        "scaleUp", scale_up, setup.hpa_ref, {"spec": {"behavior": {"scaleUp": scale_up}}}, reason, numbers
    )
