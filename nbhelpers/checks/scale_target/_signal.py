"""The signal the autoscaler scales on: ``HPA_CPU_METRIC_ON_GPU`` (cpu or memory for a GPU-bound engine) and
``HPA_TARGET_ABOVE_POD_CAPACITY`` (a per-pod target the pod can never report before it saturates).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nbhelpers.checks.scale_target._facts import ScaleTargetFacts, Unit, can_scale
from nbhelpers.checks.scale_target._fixes import request_metric_fix, write_kpa_target
from nbhelpers.facts import autoscalers, common, scaling, vllm_args
from nbhelpers.facts.autoscalers import Autoscaler
from nbhelpers.findings import patches
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.models import kpa as kpa_model
from nbhelpers.models.capacity import PodCapacity
from nbhelpers.models.kpa import KNATIVE_UTILIZATION_ANNOTATION, KNATIVE_UTILIZATION_DEFAULT
from nbhelpers.sources import kube

# Names of per-pod signals that count requests in progress (not queued): their target is a concurrency.
_IN_FLIGHT = re.compile(r"num_requests_running|requests?_running|in_?flight|concurren", re.IGNORECASE)


@dataclass(frozen=True)
class _KpaTarget:
    """Knative's per-pod aim for the revision's metric (total x utilization), the utilization, and how both were
    resolved. ``metric`` is ``concurrency`` (in-flight requests) or ``rps`` (arrivals per second): two units."""

    metric: str
    effective: float
    fraction: float
    how: str


def resource_metrics_on_gpu(facts: ScaleTargetFacts) -> list[Finding]:
    if facts.workload is None:
        return []
    devices = common.accelerator_requests(facts.workload.serving)
    if not devices:
        return []
    findings = []
    for unit in facts.units:
        resource = [m for m in _metrics(unit) if _is_resource_metric(m)]
        if not resource or not can_scale(unit):
            continue
        findings.append(_cpu_on_gpu(facts, unit, resource, devices))
    return findings


def _cpu_on_gpu(
    facts: ScaleTargetFacts, unit: Unit, resource: list[autoscalers.Metric], devices: Mapping[str, int]
) -> Finding:
    assert facts.workload is not None
    names = sorted({metric.name for metric in resource})
    server = vllm_args.parse_container(facts.workload.serving).server
    lines = [
        unit.describe(),
        f"serving container {facts.workload.serving.get('name')} of {facts.workload.ref} requests "
        + ", ".join(f"{count} {name}" for name, count in sorted(devices.items())),
    ]
    lines += facts.demand_lines()
    fix = request_metric_fix(facts, unit, drop=lambda metric: _is_resource_metric(metric))
    return Finding(
        code="HPA_CPU_METRIC_ON_GPU",
        title=f"{unit.primary.kind} {unit.primary.name} scales a GPU {server} server on {'/'.join(names)}",
        summary=f"{unit.primary.ref} scales on {' and '.join(names)}, but the model server ({server}) does its work on "
        f"the GPU: its {'/'.join(names)} use stays flat while requests pile up, so the autoscaler does not add "
        "pods when load rises (and may remove them while the GPU is saturated).",
        objects=(*unit.refs, facts.workload.ref),
        evidence=tuple(lines),
        fix=fix,
    )


def targets_above_capacity(facts: ScaleTargetFacts) -> list[Finding]:
    """Targets at or above what a pod runs at once: the measured plateau when the window's metrics show one below
    the flag's ceiling (the KV cache holds fewer requests than ``--max-num-seqs``; measured as the what-if measures
    it, :func:`nbhelpers.models.capacity.saturated_concurrency`), else the ceiling in effect. A KPA on rps aims at
    a rate, so it is weighed against the requests per second a pod completes, never against the ceiling."""
    if facts.capacity is None:
        return []
    ceiling = facts.capacity.limit
    findings = []
    for unit in facts.units:
        if unit.primary.klass == "kpa":
            findings += _kpa_above_capacity(facts, unit)
            continue
        if ceiling is None:
            continue
        for metric in _metrics(unit):
            value = _in_flight_target(metric)
            if value is not None and value >= ceiling.value:
                findings.append(_metric_above(facts, unit, metric, value))
    return findings


def _kpa_above_capacity(facts: ScaleTargetFacts, unit: Unit) -> list[Finding]:
    assert facts.capacity is not None
    kpa = _kpa_target(facts, unit.primary)
    if kpa is None:
        return []
    if kpa.metric == kpa_model.RPS:
        pod = facts.capacity.pod
        if pod is None or kpa.effective < pod.throughput:
            return []
        return [_kpa_rps_above(facts, unit, kpa, pod)]
    ceiling = facts.capacity.limit
    if ceiling is None or kpa.effective < ceiling.value:
        return []
    return [_kpa_above(facts, unit, kpa)]


def _kpa_target(facts: ScaleTargetFacts, autoscaler: Autoscaler) -> _KpaTarget | None:
    """Knative's per-pod target and how it was resolved, as ``ResolveMetricTarget`` does it
    (knative/serving ``pkg/reconciler/autoscaling/resources/target.go``): for concurrency the total is
    ``containerConcurrency``, else ``container-concurrency-target-default`` (100), times
    ``container-concurrency-target-percentage``; for rps it is ``requests-per-second-target-default`` (200) times
    Knative's fixed 70 %; a ``target`` annotation replaces the total (for concurrency never above
    ``containerConcurrency``) and ``target-utilization-percentage`` the fraction. None for a metric the KPA does not
    scale on (its webhook refuses one)."""
    annotations = kube.annotations(autoscaler.obj)
    data = _config_autoscaler(facts)
    metric = str(annotations.get(kpa_model.KNATIVE_METRIC_ANNOTATION) or kpa_model.CONCURRENCY).strip()
    annotated = scaling.quantity_number(annotations.get(kpa_model.KNATIVE_TARGET_ANNOTATION))
    if metric == kpa_model.RPS:
        configured = scaling.quantity_number(data.get("requests-per-second-target-default"))
        total = configured if configured is not None else kpa_model.KNATIVE_RPS_TARGET_DEFAULT
        origin = f"requests-per-second-target-default {total:g}" + (
            "" if configured is not None else " (Knative default)"
        )
        if annotated is not None:
            total, origin = annotated, f"{kpa_model.KNATIVE_TARGET_ANNOTATION} {annotated:g}"
    elif metric == kpa_model.CONCURRENCY:
        total, origin = _concurrency_total(autoscaler, data, annotated)
    else:
        return None
    fraction, utilization_origin = _utilization(annotations, data, metric)
    effective = max(kpa_model.TARGET_MIN, total * fraction)
    unit = "requests/s" if metric == kpa_model.RPS else "in-flight requests"
    return _KpaTarget(
        metric, effective, fraction, f"{metric}: {origin} x {utilization_origin} = {effective:g} {unit} per pod"
    )


def _config_autoscaler(facts: ScaleTargetFacts) -> Mapping[str, Any]:
    config = facts.evidence.config_map(facts.evidence.site.knative_namespace, "config-autoscaler")
    return (config.get("data") or {}) if config is not None else {}


def _concurrency_total(autoscaler: Autoscaler, data: Mapping[str, Any], annotated: float | None) -> tuple[float, str]:
    concurrency = scaling.quantity_number(kube.spec(autoscaler.obj).get("containerConcurrency")) or 0.0
    default_total = scaling.quantity_number(data.get("container-concurrency-target-default"))
    fallback = default_total if default_total is not None else kpa_model.KNATIVE_CONCURRENCY_TARGET_DEFAULT
    total = concurrency or fallback
    if concurrency:
        origin = f"containerConcurrency {concurrency:g}"
    else:
        origin = f"container-concurrency-target-default {total:g}" + (
            "" if default_total is not None else " (Knative default)"
        )
    if annotated is not None:
        total = min(annotated, concurrency) if concurrency else annotated
        origin = f"{kpa_model.KNATIVE_TARGET_ANNOTATION} {annotated:g}" + (
            f" capped by containerConcurrency {concurrency:g}" if concurrency and concurrency < annotated else ""
        )
    return total, origin


def _utilization(annotations: Mapping[str, str], data: Mapping[str, Any], metric: str) -> tuple[float, str]:
    """The fraction of the total Knative aims at: the annotation, else the concurrency percentage of
    config-autoscaler (concurrency) or Knative's fixed rps utilization."""
    utilization = scaling.quantity_number(annotations.get(KNATIVE_UTILIZATION_ANNOTATION))
    if utilization is not None:
        return utilization / 100, f"{KNATIVE_UTILIZATION_ANNOTATION} {utilization:g}"
    if metric == kpa_model.RPS:
        return kpa_model.KNATIVE_RPS_UTILIZATION, f"{kpa_model.KNATIVE_RPS_UTILIZATION:g} (Knative's rps utilization)"
    configured = scaling.quantity_number(data.get("container-concurrency-target-percentage"))
    fraction = KNATIVE_UTILIZATION_DEFAULT if configured is None else configured
    fraction = fraction / 100 if fraction > 1 else fraction
    return fraction, f"container-concurrency-target-percentage {fraction:g}" + (
        " (Knative default)" if configured is None else ""
    )


def _kpa_above(facts: ScaleTargetFacts, unit: Unit, kpa: _KpaTarget) -> Finding:
    assert facts.capacity is not None and facts.capacity.limit is not None
    ceiling = facts.capacity.limit
    effective, how = kpa.effective, kpa.how
    fix = _kpa_target_fix(facts, unit, switch_from_rps=False)
    lines = [unit.describe(), f"KPA target per pod: {how}", *facts.demand_lines()]
    return Finding(
        code="HPA_TARGET_ABOVE_POD_CAPACITY",
        title=f"KPA target {effective:g} requests per pod >= the pod's {_label(facts)} of {ceiling.value:g}",
        summary=f"Knative adds a pod when the average in-flight requests per pod pass {effective:g} ({how}), but one "
        f"vLLM pod runs at most {ceiling.value:g} requests at once ({ceiling.origin}). The pod saturates and "
        "queues requests before the autoscaler reacts, so latency climbs first and scaling comes late.",
        objects=(*unit.refs, facts.isvc_ref),
        evidence=tuple(lines),
        fix=fix,
    )


def _kpa_rps_above(facts: ScaleTargetFacts, unit: Unit, kpa: _KpaTarget, pod: PodCapacity) -> Finding:
    """An rps target at or above the requests per second one pod completes with its batch full. Little's law turns
    the rate into the requests a pod would hold (rate x the seconds a request takes, measured in this window)."""
    held = kpa.effective * pod.service_seconds
    lines = [unit.describe(), f"KPA target per pod: {kpa.how}", pod.describe(), *facts.demand_lines()]
    return Finding(
        code="HPA_TARGET_ABOVE_POD_CAPACITY",
        title=f"KPA target {kpa.effective:g} requests/s per pod >= the {pod.throughput:.2f} requests/s a pod completes",
        summary=f"The revision scales on requests per second ({kpa_model.KNATIVE_METRIC_ANNOTATION}: rps): Knative "
        f"adds a pod when arrivals pass {kpa.effective:g} per second per pod ({kpa.how}). One vLLM pod completes "
        f"at most {pod.throughput:.2f} requests/s with its batch full ({pod.throughput_origin}). By Little's law a pod "
        f"fed {kpa.effective:g} requests/s would hold {held:,.0f} requests ({pod.service_seconds:.1f} s each), more "
        f"than the {pod.concurrency:g} it runs at once: it saturates and queues long before Knative adds a pod.",
        objects=(*unit.refs, facts.isvc_ref),
        evidence=tuple(lines),
        fix=_kpa_target_fix(facts, unit, switch_from_rps=True),
    )


def _metric_above(facts: ScaleTargetFacts, unit: Unit, metric: autoscalers.Metric, value: float) -> Finding:
    assert facts.capacity is not None and facts.capacity.limit is not None
    ceiling = facts.capacity.limit
    fix = request_metric_fix(facts, unit, drop=lambda m: m == metric)
    lines = [unit.describe(), *facts.demand_lines()]
    return Finding(
        code="HPA_TARGET_ABOVE_POD_CAPACITY",
        title=f"{unit.primary.kind} {unit.primary.name} target {value:g} in-flight requests per pod >= "
        f"{_label(facts)} {ceiling.value:g}",
        summary=f"{unit.primary.ref} adds pods when {metric.name} averages above {value:g} per pod, but one vLLM pod "
        f"runs at most {ceiling.value:g} requests at once ({ceiling.origin}). The running count cannot pass the "
        "ceiling, so the autoscaler only reacts after pods are saturated and requests already queue.",
        objects=(*unit.refs, facts.isvc_ref),
        evidence=tuple(lines),
        fix=fix,
    )


def _label(facts: ScaleTargetFacts) -> str:
    """``ceiling`` for the flag (or default) in effect, ``measured capacity`` when the plateau is lower."""
    assert facts.capacity is not None
    return "ceiling" if facts.capacity.limit is facts.capacity.ceiling else "measured capacity"


def _kpa_target_fix(facts: ScaleTargetFacts, unit: Unit, *, switch_from_rps: bool) -> Fix:
    """A concurrency target below the pod's capacity: in-flight requests are what a vLLM pod's capacity is
    counted in, so an rps revision is moved to concurrency rather than given a rate derived from this window."""
    assert facts.capacity is not None
    per_pod = facts.capacity.target
    if per_pod is None:
        return Fix(what="Scale on concurrency with a KPA target below the pod's request ceiling.")
    fraction, _ = _utilization(kube.annotations(unit.primary.obj), _config_autoscaler(facts), kpa_model.CONCURRENCY)
    total = max(1, math.floor(per_pod / fraction))
    predictor = kube.spec(facts.evidence.isvc).get("predictor") or {}

    def set_target(isvc: common.KubeObject) -> None:
        annotations = isvc.setdefault("metadata", {}).setdefault("annotations", {})
        write_kpa_target(isvc, predictor, annotations, total)

    plan = patches.plan_patch(facts.evidence.isvc, set_target)
    switch = (
        "Scale on concurrency instead of rps (a rate says nothing of how full a pod is). " if switch_from_rps else ""
    )
    return Fix.from_plan(
        f"{switch}Set the KPA target to {total} in-flight requests per pod, so that Knative aims at "
        f"{total} x {fraction:g} = {total * fraction:.0f}: {facts.capacity.derivation()}.",
        plan,
    )


def _metrics(unit: Unit) -> tuple[autoscalers.Metric, ...]:
    """The metrics that decide: a ScaledObject's triggers, a Knative-HPA's HPA, else the object's own."""
    if unit.primary.kind == autoscalers.POD_AUTOSCALER and unit.hpa is not None:
        return unit.hpa.metrics
    return unit.primary.metrics


def _is_resource_metric(metric: autoscalers.Metric) -> bool:
    return metric.name in ("cpu", "memory") and metric.source in ("Resource", "ContainerResource", "Knative")


def _in_flight_target(metric: autoscalers.Metric) -> float | None:
    """The per-pod target of a metric that counts requests in progress (AverageValue), else None."""
    if metric.target_type != "AverageValue" or metric.source not in ("Pods", "Object", "External"):
        return None
    text = (
        metric.name
        + " "
        + metric.trigger_metadata.get("query", "")
        + " "
        + metric.trigger_metadata.get("metricQuery", "")
    )
    if not _IN_FLIGHT.search(text) or "waiting" in text:
        return None
    return scaling.quantity_number(metric.target_value)
