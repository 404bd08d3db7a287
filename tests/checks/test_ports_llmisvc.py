"""The ``ports`` step on an LLMInferenceService (issue #18): the port vLLM listens on against the InferencePool's
targetPorts (with a scheduler) or the workload Service's targetPort (without), and the probes of container main.

KServe fixes the workload Service at 8000 and its presets put the container that receives requests there: vLLM, or on
decode pods of the P/D presets the llm-d routing sidecar in front of vLLM on 8001 (reconcileWorkloadService in
pkg/controller/v1alpha2/llmisvc/workload.go; config/llmisvcconfig/config-llm-decode-template.yaml)."""

from __future__ import annotations

import copy
from typing import Any

from builders import evidence_from_objects
from check_cases import codes, load_case, serious

from nbhelpers.checks import endpoints, ports
from nbhelpers.evidence.model import LLM_INFERENCE_SERVICE
from nbhelpers.findings.catalog import Severity

HEALTHY = "checks/healthy/llmisvc.yaml"
DISAGGREGATED = "checks/healthy/llmisvc_disaggregated.yaml"
PORT_8080 = "checks/PORT_MISMATCH/llmisvc_port_8080.yaml"
POOL = "InferencePool.inference.networking.k8s.io/llm/llama-llmd-inference-pool"


def _evidence(objects: list[dict[str, Any]]):  # type: ignore[no-untyped-def]
    return evidence_from_objects(copy.deepcopy(objects), "llm", "llama-llmd", target_kind=LLM_INFERENCE_SERVICE)


def _with_routing_sidecar(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The decode pods as the P/D preset renders them: vLLM on 8001 (probes too), the routing sidecar on 8000."""
    for obj in objects:
        labels = obj["metadata"].get("labels") or {}
        if obj["kind"] not in ("Pod", "Deployment") or labels.get("llm-d.ai/role") != "decode":
            continue
        spec = obj["spec"]["template"]["spec"] if obj["kind"] == "Deployment" else obj["spec"]
        main = spec["containers"][0]
        main["args"] = [arg if arg != "8000" else "8001" for arg in main["args"]]
        main["ports"] = [{"containerPort": 8001, "protocol": "TCP"}]
        main["readinessProbe"] = {"httpGet": {"path": "/health", "port": 8001, "scheme": "HTTP"}}
        spec["initContainers"] = [
            {
                "name": "llm-d-routing-sidecar",
                "image": "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0",
                "restartPolicy": "Always",
                "ports": [{"containerPort": 8000, "protocol": "TCP"}],
                "readinessProbe": {"httpGet": {"path": "/health", "port": 8000}},
            }
        ]
    return objects


def test_the_healthy_service_has_no_port_finding() -> None:
    assert serious(ports.run(_evidence(load_case(HEALTHY)))) == []


def test_a_routing_sidecar_on_the_pool_port_in_front_of_vllm_is_no_mismatch() -> None:
    evidence = _evidence(_with_routing_sidecar(load_case(HEALTHY, DISAGGREGATED)))
    assert serious(ports.run(evidence)) == []
    assert "ENDPOINTS_POOL_SELECTS_NO_POD" not in codes(endpoints.run(evidence))


def test_vllm_moved_to_8080_misses_the_pool_port_and_its_own_readiness_probe() -> None:
    findings = ports.run(_evidence(load_case(HEALTHY, PORT_8080)))
    assert codes(findings) == {"PORT_MISMATCH"}
    pool, probe = findings
    assert pool.level is Severity.CRITICAL
    assert pool.title == "vLLM on the vLLM pods listens on 8080, the InferencePool sends to 8000"
    assert f"but {POOL} targetPorts 8000: the endpoint picker hands out" in pool.summary
    assert POOL in pool.objects
    assert pool.patch is None and "Remove the --port 8080" in pool.remediation
    assert probe.title == "readinessProbe port 8000 is not vLLM's port 8080 (vLLM pods)"


def test_without_a_scheduler_the_workload_service_port_is_judged() -> None:
    objects = load_case(HEALTHY, PORT_8080)
    service = next(obj for obj in objects if obj["kind"] == "LLMInferenceService")
    service["spec"]["router"].pop("scheduler")
    pool_finding = ports.run(_evidence(objects))[0]
    assert pool_finding.title == "vLLM on the vLLM pods listens on 8080, the Service sends to 8000"
    assert "Service/llm/llama-llmd-kserve-workload-svc" in pool_finding.objects


def test_the_presets_catch_all_rule_puts_the_workload_service_on_the_path_too() -> None:
    """KServe's preset route sends /v1/models, /health and other paths to the workload Service, past the picker."""
    objects = load_case(HEALTHY, PORT_8080)
    route = next(obj for obj in objects if obj["kind"] == "HTTPRoute")
    route["spec"]["rules"].append(
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/llm/llama-llmd"}}],
            "backendRefs": [{"kind": "Service", "name": "llama-llmd-kserve-workload-svc", "port": 8000}],
        }
    )
    titles = [finding.title for finding in ports.run(_evidence(objects))]
    assert titles[:2] == [
        "vLLM on the vLLM pods listens on 8080, the InferencePool sends to 8000",
        "vLLM on the vLLM pods listens on 8080, the Service sends to 8000",
    ]


def test_decode_pods_behind_their_routing_sidecar_alone_are_no_pool_port_mismatch() -> None:
    """Only the decode pods ready (the prefill ones dropped): vLLM listens on 8001, the sidecar takes the pool's 8000."""
    prefill = [
        "Pod/llm/llama-llmd-kserve-prefill-5b7c8d9f6-h7r2c",
        "Pod/llm/llama-llmd-kserve-prefill-5b7c8d9f6-w9d4k",
    ]
    evidence = _evidence(_with_routing_sidecar(load_case(HEALTHY, DISAGGREGATED, drop=prefill)))
    assert "ENDPOINTS_POOL_SELECTS_NO_POD" not in codes(endpoints.run(evidence))
    assert serious(ports.run(evidence)) == []
