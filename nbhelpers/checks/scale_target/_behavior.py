"""``HPA_BEHAVIOR_SLOW``: scale-up rules too slow, or a scale-down window too short, for GPU pods."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

from nbhelpers.checks.scale_target._facts import ScaleTargetFacts, Unit, can_scale
from nbhelpers.checks.scale_target._fixes import external_fix, llmisvc_scaling_fix
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import autoscalers, common, scaling
from nbhelpers.findings import patches
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.metrics import series
from nbhelpers.models.hpa import HPA_DEFAULT_SCALE_UP

DEFAULT_SCALE_DOWN_WINDOW = 300
HPA_SYNC_SECONDS = 15
# Desired above current for longer than this, with requests waiting, means the HPA held itself back.
HELD_BACK_SECONDS = 4 * HPA_SYNC_SECONDS


def slow_behavior(facts: ScaleTargetFacts) -> list[Finding]:
    findings = []
    coldest = scaling.slowest(facts.starts)
    for unit in facts.units:
        if unit.knative or not can_scale(unit):
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
        problems += _scale_up_problems(facts, unit, behavior)
        if problems:
            findings.append(_behavior_finding(facts, unit, behavior, problems, coldest))
    return findings


def _scale_up_problems(facts: ScaleTargetFacts, unit: Unit, behavior: Mapping[str, Any]) -> list[str]:
    scale_up = {**HPA_DEFAULT_SCALE_UP, **(behavior.get("scaleUp") or {})}
    if scale_up.get("selectPolicy") == "Disabled":
        return ["scale-up is disabled (scaleUp.selectPolicy: Disabled)"]
    held = _held_back_seconds(facts.evidence)
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
    facts: ScaleTargetFacts,
    unit: Unit,
    behavior: Mapping[str, Any],
    problems: list[str],
    coldest: scaling.ColdStart | None,
) -> Finding:
    lines = [unit.describe(), f"behavior as written: {dict(behavior) or 'none (Kubernetes defaults)'}"]
    lines += [start.describe() for start in sorted(facts.starts, key=lambda s: -s.seconds)[:3]]
    if coldest is None:
        lines.append(
            "no pod shows a measurable start (creation or a restart -> Ready) in its status: the cold start could "
            "not be measured"
        )
    fixed = _recommended_behavior(behavior, coldest)
    fix = _behavior_fix(facts, unit, fixed)
    return Finding(
        code="HPA_BEHAVIOR_SLOW",
        title=f"{unit.primary.kind} {unit.primary.name} scales too slowly for GPU pods",
        summary=f"{unit.primary.ref}: " + "; ".join(problems) + ". GPU pods pay a model load on every start, so the "
        "autoscaler must add them early and keep them through short dips.",
        objects=(*unit.refs, facts.isvc_ref),
        evidence=tuple(lines),
        fix=fix,
    )


def _behavior_fix(facts: ScaleTargetFacts, unit: Unit, fixed: dict[str, Any]) -> Fix:
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
    if unit.kserve_owned and unit.primary.kind == autoscalers.HPA and facts.mode == common.RAW:
        return external_fix(facts, unit, how, behavior=fixed)
    if unit.llmisvc_owned:
        field = (
            "wva.hpa.behavior"
            if unit.primary.kind == autoscalers.HPA
            else "keda.advanced.horizontalPodAutoscalerConfig.behavior"
        )
        return llmisvc_scaling_fix(unit, f"{how} KServe takes the behavior from {field}.")
    return Fix(what=f"{how} (No patch: the InferenceService has no field for the behavior of {unit.primary.ref}.)")


def _scale_down_window(behavior: Mapping[str, Any]) -> int:
    window = (behavior.get("scaleDown") or {}).get("stabilizationWindowSeconds")
    return int(window) if isinstance(window, int) else DEFAULT_SCALE_DOWN_WINDOW


def _recommended_behavior(behavior: Mapping[str, Any], coldest: scaling.ColdStart | None) -> dict[str, Any]:
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
