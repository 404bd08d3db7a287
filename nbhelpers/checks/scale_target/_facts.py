"""The facts every scale_target finding quotes: the autoscalers grouped into units (one decision maker
each), the workload that serves traffic and its request capacity, the cold starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nbhelpers.errors import EvidenceMissing, StepSkipped
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import autoscalers, common, scaling
from nbhelpers.facts.autoscalers import Autoscaler
from nbhelpers.metrics import series
from nbhelpers.sources import kube


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
    def llmisvc_owned(self) -> bool:
        """Rendered by KServe from an LLMInferenceService's spec.scaling (``<name>-kserve-keda`` / ``-hpa``)."""
        return (self.owner or "").startswith("LLMInferenceService/")

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


class ScaleTargetFacts:
    """The autoscaler units, the workload that serves and its capacity, and the evidence lines they share."""

    def __init__(self, evidence: Evidence) -> None:
        self.evidence = evidence
        self.mode = common.effective_mode(evidence)
        self.isvc_ref = kube.ref(evidence.isvc)
        self.klass = autoscalers.autoscaler_class(evidence.isvc)
        self.found = autoscalers.resolve(evidence)
        self.units = _units(evidence, self.found)
        self.serving = scaling.serving_workloads(evidence, self.mode)
        self.workload = _workload(evidence)
        self.capacity = scaling.capacity(evidence, self.workload) if self.workload is not None else None
        self.starts = scaling.cold_starts(evidence)

    def events_of(self, name: str) -> list[common.KubeObject]:
        return [
            event
            for event in self.evidence.events
            if ((event.get("involvedObject") or event.get("regarding") or {}).get("name")) == name
        ]

    def demand_lines(self) -> list[str]:
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


def _workload(evidence: Evidence) -> common.Workload | None:
    try:
        return common.current_workload(evidence)
    except (EvidenceMissing, StepSkipped):
        return None


def can_scale(unit: Unit) -> bool:
    """An autoscaler whose bounds leave room to scale (a fixed min == max makes its metric moot)."""
    low, high = unit.min_replicas, unit.max_replicas
    return high is None or low is None or high > low
