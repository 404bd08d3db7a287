"""``kserve-runbook kvcache`` as a user runs it: exit codes, one-line errors, --json keys, config.json input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CONTRACT_KEYS = {
    "kv_bytes_per_token",
    "available_kv_gib",
    "kv_tokens",
    "max_concurrency",
    "fits",
    "max_model_len_that_fits",
    "recommended_flags",
}


def kvcache(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nbhelpers", "kvcache", *arguments], capture_output=True, text=True, timeout=120, cwd=cwd
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], expected: str) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert expected in lines[0]
    return lines[0]


def test_json_prints_exactly_the_contract_keys(tmp_path: Path) -> None:
    # vllm-project/vllm#10517: Llama-3.1-8B, "kv_cache_size=3.81GiB", "Maximum concurrency for 20000 tokens per
    # request: 1.56x"
    result = kvcache(
        "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu-memory", "23.58GiB", "--max-model-len", "20000",
        "--available-kv-gib", "3.81", "--json", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert set(answer) == CONTRACT_KEYS
    assert answer["kv_bytes_per_token"] == 131072
    assert answer["max_concurrency"] == 1.56
    assert answer["fits"] is True
    assert answer["recommended_flags"] == {}


def test_human_output_names_the_default_max_num_seqs(tmp_path: Path) -> None:
    result = kvcache("--model", "Qwen3-8B", "--gpu", "A100-80GB", "--vllm-version", "0.10.1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "max-num-seqs: 256 (not set: vLLM V1 default in 0.9.0 and later (vllm PR #17885) on A100" in result.stdout
    assert "(estimate)" in result.stdout


def test_model_config_from_a_file(tmp_path: Path) -> None:
    config = {
        "model_type": "llama",
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "torch_dtype": "bfloat16",
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    result = kvcache("--model-config", str(path), "--gpu", "L4", "--available-kv-gib", "10", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["kv_bytes_per_token"] == 2 * 16 * 8 * 64 * 2
    # with hidden_size 4096 the implied head size would be 128: the explicit head_dim 64 still wins
    path.write_text(json.dumps(config | {"hidden_size": 4096}))
    again = json.loads(
        kvcache("--model-config", str(path), "--gpu", "L4", "--available-kv-gib", "10", "--json", cwd=tmp_path).stdout
    )
    assert again["kv_bytes_per_token"] == 2 * 16 * 8 * 64 * 2
    assert again["kv_tokens"] == 10 * 1024**3 // (32768 * 16) * 16


def test_unknown_model_lists_the_known_ones(tmp_path: Path) -> None:
    line = assert_one_line_error(
        kvcache("--model", "acme/unknown-7b", "--gpu", "L4", cwd=tmp_path), "not in the shipped table"
    )
    assert "meta-llama/Llama-3.1-8B-Instruct" in line
    assert "Qwen/Qwen2.5-72B-Instruct" in line


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["--model", "Qwen3-8B", "--gpu-memory", "80"], "give a unit"),
        (["--model", "Qwen3-8B"], "give exactly one of --gpu-memory or --gpu"),
        (["--gpu", "L4"], "give exactly one of --model or --model-config"),
        (["--model", "Qwen3-8B", "--gpu", "B300"], "unknown GPU 'B300'"),
        (["--model", "Qwen3-8B", "--gpu", "L4", "--gpu-memory-utilization", "1.5"], "must be in (0, 1]"),
        (["--model", "Qwen3-8B", "--gpu", "L4", "-tp", "3"], "does not divide the model's 8 KV heads"),
        (["--model", "Qwen3-8B", "--gpu", "L4", "--kv-cache-dtype", "int3"], "unknown KV cache dtype"),
        (["--model", "Qwen3-8B", "--gpu", "L4", "--vllm-version", "latest"], "bad --vllm-version"),
        (["--model", "Qwen3-8B", "--gpu", "L4", "--max-model-len", "lots"], "'lots' is not a valid integer"),
        (["--model-config", "missing.json", "--gpu", "L4"], "does not exist"),
    ],
)
def test_bad_input_exits_2_with_one_line(arguments: list[str], expected: str, tmp_path: Path) -> None:
    assert_one_line_error(kvcache(*arguments, cwd=tmp_path), expected)


def test_hybrid_config_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "qwen3_next", "num_hidden_layers": 48}))
    assert_one_line_error(kvcache("--model-config", str(path), "--gpu", "H100-80GB", cwd=tmp_path), "hybrid model")
    path.write_text("{not json")
    assert_one_line_error(
        kvcache("--model-config", str(path), "--gpu", "H100-80GB", cwd=tmp_path), "not a readable JSON"
    )


def test_gb_and_gib_are_different_sizes(tmp_path: Path) -> None:
    def available(size: str) -> float:
        result = kvcache("--model", "Llama-3.1-8B-Instruct", "--gpu-memory", size, "--json", cwd=tmp_path)
        return float(json.loads(result.stdout)["available_kv_gib"])

    # 80 GB is 74.5 GiB: 0.9 x 5.5 GiB less to share
    assert available("80GiB") - available("80GB") == pytest.approx(0.9 * (80 - 80e9 / 1024**3), abs=0.02)
