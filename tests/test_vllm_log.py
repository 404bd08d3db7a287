"""parse_engine_log on the line formats vLLM printed in published logs (V0 and V1).

The log lines below are copied from the cited public issues and pages as they quote them
(some quote the message without vLLM's "INFO date file:line]" prefix). Ours are only the
kubelet timestamp prefix that Kubernetes adds, and the lines of the multi-start-up test, which
say so.
"""

from __future__ import annotations

import pytest

from nbhelpers.facts.vllm_log import EngineMemoryFacts, parse_engine_log

KUBELET = "2026-01-15T10:00:00.000000000Z "

# LMCache/LMCache#1739 (V1, Qwen3-14B)
V1_QWEN3 = """\
(EngineCore_DP0 pid=1133552) INFO 10-03 16:22:17 [gpu_worker.py:298] Available KV cache memory: 6.51 GiB
(EngineCore_DP0 pid=1133552) INFO 10-03 16:22:17 [kv_cache_utils.py:864] GPU KV cache size: 42,656 tokens
(EngineCore_DP0 pid=1133552) INFO 10-03 16:22:17 [kv_cache_utils.py:868] Maximum concurrency for 32,768 tokens per request: 1.30x
"""

# vllm-project/vllm#12569 (early V1): "# GPU blocks" and an un-separated length
V1_EARLY = """\
INFO 01-30 03:18:12 gpu_model_runner.py:848] Loading model weights took 67.7229 GB
INFO 01-30 03:19:14 kv_cache_utils.py:395] # GPU blocks: 1381
INFO 01-30 03:19:14 kv_cache_utils.py:398] Maximum concurrency for 2048 tokens per request: 10.79x
"""

# vllm-project/vllm#10517 (V0 0.6.x profile line, and the capacity error)
V0_TOO_LONG = """\
Loading model weights took 14.9888 GB
Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB \
peak_torch_memory=17.98GiB memory_usage_post_profile=15.35GiB non_torch_memory=0.35GiB kv_cache_size=2.89GiB \
gpu_memory_utilization=0.90
# GPU blocks: 1478, # CPU blocks: 2048
Maximum concurrency for 29000 tokens per request: 0.82x
The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV \
cache (23648). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.
"""

# vllm-project/vllm#13882 (V0 0.7.x breakdown lines, negative budget, "# cuda blocks")
V0_NEGATIVE = """\
INFO 02-26 09:54:02 model_runner.py:1115] Loading model weights took 5.2032 GB
INFO 02-26 09:54:05 worker.py:267] the current vLLM instance can use total_gpu_memory (8.00GiB) x gpu_memory_utilization (0.70) = 5.60GiB
INFO 02-26 09:54:05 worker.py:267] model weights take 5.20GiB; non_torch_memory takes 0.03GiB; PyTorch activation peak memory takes 1.42GiB; the rest of the memory reserved for KV Cache is -1.05GiB.
INFO 02-26 09:54:05 executor_base.py:111] # cuda blocks: 0, # CPU blocks: 4681
INFO 02-26 09:54:05 executor_base.py:116] Maximum concurrency for 4096 tokens per request: 0.00x
"""

# vllm-project/vllm#25350 (V1 capacity error, "models's" spelling)
V1_TOO_LONG = """\
ValueError: To serve at least one request with the models's max seq len (221000), (10.12 GiB KV cache is needed, \
which is larger than the available KV cache memory (5.59 GiB). Based on the available memory, the estimated maximum \
model length is 122080. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.
"""

# myoceane.fr/index.php/ai-vllm-a100-gemma-4 (vLLM 0.19): the newer "GiB memory and" wording
V1_NEWER_LOADING = "Model loading took 13.72 GiB memory and 62.336108 seconds\nAvailable KV cache memory: 36.56 GiB\n"


def with_kubelet_prefix(text: str) -> str:
    return "".join(KUBELET + line + "\n" for line in text.splitlines())


def test_v1_lines_with_thousands_separators() -> None:
    facts = parse_engine_log(with_kubelet_prefix(V1_QWEN3))
    assert facts == EngineMemoryFacts(
        kv_cache_tokens=42656,
        max_concurrency=1.30,
        concurrency_tokens_per_request=32768,
        available_kv_gib=6.51,
    )


def test_early_v1_blocks_and_gb_label() -> None:
    facts = parse_engine_log(V1_EARLY)
    assert (facts.gpu_blocks, facts.max_concurrency, facts.concurrency_tokens_per_request) == (1381, 10.79, 2048)
    assert facts.model_loading_gib == 67.7229
    assert facts.kv_cache_tokens is None
    # the engine's own arithmetic: blocks x 16 / length
    assert facts.gpu_blocks * 16 / facts.concurrency_tokens_per_request == pytest.approx(
        facts.max_concurrency, abs=0.005
    )


def test_v0_profile_line_and_capacity_error() -> None:
    facts = parse_engine_log(with_kubelet_prefix(V0_TOO_LONG))
    assert facts.available_kv_gib == 2.89
    assert facts.gpu_blocks == 1478
    assert facts.kv_cache_tokens == 23648  # from the error: 1478 blocks x 16
    assert facts.rejected_max_seq_len == 29000
    assert facts.model_loading_gib == 14.9888
    assert facts.max_concurrency == 0.82


def test_v0_breakdown_with_a_negative_budget() -> None:
    facts = parse_engine_log(V0_NEGATIVE)
    assert (facts.available_kv_gib, facts.gpu_blocks, facts.max_concurrency) == (-1.05, 0, 0.0)


def test_v1_capacity_error() -> None:
    facts = parse_engine_log(V1_TOO_LONG)
    assert (facts.rejected_max_seq_len, facts.required_kv_gib, facts.estimated_max_model_len) == (221000, 10.12, 122080)
    assert facts.available_kv_gib == 5.59  # from the error itself
    assert facts.kv_cache_tokens is None


def test_newer_loading_wording() -> None:
    facts = parse_engine_log(V1_NEWER_LOADING)
    assert (facts.model_loading_gib, facts.available_kv_gib) == (13.72, 36.56)


def test_only_the_last_startup_counts_and_the_tightest_rank_wins() -> None:
    # A restart after the early-V1 start-up, with two tensor-parallel ranks. The loading lines are vllm#13061's;
    # the two KV lines are ours, in the V0 format, with different budgets per rank.
    tensor_parallel_ranks = (
        "(VllmWorkerProcess pid=1786) INFO 02-11 07:40:45 model_runner.py:1115] Loading model weights took 13.9476 GB\n"
        "INFO 02-11 07:40:45 model_runner.py:1115] Loading model weights took 13.9476 GB\n"
        "(VllmWorkerProcess pid=1786) INFO worker.py:267] the rest of the memory reserved for KV Cache is 8.69GiB.\n"
        "INFO worker.py:267] the rest of the memory reserved for KV Cache is 7.46GiB.\n"
    )
    facts = parse_engine_log(V1_EARLY + tensor_parallel_ranks)
    assert facts.available_kv_gib == 7.46
    assert facts.model_loading_gib == 13.9476
    assert facts.gpu_blocks is None  # the earlier start-up's numbers do not leak into the last one


def test_nothing_found() -> None:
    facts = parse_engine_log("INFO: Started server process [1]\n")
    assert not facts.found
    assert parse_engine_log(V1_EARLY).found


# vLLM 0.8.2's start-up dying in its sampler warm-up, lines as in vllm-project/vllm issue #15617 (message from
# vllm/v1/worker/gpu_model_runner.py _dummy_sampler_run) and the pooler variant of pooling models.
V1_SAMPLER_WARMUP_OOM = (
    "INFO 03-27 16:42:50 [gpu_model_runner.py:1164] Model loading took 14.9889 GB and 30.80 seconds\n"
    "ERROR 03-27 17:34:18 [core.py:343] RuntimeError: CUDA out of memory occurred when warming up sampler with 1,024 "
    "dummy requests. Please try lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine.\n"
)


def test_sampler_warmup_oom_tells_the_batch_that_did_not_fit() -> None:
    assert parse_engine_log(V1_SAMPLER_WARMUP_OOM).warmup_oom_requests == 1024
    pooler = "RuntimeError: CUDA out of memory occurred when warming up pooler (task='embed') with 256 dummy requests."
    assert parse_engine_log(pooler).warmup_oom_requests == 256
    # The backticks lost on the way (as quoted in the issue) change nothing.
    assert parse_engine_log(V1_SAMPLER_WARMUP_OOM.replace("`", "")).warmup_oom_requests == 1024
    assert (
        parse_engine_log("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB").warmup_oom_requests
        is None
    )
