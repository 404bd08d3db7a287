"""What the serving engine is and how many requests it runs at once, worked out once for every check.

All functions are pure: they read the Evidence and the serving workload (:func:`nbhelpers.facts.common.
current_workload`) and answer None when the evidence does not tell; they never stand in a guess for an unknown.

- :func:`serving_gpu`: the GPU as the engine sees it: the engine's own log line, else the node's NVIDIA
  feature-discovery labels (``nvidia.com/gpu.memory``, then ``nvidia.com/gpu.product`` looked up in
  :mod:`nbhelpers.models.gpus`), else DCGM's framebuffer used + free. A pod on a MIG slice (``nvidia.com/mig-…``)
  is sized from the slice, never from the card's labels.
- :func:`vllm_version`: the version vLLM printed at start-up, else the tag of a vLLM image.
- :func:`model_names`: the names the engine's model goes by (flags, ``vllm serve``'s argument, the storageUri).
- :func:`max_num_seqs`: the ``--max-num-seqs`` in effect per pod (docs/contracts.md#finding-codes and docs/upstream-facts.md): the flag, else the
  engine's own log line, else vLLM's default for the known version and GPU; times the data-parallel engines.
- :func:`max_num_seqs_or_plateau`: the same, else the observed plateau of running requests (for callers that
  want a number from the metrics when the configuration does not tell).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from nbhelpers.errors import RunbookError
from nbhelpers.evidence.model import ContainerLog, Evidence
from nbhelpers.facts import common, vllm_args
from nbhelpers.metrics import series
from nbhelpers.models import gpus
from nbhelpers.models.vllm_memory import GIB, Gpu, default_max_num_seqs, parse_version
from nbhelpers.sources import kinds, kube

GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"  # MiB, set by NVIDIA GPU feature discovery
SEQS_FLAG = "--max-num-seqs"
DATA_PARALLEL_FLAG = "--data-parallel-size"
PLATEAU_ORIGIN = "the plateau of running requests while requests waited (no flag, log line or default known)"

_NUMBER = r"([\d,]+(?:\.\d+)?)"
# The device total vLLM works with: PyTorch's out-of-memory message, vLLM's start-up memory check, V0's profile.
_ENGINE_TOTAL = (
    re.compile(rf"total capacity of {_NUMBER} ?GiB"),
    re.compile(rf"Free memory on device[^(]*\({_NUMBER}/{_NUMBER} ?GiB\)"),
    re.compile(rf"total_gpu_memory[ =(]+{_NUMBER} ?GiB"),
)
# The engine's configuration as it logs it: ``non-default args: {'max_num_seqs': 128, ...}`` or ``max_num_seqs=128``.
_LOGGED_MAX_NUM_SEQS = re.compile(r"max_num_seqs['\"]?\s*[:=]\s*(\d+)")
# ``A100-SXM4-40GB-MIG-1g.5gb``: the product label of a node whose GPUs are all split alike (MIG strategy single).
_SINGLE_STRATEGY_MIG = re.compile(r"-MIG-\d+g\.\d+gb", re.IGNORECASE)
_IMAGE_VERSION = re.compile(r":v?(\d+\.\d+(?:\.\d+)?)")


class ServingWorkload(Protocol):
    """The pod spec that serves and its serving container (e.g. :class:`nbhelpers.facts.common.Workload`)."""

    @property
    def pod_spec(self) -> Mapping[str, Any]: ...

    @property
    def serving(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class Valued:
    """A number and where it came from, for summaries."""

    value: float
    origin: str


class GpuSeen(NamedTuple):
    """The GPU as the engine sees it (``total_bytes`` is vLLM's total_gpu_memory) and how that was found."""

    gpu: Gpu
    origin: str


class VersionSeen(NamedTuple):
    """vLLM's version as (major, minor, patch), and as read (``0.10.1``, or ``0.10.1 from the image tag``)."""

    number: tuple[int, int, int]
    text: str


# --- the serving container's logs -------------------------------------------------------------------


def serving_logs(evidence: Evidence, workload: ServingWorkload) -> list[ContainerLog]:
    """Logs (current and previous) of the serving container in the predictor pods, in the evidence's order."""
    container = str(workload.serving.get("name"))
    pods = {kube.name(pod) for pod in evidence.of(kinds.POD) if kube.is_predictor(pod)}
    return [log for log in evidence.logs if log.container == container and log.pod in pods]


# --- the GPU ----------------------------------------------------------------------------------------


def serving_gpu(evidence: Evidence, workload: ServingWorkload) -> GpuSeen | None:
    """The GPU the serving pod runs on, the most direct source first: the total the engine logged (what it sizes
    its memory from), the node's memory label, the node's product label in the GPU table, DCGM used + free.

    A pod that requests a MIG slice (``nvidia.com/mig-3g.40gb``, the mixed strategy) runs on the slice, not the card
    the node labels describe: its size comes from the slice's own label, else DCGM, else the profile's name, and it
    is named as CUDA names it (``NVIDIA A100-SXM4-80GB MIG 3g.40gb``; :mod:`nbhelpers.models.gpus`)."""
    labels = _node_labels(evidence, workload)
    product = labels.get(GPU_PRODUCT_LABEL, "")
    model = _gpu_model(product)
    name = model.device_name if model is not None else (product.replace("-", " ") or None)
    mig = requested_mig_slice(workload)
    if mig is not None:
        name = f"{name} MIG {mig.profile}" if name else f"MIG {mig.profile}"
    logged = _logged_total_gib(serving_logs(evidence, workload))
    if logged is not None:
        return GpuSeen(Gpu(int(logged * GIB), name), f"{logged:.2f} GiB as the engine saw it (log)")
    if mig is not None:
        return _mig_gpu(evidence, labels, mig, name)
    memory = labels.get(GPU_MEMORY_LABEL, "")
    if memory.isdigit() and _SINGLE_STRATEGY_MIG.search(product):
        # MIG strategy single: feature discovery overrides both labels with the slice's values, and CUDA reports
        # the slice's memory as it is (no driver reserve as on a whole card).
        return GpuSeen(Gpu(int(memory) * gpus.MIB, name), f"node label {GPU_MEMORY_LABEL}={memory} MiB (a MIG slice)")
    if memory.isdigit():
        return GpuSeen(_driver_total(int(memory), name), f"node label {GPU_MEMORY_LABEL}={memory} MiB")
    if model is not None:
        return GpuSeen(Gpu(model.engine_total_bytes, name), f"{model.device_name} ({model.driver_total_mib} MiB)")
    dcgm = _dcgm_total_mib(evidence)
    if dcgm is not None:
        return GpuSeen(_driver_total(dcgm, name), f"DCGM framebuffer used + free = {dcgm:,} MiB")
    return None


def requested_mig_slice(workload: ServingWorkload) -> gpus.MigSlice | None:
    """The MIG slice the serving container requests by profile (mixed strategy), or None."""
    for resource in common.accelerator_requests(workload.serving):
        found = gpus.mig_slice(resource)
        if found is not None:
            return found
    return None


def _mig_gpu(evidence: Evidence, labels: Mapping[str, str], mig: gpus.MigSlice, name: str | None) -> GpuSeen:
    """A MIG slice's memory: the slice's node label (MiB, as CUDA reports it), else DCGM used + free for the pod,
    else the size in the profile's name (a little below the real one). Never ``nvidia.com/gpu.memory``, which
    is the whole card's."""
    whole = labels.get(GPU_MEMORY_LABEL, "")
    card = f"; {GPU_MEMORY_LABEL}={whole} MiB is the whole card" if whole.isdigit() else ""
    memory = labels.get(mig.memory_label, "")
    if memory.isdigit():
        return GpuSeen(
            Gpu(int(memory) * gpus.MIB, name), f"node label {mig.memory_label}={memory} MiB (the MIG slice{card})"
        )
    dcgm = _dcgm_total_mib(evidence)
    if dcgm is not None:
        return GpuSeen(Gpu(dcgm * gpus.MIB, name), f"DCGM framebuffer used + free = {dcgm:,} MiB (the MIG slice{card})")
    return GpuSeen(
        Gpu(mig.nominal_bytes, name),
        f"about {mig.memory_gb} GB from the MIG profile {mig.resource} the pod requests{card}",
    )


def _node_labels(evidence: Evidence, workload: ServingWorkload) -> Mapping[str, str]:
    """Labels of the serving pod's node: the workload's own pod, else the newest predictor pod on a known node."""
    pods = sorted(
        (pod for pod in evidence.of(kinds.POD) if kube.is_predictor(pod)),
        key=lambda pod: (kube.created(pod) or "", kube.name(pod)),
        reverse=True,
    )
    names = [str(workload.pod_spec.get("nodeName") or "")]
    names += [str(kube.spec(pod).get("nodeName") or "") for pod in pods]
    nodes = {kube.name(node): node for node in evidence.of(kinds.NODE)}
    for name in names:
        if name in nodes:
            return kube.labels(nodes[name])
    return {}


def _gpu_model(product: str) -> gpus.GpuModel | None:
    """The table entry for a product label (``NVIDIA-L40S``, ``NVIDIA-A100-SXM4-80GB``), spelling aside."""
    wanted = _squash(product)
    if not wanted:
        return None
    return next((model for model in gpus.GPUS if wanted in (_squash(model.device_name), _squash(model.name))), None)


def _squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _logged_total_gib(logs: list[ContainerLog]) -> float | None:
    for log in logs:
        for pattern in _ENGINE_TOTAL:
            match = pattern.search(log.text)
            if match:
                return float(match.groups()[-1].replace(",", ""))
    return None


def _dcgm_total_mib(evidence: Evidence) -> int | None:
    used = series.by_pod(evidence.metrics.get("gpu_fb_used_mib"))
    free = series.by_pod(evidence.metrics.get("gpu_fb_free_mib"))
    totals = [
        value + free[pod][moment]
        for pod, samples in used.items()
        for moment, value in samples.items()
        if moment in free.get(pod, {})
    ]
    return int(max(totals)) if totals else None


def _driver_total(mib: int, name: str | None) -> Gpu:
    """A driver-reported total (labels, DCGM) as the smaller total the engine sees."""
    return Gpu(mib * gpus.MIB - int(gpus.CUDA_RESERVED_GIB * gpus.GIB), name)


# --- the version ------------------------------------------------------------------------------------


def vllm_version(evidence: Evidence, workload: ServingWorkload) -> VersionSeen | None:
    """The version vLLM printed at start-up, else the tag of the serving image when that container runs vLLM
    (another server's tag, e.g. KServe's huggingfaceserver, is that server's version)."""
    logged = evidence.versions.get("vllm")
    if logged:
        number = _parsed(logged)
        if number is not None:
            return VersionSeen(number, logged)
    serving = workload.serving
    if vllm_args.parse_container(serving).server != vllm_args.VLLM:
        return None
    tag = _IMAGE_VERSION.search(str(serving.get("image") or "").rsplit("/", 1)[-1])
    number = _parsed(tag.group(1)) if tag else None
    return VersionSeen(number, f"{tag.group(1)} from the image tag") if tag and number else None


def _parsed(text: str) -> tuple[int, int, int] | None:
    try:
        return parse_version(text)
    except RunbookError:
        return None


# --- the model --------------------------------------------------------------------------------------


def model_names(evidence: Evidence, workload: ServingWorkload) -> list[str]:
    """Names the engine's model goes by, in this order: ``--model``, ``--served-model-name``, the model given
    to ``vllm serve``, the InferenceService's ``storageUri`` (for lookups in the model table)."""
    server = vllm_args.parse_container(workload.serving)
    names = [vllm_args.flag_value(server, "model") or "", vllm_args.flag_value(server, "served-model-name") or ""]
    argv = list(server.argv)
    if "serve" in argv and argv.index("serve") + 1 < len(argv):
        names.append(argv[argv.index("serve") + 1])
    model = (kube.spec(evidence.isvc).get("predictor") or {}).get("model") or {}
    if isinstance(model, Mapping) and model.get("storageUri"):
        names.append(str(model["storageUri"]))
    return [name for name in names if name and not name.startswith("-")]


# --- the request ceiling ----------------------------------------------------------------------------


def max_num_seqs(evidence: Evidence, workload: ServingWorkload) -> Valued | None:
    """Requests one pod runs at most: the ``--max-num-seqs`` in effect (the flag, else the engine's log line, else
    vLLM's default for the known version and GPU) times the data-parallel engines in the pod (the metrics are
    summed over engines). None when none of these is known: the default is never assumed for an unknown version."""
    server = vllm_args.parse_container(workload.serving)
    per_engine = _flagged(server) or _logged(serving_logs(evidence, workload)) or _default(evidence, workload)
    engines = vllm_args.int_flag(server, DATA_PARALLEL_FLAG) or 1
    if per_engine is None or engines == 1:
        return per_engine
    return Valued(per_engine.value * engines, f"{per_engine.origin} × {engines} data-parallel engines")


def max_num_seqs_or_plateau(evidence: Evidence, workload: ServingWorkload) -> Valued | None:
    """:func:`max_num_seqs`, else the most requests a pod ran while requests waited in it (docs/contracts.md#finding-codes)."""
    known = max_num_seqs(evidence, workload)
    if known is not None:
        return known
    plateau = saturated_running(evidence)
    return Valued(plateau, PLATEAU_ORIGIN) if plateau is not None else None


def saturated_running(evidence: Evidence) -> int | None:
    """The most requests one pod ran at a moment when requests were waiting in that same pod: the pod's measured
    capacity (the KV cache may hold fewer requests than the flag allows)."""
    waiting = series.by_pod(evidence.metrics.get("vllm_waiting"))
    best: float | None = None
    for pod, samples in series.by_pod(evidence.metrics.get("vllm_running")).items():
        queue = waiting.get(pod, {})
        for moment, running in samples.items():
            if queue.get(moment, 0.0) > 0 and (best is None or running > best):
                best = running
    return int(best) if best is not None and best > 0 else None


def _flagged(server: vllm_args.ServerCommand) -> Valued | None:
    flag = vllm_args.int_flag(server, SEQS_FLAG)
    return Valued(flag, f"{SEQS_FLAG}={flag}") if flag is not None else None


def _logged(logs: list[ContainerLog]) -> Valued | None:
    """The engine's own value, current containers first."""
    for log in sorted(logs, key=lambda log: log.previous):
        match = _LOGGED_MAX_NUM_SEQS.search(log.text)
        if match:
            return Valued(int(match.group(1)), f"max_num_seqs={match.group(1)} in the engine's log")
    return None


def _default(evidence: Evidence, workload: ServingWorkload) -> Valued | None:
    version = vllm_version(evidence, workload)
    gpu = serving_gpu(evidence, workload)
    if version is None or gpu is None:
        return None
    setting = default_max_num_seqs(version.number, gpu.gpu)
    seen = f"vLLM {version.text}, GPU {gpu.gpu.name or gpu.origin}"
    return Valued(setting.value, f"{SEQS_FLAG} not set: {setting.origin} ({seen})")
