"""The timeout layers on the path of one InferenceService, outside in: the client, LBs and ingresses,
Gateway API routes, Istio VirtualServices, Knative's revision timeout; each with the object that sets it.

The timeouts step judges them; the cold-start step and the what-if read the same path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common, llmisvc
from nbhelpers.facts import timeout_path as chain
from nbhelpers.facts.common import host_matches
from nbhelpers.facts.timeout_path import Layer
from nbhelpers.sources import kinds, kube
from nbhelpers.util.times import duration_seconds

CLIENT_TIMEOUT_ANNOTATION = "kserve-runbook/client-timeout"
INGRESS_CLASS_ANNOTATION = "kubernetes.io/ingress.class"
NGINX_READ = "nginx.ingress.kubernetes.io/proxy-read-timeout"
NGINX_SEND = "nginx.ingress.kubernetes.io/proxy-send-timeout"
ALB_ATTRIBUTES = "alb.ingress.kubernetes.io/load-balancer-attributes"
ALB_IDLE_KEY = "idle_timeout.timeout_seconds"
ENVOY_GATEWAY_CONTROLLER = "gateway.envoyproxy.io/gatewayclass-controller"
ISTIO_GATEWAY_CONTROLLER = "istio.io/gateway-controller"


@dataclass(frozen=True)
class Placed:
    """A layer and the object whose field sets it (None for the client)."""

    layer: Layer
    obj: Mapping[str, Any] | None


@dataclass
class Chain:
    placed: list[Placed] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def layers(self) -> list[Layer]:
        return [item.layer for item in self.placed]


# --- collecting the layers ----------------------------------------------------------------------


def collect(evidence: Evidence) -> Chain:
    """Every timeout on the path of this InferenceService, outside in."""
    path = Chain()
    _client(evidence, path)
    for ingress in _on_path(evidence, kinds.INGRESS):
        _ingress(ingress, path)
    # An LLMInferenceService is reached through its own HTTPRoutes and the Gateway: no VirtualService or Knative layer.
    routes = llmisvc.routes(evidence) if evidence.target.is_llmisvc else _on_path(evidence, kinds.HTTP_ROUTE)
    for route in routes:
        _http_route(evidence, route, path)
    if not evidence.target.is_llmisvc:
        for service in _on_path(evidence, kinds.VIRTUAL_SERVICE):
            _virtual_service(service, path)
    if common.effective_mode(evidence) == common.SERVERLESS:
        _knative(evidence, path)
    for kind in (kinds.INGRESS, kinds.VIRTUAL_SERVICE, kinds.HTTP_ROUTE):
        failure = evidence.failure(kind.key)
        if failure is not None and failure.lost:
            path.notes.append(f"not seen: {failure.what} ({failure.status}): layers of that kind may be missing")
    return path


def _client(evidence: Evidence, path: Chain) -> None:
    text = kube.annotations(evidence.isvc).get(CLIENT_TIMEOUT_ANNOTATION)
    if evidence.site.client_timeout_seconds is not None:
        seconds: float | None = evidence.site.client_timeout_seconds
        source = "--client-timeout"
    elif text is None:
        path.notes.append(
            f"client: timeout unknown (give --client-timeout, or declare it with the {evidence.target.kind} "
            f"annotation {CLIENT_TIMEOUT_ANNOTATION})"
        )
        return
    else:
        seconds, source = duration_seconds(text), f"annotation {CLIENT_TIMEOUT_ANNOTATION}"
    if seconds is None:
        path.notes.append(f"client: annotation {CLIENT_TIMEOUT_ANNOTATION}={text!r} is not a duration; ignored")
        return
    layer = Layer(
        "client",
        chain.CLIENT,
        "client",
        chain.REQUEST,
        seconds,
        source,
        False,
        kube.ref(evidence.isvc),
    )
    path.placed.append(Placed(layer, None))


def _on_path(evidence: Evidence, kind: kinds.Kind) -> list[Mapping[str, Any]]:
    """Routing objects of ``kind`` that belong to the service, send to its predictor, or serve its URL's host."""
    isvc, predictor = evidence.target.isvc, common.predictor_name(evidence)
    url_host = _url_host(evidence)
    found = []
    for obj in evidence.of(kind):
        if kube.namespace(obj) != evidence.target.namespace:
            continue
        backends = _backends(obj)
        hosts = _hosts(obj)
        if (
            kube.name(obj) in (isvc, predictor)
            or any(o.get("kind") == "InferenceService" and o.get("name") == isvc for o in _owners(obj))
            or kube.labels(obj).get(kube.ISVC_LABEL) == isvc
            or any(b in (isvc, predictor) or b.startswith(f"{predictor}-") for b in backends)
            or (url_host and any(host_matches(h, url_host) for h in hosts if h not in ("", "*")))
        ):
            found.append(obj)
    return sorted(found, key=kube.name)


def _owners(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(kube.metadata(obj).get("ownerReferences") or [])


def _url_host(evidence: Evidence) -> str:
    url = str(kube.status(evidence.isvc).get("url") or "")
    return url.partition("://")[2].split("/")[0].split(":")[0].lower()


def _backends(obj: Mapping[str, Any]) -> list[str]:
    body = kube.spec(obj)
    names: list[str] = []
    for http in body.get("http") or []:  # VirtualService
        for destination in http.get("route") or []:
            names.append(str((destination.get("destination") or {}).get("host") or "").split(".")[0])
    for rule in body.get("rules") or []:
        for ref in rule.get("backendRefs") or []:  # HTTPRoute
            names.append(str(ref.get("name") or ""))
        for path in (rule.get("http") or {}).get("paths") or []:  # Ingress
            names.append(str(((path.get("backend") or {}).get("service") or {}).get("name") or ""))
    default = ((body.get("defaultBackend") or {}).get("service") or {}).get("name")
    if default:
        names.append(str(default))
    return names


def _hosts(obj: Mapping[str, Any]) -> list[str]:
    body = kube.spec(obj)
    hosts = [str(h) for h in body.get("hosts") or []] + [str(h) for h in body.get("hostnames") or []]
    hosts += [str(rule.get("host")) for rule in body.get("rules") or [] if rule.get("host")]
    return [h.lower() for h in hosts]


def _ingress_class(ingress: Mapping[str, Any]) -> str:
    return str(
        kube.spec(ingress).get("ingressClassName") or kube.annotations(ingress).get(INGRESS_CLASS_ANNOTATION) or ""
    )


def _ingress(ingress: Mapping[str, Any], path: Chain) -> None:
    ref = kube.ref(ingress)
    annotations = kube.annotations(ingress)
    ingress_class = _ingress_class(ingress)
    if ingress_class == "alb" or ALB_ATTRIBUTES in annotations:
        idle = duration_seconds(chain.parse_alb_attributes(annotations.get(ALB_ATTRIBUTES, "")).get(ALB_IDLE_KEY))
        source = (
            f"annotation {ALB_ATTRIBUTES}: {ALB_IDLE_KEY}={idle:g}"
            if idle is not None
            else f"default {chain.ALB_IDLE_DEFAULT:g} s: no {ALB_IDLE_KEY} in {ALB_ATTRIBUTES}"
        )
        seconds = idle if idle is not None else chain.ALB_IDLE_DEFAULT
        layer = Layer(
            "AWS ALB idle timeout", chain.EDGE, "lb", chain.IDLE, seconds, source, idle is None, ref, inferred_504s=True
        )
        path.placed.append(Placed(layer, ingress))
    elif "nginx" in ingress_class or any(key.startswith("nginx.ingress.kubernetes.io/") for key in annotations):
        read = duration_seconds(annotations.get(NGINX_READ))
        source = (
            f"annotation {NGINX_READ}"
            if read is not None
            else f"default {chain.NGINX_PROXY_DEFAULT:g} s: no {NGINX_READ} annotation"
        )
        seconds = read if read is not None else chain.NGINX_PROXY_DEFAULT
        layer = Layer(
            "ingress-nginx proxy-read-timeout", chain.EDGE, "ingress", chain.IDLE, seconds, source, read is None, ref
        )
        path.placed.append(Placed(layer, ingress))
        send = duration_seconds(annotations.get(NGINX_SEND))
        path.notes.append(
            f"ingress-nginx proxy-send-timeout on {ref}: "
            + (f"{send:g} s (annotation)" if send is not None else f"default {chain.NGINX_PROXY_DEFAULT:g} s")
            + ": it bounds the upload of the request body, not the generation; not compared"
        )
    elif ingress_class in ("gce", "gce-internal"):
        source = (
            f"default {chain.GKE_BACKEND_DEFAULT:g} s assumed: the BackendConfig (timeoutSec) that may change it is "
            "not read by this tool"
        )
        layer = Layer(
            "GKE load balancer backend timeout",
            chain.EDGE,
            "lb",
            chain.REQUEST,
            chain.GKE_BACKEND_DEFAULT,
            source,
            True,
            ref,
            inferred_504s=True,
        )
        path.placed.append(Placed(layer, ingress))
    elif ingress_class == "istio":
        layer = Layer("Istio ingress", chain.EDGE, "ingress", chain.REQUEST, None, "Istio sets no timeout", True, ref)
        path.placed.append(Placed(layer, ingress))
    else:
        path.notes.append(
            f"{ref} (class {ingress_class or 'not set'}): its controller's timeout is not known to this tool"
        )


def _http_route(evidence: Evidence, route: Mapping[str, Any], path: Chain) -> None:
    ref = kube.ref(route)
    controllers = {str(parent.get("controllerName") or "") for parent in kube.status(route).get("parents") or []}
    values: list[tuple[float, str]] = []
    disabled = False
    for index, rule in enumerate(kube.spec(route).get("rules") or []):
        timeouts = rule.get("timeouts") or {}
        for key in ("request", "backendRequest"):
            seconds = duration_seconds(timeouts.get(key))
            if seconds == 0:
                disabled = True  # "0s" disables the timeout (Gateway API)
            elif seconds is not None:
                values.append((seconds, f"spec.rules[{index}].timeouts.{key}"))
    envoy = ENVOY_GATEWAY_CONTROLLER in controllers
    # Only Istio's gateway reports to the catalog's metrics (istio_requests_total): other implementations' 504s
    # are inferred.
    inferred = ISTIO_GATEWAY_CONTROLLER not in controllers
    if values:
        seconds, where = min(values)
        kserve_default = (
            not evidence.target.is_llmisvc  # KServe's LLMInferenceService route preset sets 0s, not 60 s
            and kserve_owned(route)
            and _isvc_timeout(evidence) is None
            and seconds == chain.KSERVE_HTTPROUTE_DEFAULT
        )
        source = (
            f"{where}: KServe's default for the HTTPRoutes it generates (v0.15+), the InferenceService sets no "
            "spec.predictor.timeout"
            if kserve_default
            else where
        )
        layer = Layer("HTTPRoute", chain.EDGE, "gateway", chain.REQUEST, seconds, source, kserve_default, ref, inferred)
    elif disabled or ISTIO_GATEWAY_CONTROLLER in controllers:
        why = "timeouts set to 0s (disabled)" if disabled else "no timeouts: Istio sets none by default"
        layer = Layer("HTTPRoute", chain.EDGE, "gateway", chain.REQUEST, None, why, not disabled, ref)
    elif envoy:
        source = f"default {chain.ENVOY_GATEWAY_DEFAULT:g} s: no timeouts, and Envoy Gateway's request timeout applies"
        layer = Layer(
            "HTTPRoute", chain.EDGE, "gateway", chain.REQUEST, chain.ENVOY_GATEWAY_DEFAULT, source, True, ref, True
        )
    else:
        implementation = ", ".join(sorted(c for c in controllers if c)) or "unknown"
        path.notes.append(f"{ref}: no timeouts, and the default of its implementation ({implementation}) is not known")
        return
    path.placed.append(Placed(layer, route))


def _virtual_service(service: Mapping[str, Any], path: Chain) -> None:
    values: list[tuple[float, str]] = []
    for index, http in enumerate(kube.spec(service).get("http") or []):
        seconds = duration_seconds(http.get("timeout"))
        if seconds:  # "0s" disables it, as an absent timeout does
            values.append((seconds, f"spec.http[{index}].timeout"))
    if values:
        seconds, source = min(values)
        layer = Layer(
            "VirtualService route", chain.MESH, "mesh", chain.REQUEST, seconds, source, False, kube.ref(service)
        )
    else:
        layer = Layer(
            "VirtualService route",
            chain.MESH,
            "mesh",
            chain.REQUEST,
            None,
            "no timeout: Istio's default is none",
            True,
            kube.ref(service),
        )
    path.placed.append(Placed(layer, service))


def _isvc_timeout(evidence: Evidence) -> float | None:
    return duration_seconds((kube.spec(evidence.isvc).get("predictor") or {}).get("timeout"))


def kserve_owned(obj: Mapping[str, Any]) -> bool:
    return any(str(owner.get("apiVersion") or "").startswith("serving.kserve.io/") for owner in _owners(obj))


def _config_defaults(evidence: Evidence) -> Mapping[str, str]:
    config = evidence.config_map(evidence.site.knative_namespace, "config-defaults")
    return dict((config or {}).get("data") or {})


def max_revision_timeout(evidence: Evidence) -> float:
    value = duration_seconds(_config_defaults(evidence).get("max-revision-timeout-seconds"))
    return value if value is not None else chain.KNATIVE_MAX_REVISION_DEFAULT


def _knative(evidence: Evidence, path: Chain) -> None:
    latest = common.latest_revision_name(evidence)
    revision = common.named(evidence, kinds.KNATIVE_REVISION, latest) if latest else None
    spec = kube.spec(revision) if revision is not None else {}
    where = kube.ref(revision) if revision is not None else f"Revision {latest or '(none seen)'}"
    defaults = _config_defaults(evidence)
    # KServe's Knative reconciler sets the revision template's TimeoutSeconds (and, in newer versions,
    # ResponseStartTimeoutSeconds) from the component's ``timeout`` (kserve/kserve reconcilers/knative
    # ksvc_reconciler.go: ``TimeoutSeconds: componentExtension.TimeoutSeconds``); unset, Knative's defaulting
    # webhook writes config-defaults' revision-timeout-seconds.
    isvc_timeout = _isvc_timeout(evidence)
    config_name = f"{evidence.site.knative_namespace}/config-defaults"
    timeout = duration_seconds(spec.get("timeoutSeconds"))
    configured = duration_seconds(defaults.get("revision-timeout-seconds"))
    default = configured if configured is not None else chain.KNATIVE_REVISION_DEFAULT
    if timeout is not None:
        is_default = isvc_timeout is None and timeout == default
        source = "spec.timeoutSeconds" + (
            ", the default: the InferenceService sets no spec.predictor.timeout" if is_default else ""
        )
    elif isvc_timeout is not None:
        timeout, is_default = isvc_timeout, False
        source = "the InferenceService's spec.predictor.timeout, which KServe passes to the revision"
    else:
        timeout, is_default = default, True
        source = (
            f"default {default:g} s from {config_name} revision-timeout-seconds"
            if configured is not None
            else f"Knative's default {default:g} s"
        )
    ref = kube.ref(revision) if revision is not None else None
    layer = Layer(
        "Knative revision timeoutSeconds", chain.KNATIVE, "knative", chain.REQUEST, timeout, source, is_default, ref
    )
    path.placed.append(Placed(layer, revision))
    for key, config_key, name, kind in (
        (
            "responseStartTimeoutSeconds",
            "revision-response-start-timeout-seconds",
            "responseStartTimeoutSeconds",
            chain.FIRST_BYTE,
        ),
        ("idleTimeoutSeconds", "revision-idle-timeout-seconds", "idleTimeoutSeconds", chain.IDLE),
    ):
        seconds = duration_seconds(spec.get(key))
        source = f"spec.{key}"
        if seconds is None:
            seconds = duration_seconds(defaults.get(config_key))
            source = f"{config_name} {config_key}"
        if seconds:  # 0 or absent: no such limit
            extra = Layer(f"Knative revision {name}", chain.KNATIVE, "knative", kind, seconds, source, False, ref)
            path.placed.append(Placed(extra, revision))
    if revision is None:
        path.notes.append(f"{where}: not found; the revision timeout is taken from the InferenceService or defaults")


# --- metrics --------------------------------------------------------------------------------------
