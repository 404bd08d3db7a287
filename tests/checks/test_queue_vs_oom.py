"""The ``queue_vs_oom`` step: failing fixtures per code, healthy ones that stay quiet, and patches that fix.

Objects come from YAML fixtures; metrics are written here as the catalog's exact PromQL with a realistic hour of
15 s samples (the bundle source serves them as a capture would); logs are what vLLM 0.10 (V1) and 0.6 (V0) print,
stamped inside the window.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import pytest
import yaml
from builders import CAPTURED_AT
from check_cases import apply_patch, codes, evidence_of, load_case, only, rollout, serious

from nbhelpers.checks import STEP_IDS, queue_vs_oom
from nbhelpers.checks.queue_vs_oom._memory import ESTIMATE_MARGIN_GIB
from nbhelpers.errors import StepSkipped
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding, rank_root_causes
from nbhelpers.metrics import catalog
from nbhelpers.models.model_table import lookup_model
from nbhelpers.models.vllm_memory import GIB, Gpu, ServingPlan, estimate

STEP = 15
SAMPLES = 240  # one hour
END = CAPTURED_AT.timestamp()
ISVC_REF = "InferenceService.serving.kserve.io/llm/vllm-llm"

RAW = ("checks/healthy/raw.yaml", "checks/healthy/queue_raw.yaml")
SERVERLESS = ("checks/healthy/serverless.yaml", "checks/healthy/queue_serverless.yaml")
RAW_POD = "vllm-llm-predictor-6d5f8b7c9-q8w2e"
RAW_POD_2 = "vllm-llm-predictor-6d5f8b7c9-t4m7n"
SLS_POD = "vllm-llm-predictor-00001-deployment-7f9c6d-x2k4p"
QUEUE_IDS = ("QUEUE_SATURATION", "KV_CACHE_PRESSURE")

Shape = Callable[[int], float]  # sample index (0 = window start, one per 15 s) -> value


# --- metrics as a capture records them ----------------------------------------------------------------


def _series(shape: Shape, **labels: str) -> dict[str, Any]:
    start = END - STEP * SAMPLES
    return {"metric": labels, "values": [[start + STEP * i, str(round(shape(i), 4))] for i in range(SAMPLES)]}


def _metrics(**results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        query_id: {"promql": catalog.render(catalog.BY_ID[query_id], 0, "llm", "vllm-llm", STEP), "result": result}
        for query_id, result in results.items()
    }


def _minute(index: int) -> float:
    return index * STEP / 60


def _noisy(low: float, high: float, seed: int) -> Shape:
    """Values wandering between ``low`` and ``high`` (deterministic)."""
    draws = random.Random(seed)
    values = [draws.uniform(low, high) for _ in range(SAMPLES)]
    return lambda i: values[i]


def _during(start_minute: float, end_minute: float, inside: Shape, outside: Shape) -> Shape:
    return lambda i: inside(i) if start_minute <= _minute(i) < end_minute else outside(i)


def _const(value: float) -> Shape:
    return lambda _: value


def _ramp(start_minute: float, end_minute: float, low: float, high: float) -> Shape:
    span = end_minute - start_minute
    return lambda i: round(low + (high - low) * min(1.0, max(0.0, (_minute(i) - start_minute) / span)))


def _pod_metrics(pod: str, running: Shape, waiting: Shape, kv: Shape) -> dict[str, list[dict[str, Any]]]:
    return {
        "vllm_running": [_series(running, pod=pod)],
        "vllm_waiting": [_series(waiting, pod=pod)],
        "vllm_kv_cache_usage": [_series(kv, pod=pod)],
    }


def _merge(*parts: Mapping[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    merged: dict[str, list[dict[str, Any]]] = {}
    for part in parts:
        for query_id, result in part.items():
            merged.setdefault(query_id, []).extend(result)
    return merged


def _traffic(rate: float, **extra: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Request and token rates of a chat workload (about 550 prompt and 220 generated tokens per request)."""
    return {
        "vllm_request_rate": [_series(_noisy(rate * 0.9, rate * 1.1, 7))],
        "vllm_prompt_tokens_rate": [_series(_noisy(rate * 500, rate * 600, 8))],
        "vllm_generation_tokens_rate": [_series(_noisy(rate * 200, rate * 240, 9))],
        **extra,
    }


# --- logs as the kubelet returns them ------------------------------------------------------------------


def _log(*lines: tuple[str, str]) -> str:
    """Lines stamped inside the window: (HH:MM:SS, text) -> kubelet timestamp + vLLM's own prefix."""
    return "".join(f"2026-01-15T{clock}.000000000Z {text}\n" for clock, text in lines)


def _v1_start(clock: str, args: str) -> list[tuple[str, str]]:
    return [
        (clock, f"INFO 01-15 {clock} [api_server.py:1805] vLLM API server version 0.10.1"),
        (clock, f"INFO 01-15 {clock} [utils.py:326] non-default args: {args}"),
    ]


# --- helpers ---------------------------------------------------------------------------------------------


def _run(
    objects: list[dict[str, Any]],
    metrics: Mapping[str, list[dict[str, Any]]] | None = None,
    logs: Mapping[tuple[str, str], str] | None = None,
) -> list[Finding]:
    return queue_vs_oom.run(evidence_of(objects, metrics=_metrics(**metrics) if metrics else None, logs=logs))


def _args(objects: list[dict[str, Any]], where: str = "pod") -> list[str]:
    if where == "pod":
        pod = next(obj for obj in objects if obj["kind"] == "Pod")
        container = next(c for c in pod["spec"]["containers"] if c["name"] == "kserve-container")
        return list(container["args"])
    predictor = next(obj for obj in objects if obj["kind"] == "InferenceService")["spec"]["predictor"]
    holder = predictor["containers"][0] if predictor.get("containers") else predictor["model"]
    return list(holder["args"])


def _patched(objects: list[dict[str, Any]], finding: Finding) -> list[dict[str, Any]]:
    assert finding.patch is not None and finding.patch.target == ISVC_REF
    return rollout(apply_patch(objects, finding))


def _remediation_commands(finding: Finding) -> tuple[str, str]:
    apply_part, rollback_part = finding.remediation.split("Roll back:\n", 1)
    return apply_part.split("Apply:\n", 1)[1].strip(), rollback_part.strip()


# --- QUEUE_SATURATION ------------------------------------------------------------------------------------


def _spike_at_max_replicas() -> dict[str, list[dict[str, Any]]]:
    """Both pods pinned at 64 from minute 30 to 48 while the queue grows to 45; KV 0.82-0.93; 504s from 38."""
    pods = [
        _pod_metrics(
            pod,
            _during(30, 48, _noisy(61, 64, seed), _noisy(30, 50, seed + 1)),
            _during(30, 48, _ramp(30, 48, 3, 45), _const(0)),
            _during(30, 48, _noisy(0.82, 0.93, seed + 2), _noisy(0.4, 0.6, seed + 3)),
        )
        for pod, seed in ((RAW_POD, 10), (RAW_POD_2, 20))
    ]
    return _merge(
        *pods,
        _traffic(
            9.0,
            vllm_queue_time_p95=[_series(_during(30, 48, _ramp(30, 48, 1, 9), _const(0.2)))],
            vllm_preemptions_rate=[_series(_const(0))],
            nginx_requests_by_status=[
                _series(_const(9.0), status="200"),
                _series(_during(38, 48, _const(0.5), _const(0)), status="504"),
            ],
        ),
    )


def test_queue_at_the_ceiling_with_504s_is_critical_saturation_and_raises_max_replicas() -> None:
    objects = load_case(*RAW, "checks/QUEUE_SATURATION/raw_at_max_replicas.yaml")
    findings = _run(objects, _spike_at_max_replicas())
    assert codes(serious(findings)) == {"QUEUE_SATURATION"}
    finding = only(findings, "QUEUE_SATURATION")
    assert finding.level is Severity.CRITICAL
    assert f"Pod/llm/{RAW_POD}" in finding.objects and f"Pod/llm/{RAW_POD_2}" in finding.objects
    assert "ceiling 64 (--max-num-seqs=64)" in finding.summary
    assert "(up to 44)" in finding.summary  # the ramp reaches 44 in the last sample before minute 48
    assert "About 300 requests were answered 503/504" in finding.summary  # 0.5/s for 10 minutes
    assert any("regime of the window: capacity: requests queued" in line for line in finding.evidence)
    assert any("ingress-nginx: ≈300 answers 503/504" in line for line in finding.evidence)
    # Demand peaked at (64 + 45) / 64 = 1.70 times two pods: four replicas; the KV cache had no headroom.
    assert yaml.safe_load(finding.patch.body if finding.patch else "") == {"spec": {"predictor": {"maxReplicas": 4}}}
    assert "maxReplicas from 2 to 4" in finding.remediation
    apply_command, rollback = _remediation_commands(finding)
    assert apply_command.startswith("kubectl patch inferenceservices.serving.kserve.io vllm-llm -n llm --type merge")
    assert '"maxReplicas":2' in rollback

    again = only(_run(_patched(objects, finding), _spike_at_max_replicas()), "QUEUE_SATURATION")
    assert again.patch is None
    assert "maxReplicas is already 4" in again.remediation


def _pinned_with_kv_headroom(ceiling: float, kv: float) -> dict[str, list[dict[str, Any]]]:
    """One Serverless pod pinned at ``ceiling`` from minute 20 to 35 with the queue rising to 20; KV near ``kv``."""
    return _merge(
        _pod_metrics(
            SLS_POD,
            _during(20, 35, _noisy(ceiling - 1, ceiling, 31), _noisy(ceiling * 0.4, ceiling * 0.8, 32)),
            _during(20, 35, _ramp(20, 30, 4, 20), _const(0)),
            _during(20, 35, _noisy(kv - 0.03, kv + 0.02, 33), _noisy(0.15, 0.3, 34)),
        ),
        _traffic(
            4.0,
            vllm_queue_time_p95=[_series(_during(20, 35, _ramp(20, 30, 2, 4), _const(0.1)))],
            istio_requests_by_code=[_series(_const(4.0), response_code="200", response_flags="-")],
        ),
    )


def test_serverless_queue_with_kv_headroom_raises_max_num_seqs_in_the_model_args() -> None:
    objects = load_case(*SERVERLESS, "checks/QUEUE_SATURATION/serverless_max_num_seqs_32.yaml")
    metrics = _pinned_with_kv_headroom(32, 0.4)
    finding = only(_run(objects, metrics), "QUEUE_SATURATION")
    assert finding.level is Severity.WARNING  # no 503/504: not raised
    assert "ceiling 32 (--max-num-seqs=32)" in finding.summary
    assert "queue time p95 reached 4.0 s" in finding.summary
    # min(2 x 32, floor(32 x 0.85 / 0.42)) = 64, in the model's args (KServe appends them after the runtime's).
    assert _args(apply_patch(objects, finding), "isvc") == ["--max-model-len=8192", "--max-num-seqs=64"]

    patched = _patched(objects, finding)
    assert _args(patched)[-1] == "--max-num-seqs=64"
    assert "QUEUE_SATURATION" not in codes(_run(patched, metrics))


def test_vllm_0_8_4_on_a_b200_queues_at_256_requests() -> None:
    """No --max-num-seqs, vLLM 0.8.4 on a B200 (180 GiB): PR #16158 gave only H100/H200 (by device name) 1024
    requests, so the pod runs at most 256 and queues above that. Before (the 0.9 rule for every release, >= 70 GiB
    gets 1024) the pod at 256 was not seen at its ceiling."""
    objects = load_case(*SERVERLESS)
    for obj in objects:
        if obj["kind"] == "Node":
            obj["metadata"]["labels"] = {
                "nvidia.com/gpu.product": "NVIDIA-B200",
                "nvidia.com/gpu.memory": "183359",
                "nvidia.com/gpu.count": "8",
            }
    logs = {
        (SLS_POD, "kserve-container"): _log(
            ("11:00:05", "INFO 01-15 11:00:05 [api_server.py:1043] vLLM API server version 0.8.4")
        )
    }
    finding = only(_run(objects, _pinned_with_kv_headroom(256, 0.4), logs), "QUEUE_SATURATION")
    assert (
        "ceiling 256 (--max-num-seqs not set: vLLM V1 default in 0.8.4 (vllm PR #16158) on GPUs other than H100 and H200"
        in (finding.summary)
    )


def test_unknown_ceiling_is_read_from_the_plateau() -> None:
    # No --max-num-seqs and no vLLM version in the window's logs: running levels off at 48 while 20 wait.
    objects = load_case(*SERVERLESS)
    metrics = _merge(
        _pod_metrics(
            SLS_POD,
            _during(20, 35, _noisy(47, 48, 41), _noisy(15, 30, 42)),
            _during(20, 35, _ramp(20, 30, 4, 20), _const(0)),
            _during(20, 35, _noisy(0.55, 0.6, 43), _noisy(0.2, 0.3, 44)),
        )
    )
    finding = only(_run(objects, metrics), "QUEUE_SATURATION")
    assert "ceiling 48 (observed plateau of running requests; flag not set)" in finding.summary
    # KV at most 0.6: floor(48 x 0.85 / 0.6) = 68 requests fit the cache at these request sizes.
    assert _args(apply_patch(objects, finding), "isvc") == ["--max-model-len=8192", "--max-num-seqs=68"]


# --- healthy: busy, short queues, spikes that drain, KV without preemptions, default utilization ------------


def _busy_but_healthy() -> dict[str, list[dict[str, Any]]]:
    """Running 40-63 of 64, a request or two waiting for one scrape now and then, KV 0.45-0.7, 2xx only."""
    spikes = {17, 18, 95, 140, 141, 203}
    return _merge(
        _pod_metrics(
            RAW_POD,
            _noisy(40, 63, 51),
            lambda i: 2.0 if i in spikes else 0.0,
            _noisy(0.45, 0.7, 52),
        ),
        _traffic(
            6.0,
            vllm_queue_time_p95=[_series(_noisy(0.05, 0.4, 53))],
            vllm_preemptions_rate=[_series(_const(0))],
            nginx_requests_by_status=[_series(_const(6.0), status="200")],
        ),
    )


def _pinned_with_short_queue() -> dict[str, list[dict[str, Any]]]:
    """At the ceiling for 15 minutes with one or two requests waiting a fraction of a second; 2xx only."""
    return _merge(
        _pod_metrics(
            RAW_POD,
            _during(10, 25, _noisy(62, 64, 61), _noisy(35, 55, 62)),
            _during(10, 25, lambda i: 1.0 + i % 2, _const(0)),
            _noisy(0.6, 0.8, 63),
        ),
        _traffic(
            7.0,
            vllm_queue_time_p95=[_series(_noisy(0.1, 0.4, 64))],
            nginx_requests_by_status=[_series(_const(7.0), status="200")],
        ),
    )


def _spikes_that_drain() -> dict[str, list[dict[str, Any]]]:
    """Three bursts of 30 requests that the pod clears within a minute each."""
    bursts = {40: 30.0, 41: 22.0, 42: 9.0, 43: 2.0, 120: 28.0, 121: 14.0, 122: 3.0, 200: 30.0, 201: 11.0}
    return _merge(
        _pod_metrics(RAW_POD, _const(64), lambda i: bursts.get(i, 0.0), _noisy(0.5, 0.75, 71)),
        _traffic(8.0, vllm_queue_time_p95=[_series(_noisy(0.2, 0.9, 72))]),
    )


def _kv_without_preemptions(kv: float) -> dict[str, list[dict[str, Any]]]:
    return _merge(
        _pod_metrics(SLS_POD, _noisy(20, 30, 81), _const(0), _noisy(kv - 0.02, kv + 0.02, 82)),
        _traffic(3.0, vllm_preemptions_rate=[_series(_const(0))]),
    )


@pytest.mark.parametrize(
    ("base", "metrics"),
    [
        pytest.param(RAW, _busy_but_healthy(), id="busy-short-queue-no-5xx"),
        pytest.param(RAW, _pinned_with_short_queue(), id="at-ceiling-short-steady-queue"),
        pytest.param(RAW, _spikes_that_drain(), id="bursts-that-drain"),
        pytest.param(SERVERLESS, _kv_without_preemptions(0.7), id="kv-0.7-no-preemptions"),
        pytest.param(SERVERLESS, _kv_without_preemptions(0.97), id="kv-full-no-preemptions-no-queue"),
        pytest.param(SERVERLESS, None, id="default-utilization-no-prometheus"),
    ],
)
def test_healthy_services_are_not_flagged(base: tuple[str, ...], metrics: dict[str, Any] | None) -> None:
    assert serious(_run(load_case(*base), metrics)) == []


def test_a_server_that_is_not_vllm_is_skipped() -> None:
    objects = load_case(*RAW)
    for obj in objects:
        if obj["kind"] in ("Pod", "InferenceService"):
            containers = obj["spec"]["containers"] if obj["kind"] == "Pod" else obj["spec"]["predictor"]["containers"]
            containers[0].update(image="example.com/tgi:2.0", command=["python", "serve.py"], args=["--port", "8080"])
    with pytest.raises(StepSkipped):
        _run(objects)


# --- KV_CACHE_PRESSURE ------------------------------------------------------------------------------------


def _long_contexts(pod: str, running: float, preemptions: float, failed: str | None = None) -> dict[str, Any]:
    """From minute 20 to 40 the cache is full (0.96-1.0) at about ``running`` requests and 5-14 wait."""
    extra: dict[str, list[dict[str, Any]]] = {
        "vllm_queue_time_p95": [_series(_during(20, 40, _noisy(3, 8, 93), _const(0.2)))],
    }
    if preemptions:
        extra["vllm_preemptions_rate"] = [
            _series(_during(20, 40, _noisy(preemptions * 0.8, preemptions, 94), _const(0)))
        ]
    if failed:
        extra["knative_requests_by_code"] = [
            _series(_const(2.0), response_code="200"),
            _series(_during(30, 40, _const(0.2), _const(0)), response_code=failed),
        ]
    return _merge(
        _pod_metrics(
            pod,
            _during(20, 40, _noisy(running - 2, running, 91), _noisy(10, running - 10, 92)),
            _during(20, 40, _noisy(5, 14, 95), _const(0)),
            _during(20, 40, _noisy(0.96, 1.0, 96), _noisy(0.3, 0.7, 97)),
        ),
        _traffic(2.0, **extra),
    )


def test_full_cache_with_preemptions_lowers_max_num_seqs() -> None:
    objects = load_case(*RAW, "checks/KV_CACHE_PRESSURE/raw_long_contexts.yaml")
    metrics = _long_contexts(RAW_POD, 48, 0.3)
    findings = _run(objects, metrics)
    assert codes(serious(findings)) == {"KV_CACHE_PRESSURE"}
    finding = only(findings, "KV_CACHE_PRESSURE")
    assert finding.level is Severity.WARNING
    assert "up to 20.0 min" in finding.summary and "at up to 48 running requests" in finding.summary
    assert "preemptions" in finding.summary
    assert "concurrency ceiling: 64 (--max-num-seqs=64)" in finding.evidence
    assert any("regime of the window: KV-cache pressure" in line for line in finding.evidence)
    # floor(48 x 0.85 / 1.0) = 40, replacing the "--max-num-seqs", "64" pair where it stands.
    assert _args(apply_patch(objects, finding), "isvc")[-4:] == ["--max-model-len", "32768", "--max-num-seqs", "40"]

    after = _run(_patched(objects, finding), metrics)
    assert serious(after) == []
    assert only(after, "KV_CACHE_PRESSURE").level is Severity.INFO


def test_cache_blocking_admission_under_an_unknown_ceiling_with_503s_is_critical() -> None:
    objects = load_case(*SERVERLESS, "checks/KV_CACHE_PRESSURE/serverless_defaults.yaml")
    findings = _run(objects, _long_contexts(SLS_POD, 24, 0.0, failed="503"))
    assert codes(serious(findings)) == {"KV_CACHE_PRESSURE"}  # the plateau at 24 is the cache's, not a ceiling
    finding = only(findings, "KV_CACHE_PRESSURE")
    assert finding.level is Severity.CRITICAL
    assert "admission blocked by the cache" in finding.summary
    assert "About 120 requests were answered 503/504" in finding.summary
    assert _args(apply_patch(objects, finding), "isvc") == ["--max-model-len=32768", "--max-num-seqs=20"]


# --- GPU_OOM -----------------------------------------------------------------------------------------------


PROFILING_OOM = _log(
    *_v1_start(
        "11:41:02",
        "{'model': 'meta-llama/Llama-3.1-8B-Instruct', 'max_model_len': 16384, 'max_num_batched_tokens': 32768, "
        "'gpu_memory_utilization': 0.95}",
    ),
    ("11:41:40", "INFO 01-15 11:41:40 [gpu_model_runner.py:1892] Model loading took 14.9889 GiB and 31.402 seconds"),
    ("11:42:29", "(EngineCore_0 pid=211) ERROR 01-15 11:42:29 [core.py:700] EngineCore failed to start."),
    (
        "11:42:29",
        "(EngineCore_0 pid=211) ERROR 01-15 11:42:29 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. Tried "
        "to allocate 3.50 GiB. GPU 0 has a total capacity of 21.96 GiB of which 318.06 MiB is free. Including "
        "non-PyTorch memory, this process has 21.64 GiB memory in use.",
    ),
    ("11:42:31", "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"),
)


def _dcgm_full(pod: str) -> dict[str, list[dict[str, Any]]]:
    """DCGM scraped with the exporter's own pod label: the workload's pod is in ``exported_pod``."""
    labels = {"exported_pod": pod, "pod": "dcgm-exporter-7xk2p"}
    wander = _noisy(22400, 22800, 101)

    def used(i: int) -> float:
        return 22805.0 if i == 170 else float(round(wander(i)))

    return {
        "gpu_fb_used_mib": [_series(used, **labels)],
        "gpu_fb_free_mib": [_series(lambda i: 23034 - used(i), **labels)],
    }


def test_oom_while_profiling_gets_flags_that_fit_the_card() -> None:
    objects = load_case(*RAW, "checks/GPU_OOM/raw_profiling_oom.yaml")
    logs = {(RAW_POD, "kserve-container.previous"): PROFILING_OOM}
    findings = _run(objects, _dcgm_full(RAW_POD), logs)
    assert codes(serious(findings)) == {"GPU_OOM"}  # 0.95 is not above the risky threshold
    finding = only(findings, "GPU_OOM")
    assert finding.level is Severity.CRITICAL
    assert "tried to allocate 3.5 GiB with 0.31 GiB free of 21.96 GiB" in finding.summary
    assert "while starting up" in finding.title
    assert f"Pod/llm/{RAW_POD}: 5 restarts, last exit Error (code 1), now CrashLoopBackOff" in finding.evidence
    assert f"DCGM {RAW_POD}: framebuffer used up to 22,805 MiB of 23,034 MiB (99%)" in " ".join(finding.evidence)
    assert "memory model: meta-llama/Llama-3.1-8B-Instruct on a GPU of 21.96 GiB as the engine saw it (log)" in (
        finding.evidence
    )
    # Utilization back to vLLM's 0.9 and the L4's default token budget (2048); 16,384 tokens still fit.
    patched_args = _args(apply_patch(objects, finding), "isvc")
    assert patched_args[-6:] == [
        "--max-model-len",
        "16384",
        "--max-num-batched-tokens",
        "2048",
        "--gpu-memory-utilization",
        "0.9",
    ]

    patched = _patched(objects, finding)
    assert serious(_run(patched)) == []  # the new rollout's pods have not crashed
    # The memory model, with its safety margin, fits 16K contexts under the new flags but not the old ones.
    llama = lookup_model("meta-llama/Llama-3.1-8B-Instruct")
    l4 = Gpu(int(21.96 * GIB), "NVIDIA L4")
    old = ServingPlan(llama, l4, gpu_memory_utilization=0.95, max_model_len=16384, max_num_batched_tokens=32768)
    new = replace(old, gpu_memory_utilization=0.9, max_num_batched_tokens=2048)
    bytes_for_one_request = 16384 * estimate(old).kv_bytes_per_token
    margin = ESTIMATE_MARGIN_GIB * GIB
    assert estimate(new).budget.available - margin >= bytes_for_one_request
    assert estimate(old).budget.available - margin < bytes_for_one_request


# Issue #14 (truncated logs): a previous log cut by tailLines / limitBytes, from a container that had served for
# hours, holds request lines and then a runtime CUDA OOM, and no engine start line. Before: "while loading
# weights" and the "weights do not fit" fix; after: the phase is not read from a log that does not reach the start.
CUT_RUNTIME_OOM_ERROR = (
    "11:42:29",
    "(EngineCore_0 pid=211) ERROR 01-15 11:42:29 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. Tried "
    "to allocate 3.50 GiB. GPU 0 has a total capacity of 21.96 GiB of which 318.06 MiB is free.",
)
CUT_RUNTIME_OOM = _log(
    ("11:41:02", 'INFO:     10.0.3.7:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK'),
    ("11:41:40", "INFO 01-15 11:41:40 [loggers.py:123] Engine 000: Avg prompt throughput: 812.4 tokens/s"),
    CUT_RUNTIME_OOM_ERROR,
)


def test_oom_in_a_cut_log_is_not_read_as_loading_weights() -> None:
    objects = load_case(*RAW, "checks/GPU_OOM/raw_profiling_oom.yaml")
    logs = {(RAW_POD, "kserve-container.previous"): CUT_RUNTIME_OOM}
    finding = only(_run(objects, _dcgm_full(RAW_POD), logs), "GPU_OOM")
    assert "loading weights" not in finding.title
    # Its request and stats lines before the error show the phase the start line would have shown.
    assert "while serving, as its request and stats lines show (the log was cut after the engine's start)" in (
        finding.title
    )
    assert "weights alone do not fit" not in finding.remediation
    # Without any line that only a serving engine writes, the phase stays unknown.
    bare = _log(CUT_RUNTIME_OOM_ERROR)
    unknown = only(_run(objects, _dcgm_full(RAW_POD), {(RAW_POD, "kserve-container.previous"): bare}), "GPU_OOM")
    assert "the log cannot show (it was cut after the engine's start)" in unknown.title
    assert "serving" not in unknown.title and "loading weights" not in unknown.title


LOADING_OOM = _log(
    *_v1_start("11:30:05", "{'model': '/mnt/models', 'max_model_len': 8192}"),
    (
        "11:33:38",
        "(EngineCore_0 pid=187) ERROR 01-15 11:33:38 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. Tried "
        "to allocate 896.00 MiB. GPU 0 has a total capacity of 79.19 GiB of which 401.06 MiB is free.",
    ),
    ("11:33:39", "ERROR 01-15 11:33:39 [async_llm.py:420] EngineDeadError: EngineCore encountered an issue."),
)


def test_weights_that_do_not_fit_one_gpu_ask_for_tensor_parallelism_without_a_patch() -> None:
    objects = load_case(*SERVERLESS, "checks/GPU_OOM/serverless_70b_one_gpu.yaml")
    findings = _run(objects, None, {(SLS_POD, "kserve-container.previous"): LOADING_OOM})
    assert codes(serious(findings)) == {"GPU_OOM"}  # the engine never got to size a KV cache
    finding = only(findings, "GPU_OOM")
    assert finding.level is Severity.CRITICAL
    assert "while loading weights" in finding.title
    assert "tried to allocate 896 MiB with 0.39 GiB free of 79.19 GiB" in finding.summary
    assert any("EngineDeadError" in line for line in finding.evidence)
    assert finding.patch is None
    assert "--tensor-parallel-size 2" in finding.remediation  # 131 GiB of weights over two H100s

    # With the crash's log lost, the restarts and the weights' size tell the same story, as a computed finding.
    computed = only(_run(objects), "GPU_OOM")
    assert computed.title == "weights of 131 GiB per GPU do not fit a 79 GiB GPU"
    assert computed.summary.startswith("Computed") and computed.patch is None
    assert "--tensor-parallel-size 2" in computed.remediation


def test_weights_larger_than_the_mig_slice_are_an_oom_on_the_slice() -> None:
    """Llama-3.1-8B (about 15 GiB of weights) on nvidia.com/mig-1g.10gb of an A100 80GB (MIG strategy mixed), crash
    looping with no log line. Before: the node's nvidia.com/gpu.memory (the whole 80 GB card) was taken as the GPU,
    the weights seemed to fit and nothing explained the crashes."""
    objects = load_case(*RAW, "checks/GPU_OOM/raw_mig_slice_8b.yaml")
    finding = only(_run(objects), "GPU_OOM")
    assert finding.title == "weights of 15 GiB per GPU do not fit a 10 GiB GPU"
    assert "more than the 9.50 GiB of the GPU" in finding.summary
    assert any("node label nvidia.com/mig-1g.10gb.memory=9728 MiB (the MIG slice" in line for line in finding.evidence)
    assert "runs on a MIG slice (nvidia.com/mig-1g.10gb)" in finding.remediation
    assert "request 2 GPUs" not in finding.remediation


def test_weights_that_fit_a_larger_mig_slice_raise_no_oom() -> None:
    """The same model on nvidia.com/mig-3g.40gb (40192 MiB): the weights fit the slice, no GPU_OOM."""
    objects = load_case(*RAW, "checks/GPU_OOM/raw_mig_slice_8b.yaml")
    for obj in objects:
        text = json.dumps(obj).replace("mig-1g.10gb.memory", "mig-3g.40gb.memory").replace('"9728"', '"40192"')
        obj.clear()
        obj.update(json.loads(text.replace("mig-1g.10gb", "mig-3g.40gb")))
    assert "GPU_OOM" not in codes(_run(objects))


def _v082_start(clock: str, args: str) -> list[tuple[str, str]]:
    return [
        (clock, f"INFO 01-15 {clock} [api_server.py:981] vLLM API server version 0.8.2"),
        (clock, f"INFO 01-15 {clock} [api_server.py:982] args: {args}"),
        (clock, f"INFO 01-15 {clock} [gpu_model_runner.py:1164] Model loading took 14.9889 GB and 30.80 seconds"),
        (clock, f"INFO 01-15 {clock} [kv_cache_utils.py:566] GPU KV cache size: 33,904 tokens"),
        (clock, f"INFO 01-15 {clock} [kv_cache_utils.py:569] Maximum concurrency for 16,384 tokens per request: 2.07x"),
    ]


# vLLM 0.8.2's start-up dying in the sampler warm-up, as in vllm-project/vllm issue #15617: the torch error, then
# vLLM's own message from gpu_model_runner.py _dummy_sampler_run.
SAMPLER_WARMUP_OOM = _log(
    *_v082_start("11:41:02", "Namespace(model='meta-llama/Llama-3.1-8B-Instruct', max_model_len=16384, ...)"),
    (
        "11:42:27",
        "ERROR 01-15 11:42:27 [core.py:343] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. "
        "GPU 0 has a total capacity of 21.96 GiB of which 1.09 GiB is free. Including non-PyTorch memory, this process "
        "has 20.86 GiB memory in use.",
    ),
    (
        "11:42:27",
        "ERROR 01-15 11:42:27 [core.py:343] RuntimeError: CUDA out of memory occurred when warming up sampler with "
        "1024 dummy requests. Please try lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the "
        "engine.",
    ),
    ("11:42:28", "ERROR 01-15 11:42:28 [core.py:343] EngineCore hit an exception"),
)

SAMPLER_WARMUP_OK = _log(
    *_v082_start("11:41:02", "Namespace(model='meta-llama/Llama-3.1-8B-Instruct', max_num_seqs=512, ...)"),
    ("11:42:27", "INFO 01-15 11:42:27 [gpu_model_runner.py:1499] Graph capturing finished in 21 secs, took 0.52 GiB"),
    ("11:42:28", "INFO 01-15 11:42:28 [core.py:138] init engine (profile, create kv cache, warmup model) took 86.2 s"),
    ("11:42:29", "INFO 01-15 11:42:29 [api_server.py:1028] Starting vLLM API server on http://0.0.0.0:8080"),
    ("11:42:29", "INFO:     Application startup complete."),
)


def test_sampler_warmup_oom_lowers_max_num_seqs_first() -> None:
    """Before: the fix only lowered --gpu-memory-utilization, which leaves the same 1024 requests to warm up."""
    objects = load_case(*RAW, "checks/GPU_OOM/raw_sampler_warmup_oom.yaml")
    logs = {(RAW_POD, "kserve-container.previous"): SAMPLER_WARMUP_OOM}
    findings = _run(objects, None, logs)
    finding = only(findings, "GPU_OOM")
    assert finding.level is Severity.CRITICAL
    assert finding.summary.startswith(
        "The GPU ran out of memory (warming up the sampler with 1024 dummy requests; tried to allocate 1.96 GiB"
    )
    assert "vLLM could not warm up its sampler for 1024 requests at once" in finding.summary
    assert any("warming up sampler with 1024 dummy requests" in line for line in finding.evidence)
    assert finding.remediation.startswith(
        "The sampler warm-up did not fit: first lower --max-num-seqs from 1024 (--max-num-seqs not set: vLLM V1 "
        "default in 0.8.0-0.8.3 (the V1 engine's first defaults) on every GPU (vLLM 0.8.2, GPU NVIDIA L4)) to 512"
    )
    assert "to 512, as vLLM's own message asks" in finding.remediation
    # Half of the 1024 the engine tried, first; then the utilization back to vLLM's default (0.95 is above it).
    patched_args = _args(apply_patch(objects, finding), "isvc")
    assert patched_args[-3:] == ["--gpu-memory-utilization", "0.9", "--max-num-seqs=512"]
    assert serious(_run(_patched(objects, finding))) == []


def test_sampler_warmup_oom_at_the_default_utilization_keeps_it() -> None:
    objects = load_case(*RAW, "checks/GPU_OOM/raw_sampler_warmup_oom.yaml")
    for obj in objects:
        if obj["kind"] in ("InferenceService", "Pod"):
            containers = obj["spec"]["predictor"]["containers"] if obj["kind"] != "Pod" else obj["spec"]["containers"]
            args = containers[0]["args"]
            args[args.index("--gpu-memory-utilization") + 1] = "0.9"
            args += ["--max-num-seqs", "256"]
    log = SAMPLER_WARMUP_OOM.replace("with 1024 dummy", "with 256 dummy")
    finding = only(_run(objects, None, {(RAW_POD, "kserve-container.previous"): log}), "GPU_OOM")
    assert "first lower --max-num-seqs from 256 (--max-num-seqs=256) to 128" in finding.remediation
    assert "keep --gpu-memory-utilization at 0.9" in finding.remediation
    patched_args = _args(apply_patch(objects, finding), "isvc")
    assert patched_args[-4:] == ["--gpu-memory-utilization", "0.9", "--max-num-seqs", "128"]  # replaced in place


def test_sampler_warmed_up_after_the_fix_is_healthy() -> None:
    objects = load_case(*RAW, "checks/healthy/queue_sampler_warmup_ok.yaml")
    findings = _run(objects, None, {(RAW_POD, "kserve-container"): SAMPLER_WARMUP_OK})
    assert "GPU_OOM" not in codes(findings)
    assert serious(findings) == []


def test_a_profiling_oom_is_not_taken_for_the_sampler_warm_up() -> None:
    objects = load_case(*RAW, "checks/GPU_OOM/raw_profiling_oom.yaml")
    finding = only(_run(objects, None, {(RAW_POD, "kserve-container.previous"): PROFILING_OOM}), "GPU_OOM")
    assert "--max-num-seqs" not in finding.remediation and "warming up" not in finding.summary


# --- VLLM_KV_CAPACITY_EXCEEDED --------------------------------------------------------------------------------


DEFAULT_CONTEXT_REFUSED = _log(
    *_v1_start("11:44:00", "{'model': 'meta-llama/Llama-3.1-8B-Instruct'}"),
    ("11:44:41", "INFO 01-15 11:44:41 [gpu_model_runner.py:1892] Model loading took 14.9889 GiB and 30.117 seconds"),
    ("11:45:49", "INFO 01-15 11:45:49 [gpu_worker.py:276] Available KV cache memory: 4.19 GiB"),
    (
        "11:45:50",
        "(EngineCore_0 pid=214) ERROR 01-15 11:45:50 [core.py:700] ValueError: To serve at least one request with the "
        "models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache "
        "memory (4.19 GiB). Based on the available memory, the estimated maximum model length is 34304. Try "
        "increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
    ),
)


def test_engine_refusing_the_model_default_context_gets_its_own_estimate() -> None:
    objects = load_case(*RAW, "checks/VLLM_KV_CAPACITY_EXCEEDED/raw_default_context.yaml")
    findings = _run(objects, None, {(RAW_POD, "kserve-container.previous"): DEFAULT_CONTEXT_REFUSED})
    assert codes(serious(findings)) == {"VLLM_KV_CAPACITY_EXCEEDED"}
    finding = only(findings, "VLLM_KV_CAPACITY_EXCEEDED")
    assert finding.level is Severity.CRITICAL
    assert finding.title == "--max-model-len 131,072 does not fit the KV cache"
    assert "needs 16.00 GiB of KV cache for one request of 131,072 tokens but has 4.19 GiB" in finding.summary
    assert "longest length that fits is 34,304" in finding.summary
    assert _args(apply_patch(objects, finding), "isvc")[-1] == "--max-model-len=33792"  # rounded down to 1024s

    # Without the engine's log the memory model computes the same verdict; after the patch it fits.
    computed = only(_run(objects), "VLLM_KV_CAPACITY_EXCEEDED")
    assert computed.summary.startswith("Computed")
    assert serious(_run(_patched(objects, finding))) == []


V0_REFUSED = _log(
    ("11:38:00", "INFO 01-15 11:38:00 api_server.py:712] vLLM API server version 0.6.6"),
    ("11:39:10", "INFO 01-15 11:39:10 model_runner.py:1099] Loading model weights took 14.9888 GB"),
    ("11:39:40", "INFO 01-15 11:39:40 worker.py:241] Memory profiling takes 29.12 seconds"),
    ("11:39:40", "INFO 01-15 11:39:40 worker.py:241] the current vLLM instance can use total_gpu_memory (21.96GiB)"),
    ("11:39:41", "INFO 01-15 11:39:41 gpu_executor.py:76] # GPU blocks: 1478, # CPU blocks: 2048"),
    (
        "11:39:44",
        "ERROR 01-15 11:39:44 engine.py:366] The model's max seq len (32768) is larger than the maximum number of "
        "tokens that can be stored in KV cache (23648). Try increasing `gpu_memory_utilization` or decreasing "
        "`max_model_len` when initializing the engine.",
    ),
)


def test_v0_engine_refusing_its_context_is_patched_in_place() -> None:
    objects = load_case(*SERVERLESS, "checks/VLLM_KV_CAPACITY_EXCEEDED/serverless_v0_engine.yaml")
    findings = _run(objects, None, {(SLS_POD, "kserve-container.previous"): V0_REFUSED})
    finding = only(findings, "VLLM_KV_CAPACITY_EXCEEDED")
    assert "vLLM can store 23,648 tokens in its KV cache, fewer than one request of 32,768" in finding.summary
    assert _args(apply_patch(objects, finding), "isvc") == ["--max-model-len=23552"]
    assert serious(_run(_patched(objects, finding))) == []


# --- VLLM_MEMORY_UTILIZATION_RISKY ------------------------------------------------------------------------------


def test_utilization_above_095_is_risky_and_goes_back_to_the_default() -> None:
    objects = load_case(*RAW, "checks/VLLM_MEMORY_UTILIZATION_RISKY/raw_utilization_098.yaml")
    findings = _run(objects, _busy_but_healthy())
    assert codes(serious(findings)) == {"VLLM_MEMORY_UTILIZATION_RISKY"}
    finding = only(findings, "VLLM_MEMORY_UTILIZATION_RISKY")
    assert finding.level is Severity.WARNING
    assert "takes 98% of the GPU's memory" in finding.summary.replace("take ", "takes ")
    assert _args(apply_patch(objects, finding), "isvc")[-2:] == ["--gpu-memory-utilization", "0.9"]
    assert serious(_run(_patched(objects, finding), _busy_but_healthy())) == []


SHARED_GPU = _log(
    *_v1_start("11:50:00", "{'model': '/mnt/models', 'max_model_len': 8192}"),
    (
        "11:50:39",
        "(EngineCore_0 pid=188) ERROR 01-15 11:50:39 [core.py:700] ValueError: Free memory on device cuda:0 "
        "(17.92/21.96 GiB) on startup is less than desired GPU memory utilization (0.9, 19.76 GiB). Decrease GPU "
        "memory utilization or reduce GPU memory used by other processes.",
    ),
)


def test_free_memory_below_the_default_utilization_in_a_crash_loop_is_critical() -> None:
    objects = load_case(*SERVERLESS, "checks/VLLM_MEMORY_UTILIZATION_RISKY/serverless_shared_gpu.yaml")
    findings = _run(objects, None, {(SLS_POD, "kserve-container.previous"): SHARED_GPU})
    assert codes(serious(findings)) == {"VLLM_MEMORY_UTILIZATION_RISKY"}
    finding = only(findings, "VLLM_MEMORY_UTILIZATION_RISKY")
    assert finding.level is Severity.CRITICAL
    assert "only 17.92 of 21.96 GiB were free" in finding.summary and "4.04 GiB were held" in finding.summary
    assert "raised to critical" in finding.summary
    # floor((17.92 / 21.96 - 0.02) x 100) / 100 = 0.79; 8,192 tokens still fit the smaller cache.
    assert _args(apply_patch(objects, finding), "isvc") == ["--max-model-len=8192", "--gpu-memory-utilization=0.79"]
    assert serious(_run(_patched(objects, finding))) == []


def test_every_patch_carries_the_whole_args_list_and_a_rollback() -> None:
    objects = load_case(*RAW, "checks/VLLM_MEMORY_UTILIZATION_RISKY/raw_utilization_098.yaml")
    finding = only(_run(objects), "VLLM_MEMORY_UTILIZATION_RISKY")
    assert finding.patch is not None
    body = yaml.safe_load(finding.patch.body)
    args = body["spec"]["predictor"]["containers"][0]["args"]
    assert args[:6] == [
        "--model",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--served-model-name",
        "vllm-llm",
        "--port",
        "8080",
    ]
    _, rollback = _remediation_commands(finding)
    assert '"--gpu-memory-utilization","0.98"' in rollback
    assert math.isclose(float(args[-1]), 0.9)


# --- ENGINE_START_FAILED / CONTAINER_FAILING_UNKNOWN_CAUSE -----------------------------------------------------

# https://github.com/verl-project/verl/pull/7626: vLLM's scheduler config refuses the batch budget at start-up.
BATCHED_TOKENS_REFUSED = _log(
    *_v1_start("11:44:00", "{'model': 'meta-llama/Llama-3.1-8B-Instruct', 'max_model_len': 131072}"),
    ("11:44:02", "Traceback (most recent call last):"),
    ("11:44:02", '  File "/usr/local/bin/vllm", line 10, in <module>'),
    (
        "11:44:02",
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for SchedulerConfig",
    ),
    (
        "11:44:02",
        "  Value error, max_num_batched_tokens (8192) is smaller than max_model_len (131072). This effectively limits "
        "the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. Please "
        "increase max_num_batched_tokens or decrease max_model_len.",
    ),
)


def test_engine_start_failure_quotes_the_batched_tokens_error_and_patches_the_flag() -> None:
    objects = load_case(*RAW, "checks/ENGINE_START_FAILED/raw_batched_tokens_below_model_len.yaml")
    findings = _run(objects, None, {(RAW_POD, "kserve-container.previous"): BATCHED_TOKENS_REFUSED})
    assert codes(serious(findings)) == {"ENGINE_START_FAILED"}
    finding = only(findings, "ENGINE_START_FAILED")
    assert finding.level is Severity.CRITICAL
    assert finding.title == "--max-num-batched-tokens is below --max-model-len"
    assert "(batched_tokens)" in finding.summary
    assert "max_num_batched_tokens (8192) is smaller than max_model_len (131072)" in finding.summary
    args = _args(apply_patch(objects, finding), "isvc")
    assert args[args.index("--max-num-batched-tokens") + 1] == "131072"


def test_engine_start_failure_reads_the_termination_message_vllm_port() -> None:
    objects = load_case(*RAW, "checks/ENGINE_START_FAILED/raw_vllm_port_service_link.yaml")
    finding = only(_run(objects), "ENGINE_START_FAILED")
    assert finding.title == "VLLM_PORT was set by a Kubernetes Service named vllm"
    assert "appears to be a URI" in finding.summary
    assert "enableServiceLinks: false" in finding.remediation
    assert finding.patch is None


def test_engine_start_failure_names_the_service_behind_vllm_port() -> None:
    objects = load_case(*RAW, "checks/ENGINE_START_FAILED/raw_vllm_port_service_link.yaml")
    assert not any("Service/llm/vllm " in line for line in only(_run(objects), "ENGINE_START_FAILED").evidence)
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "vllm", "namespace": "llm"},
        "spec": {"clusterIP": "169.169.193.120", "ports": [{"port": 6785, "targetPort": 8080}]},
    }
    finding = only(_run([*objects, service]), "ENGINE_START_FAILED")
    assert any(line.startswith("Service/llm/vllm (clusterIP 169.169.193.120, port 6785)") for line in finding.evidence)


def test_a_container_failing_for_no_known_reason_quotes_its_own_last_error() -> None:
    objects = load_case(*RAW, "checks/CONTAINER_FAILING_UNKNOWN_CAUSE/raw_unknown_exit.yaml")
    findings = _run(objects)
    assert codes(serious(findings)) == {"CONTAINER_FAILING_UNKNOWN_CAUSE"}
    finding = only(findings, "CONTAINER_FAILING_UNKNOWN_CAUSE")
    assert "'kserve-container'" in finding.summary
    assert "RuntimeError: Failed to infer device type" in finding.summary


HF_SERVER = ("checks/healthy/raw.yaml", "checks/healthy/raw_huggingfaceserver.yaml")
UNKNOWN_CAUSE = "checks/CONTAINER_FAILING_UNKNOWN_CAUSE"
# kserve/kserve#3769, KServe 0.13: the huggingfaceserver's whole log; its logger's ERROR line is the only word of why.
HF_START_FAILED = _log(
    (
        "11:44:38",
        "/prod_venv/lib/python3.10/site-packages/huggingface_hub/file_download.py:1132: FutureWarning: "
        "`resume_download` is deprecated and will be removed in version 1.0.0. Downloads always resume when possible. "
        "If you want to force a new download, use `force_download=True`.",
    ),
    ("11:44:38", "  warnings.warn("),
    (
        "11:44:41",
        "2026-01-15 11:44:41.488 1 kserve ERROR [__main__.py:<module>():254] Failed to start model server: integer "
        "division or modulo by zero",
    ),
)
# The same failure from a release whose __main__ logs it with exc_info=True (python/huggingfaceserver/huggingfaceserver/
# __main__.py): the traceback follows the logger's line and ends with the exception itself.
HF_START_FAILED_TRACEBACK = HF_START_FAILED + _log(
    ("11:44:41", "Traceback (most recent call last):"),
    ("11:44:41", '  File "/huggingfaceserver/huggingfaceserver/__main__.py", line 310, in <module>'),
    ("11:44:41", "    model = load_model()"),
    ("11:44:41", "ZeroDivisionError: integer division or modulo by zero"),
)


@pytest.mark.parametrize(
    ("log", "quoted"),
    [
        (HF_START_FAILED, "kserve ERROR [__main__.py:<module>():254] Failed to start model server: integer division"),
        (HF_START_FAILED_TRACEBACK, "ZeroDivisionError: integer division or modulo by zero"),
    ],
    ids=["logger-line-only", "with-traceback"],
)
def test_a_huggingfaceserver_that_fails_at_start_is_quoted_from_its_own_log(log: str, quoted: str) -> None:
    objects = load_case(*HF_SERVER, f"{UNKNOWN_CAUSE}/raw_huggingfaceserver_start_failed.yaml")
    findings = _run(objects, None, {(RAW_POD, "kserve-container.previous"): log})
    assert codes(serious(findings)) == {"CONTAINER_FAILING_UNKNOWN_CAUSE"}
    finding = only(findings, "CONTAINER_FAILING_UNKNOWN_CAUSE")
    assert "'kserve-container'" in finding.summary and "(previous log)" in finding.summary
    assert quoted in finding.summary
    assert "FutureWarning" not in finding.summary


def test_the_quote_ranks_above_settings_that_end_no_containers_run() -> None:
    """The huggingfaceserver fixture has no readiness probe and no requests (warnings of their own); neither made the
    container exit, so its own words are the top root cause of the whole triage."""
    from nbhelpers.checks import STEP_IDS, STEPS, check_for
    from nbhelpers.findings.model import rank_root_causes
    from nbhelpers.triage import run_step

    objects = load_case(*HF_SERVER, f"{UNKNOWN_CAUSE}/raw_huggingfaceserver_start_failed.yaml")
    evidence = evidence_of(objects, logs={(RAW_POD, "kserve-container.previous"): HF_START_FAILED})
    findings = [finding for step in STEPS for finding in run_step(step, check_for(step.id), evidence).findings]
    assert {"PROBE_READINESS_MISSING", "RESOURCES_REQUESTS_MISSING"} <= codes(findings)
    assert rank_root_causes(findings, STEP_IDS)[0] == "CONTAINER_FAILING_UNKNOWN_CAUSE"


def test_a_serving_huggingfaceserver_with_an_old_request_error_has_no_finding() -> None:
    """kserve/kserve#5399: one request failed with a traceback; the server is ready and serves."""
    objects = load_case(*HF_SERVER, "checks/healthy/raw_huggingfaceserver_serving.yaml")
    log = _log(
        (
            "10:46:07",
            "2026-01-15 10:46:07.126 1335405 uvicorn.error ERROR:    Exception in ASGI application",
        ),
        ("10:46:07", "Traceback (most recent call last):"),
        ("10:46:07", "AttributeError: 'ServingEmbedding' object has no attribute 'create_embedding'"),
    )
    assert serious(_run(objects, None, {(RAW_POD, "kserve-container"): log})) == []


def test_an_entrypoint_the_runtime_cannot_exec_is_quoted_in_the_runtimes_words() -> None:
    """vllm-project/vllm#30076: an amd64 image on an arm64 node; the log is the runtime's one line."""
    objects = load_case(*RAW, f"{UNKNOWN_CAUSE}/raw_exec_format_error.yaml")
    log = _log(("11:44:00", "exec /opt/venv/bin/vllm: exec format error"))
    finding = only(
        _run(objects, None, {(RAW_POD, "kserve-container.previous"): log}), "CONTAINER_FAILING_UNKNOWN_CAUSE"
    )
    assert "exec /opt/venv/bin/vllm: exec format error" in finding.summary


@pytest.mark.parametrize(
    "line",
    [
        "standard_init_linux.go:219: exec user process caused: exec format error",  # canonical/microk8s#1942
        "exec /usr/bin/python3: no such file or directory",
    ],
)
def test_other_exec_failures_are_quoted_too(line: str) -> None:
    objects = load_case(*RAW, f"{UNKNOWN_CAUSE}/raw_exec_format_error.yaml")
    finding = only(
        _run(objects, None, {(RAW_POD, "kserve-container.previous"): _log(("11:44:00", line))}),
        "CONTAINER_FAILING_UNKNOWN_CAUSE",
    )
    assert line in finding.summary


def test_a_program_missing_from_the_image_is_quoted_from_the_termination_message() -> None:
    """vllm-project/production-stack#454: StartError, exit code 128, no log at all."""
    findings = _run(load_case(*RAW, f"{UNKNOWN_CAUSE}/raw_start_error_not_in_path.yaml"))
    assert codes(serious(findings)) == {"CONTAINER_FAILING_UNKNOWN_CAUSE"}
    finding = only(findings, "CONTAINER_FAILING_UNKNOWN_CAUSE")
    assert "(termination message)" in finding.summary
    assert 'exec: "vllm": executable file not found in $PATH' in finding.summary


# kubernetes/node-problem-detector#797: a Go binary built for another architecture, in a sidecar of the predictor pod.
SIDECAR_EXEC_FAILED = _log(("11:50:02", "exec /log-shipper: exec format error"))


def test_a_failing_sidecar_is_named_and_quoted_while_the_engine_is_fine() -> None:
    objects = load_case(*RAW, f"{UNKNOWN_CAUSE}/raw_sidecar_exec_format_error.yaml")
    findings = _run(objects, None, {(RAW_POD, "log-shipper.previous"): SIDECAR_EXEC_FAILED})
    assert codes(serious(findings)) == {"CONTAINER_FAILING_UNKNOWN_CAUSE"}
    finding = only(findings, "CONTAINER_FAILING_UNKNOWN_CAUSE")
    assert finding.title == "container 'log-shipper' keeps failing"
    assert "The container 'log-shipper' of vllm-llm-predictor-6d5f8b7c9-q8w2e" in finding.summary
    assert "exec /log-shipper: exec format error" in finding.summary
    assert "kubectl logs vllm-llm-predictor-6d5f8b7c9-q8w2e -c log-shipper --previous" in finding.remediation
    assert any("container log-shipper: 9 restarts, last exit Error (code 1)" in line for line in finding.evidence)


def test_a_go_panic_and_a_rust_panic_in_a_sidecar_are_quoted() -> None:
    objects = load_case(*RAW, f"{UNKNOWN_CAUSE}/raw_sidecar_exec_format_error.yaml")
    go = _log(
        ("11:50:02", "panic: open /etc/log-shipper/config.yaml: no such file or directory"),
        ("11:50:02", ""),
        ("11:50:02", "goroutine 1 [running]:"),
        ("11:50:02", "main.main()"),
    )
    rust = _log(
        ("11:50:02", "thread 'main' panicked at src/main.rs:14:10:"),
        ("11:50:02", "called `Result::unwrap()` on an `Err` value: Os { code: 2, kind: NotFound }"),
        ("11:50:02", "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace"),
    )
    for log, quoted in (
        (go, "panic: open /etc/log-shipper/config.yaml: no such file or directory"),
        (rust, "panicked at src/main.rs:14:10: called `Result::unwrap()` on an `Err` value"),
    ):
        finding = only(_run(objects, None, {(RAW_POD, "log-shipper.previous"): log}), "CONTAINER_FAILING_UNKNOWN_CAUSE")
        assert quoted in finding.summary


def test_a_sidecar_that_failed_once_and_is_ready_again_is_no_finding() -> None:
    objects = load_case(*RAW, "checks/healthy/raw_sidecar_restarted.yaml")
    old_error = _log(("09:02:20", "panic: dial tcp 10.0.9.4:24224: connect: connection refused"))
    assert serious(_run(objects, None, {(RAW_POD, "log-shipper.previous"): old_error})) == []


@pytest.mark.parametrize(
    ("line", "quoted"),
    [
        ("exec /fraud-scorer: exec format error", "exec /fraud-scorer: exec format error"),
        ("panic: listen tcp :8080: bind: address already in use", "panic: listen tcp :8080: bind: address already"),
    ],
)
def test_a_custom_predictor_that_is_not_vllm_gets_only_the_fallback(line: str, quoted: str) -> None:
    objects = load_case("checks/healthy/raw.yaml", f"{UNKNOWN_CAUSE}/raw_custom_predictor_exits.yaml")
    findings = _run(objects, None, {(RAW_POD, "kserve-container.previous"): _log(("11:51:10", line))})
    assert codes(findings) == {"CONTAINER_FAILING_UNKNOWN_CAUSE"}
    assert quoted in only(findings, "CONTAINER_FAILING_UNKNOWN_CAUSE").summary


def test_a_running_custom_predictor_is_skipped_without_a_finding() -> None:
    objects = load_case("checks/healthy/raw.yaml", "checks/healthy/raw_custom_predictor.yaml")
    with pytest.raises(StepSkipped, match="does not run vLLM"):
        _run(objects)


def test_a_serving_container_log_without_any_error_line_is_still_named_with_its_exit_and_last_line() -> None:
    """No exception and no failure line: the fallback names the container, its exit code and the log's last line
    (issue #14: never an effect code alone), and says that nothing it read explains the exit."""
    objects = load_case(*RAW, f"{UNKNOWN_CAUSE}/raw_exec_format_error.yaml")
    quiet = _log(("11:44:00", "INFO 01-15 11:44:00 [api_server.py:1000] vLLM API server version 0.10.1"))
    finding = only(
        _run(objects, None, {(RAW_POD, "kserve-container.previous"): quiet}), "CONTAINER_FAILING_UNKNOWN_CAUSE"
    )
    assert finding.title == "container 'kserve-container' keeps exiting with code 1"
    assert "its log holds no error line" in finding.summary
    assert "Its log ends with 'INFO 01-15 11:44:00 [api_server.py:1000] vLLM API server version 0.10.1'" in (
        finding.summary
    )
    assert any(
        line.startswith(f"pod {RAW_POD} container kserve-container: last run ended") for line in finding.evidence
    )
    assert "Knative" not in finding.summary


def test_a_container_that_restarted_once_and_serves_again_is_not_a_failing_container() -> None:
    objects = _restarted(load_case(*RAW), 1)
    assert "CONTAINER_FAILING_UNKNOWN_CAUSE" not in codes(_run(objects))


def _restarted(objects: list[dict[str, Any]], exit_code: int) -> list[dict[str, Any]]:
    """The RAW pod's serving container ready again after one run that ended with ``exit_code``."""
    for obj in objects:
        if obj["kind"] == "Pod" and obj["metadata"]["name"] == RAW_POD:
            status = obj["status"]["containerStatuses"][0]
            status["restartCount"] = 1
            status["state"] = {"running": {"startedAt": "2026-01-15T11:35:30Z"}}
            status["lastState"] = {
                "terminated": {
                    "reason": "Error",
                    "exitCode": exit_code,
                    "startedAt": "2026-01-15T02:00:10Z",
                    "finishedAt": "2026-01-15T11:35:20Z",
                }
            }
    return objects


# vllm-project/vllm#5687 on a V1 engine (the traceback as in vllm-project/vllm#19483): it served for hours, then a
# kernel's illegal memory access killed the engine core. The log read for the window starts with stats lines.
_DIED_WHILE_SERVING = _log(
    (
        "11:00:05",
        "INFO 01-15 11:00:05 [loggers.py:123] Engine 000: Avg prompt throughput: 1800.0 tokens/s, Avg generation "
        "throughput: 90.0 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 21.0%",
    ),
    ("11:35:19", "ERROR 01-15 11:35:19 [core.py:710] EngineCore encountered a fatal error."),
    (
        "11:35:19",
        "ERROR 01-15 11:35:19 [core.py:710] RuntimeError: CUDA error: an illegal memory access was encountered",
    ),
    (
        "11:35:19",
        "ERROR 01-15 11:35:19 [async_llm.py:416] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered "
        "an issue. See stack trace (above) for the root cause.",
    ),
    ("11:35:20", "INFO:     Finished server process [1]"),
)


def test_an_engine_that_died_while_serving_quotes_its_error_and_says_the_log_was_cut() -> None:
    objects = _restarted(load_case(*RAW, "checks/healthy/queue_engine_started.yaml"), exit_code=1)
    findings = _run(objects, None, {(RAW_POD, "kserve-container.previous"): _DIED_WHILE_SERVING})
    assert codes(serious(findings)) == {"CONTAINER_FAILING_UNKNOWN_CAUSE"}
    finding = only(findings, "CONTAINER_FAILING_UNKNOWN_CAUSE")
    assert finding.level is Severity.WARNING  # the container is ready again
    assert "died while serving" in finding.summary and "cut after the engine's start" in finding.summary
    assert "CUDA error: an illegal memory access was encountered" in finding.summary
    assert "EngineDeadError" not in finding.summary  # the wrapper only points above it


def test_an_engine_killed_from_outside_after_serving_is_not_said_to_have_died() -> None:
    # The same log with a SIGKILL exit (a drain, a liveness kill): the probes and resources steps name those.
    objects = _restarted(load_case(*RAW, "checks/healthy/queue_engine_started.yaml"), exit_code=137)
    assert serious(_run(objects, None, {(RAW_POD, "kserve-container.previous"): _DIED_WHILE_SERVING})) == []


def test_a_started_engine_with_an_old_request_error_stays_quiet() -> None:
    objects = load_case(*RAW, "checks/healthy/queue_engine_started.yaml")
    log = _log(
        *_v1_start("09:00:10", "{'model': 'meta-llama/Llama-3.1-8B-Instruct'}"),
        ("09:01:00", "INFO 01-15 09:01:00 [api_server.py:1880] Starting vLLM API server 0 on http://0.0.0.0:8080"),
        ("10:00:00", "ERROR 01-15 10:00:00 [serving_chat.py:222] ValueError: unrecognized request field"),
    )
    assert serious(_run(objects, None, {(RAW_POD, "kserve-container"): log})) == []


@pytest.mark.parametrize(
    ("line", "cause"),
    [
        ("ValueError: VLLM_PORT 'tcp://10.0.0.1:8000' appears to be a URI.", "vllm_port_uri"),
        ("vllm: error: unrecognized arguments: --enable-metrics", "unrecognized_argument"),
        (
            "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 "
            "GPU has compute capability 7.5.",
            "dtype",
        ),
        (
            "ValueError: Model architectures ['FooForCausalLM'] are not supported for now. Supported architectures: ",
            "architecture",
        ),
        (
            "requests.exceptions.HTTPError: 403 Client Error: Forbidden for url: "
            "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/resolve/main/config.json",
            "hub_unauthorized",
        ),
        (
            "ValueError: The number of required GPUs exceeds the total number of available GPUs in the placement group.",
            "tensor_parallel",
        ),
        ("RuntimeError: something else", "unknown"),
    ],
)
def test_engine_errors_are_classified(line: str, cause: str) -> None:
    from nbhelpers.facts import engine_errors

    found = engine_errors.last_error(f"INFO start\nTraceback (most recent call last):\n{line}\n")
    assert found is not None and found[0] == cause


def test_engine_start_failure_names_the_unrecognized_argument() -> None:
    # https://github.com/defilantech/LLMKube/issues/1030
    objects = load_case(*RAW, "checks/ENGINE_START_FAILED/raw_unrecognized_argument.yaml")
    finding = only(_run(objects), "ENGINE_START_FAILED")
    assert finding.title == "vLLM rejects an argument"
    assert "unrecognized arguments: --enable-metrics" in finding.summary


# https://github.com/vllm-project/vllm/pull/25775 (warning wording quoted in vllm#36861), older Ray error in vllm#2416.
TP_ABOVE_GPUS = _log(
    *_v1_start("11:00:00", "{'model': 'meta-llama/Llama-3.1-8B-Instruct', 'tensor_parallel_size': 4}"),
    (
        "11:00:09",
        "(EngineCore_0 pid=214) WARNING 01-15 11:00:09 [ray_utils.py:352] Tensor parallel size (4) exceeds available "
        "GPUs (1). This may result in Ray placement group allocation failures. Consider reducing tensor_parallel_size "
        "to 1 or less, or ensure your Ray cluster has 4 GPUs available.",
    ),
    ("11:30:10", "(EngineCore_0 pid=214) ERROR 01-15 11:30:10 [core.py:718] EngineCore failed to start."),
    (
        "11:30:10",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ),
)


def test_engine_start_failure_sets_tensor_parallel_to_the_gpu_request() -> None:
    objects = load_case(*RAW, "checks/ENGINE_START_FAILED/raw_tensor_parallel_above_gpus.yaml")
    findings = _run(objects, None, {(RAW_POD, "kserve-container.previous"): TP_ABOVE_GPUS})
    finding = only(findings, "ENGINE_START_FAILED")
    assert finding.title == "--tensor-parallel-size asks for more GPUs than the pod sees"
    assert "Tensor parallel size (4) exceeds available GPUs (1)" in finding.summary
    args = _args(apply_patch(objects, finding), "isvc")
    assert args[args.index("--tensor-parallel-size") + 1] == "1"


# The same misconfiguration before vLLM gives up (vllm-project/vllm#25263): the engine waits for a placement group
# that cannot form and the liveness probe kills it (exit 137), so the container never exits by itself.
_PG_WAIT = (
    "(EngineCore_0 pid=214) INFO 01-15 {clock} [ray_utils.py:427] Waiting for creating a placement group of specs "
    "for {seconds} seconds. specs=[{{'GPU': 1.0, 'node:10.0.4.21': 0.001}}, {{'GPU': 1.0}}]. Check `ray status` and "
    "`ray list nodes` to see if you have enough resources."
)


def _killed_by_liveness(objects: list[dict[str, Any]], args: list[str]) -> list[dict[str, Any]]:
    for obj in objects:
        if obj["kind"] == "Pod":
            obj["spec"]["containers"][0]["args"] = args
            obj["status"]["containerStatuses"][0]["lastState"]["terminated"].update(exitCode=137, reason="Error")
    return objects


def _waiting_log(warning: str) -> str:
    return _log(
        *_v1_start("11:40:00", "{'model': 'meta-llama/Llama-3.1-8B-Instruct'}"),
        ("11:40:09", f"(EngineCore_0 pid=214) WARNING 01-15 11:40:09 [ray_utils.py:352] {warning}"),
        ("11:40:21", _PG_WAIT.format(clock="11:40:21", seconds=10)),
        ("11:41:41", _PG_WAIT.format(clock="11:41:41", seconds=70)),
    )


def test_engine_start_failure_reads_an_engine_killed_while_it_waits_for_gpus() -> None:
    objects = load_case(*RAW, "checks/ENGINE_START_FAILED/raw_tensor_parallel_above_gpus.yaml")
    objects = _killed_by_liveness(objects, [*_args(objects)])
    warning = "Tensor parallel size (4) exceeds available GPUs (1). This may result in Ray placement group allocation failures."
    findings = _run(objects, None, {(RAW_POD, "kserve-container.previous"): _waiting_log(warning)})
    finding = only(findings, "ENGINE_START_FAILED")
    assert "never finishes starting" in finding.summary and "Tensor parallel size (4)" in finding.summary
    assert "CONTAINER_FAILING_UNKNOWN_CAUSE" not in codes(findings)


def test_a_ray_gpu_warning_within_the_pods_gpus_is_no_start_failure() -> None:
    """Multi-node Ray prints the warning with the world size (TP x PP, vllm-project/vllm#31005) while it waits for
    the other node: with --tensor-parallel-size within the pod's GPUs a killed, unready pod is not blamed on it."""
    objects = load_case(*RAW, "checks/ENGINE_START_FAILED/raw_tensor_parallel_above_gpus.yaml")
    args = [arg for arg in _args(objects)]
    args[args.index("--tensor-parallel-size") + 1] = "1"
    objects = _killed_by_liveness(objects, [*args, "--pipeline-parallel-size", "2"])
    warning = "Tensor parallel size (2) exceeds available GPUs (1). This may result in Ray placement group allocation failures."
    findings = _run(objects, None, {(RAW_POD, "kserve-container.previous"): _waiting_log(warning)})
    assert not {"ENGINE_START_FAILED", "CONTAINER_FAILING_UNKNOWN_CAUSE"} & set(codes(findings))


def test_the_fallback_quotes_the_root_cause_not_the_api_server_wrapper() -> None:
    from nbhelpers.facts import engine_errors

    text = (
        "ERROR [core.py:718] ValueError: some new validation nobody classified\n"
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n"
    )
    found = engine_errors.last_error(text)
    assert found is not None and found[0] == "unknown" and "some new validation" in found[2]


def test_engine_start_failure_asks_for_access_not_a_token_on_a_403() -> None:
    # https://github.com/rh-ai-quickstart/ai-virtual-agent/issues/200: a valid token whose account has no access.
    objects = load_case(*RAW, "checks/ENGINE_START_FAILED/raw_gated_model_403.yaml")
    finding = only(_run(objects), "ENGINE_START_FAILED")
    assert finding.title == "the model hub refused the download (401/403, gated model)"
    assert "you are not in the authorized list" in finding.summary
    assert "request access to the gated model" in finding.remediation and "(403)" in finding.remediation


def test_engine_start_failure_asks_for_a_hub_token_on_a_401() -> None:
    objects = load_case(*RAW, "checks/ENGINE_START_FAILED/raw_gated_model_403.yaml")
    pod = next(obj for obj in objects if obj["kind"] == "Pod")
    pod["status"]["containerStatuses"][0]["lastState"]["terminated"]["message"] = (
        "huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: Root=1-67b8)\n\n"
        "Cannot access gated repo for url https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/resolve/main/config.json.\n"
        "Access to model meta-llama/Llama-3.1-8B-Instruct is restricted. You must have access to it and be "
        "authenticated to access it. Please log in."
    )
    finding = only(_run(objects), "ENGINE_START_FAILED")
    assert "(401)" in finding.remediation and "HF_TOKEN from a Secret" in finding.remediation


def test_engine_start_failure_reads_the_dtype_refusal_from_the_termination_message() -> None:
    objects = load_case(*SERVERLESS, "checks/ENGINE_START_FAILED/serverless_bf16_on_t4.yaml")
    finding = only(_run(objects), "ENGINE_START_FAILED")
    assert finding.title == "the GPU does not support the model's dtype"
    assert "Your Tesla T4 GPU has compute capability 7.5" in finding.summary
    assert "--dtype=half" in _args(_patched(objects, finding), where="isvc")


def test_the_fallback_quotes_an_unknown_error_from_the_termination_message() -> None:
    objects = load_case(*RAW, "checks/CONTAINER_FAILING_UNKNOWN_CAUSE/raw_cache_permission_denied.yaml")
    findings = _run(objects)
    finding = only(findings, "CONTAINER_FAILING_UNKNOWN_CAUSE")
    assert "OSError: PermissionError at /.cache" in finding.summary and "ENGINE_START_FAILED" not in codes(findings)


EXIT_NO_LOG = f"{UNKNOWN_CAUSE}/serverless_exit_no_log.yaml"


def test_a_container_that_exits_without_a_word_is_named_with_its_exit_code_and_knatives_report() -> None:
    # Issue #14, deliverable 3 (never an effect code alone): the serving container crash-loops with exit code 1 and
    # the capture holds neither a termination message nor a log. Before: no finding here, ENDPOINTS_NONE_READY led;
    # after: the fallback names the container, its exit code and what Knative's Revision says of it.
    findings = _run(load_case(*SERVERLESS, EXIT_NO_LOG))
    finding = only(findings, "CONTAINER_FAILING_UNKNOWN_CAUSE")
    assert finding.title == "container 'kserve-container' keeps exiting with code 1"
    assert "no termination message, and no line of its log was captured" in finding.summary
    assert "ContainerHealthy=False (ExitCode1)" in finding.summary
    assert any("9 restarts" in line for line in finding.evidence)
    effects = [
        Finding(code=code, title="t", summary="s") for code in ("ENDPOINTS_NONE_READY", "ROUTING_REVISION_NOT_READY")
    ]
    assert rank_root_causes([*effects, finding], STEP_IDS)[0] == "CONTAINER_FAILING_UNKNOWN_CAUSE"


def test_a_log_without_an_error_line_is_said_so() -> None:
    log = _log(("11:52:12", "INFO 01-15 11:52:12 api_server.py:585] vLLM API server version 0.8.5"))
    findings = _run(load_case(*SERVERLESS, EXIT_NO_LOG), None, {(SLS_POD, "kserve-container.previous"): log})
    summary = only(findings, "CONTAINER_FAILING_UNKNOWN_CAUSE").summary
    assert "its log holds no error line" in summary
    assert "Its log ends with 'INFO 01-15 11:52:12 api_server.py:585] vLLM API server version 0.8.5'" in summary


@pytest.mark.parametrize(
    ("exit_code", "message"),
    [(137, ""), (143, ""), (1, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")],
    ids=["killed", "terminated", "memory-code-owns-it"],
)
def test_a_container_killed_from_outside_or_owned_by_a_memory_code_gets_no_fallback(
    exit_code: int, message: str
) -> None:
    objects = load_case(*SERVERLESS, EXIT_NO_LOG)
    pod = next(obj for obj in objects if obj["kind"] == "Pod")
    terminated = pod["status"]["containerStatuses"][0]["lastState"]["terminated"]
    terminated["exitCode"] = exit_code
    if message:
        terminated["message"] = message
    assert "CONTAINER_FAILING_UNKNOWN_CAUSE" not in codes(_run(objects))


def test_a_revision_still_saying_exit_code_over_a_ready_pod_gets_no_fallback() -> None:
    # Knative 1.15 and 1.16 keep ContainerHealthy=False after the pods recover (knative/serving PR #15503 fixed it in
    # 1.17): over a ready container that has restarted once the Revision's words are stale, not a failure.
    objects = load_case(*SERVERLESS, EXIT_NO_LOG)
    pod = next(obj for obj in objects if obj["kind"] == "Pod")
    serving = pod["status"]["containerStatuses"][0]
    serving["ready"] = True
    serving["state"] = {"running": {"startedAt": "2026-01-15T09:57:40Z"}}
    assert "CONTAINER_FAILING_UNKNOWN_CAUSE" not in codes(_run(objects))
