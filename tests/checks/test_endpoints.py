"""The ``endpoints`` step: every code from a failing fixture, healthy fixtures in both modes, patches that fix."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from builders import CAPTURED_AT
from check_cases import apply_patch, assert_valid_patch, codes, evidence_of, load_case, only, serious

from nbhelpers.checks import endpoints
from nbhelpers.errors import EvidenceMissing, StepSkipped
from nbhelpers.facts import common
from nbhelpers.findings.catalog import Severity
from nbhelpers.metrics import catalog

ISVC_REF = "InferenceService.serving.kserve.io/llm/vllm-llm"
KNATIVE_POD = "Pod/llm/vllm-llm-predictor-00001-deployment-7f9c6d-x2k4p"
KSERVE_INGRESS = "Ingress/llm/vllm-llm"
VIRTUAL_SERVICE = "VirtualService.networking.istio.io/llm/vllm-llm"
SERVERLESS = "checks/healthy/serverless.yaml"
RAW = "checks/healthy/raw.yaml"

HEALTHY = {
    "serverless (Knative + Istio)": ((SERVERLESS,), ()),
    "raw (Service + Ingress)": ((RAW,), ()),
    "raw mid rolling update, named targetPort": ((RAW, "checks/healthy/raw_rolling_named_port.yaml"), ()),
    "serverless scaled to zero, activator in path": (
        (SERVERLESS, "checks/healthy/serverless_scaled_to_zero.yaml"),
        (KNATIVE_POD,),
    ),
    "serverless with agent sidecar": ((SERVERLESS, "checks/healthy/serverless_agent.yaml"), ()),
    "Standard mode name, huggingfaceserver": ((RAW, "checks/healthy/raw_huggingfaceserver.yaml"), ()),
    "raw with Gateway API": ((RAW, "checks/healthy/raw_gateway_api.yaml"), (KSERVE_INGRESS,)),
    "Knative mode name on Kourier": ((SERVERLESS, "checks/healthy/serverless_kourier.yaml"), (VIRTUAL_SERVICE,)),
}


def _missing(what: str) -> list[dict[str, str]]:
    return [{"what": what, "status": "not_installed", "reason": "API group is not installed (no CRD)"}]


def _run(*files: str, drop: tuple[str, ...] = (), reads: list[dict[str, str]] | None = None):
    return endpoints.run(evidence_of(load_case(*files, drop=drop), reads=reads or []))


@pytest.mark.parametrize("case", sorted(HEALTHY))
def test_healthy_fixtures_have_no_endpoint_problem(case: str) -> None:
    files, drop = HEALTHY[case]
    assert serious(_run(*files, drop=drop)) == []


def test_healthy_serverless_predictor_service_is_external_name_without_endpoints() -> None:
    """The premise of the healthy case: the ExternalName Service really has no Endpoints in the fixture."""
    objects = load_case(SERVERLESS)
    names = {obj["metadata"]["name"] for obj in objects if obj["kind"] in ("Endpoints", "EndpointSlice")}
    assert "vllm-llm-predictor" not in names
    assert serious(endpoints.run(evidence_of(objects))) == []


# --- ISVC_NOT_READY ---------------------------------------------------------------------------


def test_isvc_not_ready_quotes_conditions_and_comes_with_its_cause() -> None:
    findings = _run(RAW, "checks/ISVC_NOT_READY/raw_minimum_replicas.yaml")
    assert codes(findings) == {"ISVC_NOT_READY", "ENDPOINTS_NONE_READY"}
    finding = only(findings, "ISVC_NOT_READY")
    assert finding.level is Severity.CRITICAL
    assert finding.objects == (ISVC_REF,)
    assert finding.title == "InferenceService not ready: Ready=False (MinimumReplicasUnavailable)"
    assert "ENDPOINTS_NONE_READY" in finding.summary
    assert (
        "InferenceService condition PredictorReady=False (MinimumReplicasUnavailable): "
        "'Deployment does not have minimum availability.'"
    ) in finding.evidence


def test_isvc_without_conditions_is_not_ready() -> None:
    objects = load_case(RAW)
    isvc = next(obj for obj in objects if obj["kind"] == "InferenceService")
    isvc["status"].pop("conditions")
    finding = only(endpoints.run(evidence_of(objects)), "ISVC_NOT_READY")
    assert "no status conditions" in finding.summary


# --- ENDPOINTS_NONE_READY -----------------------------------------------------------------------


def test_serverless_no_ready_pods_behind_the_private_service() -> None:
    findings = _run(SERVERLESS, "checks/ENDPOINTS_NONE_READY/serverless_pods_not_ready.yaml")
    finding = only(findings, "ENDPOINTS_NONE_READY")
    assert finding.level is Severity.CRITICAL
    assert finding.objects[:2] == (
        "Service/llm/vllm-llm-predictor-00001-private",
        "Revision.serving.knative.dev/llm/vllm-llm-predictor-00001",
    )
    assert KNATIVE_POD in finding.objects
    assert "0 ready and 2 not-ready addresses" in finding.summary
    assert "none is ready: the cause is in the pods" in finding.summary
    assert any("desiredScale 2" in line and "min-scale 1" in line for line in finding.evidence)
    assert any("CrashLoopBackOff, 7 restarts" in line for line in finding.evidence)


def test_raw_no_ready_pods() -> None:
    finding = only(_run(RAW, "checks/ISVC_NOT_READY/raw_minimum_replicas.yaml"), "ENDPOINTS_NONE_READY")
    assert finding.objects[0] == "Service/llm/vllm-llm-predictor"
    assert "1 predictor pods exist and none is ready" in finding.summary
    assert "Deployment/llm/vllm-llm-predictor: replicas 1, ready 0, available 0" in finding.evidence


def test_no_deployment_at_all_points_at_the_workload_never_created() -> None:
    """kserve/kserve#993: Knative stops at the image digest; no Deployment, no pod (issue #14)."""
    objects = load_case(
        SERVERLESS, "checks/RESOURCES_IMAGE_PULL_FAILED/serverless_digest_resolution.yaml", drop=(KNATIVE_POD,)
    )
    # Nothing below the Revision: no Deployment, PodAutoscaler, nor the SKS Services and their endpoints.
    below = ("Deployment", "ReplicaSet", "PodAutoscaler", "Endpoints", "EndpointSlice")
    without = [
        obj
        for obj in objects
        if obj["kind"] not in below
        and not (obj["kind"] == "Service" and obj["metadata"]["name"].startswith("vllm-llm-predictor-00001"))
    ]
    ksvc = next(obj for obj in without if obj["kind"] == "Service" and obj["apiVersion"] == "serving.knative.dev/v1")
    ksvc["status"]["traffic"] = [{"revisionName": "vllm-llm-predictor-00001", "percent": 100, "latestRevision": True}]
    finding = only(endpoints.run(evidence_of(without)), "ENDPOINTS_NONE_READY")
    assert "nor a Deployment to create one" in finding.summary
    assert "the Revision's" in finding.remediation


def test_ready_pods_missing_from_the_service_point_at_routing() -> None:
    finding = only(_run(RAW, "checks/PORT_MISMATCH/raw_named_target_port.yaml"), "ENDPOINTS_NONE_READY")
    assert "1 of 1 predictor pods are Ready" in finding.summary
    assert "routing is broken, not the pods" in finding.summary


def test_scale_to_zero_with_min_scale_one_is_an_outage() -> None:
    objects = load_case(SERVERLESS, "checks/healthy/serverless_scaled_to_zero.yaml", drop=(KNATIVE_POD,))
    revision = next(obj for obj in objects if obj["kind"] == "Revision")
    revision["metadata"]["annotations"]["autoscaling.knative.dev/min-scale"] = "1"
    finding = only(endpoints.run(evidence_of(objects)), "ENDPOINTS_NONE_READY")
    assert "No predictor pod exists: nothing is running to serve." in finding.summary  # its Deployment exists
    assert any("public Endpoints/llm/vllm-llm-predictor-00001: 1 ready" in line for line in finding.evidence)


# --- ENDPOINTS_SELECTOR_MISMATCH ------------------------------------------------------------------


def test_selector_that_matches_no_pod_and_its_patch() -> None:
    objects = load_case(RAW, "checks/ENDPOINTS_SELECTOR_MISMATCH/raw_user_service.yaml", drop=(KSERVE_INGRESS,))
    finding = only(endpoints.run(evidence_of(objects)), "ENDPOINTS_SELECTOR_MISMATCH")
    assert finding.level is Severity.CRITICAL
    assert finding.objects == ("Service/llm/vllm-llm-api", "Pod/llm/vllm-llm-predictor-6d5f8b7c9-q8w2e")
    assert "app=vllm-llm (pod has 'isvc.vllm-llm-predictor')" in finding.summary
    assert finding.patch is not None and finding.patch.target == "Service/llm/vllm-llm-api"
    assert yaml.safe_load(finding.patch.body) == {"spec": {"selector": {"app": "isvc.vllm-llm-predictor"}}}
    assert "kubectl patch services vllm-llm-api -n llm --type merge" in finding.remediation
    assert_valid_patch(finding, objects)
    fixed = endpoints.run(evidence_of(apply_patch(objects, finding)))
    assert "ENDPOINTS_SELECTOR_MISMATCH" not in codes(fixed)


def test_kserve_owned_service_with_foreign_selector_gets_no_patch() -> None:
    objects = load_case(RAW)
    service = next(obj for obj in objects if obj["kind"] == "Service")
    service["spec"]["selector"] = {"app": "isvc.vllm-llm-predictor-old"}
    finding = only(endpoints.run(evidence_of(objects)), "ENDPOINTS_SELECTOR_MISMATCH")
    assert finding.patch is None
    assert "generated by InferenceService/vllm-llm" in finding.remediation


# --- ROUTING_REVISION_NOT_READY -------------------------------------------------------------------


def test_failed_new_revision_quotes_its_reason() -> None:
    findings = _run(SERVERLESS, "checks/ROUTING_REVISION_NOT_READY/serverless_progress_deadline.yaml")
    finding = only(findings, "ROUTING_REVISION_NOT_READY")
    assert finding.level is Severity.CRITICAL
    assert finding.objects == (
        "Revision.serving.knative.dev/llm/vllm-llm-predictor-00002",
        "Service.serving.knative.dev/llm/vllm-llm-predictor",
        ISVC_REF,
    )
    assert "ProgressDeadlineExceeded" in finding.title
    assert "'Initial scale was never achieved'" in finding.summary
    assert "keeps traffic on the previous revision" in finding.summary
    # The old revision still serves: no endpoints finding.
    assert "ENDPOINTS_NONE_READY" not in codes(findings)


def test_revision_stuck_deploying_past_the_progress_deadline() -> None:
    finding = only(
        _run(SERVERLESS, "checks/ROUTING_REVISION_NOT_READY/serverless_stuck_deploying.yaml"),
        "ROUTING_REVISION_NOT_READY",
    )
    assert "10800 s after creation (progress deadline 600 s)" in finding.summary


def test_revision_still_inside_its_progress_deadline_is_fine() -> None:
    objects = load_case(SERVERLESS, "checks/ROUTING_REVISION_NOT_READY/serverless_stuck_deploying.yaml")
    revision = next(obj for obj in objects if obj["kind"] == "Revision")
    revision["metadata"]["creationTimestamp"] = "2026-01-15T11:58:00Z"  # two minutes before the capture
    assert "ROUTING_REVISION_NOT_READY" not in codes(endpoints.run(evidence_of(objects)))


STALE = "checks/ROUTING_REVISION_NOT_READY/serverless_container_healthy_stale.yaml"


def test_a_revision_failed_by_a_stale_condition_while_its_pods_serve_is_info() -> None:
    # knative/serving#15487 (1.14 to 1.16): ContainerHealthy=False stays after the container recovered, and the
    # Route and KServe copy it. Before: ROUTING_REVISION_NOT_READY and ISVC_NOT_READY critical on a revision whose pod
    # is ready behind its private Service; after: both info, saying the condition is stale.
    findings = _run(SERVERLESS, STALE)
    assert serious(findings) == []
    revision = only(findings, "ROUTING_REVISION_NOT_READY")
    assert (
        revision.title == "revision vllm-llm-predictor-00001 reports Ready=False (ExitCode137) while its pods are ready"
    )
    assert "knative/serving#15487" in revision.summary
    isvc = only(findings, "ISVC_NOT_READY")
    assert isvc.level is Severity.INFO
    assert "stale Knative one" in isvc.summary


def test_the_same_conditions_without_a_ready_pod_are_critical() -> None:
    objects = load_case(SERVERLESS, STALE)
    for obj in objects:
        if obj["kind"] == "EndpointSlice":
            obj["endpoints"][0]["conditions"]["ready"] = False
        if obj["kind"] == "Endpoints":
            obj["subsets"][0]["notReadyAddresses"] = obj["subsets"][0].pop("addresses")
    findings = endpoints.run(evidence_of(objects))
    assert only(findings, "ROUTING_REVISION_NOT_READY").level is Severity.CRITICAL
    assert only(findings, "ISVC_NOT_READY").level is Severity.CRITICAL


# --- ROUTING_LAYER_MISMATCH -----------------------------------------------------------------------


def test_serverless_without_knative() -> None:
    findings = _run(
        "checks/ROUTING_LAYER_MISMATCH/serverless_no_knative.yaml",
        reads=_missing("Service.serving.knative.dev in llm (serving.kserve.io/inferenceservice=vllm-llm)"),
    )
    assert codes(findings) == {"ROUTING_LAYER_MISMATCH", "ISVC_NOT_READY"}
    finding = only(findings, "ROUTING_LAYER_MISMATCH")
    assert finding.level is Severity.CRITICAL
    assert finding.objects == (ISVC_REF,)
    assert "the Knative Service CRD is not installed" in finding.summary
    assert any("ServerlessModeRejected" in line for line in finding.evidence)
    assert "ServerlessModeRejected" in only(findings, "ISVC_NOT_READY").title


def test_gateway_api_configured_but_not_installed() -> None:
    findings = _run(
        RAW,
        "checks/ROUTING_LAYER_MISMATCH/raw_gateway_api.yaml",
        drop=(KSERVE_INGRESS,),
        reads=_missing("HTTPRoute.gateway.networking.k8s.io in llm"),
    )
    finding = only(findings, "ROUTING_LAYER_MISMATCH")
    assert finding.title == "RawDeployment InferenceService needs a HTTPRoute, which is not installed"
    assert "enableGatewayApi is true" in finding.summary


def test_istio_virtual_service_not_created() -> None:
    objects = load_case(SERVERLESS, drop=(VIRTUAL_SERVICE,))
    isvc = next(obj for obj in objects if obj["kind"] == "InferenceService")
    # While KServe reports its ingress ready, a missing route is not held against it.
    assert "ROUTING_LAYER_MISMATCH" not in codes(endpoints.run(evidence_of(objects)))
    isvc["status"]["conditions"][0] = {
        "type": "IngressReady",
        "status": "False",
        "reason": "ReconcileIngressFailed",
        "message": "fails to reconcile virtual service",
    }
    findings = endpoints.run(evidence_of(objects))
    finding = only(findings, "ROUTING_LAYER_MISMATCH")
    assert finding.title == "Serverless InferenceService needs a VirtualService, which was not created"
    assert "no VirtualService vllm-llm exists in llm" in finding.summary
    assert "IngressReady=False (ReconcileIngressFailed)" in only(findings, "ISVC_NOT_READY").title


def test_route_missing_while_the_predictor_is_not_ready_is_an_effect() -> None:
    # Issue #14: KServe creates the Ingress / VirtualService only after the predictor is ready
    # (https://github.com/kserve/kserve/blob/master/pkg/controller/v1beta1/inferenceservice/reconcilers/ingress/
    # kube_ingress_reconciler.go, createRawIngress: IngressReady=False, "Predictor ingress not created"), yet
    # ROUTING_LAYER_MISMATCH came first. Before: ROUTING_LAYER_MISMATCH critical, ranked first; after: info.
    objects = load_case(RAW, drop=(KSERVE_INGRESS,))
    isvc = next(obj for obj in objects if obj["kind"] == "InferenceService")
    isvc["status"]["conditions"] = [
        {"type": "IngressReady", "status": "False", "reason": "Predictor ingress not created"},
        {"type": "PredictorReady", "status": "False", "reason": "MinimumReplicasUnavailable"},
        {"type": "Ready", "status": "False", "reason": "Predictor ingress not created"},
    ]
    finding = only(endpoints.run(evidence_of(objects)), "ROUTING_LAYER_MISMATCH")
    assert finding.level is Severity.INFO
    assert finding.title == "the Ingress will be created once the predictor is ready"
    assert "Predictor ingress not created" in finding.summary
    # The predictor ready and still no route: KServe's own ordering no longer explains it.
    isvc["status"]["conditions"][1] = {"type": "PredictorReady", "status": "True"}
    assert only(endpoints.run(evidence_of(objects)), "ROUTING_LAYER_MISMATCH").level is Severity.CRITICAL


def test_forbidden_routing_read_is_not_a_mismatch() -> None:
    reads = [{"what": "VirtualService.networking.istio.io in llm", "status": "forbidden", "reason": "RBAC"}]
    assert serious(_run(SERVERLESS, reads=reads)) == []


def test_raw_predictor_service_missing() -> None:
    finding = only(_run(RAW, drop=("Service/llm/vllm-llm-predictor",)), "ROUTING_LAYER_MISMATCH")
    assert "Service vllm-llm-predictor, which does not exist" in finding.summary


def test_route_on_a_missing_gateway() -> None:
    findings = _run(
        RAW,
        "checks/healthy/raw_gateway_api.yaml",
        drop=(KSERVE_INGRESS, "Gateway.gateway.networking.k8s.io/kserve/kserve-ingress-gateway"),
    )
    finding = only(findings, "ROUTING_LAYER_MISMATCH")
    assert "Gateway.gateway.networking.k8s.io/kserve/kserve-ingress-gateway, which does not exist" in finding.summary


# --- ROUTING_HOST_MISMATCH ------------------------------------------------------------------------


def test_route_for_another_host_and_its_patch() -> None:
    objects = load_case(RAW, "checks/ROUTING_HOST_MISMATCH/raw_user_ingress.yaml", drop=(KSERVE_INGRESS,))
    finding = only(endpoints.run(evidence_of(objects)), "ROUTING_HOST_MISMATCH")
    assert finding.level is Severity.CRITICAL
    assert finding.objects == ("Ingress/llm/vllm-llm-external", ISVC_REF)
    assert "vllm-llm-llm.example.com" in finding.summary and "vllm-llm.example.com" in finding.summary
    assert finding.patch is not None and finding.patch.target == "Ingress/llm/vllm-llm-external"
    rules = yaml.safe_load(finding.patch.body)["spec"]["rules"]
    assert [rule["host"] for rule in rules] == ["vllm-llm.example.com", "vllm-llm-llm.example.com"]
    assert "&id" not in finding.patch.body  # no YAML aliases in a patch body
    assert_valid_patch(finding, objects)
    fixed = endpoints.run(evidence_of(apply_patch(objects, finding)))
    assert "ROUTING_HOST_MISMATCH" not in codes(fixed)


def _nginx_2xx(rate: float) -> dict[str, dict[str, Any]]:
    step, samples, end = 15, 240, CAPTURED_AT.timestamp()
    values = [[end - step * (samples - i), str(rate)] for i in range(samples)]
    return {
        "nginx_requests_by_status": {
            "promql": catalog.render(catalog.BY_ID["nginx_requests_by_status"], 0, "llm", "vllm-llm", step),
            "result": [{"metric": {"status": "200"}, "values": values}],
        }
    }


def test_unused_url_host_is_info_when_the_predictor_serves_through_another_route() -> None:
    # Issue #14: with disableIngressCreation and a user-managed Ingress for another host (clients call it;
    # ingress-nginx counts thousands of 2xx to the predictor Service), ROUTING_HOST_MISMATCH for the unused
    # status.url host was the critical top cause of three incidents. The metrics contradict "requests get
    # 404": before, critical and ranked first; after, info naming the unused URL.
    objects = load_case(RAW, "checks/ROUTING_HOST_MISMATCH/raw_user_ingress.yaml", drop=(KSERVE_INGRESS,))
    finding = only(endpoints.run(evidence_of(objects, metrics=_nginx_2xx(6.0))), "ROUTING_HOST_MISMATCH")
    assert finding.level is Severity.INFO
    assert "vllm-llm-llm.example.com" in finding.title and "Ingress/llm/vllm-llm-external" in finding.title
    assert "ingress-nginx counted about 21600 2xx answers" in finding.summary
    # No 2xx in the window: nothing contradicts the mismatch, which stays critical.
    quiet = only(endpoints.run(evidence_of(objects, metrics=_nginx_2xx(0.0))), "ROUTING_HOST_MISMATCH")
    assert quiet.level is Severity.CRITICAL


def test_gateway_that_does_not_accept_the_url_host() -> None:
    finding = only(
        _run(SERVERLESS, "checks/ROUTING_HOST_MISMATCH/serverless_gateway_hosts.yaml"), "ROUTING_HOST_MISMATCH"
    )
    assert finding.objects[0] == "Gateway.networking.istio.io/knative-serving/knative-ingress-gateway"
    assert "*.models.internal.example.org" in finding.summary and "vllm-llm.llm.example.com" in finding.summary


def test_http_route_rejected_for_its_hostname() -> None:
    objects = load_case(RAW, "checks/healthy/raw_gateway_api.yaml", drop=(KSERVE_INGRESS,))
    route = next(obj for obj in objects if obj["kind"] == "HTTPRoute")
    route["status"]["parents"][0]["conditions"][0] = {
        "type": "Accepted",
        "status": "False",
        "reason": "NoMatchingListenerHostname",
        "message": "no matching hostnames",
    }
    finding = only(endpoints.run(evidence_of(objects)), "ROUTING_HOST_MISMATCH")
    assert "Accepted=False (NoMatchingListenerHostname): 'no matching hostnames'" in finding.summary


@pytest.mark.parametrize(
    ("pattern", "host", "expected"),
    [
        ("*", "a.example.com", True),
        ("*.example.com", "a.example.com", True),
        ("*.example.com", "example.com", False),
        ("knative-serving/*.example.com", "a.b.example.com", True),
        ("a.example.com", "A.example.com", False),
        ("a.example.com", "a.example.com", True),
    ],
)
def test_host_matching(pattern: str, host: str, expected: bool) -> None:
    assert common.host_matches(pattern, host.lower() if expected else host) is expected


# --- coverage ---------------------------------------------------------------------------------


def test_pods_forbidden_is_missing_evidence() -> None:
    reads = [
        {"what": "Pod in llm (serving.kserve.io/inferenceservice=vllm-llm)", "status": "forbidden", "reason": "RBAC"}
    ]
    with pytest.raises(EvidenceMissing, match="forbidden"):
        _run(RAW, reads=reads)


def test_knative_forbidden_is_missing_evidence() -> None:
    what = "Service.serving.knative.dev in llm (serving.kserve.io/inferenceservice=vllm-llm)"
    with pytest.raises(EvidenceMissing):
        _run(SERVERLESS, reads=[{"what": what, "status": "forbidden", "reason": "RBAC"}])


def test_modelmesh_is_skipped() -> None:
    objects = copy.deepcopy(load_case(RAW))
    isvc = next(obj for obj in objects if obj["kind"] == "InferenceService")
    isvc["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] = "ModelMesh"
    with pytest.raises(StepSkipped):
        endpoints.run(evidence_of(objects))
