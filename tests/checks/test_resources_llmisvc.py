"""The ``resources`` step on an LLMInferenceService's vLLM pods (issue #18): found by KServe's workload labels,
judged like a predictor's, never patched as an InferenceService."""

from __future__ import annotations

import copy

from builders import evidence_from_objects
from check_cases import load_case, only, serious

from nbhelpers.checks import resources
from nbhelpers.evidence.model import LLM_INFERENCE_SERVICE
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding

HEALTHY = "checks/healthy/llmisvc.yaml"


def _run(*files: str) -> list[Finding]:
    objects = copy.deepcopy(load_case(*files))
    return resources.run(evidence_from_objects(objects, "llm", "llama-llmd", target_kind=LLM_INFERENCE_SERVICE))


def test_the_healthy_service_has_no_resource_problem() -> None:
    assert serious(_run(HEALTHY)) == []


def test_an_oom_killed_vllm_container_names_where_its_limit_can_come_from() -> None:
    finding = only(
        _run(HEALTHY, "checks/RESOURCES_HOST_OOMKILLED/llmisvc_main_oomkilled.yaml"), "RESOURCES_HOST_OOMKILLED"
    )
    assert finding.level is Severity.CRITICAL
    assert "main OOMKilled at memory limit 16Gi" in finding.title
    assert "not the LLMInferenceService's own spec.template (llama-llmd)" in finding.summary
    assert "neither the InferenceService" not in finding.summary
    assert finding.fix is None or finding.fix.patch is None  # no InferenceService to patch


def test_an_oom_limit_set_in_the_template_is_the_services_own() -> None:
    objects = load_case(HEALTHY, "checks/RESOURCES_HOST_OOMKILLED/llmisvc_main_oomkilled.yaml")
    for obj in objects:
        if obj["kind"] == "LLMInferenceService":
            obj["spec"]["template"] = {"containers": [{"name": "main", "resources": {"limits": {"memory": "16Gi"}}}]}
    evidence = evidence_from_objects(objects, "llm", "llama-llmd", target_kind=LLM_INFERENCE_SERVICE)
    finding = only(resources.run(evidence), "RESOURCES_HOST_OOMKILLED")
    assert "the LLMInferenceService (llama-llmd, spec.template)" in finding.summary


def test_a_replica_waiting_for_a_gpu() -> None:
    finding = only(
        _run(HEALTHY, "checks/RESOURCES_GPU_UNSCHEDULABLE/llmisvc_pending.yaml"), "RESOURCES_GPU_UNSCHEDULABLE"
    )
    assert "Insufficient nvidia.com/gpu" in finding.title
    assert "llama-llmd-kserve-6d8f7c9b5-9tq7m" in finding.summary


def test_the_endpoint_picker_is_not_judged_as_a_vllm_pod() -> None:
    """The picker's pod has no GPU and no vLLM: it must not be taken for the serving workload."""
    objects = load_case(HEALTHY)
    for obj in objects:
        if obj["kind"] == "Pod" and "router-scheduler" in obj["metadata"]["name"]:
            obj["status"]["containerStatuses"][0]["lastState"] = {
                "terminated": {"reason": "OOMKilled", "exitCode": 137, "finishedAt": "2026-01-15T11:51:44Z"}
            }
            obj["status"]["containerStatuses"][0]["restartCount"] = 2
    evidence = evidence_from_objects(objects, "llm", "llama-llmd", target_kind=LLM_INFERENCE_SERVICE)
    assert serious(resources.run(evidence)) == []
