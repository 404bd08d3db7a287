"""The state a scenario's faults leave the service in: names, effective flags, pods and their lives.

Everything the generator writes (objects, events, logs, metrics) is derived
from this one plan, so the pieces agree with each other by construction.
"""

from __future__ import annotations

import json
import math
import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from nbhelpers.models.vllm_memory import GIB, Gpu, default_max_num_seqs, parse_version
from nbhelpers.scenarios.spec import (
    BLOCK_SIZE,
    IDLE_BEFORE_SCALE_TO_ZERO_SECONDS,
    IDLE_SECONDS_PER_TOKEN,
    ITL_PER_RUNNING_SECONDS,
    NGINX_DEFAULT_TIMEOUT_SECONDS,
    NGINX_OWNER_TIMEOUT_SECONDS,
    OUTSIDE_BUDGET_GIB,
    PREFILL_TOKENS_PER_SECOND,
    RUNTIME_HOST_GIB,
    SERVER_PORT_FLAGS,
    GpuNode,
    ReadinessBlip,
    Restart,
    ScenarioSpec,
    Traffic,
    flag_value,
    kv_cache_blocks,
    quantity_gib,
)
from nbhelpers.sources.kube import LLMISVC_CONTAINER, SERVING_CONTAINER

# Why an engine died at start-up (``Run.engine_error``): PyTorch's CUDA out-of-memory error while it captured its
# graphs, or vLLM's own check that one request of --max-model-len tokens fits the KV cache.
CUDA_OOM_ERROR = "cuda_oom"
# An engine that had served and then died of PyTorch's CUDA out-of-memory error in a forward pass (a history restart
# with that engine_error; its log: runtime_errors.py).
RUNTIME_CUDA_OOM_ERROR = "runtime_cuda_oom"
# One that died of a CUDA illegal memory access in a forward pass (a kernel bug, not a shortage of memory).
RUNTIME_ILLEGAL_ACCESS_ERROR = "runtime_illegal_memory_access"
# The engine errors that end a run which had served (its stats, then its last words: runtime_errors.py).
RUNTIME_ENGINE_ERRORS = (RUNTIME_CUDA_OOM_ERROR, RUNTIME_ILLEGAL_ACCESS_ERROR)
KV_CAPACITY_ERROR = "kv_capacity"
# vLLM's config validation: --max-num-batched-tokens below --max-model-len without chunked prefill; it fails within
# seconds of the start, before any weight loads.
BATCHED_TOKENS_ERROR = "batched_tokens"
BATCHED_TOKENS_REFUSAL_SECONDS = 7.5
# Other refusals before any weight loads, each after the step that raises it: the engine picks its internal port
# for the distributed init (a VLLM_PORT set by a Service link is read there), the GPU worker checks the dtype when
# it initializes the device, and the config's hub download of config.json needs a writable cache first.
VLLM_PORT_ERROR = "vllm_port_uri"
DTYPE_ERROR = "dtype"
CACHE_PERMISSION_ERROR = "cache_permission"
HUB_FORBIDDEN_ERROR = "hub_forbidden"
# --tensor-parallel-size above the pod's GPUs: vLLM V1's Ray executor waits for a placement group that never forms
# and gives up after PG_WAIT_TIMEOUT (1800 s, vllm/v1/executor/ray_utils.py); the server never listens meanwhile.
TENSOR_PARALLEL_ERROR = "tensor_parallel"
PLACEMENT_GROUP_TIMEOUT_SECONDS = 1800.0
TENSOR_PARALLEL_WAIT_STARTS_SECONDS = 19.0
# Fault type -> (Run.engine_error, seconds from the container's start to its exit).
START_REFUSALS = {
    "batched_tokens_below_max_model_len": (BATCHED_TOKENS_ERROR, BATCHED_TOKENS_REFUSAL_SECONDS),
    "vllm_port_service_link": (VLLM_PORT_ERROR, 17.2),
    "bf16_on_pre_ampere_gpu": (DTYPE_ERROR, 18.4),
    "hf_cache_not_writable": (CACHE_PERMISSION_ERROR, 6.8),
    "gated_model_access_not_granted": (HUB_FORBIDDEN_ERROR, 6.4),
    "tensor_parallel_above_gpus": (
        TENSOR_PARALLEL_ERROR,
        TENSOR_PARALLEL_WAIT_STARTS_SECONDS + PLACEMENT_GROUP_TIMEOUT_SECONDS + 1.6,
    ),
}
# Refusals that leave the server silent until they exit (a liveness probe may kill it first): the rest exit early.
HANGING_REFUSALS = frozenset({TENSOR_PARALLEL_ERROR})
# Kubernetes' alphabet for generated name suffixes and pod-template hashes (no vowels, no look-alikes).
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def rng_for(spec: ScenarioSpec, purpose: str) -> random.Random:
    """A random generator per purpose, so adding one draw never shifts another's values."""
    return random.Random(f"{spec.seed}:{purpose}")


def make_uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def name_suffix(rng: random.Random, length: int) -> str:
    return "".join(rng.choice(NAME_ALPHABET) for _ in range(length))


def without_flag(args: tuple[str, ...], flag: str) -> tuple[str, ...]:
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg == flag:
            skip = True
            continue
        if not arg.startswith(flag + "="):
            kept.append(arg)
    return tuple(kept)


@dataclass(frozen=True)
class KvCache:
    """vLLM's start-up arithmetic: how much KV cache one replica gets (docs/upstream-facts.md)."""

    bytes_per_token: int
    available_gib: float
    num_blocks: int
    max_model_len: int
    max_num_seqs: int
    gpu_memory_utilization: float

    @property
    def tokens(self) -> int:
        return self.num_blocks * BLOCK_SIZE

    @property
    def max_concurrency(self) -> float:
        return self.tokens / self.max_model_len


@dataclass(frozen=True)
class Run:
    """One run of the serving container, from its start to its end (``ended`` None: running at capture)."""

    started: datetime
    ended: datetime | None
    reason: str = ""  # why it ended: Error (killed after failing liveness, or the engine died) | OOMKilled
    exit_code: int = 0
    killed_at: datetime | None = None  # the kubelet's liveness kill, ``grace`` before ``ended``
    engine_error: str = ""  # the engine refused to start, and its log says why: CUDA_OOM_ERROR, KV_CAPACITY_ERROR, ...

    def active(self, moment: datetime) -> bool:
        return self.started <= moment and (self.ended is None or moment < self.ended)


@dataclass(frozen=True)
class PodPlan:
    """One predictor pod's life: scheduling, the runs of its serving container, probes and readiness.

    A pod the scheduler could not place has no node, no IP and no runs. A pod whose container
    is killed (liveness, OOM) has one run per start, with the kubelet's growing back-off between them.
    """

    name: str
    uid: str
    ip: str  # "" while unscheduled
    node: GpuNode | None
    template_hash: str
    created: datetime
    runs: tuple[Run, ...]
    load_seconds: float  # how long this pod's engine takes from container start to listening
    listening: datetime | None
    ready_at: datetime | None
    probe_failures: tuple[datetime, ...]  # readiness
    liveness_failures: tuple[datetime, ...]
    back_offs: tuple[datetime, ...]  # kubelet syncs that found the container in its restart back-off
    scheduling_attempts: tuple[datetime, ...]  # FailedScheduling (unscheduled pods only)
    stopping: datetime | None = None  # the autoscaler scaled it away: deletion asked, Ready turns False
    deleted: datetime | None = None  # its containers are gone and the API server has removed it
    # After it was first Ready (``ready_at``): spells not Ready, [from, to) (a restart, a readiness blip).
    unready: tuple[tuple[datetime, datetime], ...] = ()
    blip_failures: tuple[datetime, ...] = ()  # readiness failures of a pod that serves (history's blips)
    # The kubelet's syncs that could not build the serving container's config (a scheduled pod with no runs).
    config_error_syncs: tuple[datetime, ...] = ()
    # A sidecar whose own readiness never passes (agent_readiness_not_served): the serving container turns ready
    # at ``engine_ready_at`` while the pod stays not Ready; the sidecar's probe fails from ``sidecar_started``.
    engine_ready_at: datetime | None = None
    sidecar_started: datetime | None = None
    # Liveness checks of a serving engine that time out under load (liveness_timeouts_under_load).
    busy_liveness_failures: tuple[datetime, ...] = ()

    @property
    def scheduled(self) -> bool:
        return self.node is not None

    @property
    def started(self) -> datetime:
        """When the serving container first started (scheduled pods only)."""
        return self.runs[0].started

    @property
    def containers_started(self) -> datetime:
        """When the pod's containers first started: with the serving container, or at the kubelet's first sync when
        the serving container is never created (its sidecars, such as queue-proxy, start regardless)."""
        return self.runs[0].started if self.runs else self.config_error_syncs[0]

    def ready(self, moment: datetime) -> bool:
        stopped = self.stopping is not None and moment >= self.stopping
        lapsed = any(start <= moment < end for start, end in self.unready)
        return self.ready_at is not None and moment >= self.ready_at and not stopped and not lapsed

    @property
    def ready_since(self) -> datetime | None:
        """The Ready condition's latest transition to True: the first Ready, or the end of the last spell without."""
        if self.ready_at is None:
            return None
        return max([self.ready_at, *(end for _, end in self.unready)])

    def alive(self, moment: datetime) -> bool:
        """The pod exists in the API at ``moment`` (created, not yet removed)."""
        return self.created <= moment and (self.deleted is None or moment < self.deleted)

    def run_at(self, moment: datetime) -> Run | None:
        return next((run for run in self.runs if run.active(moment)), None)

    def serving(self, moment: datetime) -> bool:
        """The engine answers at ``moment``: the last run from ``listening`` on, or an earlier run that had loaded
        and served until the kubelet killed it (liveness_timeouts_under_load)."""
        if self.listening is not None and moment >= self.listening:
            return True
        run = self.run_at(moment)
        if run is not None and run.engine_error in RUNTIME_ENGINE_ERRORS and run.ended is not None:
            return run.started + timedelta(seconds=self.load_seconds) <= moment < run.ended
        if run is None or run.killed_at is None or run.ended is None:
            return False
        return run.started + timedelta(seconds=self.load_seconds) <= moment < run.killed_at

    def restarts_at(self, moment: datetime) -> int:
        return max(0, sum(1 for run in self.runs if run.started <= moment) - 1)

    def last_termination(self, moment: datetime) -> Run | None:
        """The latest run that had ended by ``moment`` (the container's ``lastState.terminated``)."""
        ended = [run for run in self.runs if run.ended is not None and run.ended <= moment]
        return ended[-1] if ended else None

    @property
    def restart_count(self) -> int:
        return max(0, len(self.runs) - 1)

    @property
    def crash_looping(self) -> bool:
        """At capture the container waits in CrashLoopBackOff (its last run ended)."""
        return bool(self.runs) and self.runs[-1].ended is not None


@dataclass(frozen=True)
class Plan:
    spec: ScenarioSpec
    args: tuple[str, ...]
    listen_port: int
    probe_port: int
    kv: KvCache
    ksvc: str  # Serverless only ("" otherwise)
    revision: str  # Serverless only
    deployment: str
    replica_set: str
    template_hash: str
    uids: dict[str, str]
    pods: tuple[PodPlan, ...]
    routed: bool  # client traffic reaches the predictor (False when the routing layer is broken)
    expects_virtual_service: bool  # KServe's ingress config wants an Istio VirtualService for the ISVC
    memory_limit_gib: float | None  # the serving container's effective memory limit
    scale_ups: tuple[tuple[datetime, int], ...] = ()  # the HPA's scale-out decisions: (when, new replica count)
    container: str = SERVING_CONTAINER  # the serving container (KServe's LLMInferenceService presets name it "main")
    # An LLMInferenceService's prefill workload (llmisvc.prefill_replicas), its own plan: nbhelpers/scenarios/disagg.py.
    prefill: Plan | None = None

    @property
    def llmisvc(self) -> bool:
        return self.spec.isvc.is_llmisvc

    @property
    def serverless(self) -> bool:
        return self.spec.isvc.deployment_mode == "Serverless"

    @property
    def grace_seconds(self) -> int:
        """terminationGracePeriodSeconds of the predictor pods (Knative sets its revision timeout)."""
        return TERMINATION_GRACE_SERVERLESS if self.serverless else TERMINATION_GRACE_RAW

    def ready_pods(self, moment: datetime) -> list[PodPlan]:
        return [pod for pod in self.pods if pod.ready(moment)]

    @property
    def live_pods(self) -> tuple[PodPlan, ...]:
        """The pods that still exist at capture (a pod scaled away is gone; only its events remain)."""
        return tuple(pod for pod in self.pods if pod.alive(self.spec.timeline.captured_at))

    @property
    def min_scale(self) -> int:
        return min_scale(self.spec)

    @property
    def hpa_name(self) -> str:
        """The HPA that acts on the predictor: KServe's for class hpa, the owner's own one, or none ("")."""
        isvc = self.spec.isvc
        if isvc.deployment_mode != "RawDeployment":
            return ""
        if isvc.autoscaler_class == "hpa":
            return f"{isvc.name}-predictor"
        if user_hpa_metric(self.spec) is not None:
            return f"{isvc.name}-predictor-queue"
        return ""


def apply_faults(spec: ScenarioSpec) -> tuple[str, ...]:
    """The serving container's args after the spec's faults are applied to the baseline."""
    args = spec.isvc.args
    flag, default_port = SERVER_PORT_FLAGS[spec.isvc.server]
    for fault in spec.faults:
        if fault.type == "port_mismatch":
            port = int(fault.params["listen_port"])
            args = without_flag(args, flag)
            if port != default_port:
                args = (*args, flag, str(port))
        if fault.type == "max_model_len_exceeds_kv_cache":
            length = str(int(fault.params["max_model_len"]))
            args = (*without_flag(without_flag(args, "--max-model-len"), "--max_model_len"), "--max-model-len", length)
        if fault.type == "gpu_memory_overcommitted":
            utilization = float(fault.params["gpu_memory_utilization"])
            args = (*without_flag(args, "--gpu-memory-utilization"), "--gpu-memory-utilization", f"{utilization:g}")
        if fault.type == "tensor_parallel_above_gpus":
            size = str(int(fault.params["tensor_parallel_size"]))
            args = (*without_flag(args, "--tensor-parallel-size"), "--tensor-parallel-size", size)
        if fault.type == "batched_tokens_below_max_model_len":
            tokens = str(int(fault.params["max_num_batched_tokens"]))
            args = (*without_flag(args, "--max-num-batched-tokens"), "--max-num-batched-tokens", tokens)
            args = (*without_flag(args, "--no-enable-chunked-prefill"), "--no-enable-chunked-prefill")
    return args


def liveness_probe(spec: ScenarioSpec) -> Mapping[str, Any] | None:
    """The liveness probe in effect: the one a fault added, else the baseline's."""
    for fault in spec.faults:
        if fault.type in ("liveness_kills_during_load", "liveness_timeouts_under_load"):
            probe: Mapping[str, Any] = fault.params["liveness_probe"]
            return probe
    return spec.isvc.liveness_probe


def busy_kill(spec: ScenarioSpec, index: int) -> datetime | None:
    """When the kubelet kills pod ``index``'s serving engine for liveness timeouts under load (None: never)."""
    for fault in spec.faults:
        if fault.type == "liveness_timeouts_under_load" and int(fault.params.get("pod", 0)) == index:
            at: datetime = fault.params["at"]
            return at
    return None


def logger_url(spec: ScenarioSpec) -> str:
    """The request-logging sink of an agent_readiness_not_served fault ("" without one): KServe injects its agent."""
    for fault in spec.faults:
        if fault.type == "agent_readiness_not_served":
            return str(fault.params["logger_url"])
    return ""


def _copy(value: Mapping[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = json.loads(json.dumps(value))
    return copied


def declared_resources(spec: ScenarioSpec) -> tuple[dict[str, Any], dict[str, Any]]:
    """(ISVC resources, ServingRuntime container resources) after the faults.

    ``host_oomkilled`` puts its memory limit where the spec says it came from: a runtime default
    (the ISVC then declares no memory, so the default applies) or the ISVC itself.
    """
    isvc, runtime = _copy(spec.isvc.resources), _copy(spec.isvc.runtime_resources)
    for fault in spec.faults:
        if fault.type != "host_oomkilled":
            continue
        memory = str(fault.params["memory_limit"])
        holder = runtime if fault.params.get("set_in", "runtime") == "runtime" else isvc
        if holder is runtime:
            for section in ("requests", "limits"):
                isvc.get(section, {}).pop("memory", None)
        holder.setdefault("requests", {})["memory"] = memory
        holder.setdefault("limits", {})["memory"] = memory
    return isvc, runtime


def effective_resources(spec: ScenarioSpec) -> dict[str, Any]:
    """The pod's resources: KServe merges the ISVC's container over the runtime's, key by key."""
    isvc, runtime = declared_resources(spec)
    merged = {section: {**runtime.get(section, {}), **isvc.get(section, {})} for section in ("requests", "limits")}
    # Requests default to limits (docs/upstream-facts.md): the API server fills them in on the pod.
    for name, value in merged["limits"].items():
        merged["requests"].setdefault(name, value)
    return {section: values for section, values in merged.items() if values}


def memory_limit_gib(resources: Mapping[str, Any]) -> float | None:
    limit = (resources.get("limits") or {}).get("memory")
    return quantity_gib(str(limit)) if limit is not None else None


def listen_port(server: str, args: tuple[str, ...]) -> int:
    flag, default_port = SERVER_PORT_FLAGS[server]
    value = flag_value(args, flag)
    return int(value) if value else default_port


def readiness_probe(spec: ScenarioSpec) -> Mapping[str, Any] | None:
    """The readiness probe in effect: the baseline's, on the port a readiness_probe_port_unserved fault names."""
    probe = spec.isvc.readiness_probe
    for fault in spec.faults:
        if fault.type == "readiness_probe_port_unserved" and probe is not None:
            moved = _copy(probe)
            handler = next((key for key in ("httpGet", "tcpSocket", "grpc") if key in moved), None)
            if handler is not None:
                moved[handler]["port"] = int(fault.params["probe_port"])
            return moved
    return probe


def probe_port(spec: ScenarioSpec) -> int:
    """The port the readiness check connects to (the containerPort when no probe names one)."""
    probe: Any = readiness_probe(spec) or {}
    for handler in ("httpGet", "tcpSocket", "grpc"):
        if handler in probe and "port" in probe[handler]:
            return int(probe[handler]["port"])
    return spec.isvc.container_port


def kv_cache(spec: ScenarioSpec, args: tuple[str, ...]) -> KvCache:
    model = spec.isvc.model
    node = spec.cluster.nodes[0]
    tensor_parallel = int(flag_value(args, "--tensor-parallel-size") or 1)
    utilization = float(flag_value(args, "--gpu-memory-utilization") or 0.9)
    bytes_per_token, available_gib, blocks = kv_cache_blocks(model, node.memory_gib, utilization, tensor_parallel)
    gpu = Gpu(int(node.memory_gib * GIB), node.product.replace("-", " ") or None)
    default_seqs = default_max_num_seqs(parse_version(spec.isvc.vllm_version), gpu).value
    max_model_len = int(flag_value(args, "--max-model-len") or flag_value(args, "--max_model_len") or 32768)
    return KvCache(
        bytes_per_token=bytes_per_token,
        available_gib=round(available_gib, 2),
        num_blocks=blocks,
        max_model_len=max_model_len,
        max_num_seqs=int(flag_value(args, "--max-num-seqs") or default_seqs),
        gpu_memory_utilization=utilization,
    )


# ---- the engine's start-up timeline (the log writer and the metrics share it) -------------------

WEIGHTS_START_SECONDS = 18.6  # import, config, engine process, "Loading model from scratch"
WEIGHTS_SHARE = 0.55  # weights are loaded after this share of the whole start-up


def weights_span(load_seconds: float) -> tuple[float, float]:
    """(start, end) of weight loading, in seconds after the container started."""
    return WEIGHTS_START_SECONDS, load_seconds * WEIGHTS_SHARE - 0.6


def oom_seconds(spec: ScenarioSpec, load_seconds: float, limit_gib: float | None) -> float | None:
    """Seconds after start at which loading outgrows the memory limit, or None when it fits.

    The loader holds the runtime plus up to two shards (see ``Model.host_load_gib``): the kernel kills
    the container part way through reading the first shard that does not fit.
    """
    model = spec.isvc.model
    if limit_gib is None or limit_gib >= model.host_load_gib:
        return None
    shard_gib = model.weights_gib / model.shards
    held_max = 1 if model.weights_format == "safetensors" else 2
    start, end = weights_span(load_seconds)
    per_shard = (end - start) / model.shards
    for index in range(model.shards):
        held = RUNTIME_HOST_GIB + shard_gib * min(index + 1, held_max)
        if held > limit_gib:
            over = (limit_gib - RUNTIME_HOST_GIB - shard_gib * min(index, held_max - 1)) / shard_gib
            return start + per_shard * (index + min(0.95, max(0.05, over)))
    return None


GRAPH_CAPTURE_SHARE = 0.86  # CUDA graphs are captured after the KV cache is sized (logs: 0.78 -> 0.95 of the load)


def cuda_oom_seconds(spec: ScenarioSpec, args: tuple[str, ...], load_seconds: float) -> float | None:
    """Seconds after start at which the engine runs out of GPU memory capturing its CUDA graphs, or None.

    vLLM sizes its KV cache to fill ``--gpu-memory-utilization`` of the card; what it does not budget for
    (the CUDA context, the graphs) must fit in the rest.
    """
    utilization = float(flag_value(args, "--gpu-memory-utilization") or 0.9)
    if spec.cluster.nodes[0].memory_gib * (1 - utilization) >= OUTSIDE_BUDGET_GIB:
        return None
    return load_seconds * GRAPH_CAPTURE_SHARE


KV_CHECK_SHARE = 0.78  # vLLM profiles memory, logs the KV cache it can have, then checks one request fits
KV_REFUSAL_DELAY_SECONDS = 1.2  # from that check to the container's exit (traceback, API server shutdown)


def kv_refusal_seconds(kv: KvCache, load_seconds: float) -> float | None:
    """Seconds after start at which vLLM refuses to start because one request of --max-model-len tokens needs
    more KV cache than the memory left, or None when it fits (vllm/v1/core/kv_cache_utils.py)."""
    if kv.max_model_len <= kv.tokens:
        return None
    return load_seconds * KV_CHECK_SHARE + KV_REFUSAL_DELAY_SECONDS


# ---- pods ----------------------------------------------------------------------------------------

KUBELET_BACKOFF_START_SECONDS = 10
KUBELET_BACKOFF_MAX_SECONDS = 300
KUBELET_SYNC_SECONDS = 10  # the pod worker's resync while a container waits in back-off
SCHEDULER_RETRY_SECONDS = 300  # unschedulable pods are retried at least every 5 minutes
TERMINATION_GRACE_RAW = 30
TERMINATION_GRACE_SERVERLESS = 300


def restart_back_off(terminations: int) -> float:
    """The kubelet's crash-loop back-off before the next start: 10 s doubling up to 5 minutes."""
    return float(min(KUBELET_BACKOFF_MAX_SECONDS, KUBELET_BACKOFF_START_SECONDS * 2 ** max(0, terminations - 1)))


def _probe_schedule(probe: Mapping[str, Any] | None) -> tuple[float, float, int]:
    """(initial delay, period, failure threshold) in seconds, with Kubernetes' defaults."""
    probe = probe or {}
    return (
        float(probe.get("initialDelaySeconds", 0)),
        float(probe.get("periodSeconds", 10)),
        int(probe.get("failureThreshold", 3)),
    )


@dataclass(frozen=True)
class _PlanInputs:
    """What every pod's life depends on, computed once from the spec."""

    spec: ScenarioSpec
    liveness: Mapping[str, Any] | None
    memory_limit_gib: float | None
    grace_seconds: int
    probe_can_pass: bool
    args: tuple[str, ...]
    kv: KvCache


@dataclass
class _PodLife:
    """The mutable record :func:`_pod_plan` fills while it walks one pod's runs."""

    runs: list[Run]
    readiness_failures: list[datetime]
    liveness_failures: list[datetime]
    back_offs: list[datetime]
    listening: datetime | None = None
    ready_at: datetime | None = None


def _liveness_kill(
    start: datetime, until: datetime, probe: Mapping[str, Any] | None, life: _PodLife
) -> datetime | None:
    """Record the liveness failures of one run that serves nothing before ``until``; the kill time, if any."""
    if probe is None:
        return None
    delay, period, threshold = _probe_schedule(probe)
    moment = start + timedelta(seconds=delay)
    failures = 0
    while moment < until:
        life.liveness_failures.append(moment)
        failures += 1
        if failures >= threshold:
            return moment
        moment += timedelta(seconds=period)
    return None


def _readiness(
    spec: ScenarioSpec, start: datetime, end: datetime, listening: datetime | None, can_pass: bool, life: _PodLife
) -> None:
    """Readiness checks of one run: failures until the server listens (when the probe can reach it)."""
    delay, period, _ = _probe_schedule(spec.isvc.readiness_probe)
    rng = rng_for(spec, f"readiness:{start.isoformat()}")
    moment = start + timedelta(seconds=delay + rng.uniform(0.1, period))
    while moment < end:
        if can_pass and listening is not None and moment >= listening:
            life.ready_at = moment
            return
        life.readiness_failures.append(moment)
        moment += timedelta(seconds=period)


def _pod_plan(
    plan_inputs: _PlanInputs,
    index: int,
    rng: random.Random,
    name: str,
    template_hash: str,
    schedulable: bool,
    created: datetime | None = None,
) -> PodPlan:
    spec = plan_inputs.spec
    captured = spec.timeline.captured_at
    created = created or spec.timeline.deployed_at + timedelta(seconds=3 + 2 * index)
    uid, ip = make_uid(rng), f"10.244.{rng.randint(1, 30)}.{rng.randint(2, 250)}"
    load = spec.isvc.model.load_seconds * rng.uniform(0.95, 1.05)
    if not schedulable:
        attempts = []
        moment = created + timedelta(milliseconds=rng.randint(20, 400))
        while moment < captured:
            attempts.append(moment)
            moment += timedelta(seconds=SCHEDULER_RETRY_SECONDS + rng.uniform(0, 30))
        return PodPlan(
            name=name,
            uid=uid,
            ip="",
            node=None,
            template_hash=template_hash,
            created=created,
            runs=(),
            load_seconds=load,
            listening=None,
            ready_at=None,
            probe_failures=(),
            liveness_failures=(),
            back_offs=(),
            scheduling_attempts=tuple(attempts),
        )
    if config_error(spec):
        return _never_created(spec, name, uid, ip, template_hash, created, load, index, rng)
    life = _PodLife([], [], [], [])
    start = created + timedelta(seconds=spec.isvc.image_pull_seconds + 2 + rng.uniform(0.2, 0.9))
    oom_after = oom_seconds(spec, load, plan_inputs.memory_limit_gib)
    restarts = [restart for restart in (spec.history.restarts if spec.history else ()) if restart.pod == index]
    killed_busy = busy_kill(spec, index)
    busy_failures: list[datetime] = []
    if killed_busy is not None:
        # The kubelet restarts a container killed for liveness at once (its first restart has no back-off).
        ended = killed_busy + timedelta(seconds=plan_inputs.grace_seconds)
        restarts = sorted([*restarts, Restart(index, ended, 1.0, "Error", 137)], key=lambda restart: restart.at)
        _, period, threshold = _probe_schedule(plan_inputs.liveness)
        busy_failures = [killed_busy - timedelta(seconds=period * n) for n in reversed(range(threshold))]
    first_ready: datetime | None = None
    spells: list[tuple[datetime, datetime]] = []
    lapsed_since: datetime | None = None  # a run that served has ended: not Ready until the next one is
    while start < captured:
        listening = start + timedelta(seconds=load)
        oom = start + timedelta(seconds=oom_after) if oom_after is not None else None
        gpu_after = cuda_oom_seconds(spec, plan_inputs.args, load)
        gpu_oom = start + timedelta(seconds=gpu_after) if gpu_after is not None else None
        kv_after = kv_refusal_seconds(plan_inputs.kv, load)
        kv_refused = start + timedelta(seconds=kv_after) if kv_after is not None else None
        refusal = start_refusal(spec)
        refused = start + timedelta(seconds=refusal[1]) if refusal is not None else None
        if refusal is not None and refused is not None:
            listening = refused + timedelta(seconds=1)  # a refusing engine never listens
        serving_from = min(
            moment for moment in (listening, oom, gpu_oom, kv_refused, refused, captured) if moment is not None
        )
        killed = _liveness_kill(start, serving_from, plan_inputs.liveness, life)
        restart: Restart | None = None
        if refusal is not None and refused is not None and refused < captured and (killed is None or refused < killed):
            run = Run(start, refused, "Error", 1, engine_error=refusal[0])
        elif refusal is not None and refusal[0] in HANGING_REFUSALS and killed is not None:
            ended = killed + timedelta(seconds=plan_inputs.grace_seconds)
            run = Run(start, ended if ended < captured else None, "Error", 137, killed, engine_error=refusal[0])
        elif refusal is not None and refusal[0] in HANGING_REFUSALS:
            run = Run(start, None, engine_error=refusal[0])  # still waiting at capture
        elif oom is not None and oom < captured and (killed is None or oom < killed):
            run = Run(start, oom, "OOMKilled", 137)
        elif gpu_oom is not None and gpu_oom < captured and (killed is None or gpu_oom < killed):
            run = Run(start, gpu_oom, "Error", 1, engine_error=CUDA_OOM_ERROR)
        elif kv_refused is not None and kv_refused < captured and (killed is None or kv_refused < killed):
            run = Run(start, kv_refused, "Error", 1, engine_error=KV_CAPACITY_ERROR)
        elif killed is not None:
            ended = killed + timedelta(seconds=plan_inputs.grace_seconds)
            run = Run(start, ended if ended < captured else None, "Error", 137, killed)
        else:
            restart = _restart_after(restarts, listening, captured)
            run = (
                Run(start, restart.at, restart.reason, restart.exit_code, engine_error=restart.engine_error)
                if restart
                else Run(start, None)
            )
            if (
                restart is not None
                and killed_busy is not None
                and restart.at == killed_busy + timedelta(seconds=plan_inputs.grace_seconds)
            ):
                run = Run(start, restart.at, restart.reason, restart.exit_code, killed_busy)
        served = restart is not None  # a run the history (or a kill under load) ends after it served
        life.runs.append(run)
        end = run.ended or captured
        # A run still terminating at capture (killed, inside its grace period) never gets to listen.
        reachable = (
            listening
            if (run.ended is None or served) and (run.killed_at is None or served) and listening < captured
            else None
        )
        _readiness(spec, start, end, reachable, plan_inputs.probe_can_pass, life)
        if lapsed_since is not None:
            spells.append((lapsed_since, life.ready_at or captured))
            lapsed_since = None
        if run.ended is None:
            life.listening = reachable
            break
        if served:
            # History: the run served until the node went down; the kubelet starts the container again when the
            # node is back, with no back-off (the container did not crash).
            assert restart is not None
            first_ready = first_ready or life.ready_at
            lapsed_since, life.ready_at = run.killed_at or run.ended, None
            start = run.ended + timedelta(seconds=restart.down_seconds)
            continue
        next_start = run.ended + timedelta(seconds=restart_back_off(len(life.runs)) + rng.uniform(0.5, 2.5))
        sync = run.ended + timedelta(seconds=rng.uniform(0.5, 1.5))
        while sync < min(next_start, captured):
            life.back_offs.append(sync)
            sync += timedelta(seconds=KUBELET_SYNC_SECONDS + rng.uniform(0, 3))
        start = next_start
    node = spec.cluster.nodes[index % len(spec.cluster.nodes)]
    ready_at = first_ready or life.ready_at
    blocked = any(fault.type == "agent_readiness_not_served" for fault in spec.faults)
    # readiness_probe_port_unserved: the serving container has no probe of its own under Knative, so the kubelet
    # counts it ready once the engine listens; queue-proxy, which runs the probe, never is.
    unserved = any(fault.type == "readiness_probe_port_unserved" for fault in spec.faults)
    return PodPlan(
        name=name,
        uid=uid,
        ip=ip,
        node=node,
        template_hash=template_hash,
        created=created,
        runs=tuple(life.runs),
        load_seconds=load,
        listening=life.listening,
        ready_at=None if blocked else ready_at,
        engine_ready_at=ready_at if blocked else (life.listening if unserved else None),
        busy_liveness_failures=tuple(busy_failures),
        sidecar_started=life.runs[0].started + timedelta(seconds=0.2) if blocked and life.runs else None,
        probe_failures=tuple(life.readiness_failures),
        liveness_failures=tuple(life.liveness_failures),
        back_offs=tuple(life.back_offs),
        scheduling_attempts=(),
        **_blips(spec, index, spells),
    )


# The Secret the serving container's HF_TOKEN comes from (env valueFrom.secretKeyRef), as the objects declare it.
HF_TOKEN_SECRET = ("hf-token", "token")


def config_error(spec: ScenarioSpec) -> str:
    """The kubelet's message when it cannot build the serving container's config ("" when it can)."""
    fault = next((fault for fault in spec.faults if fault.type == "hf_token_secret_missing"), None)
    if fault is None:
        return ""
    secret, key = HF_TOKEN_SECRET
    if fault.params.get("missing", "secret") == "key":
        return f"couldn't find key {key} in Secret {spec.isvc.namespace}/{secret}"
    return f'secret "{secret}" not found'


def _never_created(
    spec: ScenarioSpec,
    name: str,
    uid: str,
    ip: str,
    template_hash: str,
    created: datetime,
    load: float,
    index: int,
    rng: random.Random,
) -> PodPlan:
    """A scheduled pod whose serving container the kubelet cannot create: it retries on every pod sync."""
    syncs = []
    moment = created + timedelta(seconds=spec.isvc.image_pull_seconds + 2 + rng.uniform(0.2, 0.9))
    while moment < spec.timeline.captured_at:
        syncs.append(moment)
        moment += timedelta(seconds=KUBELET_SYNC_SECONDS + rng.uniform(0, 3))
    return PodPlan(
        name=name,
        uid=uid,
        ip=ip,
        node=spec.cluster.nodes[index % len(spec.cluster.nodes)],
        template_hash=template_hash,
        created=created,
        runs=(),
        load_seconds=load,
        listening=None,
        ready_at=None,
        probe_failures=(),
        liveness_failures=(),
        back_offs=(),
        scheduling_attempts=(),
        config_error_syncs=tuple(syncs),
    )


def start_refusal(spec: ScenarioSpec) -> tuple[str, float] | None:
    """(engine error, seconds to exit) when a fault makes the engine refuse to start before it loads weights."""
    return next((START_REFUSALS[fault.type] for fault in spec.faults if fault.type in START_REFUSALS), None)


def _restart_after(restarts: list[Restart], listening: datetime, captured: datetime) -> Restart | None:
    """The history's next restart of a run that listens from ``listening`` (None: it runs on)."""
    return next((restart for restart in restarts if listening < restart.at < captured), None)


def _blips(spec: ScenarioSpec, index: int, spells: list[tuple[datetime, datetime]]) -> dict[str, Any]:
    """The history's readiness blips of pod ``index``: the readiness checks that fail from the blip's start, one
    period apart, until it ends; the pod is not Ready from the ``failureThreshold``-th failure to the next success.
    With ``spells`` (the restarts' gaps), the ``unready`` and ``blip_failures`` fields of its PodPlan."""
    blips: list[ReadinessBlip] = [
        blip for blip in (spec.history.readiness_blips if spec.history else ()) if blip.pod == index
    ]
    if not blips and not spells:
        return {}
    _, period, threshold = _probe_schedule(spec.isvc.readiness_probe)
    failures: list[datetime] = []
    unready = list(spells)
    for blip in blips:
        ticks = math.ceil(blip.seconds / period)
        failed = [blip.at + timedelta(seconds=period * k) for k in range(ticks)]
        failures += failed
        unready.append((failed[threshold - 1], blip.at + timedelta(seconds=period * ticks)))
    return {"unready": tuple(sorted(unready)), "blip_failures": tuple(failures)}


# ---- Knative's scale-to-zero (knative.dev docs/serving/autoscaling/scale-to-zero) ----------------------

QUEUE_PROXY_DRAIN_SECONDS = 30  # queue-proxy keeps draining this long after the pod is told to stop
ACTIVATION_SECONDS = 1.3  # activator -> autoscaler poke -> Deployment scaled -> ReplicaSet creates the pod
REVISION_TIMEOUT_SECONDS = 300  # Knative's default revision timeout: the activator gives up after it


def user_hpa_metric(spec: ScenarioSpec) -> tuple[str, str] | None:
    """(metric, averageValue) of the owner's own Pods-metric HPA, when the spec has one."""
    for fault in spec.faults:
        if fault.type == "custom_metrics_api_missing":
            params = fault.params
            return str(params.get("metric", "vllm:num_requests_waiting")), str(params.get("average_value", "10"))
        if fault.type == "hpa_target_not_serving":
            params = fault.params
            return str(params.get("metric", "vllm:num_requests_running")), str(params.get("average_value", "48"))
        if fault.type in ("hpa_at_max", "hpa_target_above_capacity"):
            params = fault.params
            return str(params.get("metric", "vllm:num_requests_running")), f"{float(params['average_value']):g}"
    owner = spec.isvc.owner_hpa
    if owner is not None:
        return str(owner["metric"]), f"{float(owner['average_value']):g}"
    return None


def scales_out(spec: ScenarioSpec) -> bool:
    """The owner's HPA works and follows the demand: it scales out to its maximum (``hpa_at_max``), or its target
    sits at the pod's ceiling and the replay never finds a reason to scale (``hpa_target_above_capacity``)."""
    return any(fault.type in ("hpa_at_max", "hpa_target_above_capacity") for fault in spec.faults)


def long_contexts(spec: ScenarioSpec) -> tuple[int, datetime] | None:
    """(prompt tokens, since when) of the long prompts the clients switched to, when the spec has them."""
    for fault in spec.faults:
        if fault.type == "long_contexts":
            since: datetime = fault.params["since"]
            return int(fault.params["prompt_tokens"]), since
    return None


def prompt_tokens_at(spec: ScenarioSpec, moment: datetime) -> int:
    """The mean prompt length clients send at ``moment``."""
    shift = long_contexts(spec)
    return shift[0] if shift is not None and moment >= shift[1] else spec.traffic.prompt_tokens


def custom_metrics_api_missing(spec: ScenarioSpec) -> bool:
    """No adapter registers custom.metrics.k8s.io (else prometheus-adapter serves the owner's Pods metric)."""
    return any(fault.type == "custom_metrics_api_missing" for fault in spec.faults)


def stale_hpa_target(spec: ScenarioSpec) -> str | None:
    """The Deployment the owner's HPA still names, a copy of the predictor scaled to zero (None: no such fault)."""
    for fault in spec.faults:
        if fault.type == "hpa_target_not_serving":
            return str(fault.params["stale_deployment"])
    return None


def nginx_timeout_seconds(spec: ScenarioSpec) -> int | None:
    """ingress-nginx's proxy-read-timeout in front of a RawDeployment (None: no nginx on the path).

    The owner annotates the InferenceService with a timeout sized for long generations; ``ingress_timeout_default``
    has lost that annotation, so nginx's own default applies.
    """
    if spec.cluster.ingress != "nginx" or spec.isvc.deployment_mode != "RawDeployment":
        return None
    if any(fault.type == "ingress_timeout_default" for fault in spec.faults):
        return NGINX_DEFAULT_TIMEOUT_SECONDS
    return NGINX_OWNER_TIMEOUT_SECONDS


def min_scale(spec: ScenarioSpec) -> int:
    """The minReplicas in effect: ``scale_to_zero`` lowers the owner's baseline to 0."""
    return 0 if any(fault.type == "scale_to_zero" for fault in spec.faults) else spec.isvc.min_replicas


def _idle_since(traffic: Traffic, start: datetime, end: datetime) -> datetime | None:
    """When the KPA decides to scale to zero: no request for the stable window, then the grace period."""
    quiet = IDLE_BEFORE_SCALE_TO_ZERO_SECONDS
    last_busy = start
    moment = start
    while moment < end:
        if traffic.rate_at(moment) > 0:
            last_busy = moment
        elif (moment - last_busy).total_seconds() >= quiet:
            return moment
        moment += timedelta(seconds=1)
    return None


def _next_demand(traffic: Traffic, start: datetime, end: datetime) -> datetime | None:
    moment = start
    while moment < end:
        if traffic.rate_at(moment) > 0:
            return moment
        moment += timedelta(seconds=1)
    return None


def _scale_to_zero_lives(
    inputs: _PlanInputs, rng: random.Random, replica_set: str, template_hash: str, first: PodPlan
) -> tuple[PodPlan, ...]:
    """Knative's initial pod, scaled away once idle, then one pod per activation from zero."""
    spec = inputs.spec
    captured = spec.timeline.captured_at
    lives: list[PodPlan] = []
    current = first
    while True:
        idle = _idle_since(spec.traffic, current.ready_at, captured) if current.ready_at else None
        deleted = idle + timedelta(seconds=QUEUE_PROXY_DRAIN_SECONDS + rng.uniform(0.5, 2.0)) if idle else None
        if idle is None or deleted is None or deleted >= captured:
            lives.append(current)
            return tuple(lives)
        lives.append(replace(current, stopping=idle, deleted=deleted))
        demand = _next_demand(spec.traffic, deleted, captured)
        if demand is None:
            return tuple(lives)
        created = demand + timedelta(seconds=ACTIVATION_SECONDS + rng.uniform(0, 0.4))
        name = f"{replica_set}-{name_suffix(rng, 5)}"
        current = _pod_plan(inputs, len(lives), rng, name, template_hash, True, created)


# ---- the owner's HPA scaling out (kubernetes pkg/controller/podautoscaler) ---------------------------------

HPA_SYNC_SECONDS = 15
HPA_TOLERANCE = 0.1
HPA_FIRST_SYNC_SECONDS = 20  # the HPA is created a few seconds after the rollout and syncs 15 s later
# A new pod's metric reaches the HPA only after Prometheus scraped it and prometheus-adapter relisted its series.
METRIC_LAG_SECONDS = 30
SCALE_UP_PODS = 4  # the default scale-up policy: 100 % or 4 pods per period, whichever adds more


def running_per_pod(spec: ScenarioSpec, rate: float, ceiling: int) -> float:
    """Requests one pod holds in flight at ``rate`` requests per second (Little's law with the batch-dependent
    decode step), capped at the ceiling the engine admits."""
    traffic = spec.traffic

    def service(running: float) -> float:
        per_token = IDLE_SECONDS_PER_TOKEN + ITL_PER_RUNNING_SECONDS * running
        return traffic.prompt_tokens / PREFILL_TOKENS_PER_SECOND + traffic.output_tokens * per_token

    running = rate * service(0)
    for _ in range(30):
        running = min(float(ceiling), rate * service(running))
    return running


def _hpa_scale_out(
    inputs: _PlanInputs, replica_set: str, template_hash: str, initial: tuple[PodPlan, ...]
) -> tuple[tuple[PodPlan, ...], tuple[tuple[datetime, int], ...]]:
    """Replay the HPA on a Pods AverageValue metric of running requests, sync by sync: pods whose metric has
    not reached the adapter yet count as 0 on a scale-up (so a loading pod holds the count back), the tolerance
    is 10 %, and each decision creates its pods, which pay the whole cold start before they serve."""
    spec = inputs.spec
    found = user_hpa_metric(spec)
    assert found is not None
    target, maximum = float(found[1]), spec.isvc.max_replicas
    rng = rng_for(spec, "scale-out")
    pods, decisions = list(initial), []
    moment = spec.timeline.deployed_at + timedelta(seconds=HPA_FIRST_SYNC_SECONDS)
    while moment < spec.timeline.captured_at and len(pods) < maximum:
        lag = timedelta(seconds=METRIC_LAG_SECONDS)
        reporting = [pod for pod in pods if pod.listening is not None and moment >= pod.listening + lag]
        if reporting:
            share = spec.traffic.rate_at(moment) / len(reporting)
            total = running_per_pod(spec, share, inputs.kv.max_num_seqs) * len(reporting)
            ratio = total / (target * len(pods))
            if ratio > 1 + HPA_TOLERANCE:
                limit = max(2 * len(pods), len(pods) + SCALE_UP_PODS)
                desired = min(maximum, limit, math.ceil(ratio * len(pods)))
                decisions.append((moment, desired))
                while len(pods) < desired:
                    created = moment + timedelta(seconds=rng.uniform(0.6, 1.2))
                    name = f"{replica_set}-{name_suffix(rng, 5)}"
                    pods.append(_pod_plan(inputs, len(pods), rng, name, template_hash, True, created))
        moment += timedelta(seconds=HPA_SYNC_SECONDS)
    return tuple(pods), tuple(decisions)


# Router faults of an LLMInferenceService that keep every request from a vLLM pod, whatever the failure mode.
ROUTER_BREAKS = ("pool_selector_misses", "gateway_not_programmed", "route_without_backends")


def picker_blocks(spec: ScenarioSpec) -> bool:
    """The endpoint picker is down and the pool fails closed: the Gateway rejects every request. Under FailOpen
    the Gateway forwards to a pod the picker did not choose, so requests keep reaching the pods."""
    down = any(fault.type == "picker_not_ready" for fault in spec.faults)
    return down and spec.router is not None and spec.router.failure_mode == "FailClose"


def plan(spec: ScenarioSpec) -> Plan:
    args = apply_faults(spec)
    isvc = spec.isvc
    port = listen_port(isvc.server, args)
    checked_port = probe_port(spec)
    rng = rng_for(spec, "names")
    uids = {kind: make_uid(rng) for kind in ("isvc", "ksvc", "configuration", "revision", "deployment", "replicaset")}
    template_hash = name_suffix(rng, 10)
    serverless = isvc.deployment_mode == "Serverless"
    if serverless:
        ksvc = f"{isvc.name}-predictor"
        revision = f"{ksvc}-00001"
        deployment = f"{revision}-deployment"
    elif isvc.is_llmisvc:
        ksvc = revision = ""
        deployment = f"{isvc.name}-kserve"  # kmeta.ChildName(name, "-kserve"): workload_single_node.go
    else:
        ksvc = revision = ""
        deployment = f"{isvc.name}-predictor"
    replica_set = f"{deployment}-{template_hash}"
    memory_limit = memory_limit_gib(effective_resources(spec))
    inputs = _PlanInputs(
        spec,
        liveness_probe(spec),
        memory_limit,
        TERMINATION_GRACE_SERVERLESS if serverless else TERMINATION_GRACE_RAW,
        probe_can_pass=port == checked_port,
        args=args,
        kv=kv_cache(spec, args),
    )
    unschedulable = next((fault for fault in spec.faults if fault.type == "gpu_unschedulable"), None)
    pending = int(unschedulable.params.get("pending_pods", isvc.min_replicas)) if unschedulable else 0
    pods = tuple(
        _pod_plan(
            inputs,
            index,
            rng,
            f"{replica_set}-{name_suffix(rng, 5)}",
            template_hash,
            schedulable=index < isvc.min_replicas - pending,
        )
        for index in range(isvc.min_replicas)
    )
    if min_scale(spec) == 0:
        pods = _scale_to_zero_lives(inputs, rng, replica_set, template_hash, pods[0])
    scale_ups: tuple[tuple[datetime, int], ...] = ()
    if scales_out(spec):
        pods, scale_ups = _hpa_scale_out(inputs, replica_set, template_hash, pods)
    routing_broken = any(fault.type in ("routing_layer_mismatch", *ROUTER_BREAKS) for fault in spec.faults)
    routing_broken = routing_broken or picker_blocks(spec)
    return Plan(
        spec=spec,
        args=args,
        listen_port=port,
        probe_port=checked_port,
        kv=inputs.kv,
        ksvc=ksvc,
        revision=revision,
        deployment=deployment,
        replica_set=replica_set,
        template_hash=template_hash,
        uids=uids,
        pods=pods,
        routed=not routing_broken,
        expects_virtual_service=serverless and (spec.cluster.ingress != "kourier" or routing_broken),
        memory_limit_gib=memory_limit,
        scale_ups=scale_ups,
        container=LLMISVC_CONTAINER if isvc.is_llmisvc else SERVING_CONTAINER,
    )
