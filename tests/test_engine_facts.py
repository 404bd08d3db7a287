"""``nbhelpers.facts.engine``: the GPU, the vLLM version and the ``--max-num-seqs`` in effect, read from Evidence
built by the real bundle reader and gather() (one RawDeployment pod on one node)."""

from __future__ import annotations

from typing import Any

import pytest
from builders import CAPTURED_AT, evidence_from_objects

from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common, engine
from nbhelpers.metrics import catalog
from nbhelpers.models.gpus import CUDA_RESERVED_GIB, GIB, MIB

POD = "vllm-llm-predictor-6d5f8b7c9-q8w2e"
CONTAINER = "kserve-container"
START = CAPTURED_AT.timestamp() - 1800
STAMP = "2026-01-15T11:40:05.000000000Z INFO 01-15 11:40:05"
VERSION_LINE = f"{STAMP} [api_server.py:1805] vLLM API server version 0.10.1"
ARGS_LINE = f"{STAMP} [utils.py:326] non-default args: {{'model': '/mnt/models', 'max_num_seqs': 96}}"
TOTAL_LINE = f"{STAMP} [worker.py:241] the current vLLM instance can use total_gpu_memory (79.11GiB)"


def _objects(
    args: list[str],
    image: str = "vllm/vllm-openai:v0.10.1",
    node_labels: dict[str, str] | None = None,
    device: str | None = None,
) -> list[dict[str, Any]]:
    labels = {"serving.kserve.io/inferenceservice": "vllm-llm", "component": "predictor"}
    container: dict[str, Any] = {"name": CONTAINER, "image": image, "args": ["--model", "/mnt/models", *args]}
    if device is not None:
        container["resources"] = {"limits": {device: "1"}}
    return [
        {
            "apiVersion": "serving.kserve.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {
                "name": "vllm-llm",
                "namespace": "llm",
                "annotations": {"serving.kserve.io/deploymentMode": "RawDeployment"},
            },
            "spec": {"predictor": {"containers": [container]}},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": POD,
                "namespace": "llm",
                "creationTimestamp": "2026-01-15T09:00:00Z",
                "labels": labels,
            },
            "spec": {"nodeName": "gpu-node-a", "containers": [container]},
            "status": {"phase": "Running", "containerStatuses": [{"name": CONTAINER, "restartCount": 0}]},
        },
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-node-a", "labels": node_labels or {}}},
    ]


def _metric(query_id: str, values: list[float]) -> dict[str, Any]:
    result = [{"metric": {"pod": POD}, "values": [[START + 15 * i, str(v)] for i, v in enumerate(values)]}]
    return {"promql": catalog.render(catalog.BY_ID[query_id], 0, "llm", "vllm-llm", 15), "result": result}


# Running levels off at 40 while requests wait.
QUEUE = {
    "vllm_running": _metric("vllm_running", [10, 30, 40, 40, 40, 20]),
    "vllm_waiting": _metric("vllm_waiting", [0, 0, 3, 8, 2, 0]),
}
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
L4_MEMORY = {"nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.memory": "23034"}


def _evidence(
    args: list[str],
    log: str = "",
    metrics: dict[str, Any] | None = None,
    image: str = "vllm/vllm-openai:v0.10.1",
    node_labels: dict[str, str] | None = None,
    device: str | None = None,
) -> tuple[Evidence, common.Workload]:
    logs = {(POD, CONTAINER): log + "\n"} if log else {}
    evidence = evidence_from_objects(
        _objects(args, image, node_labels, device), "llm", "vllm-llm", logs=logs, metrics=metrics or {}
    )
    return evidence, common.current_workload(evidence)


def _ceiling(*args: str, **options: Any) -> engine.Valued | None:
    return engine.max_num_seqs_or_plateau(*_evidence(list(args), **options))


# --- --max-num-seqs: flag > engine log > version/GPU default > observed plateau -------------------------------


def test_the_flag_wins_over_log_default_and_plateau() -> None:
    ceiling = _ceiling("--max-num-seqs", "64", log=f"{VERSION_LINE}\n{ARGS_LINE}", metrics=QUEUE, node_labels=H100)
    assert ceiling == engine.Valued(64, "--max-num-seqs=64")


def test_the_engine_log_wins_over_default_and_plateau() -> None:
    ceiling = _ceiling(log=f"{VERSION_LINE}\n{ARGS_LINE}", metrics=QUEUE, node_labels=H100)
    assert ceiling == engine.Valued(96, "max_num_seqs=96 in the engine's log")


def test_the_version_and_gpu_default_wins_over_the_plateau() -> None:
    ceiling = _ceiling(log=VERSION_LINE, metrics=QUEUE, node_labels=H100)
    assert ceiling is not None and ceiling.value == 1024
    assert ceiling.origin == (
        "--max-num-seqs not set: vLLM V1 default in 0.9.0 and later (vllm PR #17885) on GPUs of 70 GiB or more "
        "other than A100 "
        "(vLLM 0.10.1, GPU NVIDIA H100 80GB HBM3)"
    )


def test_the_default_follows_the_version_and_the_gpu() -> None:
    v0 = _ceiling(image="vllm/vllm-openai:v0.6.3", node_labels=H100)
    a100 = _ceiling(node_labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"})
    assert v0 is not None and v0.value == 256 and "0.6.3 from the image tag" in v0.origin
    assert a100 is not None and a100.value == 256 and "A100" in a100.origin


def test_the_plateau_comes_last_and_only_where_asked_for() -> None:
    evidence, workload = _evidence([], image="quay.io/modh/vllm:rhoai-2.20", metrics=QUEUE, node_labels=H100)
    assert engine.max_num_seqs(evidence, workload) is None  # version unknown: no default is assumed
    assert engine.max_num_seqs_or_plateau(evidence, workload) == engine.Valued(40, engine.PLATEAU_ORIGIN)


@pytest.mark.parametrize(
    ("args", "log", "expected"),
    [
        pytest.param(["--max-num-seqs=64", "--data-parallel-size", "2"], "", 128, id="flag"),
        pytest.param(["-dp", "4"], ARGS_LINE, 384, id="log"),
        pytest.param(["--data-parallel-size=2"], VERSION_LINE, 2048, id="default"),
    ],
)
def test_data_parallel_engines_multiply_the_per_engine_ceiling(args: list[str], log: str, expected: int) -> None:
    ceiling = _ceiling(*args, log=log, node_labels=H100)
    assert ceiling is not None and ceiling.value == expected
    assert ceiling.origin.endswith("data-parallel engines")


def test_the_observed_plateau_is_per_pod_and_not_multiplied() -> None:
    ceiling = _ceiling("--data-parallel-size", "2", image="quay.io/modh/vllm:rhoai-2.20", metrics=QUEUE)
    assert ceiling == engine.Valued(40, engine.PLATEAU_ORIGIN)


# --- the GPU ------------------------------------------------------------------------------------------------


def test_gpu_from_the_product_label_in_the_gpu_table() -> None:
    seen = engine.serving_gpu(*_evidence([], node_labels=H100))
    assert seen is not None
    assert seen.gpu.name == "NVIDIA H100 80GB HBM3"
    assert seen.gpu.total_bytes == 81559 * MIB - int(CUDA_RESERVED_GIB * GIB)
    assert seen.origin == "NVIDIA H100 80GB HBM3 (81559 MiB)"


def test_the_memory_label_wins_over_the_table() -> None:
    seen = engine.serving_gpu(*_evidence([], node_labels={**H100, "nvidia.com/gpu.memory": "40960"}))
    assert seen is not None and seen.gpu.total_bytes == 40960 * MIB - int(CUDA_RESERVED_GIB * GIB)
    assert seen.origin == "node label nvidia.com/gpu.memory=40960 MiB"


def test_the_engine_log_wins_over_node_labels() -> None:
    seen = engine.serving_gpu(*_evidence([], log=TOTAL_LINE, node_labels=L4_MEMORY))
    assert seen is not None and seen.gpu.total_bytes == int(79.11 * GIB) and seen.gpu.name == "NVIDIA L4"
    assert seen.origin == "79.11 GiB as the engine saw it (log)"


def test_dcgm_framebuffer_when_the_node_tells_nothing() -> None:
    metrics = {
        "gpu_fb_used_mib": _metric("gpu_fb_used_mib", [20000, 21000]),
        "gpu_fb_free_mib": _metric("gpu_fb_free_mib", [3034, 2034]),
    }
    seen = engine.serving_gpu(*_evidence([], metrics=metrics))
    assert seen is not None and seen.gpu.name is None
    assert seen.origin == "DCGM framebuffer used + free = 23,034 MiB"


def test_an_unknown_product_without_memory_is_no_gpu() -> None:
    evidence, workload = _evidence([], log=VERSION_LINE, node_labels={"nvidia.com/gpu.product": "NVIDIA-H200"})
    assert engine.serving_gpu(evidence, workload) is None
    assert engine.max_num_seqs(evidence, workload) is None  # version known, GPU not: no default


# MIG, mixed strategy (NVIDIA gpu-feature-discovery README): nvidia.com/gpu.* describe the whole H100, the slice has
# labels of its own. The pod requests nvidia.com/mig-3g.40gb.
H100_MIXED_MIG = {
    "nvidia.com/mig.strategy": "mixed",
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/gpu.memory": "81559",
    "nvidia.com/mig-3g.40gb.count": "2",
    "nvidia.com/mig-3g.40gb.memory": "40448",
}
MIG_3G = "nvidia.com/mig-3g.40gb"


def test_a_mig_slice_is_the_gpu_not_its_card() -> None:
    """Before: nvidia.com/gpu.memory (the whole 80 GB card) was taken as the pod's GPU, so the KV estimate had twice
    the memory the slice has and vLLM's default for a >= 70 GiB card (1024 requests) was assumed."""
    seen = engine.serving_gpu(*_evidence([], node_labels=H100_MIXED_MIG, device=MIG_3G))
    assert seen is not None and seen.gpu.total_bytes == 40448 * MIB
    assert seen.gpu.name == "NVIDIA H100 80GB HBM3 MIG 3g.40gb"  # as CUDA names the slice
    assert seen.origin == (
        "node label nvidia.com/mig-3g.40gb.memory=40448 MiB (the MIG slice; nvidia.com/gpu.memory=81559 MiB is the "
        "whole card)"
    )
    ceiling = _ceiling(log=VERSION_LINE, node_labels=H100_MIXED_MIG, device=MIG_3G)
    assert ceiling is not None and ceiling.value == 256 and "GPUs under 70 GiB" in ceiling.origin


def test_a_mig_slice_without_its_label_is_sized_from_the_profile_name() -> None:
    labels = {k: v for k, v in H100_MIXED_MIG.items() if not k.startswith("nvidia.com/mig-3g")}
    seen = engine.serving_gpu(*_evidence([], node_labels=labels, device=MIG_3G))
    assert seen is not None and seen.gpu.total_bytes == 40 * 10**9
    assert seen.origin.startswith("about 40 GB from the MIG profile nvidia.com/mig-3g.40gb the pod requests")


def test_a_mig_slice_with_the_single_strategy_is_read_from_the_overridden_labels() -> None:
    """MIG strategy single: nvidia.com/gpu is the slice and feature discovery overrides gpu.product and gpu.memory
    with its values (gpu-feature-discovery README, "MIG 'single' strategy"): 4864 MiB as CUDA reports it."""
    labels = {
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/gpu.product": "A100-SXM4-40GB-MIG-1g.5gb",
        "nvidia.com/gpu.memory": "4864",
    }
    seen = engine.serving_gpu(*_evidence([], node_labels=labels, device="nvidia.com/gpu"))
    assert seen is not None and seen.gpu.total_bytes == 4864 * MIB
    assert seen.gpu.name == "A100 SXM4 40GB MIG 1g.5gb"
    assert seen.origin == "node label nvidia.com/gpu.memory=4864 MiB (a MIG slice)"


def test_a_whole_gpu_on_a_mig_node_keeps_the_card_labels() -> None:
    """The healthy case: a pod asking for nvidia.com/gpu on the same node is judged on the card."""
    seen = engine.serving_gpu(*_evidence([], node_labels=H100_MIXED_MIG, device="nvidia.com/gpu"))
    assert seen is not None and seen.gpu.name == "NVIDIA H100 80GB HBM3"
    assert seen.gpu.total_bytes == 81559 * MIB - int(CUDA_RESERVED_GIB * GIB)


# --- the version --------------------------------------------------------------------------------------------


def test_version_from_the_log_before_the_image_tag() -> None:
    seen = engine.vllm_version(*_evidence([], log=VERSION_LINE, image="vllm/vllm-openai:v0.6.3"))
    assert seen == engine.VersionSeen((0, 10, 1), "0.10.1")


def test_version_from_a_vllm_image_tag() -> None:
    seen = engine.vllm_version(*_evidence([], image="vllm/vllm-openai:v0.9.2"))
    assert seen == engine.VersionSeen((0, 9, 2), "0.9.2 from the image tag")


@pytest.mark.parametrize(
    ("image", "args"),
    [
        pytest.param("quay.io/modh/vllm:rhoai-2.20", [], id="tag-not-a-version"),
        pytest.param("kserve/huggingfaceserver:v0.15.0-gpu", ["--model_name", "m"], id="another-servers-tag"),
    ],
)
def test_no_version_from_tags_that_do_not_tell_it(image: str, args: list[str]) -> None:
    assert engine.vllm_version(*_evidence(args, image=image)) is None


def test_nothing_known_is_none() -> None:
    evidence, workload = _evidence([], image="quay.io/modh/vllm:rhoai-2.20")
    assert engine.serving_gpu(evidence, workload) is None
    assert engine.max_num_seqs_or_plateau(evidence, workload) is None
    assert engine.saturated_running(evidence) is None


# --- the model ----------------------------------------------------------------------------------------------


def test_model_names_in_lookup_order() -> None:
    objects = _objects(["--served-model-name", "llm"])
    isvc, pod = objects[0], objects[1]
    isvc["spec"]["predictor"]["model"] = {"storageUri": "hf://meta-llama/Llama-3.1-8B-Instruct"}
    pod["spec"]["containers"][0]["command"] = ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"]
    pod["spec"]["containers"][0]["args"] = ["--served-model-name", "llm", "--max-num-seqs", "64"]
    evidence = evidence_from_objects(objects, "llm", "vllm-llm")
    assert engine.model_names(evidence, common.current_workload(evidence)) == [
        "llm",
        "meta-llama/Llama-3.1-8B-Instruct",
        "hf://meta-llama/Llama-3.1-8B-Instruct",
    ]
