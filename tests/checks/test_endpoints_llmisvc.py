"""The ``endpoints`` step on an LLMInferenceService: the chain Gateway → HTTPRoute → InferencePool → endpoint
picker → pods, one failing fixture per code and the healthy stack (docs/upstream-facts.md#llminferenceservice)."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import pytest
from builders import CAPTURED_AT, evidence_from_objects
from check_cases import codes, load_case, only, serious

from nbhelpers.checks import endpoints
from nbhelpers.errors import EvidenceMissing
from nbhelpers.evidence import gather
from nbhelpers.evidence.model import LLM_INFERENCE_SERVICE, Target
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding
from nbhelpers.metrics import catalog
from nbhelpers.sources import kinds

HEALTHY = "checks/healthy/llmisvc.yaml"
NAME = "llama-llmd"
POOL_V1 = "InferencePool.inference.networking.k8s.io/llm/llama-llmd-inference-pool"


def _run(*files: str, drop: tuple[str, ...] = (), reads: list[dict[str, str]] | None = None) -> list[Finding]:
    return endpoints.run(_evidence(load_case(*files, drop=drop), reads))


def _evidence(objects: list[dict[str, Any]], reads: list[dict[str, str]] | None = None):  # type: ignore[no-untyped-def]
    return evidence_from_objects(
        copy.deepcopy(objects), "llm", NAME, target_kind=LLM_INFERENCE_SERVICE, reads=reads or []
    )


def _case(code: str, name: str) -> str:
    return f"checks/{code}/{name}.yaml"


def test_the_healthy_stack_has_no_endpoint_problem() -> None:
    assert serious(_run(HEALTHY)) == []


def test_the_healthy_stack_in_the_alpha_group_has_no_endpoint_problem() -> None:
    """Only the x-k8s.io v1alpha2 InferencePool (selector map, targetPortNumber, extensionRef) installed."""
    objects = load_case(HEALTHY, drop=(POOL_V1,))
    pool = next(obj for obj in load_case(HEALTHY) if obj["kind"] == "InferencePool")
    alpha = copy.deepcopy(pool)
    alpha["apiVersion"] = "inference.networking.x-k8s.io/v1alpha2"
    alpha["spec"] = {
        "selector": pool["spec"]["selector"]["matchLabels"],
        "targetPortNumber": 8000,
        "extensionRef": {"name": "llama-llmd-epp-service", "portNumber": 9002},
    }
    assert serious(endpoints.run(_evidence([*objects, alpha]))) == []


def test_a_picker_down_under_failclose_is_critical_and_explains_the_not_ready_service() -> None:
    findings = _run(HEALTHY, _case("ENDPOINTS_PICKER_NOT_READY", "llmisvc_failclose"))
    assert codes(serious(findings)) == {"ENDPOINTS_PICKER_NOT_READY", "LLMISVC_NOT_READY"}
    picker = next(finding for finding in findings if finding.code == "ENDPOINTS_PICKER_NOT_READY")
    assert picker.level is Severity.CRITICAL
    assert "FailClose" in picker.title and "CrashLoopBackOff" in " ".join(picker.evidence)


def test_a_picker_down_under_failopen_is_a_warning() -> None:
    objects = load_case(HEALTHY, _case("ENDPOINTS_PICKER_NOT_READY", "llmisvc_failclose"))
    for obj in objects:
        if obj["kind"] == "InferencePool":
            obj["spec"]["endpointPickerRef"]["failureMode"] = "FailOpen"
    picker = next(f for f in endpoints.run(_evidence(objects)) if f.code == "ENDPOINTS_PICKER_NOT_READY")
    assert picker.level is Severity.WARNING


def test_an_unset_failure_mode_is_read_as_the_api_default_failclose() -> None:
    objects = load_case(HEALTHY, _case("ENDPOINTS_PICKER_NOT_READY", "llmisvc_failclose"))
    for obj in objects:
        if obj["kind"] == "InferencePool":
            del obj["spec"]["endpointPickerRef"]["failureMode"]
    picker = next(f for f in endpoints.run(_evidence(objects)) if f.code == "ENDPOINTS_PICKER_NOT_READY")
    assert picker.level is Severity.CRITICAL


def test_a_pool_selector_that_misses_the_pods_is_found_on_the_alpha_pool() -> None:
    findings = _run(HEALTHY, _case("ENDPOINTS_POOL_SELECTS_NO_POD", "llmisvc_label_changed"), drop=(POOL_V1,))
    assert codes(serious(findings)) == {"ENDPOINTS_POOL_SELECTS_NO_POD"}
    finding = serious(findings)[0]
    assert "app=llama-llmd" in finding.summary and "2 of the service's 2 vLLM pod(s) are ready" in finding.summary


def test_a_gateway_never_programmed_is_the_finding_not_the_route_behind_it() -> None:
    findings = _run(HEALTHY, _case("ROUTING_GATEWAY_NOT_PROGRAMMED", "llmisvc_no_address"))
    assert codes(serious(findings)) == {"ROUTING_GATEWAY_NOT_PROGRAMMED"}
    assert "AddressNotAssigned" in serious(findings)[0].summary


def test_a_missing_gateway_is_not_programmed() -> None:
    findings = _run(HEALTHY, drop=("Gateway.gateway.networking.k8s.io/kserve/kserve-ingress-gateway",))
    assert codes(serious(findings)) == {"ROUTING_GATEWAY_NOT_PROGRAMMED"}
    assert "does not exist" in serious(findings)[0].summary


def test_a_route_whose_pool_backend_is_unresolved() -> None:
    findings = _run(HEALTHY, _case("ROUTING_HTTPROUTE_NOT_ACCEPTED", "llmisvc_backend_unresolved"))
    assert codes(serious(findings)) == {"ROUTING_HTTPROUTE_NOT_ACCEPTED"}
    assert "InvalidKind" in serious(findings)[0].summary


def test_a_pool_whose_picker_service_is_not_resolved() -> None:
    findings = _run(HEALTHY, _case("ROUTING_POOL_NOT_ACCEPTED", "llmisvc_picker_service_missing"))
    assert codes(serious(findings)) == {"ROUTING_POOL_NOT_ACCEPTED"}


def test_a_missing_pool_and_a_pool_crd_not_installed() -> None:
    missing = _run(HEALTHY, drop=(POOL_V1,))
    assert codes(serious(missing)) == {"ROUTING_POOL_NOT_ACCEPTED"}
    assert "does not exist" in serious(missing)[0].summary
    not_installed = [
        {"what": f"InferencePool.{group} in llm", "status": "not_installed", "reason": "no CRD"}
        for group in ("inference.networking.k8s.io", "inference.networking.x-k8s.io")
    ]
    findings = _run(HEALTHY, drop=(POOL_V1,), reads=not_installed)
    assert "not installed" in serious(findings)[0].summary


def test_pool_reads_that_failed_are_missing_evidence_not_a_missing_pool() -> None:
    forbidden = [
        {"what": f"InferencePool.{group} in llm", "status": "forbidden", "reason": "403"}
        for group in ("inference.networking.k8s.io", "inference.networking.x-k8s.io")
    ]
    with pytest.raises(EvidenceMissing):
        _run(HEALTHY, drop=(POOL_V1,), reads=forbidden)


def test_a_route_left_without_backends_while_kserve_waits_for_the_gateway() -> None:
    findings = _run(HEALTHY, _case("LLMISVC_NOT_READY", "llmisvc_waiting_for_gateway"))
    assert codes(serious(findings)) == {"ROUTING_HTTPROUTE_NOT_ACCEPTED", "LLMISVC_NOT_READY"}
    route = next(finding for finding in findings if finding.code == "ROUTING_HTTPROUTE_NOT_ACCEPTED")
    assert "none of its rules has a backendRef" in route.summary and route.title.endswith("has no backend")
    ready = next(finding for finding in findings if finding.code == "LLMISVC_NOT_READY")
    assert "HTTPRoutesReady=False" in ready.title


def test_the_service_without_a_scheduler_is_judged_on_its_route_only() -> None:
    objects = load_case(HEALTHY, drop=(POOL_V1,))
    for obj in objects:
        if obj["kind"] == "LLMInferenceService":
            del obj["spec"]["router"]["scheduler"]
    assert serious(endpoints.run(_evidence(objects))) == []


def _served(rate: float) -> dict[str, dict[str, Any]]:
    step, samples, end = 15, 240, CAPTURED_AT.timestamp()
    values = [[end - step * (samples - i), str(rate)] for i in range(samples)]
    spec = catalog.BY_ID["vllm_request_rate"]
    return {
        "vllm_request_rate": {
            "promql": catalog.render(spec, 0, "llm", NAME, step, llmisvc=True),
            "result": [{"metric": {}, "values": values}],
        }
    }


def test_a_not_ready_condition_the_served_requests_contradict_is_info() -> None:
    """kserve/kserve#5986: Ready=False (WaitingForGateway) with a healthy chain while vLLM finishes requests.
    Before: LLMISVC_NOT_READY critical and the top cause; after: info saying the condition lags."""
    objects = load_case(HEALTHY, _case("LLMISVC_NOT_READY", "llmisvc_byo_gateway_condition"))
    evidence = evidence_from_objects(
        copy.deepcopy(objects), "llm", NAME, target_kind=LLM_INFERENCE_SERVICE, metrics=_served(4.0)
    )
    finding = only(endpoints.run(evidence), "LLMISVC_NOT_READY")
    assert finding.level is Severity.INFO
    assert "GatewaysReady=False" in finding.title and "requests are being served" in finding.summary
    quiet = evidence_from_objects(
        copy.deepcopy(objects), "llm", NAME, target_kind=LLM_INFERENCE_SERVICE, metrics=_served(0.0)
    )
    assert only(endpoints.run(quiet), "LLMISVC_NOT_READY").level is Severity.CRITICAL


def test_served_requests_do_not_soften_a_condition_the_chain_explains() -> None:
    objects = load_case(HEALTHY, _case("ENDPOINTS_PICKER_NOT_READY", "llmisvc_failclose"))
    evidence = evidence_from_objects(
        copy.deepcopy(objects), "llm", NAME, target_kind=LLM_INFERENCE_SERVICE, metrics=_served(4.0)
    )
    assert only(endpoints.run(evidence), "LLMISVC_NOT_READY").level is Severity.CRITICAL


def test_the_llmisvc_metric_selector_takes_the_vllm_pods_and_leaves_the_picker_out() -> None:
    promql = catalog.render(catalog.BY_ID["vllm_running"], 0, "llm", NAME, 15, llmisvc=True)
    pattern = re.search(r'pod=~"([^"]+)"', promql)
    assert pattern is not None
    matches = re.compile(pattern.group(1)).fullmatch  # PromQL anchors =~ at both ends
    assert matches("llama-llmd-kserve-6d8f7c9b5-4xk2p") and matches("llama-llmd-kserve-prefill-7f9d8c6b5-x2k4p")
    assert not matches("llama-llmd-kserve-router-scheduler-7c9d8b6f4-k2m4p")


def _pod_matcher(**flags: bool) -> Callable[[str], object]:
    promql = catalog.render(catalog.BY_ID["vllm_running"], 0, "llm", NAME, 15, llmisvc=True, **flags)
    pattern = re.search(r'pod=~"([^"]+)"', promql)
    assert pattern is not None
    return re.compile(f"(?:{pattern.group(1)})").fullmatch  # PromQL anchors the whole alternation


def test_the_llmisvc_metric_selector_takes_the_group_leaders_not_the_workers() -> None:
    """vLLM's API server and its metrics are on a LeaderWorkerSet group's leader (workload_multi_node.go)."""
    matches = _pod_matcher()
    assert matches("llama-llmd-kserve-mn-0") and matches("llama-llmd-kserve-mn-12")
    assert not matches("llama-llmd-kserve-mn-0-1") and not matches("llama-llmd-kserve-mn-prefill-0")
    with_prefill = _pod_matcher(prefill_groups=True)
    assert with_prefill("llama-llmd-kserve-mn-prefill-0") and with_prefill("llama-llmd-kserve-mn-1")
    assert with_prefill("llama-llmd-kserve-7f9d8c6b5-x2k4p")
    for other in ("llama-llmd-kserve-mn-prefill-0-1", "llama-llmd-kserve-mn-0-3"):
        assert not with_prefill(other), other
    assert not with_prefill("llama-llmd-kserve-router-scheduler-7c9d8b6f4-k2m4p")


def test_the_prefill_group_leaders_are_queried_only_when_the_service_has_them() -> None:
    """A single-node service's PromQL is unchanged (bundles captured before replay the same queries)."""
    spec = catalog.BY_ID["vllm_running"]
    assert catalog.render(spec, 0, "llm", NAME, 15, llmisvc=True) == catalog.render(
        spec, 0, "llm", NAME, 15, llmisvc=True, prefill_groups=False
    )
    target = Target("llm", NAME, LLM_INFERENCE_SERVICE)

    def sets(*names: str) -> dict[str, dict[str, Any]]:
        found = {name: {"kind": "LeaderWorkerSet", "metadata": {"name": name, "namespace": "llm"}} for name in names}
        return {kinds.LEADER_WORKER_SET.key: found}

    assert not gather.llmisvc_prefill_groups(sets(f"{NAME}-kserve-mn"), target)
    assert gather.llmisvc_prefill_groups(sets(f"{NAME}-kserve-mn", f"{NAME}-kserve-mn-prefill"), target)


def test_a_pool_target_port_no_selected_pod_listens_on() -> None:
    findings = _run(HEALTHY, _case("ENDPOINTS_POOL_SELECTS_NO_POD", "llmisvc_target_port"))
    finding = only(findings, "ENDPOINTS_POOL_SELECTS_NO_POD")
    assert "targets port 8000" in finding.title and "listens on 8001" in finding.summary
    assert any("--port=8001" in line for line in finding.evidence)


PICKER_POD = "llama-llmd-kserve-router-scheduler-7c9d8b6f4-k2m4p"
# The endpoint picker refused by the API server (istio/istio.io#17528: its Role lacks list on inferenceobjectives).
PICKER_LOG = (
    '2026-01-15T11:49:58.000000000Z {"level":"info","msg":"starting manager"}\n'
    '2026-01-15T11:49:59.000000000Z {"level":"error","msg":"Failed to watch","error":"failed to list '
    "*v1alpha2.InferenceObjective: inferenceobjectives.inference.networking.x-k8s.io is forbidden: User "
    '\\"system:serviceaccount:llm:llama-llmd-epp-sa\\" cannot list resource \\"inferenceobjectives\\""}\n'
)


def test_the_picker_finding_quotes_the_error_its_log_ends_with() -> None:
    objects = load_case(HEALTHY, _case("ENDPOINTS_PICKER_NOT_READY", "llmisvc_failclose"))
    evidence = evidence_from_objects(
        copy.deepcopy(objects), "llm", NAME, target_kind=LLM_INFERENCE_SERVICE, logs={(PICKER_POD, "main"): PICKER_LOG}
    )
    finding = only(endpoints.run(evidence), "ENDPOINTS_PICKER_NOT_READY")
    quoted = [line for line in finding.evidence if line.startswith("log ")]
    assert len(quoted) == 1 and "cannot list resource" in quoted[0] and "starting manager" not in quoted[0]


def _picker_quotes(log: str) -> list[str]:
    objects = load_case(HEALTHY, _case("ENDPOINTS_PICKER_NOT_READY", "llmisvc_failclose"))
    evidence = evidence_from_objects(
        copy.deepcopy(objects), "llm", NAME, target_kind=LLM_INFERENCE_SERVICE, logs={(PICKER_POD, "main"): log}
    )
    finding = only(endpoints.run(evidence), "ENDPOINTS_PICKER_NOT_READY")
    return [line for line in finding.evidence if line.startswith("log ")]


def _zap_error(second: int, message: str) -> str:
    moment = f"2026-01-15T11:{50 + second // 60:02d}:{second % 60:02d}"
    return f'{moment}.000000000Z {{"level":"error","ts":"{moment}Z","msg":"{message}"}}\n'


def test_a_picker_error_its_informers_repeat_is_quoted_once_with_its_count() -> None:
    """The picker retries the refused list every few seconds: one message, many lines (each with its own "ts")."""
    refused = "Failed to watch: inferenceobjectives is forbidden: cannot list resource inferenceobjectives"
    log = "".join(_zap_error(second, refused) for second in range(0, 50, 5))
    quoted = _picker_quotes(log)
    assert len(quoted) == 1
    assert "cannot list resource inferenceobjectives" in quoted[0] and quoted[0].endswith("(×10 in the log)")
    assert '"ts":"2026-01-15T11:50:45Z"' in quoted[0]  # the latest occurrence


def test_distinct_picker_errors_are_each_quoted_the_latest_three_in_order() -> None:
    messages = ["failed to parse config", "Failed to watch pods: forbidden", "Failed to watch pools: forbidden"]
    messages.append("failed to list InferenceObjectives: forbidden")
    log = "".join(_zap_error(second * 7, message) for second, message in enumerate(messages * 2))
    quoted = _picker_quotes(log)
    assert [line.split('"msg":"')[1].split('"')[0] for line in quoted] == messages[1:]
    assert all(line.endswith("(×2 in the log)") for line in quoted)


def test_without_a_scheduler_no_ready_vllm_pod_is_none_ready() -> None:
    objects = load_case(HEALTHY, drop=(POOL_V1,))
    for obj in objects:
        if obj["kind"] == "LLMInferenceService":
            del obj["spec"]["router"]["scheduler"]
        if obj["kind"] == "Pod" and "router-scheduler" not in obj["metadata"]["name"]:
            obj["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}]
    finding = only(endpoints.run(_evidence(objects)), "ENDPOINTS_NONE_READY")
    assert finding.title == "no ready vLLM pod behind llama-llmd-kserve-workload-svc"
    assert "none of its 2 vLLM pod(s) is ready" in finding.summary
