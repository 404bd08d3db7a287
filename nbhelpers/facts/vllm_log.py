"""vLLM's start-up memory lines, read into numbers.

The engine prints what it decided about memory; when those lines are in the logs they beat any
estimate. Formats recognised (numbers may carry thousands separators: ``1,016,928``):

- V1: ``Model loading took 14.99 GiB and 3.1 seconds`` (newer: ``... GiB memory and ...``),
  ``Available KV cache memory: 6.51 GiB``, ``GPU KV cache size: 42,656 tokens``,
  ``Maximum concurrency for 32,768 tokens per request: 1.30x``; early V1 also ``# GPU blocks: 1381``;
  the start-up error ``To serve at least one request with the models's max seq len (221000),
  (10.12 GiB KV cache is needed, which is larger than the available KV cache memory (5.59 GiB).
  Based on the available memory, the estimated maximum model length is 122080.``
  (spelled "models's" or "model's").
- V0: ``Loading model weights took 14.9888 GB`` (vLLM divides by 2^30: these "GB" are GiB),
  ``# GPU blocks: 1952, # CPU blocks: 2048`` (``# cuda blocks`` in some releases),
  ``Memory profiling results: ... kv_cache_size=3.81GiB ...`` or ``... the rest of the memory
  reserved for KV Cache is 8.69GiB.``, ``Maximum concurrency for 20000 tokens per request: 1.56x``,
  and the error ``The model's max seq len (29000) is larger than the maximum number of tokens that
  can be stored in KV cache (23648).``
- V1 sampler warm-up: ``CUDA out of memory occurred when warming up sampler with 1024 dummy requests.
  Please try lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine.`` (and
  ``warming up pooler`` for pooling models; the backticks may be lost on the way). vLLM raises it in
  ``vllm/v1/worker/gpu_model_runner.py`` ``_dummy_sampler_run`` / ``_dummy_pooler_run`` when the sampler's
  buffers for ``num_reqs`` = min(max_num_seqs, max_num_batched_tokens) requests do not fit: added to the
  warm-up in ``gpu_worker.py`` by vllm-project/vllm PR #14508 (reopened #13776) and moved into the sampler
  run by PR #14728, both in March 2025, first released in v0.8.0. Public reports: vllm issue #15617
  (0.7.3 to 0.8.2, "warming up sampler with 1024 dummy requests"), issue #14452.

A container log can hold several start-ups (restarts) and, with tensor parallelism, one line per
rank. Only the last start-up counts: the text from the last model-loading line on. Within it the
smallest available KV memory is kept (vLLM sizes the cache for the tightest rank); every other
number is its last occurrence.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from nbhelpers.models.load_time import WEIGHTS_LOADED

_NUMBER = r"(-?\d[\d,]*(?:\.\d+)?)"  # a digit first: a lone "," is not a number
_AVAILABLE = (
    re.compile(rf"Available KV cache memory: {_NUMBER} ?GiB"),
    re.compile(rf"kv_cache_size={_NUMBER} ?GiB"),
    re.compile(rf"reserved for KV Cache is {_NUMBER} ?GiB"),
    re.compile(rf"larger than the available KV cache memory \({_NUMBER} GiB\)"),
)
_KV_TOKENS = re.compile(rf"GPU KV cache size: {_NUMBER} tokens")
_V0_CAPACITY_ERROR = re.compile(
    rf"max seq len \({_NUMBER}\) is larger than the maximum number of tokens that can be stored in KV cache \({_NUMBER}\)"
)
_V1_CAPACITY_ERROR = re.compile(
    rf"max seq len \({_NUMBER}\), \({_NUMBER} GiB KV cache is needed, which is larger than the available KV cache "
    rf"memory \({_NUMBER} GiB\)(?:\. Based on the available memory, the estimated maximum model length is {_NUMBER})?"
)
_BLOCKS = re.compile(rf"# (?:GPU|cuda) blocks: {_NUMBER}")
_CONCURRENCY = re.compile(rf"Maximum concurrency for {_NUMBER} tokens per request: {_NUMBER}x")
# vllm/v1/worker/gpu_model_runner.py: f"CUDA out of memory occurred when warming up sampler with {num_reqs} dummy
# requests. Please try lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine."
WARMUP_OOM = re.compile(
    rf"CUDA out of memory occurred when warming up (sampler|pooler)(?: \(task=[^)]*\))? with {_NUMBER} dummy requests"
)


@dataclass(frozen=True)
class EngineMemoryFacts:
    """Numbers vLLM printed about its memory at the last start-up; None when the line is absent."""

    kv_cache_tokens: int | None = None
    gpu_blocks: int | None = None
    max_concurrency: float | None = None
    concurrency_tokens_per_request: int | None = None  # the max-model-len the concurrency refers to
    available_kv_gib: float | None = None
    model_loading_gib: float | None = None
    rejected_max_seq_len: int | None = None  # from the start-up error: this length did not fit
    required_kv_gib: float | None = None  # V1 error: KV memory one such request needs
    estimated_max_model_len: int | None = None  # V1 error: vLLM's own largest length that fits
    warmup_oom_requests: int | None = None  # V1 error: the sampler warm-up ran out of memory for this many requests

    @property
    def found(self) -> bool:
        return any(value is not None for value in self.__dict__.values())


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _float(text: str) -> float:
    return float(text.replace(",", ""))


def _last(pattern: re.Pattern[str], text: str, group: int, convert: Callable[[str], float]) -> float | None:
    matches = list(pattern.finditer(text))
    if not matches or matches[-1].group(group) is None:
        return None
    try:
        return convert(matches[-1].group(group))
    except ValueError:  # "0.5" where vLLM prints an integer, a lone ",", more digits than int() takes
        return None


def _last_int(pattern: re.Pattern[str], text: str, group: int = 1) -> int | None:
    value = _last(pattern, text, group, _int)
    return None if value is None else int(value)


def _last_startup(text: str) -> str:
    starts = list(WEIGHTS_LOADED.finditer(text))
    return text[starts[-1].start() :] if starts else text


def parse_engine_log(text: str) -> EngineMemoryFacts:
    """The memory facts of the last engine start-up in a container log (V0 and V1 formats)."""
    startup = _last_startup(text)
    available = [_float(match.group(1)) for pattern in _AVAILABLE for match in pattern.finditer(startup)]
    v0_error_tokens = _last_int(_V0_CAPACITY_ERROR, startup, 2)
    return EngineMemoryFacts(
        kv_cache_tokens=_last_int(_KV_TOKENS, startup) if _KV_TOKENS.search(startup) else v0_error_tokens,
        gpu_blocks=_last_int(_BLOCKS, startup),
        max_concurrency=_last(_CONCURRENCY, startup, 2, _float),
        concurrency_tokens_per_request=_last_int(_CONCURRENCY, startup),
        available_kv_gib=min(available) if available else None,
        model_loading_gib=_last(WEIGHTS_LOADED, startup, 1, _float),
        rejected_max_seq_len=_last_int(_V1_CAPACITY_ERROR, startup) or _last_int(_V0_CAPACITY_ERROR, startup),
        required_kv_gib=_last(_V1_CAPACITY_ERROR, startup, 2, _float),
        estimated_max_model_len=_last_int(_V1_CAPACITY_ERROR, startup, 4),
        warmup_oom_requests=_last_int(WARMUP_OOM, startup, 2),
    )


def warmup_oom_requests(match: re.Match[str]) -> int | None:
    """The dummy requests of a :data:`WARMUP_OOM` match: the batch the sampler could not warm up."""
    try:
        return _int(match.group(2))
    except ValueError:
        return None
