"""The metric path every metric_pipeline finding follows: the autoscalers that read a metrics API, the state of
each API they need, and the raw paths to ask those APIs with ``kubectl get --raw``.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import autoscalers, metrics_apis
from nbhelpers.facts.autoscalers import Autoscaler, Metric
from nbhelpers.sources import kinds, kube

_AVAILABILITY_HINTS = {
    "MissingEndpoints": "the Service has no ready endpoint: the provider's pods are down or not ready",
    "ServiceNotFound": "the Service the APIService names does not exist (deleted, or the provider was "
    "uninstalled without its APIService)",
    "FailedDiscoveryCheck": "the API server could not get a good discovery answer from the provider: the "
    "provider fails, its TLS is refused, or the control plane cannot reach the pod's port (on managed "
    "clusters a firewall rule or security group from the control plane to the port is the usual cause)",
}


@dataclass(frozen=True)
class Consumer:
    """One autoscaler metric that reads a given API."""

    autoscaler: Autoscaler
    metric: Metric

    def describe(self) -> str:
        return f"{self.autoscaler.ref} reads {self.metric.describe()} through {self.metric.api}"


class MetricPipeline:
    """The autoscalers that read a metrics API, and the state of each API they need."""

    def __init__(self, evidence: Evidence, readers: tuple[Autoscaler, ...], states: dict[str, metrics_apis.ApiState]):
        self.evidence = evidence
        self.readers = readers
        self.states = states
        self.namespace = evidence.target.namespace
        self.isvc_ref = kube.ref(evidence.isvc)

    def consumers(self, api: str) -> list[Consumer]:
        return [Consumer(a, m) for a in self.readers for m in a.metrics if m.api == api]


def availability_problem(state: metrics_apis.ApiState) -> str | None:
    """Why ``state``'s API cannot answer, ``None`` when it can (or when the evidence cannot tell)."""
    if state.api_service is None:
        if state.read_failure is not None:
            return None  # the coverage line reports the unread APIServices
        return f"no APIService {state.name} is registered, so nothing serves {state.api}"
    available = state.available
    if available is not None:
        if str(available.get("status")) == "True":
            return None
        reason = str(available.get("reason") or "")
        hint = _AVAILABILITY_HINTS.get(reason)
        return f"{state.name} is {kube.describe_condition(available)}" + (f" — {hint}" if hint else "")
    if state.local:
        return None
    if state.service is None:
        return f"{state.name} names {state.service_ref}, which does not exist"
    if state.deployments and not state.ready_deployments():
        names = ", ".join(metrics_apis.describe_deployment(d) for d in state.deployments)
        return f"no pod of the provider behind {state.name} is ready ({names})"
    return None


def raw_metric_path(metric: Metric, namespace: str) -> str:
    """The metrics-API path the HPA controller reads for ``metric`` (for ``kubectl get --raw``)."""
    if metric.api == autoscalers.RESOURCE_METRICS_API:
        return f"/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods"
    if metric.source == "External":
        path = f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{metric.name}"
        match_labels = (metric.selector or {}).get("matchLabels") or {}
        if match_labels:
            selector = ",".join(f"{key}={value}" for key, value in sorted(match_labels.items()))
            path += "?labelSelector=" + urllib.parse.quote(selector, safe="")
        return path
    if metric.source == "Object" and metric.described_object:
        return (
            f"/apis/custom.metrics.k8s.io/v1beta1/namespaces/{namespace}/{_plural(metric.described_object)}/"
            f"{metric.described_object.get('name')}/{metric.name}"
        )
    return f"/apis/custom.metrics.k8s.io/v1beta1/namespaces/{namespace}/pods/*/{metric.name}"


def _plural(described: Mapping[str, Any]) -> str:
    kind = str(described.get("kind") or "")
    registered = next((k for k in kinds.ALL_KINDS if k.kind == kind), None)
    return registered.plural if registered else kind.lower() + "s"
