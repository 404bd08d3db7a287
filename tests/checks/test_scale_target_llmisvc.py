"""The ``scale_target`` step on an LLMInferenceService (issue #18): the autoscalers KServe renders from spec.scaling
(the ScaledObject ``<name>-kserve-keda``, the WVA HPA ``<name>-kserve-hpa``, pkg/controller/v1alpha2/llmisvc/
scaling.go) scale the ``<name>-kserve`` Deployment; a change to them belongs in spec.scaling, which KServe renders
them from, never in an InferenceService field."""

from __future__ import annotations

import copy
from typing import Any

from builders import evidence_from_objects
from check_cases import load_case, only, serious

from nbhelpers.checks import scale_target
from nbhelpers.evidence.model import LLM_INFERENCE_SERVICE
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding
from nbhelpers.metrics import catalog

HEALTHY = "checks/healthy/llmisvc.yaml"
KEDA = "checks/healthy/llmisvc_keda.yaml"
AT_MAX = "checks/HPA_AT_MAX/llmisvc_keda_at_max.yaml"
PODS = ("llama-llmd-kserve-6d8f7c9b5-4xk2p", "llama-llmd-kserve-6d8f7c9b5-9tq7m")
KEDA_HPA = "keda-hpa-llama-llmd-kserve-keda"
START = 1768476600.0  # 11:30 UTC, half an hour before the capture


def _series(query_id: str, *series: tuple[dict[str, str], list[float]]) -> dict[str, Any]:
    promql = catalog.render(catalog.BY_ID[query_id], 0, "llm", "llama-llmd", 15, (KEDA_HPA,), llmisvc=True)
    result = [
        {"metric": labels, "values": [[START + 15 * i, str(value)] for i, value in enumerate(values)]}
        for labels, values in series
    ]
    return {"promql": promql, "result": result}


def _queue_at_two(samples: int = 20) -> dict[str, dict[str, Any]]:
    """Both vLLM pods run 64 requests for five minutes while the queue grows by 2 requests/s."""
    queue = [20.0 + 2.0 * 15 * i for i in range(samples)]
    return {
        "vllm_running": _series("vllm_running", *(({"pod": pod}, [64.0] * samples) for pod in PODS)),
        "vllm_waiting": _series("vllm_waiting", *(({"pod": pod}, [value / 2 for value in queue]) for pod in PODS)),
        "vllm_request_rate": _series("vllm_request_rate", ({}, [4.0] * samples)),
        "hpa_current_replicas": _series("hpa_current_replicas", ({}, [2.0] * samples)),
    }


def _run(*files: str, metrics: dict[str, Any] | None = None) -> list[Finding]:
    objects = copy.deepcopy(load_case(*files))
    evidence = evidence_from_objects(objects, "llm", "llama-llmd", target_kind=LLM_INFERENCE_SERVICE, metrics=metrics)
    return scale_target.run(evidence)


def test_a_service_without_spec_scaling_and_the_healthy_keda_one_have_no_finding() -> None:
    assert serious(_run(HEALTHY)) == []
    assert serious(_run(HEALTHY, KEDA)) == []


def test_at_max_replicas_while_requests_queue_asks_for_spec_scaling_max_replicas() -> None:
    finding = only(_run(HEALTHY, KEDA, AT_MAX, metrics=_queue_at_two()), "HPA_AT_MAX")
    assert finding.level is Severity.WARNING
    assert "ScaledObject.keda.sh/llm/llama-llmd-kserve-keda" in finding.objects
    assert finding.patch is None
    assert "Raise maxReplicas to" in finding.remediation
    assert "in the LLMInferenceService's spec.scaling: KServe renders" in finding.remediation
    assert "spec.predictor" not in finding.remediation
