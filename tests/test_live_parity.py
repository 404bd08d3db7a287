"""Every check fixture gives the same findings from the live source as from a bundle.

The check tests read their fixtures through the bundle reader. Here the same objects are served by the
fixture API server and read with the real kubernetes client, so each code is shown to work on live
clusters too (issue 3: "all codes work on live and bundle sources").
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from builders import CAPTURED_AT, FIXTURES, WINDOW, evidence_from_objects
from checks.check_cases import ISVC, NAMESPACE, load_case
from fakeapi import FakeApiServer, crds_for_every_kind_read

from nbhelpers.checks import STEPS, check_for
from nbhelpers.evidence.gather import gather
from nbhelpers.evidence.model import LLM_INFERENCE_SERVICE, Evidence, Target
from nbhelpers.scenarios import load_spec
from nbhelpers.scenarios.answers import RawStore
from nbhelpers.scenarios.generator import (
    ScenarioCluster,
    ScenarioMetrics,
    build_logs,
    build_objects,
    scenario_plan,
    target,
)
from nbhelpers.scenarios.traffic import simulate
from nbhelpers.sources.cluster_live import LiveCluster
from nbhelpers.triage import run_step

pytestmark = pytest.mark.integration
LLMISVC_BASE = "checks/healthy/llmisvc.yaml"
LLMISVC = "llama-llmd"

# Cases whose code needs more than objects (logs, metrics, or a CRD that is not installed): their tests in
# tests/checks add those. Here they only show parity.
NEEDS_MORE_THAN_OBJECTS = {
    "RESOURCES_GPU_NOT_VISIBLE/serverless_cuda_hidden.yaml",  # logs
    "ROUTING_HOST_MISMATCH/raw_user_ingress.yaml",  # without KServe's own Ingress (the test drops it)
    "ROUTING_LAYER_MISMATCH/raw_gateway_api.yaml",  # the Gateway API CRD missing
    "ROUTING_LAYER_MISMATCH/serverless_no_knative.yaml",  # the Knative CRDs missing
    "TIMEOUT_LB_DEFAULT/raw_alb_idle_default.yaml",  # latency metrics
    "TIMEOUT_LB_DEFAULT/raw_nginx_default.yaml",  # latency metrics
    "TIMEOUT_LB_DEFAULT/llmisvc_envoy_gateway_default.yaml",  # latency metrics
    "TIMEOUT_LB_DEFAULT/raw_nginx_default_slow_first_token.yaml",  # latency and first-token metrics
    "GPU_OOM/raw_sampler_warmup_oom.yaml",  # the engine's log
    "HPA_TARGET_ABOVE_POD_CAPACITY/raw_target_above_measured_plateau.yaml",  # the measured plateau (metrics)
    "TIMEOUT_MISALIGNED/raw_httproute_short.yaml",  # latency metrics
    "COLDSTART_CHURN/serverless_scale_to_zero_flapping.yaml",  # the ready-pods series
    "HPA_BEHAVIOR_SLOW/raw_scale_up_one_pod_per_5min.yaml",  # metrics
    "HPA_METRIC_SERIES_MISSING/vllm_series_lack_pod_label.yaml",  # metrics
    "HPA_METRIC_SERIES_MISSING/llmisvc_keda_idle_zero.yaml",  # the trigger's empty answer, pods dropped
    "HPA_AT_MAX/llmisvc_keda_at_max.yaml",  # the queue metrics
    "GPU_OOM/raw_profiling_oom.yaml",  # logs
    "GPU_OOM/llmisvc_prefill_oom.yaml",  # logs
    "VLLM_KV_CAPACITY_EXCEEDED/serverless_v0_engine.yaml",  # logs
    "ENGINE_START_FAILED/raw_batched_tokens_below_model_len.yaml",  # the engine's log
    "ENGINE_START_FAILED/raw_tensor_parallel_above_gpus.yaml",  # the engine's log
    "CONTAINER_FAILING_UNKNOWN_CAUSE/raw_custom_predictor_exits.yaml",  # the container's log
    "CONTAINER_FAILING_UNKNOWN_CAUSE/raw_exec_format_error.yaml",  # the container's log
    "CONTAINER_FAILING_UNKNOWN_CAUSE/raw_huggingfaceserver_start_failed.yaml",  # the container's log
    "CONTAINER_FAILING_UNKNOWN_CAUSE/raw_sidecar_exec_format_error.yaml",  # the container's log
    "VLLM_MEMORY_UTILIZATION_RISKY/serverless_shared_gpu.yaml",  # logs
    "QUEUE_SATURATION/raw_at_max_replicas.yaml",  # metrics
    "QUEUE_SATURATION/serverless_max_num_seqs_32.yaml",  # metrics
    "QUEUE_SATURATION/llmisvc_roles_own_ceilings.yaml",  # metrics
    "KV_CACHE_PRESSURE/raw_long_contexts.yaml",  # metrics
    "KV_CACHE_PRESSURE/serverless_defaults.yaml",  # metrics
    "COLDSTART_SCALE_TO_ZERO/raw_keda_scaled_object_at_zero.yaml",  # at zero: the test drops the base's pod
    "COLDSTART_CHURN/raw_rollout_new_replicaset.yaml",  # the ready-pods series
    "COLDSTART_CHURN/raw_preempted_and_spot_node_lost.yaml",  # the ready-pods series
}


def _case_files() -> list[tuple[str, str]]:
    """(healthy base, failing file) for every failing fixture, and each healthy base alone."""
    cases = []
    for path in sorted((FIXTURES / "checks").glob("*/*.yaml")):
        relative = path.relative_to(FIXTURES).as_posix()
        if path.parent.name == "healthy":
            continue
        base = "checks/healthy/serverless.yaml" if path.name.startswith("serverless") else "checks/healthy/raw.yaml"
        if path.name.startswith("llmisvc"):
            base = LLMISVC_BASE
        cases.append((base, relative))
    bases = ("checks/healthy/raw.yaml", "checks/healthy/serverless.yaml", LLMISVC_BASE)
    return [*((base, "") for base in bases), *cases]


def _target(base: str) -> Target:
    """The InferenceService of the raw and serverless bases, the LLMInferenceService of the llmisvc one."""
    if base == LLMISVC_BASE:
        return Target(NAMESPACE, LLMISVC, LLM_INFERENCE_SERVICE)
    return Target(NAMESPACE, ISVC)


def _findings(evidence: Evidence) -> list[dict[str, object]]:
    """Every step's findings, through run_step as a triage runs them (a skipped step gives none)."""
    results = [run_step(step, check_for(step.id), evidence) for step in STEPS]
    assert all(result.status != "error" for result in results), [result.reason for result in results]
    return [finding.to_json() for result in results for finding in result.findings]


@pytest.mark.parametrize(("base", "case"), _case_files(), ids=lambda value: Path(value).stem or "base")
def test_live_and_bundle_sources_give_the_same_findings(
    base: str, case: str, fake_api: FakeApiServer, kubeconfig: Path
) -> None:
    objects = load_case(base, case) if case else load_case(base)
    fake_api.cluster.add_all([*crds_for_every_kind_read(), *objects])
    target = _target(base)
    with LiveCluster(str(kubeconfig), None, 5.0) as cluster:
        live = gather(cluster, None, target, WINDOW, CAPTURED_AT)
    from_bundle = evidence_from_objects(copy.deepcopy(objects), NAMESPACE, target.isvc, target.kind)
    assert _findings(live) == _findings(from_bundle)
    if case and case.removeprefix("checks/") not in NEEDS_MORE_THAN_OBJECTS:
        code = Path(case).parent.name
        assert code in {finding["code"] for finding in _findings(live)}, f"{case} shows no {code} on a live source"


def test_a_container_that_never_ran_is_not_asked_for_its_log(fake_api: FakeApiServer, kubeconfig: Path) -> None:
    """The kubelet has no log for a container waiting to start (here PodInitializing behind a CreateContainerConfigError
    init container): the API answers 400, so asking only turns a normal state into a failed read."""
    objects = load_case(
        "checks/healthy/raw.yaml", "checks/RESOURCES_CONTAINER_CONFIG_ERROR/raw_storage_initializer_secret_missing.yaml"
    )
    fake_api.cluster.add_all([*crds_for_every_kind_read(), *objects])
    with LiveCluster(str(kubeconfig), None, 5.0) as cluster:
        live = gather(cluster, None, Target(NAMESPACE, ISVC), WINDOW, CAPTURED_AT)
    assert not [request.path for request in fake_api.requests if request.path.endswith("/log")]
    assert live.failures() == ()


# Scenarios whose serving container never runs (issue #14): their generated cluster, served over HTTP by the fixture
# API server, gives the findings of the scenario bundle, and the code that leads the scenario.
NEVER_RUNS = {
    "init-gated-model-no-token": "RESOURCES_INIT_CONTAINER_FAILED",
    "init-storage-oomkilled": "RESOURCES_INIT_CONTAINER_FAILED",
    "image-pull-denied": "RESOURCES_IMAGE_PULL_FAILED",
    "image-digest-unresolved": "RESOURCES_IMAGE_PULL_FAILED",
    "rejected-limit-range": "RESOURCES_POD_CREATION_REJECTED",
    "rejected-quota-sidecar": "RESOURCES_POD_CREATION_REJECTED",
    "hf-token-secret-missing": "RESOURCES_CONTAINER_CONFIG_ERROR",
    "hf-token-secret-misnamed-serverless": "RESOURCES_CONTAINER_CONFIG_ERROR",
}
# Scenarios of the honest fallback (issue #14): a serving container that fails with an error no known cause names.
FAILS_UNKNOWN = {
    "container-cache-permission-denied": "CONTAINER_FAILING_UNKNOWN_CAUSE",
    "container-cache-root-not-hf-home": "CONTAINER_FAILING_UNKNOWN_CAUSE",
}
# The Serverless cases of the probe codes of issue #14 (item 6), read the same way (without Prometheus).
PROBE_SCENARIOS = {
    "queue-proxy-probe-port-unserved": "PROBE_SIDECAR_NOT_READY",
    "liveness-timeouts-under-load-serverless": "PROBE_FAILS_UNDER_LOAD",
}
LIVE_SCENARIOS = {**NEVER_RUNS, **FAILS_UNKNOWN, **PROBE_SCENARIOS}


@pytest.mark.parametrize("name", sorted(LIVE_SCENARIOS))
def test_scenarios_give_their_findings_on_a_live_source(name: str, fake_api: FakeApiServer, kubeconfig: Path) -> None:
    live = _live_and_bundle_agree(name, fake_api, kubeconfig, with_metrics=False)
    assert LIVE_SCENARIOS[name] in {finding["code"] for finding in live}


# Scenarios of issue #14's ranking rules (cause before effect, contradicted by the metrics, cut logs): (code, severity
# it must have) on a live source as from the bundle. Served with the scenario's metrics on both sides: the host rule
# reads the edge's 2xx.
RULE_SCENARIOS = {
    "raw-ingress-awaits-predictor": ("ROUTING_LAYER_MISMATCH", "info"),
    "raw-user-ingress-own-host": ("ROUTING_HOST_MISMATCH", "info"),
    "runtime-oom-after-hours-log-cut": ("GPU_OOM", "critical"),
    "serverless-ingress-awaits-predictor": ("ROUTING_LAYER_MISMATCH", "info"),
    "runtime-illegal-memory-access-log-cut-serverless": ("CONTAINER_FAILING_UNKNOWN_CAUSE", "warning"),
}


@pytest.mark.parametrize("name", sorted(RULE_SCENARIOS))
def test_rule_scenarios_give_their_findings_on_a_live_source(
    name: str, fake_api: FakeApiServer, kubeconfig: Path
) -> None:
    live = _live_and_bundle_agree(name, fake_api, kubeconfig, with_metrics=True)
    code, severity = RULE_SCENARIOS[name]
    assert (code, severity) in {(finding["code"], finding["severity"]) for finding in live}


# LLMInferenceService scenarios (issue #18): KServe's llm-d objects (the LLMInferenceService, HTTPRoute, Gateway,
# InferencePool, the endpoint picker and its log) served over HTTP give the bundle's findings, with the metrics on
# both sides; the code that leads each one ("" for the healthy one, which must give no warning or critical finding).
LLMISVC_SCENARIOS = {
    "llmisvc-healthy-prefix-cache": ("", ""),
    "llmisvc-picker-rbac-failclose": ("ENDPOINTS_PICKER_NOT_READY", "critical"),
    "llmisvc-pool-selector-label-renamed": ("ENDPOINTS_POOL_SELECTS_NO_POD", "critical"),
    "llmisvc-gateway-class-without-controller": ("ROUTING_GATEWAY_NOT_PROGRAMMED", "critical"),
    "llmisvc-route-empty-backends": ("ROUTING_HTTPROUTE_NOT_ACCEPTED", "critical"),
    # The condition lags behind a data plane that serves (kserve/kserve#5986): info, read from the metrics.
    "llmisvc-ready-false-while-serving": ("LLMISVC_NOT_READY", "info"),
    # A LeaderWorkerSet group whose worker never schedules: the LWS and both group pods read over HTTP.
    "llmisvc-multinode-worker-unschedulable": ("WORKLOAD_GROUP_INCOMPLETE", "critical"),
    # Prefill and decode Deployments, the decode pods' native sidecar; the prefill role's queue from the metrics.
    "llmisvc-pd-prefill-saturated": ("QUEUE_SATURATION", "warning"),
}


@pytest.mark.parametrize("name", sorted(LLMISVC_SCENARIOS))
def test_llmisvc_scenarios_give_their_findings_on_a_live_source(
    name: str, fake_api: FakeApiServer, kubeconfig: Path
) -> None:
    live = _live_and_bundle_agree(name, fake_api, kubeconfig, with_metrics=True)
    code, severity = LLMISVC_SCENARIOS[name]
    if code:
        assert (code, severity) in {(finding["code"], finding["severity"]) for finding in live}
    if severity in ("", "info"):  # a data plane that works: no warning or critical finding
        assert [finding for finding in live if finding["severity"] != "info"] == []


def _live_and_bundle_agree(
    name: str, fake_api: FakeApiServer, kubeconfig: Path, with_metrics: bool
) -> list[dict[str, object]]:
    """The scenario's generated cluster served over HTTP gives the findings the bundle gives (returned), every
    read succeeding; ``with_metrics``: both sides also read the scenario's metrics."""
    spec = load_spec(name)
    scenario = scenario_plan(spec)
    simulation = simulate(scenario)
    objects, logs = build_objects(scenario), build_logs(scenario, simulation)
    missing = set(spec.cluster.missing_crd_groups)
    crds = [crd for crd in crds_for_every_kind_read() if crd["spec"]["group"] not in missing]
    fake_api.cluster.add_all([*crds, *objects])
    for (namespace, pod, container, previous), text in logs.items():
        fake_api.cluster.add_log(namespace, pod, container, text, previous)
    service, window, captured = target(spec), spec.timeline.window, spec.timeline.captured_at
    metrics = ScenarioMetrics(spec, RawStore(simulation.families)) if with_metrics else None
    with LiveCluster(str(kubeconfig), None, 5.0) as cluster:
        live = gather(cluster, metrics, service, window, captured)
    offline = gather(ScenarioCluster(spec, objects, logs), metrics, service, window, captured)
    assert [record for record in live.failures() if record.status != "not_installed"] == []
    assert _findings(live) == _findings(offline)
    return _findings(live)
