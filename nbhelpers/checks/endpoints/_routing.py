"""Routing in front of the serving path: the expected routing layer, the gateways, the routes' status and
backends, and the hosts they match (``ROUTING_LAYER_MISMATCH``, ``ROUTING_HOST_MISMATCH``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from nbhelpers.checks.endpoints._endpoints import selector_mismatch
from nbhelpers.checks.endpoints._routes import (
    Route,
    cluster_local,
    find_gateway,
    gateway_hosts,
    ingress_config,
    routes_of_service,
    url_host,
)
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common, traffic
from nbhelpers.findings import patches
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.sources import kinds, kube


def routing(evidence: Evidence, mode: str) -> list[Finding]:
    host = url_host(evidence)
    if cluster_local(evidence, host):
        return []
    routes = routes_of_service(evidence, host)
    findings = _expected_routes_missing(evidence, mode, routes)
    findings += _gateway_problems(evidence, routes, host)
    findings += _route_status_problems(evidence, routes)
    if mode == common.RAW:
        findings += _backend_problems(evidence, routes)
    host_finding = _host_mismatch(evidence, routes, host)
    if host_finding is not None:
        findings.append(host_finding)
    return findings


def _expected_routes_missing(evidence: Evidence, mode: str, routes: list[Route]) -> list[Finding]:
    config = ingress_config(evidence)
    ingress_ready = kube.condition_true(evidence.isvc, "IngressReady")
    if not config.known and ingress_ready:
        return []  # KServe's own configuration is unreadable and it reports the ingress ready: trust it
    expected: list[tuple[kinds.Kind, str]] = []
    knative_present = common.knative_service(evidence) is not None
    if mode == common.SERVERLESS and not config.disable_istio_virtual_host and knative_present:
        expected.append((kinds.VIRTUAL_SERVICE, "KServe's Istio virtual host (disableIstioVirtualHost is false)"))
    elif mode == common.RAW and config.enable_gateway_api:
        expected.append((kinds.HTTP_ROUTE, "KServe's Gateway API route (enableGatewayApi is true)"))
    elif mode == common.RAW and not config.disable_ingress_creation:
        expected.append((kinds.INGRESS, "KServe's Ingress (disableIngressCreation is false)"))
    findings = []
    for kind, why in expected:
        failure = evidence.failure(kind.key)
        name = evidence.target.isvc
        if failure is not None and failure.status not in ("not_installed", "missing"):
            continue  # could not look: the coverage line reports it
        if failure is not None:
            short, problem = (
                "is not installed",
                f"the {kind.kind} CRD ({kind.group}) is not installed ({failure.reason})",
            )
        elif not ingress_ready and not any(
            route.obj.get("kind") == kind.kind and kube.name(route.obj) == name for route in routes
        ):
            # KServe sets IngressReady only after creating its route: while it says ready, trust it.
            short, problem = "was not created", f"no {kind.kind} {name} exists in {evidence.target.namespace}"
            if _predictor_not_ready(evidence):
                findings.append(_route_awaits_predictor(evidence, mode, kind, problem))
                continue
        else:
            continue
        findings.append(_layer_finding(evidence, mode, kind, why, short, problem))
    return findings


def _predictor_not_ready(evidence: Evidence) -> bool:
    condition = kube.condition(evidence.isvc, "PredictorReady")
    return condition is not None and str(condition.get("status")) != "True"


def _route_awaits_predictor(evidence: Evidence, mode: str, kind: kinds.Kind, problem: str) -> Finding:
    """KServe creates its route only once the predictor is ready, so a missing route is then an effect.

    kserve/kserve pkg/controller/v1beta1/inferenceservice/reconcilers/ingress/kube_ingress_reconciler.go,
    createRawIngress: ``if !isvc.Status.IsConditionReady(v1beta1.PredictorReady)`` sets IngressReady=False with
    reason "Predictor ingress not created" and creates nothing; ingress_reconciler.go (the Istio VirtualService)
    and httproute_reconciler.go (the Gateway API HTTPRoute) do the same.
    """
    lines = [f"found: {problem}"]
    lines += [f"InferenceService condition {kube.describe_condition(c)}" for c in kube.conditions(evidence.isvc)]
    return Finding(
        code="ROUTING_LAYER_MISMATCH",
        severity=Severity.INFO,
        title=f"the {kind.kind} will be created once the predictor is ready",
        summary=f"{problem[0].upper()}{problem[1:]}, as expected: KServe creates the {mode} service's {kind.kind} only "
        "after PredictorReady is true (IngressReady=False, 'Predictor ingress not created'). The missing route is an "
        "effect of whatever keeps the predictor unready, not a routing fault.",
        objects=(kube.ref(evidence.isvc),),
        evidence=tuple(lines),
    )


def _layer_finding(evidence: Evidence, mode: str, kind: kinds.Kind, why: str, short: str, problem: str) -> Finding:
    lines = [
        f"deployment mode: {evidence.deployment_mode_raw or mode} (normalized {mode})",
        f"expected: {kind.kind}.{kind.group} {evidence.target.isvc}: {why}",
        f"found: {problem}",
    ]
    lines += [f"InferenceService condition {kube.describe_condition(c)}" for c in kube.conditions(evidence.isvc)]
    config_name = f"{evidence.site.kserve_namespace}/inferenceservice-config"
    return Finding(
        code="ROUTING_LAYER_MISMATCH",
        title=f"{mode} InferenceService needs a {kind.kind}, which {short}",
        summary=f"KServe is configured to route this {mode} service through a {kind.kind} ({why}), but {problem}. "
        "Requests to the service URL never reach the predictor, even when its pods are ready.",
        objects=(kube.ref(evidence.isvc),),
        evidence=tuple(lines),
        fix=Fix(
            what=f"Install the routing layer KServe is configured for, or change the ingress entry of {config_name} to the "
            "layer this cluster has (disableIstioVirtualHost / enableGatewayApi / disableIngressCreation), then let "
            "KServe reconcile. Roll back by restoring the previous ConfigMap (keep a copy: kubectl get configmap "
            f"inferenceservice-config -n {evidence.site.kserve_namespace} -o yaml > config.yaml)."
        ),
    )


def _gateway_problems(evidence: Evidence, routes: list[Route], host: str) -> list[Finding]:
    findings = []
    for route in routes:
        for kind, namespace, name, section in route.gateways:
            ref = f"{kind.key}/{namespace}/{name}"
            gateway = find_gateway(evidence, kind, namespace, name)
            if gateway is None:
                if evidence.failure(ref) is not None or evidence.failure(kind.key) is not None:
                    continue  # could not look
                findings.append(_missing_gateway(evidence, route, ref))
                continue
            hosts = gateway_hosts(gateway, section)
            local = name.endswith("local-gateway")
            if host and not local and hosts and not any(common.host_matches(h, host) for h in hosts):
                findings.append(_gateway_host_mismatch(evidence, route, gateway, hosts, host))
    return findings


def _missing_gateway(evidence: Evidence, route: Route, gateway_ref: str) -> Finding:
    return Finding(
        code="ROUTING_LAYER_MISMATCH",
        title=f"{route.obj.get('kind')} {kube.name(route.obj)} hangs on a missing gateway",
        summary=f"{route.ref} is attached to {gateway_ref}, which does not exist: no proxy serves the route, so requests to "
        "the service URL are not answered.",
        objects=(route.ref, kube.ref(evidence.isvc)),
        evidence=(
            f"{route.ref} gateways: {', '.join('/'.join(g[1:3]) for g in route.gateways)}",
            f"{gateway_ref}: not found",
        ),
        fix=Fix(
            what="Attach the route to the gateway your mesh or Gateway API installation provides (KServe takes it from the "
            "ingress entry of inferenceservice-config: ingressGateway / kserveIngressGateway), or create that gateway. "
            "Roll back by restoring the previous configuration."
        ),
    )


def _gateway_host_mismatch(
    evidence: Evidence, route: Route, gateway: Mapping[str, Any], hosts: list[str], host: str
) -> Finding:
    return Finding(
        code="ROUTING_HOST_MISMATCH",
        title=f"gateway {kube.name(gateway)} does not accept host {host}",
        summary=f"{kube.ref(gateway)} listens for hosts {', '.join(hosts)}, which do not include {host} (the "
        f"InferenceService URL), so the gateway drops requests for it before {route.ref} is consulted.",
        objects=(kube.ref(gateway), route.ref, kube.ref(evidence.isvc)),
        evidence=(f"{kube.ref(gateway)} hosts: {', '.join(hosts)}", f"InferenceService URL host: {host}"),
        fix=Fix(
            what=f"Add {host} (or a wildcard covering it) to the gateway's hosts, or set KServe's ingressDomain so the URL "
            "falls under the gateway's domain. Keep a copy of the gateway to roll back: "
            f"kubectl get {kube.ref(gateway).split('/')[0].lower()} {kube.name(gateway)} -n {kube.namespace(gateway)} -o yaml."
        ),
    )


def _route_status_problems(evidence: Evidence, routes: list[Route]) -> list[Finding]:
    """HTTPRoute parents that did not accept the route or could not resolve its backends."""
    findings = []
    for route in routes:
        for parent in kube.status(route.obj).get("parents") or []:
            for condition in parent.get("conditions") or []:
                if condition.get("type") not in ("Accepted", "ResolvedRefs") or str(condition.get("status")) != "False":
                    continue
                parent_name = (parent.get("parentRef") or {}).get("name", "?")
                hostname = condition.get("reason") == "NoMatchingListenerHostname"
                findings.append(
                    Finding(
                        code="ROUTING_HOST_MISMATCH" if hostname else "ROUTING_LAYER_MISMATCH",
                        title=f"HTTPRoute {kube.name(route.obj)} not {'accepted' if condition['type'] == 'Accepted' else 'resolved'} by {parent_name}",
                        summary=f"Gateway {parent_name} reports {kube.describe_condition(condition)} for {route.ref}: the "
                        "route is not programmed, so its requests are not forwarded.",
                        objects=(route.ref, kube.ref(evidence.isvc)),
                        evidence=(f"{route.ref} parent {parent_name}: {kube.describe_condition(condition)}",),
                        fix=Fix(
                            what="Fix what the condition names (listener hostname, allowed routes, backend Service), "
                            f"then check: kubectl get httproute {kube.name(route.obj)} -n {kube.namespace(route.obj)} -o yaml. "
                            "Roll back by restoring the previous route or gateway."
                        ),
                    )
                )
    return findings


def _backend_problems(evidence: Evidence, routes: list[Route]) -> list[Finding]:
    """Services that routes send to: missing ones, and (other than the predictor's) selectors missing every pod."""
    namespace = evidence.target.namespace
    findings = []
    checked: set[str] = {common.predictor_name(evidence)}
    for route in routes:
        for backend in dict.fromkeys(route.backends):
            service = common.named(evidence, kinds.SERVICE, backend)
            if service is None and backend == common.predictor_name(evidence):
                continue  # reported once, as the missing predictor Service
            if service is None:
                findings.append(
                    Finding(
                        code="ROUTING_LAYER_MISMATCH",
                        title=f"{route.obj.get('kind')} {kube.name(route.obj)} sends to a missing Service {backend}",
                        summary=f"{route.ref} forwards to Service {namespace}/{backend}, which does not exist: the route "
                        "answers 503 (or 404) whatever the pods do.",
                        objects=(route.ref, kube.ref(evidence.isvc)),
                        evidence=(
                            f"{route.ref} backends: {', '.join(route.backends)}",
                            f"Service/{namespace}/{backend}: not found",
                        ),
                        fix=Fix(
                            what=f"Point the route at Service {common.predictor_name(evidence)}. Keep a copy to roll back: "
                            f"kubectl get {route.obj.get('kind', '').lower()} {kube.name(route.obj)} -n {namespace} -o yaml."
                        ),
                    )
                )
            elif backend not in checked:
                checked.add(backend)
                mismatch = selector_mismatch(evidence, service)
                if mismatch is not None:
                    findings.append(mismatch)
    return findings


def _host_mismatch(evidence: Evidence, routes: list[Route], host: str) -> Finding | None:
    with_hosts = [route for route in routes if route.obj.get("kind") != "Ingress" or route.hosts]
    if not host or not with_hosts:
        return None
    if any(not route.hosts or any(common.host_matches(h, host) for h in route.hosts) for route in with_hosts):
        return None
    primary = next(
        (r for r in with_hosts if common.controller_owner(r.obj) is None and kube.name(r.obj) == evidence.target.isvc),
        next((r for r in with_hosts if common.controller_owner(r.obj) is None), None),
    )
    plan = _host_patch(primary, host) if primary is not None else None
    lines = [f"InferenceService URL host: {host}"]
    lines += [f"{route.ref} hosts: {', '.join(route.hosts) or '*'}" for route in with_hosts]
    served = _served_elsewhere(evidence, with_hosts)
    if served is not None:
        # The metrics contradict "requests get 404": clients reach the predictor through another route.
        route, answered = served
        url = kube.status(evidence.isvc).get("url")
        return Finding(
            code="ROUTING_HOST_MISMATCH",
            severity=Severity.INFO,
            title=f"the InferenceService URL {url} is unused; clients reach the predictor through {route.ref}",
            summary=f"No route matches {host}, the host of the InferenceService URL {url}, but {answered}: traffic "
            f"reaches the predictor through the user-managed {route.ref} ({', '.join(route.hosts) or '*'}). The "
            "status URL is only a name nobody calls; it is not why requests fail.",
            objects=(*(r.ref for r in with_hosts), kube.ref(evidence.isvc)),
            evidence=(*lines, answered),
        )
    what = f"Add {host} to the route's hosts (or fix KServe's ingressDomain / domainTemplate so the URL matches)."
    if plan is None:
        what += " The routes are generated by KServe from its ingress configuration: fix the domain there."
    return Finding(
        code="ROUTING_HOST_MISMATCH",
        title=f"no route for {host}",
        summary=f"The InferenceService URL is {kube.status(evidence.isvc).get('url')}, but its routes only match "
        f"{', '.join(sorted({h for r in with_hosts for h in r.hosts}))}: requests for {host} get 404 from the gateway.",
        objects=(*(route.ref for route in with_hosts), kube.ref(evidence.isvc)),
        evidence=tuple(lines),
        fix=Fix.from_plan(what, plan),
    )


def _served_elsewhere(evidence: Evidence, routes: list[Route]) -> tuple[Route, str] | None:
    """A user-managed route to the predictor, and the 2xx answers the edge counted in the window."""
    predictor = common.predictor_name(evidence)
    own = [
        route
        for route in routes
        if common.controller_owner(route.obj) is None and (not route.backends or predictor in route.backends)
    ]
    rates = traffic.status_rates(evidence)
    if not own or rates is None:
        return None
    answered = sum(v for _, v in rates.matching("2")) * rates.step
    if answered < 1:
        return None
    return own[0], f"{rates.where} counted about {answered:.0f} 2xx answers from the predictor in the window"


def _host_patch(route: Route, host: str) -> patches.PatchPlan | None:
    kind = route.obj.get("kind")

    def add_host(obj: common.KubeObject) -> None:
        body = obj["spec"]
        if kind == "VirtualService":
            body["hosts"] = [*body.get("hosts", []), host]
        elif kind == "HTTPRoute":
            body["hostnames"] = [*body.get("hostnames", []), host]
        else:  # Ingress: the same paths under the URL's host
            rules = list(body.get("rules") or [])
            if rules:
                rules.append({**copy.deepcopy(rules[0]), "host": host})
            body["rules"] = rules

    return patches.plan_patch(route.obj, add_host)
