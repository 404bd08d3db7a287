"""``HPA_MISSING``: the service should autoscale, but no autoscaler acts on the predictor."""

from __future__ import annotations

from nbhelpers.checks.scale_target._facts import ScaleTargetFacts
from nbhelpers.checks.scale_target._fixes import set_annotation
from nbhelpers.facts import common
from nbhelpers.findings import patches
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.sources import kinds, kube

DEFAULT_CLASS = "hpa"
KSERVE_HPA_CLASSES = frozenset({"hpa", "external", "none"})


def hpa_missing(facts: ScaleTargetFacts) -> list[Finding]:
    if facts.mode != common.RAW or facts.units:
        return []
    klass = facts.klass or DEFAULT_CLASS
    if klass == "none" or not (facts.klass or _isvc_can_scale(facts)):
        return []  # no class asked for and fixed bounds: KServe's HPA would not scale either
    predictor = common.predictor_name(facts.evidence)
    keda_missing = facts.evidence.failure(kinds.SCALED_OBJECT.key + " ")
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
        f"InferenceService annotation {kube.AUTOSCALER_CLASS_ANNOTATION}: {facts.klass or '(not set: hpa)'}",
        f"predictor minReplicas {_isvc_bound(facts, 'minReplicas')}, maxReplicas {_isvc_bound(facts, 'maxReplicas')}",
        *facts.serving.lines,
        "no HorizontalPodAutoscaler, ScaledObject or PodAutoscaler in the namespace acts on the predictor",
    ]
    plan = None
    if klass not in ("hpa", "keda"):
        plan = patches.plan_patch(facts.evidence.isvc, set_annotation(kube.AUTOSCALER_CLASS_ANNOTATION, "hpa"))
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
            title=f"no autoscaler acts on the predictor (class {facts.klass or 'hpa (default)'})",
            summary=f"The InferenceService runs in RawDeployment mode with autoscaler class {klass}, but no autoscaler "
            f"targets the predictor: {why}. The replica count stays fixed, so load beyond one replica's capacity "
            "queues and times out.",
            objects=(facts.isvc_ref,),
            evidence=tuple(lines),
            fix=Fix.from_plan(what, plan),
        )
    ]


def _isvc_can_scale(facts: ScaleTargetFacts) -> bool:
    """KServe raises minReplicas below 1 to 1 and maxReplicas below minReplicas to minReplicas (hpa_reconciler.go)."""
    predictor = kube.spec(facts.evidence.isvc).get("predictor") or {}
    low = max(1, int(predictor.get("minReplicas") or 1))
    return int(predictor.get("maxReplicas") or 0) > low


def _isvc_bound(facts: ScaleTargetFacts, field: str) -> str:
    value = (kube.spec(facts.evidence.isvc).get("predictor") or {}).get(field)
    return str(value) if value is not None else "not set"
