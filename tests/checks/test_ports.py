"""The ``ports`` step: failing fixtures per variant, healthy fixtures in both modes, and patches that fix."""

from __future__ import annotations

import copy
import shlex

import pytest
import yaml
from check_cases import (
    apply_patch,
    assert_valid_patch,
    codes,
    evidence_of,
    json_merge_patch,
    load_case,
    only,
    rollout,
    serious,
)

from nbhelpers.checks import ports
from nbhelpers.errors import EvidenceMissing, StepSkipped
from nbhelpers.findings.catalog import Severity

ISVC_REF = "InferenceService.serving.kserve.io/llm/vllm-llm"
RAW_POD = "Pod/llm/vllm-llm-predictor-6d5f8b7c9-q8w2e"
KNATIVE_POD = "Pod/llm/vllm-llm-predictor-00001-deployment-7f9c6d-x2k4p"
KSERVE_INGRESS = "Ingress/llm/vllm-llm"

HEALTHY = {
    "serverless": (("checks/healthy/serverless.yaml",), ()),
    "raw": (("checks/healthy/raw.yaml",), ()),
    "raw rolling update, named targetPort": (
        ("checks/healthy/raw.yaml", "checks/healthy/raw_rolling_named_port.yaml"),
        (),
    ),
    "serverless with agent sidecar": (("checks/healthy/serverless.yaml", "checks/healthy/serverless_agent.yaml"), ()),
    "Standard huggingfaceserver, no port declared": (
        ("checks/healthy/raw.yaml", "checks/healthy/raw_huggingfaceserver.yaml"),
        (),
    ),
    "serverless scaled to zero (spec from the Revision)": (
        ("checks/healthy/serverless.yaml", "checks/healthy/serverless_scaled_to_zero.yaml"),
        (KNATIVE_POD,),
    ),
    "Knative on Kourier": (
        ("checks/healthy/serverless.yaml", "checks/healthy/serverless_kourier.yaml"),
        ("VirtualService.networking.istio.io/llm/vllm-llm",),
    ),
}


@pytest.mark.parametrize("case", sorted(HEALTHY))
def test_healthy_fixtures_have_no_port_problem(case: str) -> None:
    files, drop = HEALTHY[case]
    assert serious(ports.run(evidence_of(load_case(*files, drop=drop)))) == []


def _fixed_after(objects: list[dict], finding, reconcile: bool = True) -> list:
    assert_valid_patch(finding, objects)
    patched = apply_patch(objects, finding)
    if reconcile:
        patched = rollout(patched)
    return [f for f in serious(ports.run(evidence_of(patched))) if f.code == "PORT_MISMATCH"]


def _rollback_body(remediation: str) -> dict:
    command = remediation.split("Roll back:\n", 1)[1].strip()
    words = shlex.split(command)
    return yaml.safe_load(words[words.index("-p") + 1])


def test_vllm_default_port_behind_raw_service() -> None:
    objects = load_case("checks/healthy/raw.yaml", "checks/PORT_MISMATCH/raw_vllm_default_port.yaml")
    finding = only(ports.run(evidence_of(objects)), "PORT_MISMATCH")
    assert finding.level is Severity.CRITICAL
    assert finding.objects == (ISVC_REF, RAW_POD, "Service/llm/vllm-llm-predictor")
    assert "listens on 8000" in finding.summary and "on 8080" in finding.summary
    assert "chain: Service/llm/vllm-llm-predictor port 80 → targetPort 8080 → kserve-container:8080" in finding.evidence
    assert "listening port: 8000 (--port not set: vllm default 8000)" in finding.evidence
    assert finding.patch is not None and finding.patch.target == ISVC_REF
    body = yaml.safe_load(finding.patch.body)
    # A list is carried whole: the container keeps its image, ports and probe next to the new flag.
    (container,) = body["spec"]["predictor"]["containers"]
    assert container["args"] == ["--served-model-name", "vllm-llm", "--port=8080"]
    assert container["image"] == "vllm/vllm-openai:v0.10.1"
    assert container["readinessProbe"]["httpGet"]["port"] == 8080
    assert "kubectl patch inferenceservices.serving.kserve.io vllm-llm -n llm --type merge -p" in finding.remediation
    assert _fixed_after(objects, finding) == []


def test_rollback_restores_the_original_object() -> None:
    objects = load_case("checks/healthy/raw.yaml", "checks/PORT_MISMATCH/raw_vllm_default_port.yaml")
    finding = only(ports.run(evidence_of(objects)), "PORT_MISMATCH")
    isvc = next(obj for obj in objects if obj["kind"] == "InferenceService")
    patched = next(obj for obj in apply_patch(objects, finding) if obj["kind"] == "InferenceService")
    assert json_merge_patch(patched, _rollback_body(finding.remediation)) == isvc


def test_serverless_runtime_without_port_flag() -> None:
    objects = load_case("checks/healthy/serverless.yaml", "checks/PORT_MISMATCH/serverless_runtime_without_port.yaml")
    finding = only(ports.run(evidence_of(objects)), "PORT_MISMATCH")
    assert finding.objects == (ISVC_REF, KNATIVE_POD)
    assert "USER_PORT 8080" in finding.summary and "listens on 8000" in finding.summary
    assert "readinessProbe (queue-proxy): tcpSocket port 8080" in finding.evidence
    body = yaml.safe_load(finding.patch.body if finding.patch else "")
    # The ISVC's own args come after the runtime's: the existing flag is kept and --port appended.
    assert body == {"spec": {"predictor": {"model": {"args": ["--max-model-len=8192", "--port=8080"]}}}}
    assert _fixed_after(objects, finding) == []


def test_agent_sidecar_forwards_to_a_port_nobody_listens_on() -> None:
    objects = load_case("checks/healthy/serverless.yaml", "checks/PORT_MISMATCH/serverless_agent_component_port.yaml")
    finding = only(ports.run(evidence_of(objects)), "PORT_MISMATCH")
    chain = next(line for line in finding.evidence if line.startswith("chain: "))
    assert "USER_PORT 9081" in chain
    assert "agent sidecar agent:9081 forwards to 8080 (--component-port 8080)" in chain
    assert "listens on 8000" in finding.summary
    assert _fixed_after(objects, finding) == []


def test_liveness_probe_on_the_wrong_port() -> None:
    objects = load_case("checks/healthy/raw.yaml", "checks/PORT_MISMATCH/raw_liveness_wrong_port.yaml")
    finding = only(ports.run(evidence_of(objects)), "PORT_MISMATCH")
    assert finding.title == "livenessProbe port 8000 is not the server's port 8080"
    assert "restarts a healthy server" in finding.summary
    assert "livenessProbe (kubelet): httpGet port 8000" in finding.evidence
    body = yaml.safe_load(finding.patch.body if finding.patch else "")
    assert body["spec"]["predictor"]["containers"][0]["livenessProbe"]["httpGet"] == {"path": "/health", "port": 8080}
    assert _fixed_after(objects, finding) == []


def test_named_target_port_that_no_container_declares() -> None:
    objects = load_case("checks/healthy/raw.yaml", "checks/PORT_MISMATCH/raw_named_target_port.yaml")
    finding = only(ports.run(evidence_of(objects)), "PORT_MISMATCH")
    assert "'http1'" in finding.summary and "8080/TCP (http)" in finding.summary
    assert finding.patch is not None and finding.patch.target == "Service/llm/vllm-llm-predictor"
    assert yaml.safe_load(finding.patch.body) == {
        "spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]}
    }
    assert _fixed_after(objects, finding, reconcile=False) == []


def test_kserve_owned_service_gets_no_direct_patch() -> None:
    objects = load_case("checks/healthy/raw.yaml", "checks/PORT_MISMATCH/raw_named_target_port.yaml")
    service = next(obj for obj in objects if obj["kind"] == "Service")
    service["metadata"]["ownerReferences"] = [
        {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "name": "vllm-llm", "uid": "x"}
    ]
    finding = only(ports.run(evidence_of(objects)), "PORT_MISMATCH")
    assert finding.patch is None
    assert "generated by InferenceService/vllm-llm" in finding.remediation


def test_stale_container_port_is_info_only() -> None:
    objects = load_case("checks/healthy/raw.yaml", "checks/PORT_MISMATCH/raw_vllm_default_port.yaml")
    for obj in objects:
        if obj["kind"] == "Service":
            obj["spec"]["ports"][0]["targetPort"] = 8000
        if obj["kind"] == "Pod":
            obj["spec"]["containers"][0]["readinessProbe"]["httpGet"]["port"] = 8000
    findings = ports.run(evidence_of(objects))
    finding = only(findings, "PORT_MISMATCH")
    assert finding.level is Severity.INFO
    assert "containerPort [8080]" in finding.title and "8000" in finding.title


def test_unresolvable_port_variable_is_not_reported() -> None:
    objects = load_case("checks/healthy/raw.yaml")
    pod = next(obj for obj in objects if obj["kind"] == "Pod")
    pod["spec"]["containers"][0]["args"] = ["--model", "/mnt/models", "--port", "$(SERVING_PORT)"]
    assert codes(serious(ports.run(evidence_of(objects)))) == set()


def test_pods_forbidden_is_missing_evidence() -> None:
    reads = [
        {"what": "Pod in llm (serving.kserve.io/inferenceservice=vllm-llm)", "status": "forbidden", "reason": "RBAC"}
    ]
    with pytest.raises(EvidenceMissing, match="forbidden"):
        ports.run(evidence_of(load_case("checks/healthy/raw.yaml"), reads=reads))


def test_modelmesh_is_skipped() -> None:
    objects = copy.deepcopy(load_case("checks/healthy/raw.yaml"))
    isvc = next(obj for obj in objects if obj["kind"] == "InferenceService")
    isvc["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] = "ModelMesh"
    with pytest.raises(StepSkipped):
        ports.run(evidence_of(objects))


def test_unknown_mode_with_a_knative_service_follows_the_knative_chain() -> None:
    objects = load_case("checks/healthy/serverless.yaml", "checks/PORT_MISMATCH/serverless_runtime_without_port.yaml")
    isvc = next(obj for obj in objects if obj["kind"] == "InferenceService")
    isvc["metadata"]["annotations"] = {}  # no annotation, no status mode, and the config names no default
    config = next(obj for obj in objects if obj["kind"] == "ConfigMap")
    config["data"].pop("deploy")
    evidence = evidence_of(objects)
    assert evidence.deployment_mode == "unknown"
    finding = only(ports.run(evidence), "PORT_MISMATCH")
    assert "queue-proxy → USER_PORT 8080" in finding.summary
