"""``HPA_METRIC_SERIES_MISSING`` on KEDA's path: a ScaledObject's prometheus trigger whose own query selected no
series over the window.

KEDA does not go through prometheus-adapter: its metrics server runs the trigger's PromQL itself. An empty answer
is not an error by default: the prometheus scaler's ``ignoreNullValues`` defaults to true and then reads an empty
result as 0 (keda.sh docs/scalers/prometheus: "ignoring the empty value list from Prometheus. Set to false the
scaler will return error when Prometheus target is lost"). So the HPA KEDA generated sees 0 and never adds a
replica, and at zero replicas the ScaledObject is never active (a value above ``activationThreshold``, default 0,
activates it), so a Deployment scaled to zero stays there. A query on series the vLLM pods export themselves
(``vllm:*``) cannot wake the service up: with no pod there is no series (llm-d/llm-d PR #2492 hit this with the
EPP's queue metric, which exists only while a backend is ready).

The query is the one ``gather()`` ran against the configured Prometheus (:mod:`nbhelpers.metrics.triggers`); the
trigger may name another ``serverAddress``, which the evidence then says.
"""

from __future__ import annotations

from nbhelpers.checks.metric_pipeline._pipeline import MetricPipeline
from nbhelpers.facts import autoscalers, common
from nbhelpers.facts.autoscalers import Autoscaler, Metric
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.metrics import series, triggers
from nbhelpers.sources import kube
from nbhelpers.util.times import format_time


def trigger_findings(pipeline: MetricPipeline) -> list[Finding]:
    findings = []
    for reader in pipeline.readers:
        if reader.kind != autoscalers.SCALED_OBJECT:
            continue
        for index, metric in enumerate(reader.metrics):
            if metric.trigger != "prometheus":
                continue
            data = pipeline.evidence.metrics.get(triggers.query_id(reader.name, index))
            if data is not None and data.status == "empty":
                findings.append(_no_series(pipeline, reader, metric, data.promql))
    return findings


def _no_series(pipeline: MetricPipeline, scaled_object: Autoscaler, metric: Metric, promql: str) -> Finding:
    window = pipeline.evidence.window
    pod_series = triggers.pod_series(promql)
    ready = [pod for pod in common.predictor_pods(pipeline.evidence) if kube.pod_ready(pod)]
    at_zero = not ready
    null_values = metric.trigger_metadata.get("ignoreNullValues", "true").strip().lower()
    if null_values == "false":
        reading = (
            "With ignoreNullValues false KEDA's prometheus scaler reports the empty answer as an error (a "
            "KEDAScalerFailed event, the ScaledObject's Fallback if one is set) and the HPA gets no value."
        )
    else:
        reading = (
            "KEDA's prometheus scaler reads an empty answer as 0 (ignoreNullValues defaults to true), silently: the "
            "HPA KEDA generated sees 0 and never adds a replica, and at zero replicas the ScaledObject is never active."
        )
    summary = (
        f"{scaled_object.ref} scales on {metric.describe()}, whose query KEDA's metrics server runs itself (no "
        f"prometheus-adapter on this path), and that query selected no series from {format_time(window.start)} to "
        f"{format_time(window.end)}. {reading}"
    )
    lines = [f"{scaled_object.ref}: {metric.describe()}", f"trigger query with no series in the window: {promql}"]
    address = metric.trigger_metadata.get("serverAddress")
    if address:
        lines.append(
            f"the trigger reads serverAddress {address}; this run asked the Prometheus it was given: when they differ, "
            "run the query there"
        )
    lines.append(
        f"ready predictor pods now: {len(ready)}"
        + (f"; minReplicaCount {scaled_object.min_replicas}" if scaled_object.min_replicas is not None else "")
    )
    severity = None
    if not pod_series and not _requests_seen(pipeline):
        severity = Severity.INFO
        summary += (
            " No request reached the service in the window either (no request counter shows one), and series such "
            "as an ingress' request count only exist once a request has come: the empty answer may just mean no "
            "traffic."
        )
    if pod_series and at_zero:
        severity = Severity.CRITICAL
        summary += (
            f" The query reads {', '.join(pod_series)}, which the predictor's own vLLM pods export: with no pod "
            "running there is no such series, so nothing can ever activate the ScaledObject and the service stays "
            "at zero while requests fail."
        )
        lines.append(f"series exported by the vLLM pods themselves: {', '.join(pod_series)}")
    return Finding(
        code="HPA_METRIC_SERIES_MISSING",
        title=f"{scaled_object.ref}: the prometheus trigger's query selects no series",
        summary=summary,
        objects=(pipeline.isvc_ref, scaled_object.ref),
        evidence=tuple(lines),
        fix=Fix(what=_remediation(pipeline, scaled_object, promql, bool(pod_series) and at_zero)),
        severity=severity,
    )


# Request counters of the catalog: any sample above zero means requests reached the service in the window.
_REQUEST_QUERIES = (
    "vllm_request_rate",
    "nginx_requests_by_status",
    "istio_requests_by_code",
    "knative_requests_by_code",
)


def _requests_seen(pipeline: MetricPipeline) -> bool:
    for query_id in _REQUEST_QUERIES:
        data = series.ok(pipeline.evidence.metrics.get(query_id))
        if data is not None and any(value > 0 for item in data.series for _, value in item.samples):
            return True
    return False


def _remediation(pipeline: MetricPipeline, scaled_object: Autoscaler, promql: str, at_zero: bool) -> str:
    lines = []
    if at_zero:
        lines.append(
            "To scale from zero, activate on a signal that exists without any pod: requests counted in front of the "
            "pods (the ingress or gateway request rate for this service's host) as a second trigger, or KEDA's HTTP "
            "add-on, which holds requests while it activates; else keep one replica ("
            + (
                "drop idleReplicaCount 0 from the LLMInferenceService's spec.scaling.keda, so that KEDA stops at "
                "minReplicas"
                if pipeline.evidence.target.is_llmisvc
                else "minReplicaCount 1; with KServe's keda class, spec.predictor.minReplicas 1"
            )
            + ")."
        )
    lines += [
        "Run the trigger's query in the Prometheus the trigger names, over the last hour:",
        f"  {promql}",
        f"  kubectl -n {pipeline.namespace} describe scaledobject {scaled_object.name}",
        "Fix its selectors (namespace, pod name pattern, metric name of this vLLM version) until it returns a series "
        'while pods run, and set ignoreNullValues: "false" on the trigger so that an empty answer shows as a '
        "KEDAScalerFailed event instead of a silent 0.",
    ]
    return "\n".join(lines)
