"""The schema check that patch tests rely on: fixture objects pass as they are, and unknown fields, wrong types
and misplaced patches fail with the bad field path in the message."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import patchcheck
import pytest
import yaml
from builders import FIXTURES, load_yaml
from checks.check_cases import assert_valid_patch

from nbhelpers.findings.model import Finding, Fix, Patch
from nbhelpers.sources.kube import KubeObject

RAW = "checks/healthy/raw.yaml"
SERVERLESS = "checks/healthy/serverless.yaml"
GATEWAY_API = "checks/healthy/raw_gateway_api.yaml"
ISVC_REF = "InferenceService.serving.kserve.io/llm/vllm-llm"
# The kinds patches target or embed; the valid-fixture test must have seen each of them.
KINDS_THAT_MUST_BE_COVERED = {
    "InferenceService",
    "ServingRuntime",
    "ClusterServingRuntime",
    "Service",
    "Ingress",
    "HorizontalPodAutoscaler",
    "Deployment",
    "Pod",
    "VirtualService",
    "HTTPRoute",
}
VALID_FIXTURE_FILES = sorted(
    [*(FIXTURES / "checks" / "healthy").glob("*.yaml"), *(FIXTURES / "cluster").rglob("*.yaml")]
)


def _objects_of(path: Path) -> list[KubeObject]:
    objects: list[KubeObject] = []
    for document in yaml.safe_load_all(path.read_text()):
        if document:
            objects.extend(document["items"] if document.get("kind") == "List" else [document])
    return objects


def _has_schema(obj: KubeObject) -> bool:
    try:
        patchcheck.schema_errors(obj)
    except patchcheck.NoSchema:  # Knative, Istio and Gateway API gateways
        return False
    return True


def _object(files: tuple[str, ...], kind: str, api_version: str | None = None) -> KubeObject:
    return copy.deepcopy(
        next(
            obj
            for obj in load_yaml(*files)
            if obj["kind"] == kind and (api_version is None or obj["apiVersion"] == api_version)
        )
    )


def _set(obj: KubeObject, path: str, value: Any) -> KubeObject:
    """``obj`` with ``value`` written at a dotted path (``spec.ports.0.port``); missing maps are created."""
    *parents, last = path.split(".")
    node: Any = obj
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return obj


# --- fixtures pass as they are ------------------------------------------------------------------


@pytest.mark.parametrize("path", VALID_FIXTURE_FILES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_objects_are_valid_for_their_kind(path: Path) -> None:
    for obj in _objects_of(path):
        if _has_schema(obj):
            patchcheck.assert_valid_object(obj)


def test_fixture_files_cover_every_kind_a_patch_touches() -> None:
    covered = {obj["kind"] for path in VALID_FIXTURE_FILES for obj in _objects_of(path) if _has_schema(obj)}
    assert covered >= KINDS_THAT_MUST_BE_COVERED


# --- unknown fields fail at every depth ---------------------------------------------------------

SERVERLESS_MODEL = "spec.predictor.model"
RAW_CONTAINER = "spec.predictor.containers.0"


@pytest.mark.parametrize(
    ("files", "kind", "path", "value", "expected"),
    [
        ((SERVERLESS,), "InferenceService", f"{SERVERLESS_MODEL}.argz", ["--port=8080"], f"{SERVERLESS_MODEL}.argz"),
        (
            (SERVERLESS,),
            "InferenceService",
            f"{SERVERLESS_MODEL}.startupProbe",
            {"httpGet": {"path": "/health", "port": 8080}, "periodSecond": 10},
            f"{SERVERLESS_MODEL}.startupProbe.periodSecond",
        ),
        (
            (SERVERLESS,),
            "InferenceService",
            f"{SERVERLESS_MODEL}.resources",
            {"limit": {"nvidia.com/gpu": "1"}},
            f"{SERVERLESS_MODEL}.resources.limit",
        ),
        ((SERVERLESS,), "InferenceService", f"{SERVERLESS_MODEL}.modelFormat.vers", "1", "modelFormat.vers"),
        ((SERVERLESS,), "InferenceService", "spec.predictor.minReplica", 2, "spec.predictor.minReplica"),
        ((SERVERLESS,), "InferenceService", "spec.predictor.logger.modes", "all", "spec.predictor.logger.modes"),
        ((SERVERLESS,), "InferenceService", "spec.predictors", {}, "spec.predictors"),
        ((SERVERLESS,), "InferenceService", "metadata.label", {"a": "b"}, "metadata.label"),
        (
            (RAW,),
            "InferenceService",
            f"{RAW_CONTAINER}.readinessProbe.httpGet.prot",
            8080,
            "spec.predictor.containers[0].readinessProbe.httpGet.prot",
        ),
        (
            (SERVERLESS,),
            "ServingRuntime",
            "spec.containers.0.volumeMount",
            [],
            "spec.containers[0].volumeMount",
        ),
        ((SERVERLESS,), "ServingRuntime", "spec.supportedModelFormats.0.auto", True, "supportedModelFormats[0].auto"),
        ((RAW,), "Service", "spec.ports.0.targetPorts", 8080, "spec.ports[0].targetPorts"),
        ((RAW,), "Ingress", "spec.rules.0.hosts", ["a.example.com"], "spec.rules[0].hosts"),
        ((RAW,), "Deployment", "spec.template.spec.containers.0.livenesProbe", {}, "livenesProbe"),
        (("cluster/raw/vllm-raw.yaml",), "HorizontalPodAutoscaler", "spec.behaviour", {}, "spec.behaviour"),
        ((SERVERLESS,), "VirtualService", "spec.http.0.timeOut", "300s", "spec.http[0].timeOut"),
        (
            (SERVERLESS,),
            "VirtualService",
            "spec.http.0.route.0.destination.port",
            {"numbr": 80},
            "spec.http[0].route[0].destination.port.numbr",
        ),
        ((RAW, GATEWAY_API), "HTTPRoute", "spec.rules.0.timeouts.requests", "300s", "spec.rules[0].timeouts.requests"),
        ((RAW, GATEWAY_API), "HTTPRoute", "spec.rules.0.backendRefs.0.prot", 80, "spec.rules[0].backendRefs[0].prot"),
    ],
)
def test_unknown_field_is_rejected_with_its_path(
    files: tuple[str, ...], kind: str, path: str, value: Any, expected: str
) -> None:
    obj = _set(_object(files, kind), path, value)
    with pytest.raises(patchcheck.SchemaViolation) as raised:
        patchcheck.assert_valid_object(obj)
    assert f"{expected}: unknown field" in str(raised.value)


@pytest.mark.parametrize(
    ("files", "kind", "path", "value", "expected"),
    [
        (
            (SERVERLESS,),
            "InferenceService",
            f"{SERVERLESS_MODEL}.readinessProbe",
            {"httpGet": {"port": 8080}, "periodSeconds": "10"},
            f"{SERVERLESS_MODEL}.readinessProbe.periodSeconds: '10' is not of type",
        ),
        ((SERVERLESS,), "InferenceService", f"{SERVERLESS_MODEL}.args", "--port=8080", f"{SERVERLESS_MODEL}.args:"),
        ((SERVERLESS,), "InferenceService", "spec.predictor.minReplicas", "1", "spec.predictor.minReplicas:"),
        ((SERVERLESS,), "InferenceService", "spec.predictor.scaleMetric", "gpu", "spec.predictor.scaleMetric:"),
        ((RAW,), "Service", "spec.ports.0.port", "80", "spec.ports[0].port: '80' is not of type 'integer'"),
        ((RAW,), "Service", "spec.ports.0.targetPort", True, "spec.ports[0].targetPort:"),
        ((SERVERLESS,), "VirtualService", "spec.http.0.timeout", 300, "spec.http[0].timeout: 300 is not of type"),
        ((RAW, GATEWAY_API), "HTTPRoute", "spec.rules.0.timeouts.request", "5 min", "spec.rules[0].timeouts.request:"),
    ],
)
def test_wrong_type_is_rejected_with_its_path(
    files: tuple[str, ...], kind: str, path: str, value: Any, expected: str
) -> None:
    obj = _set(_object(files, kind), path, value)
    with pytest.raises(patchcheck.SchemaViolation, match="is not a valid") as raised:
        patchcheck.assert_valid_object(obj)
    assert expected in str(raised.value)


def test_model_takes_container_fields_without_a_name_but_custom_containers_need_one() -> None:
    """The container fields are inlined into ``model`` (name optional); ``containers[]`` are full Containers."""
    serverless = _set(
        _object((SERVERLESS,), "InferenceService"), f"{SERVERLESS_MODEL}.env", [{"name": "A", "value": "b"}]
    )
    assert patchcheck.schema_errors(serverless) == []
    raw = _object((RAW,), "InferenceService")
    raw["spec"]["predictor"]["containers"][0].pop("name")
    assert patchcheck.schema_errors(raw) == ["spec.predictor.containers[0]: 'name' is a required property"]


def test_model_needs_its_model_format() -> None:
    isvc = _object((SERVERLESS,), "InferenceService")
    del isvc["spec"]["predictor"]["model"]["modelFormat"]
    assert patchcheck.schema_errors(isvc) == [f"{SERVERLESS_MODEL}: 'modelFormat' is a required property"]


def test_status_is_not_checked() -> None:
    """Status is a subresource a merge patch cannot change; fixtures abbreviate it."""
    pod = _set(_object((RAW,), "Pod"), "status.containerStatuses", [{"name": "kserve-container", "extra": 1}])
    assert patchcheck.schema_errors(pod) == []


def _scaled_object(**spec: Any) -> KubeObject:
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": "vllm-llm", "namespace": "llm"},
        "spec": {
            "scaleTargetRef": {"name": "vllm-llm-predictor"},
            "minReplicaCount": 1,
            "maxReplicaCount": 4,
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": {"scaleUp": {"stabilizationWindowSeconds": 0}}}},
            "triggers": [
                {
                    "type": "prometheus",
                    "metadata": {"serverAddress": "http://prometheus:9090", "query": "sum(x)", "threshold": "5"},
                }
            ],
            **spec,
        },
    }


def test_scaled_object_schema_is_strict_down_to_the_embedded_hpa_behavior() -> None:
    assert patchcheck.schema_errors(_scaled_object()) == []
    assert patchcheck.schema_errors(_scaled_object(cooldownPeriods=300)) == ["spec.cooldownPeriods: unknown field"]
    behavior = {"horizontalPodAutoscalerConfig": {"behavior": {"scaleUp": {"stabilisationWindowSeconds": 0}}}}
    assert patchcheck.schema_errors(_scaled_object(advanced=behavior)) == [
        "spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleUp.stabilisationWindowSeconds: unknown field"
    ]


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [
        ("serving.knative.dev/v1", "Service"),
        ("networking.istio.io/v1beta1", "DestinationRule"),
        ("gateway.networking.k8s.io/v1", "Gateway"),
        ("apps/v1", "Widget"),
    ],
)
def test_kind_without_a_schema_fails_instead_of_passing(api_version: str, kind: str) -> None:
    with pytest.raises(patchcheck.NoSchema, match=f"no schema for {kind}"):
        patchcheck.schema_errors({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}, "spec": {}})


def test_field_path_formats_indices() -> None:
    assert patchcheck.field_path(["spec", "ports", 0, "targetPort"]) == "spec.ports[0].targetPort"
    assert patchcheck.field_path([]) == ""


# --- assert_valid_patch ---------------------------------------------------------------------------


def _finding(target: str, body: Any, patch_type: str = "merge") -> Finding:
    text = body if isinstance(body, str) else yaml.safe_dump(body)
    return Finding(
        code="PORT_MISMATCH", title="t", summary="s", fix=Fix(what="", patch=Patch(target, text, patch_type))
    )


def test_valid_patch_returns_the_merged_target() -> None:
    objects = load_yaml(SERVERLESS)
    body = {"spec": {"predictor": {"model": {"args": ["--port=8080"], "runtime": None}}}}
    patched = assert_valid_patch(_finding(ISVC_REF, body), objects)
    assert patched["spec"]["predictor"]["model"]["args"] == ["--port=8080"]
    assert "runtime" not in patched["spec"]["predictor"]["model"]  # null removes a field (RFC 7386)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"spec": {"predictor": {"model": {"argz": ["--port=8080"]}}}}, r"spec\.predictor\.model\.argz: unknown field"),
        ({"spec": {"predictor": {"model": {"modelFormat": None}}}}, "'modelFormat' is a required property"),
        ({"spec": {"predictor": {"minReplicas": "1"}}}, r"spec\.predictor\.minReplicas: '1' is not of type"),
    ],
)
def test_patch_that_leaves_an_invalid_object_fails(body: dict[str, Any], message: str) -> None:
    with pytest.raises(patchcheck.SchemaViolation, match=message) as raised:
        assert_valid_patch(_finding(ISVC_REF, body), load_yaml(SERVERLESS))
    assert f"{ISVC_REF} after the PORT_MISMATCH patch" in str(raised.value)


@pytest.mark.parametrize(
    ("patch_type", "body", "message"),
    [
        ("strategic", {"spec": {"predictor": {"minReplicas": 2}}}, "JSON merge patches"),
        ("merge", "- a list\n", "not a non-empty YAML mapping"),
        ("merge", "{}", "not a non-empty YAML mapping"),
        ("merge", {"status": {"url": "x"}}, "cannot change status"),
    ],
)
def test_patch_of_the_wrong_form_fails(patch_type: str, body: Any, message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        assert_valid_patch(_finding(ISVC_REF, body, patch_type), load_yaml(SERVERLESS))


def test_patch_on_an_object_a_controller_owns_fails() -> None:
    """raw.yaml's predictor Service belongs to the InferenceService: KServe would revert a direct patch."""
    body = {"spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8000}]}}
    with pytest.raises(AssertionError, match="InferenceService/vllm-llm owns"):
        assert_valid_patch(_finding("Service/llm/vllm-llm-predictor", body), load_yaml(RAW))


def test_patch_on_a_missing_target_fails() -> None:
    with pytest.raises(AssertionError, match="is not in the fixture"):
        assert_valid_patch(_finding("Service/llm/nope", {"spec": {"selector": {"a": "b"}}}), load_yaml(RAW))
