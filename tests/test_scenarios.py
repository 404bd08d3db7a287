"""Scenario specs, the bundle generator and the realism validator (docs/architecture.md#testing)."""

from __future__ import annotations

import json
import math
import re
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml
from promharness import PrometheusServer, prometheus_serving
from scenario_cache import bundle_files, shared_bundles

from nbhelpers.checks import STEP_IDS
from nbhelpers.errors import ReadFailed
from nbhelpers.evidence.gather import gather
from nbhelpers.evidence.model import Evidence, Target
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding, rank_root_causes
from nbhelpers.metrics import catalog
from nbhelpers.metrics.openmetrics import SampleFamily, Series
from nbhelpers.scenarios import (
    DEFAULT_SCENARIO,
    ScenarioError,
    generate,
    list_scenarios,
    load_spec,
    scenario_bundle,
)
from nbhelpers.scenarios.answers import EVALUATORS, RawStore, answer, extrapolated_rate, histogram_quantile
from nbhelpers.scenarios.generator import RAW_METRICS_FILE, SPEC_FILE, ScenarioMetrics
from nbhelpers.scenarios.spec import ScenarioSpec, parse_spec
from nbhelpers.scenarios.validator import validate_bundle
from nbhelpers.sources import kinds, kube
from nbhelpers.sources.bundle import open_bundle, write_bundle_files
from nbhelpers.triage import TriageParams, run
from nbhelpers.util.times import parse_k8s_time

SHIPPED = (
    "port-mismatch",
    "healthy-serverless",
    "healthy-raw",
    "routing-layer-mismatch",
    "liveness-vs-warmup",
    "gpu-capacity",
    "host-oom",
    "scale-to-zero-cold-start",
    "cpu-hpa-on-gpu",
    "hpa-custom-metrics-missing",
    "nginx-timeout-long-generations",
    "gpu-oom-utilization",
    "hpa-target-not-serving",
    "kv-cache-max-model-len",
    "kv-cache-long-contexts",
    "hpa-at-max-spike",
    "hpa-target-at-ceiling",
    "rag-long-prompts-behind-nginx",
    "healthy-restart-after-days",
    "healthy-readiness-blip",
    "healthy-kv-cache-steady",
    "engine-batched-tokens",
    "engine-vllm-port-service-link",
    "engine-bf16-on-t4",
    "engine-tensor-parallel-above-gpus",
    "container-cache-permission-denied",
    "hf-token-secret-missing",
    "engine-gated-model-403",
    "knative-revision-timeout-long-generations",
    "old-vllm-histogram-cap-behind-nginx",
    "agent-readiness-404",
    "liveness-timeouts-under-load",
    "liveness-timeouts-under-load-serverless",
    "queue-proxy-probe-port-unserved",
    "init-gated-model-no-token",
    "init-storage-oomkilled",
    "image-pull-denied",
    "image-digest-unresolved",
    "rejected-limit-range",
    "rejected-quota-sidecar",
    "container-cache-root-not-hf-home",
    "hf-token-secret-misnamed-serverless",
    "raw-ingress-awaits-predictor",
    "raw-user-ingress-own-host",
    "runtime-oom-after-hours-log-cut",
    "serverless-ingress-awaits-predictor",
    "runtime-illegal-memory-access-log-cut-serverless",
    "llmisvc-healthy-prefix-cache",
    "llmisvc-picker-rbac-failclose",
    "llmisvc-pool-selector-label-renamed",
    "llmisvc-gateway-class-without-controller",
    "llmisvc-route-empty-backends",
    "llmisvc-ready-false-while-serving",
    "llmisvc-multinode-worker-unschedulable",
    "llmisvc-pd-prefill-saturated",
)
# Healthy services with a past (issue #14): the public report each one is built on.
HISTORY_SOURCES = {
    "healthy-restart-after-days": "https://github.com/kubernetes/kube-state-metrics/issues/2283",
    "healthy-readiness-blip": "https://github.com/llm-d/llm-d-benchmark/pull/1734",
    "healthy-kv-cache-steady": "https://stackpulsar.pages.dev/blog/vllm-production-monitoring",
}
# Engine start errors (issue #14, family 6 of /work/shared/incidents): the public report each one is built on.
ENGINE_ERROR_SOURCES = {
    "engine-batched-tokens": "https://github.com/verl-project/verl/pull/7626",
    "engine-vllm-port-service-link": "https://github.com/vllm-project/vllm/issues/34199",
    "engine-bf16-on-t4": "https://github.com/substratusai/vllm-docker/issues/37",
    "engine-tensor-parallel-above-gpus": "https://github.com/vllm-project/vllm/issues/25263",
    "engine-gated-model-403": "https://github.com/rh-ai-quickstart/ai-virtual-agent/issues/200",
}
# The honest fallback (issue #14, deliverable 3): a container error no known cause names, from a public report.
FALLBACK_SOURCES = {
    "container-cache-permission-denied": "https://github.com/huggingface/inference-benchmarker/issues/30",
    "container-cache-root-not-hf-home": "https://github.com/vllm-project/vllm/issues/20127",
}
# A serving container the kubelet cannot create (CreateContainerConfigError), from a public report.
CONFIG_ERROR_SOURCES = {
    "hf-token-secret-missing": "https://github.com/gyliu513/langX101/pull/390",
    "hf-token-secret-misnamed-serverless": "https://github.com/knative/serving/issues/5103",
}
# Knative's layers and vLLM's histogram cap (issue #15, items 1 and 2): the public report each one is built on.
KNATIVE_LAYER_SOURCES = {
    "knative-revision-timeout-long-generations": "https://github.com/knative/serving/issues/15352",
    "old-vllm-histogram-cap-behind-nginx": "https://github.com/vllm-project/vllm/issues/15167",
}
# Containers that never run (issue #14, families 4 and 5 of /work/shared/incidents): the public report each one is built
# on, and the code that must lead its ranking.
NEVER_RUNS_SOURCES = {
    "init-gated-model-no-token": ("https://github.com/kserve/kserve/issues/4400", "RESOURCES_INIT_CONTAINER_FAILED"),
    "init-storage-oomkilled": ("https://github.com/kserve/kserve/pull/4726", "RESOURCES_INIT_CONTAINER_FAILED"),
    "image-pull-denied": ("https://github.com/kserve/kserve/issues/6215", "RESOURCES_IMAGE_PULL_FAILED"),
    "image-digest-unresolved": ("https://github.com/kserve/kserve/issues/993", "RESOURCES_IMAGE_PULL_FAILED"),
    "rejected-limit-range": ("https://github.com/kserve/kserve/issues/867", "RESOURCES_POD_CREATION_REJECTED"),
    "rejected-quota-sidecar": ("https://github.com/kserve/kserve/issues/1242", "RESOURCES_POD_CREATION_REJECTED"),
}
# Rules of issue #14 (cause before effect, contradicted by the metrics, cut logs): the public report each scenario is
# built on, and the code that must lead its ranking.
RULE_SOURCES = {
    "raw-ingress-awaits-predictor": ("https://github.com/QwenLM/Qwen3/issues/295", "VLLM_KV_CAPACITY_EXCEEDED"),
    "raw-user-ingress-own-host": ("https://github.com/kserve/kserve/issues/3286", ""),  # healthy: no root cause
    "runtime-oom-after-hours-log-cut": ("https://github.com/vllm-project/vllm/issues/13067", "GPU_OOM"),
    "serverless-ingress-awaits-predictor": (
        "https://github.com/vllm-project/vllm/issues/10517",
        "VLLM_KV_CAPACITY_EXCEEDED",
    ),
    "runtime-illegal-memory-access-log-cut-serverless": (
        "https://github.com/vllm-project/vllm/issues/5687",
        "CONTAINER_FAILING_UNKNOWN_CAUSE",
    ),
}
# The probe codes added for issue #14 (item 6: a Serverless and a RawDeployment scenario each, from public reports):
# the report each scenario is built on, and the code it is about: first in its ranking, or after the cause the catalog
# says explains it (PORT_MISMATCH explains PROBE_*).
PROBE_SOURCES = {
    "agent-readiness-404": ("https://github.com/kserve/kserve/issues/5341", "PROBE_SIDECAR_NOT_READY"),
    "liveness-timeouts-under-load": ("https://github.com/llm-d/llm-d-benchmark/pull/1734", "PROBE_FAILS_UNDER_LOAD"),
    "liveness-timeouts-under-load-serverless": (
        "https://github.com/scaleapi/llm-engine/pull/255",
        "PROBE_FAILS_UNDER_LOAD",
    ),
    "queue-proxy-probe-port-unserved": ("https://github.com/knative/serving/issues/14021", "PROBE_SIDECAR_NOT_READY"),
}
# LLMInferenceService scenarios (issue #18): the public report each one is built on, and the code that must lead its
# ranking ("" for the healthy one: no root cause).
LLMISVC_SOURCES = {
    "llmisvc-healthy-prefix-cache": ("https://github.com/kserve/website/pull/539", ""),
    "llmisvc-picker-rbac-failclose": ("https://github.com/istio/istio.io/issues/17528", "ENDPOINTS_PICKER_NOT_READY"),
    "llmisvc-pool-selector-label-renamed": (
        "https://github.com/kserve/kserve/pull/5374",
        "ENDPOINTS_POOL_SELECTS_NO_POD",
    ),
    "llmisvc-gateway-class-without-controller": (
        "https://github.com/kgateway-dev/kgateway/issues/14012",
        "ROUTING_GATEWAY_NOT_PROGRAMMED",
    ),
    "llmisvc-route-empty-backends": ("https://github.com/kserve/kserve/issues/5385", "ROUTING_HTTPROUTE_NOT_ACCEPTED"),
    # Ready=False while serving: LLMISVC_NOT_READY is info, so nothing is ranked.
    "llmisvc-ready-false-while-serving": ("https://github.com/kserve/kserve/issues/5986", ""),
    "llmisvc-multinode-worker-unschedulable": (
        "https://github.com/dsx-ai-factory/workload-map/issues/228",
        "WORKLOAD_GROUP_INCOMPLETE",
    ),
    "llmisvc-pd-prefill-saturated": ("https://github.com/llm-d/llm-d-router/issues/1186", "QUEUE_SATURATION"),
}
# Every scenario budget together: generation must stay cheap enough to run on each test session. About 0.3 s a
# scenario on an idle 2-core machine; a second a scenario leaves room for a loaded one (the suite runs on every core).
GENERATION_BUDGET_SECONDS = 1.0 * len(SHIPPED)


@pytest.fixture(scope="module")
def bundles(scenario_cache: Path) -> dict[str, dict[str, bytes]]:
    """What ``generate`` gave for each shipped spec: generated once per session for every module and worker."""
    return {name: bundle_files(path) for name, path in shared_bundles(scenario_cache, SHIPPED).items()}


def evidence_of(files: dict[str, bytes]) -> Evidence:
    cluster, metrics, manifest = open_bundle(Path("<scenario>"), files)
    target = Target(manifest.namespace, manifest.isvc, manifest.kind)
    return gather(cluster, metrics, target, manifest.window, manifest.captured_at)


def variant(name: str, *replacements: tuple[str, str]) -> ScenarioSpec:
    """A shipped spec with some of its text replaced (each replacement must apply)."""
    text = (Path(__file__).parents[1] / "scenarios" / f"{name}.yaml").read_text()
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new)
    return parse_spec(text, f"{name} (variant)")


def matrix(files: dict[str, bytes], query_id: str) -> list[dict[str, object]]:
    result: list[dict[str, object]] = json.loads(files[f"metrics/{query_id}.json"])["data"]["result"]
    return result


# ---- specs -------------------------------------------------------------------------------------


def not_installed(spec: ScenarioSpec) -> set[str]:
    """The reads a capture records as not installed: the namespaced kinds of the missing CRD groups."""
    namespaced = {
        "keda.sh": ["ScaledObject.keda.sh"],
        "gateway.networking.k8s.io": ["HTTPRoute.gateway.networking.k8s.io"],
        "networking.istio.io": ["VirtualService.networking.istio.io"],
        "inference.networking.x-k8s.io": ["InferencePool.inference.networking.x-k8s.io"],
    }
    return {
        f"{kind} in {spec.isvc.namespace}" for group in spec.cluster.missing_crd_groups for kind in namespaced[group]
    }


def test_shipped_scenarios_are_listed_with_the_default_first_class() -> None:
    specs = {spec.name: spec for spec in list_scenarios()}
    assert set(SHIPPED) == set(specs)
    assert DEFAULT_SCENARIO == "port-mismatch"
    assert specs["port-mismatch"].symptom == "503"
    assert specs["port-mismatch"].expected_root_causes == ("PORT_MISMATCH", "ENDPOINTS_NONE_READY", "ISVC_NOT_READY")
    assert specs["healthy-serverless"].faults == ()


def test_expected_root_causes_follow_the_ranking_rules() -> None:
    for spec in list_scenarios():
        shuffled = sorted(spec.expected_root_causes, reverse=True)
        ranked = rank_root_causes((Finding(code=code, title="t", summary="s") for code in shuffled), STEP_IDS)
        assert tuple(ranked) == spec.expected_root_causes, spec.name


def test_unknown_scenario_names_the_known_ones() -> None:
    with pytest.raises(ScenarioError, match=r"unknown scenario 'nope'.*port-mismatch"):
        load_spec("nope")


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("listen_port: 8000", "listen_port: 8080", "listen_port equals container_port"),
        ("autoscaler_class: none", "autoscaler_class: kpa", "kpa needs the Serverless deployment mode"),
        ('symptom: "503"', "symptom: slow", "symptom is 'slow'"),
        ("[PORT_MISMATCH,", "[PORT_MISMTACH,", "unknown codes: PORT_MISMTACH"),
        ("deployed_at: 2026-01-15T11:12:00Z", "deployed_at: 2026-01-15T10:12:00Z", "deployed_at must lie inside"),
        ("type: port_mismatch", "type: typo", "faults\\[0\\].type is 'typo'"),
    ],
)
def test_spec_errors_name_the_field(old: str, new: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        variant("port-mismatch", (old, new))


def test_serverless_scenarios_refuse_autoscaler_classes_the_generator_does_not_model() -> None:
    with pytest.raises(ScenarioError, match="model Knative's KPA only"):
        variant("healthy-serverless", ("autoscaler_class: kpa", "autoscaler_class: hpa"))


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("kind: LLMInferenceService", "kind: InferenceServiceX", "isvc.kind is 'InferenceServiceX'"),
        ("failure_mode: FailOpen", "failure_mode: Open", "llmisvc.failure_mode is 'Open'"),
        ("scheduler: true", "scheduler: false", "pool_selector_misses: the service has no scheduler"),
        ("kind: LLMInferenceService", "kind: InferenceService", "isvc.deployment_mode is required"),
        ("selector: {llm-pool: qwen2-7b}", "selector: {}", "selector must map the labels"),
    ],
)
def test_llmisvc_spec_errors_name_the_field(old: str, new: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        variant("llmisvc-pool-selector-label-renamed", (old, new))


@pytest.mark.parametrize(
    ("name", "old", "new", "message"),
    [
        (
            "llmisvc-multinode-worker-unschedulable",
            "parallelism: {data: 16, data_local: 8}",
            "parallelism: {data: 12, data_local: 8}",
            "llmisvc.parallelism.data must be a multiple of data_local",
        ),
        (
            "llmisvc-multinode-worker-unschedulable",
            "  parallelism: {data: 16, data_local: 8}",
            "  prefill_replicas: 0",
            "group_worker_unschedulable: the service is single-node",
        ),
        (
            "llmisvc-multinode-worker-unschedulable",
            "  parallelism: {data: 16, data_local: 8}",
            "  parallelism: {data: 16, data_local: 8}\n  prefill_replicas: 1",
            "prefill_replicas beside a multi-node workload is not rendered yet",
        ),
        ("llmisvc-pd-prefill-saturated", "prefill_replicas: 1", "prefill_replicas: 0", "prefill_args are the prefill"),
    ],
)
def test_multinode_and_prefill_spec_errors_name_the_field(name: str, old: str, new: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        variant(name, (old, new))


@pytest.mark.parametrize(
    ("name", "old", "new", "message"),
    [
        ("liveness-vs-warmup", "initialDelaySeconds: 60", "initialDelaySeconds: 600", "nothing would be killed"),
        ("host-oom", "memory_limit: 16Gi", "memory_limit: 24Gi", "within the 24Gi limit: nothing would be killed"),
        ("host-oom", "memory_limit: 16Gi", "memory_limit: lots", "memory_limit must be a Kubernetes quantity"),
        ("gpu-capacity", "pending_pods: 2", "pending_pods: 3", "pending_pods exceeds min_replicas"),
        ("routing-layer-mismatch", "ingress: kourier", "ingress: istio", "set cluster.ingress: kourier"),
        (
            "routing-layer-mismatch",
            "[networking.istio.io, keda.sh,",
            "[keda.sh,",
            "must list networking.istio.io on a Kourier cluster",
        ),
        ("host-oom", "weights_format: pt", "weights_format: gguf", "weights_format is 'gguf'"),
        (
            "scale-to-zero-cold-start",
            ", 0]\n",
            ", 0.1]\n",
            "the traffic never pauses",
        ),
        ("scale-to-zero-cold-start", "min_replicas: 1", "min_replicas: 2", "baseline min_replicas must be 1"),
        ("cpu-hpa-on-gpu", "max_replicas: 4", "max_replicas: 1", "the HPA could not scale anyway"),
        ("cpu-hpa-on-gpu", "autoscaler_class: hpa", "autoscaler_class: none", "needs KServe's HPA"),
        ("hpa-custom-metrics-missing", "autoscaler_class: external", "autoscaler_class: hpa", "class external"),
        ("nginx-timeout-long-generations", "output_tokens: 2000", "output_tokens: 1200", "nothing would be cut"),
        ("nginx-timeout-long-generations", "ingress: nginx", "ingress: istio", "needs cluster.ingress nginx"),
        ("gpu-oom-utilization", "gpu_memory_utilization: 0.95", "gpu_memory_utilization: 0.9", "nothing would run"),
        ("gpu-oom-utilization", "gpu_memory_utilization: 0.95", "gpu_memory_utilization: 1.5", "a fraction in"),
        (
            "hpa-target-not-serving",
            "stale_deployment: doc-qa-predictor-canary",
            "stale_deployment: doc-qa-predictor",
            "not the serving doc-qa-predictor",
        ),
        ("hpa-target-not-serving", "max_replicas: 4", "max_replicas: 1", "nothing would scale"),
        ("kv-cache-max-model-len", "max_model_len: 32768", "max_model_len: 29360", "nothing would be refused"),
        ("kv-cache-max-model-len", "weights_gib: 14.9888", "weights_gib: 19.9", "leave no KV cache at all"),
        ("hpa-target-not-serving", "autoscaler_class: external", "autoscaler_class: hpa", "class external"),
        ("kv-cache-long-contexts", "prompt_tokens: 12000", "prompt_tokens: 3000", "the flag, not the cache"),
        ("kv-cache-long-contexts", "prompt_tokens: 12000", "prompt_tokens: 16000", "set --max-model-len"),
        ("kv-cache-long-contexts", "since: 2026-03-18T12:15:00Z", "since: 2026-03-18T12:03:30Z", "model loaded"),
        ("kv-cache-long-contexts", '--max-num-seqs, "48", ', "", "set --max-num-seqs"),
        ("hpa-at-max-spike", "max_replicas: 3", "max_replicas: 4", "nothing would queue at the maximum"),
        ("hpa-at-max-spike", "average_value: 48", "average_value: 64", "set --max-num-seqs above average_value"),
        ("hpa-at-max-spike", "autoscaler_class: external", "autoscaler_class: hpa", "class external"),
        ("hpa-target-at-ceiling", "average_value: 64", "average_value: 51", "set --max-num-seqs at or below"),
        ("hpa-target-at-ceiling", "min_replicas: 1", "min_replicas: 2", "nothing would queue without scaling"),
        ("hpa-target-at-ceiling", "max_replicas: 4", "max_replicas: 1", "nothing would scale"),
        (
            "hpa-target-at-ceiling",
            'metric: "vllm:num_requests_running"',
            'metric: "vllm:num_requests_waiting"',
            "must count running requests",
        ),
        (
            "hpa-target-at-ceiling",
            "  - type: hpa_target_above_capacity\n",
            "  - type: custom_metrics_api_missing\n  - type: hpa_target_above_capacity\n",
            "the owner has one working HPA",
        ),
        ("rag-long-prompts-behind-nginx", "output_tokens: 2000", "output_tokens: 1200", "nothing would be cut"),
        ("rag-long-prompts-behind-nginx", "prompt_tokens: 9000", "prompt_tokens: 3000", "the flag, not the cache"),
        (
            "healthy-restart-after-days",
            "at: 2026-02-12T11:47:00Z",
            "at: 2026-02-09T10:14:30Z",
            "must fall after the pod served",
        ),
        ("healthy-restart-after-days", "{pod: 0, at:", "{pod: 2, at:", "pod 2 does not exist"),
        ("healthy-restart-after-days", "reason: Unknown,", "reason: Rebooted,", "reason is 'Rebooted'"),
        ("healthy-restart-after-days", "average_value: 64", "average_value: 4", "the HPA would scale out"),
        (
            "healthy-restart-after-days",
            "autoscaler_class: external",
            "autoscaler_class: none",
            "needs RawDeployment and class external",
        ),
        ("healthy-readiness-blip", "seconds: 35}", "seconds: 15}", "the pod would never turn unready"),
        (
            "healthy-readiness-blip",
            "  readiness_blips:\n",
            # A Serverless restart too close to the capture: the engine could not load again before it.
            "  restarts:\n    - {pod: 0, at: 2026-03-04T09:59:00Z, down_seconds: 10}\n  readiness_blips:\n",
            "leave it time to load again before the capture",
        ),
        (
            "healthy-readiness-blip",
            "faults: []",
            "faults:\n  - type: port_mismatch\n    listen_port: 8000",
            "a spec with history has no faults",
        ),
        ("healthy-kv-cache-steady", "source: https://", "source: http://", "must be the https:// address"),
        ("healthy-kv-cache-steady", "history: {}\n", "", "deployed_at must lie inside the window"),
    ],
)
def test_fault_errors_say_why_nothing_would_break(name: str, old: str, new: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        variant(name, (old, new))


# ---- generation ----------------------------------------------------------------------------------


# One more generation of the whole library serves two tests: the budget test times it and the reproducibility test
# compares it with the session's bundles (tests/scenario_cache.py). Their tests share one xdist worker.
GENERATED_AGAIN = pytest.mark.xdist_group("scenarios-generated-again")


@pytest.fixture(scope="module")
def generated_again() -> tuple[dict[str, dict[str, bytes]], float]:
    """Every shipped spec generated in this process, one after another, and the seconds that took."""
    started = time.perf_counter()
    files = {spec.name: generate(spec) for spec in list_scenarios()}
    return files, time.perf_counter() - started


@GENERATED_AGAIN
@pytest.mark.parametrize("name", SHIPPED)
def test_generation_is_reproducible_byte_for_byte(
    name: str, bundles: dict[str, dict[str, bytes]], generated_again: tuple[dict[str, dict[str, bytes]], float]
) -> None:
    assert generated_again[0][name] == bundles[name]


def test_the_seed_drives_the_noise(bundles: dict[str, dict[str, bytes]]) -> None:
    reseeded = generate(variant("healthy-serverless", ("seed: 7", "seed: 8")))
    assert reseeded["metrics/vllm_running.json"] != bundles["healthy-serverless"]["metrics/vllm_running.json"]
    assert reseeded["scenario/spec.yaml"] != bundles["healthy-serverless"]["scenario/spec.yaml"]


@pytest.mark.parametrize("name", SHIPPED)
def test_bundle_is_the_capture_layout_and_reads_back(name: str, bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles[name]
    manifest = json.loads(files["manifest.json"])
    spec = load_spec(name)
    assert manifest["bundle_version"] == 1
    assert manifest["tool_version"] == "scenario"
    assert manifest["captured_at"] == spec.timeline.captured_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert yaml.safe_load(files[SPEC_FILE])["name"] == name
    assert set(json.loads(files["metrics/index.json"])) == {query.id for query in catalog.CATALOG}
    evidence = evidence_of(files)
    assert evidence.failures() == ()
    assert {record.what for record in evidence.not_seen() if record.status == "not_installed"} == not_installed(spec)
    # A container that never ran (never created, or waiting on its image or init containers) has no log.
    ran = any(
        "running" in (status.get("state") or {}) or (status.get("lastState") or {}).get("terminated")
        for pod in evidence.of(kinds.POD)
        for status in kube.status(pod).get("containerStatuses") or []
    )
    serving_container = kube.LLMISVC_CONTAINER if spec.isvc.is_llmisvc else kube.SERVING_CONTAINER
    # vLLM logs its version when it starts: a service deployed before the window (history) started out of sight.
    # (queue-proxy runs even beside a serving container the kubelet never creates; it says nothing of vLLM.)
    serving_ran = any(
        "running" in (status.get("state") or {}) or (status.get("lastState") or {}).get("terminated")
        for pod in evidence.of(kinds.POD)
        for status in kube.status(pod).get("containerStatuses") or []
        if status.get("name") == serving_container and kube.is_predictor(pod)
    )
    # A container the history restarts inside the window logs it at its new start.
    restarted_in_window = any(
        spec.timeline.window.contains(r.at) for r in (spec.history.restarts if spec.history else ())
    )
    started_in_window = serving_ran and (
        spec.timeline.window.contains(spec.timeline.deployed_at) or restarted_in_window
    )
    versions = {
        "kubernetes": spec.cluster.kubernetes,
        **({"vllm": spec.isvc.vllm_version} if started_in_window else {}),
    }
    assert evidence.versions == versions
    # An LLMInferenceService has no deployment mode (an InferenceService notion).
    assert evidence.deployment_mode == ("unknown" if spec.isvc.is_llmisvc else spec.isvc.deployment_mode)
    # Only a working HPA driven past its maximum (hpa_at_max) leaves more pods than the minimum: all of them.
    scaled_out = any(fault.type == "hpa_at_max" for fault in spec.faults)
    # A Revision Knative could not resolve, and pods the API server refused, leave no pod at all.
    never_created = any(fault.type in ("image_digest_unresolved", "pod_creation_rejected") for fault in spec.faults)
    wanted = spec.isvc.max_replicas if scaled_out else spec.isvc.min_replicas
    # A multi-node LLMInferenceService runs each replica as a LeaderWorkerSet group of pods.
    wanted *= spec.router.group_size if spec.router is not None else 1
    # A disaggregated one runs its prefill pods beside them.
    wanted += spec.router.prefill_replicas if spec.router is not None else 0
    # An LLMInferenceService's endpoint picker runs one pod beside the vLLM pods.
    picker = 1 if spec.router is not None and spec.router.scheduler else 0
    assert len(evidence.of(kinds.POD)) == (0 if never_created else wanted + picker)
    init_failed = any(fault.type == "init_container_fails" for fault in spec.faults)
    assert bool(evidence.logs) == (ran or init_failed), "the capture reads the logs of every container that ran"


@pytest.mark.parametrize("name", SHIPPED)
def test_generated_bundles_pass_the_validator(name: str, bundles: dict[str, dict[str, bytes]]) -> None:
    assert validate_bundle(bundles[name]) == []


@GENERATED_AGAIN
def test_every_scenario_generates_within_the_budget(
    generated_again: tuple[dict[str, dict[str, bytes]], float],
) -> None:
    assert generated_again[1] < GENERATION_BUDGET_SECONDS


def test_every_catalog_id_has_an_evaluator() -> None:
    assert set(EVALUATORS) == {query.id for query in catalog.CATALOG}


def test_port_mismatch_evidence_tells_one_story(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["port-mismatch"]
    evidence = evidence_of(files)
    (pod,) = evidence.of(kinds.POD)
    container = pod["spec"]["containers"][0]
    assert "--port" not in container["args"]
    assert container["ports"][0]["containerPort"] == 8080
    assert container["readinessProbe"]["httpGet"]["port"] == 8080
    assert not kube.pod_ready(pod) and kube.restart_count(pod) == 0
    (log,) = evidence.logs
    assert "Starting vLLM API server 0 on http://0.0.0.0:8000" in log.text
    assert "GPU KV cache size: 1,016,944 tokens" in log.text
    assert re.search(r"Maximum concurrency for 8,192 tokens per request: 124\.14x", log.text)
    unhealthy = [event for event in evidence.events if event["reason"] == "Unhealthy"]
    assert len(unhealthy) == 1 and unhealthy[0]["count"] > 250
    assert unhealthy[0]["message"].endswith(":8080: connect: connection refused")
    (endpoints,) = evidence.of(kinds.ENDPOINTS)
    assert [len(subset.get("addresses", [])) for subset in endpoints["subsets"]] == [0]
    assert kube.condition(evidence.isvc, "Ready")["reason"] == "MinimumReplicasUnavailable"  # type: ignore[index]
    # Prometheus scrapes 8080 as well: no vLLM series at all, only 503s at the gateway once clients call.
    assert evidence.metrics["vllm_running"].status == "empty"
    assert [series["metric"] for series in matrix(files, "istio_requests_by_code")] == [
        {"response_code": "503", "response_flags": "UH"}
    ]
    assert {value for _, value in matrix(files, "pod_ready")[0]["values"]} == {"0.0"}  # type: ignore[index]


def test_history_scenarios_name_their_public_report() -> None:
    from click.testing import CliRunner

    from nbhelpers.cli.main import cli

    specs = {spec.name: spec for spec in list_scenarios()}
    assert {name: specs[name].source for name in HISTORY_SOURCES} == HISTORY_SOURCES
    assert all(not specs[name].expected_root_causes and specs[name].history for name in HISTORY_SOURCES)
    listed = CliRunner().invoke(cli, ["scenarios", "list"])
    assert listed.exit_code == 0, listed.output
    lines = {line.split()[0]: line for line in listed.output.splitlines()}
    for name, source in HISTORY_SOURCES.items():
        assert lines[name].endswith(f"none             intermediate {source}")
    assert lines["port-mismatch"].split() == ["port-mismatch", "503", "beginner"]


def test_engine_error_scenarios_name_their_public_report_and_lead_with_the_engine() -> None:
    specs = {spec.name: spec for spec in list_scenarios()}
    assert {name: specs[name].source for name in ENGINE_ERROR_SOURCES} == ENGINE_ERROR_SOURCES
    assert all(specs[name].expected_root_causes[0] == "ENGINE_START_FAILED" for name in ENGINE_ERROR_SOURCES)
    assert {specs[name].isvc.deployment_mode for name in ENGINE_ERROR_SOURCES} == {"Serverless", "RawDeployment"}


def test_fallback_scenarios_name_their_public_report_and_lead_with_the_quoted_error() -> None:
    specs = {spec.name: spec for spec in list_scenarios()}
    assert {name: specs[name].source for name in FALLBACK_SOURCES} == FALLBACK_SOURCES
    assert all(specs[name].expected_root_causes[0] == "CONTAINER_FAILING_UNKNOWN_CAUSE" for name in FALLBACK_SOURCES)
    assert {name: specs[name].source for name in CONFIG_ERROR_SOURCES} == CONFIG_ERROR_SOURCES
    assert all(
        specs[name].expected_root_causes[0] == "RESOURCES_CONTAINER_CONFIG_ERROR" for name in CONFIG_ERROR_SOURCES
    )
    for sources in (FALLBACK_SOURCES, CONFIG_ERROR_SOURCES):
        assert {specs[name].isvc.deployment_mode for name in sources} == {"Serverless", "RawDeployment"}


def test_a_serverless_container_never_created_shows_in_the_revision(bundles: dict[str, dict[str, bytes]]) -> None:
    """knative/serving reconcileDeployment: past the progress deadline the Revision carries the pod's waiting reason;
    queue-proxy runs beside the serving container the kubelet cannot create."""
    evidence = evidence_of(bundles["hf-token-secret-misnamed-serverless"])
    (revision,) = evidence.of(kinds.KNATIVE_REVISION)
    for kind in ("ResourcesAvailable", "Ready"):
        condition = kube.condition(revision, kind)
        assert (condition["status"], condition["reason"]) == ("False", "CreateContainerConfigError")
        assert condition["message"] == 'secret "hf-token" not found'
    assert kube.condition(revision, "ContainerHealthy")["status"] == "Unknown"
    (pod,) = evidence.of(kinds.POD)
    states = {status["name"]: status["state"] for status in pod["status"]["containerStatuses"]}
    assert states["kserve-container"]["waiting"]["reason"] == "CreateContainerConfigError"
    assert "running" in states["queue-proxy"]


def test_never_running_scenarios_name_their_report_and_cover_both_modes() -> None:
    specs = {spec.name: spec for spec in list_scenarios()}
    assert {name: specs[name].source for name in NEVER_RUNS_SOURCES} == {
        name: source for name, (source, _) in NEVER_RUNS_SOURCES.items()
    }
    for name, (_, code) in NEVER_RUNS_SOURCES.items():
        assert specs[name].expected_root_causes[0] == code
    for code in {code for _, code in NEVER_RUNS_SOURCES.values()}:
        modes = {specs[name].isvc.deployment_mode for name, (_, c) in NEVER_RUNS_SOURCES.items() if c == code}
        assert modes == {"Serverless", "RawDeployment"}, code


def test_rule_scenarios_name_their_report_and_lead_with_the_cause() -> None:
    specs = {spec.name: spec for spec in list_scenarios()}
    assert {name: specs[name].source for name in RULE_SOURCES} == {
        name: source for name, (source, _) in RULE_SOURCES.items()
    }
    for name, (_, code) in RULE_SOURCES.items():
        assert (specs[name].expected_root_causes or ("",))[0] == code, name


def test_a_raw_predictor_never_ready_has_no_ingress_yet(bundles: dict[str, dict[str, bytes]]) -> None:
    """kube_ingress_reconciler.go createRawIngress: no Ingress and no URL before PredictorReady is true."""
    evidence = evidence_of(bundles["raw-ingress-awaits-predictor"])
    assert not evidence.of(kinds.INGRESS)
    ingress_ready = kube.condition(evidence.isvc, "IngressReady")
    assert ingress_ready is not None
    assert (ingress_ready["status"], ingress_ready["reason"]) == ("False", "Predictor ingress not created")
    assert "url" not in kube.status(evidence.isvc) and "address" not in kube.status(evidence.isvc)
    served = evidence_of(bundles["healthy-raw"])  # ready once: KServe created the Ingress and the URL
    assert served.of(kinds.INGRESS) and kube.condition_true(served.isvc, "IngressReady")


def test_a_serverless_predictor_never_ready_has_no_top_level_virtual_service(
    bundles: dict[str, dict[str, bytes]],
) -> None:
    """ingress_reconciler.go createIngress and PropagateStatus: Knative's routes for the revision exist, KServe's
    VirtualService ``<isvc>`` and the URL do not before PredictorReady is true."""
    evidence = evidence_of(bundles["serverless-ingress-awaits-predictor"])
    names = {kube.name(service) for service in evidence.of(kinds.VIRTUAL_SERVICE)}
    assert names == {"notes-summarizer-predictor-ingress", "notes-summarizer-predictor-mesh"}
    ingress_ready = kube.condition(evidence.isvc, "IngressReady")
    assert ingress_ready is not None
    assert (ingress_ready["status"], ingress_ready["reason"]) == ("False", "Predictor ingress not created")
    status = kube.status(evidence.isvc)
    assert "url" not in status and "address" not in status and "url" not in status["components"]["predictor"]
    served = evidence_of(bundles["healthy-serverless"])  # ready: KServe's VirtualService and URL are there
    assert "chat-assist" in {kube.name(service) for service in served.of(kinds.VIRTUAL_SERVICE)}
    assert kube.condition_true(served.isvc, "IngressReady") and kube.status(served.isvc)["url"]


def test_an_owner_ingress_replaces_kserve_s(bundles: dict[str, dict[str, bytes]]) -> None:
    """disableIngressCreation (kserve/kserve#3286): the owner's Ingress on its own host carries the traffic."""
    files = bundles["raw-user-ingress-own-host"]
    evidence = evidence_of(files)
    (ingress,) = evidence.of(kinds.INGRESS)
    assert kube.name(ingress) == "docs-chat-public" and not kube.metadata(ingress).get("ownerReferences")
    assert [rule["host"] for rule in ingress["spec"]["rules"]] == ["llm.docs.internal.example.org"]
    config = evidence.config_map("kserve", "inferenceservice-config")
    assert config is not None and json.loads(config["data"]["ingress"])["disableIngressCreation"] is True
    assert kube.status(evidence.isvc)["url"] == "http://docs-chat-knowledge.example.com"
    assert kube.condition_true(evidence.isvc, "IngressReady")
    raw = files[RAW_METRICS_FILE].decode()
    assert 'host="llm.docs.internal.example.org",ingress="docs-chat-public"' in raw


def test_a_previous_log_read_for_the_window_misses_a_long_run_s_start(bundles: dict[str, dict[str, bytes]]) -> None:
    """vllm-project/vllm#13067 after 6.5 h of serving: the window's part of the log is stats, then the traceback."""
    evidence = evidence_of(bundles["runtime-oom-after-hours-log-cut"])
    (pod,) = [pod for pod in evidence.of(kinds.POD) if kube.restart_count(pod)]
    last = serving_status(pod)["lastState"]["terminated"]
    started, finished = parse_k8s_time(last["startedAt"]), parse_k8s_time(last["finishedAt"])
    assert started is not None and finished is not None
    assert (last["reason"], last["exitCode"]) == ("Error", 1) and (finished - started).total_seconds() > 6.5 * 3600
    (previous,) = [log for log in evidence.logs if log.previous]
    lines = previous.text.splitlines()
    assert "Avg prompt throughput" in lines[0] and "Finished server process" in lines[-1]
    assert not any("vLLM API server version" in line or "non-default args" in line for line in lines)
    assert any("torch.OutOfMemoryError: CUDA out of memory" in line for line in lines)


def test_a_serverless_engine_that_died_while_serving_restarts_kserve_container_only(
    bundles: dict[str, dict[str, bytes]],
) -> None:
    """vllm-project/vllm#5687 under Serverless: kserve-container restarted after 7 h, queue-proxy ran on; the
    previous log read for the window holds stats, then the illegal memory access, and no engine start."""
    evidence = evidence_of(bundles["runtime-illegal-memory-access-log-cut-serverless"])
    (pod,) = [pod for pod in evidence.of(kinds.POD) if kube.restart_count(pod)]
    statuses = {status["name"]: status for status in pod["status"]["containerStatuses"]}
    assert statuses["queue-proxy"]["restartCount"] == 0 and statuses["kserve-container"]["ready"]
    last = statuses["kserve-container"]["lastState"]["terminated"]
    started, finished = parse_k8s_time(last["startedAt"]), parse_k8s_time(last["finishedAt"])
    assert started is not None and finished is not None
    assert (last["reason"], last["exitCode"]) == ("Error", 1) and (finished - started).total_seconds() > 7 * 3600
    (previous,) = [log for log in evidence.logs if log.previous]
    lines = previous.text.splitlines()
    assert "Avg prompt throughput" in lines[0] and "Finished server process" in lines[-1]
    assert not any("vLLM API server version" in line or "non-default args" in line for line in lines)
    assert any("CUDA error: an illegal memory access was encountered" in line for line in lines)


def test_llmisvc_scenarios_name_their_report_and_lead_with_the_cause() -> None:
    specs = {spec.name: spec for spec in list_scenarios()}
    assert {name: specs[name].source for name in LLMISVC_SOURCES} == {
        name: source for name, (source, _) in LLMISVC_SOURCES.items()
    }
    for name, (_, code) in LLMISVC_SOURCES.items():
        assert specs[name].isvc.is_llmisvc, name
        assert (specs[name].expected_root_causes[:1] or ("",))[0] == code, name


def test_an_llmisvc_bundle_holds_what_kserve_renders(bundles: dict[str, dict[str, bytes]]) -> None:
    """Names, labels and the container as KServe's llmisvc controller renders them (docs/upstream-facts.md)."""
    evidence = evidence_of(bundles["llmisvc-healthy-prefix-cache"])
    assert evidence.target.kind == "LLMInferenceService"
    names = {
        kinds_name: sorted(kube.name(obj) for obj in evidence.of(kind))
        for kinds_name, kind in (
            ("deployments", kinds.DEPLOYMENT),
            ("services", kinds.SERVICE),
            ("routes", kinds.HTTP_ROUTE),
            ("pools", kinds.INFERENCE_POOL),
        )
    }
    assert names == {
        "deployments": ["metrics-server", "support-chat-kserve", "support-chat-kserve-router-scheduler"],
        "services": ["metrics-server", "support-chat-epp-service", "support-chat-kserve-workload-svc"],
        "routes": ["support-chat-kserve-route"],
        "pools": ["support-chat-inference-pool"],
    }
    workload = [pod for pod in evidence.of(kinds.POD) if kube.is_llmisvc_workload(pod)]
    assert len(workload) == 3
    for pod in workload:
        assert kube.name(pod).startswith("support-chat-kserve-")
        assert kube.labels(pod)[kube.LLMISVC_ROLE_LABEL] == "both"
        (container,) = kube.spec(pod)["containers"]
        assert container["name"] == "main" and container["ports"][0]["containerPort"] == 8000
    (pool,) = evidence.of(kinds.INFERENCE_POOL)
    assert kube.spec(pool)["endpointPickerRef"]["failureMode"] == "FailOpen"
    assert {entry["type"]: entry["status"] for entry in kube.conditions(evidence.isvc)}["Ready"] == "True"
    running = json.loads(bundles["llmisvc-healthy-prefix-cache"]["metrics/vllm_running.json"])["data"]["result"]
    assert sorted(series["metric"]["pod"] for series in running) == sorted(kube.name(pod) for pod in workload)


def test_a_crash_looping_picker_under_failopen_backs_off_and_keeps_the_pods_serving() -> None:
    """The picker_not_ready fault with restarts: CrashLoopBackOff, its previous log, and (FailOpen) traffic on."""
    spec = variant(
        "llmisvc-picker-rbac-failclose",
        ("restarts: 0", "restarts: 4"),
        ("failure_mode: FailClose", "failure_mode: FailOpen"),
    )
    files = generate(spec)
    assert validate_bundle(files) == []
    evidence = evidence_of(files)
    (picker,) = [pod for pod in evidence.of(kinds.POD) if not kube.is_llmisvc_workload(pod)]
    (status,) = kube.status(picker)["containerStatuses"]
    assert status["restartCount"] == 4 and status["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert {(log.pod, log.previous) for log in evidence.logs if log.pod == kube.name(picker)} == {
        (kube.name(picker), False),
        (kube.name(picker), True),
    }
    running = json.loads(files["metrics/vllm_request_rate.json"])["data"]["result"]
    assert any(float(value) > 0 for series in running for _, value in series["values"])


def test_probe_scenarios_name_their_report_and_cover_both_modes() -> None:
    specs = {spec.name: spec for spec in list_scenarios()}
    assert {name: specs[name].source for name in PROBE_SOURCES} == {
        name: source for name, (source, _) in PROBE_SOURCES.items()
    }
    for name, (_, code) in PROBE_SOURCES.items():
        causes = specs[name].expected_root_causes
        assert causes[0] == code or causes[:2] == ("PORT_MISMATCH", code), name
    for code in {code for _, code in PROBE_SOURCES.values()}:
        modes = {specs[name].isvc.deployment_mode for name, (_, c) in PROBE_SOURCES.items() if c == code}
        assert modes == {"Serverless", "RawDeployment"}, code


def test_a_failing_storage_initializer_keeps_the_pod_initializing(bundles: dict[str, dict[str, bytes]]) -> None:
    """kserve/kserve#4400: the init container crash-loops with its error in its log; vLLM never starts."""
    evidence = evidence_of(bundles["init-gated-model-no-token"])
    (pod,) = evidence.of(kinds.POD)
    status = pod["status"]
    assert status["phase"] == "Pending"
    assert kube.condition(pod, "Initialized")["reason"] == "ContainersNotInitialized"
    (init,) = status["initContainerStatuses"]
    assert init["state"]["waiting"]["reason"] == "CrashLoopBackOff" and init["restartCount"] > 5
    assert init["lastState"]["terminated"]["exitCode"] == 1
    assert "Please log in." in init["lastState"]["terminated"]["message"]
    assert [c["state"]["waiting"]["reason"] for c in status["containerStatuses"]] == ["PodInitializing"]
    assert pod["spec"]["initContainers"][0]["args"] == ["hf://meta-llama/Meta-Llama-3-8B-Instruct", "/mnt/models"]
    logs = {(log.container, log.previous): log.text for log in evidence.logs}
    assert "GatedRepoError: 401" in logs[("storage-initializer", True)]
    assert not any(container == kube.SERVING_CONTAINER for container, _ in logs)
    oom = evidence_of(bundles["init-storage-oomkilled"])
    statuses = [pod["status"]["initContainerStatuses"][0] for pod in oom.of(kinds.POD)]
    assert {s["lastState"]["terminated"]["reason"] for s in statuses} == {"OOMKilled"}


def test_an_image_the_registry_denies_backs_off(bundles: dict[str, dict[str, bytes]]) -> None:
    evidence = evidence_of(bundles["image-pull-denied"])
    (pod,) = evidence.of(kinds.POD)
    (serving,) = pod["status"]["containerStatuses"]
    assert serving["state"]["waiting"]["reason"] == "ImagePullBackOff" and serving["restartCount"] == 0
    reasons = {(event["reason"], event["message"].split(":")[0]) for event in evidence.events}
    assert ("Failed", 'Failed to pull image "ghcr.io/docs-team/vllm-openai') in reasons
    assert ("BackOff", 'Back-off pulling image "ghcr.io/docs-team/vllm-openai') in reasons


def test_an_unresolved_digest_leaves_no_deployment_and_no_pod(bundles: dict[str, dict[str, bytes]]) -> None:
    """kserve/kserve#993: the Revision reconciler stops at the digest; nothing below the Revision exists."""
    evidence = evidence_of(bundles["image-digest-unresolved"])
    assert not [d for d in evidence.of(kinds.DEPLOYMENT) if kube.is_predictor(d)]
    assert not evidence.of(kinds.POD) and not evidence.of(kinds.POD_AUTOSCALER)
    (revision,) = evidence.of(kinds.KNATIVE_REVISION)
    healthy = kube.condition(revision, "ContainerHealthy")
    assert healthy["reason"] == "ContainerMissing" and "failed to resolve image to digest" in healthy["message"]


def test_refused_pods_show_only_on_the_replica_set(bundles: dict[str, dict[str, bytes]]) -> None:
    for name, message in (
        ("rejected-limit-range", "maximum memory usage per Container is 32Gi, but limit is 48Gi"),
        ("rejected-quota-sidecar", "failed quota: kf-resource-quota: must specify memory"),
    ):
        evidence = evidence_of(bundles[name])
        assert not evidence.of(kinds.POD), name
        (deployment,) = [d for d in evidence.of(kinds.DEPLOYMENT) if kube.is_predictor(d)]
        assert deployment["spec"]["replicas"] == 1 and not deployment["status"]["replicas"]
        assert message in kube.condition(deployment, "ReplicaFailure")["message"]
        (replica_set,) = [r for r in evidence.of(kinds.REPLICA_SET) if kube.is_predictor(r)]
        (failed,) = [event for event in evidence.events_about("ReplicaSet", kube.name(replica_set))]
        assert failed["reason"] == "FailedCreate" and failed["message"].endswith(message) and failed["count"] > 10


def test_restart_after_days_shows_only_in_the_pod_status(bundles: dict[str, dict[str, bytes]]) -> None:
    """A node reboot hours before the window: the pod status says it all, the window's events and logs nothing."""
    files = bundles["healthy-restart-after-days"]
    evidence = evidence_of(files)
    pods = {kube.name(pod): pod for pod in evidence.of(kinds.POD)}
    restarted = [pod for pod in pods.values() if kube.restart_count(pod)]
    assert len(pods) == 2 and len(restarted) == 1 and all(kube.pod_ready(pod) for pod in pods.values())
    (pod,) = restarted
    status = serving_status(pod)
    assert status["restartCount"] == 1
    assert status["lastState"]["terminated"] == {
        **status["lastState"]["terminated"],
        "exitCode": 255,
        "reason": "Unknown",
        "finishedAt": "2026-02-12T11:47:00Z",
    }
    assert status["state"]["running"]["startedAt"] == "2026-02-12T11:50:30Z"  # the node was down 210 s
    ready = parse_k8s_time(kube.condition(pod, "Ready")["lastTransitionTime"])  # type: ignore[index]
    assert ready is not None and 60 < (ready - parse_k8s_time("2026-02-12T11:50:30Z")).total_seconds() < 100  # type: ignore[operator]
    assert kube.created(pod) == "2026-02-09T10:14:03Z"
    assert evidence.events == ()  # everything happened before the window
    previous = next(log for log in evidence.logs if log.previous)
    assert previous.pod == kube.name(pod) and previous.text == ""
    restarts = {series["metric"]["pod"]: series["values"][-1][1] for series in matrix(files, "pod_restarts")}  # type: ignore[index]
    assert restarts[kube.name(pod)] == "1.0"
    assert {series["metric"]["reason"] for series in matrix(files, "pod_last_terminated_reason")} == {"Unknown"}  # type: ignore[index]
    (hpa,) = evidence.of(kinds.HPA)
    assert {c["type"]: c["status"] for c in hpa["status"]["conditions"]} == {
        "AbleToScale": "True",
        "ScalingActive": "True",
        "ScalingLimited": "False",
    }


def test_readiness_blip_leaves_the_containers_running(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["healthy-readiness-blip"]
    evidence = evidence_of(files)
    pods = list(evidence.of(kinds.POD))
    assert all(kube.pod_ready(pod) and kube.restart_count(pod) == 0 for pod in pods)
    blipped = next(pod for pod in pods if kube.condition(pod, "Ready")["lastTransitionTime"] > "2026-03-04")  # type: ignore[index]
    assert kube.condition(blipped, "Ready")["lastTransitionTime"] == "2026-03-04T09:41:47Z"  # type: ignore[index]
    assert kube.created(blipped) < "2026-03-03"
    (unhealthy,) = events_of(evidence, "Unhealthy", kube.name(blipped))
    assert unhealthy["message"] == "Readiness probe failed: HTTP probe failed with statuscode: 503"
    assert unhealthy["involvedObject"]["fieldPath"] == "spec.containers{queue-proxy}"
    assert unhealthy["lastTimestamp"] == "2026-03-04T09:41:37Z"  # the fourth failed check of the blip
    ready = [float(value) for _, value in matrix(files, "pod_ready")[0]["values"]]  # type: ignore[index]
    assert ready.count(1.0) == 1 and set(ready) == {1.0, 2.0}  # out of the endpoints for one 15 s sample
    running = {series["metric"]["pod"]: series["values"] for series in matrix(files, "vllm_running")}  # type: ignore[index]
    assert any(float(value) > 0 for _, value in running[kube.name(blipped)][:100])  # serving before 09:41
    codes = {series["metric"]["response_code"] for series in matrix(files, "istio_requests_by_code")}  # type: ignore[index]
    assert codes == {"200"}


def test_kv_cache_high_but_steady(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["healthy-kv-cache-steady"]
    usage = [float(v) for series in matrix(files, "vllm_kv_cache_usage") for _, v in series["values"]]  # type: ignore[union-attr]
    waiting = [float(v) for series in matrix(files, "vllm_waiting") for _, v in series["values"]]  # type: ignore[union-attr]
    preempted = [float(v) for series in matrix(files, "vllm_preemptions_rate") for _, v in series["values"]]  # type: ignore[union-attr]
    assert 0.78 < sum(usage) / len(usage) < 0.85 and min(usage) > 0.6 and max(usage) < 0.98
    assert max(waiting) == 0 and max(preempted) == 0
    (pod,) = evidence_of(files).of(kinds.POD)
    assert kube.created(pod) == "2026-03-13T08:05:03Z" and kube.restart_count(pod) == 0


def test_healthy_serverless_runs_below_its_ceiling(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["healthy-serverless"]
    evidence = evidence_of(files)
    names = {kube.name(obj) for obj in evidence.of(kinds.SERVICE)}
    assert {"chat-assist-predictor", "chat-assist-predictor-00001", "chat-assist-predictor-00001-private"} <= names
    assert all(kube.pod_ready(pod) for pod in evidence.of(kinds.POD))
    running = [float(v) for series in matrix(files, "vllm_running") for _, v in series["values"]]  # type: ignore[union-attr]
    waiting = [float(v) for series in matrix(files, "vllm_waiting") for _, v in series["values"]]  # type: ignore[union-attr]
    assert 5 < max(running) < 64 and max(waiting) == 0
    codes = {series["metric"]["response_code"] for series in matrix(files, "istio_requests_by_code")}  # type: ignore[index]
    assert codes == {"200"}


def test_saturation_makes_requests_wait_at_the_ceiling() -> None:
    spec = variant("healthy-serverless", ("[2026-01-15T09:40:00Z, 8.0]", "[2026-01-15T09:40:00Z, 60.0]"))
    files = generate(spec)
    assert validate_bundle(files) == []
    running = [float(v) for series in matrix(files, "vllm_running") for _, v in series["values"]]  # type: ignore[union-attr]
    waiting = [float(v) for series in matrix(files, "vllm_waiting") for _, v in series["values"]]  # type: ignore[union-attr]
    assert max(running) == 64 and max(waiting) > 50


def test_raw_deployment_with_an_hpa_is_consistent() -> None:
    spec = variant(
        "port-mismatch", ("autoscaler_class: none", "autoscaler_class: hpa"), ("max_replicas: 1", "max_replicas: 3")
    )
    files = generate(spec)
    assert validate_bundle(files) == []
    evidence = evidence_of(files)
    (hpa,) = evidence.of(kinds.HPA)
    assert hpa["spec"]["scaleTargetRef"]["name"] == "qwen-chat-predictor"
    assert any(event["reason"] == "FailedGetResourceMetric" for event in evidence.events)
    assert evidence.metrics["hpa_current_replicas"].status == "ok"


def test_scenario_bundle_is_written_once_and_reused(tmp_path: Path) -> None:
    first = scenario_bundle("port-mismatch", tmp_path)
    stamp = (first / "manifest.json").stat().st_mtime_ns
    assert scenario_bundle("port-mismatch", tmp_path) == first
    assert (first / "manifest.json").stat().st_mtime_ns == stamp
    assert validate_bundle(first) == []
    assert (first / RAW_METRICS_FILE).read_text().endswith("# EOF\n")


def serving_status(pod: dict[str, Any]) -> dict[str, Any]:
    status: dict[str, Any] = next(c for c in pod["status"]["containerStatuses"] if c["name"] == kube.SERVING_CONTAINER)
    return status


def events_of(evidence: Evidence, reason: str, pod: str) -> list[dict[str, Any]]:
    return [
        dict(event) for event in evidence.events if event["reason"] == reason and event["involvedObject"]["name"] == pod
    ]


def test_routing_layer_mismatch_evidence_tells_one_story(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["routing-layer-mismatch"]
    evidence = evidence_of(files)
    # The pods are fine and ready; the InferenceService has no status because KServe never got past its ingress.
    assert all(kube.pod_ready(pod) and kube.restart_count(pod) == 0 for pod in evidence.of(kinds.POD))
    assert kube.status(evidence.isvc) == {}
    assert evidence.of(kinds.VIRTUAL_SERVICE) == ()
    assert evidence.failure("VirtualService.networking.istio.io").status == "not_installed"  # type: ignore[union-attr]
    config = evidence.config_map("kserve", "inferenceservice-config")
    assert json.loads(config["data"]["ingress"])["disableIstioVirtualHost"] is False  # type: ignore[index]
    services = {kube.name(svc): svc for svc in evidence.of(kinds.SERVICE)}
    assert services["summarizer"]["spec"]["externalName"] == "knative-local-gateway.istio-system.svc.cluster.local"
    assert services["summarizer-predictor"]["spec"]["externalName"] == (
        "kourier-internal.kourier-system.svc.cluster.local"
    )
    # Client traffic never reaches the engines: no Istio metrics, nothing running, no served requests.
    assert evidence.metrics["istio_requests_by_code"].status == "empty"
    running = [float(v) for series in matrix(files, "vllm_running") for _, v in series["values"]]  # type: ignore[union-attr]
    assert running and max(running) == 0
    assert evidence.metrics["knative_requests_by_code"].status == "empty"


def test_liveness_kills_evidence_tells_one_story(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["liveness-vs-warmup"]
    evidence = evidence_of(files)
    liveness = evidence.isvc["spec"]["predictor"]["model"]["livenessProbe"]
    assert liveness["initialDelaySeconds"] == 60 and "readinessProbe" in evidence.isvc["spec"]["predictor"]["model"]
    for pod in evidence.of(kinds.POD):
        name, status = kube.name(pod), serving_status(pod)
        restarts = status["restartCount"]
        assert restarts >= 8 and not kube.pod_ready(pod)
        assert status["lastState"]["terminated"]["exitCode"] == 137
        assert status["lastState"]["terminated"]["reason"] == "Error"
        ran = parse_k8s_time(status["lastState"]["terminated"]["finishedAt"]) - parse_k8s_time(  # type: ignore[operator]
            status["lastState"]["terminated"]["startedAt"]
        )
        assert ran.total_seconds() == pytest.approx(60 + 2 * 10 + 30, abs=1)  # third failure, then the grace period
        (killing,) = events_of(evidence, "Killing", name)
        # Every run was killed: all of them while the pod waits in back-off, all but the current one otherwise.
        assert killing["count"] == restarts + (1 if "waiting" in status["state"] else 0)
        assert killing["message"] == "Container kserve-container failed liveness probe, will be restarted"
        (unhealthy,) = [e for e in events_of(evidence, "Unhealthy", name) if "Liveness" in e["message"]]
        assert 3 * killing["count"] <= unhealthy["count"] <= 3 * killing["count"] + 2  # failureThreshold 3 per kill
        assert events_of(evidence, "BackOff", name)
    previous = next(log for log in evidence.logs if log.previous)
    last_line = previous.text.splitlines()[-1]
    assert re.search(r"Loading safetensors checkpoint shards: +\d+% Completed \| \d+/17 ", last_line)
    assert "Application startup complete." not in previous.text
    restarts = {series["metric"]["pod"]: float(series["values"][-1][1]) for series in matrix(files, "pod_restarts")}  # type: ignore[index]
    assert restarts == {kube.name(pod): float(serving_status(pod)["restartCount"]) for pod in evidence.of(kinds.POD)}
    reasons = {series["metric"]["reason"] for series in matrix(files, "pod_last_terminated_reason")}  # type: ignore[index]
    assert reasons == {"Error"}
    assert evidence.metrics["vllm_running"].status == "empty"  # the engine never served a scrape
    assert {s["metric"]["response_code"] for s in matrix(files, "istio_requests_by_code")} == {"503"}  # type: ignore[index]


def test_gpu_capacity_evidence_tells_one_story(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["gpu-capacity"]
    evidence = evidence_of(files)
    nodes = len(evidence.of(kinds.NODE))
    for pod in evidence.of(kinds.POD):
        assert pod["status"]["phase"] == "Pending"
        assert "nodeName" not in pod["spec"] and "podIP" not in pod["status"]
        assert "containerStatuses" not in pod["status"]
        (failed,) = events_of(evidence, "FailedScheduling", kube.name(pod))
        assert failed["message"].startswith(f"0/{nodes} nodes are available: {nodes} Insufficient nvidia.com/gpu.")
        assert failed["series"]["count"] >= 9 and failed["type"] == "Warning"
        assert events_of(evidence, "NotTriggerScaleUp", kube.name(pod))
        assert not events_of(evidence, "Scheduled", kube.name(pod))
    (endpoints,) = evidence.of(kinds.ENDPOINTS)
    assert endpoints["subsets"] == []
    assert evidence.logs == ()
    for query_id in ("pod_ready", "pod_restarts", "vllm_running", "gpu_fb_used_mib"):
        assert evidence.metrics[query_id].status == "empty", query_id
    assert [float(v) for _, v in matrix(files, "deployment_available_replicas")[0]["values"]][-1] == 0  # type: ignore[index]


def test_host_oom_evidence_tells_one_story(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["host-oom"]
    evidence = evidence_of(files)
    (pod,) = evidence.of(kinds.POD)
    container = pod["spec"]["containers"][0]
    assert container["resources"]["limits"]["memory"] == "16Gi"
    assert "memory" not in evidence.isvc["spec"]["predictor"]["model"]["resources"]["limits"]
    (runtime,) = evidence.of(kinds.SERVING_RUNTIME)
    assert runtime["spec"]["containers"][0]["resources"]["limits"]["memory"] == "16Gi"
    status = serving_status(pod)
    assert status["lastState"]["terminated"]["reason"] == "OOMKilled"
    assert status["lastState"]["terminated"]["exitCode"] == 137
    assert status["state"]["waiting"]["reason"] == "CrashLoopBackOff" and status["restartCount"] >= 5
    assert not events_of(evidence, "Killing", kube.name(pod))  # the kernel kills, not the kubelet
    previous = next(log for log in evidence.logs if log.previous)
    assert "Using model weights format ['*.bin']" in previous.text
    assert previous.text.splitlines()[-1].endswith(
        "Loading pt checkpoint shards:  50% Completed | 1/2 [00:32<00:32, 32.19s/it]"
    )
    reasons = matrix(files, "pod_last_terminated_reason")
    assert [series["metric"]["reason"] for series in reasons] == ["OOMKilled"]  # type: ignore[index]


def final_counts(files: dict[str, bytes], family: str, label: str) -> dict[str, float]:
    """The last raw value of each series of a counter family, by one label."""
    counts: dict[str, float] = {}
    for line in files[RAW_METRICS_FILE].decode().splitlines():
        if line.startswith(family + "{"):
            value = re.search(rf'{label}="([^"]*)"', line)
            assert value is not None
            counts[value.group(1)] = float(line.split()[-2])
    return counts


def test_nginx_timeout_evidence_tells_one_story(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["nginx-timeout-long-generations"]
    evidence = evidence_of(files)
    (ingress,) = evidence.of(kinds.INGRESS)
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert not any(key.startswith("nginx.ingress") for key in kube.annotations(ingress))
    assert not any(key.startswith("nginx.ingress") for key in kube.annotations(evidence.isvc))
    assert all(serving_status(pod)["restartCount"] == 0 for pod in evidence.of(kinds.POD))
    at_nginx = final_counts(files, "nginx_ingress_controller_requests", "status")
    assert set(at_nginx) == {"200", "504"} and 0.05 < at_nginx["504"] / sum(at_nginx.values()) < 0.15
    # vLLM aborts what nginx cut: its successes are nginx's 200s, and no request it finished took 60 s.
    succeeded = final_counts(files, "vllm:request_success_total", "pod")
    assert sum(succeeded.values()) == at_nginx["200"]
    p99 = [value for _, value in series_values(files, "vllm_e2e_p99") if not math.isnan(value)]
    assert 54 < max(p99) <= 60


def test_an_nginx_scenario_keeps_the_owners_timeout_without_the_fault() -> None:
    files = generate(variant("nginx-timeout-long-generations", ("  - type: ingress_timeout_default\n", "  []\n")))
    evidence = evidence_of(files)
    (ingress,) = evidence.of(kinds.INGRESS)
    assert kube.annotations(ingress)["nginx.ingress.kubernetes.io/proxy-read-timeout"] == "600"
    assert kube.annotations(evidence.isvc)["nginx.ingress.kubernetes.io/proxy-read-timeout"] == "600"
    assert "504" not in final_counts(files, "nginx_ingress_controller_requests", "status")
    assert validate_bundle(files) == []


def test_gpu_oom_evidence_tells_one_story(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["gpu-oom-utilization"]
    evidence = evidence_of(files)
    (pod,) = evidence.of(kinds.POD)
    assert "--gpu-memory-utilization" in pod["spec"]["containers"][0]["args"]
    status = serving_status(pod)
    assert (status["lastState"]["terminated"]["reason"], status["lastState"]["terminated"]["exitCode"]) == ("Error", 1)
    assert status["restartCount"] >= 5 and not status["ready"]
    previous = next(log for log in evidence.logs if log.previous)
    lines = previous.text.splitlines()
    oom = next(index for index, line in enumerate(lines) if "torch.OutOfMemoryError: CUDA out of memory" in line)
    assert "GPU 0 has a total capacity of 21.96 GiB of which" in lines[oom]
    assert any("GPU KV cache size:" in line for line in lines[:oom]), "the cache is sized before graph capture"
    assert not any("Starting vLLM API server" in line for line in lines)
    assert lines[-1].endswith(
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"
    )
    reasons = matrix(files, "pod_last_terminated_reason")
    assert [series["metric"]["reason"] for series in reasons] == ["Error"]  # type: ignore[index]
    used = max(value for _, value in series_values(files, "gpu_fb_used_mib"))
    free = min(value for _, value in series_values(files, "gpu_fb_free_mib"))
    assert free < 100 and used > 22_000, "DCGM sees the card full just before each crash"
    assert not matrix(files, "vllm_running"), "the engine never served: no vLLM series"


def test_validator_catches_a_cuda_oom_claimed_as_oomkilled(bundles: dict[str, dict[str, bytes]]) -> None:
    def claim_kernel_oom(pods: list[dict[str, Any]]) -> None:
        pods[0]["status"]["containerStatuses"][0]["lastState"]["terminated"].update(reason="OOMKilled", exitCode=137)

    problems = validate_bundle(edited(bundles["gpu-oom-utilization"], "objects/Pod.yaml", claim_kernel_oom))
    assert any("CUDA out-of-memory error, but the container's last termination is OOMKilled" in p for p in problems)


def test_kv_capacity_evidence_tells_one_story(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["kv-cache-max-model-len"]
    evidence = evidence_of(files)
    (pod,) = evidence.of(kinds.POD)
    args = pod["spec"]["containers"][0]["args"]
    assert args[args.index("--max-model-len") + 1] == "32768" and args.count("--max-model-len") == 1
    status = serving_status(pod)
    assert (status["lastState"]["terminated"]["reason"], status["lastState"]["terminated"]["exitCode"]) == ("Error", 1)
    assert status["restartCount"] >= 5 and not status["ready"]
    previous = next(log for log in evidence.logs if log.previous)
    lines = previous.text.splitlines()
    refused = next(index for index, line in enumerate(lines) if "ValueError: To serve at least one request" in line)
    # 32,768 tokens x 128 KiB per token = 4 GiB; 21.96 x 0.9 - 14.9888 - 1.19 = 3.59 GiB hold 1,835 blocks of 16.
    assert "max seq len (32768), (4.00 GiB KV cache is needed" in lines[refused]
    assert "available KV cache memory (3.59 GiB)" in lines[refused]
    assert "estimated maximum model length is 29360." in lines[refused]
    assert any("Available KV cache memory: 3.59 GiB" in line for line in lines[:refused])
    assert not any("GPU KV cache size:" in line for line in lines), "the check comes before the cache is sized"
    assert "RuntimeError: Engine core initialization failed" in lines[-1]
    used = max(value for _, value in series_values(files, "gpu_fb_used_mib"))
    assert 16_000 < used < 17_500, "DCGM sees the weights and the activation peak, never a KV cache"
    assert not matrix(files, "vllm_running"), "the engine never served: no vLLM series"


def test_validator_catches_kv_capacity_numbers_that_disagree(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["kv-cache-max-model-len"]
    (name,) = [name for name in files if name.endswith(".previous.log")]
    broken = planted(
        files, name, "estimated maximum model length is 29360", "estimated maximum model length is 20000", 3
    )
    assert any("estimate of 20000 tokens holds 2.44 GiB" in problem for problem in validate_bundle(broken))
    fits = planted(files, name, "(4.00 GiB KV cache is needed", "(3.00 GiB KV cache is needed", 3)
    assert any("that request would fit" in problem for problem in validate_bundle(fits))


def test_validator_catches_a_kv_refusal_claimed_as_oomkilled(bundles: dict[str, dict[str, bytes]]) -> None:
    def claim_kernel_oom(pods: list[dict[str, Any]]) -> None:
        pods[0]["status"]["containerStatuses"][0]["lastState"]["terminated"].update(reason="OOMKilled", exitCode=137)

    problems = validate_bundle(edited(bundles["kv-cache-max-model-len"], "objects/Pod.yaml", claim_kernel_oom))
    assert any("KV cache capacity check, but the container's last termination is OOMKilled" in p for p in problems)


def test_validator_catches_revision_conditions_its_pods_do_not_explain(bundles: dict[str, dict[str, bytes]]) -> None:
    """Knative's Revision reconciler derives ExitCode<N> from a pod's last termination and Ready=True from an
    available replica (docs/upstream-facts.md, "Knative Revision conditions from the pods")."""

    def claim_exit_137(revisions: list[dict[str, Any]]) -> None:
        for entry in revisions[0]["status"]["conditions"]:
            if entry["type"] in ("ContainerHealthy", "Ready"):
                entry["reason"] = "ExitCode137"

    def claim_ready(revisions: list[dict[str, Any]]) -> None:
        for entry in revisions[0]["status"]["conditions"]:
            entry.update(status="True")
            entry.pop("reason", None)

    files = bundles["engine-bf16-on-t4"]
    assert validate_bundle(files) == []
    exit_problems = validate_bundle(edited(files, "objects/Revision.serving.knative.dev.yaml", claim_exit_137))
    assert any("reports ExitCode137, but no pod's container exited with that code" in p for p in exit_problems)
    ready_problems = validate_bundle(edited(files, "objects/Revision.serving.knative.dev.yaml", claim_ready))
    assert any("is Ready without an available replica" in p for p in ready_problems)


def test_validator_catches_nginx_504s_far_below_its_timeout(bundles: dict[str, dict[str, bytes]]) -> None:
    def raise_timeout(ingresses: list[dict[str, Any]]) -> None:
        ingresses[0]["metadata"]["annotations"] = {"nginx.ingress.kubernetes.io/proxy-read-timeout": "600"}

    problems = validate_bundle(edited(bundles["nginx-timeout-long-generations"], "objects/Ingress.yaml", raise_timeout))
    assert any("504s, but vLLM's p99 latency peaks at" in p and "of 600 s" in p for p in problems)


def series_values(files: dict[str, bytes], query_id: str) -> list[tuple[float, float]]:
    return [(float(t), float(v)) for series in matrix(files, query_id) for t, v in series["values"]]  # type: ignore[union-attr]


def test_scale_to_zero_evidence_tells_one_story(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["scale-to-zero-cold-start"]
    evidence = evidence_of(files)
    assert evidence.isvc["spec"]["predictor"]["minReplicas"] == 0
    (revision,) = evidence.of(kinds.KNATIVE_REVISION)
    assert revision["metadata"]["annotations"]["autoscaling.knative.dev/min-scale"] == "0"
    (pod,) = evidence.of(kinds.POD)  # the pod of the first activation is gone: only its events remain
    deleted = [e for e in evidence.events if e["reason"] == "SuccessfulDelete"]
    (gone,) = [e["message"].removeprefix("Deleted pod: ") for e in deleted]
    assert gone != kube.name(pod) and events_of(evidence, "Killing", gone)
    assert {log.pod for log in evidence.logs} == {kube.name(pod)}
    scaled = {
        e["message"].split(" from ")[1]: e.get("count") for e in evidence.events if e["reason"] == "ScalingReplicaSet"
    }
    assert scaled == {"0 to 1": 2, "1 to 0": 1}
    # Ready pods: 1 after the first load, 0 once scaled away, 1 again about seven minutes after the activation.
    ready = [value for _, value in series_values(files, "pod_ready")]
    changes = [value for index, value in enumerate(ready) if index == 0 or value != ready[index - 1]]
    assert changes == [0.0, 1.0, 0.0, 1.0]
    became_ready = parse_k8s_time((kube.condition(pod, "Ready") or {}).get("lastTransitionTime"))
    created = parse_k8s_time(pod["metadata"]["creationTimestamp"])
    assert became_ready and created and 400 < (became_ready - created).total_seconds() < 450
    # The activator answered 504 only while no pod was ready, after holding each request 300 s.
    codes = {s["metric"]["response_code"] for s in matrix(files, "istio_requests_by_code")}  # type: ignore[index]
    assert codes == {"200", "504"}
    samples = series_values(files, "pod_ready")
    zero_since = next(t for (t, v), (_, before) in zip(samples[1:], samples, strict=False) if v == 0 and before == 1)
    back_at = next(t for t, v in samples if t > zero_since and v == 1)
    timeouts = [
        t
        for series in matrix(files, "istio_requests_by_code")
        if series["metric"]["response_code"] == "504"  # type: ignore[index]
        for t, v in series["values"]  # type: ignore[index]
        if float(v) > 0
    ]
    assert timeouts and all(zero_since + 300 <= t <= back_at + 300 for t in timeouts)


def test_cpu_hpa_evidence_tells_one_story(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["cpu-hpa-on-gpu"]
    evidence = evidence_of(files)
    (hpa,) = evidence.of(kinds.HPA)
    (metric,) = hpa["spec"]["metrics"]
    assert metric["resource"] == {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}
    utilization = hpa["status"]["currentMetrics"][0]["resource"]["current"]["averageUtilization"]
    assert utilization < 25
    limited = next(c for c in hpa["status"]["conditions"] if c["type"] == "ScalingLimited")
    assert (limited["status"], limited["reason"]) == ("True", "TooFewReplicas")
    assert {v for _, v in series_values(files, "hpa_current_replicas")} == {1.0}
    assert max(v for _, v in series_values(files, "vllm_running")) == 64
    assert max(v for _, v in series_values(files, "vllm_waiting")) > 1000


def test_custom_metrics_missing_evidence_tells_one_story(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["hpa-custom-metrics-missing"]
    evidence = evidence_of(files)
    (hpa,) = evidence.of(kinds.HPA)
    assert "ownerReferences" not in hpa["metadata"], "the owner's own HPA"
    assert hpa["spec"]["metrics"][0]["pods"]["metric"]["name"] == "vllm:num_requests_waiting"
    active = next(c for c in hpa["status"]["conditions"] if c["type"] == "ScalingActive")
    assert (active["status"], active["reason"]) == ("False", "FailedGetPodsMetric")
    names = {kube.name(service) for service in evidence.of(kinds.API_SERVICE)}
    assert "v1beta1.metrics.k8s.io" in names and "v1beta1.custom.metrics.k8s.io" not in names
    (failed,) = events_of(evidence, "FailedGetPodsMetric", kube.name(hpa))
    assert failed["count"] > 200 and "get pods.custom.metrics.k8s.io" in failed["message"]
    assert {v for _, v in series_values(files, "hpa_desired_replicas")} == {1.0}
    assert max(v for _, v in series_values(files, "vllm_waiting")) > 1000


def test_hpa_target_not_serving_evidence_tells_one_story(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["hpa-target-not-serving"]
    evidence = evidence_of(files)
    (hpa,) = evidence.of(kinds.HPA)
    assert kube.name(hpa).startswith("doc-qa-predictor") and "ownerReferences" not in hpa["metadata"]
    assert hpa["spec"]["scaleTargetRef"]["name"] == "doc-qa-predictor-canary"
    active = next(c for c in hpa["status"]["conditions"] if c["type"] == "ScalingActive")
    assert (active["status"], active["reason"]) == ("False", "ScalingDisabled")
    deployments = {kube.name(d): d for d in evidence.of(kinds.DEPLOYMENT) if kube.namespace(d) == "legal-ai"}
    canary, serving = deployments["doc-qa-predictor-canary"], deployments["doc-qa-predictor"]
    assert canary["spec"]["replicas"] == 0 and "replicas" not in canary["status"]
    (service,) = [s for s in evidence.of(kinds.SERVICE) if kube.namespace(s) == "legal-ai"]
    selector = service["spec"]["selector"]
    assert kube.selector_matches(selector, serving["spec"]["template"]["metadata"]["labels"])
    assert not kube.selector_matches(selector, canary["spec"]["template"]["metadata"]["labels"])
    # The adapter serves the metric (the HPA is not blind): the API is registered and available.
    api = next(a for a in evidence.of(kinds.API_SERVICE) if kube.name(a) == "v1beta1.custom.metrics.k8s.io")
    assert api["spec"]["service"] == {"name": "prometheus-adapter", "namespace": "monitoring", "port": 443}
    assert not [e for e in evidence.events if str(e["reason"]).startswith("FailedGet")]
    assert {v for _, v in series_values(files, "hpa_current_replicas")} == {0.0}
    assert {v for _, v in series_values(files, "deployment_available_replicas")} <= {0.0, 1.0}
    assert len(evidence.of(kinds.POD)) == 1
    assert max(v for _, v in series_values(files, "vllm_running")) == 64
    assert max(v for _, v in series_values(files, "vllm_waiting")) > 100


def test_validator_catches_an_hpa_counting_replicas_its_target_lacks(bundles: dict[str, dict[str, bytes]]) -> None:
    def scale_the_canary(hpas: list[dict[str, Any]]) -> None:
        hpas[0]["status"]["currentReplicas"] = 2

    problems = validate_bundle(
        edited(bundles["hpa-target-not-serving"], "objects/HorizontalPodAutoscaler.yaml", scale_the_canary)
    )
    assert any("currentReplicas 2, but its target doc-qa-predictor-canary has 0 replicas" in p for p in problems)


def test_validator_catches_an_active_hpa_on_a_target_at_zero(bundles: dict[str, dict[str, bytes]]) -> None:
    def activate(hpas: list[dict[str, Any]]) -> None:
        active = next(c for c in hpas[0]["status"]["conditions"] if c["type"] == "ScalingActive")
        active.update(status="True", reason="ValidMetricFound")

    problems = validate_bundle(
        edited(bundles["hpa-target-not-serving"], "objects/HorizontalPodAutoscaler.yaml", activate)
    )
    assert any("is at zero replicas, yet scaling is not ScalingDisabled" in p for p in problems)


def test_long_contexts_fill_the_cache_below_the_ceiling(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["kv-cache-long-contexts"]
    evidence = evidence_of(files)
    (pod,) = evidence.of(kinds.POD)
    assert kube.pod_ready(pod) and kube.restart_count(pod) == 0
    (log,) = evidence.logs
    assert "GPU KV cache size: 195,696 tokens" in log.text
    assert "Maximum concurrency for 16,384 tokens per request: 11.94x" in log.text
    assert "out of memory" not in log.text.lower()
    running = dict(series_values(files, "vllm_running"))
    waiting = dict(series_values(files, "vllm_waiting"))
    usage = dict(series_values(files, "vllm_kv_cache_usage"))
    queued = [t for t, v in waiting.items() if v >= 1]
    # While requests wait, the cache (16 requests of 12k tokens), not --max-num-seqs 48, caps the batch.
    assert len(queued) >= 8 and all(15 <= running[t] <= 16 and usage[t] >= 0.97 for t in queued)
    assert 5 < max(waiting.values()) < 30, "a moderate queue, not a runaway one"
    assert max(v for _, v in series_values(files, "vllm_preemptions_rate")) > 0
    codes = {series["metric"]["response_code"] for series in matrix(files, "istio_requests_by_code")}  # type: ignore[index]
    assert codes == {"200"}
    since = load_spec("kv-cache-long-contexts").faults[0].params["since"].timestamp()
    before = [v for t, v in usage.items() if t < since]
    assert 0 < max(before) < 0.1, "the short chat prompts used a sliver of the cache"


def test_validator_catches_a_queue_the_scheduler_would_have_admitted(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["kv-cache-long-contexts"]
    answer = json.loads(files["metrics/vllm_kv_cache_usage.json"])
    waiting = json.loads(files["metrics/vllm_waiting.json"])["data"]["result"][0]["values"]
    queued = {t for t, v in waiting if float(v) >= 1}
    for sample in answer["data"]["result"][0]["values"]:
        if sample[0] in queued:
            sample[1] = "0.6"
    problems = validate_bundle({**files, "metrics/vllm_kv_cache_usage.json": json.dumps(answer).encode()})
    assert any("waiting below the ceiling 48 with the KV cache 60% used" in p for p in problems), problems


# ---- PromQL semantics the answers rest on ---------------------------------------------------------


def test_rate_extrapolates_like_prometheus() -> None:
    # Scrapes every 15 s, 10 per scrape, inside a 60 s range: extrapolated to the whole range, 10/15 per second.
    assert extrapolated_rate([(4, 100), (19, 110), (34, 120), (49, 130)], -6, 54) == pytest.approx(10 / 15)
    # A counter that starts at 0 is not extrapolated to before its start.
    assert extrapolated_rate([(4, 0), (19, 10), (34, 20), (49, 30)], -6, 54) == pytest.approx(30 * 50 / 45 / 60)
    # A counter reset adds the value before the reset: an increase of 25 over 45 s, stretched to 60 s.
    assert extrapolated_rate([(4, 10), (19, 20), (34, 5), (49, 15)], -6, 54) == pytest.approx(25 / 45)
    assert extrapolated_rate([(4, 10)], -6, 54) is None


def test_histogram_quantile_interpolates_inside_the_bucket() -> None:
    buckets = [({"le": "1"}, 50.0), ({"le": "2"}, 100.0), ({"le": "+Inf"}, 100.0)]
    assert histogram_quantile(0.75, buckets) == pytest.approx(1.5)
    assert histogram_quantile(0.99, [({"le": "1"}, 0.0), ({"le": "+Inf"}, 10.0)]) == 1.0


# ---- the validator catches planted defects ----------------------------------------------------------


def planted(files: dict[str, bytes], name: str, old: str, new: str, count: int = 1) -> dict[str, bytes]:
    text = files[name].decode()
    assert old in text, old
    return {**files, name: text.replace(old, new, count).encode()}


def raw_sample(files: dict[str, bytes], prefix: str, contains: str = "") -> tuple[str, str, float, str]:
    """The first raw sample line with a positive value: (line, name and labels, value, timestamp)."""
    for line in files[RAW_METRICS_FILE].decode().splitlines():
        if line.startswith(prefix) and contains in line:
            name_labels, value, stamp = line.rsplit(" ", 2)
            if float(value) > 0:
                return line, name_labels, float(value), stamp
    raise AssertionError(f"no positive sample of {prefix}")


def test_validator_catches_a_decreasing_raw_counter(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["healthy-serverless"]
    line, name_labels, value, stamp = raw_sample(files, "vllm:request_success_total{")
    broken = planted(files, RAW_METRICS_FILE, line, f"{name_labels} {value + 1e6:g} {stamp}")  # the next one drops
    assert any("request_success_total" in p and "counter decreases" in p for p in validate_bundle(broken))


def test_validator_catches_a_decreasing_restart_counter(bundles: dict[str, dict[str, bytes]]) -> None:
    broken = planted(bundles["healthy-serverless"], "metrics/pod_restarts.json", '"0.0"', '"3.0"')
    problems = validate_bundle(broken)
    assert any("restart counter decreases" in problem for problem in problems)


def test_validator_catches_non_cumulative_buckets(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["healthy-serverless"]
    line, name_labels, value, stamp = raw_sample(files, "vllm:e2e_request_latency_seconds_bucket{", 'le="5"')
    broken = planted(files, RAW_METRICS_FILE, line, f"{name_labels} {value + 1e6:g} {stamp}")
    assert any("not cumulative" in problem for problem in validate_bundle(broken))


def test_validator_catches_a_dangling_selector(bundles: dict[str, dict[str, bytes]]) -> None:
    broken = planted(
        bundles["port-mismatch"],
        "objects/Service.yaml",
        "selector:\n    app: isvc.qwen-chat-predictor\n",
        "selector:\n    app: isvc.qwen-chat\n",
    )
    problems = validate_bundle(broken)
    assert any("selector {'app': 'isvc.qwen-chat'} matches no pod" in problem for problem in problems)


def test_validator_catches_running_above_the_ceiling(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["healthy-serverless"]
    answer = json.loads(files["metrics/vllm_running.json"])
    answer["data"]["result"][0]["values"][-1][1] = "65"
    problems = validate_bundle({**files, "metrics/vllm_running.json": json.dumps(answer).encode()})
    assert any("above the ceiling 64" in problem for problem in problems)


def test_validator_catches_kv_usage_without_running_requests(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["healthy-serverless"]
    answer = json.loads(files["metrics/vllm_running.json"])
    answer["data"]["result"][0]["values"][-1][1] = "0"
    problems = validate_bundle({**files, "metrics/vllm_running.json": json.dumps(answer).encode()})
    assert any("used with no running request" in problem for problem in problems)


def test_validator_catches_endpoints_naming_a_missing_pod(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["port-mismatch"]
    pod = json.loads(json.dumps(yaml.safe_load(files["objects/Pod.yaml"])))["metadata"]["name"]
    broken = planted(files, "objects/Endpoints.yaml", f"name: {pod}", "name: qwen-chat-predictor-gone-x2x2x")
    problems = validate_bundle(broken)
    assert any("names pod 'qwen-chat-predictor-gone-x2x2x', which does not exist" in problem for problem in problems)
    assert any(f"pod {pod} matches the Service selector but has no address" in problem for problem in problems)


def test_validator_catches_2xx_while_nothing_is_ready(bundles: dict[str, dict[str, bytes]]) -> None:
    broken = planted(
        bundles["port-mismatch"],
        "metrics/istio_requests_by_code.json",
        '"response_code": "503"',
        '"response_code": "200"',
    )
    assert "metrics istio_requests_by_code: 2xx responses while no predictor pod is ready" in validate_bundle(broken)


def edited(files: dict[str, bytes], name: str, change: Callable[[list[dict[str, Any]]], None]) -> dict[str, bytes]:
    """The bundle with one objects file loaded, changed in place and written back."""
    documents = list(yaml.safe_load_all(files[name]))
    change(documents)
    return {**files, name: yaml.safe_dump_all(documents, sort_keys=False).encode()}


def test_validator_catches_an_unscheduled_pod_with_an_ip(bundles: dict[str, dict[str, bytes]]) -> None:
    def give_ip(pods: list[dict[str, Any]]) -> None:
        pods[0]["status"]["podIP"] = "10.244.3.3"

    problems = validate_bundle(edited(bundles["gpu-capacity"], "objects/Pod.yaml", give_ip))
    assert any("no node, yet it has an IP or container statuses" in problem for problem in problems)


def test_validator_catches_a_crash_loop_without_restarts(bundles: dict[str, dict[str, bytes]]) -> None:
    def reset(pods: list[dict[str, Any]]) -> None:
        pods[0]["status"]["containerStatuses"][0]["restartCount"] = 0

    problems = validate_bundle(edited(bundles["host-oom"], "objects/Pod.yaml", reset))
    assert any("CrashLoopBackOff without a restart" in problem for problem in problems)
    assert any("a last termination but restartCount 0" in problem for problem in problems)
    assert any("previous log, but kserve-container never restarted" in problem for problem in problems)
    assert any("1 runs (restartCount + 1), but 11 Started events" in problem for problem in problems)
    assert any("pod_restarts" in problem and "the pod says 0" in problem for problem in problems)


def test_validator_catches_a_terminated_reason_kube_state_metrics_never_saw(
    bundles: dict[str, dict[str, bytes]],
) -> None:
    def claim_oom(pods: list[dict[str, Any]]) -> None:
        for pod in pods:
            pod["status"]["containerStatuses"][0]["lastState"]["terminated"]["reason"] = "OOMKilled"

    problems = validate_bundle(edited(bundles["liveness-vs-warmup"], "objects/Pod.yaml", claim_oom))
    assert any("pod_last_terminated_reason" in p and ": Error, the pod says OOMKilled" in p for p in problems)


def test_validator_catches_metrics_of_a_pod_that_never_ran(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["gpu-capacity"]
    pod = next(yaml.safe_load_all(files["objects/Pod.yaml"]))["metadata"]["name"]
    answer = json.loads(files["metrics/pod_restarts.json"])
    answer["data"]["result"] = [{"metric": {"pod": pod, "container": "kserve-container"}, "values": [[0, "0"]]}]
    index = json.loads(files["metrics/index.json"])
    index["pod_restarts"]["status"] = "ok"
    broken = {
        **files,
        "metrics/pod_restarts.json": json.dumps(answer).encode(),
        "metrics/index.json": json.dumps(index).encode(),
    }
    assert f"metrics pod_restarts: series for pod {pod}, which never ran a container" in validate_bundle(broken)


def test_validator_catches_a_deleted_pod_that_is_still_there(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["scale-to-zero-cold-start"]
    pod = next(yaml.safe_load_all(files["objects/Pod.yaml"]))["metadata"]["name"]

    def delete_the_live_pod(events: list[dict[str, Any]]) -> None:
        for event in events:
            if event["reason"] == "SuccessfulDelete":
                event["message"] = f"Deleted pod: {pod}"

    problems = validate_bundle(edited(files, "objects/Event.yaml", delete_the_live_pod))
    assert any(f"{pod}: deleted by its ReplicaSet, yet still in the bundle" in problem for problem in problems)
    assert any("which is not in the bundle" in problem for problem in problems), "the really deleted pod's events"


# ---- the answers agree with a real Prometheus over the same raw series -------------------------


@pytest.fixture
def prometheus_over(tmp_path: Path) -> Iterator[Callable[[bytes], str]]:
    """Backfill raw OpenMetrics with promtool and serve them with a real Prometheus on 127.0.0.1."""
    with ExitStack() as servers:

        def start(raw: bytes) -> str:
            work = tmp_path / f"prometheus-{len(started)}"
            work.mkdir()
            started.append(servers.enter_context(prometheus_serving(raw.decode(), work)))
            return started[-1].url

        started: list[PrometheusServer] = []
        yield start


def samples_by_labels(result: list[dict[str, Any]]) -> dict[tuple[tuple[tuple[str, str], ...], float], float]:
    return {
        (tuple(sorted(series["metric"].items())), float(t)): float(v) for series in result for t, v in series["values"]
    }


@pytest.mark.integration
@pytest.mark.parametrize("name", SHIPPED)
def test_answers_match_real_prometheus(
    name: str, bundles: dict[str, dict[str, bytes]], prometheus_over: Callable[[bytes], str]
) -> None:
    files = bundles[name]
    url = prometheus_over(files[RAW_METRICS_FILE])
    for query_id, entry in sorted(json.loads(files["metrics/index.json"]).items()):
        query = urllib.parse.urlencode(
            {"query": entry["promql"], "start": entry["start"], "end": entry["end"], "step": entry["step"]}
        )
        with urllib.request.urlopen(f"{url}/api/v1/query_range?{query}", timeout=30) as answer:
            real = samples_by_labels(json.load(answer)["data"]["result"])
        ours = samples_by_labels(matrix(files, query_id)) if f"metrics/{query_id}.json" in files else {}
        assert ours.keys() == real.keys(), query_id
        for key, value in real.items():
            both_nan = math.isnan(value) and math.isnan(ours[key])
            assert both_nan or ours[key] == pytest.approx(value, rel=1e-9, abs=1e-9), (query_id, key)


def test_hpa_at_max_evidence_tells_one_story(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["hpa-at-max-spike"]
    evidence = evidence_of(files)
    (hpa,) = evidence.of(kinds.HPA)
    assert kube.name(hpa) == "support-bot-predictor-queue" and "ownerReferences" not in hpa["metadata"]
    assert hpa["spec"]["scaleTargetRef"]["name"] == "support-bot-predictor"
    assert (hpa["status"]["currentReplicas"], hpa["status"]["desiredReplicas"], hpa["spec"]["maxReplicas"]) == (3, 3, 3)
    conditions = {c["type"]: (c["status"], c["reason"]) for c in hpa["status"]["conditions"]}
    assert conditions["ScalingActive"] == ("True", "ValidMetricFound")
    assert conditions["ScalingLimited"] == ("True", "TooManyReplicas")
    # The HPA stepped out one cold start at a time; every new pod was scheduled, pulled its image and loaded.
    rescales = sorted(
        (e for e in evidence.events if e["reason"] == "SuccessfulRescale"), key=lambda e: str(e["firstTimestamp"])
    )
    assert [str(e["message"]).split(";")[0] for e in rescales] == ["New size: 2", "New size: 3"]
    pods = evidence.of(kinds.POD)
    assert len(pods) == 3 and all(kube.pod_ready(pod) for pod in pods)
    for pod in pods:
        reasons = {e["reason"] for e in evidence.events if e["involvedObject"]["name"] == kube.name(pod)}
        assert {"Scheduled", "Pulling", "Pulled", "Created", "Started"} <= reasons, kube.name(pod)
    assert {v for _, v in series_values(files, "hpa_current_replicas")} == {1.0, 2.0, 3.0}
    assert not [e for e in evidence.events if str(e["reason"]).startswith("FailedGet")]
    # At the maximum every pod is pinned at --max-num-seqs and the queue keeps growing.
    running = {series["metric"]["pod"]: series["values"] for series in matrix(files, "vllm_running")}  # type: ignore[index]
    assert len(running) == 3 and all(float(values[-1][1]) == 64 for values in running.values())  # type: ignore[index]
    waiting = [v for _, v in series_values(files, "vllm_waiting")]
    assert max(waiting) > 500


def test_validator_catches_an_hpa_limited_below_its_maximum(bundles: dict[str, dict[str, bytes]]) -> None:
    def lower(hpas: list[dict[str, Any]]) -> None:
        hpas[0]["spec"]["maxReplicas"] = 5

    problems = validate_bundle(edited(bundles["hpa-at-max-spike"], "objects/HorizontalPodAutoscaler.yaml", lower))
    assert any("ScalingLimited TooManyReplicas, but currentReplicas 3 != maxReplicas 5" in p for p in problems)


def test_validator_catches_hpa_status_that_disagrees_with_kube_state(bundles: dict[str, dict[str, bytes]]) -> None:
    def desire_more(hpas: list[dict[str, Any]]) -> None:
        hpas[0]["status"]["desiredReplicas"] = 4

    problems = validate_bundle(edited(bundles["hpa-at-max-spike"], "objects/HorizontalPodAutoscaler.yaml", desire_more))
    assert any(
        "metrics hpa_desired_replicas end at 3, but the HPAs' highest status.desiredReplicas is 4" in p
        for p in problems
    )


def test_hpa_target_at_ceiling_evidence_tells_one_story(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["hpa-target-at-ceiling"]
    evidence = evidence_of(files)
    (hpa,) = evidence.of(kinds.HPA)
    assert hpa["spec"]["metrics"][0]["pods"]["target"]["averageValue"] == "64"
    # A working HPA that reads exactly its target: it never rescaled and never felt limited.
    status = hpa["status"]
    assert (status["currentReplicas"], status["desiredReplicas"], hpa["spec"]["maxReplicas"]) == (1, 1, 4)
    assert status["currentMetrics"][0]["pods"]["current"]["averageValue"] == "64" and "lastScaleTime" not in status
    conditions = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
    assert conditions["ScalingActive"] == ("True", "ValidMetricFound")
    assert conditions["ScalingLimited"] == ("False", "DesiredWithinRange")
    assert not [e for e in evidence.events if e["reason"] in ("SuccessfulRescale", "FailedGetPodsMetric")]
    assert {v for _, v in series_values(files, "hpa_current_replicas")} == {1.0}
    (pod,) = evidence.of(kinds.POD)
    assert kube.pod_ready(pod) and kube.restart_count(pod) == 0
    # The pod is pinned at --max-num-seqs with room left in its cache while the queue grows.
    running = dict(series_values(files, "vllm_running"))
    waiting = dict(series_values(files, "vllm_waiting"))
    usage = dict(series_values(files, "vllm_kv_cache_usage"))
    queued = [t for t, v in waiting.items() if v >= 1]
    assert len(queued) >= 20 and all(running[t] == 64 and usage[t] < 0.6 for t in queued)
    assert max(running.values()) == 64 and max(waiting.values()) > 500


def test_validator_catches_an_hpa_reading_more_running_requests_than_a_pod_holds(
    bundles: dict[str, dict[str, bytes]],
) -> None:
    def overshoot(hpas: list[dict[str, Any]]) -> None:
        hpas[0]["status"]["currentMetrics"][0]["pods"]["current"]["averageValue"] = "71"

    problems = validate_bundle(
        edited(bundles["hpa-target-at-ceiling"], "objects/HorizontalPodAutoscaler.yaml", overshoot)
    )
    assert any("vllm:num_requests_running averages 71 per pod, above the pods' ceiling of 64" in p for p in problems)


def test_two_causes_each_leave_their_own_evidence(bundles: dict[str, dict[str, bytes]]) -> None:
    files = bundles["rag-long-prompts-behind-nginx"]
    evidence = evidence_of(files)
    assert [fault.type for fault in load_spec("rag-long-prompts-behind-nginx").faults] == [
        "ingress_timeout_default",
        "long_contexts",
    ]
    # The timeout: no proxy annotation anywhere, nginx answers 504, and nothing vLLM finished took 60 s.
    (ingress,) = evidence.of(kinds.INGRESS)
    assert not any(key.startswith("nginx.ingress") for key in kube.annotations(ingress))
    at_nginx = final_counts(files, "nginx_ingress_controller_requests", "status")
    assert set(at_nginx) == {"200", "504"} and at_nginx["504"] > at_nginx["200"]
    assert sum(final_counts(files, "vllm:request_success_total", "pod").values()) == at_nginx["200"]
    p99 = [value for _, value in series_values(files, "vllm_e2e_p99") if not math.isnan(value)]
    assert max(p99) <= 60
    # The cache: once the long prompts arrive the batch stays below --max-num-seqs 32 with the cache full.
    since = load_spec("rag-long-prompts-behind-nginx").faults[1].params["since"].timestamp()
    running = dict(series_values(files, "vllm_running"))
    usage = dict(series_values(files, "vllm_kv_cache_usage"))
    queued = [t for t, v in series_values(files, "vllm_waiting") if v >= 1 and t > since]
    assert len(queued) >= 20 and all(running[t] < 32 and usage[t] >= 0.97 for t in queued)
    assert max(v for _, v in series_values(files, "vllm_preemptions_rate")) > 0


def test_queries_outside_the_catalog_are_not_answered() -> None:
    """gather() also runs KEDA triggers' own PromQL; the simulator answers catalog queries only, so such a query is
    a missing read, never an empty answer that would read as "no series"."""
    metrics = ScenarioMetrics(load_spec("healthy-raw"), RawStore(()))
    moment = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with pytest.raises(ReadFailed) as failed:
        metrics.query_range("keda-trigger.x.0", "sum(vllm:num_requests_waiting)", moment, moment, 15)
    assert failed.value.status == "missing"


@pytest.mark.parametrize("name", sorted(KNATIVE_LAYER_SOURCES))
def test_knative_layer_scenarios_name_their_report(name: str) -> None:
    assert load_spec(name).source == KNATIVE_LAYER_SOURCES[name]


def test_revision_timeout_cuts_are_502_inside_and_504_outside_queue_proxy(bundles: dict[str, dict[str, bytes]]) -> None:
    """knative/serving pkg/queue/sharedmain/handlers.go: the app's counter sits inside the timeout handler, the
    revision's outside it; the same cut requests are 502 in the first and 504 in the second and at the gateway."""
    files = bundles["knative-revision-timeout-long-generations"]

    def codes(query_id: str) -> set[str]:
        return {str(series["metric"]["response_code"]) for series in matrix(files, query_id)}  # type: ignore[index]

    assert codes("knative_requests_by_code") == {"200", "502"}
    assert codes("knative_queue_requests_by_code") == {"200", "504"}
    assert codes("istio_requests_by_code") == {"200", "504"}


def test_old_vllm_histograms_end_at_60_s_and_streams_pass_nginx(bundles: dict[str, dict[str, bytes]]) -> None:
    """vLLM before PR #15202 (vllm-project/vllm#15167): the e2e buckets end at 60 s, so the p99 of longer requests
    reads exactly 60; the streams pass nginx's 60 s idle timeout, which counts only 200s."""
    files = bundles["old-vllm-histogram-cap-behind-nginx"]
    bounds = {
        float(str(series["metric"]["le"]))  # type: ignore[index]
        for series in matrix(files, "vllm_latency_buckets")
        if series["metric"]["__name__"] == "vllm:e2e_request_latency_seconds_bucket"  # type: ignore[index]
    }
    assert max(bounds) == 60.0
    assert {value for _, value in series_values(files, "vllm_e2e_p99") if not math.isnan(value)} == {60.0}
    assert {series["metric"]["status"] for series in matrix(files, "nginx_requests_by_status")} == {"200"}  # type: ignore[index]


def test_the_outer_gateway_answer_keeps_only_requests_to_knative_local_gateway() -> None:
    """``istio_outer_gateway_by_code`` as Prometheus answers it: the external gateway's series towards
    knative-local-gateway by code, flags and host; the sidecars' view of the revision stays out."""
    counter = tuple((1000.0 + 15 * i, 3.0 * i) for i in range(20))
    base = {"reporter": "source", "response_code": "504", "response_flags": "UT"}
    store = RawStore(
        [
            SampleFamily(
                "istio_requests",
                "counter",
                (
                    Series(
                        {**base, "destination_service_name": "knative-local-gateway", "request_host": "a.b"}, counter
                    ),
                    Series({**base, "destination_service_name": "svc-predictor-00001"}, counter),
                ),
            )
        ]
    )
    (series,) = answer(store, "istio_outer_gateway_by_code", 1150.0, 1250.0, 15)
    assert series.labels == {"response_code": "504", "response_flags": "UT", "request_host": "a.b"}
    assert all(value == pytest.approx(0.2) for _, value in series.samples)


def test_agent_readiness_404_keeps_serving_pods_out_of_rotation(bundles: dict[str, dict[str, bytes]]) -> None:
    """kserve/kserve#5341: each pod 1/2 Running, kserve-container ready, the agent answering its probe with 404."""
    assert load_spec("agent-readiness-404").source == "https://github.com/kserve/kserve/issues/5341"
    evidence = evidence_of(bundles["agent-readiness-404"])
    pods = evidence.of(kinds.POD)
    assert len(pods) == 2
    for pod in pods:
        statuses = {status["name"]: status for status in kube.status(pod)["containerStatuses"]}
        assert not kube.pod_ready(pod)
        assert statuses["kserve-container"]["ready"] and not statuses["agent"]["ready"]
        assert kube.condition(pod, "Ready")["message"] == "containers with unready status: [agent]"
        agent = next(c for c in kube.containers(kube.spec(pod)) if c["name"] == "agent")
        assert agent["readinessProbe"]["httpGet"]["path"] == "/"
    agent_failures = {
        str(event.get("message"))
        for event in evidence.events
        if event.get("reason") == "Unhealthy" and event["involvedObject"].get("fieldPath") == "spec.containers{agent}"
    }
    assert agent_failures == {"Readiness probe failed: HTTP probe failed with statuscode: 404"}
    assert kube.spec(evidence.isvc)["predictor"]["logger"]["url"].startswith("http://message-dumper")


def test_liveness_timeouts_under_load_kill_a_serving_engine(bundles: dict[str, dict[str, bytes]]) -> None:
    """llm-d/llm-d-benchmark PR #1734: a default 1 s liveness timeout kills a busy engine that had served."""
    assert load_spec("liveness-timeouts-under-load").source == "https://github.com/llm-d/llm-d-benchmark/pull/1734"
    evidence = evidence_of(bundles["liveness-timeouts-under-load"])
    restarted = [pod for pod in evidence.of(kinds.POD) if kube.restart_count(pod)]
    assert len(restarted) == 1 and all(kube.pod_ready(pod) for pod in evidence.of(kinds.POD))
    (pod,) = restarted
    assert serving_status(pod)["lastState"]["terminated"]["exitCode"] == 137
    liveness = [
        str(event.get("message"))
        for event in evidence.events_about("Pod", kube.name(pod))
        if event.get("reason") == "Unhealthy" and "Liveness" in str(event.get("message"))
    ]
    assert len(liveness) == 1 and "context deadline exceeded" in liveness[0]
    previous = next(log for log in evidence.logs_of(kube.name(pod)) if log.previous)
    assert "Application startup complete." in previous.text and "Avg prompt throughput" in previous.text


def test_liveness_timeouts_under_load_on_knative_are_the_kubelets(bundles: dict[str, dict[str, bytes]]) -> None:
    """scaleapi/llm-engine PR #255 on Knative: the kubelet runs the liveness probe against kserve-container itself
    (Knative moves only readiness into queue-proxy), times out on a busy engine and kills it."""
    evidence = evidence_of(bundles["liveness-timeouts-under-load-serverless"])
    restarted = [pod for pod in evidence.of(kinds.POD) if kube.restart_count(pod)]
    assert len(restarted) == 1
    (pod,) = restarted
    assert serving_status(pod)["lastState"]["terminated"]["exitCode"] == 137
    serving = next(c for c in kube.containers(kube.spec(pod)) if c["name"] == kube.SERVING_CONTAINER)
    assert serving["livenessProbe"]["timeoutSeconds"] == 1 and "readinessProbe" not in serving
    liveness = [
        event
        for event in evidence.events_about("Pod", kube.name(pod))
        if event.get("reason") == "Unhealthy" and "Liveness" in str(event.get("message"))
    ]
    assert [event["involvedObject"]["fieldPath"] for event in liveness] == ["spec.containers{kserve-container}"]
    assert "context deadline exceeded" in str(liveness[0].get("message"))


def test_queue_proxy_probing_an_unserved_port_keeps_serving_pods_out(bundles: dict[str, dict[str, bytes]]) -> None:
    """knative/serving#14021: queue-proxy runs the readiness probe on a port nothing listens on; vLLM serves."""
    evidence = evidence_of(bundles["queue-proxy-probe-port-unserved"])
    for pod in evidence.of(kinds.POD):
        statuses = {status["name"]: status for status in kube.status(pod)["containerStatuses"]}
        assert statuses["kserve-container"]["ready"] and not statuses["queue-proxy"]["ready"]
        assert kube.condition(pod, "Ready")["message"] == "containers with unready status: [queue-proxy]"
        queue = next(c for c in kube.containers(kube.spec(pod)) if c["name"] == "queue-proxy")
        env = {entry["name"]: entry.get("value") for entry in queue["env"]}
        assert json.loads(env["SERVING_READINESS_PROBE"])["httpGet"]["port"] == 8000 and env["USER_PORT"] == "8080"
    assert kube.spec(evidence.isvc)["predictor"]["model"]["readinessProbe"]["httpGet"]["port"] == 8000
    queue_logs = [log for log in evidence.logs if log.container == "queue-proxy"]
    assert len(queue_logs) == 2  # both unready pods' logs are read
    assert all("dial tcp 127.0.0.1:8000: connect: connection refused" in log.text for log in queue_logs)
    serving = [log for log in evidence.logs if log.container == kube.SERVING_CONTAINER]
    assert len(serving) == 2 and all("Application startup complete." in log.text for log in serving)


@pytest.mark.parametrize(
    ("name", "replacements"),
    [
        # The group complete: a second 8-GPU node takes the worker, the leader serves.
        (
            "llmisvc-multinode-worker-unschedulable",
            (
                ("  - type: group_worker_unschedulable\n", ""),
                ("faults:\n", "faults: []\n"),
                (
                    "zone: us-east-1a}\n",
                    "zone: us-east-1a}\n    - {name: gpu-h100-node-2, product: NVIDIA-H100-80GB-HBM3, "
                    "memory_gib: 79.19, gpus: 8, zone: us-east-1b}\n",
                ),
                ("[WORKLOAD_GROUP_INCOMPLETE, ENDPOINTS_NONE_READY, LLMISVC_NOT_READY]", "[]"),
            ),
        ),
        # The prefill pod sized for the prompts: neither role queues.
        (
            "llmisvc-pd-prefill-saturated",
            (('--max-num-seqs, "8"', '--max-num-seqs, "64"'), ("[QUEUE_SATURATION]", "[]")),
        ),
    ],
)
def test_healthy_multinode_and_disaggregated_variants_give_no_finding(
    name: str, replacements: tuple[tuple[str, str], ...], tmp_path: Path
) -> None:
    """The generator's multi-node and P/D shapes without their fault: a realistic bundle the tool finds nothing in."""
    files = generate(variant(name, *replacements))
    assert validate_bundle(files) == []
    write_bundle_files(files, tmp_path)
    result = run(TriageParams(bundle=str(tmp_path)))
    assert [f.code for f in result.findings if f.level is not Severity.INFO] == []


def test_validator_lets_a_native_sidecar_run_beside_the_containers_only_once_started(
    bundles: dict[str, dict[str, bytes]],
) -> None:
    """The decode pods' llm-d-routing-sidecar is an init container with restartPolicy Always: running beside vLLM is
    its normal state once it has started; a plain init container still running, or a sidecar not started, is not."""
    files = bundles["llmisvc-pd-prefill-saturated"]
    assert validate_bundle(files) == []

    def decode_pod(pods: list[dict[str, Any]]) -> dict[str, Any]:
        return next(pod for pod in pods if pod["spec"].get("initContainers"))

    def not_started(pods: list[dict[str, Any]]) -> None:
        decode_pod(pods)["status"]["initContainerStatuses"][0]["started"] = False

    def plain_init(pods: list[dict[str, Any]]) -> None:
        del decode_pod(pods)["spec"]["initContainers"][0]["restartPolicy"]

    for change in (not_started, plain_init):
        problems = validate_bundle(edited(files, "objects/Pod.yaml", change))
        assert any("init container llm-d-routing-sidecar has not completed" in problem for problem in problems)
