"""``HPA_CONFLICT``: two autoscalers act on one workload."""

from __future__ import annotations

from nbhelpers.checks.scale_target._facts import ScaleTargetFacts, Unit
from nbhelpers.checks.scale_target._fixes import set_annotation
from nbhelpers.facts import autoscalers, common
from nbhelpers.facts.autoscalers import Autoscaler
from nbhelpers.findings import patches
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.sources import kube


def conflicts(facts: ScaleTargetFacts) -> list[Finding]:
    groups: dict[tuple[str, str], list[Unit]] = {}
    for unit in facts.units:
        groups.setdefault(unit.target_key, []).append(unit)
    return [_conflict(facts, key, group) for key, group in sorted(groups.items()) if len(group) > 1]


def _conflict(facts: ScaleTargetFacts, key: tuple[str, str], group: list[Unit]) -> Finding:
    kind, name = key
    lines = [unit.describe() for unit in group]
    for unit in group:
        if unit.hpa is not None and unit.hpa.desired_replicas is not None:
            lines.append(
                f"{unit.hpa.ref}: currentReplicas {unit.hpa.current_replicas}, desiredReplicas {unit.hpa.desired_replicas}"
            )
    scaling = [e for e in facts.events_of(name) if e.get("reason") == "ScalingReplicaSet"]
    if scaling:
        lines.append(f"{len(scaling)} ScalingReplicaSet events on Deployment {name} in the window")
    kserve = [unit for unit in group if unit.kserve_owned]
    others = [unit for unit in group if not unit.kserve_owned]
    plan = None
    if facts.mode == common.RAW and kserve and all(u.primary.kind == autoscalers.HPA for u in kserve) and others:
        keep = ", ".join(unit.primary.ref for unit in others)
        plan = patches.plan_patch(facts.evidence.isvc, set_annotation(kube.AUTOSCALER_CLASS_ANNOTATION, "external"))
        what = (
            f"Keep one autoscaler. To keep {keep}, set the InferenceService's autoscaler class to external: "
            "KServe then deletes the HPA it owns. To keep KServe's instead, delete the other one "
            f"(kubectl delete {_kubectl_kind(others[0].primary)} {others[0].primary.name} -n {facts.evidence.target.namespace})."
        )
    else:
        extra = [unit for unit in group if unit.user_owned] or group[1:]
        deletes = "; ".join(
            f"kubectl get {_kubectl_kind(u.primary)} {u.primary.name} -n {facts.evidence.target.namespace} -o yaml "
            f"> {u.primary.name}.yaml && kubectl delete {_kubectl_kind(u.primary)} {u.primary.name} "
            f"-n {facts.evidence.target.namespace}"
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


def _kubectl_kind(autoscaler: Autoscaler) -> str:
    return {
        autoscalers.HPA: "hpa",
        autoscalers.SCALED_OBJECT: "scaledobject",
        autoscalers.POD_AUTOSCALER: "podautoscaler",
    }[autoscaler.kind]
