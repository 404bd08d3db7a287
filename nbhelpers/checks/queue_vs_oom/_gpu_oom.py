"""``GPU_OOM``: CUDA out of memory in the logs, or weights computed larger than the GPU while the pods crash.

When the out-of-memory error is vLLM V1's sampler (or pooler) warm-up, "CUDA out of memory occurred when warming up
sampler with N dummy requests. Please try lowering `max_num_seqs` or `gpu_memory_utilization` ..." (vllm
``vllm/v1/worker/gpu_model_runner.py`` ``_dummy_sampler_run``, since v0.8.0: PRs #14508 and #14728; see
:mod:`nbhelpers.facts.vllm_log`), the batch of N requests is what did not fit: the sampler holds fp32 logits over
the whole vocabulary for each of them, and the top-k/top-p sort copies them again. The first fix is then a smaller
``--max-num-seqs`` (half of N), as vLLM's own message puts first; ``--gpu-memory-utilization`` is lowered too only
when it is above vLLM's default, and lowering it alone leaves the same N requests to warm up.
"""

from __future__ import annotations

import re

from nbhelpers.checks.queue_vs_oom._facts import (
    BATCHED_FLAG,
    CUDA_OOM,
    LEN_FLAG,
    NUMBER,
    SEQS_FLAG,
    TP_FLAG,
    UTIL_FLAG,
    EngineFacts,
    LogHit,
    number,
    scan,
)
from nbhelpers.checks.queue_vs_oom._memory import fitting, tensor_parallel_that_fits, weights_exceed_gpu
from nbhelpers.facts import engine, llmisvc
from nbhelpers.facts.vllm_log import WARMUP_OOM, warmup_oom_requests
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.models.vllm_memory import DEFAULT_GPU_MEMORY_UTILIZATION, GIB, default_max_num_batched_tokens

_OOM_ALLOCATION = re.compile(rf"Tried to allocate {NUMBER} ?(GiB|MiB|KiB)")
_OOM_CAPACITY = re.compile(rf"total capacity of {NUMBER} ?GiB of which {NUMBER} ?(GiB|MiB|KiB|bytes) is free")
_ENGINE_DEAD = re.compile(r"EngineDeadError|Engine loop has died|EngineCore encountered an issue")


def gpu_oom(facts: EngineFacts) -> Finding | None:
    hits = scan(facts.logs, CUDA_OOM)
    if not hits:
        return _oom_computed(facts)
    dead = scan(facts.logs, _ENGINE_DEAD)
    details = []
    for hit in hits:
        allocation = _OOM_ALLOCATION.search(hit.line)
        capacity = _OOM_CAPACITY.search(hit.line)
        if allocation:
            detail = f"tried to allocate {number(allocation.group(1)):g} {allocation.group(2)}"
            if capacity:
                free = _gib(number(capacity.group(2)), capacity.group(3))
                detail += f" with {free:.2f} GiB free of {number(capacity.group(1)):.2f} GiB"
            details.append(detail)
    warmup = _warmup(facts)
    if warmup is not None:
        details.insert(0, f"warming up the {warmup.stage} with {warmup.requests} dummy requests")
    phases = sorted({hit.phase for hit in hits})
    when = " and ".join(phase if phase.startswith("in ") else f"while {phase}" for phase in phases)
    pods = sorted({hit.pod for hit in hits})
    restarts = facts.restarts()
    cause = (
        f"vLLM could not warm up its {warmup.stage} for {warmup.requests} requests at once ({SEQS_FLAG}, or fewer "
        f"when {BATCHED_FLAG} is smaller): its buffers, fp32 logits over the whole vocabulary per request, did not "
        "fit the memory left"
        if warmup is not None
        else "vLLM preallocates its KV cache at start-up, so an out-of-memory error means the weights, the activation "
        "peak or memory outside vLLM's budget (CUDA graphs, other processes) do not fit the card with these flags"
    )
    summary = (
        f"The GPU ran out of memory ({'; '.join(dict.fromkeys(details)) or 'CUDA out of memory'}) "
        f"{when} in {_where(pods, llmisvc.pod_roles(facts.evidence))}. {cause}; the engine dies"
        + (", the container restarts" if restarts else "")
        + " and requests fail until it is back."
    )
    fix = _warmup_fix(facts, warmup) if warmup is not None else _oom_fix(facts, hits)
    if warmup is not None:
        hits = [*hits, *(hit for hit in [warmup.hit] if hit not in hits)]
    return Finding(
        code="GPU_OOM",
        title=f"CUDA out of memory in {len(pods)} pod(s) {when}",
        summary=summary,
        objects=tuple(
            dict.fromkeys([*facts.objects, *(f"Pod/{facts.evidence.target.namespace}/{pod}" for pod in pods)])
        ),
        evidence=tuple([hit.describe() for hit in hits + dead] + restarts + facts.memory_lines()),
        fix=fix,
    )


def _where(pods: list[str], roles: dict[str, str]) -> str:
    """``2 pod(s)``, or, for an LLMInferenceService, the pods with their llm-d role (``prefill pod x``)."""
    if not any(pod in roles for pod in pods):
        return f"{len(pods)} pod(s)"
    return ", ".join(
        f"{llmisvc.role_label(roles[pod], plural=False)} {pod}" if pod in roles else f"pod {pod}" for pod in pods
    )


def _oom_computed(facts: EngineFacts) -> Finding | None:
    """No out-of-memory line was seen (logs rotated or not captured), but the pods crash and the weights
    alone are larger than the GPU: loading them cannot succeed."""
    restarts = facts.restarts()
    if not restarts or not weights_exceed_gpu(facts):
        return None
    report = facts.estimate()
    assert report is not None and facts.plan is not None and facts.model is not None
    weights, total = report.budget.weights / GIB, facts.plan.gpu.total_bytes / GIB
    summary = (
        f"Computed (no log line of the crash was seen): {facts.model.name} needs about {weights:.1f} GiB of weights "
        f"per GPU at {TP_FLAG} {facts.plan.tensor_parallel_size}, more than the {total:.2f} GiB of the GPU, and the "
        "serving container keeps restarting: loading the weights runs out of GPU memory."
    )
    fix = _oom_fix(facts, [])
    return Finding(
        code="GPU_OOM",
        title=f"weights of {weights:.0f} GiB per GPU do not fit a {total:.0f} GiB GPU",
        summary=summary,
        objects=facts.objects,
        evidence=tuple(restarts + facts.memory_lines()),
        fix=fix,
    )


class _Warmup:
    """vLLM's sampler (or pooler) warm-up ran out of memory for ``requests`` dummy requests."""

    def __init__(self, hit: LogHit, stage: str, requests: int) -> None:
        self.hit = hit
        self.stage = stage
        self.requests = requests


def _warmup(facts: EngineFacts) -> _Warmup | None:
    """The sampler warm-up failure in the logs (current containers first), or None."""
    for hit in sorted(scan(facts.logs, WARMUP_OOM), key=lambda hit: hit.previous):
        requests = warmup_oom_requests(hit.match)
        if requests:
            return _Warmup(hit, hit.match.group(1), requests)
    return None


def halved(requests: int) -> int:
    """Half of a batch, on a multiple of 8 from 16 up (vLLM's CUDA graph sizes are multiples of 8)."""
    half = max(1, requests // 2)
    return half // 8 * 8 if half >= 16 else half


def _warmup_fix(facts: EngineFacts, warmup: _Warmup) -> Fix:
    """First a smaller --max-num-seqs (half the batch that failed), as vLLM's message says; the utilization back
    to vLLM's default only when it is above it."""
    lowered = halved(warmup.requests)
    in_effect = facts.ceiling()
    flag = (
        f" ({in_effect.origin})"
        if in_effect is not None and int(in_effect.value) == warmup.requests
        else f" (the batch vLLM warmed up; {in_effect.origin})"
        if in_effect is not None
        else ""
    )
    if lowered >= warmup.requests:
        return _oom_fix(facts, [warmup.hit])
    changes = {SEQS_FLAG: str(lowered)}
    current = facts.utilization().value
    if current > DEFAULT_GPU_MEMORY_UTILIZATION:
        changes[UTIL_FLAG] = f"{DEFAULT_GPU_MEMORY_UTILIZATION:g}"
    fitted, notes = fitting(facts, changes)
    if fitted is None:
        return Fix(what=" ".join(notes))
    reasons = [
        f"first lower {SEQS_FLAG} from {warmup.requests}{flag} to {fitted[SEQS_FLAG]}, as vLLM's own message asks "
        f"('Please try lowering `max_num_seqs` or `gpu_memory_utilization`'): the {warmup.stage}'s warm-up buffers "
        "shrink with it, and each pod then runs at most that many requests at once (add replicas if that is too few)"
    ]
    if UTIL_FLAG in fitted:
        reasons.append(
            f"{UTIL_FLAG} {fitted[UTIL_FLAG]} (from {current:g}) leaves memory outside vLLM's budget for CUDA graphs, "
            "the sampler and the CUDA context"
        )
    else:
        reasons.append(
            f"keep {UTIL_FLAG} at {current:g} ({facts.utilization().origin}); lower it only if the warm-up still fails"
        )
    if LEN_FLAG in fitted:
        reasons.append(f"{LEN_FLAG} {fitted[LEN_FLAG]} is what then still fits the KV cache")
    what = "The sampler warm-up did not fit: " + "; ".join(reasons) + ". " + " ".join(notes)
    plan = facts.args_patch(fitted)
    return Fix.from_plan(what, plan, no_patch=facts.no_patch_reason())


def _oom_fix(facts: EngineFacts, hits: list[LogHit]) -> Fix:
    if all(hit.phase == "loading weights" for hit in hits):
        text = (
            "The weights alone do not fit the GPU (the error came before vLLM finished loading them), so no flag "
            "of a single GPU helps: use more GPUs per replica, a quantized model, or a larger GPU."
        )
        mig = engine.requested_mig_slice(facts.workload)
        if mig is not None:
            # MIG slices have no NVLink or CUDA IPC between them (NVIDIA MIG user guide; RAPIDS "Multi-Instance
            # GPU"): a bigger slice or a whole GPU, not tensor parallelism over slices.
            return Fix(
                what=text + f" The pod runs on a MIG slice ({mig.resource}), not the whole card: request a larger "
                "MIG profile or a whole GPU (nvidia.com/gpu) that holds the weights; slices have no NVLink or CUDA "
                f"IPC between them, so spreading the model over several with {TP_FLAG} is no way out."
            )
        size = tensor_parallel_that_fits(facts)
        if size:
            text += (
                f" The memory model fits it at {TP_FLAG} {size}: request {size} GPUs (nvidia.com/gpu: {size}) "
                "and mount a memory-backed /dev/shm."
            )
        return Fix(what=text)
    current = facts.utilization().value
    lowered = DEFAULT_GPU_MEMORY_UTILIZATION if current > DEFAULT_GPU_MEMORY_UTILIZATION else round(current - 0.05, 2)
    changes = {UTIL_FLAG: f"{lowered:g}"}
    batched = facts.int_flag(BATCHED_FLAG)
    if batched is not None and facts.gpu is not None:
        default = default_max_num_batched_tokens(facts.version, facts.gpu.gpu, facts.int_flag(LEN_FLAG) or batched)
        if batched > default.value:
            changes[BATCHED_FLAG] = str(default.value)
    fitted, notes = fitting(facts, changes)
    if fitted is None:
        return Fix(what=" ".join(notes))
    reasons = [
        f"{UTIL_FLAG} {fitted[UTIL_FLAG]} leaves memory outside vLLM's budget for CUDA graphs, the sampler and "
        "the CUDA context"
    ]
    if BATCHED_FLAG in fitted:
        reasons.append(f"{BATCHED_FLAG} {fitted[BATCHED_FLAG]} (the default here) shrinks the activation peak")
    if LEN_FLAG in fitted:
        reasons.append(f"{LEN_FLAG} {fitted[LEN_FLAG]} is what then still fits the smaller KV cache")
    what = "Choose flags that fit the card: " + "; ".join(reasons) + ". " + " ".join(notes)
    plan = facts.args_patch(fitted)
    return Fix.from_plan(what, plan, no_patch=facts.no_patch_reason())


def _gib(amount: float, unit: str) -> float:
    return amount * {"GiB": 1.0, "MiB": 1 / 1024, "KiB": 1 / 1024**2, "bytes": 1 / GIB}[unit]
