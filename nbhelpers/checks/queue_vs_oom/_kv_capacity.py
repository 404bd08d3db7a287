"""``VLLM_KV_CAPACITY_EXCEEDED``: one full-length request does not fit the KV cache, from the engine's refusal
in the logs or computed by the memory model.
"""

from __future__ import annotations

import re

from nbhelpers.checks.queue_vs_oom._facts import (
    CUDA_OOM,
    LEN_FLAG,
    NUMBER,
    TP_FLAG,
    UTIL_FLAG,
    EngineFacts,
    LogHit,
    number,
    round_down,
    scan,
)
from nbhelpers.checks.queue_vs_oom._memory import (
    tensor_parallel_that_fits,
    tokens_with_margin,
    utilization_cap,
    weights_exceed_gpu,
)
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.models.vllm_memory import GIB, KvCacheReport

_KV_V1 = re.compile(
    rf"models?'s max seq len \({NUMBER}\), \(?{NUMBER} ?GiB KV cache is needed, which is larger than the "
    rf"available KV cache memory \({NUMBER} ?GiB\)"
)
_KV_V1_ESTIMATE = re.compile(rf"estimated maximum model length is {NUMBER}")
_KV_V0 = re.compile(
    rf"max seq len \({NUMBER}\) is larger than the maximum number of tokens that can be stored in KV cache "
    rf"\({NUMBER}\)"
)
_KV_NONE = re.compile(r"No available memory for the cache blocks")


def kv_capacity_exceeded(facts: EngineFacts) -> Finding | None:
    v1 = scan(facts.logs, _KV_V1)
    v0 = scan(facts.logs, _KV_V0)
    empty = scan(facts.logs, _KV_NONE)
    if v1 or v0:
        return _capacity_from_log(facts, v1, v0)
    if empty:
        return _no_cache_blocks(facts, empty)
    return _capacity_computed(facts)


def _capacity_from_log(facts: EngineFacts, v1: list[LogHit], v0: list[LogHit]) -> Finding:
    hit = (v1 or v0)[0]
    rejected = int(number(hit.match.group(1)))
    lines = [hit.describe() for hit in v1 + v0]
    if v1:
        needed, available = number(hit.match.group(2)), number(hit.match.group(3))
        estimated = _KV_V1_ESTIMATE.search(hit.line)
        fits = int(number(estimated.group(1))) if estimated else None
        engine = (
            f"vLLM needs {needed:.2f} GiB of KV cache for one request of {rejected:,} tokens but has "
            f"{available:.2f} GiB"
        )
    else:
        fits = int(number(hit.match.group(2)))
        engine = f"vLLM can store {fits:,} tokens in its KV cache, fewer than one request of {rejected:,}"
    what = engine + (f"; its own estimate of the longest length that fits is {fits:,}" if fits else "")
    summary = (
        f"{what}. The engine refuses to start, so the container exits and restarts: the pods never turn ready "
        f"and every request fails (503) until the configuration changes."
    )
    change = {LEN_FLAG: str(round_down(fits))} if fits else {}
    return _capacity_finding(facts, summary, lines, change, rejected)


def _no_cache_blocks(facts: EngineFacts, hits: list[LogHit]) -> Finding:
    report = facts.estimate()
    detail = ""
    if report is not None and not report.budget.exact:
        budget = report.budget
        detail = (
            f" The memory model agrees: usable {budget.usable / GIB:.2f} GiB minus weights {budget.weights / GIB:.2f}"
            f" GiB and activation peak {budget.activation / GIB:.2f} GiB leaves {budget.available / GIB:.2f} GiB."
        )
    summary = (
        "vLLM found no memory at all for KV-cache blocks after loading the weights and profiling a forward pass "
        f'("No available memory for the cache blocks"): the engine refuses to start.{detail}'
    )
    remediation = _more_memory_text(facts, report)
    return Finding(
        code="VLLM_KV_CAPACITY_EXCEEDED",
        title="no GPU memory left for the KV cache after the weights",
        summary=summary,
        objects=facts.objects,
        evidence=tuple([hit.describe() for hit in hits] + facts.memory_lines()),
        fix=Fix(what=remediation),
    )


def _capacity_computed(facts: EngineFacts) -> Finding | None:
    if facts.engine.kv_cache_tokens or facts.engine.gpu_blocks or facts.engine.max_concurrency:
        return None  # the engine sized its cache and started: its numbers beat any estimate
    if scan(facts.logs, CUDA_OOM) or weights_exceed_gpu(facts):
        return None  # the engine dies before it sizes a cache: GPU_OOM says so
    report = facts.estimate()
    if report is None or report.fits:
        return None
    needed_gib = report.max_model_len * report.kv_bytes_per_token / GIB
    summary = (
        f"Computed (no start-up line of the engine was seen): one request of --max-model-len "
        f"{report.max_model_len:,} tokens needs {needed_gib:.2f} GiB of KV cache, but about "
        f"{report.available_kv_gib:.2f} GiB ({report.kv_tokens:,} tokens) remain after the weights and the "
        "activation peak. vLLM checks this at start-up and refuses to start, so the pods never turn ready."
    )
    usable = tokens_with_margin(facts, report)
    change = {LEN_FLAG: str(round_down(usable))} if usable >= 16 else {}
    return _capacity_finding(facts, summary, [], change, report.max_model_len)


def _capacity_finding(
    facts: EngineFacts, summary: str, lines: list[str], change: dict[str, str], rejected: int
) -> Finding:
    plan = facts.args_patch(change) if change else None
    if change:
        what = (
            f"Set {LEN_FLAG} {change[LEN_FLAG]} (the longest context that fits, rounded down): requests longer "
            "than that are refused with a 400 instead of the whole service failing. To keep "
            f"{rejected:,} tokens instead, give the KV cache more memory: a GPU with more memory, more GPUs "
            f"({TP_FLAG}), --kv-cache-dtype fp8, or {UTIL_FLAG} up to {utilization_cap(facts)}."
        )
    else:
        what = _more_memory_text(facts, facts.estimate())
    report = facts.estimate()
    if report is not None and report.recommended_flags and report.budget.available > 0:
        advice = " ".join(f"{name} {value}" for name, value in report.recommended_flags.items())
        what += f" The memory model's cheapest change that keeps {report.max_model_len:,} tokens: {advice}."
    return Finding(
        code="VLLM_KV_CAPACITY_EXCEEDED",
        title=f"--max-model-len {rejected:,} does not fit the KV cache",
        summary=summary,
        objects=facts.objects,
        evidence=tuple(lines + facts.memory_lines() + facts.restarts()),
        fix=Fix.from_plan(what, plan, no_patch=facts.no_patch_reason()),
    )


def _more_memory_text(facts: EngineFacts, report: KvCacheReport | None) -> str:
    text = (
        "Leave more of the GPU to the KV cache: a smaller (quantized) model, a GPU with more memory, or more "
        f"GPUs per replica ({TP_FLAG})."
    )
    if report is not None:
        size = tensor_parallel_that_fits(facts)
        if size:
            text += f" The memory model fits the model and its context at {TP_FLAG} {size} ({size} GPUs per pod)."
    return text
