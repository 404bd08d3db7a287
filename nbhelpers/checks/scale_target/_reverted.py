"""``HPA_CONFLICT`` with KServe's controller on the other side: a hand edit of the HPA KServe owns, or KServe
resetting the replica count a user's autoscaler set.

KServe's behaviour (kserve/kserve, pkg/controller/v1beta1/inferenceservice/reconcilers):

- ``hpa/hpa_reconciler.go``: every reconcile builds the HPA ``<isvc>-predictor`` from the InferenceService
  (``minReplicas`` raised to 1, ``maxReplicas`` raised to ``minReplicas``, an empty ``behavior``) and, when
  ``semanticHPAEquals`` finds the live spec different, writes its own back with ``Update``. An edit of that HPA
  (kubectl edit, a GitOps tool applying its own copy) lasts until the next reconcile, which the Deployment's own
  status changes trigger, so the HPA's spec flips between the two versions.
- ``deployment/deployment_reconciler.go`` in v0.15.0 (kserve/kserve PR #4196): with class ``external`` and
  ``spec.predictor.minReplicas`` set, the Deployment is written with ``replicas: minReplicas`` and that field is
  compared, so every reconcile resets the count the user's own autoscaler chose. PR #4363 (v0.15.1) moved this
  to class ``none`` (issue #4312 is the report of the same release deleting a user's HPA named
  ``<isvc>-predictor``).

Evidence: the HPA's ownerReferences and its spec against what KServe writes, ``metadata.managedFields`` (which
manager owns which spec fields; KServe writes as ``manager``), and ScalingReplicaSet events on the Deployment.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from nbhelpers.checks.scale_target._facts import ScaleTargetFacts, Unit
from nbhelpers.facts import autoscalers, common
from nbhelpers.findings import patches
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.sources import kinds, kube

_SCALED_DOWN = re.compile(r"Scaled down replica set (\S+) (?:to|from \d+ to) (\d+)")


def reverted(facts: ScaleTargetFacts) -> list[Finding]:
    """The fights with KServe's controller in RawDeployment mode."""
    if facts.mode != common.RAW:
        return []
    findings = [
        finding
        for unit in facts.units
        if unit.kserve_owned and unit.primary.kind == autoscalers.HPA
        for finding in (_edited_kserve_hpa(facts, unit),)
        if finding is not None
    ]
    reset = _replicas_reset(facts)
    return findings + ([reset] if reset is not None else [])


# --- an edit of KServe's HPA ----------------------------------------------------------------------------


def _kserve_bounds(facts: ScaleTargetFacts) -> tuple[int, int]:
    """minReplicas and maxReplicas as KServe's HPA reconciler writes them from the InferenceService."""
    predictor: Mapping[str, Any] = kube.spec(facts.evidence.isvc).get("predictor") or {}
    low = max(1, int(predictor.get("minReplicas") or 1))
    return low, max(int(predictor.get("maxReplicas") or 0), low)


def _drift(facts: ScaleTargetFacts, unit: Unit) -> list[str]:
    """Where the live HPA differs from what KServe writes back."""
    hpa = unit.primary
    low, high = _kserve_bounds(facts)
    drift = []
    if hpa.min_replicas != low:
        drift.append(f"spec.minReplicas {hpa.min_replicas}; KServe writes {low} (from spec.predictor.minReplicas)")
    if hpa.max_replicas != high:
        drift.append(f"spec.maxReplicas {hpa.max_replicas}; KServe writes {high} (from spec.predictor.maxReplicas)")
    if hpa.behavior:
        drift.append("spec.behavior is set; KServe writes an empty behavior")
    expected_target = common.predictor_name(facts.evidence)
    if hpa.scale_target.name != expected_target:
        drift.append(f"spec.scaleTargetRef names {hpa.scale_target.describe()}; KServe writes {expected_target}")
    return drift


def _edited_kserve_hpa(facts: ScaleTargetFacts, unit: Unit) -> Finding | None:
    hpa = unit.primary
    drift = _drift(facts, unit)
    editors = [
        writer
        for writer in autoscalers.spec_writers(hpa.obj)
        if writer.manager not in autoscalers.KSERVE_FIELD_MANAGERS
        and writer.manager != autoscalers.HPA_CONTROLLER_MANAGER
    ]
    if not drift and not editors:
        return None
    lines = [f"{hpa.ref} is owned by {unit.owner} (ownerReferences): KServe's HPA reconciler writes its spec"]
    lines += drift
    lines += [f"managedFields: {writer.describe()}" for writer in editors]
    who = ", ".join(dict.fromkeys(writer.manager for writer in editors)) or "someone other than KServe"
    low, high = _kserve_bounds(facts)
    bounds_edited = hpa.min_replicas != low or (hpa.max_replicas is not None and hpa.max_replicas != high)
    plan = None
    if bounds_edited and hpa.max_replicas is not None:
        wanted_min, wanted_max = hpa.min_replicas or 1, hpa.max_replicas

        def set_bounds(isvc: common.KubeObject) -> None:
            predictor = isvc.setdefault("spec", {}).setdefault("predictor", {})
            predictor["minReplicas"] = wanted_min
            predictor["maxReplicas"] = wanted_max

        plan = patches.plan_patch(facts.evidence.isvc, set_bounds)
    what = (
        "Make the change where KServe reads it: replica bounds in spec.predictor.minReplicas / maxReplicas, the "
        "metric in spec.predictor.scaleMetric / scaleTarget (or autoScaling.metrics). For what the InferenceService "
        "cannot express (behavior, request metrics), set the autoscaler class to external and create your own HPA "
        "under another name: KServe then deletes its own."
    )
    if plan is not None:
        what += f" The patch carries the edited bounds ({hpa.min_replicas}-{hpa.max_replicas}) to the InferenceService."
    return Finding(
        code="HPA_CONFLICT",
        title=f"KServe reverts edits to {hpa.ref}",
        summary=f"{hpa.ref} belongs to {unit.owner}, and {who} changed its spec. KServe's reconcile writes its own "
        "spec back whenever the two differ (hpa_reconciler.go), so the edit lasts only until the next reconcile and "
        "the HPA flips between both versions: what the live HPA says about behavior and bounds is not what will "
        "scale the service, and is not judged here.",
        objects=(hpa.ref, facts.isvc_ref),
        evidence=tuple(lines),
        fix=Fix.from_plan(what, plan),
    )


# --- KServe resetting the replica count of the external class --------------------------------------------


def _replicas_reset(facts: ScaleTargetFacts) -> Finding | None:
    if facts.klass != "external":
        return None
    minimum = (kube.spec(facts.evidence.isvc).get("predictor") or {}).get("minReplicas")
    if minimum is None:
        return None
    for name in facts.serving.deployments:
        deployment = common.named(facts.evidence, kinds.DEPLOYMENT, name)
        if deployment is None:
            continue
        kserve = [
            writer
            for writer in autoscalers.spec_writers(deployment, "replicas")
            if writer.manager in autoscalers.KSERVE_FIELD_MANAGERS
        ]
        scalers = [unit for unit in facts.units if unit.target_key == ("Deployment", name) and not unit.kserve_owned]
        if not kserve or not scalers:
            continue
        # Owning the field is not yet a fight: it takes the count falling back to minReplicas, or an autoscaler
        # that wants more than the Deployment now has.
        resets = _resets_to(facts, name, int(minimum))
        wants_more = any(
            (unit.hpa.desired_replicas or 0) > int(kube.spec(deployment).get("replicas") or 0)
            for unit in scalers
            if unit.hpa is not None
        )
        if resets or wants_more:
            return _reset_finding(facts, deployment, int(minimum), kserve, scalers, resets)
    return None


def _resets_to(facts: ScaleTargetFacts, deployment: str, minimum: int) -> list[str]:
    """The Deployment controller's messages of scale-downs to ``minimum`` in the window."""
    return [
        str(event.get("message") or "")
        for event in facts.events_of(deployment)
        if event.get("reason") == "ScalingReplicaSet"
        and (match := _SCALED_DOWN.search(str(event.get("message") or ""))) is not None
        and int(match.group(2)) == minimum
    ]


def _reset_finding(
    facts: ScaleTargetFacts,
    deployment: common.KubeObject,
    minimum: int,
    kserve: list[autoscalers.FieldWriter],
    scalers: list[Unit],
    resets: list[str],
) -> Finding:
    name = kube.name(deployment)
    lines = [
        f"InferenceService annotation {kube.AUTOSCALER_CLASS_ANNOTATION}: external, spec.predictor.minReplicas {minimum}",
        *(f"{kube.ref(deployment)} managedFields: {writer.describe()}" for writer in kserve),
        *(unit.describe() for unit in scalers),
    ]
    if resets:
        lines.append(f"{len(resets)} scale-down(s) of Deployment {name} to minReplicas {minimum}: {resets[0]!r}")
    refs = ", ".join(unit.primary.ref for unit in scalers)
    return Finding(
        code="HPA_CONFLICT",
        title=f"KServe resets Deployment {name} to {minimum} replicas under {refs}",
        summary=f"With autoscaler class external and spec.predictor.minReplicas set, KServe v0.15.0 writes "
        f"replicas: {minimum} into Deployment {name} on every reconcile, and its managedFields show it owns that "
        f"field. {refs} scales the same Deployment, so each reconcile undoes its decision: the replica count falls "
        "back and every pod added again pays a full model load.",
        objects=(kube.ref(deployment), *(ref for unit in scalers for ref in unit.refs), facts.isvc_ref),
        evidence=tuple(lines),
        fix=Fix(
            what="Upgrade KServe to v0.15.1 or later, where the external class leaves the replica count to your "
            "autoscaler (kserve/kserve PR #4363). Until then, drop spec.predictor.minReplicas from the "
            "InferenceService and set the floor in your own autoscaler, then check with kubectl get deploy "
            f"{name} -o yaml --show-managed-fields that 'manager' no longer owns spec.replicas."
        ),
    )
