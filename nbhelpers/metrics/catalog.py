"""The named query catalog (docs/contracts.md#metric-catalog). Checks read metrics only by ``id``.

Each entry holds PromQL templates in fallback order (newest metric name first).
Templates use ``{sel}`` for the predictor selector
(``namespace="NS", pod=~"ISVC-predictor-.+"``), ``{dcgm_sel}`` for DCGM's
exported labels and ``{rate}`` for the rate range. Series are selected by pod
name pattern, never by today's pod list, so pods that crashed or were scaled
away during the incident still count.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class QuerySpec:
    id: str
    templates: tuple[str, ...]
    unit: str
    aggregation: str
    description: str


def _q(query_id: str, unit: str, aggregation: str, description: str, *templates: str) -> QuerySpec:
    return QuerySpec(query_id, templates, unit, aggregation, description)


def _hist(query_id: str, metric_names: tuple[str, ...], quantile: float, description: str) -> QuerySpec:
    templates = tuple(
        f"histogram_quantile({quantile}, sum by (le) (rate({name}{{{{{{sel}}}}}}[{{rate}}])))" for name in metric_names
    )
    return QuerySpec(query_id, templates, "seconds", f"p{int(quantile * 100)}", description)


CATALOG: tuple[QuerySpec, ...] = (
    _q(
        "vllm_running",
        "requests",
        "sum by pod",
        "requests running in the engine",
        "sum by (pod) (vllm:num_requests_running{{{sel}}})",
    ),
    _q(
        "vllm_waiting",
        "requests",
        "sum by pod",
        "requests waiting in vLLM's queue",
        "sum by (pod) (vllm:num_requests_waiting{{{sel}}})",
    ),
    _q(
        "vllm_kv_cache_usage",
        "fraction",
        "max by pod",
        "KV cache usage, 0-1",
        "max by (pod) (vllm:kv_cache_usage_perc{{{sel}}})",
        "max by (pod) (vllm:gpu_cache_usage_perc{{{sel}}})",
    ),
    _q(
        "vllm_preemptions_rate",
        "1/s",
        "sum",
        "preemptions per second",
        "sum(rate(vllm:num_preemptions_total{{{sel}}}[{rate}]))",
        "sum(rate(vllm:num_preemptions{{{sel}}}[{rate}]))",
    ),
    _hist("vllm_ttft_p95", ("vllm:time_to_first_token_seconds_bucket",), 0.95, "time to first token p95"),
    _hist("vllm_e2e_p95", ("vllm:e2e_request_latency_seconds_bucket",), 0.95, "end-to-end latency p95"),
    _hist("vllm_e2e_p99", ("vllm:e2e_request_latency_seconds_bucket",), 0.99, "end-to-end latency p99"),
    _hist("vllm_queue_time_p95", ("vllm:request_queue_time_seconds_bucket",), 0.95, "queue time p95"),
    _hist(
        "vllm_itl_p95",
        ("vllm:inter_token_latency_seconds_bucket", "vllm:time_per_output_token_seconds_bucket"),
        0.95,
        "inter-token latency p95",
    ),
    _q(
        "vllm_request_rate",
        "1/s",
        "sum",
        "finished requests per second",
        "sum(rate(vllm:request_success_total{{{sel}}}[{rate}]))",
    ),
    _q(
        "vllm_prompt_tokens_rate",
        "tokens/s",
        "sum",
        "prompt tokens per second",
        "sum(rate(vllm:prompt_tokens_total{{{sel}}}[{rate}]))",
    ),
    _q(
        "vllm_generation_tokens_rate",
        "tokens/s",
        "sum",
        "generated tokens per second",
        "sum(rate(vllm:generation_tokens_total{{{sel}}}[{rate}]))",
    ),
    _q(
        "vllm_cache_config",
        "info",
        "max by labels",
        "vLLM cache configuration labels",
        "max by (pod, block_size, num_gpu_blocks, gpu_memory_utilization, cache_dtype) "
        "(vllm:cache_config_info{{{sel}}})",
    ),
    _q(
        "pod_restarts",
        "restarts",
        "max by pod, container",
        "container restart counters",
        "max by (pod, container) (kube_pod_container_status_restarts_total{{{sel}}})",
    ),
    _q(
        "pod_last_terminated_reason",
        "info",
        "max by pod, container, reason",
        "last termination reason",
        "max by (pod, container, reason) (kube_pod_container_status_last_terminated_reason{{{sel}}})",
    ),
    _q("pod_ready", "pods", "sum", "ready predictor pods", 'sum(kube_pod_status_ready{{{sel}, condition="true"}})'),
    _q(
        "hpa_current_replicas",
        "replicas",
        "max",
        "HPA current replicas",
        'max(kube_horizontalpodautoscaler_status_current_replicas{{namespace="{namespace}", '
        'horizontalpodautoscaler=~"{hpa}"}})',
    ),
    _q(
        "hpa_desired_replicas",
        "replicas",
        "max",
        "HPA desired replicas",
        'max(kube_horizontalpodautoscaler_status_desired_replicas{{namespace="{namespace}", '
        'horizontalpodautoscaler=~"{hpa}"}})',
    ),
    _q(
        "deployment_available_replicas",
        "replicas",
        "sum",
        "available replicas of predictor deployments",
        'sum(kube_deployment_status_replicas_available{{namespace="{namespace}", deployment=~"{deployments}"}})',
    ),
    _q(
        "gpu_fb_used_mib",
        "MiB",
        "max by pod",
        "GPU framebuffer used (DCGM)",
        "max by (pod) (DCGM_FI_DEV_FB_USED{{{sel}}})",
        "max by (exported_pod) (DCGM_FI_DEV_FB_USED{{{dcgm_sel}}})",
    ),
    _q(
        "gpu_fb_free_mib",
        "MiB",
        "min by pod",
        "GPU framebuffer free (DCGM)",
        "min by (pod) (DCGM_FI_DEV_FB_FREE{{{sel}}})",
        "min by (exported_pod) (DCGM_FI_DEV_FB_FREE{{{dcgm_sel}}})",
    ),
    _q(
        "gpu_util",
        "percent",
        "avg by pod",
        "GPU utilization (DCGM)",
        "avg by (pod) (DCGM_FI_DEV_GPU_UTIL{{{sel}}})",
        "avg by (exported_pod) (DCGM_FI_DEV_GPU_UTIL{{{dcgm_sel}}})",
    ),
    _q(
        "istio_requests_by_code",
        "1/s",
        "sum by code",
        "requests by response code at the Istio gateway (else at the pods' sidecars)",
        # The gateway's view (reporter=source) by destination service: it includes the 503 UH answers
        # given when no pod is ready, which carry destination_workload="unknown". Not both reporters:
        # each request would count twice.
        'sum by (response_code, response_flags) (rate(istio_requests_total{{reporter="source", '
        'destination_service_namespace="{namespace}", destination_service_name=~"{isvc}-predictor.*"}}[{rate}]))',
        'sum by (response_code, response_flags) (rate(istio_requests_total{{reporter="destination", '
        'destination_workload_namespace="{namespace}", destination_workload=~"{isvc}-predictor.*"}}[{rate}]))',
    ),
    _q(
        "nginx_requests_by_status",
        "1/s",
        "sum by status",
        "requests by status at ingress-nginx",
        'sum by (status) (rate(nginx_ingress_controller_requests{{exported_namespace="{namespace}", '
        'exported_service=~"{isvc}.*"}}[{rate}]))',
        'sum by (status) (rate(nginx_ingress_controller_requests{{namespace="{namespace}", '
        'service=~"{isvc}.*"}}[{rate}]))',
    ),
    _q(
        "knative_requests_by_code",
        "1/s",
        "sum by code",
        "requests by response code at Knative",
        'sum by (response_code) (rate(revision_app_request_count{{namespace_name="{namespace}", '
        'configuration_name="{isvc}-predictor"}}[{rate}]))',
        'sum by (response_code) (rate(activator_request_count{{namespace_name="{namespace}", '
        'configuration_name="{isvc}-predictor"}}[{rate}]))',
    ),
    # Knative's three request counters are three layers (knative/serving pkg/queue/sharedmain/handlers.go, up to
    # 1.18, and pkg/activator/handler/metric_handler.go): revision_app_request_count is written inside the
    # revision's timeout handler, revision_request_count outside it, activator_request_count by the activator
    # (outside its own timeout handler). A request cut by the revision timeout is a 502 at the first and a 504 at
    # the second; the activator answers 503 when it cannot get capacity (scale from zero, queue full).
    _q(
        "knative_queue_requests_by_code",
        "1/s",
        "sum by code",
        "requests by response code at queue-proxy, outside the revision timeout",
        'sum by (response_code, response_code_class) (rate(revision_request_count{{namespace_name="{namespace}", '
        'configuration_name="{isvc}-predictor"}}[{rate}]))',
    ),
    _q(
        "knative_activator_requests_by_code",
        "1/s",
        "sum by code",
        "requests by response code at Knative's activator",
        'sum by (response_code, response_code_class) (rate(activator_request_count{{namespace_name="{namespace}", '
        'configuration_name="{isvc}-predictor"}}[{rate}]))',
    ),
    # Serverless: KServe's VirtualService sends the external gateway's requests to knative-local-gateway
    # (kserve/kserve reconcilers/ingress/ingress_reconciler.go createHTTPRouteDestination(
    # config.KnativeLocalGatewayService)), so what the outer gateway answers itself carries that destination, not
    # the predictor's. Istio's standard labels do not name the service behind it; request_host exists only where a
    # Telemetry override adds it (istio.io "Customizing Istio Metrics").
    _q(
        "istio_outer_gateway_by_code",
        "1/s",
        "sum by code, host",
        "requests by response code from the external gateway to knative-local-gateway (every Serverless service)",
        'sum by (response_code, response_flags, request_host) (rate(istio_requests_total{{reporter="source", '
        'destination_service_name="knative-local-gateway"}}[{rate}]))',
    ),
    # The bucket bounds vLLM exports: before vllm-project/vllm PR #15202 the e2e and queue-time histograms ended at
    # 60 s and TTFT at 10 s, so a quantile at the top finite bound says "at least", not "exactly". Only the bounds
    # from 10 s up are asked for (every version's top bound is among them): half the series of all bounds.
    _q(
        "vllm_latency_buckets",
        "info",
        "count by name, le",
        "bucket bounds of vLLM's latency histograms, from 10 s up",
        'count by (__name__, le) ({{{sel}, __name__=~"vllm:(e2e_request_latency|request_queue_time|time_to_first_token)'
        '_seconds_bucket", le=~"[1-9][0-9]+([.][0-9]+)?"}})',
    ),
)

BY_ID: dict[str, QuerySpec] = {spec.id: spec for spec in CATALOG}

_LABEL_VALUE = re.compile(r"^[A-Za-z0-9._-]+$")


def render(
    spec: QuerySpec,
    template_index: int,
    namespace: str,
    isvc: str,
    step_seconds: int,
    hpa_names: Sequence[str] = (),
    llmisvc: bool = False,
    prefill_groups: bool = False,
) -> str:
    """Fill one template for an InferenceService. Names are validated, never quoted blindly.

    ``hpa_names``: HPAs that scale the predictor. The HPA series match the ``<isvc>-predictor`` prefix
    (KServe's own name) and any other of these names, so a bundle captured before names were added,
    or for KServe-named HPAs, replays the same PromQL.

    ``llmisvc``: ``isvc`` names an LLMInferenceService, whose vLLM pods come from the Deployments
    ``<name>-kserve`` and ``<name>-kserve-prefill`` (kmeta.ChildName in KServe's
    pkg/controller/v1alpha2/llmisvc/workload_single_node.go). The pattern stops at the two hash segments of a
    Deployment's pod, so the endpoint picker ``<name>-kserve-router-scheduler-<rs>-<pod>`` is not counted.
    A multi-node service runs LeaderWorkerSets instead (workload_multi_node.go): vLLM's API server, and its metrics,
    are on each group's leader ``<lws>-<group>``, not on the workers ``<lws>-<group>-<index>``. The main set's
    leaders ``<name>-kserve-mn-<group>`` already fit the two-segment pattern and its workers do not;
    ``prefill_groups`` (the service has the LeaderWorkerSet ``<name>-kserve-mn-prefill``) adds that set's leaders
    ``<name>-kserve-mn-prefill-<group>``. It is off otherwise, so a single-node service's PromQL stays what it was.
    kube-state-metrics exports no LeaderWorkerSet: ``{deployments}`` still names the single-node Deployments only,
    and a multi-node workload's readiness comes from the leaders' ``pod_ready``.
    """
    for value in (namespace, isvc, *hpa_names):
        if not _LABEL_VALUE.fullmatch(value):
            raise ValueError(f"invalid Kubernetes name {value!r}")
    prefix = f"{isvc}-predictor"
    extra_hpas = sorted({name for name in hpa_names if not name.startswith(prefix)})  # the prefix has the rest
    hpa_pattern = "|".join([f"{prefix}.*", *(name.replace(".", "[.]") for name in extra_hpas)])
    pod_pattern = f"{isvc}-kserve-(prefill-)?[a-z0-9]+-[a-z0-9]+" if llmisvc else f"{isvc}-predictor-.+"
    if llmisvc and prefill_groups:
        pod_pattern += f"|{isvc}-kserve-mn-prefill-[0-9]+"
    # The vLLM Deployments: KServe's predictor ones, or an LLMInferenceService's main and prefill ones (not its picker).
    deployments = f"{isvc}-kserve(-prefill)?" if llmisvc else f"{prefix}.*"
    selector = f'namespace="{namespace}", pod=~"{pod_pattern}"'
    dcgm_selector = f'exported_namespace="{namespace}", exported_pod=~"{pod_pattern}"'
    rate_range = f"{max(60, 4 * step_seconds)}s"
    return spec.templates[template_index].format(
        sel=selector,
        dcgm_sel=dcgm_selector,
        rate=rate_range,
        namespace=namespace,
        isvc=isvc,
        hpa=hpa_pattern,
        deployments=deployments,
    )
