"""A replay of the Kubernetes HorizontalPodAutoscaler controller (autoscaling/v2) over recorded metrics.

This is the reference model: one spec at a time, written to follow upstream line by line rather than
to be fast (``nbhelpers.models.hpa_batch`` replays many specs at once and is tested against this).
Upstream files it follows (kubernetes/kubernetes):

- ``pkg/controller/podautoscaler/horizontal.go``: ``reconcileAutoscaler`` (the special cases: target
  at 0 replicas with ``minReplicas != 0`` disables autoscaling, above ``maxReplicas`` → max, below
  ``minReplicas`` → min), ``computeReplicasForMetrics`` (the largest proposal across metrics; no
  action when every metric fails, or when one fails and the others would scale down),
  ``normalizeDesiredReplicas`` + ``stabilizeRecommendation`` + ``convertDesiredReplicasWithRules``
  (no ``behavior``: max over the downscale stabilization window, scale-up limit
  max(2 × current, 4)), ``normalizeDesiredReplicasWithBehaviors`` +
  ``stabilizeRecommendationWithBehaviors`` + ``convertDesiredReplicasWithBehaviorRate`` +
  ``calculateScaleUpLimitWithScalingRules`` / ``calculateScaleDownLimitWithBehaviors`` and
  ``storeScaleEvent`` (``behavior`` present).
- ``pkg/controller/podautoscaler/replica_calculator.go``: ``GetResourceReplicas`` (Utilization),
  ``calcPlainMetricReplicas`` (Resource AverageValue, Pods), ``GetObjectMetricReplicas`` /
  ``GetExternalMetricReplicas`` (Value: ratio × ready pods, and ceil(ratio) from zero replicas),
  ``GetObjectPerPodMetricReplicas`` / ``GetExternalPerPodMetricReplicas`` (AverageValue:
  ceil(usage / target), no pod count), ``groupPods`` and ``Tolerances.isWithin``.
- ``pkg/apis/autoscaling/v2/defaults.go``: defaults the API server applies (``minReplicas`` 1, a CPU
  80 % metric when none is given; when ``behavior`` is present, scale-up 0 s window, Pods 4 / 15 s
  and Percent 100 / 15 s, Max; scale-down Percent 100 / 15 s, Max, window left to the controller's
  ``--horizontal-pod-autoscaler-downscale-stabilization``, 300 s).

Arithmetic follows upstream's: targets and values are milli-units (``Quantity.MilliValue()``, rounded
up), averages are integer divisions, utilization is an integer percent, ratios are float64.

Replay semantics (docs/contracts.md#what-if-replay, a contract): a fresh controller syncs at t = 0, sync_period, ... up to
``end``. At t = 0 the initial replica count is recorded as a recommendation stamped 0 and there is no
scale event yet. A recommendation or scale event stamped s is inside a window W at sync t iff
s > t − W. A decision takes effect at once: ``current_replicas`` is the count after the sync, and new
pods are created at the sync's time; a scale-down removes the youngest pods first (as a ReplicaSet
does). ``desired_replicas`` is what the controller writes to ``status.desiredReplicas``: the
normalized decision, or the count kept when it does not rescale; so it always equals
``current_replicas`` here (when every metric fails upstream leaves the previous value, which is the
same count; before the first sync that value is taken to be the initial count).

How readiness enters (``pod_ready_delay``): a pod younger than the delay is not ready. Pods created
before the replay are ready.

- CPU Resource metrics (Utilization or AverageValue): on a scale-up young pods are what ``groupPods``
  calls unready. They are set aside, assumed at 0 % and the ratio is recomputed over all pods; if that
  flips the direction or lands within tolerance, the count is kept. Otherwise all pods count: the
  contract says so for the open loop (upstream would count only ready pods on a scale-down too).
- Object and External Value metrics: the ratio multiplies the pod count (all pods in the open loop, the
  ready ones with ``per_pod_from_total``, as ``getReadyPodsCount`` does).
- Pods metrics and other Resource metrics: with ``per_pod_from_total=False`` (the CLI) the value is
  the per-pod average the controller read and every pod counts. With ``per_pod_from_total=True`` the
  series holds the total over pods and young pods report no metric yet (a vLLM pod exposes metrics
  only once its server is up): upstream's missing-pod rule applies (0 on a scale-up, the target on a
  scale-down).
- Object and External AverageValue metrics do not look at pods: ceil(usage / target).

A metric with no sample at or before t gives no proposal, as a metric the controller cannot fetch.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal
from typing import Any, Literal

from nbhelpers.errors import RunbookError
from nbhelpers.util.quantities import parse_quantity

# behavior.scaleUp as the API server defaults it (autoscaling/v2 GenerateHPAScaleUpRules).
HPA_DEFAULT_SCALE_UP: Mapping[str, Any] = {
    "stabilizationWindowSeconds": 0,
    "selectPolicy": "Max",
    "policies": [
        {"type": "Pods", "value": 4, "periodSeconds": 15},
        {"type": "Percent", "value": 100, "periodSeconds": 15},
    ],
}
DEFAULT_TOLERANCE = 0.1  # --horizontal-pod-autoscaler-tolerance
DOWNSCALE_STABILIZATION_SECONDS = 300  # --horizontal-pod-autoscaler-downscale-stabilization
DEFAULT_CPU_UTILIZATION = 80  # autoscaling.DefaultCPUUtilization
LEGACY_SCALE_UP_FACTOR = 2.0  # scaleUpLimitFactor
LEGACY_SCALE_UP_MINIMUM = 4.0  # scaleUpLimitMinimum
MAX_STABILIZATION_SECONDS = 3600  # API validation
MAX_PERIOD_SECONDS = 1800  # API validation
MAX_INT32 = 2**31 - 1

SourceType = Literal["Resource", "Pods", "Object", "External"]
TargetType = Literal["Utilization", "AverageValue", "Value"]
PolicyType = Literal["Pods", "Percent"]
SelectPolicy = Literal["Max", "Min", "Disabled"]
Series = Mapping[str, Sequence[tuple[float, float]]]

_TARGETS_BY_SOURCE: dict[str, tuple[str, ...]] = {
    "Resource": ("Utilization", "AverageValue"),
    "Pods": ("AverageValue",),
    "Object": ("Value", "AverageValue"),
    "External": ("Value", "AverageValue"),
}


@dataclass(frozen=True)
class MetricSpec:
    """One entry of ``spec.metrics``. ``target`` is the integer percent for Utilization, else milli-units."""

    source: SourceType
    name: str  # the resource name (cpu, memory) for Resource, the metric name otherwise
    target_type: TargetType
    target: int

    @property
    def is_cpu(self) -> bool:
        return self.source == "Resource" and self.name == "cpu"


@dataclass(frozen=True)
class ScalingPolicy:
    type: PolicyType
    value: int
    period_seconds: int


@dataclass(frozen=True)
class ScalingRules:
    """``behavior.scaleUp`` or ``behavior.scaleDown`` after defaults. ``tolerance`` None: the controller's 0.1."""

    stabilization_window_seconds: int
    select_policy: SelectPolicy
    policies: tuple[ScalingPolicy, ...]
    tolerance: float | None = None


DEFAULT_SCALE_UP_RULES = ScalingRules(0, "Max", (ScalingPolicy("Pods", 4, 15), ScalingPolicy("Percent", 100, 15)))
DEFAULT_SCALE_DOWN_RULES = ScalingRules(DOWNSCALE_STABILIZATION_SECONDS, "Max", (ScalingPolicy("Percent", 100, 15),))


@dataclass(frozen=True)
class Behavior:
    scale_up: ScalingRules = DEFAULT_SCALE_UP_RULES
    scale_down: ScalingRules = DEFAULT_SCALE_DOWN_RULES


@dataclass(frozen=True)
class Tolerances:
    """Upstream ``Tolerances``: a ratio within [1 − scale_down, 1 + scale_up] keeps the current count."""

    scale_up: float = DEFAULT_TOLERANCE
    scale_down: float = DEFAULT_TOLERANCE

    def within(self, ratio: float) -> bool:
        return (1.0 - self.scale_down) <= ratio <= (1.0 + self.scale_up)


DEFAULT_METRICS = (MetricSpec("Resource", "cpu", "Utilization", DEFAULT_CPU_UTILIZATION),)


@dataclass(frozen=True)
class HpaSpec:
    """An autoscaling/v2 HPA spec with the API server's defaults applied; ``behavior`` None is the legacy path."""

    max_replicas: int
    metrics: tuple[MetricSpec, ...] = DEFAULT_METRICS
    min_replicas: int = 1
    behavior: Behavior | None = None

    @property
    def tolerances(self) -> Tolerances:
        if self.behavior is None:
            return Tolerances()
        up, down = self.behavior.scale_up.tolerance, self.behavior.scale_down.tolerance
        return Tolerances(
            DEFAULT_TOLERANCE if up is None else up,
            DEFAULT_TOLERANCE if down is None else down,
        )


@dataclass(frozen=True)
class HpaSync:
    t: float
    current_replicas: int  # count in effect after this sync's decision
    desired_replicas: int  # what the controller writes to status.desiredReplicas


@dataclass(frozen=True)
class PodGroups:
    """``groupPods``' split of the target's pods for one metric read from pods."""

    ready: int  # pods whose metric counts
    unready: int = 0  # set aside (CPU metric, pod not ready yet)
    missing: int = 0  # no metric reported


@dataclass(frozen=True)
class TimedCount:
    """A recommendation, or the size of a scale event, stamped with the sync time that produced it."""

    t: float
    count: int


# ---------------------------------------------------------------------------------------------------
# Building specs


def to_milli(value: str | float | int | Decimal) -> int:
    """``Quantity.MilliValue()``: the value in thousandths, rounded up."""
    return int((parse_quantity(value) * 1000).to_integral_value(rounding=ROUND_CEILING))


def series_milli(key: str, value: float) -> int:
    """A series value in milli-units; RunbookError for a value that is not a finite number."""
    try:
        return to_milli(value)
    except ValueError:
        raise RunbookError(f"series {key}: value {value!r} is not a finite number") from None


def make_metric(source: SourceType, name: str, target_type: TargetType, target: str | float | int) -> MetricSpec:
    """A metric from human units: ``make_metric("Pods", "vllm:num_requests_running", "AverageValue", "8")``."""
    if target_type == "Utilization":
        if isinstance(target, float) or not str(target).isdigit():
            raise RunbookError(f"metric {name}: averageUtilization must be a whole percent, got {target!r}")
        amount = int(target)
    else:
        try:
            amount = to_milli(target)
        except ValueError:
            raise RunbookError(f"metric {name}: target {target!r} is not a Kubernetes quantity") from None
    metric = MetricSpec(source, name, target_type, amount)
    validate_metric(metric)
    return metric


def series_key(metric: MetricSpec) -> str:
    """The SERIES metric name a metric reads: ``cpu``/``memory`` for Resource, the metric name otherwise."""
    return metric.name


def validate_metric(metric: MetricSpec) -> None:
    allowed = _TARGETS_BY_SOURCE.get(metric.source)
    if allowed is None:
        raise RunbookError(f"metric type {metric.source!r} is not modeled (use Resource, Pods, Object or External)")
    if metric.target_type not in allowed:
        raise RunbookError(
            f"{metric.source} metric {metric.name}: target type {metric.target_type} is not allowed "
            f"(allowed: {', '.join(allowed)})"
        )
    if not metric.name:
        raise RunbookError(f"{metric.source} metric: the name is empty")
    if metric.target <= 0:
        raise RunbookError(f"{metric.source} metric {metric.name}: the target must be greater than 0")


def _validate_rules(rules: ScalingRules, direction: str) -> None:
    if not 0 <= rules.stabilization_window_seconds <= MAX_STABILIZATION_SECONDS:
        raise RunbookError(f"behavior.{direction}.stabilizationWindowSeconds must be between 0 and 3600")
    if rules.select_policy not in ("Max", "Min", "Disabled"):
        raise RunbookError(f"behavior.{direction}.selectPolicy must be Max, Min or Disabled")
    if not rules.policies:
        raise RunbookError(f"behavior.{direction}.policies must hold at least one policy")
    for policy in rules.policies:
        if policy.type not in ("Pods", "Percent"):
            raise RunbookError(f"behavior.{direction}.policies: type must be Pods or Percent, got {policy.type!r}")
        if policy.value <= 0:
            raise RunbookError(f"behavior.{direction}.policies: value must be greater than 0")
        if not 0 < policy.period_seconds <= MAX_PERIOD_SECONDS:
            raise RunbookError(f"behavior.{direction}.policies: periodSeconds must be between 1 and 1800")
    if rules.tolerance is not None and not (math.isfinite(rules.tolerance) and rules.tolerance >= 0):
        raise RunbookError(f"behavior.{direction}.tolerance must be 0 or more")


def validate_spec(spec: HpaSpec) -> None:
    """The API server's validation of the fields the model uses; RunbookError on the first problem."""
    if spec.max_replicas < 1:
        raise RunbookError("spec.maxReplicas must be at least 1")
    if spec.min_replicas < 0 or spec.min_replicas > spec.max_replicas:
        raise RunbookError("spec.minReplicas must be between 0 and maxReplicas")
    if not spec.metrics:
        raise RunbookError("spec.metrics is empty")
    for metric in spec.metrics:
        validate_metric(metric)
    if spec.min_replicas == 0 and not any(m.source in ("Object", "External") for m in spec.metrics):
        raise RunbookError("spec.minReplicas 0 needs at least one Object or External metric (HPAScaleToZero)")
    if spec.behavior is not None:
        _validate_rules(spec.behavior.scale_up, "scaleUp")
        _validate_rules(spec.behavior.scale_down, "scaleDown")


# ---------------------------------------------------------------------------------------------------
# Parsing a manifest


def hpa_spec_from_manifest(manifest: Mapping[str, Any]) -> HpaSpec:
    """A YAML-loaded HorizontalPodAutoscaler → HpaSpec with the API server's defaults.

    autoscaling/v2 and v2beta2 (the same schema) are read as they are; autoscaling/v1 maps to one CPU
    utilization metric. v2beta1 (another schema) is refused.
    """
    if not isinstance(manifest, Mapping):
        raise RunbookError("HPA manifest: expected a mapping (a HorizontalPodAutoscaler object)")
    kind = manifest.get("kind")
    if kind != "HorizontalPodAutoscaler":
        raise RunbookError(f"HPA manifest: kind is {kind!r}, expected HorizontalPodAutoscaler")
    api_version = manifest.get("apiVersion")
    spec = manifest.get("spec")
    if not isinstance(spec, Mapping):
        raise RunbookError("HPA manifest: spec is missing")
    if api_version in ("autoscaling/v2", "autoscaling/v2beta2"):
        parsed = _spec_from_v2(spec)
    elif api_version == "autoscaling/v1":
        parsed = _spec_from_v1(spec)
    else:
        raise RunbookError(
            f"HPA manifest: apiVersion {api_version!r} is not supported; export it as autoscaling/v2 "
            "(kubectl get hpa NAME -o yaml returns v2 on current clusters)"
        )
    validate_spec(parsed)
    return parsed


def _int_field(mapping: Mapping[str, Any], key: str, where: str, default: int | None = None) -> int:
    value = mapping.get(key, default)
    if value is None:
        raise RunbookError(f"HPA manifest: {where}.{key} is required")
    if isinstance(value, bool) or not isinstance(value, int):
        raise RunbookError(f"HPA manifest: {where}.{key} must be an integer, got {value!r}")
    return value


def _replica_bounds(spec: Mapping[str, Any]) -> tuple[int, int]:
    return _int_field(spec, "minReplicas", "spec", 1), _int_field(spec, "maxReplicas", "spec")


def _spec_from_v1(spec: Mapping[str, Any]) -> HpaSpec:
    minimum, maximum = _replica_bounds(spec)
    percent = _int_field(spec, "targetCPUUtilizationPercentage", "spec", DEFAULT_CPU_UTILIZATION)
    metric = MetricSpec("Resource", "cpu", "Utilization", percent)
    return HpaSpec(max_replicas=maximum, min_replicas=minimum, metrics=(metric,))


def _spec_from_v2(spec: Mapping[str, Any]) -> HpaSpec:
    minimum, maximum = _replica_bounds(spec)
    raw_metrics = spec.get("metrics") or []
    if not isinstance(raw_metrics, list):
        raise RunbookError("HPA manifest: spec.metrics must be a list")
    metrics = tuple(_metric_from_v2(raw, index) for index, raw in enumerate(raw_metrics))
    behavior = spec.get("behavior")
    if behavior is not None and not isinstance(behavior, Mapping):
        raise RunbookError("HPA manifest: spec.behavior must be a mapping")
    return HpaSpec(
        max_replicas=maximum,
        min_replicas=minimum,
        metrics=metrics or DEFAULT_METRICS,
        behavior=None if behavior is None else _behavior_from_v2(behavior),
    )


def _metric_from_v2(raw: object, index: int) -> MetricSpec:
    where = f"spec.metrics[{index}]"
    if not isinstance(raw, Mapping):
        raise RunbookError(f"HPA manifest: {where} must be a mapping")
    source = raw.get("type")
    if source == "ContainerResource":
        raise RunbookError(f"HPA manifest: {where}: ContainerResource metrics are not modeled; use Resource")
    if source not in _TARGETS_BY_SOURCE:
        raise RunbookError(f"HPA manifest: {where}.type {source!r} is not Resource, Pods, Object or External")
    body = raw.get(str(source)[0].lower() + str(source)[1:])
    if not isinstance(body, Mapping):
        raise RunbookError(f"HPA manifest: {where} has type {source} but no {str(source).lower()} block")
    if source == "Resource":
        name = body.get("name")
    else:
        identifier = body.get("metric")
        name = identifier.get("name") if isinstance(identifier, Mapping) else None
    if not isinstance(name, str) or not name:
        raise RunbookError(f"HPA manifest: {where}: the metric name is missing")
    target = body.get("target")
    if not isinstance(target, Mapping):
        raise RunbookError(f"HPA manifest: {where}: target is missing")
    return _metric_with_target(source, name, target, where)


_TARGET_FIELDS = {"Utilization": "averageUtilization", "AverageValue": "averageValue", "Value": "value"}


def _metric_with_target(source: SourceType, name: str, target: Mapping[str, Any], where: str) -> MetricSpec:
    target_type = target.get("type")
    if target_type not in _TARGET_FIELDS:
        raise RunbookError(f"HPA manifest: {where}.target.type must be Utilization, AverageValue or Value")
    amount = target.get(_TARGET_FIELDS[target_type])
    if amount is None:
        raise RunbookError(
            f"HPA manifest: {where}: target type {target_type} needs target.{_TARGET_FIELDS[target_type]}"
        )
    if target_type == "Utilization" and (isinstance(amount, bool) or not isinstance(amount, int)):
        raise RunbookError(f"HPA manifest: {where}.target.averageUtilization must be an integer percent")
    if isinstance(amount, bool) or not isinstance(amount, str | int | float):
        raise RunbookError(f"HPA manifest: {where}: target {amount!r} is not a quantity")
    return make_metric(source, name, target_type, amount)


def _behavior_from_v2(raw: Mapping[str, Any]) -> Behavior:
    return Behavior(
        scale_up=_rules_from_v2(raw.get("scaleUp"), DEFAULT_SCALE_UP_RULES, "scaleUp"),
        scale_down=_rules_from_v2(raw.get("scaleDown"), DEFAULT_SCALE_DOWN_RULES, "scaleDown"),
    )


def _rules_from_v2(raw: object, default: ScalingRules, direction: str) -> ScalingRules:
    """``copyHPAScalingRules``: fields that are set win, the rest come from the defaults."""
    if raw is None:
        return default
    if not isinstance(raw, Mapping):
        raise RunbookError(f"HPA manifest: spec.behavior.{direction} must be a mapping")
    where = f"spec.behavior.{direction}"
    window = _int_field(raw, "stabilizationWindowSeconds", where, default.stabilization_window_seconds)
    select = raw.get("selectPolicy", default.select_policy)
    if select not in ("Max", "Min", "Disabled"):
        raise RunbookError(f"HPA manifest: {where}.selectPolicy must be Max, Min or Disabled, got {select!r}")
    policies = default.policies if raw.get("policies") is None else _policies_from_v2(raw["policies"], where)
    tolerance = default.tolerance if raw.get("tolerance") is None else _tolerance(raw["tolerance"], where)
    return ScalingRules(window, select, policies, tolerance)


def _policies_from_v2(raw: object, where: str) -> tuple[ScalingPolicy, ...]:
    if not isinstance(raw, list):
        raise RunbookError(f"HPA manifest: {where}.policies must be a list")
    policies = []
    for index, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise RunbookError(f"HPA manifest: {where}.policies[{index}] must be a mapping")
        kind = item.get("type")
        if kind not in ("Pods", "Percent"):
            raise RunbookError(f"HPA manifest: {where}.policies[{index}].type must be Pods or Percent")
        value = _int_field(item, "value", f"{where}.policies[{index}]")
        period = _int_field(item, "periodSeconds", f"{where}.policies[{index}]")
        policies.append(ScalingPolicy(kind, value, period))
    return tuple(policies)


def _tolerance(raw: object, where: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise RunbookError(f"HPA manifest: {where}.tolerance {raw!r} is not a quantity")
    try:
        return float(parse_quantity(raw))  # Quantity.AsApproximateFloat64()
    except ValueError:
        raise RunbookError(f"HPA manifest: {where}.tolerance {raw!r} is not a quantity") from None


# ---------------------------------------------------------------------------------------------------
# replica_calculator.go


def _ceil_replicas(value: float) -> int:
    return MAX_INT32 if value > MAX_INT32 else math.ceil(value)


def _direction_flipped(ratio: float, new_ratio: float) -> bool:
    return (ratio < 1.0 and new_ratio > 1.0) or (ratio > 1.0 and new_ratio < 1.0)


def utilization_replicas(
    current: int, target: int, ready_total_milli: int, pods: PodGroups, tolerances: Tolerances
) -> int | None:
    """``GetResourceReplicas``. ``ready_total_milli``: the ready pods' utilization percentages summed, × 1000.

    None when no ready pod has a metric (upstream: an error, so no proposal).
    """
    if pods.ready == 0:
        return None
    utilization = ready_total_milli // (pods.ready * 1000)
    ratio = utilization / target
    scale_up_with_unready = pods.unready > 0 and ratio > 1.0
    if not scale_up_with_unready and pods.missing == 0:
        if tolerances.within(ratio):
            return current
        return _ceil_replicas(ratio * pods.ready)
    total, counted = ready_total_milli, pods.ready
    if pods.missing and ratio < 1.0:  # missing pods taken at 100 % (or the target when above 100 %)
        total += pods.missing * max(100, target) * 1000
        counted += pods.missing
    elif pods.missing and ratio > 1.0:  # missing pods taken at 0 %
        counted += pods.missing
    if scale_up_with_unready:  # unready pods taken at 0 %
        counted += pods.unready
    new_ratio = (total // (counted * 1000)) / target
    return _recomputed(current, ratio, new_ratio, counted, tolerances)


def plain_replicas(
    current: int, target_milli: int, ready_total_milli: int, pods: PodGroups, tolerances: Tolerances
) -> int | None:
    """``calcPlainMetricReplicas`` (Pods metrics, Resource AverageValue). Total over the ready pods, milli-units."""
    if pods.ready == 0:
        return None
    ratio = (ready_total_milli // pods.ready) / target_milli
    scale_up_with_unready = pods.unready > 0 and ratio > 1.0
    if not scale_up_with_unready and pods.missing == 0:
        if tolerances.within(ratio):
            return current
        return _ceil_replicas(ratio * pods.ready)
    total, counted = ready_total_milli, pods.ready
    if pods.missing and ratio < 1.0:  # missing pods taken at exactly the target
        total += pods.missing * target_milli
        counted += pods.missing
    elif pods.missing and ratio > 1.0:  # missing pods taken at 0
        counted += pods.missing
    if scale_up_with_unready:
        counted += pods.unready
    new_ratio = (total // counted) / target_milli
    return _recomputed(current, ratio, new_ratio, counted, tolerances)


def _recomputed(current: int, ratio: float, new_ratio: float, counted: int, tolerances: Tolerances) -> int:
    """The end of GetResourceReplicas / calcPlainMetricReplicas once unready or missing pods were filled in."""
    if tolerances.within(new_ratio) or _direction_flipped(ratio, new_ratio):
        return current
    replicas = _ceil_replicas(new_ratio * counted)
    if (new_ratio < 1.0 and replicas > current) or (new_ratio > 1.0 and replicas < current):
        return current
    return replicas


def value_replicas(current: int, target_milli: int, usage_milli: int, ready_pods: int, tolerances: Tolerances) -> int:
    """``getUsageRatioReplicaCount`` (Object and External Value targets)."""
    ratio = usage_milli / target_milli
    if current == 0:  # from zero: no tolerance, no pod count
        return _ceil_replicas(ratio)
    if tolerances.within(ratio):
        return current
    return _ceil_replicas(ratio * ready_pods)


def average_value_replicas(status_replicas: int, target_milli: int, usage_milli: int, tolerances: Tolerances) -> int:
    """``GetObjectPerPodMetricReplicas`` / ``GetExternalPerPodMetricReplicas`` (AverageValue targets)."""
    if status_replicas > 0 and tolerances.within(usage_milli / (target_milli * status_replicas)):
        return status_replicas
    return _ceil_replicas(usage_milli / target_milli)


def metric_proposal(
    metric: MetricSpec,
    value_milli: int | None,
    current: int,
    young_pods: int,
    tolerances: Tolerances,
    *,
    per_pod_from_total: bool = False,
) -> int | None:
    """One metric's replica proposal at a sync (None: the controller could not compute it).

    ``value_milli`` is the series value in milli-units (percent × 1000 for Utilization);
    ``young_pods`` the pods younger than the ready delay.
    """
    if value_milli is None:
        return None
    if not per_pod_from_total:
        young_pods = contract_young_pods(metric, value_milli, young_pods)
    ready_pods = current - young_pods
    if metric.source in ("Object", "External"):
        if metric.target_type == "Value":
            return value_replicas(current, metric.target, value_milli, ready_pods, tolerances)
        return average_value_replicas(current, metric.target, value_milli, tolerances)
    if current == 0:  # no pods to read a metric from
        return None
    pods = _pod_groups(metric, current, young_pods, per_pod_from_total)
    total = value_milli if per_pod_from_total else value_milli * pods.ready
    if metric.target_type == "Utilization":
        return utilization_replicas(current, metric.target, total, pods, tolerances)
    return plain_replicas(current, metric.target, total, pods, tolerances)


def contract_young_pods(metric: MetricSpec, value_milli: int, young_pods: int) -> int:
    """The young pods the open-loop replay sets aside: docs/contracts.md#what-if-replay applies upstream's unready-pod
    treatment to a CPU Resource metric on scale-up only; otherwise all pods count."""
    if not metric.is_cpu:
        return 0
    observed = value_milli // 1000 if metric.target_type == "Utilization" else value_milli
    return young_pods if observed > metric.target else 0


def _pod_groups(metric: MetricSpec, current: int, young_pods: int, per_pod_from_total: bool) -> PodGroups:
    if metric.is_cpu:
        return PodGroups(ready=current - young_pods, unready=young_pods)
    if per_pod_from_total:
        return PodGroups(ready=current - young_pods, missing=young_pods)
    return PodGroups(ready=current)


# ---------------------------------------------------------------------------------------------------
# horizontal.go: normalization


def in_window(stamp: float, t: float, window: float) -> bool:
    """docs/contracts.md#what-if-replay: a recommendation or event stamped ``stamp`` is inside ``window`` at sync ``t``."""
    return stamp > t - window


def stabilize_legacy(recommendations: Sequence[TimedCount], t: float, desired: int, window: float) -> int:
    """``stabilizeRecommendation``: the highest recommendation in the window, this one included."""
    return max([desired, *(r.count for r in recommendations if in_window(r.t, t, window))])


def convert_with_rules(current: int, desired: int, min_replicas: int, max_replicas: int) -> int:
    """``convertDesiredReplicasWithRules``: clamp to [min, min(max, max(2 × current, 4))]."""
    scale_up_limit = int(max(LEGACY_SCALE_UP_FACTOR * current, LEGACY_SCALE_UP_MINIMUM))
    maximum_allowed = min(max_replicas, scale_up_limit)
    if desired < min_replicas:
        return min_replicas
    return min(desired, maximum_allowed)


def stabilize_with_behavior(
    recommendations: Sequence[TimedCount], t: float, current: int, desired: int, behavior: Behavior
) -> int:
    """``stabilizeRecommendationWithBehaviors``: bring current within [min over up window, max over down window]."""
    up_window = behavior.scale_up.stabilization_window_seconds
    down_window = behavior.scale_down.stabilization_window_seconds
    up = min([desired, *(r.count for r in recommendations if in_window(r.t, t, up_window))])
    down = max([desired, *(r.count for r in recommendations if in_window(r.t, t, down_window))])
    return min(max(current, up), down)


def replicas_changed_in_period(events: Sequence[TimedCount], t: float, period: float) -> int:
    """``getReplicasChangePerPeriod``."""
    return sum(event.count for event in events if in_window(event.t, t, period))


def replicas_at_period_start(
    current: int, up_events: Sequence[TimedCount], down_events: Sequence[TimedCount], t: float, period: float
) -> int:
    """The replica count a policy's period began with: undo the scale events inside the period."""
    return (
        current - replicas_changed_in_period(up_events, t, period) + replicas_changed_in_period(down_events, t, period)
    )


def scale_up_limit(
    current: int, up_events: Sequence[TimedCount], down_events: Sequence[TimedCount], rules: ScalingRules, t: float
) -> int:
    """``calculateScaleUpLimitWithScalingRules``."""
    if rules.select_policy == "Disabled":
        return current
    proposals = []
    for policy in rules.policies:
        period_start = replicas_at_period_start(current, up_events, down_events, t, policy.period_seconds)
        if policy.type == "Pods":
            proposals.append(period_start + policy.value)
        else:  # rounded up, or a small percentage could never add a pod
            proposals.append(math.ceil(period_start * (1 + policy.value / 100)))
    return min(proposals) if rules.select_policy == "Min" else max(proposals)


def scale_down_limit(
    current: int, up_events: Sequence[TimedCount], down_events: Sequence[TimedCount], rules: ScalingRules, t: float
) -> int:
    """``calculateScaleDownLimitWithBehaviors``."""
    if rules.select_policy == "Disabled":
        return current
    proposals = []
    for policy in rules.policies:
        period_start = replicas_at_period_start(current, up_events, down_events, t, policy.period_seconds)
        if policy.type == "Pods":
            proposals.append(period_start - policy.value)
        else:  # int32() truncates toward zero
            proposals.append(int(period_start * (1 - policy.value / 100)))
    return max(proposals) if rules.select_policy == "Min" else min(proposals)


def convert_with_behavior_rate(
    current: int,
    desired: int,
    min_replicas: int,
    max_replicas: int,
    up_events: Sequence[TimedCount],
    down_events: Sequence[TimedCount],
    behavior: Behavior,
    t: float,
) -> int:
    """``convertDesiredReplicasWithBehaviorRate``: the policies' rate limits, then min/max."""
    if desired > current:
        limit = max(current, scale_up_limit(current, up_events, down_events, behavior.scale_up, t))
        return min(desired, max_replicas, limit)
    if desired < current:
        limit = min(current, scale_down_limit(current, up_events, down_events, behavior.scale_down, t))
        return max(desired, min_replicas, limit)
    return desired


# ---------------------------------------------------------------------------------------------------
# The replay


@dataclass
class _ControllerState:
    current: int
    pod_created: list[float]  # creation time per pod, oldest first; -inf for pods that predate the replay
    recommendations: list[TimedCount] = field(default_factory=list)
    up_events: list[TimedCount] = field(default_factory=list)
    down_events: list[TimedCount] = field(default_factory=list)

    def young_pods(self, t: float, ready_delay: float) -> int:
        return sum(1 for created in self.pod_created if t - created < ready_delay)

    def scale_to(self, replicas: int, t: float) -> None:
        if replicas > self.current:
            self.pod_created.extend([t] * (replicas - self.current))
        else:
            del self.pod_created[replicas:]  # the youngest go first
        self.current = replicas

    def prune(self, t: float, horizon: float) -> None:
        """Drop history no window can reach any more (upstream overwrites such entries)."""
        self.recommendations = [r for r in self.recommendations if in_window(r.t, t, horizon)]
        self.up_events = [e for e in self.up_events if in_window(e.t, t, horizon)]
        self.down_events = [e for e in self.down_events if in_window(e.t, t, horizon)]


def _value_at(samples: Sequence[tuple[float, float]], times: Sequence[float], t: float) -> float | None:
    index = bisect.bisect_right(times, t) - 1
    return None if index < 0 else samples[index][1]


def _history_horizon(spec: HpaSpec) -> float:
    if spec.behavior is None:
        return DOWNSCALE_STABILIZATION_SECONDS
    rules = (spec.behavior.scale_up, spec.behavior.scale_down)
    longest_period = max(p.period_seconds for r in rules for p in r.policies)
    return max(longest_period, *(r.stabilization_window_seconds for r in rules))


def sync_times(series: Series, sync_period: float, end: float | None) -> list[float]:
    """0, P, 2P, ... up to ``end`` (default: the last series time)."""
    if not sync_period > 0:
        raise RunbookError("the sync period must be longer than 0 s")
    if end is None:
        end = max((samples[-1][0] for samples in series.values() if samples), default=0.0)
    return [k * sync_period for k in range(math.floor(end / sync_period + 1e-9) + 1)]


def replay_hpa(
    spec: HpaSpec,
    series: Series,
    initial_replicas: int,
    *,
    pod_ready_delay: float = 0.0,
    sync_period: float = 15.0,
    end: float | None = None,
    per_pod_from_total: bool = False,
) -> list[HpaSync]:
    """Replay the HPA controller over ``series`` (docs/contracts.md#what-if-replay); one HpaSync per sync."""
    validate_spec(spec)
    if initial_replicas < 0:
        raise RunbookError("the initial replica count must be 0 or more")
    readers = {key: (samples, [s[0] for s in samples]) for key, samples in series.items()}
    state = _ControllerState(initial_replicas, [-math.inf] * initial_replicas)
    horizon = _history_horizon(spec)
    out = []
    for t in sync_times(series, sync_period, end):
        if t == 0.0:  # recordInitialRecommendation
            state.recommendations.append(TimedCount(0.0, state.current))
        values = []
        for metric in spec.metrics:
            reader = readers.get(series_key(metric))
            raw = None if reader is None else _value_at(reader[0], reader[1], t)
            values.append(None if raw is None else series_milli(series_key(metric), raw))
        desired = _reconcile(spec, state, values, t, pod_ready_delay, per_pod_from_total)
        out.append(HpaSync(t, state.current, desired))
        state.prune(t, horizon)
    return out


def _reconcile(
    spec: HpaSpec,
    state: _ControllerState,
    values: Sequence[int | None],
    t: float,
    pod_ready_delay: float,
    per_pod_from_total: bool,
) -> int:
    """``reconcileAutoscaler`` for one sync: decide, record, apply; return status.desiredReplicas."""
    current = state.current
    if current == 0 and spec.min_replicas != 0:
        return 0  # autoscaling disabled while the target is at 0
    if current > spec.max_replicas:
        desired = spec.max_replicas
    elif current < spec.min_replicas:
        desired = spec.min_replicas
    else:
        proposal = _metrics_proposal(spec, state, values, t, pod_ready_delay, per_pod_from_total)
        if proposal is None:
            return current  # FailedComputeMetricsReplicas: no scale, status.desiredReplicas unchanged
        desired = _normalize(spec, state, max(0, proposal), t)
    if desired != current:
        if spec.behavior is not None:  # storeScaleEvent
            events = state.up_events if desired > current else state.down_events
            events.append(TimedCount(t, abs(desired - current)))
        state.scale_to(desired, t)
    return desired


def _metrics_proposal(
    spec: HpaSpec,
    state: _ControllerState,
    values: Sequence[int | None],
    t: float,
    pod_ready_delay: float,
    per_pod_from_total: bool,
) -> int | None:
    """``computeReplicasForMetrics``: the largest proposal, or None when the controller would not act."""
    young = state.young_pods(t, pod_ready_delay)
    tolerances = spec.tolerances
    proposals = [
        metric_proposal(metric, value, state.current, young, tolerances, per_pod_from_total=per_pod_from_total)
        for metric, value in zip(spec.metrics, values, strict=True)
    ]
    valid = [p for p in proposals if p is not None]
    if not valid:
        return None
    largest = max(valid)
    if len(valid) < len(proposals) and largest < state.current:
        return None  # a metric failed and the rest would scale down
    return largest


def _normalize(spec: HpaSpec, state: _ControllerState, desired: int, t: float) -> int:
    current = state.current
    if spec.behavior is None:
        stabilized = stabilize_legacy(state.recommendations, t, desired, DOWNSCALE_STABILIZATION_SECONDS)
        state.recommendations.append(TimedCount(t, desired))
        return convert_with_rules(current, stabilized, spec.min_replicas, spec.max_replicas)
    stabilized = stabilize_with_behavior(state.recommendations, t, current, desired, spec.behavior)
    state.recommendations.append(TimedCount(t, desired))
    return convert_with_behavior_rate(
        current,
        stabilized,
        spec.min_replicas,
        spec.max_replicas,
        state.up_events,
        state.down_events,
        spec.behavior,
        t,
    )
