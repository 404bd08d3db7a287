"""Facts the ``scale_target`` step weighs autoscalers against: which Deployments receive traffic, the
pod's request ceiling and measured capacity (from :mod:`nbhelpers.facts.engine`), and the cold starts of
:mod:`nbhelpers.facts.cold_starts` (one per start, as every consumer reads them).

Everything here is a pure function of the evidence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common, engine, pod_phases
from nbhelpers.facts.cold_starts import cold_starts as measured_cold_starts
from nbhelpers.facts.engine import Valued
from nbhelpers.sources import kinds, kube
from nbhelpers.util import quantities

# A per-pod target sits below the pod's capacity so that the autoscaler adds a pod before the engine
# saturates; 80 % also leaves room for the HPA's 10 % tolerance band.
TARGET_FRACTION = 0.8


# --- the workloads that receive traffic -----------------------------------------------------------


@dataclass(frozen=True)
class ServingWorkloads:
    """Deployments whose pods receive traffic, and how that was found (evidence lines)."""

    deployments: tuple[str, ...]
    lines: tuple[str, ...]


def serving_workloads(evidence: Evidence, mode: str) -> ServingWorkloads:
    """Serverless: ``<revision>-deployment`` of each revision with traffic (else the newest revision).
    Raw: the Deployments owning the pods the ``<isvc>-predictor`` Service selects (through their ReplicaSets),
    else the Deployments whose pod template that selector matches."""
    if mode == common.SERVERLESS:
        revisions = [name for name, _ in common.traffic_revisions(evidence)]
        latest = common.latest_revision_name(evidence)
        chosen = revisions or ([latest] if latest else [])
        shares = dict(common.traffic_revisions(evidence))
        lines = [
            f"revision {name} ({shares.get(name, 0)}% of traffic) runs in Deployment {name}-deployment"
            for name in chosen
        ]
        return ServingWorkloads(tuple(f"{name}-deployment" for name in chosen), tuple(lines))
    service = common.named(evidence, kinds.SERVICE, common.predictor_name(evidence))
    if service is None:
        return ServingWorkloads((), (f"no Service {common.predictor_name(evidence)}: no serving workload known",))
    selector = kube.spec(service).get("selector") or {}
    pods = [pod for pod in evidence.of(kinds.POD) if kube.selector_matches(selector, kube.labels(pod))]
    replica_sets = {kube.name(rs): rs for rs in evidence.of(kinds.REPLICA_SET)}
    found: dict[str, str] = {}
    for pod in pods:
        for rs_name in kube.owner_names(pod, "ReplicaSet"):
            replica_set = replica_sets.get(rs_name)
            owners = kube.owner_names(replica_set, "Deployment") if replica_set is not None else []
            for owner in owners:
                found.setdefault(owner, f"Pod {kube.name(pod)} -> ReplicaSet {rs_name} -> Deployment {owner}")
    if not found:
        for deployment in evidence.of(kinds.DEPLOYMENT):
            template_labels = ((kube.spec(deployment).get("template") or {}).get("metadata") or {}).get("labels") or {}
            if kube.namespace(deployment) == evidence.target.namespace and kube.selector_matches(
                selector, template_labels
            ):
                found.setdefault(kube.name(deployment), f"Deployment {kube.name(deployment)}: pod template matches")
    head = f"{kube.ref(service)} selector {dict(selector)}"
    return ServingWorkloads(tuple(sorted(found)), (head, *(found[name] for name in sorted(found))))


# --- the pod's request ceiling and capacity -------------------------------------------------------


@dataclass(frozen=True)
class Capacity:
    """The pod's request ceiling (``--max-num-seqs`` in effect) and the running requests it actually held
    while requests queued (the measured capacity: the KV cache may hold fewer requests than the flag allows)."""

    ceiling: Valued | None
    saturated_running: int | None

    @property
    def per_pod(self) -> int | None:
        if self.saturated_running is not None:
            return self.saturated_running
        return int(self.ceiling.value) if self.ceiling is not None else None

    @property
    def target(self) -> int | None:
        """The per-pod running-request target to scale on."""
        per_pod = self.per_pod
        return None if per_pod is None else max(1, math.floor(per_pod * TARGET_FRACTION))

    def derivation(self) -> str:
        per_pod = self.per_pod
        if per_pod is None:
            return "the pod's capacity is unknown"
        if self.saturated_running is not None:
            source = f"the {per_pod} running requests a pod held while requests queued in this window"
        else:
            assert self.ceiling is not None
            source = f"the request ceiling {per_pod} ({self.ceiling.origin})"
        return f"{int(TARGET_FRACTION * 100)} % of {source}, so a pod gets help before it saturates"


def capacity(evidence: Evidence, workload: common.Workload) -> Capacity:
    """The ceiling in effect, else the observed plateau (:func:`nbhelpers.facts.engine.max_num_seqs_or_plateau`),
    and the measured capacity."""
    return Capacity(engine.max_num_seqs_or_plateau(evidence, workload), engine.saturated_running(evidence))


# --- cold starts ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ColdStart:
    pod: str
    seconds: float
    restart: bool = False  # measured from the serving container's restart, not from the pod's creation

    def describe(self) -> str:
        return f"Pod {self.pod}: {'restarted' if self.restart else 'created'} -> Ready in {self.seconds:.0f} s"


def cold_starts(evidence: Evidence) -> list[ColdStart]:
    """The completed cold start of each ready predictor pod: its latest start (creation, or the serving container's
    restart) to the Ready that followed it, as :func:`nbhelpers.facts.cold_starts.cold_starts` measures it (the time
    a scale-up waits for a new replica, scheduling and image pull included); pods whose start cannot be measured (a
    readiness blip, a start the status cannot place) are left out."""
    return [
        ColdStart(pod.pod, total, pod.start == pod_phases.RESTART)
        for pod in measured_cold_starts(evidence).pods
        if pod.ready and (total := pod.total) is not None and total > 0
    ]


def slowest(starts: Sequence[ColdStart]) -> ColdStart | None:
    return max(starts, key=lambda start: start.seconds, default=None)


def quantity_number(value: Any) -> float | None:
    parsed = quantities.try_parse(value)
    return float(parsed) if parsed is not None else None
