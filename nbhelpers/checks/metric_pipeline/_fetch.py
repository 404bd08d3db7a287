"""``HPA_METRIC_FETCH_FAILED``: the autoscaler's own conditions and events say it cannot read its metric."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nbhelpers.checks.metric_pipeline._pipeline import MetricPipeline, availability_problem, raw_metric_path
from nbhelpers.facts import autoscalers, common
from nbhelpers.facts.autoscalers import Autoscaler, Metric
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.sources import kube
from nbhelpers.sources.kube import event_interval
from nbhelpers.util.times import format_time

# ScalingActive=False reasons (and HPA event reasons) that mean the metric could not be read.
FETCH_REASONS = frozenset(
    {
        "FailedGetResourceMetric",
        "FailedGetContainerResourceMetric",
        "FailedGetPodsMetric",
        "FailedGetObjectMetric",
        "FailedGetExternalMetric",
        "InvalidMetricSourceType",
    }
)
# The controller's summary event for a sync whose metrics all failed.
FETCH_EVENT_REASONS = FETCH_REASONS | {"FailedComputeMetricsReplicas"}
# Warning events KEDA's operator writes on a ScaledObject whose scaler cannot be queried.
KEDA_FAILURE_EVENTS = frozenset({"KEDAScalerFailed", "KEDAMetricSourceFailed", "ScaledObjectCheckFailed"})
# Fewer failed syncs than this, with the condition healthy now, is the usual start-up blip (a new pod
# or HPA before the first scrape), not a blind autoscaler.
TRANSIENT_FAILURES = 3
# The HPA controller's message when no targeted pod reported a metric, as users quote it while no pod is
# ready (kubernetes-sigs/metrics-server#1641): an effect of whatever keeps the pods unready.
_PODS_UNREADY = re.compile(r"did not receive metrics for targeted pods \(pods might be unready\)", re.IGNORECASE)
# The HPA controller's metrics client when the resource metrics API returns no PodMetrics for the selector
# (kubernetes pkg/controller/podautoscaler/metrics/client.go): what it says while no targeted pod runs a container
# (Pending: init containers failing, image not pulled), since metrics-server has nothing for such pods; with pods
# running it means the metrics server itself returns nothing.
_NO_POD_METRICS = re.compile(r"no metrics returned from resource metrics API", re.IGNORECASE)
_FORBIDDEN = re.compile(r"forbidden|unauthorized|cannot (?:get|list|watch) resource", re.IGNORECASE)
_RBAC_USER = re.compile(r'User "([^"]+)"')
_HPA_CONTROLLER = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"


@dataclass
class _Family:
    """The failures of one metric path: a ScaledObject and the HPA KEDA generated for it count as one."""

    head: Autoscaler
    members: list[Autoscaler] = field(default_factory=list)
    current: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    context: list[str] = field(default_factory=list)
    failed_syncs: int = 0

    @property
    def failing(self) -> bool:
        return bool(self.current) or self.failed_syncs >= TRANSIENT_FAILURES


def fetch_failures(pipeline: MetricPipeline) -> list[Finding]:
    families: dict[str, _Family] = {}
    for reader in pipeline.readers:
        head = _family_head(pipeline, reader)
        family = families.setdefault(head.ref, _Family(head))
        family.members.append(reader)
        if reader.kind == autoscalers.HPA:
            _read_hpa(pipeline, reader, family)
        else:
            _read_scaled_object(pipeline, reader, family)
    return [_fetch_failure(pipeline, family) for family in families.values() if family.failing]


def _family_head(pipeline: MetricPipeline, reader: Autoscaler) -> Autoscaler:
    if reader.kind == autoscalers.HPA and reader.klass == "keda" and reader.owner:
        owner_name = reader.owner.split("/", 1)[1]
        for candidate in pipeline.readers:
            if candidate.kind == autoscalers.SCALED_OBJECT and candidate.name == owner_name:
                return candidate
    return reader


def _read_hpa(pipeline: MetricPipeline, hpa: Autoscaler, family: _Family) -> None:
    active = hpa.condition("ScalingActive")
    if active is not None and str(active.get("status")) == "False" and active.get("reason") in FETCH_REASONS:
        family.current.append(f"{hpa.ref}: {kube.describe_condition(active)}")
        family.messages.append(str(active.get("message") or ""))
        family.reasons.append(str(active["reason"]))
        able = hpa.condition("AbleToScale")
        if able is not None and str(able.get("status")) == "False":
            family.context.append(f"{hpa.ref}: {kube.describe_condition(able)}")
    _read_events(pipeline, hpa, "HorizontalPodAutoscaler", FETCH_EVENT_REASONS, family)


def _read_scaled_object(pipeline: MetricPipeline, scaled_object: Autoscaler, family: _Family) -> None:
    ready = scaled_object.condition("Ready")
    if ready is not None and str(ready.get("status")) == "False":
        family.current.append(f"{scaled_object.ref}: {kube.describe_condition(ready)}")
        family.messages.append(str(ready.get("message") or ""))
        family.reasons.append(str(ready.get("reason") or "Ready=False"))
    fallback = scaled_object.condition("Fallback")
    if fallback is not None and str(fallback.get("status")) == "True":
        family.current.append(
            f"{scaled_object.ref}: {kube.describe_condition(fallback)} (a trigger is failing; KEDA holds "
            "the fallback replica count)"
        )
        family.reasons.append(str(fallback.get("reason") or "Fallback"))
    _read_events(pipeline, scaled_object, "ScaledObject", KEDA_FAILURE_EVENTS, family)


def _read_events(
    pipeline: MetricPipeline, autoscaler: Autoscaler, kind: str, reasons: frozenset[str], family: _Family
) -> None:
    for event in pipeline.evidence.events:
        involved = event.get("involvedObject") or event.get("regarding") or {}
        if involved.get("kind") != kind or involved.get("name") != autoscaler.name:
            continue
        reason = str(event.get("reason") or "")
        if reason not in reasons:
            continue
        count = _event_count(event)
        first, last = event_interval(event)
        span = f"{format_time(first)} – {format_time(last)}" if first and last else "time unknown"
        message = str(event.get("message") or event.get("note") or "").strip()
        family.events.append(f"event on {autoscaler.ref}: {reason} x{count} ({span}): {message!r}")
        family.messages.append(message)
        family.failed_syncs += count
        if reason not in family.reasons:
            family.reasons.append(reason)


def _fetch_failure(pipeline: MetricPipeline, family: _Family) -> Finding:
    head = family.head
    reasons = ", ".join(dict.fromkeys(family.reasons))
    quoted = next((m for m in family.messages if m), "")
    parts = [
        (
            f"{head.ref} cannot read its metric now ({reasons})"
            if family.current
            else f"{head.ref} failed to read its metric {family.failed_syncs} times in the window ({reasons}), "
            "although its conditions show it reading again now"
        )
        + (f": {quoted!r}." if quoted else ".")
    ]
    parts.append(
        "Without the metric the HPA computes no replica count and holds the current one, so load that "
        "should have added replicas queued on the pods instead."
    )
    forbidden = [m for m in family.messages if _FORBIDDEN.search(m)]
    if forbidden:
        user = _RBAC_USER.search(forbidden[0])
        who = f"{user.group(1)!r}" if user else "the caller"
        parts.append(f"The message is an RBAC refusal: {who} is not allowed to read the metrics API.")
    if any("missing request for" in m for m in family.messages):
        parts.append(
            "A container without a request for the resource leaves utilization undefined "
            "(see RESOURCES_REQUESTS_MISSING in the resources step)."
        )
    for api in dict.fromkeys(api for member in family.members for api in member.apis()):
        if availability_problem(pipeline.states[api]) is not None:
            parts.append(f"{api} itself is down (HPA_METRICS_API_UNAVAILABLE), which explains this.")
    quoted_messages = [m for m in family.messages if m]
    # The same words come from a metrics server that returns nothing for pods that are ready: an effect only
    # when the evidence shows no predictor pod ready.
    pods = common.predictor_pods(pipeline.evidence)
    said_unready = bool(quoted_messages) and all(_PODS_UNREADY.search(m) for m in quoted_messages)
    unready = said_unready and not any(kube.pod_ready(pod) for pod in pods)
    if unready:
        parts.append(
            "The HPA says this when none of its targeted pods is ready: it is an effect of whatever keeps the "
            "predictor's pods unready (see the endpoints, probes and queue_vs_oom steps), not a broken metric "
            "pipeline; it clears once a pod is ready."
        )
    said_none = bool(quoted_messages) and all(_NO_POD_METRICS.search(m) for m in quoted_messages)
    none_running = said_none and not any(kube.status(pod).get("phase") == "Running" for pod in pods)
    if none_running:
        parts.append(
            "No predictor pod runs a container (they are Pending: not scheduled, init containers failing, an image "
            "not pulled, or not created at all), so metrics-server has nothing to return: this is an effect of what "
            "keeps the pods from starting (see the resources step), not a broken metric pipeline; it clears once a "
            "pod runs."
        )
    objects = [pipeline.isvc_ref, *(member.ref for member in family.members)]
    return Finding(
        code="HPA_METRIC_FETCH_FAILED",
        severity=Severity.WARNING if unready or none_running else None,
        title=f"{head.ref} cannot fetch its metric ({reasons})",
        summary=" ".join(parts),
        objects=tuple(dict.fromkeys(objects)),
        evidence=tuple([*family.current, *family.context, *family.events[:10]]),
        fix=Fix(what=_fetch_remediation(pipeline, family, forbidden)),
    )


def _fetch_remediation(pipeline: MetricPipeline, family: _Family, forbidden: list[str]) -> str:
    hpas = [m for m in family.members if m.kind == autoscalers.HPA]
    # The HPA's own metrics when it is in the evidence (KEDA's carry the ScaledObject selector).
    metrics = [metric for member in (hpas or family.members) for metric in member.metrics if metric.api]
    lines = ["See what the autoscaler sees, then ask the metrics API the same question:"]
    lines += [f"  kubectl -n {pipeline.namespace} describe hpa {hpa.name}" for hpa in hpas]
    scaled_objects = [m for m in family.members if m.kind == autoscalers.SCALED_OBJECT]
    lines += [f"  kubectl -n {pipeline.namespace} describe scaledobject {m.name}" for m in scaled_objects]
    for api_name in dict.fromkeys(str(metric.api) for metric in metrics):
        lines.append(f"  kubectl get apiservice {autoscalers.API_SERVICE_NAMES[api_name]}")
    lines += list(
        dict.fromkeys(f'  kubectl get --raw "{raw_metric_path(metric, pipeline.namespace)}"' for metric in metrics)
    )
    if scaled_objects:
        lines.append("  kubectl -n keda logs deploy/keda-operator --tail=200   # KEDA's namespace, keda by default")
    if forbidden:
        user_match = _RBAC_USER.search(forbidden[0])
        user = user_match.group(1) if user_match else _HPA_CONTROLLER
        resources = {metric.api: _raw_resource(metric) for metric in metrics}
        for api, resource in resources.items():
            lines.append(f"  kubectl auth can-i get {resource}.{api} --all-namespaces --as={user}")
        lines.append(
            "Grant the missing permission: the HPA controller needs get/list on the metrics APIs (the "
            "adapter's chart ships a ClusterRole and ClusterRoleBinding for "
            f"{_HPA_CONTROLLER}); an adapter needs to read the pods and namespaces it maps series to."
        )
    lines.append(
        "Fix the failing link the answers point at: the APIService and provider (HPA_METRICS_API_UNAVAILABLE), "
        "the metric name or the adapter rule (HPA_METRIC_SERIES_MISSING), or the KEDA trigger's query and "
        "server address. Nothing in the HPA needs to change while the provider cannot answer."
    )
    return "\n".join(lines)


def _raw_resource(metric: Metric) -> str:
    if metric.api == autoscalers.RESOURCE_METRICS_API:
        return "pods"
    if metric.source == "External":
        return metric.name
    return f"pods/{metric.name}"


def _event_count(event: Mapping[str, Any]) -> int:
    series = event.get("series") or {}
    return int(series.get("count") or event.get("count") or 1)
