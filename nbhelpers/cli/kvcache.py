"""``kserve-runbook kvcache``: turn command-line options into a serving plan and a report into text."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from nbhelpers.errors import RunbookError
from nbhelpers.models.gpus import gpu_named
from nbhelpers.models.model_table import ModelArchitecture, lookup_model, read_model_config
from nbhelpers.models.vllm_memory import GIB, Gpu, KvCacheReport, ServingPlan, estimate, parse_version

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(GiB|GB|MiB|MB)\s*$", re.IGNORECASE)
_UNIT_BYTES = {"gib": GIB, "gb": 10**9, "mib": 1024**2, "mb": 10**6}


def parse_memory_size(text: str) -> int:
    """``80GiB`` (2^30 bytes), ``85GB`` (10^9 bytes), ``81559MiB`` -> bytes; a bare number is refused."""
    match = _SIZE.match(text)
    if not match:
        raise RunbookError(f"bad --gpu-memory {text!r}: give a unit, e.g. 23.58GiB (2^30 bytes) or 24GB (10^9 bytes)")
    return int(float(match.group(1)) * _UNIT_BYTES[match.group(2).lower()])


def _architecture(options: dict[str, Any]) -> ModelArchitecture:
    if bool(options["model"]) == bool(options["model_config"]):
        raise RunbookError("give exactly one of --model or --model-config")
    if options["model"]:
        return lookup_model(options["model"])
    return read_model_config(Path(options["model_config"]))


def _gpu(options: dict[str, Any]) -> Gpu:
    if bool(options["gpu_memory"]) == bool(options["gpu"]):
        raise RunbookError("give exactly one of --gpu-memory or --gpu")
    if options["gpu"]:
        model = gpu_named(options["gpu"])
        return Gpu(model.engine_total_bytes, model.device_name)
    return Gpu(parse_memory_size(options["gpu_memory"]))


def plan_from_options(options: dict[str, Any]) -> ServingPlan:
    return ServingPlan(
        architecture=_architecture(options),
        gpu=_gpu(options),
        tensor_parallel_size=options["tensor_parallel_size"],
        pipeline_parallel_size=options["pipeline_parallel_size"],
        gpu_memory_utilization=options["gpu_memory_utilization"],
        dtype=options["dtype"],
        kv_cache_dtype=options["kv_cache_dtype"],
        max_model_len=options["max_model_len"],
        max_num_seqs=options["max_num_seqs"],
        max_num_batched_tokens=options["max_num_batched_tokens"],
        block_size=options["block_size"],
        weights_gib=options["weights_gib"],
        available_kv_gib=options["available_kv_gib"],
        vllm_version=parse_version(options["vllm_version"]) if options["vllm_version"] else None,
        target_concurrency=options["target_concurrency"],
    )


def run(options: dict[str, Any]) -> KvCacheReport:
    return estimate(plan_from_options(options))


def _gib(value: int) -> str:
    return f"{value / GIB:.2f} GiB"


def render(report: KvCacheReport) -> str:
    """The report for a terminal: the numbers vLLM would print, then where the memory went, then advice."""
    budget = report.budget
    lines = [
        f"KV bytes per token per GPU: {report.kv_bytes_per_token:,}",
        f"Available KV cache memory:  {report.available_kv_gib:.2f} GiB per GPU"
        + (" (from the engine log)" if budget.exact else " (estimate)"),
        f"GPU KV cache size:          {report.kv_tokens:,} tokens ({report.kv_blocks:,} blocks)",
        f"Maximum concurrency for {report.max_model_len:,} tokens per request: {report.max_concurrency:.2f}x",
        f"max-model-len {report.max_model_len:,} fits: {'yes' if report.fits else 'NO'}"
        f" (largest that fits: {report.max_model_len_that_fits:,})",
        f"max-num-seqs: {report.max_num_seqs.value}"
        + ("" if report.max_num_seqs.origin == "flag" else f" (not set: {report.max_num_seqs.origin})"),
    ]
    if not budget.exact:
        lines.append(
            f"memory per GPU: usable {_gib(budget.usable)} - weights {_gib(budget.weights)} - activation peak "
            f"{_gib(budget.activation)} (max-num-batched-tokens {report.max_num_batched_tokens.value}) - non-torch "
            f"{_gib(budget.non_torch)}"
        )
    if report.recommended_flags:
        flags = " ".join(f"{name} {value}" for name, value in report.recommended_flags.items())
        lines.append(f"recommended flags: {flags}")
    lines.extend(f"  because {reason}" for reason in report.reasons)
    lines.extend(f"note: {note}" for note in report.notes)
    return "\n".join(lines)
