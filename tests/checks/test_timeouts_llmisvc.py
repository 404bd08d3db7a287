"""The ``timeouts`` step on an LLMInferenceService (issue #18): the layers are the client and the service's own
HTTPRoutes on the Gateway (no Knative revision, no VirtualService). KServe's route preset sets
``timeouts.request`` and ``backendRequest`` to 0s (none) on every rule (config/llmisvcconfig/
config-llm-router-route.yaml); a route spec that drops them falls back to the Gateway implementation's default,
15 s on Envoy Gateway, which cut llm-d's long generations (llm-d-incubation/llm-d-modelservice PR #45,
modelplaneai/modelplane PR #174)."""

from __future__ import annotations

import copy
from typing import Any

from builders import evidence_from_objects
from check_cases import load_case, only, serious
from test_timeouts import STEP, _ramp, _series

from nbhelpers.checks import timeouts
from nbhelpers.evidence.model import LLM_INFERENCE_SERVICE
from nbhelpers.findings.catalog import Severity
from nbhelpers.metrics import catalog

HEALTHY = "checks/healthy/llmisvc.yaml"
ENVOY_DEFAULT = "checks/TIMEOUT_LB_DEFAULT/llmisvc_envoy_gateway_default.yaml"
ROUTE = "HTTPRoute.gateway.networking.k8s.io/llm/llama-llmd-kserve-route"


def _long_generations() -> dict[str, dict[str, Any]]:
    results = {
        "vllm_e2e_p99": [_series(_ramp(20.0, 60.0))],
        "vllm_queue_time_p95": [_series(_ramp(0.2, 1.0))],
        "vllm_ttft_p95": [_series(_ramp(0.3, 1.2))],
    }
    return {
        query_id: {
            "promql": catalog.render(catalog.BY_ID[query_id], 0, "llm", "llama-llmd", STEP, llmisvc=True),
            "result": result,
        }
        for query_id, result in results.items()
    }


def _run(objects: list[dict[str, Any]]):  # type: ignore[no-untyped-def]
    evidence = evidence_from_objects(
        copy.deepcopy(objects), "llm", "llama-llmd", target_kind=LLM_INFERENCE_SERVICE, metrics=_long_generations()
    )
    return timeouts.run(evidence)


def _with_preset_timeouts(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for obj in objects:
        if obj["kind"] == "HTTPRoute":
            for rule in obj["spec"]["rules"]:
                rule["timeouts"] = {"request": "0s", "backendRequest": "0s"}
    return objects


def test_the_healthy_service_on_istio_has_no_timeout_finding() -> None:
    assert serious(_run(load_case(HEALTHY))) == []


def test_the_presets_zero_timeouts_keep_envoy_gateways_default_away() -> None:
    assert serious(_run(_with_preset_timeouts(load_case(HEALTHY, ENVOY_DEFAULT)))) == []


def test_a_route_without_timeouts_on_envoy_gateway_cuts_long_generations_at_15_s() -> None:
    finding = only(_run(load_case(HEALTHY, ENVOY_DEFAULT)), "TIMEOUT_LB_DEFAULT")
    assert finding.level is Severity.WARNING  # Envoy Gateway's 504s are not in Prometheus: inferred
    assert ROUTE in finding.objects
    assert "15 s" in finding.title
    assert finding.patch is None
    assert "spec.router.route.http.spec" in finding.remediation
    assert "spec.predictor.timeout" not in finding.remediation
