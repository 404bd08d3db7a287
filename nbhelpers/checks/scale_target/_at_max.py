"""``HPA_AT_MAX``: the autoscaler sat at its maximum, for minutes, while requests waited.

What makes the finding (verified against the sources cited):

- The HPA controller caps its desired count at ``maxReplicas`` and then sets ``ScalingLimited=True`` with reason
  ``TooManyReplicas`` ("the desired replica count is more than the maximum replica count"); within range it sets
  ``ScalingLimited=False`` / ``DesiredWithinRange`` (kubernetes/kubernetes pkg/controller/podautoscaler/horizontal.go,
  ``convertDesiredReplicasWithBehaviorRate``). ``status.desiredReplicas`` is the capped value, so only the
  condition tells that the HPA wanted more.
- One scrape is not a condition: it must hold for :data:`~nbhelpers.facts.scaling.AT_MAX_SECONDS` over
  :data:`~nbhelpers.facts.scaling.AT_MAX_SAMPLES` samples (replicas at the maximum with requests waiting), or the
  ``TooManyReplicas`` condition must have held that long (its ``lastTransitionTime``). The monitoring mixins wait
  too: KubeHpaMaxedOut ``for: 15m``, awesome-prometheus-alerts' KubernetesHpaScaleMaximum ``for: 2m``.
- An HPA at its maximum that reports ``ScalingLimited=False`` for the whole stretch computed no more replicas
  than it has: its target, not its maximum, keeps requests waiting (kubernetes-sigs/kubernetes-mixin issue #1293).
- ``minReplicas == maxReplicas`` pins the replica count: such an autoscaler never could scale, which the finding
  says instead of "at its maximum" (kubernetes-sigs/kubernetes-mixin PR #1194, mitodl/ol-infrastructure PR #5072:
  alerts on pinned HPAs are noise, the pin is the thing to change).
- The replicas needed come from the demand and a pod's throughput as the what-if measures them
  (:func:`nbhelpers.facts.scaling.demand_peak`, :func:`nbhelpers.models.capacity.measure_capacity`), never from
  the waiting requests at one moment: a backlog is not a rate.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from nbhelpers.checks.scale_target._facts import ScaleTargetFacts, Unit
from nbhelpers.checks.scale_target._fixes import llmisvc_scaling_fix
from nbhelpers.facts import autoscalers, common, scaling
from nbhelpers.findings import patches
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.metrics import series
from nbhelpers.models import capacity as cap
from nbhelpers.models.kpa import KNATIVE_MAX_SCALE_KEYS
from nbhelpers.sources import kube
from nbhelpers.util.times import parse_k8s_time


def at_max(facts: ScaleTargetFacts) -> list[Finding]:
    findings = []
    for unit in facts.units:
        maximum, current = unit.max_replicas, unit.current_replicas
        if maximum is None or current is None or current < maximum:
            continue
        verdict = _AtMax.judge(facts, unit, maximum)
        if verdict is not None:
            findings.append(_at_max_finding(facts, unit, maximum, verdict))
    return findings


class _AtMax:
    """Why a unit counts as held at its maximum: a sustained stretch with requests waiting, and/or a
    ``TooManyReplicas`` condition that has lasted."""

    def __init__(
        self,
        stretch: scaling.Stretch | None,
        from_replicas: bool,
        limited: Mapping[str, Any] | None,
        limited_seconds: float | None,
    ) -> None:
        self.stretch = stretch
        self.from_replicas = from_replicas
        self.limited = limited
        self.limited_seconds = limited_seconds

    @classmethod
    def judge(cls, facts: ScaleTargetFacts, unit: Unit, maximum: int) -> _AtMax | None:
        """The evidence that the unit was held at its maximum, or None (a blip, or an HPA content at its maximum)."""
        evidence = facts.evidence
        stretch, from_replicas = scaling.waiting_at_max(evidence, maximum)
        if stretch is not None and not from_replicas and stretch.end < _last_waiting_sample(facts):
            stretch = None  # without the replica history, only a queue that lasts until capture is at this maximum
        waited = stretch if stretch is not None and stretch.sustained else None
        condition = _condition(unit, "ScalingLimited")
        since = _since(condition, evidence.observed_at)
        if condition is not None and str(condition.get("status")) == "False":
            # Within range at capture: content at its maximum since ``since``. A stretch that began after that
            # was not limited by the maximum (kubernetes-mixin #1293); one before it may have been.
            if waited is None or since is None or since <= waited.start:
                return None
            return cls(waited, from_replicas, None, None)
        too_many = (
            condition
            if condition is not None
            and str(condition.get("status")) == "True"
            and condition.get("reason") == "TooManyReplicas"
            else None
        )
        limited_seconds = evidence.observed_at.timestamp() - since if too_many is not None and since else None
        lasting = limited_seconds is not None and limited_seconds >= scaling.AT_MAX_SECONDS
        if waited is None and not lasting:
            return None
        return cls(waited, from_replicas, too_many, limited_seconds)

    def lines(self, maximum: int) -> list[str]:
        found = []
        if self.stretch is not None:
            how = (
                "HPA current replicas at the maximum and requests waiting in vLLM"
                if self.from_replicas
                else "requests waiting in vLLM until capture (no replica history: hpa_current_replicas has no samples), "
                f"the autoscaler at {maximum} replicas at capture"
            )
            found.append(
                f"at the maximum with requests waiting: {_clock(self.stretch.start)}-{_clock(self.stretch.end)} UTC "
                f"({_minutes(self.stretch.seconds)}, {self.stretch.samples} samples; {how})"
            )
        if self.limited is not None:
            held = f", for {_minutes(self.limited_seconds)}" if self.limited_seconds is not None else ""
            found.append(f"condition {kube.describe_condition(self.limited)}{held}")
        found.append(
            f"criterion: at the maximum with requests waiting for ≥ {_minutes(scaling.AT_MAX_SECONDS)} over ≥ "
            f"{scaling.AT_MAX_SAMPLES} samples, or ScalingLimited=True (TooManyReplicas) for as long"
        )
        return found

    def describe(self, maximum: int) -> str:
        parts = []
        if self.stretch is not None:
            parts.append(
                f"requests waited for {_minutes(self.stretch.seconds)} ({_clock(self.stretch.start)}-"
                f"{_clock(self.stretch.end)} UTC) with all {maximum} replicas running"
            )
        if self.limited is not None and self.limited_seconds is not None:
            parts.append(
                f"it has reported for {_minutes(self.limited_seconds)} that it wants more replicas than its maximum "
                "(ScalingLimited=True, TooManyReplicas)"
            )
        return ", and ".join(parts)


def _condition(unit: Unit, kind: str) -> Mapping[str, Any] | None:
    autoscaler = unit.hpa if unit.hpa is not None else unit.primary
    return next((entry for entry in autoscaler.conditions if entry.get("type") == kind), None)


def _since(condition: Mapping[str, Any] | None, now: datetime) -> float | None:
    """The condition's lastTransitionTime (unix seconds), when it is known and not in the future."""
    if condition is None:
        return None
    moment = parse_k8s_time(str(condition.get("lastTransitionTime") or ""))
    if moment is None or moment > now:
        return None
    return moment.timestamp()


def _last_waiting_sample(facts: ScaleTargetFacts) -> float:
    waiting = series.summed(facts.evidence.metrics.get("vllm_waiting"))
    return max(waiting, default=0.0)


def _clock(moment: float) -> str:
    return datetime.fromtimestamp(moment, tz=timezone.utc).strftime("%H:%M")


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _minutes(seconds: float | None) -> str:
    return "an unknown time" if seconds is None else f"{seconds / 60:.1f} min"


def _at_max_finding(facts: ScaleTargetFacts, unit: Unit, maximum: int, verdict: _AtMax) -> Finding:
    pinned = unit.min_replicas is not None and unit.min_replicas >= maximum
    lines = [unit.describe(), f"currentReplicas {unit.current_replicas} = maxReplicas {maximum}"]
    if pinned:
        lines.append(f"minReplicas {unit.min_replicas} = maxReplicas {maximum}: the replica count is pinned")
    lines += verdict.lines(maximum)
    lines += facts.demand_lines()
    waiting = series.summed(facts.evidence.metrics.get("vllm_waiting"))
    if waiting:
        values = list(waiting.values())
        lines.append(
            f"waiting requests (all pods): first {values[0]:.0f}, last {values[-1]:.0f}, peak {max(values):.0f}"
        )
    needed, how = _replicas_needed(facts, maximum)
    lines.append(f"replicas needed: {needed} ({how})")
    fix = _max_fix(facts, unit, needed, how, pinned)
    ref, kind, name = unit.primary.ref, unit.primary.kind, unit.primary.name
    if pinned:
        title = f"{kind} {name} pinned at {maximum} replicas (minReplicas = maxReplicas) while requests wait"
        summary = (
            f"{ref} has minReplicas = maxReplicas = {maximum}: it never could add a replica, whatever its metric "
            f"says, so it does not autoscale at all. {_sentence(verdict.describe(maximum))}. The service needs about "
            f"{needed} replicas at its peak; until maxReplicas is above minReplicas, extra load queues and times out."
        )
    else:
        title = f"{kind} {name} at maxReplicas {maximum} while demand exceeds capacity"
        summary = (
            f"{ref} runs at its maximum of {maximum} replicas: {verdict.describe(maximum)}. The service needs about "
            f"{needed} replicas at its peak; until the maximum is raised, extra load queues and times out."
        )
    return Finding(
        code="HPA_AT_MAX",
        title=title,
        summary=summary,
        objects=(*unit.refs, facts.isvc_ref),
        evidence=tuple(lines),
        fix=fix,
    )


def _replicas_needed(facts: ScaleTargetFacts, maximum: int) -> tuple[int, str]:
    """Replicas for the peak demand at :data:`~nbhelpers.models.capacity.TARGET_FRACTION` of a pod's throughput
    (the what-if's ``maxReplicas`` rule, :func:`nbhelpers.models.capacity.recommend`), at least one above the
    maximum; and how that was found."""
    pod = facts.capacity.pod if facts.capacity is not None else None
    demand = scaling.demand_peak(facts.evidence)
    if pod is None or not demand or pod.throughput <= 0:
        return maximum + 1, (
            "at least one more: vLLM's completion rate is not in the evidence, so a pod's throughput and the demand "
            "cannot be measured; raise it in steps and watch the queue"
        )
    per_pod = pod.throughput * cap.TARGET_FRACTION
    wanted = cap.replicas_for(demand, per_pod)
    measured = "measured with every pod saturated" if pod.saturated else "estimated, the pods never saturated"
    how = (
        f"the peak demand of {demand:.2f} requests/s ({_minutes(scaling.AT_MAX_SECONDS)} average of vLLM's completions "
        f"plus the growth of its running and waiting requests) over {cap.TARGET_FRACTION:.0%} of the "
        f"{pod.throughput:.2f} completions/s a pod serves ({measured})"
    )
    if wanted <= maximum:
        how += f": {wanted} would do at that rate, but requests waited at {maximum}, so at least one more"
    return max(maximum + 1, wanted), how


def _max_fix(facts: ScaleTargetFacts, unit: Unit, needed: int, how: str, pinned: bool) -> Fix:
    if pinned:
        what = (
            f"Let the autoscaler scale: raise the maximum to {needed} replicas, above minReplicas {unit.min_replicas} "
            f"({how}), and check that the cluster has GPUs for them (see RESOURCES_GPU_UNSCHEDULABLE)."
        )
    else:
        what = (
            f"Raise the maximum to {needed} replicas ({how}), and check that the cluster has GPUs for them (see "
            "RESOURCES_GPU_UNSCHEDULABLE)."
        )
    if unit.user_owned and unit.primary.kind in (autoscalers.HPA, autoscalers.SCALED_OBJECT):
        field = "maxReplicas" if unit.primary.kind == autoscalers.HPA else "maxReplicaCount"

        def raise_max(obj: common.KubeObject) -> None:
            obj["spec"][field] = needed

        return Fix.from_plan(what, patches.plan_patch(unit.primary.obj, raise_max))
    if unit.llmisvc_owned or facts.evidence.target.is_llmisvc:
        return llmisvc_scaling_fix(
            unit,
            what.replace("raise the maximum to", "raise maxReplicas to", 1).replace(
                "Raise the maximum to", "Raise maxReplicas to", 1
            ),
        )
    annotations = kube.annotations(facts.evidence.isvc)
    key = next((k for k in KNATIVE_MAX_SCALE_KEYS if k in annotations), None)

    def raise_isvc_max(isvc: common.KubeObject) -> None:
        if key is not None:
            isvc["metadata"]["annotations"][key] = str(needed)
        else:
            isvc.setdefault("spec", {}).setdefault("predictor", {})["maxReplicas"] = needed

    return Fix.from_plan(what, patches.plan_patch(facts.evidence.isvc, raise_isvc_max))
