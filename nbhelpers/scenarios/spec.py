"""The scenario spec: a small, declarative description of one incident (``scenarios/<name>.yaml``).

A spec describes a healthy baseline (the InferenceService as its owner meant
it, the cluster, the traffic) plus a list of typed faults that break it. The
generator applies the faults to the baseline and derives everything else
(pod readiness, events, logs, metrics) from the resulting state, so the
evidence can never contradict itself.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from itertools import pairwise
from pathlib import Path
from typing import Any

import yaml

from nbhelpers.errors import RunbookError
from nbhelpers.findings.catalog import CATALOG
from nbhelpers.util.quantities import parse_quantity
from nbhelpers.util.times import Window, parse_time

SYMPTOMS = ("503", "504", "OOM", "HPA not scaling", "none")
DEPLOYMENT_MODES = ("Serverless", "RawDeployment")
SERVER_KINDS = ("vllm", "huggingfaceserver")
AUTOSCALER_CLASSES = ("kpa", "hpa", "external", "none")
DELIVERIES = ("non-streamed", "streamed")
INGRESSES = ("istio", "nginx", "kourier")
# The kind of service a scenario triages: KServe's InferenceService (the predictor path) or its LLMInferenceService
# (the llm-d path: Gateway -> HTTPRoute -> InferencePool -> endpoint picker -> vLLM pods; rendered by
# nbhelpers/scenarios/llmisvc.py). An LLMInferenceService spec may carry an ``llmisvc`` section (the router).
TARGET_KINDS = ("InferenceService", "LLMInferenceService")
FAILURE_MODES = ("FailOpen", "FailClose")
# Faults and their parameters (each must break something in its spec, else the spec is refused):
# - port_mismatch (listen_port): the server is told to listen elsewhere than the container port.
# - routing_layer_mismatch: KServe keeps asking for an Istio VirtualService on a Kourier cluster.
# - liveness_kills_during_load (liveness_probe): a liveness probe whose budget is shorter than the load.
# - gpu_unschedulable (pending_pods, default all): that many replicas find no node with free GPUs.
# - host_oomkilled (memory_limit, set_in runtime|isvc): a memory limit below what loading the weights takes.
# - scale_to_zero: minReplicas lowered to 0 on a Serverless (KPA) service whose traffic pauses and resumes.
# - cpu_autoscaling (cpu_target, default 80): KServe's HPA scales the GPU server on CPU utilization.
# - custom_metrics_api_missing (metric, average_value): the owner's HPA scales on a Pods metric, but no
#   adapter registers custom.metrics.k8s.io (class external: KServe leaves autoscaling to that HPA).
# - gpu_memory_overcommitted (gpu_memory_utilization): the owner raised vLLM's --gpu-memory-utilization so far that
#   the memory vLLM does not budget for (CUDA context, CUDA graphs) no longer fits: the engine dies with
#   PyTorch's CUDA out-of-memory error while it captures its graphs, and the container crash-loops.
# - hpa_target_not_serving (stale_deployment, metric, average_value): the owner's own HPA (class external, on a
#   Pods metric served by prometheus-adapter) still names a copy of the predictor Deployment left from a canary
#   test and scaled to zero since; the HPA controller disables scaling for a target at zero replicas, and the
#   Deployment behind the Service keeps its single replica whatever the load.
# - max_model_len_exceeds_kv_cache (max_model_len): the owner raised --max-model-len beyond what the KV cache left
#   after the weights can hold for a single request; vLLM V1 checks this after profiling memory and refuses to
#   start (a ValueError, exit code 1), so the container crash-loops.
# - ingress_timeout_default: the InferenceService lost its ingress-nginx proxy timeout annotations, so the
#   Ingress KServe generates from it keeps nginx's 60 s default in front of long, non-streamed generations.
# - long_contexts (prompt_tokens, since): from ``since`` on, clients send prompts of ``prompt_tokens`` (a RAG
#   feature stuffing retrieved documents into every prompt) instead of the traffic's usual size; at that size the
#   KV cache holds fewer requests than --max-num-seqs admits, so the cache, not the flag, caps the batch: usage sits
#   near 100 %, vLLM preempts running requests, and the rest wait below the ceiling.
# - hpa_at_max (metric, average_value): the owner's own HPA (class external, on a Pods metric of running requests
#   served by a healthy prometheus-adapter) works as designed and scales the predictor out during a spike, one cold
#   start at a time, until maxReplicas; the spike needs more pods than that, so the queue grows on every pod.
# - hpa_target_above_capacity (metric, average_value): the owner's own HPA (class external, healthy
#   prometheus-adapter) scales on running requests with a per-pod target at or above --max-num-seqs. A pod never
#   runs more than the flag admits, so the average never passes the target (plus the HPA's 10 % tolerance): the
#   HPA stays at minReplicas while the demand outgrows one pod and the queue grows.
# - batched_tokens_below_max_model_len (max_num_batched_tokens): the owner set --max-num-batched-tokens below
#   --max-model-len with chunked prefill off; vLLM's scheduler config validation refuses it at start-up (a
#   ValidationError, exit code 1) before any weight loads, and the container crash-loops (verl-project/verl#7626).
# - vllm_port_service_link (service_host, service_port): a Service named ``vllm`` in the namespace makes the kubelet
#   inject ``VLLM_PORT=tcp://<service_host>:<service_port>`` into every pod that keeps service links on; vLLM reads it
#   as its own internal port when the engine picks one and exits with its URI ValueError (vllm-project/vllm#34199).
# - bf16_on_pre_ampere_gpu: the model's weights are bfloat16 and the engine keeps that dtype on a GPU below compute
#   capability 8.0 (T4, V100; the nodes' product says which); the GPU worker refuses it while it initializes the
#   device, before any weight loads (ValueError, exit code 1; vllm-project/vllm#1157).
# - hf_cache_not_writable: the container runs as an arbitrary non-root UID (OpenShift's restricted SCC) with no
#   HF_HOME and HOME=/, so the hub download's cache directory /.cache cannot be created: transformers raises a
#   PermissionError wrapped in an OSError before the engine starts (huggingface/inference-benchmarker#30). No
#   pattern of the tool names this one: it is the scenario of the honest fallback.
# - tensor_parallel_above_gpus (tensor_parallel_size): --tensor-parallel-size above the GPUs the pod requests. vLLM
#   falls back to its Ray executor, warns that the size exceeds the available GPUs, and waits for a placement group
#   that can never form (vllm-project/vllm#25263, the warning since vllm-project/vllm#25775); it gives up with a
#   ValueError after 1800 s, unless a liveness probe kills the silent server first (exit 137, then back-off).
# - gated_model_access_not_granted: the model is gated on the hub and the token the container gets (HF_TOKEN from
#   the Secret hf-token) is valid, but its account has not been granted access (licence not accepted, or the request
#   still pending): the hub answers 403 for config.json and the API server exits before the engine starts
#   (https://github.com/rh-ai-quickstart/ai-virtual-agent/issues/200).
# - hf_token_secret_missing (missing: secret|key): the serving container's HF_TOKEN comes from a secretKeyRef
#   (Secret hf-token, key token) and the Secret (or that key in it) does not exist in the namespace; the kubelet cannot
#   build the container's environment, so the container is never created: waiting CreateContainerConfigError, retried
#   on every pod sync (https://github.com/gyliu513/langX101/pull/390: 'secret "llm-d-hf-token" not found').
# - agent_readiness_not_served (logger_url): request logging injects the KServe agent (port 9081) beside a
#   RawDeployment vLLM whose owner wrote an httpGet readinessProbe on a path of its own. KServe hands that probe to
#   the agent, which then serves only that path, while its own readinessProbe stays on '/' (KServe before PR
#   #5345): the kubelet gets 404, the agent never turns ready and the pod stays 1/2 Running although vLLM serves
#   (kserve/kserve#5341).
# - liveness_timeouts_under_load (liveness_probe, at, pod default 0): a liveness probe with the kubelet's default
#   timeoutSeconds of 1 on an engine that served; at ``at``, under the traffic's peak, /health answers too slowly and
#   the probe times out failureThreshold times in a row: the kubelet kills the serving container (exit 137) and it
#   loads the model again (llm-d/llm-d-benchmark PR #1734, scaleapi/llm-engine PR #255).
# - readiness_probe_port_unserved (probe_port): on Serverless, the owner's readiness probe names a port the server does
#   not listen on (kept from a deployment that ran vLLM on another port). Knative hands the probe to queue-proxy
#   (SERVING_READINESS_PROBE), whose probe of 127.0.0.1:<probe_port> is refused for ever: queue-proxy never turns ready
#   and the pod stays 1/2 Running while vLLM serves on the container port (knative/serving#14021).
FAULT_TYPES = (
    "port_mismatch",
    "routing_layer_mismatch",
    "liveness_kills_during_load",
    "gpu_unschedulable",
    "host_oomkilled",
    "scale_to_zero",
    "cpu_autoscaling",
    "custom_metrics_api_missing",
    "ingress_timeout_default",
    "gpu_memory_overcommitted",
    "hpa_target_not_serving",
    "max_model_len_exceeds_kv_cache",
    "long_contexts",
    "hpa_at_max",
    "hpa_target_above_capacity",
    "batched_tokens_below_max_model_len",
    "vllm_port_service_link",
    "bf16_on_pre_ampere_gpu",
    "hf_cache_not_writable",
    "tensor_parallel_above_gpus",
    "hf_token_secret_missing",
    "gated_model_access_not_granted",
    "agent_readiness_not_served",
    "liveness_timeouts_under_load",
    "readiness_probe_port_unserved",
)
# Faults that keep the serving container from ever running (generated by nbhelpers/scenarios/blocked.py):
# - init_container_fails (storage_uri, log, exit_code, reason, run_seconds, memory_limit): KServe's storage-initializer
#   fails the download every time (a refused token, a missing bucket, a full disk, OOMKilled at its limit); the kubelet
#   restarts it with back-off (Init:CrashLoopBackOff) and the serving container waits in PodInitializing. ``log`` is
#   what the initializer prints in each run (the report's words), ``reason`` Error or OOMKilled.
# - image_pull_fails (error): the serving container's image (isvc.image) cannot be pulled (RawDeployment): ErrImagePull,
#   then ImagePullBackOff, with the runtime's ``error``.
# - image_digest_unresolved (error): Knative's controller cannot resolve the image's tag (isvc.image) to a digest
#   (Serverless): the Revision is ContainerMissing and no Deployment, PodAutoscaler or pod is created.
# - pod_creation_rejected (message): the API server refuses the predictor's pods (ResourceQuota, LimitRange,
#   admission): no pod exists; the ReplicaSet's FailedCreate events and the Deployment's ReplicaFailure condition
#   carry ``message`` (what follows 'pods "<name>" is forbidden: ').
# Faults of an LLMInferenceService's router (isvc.kind LLMInferenceService only; nbhelpers/scenarios/llmisvc.py):
# - picker_not_ready (log, restarts): the endpoint picker (EPP) runs but never turns ready; ``log`` is what it prints
#   (the report's words, e.g. its Role forbidding a list: istio/istio.io#17528), ``restarts`` how often it has crashed
#   (0: it keeps running, not ready). Under FailClose the Gateway rejects every request.
# - pool_selector_misses (selector): the InferencePool selects on ``selector`` (labels the owner set on the pool),
#   which no vLLM pod carries: the pool has no endpoint although every pod is ready.
# - gateway_not_programmed (reason, message): the Gateway the route hangs on is Accepted but not Programmed (no address
#   allocated, an invalid listener); with ``reason: ""`` no controller owns its GatewayClass and it has no status.
# - route_without_backends: KServe generated its HTTPRoute as a stub, one PathPrefix / rule with no backendRefs, and
#   never filled it in; the Gateway accepts the route, nothing attaches the pool, and the service waits for the Gateway
#   for ever (kserve/kserve#5385).
# - pool_readiness_stuck: the service routes through a Gateway an external controller attaches the pool to (no managed
#   route: ``llmisvc.route: false``); the pool is accepted and requests are served, but KServe keeps
#   InferencePoolReady=False (WaitingForGateway) and so Ready=False (kserve/kserve#5986).
# - group_worker_unschedulable: a multi-node service (``llmisvc.parallelism``): the last worker of every group finds no
#   node with the GPUs it requests (FailedScheduling, Insufficient nvidia.com/gpu); its leader's vLLM waits for the
#   missing rank and never serves (nbhelpers/scenarios/multinode.py; dsx-ai-factory/workload-map#228).
LLMISVC_FAULT_TYPES = (
    "picker_not_ready",
    "pool_selector_misses",
    "gateway_not_programmed",
    "route_without_backends",
    "pool_readiness_stuck",
    "group_worker_unschedulable",
)
BLOCKING_FAULT_TYPES = ("init_container_fails", "image_pull_fails", "image_digest_unresolved", "pod_creation_rejected")
INIT_FAILURE_REASONS = ("Error", "OOMKilled")
# Faults that give the owner their own HPA on a Pods metric: one InferenceService has at most one of them.
OWNER_HPA_FAULTS = ("custom_metrics_api_missing", "hpa_target_not_serving", "hpa_at_max", "hpa_target_above_capacity")
WEIGHT_FORMATS = ("safetensors", "pt")
# Where the owner declared something: the ServingRuntime's container or the InferenceService.
DECLARED_IN = ("runtime", "isvc")
# The port each server listens on when no flag says otherwise (docs/upstream-facts.md).
SERVER_PORT_FLAGS = {"vllm": ("--port", 8000), "huggingfaceserver": ("--http_port", 8080)}
# Host memory a vLLM process holds before it reads any weight: Python, torch, the CUDA context, the tokenizer.
RUNTIME_HOST_GIB = 5.5
# Knative's KPA defaults: an idle spell of the stable window plus the scale-to-zero grace period scales to zero.
KPA_STABLE_WINDOW_SECONDS = 60
SCALE_TO_ZERO_GRACE_SECONDS = 30
IDLE_BEFORE_SCALE_TO_ZERO_SECONDS = KPA_STABLE_WINDOW_SECONDS + SCALE_TO_ZERO_GRACE_SECONDS
# ingress-nginx's proxy-read-timeout when no annotation sets one; an nginx scenario's owner annotates the
# InferenceService (KServe copies its annotations onto the Ingress) with a timeout sized for long generations.
NGINX_DEFAULT_TIMEOUT_SECONDS = 60
NGINX_OWNER_TIMEOUT_SECONDS = 600
# vLLM's prefill speed and how much each running request slows a decode step (the traffic simulator's batch model).
PREFILL_TOKENS_PER_SECOND = 12_000.0
ITL_PER_RUNNING_SECONDS = 0.00012
# vLLM's decode step with an empty batch, and how far the longest generations (p99 of a log-normal output
# length with sigma 0.5) run past the mean: the traffic simulator draws output lengths that way.
IDLE_SECONDS_PER_TOKEN = 0.011
LONGEST_OUTPUT_FACTOR = math.exp(2.326 * 0.5)
# GPU memory vLLM does not count in --gpu-memory-utilization's budget: the CUDA context, NCCL and the CUDA graphs
# it captures after sizing the KV cache. The rest of the card must hold it, or graph capture runs out of memory.
OUTSIDE_BUDGET_GIB = 1.2
# vLLM's KV cache block size in tokens (the default of every CUDA attention backend it uses here).
BLOCK_SIZE = 16
# Hugging Face's default shard size for safetensors exports (max_shard_size="5GB").
SAFETENSORS_SHARD_GIB = 4.66
# History: what a healthy service lived through before (or during) the window, with no fault. A spec with a
# ``history`` section may have been deployed before the window (its pods then show their past only in their
# status: restartCount, lastState, startedAt, the Ready condition's lastTransitionTime), and has no faults.
# - restarts (pod, at, down_seconds, reason, exit_code): the serving container of pod ``pod`` stopped at ``at`` after
#   it had served (a node reboot: the runtime reports reason Unknown, exit code 255), and the kubelet started it again
#   ``down_seconds`` later; it loads the model again and turns Ready. Only the serving container restarts: under
#   Serverless, queue-proxy runs on and fails its readiness probe until the engine answers again.
# - readiness_blips (pod, at, seconds): from ``at`` on, pod ``pod``'s readiness probe fails (the engine answers the
#   health check too slowly under load) for ``seconds``; at the probe's failureThreshold the pod turns not Ready, and
#   Ready again at the next success. Its containers keep running.
#   With ``engine_error: runtime_cuda_oom`` the engine itself died while serving: PyTorch's CUDA out-of-memory error
#   in a forward pass (vllm-project/vllm#13067), reason Error, exit code 1; its log ends with the traceback. Such a
#   restart is an incident, not a healthy past: the spec may then name expected root causes. With
#   ``engine_error: runtime_illegal_memory_access`` it died of "CUDA error: an illegal memory access was encountered"
#   in a forward pass after hours of serving (vllm-project/vllm#5687; the V1 log as in vllm-project/vllm#19483).
RESTART_REASONS = ("Unknown", "Error", "Completed")
RESTART_ENGINE_ERRORS = ("runtime_cuda_oom", "runtime_illegal_memory_access")


def flag_value(args: tuple[str, ...], flag: str) -> str | None:
    """The value of ``--flag VALUE`` or ``--flag=VALUE`` (the last one wins, as argparse does)."""
    found = None
    for index, arg in enumerate(args):
        if arg == flag and index + 1 < len(args):
            found = args[index + 1]
        elif arg.startswith(flag + "="):
            found = arg.split("=", 1)[1]
    return found


def kv_cache_blocks(
    model: Model, gpu_memory_gib: float, utilization: float, tensor_parallel: int
) -> tuple[int, float, int]:
    """vLLM's start-up arithmetic (docs/upstream-facts.md): (KV bytes per token, GiB left for the KV cache after the weights and
    the activation peak, KV blocks that fit in it)."""
    bytes_per_token = 2 * model.layers * max(1, model.kv_heads // tensor_parallel) * model.head_dim * model.dtype_bytes
    available_gib = gpu_memory_gib * utilization - model.weights_gib - model.activation_gib
    blocks = math.floor(available_gib * 2**30 / (bytes_per_token * BLOCK_SIZE))
    return bytes_per_token, available_gib, blocks


class ScenarioError(RunbookError):
    """A scenario spec that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class Story:
    reported: str
    first_seen: str
    cause: str
    fix: str
    lesson: str


@dataclass(frozen=True)
class Timeline:
    captured_at: datetime
    window: Window
    deployed_at: datetime
    incident: Window | None


@dataclass(frozen=True)
class GpuNode:
    name: str
    product: str
    memory_gib: float
    gpus: int
    zone: str


@dataclass(frozen=True)
class Cluster:
    kubernetes: str
    knative: str
    ingress: str  # istio | nginx | kourier (Knative's own gateway, no Istio)
    nodes: tuple[GpuNode, ...]
    missing_crd_groups: tuple[str, ...]


@dataclass(frozen=True)
class Model:
    """The served model: what vLLM logs and what sizes its KV cache."""

    id: str
    served_name: str
    layers: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int
    weights_gib: float
    activation_gib: float
    load_seconds: float
    weights_format: str  # safetensors | pt (PyTorch .bin pickles, read whole into host memory)
    shards: int

    @property
    def host_load_gib(self) -> float:
        """Host memory the loader peaks at: the runtime itself plus the checkpoint shards it holds at once.

        safetensors shards are memory-mapped and copied tensor by tensor (one shard's pages at a time);
        ``torch.load`` reads a whole .bin shard into memory, and the previous one is still referenced
        when the next is read.
        """
        shard_gib = self.weights_gib / self.shards
        held = 1 if self.weights_format == "safetensors" else min(2, self.shards)
        return RUNTIME_HOST_GIB + shard_gib * held


@dataclass(frozen=True)
class Isvc:
    name: str
    namespace: str
    deployment_mode: str
    autoscaler_class: str
    min_replicas: int
    max_replicas: int
    scale_target: int | None
    server: str
    runtime_name: str
    image: str
    vllm_version: str
    model: Model
    args: tuple[str, ...]
    container_port: int
    readiness_probe: Mapping[str, Any] | None
    liveness_probe: Mapping[str, Any] | None
    probes_in: str  # runtime | isvc: where the owner declared the probes (the pod has them either way)
    resources: Mapping[str, Any]
    runtime_resources: Mapping[str, Any]  # the ServingRuntime container's defaults, merged under ``resources``
    image_pull_seconds: float
    # The owner's own HPA on a Pods metric of the engine (class external), working as designed: {metric,
    # average_value}. None: no such HPA (faults may still add one).
    owner_hpa: Mapping[str, Any] | None = None
    # KServe's ingress creation turned off (inferenceservice-config ingress.disableIngressCreation) and the owner's
    # own Ingress in front of the predictor Service: {name, host}. None: KServe creates its Ingress.
    user_ingress: Mapping[str, str] | None = None
    kind: str = "InferenceService"  # one of TARGET_KINDS

    @property
    def is_llmisvc(self) -> bool:
        return self.kind == "LLMInferenceService"


@dataclass(frozen=True)
class Router:
    """An LLMInferenceService's router (``spec.router``) and the Gateway it hangs on (the ``llmisvc`` section).

    ``scheduler``: the service routes through an InferencePool and its endpoint picker (KServe's scheduler preset);
    ``failure_mode``: the pool's endpointPickerRef.failureMode (the preset writes FailOpen); ``prefix_cache``: the
    picker scores pods on the prompt prefixes they hold (vLLM's prefix caching on); ``prefill_replicas``: a
    ``<name>-kserve-prefill`` Deployment beside the main one, which then takes the decode role behind KServe's P/D
    routing sidecar (nbhelpers/scenarios/disagg.py); ``prefill_args``: the prefill pods' vLLM args
    (``spec.prefill.template``; empty: the main workload's); ``data`` and
    ``data_local``: ``spec.parallelism`` of a multi-node service (data-parallel ranks in all and per pod, KServe's
    worker-data-parallel preset): each replica is a LeaderWorkerSet group of ``data / data_local`` pods (0: one pod,
    a Deployment).
    """

    scheduler: bool = True
    route: bool = True  # KServe manages the HTTPRoute (spec.router.route); False: another controller routes
    failure_mode: str = "FailOpen"
    prefix_cache: bool = False
    gateway_name: str = "kserve-ingress-gateway"
    gateway_namespace: str = "kserve"
    gateway_class: str = "istio"
    gateway_controller: str = "istio.io/gateway-controller"
    prefill_replicas: int = 0
    picker_image: str = "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0"
    data: int = 0
    data_local: int = 0
    prefill_args: tuple[str, ...] = ()

    @property
    def group_size(self) -> int:
        """Pods per LeaderWorkerSet group (ParallelismSpec.GetSize for data parallelism); 1: single node."""
        return self.data // self.data_local if self.data_local else 1


@dataclass(frozen=True)
class Restart:
    """One restart of a pod's serving container after it had served (see ``history`` above)."""

    pod: int
    at: datetime
    down_seconds: float
    reason: str
    exit_code: int
    engine_error: str = ""  # one of RESTART_ENGINE_ERRORS: the engine died while serving, its log says how


@dataclass(frozen=True)
class ReadinessBlip:
    """A spell of failing readiness checks on a pod that serves (see ``history`` above)."""

    pod: int
    at: datetime
    seconds: float


@dataclass(frozen=True)
class History:
    restarts: tuple[Restart, ...]
    readiness_blips: tuple[ReadinessBlip, ...]


@dataclass(frozen=True)
class Fault:
    type: str
    params: Mapping[str, Any]


@dataclass(frozen=True)
class Traffic:
    """Client demand: requests per second, linear between points (a repeated time makes a step)."""

    points: tuple[tuple[datetime, float], ...]
    prompt_tokens: int
    output_tokens: int
    # How the clients read the answers: a stream keeps an idle timeout (nginx proxy-read) from firing once its
    # first token is out; a request timeout (Knative's revision timeout) cuts both.
    delivery: str = "non-streamed"

    @property
    def streamed(self) -> bool:
        return self.delivery == "streamed"

    def rate_at(self, moment: datetime) -> float:
        points = self.points
        if moment <= points[0][0]:
            return points[0][1]
        for (t0, r0), (t1, r1) in pairwise(points):
            if t0 <= moment <= t1:
                if t1 == t0:
                    return r1
                share = (moment - t0).total_seconds() / (t1 - t0).total_seconds()
                return r0 + (r1 - r0) * share
        return points[-1][1]


@dataclass(frozen=True)
class ScenarioSpec:
    name: str
    title: str
    symptom: str
    difficulty: str
    seed: int
    story: Story
    timeline: Timeline
    cluster: Cluster
    isvc: Isvc
    faults: tuple[Fault, ...]
    traffic: Traffic
    expected_root_causes: tuple[str, ...]
    source_text: str
    history: History | None = None
    source: str = ""  # the public report the scenario is built on (a URL)
    router: Router | None = None  # an LLMInferenceService's router (isvc.kind LLMInferenceService only)

    @property
    def digest(self) -> str:
        """A short hash of the spec text: generated bundles are cached under it."""
        return hashlib.sha256(self.source_text.encode()).hexdigest()[:12]


class _Fields:
    """Typed access to one mapping of the spec, with errors that name the field."""

    def __init__(self, raw: Any, where: str, origin: str) -> None:
        if not isinstance(raw, Mapping):
            raise ScenarioError(f"{origin}: {where or 'the spec'} must be a mapping")
        self.raw, self.where, self.origin = raw, where, origin

    def _path(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def fail(self, key: str, problem: str) -> ScenarioError:
        return ScenarioError(f"{self.origin}: {self._path(key)} {problem}")

    def get(self, key: str, default: Any = None) -> Any:
        if key not in self.raw:
            if default is None:
                raise self.fail(key, "is required")
            return default
        return self.raw[key]

    def text(self, key: str, default: str | None = None) -> str:
        value = self.get(key, default)
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise self.fail(key, "must be a string")
        return str(value).strip()

    def number(self, key: str, default: float | None = None) -> float:
        value = self.get(key, default)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise self.fail(key, "must be a number")
        return float(value)

    def integer(self, key: str, default: int | None = None) -> int:
        value = self.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(key, "must be an integer")
        return value

    def time(self, key: str) -> datetime:
        value = self.get(key)
        text = value.isoformat() if isinstance(value, datetime) else str(value)
        try:
            return parse_time(text, self._path(key))
        except RunbookError as error:
            raise ScenarioError(f"{self.origin}: {error}") from None

    def choice(self, key: str, allowed: tuple[str, ...], default: str | None = None) -> str:
        value = self.text(key, default)
        if value not in allowed:
            raise self.fail(key, f"is {value!r}; use one of {', '.join(allowed)}")
        return value

    def nested(self, key: str) -> _Fields:
        return _Fields(self.get(key), self._path(key), self.origin)

    def optional_mapping(self, key: str) -> Mapping[str, Any] | None:
        value = self.raw.get(key)
        if value is not None and not isinstance(value, Mapping):
            raise self.fail(key, "must be a mapping")
        return value

    def items(self, key: str) -> list[Any]:
        value = self.get(key, [])
        if not isinstance(value, list):
            raise self.fail(key, "must be a list")
        return value


def parse_spec(text: str, origin: str) -> ScenarioSpec:
    """Parse and validate a spec's YAML text; ``origin`` names it in error messages."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ScenarioError(f"{origin}: not valid YAML ({str(error).splitlines()[0]})") from None
    top = _Fields(raw, "", origin)
    story = top.nested("story")
    spec = ScenarioSpec(
        name=top.text("name"),
        title=top.text("title"),
        symptom=top.choice("symptom", SYMPTOMS),
        difficulty=top.choice("difficulty", ("beginner", "intermediate", "advanced")),
        seed=top.integer("seed"),
        story=Story(*(story.text(key) for key in ("reported", "first_seen", "cause", "fix", "lesson"))),
        timeline=_timeline(top.nested("timeline")),
        cluster=_cluster(top.nested("cluster")),
        isvc=_isvc(top.nested("isvc")),
        faults=tuple(_fault(_Fields(item, f"faults[{i}]", origin)) for i, item in enumerate(top.items("faults"))),
        traffic=_traffic(top.nested("traffic")),
        expected_root_causes=tuple(str(code) for code in top.items("expected_root_causes")),
        source_text=text,
        history=_history(top.nested("history")) if "history" in top.raw else None,
        source=_source(top),
        router=_router(top) if _target_kind(top) == "LLMInferenceService" else None,
    )
    _check_consistency(spec, top)
    return spec


def load_spec_file(path: Path) -> ScenarioSpec:
    return parse_spec(path.read_text(encoding="utf-8"), str(path))


def _source(top: _Fields) -> str:
    source = top.text("source", "")
    if source and not source.startswith("https://"):
        raise top.fail("source", "must be the https:// address of the public report the scenario is built on")
    return source


def _target_kind(top: _Fields) -> str:
    return top.nested("isvc").choice("kind", TARGET_KINDS, "InferenceService")


def _router(top: _Fields) -> Router:
    """The ``llmisvc`` section (every key optional: KServe's presets are the defaults)."""
    if "llmisvc" not in top.raw:
        return Router()
    fields = top.nested("llmisvc")
    default = Router()
    router = Router(
        scheduler=bool(fields.raw.get("scheduler", True)),
        route=bool(fields.raw.get("route", True)),
        failure_mode=fields.choice("failure_mode", FAILURE_MODES, default.failure_mode),
        prefix_cache=bool(fields.raw.get("prefix_cache", False)),
        gateway_name=fields.text("gateway_name", default.gateway_name),
        gateway_namespace=fields.text("gateway_namespace", default.gateway_namespace),
        gateway_class=fields.text("gateway_class", default.gateway_class),
        gateway_controller=fields.text("gateway_controller", default.gateway_controller),
        prefill_replicas=fields.integer("prefill_replicas", 0) if "prefill_replicas" in fields.raw else 0,
        picker_image=fields.text("picker_image", default.picker_image),
        prefill_args=tuple(str(arg) for arg in fields.items("prefill_args")),
        **_parallelism(fields),
    )
    if router.prefill_replicas < 0:
        raise fields.fail("prefill_replicas", "must not be negative")
    if router.prefill_args and not router.prefill_replicas:
        raise fields.fail("prefill_args", "are the prefill pods' args: set prefill_replicas")
    if router.prefill_replicas and router.group_size > 1:
        raise fields.fail("prefill_replicas", "beside a multi-node workload is not rendered yet (parallelism)")
    return router


def _parallelism(fields: _Fields) -> dict[str, int]:
    """``llmisvc.parallelism`` {data, data_local}: data-parallel ranks spread over a group of pods."""
    if "parallelism" not in fields.raw:
        return {}
    parallelism = fields.nested("parallelism")
    data, local = parallelism.integer("data"), parallelism.integer("data_local")
    if local < 1 or data <= local or data % local:
        raise parallelism.fail("data", "must be a multiple of data_local above it (a group of two or more pods)")
    return {"data": data, "data_local": local}


def _history(fields: _Fields) -> History:
    restarts = []
    for i, item in enumerate(fields.items("restarts")):
        entry = _Fields(item, f"{fields.where}.restarts[{i}]", fields.origin)
        restarts.append(
            Restart(
                pod=entry.integer("pod"),
                at=entry.time("at"),
                down_seconds=entry.number("down_seconds"),
                reason=entry.choice("reason", RESTART_REASONS, "Unknown"),
                exit_code=entry.integer("exit_code", 255),
                engine_error=entry.choice("engine_error", ("", *RESTART_ENGINE_ERRORS), ""),
            )
        )
    blips = []
    for i, item in enumerate(fields.items("readiness_blips")):
        entry = _Fields(item, f"{fields.where}.readiness_blips[{i}]", fields.origin)
        blips.append(ReadinessBlip(pod=entry.integer("pod"), at=entry.time("at"), seconds=entry.number("seconds")))
    return History(tuple(restarts), tuple(blips))


def _timeline(fields: _Fields) -> Timeline:
    captured_at = fields.time("captured_at")
    window = Window(fields.time("window_start"), captured_at)
    if window.start >= window.end:
        raise fields.fail("window_start", "must be before captured_at")
    incident = None
    if "incident_start" in fields.raw:
        incident = Window(fields.time("incident_start"), fields.time("incident_end"))
        if not (window.start <= incident.start < incident.end <= captured_at):
            raise fields.fail("incident_start", "and incident_end must lie inside the window, in order")
    deployed_at = fields.time("deployed_at")
    if deployed_at >= captured_at:
        raise fields.fail("deployed_at", "must lie inside the window (the startup logs are the evidence)")
    return Timeline(captured_at, window, deployed_at, incident)


def _cluster(fields: _Fields) -> Cluster:
    nodes = tuple(
        GpuNode(
            name=node.text("name"),
            product=node.text("product"),
            memory_gib=node.number("memory_gib"),
            gpus=node.integer("gpus"),
            zone=node.text("zone"),
        )
        for node in (
            _Fields(item, f"cluster.nodes[{i}]", fields.origin) for i, item in enumerate(fields.items("nodes"))
        )
    )
    if not nodes:
        raise fields.fail("nodes", "must name at least one GPU node")
    return Cluster(
        kubernetes=fields.text("kubernetes"),
        knative=fields.text("knative", ""),
        ingress=fields.choice("ingress", INGRESSES),
        nodes=nodes,
        missing_crd_groups=tuple(str(group) for group in fields.items("missing_crd_groups")),
    )


def _model(fields: _Fields) -> Model:
    model_id = fields.text("id")
    weights_gib = fields.number("weights_gib")
    shards = fields.integer("shards", max(1, math.ceil(weights_gib / SAFETENSORS_SHARD_GIB)))
    if shards < 1:
        raise fields.fail("shards", "must be at least 1")
    return Model(
        id=model_id,
        served_name=fields.text("served_name", model_id),
        layers=fields.integer("layers"),
        kv_heads=fields.integer("kv_heads"),
        head_dim=fields.integer("head_dim"),
        dtype_bytes=fields.integer("dtype_bytes"),
        weights_gib=weights_gib,
        activation_gib=fields.number("activation_gib"),
        load_seconds=fields.number("load_seconds"),
        weights_format=fields.choice("weights_format", WEIGHT_FORMATS, "safetensors"),
        shards=shards,
    )


def _isvc(fields: _Fields) -> Isvc:
    args = fields.items("args")
    if not all(isinstance(arg, (str, int)) for arg in args):
        raise fields.fail("args", "must be a list of strings")
    resources = fields.optional_mapping("resources") or {}
    kind = fields.choice("kind", TARGET_KINDS, "InferenceService")
    # An LLMInferenceService has no deployment mode, runtime or autoscaler class of KServe's predictor: its
    # Deployment behaves as a RawDeployment's does, with a fixed replica count.
    llm = kind == "LLMInferenceService"
    return Isvc(
        name=fields.text("name"),
        namespace=fields.text("namespace"),
        deployment_mode=fields.choice(
            "deployment_mode", ("RawDeployment",) if llm else DEPLOYMENT_MODES, "RawDeployment" if llm else None
        ),
        autoscaler_class=fields.choice(
            "autoscaler_class", ("none",) if llm else AUTOSCALER_CLASSES, "none" if llm else None
        ),
        min_replicas=fields.integer("min_replicas"),
        max_replicas=fields.integer("max_replicas"),
        scale_target=fields.integer("scale_target") if "scale_target" in fields.raw else None,
        server=fields.choice("server", SERVER_KINDS),
        runtime_name=fields.text("runtime_name", "" if llm else None),
        image=fields.text("image"),
        vllm_version=fields.text("vllm_version"),
        model=_model(fields.nested("model")),
        args=tuple(str(arg) for arg in args),
        container_port=fields.integer("container_port"),
        readiness_probe=fields.optional_mapping("readiness_probe"),
        liveness_probe=fields.optional_mapping("liveness_probe"),
        probes_in=fields.choice("probes_in", DECLARED_IN, "runtime"),
        resources=resources,
        runtime_resources=fields.optional_mapping("runtime_resources") or {},
        image_pull_seconds=fields.number("image_pull_seconds", 0.0),
        owner_hpa=_owner_hpa(fields),
        user_ingress=_user_ingress(fields),
        kind=kind,
    )


def _user_ingress(fields: _Fields) -> Mapping[str, str] | None:
    if fields.optional_mapping("user_ingress") is None:
        return None
    entry = fields.nested("user_ingress")
    if fields.text("deployment_mode") != "RawDeployment":
        raise fields.fail("user_ingress", "replaces KServe's Ingress of a RawDeployment (disableIngressCreation)")
    return {"name": entry.text("name"), "host": entry.text("host")}


def _owner_hpa(fields: _Fields) -> Mapping[str, Any] | None:
    if fields.optional_mapping("owner_hpa") is None:
        return None
    entry = fields.nested("owner_hpa")
    average = entry.number("average_value")
    if average <= 0:
        raise entry.fail("average_value", "must be a positive number of requests per pod")
    return {"metric": entry.text("metric", "vllm:num_requests_running"), "average_value": average}


def _fault(fields: _Fields) -> Fault:
    fault_type = fields.choice("type", FAULT_TYPES + BLOCKING_FAULT_TYPES + LLMISVC_FAULT_TYPES)
    params = {key: value for key, value in fields.raw.items() if key != "type"}
    if fault_type in BLOCKING_FAULT_TYPES:
        _blocking_fault_params(fault_type, fields)
    if fault_type in LLMISVC_FAULT_TYPES:
        _llmisvc_fault_params(fault_type, fields)
    if fault_type == "port_mismatch":
        fields.integer("listen_port")
    elif fault_type == "liveness_kills_during_load":
        if fields.optional_mapping("liveness_probe") is None:
            raise fields.fail("liveness_probe", "is required (the liveness probe the change added)")
    elif fault_type == "gpu_unschedulable":
        if "pending_pods" in fields.raw and fields.integer("pending_pods") < 1:
            raise fields.fail("pending_pods", "must be at least 1")
    elif fault_type == "cpu_autoscaling":
        if fields.integer("cpu_target", 80) < 1:
            raise fields.fail("cpu_target", "must be a positive percentage")
    elif fault_type == "custom_metrics_api_missing":
        fields.text("metric", "vllm:num_requests_waiting")
        fields.text("average_value", "10")
    elif fault_type == "liveness_timeouts_under_load":
        if fields.optional_mapping("liveness_probe") is None:
            raise fields.fail("liveness_probe", "is required (the liveness probe that times out under load)")
        params["at"] = fields.time("at")
        if fields.integer("pod", 0) < 0:
            raise fields.fail("pod", "must be a pod index")
    elif fault_type == "agent_readiness_not_served":
        fields.text("logger_url")
    elif fault_type == "readiness_probe_port_unserved":
        if not 0 < fields.integer("probe_port") < 65536:
            raise fields.fail("probe_port", "must be a TCP port")
    elif fault_type == "batched_tokens_below_max_model_len":
        if fields.integer("max_num_batched_tokens") < 1:
            raise fields.fail("max_num_batched_tokens", "must be a positive number of tokens")
    elif fault_type == "vllm_port_service_link":
        fields.text("service_host")
        if not 0 < fields.integer("service_port") < 65536:
            raise fields.fail("service_port", "must be a TCP port")
    elif fault_type == "hf_token_secret_missing":
        fields.choice("missing", ("secret", "key"), "secret")
    elif fault_type == "tensor_parallel_above_gpus":
        if fields.integer("tensor_parallel_size") < 2:
            raise fields.fail("tensor_parallel_size", "must be at least 2")
    elif fault_type == "max_model_len_exceeds_kv_cache":
        if fields.integer("max_model_len") < 1:
            raise fields.fail("max_model_len", "must be a positive number of tokens")
    elif fault_type == "long_contexts":
        if fields.integer("prompt_tokens") < 1:
            raise fields.fail("prompt_tokens", "must be a positive number of tokens")
        params["since"] = fields.time("since")
    elif fault_type in ("hpa_at_max", "hpa_target_above_capacity"):
        fields.text("metric", "vllm:num_requests_running")
        if fields.number("average_value") <= 0:
            raise fields.fail("average_value", "must be a positive number of requests per pod")
    elif fault_type == "hpa_target_not_serving":
        fields.text("stale_deployment")
        fields.text("metric", "vllm:num_requests_running")
        fields.text("average_value", "48")
    elif fault_type == "gpu_memory_overcommitted":
        if not 0 < fields.number("gpu_memory_utilization") <= 1:
            raise fields.fail("gpu_memory_utilization", "must be a fraction in (0, 1]")
    elif fault_type == "host_oomkilled":
        try:
            params["memory_limit_gib"] = quantity_gib(fields.text("memory_limit"))
        except ValueError:
            raise fields.fail("memory_limit", "must be a Kubernetes quantity such as 16Gi") from None
        fields.choice("set_in", DECLARED_IN, "runtime")
    return Fault(fault_type, params)


def _blocking_fault_params(fault_type: str, fields: _Fields) -> None:
    """The parameters of a fault that keeps the serving container from running (see BLOCKING_FAULT_TYPES)."""
    if fault_type == "init_container_fails":
        fields.text("storage_uri")
        lines = fields.items("log")
        if not lines or not all(isinstance(line, str) for line in lines):
            raise fields.fail("log", "must list the lines the storage-initializer prints in each run")
        fields.choice("reason", INIT_FAILURE_REASONS, "Error")
        fields.integer("exit_code", 1)
        if fields.number("run_seconds", 5) <= 0:
            raise fields.fail("run_seconds", "must be a positive number of seconds")
        try:
            quantity_gib(fields.text("memory_limit", "1Gi"))
        except ValueError:
            raise fields.fail("memory_limit", "must be a Kubernetes quantity such as 1Gi") from None
    elif fault_type in ("image_pull_fails", "image_digest_unresolved"):
        fields.text("error")
    else:
        fields.text("message")


def _llmisvc_fault_params(fault_type: str, fields: _Fields) -> None:
    """The parameters of a fault of an LLMInferenceService's router (see LLMISVC_FAULT_TYPES)."""
    if fault_type == "picker_not_ready":
        lines = fields.items("log")
        if not lines or not all(isinstance(line, str) for line in lines):
            raise fields.fail("log", "must list the lines the endpoint picker prints (the report's words)")
        if fields.integer("restarts", 0) < 0:
            raise fields.fail("restarts", "must not be negative")
    elif fault_type == "pool_selector_misses":
        selector = fields.optional_mapping("selector")
        if not selector:
            raise fields.fail("selector", "must map the labels the InferencePool selects on")
    elif fault_type != "group_worker_unschedulable":
        fields.text("reason", "")
        fields.text("message", "")


def quantity_gib(quantity: str) -> float:
    """A memory quantity ("16Gi", "20G") in GiB; ``ValueError`` when it is not a quantity."""
    value: Decimal = parse_quantity(quantity)
    return float(value) / 2**30


def probe_budget_seconds(probe: Mapping[str, Any]) -> float:
    """How long a probe tolerates a silent server before it acts: initial delay + period x threshold."""
    return float(probe.get("initialDelaySeconds", 0)) + float(probe.get("periodSeconds", 10)) * float(
        probe.get("failureThreshold", 3)
    )


def _traffic(fields: _Fields) -> Traffic:
    points = []
    for i, item in enumerate(fields.items("points")):
        if not (isinstance(item, list) and len(item) == 2):
            raise fields.fail(f"points[{i}]", "must be [time, requests per second]")
        moment = _Fields({"t": item[0], "rps": item[1]}, f"{fields.where}.points[{i}]", fields.origin)
        points.append((moment.time("t"), moment.number("rps")))
    if not points:
        raise fields.fail("points", "must hold at least one [time, requests per second]")
    if any(later[0] < earlier[0] for earlier, later in pairwise(points)):
        raise fields.fail("points", "must be in time order")
    if any(rate < 0 for _, rate in points):
        raise fields.fail("points", "must not hold a negative rate")
    return Traffic(
        tuple(points),
        fields.integer("prompt_tokens"),
        fields.integer("output_tokens"),
        fields.choice("delivery", DELIVERIES, "non-streamed"),
    )


def _check_consistency(spec: ScenarioSpec, top: _Fields) -> None:
    isvc = spec.isvc
    if not 1 <= isvc.min_replicas <= isvc.max_replicas:
        raise top.fail("isvc.min_replicas", "must be at least 1 and at most max_replicas")
    if isvc.deployment_mode == "RawDeployment" and isvc.autoscaler_class == "kpa":
        raise top.fail("isvc.autoscaler_class", "kpa needs the Serverless deployment mode")
    if isvc.deployment_mode == "Serverless" and isvc.autoscaler_class == "none":
        raise top.fail("isvc.autoscaler_class", "none is only for RawDeployment (Knative always autoscales)")
    if isvc.deployment_mode == "Serverless" and isvc.autoscaler_class != "kpa":
        # Knative's HPA class (autoscaling.knative.dev/class: hpa.autoscaling.knative.dev) makes an HPA named after
        # the revision, owned by its PodAutoscaler; the generator writes a KPA only.
        raise top.fail("isvc.autoscaler_class", "Serverless scenarios model Knative's KPA only (kpa)")
    unknown = [code for code in spec.expected_root_causes if code not in CATALOG]
    if unknown:
        raise top.fail("expected_root_causes", f"holds unknown codes: {', '.join(unknown)}")
    if spec.cluster.ingress == "kourier":
        if isvc.deployment_mode != "Serverless":
            raise top.fail("cluster.ingress", "kourier is Knative's gateway: it needs the Serverless deployment mode")
        if "networking.istio.io" not in spec.cluster.missing_crd_groups:
            raise top.fail("cluster.missing_crd_groups", "must list networking.istio.io on a Kourier cluster")
    llm_faults = [fault.type for fault in spec.faults if fault.type in LLMISVC_FAULT_TYPES]
    if llm_faults and not isvc.is_llmisvc:
        raise top.fail("faults", f"{llm_faults[0]} breaks an LLMInferenceService's router: set isvc.kind")
    if isvc.is_llmisvc and any(fault.type not in LLMISVC_FAULT_TYPES for fault in spec.faults):
        raise top.fail("faults", "of an LLMInferenceService are its router's (the predictor's are not rendered yet)")
    if "llmisvc" in top.raw and not isvc.is_llmisvc:
        raise top.fail("llmisvc", "describes an LLMInferenceService's router: set isvc.kind: LLMInferenceService")
    if len(spec.faults) != len({fault.type for fault in spec.faults}):
        raise top.fail("faults", "names a fault type twice")
    for fault in spec.faults:
        _check_fault(spec, fault, top)
    if spec.history is None and not spec.timeline.window.contains(spec.timeline.deployed_at):
        raise top.fail("timeline.deployed_at", "must lie inside the window (the startup logs are the evidence)")
    if spec.history is not None:
        _check_history(spec, spec.history, top)
    if isvc.owner_hpa is not None:
        _check_owner_hpa(spec, top)


def _check_history(spec: ScenarioSpec, history: History, top: _Fields) -> None:
    """A healthy service's past: no fault, pods that exist, restarts after serving and before the capture."""
    isvc, timeline = spec.isvc, spec.timeline
    if spec.faults:
        raise top.fail("history", "describes a healthy service's past: a spec with history has no faults")
    served = timeline.deployed_at + timedelta(seconds=isvc.image_pull_seconds + isvc.model.load_seconds * 1.1 + 15)
    for restart in history.restarts:
        if not 0 <= restart.pod < isvc.min_replicas:
            raise top.fail("history.restarts", f"pod {restart.pod} does not exist (min_replicas {isvc.min_replicas})")
        back = restart.at + timedelta(seconds=restart.down_seconds + isvc.model.load_seconds * 1.1 + 15)
        if not served < restart.at or back >= timeline.captured_at or restart.down_seconds < 0:
            raise top.fail(
                "history.restarts",
                "must fall after the pod served and leave it time to load again before the capture",
            )
    for blip in history.readiness_blips:
        if not 0 <= blip.pod < isvc.min_replicas:
            raise top.fail("history.readiness_blips", f"pod {blip.pod} does not exist")
        if not served < blip.at or blip.at + timedelta(seconds=blip.seconds + 60) >= timeline.captured_at:
            raise top.fail("history.readiness_blips", "must fall after the pod served and end before the capture")
        probe = isvc.readiness_probe or {}
        period, threshold = float(probe.get("periodSeconds", 10)), int(probe.get("failureThreshold", 3))
        if blip.seconds < period * threshold:
            raise top.fail(
                "history.readiness_blips",
                f"last {blip.seconds:g} s, shorter than the probe's {threshold} failures {period:g} s apart: "
                "the pod would never turn unready",
            )


def _check_owner_hpa(spec: ScenarioSpec, top: _Fields) -> None:
    """The owner's working HPA: its own Deployment mode and class, room to scale, and traffic it never needs
    to scale for (the generator does not replay a healthy HPA's scale-outs)."""
    isvc = spec.isvc
    assert isvc.owner_hpa is not None
    if isvc.deployment_mode != "RawDeployment" or isvc.autoscaler_class != "external":
        raise top.fail("isvc.owner_hpa", "the owner's own HPA needs RawDeployment and class external")
    if isvc.max_replicas <= isvc.min_replicas:
        raise top.fail("isvc.owner_hpa", "max_replicas equals min_replicas, nothing would scale")
    if any(fault.type in OWNER_HPA_FAULTS for fault in spec.faults):
        raise top.fail("isvc.owner_hpa", "the owner has one HPA; drop the HPA faults")
    if "running" not in str(isvc.owner_hpa["metric"]):
        raise top.fail("isvc.owner_hpa", "the metric must count running requests")
    peak = max(rate for _, rate in spec.traffic.points)
    served = isvc.min_replicas * pod_throughput(spec, int(isvc.owner_hpa["average_value"]))
    if peak > served:
        raise top.fail(
            "isvc.owner_hpa",
            f"the peak of {peak:g} requests/s needs more than {isvc.owner_hpa['average_value']:g} running requests "
            "per pod at min_replicas: the HPA would scale out (not modelled for a healthy HPA)",
        )


def _check_blocking_fault(spec: ScenarioSpec, fault: Fault, top: _Fields) -> None:
    """A fault that keeps the serving container from running is the only thing wrong, in a mode where it happens."""
    others = [other.type for other in spec.faults if other is not fault]
    if others:
        raise top.fail("faults", f"{fault.type}: the serving container never runs, so {others[0]} could not show")
    serverless = spec.isvc.deployment_mode == "Serverless"
    if fault.type == "image_digest_unresolved" and not serverless:
        raise top.fail("faults", "image_digest_unresolved: only Knative resolves tags to digests (Serverless)")
    if fault.type == "pod_creation_rejected" and spec.isvc.autoscaler_class == "hpa":
        # With no pod at all the HPA computes nothing from metrics (it only holds minReplicas): not modelled.
        raise top.fail(
            "faults", "pod_creation_rejected: use autoscaler_class none (an HPA over no pod is not modelled)"
        )
    if fault.type == "image_pull_fails" and serverless:
        raise top.fail(
            "faults", "image_pull_fails: on Serverless Knative resolves the tag first; use image_digest_unresolved"
        )


def _check_fault(spec: ScenarioSpec, fault: Fault, top: _Fields) -> None:
    """A fault must break something in this spec: a fault that changes nothing is a spec error."""
    isvc, params = spec.isvc, fault.params
    if fault.type in BLOCKING_FAULT_TYPES:
        _check_blocking_fault(spec, fault, top)
    if fault.type == "route_without_backends" and not (spec.router and spec.router.route):
        raise top.fail("faults", "route_without_backends: the service has no managed route (llmisvc.route)")
    if fault.type == "pool_readiness_stuck" and spec.router is not None and spec.router.route:
        raise top.fail(
            "faults", "pool_readiness_stuck: models a service without a managed route (llmisvc.route: false)"
        )
    if fault.type == "group_worker_unschedulable" and not (spec.router and spec.router.group_size > 1):
        raise top.fail("faults", "group_worker_unschedulable: the service is single-node (llmisvc.parallelism)")
    if fault.type in ("picker_not_ready", "pool_selector_misses", "pool_readiness_stuck") and not (
        spec.router and spec.router.scheduler
    ):
        raise top.fail("faults", f"{fault.type}: the service has no scheduler (llmisvc.scheduler), nothing would break")
    if fault.type == "port_mismatch" and int(params["listen_port"]) == isvc.container_port:
        raise top.fail("faults", "port_mismatch: listen_port equals container_port, nothing would break")
    if fault.type == "routing_layer_mismatch" and spec.cluster.ingress != "kourier":
        raise top.fail(
            "faults",
            "routing_layer_mismatch: models KServe expecting Istio on a Kourier cluster; set cluster.ingress: kourier",
        )
    if fault.type == "liveness_kills_during_load":
        budget = probe_budget_seconds(params["liveness_probe"])
        if budget >= isvc.model.load_seconds * 0.95:
            raise top.fail(
                "faults",
                f"liveness_kills_during_load: the probe allows {budget:g} s, the model loads in "
                f"{isvc.model.load_seconds:g} s: nothing would be killed",
            )
    if fault.type == "liveness_timeouts_under_load":
        budget = probe_budget_seconds(params["liveness_probe"])
        served = spec.timeline.deployed_at + timedelta(seconds=isvc.model.load_seconds * 1.05 + 60)
        if budget < isvc.model.load_seconds * 1.05 or not served < params["at"] < spec.timeline.captured_at:
            raise top.fail(
                "faults",
                "liveness_timeouts_under_load: the probe must let the model load, and the kill come after it served "
                "and before the capture",
            )
        if int(params.get("pod", 0)) >= isvc.min_replicas:
            raise top.fail("faults", "liveness_timeouts_under_load: pod is not one of the min_replicas pods")
    if fault.type == "agent_readiness_not_served":
        path = str(((isvc.readiness_probe or {}).get("httpGet") or {}).get("path") or "/")
        if isvc.deployment_mode != "RawDeployment" or path == "/":
            raise top.fail(
                "faults",
                "agent_readiness_not_served: needs RawDeployment and an httpGet readiness_probe on a path other than "
                "'/' (with '/' the agent's own probe finds its path)",
            )
    if fault.type == "readiness_probe_port_unserved" and (
        isvc.deployment_mode != "Serverless" or int(params["probe_port"]) == isvc.container_port
    ):
        raise top.fail(
            "faults",
            "readiness_probe_port_unserved: needs Serverless (queue-proxy runs the probe) and a probe_port other than "
            "container_port",
        )
    if fault.type == "gpu_unschedulable" and int(params.get("pending_pods", isvc.min_replicas)) > isvc.min_replicas:
        raise top.fail("faults", "gpu_unschedulable: pending_pods exceeds min_replicas")
    if fault.type == "scale_to_zero":
        _check_scale_to_zero(spec, top)
    if fault.type == "cpu_autoscaling":
        gpus = (isvc.resources.get("limits") or {}).get("nvidia.com/gpu")
        if isvc.deployment_mode != "RawDeployment" or isvc.autoscaler_class != "hpa" or not gpus:
            raise top.fail("faults", "cpu_autoscaling: needs KServe's HPA (RawDeployment, class hpa) on a GPU pod")
        if isvc.max_replicas <= isvc.min_replicas:
            raise top.fail(
                "faults", "cpu_autoscaling: max_replicas equals min_replicas, the HPA could not scale anyway"
            )
    if fault.type == "custom_metrics_api_missing" and (
        isvc.deployment_mode != "RawDeployment" or isvc.autoscaler_class != "external"
    ):
        raise top.fail(
            "faults", "custom_metrics_api_missing: the owner's own HPA needs RawDeployment and class external"
        )
    if fault.type == "custom_metrics_api_missing" and isvc.max_replicas <= isvc.min_replicas:
        raise top.fail("faults", "custom_metrics_api_missing: max_replicas equals min_replicas, nothing would scale")
    if fault.type == "hpa_target_not_serving":
        _check_hpa_target_not_serving(spec, fault, top)
    if fault.type == "hpa_at_max":
        _check_hpa_at_max(spec, float(params["average_value"]), top)
    if fault.type == "hpa_target_above_capacity":
        _check_hpa_target_above_capacity(spec, fault, top)
    if fault.type == "max_model_len_exceeds_kv_cache":
        _check_max_model_len(spec, int(params["max_model_len"]), top)
    if fault.type == "ingress_timeout_default":
        _check_ingress_timeout_default(spec, top)
    if fault.type == "long_contexts":
        _check_long_contexts(spec, int(params["prompt_tokens"]), params["since"], top)
    if fault.type == "gpu_memory_overcommitted":
        left = min(node.memory_gib for node in spec.cluster.nodes) * (1 - float(params["gpu_memory_utilization"]))
        if left >= OUTSIDE_BUDGET_GIB:
            raise top.fail(
                "faults",
                f"gpu_memory_overcommitted: {left:.2f} GiB stay outside vLLM's budget, enough for the "
                f"{OUTSIDE_BUDGET_GIB} GiB of CUDA context and graphs: nothing would run out of memory",
            )
    if fault.type == "tensor_parallel_above_gpus":
        gpus = int((isvc.resources.get("limits") or {}).get("nvidia.com/gpu", 0))
        if int(params["tensor_parallel_size"]) <= gpus:
            raise top.fail("faults", f"tensor_parallel_above_gpus: the pod requests {gpus} GPUs, enough for it")
    if fault.type == "bf16_on_pre_ampere_gpu":
        _check_bf16_on_pre_ampere(spec, top)
    if fault.type == "host_oomkilled" and params["memory_limit_gib"] >= isvc.model.host_load_gib:
        raise top.fail(
            "faults",
            f"host_oomkilled: loading needs about {isvc.model.host_load_gib:.1f} GiB of host memory, "
            f"within the {params['memory_limit']} limit: nothing would be killed",
        )


# GPUs below compute capability 8.0 (no bfloat16): Volta (7.0) and Turing (7.5) data-centre cards.
PRE_AMPERE_GPUS = ("V100", "T4", "P100", "P4", "RTX-6000", "RTX-8000")


def _check_bf16_on_pre_ampere(spec: ScenarioSpec, top: _Fields) -> None:
    """bfloat16 fails only on a GPU without it, and only while the engine keeps the checkpoint's dtype."""
    if not all(any(name in node.product for name in PRE_AMPERE_GPUS) for node in spec.cluster.nodes):
        raise top.fail("faults", "bf16_on_pre_ampere_gpu: every node must carry a pre-Ampere GPU (T4, V100, ...)")
    dtype = flag_value(spec.isvc.args, "--dtype")
    if dtype not in (None, "auto", "bfloat16"):
        raise top.fail("faults", f"bf16_on_pre_ampere_gpu: --dtype {dtype} already avoids bfloat16")


def _check_scale_to_zero(spec: ScenarioSpec, top: _Fields) -> None:
    """Scale-to-zero needs Knative's KPA, a baseline of one replica, and traffic that stops and comes back."""
    isvc = spec.isvc
    if isvc.deployment_mode != "Serverless" or isvc.autoscaler_class != "kpa":
        raise top.fail("faults", "scale_to_zero: only the Serverless mode with the KPA scales to zero")
    if isvc.min_replicas != 1:
        raise top.fail("faults", "scale_to_zero: the baseline min_replicas must be 1 (the fault lowers it to 0)")
    resumes = False
    quiet = 0
    moment = spec.timeline.deployed_at + timedelta(seconds=isvc.model.load_seconds)
    while moment < spec.timeline.captured_at and not resumes:
        busy = spec.traffic.rate_at(moment) > 0
        resumes = busy and quiet >= IDLE_BEFORE_SCALE_TO_ZERO_SECONDS
        quiet = 0 if busy else quiet + 1
        moment += timedelta(seconds=1)
    if not resumes:
        raise top.fail(
            "faults",
            "scale_to_zero: the traffic never pauses (90 s) after the model loaded and resumes: nothing would scale to zero",
        )


def _check_hpa_target_not_serving(spec: ScenarioSpec, fault: Fault, top: _Fields) -> None:
    """The owner's HPA must be able to scale, and its stale target must not be the serving Deployment."""
    isvc = spec.isvc
    if isvc.deployment_mode != "RawDeployment" or isvc.autoscaler_class != "external":
        raise top.fail("faults", "hpa_target_not_serving: the owner's own HPA needs RawDeployment and class external")
    if isvc.max_replicas <= isvc.min_replicas:
        raise top.fail("faults", "hpa_target_not_serving: max_replicas equals min_replicas, nothing would scale")
    stale = str(fault.params["stale_deployment"])
    if stale == f"{isvc.name}-predictor" or not stale.startswith(f"{isvc.name}-predictor-"):
        raise top.fail(
            "faults",
            f"hpa_target_not_serving: stale_deployment must be a copy named {isvc.name}-predictor-<suffix>, "
            f"not the serving {isvc.name}-predictor",
        )
    if any(other.type == "custom_metrics_api_missing" for other in spec.faults):
        raise top.fail("faults", "hpa_target_not_serving: the owner has one HPA; drop custom_metrics_api_missing")


def pod_throughput(spec: ScenarioSpec, running: int) -> float:
    """Requests per second one vLLM pod completes with ``running`` requests in its batch (Little's law on the
    traffic simulator's batch model)."""
    traffic = spec.traffic
    seconds = traffic.prompt_tokens / PREFILL_TOKENS_PER_SECOND + traffic.output_tokens * (
        IDLE_SECONDS_PER_TOKEN + ITL_PER_RUNNING_SECONDS * running
    )
    return running / seconds


def _check_hpa_at_max(spec: ScenarioSpec, average_value: float, top: _Fields) -> None:
    """A working HPA whose target sits below the pod's ceiling, and a spike that still outgrows maxReplicas."""
    isvc = spec.isvc
    if isvc.deployment_mode != "RawDeployment" or isvc.autoscaler_class != "external":
        raise top.fail("faults", "hpa_at_max: the owner's own HPA needs RawDeployment and class external")
    if isvc.max_replicas <= isvc.min_replicas:
        raise top.fail("faults", "hpa_at_max: max_replicas equals min_replicas, nothing would scale")
    if any(other.type in OWNER_HPA_FAULTS and other.type != "hpa_at_max" for other in spec.faults):
        raise top.fail("faults", "hpa_at_max: the owner has one working HPA; drop the other HPA faults")
    seqs = flag_value(isvc.args, "--max-num-seqs")
    if seqs is None or average_value >= int(seqs):
        raise top.fail(
            "faults", "hpa_at_max: set --max-num-seqs above average_value (a target at the ceiling is another fault)"
        )
    peak = max(rate for _, rate in spec.traffic.points)
    served = isvc.max_replicas * pod_throughput(spec, int(seqs))
    if peak <= served:
        raise top.fail(
            "faults",
            f"hpa_at_max: {isvc.max_replicas} replicas serve about {served:.1f} requests/s, more than the peak "
            f"of {peak:g}: nothing would queue at the maximum",
        )


def _check_hpa_target_above_capacity(spec: ScenarioSpec, fault: Fault, top: _Fields) -> None:
    """The owner's working HPA on running requests, a target the pod can never exceed, and demand beyond one pod."""
    isvc = spec.isvc
    if isvc.deployment_mode != "RawDeployment" or isvc.autoscaler_class != "external":
        raise top.fail(
            "faults", "hpa_target_above_capacity: the owner's own HPA needs RawDeployment and class external"
        )
    if isvc.max_replicas <= isvc.min_replicas:
        raise top.fail("faults", "hpa_target_above_capacity: max_replicas equals min_replicas, nothing would scale")
    if any(other.type in OWNER_HPA_FAULTS and other.type != fault.type for other in spec.faults):
        raise top.fail("faults", "hpa_target_above_capacity: the owner has one working HPA; drop the other HPA faults")
    if "running" not in str(fault.params.get("metric", "vllm:num_requests_running")):
        raise top.fail(
            "faults", "hpa_target_above_capacity: the metric must count running requests (capped by the flag)"
        )
    seqs = flag_value(isvc.args, "--max-num-seqs")
    if seqs is None or float(fault.params["average_value"]) < int(seqs):
        raise top.fail(
            "faults",
            "hpa_target_above_capacity: set --max-num-seqs at or below average_value (a target below the ceiling "
            "lets the HPA scale)",
        )
    peak = max(rate for _, rate in spec.traffic.points)
    served = isvc.min_replicas * pod_throughput(spec, int(seqs))
    if peak <= served:
        raise top.fail(
            "faults",
            f"hpa_target_above_capacity: {isvc.min_replicas} replicas serve about {served:.1f} requests/s, more than "
            f"the peak of {peak:g}: nothing would queue without scaling",
        )


def _check_max_model_len(spec: ScenarioSpec, max_model_len: int, top: _Fields) -> None:
    """One request of the new --max-model-len must need more KV cache than the card leaves, yet some must be left."""
    args = spec.isvc.args
    utilization = float(flag_value(args, "--gpu-memory-utilization") or 0.9)
    tensor_parallel = int(flag_value(args, "--tensor-parallel-size") or 1)
    node = min(spec.cluster.nodes, key=lambda gpu: gpu.memory_gib)
    _, _, blocks = kv_cache_blocks(spec.isvc.model, node.memory_gib, utilization, tensor_parallel)
    if blocks <= 0:
        raise top.fail("faults", "max_model_len_exceeds_kv_cache: the weights leave no KV cache at all")
    if max_model_len <= blocks * BLOCK_SIZE:
        raise top.fail(
            "faults",
            f"max_model_len_exceeds_kv_cache: the KV cache holds {blocks * BLOCK_SIZE:,} tokens, enough for one "
            f"request of {max_model_len:,}: nothing would be refused",
        )


def longest_generation_seconds(traffic: Traffic) -> float:
    """A floor for the p99 duration of a request: its long output decoded at vLLM's fastest (empty-batch) pace."""
    return traffic.output_tokens * LONGEST_OUTPUT_FACTOR * IDLE_SECONDS_PER_TOKEN


def _check_ingress_timeout_default(spec: ScenarioSpec, top: _Fields) -> None:
    """nginx's default must sit in front of a RawDeployment whose long generations outlast it."""
    if spec.cluster.ingress != "nginx" or spec.isvc.deployment_mode != "RawDeployment":
        raise top.fail("faults", "ingress_timeout_default: needs cluster.ingress nginx in front of a RawDeployment")
    longest = longest_generation_seconds(spec.traffic)
    if longest <= NGINX_DEFAULT_TIMEOUT_SECONDS:
        raise top.fail(
            "faults",
            f"ingress_timeout_default: the longest generations take about {longest:.0f} s, within nginx's "
            f"{NGINX_DEFAULT_TIMEOUT_SECONDS} s default: nothing would be cut",
        )


def blocks_per_request(prompt_tokens: int, output_tokens: int) -> int:
    """KV blocks an average request in flight holds: its prompt and, on average, half its output."""
    return max(1, math.ceil((prompt_tokens + output_tokens / 2) / BLOCK_SIZE))


def _check_long_contexts(spec: ScenarioSpec, prompt_tokens: int, since: datetime, top: _Fields) -> None:
    """The long prompts must arrive while the engine serves, be accepted, and overflow the cache before the flag."""
    isvc, traffic = spec.isvc, spec.traffic
    if isvc.server != "vllm":
        raise top.fail("faults", "long_contexts: models vLLM's KV cache; needs server vllm")
    if prompt_tokens <= traffic.prompt_tokens:
        raise top.fail("faults", "long_contexts: prompt_tokens must be longer than the traffic's usual prompts")
    if not spec.timeline.deployed_at + timedelta(seconds=isvc.model.load_seconds) < since < spec.timeline.captured_at:
        raise top.fail("faults", "long_contexts: since must fall after the model loaded and before the capture")
    max_model_len = int(flag_value(isvc.args, "--max-model-len") or 0)
    if not max_model_len or prompt_tokens + traffic.output_tokens * LONGEST_OUTPUT_FACTOR > max_model_len:
        raise top.fail(
            "faults",
            "long_contexts: set --max-model-len to hold the long prompts and their outputs (vLLM would refuse them "
            "with a 400 instead of caching them)",
        )
    seqs = flag_value(isvc.args, "--max-num-seqs")
    if seqs is None:
        raise top.fail("faults", "long_contexts: set --max-num-seqs (the ceiling the cache is to fall short of)")
    utilization = float(flag_value(isvc.args, "--gpu-memory-utilization") or 0.9)
    tensor_parallel = int(flag_value(isvc.args, "--tensor-parallel-size") or 1)
    _, _, blocks = kv_cache_blocks(isvc.model, spec.cluster.nodes[0].memory_gib, utilization, tensor_parallel)
    held = blocks // blocks_per_request(prompt_tokens, traffic.output_tokens)
    if held >= int(seqs):
        raise top.fail(
            "faults",
            f"long_contexts: the KV cache holds {held} requests of {prompt_tokens:,} tokens, no fewer than "
            f"--max-num-seqs {seqs}: the flag, not the cache, would cap the batch",
        )
