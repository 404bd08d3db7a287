"""Step 7, ``scale_target``: does the autoscaler scale the workload that serves traffic, on a signal that fits
an LLM?

Autoscalers come from :func:`nbhelpers.facts.autoscalers.resolve`. One *unit* is one decision maker: a plain HPA,
a KEDA ScaledObject together with the HPA KEDA generates for it (``keda-hpa-<name>``), or a Knative
PodAutoscaler together with the HPA it delegates to (class ``hpa.autoscaling.knative.dev``). Two units on one
workload fight; a ScaledObject and its own HPA do not.

Facts relied on (verified against the sources cited):

- KServe picks the autoscaler from ``serving.kserve.io/autoscalerClass``; absent means ``hpa``. Classes hpa,
  external and none go through the HPA reconciler, which creates ``<isvc>-predictor`` (scaleTargetRef the
  Deployment of the same name) only for hpa, and deletes its own HPA for external and none; keda makes a
  ScaledObject ``<isvc>-predictor``; any other class is an error, so nothing is created (kserve/kserve
  pkg/controller/v1beta1/inferenceservice/reconcilers/autoscaler/autoscaler_reconciler.go, hpa/hpa_reconciler.go,
  keda/keda_reconciler.go). KServe's HPA only takes cpu or memory metrics, and writes an empty ``behavior``
  that its reconcile restores, so a direct edit of that HPA is reverted.
- HPA behavior defaults (kubernetes/kubernetes pkg/apis/autoscaling/v2/defaults.go): scale-up no
  stabilization, max(4 pods, 100 %) per 15 s; scale-down 100 % per 15 s with the controller's
  ``--horizontal-pod-autoscaler-downscale-stabilization`` window, 5 minutes by default.
- The KPA aims at ``total x utilization`` concurrent requests per pod, where total is the
  ``autoscaling.knative.dev/target`` annotation (capped by containerConcurrency when both are set), else
  containerConcurrency, else ``container-concurrency-target-default`` (100); utilization is the
  ``target-utilization-percentage`` annotation, else ``container-concurrency-target-percentage`` (0.7; values
  above 1 are percentages) (knative/serving pkg/reconciler/autoscaling/resources/target.go,
  pkg/autoscaler/config/config.go). The default is therefore 70 requests per pod.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from nbhelpers.errors import EvidenceMissing, StepSkipped
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import autoscalers, common, vllm_args
from nbhelpers.facts import scaling as facts
from nbhelpers.facts.autoscalers import Autoscaler
from nbhelpers.findings import patches
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.findings.steps import StepInfo
from nbhelpers.metrics import series
from nbhelpers.models import kpa as kpa_model
from nbhelpers.models.hpa import HPA_DEFAULT_SCALE_UP
from nbhelpers.models.kpa import (
    KNATIVE_MAX_SCALE_KEYS,
    KNATIVE_UTILIZATION_ANNOTATION,
    KNATIVE_UTILIZATION_DEFAULT,
)
from nbhelpers.sources import kinds, kube

STEP = StepInfo(
    "scale_target",
    "Scale target",
    "Does the autoscaler scale the workload that serves traffic, on a signal that fits an LLM?",
)

DEFAULT_CLASS = "hpa"
KSERVE_HPA_CLASSES = frozenset({"hpa", "external", "none"})
KNOWN_CLASSES = frozenset({"hpa", "kpa", "external", "keda", "none"})
DEFAULT_SCALE_DOWN_WINDOW = 300
HPA_SYNC_SECONDS = 15
# Desired above current for longer than this, with requests waiting, means the HPA held itself back.
HELD_BACK_SECONDS = 4 * HPA_SYNC_SECONDS
KNATIVE_TARGET_DEFAULT = 100.0
RUNNING_METRIC = "vllm:num_requests_running"
# Names of per-pod signals that count requests in progress (not queued): their target is a concurrency.
_IN_FLIGHT = re.compile(r"num_requests_running|requests?_running|in_?flight|concurren", re.IGNORECASE)
_NOT_FOUND = re.compile(r"not found|doesn't exist|does not exist", re.IGNORECASE)


def run(evidence: Evidence) -> list[Finding]:
    common.skip_modelmesh(evidence)
    common.require_read(evidence, kinds.HPA.key + " ")
    for kind in (kinds.SCALED_OBJECT, kinds.POD_AUTOSCALER):
        failure = evidence.failure(kind.key + " ")
        if failure is not None and failure.lost:
            raise EvidenceMissing(failure.what, f"{failure.status}: {failure.reason}")
    context = _Context(evidence)
    findings = context.missing()
    findings += context.wrong_targets()
    findings += context.conflicts()
    findings += context.resource_metrics_on_gpu()
    findings += context.targets_above_capacity()
    findings += context.at_max()
    findings += context.slow_behavior()
    return findings


# --- units ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Unit:
    """One decision maker: ``primary`` is what a user edits, ``hpa`` the HPA that scales (itself for a plain HPA)."""

    primary: Autoscaler
    hpa: Autoscaler | None

    @property
    def refs(self) -> tuple[str, ...]:
        extra = (self.hpa.ref,) if self.hpa is not None and self.hpa is not self.primary else ()
        return (self.primary.ref, *extra)

    @property
    def owner(self) -> str | None:
        return self.primary.owner

    @property
    def kserve_owned(self) -> bool:
        return (self.owner or "").startswith("InferenceService/")

    @property
    def user_owned(self) -> bool:
        return self.owner is None

    @property
    def knative(self) -> bool:
        return self.primary.kind == autoscalers.POD_AUTOSCALER

    @property
    def target_key(self) -> tuple[str, str]:
        return self.primary.scale_target.kind, self.primary.scale_target.name

    @property
    def max_replicas(self) -> int | None:
        return self.primary.max_replicas if self.primary.max_replicas is not None else self._hpa_field("max_replicas")

    @property
    def min_replicas(self) -> int | None:
        return self.primary.min_replicas if self.primary.min_replicas is not None else self._hpa_field("min_replicas")

    @property
    def current_replicas(self) -> int | None:
        if self.hpa is not None and self.hpa.current_replicas is not None:
            return self.hpa.current_replicas
        return self.primary.current_replicas

    def _hpa_field(self, name: str) -> int | None:
        value = getattr(self.hpa, name) if self.hpa is not None else None
        return value if isinstance(value, int) else None

    def describe(self) -> str:
        owner = f"owned by {self.owner}" if self.owner else "created by hand (no owner)"
        metrics = "; ".join(metric.describe() for metric in self.primary.metrics) or "no metrics"
        bounds = f"replicas {self.min_replicas if self.min_replicas is not None else '?'}-{self.max_replicas or '?'}"
        generated = f", through {self.hpa.ref}" if self.hpa is not None and self.hpa is not self.primary else ""
        return (
            f"{self.primary.ref} ({owner}{generated}): scales {self.primary.scale_target.describe()} on {metrics}; "
            f"{bounds}"
        )


def _units(evidence: Evidence, found: Sequence[Autoscaler]) -> list[Unit]:
    """Group the autoscalers into units; PodAutoscalers of revisions without traffic are left out."""
    live_revisions = {name for name, _ in common.traffic_revisions(evidence)}
    latest = common.latest_revision_name(evidence)
    if not live_revisions and latest:
        live_revisions = {latest}
    parents = {f"{a.kind}/{a.name}": a for a in found if a.kind != autoscalers.HPA}
    driven: dict[str, Autoscaler] = {}
    units = []
    for autoscaler in found:
        if autoscaler.kind == autoscalers.HPA and autoscaler.owner in parents:
            driven[autoscaler.owner or ""] = autoscaler
    for autoscaler in found:
        if autoscaler.kind == autoscalers.HPA:
            if autoscaler.owner not in parents:
                units.append(Unit(autoscaler, autoscaler))
            continue
        if autoscaler.kind == autoscalers.POD_AUTOSCALER and autoscaler.name not in live_revisions:
            continue
        units.append(Unit(autoscaler, driven.get(f"{autoscaler.kind}/{autoscaler.name}")))
    return units


@dataclass(frozen=True)
class _KpaTarget:
    """Knative's per-pod concurrency aim (total x utilization), the utilization, and how both were resolved."""

    effective: float
    fraction: float
    how: str


# --- the step ---------------------------------------------------------------------------------------


class _Context:
    def __init__(self, evidence: Evidence) -> None:
        self.evidence = evidence
        self.mode = common.effective_mode(evidence)
        self.isvc_ref = kube.ref(evidence.isvc)
        self.klass = autoscalers.autoscaler_class(evidence.isvc)
        self.found = autoscalers.resolve(evidence)
        self.units = _units(evidence, self.found)
        self.serving = facts.serving_workloads(evidence, self.mode)
        self.workload = _workload(evidence)
        self.capacity = facts.capacity(evidence, self.workload) if self.workload is not None else None
        self.starts = facts.cold_starts(evidence)

    # --- HPA_MISSING --------------------------------------------------------------------------------

    def missing(self) -> list[Finding]:
        if self.mode != common.RAW or self.units:
            return []
        klass = self.klass or DEFAULT_CLASS
        if klass == "none" or not (self.klass or self._isvc_can_scale()):
            return []  # no class asked for and fixed bounds: KServe's HPA would not scale either
        predictor = common.predictor_name(self.evidence)
        keda_missing = self.evidence.failure(kinds.SCALED_OBJECT.key + " ")
        if klass == "keda":
            why = f"KServe should have created ScaledObject {predictor}"
            if keda_missing is not None:
                why += f", but the ScaledObject CRD is not installed ({keda_missing.status}): KEDA is missing"
        elif klass == "external":
            why = "the external class tells KServe that you bring your own autoscaler"
        elif klass in KSERVE_HPA_CLASSES:
            why = f"KServe should have created HPA {predictor}"
        else:
            why = (
                f"KServe does not know the class {klass!r} in RawDeployment mode (hpa, keda, external, none): "
                "its reconcile fails before it creates any autoscaler"
            )
        lines = [
            f"InferenceService annotation {kube.AUTOSCALER_CLASS_ANNOTATION}: {self.klass or '(not set: hpa)'}",
            f"predictor minReplicas {self._isvc_bound('minReplicas')}, maxReplicas {self._isvc_bound('maxReplicas')}",
            *self.serving.lines,
            "no HorizontalPodAutoscaler, ScaledObject or PodAutoscaler in the namespace acts on the predictor",
        ]
        plan = None
        if klass not in ("hpa", "keda"):
            plan = patches.plan_patch(self.evidence.isvc, _set_annotation(kube.AUTOSCALER_CLASS_ANNOTATION, "hpa"))
        what = (
            "Let KServe create the HPA: set the autoscaler class to hpa (or create your own HPA or ScaledObject "
            "for the predictor Deployment and keep the class external). KServe's HPA scales on cpu; for an LLM "
            "prefer a request-based metric (see HPA_CPU_METRIC_ON_GPU)."
        )
        if klass == "hpa":
            what = (
                f"KServe creates HPA {predictor} on every reconcile: look for the reconcile error in the "
                "InferenceService's events and the KServe controller log (kubectl logs -n kserve "
                "deploy/kserve-controller-manager), then touch the InferenceService to trigger a reconcile."
            )
        elif klass == "keda":
            what = "Install KEDA (its ScaledObject CRD and operator), then KServe creates the ScaledObject."
        return [
            Finding(
                code="HPA_MISSING",
                title=f"no autoscaler acts on the predictor (class {self.klass or 'hpa (default)'})",
                summary=f"The InferenceService runs in RawDeployment mode with autoscaler class {klass}, but no autoscaler "
                f"targets the predictor: {why}. The replica count stays fixed, so load beyond one replica's capacity "
                "queues and times out.",
                objects=(self.isvc_ref,),
                evidence=tuple(lines),
                fix=Fix.from_plan(what, plan),
            )
        ]

    def _isvc_can_scale(self) -> bool:
        """KServe raises minReplicas below 1 to 1 and maxReplicas below minReplicas to minReplicas (hpa_reconciler.go)."""
        predictor = kube.spec(self.evidence.isvc).get("predictor") or {}
        low = max(1, int(predictor.get("minReplicas") or 1))
        return int(predictor.get("maxReplicas") or 0) > low

    def _isvc_bound(self, field: str) -> str:
        value = (kube.spec(self.evidence.isvc).get("predictor") or {}).get(field)
        return str(value) if value is not None else "not set"

    # --- HPA_TARGET_NOT_FOUND / HPA_TARGET_NOT_SERVING ----------------------------------------------

    def wrong_targets(self) -> list[Finding]:
        findings = []
        for unit in self.units:
            if unit.knative or not self.serving.deployments:
                continue
            target = unit.primary.scale_target
            if target.kind == "Deployment" and target.name in self.serving.deployments:
                continue
            missing_because = self._target_missing(unit)
            if target.found is None and missing_because is not None:
                findings.append(self._target_not_found(unit, missing_because))
            else:
                findings.append(self._target_not_serving(unit))
        return findings

    def _target_missing(self, unit: Unit) -> str | None:
        """The autoscaler's own report that its target does not exist (a condition or an event), or None."""
        for autoscaler in (unit.primary, unit.hpa):
            if autoscaler is None:
                continue
            for entry in autoscaler.conditions:
                message = str(entry.get("message") or "")
                if str(entry.get("status")) == "False" and (
                    entry.get("reason") == "FailedGetScale" or _NOT_FOUND.search(message)
                ):
                    return f"{autoscaler.ref} condition {kube.describe_condition(entry)}"
            for event in self._events_of(autoscaler.name):
                if event.get("reason") == "FailedGetScale" or _NOT_FOUND.search(str(event.get("message") or "")):
                    return f"event {event.get('reason')} on {autoscaler.ref}: {event.get('message')}"
        return None

    def _events_of(self, name: str) -> list[common.KubeObject]:
        return [
            event
            for event in self.evidence.events
            if ((event.get("involvedObject") or event.get("regarding") or {}).get("name")) == name
        ]

    def _retarget_fix(self, unit: Unit) -> Fix:
        deployments = self.serving.deployments
        if not unit.user_owned:
            return Fix(
                what=f"Point the scale target at the serving Deployment. (No patch: {unit.primary.ref} is generated by "
                f"{unit.owner}; fix the object that generates it.)"
            )
        wanted = deployments[-1]
        scale_target_field = "scaleTargetRef"

        def retarget(obj: common.KubeObject) -> None:
            obj["spec"][scale_target_field] = {"apiVersion": "apps/v1", "kind": "Deployment", "name": wanted}
            obj.pop("status", None)

        plan = patches.plan_patch(unit.primary.obj, retarget)
        what = f"Point {unit.primary.ref} at Deployment {wanted}, the workload behind the serving path."
        if self.mode == common.SERVERLESS:
            what += (
                " Each new revision gets a new Deployment, so a hand-made HPA must follow every rollout; the lasting "
                f"fix is to let Knative scale it ({kube.AUTOSCALER_CLASS_ANNOTATION} on the InferenceService) and "
                "delete this HPA."
            )
        return Fix.from_plan(what, plan)

    def _target_not_found(self, unit: Unit, because: str) -> Finding:
        target = unit.primary.scale_target
        fix = self._retarget_fix(unit)
        lines = [unit.describe(), because, *self.serving.lines]
        return Finding(
            code="HPA_TARGET_NOT_FOUND",
            title=f"{unit.primary.kind} {unit.primary.name} scales {target.describe()}, which does not exist",
            summary=f"{unit.primary.ref} names {target.describe()} as its scale target, and it reports that the object does "
            f"not exist ({because}). It scales nothing, so the Deployment that serves ({', '.join(self.serving.deployments)}) "
            "keeps its replica count whatever the load.",
            objects=(*unit.refs, self.isvc_ref),
            evidence=tuple(lines),
            fix=fix,
        )

    def _target_not_serving(self, unit: Unit) -> Finding:
        target = unit.primary.scale_target
        fix = self._retarget_fix(unit)
        state = "exists" if target.found is not None else "is not among the Deployments read for this service"
        lines = [unit.describe(), f"{target.describe()} {state}", *self.serving.lines]
        if target.found is not None:
            replicas = kube.status(target.found).get("replicas") or 0  # the API server omits 0
            lines.append(
                f"{target.describe()}: spec.replicas {kube.spec(target.found).get('replicas')}, status.replicas {replicas}"
            )
        return Finding(
            code="HPA_TARGET_NOT_SERVING",
            title=f"{unit.primary.kind} {unit.primary.name} scales {target.describe()}, not the serving workload",
            summary=f"{unit.primary.ref} scales {target.describe()}, but traffic goes to {', '.join(self.serving.deployments)}. "
            "Replicas it adds receive no requests, and the pods that do serve never get help under load.",
            objects=(*unit.refs, self.isvc_ref),
            evidence=tuple(lines),
            fix=fix,
        )

    # --- HPA_CONFLICT -------------------------------------------------------------------------------

    def conflicts(self) -> list[Finding]:
        groups: dict[tuple[str, str], list[Unit]] = {}
        for unit in self.units:
            groups.setdefault(unit.target_key, []).append(unit)
        return [self._conflict(key, group) for key, group in sorted(groups.items()) if len(group) > 1]

    def _conflict(self, key: tuple[str, str], group: list[Unit]) -> Finding:
        kind, name = key
        lines = [unit.describe() for unit in group]
        for unit in group:
            if unit.hpa is not None and unit.hpa.desired_replicas is not None:
                lines.append(
                    f"{unit.hpa.ref}: currentReplicas {unit.hpa.current_replicas}, desiredReplicas {unit.hpa.desired_replicas}"
                )
        scaling = [e for e in self._events_of(name) if e.get("reason") == "ScalingReplicaSet"]
        if scaling:
            lines.append(f"{len(scaling)} ScalingReplicaSet events on Deployment {name} in the window")
        kserve = [unit for unit in group if unit.kserve_owned]
        others = [unit for unit in group if not unit.kserve_owned]
        plan = None
        if self.mode == common.RAW and kserve and all(u.primary.kind == autoscalers.HPA for u in kserve) and others:
            keep = ", ".join(unit.primary.ref for unit in others)
            plan = patches.plan_patch(self.evidence.isvc, _set_annotation(kube.AUTOSCALER_CLASS_ANNOTATION, "external"))
            what = (
                f"Keep one autoscaler. To keep {keep}, set the InferenceService's autoscaler class to external: "
                "KServe then deletes the HPA it owns. To keep KServe's instead, delete the other one "
                f"(kubectl delete {_kubectl_kind(others[0].primary)} {others[0].primary.name} -n {self.evidence.target.namespace})."
            )
        else:
            extra = [unit for unit in group if unit.user_owned] or group[1:]
            deletes = "; ".join(
                f"kubectl get {_kubectl_kind(u.primary)} {u.primary.name} -n {self.evidence.target.namespace} -o yaml "
                f"> {u.primary.name}.yaml && kubectl delete {_kubectl_kind(u.primary)} {u.primary.name} "
                f"-n {self.evidence.target.namespace}"
                for u in extra
            )
            what = (
                "Keep one autoscaler: delete the one created by hand (no merge patch can remove an object): "
                f"{deletes}. Roll back with kubectl apply -f on the saved file."
            )
        return Finding(
            code="HPA_CONFLICT",
            title=f"{len(group)} autoscalers act on {kind} {name}",
            summary=f"{' and '.join(unit.primary.ref for unit in group)} all set the replica count of {kind} {name}. Each "
            "overwrites the other's decision on its own schedule, so the replica count flaps: pods are added and "
            "removed, and every new pod pays a full model load.",
            objects=tuple(ref for unit in group for ref in unit.refs),
            evidence=tuple(lines),
            fix=Fix.from_plan(what, plan),
        )

    # --- HPA_CPU_METRIC_ON_GPU ----------------------------------------------------------------------

    def resource_metrics_on_gpu(self) -> list[Finding]:
        if self.workload is None:
            return []
        devices = common.accelerator_requests(self.workload.serving)
        if not devices:
            return []
        findings = []
        for unit in self.units:
            resource = [m for m in _metrics(unit) if _is_resource_metric(m)]
            if not resource or not _can_scale(unit):
                continue
            findings.append(self._cpu_on_gpu(unit, resource, devices))
        return findings

    def _cpu_on_gpu(self, unit: Unit, resource: list[autoscalers.Metric], devices: Mapping[str, int]) -> Finding:
        assert self.workload is not None
        names = sorted({metric.name for metric in resource})
        server = vllm_args.parse_container(self.workload.serving).server
        lines = [
            unit.describe(),
            f"serving container {self.workload.serving.get('name')} of {self.workload.ref} requests "
            + ", ".join(f"{count} {name}" for name, count in sorted(devices.items())),
        ]
        lines += self._demand_lines(unit)
        fix = self._request_metric_fix(unit, drop=lambda metric: _is_resource_metric(metric))
        return Finding(
            code="HPA_CPU_METRIC_ON_GPU",
            title=f"{unit.primary.kind} {unit.primary.name} scales a GPU {server} server on {'/'.join(names)}",
            summary=f"{unit.primary.ref} scales on {' and '.join(names)}, but the model server ({server}) does its work on "
            f"the GPU: its {'/'.join(names)} use stays flat while requests pile up, so the autoscaler does not add "
            "pods when load rises (and may remove them while the GPU is saturated).",
            objects=(*unit.refs, self.workload.ref),
            evidence=tuple(lines),
            fix=fix,
        )

    def _demand_lines(self, unit: Unit) -> list[str]:
        lines = []
        waiting = series.peak(series.summed(self.evidence.metrics.get("vllm_waiting")))
        running = series.peak(series.summed(self.evidence.metrics.get("vllm_running")))
        if running is not None:
            lines.append(f"peak running requests (all pods) in the window: {running:.0f}")
        if waiting is not None:
            lines.append(f"peak waiting requests (all pods) in the window: {waiting:.0f}")
        replicas = series.summed(self.evidence.metrics.get("hpa_current_replicas"))
        if replicas:
            lines.append(
                f"HPA current replicas in the window: {min(replicas.values()):.0f}-{max(replicas.values()):.0f}"
            )
        if self.capacity is not None and self.capacity.ceiling is not None:
            lines.append(f"request ceiling per pod: {self.capacity.ceiling.value:g} ({self.capacity.ceiling.origin})")
        if self.capacity is not None and self.capacity.saturated_running is not None:
            lines.append(
                f"measured capacity: {self.capacity.saturated_running} running requests per pod while requests queued"
            )
        return lines

    # --- HPA_TARGET_ABOVE_POD_CAPACITY --------------------------------------------------------------

    def targets_above_capacity(self) -> list[Finding]:
        if self.capacity is None or self.capacity.ceiling is None:
            return []
        ceiling = self.capacity.ceiling
        findings = []
        for unit in self.units:
            if unit.primary.klass == "kpa":
                kpa = self._kpa_target(unit.primary)
                if kpa.effective >= ceiling.value:
                    findings.append(self._kpa_above(unit, kpa))
                continue
            for metric in _metrics(unit):
                value = _in_flight_target(metric)
                if value is not None and value >= ceiling.value:
                    findings.append(self._metric_above(unit, metric, value))
        return findings

    def _kpa_target(self, autoscaler: Autoscaler) -> _KpaTarget:
        """Knative's per-pod concurrency target and how it was resolved (knative/serving target.go)."""
        annotations = kube.annotations(autoscaler.obj)
        config = self.evidence.config_map(self.evidence.site.knative_namespace, "config-autoscaler")
        data = (config.get("data") or {}) if config is not None else {}
        concurrency = facts.quantity_number(kube.spec(autoscaler.obj).get("containerConcurrency")) or 0.0
        default_total = facts.quantity_number(data.get("container-concurrency-target-default"))
        total = concurrency or (default_total if default_total is not None else KNATIVE_TARGET_DEFAULT)
        if concurrency:
            origin = f"containerConcurrency {concurrency:g}"
        else:
            origin = f"container-concurrency-target-default {total:g}" + (
                "" if default_total is not None else " (Knative default)"
            )
        annotated = facts.quantity_number(annotations.get(kpa_model.KNATIVE_TARGET_ANNOTATION))
        if annotated is not None:
            total = min(annotated, concurrency) if concurrency else annotated
            origin = f"{kpa_model.KNATIVE_TARGET_ANNOTATION} {annotated:g}" + (
                f" capped by containerConcurrency {concurrency:g}" if concurrency and concurrency < annotated else ""
            )
        utilization = facts.quantity_number(annotations.get(KNATIVE_UTILIZATION_ANNOTATION))
        if utilization is not None:
            fraction, utilization_origin = utilization / 100, f"{KNATIVE_UTILIZATION_ANNOTATION} {utilization:g}"
        else:
            configured = facts.quantity_number(data.get("container-concurrency-target-percentage"))
            fraction = KNATIVE_UTILIZATION_DEFAULT if configured is None else configured
            fraction = fraction / 100 if fraction > 1 else fraction
            utilization_origin = f"container-concurrency-target-percentage {fraction:g}" + (
                " (Knative default)" if configured is None else ""
            )
        effective = max(1.0, total * fraction)
        return _KpaTarget(effective, fraction, f"{origin} x {utilization_origin} = {effective:g}")

    def _kpa_above(self, unit: Unit, kpa: _KpaTarget) -> Finding:
        assert self.capacity is not None and self.capacity.ceiling is not None
        ceiling = self.capacity.ceiling
        effective, how = kpa.effective, kpa.how
        fix = self._kpa_target_fix(kpa)
        lines = [unit.describe(), f"KPA target per pod: {how}", *self._demand_lines(unit)]
        return Finding(
            code="HPA_TARGET_ABOVE_POD_CAPACITY",
            title=f"KPA target {effective:g} requests per pod >= the pod's ceiling of {ceiling.value:g}",
            summary=f"Knative adds a pod when the average in-flight requests per pod pass {effective:g} ({how}), but one "
            f"vLLM pod runs at most {ceiling.value:g} requests at once ({ceiling.origin}). The pod saturates and "
            "queues requests before the autoscaler reacts, so latency climbs first and scaling comes late.",
            objects=(*unit.refs, self.isvc_ref),
            evidence=tuple(lines),
            fix=fix,
        )

    def _metric_above(self, unit: Unit, metric: autoscalers.Metric, value: float) -> Finding:
        assert self.capacity is not None and self.capacity.ceiling is not None
        ceiling = self.capacity.ceiling
        fix = self._request_metric_fix(unit, drop=lambda m: m == metric)
        lines = [unit.describe(), *self._demand_lines(unit)]
        return Finding(
            code="HPA_TARGET_ABOVE_POD_CAPACITY",
            title=f"{unit.primary.kind} {unit.primary.name} target {value:g} in-flight requests per pod >= ceiling {ceiling.value:g}",
            summary=f"{unit.primary.ref} adds pods when {metric.name} averages above {value:g} per pod, but one vLLM pod "
            f"runs at most {ceiling.value:g} requests at once ({ceiling.origin}). The running count cannot pass the "
            "ceiling, so the autoscaler only reacts after pods are saturated and requests already queue.",
            objects=(*unit.refs, self.isvc_ref),
            evidence=tuple(lines),
            fix=fix,
        )

    # --- HPA_AT_MAX ---------------------------------------------------------------------------------

    def at_max(self) -> list[Finding]:
        findings = []
        waiting = series.summed(self.evidence.metrics.get("vllm_waiting"))
        for unit in self.units:
            maximum, current = unit.max_replicas, unit.current_replicas
            if maximum is None or current is None or current < maximum:
                continue
            limited = next(
                (
                    entry
                    for entry in (unit.hpa.conditions if unit.hpa is not None else ())
                    if entry.get("type") == "ScalingLimited"
                    and str(entry.get("status")) == "True"
                    and entry.get("reason") == "TooManyReplicas"
                ),
                None,
            )
            queued = [value for value in waiting.values() if value > 0]
            if limited is None and not queued:
                continue  # at its maximum without unmet demand: nothing to fix
            findings.append(self._at_max(unit, maximum, limited, waiting))
        return findings

    def _at_max(
        self, unit: Unit, maximum: int, limited: Mapping[str, Any] | None, waiting: Mapping[float, float]
    ) -> Finding:
        lines = [unit.describe(), f"currentReplicas {unit.current_replicas} = maxReplicas {maximum}"]
        if limited is not None:
            lines.append(f"condition {kube.describe_condition(limited)}")
        lines += self._demand_lines(unit)
        if waiting:
            values = list(waiting.values())
            lines.append(
                f"waiting requests (all pods): first {values[0]:.0f}, last {values[-1]:.0f}, peak {max(values):.0f}"
            )
        needed = self._replicas_needed(maximum)
        fix = self._max_fix(unit, needed)
        demand = "requests kept waiting" if any(v > 0 for v in waiting.values()) else "the HPA wants more replicas"
        return Finding(
            code="HPA_AT_MAX",
            title=f"{unit.primary.kind} {unit.primary.name} at maxReplicas {maximum} while demand exceeds capacity",
            summary=f"{unit.primary.ref} runs at its maximum of {maximum} replicas and {demand} during the window: the "
            f"service needs about {needed} replicas at its peak. Until the maximum is raised, extra load queues and "
            "times out.",
            objects=(*unit.refs, self.isvc_ref),
            evidence=tuple(lines),
            fix=fix,
        )

    def _replicas_needed(self, maximum: int) -> int:
        """Peak demand (running + waiting, all pods) over the per-pod target, at least one above the maximum."""
        per_pod = self.capacity.target if self.capacity is not None else None
        running = series.summed(self.evidence.metrics.get("vllm_running"))
        waiting = series.summed(self.evidence.metrics.get("vllm_waiting"))
        demand = max((running.get(t, 0.0) + waiting.get(t, 0.0) for t in {*running, *waiting}), default=0.0)
        if per_pod is None or demand <= 0:
            return maximum + 1
        return max(maximum + 1, math.ceil(demand / per_pod))

    # --- HPA_BEHAVIOR_SLOW --------------------------------------------------------------------------

    def slow_behavior(self) -> list[Finding]:
        findings = []
        coldest = facts.slowest(self.starts)
        for unit in self.units:
            if unit.knative or not _can_scale(unit):
                continue  # Knative's HPA class takes no behavior; fixed bounds never scale
            behavior = unit.primary.behavior or (unit.hpa.behavior if unit.hpa is not None else None) or {}
            problems = []
            down_window = _scale_down_window(behavior)
            if coldest is not None and down_window < coldest.seconds:
                problems.append(
                    f"scale-down stabilization {down_window} s is shorter than the slowest cold start "
                    f"({coldest.seconds:.0f} s): a dip shorter than one pod start removes a pod that takes longer "
                    "than that to come back"
                )
            problems += self._scale_up_problems(unit, behavior)
            if problems:
                findings.append(self._behavior_finding(unit, behavior, problems, coldest))
        return findings

    def _scale_up_problems(self, unit: Unit, behavior: Mapping[str, Any]) -> list[str]:
        scale_up = {**HPA_DEFAULT_SCALE_UP, **(behavior.get("scaleUp") or {})}
        if scale_up.get("selectPolicy") == "Disabled":
            return ["scale-up is disabled (scaleUp.selectPolicy: Disabled)"]
        held = _held_back_seconds(self.evidence)
        if held < HELD_BACK_SECONDS or not _slower_than_default(scale_up, unit.current_replicas or 1):
            return []  # held back by pod starts or by the defaults themselves, not by these rules
        window = int(scale_up.get("stabilizationWindowSeconds") or 0)
        policies = ", ".join(
            f"{p.get('value')} {'%' if p.get('type') == 'Percent' else 'pods'} per {p.get('periodSeconds')} s"
            for p in scale_up.get("policies") or []
        )
        return [
            f"desired replicas stayed above current replicas for {held:.0f} s while requests waited: the scale-up "
            f"rules (stabilization {window} s; {policies or 'no policies'}; select {scale_up.get('selectPolicy')}) "
            "add pods slower than demand grows"
        ]

    def _behavior_finding(
        self, unit: Unit, behavior: Mapping[str, Any], problems: list[str], coldest: facts.ColdStart | None
    ) -> Finding:
        lines = [unit.describe(), f"behavior as written: {dict(behavior) or 'none (Kubernetes defaults)'}"]
        lines += [start.describe() for start in sorted(self.starts, key=lambda s: -s.seconds)[:3]]
        if coldest is None:
            lines.append("no pod shows created -> Ready in its status: the cold start could not be measured")
        fixed = _recommended_behavior(behavior, coldest)
        fix = self._behavior_fix(unit, fixed)
        return Finding(
            code="HPA_BEHAVIOR_SLOW",
            title=f"{unit.primary.kind} {unit.primary.name} scales too slowly for GPU pods",
            summary=f"{unit.primary.ref}: "
            + "; ".join(problems)
            + ". GPU pods pay a model load on every start, so the "
            "autoscaler must add them early and keep them through short dips.",
            objects=(*unit.refs, self.isvc_ref),
            evidence=tuple(lines),
            fix=fix,
        )

    # --- patches ------------------------------------------------------------------------------------

    def _request_metric_fix(self, unit: Unit, drop: Callable[[autoscalers.Metric], bool]) -> Fix:
        """Scale on running requests per pod, with a target derived from the pod's measured capacity."""
        target = self.capacity.target if self.capacity is not None else None
        if target is None:
            return Fix(
                what="Scale on a request signal of the engine (vLLM's num_requests_running or num_requests_waiting per "
                "pod) instead. (No patch: the pod's request capacity is unknown: no --max-num-seqs flag or engine "
                "log line, no default for a known vLLM version and GPU, and no saturated period in the metrics.)"
            )
        assert self.capacity is not None
        how = f"Target {target} running requests per pod: {self.capacity.derivation()}."
        if unit.knative:
            plan = self._kpa_plan(unit, target)
            return Fix.from_plan(
                f"Let Knative's KPA scale on in-flight requests instead of the HPA class. {how} Knative aims at "
                "70 % of the target by default, which leaves more headroom.",
                plan,
            )
        if unit.user_owned and unit.primary.kind == autoscalers.HPA:
            metrics = [m for m, parsed in _hpa_metric_specs(unit.primary.obj) if not drop(parsed)]
            metrics.append(_running_metric(target))

            def set_metrics(obj: common.KubeObject) -> None:
                obj["spec"]["metrics"] = metrics

            plan = patches.plan_patch(unit.primary.obj, set_metrics)
            return Fix.from_plan(
                f"Scale {unit.primary.ref} on the Pods metric {RUNNING_METRIC}. {how} The custom metrics API must "
                f"serve {RUNNING_METRIC} for the pods (prometheus-adapter rule).",
                plan,
            )
        if unit.user_owned and unit.primary.kind == autoscalers.SCALED_OBJECT:
            address = self._prometheus_address()
            if address is None:
                return Fix(
                    what=f"Replace the trigger with a prometheus trigger on {RUNNING_METRIC}. {how} (No patch: no Prometheus address is visible in the evidence.)"
                )
            triggers = [
                t
                for i, t in enumerate(kube.spec(unit.primary.obj).get("triggers") or [])
                if not drop(autoscalers.keda_metric(i, t))
            ]
            triggers.append(self._prometheus_trigger(address, target))

            def set_triggers(obj: common.KubeObject) -> None:
                obj["spec"]["triggers"] = triggers

            return Fix.from_plan(
                f"Scale {unit.primary.ref} on the running requests per pod (a prometheus trigger, AverageValue). {how}",
                patches.plan_patch(unit.primary.obj, set_triggers),
            )
        if unit.kserve_owned and unit.primary.kind == autoscalers.SCALED_OBJECT:
            return self._kserve_keda_fix(target, how)
        if unit.kserve_owned and self.mode == common.RAW:
            return self._external_fix(unit, how, metrics=[_running_metric(target)])
        return Fix(
            what=f"Scale on running requests per pod. {how} (No patch: {unit.primary.ref} is owned by {unit.owner}.)"
        )

    def _kserve_keda_fix(self, target: int, how: str) -> Fix:
        address = self._prometheus_address()
        if address is None:
            return Fix(
                what=f"Give the InferenceService an External prometheus metric on {RUNNING_METRIC} in "
                f"spec.predictor.autoScaling.metrics. {how} (No patch: no Prometheus address is visible in the evidence.)"
            )
        metric = {
            "type": "External",
            "external": {
                "metric": {"backend": "prometheus", "serverAddress": address, "query": self._running_query()},
                # KServe passes the value as the trigger's threshold; KEDA's default metricType AverageValue
                # makes it a per-pod target.
                "target": {"type": "Value", "value": str(target)},
            },
        }

        def set_metrics(isvc: common.KubeObject) -> None:
            predictor = isvc.setdefault("spec", {}).setdefault("predictor", {})
            predictor["autoScaling"] = {"metrics": [metric]}

        return Fix.from_plan(
            f"Let KServe's ScaledObject scale on the running requests per pod. {how}",
            patches.plan_patch(self.evidence.isvc, set_metrics),
        )

    def _external_fix(
        self,
        unit: Unit,
        how: str,
        metrics: list[dict[str, Any]] | None = None,
        behavior: Mapping[str, Any] | None = None,
    ) -> Fix:
        """KServe's own HPA only takes cpu/memory and reverts edits: switch the class to external and bring an HPA."""
        manifest = self._replacement_hpa(unit, metrics, behavior)
        plan = patches.plan_patch(self.evidence.isvc, _set_annotation(kube.AUTOSCALER_CLASS_ANNOTATION, "external"))
        text = yaml.safe_dump(manifest, sort_keys=False)
        return Fix.from_plan(
            f"{how} KServe's HPA takes only cpu or memory and restores its own spec, so set the autoscaler class to "
            f"external (KServe then deletes {unit.primary.name}) and create this HPA (kubectl apply -f):\n{text}"
            f"After the rollback, delete it: kubectl delete hpa {manifest['metadata']['name']} -n {self.evidence.target.namespace}",
            plan,
            manifest=manifest,
        )

    def _replacement_hpa(
        self, unit: Unit, metrics: list[dict[str, Any]] | None, behavior: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        spec = copy.deepcopy(dict(kube.spec(unit.primary.obj)))
        if metrics is not None:
            spec["metrics"] = metrics
        if behavior is not None:
            spec["behavior"] = dict(behavior)
        elif not spec.get("behavior"):
            spec.pop("behavior", None)
        return {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {
                "name": f"{common.predictor_name(self.evidence)}-vllm",
                "namespace": self.evidence.target.namespace,
            },
            "spec": spec,
        }

    def _kpa_plan(self, unit: Unit, target: int) -> patches.PatchPlan | None:
        """Switch a Knative service to the KPA on concurrency with ``target`` in-flight requests per pod."""
        predictor = kube.spec(self.evidence.isvc).get("predictor") or {}

        def to_kpa(isvc: common.KubeObject) -> None:
            annotations = isvc.setdefault("metadata", {}).setdefault("annotations", {})
            for key in (
                kube.AUTOSCALER_CLASS_ANNOTATION,
                kpa_model.KNATIVE_CLASS_ANNOTATION,
                "serving.kserve.io/metric",
                "serving.kserve.io/targetUtilizationPercentage",
            ):
                annotations.pop(key, None)
            _write_kpa_target(isvc, predictor, annotations, target)

        return patches.plan_patch(self.evidence.isvc, to_kpa)

    def _kpa_target_fix(self, kpa: _KpaTarget) -> Fix:
        assert self.capacity is not None
        per_pod = self.capacity.target
        if per_pod is None:
            return Fix(what="Lower the KPA target below the pod's request ceiling.")
        fraction = kpa.fraction
        total = max(1, math.floor(per_pod / fraction))
        predictor = kube.spec(self.evidence.isvc).get("predictor") or {}

        def set_target(isvc: common.KubeObject) -> None:
            annotations = isvc.setdefault("metadata", {}).setdefault("annotations", {})
            _write_kpa_target(isvc, predictor, annotations, total)

        plan = patches.plan_patch(self.evidence.isvc, set_target)
        return Fix.from_plan(
            f"Set the KPA target to {total} in-flight requests per pod, so that Knative aims at "
            f"{total} x {fraction:g} = {total * fraction:.0f}: {self.capacity.derivation()}.",
            plan,
        )

    def _max_fix(self, unit: Unit, needed: int) -> Fix:
        what = (
            f"Raise the maximum to {needed} replicas (peak running + waiting requests over the per-pod target), and "
            "check that the cluster has GPUs for them (see RESOURCES_GPU_UNSCHEDULABLE)."
        )
        if unit.user_owned and unit.primary.kind in (autoscalers.HPA, autoscalers.SCALED_OBJECT):
            field = "maxReplicas" if unit.primary.kind == autoscalers.HPA else "maxReplicaCount"

            def raise_max(obj: common.KubeObject) -> None:
                obj["spec"][field] = needed

            return Fix.from_plan(what, patches.plan_patch(unit.primary.obj, raise_max))
        annotations = kube.annotations(self.evidence.isvc)
        key = next((k for k in KNATIVE_MAX_SCALE_KEYS if k in annotations), None)

        def raise_isvc_max(isvc: common.KubeObject) -> None:
            if key is not None:
                isvc["metadata"]["annotations"][key] = str(needed)
            else:
                isvc.setdefault("spec", {}).setdefault("predictor", {})["maxReplicas"] = needed

        return Fix.from_plan(what, patches.plan_patch(self.evidence.isvc, raise_isvc_max))

    def _behavior_fix(self, unit: Unit, fixed: dict[str, Any]) -> Fix:
        down = fixed["scaleDown"]["stabilizationWindowSeconds"]
        how = (
            f"Keep pods for {down} s after load drops (twice the slowest cold start, rounded up to a minute, at least "
            "the 300 s default) and scale up with Kubernetes' default rules (4 pods or 100 % per 15 s)."
        )
        if unit.user_owned and unit.primary.kind == autoscalers.HPA:

            def set_behavior(obj: common.KubeObject) -> None:
                obj["spec"]["behavior"] = fixed

            return Fix.from_plan(how, patches.plan_patch(unit.primary.obj, set_behavior))
        if unit.user_owned and unit.primary.kind == autoscalers.SCALED_OBJECT:

            def set_keda_behavior(obj: common.KubeObject) -> None:
                advanced = obj["spec"].setdefault("advanced", {})
                advanced.setdefault("horizontalPodAutoscalerConfig", {})["behavior"] = fixed

            return Fix.from_plan(how, patches.plan_patch(unit.primary.obj, set_keda_behavior))
        if unit.kserve_owned and unit.primary.kind == autoscalers.HPA and self.mode == common.RAW:
            return self._external_fix(unit, how, behavior=fixed)
        return Fix(what=f"{how} (No patch: the InferenceService has no field for the behavior of {unit.primary.ref}.)")

    def _prometheus_address(self) -> str | None:
        """A Prometheus URL the cluster already uses: a prometheus trigger, the ISVC, or prometheus-adapter's flag."""
        for obj in self.evidence.of(kinds.SCALED_OBJECT):
            for trigger in kube.spec(obj).get("triggers") or []:
                address = (trigger.get("metadata") or {}).get("serverAddress")
                if trigger.get("type") == "prometheus" and address:
                    return str(address)
        for metric in ((kube.spec(self.evidence.isvc).get("predictor") or {}).get("autoScaling") or {}).get(
            "metrics"
        ) or []:
            address = (((metric.get("external") or {}).get("metric")) or {}).get("serverAddress")
            if address:
                return str(address)
        for deployment in self.evidence.of(kinds.DEPLOYMENT):
            for container in kube.containers(kube.pod_template_spec(deployment)):
                for arg in [*(container.get("args") or []), *(container.get("command") or [])]:
                    if str(arg).startswith("--prometheus-url="):
                        return str(arg).split("=", 1)[1]
        return None

    def _running_query(self) -> str:
        namespace, isvc = self.evidence.target.namespace, self.evidence.target.isvc
        return f'sum({RUNNING_METRIC}{{namespace="{namespace}", pod=~"{isvc}-predictor-.+"}})'

    def _prometheus_trigger(self, address: str, target: int) -> dict[str, Any]:
        return {
            "type": "prometheus",
            "metricType": "AverageValue",
            "metadata": {"serverAddress": address, "query": self._running_query(), "threshold": str(target)},
        }


# --- helpers ----------------------------------------------------------------------------------------


def _workload(evidence: Evidence) -> common.Workload | None:
    try:
        return common.current_workload(evidence)
    except (EvidenceMissing, StepSkipped):
        return None


def _metrics(unit: Unit) -> tuple[autoscalers.Metric, ...]:
    """The metrics that decide: a ScaledObject's triggers, a Knative-HPA's HPA, else the object's own."""
    if unit.primary.kind == autoscalers.POD_AUTOSCALER and unit.hpa is not None:
        return unit.hpa.metrics
    return unit.primary.metrics


def _is_resource_metric(metric: autoscalers.Metric) -> bool:
    return metric.name in ("cpu", "memory") and metric.source in ("Resource", "ContainerResource", "Knative")


def _can_scale(unit: Unit) -> bool:
    """An autoscaler whose bounds leave room to scale (a fixed min == max makes its metric moot)."""
    low, high = unit.min_replicas, unit.max_replicas
    return high is None or low is None or high > low


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
    return facts.quantity_number(metric.target_value)


def _hpa_metric_specs(hpa: Mapping[str, Any]) -> list[tuple[dict[str, Any], autoscalers.Metric]]:
    return [(copy.deepcopy(dict(m)), autoscalers.hpa_metric(m)) for m in kube.spec(hpa).get("metrics") or []]


def _running_metric(target: int) -> dict[str, Any]:
    return {
        "type": "Pods",
        "pods": {"metric": {"name": RUNNING_METRIC}, "target": {"type": "AverageValue", "averageValue": str(target)}},
    }


def _scale_down_window(behavior: Mapping[str, Any]) -> int:
    window = (behavior.get("scaleDown") or {}).get("stabilizationWindowSeconds")
    return int(window) if isinstance(window, int) else DEFAULT_SCALE_DOWN_WINDOW


def _recommended_behavior(behavior: Mapping[str, Any], coldest: facts.ColdStart | None) -> dict[str, Any]:
    down = DEFAULT_SCALE_DOWN_WINDOW
    if coldest is not None:
        down = max(down, math.ceil(2 * coldest.seconds / 60) * 60)
    scale_down = {**dict(behavior.get("scaleDown") or {}), "stabilizationWindowSeconds": down}
    return {"scaleUp": copy.deepcopy(dict(HPA_DEFAULT_SCALE_UP)), "scaleDown": scale_down}


def _pods_per_minute(scale_up: Mapping[str, Any], replicas: int) -> float:
    """How many pods the scale-up policies let the HPA add in a minute from ``replicas``."""
    allowances = []
    for policy in scale_up.get("policies") or []:
        period = max(1, int(policy.get("periodSeconds") or 15))
        value = float(policy.get("value") or 0)
        per_period = value if policy.get("type") == "Pods" else math.ceil(replicas * value / 100)
        allowances.append(per_period * 60 / period)
    if not allowances:
        return 0.0
    return min(allowances) if scale_up.get("selectPolicy") == "Min" else max(allowances)


def _slower_than_default(scale_up: Mapping[str, Any], replicas: int) -> bool:
    """Scale-up rules that add pods more slowly than Kubernetes' defaults would at this replica count."""
    if int(scale_up.get("stabilizationWindowSeconds") or 0) > 0:
        return True
    return _pods_per_minute(scale_up, replicas) < _pods_per_minute(HPA_DEFAULT_SCALE_UP, replicas)


def _held_back_seconds(evidence: Evidence) -> float:
    """The longest stretch where the HPA's desired replicas exceeded its current ones while requests waited."""
    desired = series.summed(evidence.metrics.get("hpa_desired_replicas"))
    current = series.summed(evidence.metrics.get("hpa_current_replicas"))
    waiting = series.summed(evidence.metrics.get("vllm_waiting"))
    longest, start = 0.0, None
    for moment in sorted(desired):
        behind = desired[moment] > current.get(moment, desired[moment]) and waiting.get(moment, 0.0) > 0
        if behind and start is None:
            start = moment
        if not behind:
            start = None
        if start is not None:
            longest = max(longest, moment - start)
    return longest


def _set_annotation(key: str, value: str) -> Callable[[common.KubeObject], None]:
    def mutate(obj: common.KubeObject) -> None:
        obj.setdefault("metadata", {}).setdefault("annotations", {})[key] = value

    return mutate


def _write_kpa_target(
    isvc: common.KubeObject, predictor: Mapping[str, Any], annotations: dict[str, Any], target: int
) -> None:
    """KServe writes ``scaleTarget`` into the Knative target annotation; use whichever the ISVC already uses."""
    spec_predictor = isvc.setdefault("spec", {}).setdefault("predictor", {})
    if "scaleTarget" in predictor or "scaleMetric" in predictor:
        spec_predictor["scaleMetric"] = "concurrency"
        spec_predictor["scaleTarget"] = target
        annotations.pop(kpa_model.KNATIVE_TARGET_ANNOTATION, None)
    else:
        annotations[kpa_model.KNATIVE_METRIC_ANNOTATION] = "concurrency"
        annotations[kpa_model.KNATIVE_TARGET_ANNOTATION] = str(target)
    if not annotations:
        isvc["metadata"].pop("annotations", None)


def _kubectl_kind(autoscaler: Autoscaler) -> str:
    return {
        autoscalers.HPA: "hpa",
        autoscalers.SCALED_OBJECT: "scaledobject",
        autoscalers.POD_AUTOSCALER: "podautoscaler",
    }[autoscaler.kind]
