"""``VLLM_MEMORY_UTILIZATION_RISKY``: --gpu-memory-utilization leaves no headroom, or asks for more than was free."""

from __future__ import annotations

import math
import re

from nbhelpers.checks.queue_vs_oom._facts import LEN_FLAG, NUMBER, UTIL_FLAG, EngineFacts, LogHit, number, scan
from nbhelpers.checks.queue_vs_oom._memory import fitting
from nbhelpers.facts.engine import Valued
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.models.vllm_memory import DEFAULT_GPU_MEMORY_UTILIZATION, SAFE_MAX_UTILIZATION

_FREE_MEMORY = re.compile(
    rf"Free memory on device[^(]*\({NUMBER}/{NUMBER} ?GiB\) on startup is less than desired GPU memory "
    rf"utilization \({NUMBER}, {NUMBER} ?GiB\)"
)


def utilization_risky(facts: EngineFacts) -> Finding | None:
    hits = scan(facts.logs, _FREE_MEMORY)
    utilization = facts.utilization()
    if hits:
        return _free_memory_short(facts, hits)
    if utilization.value > SAFE_MAX_UTILIZATION:
        return _utilization_too_high(facts, utilization)
    return None


def _utilization_too_high(facts: EngineFacts, utilization: Valued) -> Finding:
    summary = (
        f"{utilization.origin} lets vLLM take {utilization.value:.0%} of the GPU's memory for weights, activations "
        f"and KV cache, leaving {1 - utilization.value:.0%} for everything outside its budget: CUDA graphs, the "
        "CUDA context and NCCL buffers, and any other process on the GPU. Above "
        f"{SAFE_MAX_UTILIZATION} that headroom is too small and the engine fails with CUDA out of memory when "
        "one of them grows."
    )
    fitted, notes = fitting(facts, {UTIL_FLAG: f"{DEFAULT_GPU_MEMORY_UTILIZATION:g}"})
    what = f"Set {UTIL_FLAG} {DEFAULT_GPU_MEMORY_UTILIZATION:g} (vLLM's default). " + " ".join(notes)
    plan = facts.args_patch(fitted) if fitted else None
    if fitted and LEN_FLAG in fitted:
        what += f" With less KV memory {LEN_FLAG} {fitted[LEN_FLAG]} is what still fits."
    return Finding(
        code="VLLM_MEMORY_UTILIZATION_RISKY",
        title=f"{UTIL_FLAG} {utilization.value} leaves no headroom",
        summary=summary,
        objects=facts.objects,
        evidence=tuple(facts.memory_lines()),
        fix=Fix.from_plan(what, plan, no_patch=facts.no_patch_reason()),
    )


def _free_memory_short(facts: EngineFacts, hits: list[LogHit]) -> Finding:
    hit = hits[0]
    free, total, wanted, wanted_gib = (number(hit.match.group(i)) for i in range(1, 5))
    others = total - free
    restarts = facts.restarts()
    repeated = sum(h.count for h in hits) > 1 or bool(restarts)
    summary = (
        f"At start-up only {free:.2f} of {total:.2f} GiB were free on the GPU, less than the {wanted_gib:.2f} GiB "
        f"that {UTIL_FLAG} {wanted:g} asks for: {others:.2f} GiB were held by something else (another process on a "
        "shared or time-sliced GPU, or a previous engine that had not exited). vLLM refuses to start."
    )
    severity = None
    if repeated:
        summary += " It failed repeatedly and the container restarted: raised to critical (requests fail meanwhile)."
        severity = Severity.CRITICAL
    safe = math.floor((free / total - 0.02) * 100) / 100
    plan = None
    what = (
        "Find what else holds the GPU (nvidia-smi on the node; GPU sharing by time-slicing or MPS gives every "
        "pod the whole card's size) and free it, or give vLLM a share that is really free."
    )
    if safe >= 0.5:
        fitted, notes = fitting(facts, {UTIL_FLAG: f"{safe:g}"})
        if fitted:
            what += f" {UTIL_FLAG} {safe:g} fits into the {free:.2f} GiB that were free. " + " ".join(notes)
            plan = facts.args_patch(fitted)
    return Finding(
        code="VLLM_MEMORY_UTILIZATION_RISKY",
        title=f"free GPU memory at start ({free:.2f} GiB) is below {UTIL_FLAG} {wanted:g}",
        summary=summary,
        objects=facts.objects,
        evidence=tuple([h.describe() for h in hits] + restarts + facts.memory_lines()),
        fix=Fix.from_plan(what, plan),
        severity=severity,
    )
