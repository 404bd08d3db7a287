"""The vLLM memory model against numbers vLLM itself printed in published logs, and its parts.

Logs used (each quoted where it is used):

- vllm-project/vllm#10517, comment by kaspersiminski (2024-12-02): Llama-3.1-8B-Instruct on an
  RTX 3090, V0 engine, two start-ups (--max-model-len 20000 and 29000).
- LMCache/LMCache#1739: Qwen3-14B on one GPU, V1 engine.
- vllm-project/vllm#13882: Qwen2.5-7B (4-bit weights, 5.20 GiB) on an 8 GiB RTX 4060 at
  --gpu-memory-utilization 0.70, V0 engine: a negative KV budget.
- vllm-project/vllm#13061: DeepSeek-R1-Distill-Qwen-14B (Qwen2.5-14B shapes) on two RTX 4090,
  tensor-parallel 2, --gpu-memory-utilization 0.98, V0 engine (estimate only: the engine took the
  smaller KV budget of the other rank, which the issue does not quote).

The engine logs its available KV memory rounded to 0.01 GiB, so the exact check allows one block
or the blocks that 0.005 GiB holds, whichever is larger (2.56 blocks for Llama-3.1-8B).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from nbhelpers.errors import RunbookError
from nbhelpers.models.gpus import GPUS, gpu_named
from nbhelpers.models.model_table import UnsupportedArchitecture, architecture_from_config, lookup_model
from nbhelpers.models.vllm_memory import (
    GIB,
    V1_BATCH_DEFAULTS,
    Gpu,
    ServingPlan,
    default_max_num_batched_tokens,
    default_max_num_seqs,
    estimate,
    kv_bytes_per_token,
    parse_version,
)

LLAMA_8B = lookup_model("meta-llama/Llama-3.1-8B-Instruct")
RTX_3090_AS_VLLM_SEES_IT = Gpu(int(23.58 * GIB))  # "total_gpu_memory=23.58GiB" in vllm#10517
V0 = parse_version("0.6.4")  # the "Memory profiling results: ... kv_cache_size=" line is V0 (0.6.4-0.6.6)


def log_rounding_tolerance_blocks(bytes_per_token: int, block_size: int = 16) -> float:
    """Blocks that the log's 0.01 GiB rounding can hide (half a step each way), at least one block."""
    return max(1.0, 0.005 * GIB / (bytes_per_token * block_size))


@pytest.mark.parametrize(
    ("name", "architecture", "plan_options", "engine_blocks", "engine_concurrency", "engine_fits"),
    [
        # vllm-project/vllm#10517: "kv_cache_size=3.81GiB ... GPU blocks: 1952, # CPU blocks: 2048
        # Maximum concurrency for 20000 tokens per request: 1.56x"
        ("vllm#10517 20k", LLAMA_8B, {"max_model_len": 20000, "available_kv_gib": 3.81}, 1952, 1.56, True),
        # vllm-project/vllm#10517: "kv_cache_size=2.89GiB ... # GPU blocks: 1478 ... Maximum concurrency for 29000
        # tokens per request: 0.82x ... The model's max seq len (29000) is larger than the maximum number of tokens
        # that can be stored in KV cache (23648)"
        ("vllm#10517 29k", LLAMA_8B, {"max_model_len": 29000, "available_kv_gib": 2.89}, 1478, 0.82, False),
        # LMCache/LMCache#1739: "Available KV cache memory: 6.51 GiB / GPU KV cache size: 42,656 tokens /
        # Maximum concurrency for 32,768 tokens per request: 1.30x"
        (
            "LMCache#1739",
            lookup_model("Qwen/Qwen3-14B"),
            {"max_model_len": 32768, "available_kv_gib": 6.51},
            42656 // 16,
            1.30,
            True,
        ),
        # vllm-project/vllm#13882: "the rest of the memory reserved for KV Cache is -1.05GiB. / # cuda blocks: 0,
        # # CPU blocks: 4681 / Maximum concurrency for 4096 tokens per request: 0.00x"
        (
            "vllm#13882",
            lookup_model("Qwen/Qwen2.5-7B-Instruct"),
            {"max_model_len": 4096, "available_kv_gib": -1.05, "gpu_memory_utilization": 0.7},
            0,
            0.0,
            False,
        ),
    ],
)
def test_token_arithmetic_matches_the_engine_logs(
    name: str,
    architecture: object,
    plan_options: dict[str, float],
    engine_blocks: int,
    engine_concurrency: float,
    engine_fits: bool,
) -> None:
    plan = ServingPlan(architecture, RTX_3090_AS_VLLM_SEES_IT, **plan_options)  # type: ignore[arg-type]
    report = estimate(plan)
    tolerance = log_rounding_tolerance_blocks(report.kv_bytes_per_token)
    assert abs(report.kv_blocks - engine_blocks) <= tolerance, (name, report.kv_blocks, engine_blocks)
    assert round(report.max_concurrency, 2) == pytest.approx(engine_concurrency, abs=0.01), name
    assert report.fits is engine_fits, name
    assert report.budget.exact


def test_the_largest_length_that_fits_is_the_engines_own_bound() -> None:
    # vllm-project/vllm#10517: at 2.89 GiB the engine refused 29000 and named 23648 tokens as the KV capacity.
    report = estimate(ServingPlan(LLAMA_8B, RTX_3090_AS_VLLM_SEES_IT, max_model_len=29000, available_kv_gib=2.89))
    assert abs(report.max_model_len_that_fits - 23648) <= 16
    assert not report.fits
    assert report.recommended_flags == {"--kv-cache-dtype": "fp8"}


# Estimated available KV memory (no --available-kv-gib) against the engine's own figure, in GiB.
# Measured errors (estimate - engine): +0.12, +0.19, +0.52, +0.01 GiB.
ESTIMATE_CASES = [
    # vllm-project/vllm#10517: "Loading model weights took 14.9888 GB / Memory profiling results:
    # total_gpu_memory=23.58GiB ... kv_cache_size=3.81GiB gpu_memory_utilization=0.90" (max-model-len 20000)
    ("vllm#10517 20k", ServingPlan(LLAMA_8B, RTX_3090_AS_VLLM_SEES_IT, max_model_len=20000, vllm_version=V0), 3.81),
    # same comment, --max-model-len 29000: "peak_torch_memory=17.98GiB ... kv_cache_size=2.89GiB"
    ("vllm#10517 29k", ServingPlan(LLAMA_8B, RTX_3090_AS_VLLM_SEES_IT, max_model_len=29000, vllm_version=V0), 2.89),
    # vllm-project/vllm#13882: "total_gpu_memory (8.00GiB) x gpu_memory_utilization (0.70) = 5.60GiB / model weights
    # take 5.20GiB; non_torch_memory takes 0.03GiB; PyTorch activation peak memory takes 1.42GiB; the rest of the
    # memory reserved for KV Cache is -1.05GiB" (4-bit weights: the weights come from the log)
    (
        "vllm#13882",
        ServingPlan(
            lookup_model("Qwen/Qwen2.5-7B-Instruct"),
            Gpu(8 * GIB),
            gpu_memory_utilization=0.7,
            max_model_len=4096,
            weights_gib=5.20,
            vllm_version=parse_version("0.7.3"),
        ),
        -1.05,
    ),
    # vllm-project/vllm#13061: "Loading model weights took 13.9476 GB ... non_torch_memory takes 0.25GiB; PyTorch
    # activation peak memory takes 0.19GiB; the rest of the memory reserved for KV Cache is 8.69GiB" (per rank)
    (
        "vllm#13061",
        ServingPlan(
            lookup_model("Qwen/Qwen2.5-14B"),
            Gpu(gpu_named("RTX-4090").engine_total_bytes, "NVIDIA GeForce RTX 4090"),
            tensor_parallel_size=2,
            gpu_memory_utilization=0.98,
            vllm_version=parse_version("0.7.2"),
        ),
        8.69,
    ),
]


@pytest.mark.parametrize(("name", "plan", "engine_available_gib"), ESTIMATE_CASES)
def test_estimated_available_memory_is_within_the_documented_error(
    name: str, plan: ServingPlan, engine_available_gib: float
) -> None:
    report = estimate(plan)
    assert not report.budget.exact
    error_gib = report.available_kv_gib - engine_available_gib
    assert abs(error_gib) <= 0.8, (name, round(error_gib, 2))


def test_estimated_kv_tokens_error_for_the_full_profiles() -> None:
    # The two complete V0 profiles of vllm#10517: the estimate overshoots by less than 7 % of the tokens.
    for name, plan, engine_gib in ESTIMATE_CASES[:2]:
        report = estimate(plan)
        engine_tokens = int(engine_gib * GIB) // (report.kv_bytes_per_token * 16) * 16
        assert 0 <= report.kv_tokens - engine_tokens <= 0.07 * engine_tokens, name


@pytest.mark.parametrize(
    ("plan", "logged_gib", "tolerance"),
    [
        # vllm-project/vllm#10517: "Loading model weights took 14.9888 GB" (vLLM's GB are GiB)
        (ServingPlan(LLAMA_8B, RTX_3090_AS_VLLM_SEES_IT), 14.9888, 0.01),
        # vllm-project/vllm#13061: "Loading model weights took 13.9476 GB" with tensor-parallel 2
        (ServingPlan(lookup_model("Qwen/Qwen2.5-14B"), Gpu(24 * GIB), tensor_parallel_size=2), 13.9476, 0.02),
        # vllm-project/vllm#12569: neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8 "Loading model weights took
        # 67.7229 GB" (8-bit linear layers; embeddings and lm_head stay 16-bit, which the estimate leaves out)
        (
            ServingPlan(replace(lookup_model("Llama-3.1-70B-Instruct"), weight_bits=8), Gpu(80 * GIB)),
            67.7229,
            0.04,
        ),
    ],
)
def test_weights_estimate_matches_model_loading_lines(plan: ServingPlan, logged_gib: float, tolerance: float) -> None:
    weights_gib = estimate(plan).budget.weights / GIB
    assert abs(weights_gib - logged_gib) / logged_gib <= tolerance


@pytest.mark.parametrize(
    ("model", "published"),
    [
        ("microsoft/Phi-3-mini-4k-instruct", 3_821_079_552),  # keras-team/keras-hub phi3_presets.py
        ("meta-llama/Llama-3.1-8B-Instruct", 8_030_261_248),  # the 8.03B of the model card
        ("Qwen/Qwen2.5-7B", 7_615_616_512),  # 7.61B (the estimate leaves out the q/k/v biases)
        ("google/gemma-2-9b-it", 9_241_705_984),  # 9.24B
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", 46_702_792_704),  # 46.7B total
    ],
)
def test_parameter_counts_from_shapes(model: str, published: int) -> None:
    assert abs(lookup_model(model).parameter_count - published) / published < 0.001


def test_kv_bytes_per_token_follow_design_section_6() -> None:
    gpu = Gpu(80 * GIB)
    # 2 x 32 layers x 8 heads x 128 x 2 bytes
    assert kv_bytes_per_token(ServingPlan(LLAMA_8B, gpu)) == 131_072
    assert kv_bytes_per_token(ServingPlan(LLAMA_8B, gpu, kv_cache_dtype="fp8")) == 65_536
    assert kv_bytes_per_token(ServingPlan(LLAMA_8B, gpu, tensor_parallel_size=4)) == 32_768
    # tp larger than the KV heads: each rank keeps one head
    assert kv_bytes_per_token(ServingPlan(LLAMA_8B, gpu, tensor_parallel_size=8)) == 2 * 32 * 1 * 128 * 2
    # pipeline parallel: the fuller stage of ceil(32 / 3) layers
    assert kv_bytes_per_token(ServingPlan(LLAMA_8B, gpu, pipeline_parallel_size=3)) == 2 * 11 * 8 * 128 * 2
    # Gemma-2-9B: explicit head_dim 256 wins over hidden_size / heads = 224
    assert kv_bytes_per_token(ServingPlan(lookup_model("google/gemma-2-9b-it"), gpu)) == 2 * 42 * 8 * 256 * 2
    with pytest.raises(RunbookError, match="does not divide the model's 8 KV heads"):
        kv_bytes_per_token(ServingPlan(LLAMA_8B, gpu, tensor_parallel_size=3))


def test_mla_latent_is_per_layer_and_not_split_by_tensor_parallelism() -> None:
    deepseek_v3_like = architecture_from_config(
        {
            "model_type": "deepseek_v3",
            "num_hidden_layers": 61,
            "num_attention_heads": 128,
            "num_key_value_heads": 128,
            "hidden_size": 7168,
            "intermediate_size": 18432,
            "moe_intermediate_size": 2048,
            "n_routed_experts": 256,
            "num_experts_per_tok": 8,
            "vocab_size": 129280,
            "max_position_embeddings": 163840,
            "kv_lora_rank": 512,
            "qk_rope_head_dim": 64,
        },
        name="mla",
    )
    for tensor_parallel in (1, 8):
        plan = ServingPlan(deepseek_v3_like, Gpu(141 * GIB), tensor_parallel_size=tensor_parallel)
        assert kv_bytes_per_token(plan) == 61 * (512 + 64) * 2


def test_config_reading_handles_variants_and_refuses_hybrids() -> None:
    nested = architecture_from_config(
        {
            "model_type": "gemma3",
            "text_config": {
                "num_hidden_layers": 62,
                "num_attention_heads": 32,
                "num_key_value_heads": 16,
                "head_dim": 128,
                "hidden_size": 5376,
                "intermediate_size": 21504,
                "vocab_size": 262208,
                "max_position_embeddings": 131072,
                "sliding_window": 1024,
                "sliding_window_pattern": 6,
            },
        },
        name="gemma3",
    )
    assert (nested.num_hidden_layers, nested.head_dim, nested.sliding_window_layers) == (62, 128, 52)
    multi_head = architecture_from_config(
        {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64, "intermediate_size": 128}
        | {"vocab_size": 10, "max_position_embeddings": 128},
        name="mha",
    )
    assert (multi_head.num_key_value_heads, multi_head.head_dim) == (4, 16)
    with pytest.raises(UnsupportedArchitecture, match="hybrid model"):
        architecture_from_config({"model_type": "jamba"}, name="jamba")
    with pytest.raises(UnsupportedArchitecture, match="linear_attention"):
        architecture_from_config({"layer_types": ["full_attention", "linear_attention"]}, name="next")
    with pytest.raises(RunbookError, match="no 'num_hidden_layers'"):
        architecture_from_config({"model_type": "llama"}, name="broken")


def test_sliding_window_concurrency_is_flagged_as_a_lower_bound() -> None:
    report = estimate(ServingPlan(lookup_model("google/gemma-2-9b-it"), Gpu(80 * GIB), available_kv_gib=40))
    assert any("21 of 42 layers use a 4096-token sliding window" in note for note in report.notes)
    qwen = estimate(ServingPlan(lookup_model("Qwen/Qwen2.5-7B-Instruct"), Gpu(80 * GIB), available_kv_gib=40))
    assert not any("sliding window" in note for note in qwen.notes)


@pytest.mark.parametrize(
    ("version", "gpu", "expected"),
    [
        ("0.6.4", "H100-80GB", 256),
        ("0.8.2", "L4", 1024),  # V1 before PR #16158: 1024 everywhere (vllm issue #15617)
        ("0.8.2", "A100-80GB", 1024),
        ("0.8.4", "L4", 256),
        # 0.8.4 (PR #16158): by name, H100/H200 only; before the fix the 0.9 rule gave a large card 1024 here.
        ("0.8.4", "H100-NVL", 1024),
        ("0.8.4", "A100-80GB", 256),
        # 0.8.5 (PR #17073): by memory, A100 80GB included; before the fix: 256.
        ("0.8.5", "A100-80GB", 1024),
        ("0.8.5", "L40S", 256),
        ("0.9.0", "A100-80GB", 256),  # PR #17885 excludes A100 again
        ("0.10.1", "H100-80GB", 1024),
        ("0.10.1", "A100-80GB", 256),
        ("0.10.1", "L40S", 256),
        (None, "H100-NVL", 1024),
    ],
)
def test_default_max_num_seqs_moves_with_version_and_gpu(version: str | None, gpu: str, expected: int) -> None:
    model = gpu_named(gpu)
    setting = default_max_num_seqs(
        parse_version(version) if version else None, Gpu(model.engine_total_bytes, model.device_name)
    )
    assert setting.value == expected
    assert "default" in setting.origin


def test_0_8_4_gives_large_cards_other_than_h100_h200_the_small_defaults() -> None:
    """vllm PR #16158 matched H100/H200 by name: a B200 (180 GiB) or MI300X (192 GiB) got 256 requests and 2048
    tokens in 0.8.4. Before the fix the 0.9 rule (>= 70 GiB) gave them 1024 and 8192."""
    for name, gib in (("NVIDIA B200", 178), ("AMD Instinct MI300X", 191)):
        gpu = Gpu(gib * GIB, name)
        seqs = default_max_num_seqs((0, 8, 4), gpu)
        assert seqs.value == 256 and "PR #16158" in seqs.origin and "other than H100 and H200" in seqs.origin
        assert default_max_num_batched_tokens((0, 8, 4), gpu, 8192).value == 2048
        assert default_max_num_seqs((0, 8, 5), gpu).value == 1024
        assert default_max_num_batched_tokens((0, 8, 5), gpu, 8192).value == 8192


def test_batched_tokens_follow_the_same_rows() -> None:
    """The token budget: H100/H200 by name up to 0.8.4 (vllm PR #12369), >= 70 GiB in 0.8.5, A100 out from 0.9.0."""
    a100 = Gpu(gpu_named("A100-80GB").engine_total_bytes, gpu_named("A100-80GB").device_name)
    h100 = Gpu(gpu_named("H100-80GB").engine_total_bytes, gpu_named("H100-80GB").device_name)
    assert [default_max_num_batched_tokens(v, a100, 8192).value for v in ((0, 8, 2), (0, 8, 5), (0, 9, 0))] == [
        2048,
        8192,
        2048,
    ]
    assert default_max_num_batched_tokens((0, 8, 2), h100, 8192).value == 8192


def test_the_defaults_table_rows_are_in_release_order_and_cite_their_change() -> None:
    assert [row.since for row in V1_BATCH_DEFAULTS] == sorted(row.since for row in V1_BATCH_DEFAULTS)
    assert [row.change for row in V1_BATCH_DEFAULTS[1:]] == ["vllm PR #16158", "vllm PR #17073", "vllm PR #17885"]


def test_default_without_a_gpu_name_says_which_way_the_a100_goes() -> None:
    setting = default_max_num_seqs(None, Gpu(80 * GIB))
    assert setting.value == 1024
    assert "256 if the GPU is an A100" in setting.origin
    assert default_max_num_batched_tokens(V0, Gpu(24 * GIB), 20000).value == 20000
    assert default_max_num_batched_tokens(V0, Gpu(24 * GIB), 131072).value == 2048
    assert default_max_num_batched_tokens(None, Gpu(24 * GIB), 131072).value == 2048


def test_recommendations_pick_the_cheapest_change_that_fits() -> None:
    gpu = Gpu(80 * GIB)
    # one request of 131072 tokens needs 16 GiB: 10 GiB of cache is short, fp8 halves the need
    fp8 = estimate(ServingPlan(LLAMA_8B, gpu, available_kv_gib=10))
    assert fp8.recommended_flags == {"--kv-cache-dtype": "fp8"}
    # already fp8 and 7 GiB: 1 GiB short, a little more memory utilization closes it
    more_memory = estimate(ServingPlan(LLAMA_8B, gpu, kv_cache_dtype="fp8", available_kv_gib=7))
    assert more_memory.recommended_flags == {"--gpu-memory-utilization": 0.92}
    # 8 full-length requests cannot fit: shorten the context
    shorter = estimate(ServingPlan(LLAMA_8B, gpu, kv_cache_dtype="fp8", available_kv_gib=7, target_concurrency=8))
    assert shorter.recommended_flags["--max-model-len"] == 14336
    assert any("replicas" in reason for reason in shorter.reasons)
    # a 70B model on one 80 GiB GPU does not load: more GPUs
    no_room = estimate(
        ServingPlan(lookup_model("Llama-3.1-70B-Instruct"), Gpu(gpu_named("H100-80GB").engine_total_bytes))
    )
    assert no_room.kv_tokens == 0
    assert no_room.recommended_flags == {"--tensor-parallel-size": 4}
    assert any("GPU OOM" in reason for reason in no_room.reasons)


def test_json_has_exactly_the_contract_keys() -> None:
    report = estimate(ServingPlan(LLAMA_8B, Gpu(80 * GIB), available_kv_gib=40))
    assert set(report.contract_json()) == {
        "kv_bytes_per_token",
        "available_kv_gib",
        "kv_tokens",
        "max_concurrency",
        "fits",
        "max_model_len_that_fits",
        "recommended_flags",
    }


def test_gpu_table_holds_driver_sizes_in_mib() -> None:
    sizes = {gpu.name: gpu.driver_total_mib for gpu in GPUS}
    assert sizes["H100-80GB"] == 81559
    assert sizes["A100-80GB"] == 81920
    assert sizes["L4"] == 23034
    assert all(gpu.source for gpu in GPUS)
    # what vLLM sees is 0.5 GiB less: an A100-40GB comes out at 39.5 GiB, vLLM logged 39.38 (vllm#16570)
    assert gpu_named("a100-40gb").engine_total_bytes / GIB == pytest.approx(39.38, abs=0.15)
    with pytest.raises(RunbookError, match="known: H100-80GB"):
        gpu_named("B300")


def test_recommended_utilization_leaves_headroom_on_small_cards() -> None:
    from nbhelpers.models.vllm_memory import GIB, safe_max_utilization

    assert safe_max_utilization(80 * GIB) == 0.95
    assert safe_max_utilization(int(21.96 * GIB)) == 0.93  # L4: 0.95 would leave 1.1 GiB
    assert safe_max_utilization(int(14.5 * GIB)) == 0.89  # T4
