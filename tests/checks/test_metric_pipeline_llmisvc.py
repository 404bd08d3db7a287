"""The ``metric_pipeline`` step on an LLMInferenceService (issue #18): KServe renders spec.scaling.keda as the
ScaledObject ``<name>-kserve-keda`` on the ``<name>-kserve`` Deployment (expectedDirectScaledObject,
pkg/controller/v1alpha2/llmisvc/scaling.go); KEDA runs its triggers' PromQL itself and serves the result through
external.metrics.k8s.io to the HPA ``keda-hpa-<name>-kserve-keda``. The pipeline is KEDA's, the same as for an
InferenceService, so the checks are the same; the objects and the fix name the LLMInferenceService's fields."""

from __future__ import annotations

import copy
from typing import Any

from builders import evidence_from_objects
from check_cases import codes, load_case, only, serious

from nbhelpers.checks import metric_pipeline
from nbhelpers.errors import StepSkipped
from nbhelpers.evidence.model import LLM_INFERENCE_SERVICE
from nbhelpers.findings.catalog import Severity

HEALTHY = "checks/healthy/llmisvc.yaml"
KEDA = "checks/healthy/llmisvc_keda.yaml"
IDLE_ZERO = "checks/HPA_METRIC_SERIES_MISSING/llmisvc_keda_idle_zero.yaml"
QUERY = 'sum(vllm:num_requests_waiting{namespace="llm",pod=~"llama-llmd-kserve-.*"})'
PODS = ("Pod/llm/llama-llmd-kserve-6d8f7c9b5-4xk2p", "Pod/llm/llama-llmd-kserve-6d8f7c9b5-9tq7m")
SCALED_OBJECT = "ScaledObject.keda.sh/llm/llama-llmd-kserve-keda"


def _run(*files: str, drop: tuple[str, ...] = (), result: list[dict[str, Any]] | None = None):  # type: ignore[no-untyped-def]
    metrics = None
    if result is not None:
        metrics = {"keda-trigger.llama-llmd-kserve-keda.0": {"promql": QUERY, "result": result}}
    objects = copy.deepcopy(load_case(*files, drop=drop))
    evidence = evidence_from_objects(objects, "llm", "llama-llmd", target_kind=LLM_INFERENCE_SERVICE, metrics=metrics)
    return metric_pipeline.run(evidence)


def test_without_spec_scaling_no_autoscaler_reads_a_metric() -> None:
    try:
        _run(HEALTHY)
    except StepSkipped as skipped:
        assert "no HPA or ScaledObject acts on the vLLM workload" in skipped.reason
        assert "spec.scaling" in skipped.reason
    else:
        raise AssertionError("expected the step to be skipped")


def test_the_healthy_keda_pipeline_has_no_finding() -> None:
    answer = [{"metric": {}, "values": [[1768475000, "3"]]}]
    assert serious(_run(HEALTHY, KEDA, result=answer)) == []


def test_a_pod_metric_trigger_at_zero_replicas_never_activates() -> None:
    findings = _run(HEALTHY, KEDA, IDLE_ZERO, drop=PODS, result=[])
    finding = only(findings, "HPA_METRIC_SERIES_MISSING")
    assert finding.level is Severity.CRITICAL
    assert finding.objects == ("LLMInferenceService.serving.kserve.io/llm/llama-llmd", SCALED_OBJECT)
    assert "nothing can ever activate the ScaledObject" in finding.summary
    assert "drop idleReplicaCount 0 from the LLMInferenceService's spec.scaling.keda" in finding.remediation
    assert "spec.predictor" not in finding.remediation
    assert "HPA_METRIC_SERIES_MISSING" in codes(findings)
