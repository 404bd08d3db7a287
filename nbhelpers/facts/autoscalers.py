"""Every autoscaler acting on an InferenceService's predictor, in one typed shape.

Three kinds of object can scale a predictor (docs/upstream-facts.md):

- a ``HorizontalPodAutoscaler`` (KServe's RawDeployment one, Knative's HPA class, the one KEDA
  generates for a ScaledObject, or one a user wrote by hand);
- a KEDA ``ScaledObject`` (KServe's ``keda`` class or a user's own); KEDA turns it into an HPA
  named ``keda-hpa-<name>`` whose triggers become External metrics served by KEDA's metrics server;
- a Knative ``PodAutoscaler`` (one per revision; class ``kpa.autoscaling.knative.dev`` reads
  Knative's own metric pipeline, class ``hpa.autoscaling.knative.dev`` delegates to an HPA).

:func:`resolve` returns them all with their metrics, the metrics API that serves each metric,
conditions and replica bounds. It is a pure function of the evidence; checks build on it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nbhelpers.evidence.model import Evidence
from nbhelpers.models.kpa import (
    KNATIVE_CLASS_ANNOTATION,
    KNATIVE_HPA_CLASS,
    KNATIVE_KPA_CLASS,
    KNATIVE_MAX_SCALE_KEYS,
    KNATIVE_METRIC_ANNOTATION,
    KNATIVE_MIN_SCALE_KEYS,
    KNATIVE_TARGET_ANNOTATION,
)
from nbhelpers.sources import kinds, kube
from nbhelpers.sources.kube import KubeObject

HPA = "HorizontalPodAutoscaler"
SCALED_OBJECT = "ScaledObject"
POD_AUTOSCALER = "PodAutoscaler"

# The aggregated APIs an HPA reads its metrics from, by metric source type.
RESOURCE_METRICS_API = "metrics.k8s.io"
CUSTOM_METRICS_API = "custom.metrics.k8s.io"
EXTERNAL_METRICS_API = "external.metrics.k8s.io"
API_BY_SOURCE: Mapping[str, str] = {
    "Resource": RESOURCE_METRICS_API,
    "ContainerResource": RESOURCE_METRICS_API,
    "Pods": CUSTOM_METRICS_API,
    "Object": CUSTOM_METRICS_API,
    "External": EXTERNAL_METRICS_API,
}
# The APIService object that registers each API (the version every HPA controller asks for).
API_SERVICE_NAMES: Mapping[str, str] = {api: f"v1beta1.{api}" for api in API_BY_SOURCE.values()}

KEDA_HPA_PREFIX = "keda-hpa-"
# KEDA triggers that read the resource metrics API instead of KEDA's own external metrics server.
KEDA_RESOURCE_TRIGGERS = frozenset({"cpu", "memory"})


@dataclass(frozen=True)
class Metric:
    """One metric an autoscaler scales on.

    ``source`` is the HPA metric source type (Resource, ContainerResource, Pods, Object, External)
    or ``Knative`` for a KPA metric. ``api`` is the aggregated API serving it (one of
    :data:`API_BY_SOURCE`'s values), ``None`` when Knative's own pipeline serves it.
    ``target_type`` is Utilization, AverageValue or Value; ``target_value`` the quantity as written
    (for Utilization, the percentage as text). KEDA triggers keep their ``trigger`` type and
    ``trigger_metadata`` (for example a Prometheus query and threshold).
    """

    source: str
    name: str
    api: str | None
    target_type: str
    target_value: str | None
    selector: Mapping[str, Any] | None = None
    container: str | None = None
    described_object: Mapping[str, Any] | None = None
    trigger: str | None = None
    trigger_metadata: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        """``Pods metric vllm:num_requests_waiting (AverageValue 5)``."""
        what = f"{self.trigger} trigger" if self.trigger else f"{self.source} metric"
        text = f"{what} {self.name}"
        if self.container:
            text += f" of container {self.container}"
        if self.described_object:
            text += f" on {self.described_object.get('kind')}/{self.described_object.get('name')}"
        if self.selector:
            text += f" selector {describe_selector(self.selector)}"
        target = self.target_type + (f" {self.target_value}" if self.target_value is not None else "")
        return f"{text} ({target})"


@dataclass(frozen=True)
class ScaleTarget:
    """What an autoscaler scales: the reference as written, and the object when evidence holds it."""

    kind: str
    name: str
    api_version: str
    found: KubeObject | None

    def describe(self) -> str:
        return f"{self.kind}/{self.name}"


@dataclass(frozen=True)
class Autoscaler:
    """An HPA, ScaledObject or PodAutoscaler, with why it is taken to act on the predictor.

    ``why`` lists the ties found (scaleTargetRef names a predictor workload, owned by the
    InferenceService, labelled for it, named after it, owned by another listed autoscaler).
    ``targets_predictor`` is true when its scaleTargetRef names a predictor workload: an
    autoscaler tied to the service only by name, label or owner scales something else.
    ``owner`` is ``Kind/name`` of its controlling owner (InferenceService, PodAutoscaler,
    ScaledObject, ...), ``None`` for one a user created. ``klass`` is ``hpa``, ``keda``,
    ``kpa`` (Knative's own) or ``knative-hpa`` (a PodAutoscaler delegating to an HPA).
    ``behavior`` is the HPA behavior as written (for a ScaledObject, its
    ``advanced.horizontalPodAutoscalerConfig.behavior``); ``None`` when not set.
    ``hpa_name`` is the HPA a ScaledObject or Knative-HPA PodAutoscaler drives.
    """

    kind: str
    ref: str
    obj: KubeObject
    klass: str
    scale_target: ScaleTarget
    metrics: tuple[Metric, ...]
    conditions: tuple[Mapping[str, Any], ...]
    min_replicas: int | None
    max_replicas: int | None
    current_replicas: int | None
    desired_replicas: int | None
    behavior: Mapping[str, Any] | None
    owner: str | None
    targets_predictor: bool
    why: tuple[str, ...]
    hpa_name: str | None = None

    @property
    def name(self) -> str:
        return kube.name(self.obj)

    def condition(self, condition_type: str) -> Mapping[str, Any] | None:
        return next((entry for entry in self.conditions if entry.get("type") == condition_type), None)

    def apis(self) -> tuple[str, ...]:
        """The aggregated metrics APIs this autoscaler reads, in metric order, once each."""
        return tuple(dict.fromkeys(metric.api for metric in self.metrics if metric.api is not None))


def resolve(evidence: Evidence) -> tuple[Autoscaler, ...]:
    """Every autoscaler in the target namespace tied to the predictor, sorted by kind then name.

    Ties: the scaleTargetRef names a predictor workload (a Deployment labelled for the service, a
    revision's ``-deployment``, or KServe's name for either: ``<isvc>-predictor``,
    ``<isvc>-predictor-0000N-deployment``); or the object is
    owned by the InferenceService, labelled ``serving.kserve.io/inferenceservice=<isvc>``, named
    ``<isvc>-predictor...``, or owned by a ScaledObject / PodAutoscaler that is tied itself; an HPA whose
    target is missing is tied by its target's, its own name or its labels (:meth:`_Context.stale_target`).
    """
    context = _Context(evidence)
    scaled_objects = [context.scaled_object(obj) for obj in context.in_namespace(kinds.SCALED_OBJECT)]
    pod_autoscalers = [context.pod_autoscaler(obj) for obj in context.in_namespace(kinds.POD_AUTOSCALER)]
    parents = frozenset(a.ref for a in (*scaled_objects, *pod_autoscalers) if a is not None)
    hpas = [context.hpa(obj, parents) for obj in context.in_namespace(kinds.HPA)]
    found = [a for a in (*hpas, *scaled_objects, *pod_autoscalers) if a is not None]
    order = {HPA: 0, SCALED_OBJECT: 1, POD_AUTOSCALER: 2}
    return tuple(sorted(found, key=lambda a: (order[a.kind], a.name)))


# The field manager KServe's controller writes with: controller-runtime names it after the binary (cmd/manager).
KSERVE_FIELD_MANAGERS = frozenset({"manager"})
# The HPA controller's own writes (status, and the scale subresource of its target).
HPA_CONTROLLER_MANAGER = "kube-controller-manager"


@dataclass(frozen=True)
class FieldWriter:
    """One ``metadata.managedFields`` entry that owns fields under ``spec`` (status and scale writes left out)."""

    manager: str
    operation: str
    time: str | None
    fields: tuple[str, ...]

    def describe(self) -> str:
        when = f" at {self.time}" if self.time else ""
        return f"{self.manager} ({self.operation}{when}) owns spec.{', spec.'.join(self.fields)}"


def spec_writers(obj: Mapping[str, Any], field_name: str | None = None) -> tuple[FieldWriter, ...]:
    """The field managers that wrote ``spec`` (or only ``spec.<field_name>``) of ``obj``, from its managedFields.

    A field written through the ``scale`` or ``status`` subresource is left out: that is an autoscaler doing its
    job, not someone editing the object.
    """
    writers = []
    for entry in kube.metadata(obj).get("managedFields") or []:
        if not isinstance(entry, Mapping) or entry.get("subresource"):
            continue
        spec_fields = ((entry.get("fieldsV1") or {}).get("f:spec")) or {}
        if not isinstance(spec_fields, Mapping):
            continue
        owned = tuple(sorted(key[2:] for key in spec_fields if isinstance(key, str) and key.startswith("f:")))
        if not owned or (field_name is not None and field_name not in owned):
            continue
        writers.append(
            FieldWriter(str(entry.get("manager") or "?"), str(entry.get("operation") or "?"), entry.get("time"), owned)
        )
    return tuple(writers)


def describe_selector(selector: Mapping[str, Any]) -> str:
    """``a=b,c in (x,y)`` for a LabelSelector (matchLabels and matchExpressions)."""
    parts = [f"{key}={value}" for key, value in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or []:
        text = f"{expression.get('key')} {str(expression.get('operator')).lower()}"
        values = ",".join(str(value) for value in expression.get("values") or [])
        parts.append(f"{text} ({values})" if values else text)
    return ",".join(parts)


def autoscaler_class(isvc: Mapping[str, Any]) -> str:
    """KServe's ``serving.kserve.io/autoscalerClass`` (lower case), ``""`` when not set."""
    return kube.annotations(isvc).get(kube.AUTOSCALER_CLASS_ANNOTATION, "").strip().lower()


def hpa_metric(spec: Mapping[str, Any]) -> Metric:
    """One entry of an autoscaling/v2 HPA's ``spec.metrics``."""
    source = str(spec.get("type") or "")
    body: Mapping[str, Any] = spec.get(_SOURCE_FIELDS.get(source, "")) or {}
    metric = body.get("metric") or {}
    name = str(body.get("name") or metric.get("name") or "")
    target = body.get("target") or {}
    target_type = str(target.get("type") or "")
    if target_type == "Utilization":
        value = target.get("averageUtilization")
    else:
        value = target.get("averageValue") if target_type == "AverageValue" else target.get("value")
    return Metric(
        source=source,
        name=name,
        api=API_BY_SOURCE.get(source),
        target_type=target_type,
        target_value=None if value is None else str(value),
        selector=metric.get("selector") or None,
        container=str(body["container"]) if body.get("container") else None,
        described_object=body.get("describedObject") or None,
    )


_SOURCE_FIELDS = {
    "Resource": "resource",
    "ContainerResource": "containerResource",
    "Pods": "pods",
    "Object": "object",
    "External": "external",
}


def keda_metric(index: int, trigger: Mapping[str, Any]) -> Metric:
    """One ScaledObject trigger, as the metric KEDA's generated HPA reads.

    cpu/memory triggers become Resource metrics; every other trigger becomes an External metric
    that KEDA names ``s<index>-<trigger type>`` (plus a suffix from the trigger's metadata) or the
    trigger's ``name`` when given.
    """
    trigger_type = str(trigger.get("type") or "")
    metadata = {str(key): str(value) for key, value in (trigger.get("metadata") or {}).items()}
    if trigger_type in KEDA_RESOURCE_TRIGGERS:
        target_type = str(trigger.get("metricType") or metadata.get("type") or "Utilization")
        return Metric(
            source="ContainerResource" if metadata.get("containerName") else "Resource",
            name=trigger_type,
            api=RESOURCE_METRICS_API,
            target_type=target_type,
            target_value=metadata.get("value"),
            container=metadata.get("containerName"),
            trigger=trigger_type,
            trigger_metadata=metadata,
        )
    threshold = metadata.get("threshold") or metadata.get("targetValue") or metadata.get("value")
    return Metric(
        source="External",
        name=str(trigger.get("name") or f"s{index}-{trigger_type}"),
        api=EXTERNAL_METRICS_API,
        target_type=str(trigger.get("metricType") or "AverageValue"),
        target_value=threshold,
        trigger=trigger_type,
        trigger_metadata=metadata,
    )


class _Context:
    """What ties an object to the predictor, computed once per :func:`resolve`."""

    def __init__(self, evidence: Evidence) -> None:
        self.evidence = evidence
        self.namespace = evidence.target.namespace
        self.isvc = evidence.target.isvc
        self.llmisvc = evidence.target.is_llmisvc
        self.owner_kind = "LLMInferenceService" if self.llmisvc else "InferenceService"
        self.prefix = f"{self.isvc}-kserve" if self.llmisvc else f"{self.isvc}-predictor"
        # KServe's Deployment names (RawDeployment, and a Knative revision's; an LLMInferenceService's <name>-kserve and
        # <name>-kserve-prefill, workload_single_node.go): a scaleTargetRef of this form aims at the predictor even when
        # the Deployment is missing from the evidence.
        shape = r"(?:-prefill)?" if self.llmisvc else r"(?:-\d{5}-deployment)?"
        self.predictor_pattern = re.compile(rf"^{re.escape(self.prefix)}{shape}$")
        # The names before KServe 0.11 (a "default" component): ``<isvc>-predictor-default`` and its revisions'.
        self.legacy_pattern = re.compile(rf"^{re.escape(self.prefix)}-default(?:-\d{{5}}-deployment)?$")
        self.workloads: dict[tuple[str, str], KubeObject] = {}
        for kind in (kinds.DEPLOYMENT, kinds.REPLICA_SET):
            for obj in self.in_namespace(kind):
                self.workloads[(kind.kind, kube.name(obj))] = obj
        revisions = [kube.name(r) for r in self.in_namespace(kinds.KNATIVE_REVISION) if self.labelled(r)]
        self.predictor_deployments = {
            name for (kind, name), obj in self.workloads.items() if kind == "Deployment" and self.labelled(obj)
        } | {f"{revision}-deployment" for revision in revisions}

    def in_namespace(self, kind: kinds.Kind) -> list[KubeObject]:
        return sorted((o for o in self.evidence.of(kind) if kube.namespace(o) == self.namespace), key=kube.name)

    def labelled(self, obj: Mapping[str, Any]) -> bool:
        if self.llmisvc:
            return kube.is_llmisvc_workload(obj) and kube.labels(obj).get(kube.LLMISVC_NAME_LABEL) == self.isvc
        return kube.labels(obj).get(kube.ISVC_LABEL) == self.isvc

    def named_predictor(self, name: str) -> bool:
        if self.llmisvc:
            # KServe's autoscalers for an LLMInferenceService: <name>-kserve[-prefill]-hpa / -keda (scaling.go).
            return name in {f"{self.prefix}{part}-{kind}" for part in ("", "-prefill") for kind in ("hpa", "keda")}
        return name == self.prefix or name.startswith(self.prefix + "-")

    def target(self, ref: Mapping[str, Any]) -> tuple[ScaleTarget, bool]:
        kind = str(ref.get("kind") or "Deployment")
        name = str(ref.get("name") or "")
        found = self.workloads.get((kind, name))
        known = name in self.predictor_deployments or self.predictor_pattern.match(name) is not None
        predictor = kind == "Deployment" and known
        return ScaleTarget(kind, name, str(ref.get("apiVersion") or "apps/v1"), found), predictor

    def stale_target(self, obj: Mapping[str, Any], target: ScaleTarget, targets_predictor: bool) -> str | None:
        """Why an autoscaler whose scale target does not exist belongs to this service, ``None`` when it does not.

        A hand-made HPA outlives renames: before KServe 0.11 the RawDeployment Deployment was
        ``<isvc>-predictor-default``, so an HPA written then names a Deployment that no longer exists and reports
        ``AbleToScale=False, FailedGetScale``. It is tied when its target is that old name, or when it is named
        or labelled after the service and its target is no other service's predictor (an HPA left out here would read as "no autoscaler acts on the predictor" and lead the user to
        add a second one).
        """
        if targets_predictor or target.found is not None or not target.name:
            return None
        if self.legacy_pattern.match(target.name):
            return f"its scaleTargetRef names {target.describe()}, the name KServe before 0.11 gave this predictor"
        other = re.match(r"^(.+)-predictor(?:-|$)", target.name)
        if other is not None and other.group(1) != self.isvc:
            return None
        name = kube.name(obj)
        if name == self.isvc or name.startswith(self.isvc + "-"):
            return f"named after InferenceService {self.isvc}, and its scale target {target.describe()} is missing"
        label = next((key for key, value in sorted(kube.labels(obj).items()) if value == self.isvc), None)
        if label is not None:
            return f"labelled {label}={self.isvc}, and its scale target {target.describe()} is missing"
        return None

    def ties(self, obj: Mapping[str, Any], targets_predictor: bool, parents: frozenset[str] = frozenset()) -> list[str]:
        why = []
        if targets_predictor:
            why.append("its scaleTargetRef names a predictor workload")
        owners = kube.metadata(obj).get("ownerReferences") or []
        if any(o.get("kind") == self.owner_kind and o.get("name") == self.isvc for o in owners):
            why.append(f"owned by {self.owner_kind} {self.isvc}")
        for owner in owners:
            owner_ref = _owner_ref(owner, self.namespace)
            if owner_ref in parents:
                why.append(f"owned by {owner_ref}")
        if self.labelled(obj) and not self.llmisvc:
            why.append(f"labelled {kube.ISVC_LABEL}={self.isvc}")
        if self.named_predictor(kube.name(obj)):
            why.append(f"named after {self.prefix}")
        return why

    def hpa(self, obj: KubeObject, parents: frozenset[str]) -> Autoscaler | None:
        scale_target, predictor = self.target(kube.spec(obj).get("scaleTargetRef") or {})
        why = self.ties(obj, predictor, parents)
        stale = None if why else self.stale_target(obj, scale_target, predictor)
        if stale is not None:
            why.append(stale)
        if not why:
            return None
        status = kube.status(obj)
        owner = _controller(obj)
        klass = "hpa"
        if owner and owner.startswith(SCALED_OBJECT + "/"):
            klass = "keda"
        elif owner and owner.startswith(POD_AUTOSCALER + "/"):
            klass = "knative-hpa"
        return Autoscaler(
            kind=HPA,
            ref=kube.ref(obj),
            obj=obj,
            klass=klass,
            scale_target=scale_target,
            metrics=tuple(hpa_metric(m) for m in kube.spec(obj).get("metrics") or []),
            conditions=tuple(kube.conditions(obj)),
            min_replicas=_int(kube.spec(obj).get("minReplicas"), default=1),
            max_replicas=_int(kube.spec(obj).get("maxReplicas")),
            current_replicas=_int(status.get("currentReplicas")),
            desired_replicas=_int(status.get("desiredReplicas")),
            behavior=kube.spec(obj).get("behavior") or None,
            owner=owner,
            targets_predictor=predictor,
            why=tuple(why),
        )

    def scaled_object(self, obj: KubeObject) -> Autoscaler | None:
        spec = kube.spec(obj)
        scale_target, predictor = self.target(spec.get("scaleTargetRef") or {})
        why = self.ties(obj, predictor)
        if not why:
            return None
        advanced = (spec.get("advanced") or {}).get("horizontalPodAutoscalerConfig") or {}
        status = kube.status(obj)
        hpa_name = str(status.get("hpaName") or advanced.get("name") or KEDA_HPA_PREFIX + kube.name(obj))
        return Autoscaler(
            kind=SCALED_OBJECT,
            ref=kube.ref(obj),
            obj=obj,
            klass="keda",
            scale_target=scale_target,
            metrics=tuple(keda_metric(i, t) for i, t in enumerate(spec.get("triggers") or [])),
            conditions=tuple(kube.conditions(obj)),
            # KEDA's defaults: minReplicaCount 0, maxReplicaCount 100.
            min_replicas=_int(spec.get("minReplicaCount"), default=0),
            max_replicas=_int(spec.get("maxReplicaCount"), default=100),
            current_replicas=None,
            desired_replicas=None,
            behavior=advanced.get("behavior") or None,
            owner=_controller(obj),
            targets_predictor=predictor,
            why=tuple(why),
            hpa_name=hpa_name,
        )

    def pod_autoscaler(self, obj: KubeObject) -> Autoscaler | None:
        scale_target, predictor = self.target(kube.spec(obj).get("scaleTargetRef") or {})
        why = self.ties(obj, predictor)
        if not why:
            return None
        annotations = kube.annotations(obj)
        knative_class = annotations.get(KNATIVE_CLASS_ANNOTATION, KNATIVE_KPA_CLASS)
        delegates = knative_class == KNATIVE_HPA_CLASS
        metric_name = annotations.get(KNATIVE_METRIC_ANNOTATION) or ("cpu" if delegates else "concurrency")
        target = annotations.get(KNATIVE_TARGET_ANNOTATION)
        if target is None and kube.spec(obj).get("containerConcurrency"):
            target = str(kube.spec(obj)["containerConcurrency"])
        metric = Metric(
            source="Knative",
            name=metric_name,
            # With the HPA class the metric is read by the HPA Knative creates (listed on its own).
            api=None,
            target_type="AverageValue",
            target_value=target,
        )
        status = kube.status(obj)
        return Autoscaler(
            kind=POD_AUTOSCALER,
            ref=kube.ref(obj),
            obj=obj,
            klass="knative-hpa" if delegates else "kpa",
            scale_target=scale_target,
            metrics=(metric,),
            conditions=tuple(kube.conditions(obj)),
            min_replicas=_int(_first_present(annotations, KNATIVE_MIN_SCALE_KEYS)),
            max_replicas=_int(_first_present(annotations, KNATIVE_MAX_SCALE_KEYS)),
            current_replicas=_int(status.get("actualScale")),
            desired_replicas=_int(status.get("desiredScale")),
            behavior=None,
            owner=_controller(obj),
            targets_predictor=predictor,
            why=tuple(why),
            hpa_name=kube.name(obj) if delegates else None,
        )


def _owner_ref(owner: Mapping[str, Any], namespace: str) -> str:
    """The object reference (docs/contracts.md#object-references) of an owner (owners live in the object's namespace)."""
    return kinds.object_ref(
        {
            "apiVersion": owner.get("apiVersion") or "",
            "kind": owner.get("kind") or "",
            "metadata": {"namespace": namespace, "name": owner.get("name")},
        }
    )


def _controller(obj: Mapping[str, Any]) -> str | None:
    """``Kind/name`` of the owner marked as controller (else the first owner), ``None`` when unowned."""
    owners: Sequence[Mapping[str, Any]] = kube.metadata(obj).get("ownerReferences") or []
    chosen = next((o for o in owners if o.get("controller")), owners[0] if owners else None)
    return f"{chosen.get('kind')}/{chosen.get('name')}" if chosen else None


def _first_present(annotations: Mapping[str, Any], keys: Sequence[str]) -> Any:
    return next((annotations[key] for key in keys if key in annotations), None)


def _int(value: Any, default: int | None = None) -> int | None:
    if value is None or value == "":
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        return default
