"""The fixes several scale_target findings share: scale on running requests per pod (an HPA, a ScaledObject, the
KPA, or KServe's external class with a replacement HPA), and the annotations they write.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from nbhelpers.checks.scale_target._facts import ScaleTargetFacts, Unit
from nbhelpers.facts import autoscalers, common
from nbhelpers.findings import patches
from nbhelpers.findings.model import Fix
from nbhelpers.models import kpa as kpa_model
from nbhelpers.sources import kinds, kube

RUNNING_METRIC = "vllm:num_requests_running"


def request_metric_fix(facts: ScaleTargetFacts, unit: Unit, drop: Callable[[autoscalers.Metric], bool]) -> Fix:
    """Scale on running requests per pod, with a target derived from the pod's measured capacity."""
    target = facts.capacity.target if facts.capacity is not None else None
    if target is None:
        return Fix(
            what="Scale on a request signal of the engine (vLLM's num_requests_running or num_requests_waiting per "
            "pod) instead. (No patch: the pod's request capacity is unknown: no --max-num-seqs flag or engine "
            "log line, no default for a known vLLM version and GPU, and no saturated period in the metrics.)"
        )
    assert facts.capacity is not None
    how = f"Target {target} running requests per pod: {facts.capacity.derivation()}."
    if unit.knative:
        plan = _kpa_plan(facts, target)
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
        address = _prometheus_address(facts)
        if address is None:
            return Fix(
                what=f"Replace the trigger with a prometheus trigger on {RUNNING_METRIC}. {how} (No patch: no Prometheus address is visible in the evidence.)"
            )
        triggers = [
            t
            for i, t in enumerate(kube.spec(unit.primary.obj).get("triggers") or [])
            if not drop(autoscalers.keda_metric(i, t))
        ]
        triggers.append(_prometheus_trigger(facts, address, target))

        def set_triggers(obj: common.KubeObject) -> None:
            obj["spec"]["triggers"] = triggers

        return Fix.from_plan(
            f"Scale {unit.primary.ref} on the running requests per pod (a prometheus trigger, AverageValue). {how}",
            patches.plan_patch(unit.primary.obj, set_triggers),
        )
    if unit.kserve_owned and unit.primary.kind == autoscalers.SCALED_OBJECT:
        return _kserve_keda_fix(facts, target, how)
    if unit.kserve_owned and facts.mode == common.RAW:
        return external_fix(facts, unit, how, metrics=[_running_metric(target)])
    if unit.llmisvc_owned:
        return llmisvc_scaling_fix(
            unit, f"Scale on running requests per pod: a prometheus trigger on {RUNNING_METRIC} in keda.triggers. {how}"
        )
    return Fix(
        what=f"Scale on running requests per pod. {how} (No patch: {unit.primary.ref} is owned by {unit.owner}.)"
    )


def _kserve_keda_fix(facts: ScaleTargetFacts, target: int, how: str) -> Fix:
    address = _prometheus_address(facts)
    if address is None:
        return Fix(
            what=f"Give the InferenceService an External prometheus metric on {RUNNING_METRIC} in "
            f"spec.predictor.autoScaling.metrics. {how} (No patch: no Prometheus address is visible in the evidence.)"
        )
    metric = {
        "type": "External",
        "external": {
            "metric": {"backend": "prometheus", "serverAddress": address, "query": _running_query(facts)},
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
        patches.plan_patch(facts.evidence.isvc, set_metrics),
    )


def external_fix(
    facts: ScaleTargetFacts,
    unit: Unit,
    how: str,
    metrics: list[dict[str, Any]] | None = None,
    behavior: Mapping[str, Any] | None = None,
) -> Fix:
    """KServe's own HPA only takes cpu/memory and reverts edits: switch the class to external and bring an HPA."""
    manifest = _replacement_hpa(facts, unit, metrics, behavior)
    plan = patches.plan_patch(facts.evidence.isvc, set_annotation(kube.AUTOSCALER_CLASS_ANNOTATION, "external"))
    text = yaml.safe_dump(manifest, sort_keys=False)
    return Fix.from_plan(
        f"{how} KServe's HPA takes only cpu or memory and restores its own spec, so set the autoscaler class to "
        f"external (KServe then deletes {unit.primary.name}) and create this HPA (kubectl apply -f):\n{text}"
        f"After the rollback, delete it: kubectl delete hpa {manifest['metadata']['name']} -n {facts.evidence.target.namespace}",
        plan,
        manifest=manifest,
    )


def _replacement_hpa(
    facts: ScaleTargetFacts, unit: Unit, metrics: list[dict[str, Any]] | None, behavior: Mapping[str, Any] | None
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
            "name": f"{common.predictor_name(facts.evidence)}-vllm",
            "namespace": facts.evidence.target.namespace,
        },
        "spec": spec,
    }


def _kpa_plan(facts: ScaleTargetFacts, target: int) -> patches.PatchPlan | None:
    """Switch a Knative service to the KPA on concurrency with ``target`` in-flight requests per pod."""
    predictor = kube.spec(facts.evidence.isvc).get("predictor") or {}

    def to_kpa(isvc: common.KubeObject) -> None:
        annotations = isvc.setdefault("metadata", {}).setdefault("annotations", {})
        for key in (
            kube.AUTOSCALER_CLASS_ANNOTATION,
            kpa_model.KNATIVE_CLASS_ANNOTATION,
            "serving.kserve.io/metric",
            "serving.kserve.io/targetUtilizationPercentage",
        ):
            annotations.pop(key, None)
        write_kpa_target(isvc, predictor, annotations, target)

    return patches.plan_patch(facts.evidence.isvc, to_kpa)


def _prometheus_address(facts: ScaleTargetFacts) -> str | None:
    """A Prometheus URL the cluster already uses: a prometheus trigger, the ISVC, or prometheus-adapter's flag."""
    for obj in facts.evidence.of(kinds.SCALED_OBJECT):
        for trigger in kube.spec(obj).get("triggers") or []:
            address = (trigger.get("metadata") or {}).get("serverAddress")
            if trigger.get("type") == "prometheus" and address:
                return str(address)
    for metric in ((kube.spec(facts.evidence.isvc).get("predictor") or {}).get("autoScaling") or {}).get(
        "metrics"
    ) or []:
        address = (((metric.get("external") or {}).get("metric")) or {}).get("serverAddress")
        if address:
            return str(address)
    for deployment in facts.evidence.of(kinds.DEPLOYMENT):
        for container in kube.containers(kube.pod_template_spec(deployment)):
            for arg in [*(container.get("args") or []), *(container.get("command") or [])]:
                if str(arg).startswith("--prometheus-url="):
                    return str(arg).split("=", 1)[1]
    return None


def _running_query(facts: ScaleTargetFacts) -> str:
    namespace, isvc = facts.evidence.target.namespace, facts.evidence.target.isvc
    return f'sum({RUNNING_METRIC}{{namespace="{namespace}", pod=~"{isvc}-predictor-.+"}})'


def _prometheus_trigger(facts: ScaleTargetFacts, address: str, target: int) -> dict[str, Any]:
    return {
        "type": "prometheus",
        "metricType": "AverageValue",
        "metadata": {"serverAddress": address, "query": _running_query(facts), "threshold": str(target)},
    }


def _hpa_metric_specs(hpa: Mapping[str, Any]) -> list[tuple[dict[str, Any], autoscalers.Metric]]:
    return [(copy.deepcopy(dict(m)), autoscalers.hpa_metric(m)) for m in kube.spec(hpa).get("metrics") or []]


def _running_metric(target: int) -> dict[str, Any]:
    return {
        "type": "Pods",
        "pods": {"metric": {"name": RUNNING_METRIC}, "target": {"type": "AverageValue", "averageValue": str(target)}},
    }


def set_annotation(key: str, value: str) -> Callable[[common.KubeObject], None]:
    def mutate(obj: common.KubeObject) -> None:
        obj.setdefault("metadata", {}).setdefault("annotations", {})[key] = value

    return mutate


def write_kpa_target(
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


def llmisvc_scaling_fix(unit: Unit, change: str) -> Fix:
    """The fix for an autoscaler KServe renders from an LLMInferenceService: it is rewritten from spec.scaling
    (spec.prefill.scaling for the prefill Deployment) on every reconcile (pkg/controller/v1alpha2/llmisvc/scaling.go:
    minReplicas, maxReplicas, keda.triggers / cooldownPeriod / idleReplicaCount, wva.hpa.behavior)."""
    where = "spec.prefill.scaling" if unit.primary.scale_target.name.endswith("-prefill") else "spec.scaling"
    return Fix(
        what=f"{change} Make the change in the LLMInferenceService's {where}: KServe renders {unit.primary.ref} from "
        "it and overwrites a direct edit. (No patch yet for an LLMInferenceService.)"
    )
