"""The aggregated metrics APIs an HPA reads, and the providers behind them.

An HPA reads Resource metrics from ``metrics.k8s.io`` (metrics-server, or prometheus-adapter with
``resourceRules``), Pods and Object metrics from ``custom.metrics.k8s.io`` (prometheus-adapter
``rules``) and External metrics from ``external.metrics.k8s.io`` (KEDA's metrics server, or
prometheus-adapter ``externalRules``). The kube-aggregator routes each API to the one Service its
``APIService`` object names and keeps an ``Available`` condition on it (``MissingEndpoints``,
``ServiceNotFound``, ``FailedDiscoveryCheck``, ...).

gather() reads the APIServices, the Service behind each metrics API, the Deployments of that
Service's namespace and prometheus-adapter's rules ConfigMap there. This module turns those into
:class:`ApiState` (one per API) and :class:`Provider` (each metrics provider seen). Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import adapter_rules
from nbhelpers.facts.autoscalers import (
    API_BY_SOURCE,
    API_SERVICE_NAMES,
    EXTERNAL_METRICS_API,
    RESOURCE_METRICS_API,
)
from nbhelpers.sources import kinds, kube
from nbhelpers.sources.kube import KubeObject

KEDA = "keda"
PROMETHEUS_ADAPTER = "prometheus-adapter"
METRICS_SERVER = "metrics-server"
CUSTOM_METRICS_API = API_BY_SOURCE["Pods"]


@dataclass(frozen=True)
class Provider:
    """A metrics provider seen in the evidence: ``kind`` is keda, prometheus-adapter, metrics-server or
    the workload's own name; ``claims`` the APIs its installation serves (see :func:`providers`)."""

    kind: str
    namespace: str
    deployment: KubeObject | None
    claims: frozenset[str]
    seen_as: str  # how the evidence shows it (a Deployment, a ScaledObject KEDA manages, ...)


@dataclass(frozen=True)
class ApiState:
    """One metrics API as the cluster registers it."""

    api: str
    api_service: KubeObject | None
    read_failure: str | None  # why APIServices could not be listed
    available: Mapping[str, Any] | None  # the Available condition, when reported
    service_namespace: str | None
    service_name: str | None
    service: KubeObject | None
    deployments: tuple[KubeObject, ...]  # Deployments whose pods the Service selects
    provider: str | None  # the provider kind behind the Service

    @property
    def name(self) -> str:
        return API_SERVICE_NAMES[self.api]

    @property
    def ref(self) -> str:
        return f"APIService/{self.name}"

    @property
    def service_ref(self) -> str | None:
        return f"Service/{self.service_namespace}/{self.service_name}" if self.service_name else None

    @property
    def local(self) -> bool:
        """An APIService without a Service is served by the kube-apiserver itself."""
        return self.api_service is not None and self.service_name is None

    def ready_deployments(self) -> tuple[KubeObject, ...]:
        return tuple(d for d in self.deployments if deployment_ready(d))

    def describe(self) -> list[str]:
        """Evidence lines: the APIService, its condition, its Service and the Deployments behind it."""
        if self.api_service is None:
            return [f"{self.ref}: not registered"]
        lines = [
            f"{self.ref}: "
            + (kube.describe_condition(self.available) if self.available else "no Available condition reported")
        ]
        if self.local:
            lines.append(f"{self.ref}: served by the kube-apiserver itself (no spec.service)")
            return lines
        if self.service is None:
            lines.append(f"{self.ref} → {self.service_ref}: the Service was not found")
            return lines
        provider = f" ({self.provider})" if self.provider else ""
        if not self.deployments:
            lines.append(
                f"{self.ref} → {self.service_ref}{provider}: no Deployment in the evidence matches its selector"
            )
        for deployment in self.deployments:
            lines.append(f"{self.ref} → {self.service_ref}{provider} → {describe_deployment(deployment)}")
        return lines


def api_states(evidence: Evidence, apis: tuple[str, ...]) -> dict[str, ApiState]:
    """The state of each of ``apis`` (names as in :data:`~nbhelpers.facts.autoscalers.API_BY_SOURCE`)."""
    failure = evidence.failure(kinds.API_SERVICE.key)
    by_name = {kube.name(obj): obj for obj in evidence.of(kinds.API_SERVICE)}
    states = {}
    for api in apis:
        api_service = by_name.get(API_SERVICE_NAMES[api])
        states[api] = _state(evidence, api, api_service, f"{failure.status}: {failure.reason}" if failure else None)
    return states


def _state(evidence: Evidence, api: str, api_service: KubeObject | None, read_failure: str | None) -> ApiState:
    if api_service is None:
        return ApiState(api, None, read_failure, None, None, None, None, (), None)
    reference = kube.spec(api_service).get("service") or {}
    service_name = str(reference["name"]) if reference.get("name") else None
    service_namespace = str(reference.get("namespace") or "default") if service_name else None
    service = next(
        (
            obj
            for obj in evidence.of(kinds.SERVICE)
            if kube.name(obj) == service_name and kube.namespace(obj) == service_namespace
        ),
        None,
    )
    deployments: tuple[KubeObject, ...] = ()
    if service is not None:
        selector = kube.spec(service).get("selector") or {}
        deployments = tuple(
            d
            for d in _deployments_in(evidence, str(service_namespace))
            if kube.selector_matches(selector, _template_labels(d))
        )
    provider = next((provider_kind(d) for d in deployments), None)
    if provider is None and service is not None:
        provider = provider_kind(service)
    return ApiState(
        api,
        api_service,
        read_failure,
        kube.condition(api_service, "Available"),
        service_namespace,
        service_name,
        service,
        deployments,
        provider,
    )


def providers(evidence: Evidence) -> list[Provider]:
    """Metrics providers the evidence shows, with the APIs each one's installation serves.

    "Claims" an API means: installed so that it registers that API when it is (re)deployed. KEDA's
    metrics server always registers external.metrics.k8s.io; metrics-server registers
    metrics.k8s.io; prometheus-adapter registers the APIs its configuration has rules for (custom
    for ``rules``, external for ``externalRules``, resource for ``resourceRules``; custom alone when
    its configuration could not be read, as its chart's default). Only one Service can back an
    APIService, so two providers claiming one API means one of them is not being asked.

    KEDA counts as installed when its metrics server Deployment is seen, or when a ScaledObject in
    the target namespace has status conditions or an HPA KEDA generated (KEDA's operator wrote them).
    """
    found: list[Provider] = []
    for deployment in sorted(evidence.of(kinds.DEPLOYMENT), key=kube.ref):
        kind = provider_kind(deployment)
        if kind is None or kube.namespace(deployment) == evidence.target.namespace:
            continue
        namespace = kube.namespace(deployment)
        found.append(
            Provider(kind, namespace, deployment, _claims(evidence, kind, namespace), describe_deployment(deployment))
        )
    if not any(provider.kind == KEDA for provider in found):
        managed = _keda_managed(evidence)
        if managed:
            found.append(Provider(KEDA, "", None, frozenset({EXTERNAL_METRICS_API}), managed))
    return found


def adapter_configs(evidence: Evidence, namespace: str) -> list[adapter_rules.AdapterConfig]:
    """prometheus-adapter configurations readable in ``namespace``."""
    return adapter_rules.configs_in(evidence.of(kinds.CONFIG_MAP), namespace)


def provider_kind(obj: Mapping[str, Any]) -> str | None:
    """Which metrics provider a Deployment or Service belongs to, from its labels and name."""
    labels = kube.labels(obj)
    words = " ".join([kube.name(obj), *labels.values()]).lower()
    if "keda" in words and ("metrics" in words or "apiserver" in words):
        return KEDA
    if PROMETHEUS_ADAPTER in words:
        return PROMETHEUS_ADAPTER
    if METRICS_SERVER in words:
        return METRICS_SERVER
    return None


def deployment_ready(deployment: Mapping[str, Any]) -> bool:
    return int(kube.status(deployment).get("readyReplicas") or 0) > 0


def describe_deployment(deployment: Mapping[str, Any]) -> str:
    status = kube.status(deployment)
    wanted = kube.spec(deployment).get("replicas", 1)
    text = f"{kube.ref(deployment)}: {int(status.get('readyReplicas') or 0)}/{wanted} ready"
    unavailable = kube.condition(deployment, "Available")
    if unavailable is not None and str(unavailable.get("status")) != "True":
        text += f"; {kube.describe_condition(unavailable)}"
    return text


def _claims(evidence: Evidence, kind: str, namespace: str) -> frozenset[str]:
    if kind == KEDA:
        return frozenset({EXTERNAL_METRICS_API})
    if kind == METRICS_SERVER:
        return frozenset({RESOURCE_METRICS_API})
    configs = adapter_configs(evidence, namespace)
    if not configs:
        return frozenset({CUSTOM_METRICS_API})
    return frozenset().union(*(config.apis() for config in configs))


def _keda_managed(evidence: Evidence) -> str:
    """How the evidence shows KEDA's operator at work in the target namespace ("" when it does not)."""
    namespace = evidence.target.namespace
    for scaled_object in evidence.of(kinds.SCALED_OBJECT):
        if kube.namespace(scaled_object) == namespace and kube.conditions(scaled_object):
            return f"{kube.ref(scaled_object)} has status conditions written by KEDA's operator"
    for hpa in evidence.of(kinds.HPA):
        if kube.namespace(hpa) == namespace and kube.owner_names(hpa, "ScaledObject"):
            return f"{kube.ref(hpa)} was generated by KEDA for a ScaledObject"
    return ""


def _deployments_in(evidence: Evidence, namespace: str) -> list[KubeObject]:
    return sorted((d for d in evidence.of(kinds.DEPLOYMENT) if kube.namespace(d) == namespace), key=kube.name)


def _template_labels(deployment: Mapping[str, Any]) -> dict[str, str]:
    template = kube.spec(deployment).get("template") or {}
    return dict((template.get("metadata") or {}).get("labels") or {})
