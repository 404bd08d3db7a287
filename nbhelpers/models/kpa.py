"""A replay of Knative Serving's Pod Autoscaler (KPA) over a recorded load series (docs/contracts.md#what-if-replay).

What is replayed, part by part, and the upstream file each part follows (knative/serving):

**Settings** (:func:`kpa_spec_from_manifests`). KServe turns an InferenceService into a Knative Service
whose revision carries the ISVC's annotations (the predictor's own annotations win over the ISVC's)
plus what KServe writes from the predictor spec (``ksvc_reconciler.go``, ``setAutoScalingAnnotations``):
class ``kpa.autoscaling.knative.dev`` unless one is set, ``scaleTarget`` → ``autoscaling.knative.dev/target``,
``scaleMetric`` → ``/metric``, ``minReplicas`` (1 when unset) → ``/min-scale``, ``maxReplicas`` (when not
0) → ``/max-scale``, ``containerConcurrency`` → the revision's ``containerConcurrency``. KServe writes
those keys itself, so its fields beat a user's annotation of the same name. Knative then reads
``config-autoscaler`` (``pkg/autoscaler/config/config.go``: keys, defaults, validation) and lets the
revision's annotations override it (``pkg/apis/autoscaling/v1alpha1/pa_lifecycle.go``, the kebab-case key
first, the legacy camelCase key second). The per-pod target follows ``ResolveMetricTarget``
(``pkg/reconciler/autoscaling/resources/target.go``): the total per pod is ``containerConcurrency`` (else
``container-concurrency-target-default``, 100) for concurrency, ``requests-per-second-target-default``
(200) for rps; a ``target`` annotation replaces it (for concurrency never above ``containerConcurrency``);
the target is that total times the utilization (``container-concurrency-target-percentage`` for
concurrency, a fixed 70 % for rps, the ``target-utilization-percentage`` annotation for both), at least
0.01. Values Knative's webhook would refuse (``pkg/apis/autoscaling/annotation_validation.go``) raise
:class:`~nbhelpers.errors.RunbookError`.

**Metric windows** (:class:`WindowAverager`, ``pkg/autoscaler/aggregation/bucketing.go``). The collector
keeps one-second buckets over the stable window (default 60 s) and the panic window (stable window ×
``panic-window-percentage`` / 100, rounded to a second, at least 1 s) and averages them the linear way,
including the partial-window rules (a window that started recently, or whose latest data is some seconds
old, is averaged over its valid buckets only) and the six-digit floor. The series is the total over the
revision, so one value per second stands for what the collector sums from the scraped pods and the
activator: a second is recorded when a pod is ready (the scraper reports) or the value is positive (the
activator reports the requests it holds); with no pod and nothing in flight nothing is recorded.

**Decision** (:class:`Decider`, ``pkg/autoscaler/scaling/autoscaler.go``, ``Scale``). Every tick (2 s):
desired = ceil(observed / target) for the stable and the panic average, clamped to
[floor(ready / max-scale-down-rate), ceil(max-scale-up-rate × ready)] with ready taken as at least 1;
panic starts when ceil(panic / target) / ready ≥ panic-threshold-percentage / 100, is extended by every
tick still over it, and ends on the first tick under it more than a stable window after the last tick
over it; in panic the recommendation is the larger of the two and never decreases. A fresh decider
created with more than one ready pod starts in panic (``newAutoscaler``). ``scale-down-delay`` keeps the
maximum recommendation of the delay window (``pkg/autoscaler/aggregation/max``); ``activation-scale``
raises a non-zero recommendation to at least that many pods. Without data for a whole stable window the
decider gives no recommendation and the previous one stands (``pkg/autoscaler/metrics/collector.go``).

**Scaling** (``pkg/reconciler/autoscaling/kpa/scaler.go`` and ``kpa.go``). The recommendation is bounded by
min-scale and max-scale (0 = no limit). Going to zero takes, as upstream: ``enable-scale-to-zero``; a
PodAutoscaler that has been Active for at least a stable window (before that it keeps one pod), which then
turns Inactive; and then ``max(scale-to-zero-grace-period, scale-to-zero-pod-retention-period)`` of
inactivity, or less once the activator has been in the request path for the grace period (upstream's fast
path: with the default ``target-burst-capacity`` of 200 the activator stays in the path while the spare
capacity ready pods × total − 200 − panic average is negative, so a small revision often loses its last pod
on the first reconcile after turning Inactive). A PodAutoscaler still activating (no ready pod) after the
progress deadline (600 s, or ``serving.knative.dev/progress-deadline``) + 30 s goes to zero as soon as the
recommendation is 0. A zero recommendation leaves the Deployment as it is until the scale to zero (it
only marks the PodAutoscaler Inactive). While no pod is ready the activator holds the requests; a positive
sample that arrives while the recommendation is 0 pokes the decider at once, as the activator's stat does
(``multiscaler.go``, ``Poke``), and that extra decision is a row of its own.

**Pods.** A pod the autoscaler asks for is ready ``pod_ready_delay`` seconds later (the measured cold
start); a scale-down removes not-ready pods first and takes effect at once.

Simplified versus upstream: the PodAutoscaler is reconciled on every tick and poke (upstream reconciles on
a changed recommendation and on timed re-queues, which therefore land on the next tick here); the first
tick is at t = 0 and sees the sample recorded at t = 0; the concurrency a pod reports is its average over
the last second, here the series' latest value; no scrape sampling error, network-programming delay or
activator probing time; the revision is routable (reachable) and its scale target already initialized
(``initial-scale`` is not replayed); only the linear window average is modelled (the
``weighted-exponential`` algorithm raises an error). A replay that starts with pods treats them as ready
and the PodAutoscaler as Active since t = 0 with a fresh decider and collector (so more than one pod
starts in panic); one that starts at zero treats the revision as already scaled to zero (Inactive, last
recommendation 0, activator in the path).
"""

from __future__ import annotations

import bisect
import math
import re
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from nbhelpers.errors import RunbookError
from nbhelpers.sources import kube
from nbhelpers.util.times import duration_seconds

_T = TypeVar("_T")

# Knative autoscaling annotations and the defaults of config-autoscaler, as Knative Serving reads them.
KNATIVE_CLASS_ANNOTATION = "autoscaling.knative.dev/class"
KNATIVE_KPA_CLASS = "kpa.autoscaling.knative.dev"
KNATIVE_HPA_CLASS = "hpa.autoscaling.knative.dev"
KNATIVE_METRIC_ANNOTATION = "autoscaling.knative.dev/metric"
KNATIVE_TARGET_ANNOTATION = "autoscaling.knative.dev/target"
KNATIVE_UTILIZATION_ANNOTATION = "autoscaling.knative.dev/target-utilization-percentage"
KNATIVE_WINDOW_ANNOTATION = "autoscaling.knative.dev/window"
KNATIVE_UTILIZATION_DEFAULT = 0.7  # config-autoscaler container-concurrency-target-percentage
KNATIVE_CONCURRENCY_TARGET_DEFAULT = 100.0  # config-autoscaler container-concurrency-target-default
# config-autoscaler requests-per-second-target-default (knative/serving PR #5141), used with metric rps; Knative's
# fixed TargetUtilization (0.7) applies to it instead of the concurrency percentage (ResolveMetricTarget).
KNATIVE_RPS_TARGET_DEFAULT = 200.0
KNATIVE_RPS_UTILIZATION = 0.7
# Knative reads the kebab-case key first and still honours the legacy camelCase one.
KNATIVE_MIN_SCALE_KEYS = ("autoscaling.knative.dev/min-scale", "autoscaling.knative.dev/minScale")
KNATIVE_MAX_SCALE_KEYS = ("autoscaling.knative.dev/max-scale", "autoscaling.knative.dev/maxScale")

CONCURRENCY = "concurrency"
RPS = "rps"
METRICS = (CONCURRENCY, RPS)

_GROUP = "autoscaling.knative.dev"
# Annotation keys as Knative reads them: the current kebab-case key first, the legacy camelCase key second.
MIN_SCALE_KEYS = KNATIVE_MIN_SCALE_KEYS
MAX_SCALE_KEYS = KNATIVE_MAX_SCALE_KEYS
WINDOW_KEYS = (f"{_GROUP}/window",)
TARGET_KEYS = (KNATIVE_TARGET_ANNOTATION,)
METRIC_KEYS = (KNATIVE_METRIC_ANNOTATION,)
TARGET_UTILIZATION_KEYS = (f"{_GROUP}/target-utilization-percentage", f"{_GROUP}/targetUtilizationPercentage")
TARGET_BURST_CAPACITY_KEYS = (f"{_GROUP}/target-burst-capacity", f"{_GROUP}/targetBurstCapacity")
PANIC_WINDOW_KEYS = (f"{_GROUP}/panic-window-percentage", f"{_GROUP}/panicWindowPercentage")
PANIC_THRESHOLD_KEYS = (f"{_GROUP}/panic-threshold-percentage", f"{_GROUP}/panicThresholdPercentage")
SCALE_DOWN_DELAY_KEYS = (f"{_GROUP}/scale-down-delay", f"{_GROUP}/scaleDownDelay")
POD_RETENTION_KEYS = (
    f"{_GROUP}/scale-to-zero-pod-retention-period",
    f"{_GROUP}/scaleToZeroPodRetentionPeriod",
)
ACTIVATION_SCALE_KEYS = (f"{_GROUP}/activation-scale",)
AGGREGATION_KEYS = (f"{_GROUP}/metric-aggregation-algorithm", f"{_GROUP}/metricAggregationAlgorithm")
PROGRESS_DEADLINE_KEYS = ("serving.knative.dev/progress-deadline",)

TARGET_MIN = 0.01  # autoscaling.TargetMin
WINDOW_MIN = 6.0  # autoscaling.WindowMin
WINDOW_MAX = 3600.0  # autoscaling.WindowMax
BUCKET_SECONDS = 1  # config.BucketSize
DEFAULT_PROGRESS_DEADLINE = 600.0  # config-deployment progress-deadline
ACTIVATION_TIMEOUT_BUFFER = 30.0  # kpa/scaler.go activationTimeoutBuffer
KSERVE_DEFAULT_MIN_REPLICAS = 1  # KServe constants.DefaultMinReplicas


@dataclass(frozen=True)
class KpaSpec:
    """The settings one revision's KPA runs with, after the ConfigMap and the annotations.

    Every default is Knative's. ``target`` is the per-pod value the decider aims for (total × utilization),
    ``total`` the per-pod value a pod can take (used for the activator's burst-capacity test).
    ``panic_threshold`` is a ratio (``panic-threshold-percentage`` / 100) as upstream's ``DeciderSpec``
    holds it. Windows and periods are seconds; ``max_scale`` 0 means no limit.
    """

    metric: str = CONCURRENCY
    target: float = 70.0
    total: float = 100.0
    target_burst_capacity: float = 200.0
    panic_threshold: float = 2.0
    stable_window: float = 60.0
    panic_window: float = 6.0
    max_scale_up_rate: float = 1000.0
    max_scale_down_rate: float = 2.0
    scale_down_delay: float = 0.0
    activation_scale: int = 1
    min_scale: int = 0
    max_scale: int = 0
    enable_scale_to_zero: bool = True
    scale_to_zero_grace_period: float = 30.0
    scale_to_zero_pod_retention_period: float = 0.0
    progress_deadline: float = DEFAULT_PROGRESS_DEADLINE


@dataclass(frozen=True)
class KpaTick:
    """One autoscaler decision: a tick, or a poke from the activator.

    ``ready_pods`` counts the ready pods once this decision is applied (a scale-down removes pods at
    once; new pods count only after ``pod_ready_delay``); ``desired_pods`` is the replica count the
    KPA has asked the Deployment for, ready or not; ``panic`` is the decider's mode after the decision.
    """

    t: float
    ready_pods: int
    desired_pods: int
    panic: bool


@dataclass(frozen=True)
class ScaleResult:
    """What one ``Scale`` call returns: the recommendation and the excess burst capacity."""

    desired_pods: int
    excess_burst_capacity: int


# --- the collector's window average (aggregation/bucketing.go) ------------------------------------------


class WindowAverager:
    """Knative's ``TimedFloat64Buckets`` with one-second buckets: a ring of sums over ``window`` seconds.

    Times are seconds (floats, truncated to the bucket); records must come in time order.
    """

    def __init__(self, window: float) -> None:
        self.window = int(window)
        self.buckets = [0.0] * math.ceil(window / BUCKET_SECONDS)
        self.total = 0.0
        self.first_write: int | None = None
        self.last_write: int | None = None

    def record(self, now: float, value: float) -> None:
        second = math.floor(now)
        if self.last_write is not None and second < self.last_write:
            raise ValueError("records must come in time order")
        if second != self.last_write:
            if self.first_write is None:
                self.first_write = second
            if self.last_write is None or second - self.last_write > self.window:
                # No write for a whole window: start over.
                self.first_write = second
                self.buckets = [0.0] * len(self.buckets)
                self.total = 0.0
            else:
                for index in range(self.last_write + 1, second + 1):
                    slot = index % len(self.buckets)
                    self.total -= self.buckets[slot]
                    self.buckets[slot] = 0.0
            self.last_write = second
        self.buckets[second % len(self.buckets)] += value
        self.total += value

    def is_empty(self, now: float) -> bool:
        """True when nothing was recorded for more than a window."""
        return self.last_write is None or math.floor(now) - self.last_write > self.window

    def average(self, now: float) -> float:
        """The window average at ``now``, over the valid buckets only (upstream's partial-window rules)."""
        if self.last_write is None or self.first_write is None:
            return 0.0
        second = math.floor(now)
        gap = second - self.last_write
        span = self.last_write - self.first_write + 1
        if gap <= 0:
            return _floor_digits(self.total / min(span, len(self.buckets)))
        if gap < self.window:
            total = self.total
            for index in range(self.last_write + 1, second + 1):
                total -= self.buckets[index % len(self.buckets)]
            return _floor_digits(total / min(span, len(self.buckets) - gap))
        return 0.0


def _floor_digits(value: float, digits: int = 6) -> float:
    """``roundToNDigits``: floor to six decimals, as the collector reports averages."""
    scale = 10.0**digits
    return math.floor(value * scale) / scale


class _DelayWindow:
    """``max.TimeWindow``: the largest value recorded in the last ``ceil(duration / granularity)`` slots.

    Keeps upstream's descending maxima: (slot, value) pairs whose values decrease from oldest to newest.
    """

    def __init__(self, duration: float, granularity: float) -> None:
        self.size = math.ceil(duration / granularity)
        self.granularity = granularity
        self.maxima: deque[tuple[int, float]] = deque()

    def record(self, now: float, value: float) -> None:
        slot = math.floor(now / self.granularity)
        while self.maxima and self.maxima[-1][1] <= value:
            self.maxima.pop()  # smaller and older: can never be the maximum again
        while self.maxima and slot - self.maxima[0][0] >= self.size:
            self.maxima.popleft()
        if not self.maxima or self.maxima[-1][0] != slot:
            self.maxima.append((slot, value))

    def current(self) -> float:
        return self.maxima[0][1]


# --- the decider (scaling/autoscaler.go) -------------------------------------------------------------------


class Decider:
    """One revision's decider: ``Scale`` from stable and panic averages and the ready pod count.

    ``ready_at_creation`` is the ready count when the decider is created: more than one starts it in
    panic mode at ``created_at`` with that many pods as the floor, as upstream does after a restart.
    """

    def __init__(self, spec: KpaSpec, ready_at_creation: int = 0, created_at: float = 0.0, tick: float = 2.0) -> None:
        self.spec = spec
        self.panic_time: float | None = created_at if ready_at_creation > 1 else None
        self.max_panic_pods = ready_at_creation
        self._delay = _DelayWindow(spec.scale_down_delay, tick) if spec.scale_down_delay > 0 else None

    @property
    def in_panic(self) -> bool:
        return self.panic_time is not None

    def scale(self, now: float, ready_pods: int, stable: float, panic: float) -> ScaleResult:
        spec = self.spec
        ready = max(1.0, float(ready_pods))
        max_up = math.ceil(spec.max_scale_up_rate * ready)
        max_down = math.floor(ready / spec.max_scale_down_rate)
        stable_pods = math.ceil(stable / spec.target)
        panic_pods = math.ceil(panic / spec.target)
        desired_stable = min(max(stable_pods, max_down), max_up)
        desired_panic = min(max(panic_pods, max_down), max_up)
        if spec.activation_scale > 1:
            if stable_pods > 0:
                desired_stable = max(desired_stable, spec.activation_scale)
            if panic_pods > 0:
                desired_panic = max(desired_panic, spec.activation_scale)
        self._update_panic(now, panic_pods / ready >= spec.panic_threshold)
        desired = desired_stable
        if self.panic_time is not None:
            # In panic the larger of the two counts, and never a decrease.
            self.max_panic_pods = max(self.max_panic_pods, desired_stable, desired_panic)
            desired = self.max_panic_pods
        if self._delay is not None:
            self._delay.record(now, desired)
            desired = int(self._delay.current())
        return ScaleResult(desired, self._excess_burst_capacity(ready_pods, panic))

    def _update_panic(self, now: float, over_threshold: bool) -> None:
        if over_threshold:
            self.panic_time = now
        elif self.panic_time is not None and self.panic_time + self.spec.stable_window < now:
            self.panic_time = None
            self.max_panic_pods = 0

    def _excess_burst_capacity(self, ready_pods: int, panic: float) -> int:
        tbc = self.spec.target_burst_capacity
        if tbc == 0:
            return 0
        if tbc > 0:
            return math.floor(ready_pods * self.spec.total - tbc - panic)
        return -1


# --- settings from the manifests ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Config:
    """``config-autoscaler`` keys the replay uses, with Knative's defaults."""

    enable_scale_to_zero: bool = True
    container_concurrency_target_fraction: float = KNATIVE_UTILIZATION_DEFAULT
    container_concurrency_target_default: float = KNATIVE_CONCURRENCY_TARGET_DEFAULT
    rps_target_default: float = KNATIVE_RPS_TARGET_DEFAULT
    max_scale_up_rate: float = 1000.0
    max_scale_down_rate: float = 2.0
    target_burst_capacity: float = 200.0
    panic_window_percentage: float = 10.0
    panic_threshold_percentage: float = 200.0
    stable_window: float = 60.0
    scale_to_zero_grace_period: float = 30.0
    scale_to_zero_pod_retention_period: float = 0.0
    scale_down_delay: float = 0.0
    max_scale: int = 0
    max_scale_limit: int = 0
    # Not a ConfigMap key: Knative fixes the rps utilization at 70 % (annotation only).
    target_utilization: float = field(default=KNATIVE_RPS_UTILIZATION, init=False)


def kpa_spec_from_manifests(isvc: Mapping[str, Any], config_autoscaler: Mapping[str, Any] | None = None) -> KpaSpec:
    """The KPA settings of an InferenceService's predictor revision (see the module docstring).

    ``config_autoscaler`` is the ``config-autoscaler`` ConfigMap (``knative-serving`` namespace); without
    it Knative's defaults apply.
    """
    _check_scaled_by_kpa(isvc)
    config = _config_from_map(_configmap_data(config_autoscaler))
    spec = isvc.get("spec") or {}
    predictor = (spec.get("predictor") or {}) if isinstance(spec, Mapping) else None
    if not isinstance(predictor, Mapping):
        raise RunbookError("InferenceService spec.predictor must be a mapping")
    annotations = _revision_annotations(isvc, predictor)
    container_concurrency = _spec_int(predictor, "containerConcurrency", minimum=0) or 0
    return _resolve(config, _Annotations(annotations), container_concurrency)


def _check_scaled_by_kpa(isvc: Mapping[str, Any]) -> None:
    if not isinstance(isvc, Mapping):
        raise RunbookError("the InferenceService manifest must be a mapping")
    kind = isvc.get("kind")
    if kind is not None and kind != "InferenceService":
        raise RunbookError(f"expected an InferenceService manifest, got kind {kind}")
    mode = kube.annotations(isvc).get(kube.DEPLOYMENT_MODE_ANNOTATION) or kube.status(isvc).get("deploymentMode")
    if str(mode or "").strip().lower() in {"rawdeployment", "standard"}:
        raise RunbookError(f"InferenceService runs in {mode} mode: no Knative KPA scales it (replay it as an HPA)")


def _configmap_data(config_autoscaler: Mapping[str, Any] | None) -> dict[str, str]:
    if config_autoscaler is None:
        return {}
    if not isinstance(config_autoscaler, Mapping) or config_autoscaler.get("kind") != "ConfigMap":
        raise RunbookError("config-autoscaler must be a ConfigMap manifest (kind: ConfigMap)")
    data = config_autoscaler.get("data") or {}
    if not isinstance(data, Mapping):
        raise RunbookError("config-autoscaler data must be a mapping of keys to strings")
    return {str(key): _text(value) for key, value in data.items()}


def _text(value: Any) -> str:
    """A ConfigMap or annotation value as the API server would store it (YAML booleans become ``true``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _config_from_map(data: Mapping[str, str]) -> _Config:
    """``NewConfigFromMap`` + ``validate`` for the keys the replay uses."""
    values = {
        name: parse(data[key], f"config-autoscaler {key}") for key, (name, parse) in _CONFIG_KEYS.items() if key in data
    }
    if values.get("container_concurrency_target_fraction", 0.0) > 1.0:
        # A percentage; values in (0, 1] are taken as fractions for legacy reasons.
        values["container_concurrency_target_fraction"] /= 100.0
    config = _Config(**values)
    _validate_config(config)
    return config


def _validate_config(c: _Config) -> None:
    where = "config-autoscaler"
    checks: list[tuple[bool, str]] = [
        (c.scale_to_zero_grace_period > 0, "scale-to-zero-grace-period must be positive"),
        (c.scale_down_delay >= 0 and _whole_seconds(c.scale_down_delay), "scale-down-delay must be whole seconds ≥ 0"),
        (c.scale_to_zero_pod_retention_period >= 0, "scale-to-zero-pod-retention-period cannot be negative"),
        (c.target_burst_capacity >= 0 or c.target_burst_capacity == -1, "target-burst-capacity must be ≥ 0 or -1"),
        (
            0 < c.container_concurrency_target_fraction <= 1,
            "container-concurrency-target-percentage must be in (0, 100]",
        ),
        (
            c.container_concurrency_target_fraction * c.container_concurrency_target_default >= TARGET_MIN,
            f"container-concurrency-target-percentage × container-concurrency-target-default must be ≥ {TARGET_MIN}",
        ),
        (c.rps_target_default >= TARGET_MIN, f"requests-per-second-target-default must be ≥ {TARGET_MIN}"),
        (c.max_scale_up_rate > 1, "max-scale-up-rate must be greater than 1"),
        (c.max_scale_down_rate > 1, "max-scale-down-rate must be greater than 1"),
        (
            WINDOW_MIN <= c.stable_window <= WINDOW_MAX and _whole_seconds(c.stable_window),
            "stable-window must be whole seconds in [6s, 1h]",
        ),
        (1 <= c.panic_window_percentage <= 100, "panic-window-percentage must be in [1, 100]"),
        (c.max_scale_limit >= 0, "max-scale-limit must be ≥ 0"),
        (
            c.max_scale >= (1 if c.max_scale_limit > 0 else 0)
            and (c.max_scale_limit == 0 or c.max_scale <= c.max_scale_limit),
            "max-scale must be ≥ 0 and within max-scale-limit",
        ),
    ]
    for ok, message in checks:
        if not ok:
            raise RunbookError(f"{where}: {message} (Knative refuses this ConfigMap)")


def _revision_annotations(isvc: Mapping[str, Any], predictor: Mapping[str, Any]) -> dict[str, str]:
    """The annotations the predictor revision carries: ISVC's, then the predictor's, then KServe's own."""
    own = predictor.get("annotations") or {}
    if not isinstance(own, Mapping):
        raise RunbookError("InferenceService spec.predictor.annotations must be a mapping")
    merged = {str(k): _text(v) for k, v in kube.annotations(isvc).items()}
    merged.update({str(k): _text(v) for k, v in own.items()})
    merged.setdefault(KNATIVE_CLASS_ANNOTATION, KNATIVE_KPA_CLASS)
    scale_target = _spec_int(predictor, "scaleTarget", minimum=1)
    if scale_target is not None:
        merged[KNATIVE_TARGET_ANNOTATION] = str(scale_target)
    scale_metric = predictor.get("scaleMetric")
    if scale_metric is not None:
        merged[KNATIVE_METRIC_ANNOTATION] = str(scale_metric)
    min_replicas = _spec_int(predictor, "minReplicas", minimum=0)
    merged[MIN_SCALE_KEYS[0]] = str(KSERVE_DEFAULT_MIN_REPLICAS if min_replicas is None else min_replicas)
    max_replicas = _spec_int(predictor, "maxReplicas", minimum=0)
    if max_replicas:
        merged[MAX_SCALE_KEYS[0]] = str(max_replicas)
    return merged


def _spec_int(predictor: Mapping[str, Any], name: str, minimum: int) -> int | None:
    value = predictor.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise RunbookError(f"InferenceService spec.predictor.{name} must be an integer ≥ {minimum}, got {value!r}")
    return value


class _Annotations:
    """Typed, validated reads of the revision's autoscaling annotations (the webhook's rules)."""

    def __init__(self, annotations: Mapping[str, str]) -> None:
        self.annotations = annotations

    def raw(self, keys: Sequence[str]) -> tuple[str, str] | None:
        for key in keys:
            if key in self.annotations:
                return key, self.annotations[key]
        return None

    def read(
        self, keys: Sequence[str], parse: Callable[[str, str], Any], check: Callable[[Any], bool], rule: str
    ) -> Any:
        found = self.raw(keys)
        if found is None:
            return None
        key, text = found
        value = parse(text, f"annotation {key}")
        if not check(value):
            raise RunbookError(f"annotation {key}={text!r}: {rule} (Knative's webhook refuses it)")
        return value

    def number(self, keys: Sequence[str], check: Callable[[float], bool], rule: str) -> float | None:
        value: float | None = self.read(keys, _parse_float, check, rule)
        return value

    def integer(self, keys: Sequence[str], check: Callable[[int], bool], rule: str) -> int | None:
        value: int | None = self.read(keys, _parse_int, check, rule)
        return value

    def duration(self, keys: Sequence[str], check: Callable[[float], bool], rule: str) -> float | None:
        value: float | None = self.read(keys, _parse_duration, check, rule)
        return value


def _resolve(config: _Config, a: _Annotations, container_concurrency: int) -> KpaSpec:
    _check_class_and_algorithm(a)
    metric = _or(a.raw(METRIC_KEYS), ("", CONCURRENCY))[1]
    if metric not in METRICS:
        raise RunbookError(f"scale metric {metric!r}: the KPA scales on concurrency or rps only")
    annotation_target = a.number(TARGET_KEYS, lambda v: v >= TARGET_MIN, f"must be ≥ {TARGET_MIN}")
    utilization = a.number(TARGET_UTILIZATION_KEYS, lambda v: 1 <= v <= 100, "must be in [1, 100]")
    target, total = _metric_target(config, metric, container_concurrency, annotation_target, utilization)
    stable_window = _or(
        a.duration(
            WINDOW_KEYS,
            lambda v: WINDOW_MIN <= v <= WINDOW_MAX and _whole_seconds(v),
            "must be whole seconds in [6s, 1h]",
        ),
        config.stable_window,
    )
    panic_percentage = _or(
        a.number(PANIC_WINDOW_KEYS, lambda v: 1 <= v <= 100, "must be in [1, 100]"), config.panic_window_percentage
    )
    threshold = _or(
        a.number(PANIC_THRESHOLD_KEYS, lambda v: 110 <= v <= 1000, "must be in [110, 1000]"),
        config.panic_threshold_percentage,
    )
    min_scale = _or(a.integer(MIN_SCALE_KEYS, lambda v: v >= 0, "must be an integer ≥ 0"), 0)
    max_scale = _or(a.integer(MAX_SCALE_KEYS, lambda v: v >= 0, "must be an integer ≥ 0"), config.max_scale)
    if max_scale and max_scale < min_scale:
        raise RunbookError(f"max-scale {max_scale} is less than min-scale {min_scale} (Knative's webhook refuses it)")
    return KpaSpec(
        metric=metric,
        target=target,
        total=total,
        target_burst_capacity=_or(
            a.number(TARGET_BURST_CAPACITY_KEYS, lambda v: v >= 0 or v == -1, "must be ≥ 0 or -1"),
            config.target_burst_capacity,
        ),
        panic_threshold=threshold / 100.0,
        stable_window=stable_window,
        panic_window=max(float(BUCKET_SECONDS), _round_half_away(stable_window * panic_percentage / 100.0)),
        max_scale_up_rate=config.max_scale_up_rate,
        max_scale_down_rate=config.max_scale_down_rate,
        scale_down_delay=_or(
            a.duration(
                SCALE_DOWN_DELAY_KEYS,
                lambda v: 0 <= v <= WINDOW_MAX and _whole_seconds(v),
                "must be whole seconds in [0, 1h]",
            ),
            config.scale_down_delay,
        ),
        activation_scale=_or(a.integer(ACTIVATION_SCALE_KEYS, lambda v: v >= 1, "must be an integer ≥ 1"), 1),
        min_scale=min_scale,
        max_scale=max_scale,
        enable_scale_to_zero=config.enable_scale_to_zero,
        scale_to_zero_grace_period=config.scale_to_zero_grace_period,
        scale_to_zero_pod_retention_period=_or(
            a.duration(POD_RETENTION_KEYS, lambda v: 0 <= v <= WINDOW_MAX, "must be in [0, 1h]"),
            config.scale_to_zero_pod_retention_period,
        ),
        progress_deadline=_or(
            a.duration(PROGRESS_DEADLINE_KEYS, lambda v: v > 0, "must be a positive duration"),
            DEFAULT_PROGRESS_DEADLINE,
        ),
    )


def _or(value: _T | None, default: _T) -> _T:
    """The annotation's value when set, else the ConfigMap's (or the default)."""
    return default if value is None else value


def _check_class_and_algorithm(a: _Annotations) -> None:
    klass = _or(a.raw((KNATIVE_CLASS_ANNOTATION,)), ("", KNATIVE_KPA_CLASS))[1]
    if klass != KNATIVE_KPA_CLASS:
        who = "Knative's HPA class (a HorizontalPodAutoscaler)" if klass == KNATIVE_HPA_CLASS else f"class {klass!r}"
        raise RunbookError(f"{KNATIVE_CLASS_ANNOTATION} is {klass!r}: {who} scales this revision, not the KPA")
    algorithm = a.raw(AGGREGATION_KEYS)
    if algorithm is not None and algorithm[1] != "linear":
        raise RunbookError(
            f"annotation {algorithm[0]}={algorithm[1]!r}: only the default linear window average is replayed"
        )


def _metric_target(
    config: _Config, metric: str, container_concurrency: int, annotation: float | None, utilization: float | None
) -> tuple[float, float]:
    """``ResolveMetricTarget``: (target per pod, total per pod)."""
    if metric == RPS:
        total, fraction = config.rps_target_default, config.target_utilization
    else:
        total = float(container_concurrency or config.container_concurrency_target_default)
        fraction = config.container_concurrency_target_fraction
    if annotation is not None:
        total = (
            min(annotation, container_concurrency) if metric == CONCURRENCY and container_concurrency else annotation
        )
    if utilization is not None:
        fraction = utilization / 100.0
    return max(TARGET_MIN, total * fraction), total


_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_INT = re.compile(r"[+-]?\d+")
_BOOLS = {
    **dict.fromkeys(("1", "t", "T", "true", "TRUE", "True"), True),
    **dict.fromkeys(("0", "f", "F", "false", "FALSE", "False"), False),
}


def _parse_float(text: str, what: str) -> float:
    if not _FLOAT.fullmatch(text):
        raise RunbookError(f"{what}: {text!r} is not a number")
    return float(text)


def _parse_int(text: str, what: str) -> int:
    if not _INT.fullmatch(text):
        raise RunbookError(f"{what}: {text!r} is not an integer")
    value = int(text)
    if not -(2**31) <= value < 2**31:
        raise RunbookError(f"{what}: {text!r} is out of the 32-bit range")
    return value


def _parse_bool(text: str, what: str) -> bool:
    """Go's ``strconv.ParseBool`` spellings."""
    if text not in _BOOLS:
        raise RunbookError(f"{what}: {text!r} is not a boolean (true or false)")
    return _BOOLS[text]


def _parse_duration(text: str, what: str) -> float:
    """A Go duration (``30s``, ``1m30s``, ``0``); a bare number other than 0 has no unit and is refused."""
    seconds = duration_seconds(text)
    if seconds is None or (re.fullmatch(r"\d+(?:\.\d+)?", text) and float(text) != 0):
        raise RunbookError(f"{what}: {text!r} is not a duration such as 30s or 1m")
    return seconds


# config-autoscaler key → (_Config field, parser), as ``NewConfigFromMap`` reads them.
_CONFIG_KEYS: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "enable-scale-to-zero": ("enable_scale_to_zero", _parse_bool),
    "container-concurrency-target-percentage": ("container_concurrency_target_fraction", _parse_float),
    "container-concurrency-target-default": ("container_concurrency_target_default", _parse_float),
    "requests-per-second-target-default": ("rps_target_default", _parse_float),
    "max-scale-up-rate": ("max_scale_up_rate", _parse_float),
    "max-scale-down-rate": ("max_scale_down_rate", _parse_float),
    "target-burst-capacity": ("target_burst_capacity", _parse_float),
    "panic-window-percentage": ("panic_window_percentage", _parse_float),
    "panic-threshold-percentage": ("panic_threshold_percentage", _parse_float),
    "stable-window": ("stable_window", _parse_duration),
    "scale-to-zero-grace-period": ("scale_to_zero_grace_period", _parse_duration),
    "scale-to-zero-pod-retention-period": ("scale_to_zero_pod_retention_period", _parse_duration),
    "scale-down-delay": ("scale_down_delay", _parse_duration),
    "max-scale": ("max_scale", _parse_int),
    "max-scale-limit": ("max_scale_limit", _parse_int),
}


def _whole_seconds(seconds: float) -> bool:
    return abs(seconds - round(seconds)) < 1e-9


def _round_half_away(seconds: float) -> float:
    """Go's ``Duration.Round(time.Second)``: halves away from zero."""
    return float(math.floor(seconds + 0.5))


# --- the replay ------------------------------------------------------------------------------------------------

_ACTIVE, _ACTIVATING, _INACTIVE = "active", "activating", "inactive"


def replay_kpa(
    spec: KpaSpec,
    series: Mapping[str, Sequence[tuple[float, float]]],
    initial_replicas: int,
    *,
    pod_ready_delay: float = 0.0,
    tick: float = 2.0,
    end: float | None = None,
) -> list[KpaTick]:
    """Replay the KPA over ``series[spec.metric]`` (the total over the revision, ``[(t, value), ...]``).

    Ticks at 0, tick, 2 × tick ... ≤ ``end`` (default: the last sample time), plus a row for every poke.
    """
    samples = _samples(series, spec.metric)
    if isinstance(initial_replicas, bool) or not isinstance(initial_replicas, int) or initial_replicas < 0:
        raise RunbookError(f"initial replicas must be an integer ≥ 0, got {initial_replicas!r}")
    if not (math.isfinite(pod_ready_delay) and pod_ready_delay >= 0):
        raise RunbookError(f"pod ready delay must be ≥ 0 seconds, got {pod_ready_delay!r}")
    if not (math.isfinite(tick) and tick > 0):
        raise RunbookError(f"tick must be a positive number of seconds, got {tick!r}")
    horizon = samples[-1][0] if end is None else end
    if not (math.isfinite(horizon) and horizon >= 0):
        raise RunbookError(f"the replay must end at t ≥ 0, got {horizon!r}")
    return _Replay(spec, samples, initial_replicas, pod_ready_delay, tick).run(horizon)


def _samples(series: Mapping[str, Sequence[tuple[float, float]]], metric: str) -> list[tuple[float, float]]:
    if metric not in series:
        names = ", ".join(sorted(series)) or "nothing"
        raise RunbookError(f"this revision scales on {metric}, but the series holds {names}")
    try:
        rows = [(float(t), float(v)) for t, v in series[metric]]
    except (TypeError, ValueError) as error:
        raise RunbookError(f"the {metric} series must be (time, value) number pairs: {error}") from None
    if not rows:
        raise RunbookError(f"the {metric} series is empty")
    for t, value in rows:
        if not (math.isfinite(t) and math.isfinite(value)) or value < 0:
            raise RunbookError(f"{metric} sample at t={t}: value {value} must be a finite number ≥ 0")
    return sorted(rows, key=lambda row: row[0])


@dataclass
class _Pods:
    """The Deployment's pods, each by the time it is (or will be) ready, in ascending order."""

    ready_at: list[float]

    @property
    def replicas(self) -> int:
        return len(self.ready_at)

    def ready(self, now: float) -> int:
        return bisect.bisect_right(self.ready_at, now)

    def scale_to(self, replicas: int, now: float, ready_delay: float) -> None:
        # New pods are ready no earlier than any earlier one, so the list stays sorted.
        if replicas > self.replicas:
            self.ready_at += [now + ready_delay] * (replicas - self.replicas)
        else:
            # The ReplicaSet removes pods that are not ready yet first.
            del self.ready_at[replicas:]


@dataclass
class _PodAutoscaler:
    """The PodAutoscaler's Active condition and the ServerlessService mode, as the KPA reconciler keeps them."""

    spec: KpaSpec
    status: str
    since: float
    proxy_since: float | None

    def reconcile(self, now: float, recommendation: int, ebc: int, pods: _Pods, ready_delay: float) -> None:
        want = self._scale(now, recommendation, pods, ready_delay)
        proxy = want == 0 or ebc < 0 or (want < 0 and self.status == _INACTIVE)
        if not proxy:
            self.proxy_since = None
        elif self.proxy_since is None:
            self.proxy_since = now
        self._update_active(now, want, pods.ready(now))

    def _scale(self, now: float, recommendation: int, pods: _Pods, ready_delay: float) -> int:
        """``scaler.scale``: the bounded recommendation, applied unless scale-to-zero must wait."""
        if recommendation < 0 and self.status != _ACTIVATING:
            return recommendation  # no metrics yet
        bounded = max(recommendation, self.spec.min_scale)
        if self.spec.max_scale:
            bounded = min(bounded, self.spec.max_scale)
        want, apply = self._handle_scale_to_zero(now, bounded)
        if apply:
            pods.scale_to(want, now, ready_delay)
        return want

    def _handle_scale_to_zero(self, now: float, scale: int) -> tuple[int, bool]:
        spec = self.spec
        if scale != 0:
            return scale, True
        if not spec.enable_scale_to_zero:
            return 1, True
        in_status_for = now - self.since
        if self.status == _ACTIVATING:
            if in_status_for > spec.progress_deadline + ACTIVATION_TIMEOUT_BUFFER:
                return 0, True
            return -1, False
        if self.status == _ACTIVE:
            # Turn Inactive after a stable window of activity; until then keep one pod.
            return (0, False) if in_status_for >= spec.stable_window else (1, True)
        retention = spec.scale_to_zero_pod_retention_period
        if in_status_for >= max(spec.scale_to_zero_grace_period, retention):
            return 0, True
        if retention > 0 and in_status_for < retention:
            return 0, False
        proxy_for = 0.0 if self.proxy_since is None else now - self.proxy_since
        return 0, spec.scale_to_zero_grace_period - proxy_for <= 0

    def _update_active(self, now: float, want: int, ready: int) -> None:
        """``computeActiveCondition``."""
        if want == 0 or (want < 0 and self.status == _INACTIVE):
            status = _INACTIVE
        else:
            status = _ACTIVATING if ready < max(self.spec.min_scale, 1) else _ACTIVE
        if status != self.status:
            self.status, self.since = status, now


def _initial_excess_burst_capacity(spec: KpaSpec) -> int:
    """What a new decider reports before its first tick (``multiscaler.go``, ``createScaler``; initial scale 1)."""
    tbc = spec.target_burst_capacity
    return int(tbc) if tbc in (-1, 0) else int(spec.total - tbc)


@dataclass
class _Moment:
    """A time at which the collector records (a whole second), the decider ticks, or a sample arrives."""

    t: float
    second: bool = False
    tick: bool = False
    sample: bool = False


class _Replay:
    def __init__(
        self, spec: KpaSpec, samples: list[tuple[float, float]], initial: int, ready_delay: float, tick: float
    ) -> None:
        self.spec = spec
        self.times = [t for t, _ in samples]
        self.values = [v for _, v in samples]
        self.ready_delay = ready_delay
        self.tick = tick
        self.pods = _Pods([0.0] * initial)
        self.stable = WindowAverager(spec.stable_window)
        self.panic = WindowAverager(spec.panic_window)
        self.decider = Decider(spec, initial, 0.0, tick)
        # At zero the revision was scaled to zero earlier: its last recommendation was 0.
        self.recommendation = -1 if initial else 0
        self.ebc = _initial_excess_burst_capacity(spec)
        self.pa = _PodAutoscaler(spec, _ACTIVE if initial else _INACTIVE, 0.0, None if initial else 0.0)

    def run(self, horizon: float) -> list[KpaTick]:
        rows: list[KpaTick] = []
        for moment in self._moments(horizon):
            now = moment.t
            value = self._value(now)
            if moment.second and value is not None and (value > 0 or self.pods.ready(now) > 0):
                self._record(now, value)
            # A request while the recommendation is 0: the activator's stat pokes the decider at once.
            poke = moment.sample and not moment.tick and value is not None and value > 0 and self.recommendation == 0
            if poke and value is not None and not moment.second:
                self._record(now, value)
            if moment.tick or poke:
                rows.append(self._decide(now))
        return rows

    def _moments(self, horizon: float) -> list[_Moment]:
        """Every time something happens, in time order."""
        moments: dict[float, _Moment] = {}

        def at(t: float) -> _Moment:
            return moments.setdefault(t, _Moment(t))

        for second in range(math.floor(horizon) + 1):
            at(float(second)).second = True
        for index in range(math.floor(horizon / self.tick + 1e-9) + 1):
            at(round(index * self.tick, 9)).tick = True
        for t in self.times:
            if 0 <= t <= horizon:
                at(t).sample = True
        return [moments[t] for t in sorted(moments)]

    def _value(self, now: float) -> float | None:
        index = bisect.bisect_right(self.times, now)
        return self.values[index - 1] if index else None

    def _record(self, now: float, value: float) -> None:
        self.stable.record(now, value)
        self.panic.record(now, value)

    def _decide(self, now: float) -> KpaTick:
        # Without data for a whole window the collector answers "no data" (unless the activator is the only
        # source, target-burst-capacity -1) and the previous recommendation stands.
        if not self.stable.is_empty(now) or self.spec.target_burst_capacity == -1:
            result = self.decider.scale(now, self.pods.ready(now), self.stable.average(now), self.panic.average(now))
            self.recommendation, self.ebc = result.desired_pods, result.excess_burst_capacity
        self.pa.reconcile(now, self.recommendation, self.ebc, self.pods, self.ready_delay)
        return KpaTick(now, self.pods.ready(now), self.pods.replicas, self.decider.in_panic)
