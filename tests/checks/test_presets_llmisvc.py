"""Where an LLMInferenceService's vLLM container values come from (issue #18): KServe merges its well-known preset,
then ``spec.baseRefs``, then the service's own spec (config_merge.go). The probes and resources findings name the
layer that set the value they are about, so the fix lands in the service's spec.template, which overrides it. A config
found nowhere stops KServe from rendering anything: ``LLMISVC_PRESET_NOT_FOUND`` (kserve/kserve#5047, #5035)."""

from __future__ import annotations

import copy
from typing import Any

from builders import evidence_from_objects
from check_cases import load_case, only, serious
from test_lws_llmisvc import HEALTHY as MULTINODE
from test_lws_llmisvc import MULTINODE_DROPPED, PENDING
from test_probes_llmisvc import HEALTHY, KILLED, LOGS

from nbhelpers.checks import STEP_IDS, endpoints, probes, resources
from nbhelpers.evidence.model import LLM_INFERENCE_SERVICE, Evidence
from nbhelpers.facts import presets
from nbhelpers.findings.model import rank_root_causes

PRESET = {
    "apiVersion": "serving.kserve.io/v1alpha2",
    "kind": "LLMInferenceServiceConfig",
    "metadata": {"name": "kserve-config-llm-template", "namespace": "kserve"},
    "spec": {
        "template": {
            "containers": [
                {
                    "name": "main",
                    "image": "ghcr.io/llm-d/llm-d-cuda:v0.9.0",
                    "livenessProbe": {"httpGet": {"path": "/health", "port": 8000}, "initialDelaySeconds": 120},
                    "readinessProbe": {"httpGet": {"path": "/health", "port": 8000}},
                }
            ]
        }
    },
}


def _evidence(objects: list[dict[str, Any]], logs: dict[tuple[str, str], str] | None = None) -> Evidence:
    return evidence_from_objects(
        copy.deepcopy(objects), "llm", "llama-llmd", target_kind=LLM_INFERENCE_SERVICE, logs=logs or {}
    )


def _service(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return next(obj for obj in objects if obj["kind"] == "LLMInferenceService")


def test_a_probe_finding_names_the_preset_that_set_the_probe() -> None:
    objects = [*load_case(HEALTHY, KILLED), PRESET]
    finding = only(probes.run(_evidence(objects, LOGS)), "PROBE_LIVENESS_KILLS_DURING_LOAD")
    assert finding.evidence[-1] == (
        "container main: template from LLMInferenceServiceConfig kserve/kserve-config-llm-template (Preset); "
        "readinessProbe, livenessProbe from LLMInferenceServiceConfig kserve/kserve-config-llm-template (Preset) "
        "(a value set in the LLMInferenceService's spec.template overrides a preset's)"
    )


def test_a_base_ref_in_the_services_namespace_overrides_the_preset() -> None:
    user = copy.deepcopy(PRESET)
    user["metadata"] = {"name": "slow-start", "namespace": "llm"}
    user["spec"]["template"]["containers"][0] = {"name": "main", "livenessProbe": {"initialDelaySeconds": 120}}
    objects = [*load_case(HEALTHY, KILLED), PRESET, user]
    _service(objects)["spec"]["baseRefs"] = [{"name": "slow-start"}]
    evidence = _evidence(objects, LOGS)
    assert [layer.describe() for layer in presets.layers(evidence)] == [
        "LLMInferenceServiceConfig kserve/kserve-config-llm-template (Preset)",
        "LLMInferenceServiceConfig llm/slow-start (UserRef)",
        "the LLMInferenceService's own spec (llama-llmd)",
    ]
    finding = only(probes.run(evidence), "PROBE_LIVENESS_KILLS_DURING_LOAD")
    assert "livenessProbe from LLMInferenceServiceConfig llm/slow-start (UserRef)" in finding.evidence[-1]
    assert "readinessProbe from LLMInferenceServiceConfig kserve/kserve-config-llm-template" in finding.evidence[-1]


def test_a_base_ref_found_nowhere_is_named() -> None:
    objects = [*load_case(HEALTHY, KILLED), PRESET]
    _service(objects)["spec"]["baseRefs"] = [{"name": "gone"}]
    evidence = _evidence(objects, LOGS)
    assert presets.missing_base_refs(evidence) == ["gone"]
    finding = only(probes.run(evidence), "PROBE_LIVENESS_KILLS_DURING_LOAD")
    assert "spec.baseRefs not found in either namespace: gone" in finding.evidence[-1]


def test_the_multi_node_preset_recorded_by_kserve_supplies_the_resources() -> None:
    objects = load_case(*MULTINODE, PENDING, drop=MULTINODE_DROPPED)
    finding = only(resources.run(_evidence(objects)), "WORKLOAD_GROUP_INCOMPLETE")
    preset = "LLMInferenceServiceConfig kserve/kserve-config-llm-worker-data-parallel (Preset)"
    assert finding.evidence[-1].startswith(f"container main: template from {preset}; resources from {preset}")


def test_no_preset_line_without_a_known_layer() -> None:
    """The single-node fixture names no config and sets nothing on main: no line is invented."""
    evidence = _evidence(load_case(HEALTHY))
    assert presets.origin_line(evidence, presets.PROBE_FIELDS) is None


# --- LLMISVC_PRESET_NOT_FOUND: kserve/kserve#5047, kserve/kserve#5035 ----------------------------------------------

PIPELINE_MISSING = "checks/LLMISVC_PRESET_NOT_FOUND/llmisvc_pipeline_preset_missing.yaml"
# Everything KServe renders for the healthy stack: with the merge failed, none of it exists.
RENDERED = (
    "Deployment/llm/llama-llmd-kserve",
    "Pod/llm/llama-llmd-kserve-6d8f7c9b5-4xk2p",
    "Pod/llm/llama-llmd-kserve-6d8f7c9b5-9tq7m",
    "Deployment/llm/llama-llmd-kserve-router-scheduler",
    "Pod/llm/llama-llmd-kserve-router-scheduler-7c9d8b6f4-k2m4p",
    "Service/llm/llama-llmd-kserve-workload-svc",
    "Service/llm/llama-llmd-epp-service",
    "HTTPRoute.gateway.networking.k8s.io/llm/llama-llmd-kserve-route",
    "InferencePool.inference.networking.k8s.io/llm/llama-llmd-inference-pool",
)


def test_a_missing_well_known_preset_is_the_cause_not_the_pool_kserve_never_made() -> None:
    objects = load_case(HEALTHY, PIPELINE_MISSING, drop=RENDERED)
    findings = endpoints.run(_evidence(objects))
    finding = only(findings, "LLMISVC_PRESET_NOT_FOUND")
    assert finding.title == (
        "LLMInferenceServiceConfig kserve-config-llm-worker-pipeline-parallel not found: KServe renders nothing for "
        "the service"
    )
    assert "exists neither in llm nor in kserve" in finding.summary
    assert "LLMInferenceServiceConfigs in kserve: kserve-config-llm-worker-data-parallel" in finding.evidence
    assert "LLMInferenceServiceConfigs in llm: none" in finding.evidence
    assert "not pipeline-parallel ones" in finding.remediation
    assert rank_root_causes(findings, STEP_IDS)[0] == "LLMISVC_PRESET_NOT_FOUND"


def test_a_base_ref_found_nowhere_is_the_cause_before_kserve_says_so() -> None:
    """No PresetsCombined condition yet: the missing name is found from the lists of both namespaces."""
    objects = load_case(HEALTHY, drop=RENDERED)
    _service(objects)["spec"]["baseRefs"] = [{"name": "llama-tuning"}]
    finding = only(endpoints.run(_evidence(objects)), "LLMISVC_PRESET_NOT_FOUND")
    assert "LLMInferenceServiceConfig llama-tuning not found" in finding.title
    assert "spec.baseRefs: llama-tuning" in finding.evidence
    assert "create llama-tuning in llm (or kserve), or correct or remove it in spec.baseRefs" in finding.remediation


def test_presets_that_exist_raise_nothing() -> None:
    assert "LLMISVC_PRESET_NOT_FOUND" not in {f.code for f in endpoints.run(_evidence(load_case(HEALTHY)))}
    multinode = load_case(*MULTINODE, drop=MULTINODE_DROPPED)
    assert serious(endpoints.run(_evidence(multinode))) == []
