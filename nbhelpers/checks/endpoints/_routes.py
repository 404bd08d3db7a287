"""The routing objects of the service (VirtualServices, HTTPRoutes, Ingresses): their hosts, the Services they
send to, the gateways they hang on, and KServe's ingress configuration that says which ones to expect.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common
from nbhelpers.sources import kinds, kube

VISIBILITY_LABEL = "networking.kserve.io/visibility"


@dataclass(frozen=True)
class IngressConfig:
    """The ``ingress`` entry of KServe's ``inferenceservice-config`` (KServe defaults when unreadable)."""

    enable_gateway_api: bool = False
    disable_istio_virtual_host: bool = False
    disable_ingress_creation: bool = False
    known: bool = False


def ingress_config(evidence: Evidence) -> IngressConfig:
    config = evidence.config_map(evidence.site.kserve_namespace, "inferenceservice-config")
    if config is None:
        return IngressConfig()
    try:
        ingress = json.loads((config.get("data") or {}).get("ingress") or "{}")
    except json.JSONDecodeError:
        return IngressConfig()
    return IngressConfig(
        bool(ingress.get("enableGatewayApi")),
        bool(ingress.get("disableIstioVirtualHost")),
        bool(ingress.get("disableIngressCreation")),
        known=True,
    )


@dataclass(frozen=True)
class Route:
    """A routing object of the service: its hosts, the Services it sends to, the gateways it hangs on."""

    obj: Mapping[str, Any]
    hosts: tuple[str, ...]  # empty: every host
    backends: tuple[str, ...]  # Service names in the ISVC's namespace
    gateways: tuple[tuple[kinds.Kind, str, str, str], ...]  # (kind, namespace, name, section or "")

    @property
    def ref(self) -> str:
        return kube.ref(self.obj)


def url_host(evidence: Evidence) -> str:
    url = str(kube.status(evidence.isvc).get("url") or "")
    return (urlparse(url).hostname or "").lower()


def cluster_local(evidence: Evidence, host: str) -> bool:
    return kube.labels(evidence.isvc).get(VISIBILITY_LABEL) == "cluster-local" or host.endswith(
        (".svc", ".svc.cluster.local")
    )


def _owned_by_isvc(obj: Mapping[str, Any], isvc: str) -> bool:
    return any(
        owner.get("kind") == "InferenceService" and owner.get("name") == isvc
        for owner in kube.metadata(obj).get("ownerReferences") or []
    )


def routes_of_service(evidence: Evidence, host: str) -> list[Route]:
    """VirtualServices, HTTPRoutes and Ingresses that belong to the ISVC, send to its predictor Service,
    or serve the host of its URL."""
    isvc, namespace = evidence.target.isvc, evidence.target.namespace
    names = {isvc, common.predictor_name(evidence)}
    routes = []
    for route in (
        *(_virtual_service(vs) for vs in evidence.of(kinds.VIRTUAL_SERVICE)),
        *(_http_route(hr) for hr in evidence.of(kinds.HTTP_ROUTE)),
        *(_ingress(ing) for ing in evidence.of(kinds.INGRESS)),
    ):
        obj = route.obj
        if kube.namespace(obj) != namespace:
            continue
        if (
            kube.name(obj) in names
            or _owned_by_isvc(obj, isvc)
            or kube.labels(obj).get(kube.ISVC_LABEL) == isvc
            or common.predictor_name(evidence) in route.backends
            or (host and any(common.host_matches(pattern, host) for pattern in route.hosts if pattern not in ("", "*")))
        ):
            routes.append(route)
    return routes


def _virtual_service(vs: Mapping[str, Any]) -> Route:
    body = kube.spec(vs)
    namespace = kube.namespace(vs)
    backends = []
    for http in body.get("http") or []:
        for destination in http.get("route") or []:
            host = str((destination.get("destination") or {}).get("host") or "")
            service, _, rest = host.partition(".")
            if not rest or rest.startswith(f"{namespace}.svc") or rest == namespace:
                backends.append(service)
    gateways = []
    for gateway in body.get("gateways") or []:
        if gateway == "mesh":
            continue
        gw_namespace, _, gw_name = str(gateway).rpartition("/")
        gateways.append((kinds.ISTIO_GATEWAY, gw_namespace or namespace, gw_name, ""))
    return Route(vs, tuple(str(h).lower() for h in body.get("hosts") or []), tuple(backends), tuple(gateways))


def _http_route(route: Mapping[str, Any]) -> Route:
    body = kube.spec(route)
    namespace = kube.namespace(route)
    backends = [
        str(ref.get("name"))
        for rule in body.get("rules") or []
        for ref in rule.get("backendRefs") or []
        if ref.get("kind", "Service") == "Service" and ref.get("namespace", namespace) == namespace
    ]
    gateways = [
        (
            kinds.GATEWAY_API_GATEWAY,
            str(parent.get("namespace") or namespace),
            str(parent["name"]),
            str(parent.get("sectionName") or ""),
        )
        for parent in body.get("parentRefs") or []
        if parent.get("kind", "Gateway") == "Gateway" and parent.get("name")
    ]
    return Route(route, tuple(str(h).lower() for h in body.get("hostnames") or []), tuple(backends), tuple(gateways))


def _ingress(ingress: Mapping[str, Any]) -> Route:
    body = kube.spec(ingress)
    hosts: list[str] = []
    backends: list[str] = []
    default = ((body.get("defaultBackend") or {}).get("service") or {}).get("name")
    if default:
        backends.append(str(default))
    for rule in body.get("rules") or []:
        if not rule.get("host"):
            hosts = []
            break
        hosts.append(str(rule["host"]).lower())
    for rule in body.get("rules") or []:
        for path in (rule.get("http") or {}).get("paths") or []:
            name = ((path.get("backend") or {}).get("service") or {}).get("name")
            if name:
                backends.append(str(name))
    return Route(ingress, tuple(hosts), tuple(backends), ())


def find_gateway(evidence: Evidence, kind: kinds.Kind, namespace: str, name: str) -> Mapping[str, Any] | None:
    return next(
        (g for g in evidence.of(kind) if kube.namespace(g) == namespace and kube.name(g) == name),
        None,
    )


def gateway_hosts(gateway: Mapping[str, Any], section: str) -> list[str]:
    body = kube.spec(gateway)
    if "servers" in body:  # Istio
        return [str(h) for server in body.get("servers") or [] for h in server.get("hosts") or []]
    listeners = [lst for lst in body.get("listeners") or [] if not section or lst.get("name") == section]
    return [str(listener.get("hostname") or "*") for listener in listeners]
