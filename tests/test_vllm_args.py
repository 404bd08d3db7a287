"""The server command-line parser: which server runs, its flags, and the port it listens on."""

from __future__ import annotations

import pytest

from nbhelpers.facts import vllm_args
from nbhelpers.facts.vllm_args import HUGGINGFACESERVER, UNKNOWN, VLLM, parse_command, parse_container


@pytest.mark.parametrize(
    ("command", "args", "port"),
    [
        (["vllm", "serve", "/mnt/models"], ["--port", "8080"], 8080),
        (["vllm", "serve", "/mnt/models"], ["--port=9000"], 9000),
        (["vllm", "serve", "/mnt/models", "--port", "7000"], [], 7000),
        (["/usr/local/bin/vllm"], ["serve", "/mnt/models", "--port=8081"], 8081),
        (["python", "-m", "vllm.entrypoints.openai.api_server"], ["--port=8080", "--model=/mnt/models"], 8080),
        (["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], [], 8000),
        (["vllm", "serve", "/mnt/models"], ["--trust-remote-code", "--max-num-seqs", "64"], 8000),
        (["vllm", "serve", "m"], ["--port", "8000", "--port=8080"], 8080),  # argparse: the last one wins
    ],
)
def test_vllm_forms(command: list[str], args: list[str], port: int) -> None:
    parsed = parse_command(command, args)
    assert parsed.server == VLLM
    assert parsed.port == port
    assert parsed.port_flag == "--port"


def test_vllm_default_port_is_said_to_be_the_default() -> None:
    parsed = parse_command(["vllm", "serve", "/mnt/models"], ["--served-model-name", "llm"])
    assert parsed.port == 8000
    assert "default 8000" in parsed.port_source
    assert parsed.flag("served_model_name") == "llm"


def test_flags_are_normalized_and_boolean_flags_take_no_value() -> None:
    parsed = parse_command(
        ["vllm", "serve"],
        ["--trust-remote-code", "/mnt/models", "--max_num_seqs=128", "--gpu-memory-utilization", "0.95"],
    )
    assert parsed.flag("--trust-remote-code") == ""
    assert parsed.flag("--max-num-seqs") == "128"
    assert parsed.flag("gpu_memory_utilization") == "0.95"


def test_huggingfaceserver_http_port_and_default() -> None:
    explicit = parse_command(["python", "-m", "huggingfaceserver"], ["--model_name=llm", "--http_port=8085"])
    assert (explicit.server, explicit.port, explicit.port_flag) == (HUGGINGFACESERVER, 8085, "--http_port")
    default = parse_command(["python", "-m", "huggingfaceserver"], ["--model_name=llm", "--backend=vllm"])
    assert (default.server, default.port) == (HUGGINGFACESERVER, 8080)


def test_image_entrypoint_is_recognized_when_only_args_are_given() -> None:
    hf = parse_container({"image": "kserve/huggingfaceserver:v0.15.0-gpu", "args": ["--model_name=llm"]})
    assert (hf.server, hf.port) == (HUGGINGFACESERVER, 8080)
    vllm = parse_container({"image": "vllm/vllm-openai:v0.10.1", "args": ["--model", "/mnt/models", "--port", "8080"]})
    assert (vllm.server, vllm.port) == (VLLM, 8080)


def test_unknown_server_has_no_port() -> None:
    parsed = parse_command(["python", "server.py"], ["--port", "8080"])
    assert parsed.server == UNKNOWN
    assert parsed.port is None
    assert parsed.port_flag is None


def test_unresolved_variable_leaves_the_port_unknown() -> None:
    parsed = parse_command(["vllm", "serve", "m"], ["--port", "$(PORT)"])
    assert parsed.server == VLLM
    assert parsed.port is None
    assert "$(PORT)" in parsed.port_source


def test_variable_from_a_literal_env_value_is_expanded_as_the_kubelet_does() -> None:
    container = {
        "command": ["vllm", "serve", "m"],
        "args": ["--port=$(PORT)"],
        "env": [{"name": "PORT", "value": "8080"}],
    }
    assert parse_container(container).port == 8080


def test_variable_from_a_secret_or_field_ref_is_not_guessed() -> None:
    container = {
        "command": ["vllm", "serve", "m"],
        "args": ["--port=$(PORT)"],
        "env": [{"name": "PORT", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "port"}}}],
    }
    assert parse_container(container).port is None


def test_escaped_reference_stays_literal() -> None:
    assert vllm_args.expand_k8s_references("$$(PORT)-$(PORT)", {"PORT": "1"}) == "$(PORT)-1"


def test_shell_wrapper_is_split_and_marked() -> None:
    parsed = parse_command(
        ["/bin/sh", "-c"],
        ["pip install x && exec vllm serve /mnt/models --port ${PORT:-8081} --max-model-len 4096"],
    )
    assert parsed.server == VLLM
    assert parsed.port == 8081
    assert parsed.shell_wrapped
    with_env = parse_command(["bash", "-c", "vllm serve m --port $PORT"], [], {"PORT": "9001"})
    assert with_env.port == 9001
    unresolved = parse_command(["sh", "-c", "vllm serve m --port $PORT"], [])
    assert unresolved.port is None
