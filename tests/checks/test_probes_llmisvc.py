"""The ``probes`` step on an LLMInferenceService's vLLM container ``main`` (issue #18), from kserve/kserve#5062: the
template's livenessProbe (initialDelaySeconds 120, no startupProbe) killed a 70B model mid-load, restart after restart.
Before #18 the tool answered "InferenceService not found"; after, PROBE_LIVENESS_KILLS_DURING_LOAD, no patch of an
InferenceService, the fix on the LLMInferenceService's template."""

from __future__ import annotations

import copy

from builders import evidence_from_objects
from check_cases import load_case, only, serious
from test_probes import stamped, vllm_start

from nbhelpers.checks import probes, resources
from nbhelpers.evidence.model import LLM_INFERENCE_SERVICE
from nbhelpers.findings.catalog import Severity

HEALTHY = "checks/healthy/llmisvc.yaml"
KILLED = "checks/PROBE_LIVENESS_KILLS_DURING_LOAD/llmisvc_preset_liveness_delay.yaml"
POD = "llama-llmd-kserve-6d8f7c9b5-9tq7m"
MODEL = "meta-llama/Llama-3.1-70B-Instruct"
LOGS = {
    (POD, "main.previous"): stamped(
        "2026-01-15T11:54:00",
        [
            *vllm_start(MODEL),
            (150.5, "Loading safetensors checkpoint shards:  40% Completed | 12/30 [01:58<02:57,  9.84s/it]"),
        ],
    ),
    (POD, "main"): stamped("2026-01-15T11:57:30", vllm_start(MODEL)[:3]),
}


def _evidence(*files: str, logs: dict[tuple[str, str], str] | None = None):  # type: ignore[no-untyped-def]
    objects = copy.deepcopy(load_case(*files))
    return evidence_from_objects(objects, "llm", "llama-llmd", target_kind=LLM_INFERENCE_SERVICE, logs=logs or {})


def test_the_healthy_service_has_no_probe_problem() -> None:
    assert serious(probes.run(_evidence(HEALTHY))) == []


def test_a_liveness_delay_shorter_than_the_load_kills_main_mid_load() -> None:
    finding = only(probes.run(_evidence(HEALTHY, KILLED, logs=LOGS)), "PROBE_LIVENESS_KILLS_DURING_LOAD")
    assert finding.level is Severity.CRITICAL
    assert finding.title == "livenessProbe kills the container during the model load (150 s budget)"
    assert "No startupProbe holds the liveness probe back" in finding.summary
    assert finding.objects == ("LLMInferenceService.serving.kserve.io/llm/llama-llmd", f"Pod/llm/{POD}")
    assert any("event Killing" in line and "(main)" in line for line in finding.evidence)
    assert finding.fix is not None and finding.fix.patch is None
    assert "container main in its spec.template" in finding.remediation
    assert "InferenceService does not declare" not in finding.remediation


def test_the_restart_loop_is_not_read_as_a_resource_problem() -> None:
    """The last state is a kubelet kill (exit 137, reason Error), not OOMKilled; /dev/shm is KServe's memory-backed one."""
    assert serious(resources.run(_evidence(HEALTHY, KILLED, logs=LOGS))) == []
