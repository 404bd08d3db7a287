"""The ``cold_start`` step on an LLMInferenceService (issue #18): no Knative here, so the cold start of a vLLM pod is
judged against what an llm-d stack has: KEDA's idleReplicaCount 0 (scale-to-zero through the ScaledObject KServe
renders from spec.scaling) and the vLLM Deployment's progress deadline, which the LLMInferenceService leaves at
Kubernetes' 600 s (kserve/kserve#5684)."""

from __future__ import annotations

import copy

from builders import evidence_from_objects
from check_cases import codes, load_case, only, serious

from nbhelpers.checks import cold_start
from nbhelpers.evidence.model import LLM_INFERENCE_SERVICE
from nbhelpers.findings.catalog import Severity

HEALTHY = "checks/healthy/llmisvc.yaml"
DEADLINE = "checks/COLDSTART_EXCEEDS_TIMEOUT/llmisvc_progress_deadline.yaml"
IDLE_ZERO = "checks/COLDSTART_SCALE_TO_ZERO/llmisvc_keda_idle_zero.yaml"


def _run(*files: str):  # type: ignore[no-untyped-def]
    objects = copy.deepcopy(load_case(*files))
    return cold_start.run(evidence_from_objects(objects, "llm", "llama-llmd", target_kind=LLM_INFERENCE_SERVICE))


def test_the_healthy_service_has_no_cold_start_finding() -> None:
    assert serious(_run(HEALTHY)) == []


def test_a_cold_start_past_the_deployment_progress_deadline_is_a_warning_with_the_deployment_fix() -> None:
    finding = only(_run(HEALTHY, DEADLINE), "COLDSTART_EXCEEDS_TIMEOUT")
    assert finding.level is Severity.WARNING  # the pods keep loading: no request is lost by the deadline alone
    assert finding.title == "Cold start (740 s) is longer than the Deployment's progress deadline (600 s)"
    assert "Deployment llama-llmd-kserve progressDeadlineSeconds: 600 (Kubernetes' default)" in finding.evidence
    assert any("ProgressDeadlineExceeded" in line for line in finding.evidence)
    assert "Deployment/llm/llama-llmd-kserve" in finding.objects
    assert "spec.progressDeadlineSeconds to 1140 s" in finding.remediation
    assert "Knative" not in finding.summary + finding.remediation


def test_keda_idle_replica_count_zero_with_a_long_cold_start_is_scale_to_zero() -> None:
    findings = _run(HEALTHY, IDLE_ZERO)
    assert codes(serious(findings)) == {"COLDSTART_SCALE_TO_ZERO"}
    finding = only(findings, "COLDSTART_SCALE_TO_ZERO")
    assert "ScaledObject.keda.sh/llm/llama-llmd-kserve-keda (idleReplicaCount 0)" in finding.summary
    assert "remove idleReplicaCount 0 from spec.scaling.keda" in finding.remediation
    assert "spec.predictor" not in finding.remediation


def test_a_short_cold_start_behind_idle_zero_is_not_reported() -> None:
    objects = load_case(HEALTHY, IDLE_ZERO)
    pod = next(obj for obj in objects if obj["metadata"]["name"] == "llama-llmd-kserve-6d8f7c9b5-9tq7m")
    for condition in pod["status"]["conditions"]:
        if condition["type"] in ("Ready", "ContainersReady"):
            condition["lastTransitionTime"] = "2026-01-15T11:20:20Z"
    pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"] = "2026-01-15T11:20:10Z"
    findings = cold_start.run(
        evidence_from_objects(copy.deepcopy(objects), "llm", "llama-llmd", target_kind=LLM_INFERENCE_SERVICE)
    )
    assert "COLDSTART_SCALE_TO_ZERO" not in codes(findings)


def test_a_slow_container_restart_is_no_rollout_past_the_deadline() -> None:
    """The same 740 s, but as a restart of the container in a running pod: the Deployment keeps Progressing=True."""
    objects = load_case(HEALTHY, DEADLINE)
    deployment = next(
        obj for obj in objects if obj["kind"] == "Deployment" and obj["metadata"]["name"] == "llama-llmd-kserve"
    )
    deployment["status"]["conditions"] = deployment["status"]["conditions"][:1]
    pod = next(obj for obj in objects if obj["metadata"]["name"] == "llama-llmd-kserve-6d8f7c9b5-9tq7m")
    pod["metadata"]["creationTimestamp"] = "2026-01-15T09:00:00Z"
    status = pod["status"]["containerStatuses"][0]
    status["restartCount"] = 1
    status["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": "2026-01-15T11:05:00Z"}}
    status["state"] = {"running": {"startedAt": "2026-01-15T11:05:20Z"}}
    findings = cold_start.run(
        evidence_from_objects(copy.deepcopy(objects), "llm", "llama-llmd", target_kind=LLM_INFERENCE_SERVICE)
    )
    assert "COLDSTART_EXCEEDS_TIMEOUT" not in codes(findings)
