"""``HPA_AT_MAX``: the autoscaler is at its maximum while demand exceeds capacity."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from nbhelpers.checks.scale_target._facts import ScaleTargetFacts, Unit
from nbhelpers.facts import autoscalers, common
from nbhelpers.findings import patches
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.metrics import series
from nbhelpers.models.kpa import KNATIVE_MAX_SCALE_KEYS
from nbhelpers.sources import kube


def at_max(facts: ScaleTargetFacts) -> list[Finding]:
    findings = []
    waiting = series.summed(facts.evidence.metrics.get("vllm_waiting"))
    for unit in facts.units:
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
        findings.append(_at_max_finding(facts, unit, maximum, limited, waiting))
    return findings


def _at_max_finding(
    facts: ScaleTargetFacts, unit: Unit, maximum: int, limited: Mapping[str, Any] | None, waiting: Mapping[float, float]
) -> Finding:
    lines = [unit.describe(), f"currentReplicas {unit.current_replicas} = maxReplicas {maximum}"]
    if limited is not None:
        lines.append(f"condition {kube.describe_condition(limited)}")
    lines += facts.demand_lines()
    if waiting:
        values = list(waiting.values())
        lines.append(
            f"waiting requests (all pods): first {values[0]:.0f}, last {values[-1]:.0f}, peak {max(values):.0f}"
        )
    needed = _replicas_needed(facts, maximum)
    fix = _max_fix(facts, unit, needed)
    demand = "requests kept waiting" if any(v > 0 for v in waiting.values()) else "the HPA wants more replicas"
    return Finding(
        code="HPA_AT_MAX",
        title=f"{unit.primary.kind} {unit.primary.name} at maxReplicas {maximum} while demand exceeds capacity",
        summary=f"{unit.primary.ref} runs at its maximum of {maximum} replicas and {demand} during the window: the "
        f"service needs about {needed} replicas at its peak. Until the maximum is raised, extra load queues and "
        "times out.",
        objects=(*unit.refs, facts.isvc_ref),
        evidence=tuple(lines),
        fix=fix,
    )


def _replicas_needed(facts: ScaleTargetFacts, maximum: int) -> int:
    """Peak demand (running + waiting, all pods) over the per-pod target, at least one above the maximum."""
    per_pod = facts.capacity.target if facts.capacity is not None else None
    running = series.summed(facts.evidence.metrics.get("vllm_running"))
    waiting = series.summed(facts.evidence.metrics.get("vllm_waiting"))
    demand = max((running.get(t, 0.0) + waiting.get(t, 0.0) for t in {*running, *waiting}), default=0.0)
    if per_pod is None or demand <= 0:
        return maximum + 1
    return max(maximum + 1, math.ceil(demand / per_pod))


def _max_fix(facts: ScaleTargetFacts, unit: Unit, needed: int) -> Fix:
    what = (
        f"Raise the maximum to {needed} replicas (peak running + waiting requests over the per-pod target), and "
        "check that the cluster has GPUs for them (see RESOURCES_GPU_UNSCHEDULABLE)."
    )
    if unit.user_owned and unit.primary.kind in (autoscalers.HPA, autoscalers.SCALED_OBJECT):
        field = "maxReplicas" if unit.primary.kind == autoscalers.HPA else "maxReplicaCount"

        def raise_max(obj: common.KubeObject) -> None:
            obj["spec"][field] = needed

        return Fix.from_plan(what, patches.plan_patch(unit.primary.obj, raise_max))
    annotations = kube.annotations(facts.evidence.isvc)
    key = next((k for k in KNATIVE_MAX_SCALE_KEYS if k in annotations), None)

    def raise_isvc_max(isvc: common.KubeObject) -> None:
        if key is not None:
            isvc["metadata"]["annotations"][key] = str(needed)
        else:
            isvc.setdefault("spec", {}).setdefault("predictor", {})["maxReplicas"] = needed

    return Fix.from_plan(what, patches.plan_patch(facts.evidence.isvc, raise_isvc_max))
