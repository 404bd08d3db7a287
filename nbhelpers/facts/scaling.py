"""Facts the ``scale_target`` step weighs autoscalers against: which Deployments receive traffic, the
pod's request ceiling (from :mod:`nbhelpers.facts.engine`) and measured capacity (the what-if's measurement,
:mod:`nbhelpers.models.capacity`), how long an autoscaler sat at its maximum with requests waiting, the demand,
and the cold starts of :mod:`nbhelpers.facts.cold_starts` (one per start, as every consumer reads them).

Everything here is a pure function of the evidence.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common, engine, pod_phases
from nbhelpers.facts.cold_starts import cold_starts as measured_cold_starts
from nbhelpers.facts.engine import Valued
from nbhelpers.metrics import series
from nbhelpers.models import capacity as cap
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

# A measured plateau counts only over this many moments with every pod saturated (one scrape may catch a queue
# that the next scheduler step clears).
MIN_SATURATED_SAMPLES = 3
MEASURED_ORIGIN = "measured in this window: the most requests a pod ran while every pod had requests waiting"


@dataclass(frozen=True)
class Capacity:
    """The pod's request ceiling (``--max-num-seqs`` in effect) and what the window's metrics measured.

    ``pod`` is the what-if's measurement (:func:`nbhelpers.models.capacity.measure_capacity`, the same call with the
    same series, so both report the same numbers): throughput, and concurrency when the pods saturated.
    ``plateau`` is its saturated concurrency (:func:`nbhelpers.models.capacity.saturated_concurrency`), kept when
    at least :data:`MIN_SATURATED_SAMPLES` moments show every pod saturated; the KV cache may hold fewer
    requests than the flag allows, and then the plateau, not the flag, is what a pod runs at once.
    """

    ceiling: Valued | None
    plateau: int | None = None
    pod: cap.PodCapacity | None = None

    @property
    def saturated_running(self) -> int | None:
        return self.plateau

    @property
    def limit(self) -> Valued | None:
        """What one pod runs at once: the measured plateau when the metrics show one below the ceiling (or no
        ceiling is known), else the ceiling."""
        if self.plateau is not None and (self.ceiling is None or self.plateau < self.ceiling.value):
            below = f", below the ceiling {self.ceiling.value:g} ({self.ceiling.origin})" if self.ceiling else ""
            return Valued(self.plateau, MEASURED_ORIGIN + below)
        return self.ceiling

    @property
    def per_pod(self) -> int | None:
        limit = self.limit
        return int(limit.value) if limit is not None else None

    @property
    def target(self) -> int | None:
        """The per-pod running-request target to scale on."""
        per_pod = self.per_pod
        return None if per_pod is None else max(1, math.floor(per_pod * TARGET_FRACTION))

    def derivation(self) -> str:
        limit = self.limit
        if limit is None:
            return "the pod's capacity is unknown"
        if self.plateau is not None:
            source = f"the {limit.value:g} running requests a pod held while requests queued in this window"
        else:
            source = f"the request ceiling {limit.value:g} ({limit.origin})"
        return f"{int(TARGET_FRACTION * 100)} % of {source}, so a pod gets help before it saturates"


def capacity(evidence: Evidence, workload: common.Workload) -> Capacity:
    """The ceiling in effect, else the observed plateau (:func:`nbhelpers.facts.engine.max_num_seqs_or_plateau`),
    and the window's measurement of a pod, made as the what-if makes it."""
    ceiling = engine.max_num_seqs_or_plateau(evidence, workload)
    running = series.by_pod(evidence.metrics.get("vllm_running"))
    waiting = series.by_pod(evidence.metrics.get("vllm_waiting"))
    saturated = cap.saturated_times(running, waiting)
    plateau = (
        cap.saturated_concurrency(running, waiting, saturated) if len(saturated) >= MIN_SATURATED_SAMPLES else None
    )
    pod = cap.measure_capacity(
        running,
        waiting,
        series.summed(evidence.metrics.get("vllm_request_rate")),
        series.summed(evidence.metrics.get("vllm_generation_tokens_rate")),
        ceiling.value if ceiling is not None else None,
        ceiling.origin if ceiling is not None else "",
    )
    return Capacity(ceiling, int(plateau) if plateau else None, pod)


# --- at the maximum, for how long --------------------------------------------------------------------------

# HPA_AT_MAX needs the situation to last, not one scrape: kube-prometheus' KubeHpaMaxedOut waits 15 minutes and
# awesome-prometheus-alerts' KubernetesHpaScaleMaximum 2 minutes (``for: 2m``), both only where
# ``minReplicas != maxReplicas`` (kubernetes-sigs/kubernetes-mixin PR #1194). Three minutes and three samples,
# longer than the HPA's 15 s sync and a scale-up's reaction, shorter than a launch spike.
AT_MAX_SECONDS = 180.0
AT_MAX_SAMPLES = 3


@dataclass(frozen=True)
class Stretch:
    """Consecutive samples from ``start`` to ``end`` (unix seconds)."""

    start: float
    end: float
    samples: int

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def sustained(self) -> bool:
        return self.samples >= AT_MAX_SAMPLES and self.seconds >= AT_MAX_SECONDS


def longest_stretch(kept: Mapping[float, bool], step: float) -> Stretch | None:
    """The longest run of consecutive sample times whose value is True; a gap of more than 1.5 steps ends a run
    (as :func:`nbhelpers.models.regime.episodes` does)."""
    best: Stretch | None = None
    run: list[float] = []

    def close() -> None:
        nonlocal best
        if run and (best is None or run[-1] - run[0] > best.seconds):
            best = Stretch(run[0], run[-1], len(run))
        run.clear()

    for moment in sorted(kept):
        if run and moment - run[-1] > 1.5 * step:
            close()
        if kept[moment]:
            run.append(moment)
        else:
            close()
    close()
    return best


def waiting_at_max(evidence: Evidence, maximum: int) -> tuple[Stretch | None, bool]:
    """The longest stretch with requests waiting in vLLM while the HPA ran ``maximum`` replicas, and whether the
    replica count came from the HPA's series (False: ``hpa_current_replicas`` has no samples, so the stretch is
    only the waiting requests; the caller checks that it reaches the capture, when the HPA is at its maximum)."""
    waiting_data = evidence.metrics.get("vllm_waiting")
    waiting = series.summed(waiting_data)
    replicas_data = evidence.metrics.get("hpa_current_replicas")
    replicas = series.summed(replicas_data)
    step = float(max((data.step for data in (waiting_data, replicas_data) if data is not None), default=15) or 15)
    if replicas:
        kept = {moment: count >= maximum and waiting.get(moment, 0.0) > 0 for moment, count in replicas.items()}
        return longest_stretch(kept, step), True
    return longest_stretch({moment: value > 0 for moment, value in waiting.items()}, step), False


def demand_peak(evidence: Evidence, seconds: float = AT_MAX_SECONDS) -> float | None:
    """The highest arrival rate (requests/s), averaged over ``seconds``, that vLLM's completions plus the growth of
    its running + waiting requests show (:func:`nbhelpers.models.capacity.demand_from_conservation`, the what-if's
    fallback): a backlog counts once, as it builds up, not again at every sample. None without completions."""
    completions = sorted(series.summed(evidence.metrics.get("vllm_request_rate")).items())
    if not completions:
        return None
    in_system: dict[float, float] = {}
    for query_id in ("vllm_running", "vllm_waiting"):
        for moment, value in series.summed(evidence.metrics.get(query_id)).items():
            in_system[moment] = in_system.get(moment, 0.0) + value
    arrivals = cap.demand_from_conservation(completions, sorted(in_system.items()))
    last = arrivals[-1][0]
    means: list[float] = []
    for index, (start, _) in enumerate(arrivals):
        if means and start + seconds > last:
            break  # a tail shorter than ``seconds`` is no window of its own (a series shorter than it is one)
        window = [value for moment, value in arrivals[index:] if moment < start + seconds]
        means.append(sum(window) / len(window))
    return max(means)


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
