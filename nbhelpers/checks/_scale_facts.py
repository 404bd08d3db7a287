"""Facts the ``scale_target`` step weighs autoscalers against: which Deployments receive traffic, the
pod's request ceiling and measured capacity, cold starts read from pod status, and the window's metrics.

Everything here is a pure function of the evidence.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nbhelpers import kube, quantities, vllm_args
from nbhelpers.checks import _common as common
from nbhelpers.evidence import Evidence
from nbhelpers.models import gpus
from nbhelpers.models.vllm_memory import Gpu, default_max_num_seqs, parse_version
from nbhelpers.sources import kinds
from nbhelpers.timeutil import parse_k8s_time

# A per-pod target sits below the pod's capacity so that the autoscaler adds a pod before the engine
# saturates; 80 % also leaves room for the HPA's 10 % tolerance band.
TARGET_FRACTION = 0.8
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"  # MiB, set by NVIDIA GPU feature discovery
_IMAGE_VERSION = re.compile(r":v?(\d+\.\d+(?:\.\d+)?)")


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
class Ceiling:
    """The most requests one engine runs at once, and where that number comes from."""

    value: int
    origin: str


@dataclass(frozen=True)
class Capacity:
    """The pod's request ceiling (``--max-num-seqs`` in effect) and the running requests it actually held
    while requests queued (the measured capacity: the KV cache may hold fewer requests than the flag allows)."""

    ceiling: Ceiling | None
    saturated_running: int | None

    @property
    def per_pod(self) -> int | None:
        if self.saturated_running is not None:
            return self.saturated_running
        return self.ceiling.value if self.ceiling is not None else None

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
    """The ceiling: ``--max-num-seqs`` on the command line, else vLLM's default for its version and GPU
    (DESIGN §6), else the observed plateau of running requests."""
    server = vllm_args.parse_container(workload.serving)
    saturated = saturated_running(evidence)
    ceiling: Ceiling | None = None
    flag = vllm_args.int_flag(server, "max-num-seqs")
    if flag is not None:
        ceiling = Ceiling(flag, f"--max-num-seqs {flag} on the command line of {workload.ref}")
    elif server.server == vllm_args.VLLM:
        ceiling = _default_ceiling(evidence, workload)
    if ceiling is None and saturated is not None:
        ceiling = Ceiling(saturated, "the plateau of running requests while requests waited (no flag or default known)")
    return Capacity(ceiling, saturated)


def _default_ceiling(evidence: Evidence, workload: common.Workload) -> Ceiling | None:
    gpu = gpu_of(evidence, workload)
    if gpu is None:
        return None
    version_text = evidence.versions.get("vllm") or _image_version(str(workload.serving.get("image") or ""))
    version = parse_version(version_text) if version_text else None
    setting = default_max_num_seqs(version, gpu)
    seen = f"vLLM {version_text}" if version_text else "vLLM version unknown, V1 assumed"
    return Ceiling(setting.value, f"no --max-num-seqs flag: {setting.origin} ({seen}, GPU {gpu.name or 'unnamed'})")


def _image_version(image: str) -> str | None:
    match = _IMAGE_VERSION.search(image.rsplit("/", 1)[-1])
    return match.group(1) if match else None


def gpu_of(evidence: Evidence, workload: common.Workload) -> Gpu | None:
    """The GPU of the node the serving pod runs on, from NVIDIA feature-discovery labels."""
    node_name = workload.pod_spec.get("nodeName")
    node = next((n for n in evidence.of(kinds.NODE) if kube.name(n) == node_name), None) if node_name else None
    if node is None:
        return None
    labels = kube.labels(node)
    product = labels.get(GPU_PRODUCT_LABEL, "")
    wanted = _squash(product)
    for model in gpus.GPUS:
        if wanted and wanted in (_squash(model.device_name), _squash(model.name)):
            return Gpu(model.engine_total_bytes, model.device_name)
    memory = labels.get(GPU_MEMORY_LABEL, "")
    if memory.isdigit():
        total = int(memory) * gpus.MIB - int(gpus.CUDA_RESERVED_GIB * gpus.GIB)
        return Gpu(total, product.replace("-", " ") or None)
    return None


def _squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


# --- metrics --------------------------------------------------------------------------------------


def series_of(evidence: Evidence, query_id: str) -> list[tuple[dict[str, str], tuple[tuple[float, float], ...]]]:
    data = evidence.metrics.get(query_id)
    if data is None or data.status != "ok":
        return []
    return [(dict(series.labels), series.samples) for series in data.series]


def saturated_running(evidence: Evidence) -> int | None:
    """The most requests one pod ran at a moment when requests were waiting in that same pod."""
    waiting = {labels.get("pod", ""): dict(samples) for labels, samples in series_of(evidence, "vllm_waiting")}
    best: float | None = None
    for labels, samples in series_of(evidence, "vllm_running"):
        queue = waiting.get(labels.get("pod", ""), {})
        for moment, running in samples:
            if queue.get(moment, 0.0) > 0 and (best is None or running > best):
                best = running
    return int(best) if best is not None and best > 0 else None


def totals(evidence: Evidence, query_id: str) -> dict[float, float]:
    """The sum over series at each sample time."""
    summed: dict[float, float] = {}
    for _, samples in series_of(evidence, query_id):
        for moment, value in samples:
            summed[moment] = summed.get(moment, 0.0) + value
    return dict(sorted(summed.items()))


def peak(values: Mapping[float, float]) -> float | None:
    return max(values.values()) if values else None


# --- cold starts ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ColdStart:
    pod: str
    seconds: float

    def describe(self) -> str:
        return f"Pod {self.pod}: created -> Ready in {self.seconds:.0f} s"


def cold_starts(evidence: Evidence) -> list[ColdStart]:
    """Created -> Ready of each ready predictor pod, from its creationTimestamp and its Ready condition's
    lastTransitionTime (the time a scale-up waits for a new replica, scheduling and image pull included)."""
    measured = []
    for pod in common.predictor_pods(evidence):
        ready = kube.condition(pod, "Ready")
        created = parse_k8s_time(kube.created(pod))
        became = parse_k8s_time(str(ready.get("lastTransitionTime") or "")) if ready else None
        if ready is None or str(ready.get("status")) != "True" or created is None or became is None:
            continue
        seconds = (became - created).total_seconds()
        if seconds > 0:
            measured.append(ColdStart(kube.name(pod), seconds))
    return measured


def slowest(starts: Sequence[ColdStart]) -> ColdStart | None:
    return max(starts, key=lambda start: start.seconds, default=None)


def quantity_number(value: Any) -> float | None:
    parsed = quantities.try_parse(value)
    return float(parsed) if parsed is not None else None
