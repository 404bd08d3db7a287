"""The ``metric_pipeline`` step: failing fixtures per code, healthy fixtures, and the one patch it can offer."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from builders import CAPTURED_AT, WINDOW
from check_cases import apply_patch, codes, evidence_of, load_case, only, serious
from fakeapi import crds_for_every_kind_read
from promharness import PrometheusServer, prometheus_server  # noqa: F401  (the session fixture)

from nbhelpers.checks import STEP_IDS, metric_pipeline
from nbhelpers.errors import EvidenceMissing, StepSkipped
from nbhelpers.evidence.gather import gather
from nbhelpers.evidence.model import Target
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding, rank_root_causes
from nbhelpers.metrics import catalog
from nbhelpers.sources.cluster_live import LiveCluster
from nbhelpers.sources.metrics_live import LiveMetrics
from nbhelpers.util.times import query_step_seconds

RAW = "checks/healthy/raw.yaml"
CLUSTER = "checks/healthy/metric_pipeline_cluster.yaml"
CPU_HPA = "checks/healthy/metric_pipeline_cpu_hpa.yaml"
ADAPTER = "checks/healthy/metric_pipeline_adapter.yaml"
KEDA = "checks/healthy/metric_pipeline_keda.yaml"
QUEUE_HPA = "HorizontalPodAutoscaler/llm/vllm-llm-queue"
KSERVE_HPA = "HorizontalPodAutoscaler/llm/vllm-llm-predictor"
KEDA_HPA = "HorizontalPodAutoscaler/llm/keda-hpa-vllm-llm-predictor"
SCALED_OBJECT = "ScaledObject.keda.sh/llm/vllm-llm-predictor"
ISVC_REF = "InferenceService.serving.kserve.io/llm/vllm-llm"
POD = "vllm-llm-predictor-6d5f8b7c9-q8w2e"
STEP = query_step_seconds(WINDOW)


def _series(value: str = "1") -> list[dict[str, Any]]:
    """One series per predictor pod, the shape of the catalog's ``sum by (pod)`` queries."""
    return [{"metric": {"pod": POD}, "values": [[WINDOW.start.timestamp() + 60, value]]}]


def _metrics(**results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        query_id: {"promql": catalog.render(catalog.BY_ID[query_id], 0, "llm", "vllm-llm", STEP), "result": result}
        for query_id, result in results.items()
    }


QUEUE_SERIES_PRESENT = _metrics(vllm_waiting=_series(), pod_ready=_series())


def _run(*files: str, drop: tuple[str, ...] = (), metrics: dict[str, Any] | None = None) -> list:
    return metric_pipeline.run(evidence_of(load_case(*files, drop=drop), metrics=metrics))


HEALTHY = {
    "metrics-server Available, KServe cpu HPA at minReplicas (ScalingLimited/TooFewReplicas)": (
        (RAW, CLUSTER, CPU_HPA),
        None,
    ),
    "adapter healthy, series present, HPA held by scale-down stabilization": (
        (RAW, CLUSTER, ADAPTER),
        QUEUE_SERIES_PRESENT,
    ),
    "one FailedGetPodsMetric blip at start-up": (
        (RAW, CLUSTER, ADAPTER, "checks/healthy/metric_pipeline_startup_blip.yaml"),
        QUEUE_SERIES_PRESENT,
    ),
    "KEDA owns external metrics, adapter owns custom metrics": ((RAW, CLUSTER, KEDA), None),
}


@pytest.mark.parametrize("case", sorted(HEALTHY))
def test_healthy_pipelines_report_nothing(case: str) -> None:
    files, metrics = HEALTHY[case]
    assert _run(*files, metrics=metrics) == []


def test_serverless_kpa_only_is_skipped_as_knatives_own_pipeline() -> None:
    objects = load_case("checks/healthy/serverless.yaml", CLUSTER, "checks/healthy/metric_pipeline_kpa.yaml")
    with pytest.raises(StepSkipped) as skipped:
        metric_pipeline.run(evidence_of(objects))
    assert "PodAutoscaler.autoscaling.internal.knative.dev/llm/vllm-llm-predictor-00001" in skipped.value.reason
    assert "Knative's own metric pipeline" in skipped.value.reason


def test_no_autoscaler_is_skipped() -> None:
    with pytest.raises(StepSkipped) as skipped:
        _run(RAW, CLUSTER)
    assert "no HPA or ScaledObject" in skipped.value.reason


def test_unreadable_hpas_are_an_evidence_error() -> None:
    objects = load_case(RAW, CLUSTER, ADAPTER)
    reads = [{"what": "HorizontalPodAutoscaler in llm", "status": "forbidden", "reason": "403"}]
    with pytest.raises(EvidenceMissing) as missing:
        metric_pipeline.run(evidence_of(objects, reads=reads))
    assert missing.value.what == "HorizontalPodAutoscaler in llm"


# --- HPA_METRICS_API_UNAVAILABLE -----------------------------------------------------------------


def test_pods_metric_without_custom_metrics_api() -> None:
    findings = _run(
        RAW,
        "checks/HPA_METRICS_API_UNAVAILABLE/raw_pods_metric_no_custom_api.yaml",
    )
    assert codes(findings) == {"HPA_METRICS_API_UNAVAILABLE", "HPA_METRIC_FETCH_FAILED"}
    unavailable = only(findings, "HPA_METRICS_API_UNAVAILABLE")
    assert unavailable.level is Severity.CRITICAL
    assert unavailable.objects == (QUEUE_HPA,)
    assert "no APIService v1beta1.custom.metrics.k8s.io is registered" in unavailable.summary
    assert "APIService/v1beta1.custom.metrics.k8s.io: not registered" in unavailable.evidence
    assert "install a custom metrics adapter" in unavailable.remediation
    assert unavailable.patch is None
    fetch = only(findings, "HPA_METRIC_FETCH_FAILED")
    assert "FailedGetPodsMetric x240 (2026-01-15T11:00:10Z – 2026-01-15T11:59:55Z)" in fetch.evidence[1]
    assert "custom.metrics.k8s.io itself is down (HPA_METRICS_API_UNAVAILABLE)" in fetch.summary
    # The missing API is ranked before the failure it explains.
    assert rank_root_causes(findings, STEP_IDS) == ["HPA_METRICS_API_UNAVAILABLE", "HPA_METRIC_FETCH_FAILED"]


def test_apiservice_failed_discovery_check_is_quoted_with_its_backing_service() -> None:
    findings = _run(
        RAW,
        "checks/HPA_METRICS_API_UNAVAILABLE/adapter_failed_discovery_check.yaml",
        metrics=QUEUE_SERIES_PRESENT,
    )
    unavailable = only(findings, "HPA_METRICS_API_UNAVAILABLE")
    assert unavailable.objects == (
        "APIService/v1beta1.custom.metrics.k8s.io",
        "Service/monitoring/prometheus-adapter",
        "Deployment/monitoring/prometheus-adapter",
        QUEUE_HPA,
    )
    assert "Available=False (FailedDiscoveryCheck): 'failing or missing response from https://10.96.14.7:443" in (
        unavailable.summary
    )
    assert (
        "APIService/v1beta1.custom.metrics.k8s.io → Service/monitoring/prometheus-adapter (prometheus-adapter) → "
        "Deployment/monitoring/prometheus-adapter: 1/1 ready"
    ) in unavailable.evidence
    assert "kubectl get apiservice v1beta1.custom.metrics.k8s.io -o yaml" in unavailable.remediation
    assert (
        'kubectl get --raw "/apis/custom.metrics.k8s.io/v1beta1/namespaces/llm/pods/*/vllm_num_requests_waiting"'
        in unavailable.remediation
    )
    assert "kubectl -n monitoring logs deploy/prometheus-adapter" in unavailable.remediation


def test_metrics_server_without_endpoints_blinds_the_cpu_hpa() -> None:
    findings = _run(RAW, "checks/HPA_METRICS_API_UNAVAILABLE/metrics_server_missing_endpoints.yaml")
    unavailable = only(findings, "HPA_METRICS_API_UNAVAILABLE")
    assert unavailable.title.startswith("v1beta1.metrics.k8s.io is not available")
    assert "MissingEndpoints" in unavailable.summary and "provider's pods are down" in unavailable.summary
    assert any("Deployment/kube-system/metrics-server: 0/1 ready" in line for line in unavailable.evidence)
    fetch = only(findings, "HPA_METRIC_FETCH_FAILED")
    assert fetch.objects == (ISVC_REF, KSERVE_HPA)
    assert "FailedGetResourceMetric" in fetch.title


def test_apiservice_without_status_is_judged_by_its_provider() -> None:
    objects = load_case(RAW, CLUSTER, CPU_HPA)
    for obj in objects:
        if obj["kind"] == "APIService" and obj["metadata"]["name"] == "v1beta1.metrics.k8s.io":
            del obj["status"]
        if obj["kind"] == "Deployment" and obj["metadata"]["name"] == "metrics-server":
            obj["status"] = {"replicas": 1, "readyReplicas": 0}
    unavailable = only(metric_pipeline.run(evidence_of(objects)), "HPA_METRICS_API_UNAVAILABLE")
    assert "no pod of the provider behind v1beta1.metrics.k8s.io is ready" in unavailable.summary


# --- HPA_METRIC_FETCH_FAILED -----------------------------------------------------------------------


def test_forbidden_metrics_read_names_the_refused_user() -> None:
    findings = _run(
        RAW,
        "checks/HPA_METRIC_FETCH_FAILED/pods_metric_forbidden.yaml",
        metrics=QUEUE_SERIES_PRESENT,
    )
    assert codes(serious(findings)) == {"HPA_METRIC_FETCH_FAILED"}
    fetch = only(findings, "HPA_METRIC_FETCH_FAILED")
    assert fetch.level is Severity.CRITICAL
    assert fetch.objects == (ISVC_REF, QUEUE_HPA)
    assert fetch.title == f"{QUEUE_HPA} cannot fetch its metric (FailedGetPodsMetric, FailedComputeMetricsReplicas)"
    assert "RBAC refusal: 'system:serviceaccount:kube-system:horizontal-pod-autoscaler'" in fetch.summary
    assert fetch.evidence[0].startswith(f"{QUEUE_HPA}: ScalingActive=False (FailedGetPodsMetric): 'the HPA was unable")
    assert any("FailedComputeMetricsReplicas x238" in line for line in fetch.evidence)
    assert (
        "kubectl auth can-i get pods/vllm_num_requests_waiting.custom.metrics.k8s.io --all-namespaces "
        "--as=system:serviceaccount:kube-system:horizontal-pod-autoscaler"
    ) in fetch.remediation


def test_failures_in_the_window_count_after_recovery() -> None:
    findings = _run(
        RAW,
        "checks/HPA_METRIC_FETCH_FAILED/recovered_during_window.yaml",
        metrics=QUEUE_SERIES_PRESENT,
    )
    fetch = only(findings, "HPA_METRIC_FETCH_FAILED")
    assert "failed to read its metric 80 times in the window" in fetch.summary
    assert "reading again now" in fetch.summary
    assert "context deadline exceeded" in fetch.summary


def _cpu_hpa_failing(reason: str) -> list[dict[str, Any]]:
    """The healthy CPU-HPA case whose HPA cannot compute a replica count, for ``reason``."""
    objects = load_case(RAW, CLUSTER, CPU_HPA)
    hpa = next(obj for obj in objects if obj["kind"] == "HorizontalPodAutoscaler")
    hpa["status"]["conditions"][1] = {
        "type": "ScalingActive",
        "status": "False",
        "reason": "FailedGetResourceMetric",
        "message": f"the HPA was unable to compute the replica count: failed to get cpu utilization: {reason}",
    }
    return objects


def test_cpu_request_missing_is_referenced() -> None:
    objects = _cpu_hpa_failing(f"missing request for cpu in container kserve-container of Pod {POD}")
    fetch = only(metric_pipeline.run(evidence_of(objects)), "HPA_METRIC_FETCH_FAILED")
    assert "RESOURCES_REQUESTS_MISSING" in fetch.summary


def test_pods_might_be_unready_is_an_effect_of_the_unready_predictor() -> None:
    # Issue #14: the HPA's FailedGetResourceMetric "did not receive metrics for targeted pods (pods might be
    # unready)" ranked first above the VLLM_KV_CAPACITY_EXCEEDED that kept the pods down. The message is the
    # one metrics-server#1641 (https://github.com/kubernetes-sigs/metrics-server/issues/1641, incidents #64)
    # shows while no pod is ready. Before: HPA_METRIC_FETCH_FAILED critical, ranked first; after: a warning
    # that names the unready pods, ranked after the cause that keeps them unready.
    objects = _cpu_hpa_failing("did not receive metrics for targeted pods (pods might be unready)")
    # While the pods are ready, the same words mean a metrics server that returns nothing: still critical.
    assert only(metric_pipeline.run(evidence_of(objects)), "HPA_METRIC_FETCH_FAILED").level is Severity.CRITICAL
    for pod in (obj for obj in objects if obj["kind"] == "Pod"):
        for condition in pod["status"]["conditions"]:
            if condition["type"] in ("Ready", "ContainersReady"):
                condition["status"] = "False"
    findings = metric_pipeline.run(evidence_of(objects))
    fetch = only(findings, "HPA_METRIC_FETCH_FAILED")
    assert fetch.level is Severity.WARNING
    assert "none of its targeted pods is ready" in fetch.summary
    kv = Finding(code="VLLM_KV_CAPACITY_EXCEEDED", title="kv", summary="s")
    assert rank_root_causes([*findings, kv], STEP_IDS)[0] == "VLLM_KV_CAPACITY_EXCEEDED"
    unready = Finding(code="ENDPOINTS_NONE_READY", title="none ready", summary="s")
    assert rank_root_causes([*findings, unready], STEP_IDS) == ["ENDPOINTS_NONE_READY", "HPA_METRIC_FETCH_FAILED"]


def test_no_metrics_for_pods_that_never_run_is_an_effect() -> None:
    # Issue #14, scenario image-pull-denied (kserve/kserve#6215): KServe's CPU HPA over a pod stuck in
    # ImagePullBackOff. metrics-server has nothing for a pod with no running container, so the metrics client says
    # "no metrics returned from resource metrics API". Before: HPA_METRIC_FETCH_FAILED critical, "a broken metric
    # pipeline"; after: a warning naming the pods that never started.
    objects = _cpu_hpa_failing("unable to get metrics for resource cpu: no metrics returned from resource metrics API")
    # With the pods running, the same words mean metrics-server returns nothing: still critical.
    assert only(metric_pipeline.run(evidence_of(objects)), "HPA_METRIC_FETCH_FAILED").level is Severity.CRITICAL
    for pod in (obj for obj in objects if obj["kind"] == "Pod"):
        pod["status"]["phase"] = "Pending"
    fetch = only(metric_pipeline.run(evidence_of(objects)), "HPA_METRIC_FETCH_FAILED")
    assert fetch.level is Severity.WARNING
    assert "No predictor pod runs a container" in fetch.summary


def test_scaled_object_fallback_is_a_fetch_failure() -> None:
    objects = load_case(RAW, CLUSTER, KEDA)
    scaled_object = next(obj for obj in objects if obj["kind"] == "ScaledObject")
    scaled_object["status"]["conditions"][2] = {
        "type": "Fallback",
        "status": "True",
        "reason": "FallbackExists",
        "message": "At least one trigger is falling back on this scaled object",
    }
    fetch = only(metric_pipeline.run(evidence_of(objects)), "HPA_METRIC_FETCH_FAILED")
    assert fetch.objects == (ISVC_REF, KEDA_HPA, SCALED_OBJECT)
    assert fetch.evidence[0].startswith(f"{SCALED_OBJECT}: Fallback=True (FallbackExists)")
    assert "kubectl -n llm describe scaledobject vllm-llm-predictor" in fetch.remediation


def test_scaling_disabled_is_not_a_fetch_failure() -> None:
    objects = load_case(RAW, CLUSTER, CPU_HPA)
    hpa = next(obj for obj in objects if obj["kind"] == "HorizontalPodAutoscaler")
    hpa["status"]["conditions"][1] = {
        "type": "ScalingActive",
        "status": "False",
        "reason": "ScalingDisabled",
        "message": "scaling is disabled since the replica count of the target is zero",
    }
    assert metric_pipeline.run(evidence_of(objects)) == []


# --- HPA_METRIC_SERIES_MISSING ---------------------------------------------------------------------


def test_vllm_series_without_pod_label_leave_the_adapter_nothing() -> None:
    findings = _run(
        RAW,
        "checks/HPA_METRIC_SERIES_MISSING/vllm_series_lack_pod_label.yaml",
        metrics=_metrics(vllm_waiting=[], pod_ready=_series()),
    )
    assert codes(findings) == {"HPA_METRIC_SERIES_MISSING", "HPA_METRIC_FETCH_FAILED"}
    missing = only(findings, "HPA_METRIC_SERIES_MISSING")
    assert missing.level is Severity.WARNING
    assert missing.objects == (ISVC_REF, QUEUE_HPA, "ConfigMap/monitoring/prometheus-adapter")
    assert "no 'vllm:num_requests_waiting' series with namespace='llm'" in missing.summary
    assert "other series for these pods (pod_ready)" in missing.summary
    assert "Prometheus series behind it: vllm:num_requests_waiting" in missing.evidence
    assert (
        'query with no series in the window: sum by (pod) (vllm:num_requests_waiting{namespace="llm", '
        'pod=~"vllm-llm-predictor-.+"})'
    ) in missing.evidence
    assert missing.patch is None
    assert rank_root_causes(findings, STEP_IDS) == ["HPA_METRIC_SERIES_MISSING", "HPA_METRIC_FETCH_FAILED"]


def test_series_absent_everywhere_is_not_verified_rather_than_reported() -> None:
    findings = _run(RAW, CLUSTER, ADAPTER, metrics=_metrics(vllm_waiting=[], pod_ready=[]))
    note = only(findings, "HPA_METRIC_SERIES_MISSING")
    assert note.level is Severity.INFO
    assert "may not be the one the adapter queries" in note.summary


def test_without_prometheus_the_series_are_not_verified() -> None:
    note = only(_run(RAW, CLUSTER, ADAPTER), "HPA_METRIC_SERIES_MISSING")
    assert note.level is Severity.INFO
    assert "no Prometheus configured" in note.summary


def test_hpa_asking_for_the_prometheus_name_gets_the_adapters_name() -> None:
    objects = load_case(RAW, "checks/HPA_METRIC_SERIES_MISSING/hpa_asks_prometheus_name.yaml")
    findings = metric_pipeline.run(evidence_of(objects, metrics=QUEUE_SERIES_PRESENT))
    missing = only(findings, "HPA_METRIC_SERIES_MISSING")
    assert missing.level is Severity.WARNING
    assert "renames it to 'vllm_num_requests_waiting'" in missing.summary
    assert missing.patch is not None and missing.patch.target == QUEUE_HPA
    assert "kubectl patch horizontalpodautoscalers.autoscaling vllm-llm-queue -n llm --type merge" in (
        missing.remediation
    )
    patched = apply_patch(objects, missing)
    hpa = next(obj for obj in patched if obj["kind"] == "HorizontalPodAutoscaler")
    assert hpa["spec"]["metrics"][0]["pods"]["metric"]["name"] == "vllm_num_requests_waiting"
    assert hpa["spec"]["metrics"][0]["pods"]["target"] == {"type": "AverageValue", "averageValue": "5"}
    # Once the HPA asks for the exposed name (and the controller reads it again), nothing is left.
    hpa["status"] = copy.deepcopy(
        next(o for o in load_case(ADAPTER) if o["kind"] == "HorizontalPodAutoscaler")["status"]
    )
    assert metric_pipeline.run(evidence_of(patched, metrics=QUEUE_SERIES_PRESENT)) == []


def test_no_patch_for_an_hpa_kserve_generates() -> None:
    objects = load_case(RAW, "checks/HPA_METRIC_SERIES_MISSING/hpa_asks_prometheus_name.yaml")
    hpa = next(obj for obj in objects if obj["kind"] == "HorizontalPodAutoscaler")
    hpa["metadata"]["ownerReferences"] = [
        {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "name": "vllm-llm", "uid": "u"}
    ]
    missing = only(metric_pipeline.run(evidence_of(objects, metrics=QUEUE_SERIES_PRESENT)), "HPA_METRIC_SERIES_MISSING")
    assert missing.patch is None
    assert "No patch: HorizontalPodAutoscaler/llm/vllm-llm-queue is generated by InferenceService/vllm-llm" in (
        missing.remediation
    )


def test_rule_without_pod_association_cannot_serve_a_pods_metric() -> None:
    objects = load_case(RAW, CLUSTER, ADAPTER)
    config_map = next(
        obj for obj in objects if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == "prometheus-adapter"
    )
    rules = config_map["data"]["config.yaml"]
    config_map["data"]["config.yaml"] = rules.replace("      pod: {resource: pod}\n", "", 1)
    assert config_map["data"]["config.yaml"] != rules
    missing = only(metric_pipeline.run(evidence_of(objects, metrics=QUEUE_SERIES_PRESENT)), "HPA_METRIC_SERIES_MISSING")
    assert missing.level is Severity.WARNING
    assert "associates no label with pods" in missing.summary


# --- HPA_METRICS_API_CONFLICT ----------------------------------------------------------------------


def test_keda_and_adapter_both_claim_external_metrics() -> None:
    findings = _run(RAW, "checks/HPA_METRICS_API_CONFLICT/keda_and_adapter_external.yaml")
    assert codes(findings) == {"HPA_METRICS_API_CONFLICT", "HPA_METRIC_FETCH_FAILED"}
    conflict = only(findings, "HPA_METRICS_API_CONFLICT")
    assert conflict.level is Severity.WARNING
    assert conflict.objects == (
        "APIService/v1beta1.external.metrics.k8s.io",
        "Service/monitoring/prometheus-adapter",
        "Deployment/monitoring/prometheus-adapter",
        KEDA_HPA,
        SCALED_OBJECT,
    )
    assert "claimed by keda and prometheus-adapter" in conflict.summary
    assert "points at Service/monitoring/prometheus-adapter (prometheus-adapter)" in conflict.summary
    assert f"keda claims external.metrics.k8s.io: {SCALED_OBJECT} has status conditions" in conflict.evidence[1]
    assert "rules.external: []" in conflict.remediation
    # The ScaledObject and the HPA KEDA made for it are one failure, not two.
    fetch = only(findings, "HPA_METRIC_FETCH_FAILED")
    assert fetch.objects == (ISVC_REF, KEDA_HPA, SCALED_OBJECT)
    assert (
        'kubectl get --raw "/apis/external.metrics.k8s.io/v1beta1/namespaces/llm/s0-prometheus'
        '?labelSelector=scaledobject.keda.sh%2Fname%3Dvllm-llm-predictor"'
    ) in fetch.remediation
    assert rank_root_causes(findings, STEP_IDS) == ["HPA_METRICS_API_CONFLICT", "HPA_METRIC_FETCH_FAILED"]


def test_adapter_external_rules_shadowed_by_keda() -> None:
    findings = _run(
        RAW,
        "checks/HPA_METRICS_API_CONFLICT/adapter_external_rules_shadowed_by_keda.yaml",
    )
    conflict = only(findings, "HPA_METRICS_API_CONFLICT")
    assert "routes to keda, not prometheus-adapter" in conflict.title
    assert "External metric vllm_queue_depth (Value 20), which only prometheus-adapter serves" in conflict.summary
    assert conflict.objects[-1] == QUEUE_HPA


def test_two_providers_installed_without_a_stranded_metric_is_no_conflict() -> None:
    # The shadowed cluster, but the user's HPA reads a Pods metric the adapter serves through custom metrics.
    objects = load_case(
        RAW,
        "checks/HPA_METRICS_API_CONFLICT/adapter_external_rules_shadowed_by_keda.yaml",
    )
    hpa = next(obj for obj in objects if obj["kind"] == "HorizontalPodAutoscaler")
    hpa["spec"]["metrics"] = [
        {
            "type": "Pods",
            "pods": {
                "metric": {"name": "vllm_num_requests_running"},
                "target": {"type": "AverageValue", "averageValue": "48"},
            },
        }
    ]
    hpa["status"]["conditions"] = [{"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound"}]
    metrics = _metrics(vllm_running=_series("12"), pod_ready=_series())
    assert metric_pipeline.run(evidence_of(objects, metrics=metrics)) == []


# --- live: the fixture API server with the real kubernetes client, and the real Prometheus ---------------

LIVE_CASES = {
    "HPA_METRICS_API_UNAVAILABLE/raw_pods_metric_no_custom_api.yaml": "HPA_METRICS_API_UNAVAILABLE",
    "HPA_METRICS_API_UNAVAILABLE/adapter_failed_discovery_check.yaml": "HPA_METRICS_API_UNAVAILABLE",
    "HPA_METRICS_API_UNAVAILABLE/metrics_server_missing_endpoints.yaml": "HPA_METRICS_API_UNAVAILABLE",
    "HPA_METRIC_FETCH_FAILED/pods_metric_forbidden.yaml": "HPA_METRIC_FETCH_FAILED",
    "HPA_METRIC_FETCH_FAILED/recovered_during_window.yaml": "HPA_METRIC_FETCH_FAILED",
    "HPA_METRIC_SERIES_MISSING/hpa_asks_prometheus_name.yaml": "HPA_METRIC_SERIES_MISSING",
    "HPA_METRICS_API_CONFLICT/keda_and_adapter_external.yaml": "HPA_METRICS_API_CONFLICT",
    "HPA_METRICS_API_CONFLICT/adapter_external_rules_shadowed_by_keda.yaml": "HPA_METRICS_API_CONFLICT",
}


def _live_findings(objects: list[dict[str, Any]], fake_api: Any, kubeconfig: Path, prometheus_url: str) -> list:
    fake_api.cluster.add_all([*crds_for_every_kind_read(), *objects])
    metrics = LiveMetrics(prometheus_url, token=None, ca_file=None, headers={}, verify=True, timeout_seconds=10.0)
    try:
        with LiveCluster(str(kubeconfig), None, 5.0) as cluster:
            evidence = gather(cluster, metrics, Target("llm", "vllm-llm"), WINDOW, CAPTURED_AT)
    finally:
        metrics.close()
    return metric_pipeline.run(evidence)


@pytest.mark.integration
@pytest.mark.parametrize("case", sorted(LIVE_CASES))
def test_failing_fixtures_on_live_sources(
    case: str,
    fake_api: Any,
    kubeconfig: Path,
    prometheus_server: PrometheusServer,  # noqa: F811
) -> None:
    objects = load_case(RAW, f"checks/{case}")
    live = _live_findings(objects, fake_api, kubeconfig, prometheus_server.url)
    assert LIVE_CASES[case] in codes(serious(live))
    # The same cluster read from a bundle without metrics gives the same warnings and criticals; only the
    # series check reads Prometheus, and without it its note says "not verified" (info) instead of nothing.
    from_bundle = metric_pipeline.run(evidence_of(objects))
    assert [f.to_json() for f in serious(live)] == [f.to_json() for f in serious(from_bundle)]


@pytest.mark.integration
def test_healthy_adapter_with_real_prometheus_series(
    fake_api: Any,
    kubeconfig: Path,
    prometheus_server: PrometheusServer,  # noqa: F811
) -> None:
    # The backfilled Prometheus has vllm:num_requests_waiting with namespace and pod labels for vllm-llm's
    # predictor pods, so the adapter's rule is verified by real PromQL and nothing is reported.
    objects = load_case(RAW, CLUSTER, ADAPTER)
    assert _live_findings(objects, fake_api, kubeconfig, prometheus_server.url) == []


# --- KEDA's own trigger query (issue #15 item 4) -------------------------------------------------------------

KEDA_QUERY = 'sum(vllm:num_requests_waiting{namespace="llm", pod=~"vllm-llm-predictor-.+"})'


def _trigger(result: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The answer gather() recorded for the ScaledObject's first trigger, run as written."""
    return {"keda-trigger.vllm-llm-predictor.0": {"promql": KEDA_QUERY, "result": result}}


def test_keda_trigger_query_with_no_series_reads_as_zero() -> None:
    """KEDA runs the trigger's PromQL itself; an empty answer is 0 (ignoreNullValues defaults to true), so the
    wording names KEDA, not prometheus-adapter."""
    finding = only(_run(RAW, CLUSTER, KEDA, metrics=_trigger([])), "HPA_METRIC_SERIES_MISSING")
    assert finding.level is Severity.WARNING  # a pod is ready: the query's selectors are wrong
    assert finding.objects == (ISVC_REF, SCALED_OBJECT)
    assert "KEDA's metrics server runs itself (no prometheus-adapter on this path)" in finding.summary
    assert "ignoreNullValues defaults to true" in finding.summary
    assert f"trigger query with no series in the window: {KEDA_QUERY}" in finding.evidence
    assert 'ignoreNullValues: "false"' in finding.remediation


def test_keda_trigger_on_a_pod_metric_at_zero_replicas_never_activates() -> None:
    finding = only(
        _run(RAW, CLUSTER, KEDA, drop=(f"Pod/llm/{POD}",), metrics=_trigger([])), "HPA_METRIC_SERIES_MISSING"
    )
    assert finding.level is Severity.CRITICAL
    assert "nothing can ever activate the ScaledObject" in finding.summary
    assert finding.remediation.splitlines()[0].startswith("To scale from zero, activate on a signal")


def test_keda_trigger_query_with_series_is_fine() -> None:
    answer = [{"metric": {}, "values": [[WINDOW.start.timestamp() + 60, "3"]]}]
    assert "HPA_METRIC_SERIES_MISSING" not in codes(_run(RAW, CLUSTER, KEDA, metrics=_trigger(answer)))


def test_keda_trigger_on_ingress_requests_without_traffic_is_information() -> None:
    """An ingress' request series only exists once a request came: empty with no traffic anywhere is no fault."""
    objects = load_case(RAW, CLUSTER, KEDA)
    scaled_object = next(obj for obj in objects if obj["kind"] == "ScaledObject")
    query = 'sum(rate(nginx_ingress_controller_requests{exported_namespace="llm"}[1m]))'
    scaled_object["spec"]["triggers"][0]["metadata"]["query"] = query
    metrics = {"keda-trigger.vllm-llm-predictor.0": {"promql": query, "result": []}}
    finding = only(metric_pipeline.run(evidence_of(objects, metrics=metrics)), "HPA_METRIC_SERIES_MISSING")
    assert finding.level is Severity.INFO
    assert "may just mean no traffic" in finding.summary
