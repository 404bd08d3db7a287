"""vLLM's KV-cache arithmetic: how many tokens fit, how many full-length requests, which flags fit.

Pure math, no I/O. The exact part follows what vLLM does at start-up:

- bytes per token per GPU = 2 (K and V) x layers on this GPU x max(1, kv_heads / tp) x head_dim
  x KV dtype bytes (MLA models: layers x latent dim x bytes, the latent is not split by tp);
- blocks = floor(available KV memory / (bytes per token x block size)); vLLM logs
  ``GPU KV cache size: blocks x block_size tokens`` (V1) or ``# GPU blocks: N`` (V0);
- ``Maximum concurrency for L tokens per request: kv_tokens / L``;
- a max-model-len fits when one request of that length, rounded up to whole blocks, fits.

With the available KV memory taken from the engine's log (``--available-kv-gib``) this is exact
up to the log's own rounding to 0.01 GiB. Without it the available memory is estimated:

    gpu total x gpu_memory_utilization - weights - activation peak - non-torch memory

where weights = parameters x bytes per parameter / (tp x pp) (vLLM's "Model loading took" line
matched within 0.3 % for Llama-3.1-8B), the activation peak = max-num-batched-tokens x 2 bytes
x (3 x MLP width / tp + 2 x hidden) plus the sampler's fp32 logits for max-num-seqs requests
(fitted on vllm-project/vllm#10517's two profiles of Llama-3.1-8B, within 4 %, so those two
cases are in-sample), and non-torch memory (CUDA context, NCCL, cuBLAS workspaces) a flat
0.3 GiB (0.03-0.43 GiB observed). Not
included: CUDA-graph memory, which vLLM >= 0.21 subtracts before sizing the cache (often
0.5-2 GiB, more for MoE models), quantization workspaces, LoRA, multimodal encoders.
Measured error of the estimate against four published start-ups (tests/test_vllm_memory.py):
+0.12, +0.19, +0.52 and +0.01 GiB of available KV memory (the +0.52 is a 4-bit model whose
dequantization workspace the activation term does not know).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

from nbhelpers.errors import RunbookError
from nbhelpers.models.model_table import ModelArchitecture

GIB = 1024**3
DEFAULT_BLOCK_SIZE = 16
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
NON_TORCH_GIB = 0.3
SAFE_MAX_UTILIZATION = 0.95
# Memory vLLM's budget must leave free for the CUDA context and CUDA graphs: on a small card 5 % is not
# enough (a 22 GiB L4 at 0.95 leaves 1.1 GiB and fails in graph capture).
MIN_HEADROOM_GIB = 1.5
LOGITS_BYTES = 4  # the sampler works on fp32 logits
_KV_DTYPE_BYTES = {
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
    "float32": 4,
    "float": 4,
}
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str) -> tuple[int, int, int]:
    """``0.10.1``, ``v0.9.2``, ``0.11.0rc1`` -> (major, minor, patch)."""
    match = _VERSION.match(text.strip())
    if not match:
        raise RunbookError(f"bad --vllm-version {text!r}: expected e.g. 0.10.1")
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


@dataclass(frozen=True)
class Gpu:
    """The GPU as vLLM sees it: ``total_bytes`` is what vLLM logs as total_gpu_memory."""

    total_bytes: int
    name: str | None = None  # e.g. "NVIDIA A100-SXM4-80GB"; None when only a size was given


@dataclass(frozen=True)
class Setting:
    """A flag value and where it came from ("flag", or the default that applies and why)."""

    value: int
    origin: str


@dataclass(frozen=True)
class ServingPlan:
    """The inputs: a model on a GPU with vLLM flags (absent flags are None)."""

    architecture: ModelArchitecture
    gpu: Gpu
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int = DEFAULT_BLOCK_SIZE
    weights_gib: float | None = None
    available_kv_gib: float | None = None
    vllm_version: tuple[int, int, int] | None = None
    target_concurrency: int | None = None


@dataclass(frozen=True)
class MemoryBudget:
    """Where the GPU's memory goes, per GPU, in bytes; ``exact`` when taken from the engine's log."""

    usable: int
    weights: int
    activation: int
    non_torch: int
    available: int
    exact: bool


@dataclass(frozen=True)
class KvCacheReport:
    kv_bytes_per_token: int
    available_kv_gib: float
    kv_blocks: int
    kv_tokens: int
    max_model_len: int
    max_concurrency: float
    fits: bool
    max_model_len_that_fits: int
    max_num_seqs: Setting
    max_num_batched_tokens: Setting
    budget: MemoryBudget
    recommended_flags: dict[str, int | float | str]
    reasons: tuple[str, ...] = field(default_factory=tuple)
    notes: tuple[str, ...] = field(default_factory=tuple)

    def contract_json(self) -> dict[str, object]:
        """Exactly the keys of docs/contracts.md#kv-cache-calculator."""
        return {
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "available_kv_gib": round(self.available_kv_gib, 2),
            "kv_tokens": self.kv_tokens,
            "max_concurrency": round(self.max_concurrency, 2),
            "fits": self.fits,
            "max_model_len_that_fits": self.max_model_len_that_fits,
            "recommended_flags": self.recommended_flags,
        }


def kv_dtype_bytes(kv_cache_dtype: str, dtype: str, architecture: ModelArchitecture) -> int:
    """Bytes per KV element: ``auto`` follows the model dtype (fp32 models are served in 16 bits)."""
    chosen = kv_cache_dtype.lower()
    if chosen == "auto":
        chosen = dtype.lower()
        if chosen == "auto":
            return 2
    if chosen not in _KV_DTYPE_BYTES:
        raise RunbookError(f"unknown KV cache dtype {kv_cache_dtype!r} (known: auto, {', '.join(_KV_DTYPE_BYTES)})")
    return _KV_DTYPE_BYTES[chosen]


def layers_per_gpu(architecture: ModelArchitecture, pipeline_parallel_size: int) -> int:
    """Pipeline parallelism splits the layers; the stage with the most layers bounds the cache."""
    return math.ceil(architecture.num_hidden_layers / pipeline_parallel_size)


def kv_heads_per_gpu(architecture: ModelArchitecture, tensor_parallel_size: int) -> int:
    """KV heads split across tensor-parallel ranks; with fewer heads than ranks each rank keeps a copy of one."""
    heads = architecture.num_key_value_heads
    if heads % tensor_parallel_size and tensor_parallel_size % heads:
        raise RunbookError(
            f"--tensor-parallel-size {tensor_parallel_size} does not divide the model's {heads} KV heads "
            "(vLLM refuses this)"
        )
    return max(1, heads // tensor_parallel_size)


def kv_bytes_per_token(plan: ServingPlan) -> int:
    """KV bytes one token occupies on one GPU."""
    architecture = plan.architecture
    element = kv_dtype_bytes(plan.kv_cache_dtype, plan.dtype, architecture)
    layers = layers_per_gpu(architecture, plan.pipeline_parallel_size)
    if architecture.is_mla:
        return layers * architecture.mla_latent_dim * element
    heads = kv_heads_per_gpu(architecture, plan.tensor_parallel_size)
    return 2 * layers * heads * architecture.head_dim * element


def safe_max_utilization(total_bytes: int) -> float:
    """The highest --gpu-memory-utilization to recommend on a card: 0.95, less on small cards so that
    :data:`MIN_HEADROOM_GIB` stays outside vLLM's budget."""
    headroom_share = MIN_HEADROOM_GIB * GIB / total_bytes if total_bytes > 0 else 1.0
    return min(SAFE_MAX_UTILIZATION, math.floor((1 - headroom_share) * 100) / 100)


# --- vLLM's batch defaults, release by release ----------------------------------------------------------
#
# With neither flag given, the API server picks --max-num-seqs and --max-num-batched-tokens from the engine
# and the GPU (vllm/engine/arg_utils.py; docs/upstream-facts.md#vllm-defaults-by-version). The V0 engine: 256
# requests. The V1 engine (the default from 0.8.0) follows the rows of :data:`V1_BATCH_DEFAULTS`. A change ships in
# the first release tagged after its merge: 0.8.3 came out by 2025-04-07, 0.8.4 by 2025-04-21 and 0.8.5 by
# 2025-04-29 (the release notes quoted in dependabot PRs of those days), 0.9.0 on 2025-05-15 (its release notes
# list PR #17885).

V0_MAX_NUM_SEQS = 256
V1_LARGE_MAX_NUM_SEQS, V1_SMALL_MAX_NUM_SEQS = 1024, 256
V1_LARGE_BATCHED_TOKENS, V1_SMALL_BATCHED_TOKENS = 8192, 2048  # the API server's; the LLM class doubles them


@dataclass(frozen=True)
class GpuClass:
    """The GPUs a vLLM release gives its large batch defaults, decided as vLLM decides it at start-up: the device's
    total memory and/or a substring of its lower-cased name (``torch.cuda.get_device_name``)."""

    large: str  # the GPUs that get the large value, for messages
    small: str  # the others
    min_bytes: int = 0
    names: tuple[str, ...] = ()  # one of these must be in the name (empty: any name)
    excluded: tuple[str, ...] = ()  # none of these may be in the name
    unless: str = ""  # with the name unknown: "<small> if the GPU is <unless>"
    excluded_label: str = ""  # a large card left out by its name

    def describe(self, gpu: Gpu, large: bool) -> str:
        """The GPUs this one is counted with, for messages."""
        if large:
            return self.large
        if self.excluded_label and gpu.total_bytes >= self.min_bytes:
            return self.excluded_label
        return self.small

    def holds(self, gpu: Gpu) -> bool | None:
        """True when the GPU gets the large defaults, None when that depends on a name that is not known."""
        if gpu.total_bytes < self.min_bytes:
            return False
        if not self.names and not self.excluded:
            return True
        if gpu.name is None:
            return None
        name = gpu.name.lower()
        if self.names and not any(part in name for part in self.names):
            return False
        return not any(part in name for part in self.excluded)


EVERY_GPU = GpuClass("every GPU", "no GPU")
H100_H200_BY_NAME = GpuClass(
    "H100 and H200 (by device name)", "GPUs other than H100 and H200", names=("h100", "h200"), unless="not an H100/H200"
)
AT_LEAST_70_GIB = GpuClass("GPUs of 70 GiB or more", "GPUs under 70 GiB", min_bytes=70 * GIB)
AT_LEAST_70_GIB_NOT_A100 = GpuClass(
    "GPUs of 70 GiB or more other than A100",
    "GPUs under 70 GiB",
    min_bytes=70 * GIB,
    excluded=("a100",),
    unless="an A100",
    excluded_label="A100 (left out of the large defaults by name)",
)


@dataclass(frozen=True)
class BatchDefaults:
    """One row of vLLM's V1 defaults: from release ``since`` on, until the next row's."""

    since: tuple[int, int, int]
    change: str  # the upstream change that set the row, and where it is read
    seqs: GpuClass  # the GPUs with V1_LARGE_MAX_NUM_SEQS
    tokens: GpuClass  # the GPUs with V1_LARGE_BATCHED_TOKENS


V1_BATCH_DEFAULTS: tuple[BatchDefaults, ...] = (
    # EngineArgs.__post_init__: ``max_num_seqs = 256 if not envs.VLLM_USE_V1 else 1024``; the token budget from
    # vllm PR #12369 ("[V1] Increase default batch size for H100/H200": ``"h100" in device_name or "h200" in
    # device_name``). V1 became the default engine in 0.8.0; vllm issues #12529 and #14992 report the 1024.
    BatchDefaults((0, 8, 0), "the V1 engine's first defaults", EVERY_GPU, H100_H200_BY_NAME),
    # vllm PR #16158 "[V1] Revert the default max_num_seqs to V0 values for most hardware" (merged 2025-04-07):
    # 256 except on H100/H200, matched by name.
    BatchDefaults((0, 8, 4), "vllm PR #16158", H100_H200_BY_NAME, H100_H200_BY_NAME),
    # vllm PR #17073 "[Minor] Use larger batch sizes for A100/B100/B200/MI300x" (opened 2025-04-23, after 0.8.4):
    # by memory, ``device_memory >= 70 * GiB_bytes`` (the reviewers' request), so every large card, A100 80GB
    # included.
    BatchDefaults((0, 8, 5), "vllm PR #17073", AT_LEAST_70_GIB, AT_LEAST_70_GIB),
    # vllm PR #17885 "[Perf] Use small max_num_batched_tokens for A100" (v0.9.0 release notes):
    # ``device_memory >= 70 * GiB_bytes and "a100" not in device_name``, for both defaults; still the rule in
    # EngineArgs.get_batch_defaults of later releases.
    BatchDefaults((0, 9, 0), "vllm PR #17885", AT_LEAST_70_GIB_NOT_A100, AT_LEAST_70_GIB_NOT_A100),
)


def batch_defaults_row(version: tuple[int, int, int] | None) -> BatchDefaults | None:
    """The V1 row in force for ``version`` (the newest for an unknown version); None for the V0 engine (< 0.8)."""
    if version is None:
        return V1_BATCH_DEFAULTS[-1]
    rows = [row for row in V1_BATCH_DEFAULTS if row.since <= version]
    return rows[-1] if rows else None


def _span(row: BatchDefaults, version: tuple[int, int, int] | None) -> str:
    """``in 0.8.4``, ``in 0.8.0-0.8.3``, ``in 0.9.0 and later`` (``current`` for an unknown version)."""
    if version is None:
        return "in current releases (version unknown)"
    index = V1_BATCH_DEFAULTS.index(row)
    first = ".".join(map(str, row.since))
    if index + 1 == len(V1_BATCH_DEFAULTS):
        return f"in {first} and later"
    following = V1_BATCH_DEFAULTS[index + 1].since
    last = (following[0], following[1], following[2] - 1) if following[2] else None
    if last is None or last == row.since:
        return f"in {first}"
    return f"in {first}-{'.'.join(map(str, last))}"


def _by_class(
    gpus: GpuClass, gpu: Gpu, large: int, small: int, row: BatchDefaults, version: tuple[int, int, int] | None
) -> Setting:
    where = f"vLLM V1 default {_span(row, version)} ({row.change})"
    holds = gpus.holds(gpu)
    if holds is None:
        assumed = large if gpu.total_bytes >= 70 * GIB else small
        other = small if assumed == large else large
        return Setting(assumed, f"{where} on {gpus.large}, but {other} if the GPU is {gpus.unless} (name unknown)")
    return Setting(large if holds else small, f"{where} on {gpus.describe(gpu, holds)}")


def default_max_num_seqs(version: tuple[int, int, int] | None, gpu: Gpu) -> Setting:
    """vLLM's default ``--max-num-seqs`` (API server) for the release and the GPU: :data:`V1_BATCH_DEFAULTS`."""
    row = batch_defaults_row(version)
    if row is None:
        return Setting(V0_MAX_NUM_SEQS, "vLLM default for the V0 engine (< 0.8)")
    return _by_class(row.seqs, gpu, V1_LARGE_MAX_NUM_SEQS, V1_SMALL_MAX_NUM_SEQS, row, version)


def default_max_num_batched_tokens(version: tuple[int, int, int] | None, gpu: Gpu, max_model_len: int) -> Setting:
    """vLLM's default token budget per step (API server), which sizes the activation peak it profiles."""
    row = batch_defaults_row(version)
    if row is None:
        if max_model_len > 32768:
            return Setting(2048, "V0 default with chunked prefill (enabled above 32K context)")
        return Setting(max(max_model_len, 2048), "V0 default without chunked prefill: max(max-model-len, 2048)")
    return _by_class(row.tokens, gpu, V1_LARGE_BATCHED_TOKENS, V1_SMALL_BATCHED_TOKENS, row, version)


def _setting(flag: int | None, default: Setting) -> Setting:
    return Setting(flag, "flag") if flag is not None else default


def weights_bytes_per_gpu(plan: ServingPlan) -> int:
    if plan.weights_gib is not None:
        return int(plan.weights_gib * GIB)
    architecture = plan.architecture
    per_parameter = 4.0 if plan.dtype.lower() in ("float32", "float") else architecture.weight_bytes_per_parameter
    total = architecture.parameter_count * per_parameter
    return int(total / (plan.tensor_parallel_size * plan.pipeline_parallel_size))


def activation_peak_bytes(plan: ServingPlan, batched_tokens: int, num_seqs: int) -> int:
    """The profiled forward pass's peak: MLP intermediates and residual per token, plus sampler logits."""
    architecture = plan.architecture
    if architecture.num_experts:
        mlp_width = architecture.moe_intermediate_size * max(1, architecture.experts_per_token)
    else:
        mlp_width = architecture.intermediate_size
    per_token = 2 * (3 * mlp_width / plan.tensor_parallel_size + 2 * architecture.hidden_size)
    logits = num_seqs * architecture.vocab_size * LOGITS_BYTES
    return int(batched_tokens * per_token + logits)


def memory_budget(plan: ServingPlan, batched_tokens: int, num_seqs: int) -> MemoryBudget:
    usable = int(plan.gpu.total_bytes * plan.gpu_memory_utilization)
    if plan.available_kv_gib is not None:
        available = int(plan.available_kv_gib * GIB)
        return MemoryBudget(usable, 0, 0, 0, available, exact=True)
    weights = weights_bytes_per_gpu(plan)
    activation = activation_peak_bytes(plan, batched_tokens, num_seqs)
    non_torch = int(NON_TORCH_GIB * GIB)
    return MemoryBudget(usable, weights, activation, non_torch, usable - weights - activation - non_torch, exact=False)


def kv_blocks(available_bytes: int, bytes_per_token: int, block_size: int) -> int:
    """Whole blocks that fit; none when the budget is negative (vLLM then refuses to start)."""
    return max(0, available_bytes // (bytes_per_token * block_size))


def blocks_for(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


def _validate(plan: ServingPlan, max_model_len: int) -> None:
    for name, value in (
        ("--tensor-parallel-size", plan.tensor_parallel_size),
        ("--pipeline-parallel-size", plan.pipeline_parallel_size),
        ("--block-size", plan.block_size),
        ("--max-model-len", max_model_len),
    ):
        if value < 1:
            raise RunbookError(f"{name} must be at least 1, got {value}")
    if not 0 < plan.gpu_memory_utilization <= 1:
        raise RunbookError(f"--gpu-memory-utilization must be in (0, 1], got {plan.gpu_memory_utilization}")
    if plan.gpu.total_bytes <= 0:
        raise RunbookError("GPU memory must be positive")
    if plan.target_concurrency is not None and plan.target_concurrency < 1:
        raise RunbookError(f"--target-concurrency must be at least 1, got {plan.target_concurrency}")


def _notes(plan: ServingPlan, budget: MemoryBudget, max_model_len: int) -> list[str]:
    architecture = plan.architecture
    notes = []
    if budget.exact:
        notes.append("available KV memory taken from the engine log: token arithmetic is exact (to its 0.01 GiB)")
    else:
        notes.append(
            "available KV memory is an estimate (weights, activation peak, 0.3 GiB non-torch); it leaves out CUDA "
            "graphs (vLLM >= 0.21 subtracts them first) and quantization workspaces; give --available-kv-gib "
            "from the engine's 'Available KV cache memory' line for exact numbers"
        )
    if max_model_len > architecture.max_position_embeddings:
        notes.append(
            f"--max-model-len {max_model_len} exceeds the model's max_position_embeddings "
            f"{architecture.max_position_embeddings}: vLLM refuses it unless rope scaling allows it"
        )
    if architecture.sliding_window_layers:
        full_layers = architecture.num_hidden_layers - architecture.sliding_window_layers
        window = architecture.sliding_window or 0
        held = full_layers * max_model_len + architecture.sliding_window_layers * min(window, max_model_len)
        all_full = architecture.num_hidden_layers * max_model_len
        notes.append(
            f"{architecture.sliding_window_layers} of {architecture.num_hidden_layers} layers use a "
            f"{window}-token sliding window: concurrency is given as if every layer kept the full context "
            f"(a lower bound); vLLM releases that free blocks outside the window reach up to "
            f"{all_full / held:.2f} times more"
        )
    if architecture.is_mla:
        notes.append("MLA model: one compressed latent per layer and token, replicated on every tensor-parallel rank")
    if plan.gpu_memory_utilization > SAFE_MAX_UTILIZATION:
        notes.append(
            f"--gpu-memory-utilization {plan.gpu_memory_utilization} leaves little headroom for CUDA graphs "
            "and other processes (VLLM_MEMORY_UTILIZATION_RISKY above 0.95)"
        )
    return notes


def _larger_tensor_parallel(plan: ServingPlan, needed_tokens: int) -> int | None:
    """The smallest larger tensor-parallel size (2, 4, 8) whose estimate holds the needed tokens."""
    for size in (2, 4, 8):
        heads = plan.architecture.num_key_value_heads
        if size <= plan.tensor_parallel_size or (heads % size and size % heads):
            continue
        wider = replace(plan, tensor_parallel_size=size, target_concurrency=None)
        if estimate(wider).kv_tokens >= needed_tokens:
            return size
    return None


def _recommend(
    plan: ServingPlan,
    budget: MemoryBudget,
    bytes_per_token: int,
    kv_tokens: int,
    max_model_len: int,
    max_num_seqs: Setting,
) -> tuple[dict[str, int | float | str], list[str]]:
    """Flags that make the wanted number of full-length requests fit, the cheapest change first.

    Without ``--target-concurrency`` the goal is one request of max-model-len (the engine starts).
    """
    target = plan.target_concurrency or 1
    needed_tokens = target * blocks_for(max_model_len, plan.block_size) * plan.block_size
    flags: dict[str, int | float | str] = {}
    reasons: list[str] = []
    if max_num_seqs.value < target:
        flags["--max-num-seqs"] = target
        reasons.append(f"--max-num-seqs {max_num_seqs.value} would cap running requests below {target}")
    if kv_tokens >= needed_tokens:
        return flags, reasons
    if not budget.exact and budget.weights + budget.activation + budget.non_torch > budget.usable:
        reasons.append(
            f"the weights ({budget.weights / GIB:.2f} GiB per GPU) and the activation peak do not fit in "
            f"{budget.usable / GIB:.2f} GiB: the engine fails before it sizes the KV cache (GPU OOM)"
        )
    element = kv_dtype_bytes(plan.kv_cache_dtype, plan.dtype, plan.architecture)
    fp8_tokens = kv_blocks(budget.available, bytes_per_token // element, plan.block_size) * plan.block_size
    if element > 1 and fp8_tokens >= needed_tokens:
        flags["--kv-cache-dtype"] = "fp8"
        reasons.append("an fp8 KV cache halves the bytes per token (check the GPU and attention backend support it)")
        return flags, reasons
    shortfall_bytes = (needed_tokens - kv_tokens) * bytes_per_token
    utilization = plan.gpu_memory_utilization + shortfall_bytes / plan.gpu.total_bytes
    if utilization <= safe_max_utilization(plan.gpu.total_bytes):
        flags["--gpu-memory-utilization"] = math.ceil(utilization * 100) / 100
        reasons.append(f"--gpu-memory-utilization {flags['--gpu-memory-utilization']} adds the missing KV memory")
        return flags, reasons
    wider = None if budget.exact else _larger_tensor_parallel(plan, needed_tokens)
    if wider is not None:
        flags["--tensor-parallel-size"] = wider
        reasons.append(f"spreading the model over {wider} GPUs leaves room for the KV cache")
        return flags, reasons
    per_request = (kv_tokens // target) // plan.block_size * plan.block_size
    if per_request >= plan.block_size:
        flags["--max-model-len"] = per_request
        reasons.append(f"{target} request(s) fit only up to {per_request} tokens each in {kv_tokens} KV tokens")
        if plan.target_concurrency is not None:
            replicas = math.ceil(needed_tokens / kv_tokens)
            reasons.append(f"or keep --max-model-len {max_model_len} and spread the load over {replicas} replicas")
    else:
        reasons.append("not one request fits: use a larger GPU, more GPUs per replica or a smaller (quantized) model")
    return flags, reasons


def estimate(plan: ServingPlan) -> KvCacheReport:
    """The full answer for one serving plan."""
    architecture = plan.architecture
    max_model_len = plan.max_model_len or architecture.max_position_embeddings
    _validate(plan, max_model_len)
    max_num_seqs = _setting(plan.max_num_seqs, default_max_num_seqs(plan.vllm_version, plan.gpu))
    batched = _setting(
        plan.max_num_batched_tokens, default_max_num_batched_tokens(plan.vllm_version, plan.gpu, max_model_len)
    )
    bytes_per_token = kv_bytes_per_token(plan)
    budget = memory_budget(plan, batched.value, max_num_seqs.value)
    blocks = kv_blocks(budget.available, bytes_per_token, plan.block_size)
    kv_tokens = blocks * plan.block_size
    flags, reasons = _recommend(plan, budget, bytes_per_token, kv_tokens, max_model_len, max_num_seqs)
    return KvCacheReport(
        kv_bytes_per_token=bytes_per_token,
        available_kv_gib=budget.available / GIB,
        kv_blocks=blocks,
        kv_tokens=kv_tokens,
        max_model_len=max_model_len,
        max_concurrency=kv_tokens / max_model_len,
        fits=blocks >= blocks_for(max_model_len, plan.block_size) and blocks > 0,
        max_model_len_that_fits=min(kv_tokens, architecture.max_position_embeddings),
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=batched,
        budget=budget,
        recommended_flags=flags,
        reasons=tuple(reasons),
        notes=tuple(_notes(plan, budget, max_model_len)),
    )
