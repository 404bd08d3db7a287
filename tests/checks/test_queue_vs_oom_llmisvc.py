"""The ``queue_vs_oom`` step on an LLMInferenceService with disaggregated prefill (issue #18): the findings name the
llm-d role (``llm-d.ai/role``) whose pods queued, ran out of KV cache or of GPU memory, since prefill and decode
pods are separate Deployments with separate replica counts (``spec.prefill.replicas`` and ``spec.replicas``).

Disaggregated prefill runs the prompt on the prefill pods and hands the KV cache to the decode pods, so a long-prompt
burst piles up on the prefill pods while the decode pods stay light (llm-d's "well-lit path" for P/D,
https://llm-d.ai/docs/architecture; KServe renders the two Deployments in workload_single_node.go)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from builders import evidence_from_objects
from check_cases import codes, load_case, only, serious
from test_queue_vs_oom import (
    STEP,
    _const,
    _during,
    _log,
    _merge,
    _noisy,
    _pod_metrics,
    _ramp,
    _series,
    _traffic,
    _v1_start,
)

from nbhelpers.checks import queue_vs_oom
from nbhelpers.evidence.model import LLM_INFERENCE_SERVICE
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding
from nbhelpers.metrics import catalog

CASE = ("checks/healthy/llmisvc.yaml", "checks/healthy/llmisvc_disaggregated.yaml")
DECODE = ("llama-llmd-kserve-6d8f7c9b5-4xk2p", "llama-llmd-kserve-6d8f7c9b5-9tq7m")
OOM = "checks/GPU_OOM/llmisvc_prefill_oom.yaml"
OWN_CEILINGS = "checks/QUEUE_SATURATION/llmisvc_roles_own_ceilings.yaml"
PREFILL = ("llama-llmd-kserve-prefill-5b7c8d9f6-h7r2c", "llama-llmd-kserve-prefill-5b7c8d9f6-w9d4k")


def _run(
    metrics: Mapping[str, list[dict[str, Any]]],
    logs: Mapping[tuple[str, str], str] | None = None,
    *overrides: str,
) -> list[Finding]:
    rendered = {
        query_id: {
            "promql": catalog.render(catalog.BY_ID[query_id], 0, "llm", "llama-llmd", STEP, llmisvc=True),
            "result": result,
        }
        for query_id, result in metrics.items()
    }
    evidence = evidence_from_objects(
        copy.deepcopy(load_case(*CASE, *overrides)),
        "llm",
        "llama-llmd",
        target_kind=LLM_INFERENCE_SERVICE,
        metrics=rendered,
        logs=logs or {},
    )
    return queue_vs_oom.run(evidence)


def _decode_light(seed: int) -> list[dict[str, list[dict[str, Any]]]]:
    return [
        _pod_metrics(pod, _noisy(2, 6, seed + i), _const(0), _noisy(0.1, 0.3, seed + 10 + i))
        for i, pod in enumerate(DECODE)
    ]


def _prefill_queue() -> dict[str, list[dict[str, Any]]]:
    """Prefill pods pinned at --max-num-seqs 16 from minute 20 to 40 with the KV cache 82-90 % full (no room for more
    requests per pod), the queue growing to 14; decode pods light."""
    prefill = [
        _pod_metrics(
            pod,
            _during(20, 40, _noisy(15, 16, seed), _noisy(3, 8, seed + 1)),
            _during(20, 40, _ramp(20, 32, 3, 14), _const(0)),
            _during(20, 40, _noisy(0.82, 0.9, seed + 2), _noisy(0.1, 0.3, seed + 3)),
        )
        for pod, seed in ((PREFILL[0], 40), (PREFILL[1], 50))
    ]
    return _merge(
        *prefill,
        *_decode_light(60),
        _traffic(6.0, vllm_queue_time_p95=[_series(_during(20, 40, _ramp(20, 32, 1, 8), _const(0.1)))]),
    )


def test_the_healthy_disaggregated_service_has_no_queue_or_memory_finding() -> None:
    quiet = _merge(
        *[
            _pod_metrics(pod, _noisy(3, 8, 70 + i), _const(0), _noisy(0.2, 0.4, 80 + i))
            for i, pod in enumerate(PREFILL)
        ],
        *_decode_light(90),
        _traffic(3.0),
    )
    assert serious(_run(quiet)) == []


def test_a_queue_on_the_prefill_pods_names_the_prefill_role_and_its_replicas() -> None:
    finding = only(_run(_prefill_queue()), "QUEUE_SATURATION")
    assert finding.title.endswith("(2 prefill pod(s))")
    assert "while 2 prefill pod(s) ran at their ceiling 16 (--max-num-seqs=16 on the prefill pods)" in finding.summary
    assert (
        "By role: prefill pods (2): up to 14 waiting, 16 running; decode pods (2): no queue (up to 6 running)."
        in finding.summary
    )
    assert {f"Pod/llm/{pod}" for pod in PREFILL} <= set(finding.objects)
    assert not {f"Pod/llm/{pod}" for pod in DECODE} & set(finding.objects)
    assert any(line.startswith(f"pod {PREFILL[0]} (prefill): ") for line in finding.evidence)
    # The replicas to raise are the prefill workload's, and there is no InferenceService patch.
    assert finding.patch is None
    assert "replicas of the prefill workload" in finding.remediation
    assert "spec.prefill.replicas is 2: raise it to" in finding.remediation
    assert "spec.predictor" not in finding.remediation


def test_a_cuda_oom_names_the_role_of_the_pod_it_hit() -> None:
    oom = _log(
        *_v1_start("11:20:00", "{'model': 'meta-llama/Llama-3.1-8B-Instruct', 'max_num_seqs': 16}"),
        (
            "11:41:00",
            "(EngineCore_0 pid=211) ERROR 01-15 11:41:00 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. "
            "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.20 GiB is free.",
        ),
    )
    findings = _run(_merge(*_decode_light(100), _traffic(2.0)), {(PREFILL[1], "main.previous"): oom}, OOM)
    finding = only(findings, "GPU_OOM")
    assert finding.level is Severity.CRITICAL
    assert f"in prefill pod {PREFILL[1]}." in finding.summary
    assert f"Pod/llm/{PREFILL[1]}" in finding.objects
    assert "QUEUE_SATURATION" not in codes(findings)


def test_kv_headroom_on_the_prefill_pods_points_at_the_prefill_template() -> None:
    """With the KV cache at most 60 % full the pods can run more requests: the flag to raise is the prefill pods'."""
    queue = _prefill_queue()
    for entry in queue["vllm_kv_cache_usage"]:
        if entry["metric"]["pod"] in PREFILL:
            entry["values"] = [[t, str(min(float(v), 0.6))] for t, v in entry["values"]]
    finding = only(_run(queue), "QUEUE_SATURATION")
    assert "Raise --max-num-seqs to" in finding.remediation
    assert "spec.prefill.template" in finding.remediation


def test_each_role_is_judged_against_its_own_ceiling() -> None:
    """The decode pods, rolled out last, run --max-num-seqs 256; the prefill pods keep 16 and queue at 16: the queue
    is a saturation of the prefill role (before, the newest pod's 256 was taken for every pod and nothing was found)."""
    finding = only(_run(_prefill_queue(), None, OWN_CEILINGS), "QUEUE_SATURATION")
    assert "while 2 prefill pod(s) ran at their ceiling 16 (--max-num-seqs=16 on the prefill pods)" in finding.summary
    assert any(line.startswith(f"pod {PREFILL[0]} (prefill): ") and "/16," in line for line in finding.evidence)
    assert not any(line.startswith(f"pod {pod}") for pod in DECODE for line in finding.evidence)
    # The decode pod the service's flags were read from is not named: the finding is the prefill role's.
    assert not {f"Pod/llm/{pod}" for pod in DECODE} & set(finding.objects)


def test_decode_pods_above_the_prefill_ceiling_are_not_saturated() -> None:
    """Decode pods running 20-30 requests (below their 256) with nothing waiting, prefill pods light: no finding,
    although 20 is above the prefill pods' 16."""
    busy_decode = [
        _pod_metrics(pod, _noisy(20, 30, 110 + i), _const(0), _noisy(0.3, 0.5, 120 + i)) for i, pod in enumerate(DECODE)
    ]
    light_prefill = [
        _pod_metrics(pod, _noisy(2, 6, 130 + i), _const(0), _noisy(0.1, 0.2, 140 + i)) for i, pod in enumerate(PREFILL)
    ]
    assert serious(_run(_merge(*busy_decode, *light_prefill, _traffic(5.0)), None, OWN_CEILINGS)) == []
