"""What the memory model says fits the GPU: KV tokens with a safety margin, weights larger than the card, the
tensor-parallel size that fits, and flags completed with a --max-model-len that still fits.
"""

from __future__ import annotations

from dataclasses import replace

from nbhelpers.checks.queue_vs_oom._facts import (
    BATCHED_FLAG,
    LEN_FLAG,
    SEQS_FLAG,
    TP_FLAG,
    UTIL_FLAG,
    EngineFacts,
    round_down,
)
from nbhelpers.models.vllm_memory import GIB, SAFE_MAX_UTILIZATION, KvCacheReport, safe_max_utilization

ESTIMATE_MARGIN_GIB = 0.6  # the memory model's largest measured error against real start-ups is 0.52 GiB


def utilization_cap(facts: EngineFacts) -> float:
    """The highest --gpu-memory-utilization worth suggesting on this card (less than 0.95 on small ones)."""
    return safe_max_utilization(facts.gpu.gpu.total_bytes) if facts.gpu is not None else SAFE_MAX_UTILIZATION


def tokens_with_margin(facts: EngineFacts, report: KvCacheReport) -> int:
    """KV tokens that fit when the estimate is ESTIMATE_MARGIN_GIB too optimistic (exact numbers need none)."""
    margin = 0 if report.budget.exact else int(ESTIMATE_MARGIN_GIB * GIB)
    assert facts.plan is not None
    block = facts.plan.block_size
    blocks = max(0, (report.budget.available - margin) // (report.kv_bytes_per_token * block))
    return int(min(blocks * block, facts.plan.architecture.max_position_embeddings))


def weights_exceed_gpu(facts: EngineFacts) -> bool:
    """The estimated weights per GPU are larger than the whole GPU: loading them runs out of memory."""
    report = facts.estimate()
    return report is not None and facts.plan is not None and report.budget.weights > facts.plan.gpu.total_bytes


def tensor_parallel_that_fits(facts: EngineFacts) -> int | None:
    if facts.plan is None:
        return None
    heads = facts.plan.architecture.num_key_value_heads
    for size in (2, 4, 8):
        if size <= facts.plan.tensor_parallel_size or (heads % size and size % heads):
            continue
        wider = replace(facts.plan, tensor_parallel_size=size, weights_gib=None, available_kv_gib=None)
        report = facts.estimate(wider)
        if report is not None and report.fits and report.budget.available > 0:
            return size
    return None


def fitting(facts: EngineFacts, changes: dict[str, str]) -> tuple[dict[str, str] | None, list[str]]:
    """``changes`` plus a --max-model-len that still fits, when the memory model can tell (None: nothing fits)."""
    if facts.plan is None:
        return dict(changes), [
            f"({facts.describe_plan()}: check the engine's 'Maximum concurrency' line after the change.)"
        ]
    plan = replace(
        facts.plan,
        gpu_memory_utilization=float(changes.get(UTIL_FLAG, facts.plan.gpu_memory_utilization)),
        max_num_batched_tokens=int(changes[BATCHED_FLAG])
        if BATCHED_FLAG in changes
        else facts.plan.max_num_batched_tokens,
        max_num_seqs=int(changes[SEQS_FLAG]) if SEQS_FLAG in changes else facts.plan.max_num_seqs,
        available_kv_gib=None,
    )
    report = facts.estimate(plan)
    if report is None:
        return dict(changes), [f"({facts.describe_plan()}, but it cannot size this configuration.)"]
    tokens = tokens_with_margin(facts, report)
    if tokens < 16:
        size = tensor_parallel_that_fits(facts)
        more = f" ({TP_FLAG} {size} would)" if size else ""
        return None, [
            f"No flag on one GPU fits: the memory model leaves {report.available_kv_gib:.2f} GiB for the KV cache "
            f"after the weights and activations; use more GPUs per replica{more}, a quantized model or a larger GPU."
        ]
    fitted = dict(changes)
    if tokens < report.max_model_len:
        fitted[LEN_FLAG] = str(round_down(tokens))
    concurrency = tokens / int(fitted.get(LEN_FLAG, report.max_model_len))
    return fitted, [
        f"The memory model estimates {tokens:,} KV tokens with these flags (after a {ESTIMATE_MARGIN_GIB} GiB "
        f"safety margin), {concurrency:.2f} requests of full length at once; confirm with the engine's 'GPU KV "
        "cache size' line after the rollout."
    ]
