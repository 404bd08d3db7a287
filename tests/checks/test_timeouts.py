"""The ``timeouts`` step: failing fixtures per code, healthy fixtures that stay quiet, and patches that fix.

Objects come from YAML fixtures; metrics are written here as the catalog's exact PromQL with realistic series,
so that the bundle source serves them as a capture would.
"""

from __future__ import annotations

import copy
import dataclasses
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import yaml
from builders import CAPTURED_AT
from check_cases import apply_patch, codes, evidence_of, json_merge_patch, load_case, only, serious

from nbhelpers.checks import timeouts
from nbhelpers.errors import EvidenceMissing, StepSkipped
from nbhelpers.evidence.model import SiteConfig
from nbhelpers.facts import cold_starts, timeout_layers, traffic
from nbhelpers.facts import timeout_path as chain
from nbhelpers.findings.catalog import Severity
from nbhelpers.metrics import catalog
from nbhelpers.util.times import duration_seconds

ISVC_REF = "InferenceService.serving.kserve.io/llm/vllm-llm"
REVISION_REF = "Revision.serving.knative.dev/llm/vllm-llm-predictor-00001"
STEP = 15
END = CAPTURED_AT.timestamp()

RAW = "checks/healthy/raw.yaml"
SERVERLESS = "checks/healthy/serverless.yaml"


# --- metrics as a capture records them -------------------------------------------------------------


def _series(values: Sequence[float], **labels: str) -> dict[str, Any]:
    """A matrix entry whose last sample lies one step before the end of the window."""
    start = END - STEP * len(values)
    return {"metric": labels, "values": [[start + STEP * i, str(v)] for i, v in enumerate(values)]}


def _metrics(**results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        query_id: {"promql": catalog.render(catalog.BY_ID[query_id], 0, "llm", "vllm-llm", STEP), "result": result}
        for query_id, result in results.items()
    }


def _ramp(low: float, high: float, count: int = 40) -> list[float]:
    return [round(low + (high - low) * i / (count - 1), 2) for i in range(count)]


def _long_generations(
    peak: float = 95.0, *, nginx_504_rate: float = 0.0, knative_504_rate: float = 0.0
) -> dict[str, dict[str, Any]]:
    """Long non-streamed generations: p99 rising to ``peak`` s, a short queue, the first token within 2 s."""
    results: dict[str, list[dict[str, Any]]] = {
        "vllm_e2e_p99": [_series(_ramp(20.0, peak))],
        "vllm_queue_time_p95": [_series(_ramp(0.2, 1.5))],
        "vllm_ttft_p95": [_series(_ramp(0.4, 1.8))],
    }
    if nginx_504_rate:
        results["nginx_requests_by_status"] = [
            _series([2.0] * 40, status="200"),
            _series([0.0] * 10 + [nginx_504_rate] * 30, status="504"),
        ]
    if knative_504_rate:
        results["knative_requests_by_code"] = [
            _series([2.0] * 40, response_code="200"),
            _series([0.0] * 20 + [knative_504_rate] * 20, response_code="504"),
        ]
    return _metrics(**results)


def _streamed_long_generations(
    peak: float = 150.0, *, ttft: tuple[float, float] = (0.3, 0.9), nginx_504_rate: float = 0.0
) -> dict[str, dict[str, Any]]:
    """Long streamed generations behind ingress-nginx: p99 rising to ``peak`` s, a quick first token, and nginx
    counting 3 requests/s, with ``nginx_504_rate`` of its own 504s."""
    nginx = [_series([3.0] * 40, status="200")]
    if nginx_504_rate:
        nginx.append(_series([0.0] * 10 + [nginx_504_rate] * 30, status="504"))
    return _metrics(
        vllm_e2e_p99=[_series(_ramp(30.0, peak))],
        vllm_queue_time_p95=[_series(_ramp(0.1, 0.6))],
        vllm_ttft_p95=[_series(_ramp(*ttft))],
        nginx_requests_by_status=nginx,
    )


def _busy_but_healthy(edge: str) -> dict[str, dict[str, Any]]:
    """Heavy traffic that the service handles: p99 under 25 s, queue p95 under a second, 2xx only."""
    results: dict[str, list[dict[str, Any]]] = {
        "vllm_e2e_p99": [_series(_ramp(12.0, 24.5))],
        "vllm_queue_time_p95": [_series(_ramp(0.1, 0.8))],
        "vllm_ttft_p95": [_series(_ramp(0.3, 0.9))],
        "vllm_running": [_series([48.0] * 40, pod="vllm-llm-predictor-6d5f8b7c9-q8w2e")],
        "vllm_waiting": [_series([1.0] * 40, pod="vllm-llm-predictor-6d5f8b7c9-q8w2e")],
    }
    if edge == "nginx":
        results["nginx_requests_by_status"] = [_series([9.5] * 40, status="200")]
    else:
        results["istio_requests_by_code"] = [_series([9.5] * 40, response_code="200", response_flags="-")]
        results["knative_requests_by_code"] = [_series([9.5] * 40, response_code="200")]
    return _metrics(**results)


# --- helpers ---------------------------------------------------------------------------------------


def _run(objects: list[dict[str, Any]], metrics: Mapping[str, Any] | None = None) -> list:
    return timeouts.run(evidence_of(objects, metrics=dict(metrics) if metrics else None))


def _timeout_codes(objects: list[dict[str, Any]], metrics: Mapping[str, Any] | None = None) -> set[str]:
    return codes(serious(_run(objects, metrics)))


def _patch_body(finding) -> dict[str, Any]:
    assert finding.patch is not None
    body = yaml.safe_load(finding.patch.body)
    assert isinstance(body, dict)
    return body


def _rollback_body(remediation: str) -> dict[str, Any]:
    words = shlex.split(remediation.split("Roll back:\n", 1)[1].strip())
    return yaml.safe_load(words[words.index("-p") + 1])


def _kserve_reconciles(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What KServe (and Knative) do after an InferenceService change that matters here: the predictor timeout
    becomes the new revision's timeoutSeconds and the request timeout of KServe's HTTPRoute, and the
    InferenceService's annotations are copied onto the Ingress KServe generates."""
    isvc = next(obj for obj in objects if obj["kind"] == "InferenceService")
    timeout = isvc["spec"]["predictor"].get("timeout")
    result = []
    for obj in copy.deepcopy(objects):
        owned = any(o.get("kind") == "InferenceService" for o in obj["metadata"].get("ownerReferences") or [])
        if obj["kind"] == "Revision" and timeout is not None:
            obj.setdefault("spec", {})["timeoutSeconds"] = timeout
        if obj["kind"] == "HTTPRoute" and owned and timeout is not None:
            for rule in obj["spec"]["rules"]:
                rule["timeouts"] = {"request": f"{timeout}s"}
        if obj["kind"] == "Ingress" and owned:
            obj["metadata"]["annotations"] = dict(isvc["metadata"].get("annotations") or {})
        result.append(obj)
    return result


def _own_by_isvc(obj: dict[str, Any]) -> None:
    obj["metadata"]["ownerReferences"] = [
        {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "name": "vllm-llm", "uid": "x"}
    ]


# --- TIMEOUT_LB_DEFAULT ----------------------------------------------------------------------------


def test_nginx_default_below_long_generations_with_504s_is_critical() -> None:
    objects = load_case(RAW, "checks/TIMEOUT_LB_DEFAULT/raw_nginx_default.yaml")
    metrics = _long_generations(nginx_504_rate=0.2)
    finding = only(_run(objects, metrics), "TIMEOUT_LB_DEFAULT")
    assert finding.level is Severity.CRITICAL
    assert finding.objects == (ISVC_REF, "Ingress/llm/vllm-llm-external")
    assert finding.title == "ingress-nginx proxy-read-timeout 60 s (default) is below the long requests (95 s p99)"
    assert "left at its default of 60 s" in finding.summary
    # 30 samples at 0.2/s, 15 s apart: 90 cut requests, none reported behind nginx.
    assert "Raised to critical: ≈90 504s in the window are attributed to this layer." in finding.summary
    assert (
        "chain: Istio ingress none (default) | ingress-nginx proxy-read-timeout 60 s (default) → server"
        in finding.evidence
    )
    assert "attribution: ≈90 504s at ingress-nginx, none reported by the layers behind it" in finding.evidence
    assert "504s in the window: ingress-nginx ≈90; Istio with flag UT no metric" in " ".join(finding.evidence)
    streaming = next(line for line in finding.evidence if line.startswith("streaming:"))
    assert "most likely not streamed" in streaming
    assert finding.patch is not None and finding.patch.target == "Ingress/llm/vllm-llm-external"
    # p99 95 s × 1.5 = 142.5, rounded up to 150 s; the existing annotation is kept (merge patch).
    assert _patch_body(finding) == {
        "metadata": {
            "annotations": {
                "nginx.ingress.kubernetes.io/proxy-read-timeout": "150",
                "nginx.ingress.kubernetes.io/proxy-send-timeout": "150",
            }
        }
    }
    assert "kubectl patch ingresses.networking.k8s.io vllm-llm-external -n llm --type merge" in finding.remediation
    assert _timeout_codes(apply_patch(objects, finding), metrics) == set()


def test_nginx_default_without_504_metrics_stays_a_warning() -> None:
    objects = load_case(RAW, "checks/TIMEOUT_LB_DEFAULT/raw_nginx_default.yaml")
    finding = only(_run(objects, _long_generations()), "TIMEOUT_LB_DEFAULT")
    assert finding.level is Severity.WARNING
    assert "Raised to critical" not in finding.summary
    # No count at this layer: a risk, worded as one, never "are cut".
    assert "would be cut by this layer with a 504" in finding.summary
    assert "are cut" not in finding.summary
    assert "ingress-nginx's request counts are not available: a risk, not a measured cut." in finding.summary


def test_nginx_504s_are_worded_as_cut_responses_silent_for_its_value() -> None:
    """proxy_read_timeout bounds the silence between two reads (nginx docs): the summary says what it cuts."""
    objects = load_case(RAW, "checks/TIMEOUT_LB_DEFAULT/raw_nginx_default.yaml")
    finding = only(_run(objects, _long_generations(nginx_504_rate=0.2)), "TIMEOUT_LB_DEFAULT")
    assert "so responses silent for 60 s (a non-streamed one until its last token" in finding.summary
    assert "are cut by this layer with a 504" in finding.summary


def test_streamed_long_generations_through_a_default_nginx_are_a_risk_not_a_cause() -> None:
    """Requests run 150 s at p99 and nginx counts none of its own 504s, with the first token within a second:
    the long requests passed its 60 s idle timeout streamed. Before the fix this was a warning saying requests
    "are cut with a 504", a cause of errors that the window does not show (BerriAI/litellm issue #9551)."""
    objects = load_case(RAW, "checks/healthy/timeouts_streaming_nginx.yaml")
    findings = _run(objects, _streamed_long_generations())
    assert serious(findings) == []
    finding = only(findings, "TIMEOUT_LB_DEFAULT")
    assert finding.level is Severity.INFO
    assert finding.title == (
        "ingress-nginx proxy-read-timeout 60 s (default): long requests (150 s p99) pass it streamed, "
        "non-streamed ones would be cut"
    )
    assert "bounds the silence between two reads from the server, not the whole response" in finding.summary
    assert "counted none of its own 504s among ≈1800 requests" in finding.summary
    assert "not a cause of this window's errors" in finding.summary
    assert "are cut" not in finding.summary
    streaming = next(line for line in finding.evidence if line.startswith("streaming:"))
    assert streaming.endswith("the long requests were streamed.")
    # The fix is still offered, for the non-streamed clients to come.
    assert finding.patch is not None and finding.patch.target == "Ingress/llm/vllm-llm-chat"


def test_streamed_requests_with_nginx_504s_stay_critical() -> None:
    objects = load_case(RAW, "checks/healthy/timeouts_streaming_nginx.yaml")
    finding = only(_run(objects, _streamed_long_generations(nginx_504_rate=0.2)), "TIMEOUT_LB_DEFAULT")
    assert finding.level is Severity.CRITICAL


def test_nginx_without_any_counted_request_is_no_proof_of_streaming() -> None:
    """An empty nginx answer (the ingress's metrics not scraped, or another path) proves nothing passed it."""
    objects = load_case(RAW, "checks/healthy/timeouts_streaming_nginx.yaml")
    metrics = _streamed_long_generations()
    metrics["nginx_requests_by_status"]["result"] = []
    assert only(_run(objects, metrics), "TIMEOUT_LB_DEFAULT").level is Severity.WARNING


def test_first_token_past_the_nginx_default_cuts_streams_too() -> None:
    """A stream is silent until its first token: a first token past 60 s is cut however the response is sent
    (onyx-dot-app/onyx PR #10247). No 504 counted: a warning about that risk, not information."""
    objects = load_case(RAW, "checks/TIMEOUT_LB_DEFAULT/raw_nginx_default_slow_first_token.yaml")
    finding = only(_run(objects, _streamed_long_generations(ttft=(20.0, 70.0))), "TIMEOUT_LB_DEFAULT")
    assert finding.level is Severity.WARNING
    assert "a stream before its first token or between two tokens" in finding.summary
    assert "No 504 of this layer is counted in the window: a risk, not a measured cut." in finding.summary
    streaming = next(line for line in finding.evidence if line.startswith("streaming:"))
    assert "streaming would not avoid the cut" in streaming
    cut = only(_run(objects, _streamed_long_generations(ttft=(20.0, 70.0), nginx_504_rate=0.2)), "TIMEOUT_LB_DEFAULT")
    assert cut.level is Severity.CRITICAL
    # p99 150 s × 1.5 = 225 s, rounded up to 240 s: above the longest first token too.
    assert _patch_body(cut)["metadata"]["annotations"]["nginx.ingress.kubernetes.io/proxy-read-timeout"] == "240"


def test_latency_flattening_at_the_nginx_default_is_attributed_by_its_timing() -> None:
    objects = load_case(RAW, "checks/TIMEOUT_LB_DEFAULT/raw_nginx_default.yaml")
    flattened = _metrics(vllm_e2e_p99=[_series([*_ramp(20.0, 55.0, 30), 58.9, 60.4, 59.6, 60.1, 59.8])])
    finding = only(_run(objects, flattened), "TIMEOUT_LB_DEFAULT")
    assert finding.level is Severity.WARNING  # timing alone is no measured 504
    assert "attribution: the p99 latency flattens at 60 s, this layer's value" in finding.evidence


def test_kserve_generated_nginx_ingress_is_fixed_through_the_isvc_annotations() -> None:
    objects = load_case(RAW, "checks/TIMEOUT_LB_DEFAULT/raw_nginx_default.yaml")
    ingress = next(obj for obj in objects if obj["metadata"]["name"] == "vllm-llm-external")
    _own_by_isvc(ingress)
    metrics = _long_generations(nginx_504_rate=0.2)
    finding = only(_run(objects, metrics), "TIMEOUT_LB_DEFAULT")
    assert finding.patch is not None and finding.patch.target == ISVC_REF
    annotations = _patch_body(finding)["metadata"]["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"] == "150"
    assert "copies the InferenceService's annotations" in finding.remediation
    assert _timeout_codes(_kserve_reconciles(apply_patch(objects, finding)), metrics) == set()


def test_alb_idle_default_is_inferred_from_latency() -> None:
    objects = load_case(RAW, "checks/TIMEOUT_LB_DEFAULT/raw_alb_idle_default.yaml")
    metrics = _long_generations()
    finding = only(_run(objects, metrics), "TIMEOUT_LB_DEFAULT")
    assert finding.level is Severity.WARNING  # its 504s cannot be counted, so it is never raised
    assert finding.objects == (ISVC_REF, "Ingress/llm/vllm-llm-alb")
    assert "AWS ALB idle timeout" in finding.title and "60 s" in finding.title
    assert "inferred: this layer's own 504s are not in Prometheus" in finding.summary
    assert (
        "AWS ALB idle timeout on Ingress/llm/vllm-llm-alb: 60 s idle (default 60 s: no "
        "idle_timeout.timeout_seconds in alb.ingress.kubernetes.io/load-balancer-attributes)" in finding.evidence
    )
    # The other attributes of the annotation are kept.
    assert _patch_body(finding) == {
        "metadata": {
            "annotations": {
                "alb.ingress.kubernetes.io/load-balancer-attributes": (
                    "routing.http2.enabled=true,idle_timeout.timeout_seconds=150"
                )
            }
        }
    }
    assert _timeout_codes(apply_patch(objects, finding), metrics) == set()


def test_kserve_httproute_default_below_long_generations_patches_the_isvc_timeout() -> None:
    objects = load_case(RAW, "checks/healthy/raw_gateway_api.yaml", drop=("Ingress/llm/vllm-llm",))
    metrics = _long_generations()
    finding = only(_run(objects, metrics), "TIMEOUT_LB_DEFAULT")
    assert finding.level is Severity.WARNING
    assert finding.objects == (ISVC_REF, "HTTPRoute.gateway.networking.k8s.io/llm/vllm-llm")
    assert "KServe's default for the HTTPRoutes it generates" in finding.summary
    assert _patch_body(finding) == {"spec": {"predictor": {"timeout": 150}}}
    patched = _kserve_reconciles(apply_patch(objects, finding))
    assert _timeout_codes(patched, metrics) == set()


def test_a_latent_default_in_front_of_a_longer_revision_is_information_only() -> None:
    objects = load_case(SERVERLESS, "checks/healthy/timeouts_serverless_defaults.yaml")
    objects += load_case("checks/TIMEOUT_LB_DEFAULT/raw_nginx_default.yaml")
    findings = _run(objects, _busy_but_healthy("istio"))
    finding = only(findings, "TIMEOUT_LB_DEFAULT")
    assert finding.level is Severity.INFO
    assert "Knative revision timeoutSeconds 300 s" in finding.summary
    assert serious(findings) == []


# --- TIMEOUT_MISALIGNED ----------------------------------------------------------------------------


def test_virtualservice_gives_up_before_the_revision() -> None:
    objects = load_case(SERVERLESS, "checks/TIMEOUT_MISALIGNED/serverless_virtualservice_short.yaml")
    finding = only(_run(objects), "TIMEOUT_MISALIGNED")  # no Prometheus: the chain alone shows it
    assert finding.level is Severity.WARNING
    assert finding.objects == (ISVC_REF, "VirtualService.networking.istio.io/llm/vllm-llm-edge", REVISION_REF)
    assert finding.title == "VirtualService route 30 s gives up before Knative revision timeoutSeconds 300 s"
    assert "set to 30 s (spec.http[0].timeout)" in finding.summary
    chain_line = next(line for line in finding.evidence if line.startswith("chain: "))
    assert chain_line == (
        "chain: VirtualService route none (default) | VirtualService route 30 s → "
        "Knative revision timeoutSeconds 300 s (default) → server"
    )
    assert "end-to-end latency (vllm_e2e_p99): no Prometheus data; timeouts compared with each other only" in (
        finding.evidence
    )
    body = _patch_body(finding)
    (route,) = body["spec"]["http"]  # the whole list, with the route's other fields kept
    assert route["timeout"] == "300s" and route["match"] == [{"uri": {"prefix": "/v1/"}}]
    assert route["retries"] == {"attempts": 0}
    patched = apply_patch(objects, finding)
    assert _timeout_codes(patched) == set()
    service = next(obj for obj in patched if obj["metadata"]["name"] == "vllm-llm-edge")
    original = next(obj for obj in objects if obj["metadata"]["name"] == "vllm-llm-edge")
    assert json_merge_patch(service, _rollback_body(finding.remediation)) == original


def test_knative_owned_virtualservice_is_explained_not_patched() -> None:
    objects = load_case(SERVERLESS, "checks/TIMEOUT_MISALIGNED/serverless_virtualservice_short.yaml")
    service = next(obj for obj in objects if obj["metadata"]["name"] == "vllm-llm-edge")
    service["metadata"]["ownerReferences"] = [
        {"apiVersion": "networking.internal.knative.dev/v1alpha1", "kind": "Ingress", "name": "x", "uid": "y"}
    ]
    finding = only(_run(objects), "TIMEOUT_MISALIGNED")
    assert finding.patch is None
    assert "generated by Ingress/x" in finding.remediation and "spec.predictor.timeout" in finding.remediation


def test_httproute_request_timeout_below_long_generations() -> None:
    objects = load_case(RAW, "checks/TIMEOUT_MISALIGNED/raw_httproute_short.yaml")
    metrics = _long_generations()
    finding = only(_run(objects, metrics), "TIMEOUT_MISALIGNED")
    assert finding.level is Severity.WARNING
    assert finding.objects == (ISVC_REF, "HTTPRoute.gateway.networking.k8s.io/llm/vllm-llm-public")
    assert finding.title == "HTTPRoute 45 s is below the long requests (95 s p99)"
    assert "set to 45 s (spec.rules[0].timeouts.request)" in finding.summary
    assert "inferred" in finding.summary  # Envoy Gateway's 504s are not in the catalog
    (rule,) = _patch_body(finding)["spec"]["rules"]
    assert rule["timeouts"] == {"request": "150s"}
    assert rule["backendRefs"] == [{"kind": "Service", "name": "vllm-llm-predictor", "port": 80}]
    assert _timeout_codes(apply_patch(objects, finding), metrics) == set()


def test_revision_timeout_below_long_generations_with_knative_504s() -> None:
    objects = load_case(SERVERLESS, "checks/healthy/timeouts_serverless_defaults.yaml")
    metrics = _long_generations(peak=400.0, knative_504_rate=0.1)
    finding = only(_run(objects, metrics), "TIMEOUT_MISALIGNED")
    assert finding.level is Severity.CRITICAL
    assert finding.objects == (ISVC_REF, REVISION_REF)
    assert "≈30 504s answered by Knative" in finding.summary
    # 400 s × 1.5 = 600 s, exactly Knative's max-revision-timeout-seconds.
    assert _patch_body(finding) == {"spec": {"predictor": {"timeout": 600}}}
    assert _timeout_codes(_kserve_reconciles(apply_patch(objects, finding)), metrics) == set()


def test_revision_timeout_capped_by_max_revision_timeout_says_so() -> None:
    objects = load_case(SERVERLESS, "checks/healthy/timeouts_serverless_defaults.yaml")
    finding = only(_run(objects, _long_generations(peak=500.0)), "TIMEOUT_MISALIGNED")
    assert _patch_body(finding) == {"spec": {"predictor": {"timeout": 600}}}
    assert "max-revision-timeout-seconds (600 s in knative-serving/config-defaults)" in finding.remediation


def test_client_shorter_than_the_revision_is_misaligned_without_a_patch() -> None:
    objects = load_case(SERVERLESS, "checks/healthy/timeouts_serverless_defaults.yaml")
    isvc = next(obj for obj in objects if obj["kind"] == "InferenceService")
    isvc["metadata"]["annotations"]["kserve-runbook/client-timeout"] = "120s"
    finding = only(_run(objects), "TIMEOUT_MISALIGNED")
    assert finding.title == "client 120 s gives up before Knative revision timeoutSeconds 300 s"
    assert "client on InferenceService.serving.kserve.io/llm/vllm-llm: 120 s request (annotation" in " ".join(
        finding.evidence
    )
    assert finding.patch is None and "at least 300 s" in finding.remediation


# --- healthy ---------------------------------------------------------------------------------------

HEALTHY = {
    "busy but healthy behind a default ingress-nginx": (
        (RAW, "checks/healthy/timeouts_busy_nginx.yaml"),
        _busy_but_healthy("nginx"),
    ),
    "properly ordered chain with long generations": (
        (SERVERLESS, "checks/healthy/timeouts_ordered.yaml"),
        _long_generations(peak=120.0),
    ),
    "Serverless with defaults and short latency": (
        (SERVERLESS, "checks/healthy/timeouts_serverless_defaults.yaml"),
        _busy_but_healthy("istio"),
    ),
    "long streamed generations through a default ingress-nginx that counts no 504": (
        (RAW, "checks/healthy/timeouts_streaming_nginx.yaml"),
        _streamed_long_generations(),
    ),
    "Raw behind KServe's Gateway API route, short latency": (
        (RAW, "checks/healthy/raw_gateway_api.yaml"),
        _busy_but_healthy("istio"),
    ),
}


@pytest.mark.parametrize("case", sorted(HEALTHY))
def test_healthy_fixtures_have_no_timeout_problem(case: str) -> None:
    files, metrics = HEALTHY[case]
    assert serious(_run(load_case(*files), metrics)) == []


def test_ordered_chain_reads_every_layer_with_its_source() -> None:
    path = timeout_layers.collect(evidence_of(load_case(SERVERLESS, "checks/healthy/timeouts_ordered.yaml")))
    assert [layer.describe() for layer in path.layers] == [
        f"client on {ISVC_REF}: 900 s request (annotation kserve-runbook/client-timeout)",
        "VirtualService route on VirtualService.networking.istio.io/llm/vllm-llm: no timeout (no timeout: Istio's "
        "default is none)",
        "VirtualService route on VirtualService.networking.istio.io/llm/vllm-llm-edge: 700 s request "
        "(spec.http[0].timeout)",
        f"Knative revision timeoutSeconds on {REVISION_REF}: 600 s request (spec.timeoutSeconds)",
        f"Knative revision responseStartTimeoutSeconds on {REVISION_REF}: 600 s first byte "
        "(spec.responseStartTimeoutSeconds)",
    ]


# --- step status ---------------------------------------------------------------------------------


def test_modelmesh_is_skipped() -> None:
    objects = load_case(RAW)
    isvc = next(obj for obj in objects if obj["kind"] == "InferenceService")
    isvc["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] = "ModelMesh"
    with pytest.raises(StepSkipped):
        _run(objects)


def test_every_routing_read_forbidden_is_missing_evidence() -> None:
    reads = [
        {"what": f"{kind} in llm", "status": "forbidden", "reason": "RBAC"}
        for kind in ("Ingress", "VirtualService.networking.istio.io", "HTTPRoute.gateway.networking.k8s.io")
    ]
    with pytest.raises(EvidenceMissing, match="forbidden"):
        timeouts.run(evidence_of(load_case(RAW), reads=reads))


# --- the chain logic -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("60", 60.0), (120, 120.0), ("30s", 30.0), ("1m30s", 90.0), ("500ms", 0.5), ("1h", 3600.0), ("0s", 0.0)],
)
def test_parse_duration(text: object, seconds: float) -> None:
    assert duration_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "abc", "30x", "1m junk", None, True])
def test_parse_duration_rejects_non_durations(text: object) -> None:
    assert duration_seconds(text) is None


def _layer(name: str, tier: int, seconds: float | None, role: str = "ingress", **options: Any) -> chain.Layer:
    return chain.Layer(name, tier, role, options.pop("kind", chain.REQUEST), seconds, "test", False, **options)


def test_plateau_names_the_layer_the_latency_flattens_at() -> None:
    nginx = _layer("nginx", chain.EDGE, 60.0)
    knative = _layer("knative", chain.KNATIVE, 300.0, role="knative")
    assert chain.plateau_at([20.0, 41.0, 58.5, 60.2, 59.8, 61.0], [nginx, knative]) is nginx
    assert chain.plateau_at([20.0, 41.0, 58.5, 60.2, 95.0, 96.0], [nginx, knative]) is None
    assert chain.plateau_at([20.0, 41.0, 60.0], [nginx, knative]) is None  # two samples do not make a plateau


def test_cold_start_hook_adds_to_the_latency_budget() -> None:
    knative = _layer("knative", chain.KNATIVE, 300.0, role="knative")
    warm = chain.Observed(e2e_p99=200.0)
    cold = chain.Observed(e2e_p99=200.0, cold_start=90.0)
    assert not chain.cuts_latency(knative, warm)
    assert chain.cuts_latency(knative, cold)  # 290 s reaches 90 % of 300 s
    assert "cold start 90 s" in cold.describe() and "cold start not measured" in warm.describe()


def test_recommended_timeout_outlasts_latency_and_inner_layers_within_the_ceiling() -> None:
    edge = _layer("nginx", chain.EDGE, 60.0)
    knative = _layer("knative", chain.KNATIVE, 300.0, role="knative")
    observed = chain.Observed(e2e_p99=95.0)
    assert chain.recommended_seconds(edge, [edge], observed, None) == 150
    assert chain.recommended_seconds(edge, [edge, knative], observed, None) == 300
    assert chain.recommended_seconds(knative, [edge, knative], chain.Observed(e2e_p99=700.0), 600.0) == 600


def test_edge_layers_are_alternatives_not_a_series() -> None:
    alb = _layer("alb", chain.EDGE, 60.0, role="lb")
    nginx = _layer("nginx", chain.EDGE, 300.0)
    mesh = _layer("mesh", chain.MESH, 120.0, role="mesh")
    unlimited = _layer("mesh", chain.MESH, None, role="mesh")
    assert chain.undercut(alb, [alb, nginx, mesh]) == [mesh]
    assert chain.undercut(alb, [alb, unlimited]) == []


def test_streaming_note_says_when_streaming_would_not_help() -> None:
    alb = _layer("AWS ALB idle timeout", chain.EDGE, 60.0, role="lb", kind=chain.IDLE)
    slow_first_token = chain.Observed(e2e_p99=95.0, ttft_p95=70.0)
    note = chain.streaming_note(slow_first_token, [alb], chain.Cut504s())
    assert "streaming would not avoid the cut" in note
    quick_first_token = chain.Observed(e2e_p99=95.0, ttft_p95=1.2)
    assert "only non-streamed ones" in chain.streaming_note(quick_first_token, [alb], chain.Cut504s())


def test_a_layer_that_cuts_requests_gets_at_least_twice_its_value() -> None:
    """Requests cut at 60 s never finish, so a p99 of 59 s says nothing about how long they need."""
    nginx = chain.Layer("ingress-nginx proxy-read-timeout", 1, "ingress", chain.REQUEST, 60.0, "default", True)
    observed = chain.Observed(e2e_p99=59.0)
    assert chain.recommended_seconds(nginx, [nginx], observed, None) == 90
    assert chain.recommended_seconds(nginx, [nginx], observed, None, cutting=True) == 120


def test_client_timeout_given_on_the_command_line_wins_over_the_annotation() -> None:
    objects = load_case(SERVERLESS, "checks/healthy/timeouts_serverless_defaults.yaml")
    isvc = next(obj for obj in objects if obj["kind"] == "InferenceService")
    isvc["metadata"]["annotations"]["kserve-runbook/client-timeout"] = "900s"
    evidence = dataclasses.replace(evidence_of(objects), site=SiteConfig(client_timeout_seconds=120.0))
    finding = only(timeouts.run(evidence), "TIMEOUT_MISALIGNED")
    assert finding.title == "client 120 s gives up before Knative revision timeoutSeconds 300 s"
    assert "(--client-timeout)" in " ".join(finding.evidence)


# --- Knative's layers: queue-proxy outside and inside the revision timeout, the activator -----------------------


def _knative_as_upstream_counts(cut_rate: float) -> dict[str, list[dict[str, Any]]]:
    """Knative's counters for requests cut by the revision timeout, as knative/serving writes them: 502 inside the
    timeout handler (revision_app_request_count, knative/serving#15352), 504 outside it (revision_request_count)."""
    return {
        "knative_requests_by_code": [
            _series([2.0] * 40, response_code="200"),
            _series([0.0] * 20 + [cut_rate] * 20, response_code="502"),
        ],
        "knative_queue_requests_by_code": [
            _series([2.0] * 40, response_code="200", response_code_class="2xx"),
            _series([0.0] * 20 + [cut_rate] * 20, response_code="504", response_code_class="5xx"),
        ],
    }


def test_revision_timeout_cuts_are_counted_outside_the_timeout_handler() -> None:
    """knative/serving#15352: requests cut at the revision timeout. revision_app_request_count (the only counter
    read before) saw them as 502, never 504, so the revision timeout stayed a warning with no count; queue-proxy's
    revision_request_count, outside the timeout handler, answers 504 for each."""
    objects = load_case(SERVERLESS, "checks/healthy/timeouts_serverless_defaults.yaml")
    metrics = _metrics(
        vllm_e2e_p99=[_series(_ramp(20.0, 400.0))],
        vllm_queue_time_p95=[_series(_ramp(0.2, 1.5))],
        vllm_ttft_p95=[_series(_ramp(0.4, 1.8))],
        **_knative_as_upstream_counts(0.1),
    )
    finding = only(_run(objects, metrics), "TIMEOUT_MISALIGNED")
    assert finding.level is Severity.CRITICAL
    assert "≈30 504s answered by Knative" in finding.summary
    layers = next(line for line in finding.evidence if line.startswith("Knative 5xx by layer:"))
    assert "queue-proxy revision timeout (504 in revision_request_count) ≈30" in layers
    # The 502s the inner proxy wrote for the same requests are not the server's own errors.
    assert "the server behind queue-proxy ≈0" in layers
    assert "activator 503, no capacity in time (scale from zero, queue full) not read" in layers


def test_short_requests_with_knative_counters_raise_nothing() -> None:
    objects = load_case(SERVERLESS, "checks/healthy/timeouts_serverless_defaults.yaml")
    metrics = _busy_but_healthy("istio")
    metrics.update(
        _metrics(
            knative_queue_requests_by_code=[_series([9.5] * 40, response_code="200", response_code_class="2xx")],
            knative_activator_requests_by_code=[_series([0.5] * 40, response_code="200", response_code_class="2xx")],
        )
    )
    assert serious(_run(objects, metrics)) == []


def _knative_evidence(**results: list[dict[str, Any]]) -> Any:
    return evidence_of(
        load_case(SERVERLESS, "checks/healthy/timeouts_serverless_defaults.yaml"), metrics=_metrics(**results)
    )


def test_knative_5xx_are_given_to_the_layer_that_answered_them() -> None:
    """Scale from zero: the activator answers 503 while no capacity comes in time (pkg/activator/handler/handler.go)
    and 504 when the revision timeout fires while it holds a request; what it proxied to queue-proxy is counted at
    both, so only its count beyond queue-proxy's is its own."""
    evidence = _knative_evidence(
        knative_requests_by_code=[
            _series([1.0] * 40, response_code="200"),
            _series([0.0] * 30 + [0.2] * 10, response_code="502"),  # 30: cut by the revision timeout
            _series([0.0] * 36 + [0.1] * 4, response_code="500"),  # 6: vLLM's own errors
        ],
        knative_queue_requests_by_code=[
            _series([1.0] * 40, response_code="200", response_code_class="2xx"),
            _series([0.0] * 30 + [0.2] * 10, response_code="504", response_code_class="5xx"),
            _series([0.0] * 36 + [0.1] * 4, response_code="500", response_code_class="5xx"),
        ],
        knative_activator_requests_by_code=[
            _series([1.0] * 40, response_code="200", response_code_class="2xx"),
            _series([0.4] * 10 + [0.0] * 30, response_code="503", response_code_class="5xx"),  # 60
            _series([0.2] * 10 + [0.2] * 10 + [0.0] * 20, response_code="504", response_code_class="5xx"),  # 60
        ],
    )
    layers = traffic.knative_layers(evidence)
    assert layers is not None
    assert round(layers.revision_timeouts or 0) == 30
    assert round(layers.app or 0) == 6
    assert round(layers.queue_proxy_other or 0) == 0
    assert round(layers.activator_no_capacity or 0) == 60
    assert round(layers.activator_timeouts or 0) == 30  # 60 at the activator, 30 of them queue-proxy's
    assert round(layers.timeouts or 0) == 60


def test_without_knatives_outer_counters_the_layers_are_not_guessed() -> None:
    evidence = _knative_evidence(knative_requests_by_code=[_series([1.0] * 40, response_code="502")])
    assert traffic.knative_layers(evidence) is None


# --- Serverless: the external gateway's view, whose destination is knative-local-gateway ------------------------


def _outer_gateway(*, host: str | None, cut_rate: float) -> list[dict[str, Any]]:
    """The external gateway's requests to knative-local-gateway (kserve ingress_reconciler.go), ``host`` in
    request_host where a Telemetry override adds it."""
    extra = {"request_host": host} if host else {}
    return [
        _series([2.0] * 40, response_code="200", response_flags="-", **extra),
        _series([0.0] * 20 + [cut_rate] * 20, response_code="504", response_flags="UT", **extra),
    ]


def test_virtualservice_cuts_at_the_outer_gateway_are_counted_by_host() -> None:
    """Serverless: KServe points the external gateway's route at knative-local-gateway, so the 504s of a route
    timeout there carry that destination, not <isvc>-predictor, and were missed: the VirtualService stayed a
    warning with no count."""
    objects = load_case(SERVERLESS, "checks/TIMEOUT_MISALIGNED/serverless_virtualservice_short.yaml")
    metrics = _long_generations()
    metrics.update(_metrics(istio_outer_gateway_by_code=_outer_gateway(host="vllm-llm.llm.example.com", cut_rate=0.1)))
    finding = only(_run(objects, metrics), "TIMEOUT_MISALIGNED")
    assert finding.objects[1] == "VirtualService.networking.istio.io/llm/vllm-llm-edge"
    assert finding.level is Severity.CRITICAL
    assert "≈30 504s with flag UT at the external gateway towards knative-local-gateway for this service's host" in (
        finding.summary
    )
    assert any(line.startswith("external gateway → knative-local-gateway: 5xx ≈30") for line in finding.evidence)


def test_outer_gateway_cuts_without_a_host_are_attributed_by_gateway_only() -> None:
    objects = load_case(SERVERLESS, "checks/TIMEOUT_MISALIGNED/serverless_virtualservice_short.yaml")
    metrics = _long_generations()
    metrics.update(_metrics(istio_outer_gateway_by_code=_outer_gateway(host=None, cut_rate=0.1)))
    finding = only(_run(objects, metrics), "TIMEOUT_MISALIGNED")
    assert finding.level is Severity.WARNING  # another service behind the same gateway may own them
    assert "attributed by gateway only" in finding.summary
    line = next(line for line in finding.evidence if line.startswith("external gateway → knative-local-gateway"))
    assert "the attribution is by gateway, not by service" in line


def test_another_hosts_cuts_at_the_outer_gateway_are_not_this_services() -> None:
    objects = load_case(SERVERLESS, "checks/TIMEOUT_MISALIGNED/serverless_virtualservice_short.yaml")
    metrics = _long_generations()
    metrics.update(_metrics(istio_outer_gateway_by_code=_outer_gateway(host="embedder.llm.example.com", cut_rate=0.1)))
    assert only(_run(objects, metrics), "TIMEOUT_MISALIGNED").level is Severity.WARNING


def test_healthy_outer_gateway_raises_nothing() -> None:
    objects = load_case(SERVERLESS, "checks/healthy/timeouts_serverless_defaults.yaml")
    metrics = _busy_but_healthy("istio")
    metrics.update(_metrics(istio_outer_gateway_by_code=_outer_gateway(host="vllm-llm.llm.example.com", cut_rate=0.0)))
    assert serious(_run(objects, metrics)) == []


# --- vLLM's latency histograms ended at 60 s (TTFT 10 s) before vllm-project/vllm PR #15202 -----------------------

OLD_LATENCY_BOUNDS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0)
NEW_LATENCY_BOUNDS = (*OLD_LATENCY_BOUNDS, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
OLD_TTFT_BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)


def _bounds(latency: Sequence[float], ttft: Sequence[float] = OLD_TTFT_BOUNDS) -> list[dict[str, Any]]:
    """``vllm_latency_buckets``: one series per (histogram, le), as ``count by (__name__, le)`` answers."""
    names = {
        "vllm:e2e_request_latency_seconds_bucket": latency,
        "vllm:request_queue_time_seconds_bucket": latency,
        "vllm:time_to_first_token_seconds_bucket": ttft,
    }
    return [
        _series([1.0] * 40, __name__=name, le=le)
        for name, bounds in names.items()
        for le in [*(f"{bound}" for bound in bounds), "+Inf"]
    ]


def _p99_on_60(*, bounds: Sequence[float] | None, nginx_504_rate: float = 0.0) -> dict[str, dict[str, Any]]:
    """Long generations whose p99 climbs and then stays at exactly 60 s (vllm-project/vllm issue #15167: "a p99
    tail latency of 60s, when the real value is often much higher"); ingress-nginx counts its requests."""
    nginx = [_series([2.0] * 40, status="200")]
    if nginx_504_rate:
        nginx.append(_series([0.0] * 25 + [nginx_504_rate] * 15, status="504"))
    results: dict[str, list[dict[str, Any]]] = {
        "vllm_e2e_p99": [_series([*_ramp(20.0, 57.0, 25), *[60.0] * 15])],
        "vllm_queue_time_p95": [_series(_ramp(0.2, 4.0))],
        "vllm_ttft_p95": [_series(_ramp(0.4, 1.8))],
        "nginx_requests_by_status": nginx,
    }
    if bounds is not None:
        results["vllm_latency_buckets"] = _bounds(bounds)
    return _metrics(**results)


def _with_vllm_image(objects: list[dict[str, Any]], tag: str) -> list[dict[str, Any]]:
    text = yaml.safe_dump_all(objects).replace("vllm/vllm-openai:v0.10.1", f"vllm/vllm-openai:{tag}")
    return [obj for obj in yaml.safe_load_all(text) if obj]


def test_p99_on_the_top_bucket_is_not_an_nginx_timeout() -> None:
    """Before the fix: a 60 s p99 'flattening at' ingress-nginx's 60 s default made a warning attributing cuts to
    nginx, and a patch to 120 s derived from it, although the 60 s was the end of vLLM's histogram."""
    objects = load_case(RAW, "checks/TIMEOUT_LB_DEFAULT/raw_nginx_default.yaml")
    findings = _run(objects, _p99_on_60(bounds=OLD_LATENCY_BOUNDS))
    assert serious(findings) == []
    assert all("flattens at 60 s" not in " ".join(finding.evidence) for finding in findings)


def test_the_cap_is_known_from_the_version_when_the_bounds_were_not_read() -> None:
    objects = _with_vllm_image(load_case(RAW, "checks/TIMEOUT_LB_DEFAULT/raw_nginx_default.yaml"), "v0.7.3")
    assert serious(_run(objects, _p99_on_60(bounds=None))) == []


def test_no_cap_is_assumed_from_a_version_with_the_longer_buckets() -> None:
    objects = _with_vllm_image(load_case(RAW, "checks/TIMEOUT_LB_DEFAULT/raw_nginx_default.yaml"), "v0.9.2")
    finding = only(_run(objects, _p99_on_60(bounds=None)), "TIMEOUT_LB_DEFAULT")
    assert "attribution: the p99 latency flattens at 60 s, this layer's value" in finding.evidence


def test_a_p99_flat_at_60_s_with_longer_buckets_is_still_the_timeout() -> None:
    """No false negative: with PR #15202's buckets (to 7680 s) a p99 stuck at 60 s is the 60 s layer's doing."""
    objects = load_case(RAW, "checks/TIMEOUT_LB_DEFAULT/raw_nginx_default.yaml")
    finding = only(_run(objects, _p99_on_60(bounds=NEW_LATENCY_BOUNDS)), "TIMEOUT_LB_DEFAULT")
    assert finding.level is Severity.WARNING
    assert "attribution: the p99 latency flattens at 60 s, this layer's value" in finding.evidence


def test_nginx_504s_on_an_old_vllm_stay_critical_with_the_latency_as_a_floor() -> None:
    objects = load_case(RAW, "checks/TIMEOUT_LB_DEFAULT/raw_nginx_default.yaml")
    finding = only(_run(objects, _p99_on_60(bounds=OLD_LATENCY_BOUNDS, nginx_504_rate=0.2)), "TIMEOUT_LB_DEFAULT")
    assert finding.level is Severity.CRITICAL  # nginx counted its own 504s: that does not depend on the histogram
    assert (
        finding.title
        == "ingress-nginx proxy-read-timeout 60 s (default) is below the long requests (at least 60 s p99)"
    )
    assert "the latency above it is unknown" in finding.summary
    assert "flattens at" not in " ".join(finding.evidence)
    assert "so 120 s only clears the latency the window can show" in finding.remediation
    assert any("the top bucket of vLLM's e2e histogram" in line for line in finding.evidence)


def test_a_capped_p99_still_shows_layers_well_below_the_cap() -> None:
    knative = _layer("knative", chain.KNATIVE, 300.0, role="knative")
    nginx = _layer("nginx", chain.EDGE, 60.0)
    short = _layer("gke", chain.EDGE, 30.0, role="lb")
    capped = chain.Observed(e2e_p99=60.0, e2e_top=60.0)
    assert chain.cuts_latency(short, capped)  # at least 60 s is past 30 s
    assert not chain.cuts_latency(nginx, capped)  # at least 60 s says nothing about a 60 s layer
    assert not chain.cuts_latency(knative, capped)
    assert "at least 60 s (the top bucket of vLLM's histogram: unknown above)" in capped.describe()


def test_a_first_token_on_its_top_bucket_proves_no_streaming() -> None:
    nginx = _layer("ingress-nginx proxy-read-timeout", chain.EDGE, 60.0, kind=chain.IDLE)
    observed = chain.Observed(e2e_p99=150.0, ttft_p95=10.0, ttft_top=10.0)
    cut = chain.Cut504s(nginx=0.0, nginx_requests=1800.0)
    assert not chain.passed_streamed(nginx, observed, cut)
    assert "cannot be told" in chain.streaming_note(observed, [nginx], cut)


def test_5xx_while_no_pod_is_ready_are_the_activators() -> None:
    """Scale from zero: the app's counter only has the 200s of pods that were up, so the activator's 503s (no
    capacity in time) were never read and the same requests were put down to Istio."""
    evidence = _knative_evidence(
        knative_requests_by_code=[_series([1.0] * 20 + [0.0] * 20, response_code="200")],
        knative_activator_requests_by_code=[
            _series([0.0] * 20 + [0.2] * 10 + [0.0] * 10, response_code="503", response_code_class="5xx")
        ],
        istio_requests_by_code=[
            _series([0.0] * 20 + [0.2] * 10 + [0.0] * 10, response_code="503", response_flags="-"),
        ],
    )
    start = END - STEP * 20
    errors = cold_starts.errors_during(evidence, [(start, start + STEP * 10)])
    assert errors is not None and errors[1] == "Knative's activator: 503 ≈30"
