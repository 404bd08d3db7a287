"""Step 9, ``timeouts``: are the timeouts aligned from the client to the server, and against real latency?

Every layer on the request path is collected with its timeout and where it was read (or ``default`` and
the default's value), see :mod:`nbhelpers.facts.timeout_path`:

- client: ``--client-timeout`` (the notebook parameter ``client_timeout``), else the optional
  InferenceService annotation ``kserve-runbook/client-timeout`` (seconds or a duration such as ``10m``);
- edge: Ingresses of class ``alb`` (AWS ALB idle timeout), ingress-nginx (``proxy-read-timeout``;
  ``proxy-send-timeout`` is listed but only bounds the upload of the request), ``gce`` (GKE's backend
  timeout: the BackendConfig is not read, so its default is assumed), ``istio`` (no timeout), and Gateway
  API HTTPRoutes (``timeouts.request`` / ``backendRequest``, else the implementation's default);
- mesh: Istio VirtualService http routes' ``timeout``;
- Knative (Serverless): the Revision's ``timeoutSeconds`` / ``responseStartTimeoutSeconds`` /
  ``idleTimeoutSeconds``, else the InferenceService's ``spec.predictor.timeout`` (KServe passes it to the
  revision), else ``config-defaults``.

Two comparisons make findings: an outer layer that gives up before an inner one, and a layer whose timeout
the window's long requests reach (vLLM's end-to-end p99; cold start is not measured yet). A default
LB/ingress/gateway value is ``TIMEOUT_LB_DEFAULT``, anything else ``TIMEOUT_MISALIGNED``. 504s are
attributed from ingress-nginx, Istio (response flag UT) and Knative counts and from a latency plateau at a
layer's value; a finding is raised to critical only when measured 504s in the window are attributed to it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nbhelpers.checks.endpoints import host_matches
from nbhelpers.errors import EvidenceMissing
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common
from nbhelpers.facts import timeout_path as chain
from nbhelpers.facts.timeout_path import Layer
from nbhelpers.findings import patches
from nbhelpers.findings.model import Finding, Severity
from nbhelpers.findings.steps import StepInfo
from nbhelpers.metrics.series import MetricData
from nbhelpers.sources import kinds, kube
from nbhelpers.util.times import duration_seconds

STEP = StepInfo(
    "timeouts",
    "Timeouts",
    "Are timeouts aligned from the client to the server, against observed latency?",
)

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


def run(evidence: Evidence) -> list[Finding]:
    common.skip_modelmesh(evidence)
    _require_routing_reads(evidence)
    path = collect(evidence)
    if not any(layer.finite for layer in path.layers):
        return []
    p99 = evidence.metrics.get("vllm_e2e_p99")
    observed = chain.Observed(
        _peak(p99),
        _peak(evidence.metrics.get("vllm_queue_time_p95")),
        _peak(evidence.metrics.get("vllm_ttft_p95")),
        cold_start=None,  # the cold_start step does not measure it yet: the budget is the latency alone
    )
    cut = _cut_504s(evidence)
    plateau = chain.plateau_at(_values(p99), path.layers)
    judge = _Judge(evidence, path, observed, cut, plateau, _latency_note(p99))
    return [finding for item in path.placed if (finding := judge.finding(item)) is not None]


def _require_routing_reads(evidence: Evidence) -> None:
    """Without any routing object the chain cannot be told: raise only when every routing read was lost."""
    failures = [evidence.failure(kind.key) for kind in (kinds.INGRESS, kinds.VIRTUAL_SERVICE, kinds.HTTP_ROUTE)]
    lost = [failure for failure in failures if failure is not None and failure.lost]
    if len(lost) == 3:
        raise EvidenceMissing(lost[0].what, "; ".join(f"{f.what}: {f.status}" for f in lost))


# --- collecting the layers ----------------------------------------------------------------------


def collect(evidence: Evidence) -> Chain:
    """Every timeout on the path of this InferenceService, outside in."""
    path = Chain()
    _client(evidence, path)
    for ingress in _on_path(evidence, kinds.INGRESS):
        _ingress(ingress, path)
    for route in _on_path(evidence, kinds.HTTP_ROUTE):
        _http_route(evidence, route, path)
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
            "client: timeout unknown (give --client-timeout, or declare it with the InferenceService annotation "
            f"{CLIENT_TIMEOUT_ANNOTATION})"
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
            _kserve_owned(route) and _isvc_timeout(evidence) is None and seconds == chain.KSERVE_HTTPROUTE_DEFAULT
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


def _kserve_owned(obj: Mapping[str, Any]) -> bool:
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


def _values(data: MetricData | None) -> list[float]:
    if data is None or data.status != "ok":
        return []
    return [value for series in data.series for _, value in series.samples if math.isfinite(value)]


def _peak(data: MetricData | None) -> float | None:
    values = _values(data)
    return max(values) if values else None


def _latency_note(data: MetricData | None) -> str | None:
    if data is not None and data.status == "ok" and _values(data):
        return None
    status = "no Prometheus data" if data is None else data.status
    return f"end-to-end latency (vllm_e2e_p99): {status}; timeouts compared with each other only"


def _count(data: MetricData | None, code_label: str, keep: Callable[[Mapping[str, str]], bool]) -> float | None:
    """Requests answered 504 in the window: the per-second rates summed over the samples times the step."""
    if data is None or data.status not in ("ok", "empty"):
        return None
    return sum(
        value * data.step
        for series in data.series
        if series.labels.get(code_label) == "504" and keep(series.labels)
        for _, value in series.samples
        if math.isfinite(value)
    )


def _flags(labels: Mapping[str, str]) -> set[str]:
    return set(str(labels.get("response_flags") or "").split(","))


def _cut_504s(evidence: Evidence) -> chain.Cut504s:
    istio = evidence.metrics.get("istio_requests_by_code")
    return chain.Cut504s(
        nginx=_count(evidence.metrics.get("nginx_requests_by_status"), "status", lambda _: True),
        istio_upstream_timeout=_count(istio, "response_code", lambda labels: "UT" in _flags(labels)),
        istio_passed_through=_count(istio, "response_code", lambda labels: "UT" not in _flags(labels)),
        knative=_count(evidence.metrics.get("knative_requests_by_code"), "response_code", lambda _: True),
    )


def _describe_cut(cut: chain.Cut504s) -> str:
    def show(value: float | None) -> str:
        return "no metric" if value is None else f"≈{value:.0f}"

    return (
        f"504s in the window: ingress-nginx {show(cut.nginx)}; Istio with flag UT {show(cut.istio_upstream_timeout)}; "
        f"Istio passed through {show(cut.istio_passed_through)}; Knative {show(cut.knative)}; cloud load balancers "
        "and Envoy Gateway: not in Prometheus"
    )


# --- findings -------------------------------------------------------------------------------------


class _Judge:
    """Decides, layer by layer, whether its timeout is misaligned, and writes the finding."""

    def __init__(
        self,
        evidence: Evidence,
        path: Chain,
        observed: chain.Observed,
        cut: chain.Cut504s,
        plateau: Layer | None,
        latency_note: str | None,
    ) -> None:
        self.evidence = evidence
        self.path = path
        self.layers = path.layers
        self.observed = observed
        self.cut = cut
        self.plateau = plateau
        self.latency_note = latency_note

    def finding(self, item: Placed) -> Finding | None:
        layer = item.layer
        if not layer.finite:
            return None
        inner = chain.undercut(layer, self.layers)
        slow = chain.cuts_latency(layer, self.observed)
        if not inner and not slow:
            return None
        lb_default = layer.is_default and layer.role in chain.EDGE_ROLES
        attribution = chain.attribute(layer, self.cut, self.plateau) if slow else None
        severity: Severity | None = None
        if lb_default and not slow:
            severity = Severity.INFO  # a latent default: nothing in the window came near it
        elif attribution is not None and attribution.measured:
            severity = Severity.CRITICAL
        code = "TIMEOUT_LB_DEFAULT" if lb_default else "TIMEOUT_MISALIGNED"
        cutting = attribution is not None and (attribution.measured or self.plateau == layer)
        target = chain.recommended_seconds(layer, self.layers, self.observed, self._ceiling(layer), cutting)
        summary = self._summary(layer, inner, slow, attribution, severity)
        what, plan = self._fix(item, target)
        objects = [kube.ref(self.evidence.isvc), *(ref for ref in [layer.obj, *(i.obj for i in inner)] if ref)]
        return Finding(
            code,
            self._title(layer, inner, slow),
            summary,
            tuple(dict.fromkeys(objects)),
            tuple(self._evidence_lines(attribution)),
            plan.remediation(what) if plan else what,
            plan.patch if plan else None,
            severity=severity,
        )

    def _ceiling(self, layer: Layer) -> float | None:
        return max_revision_timeout(self.evidence) if layer.role == "knative" else None

    def _title(self, layer: Layer, inner: Sequence[Layer], slow: bool) -> str:
        value = chain.format_seconds(layer.seconds or 0)
        default = " (default)" if layer.is_default else ""
        if slow:
            assert self.observed.budget is not None
            return (
                f"{layer.name} {value}{default} is below the long requests "
                f"({chain.format_seconds(round(self.observed.budget, 1))} p99)"
            )
        longest = max(inner, key=lambda other: other.seconds or 0.0)
        return (
            f"{layer.name} {value}{default} gives up before {longest.name} {chain.format_seconds(longest.seconds or 0)}"
        )

    def _summary(
        self,
        layer: Layer,
        inner: Sequence[Layer],
        slow: bool,
        attribution: chain.Attribution | None,
        severity: Severity | None,
    ) -> str:
        value = chain.format_seconds(layer.seconds or 0)
        where = f" on {layer.obj}" if layer.obj else ""
        setting = (
            f"left at its default of {value} ({layer.source})"
            if layer.is_default
            else f"set to {value} ({layer.source})"
        )
        parts = [f"The {layer.name}{where} is {setting}."]
        if slow:
            assert self.observed.budget is not None and self.observed.e2e_p99 is not None
            parts.append(
                f"The window's long requests take {chain.format_seconds(round(self.observed.budget, 1))} "
                f"(vLLM end-to-end p99 {chain.format_seconds(round(self.observed.e2e_p99, 1))}, queue time p95 "
                f"{chain.describe_seconds(self.observed.queue_p95)} of it; cold start not measured), so requests "
                f"longer than {value} "
                "are cut by this layer with a 504, while the layers behind it (and vLLM) may go on working on them."
            )
        if inner:
            names = ", ".join(f"{i.name} {chain.format_seconds(i.seconds or 0)}" for i in inner)
            parts.append(
                f"It also gives up before the layers behind it ({names}): their longer timeouts never take effect, "
                "and a request past this layer's limit keeps the layers behind it and the GPU busy for nobody."
            )
        if attribution is not None and attribution.reasons:
            parts.append("Attribution: " + "; ".join(attribution.reasons) + ".")
        if severity is Severity.CRITICAL:
            assert attribution is not None
            parts.append(
                f"Raised to critical: ≈{attribution.count:.0f} 504s in the window are attributed to this layer."
            )
        elif severity is Severity.INFO:
            parts.append("No request in the window came near it, so this is reported for information only.")
        return " ".join(parts)

    def _evidence_lines(self, attribution: chain.Attribution | None) -> list[str]:
        lines = [f"chain: {chain.describe_chain(self.layers)}"]
        lines += [layer.describe() for layer in self.layers]
        lines.append(self.observed.describe())
        if self.latency_note:
            lines.append(self.latency_note)
        lines.append(_describe_cut(self.cut))
        if attribution is not None:
            lines += [f"attribution: {reason}" for reason in attribution.reasons]
        lines.append(chain.streaming_note(self.observed, self.layers, self.cut))
        lines += self.path.notes
        return lines

    # --- fixes ------------------------------------------------------------------------------------

    def _fix(self, item: Placed, target: int) -> tuple[str, patches.PatchPlan | None]:
        layer = item.layer
        if layer.role == "client":
            return (
                f"Raise the client's timeout to at least {target} s, or lower the layers behind it below the "
                "client's so that they answer a clean 504 before it gives up. The client is not a cluster object: "
                f"update its configuration and the annotation {CLIENT_TIMEOUT_ANNOTATION} that records it.",
                None,
            )
        if layer.role == "knative" and layer.kind == chain.IDLE:
            return (
                f"Raise or remove the revision's idleTimeoutSeconds (at least {target} s, 0 for none). KServe owns the "
                "Knative Service and does not expose it: change revision-idle-timeout-seconds in "
                f"{self.evidence.site.knative_namespace}/config-defaults (cluster-wide) instead.",
                None,
            )
        if layer.role == "knative":
            return self._isvc_timeout_fix(layer, target)
        assert item.obj is not None
        if layer.role == "lb" and layer.name.startswith("GKE"):
            return (
                f"Create a BackendConfig with spec.timeoutSec: {target} and reference it from the predictor Service "
                "with the annotation cloud.google.com/backend-config (its default is 30 s). This tool does not read "
                "BackendConfigs, so check first whether one already sets it. Roll back by removing the annotation.",
                None,
            )
        if layer.role in ("lb", "ingress"):
            return self._ingress_fix(layer, item.obj, target)
        if layer.role == "gateway":
            return self._http_route_fix(layer, item.obj, target)
        return self._virtual_service_fix(layer, item.obj, target)

    def _isvc_timeout_fix(self, layer: Layer, target: int) -> tuple[str, patches.PatchPlan | None]:
        ceiling = max_revision_timeout(self.evidence)
        what = (
            f"Set spec.predictor.timeout: {target} on the InferenceService: KServe owns the Knative Service and "
            "passes it to the revision's timeoutSeconds (and, in newer versions, responseStartTimeoutSeconds)."
        )
        if layer.role == "gateway":
            what = (
                f"Set spec.predictor.timeout: {target} on the InferenceService: KServe generates {layer.obj} and "
                "writes "
                "that value into its timeouts.request (a direct edit of the route is reverted)."
            )
        elif self.observed.budget is not None and target < self.observed.budget * chain.SAFETY_FACTOR:
            what += (
                f" {target} s is Knative's max-revision-timeout-seconds ({ceiling:g} s in "
                f"{self.evidence.site.knative_namespace}/config-defaults): a longer timeout needs a cluster "
                "administrator to raise it there (and the activator's terminationGracePeriodSeconds with it)."
            )

        def set_timeout(isvc: common.KubeObject) -> None:
            isvc.setdefault("spec", {}).setdefault("predictor", {})["timeout"] = target

        return what, patches.plan_patch(self.evidence.isvc, set_timeout)

    def _ingress_fix(
        self, layer: Layer, ingress: Mapping[str, Any], target: int
    ) -> tuple[str, patches.PatchPlan | None]:
        alb = layer.name.startswith("AWS ALB")
        annotations = kube.annotations(ingress)
        if alb:
            attributes = chain.parse_alb_attributes(annotations.get(ALB_ATTRIBUTES, ""))
            attributes[ALB_IDLE_KEY] = str(target)
            wanted = {ALB_ATTRIBUTES: chain.format_alb_attributes(attributes)}
            what = f"Set the ALB idle timeout to {target} s ({ALB_ATTRIBUTES}: {wanted[ALB_ATTRIBUTES]})."
        else:
            wanted = {NGINX_READ: str(target), NGINX_SEND: str(target)}
            what = f"Set ingress-nginx's proxy-read-timeout (and proxy-send-timeout) to {target} s on {layer.obj}."
        owner = common.controller_owner(ingress)
        if owner is None:
            return what, patches.plan_patch(
                ingress, lambda obj: obj["metadata"].setdefault("annotations", {}).update(wanted)
            )
        if _kserve_owned(ingress):
            # KServe copies the InferenceService's annotations onto the Ingress it generates
            # (kserve/kserve raw_ingress_reconciler.go generateMetadata: "get annotations from isvc").
            what += (
                f" {layer.obj} is generated by {owner}, which copies the InferenceService's annotations onto it: "
                "annotate the InferenceService (KServe also copies them to the predictor's other objects)."
            )
            return what, patches.plan_patch(
                self.evidence.isvc, lambda obj: obj["metadata"].setdefault("annotations", {}).update(wanted)
            )
        return what + f" {layer.obj} is generated by {owner}: change the object it is generated from.", None

    def _http_route_fix(
        self, layer: Layer, route: Mapping[str, Any], target: int
    ) -> tuple[str, patches.PatchPlan | None]:
        if _kserve_owned(route):
            return self._isvc_timeout_fix(layer, target)
        owner = common.controller_owner(route)
        what = f"Set timeouts.request (and any shorter backendRequest) of {layer.obj} to {target}s."
        if owner is not None:
            return what + f" The route is generated by {owner}: change the object it is generated from.", None

        def set_timeouts(obj: common.KubeObject) -> None:
            for rule in obj["spec"].get("rules") or []:
                timeouts = rule.setdefault("timeouts", {})
                for key in ("request", "backendRequest"):
                    current = duration_seconds(timeouts.get(key))
                    if key == "request" or (current is not None and current < target):
                        timeouts[key] = f"{target}s"

        return what, patches.plan_patch(route, set_timeouts)

    def _virtual_service_fix(
        self, layer: Layer, service: Mapping[str, Any], target: int
    ) -> tuple[str, patches.PatchPlan | None]:
        what = f"Raise the route timeout of {layer.obj} to {target}s on every http route that sets a shorter one."
        owner = common.controller_owner(service)
        if owner is not None:
            return (
                what + f" It is generated by {owner}, which would revert a direct edit: KServe and Knative derive "
                "route timeouts from the InferenceService's spec.predictor.timeout, so set that instead.",
                None,
            )

        def set_timeout(obj: common.KubeObject) -> None:
            for http in obj["spec"].get("http") or []:
                current = duration_seconds(http.get("timeout"))
                if current and current < target:
                    http["timeout"] = f"{target}s"

        return what, patches.plan_patch(service, set_timeout)
