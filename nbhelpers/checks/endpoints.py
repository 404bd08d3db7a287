"""Step 1, ``endpoints``: does the serving path have ready endpoints, and does the routing layer match
how the InferenceService is deployed?

What "the serving path" is depends on the mode (DESIGN §6):

- Serverless (Knative): ``<isvc>-predictor`` is an ExternalName Service with no endpoints by design;
  the pods sit behind ``<revision>-private`` for each revision that receives traffic. A revision
  scaled to zero with min-scale 0 has no pods and the activator answers for it: not an error.
  KServe adds an Istio VirtualService ``<isvc>`` unless ``disableIstioVirtualHost`` is set.
- RawDeployment (Standard): the Service ``<isvc>-predictor`` selects the pods directly; KServe adds
  an Ingress ``<isvc>``, or HTTPRoutes when the Gateway API is enabled, unless ingress creation is
  disabled.

Findings tell "no ready pods" (the cause is in the pods: probes, ports, resources) apart from
"routing broken" (pods are fine, the path to them is not).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlparse

from nbhelpers.errors import RunbookError
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common
from nbhelpers.findings import patches
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.findings.steps import StepInfo
from nbhelpers.sources import kinds, kube
from nbhelpers.util.times import parse_duration, parse_k8s_time

STEP = StepInfo(
    "endpoints",
    "Endpoints and routing",
    "Does the serving path have ready endpoints, and does the routing layer match the deployment mode?",
)
ISVC_CONDITIONS = ("Ready", "PredictorReady", "IngressReady")
MIN_SCALE_ANNOTATIONS = ("autoscaling.knative.dev/min-scale", "autoscaling.knative.dev/minScale")
PROGRESS_DEADLINE_ANNOTATION = "serving.knative.dev/progress-deadline"
DEFAULT_PROGRESS_DEADLINE = timedelta(seconds=600)
VISIBILITY_LABEL = "networking.kserve.io/visibility"
MAX_LISTED = 5


def run(evidence: Evidence) -> list[Finding]:
    common.skip_modelmesh(evidence)
    mode = common.effective_mode(evidence)
    findings = _serverless_path(evidence) if mode == common.SERVERLESS else _raw_path(evidence)
    findings += _routing(evidence, mode)
    not_ready = _isvc_not_ready(evidence, findings)
    return ([not_ready] if not_ready else []) + findings


# --- InferenceService conditions ------------------------------------------------------------------


def _isvc_not_ready(evidence: Evidence, others: list[Finding]) -> Finding | None:
    isvc = evidence.isvc
    failing = [
        entry
        for name in ISVC_CONDITIONS
        if (entry := kube.condition(isvc, name)) is not None and str(entry.get("status")) != "True"
    ]
    conditions = kube.conditions(isvc)
    if conditions and not failing:
        return None
    found = sorted({finding.code for finding in others})
    if failing:
        first = failing[0]
        title = f"InferenceService not ready: {first.get('type')}={first.get('status')}" + (
            f" ({first['reason']})" if first.get("reason") else ""
        )
        what = "KServe reports " + "; ".join(kube.describe_condition(entry) for entry in failing) + "."
    else:
        title = "InferenceService has no status conditions"
        what = "The InferenceService has no status conditions: the KServe controller has not reconciled it."
    why = " Clients get 503 (or no answer) until it turns ready; this is usually an effect of a cause found below."
    if found:
        why += f" This step also found: {', '.join(found)}."
    lines = [f"InferenceService condition {kube.describe_condition(entry)}" for entry in conditions]
    if kube.status(isvc).get("url"):
        lines.append(f"status.url: {kube.status(isvc)['url']}")
    return Finding(
        code="ISVC_NOT_READY",
        title=title,
        summary=what + why,
        objects=(kube.ref(isvc),),
        evidence=tuple(lines),
        fix=Fix(
            what="Fix the cause the condition names (see the other findings of this run, in root-cause order); "
            f"watch it with: kubectl get inferenceservice {evidence.target.isvc} -n {evidence.target.namespace} -w. "
            "Nothing to roll back: this finding changes nothing by itself."
        ),
    )


# --- Serverless ----------------------------------------------------------------------------------


def _serverless_path(evidence: Evidence) -> list[Finding]:
    failure = evidence.failure(kinds.KNATIVE_SERVICE.key)
    if failure is not None and failure.status in ("not_installed", "missing"):
        return [_knative_missing(evidence, f"the Knative Service CRD is not installed ({failure.reason})")]
    common.require_read(evidence, kinds.KNATIVE_SERVICE.key)
    common.require_read(evidence, kinds.KNATIVE_REVISION.key)
    ksvc = common.knative_service(evidence)
    if ksvc is None:
        return [_knative_missing(evidence, f"no Knative Service {common.predictor_name(evidence)} exists")]
    findings = _revisions_not_ready(evidence, ksvc)
    common.require_read(evidence, kinds.POD.key + " ")
    common.require_address_reads(evidence)
    for revision, percent in common.traffic_revisions(evidence):
        finding = _revision_endpoints(evidence, revision, percent)
        if finding is not None:
            findings.append(finding)
    return findings


def _knative_missing(evidence: Evidence, what: str) -> Finding:
    isvc = evidence.isvc
    mode = evidence.deployment_mode_raw or evidence.deployment_mode
    lines = [f"deployment mode: {mode} (normalized {evidence.deployment_mode})"]
    lines += [f"InferenceService condition {kube.describe_condition(c)}" for c in kube.conditions(isvc)]
    return Finding(
        code="ROUTING_LAYER_MISMATCH",
        title="Serverless InferenceService without a Knative Service",
        summary=f"The InferenceService is deployed in {mode} mode, which needs Knative Serving, but {what}. "
        "Nothing serves it, however healthy the model would be.",
        objects=(kube.ref(isvc),),
        evidence=tuple(lines),
        fix=Fix(
            what="Either install Knative Serving (and its networking layer), or run the service in RawDeployment mode. "
            "KServe does not allow changing the deployment mode of an existing InferenceService, so recreate it:\n"
            f"  kubectl get inferenceservice {evidence.target.isvc} -n {evidence.target.namespace} -o yaml > isvc.yaml\n"
            f"  # set metadata.annotations[{kube.DEPLOYMENT_MODE_ANNOTATION!r}] to RawDeployment, drop status\n"
            "  kubectl replace --force -f isvc.yaml\n"
            "Roll back by replacing it again with the saved original."
        ),
    )


def _progress_deadline(evidence: Evidence, revision: Mapping[str, Any]) -> timedelta:
    candidates = [kube.annotations(revision).get(PROGRESS_DEADLINE_ANNOTATION)]
    config = evidence.config_map(evidence.site.knative_namespace, "config-deployment")
    if config is not None:
        candidates.append((config.get("data") or {}).get("progress-deadline"))
    for text in candidates:
        if text:
            try:
                return parse_duration(str(text))
            except RunbookError:
                continue
    return DEFAULT_PROGRESS_DEADLINE


def _revisions_not_ready(evidence: Evidence, ksvc: Mapping[str, Any]) -> list[Finding]:
    traffic = dict(common.traffic_revisions(evidence))
    names = list(traffic)
    latest = common.latest_revision_name(evidence)
    if latest and latest not in names:
        names.append(latest)
    findings = []
    for name in names:
        revision = common.named(evidence, kinds.KNATIVE_REVISION, name)
        if revision is None:
            continue
        stuck = _revision_problem(evidence, revision)
        if stuck is not None:
            findings.append(_revision_finding(evidence, ksvc, revision, traffic.get(name, 0), stuck))
    ready = kube.condition(ksvc, "Ready")
    if not findings and ready is not None and str(ready.get("status")) == "False":
        lines = [f"{kube.ref(ksvc)} condition {kube.describe_condition(c)}" for c in kube.conditions(ksvc)]
        findings.append(
            Finding(
                code="ROUTING_REVISION_NOT_READY",
                title=f"Knative Service {kube.name(ksvc)} not ready ({ready.get('reason') or 'no reason'})",
                summary=f"Knative reports {kube.describe_condition(ready)} for {kube.ref(ksvc)}; while it is not ready "
                "its route does not serve the revisions.",
                objects=(kube.ref(ksvc), kube.ref(evidence.isvc)),
                evidence=tuple(lines),
                fix=Fix(
                    what=f"Read the failing condition: kubectl describe ksvc {kube.name(ksvc)} -n {kube.namespace(ksvc)}. "
                    "Nothing to roll back: this finding changes nothing by itself."
                ),
            )
        )
    return findings


def _revision_problem(evidence: Evidence, revision: Mapping[str, Any]) -> str | None:
    """Why the revision is not ready, or None when it is ready or still deploying within its deadline."""
    ready = kube.condition(revision, "Ready")
    if ready is None:
        return None
    state = str(ready.get("status"))
    if state == "False":
        return kube.describe_condition(ready)
    created = parse_k8s_time(kube.created(revision))
    deadline = _progress_deadline(evidence, revision)
    if state == "Unknown" and created is not None and evidence.observed_at - created > deadline:
        age = int((evidence.observed_at - created).total_seconds())
        return f"{kube.describe_condition(ready)}, still not ready {age} s after creation (progress deadline {int(deadline.total_seconds())} s)"
    return None


def _revision_finding(
    evidence: Evidence, ksvc: Mapping[str, Any], revision: Mapping[str, Any], percent: int, problem: str
) -> Finding:
    name = kube.name(revision)
    share = f"{percent}% of traffic" if percent else "the newest revision, no traffic yet"
    lines = [
        f"{kube.ref(revision)} ({share}) condition {kube.describe_condition(c)}" for c in kube.conditions(revision)
    ]
    lines += [f"{kube.ref(ksvc)} condition {kube.describe_condition(c)}" for c in kube.conditions(ksvc)]
    pods = [pod for pod in common.predictor_pods(evidence) if kube.labels(pod).get(common.REVISION_LABEL) == name]
    lines += [common.describe_pod_state(pod) for pod in pods[-MAX_LISTED:]]
    effect = (
        "Knative will not route to it, and the traffic it should carry fails"
        if percent
        else "Knative keeps traffic on the previous revision, so the new configuration never serves"
    )
    return Finding(
        code="ROUTING_REVISION_NOT_READY",
        title=f"revision {name} not ready: {problem.split(':')[0]}",
        summary=f"Revision {name} ({share}) is not ready: {problem}. {effect}.",
        objects=(kube.ref(revision), kube.ref(ksvc), kube.ref(evidence.isvc)),
        evidence=tuple(lines),
        fix=Fix(
            what="The condition's reason names the failing stage: ProgressDeadlineExceeded (pods did not become ready in "
            "time: see probes, resources, cold_start), ContainerMissing (image), ExitCode/CrashLoopBackOff (the engine "
            f"crashes: read the logs). Inspect: kubectl describe revision {name} -n {kube.namespace(revision)}. "
            "Nothing to roll back: this finding changes nothing by itself."
        ),
    )


def _min_scale(evidence: Evidence, revision: Mapping[str, Any] | None) -> int:
    annotations = kube.annotations(revision) if revision is not None else {}
    for key in MIN_SCALE_ANNOTATIONS:
        if str(annotations.get(key, "")).isdigit():
            return int(annotations[key])
    configured = (kube.spec(evidence.isvc).get("predictor") or {}).get("minReplicas")
    return int(configured) if isinstance(configured, int) else 1


def _desired_scale(evidence: Evidence, revision: str) -> tuple[int | None, str]:
    autoscaler = common.named(evidence, kinds.POD_AUTOSCALER, revision)
    if autoscaler is not None and isinstance(kube.status(autoscaler).get("desiredScale"), int):
        status = kube.status(autoscaler)
        return int(status["desiredScale"]), (
            f"{kube.ref(autoscaler)}: desiredScale {status['desiredScale']}, actualScale {status.get('actualScale', '?')}"
        )
    deployment = common.named(evidence, kinds.DEPLOYMENT, f"{revision}-deployment")
    if deployment is not None and isinstance(kube.spec(deployment).get("replicas"), int):
        replicas = int(kube.spec(deployment)["replicas"])
        return replicas, f"{kube.ref(deployment)}: spec.replicas {replicas}"
    return None, "no PodAutoscaler or Deployment shows the desired scale"


def _revision_endpoints(evidence: Evidence, revision: str, percent: int) -> Finding | None:
    private = f"{revision}-private"
    addresses = common.service_addresses(evidence, private)
    if addresses.ready:
        return None
    pods = [pod for pod in common.predictor_pods(evidence) if kube.labels(pod).get(common.REVISION_LABEL) == revision]
    revision_object = common.named(evidence, kinds.KNATIVE_REVISION, revision)
    min_scale = _min_scale(evidence, revision_object)
    desired, desired_line = _desired_scale(evidence, revision)
    if min_scale == 0 and (desired == 0 or (desired is None and not pods)):
        return None  # scaled to zero by design: the activator holds requests until a pod is ready
    public = common.service_addresses(evidence, revision)
    lines = [
        *addresses.lines,
        *(f"public {line} (the activator's addresses while it proxies)" for line in public.lines),
        f"min-scale {min_scale}; {desired_line}",
        *(common.describe_pod_state(pod) for pod in pods[-MAX_LISTED:]),
    ]
    title = f"no ready endpoints behind revision {revision} ({percent}% of traffic)"
    objects = [f"Service/{evidence.target.namespace}/{private}"]
    if revision_object is not None:
        objects.append(kube.ref(revision_object))
    return _none_ready(evidence, title, f"Service {private}", addresses, pods, objects, lines)


# --- RawDeployment ---------------------------------------------------------------------------------


def _raw_path(evidence: Evidence) -> list[Finding]:
    common.require_read(evidence, kinds.SERVICE.key + " ")
    common.require_read(evidence, kinds.POD.key + " ")
    common.require_address_reads(evidence)
    service = common.named(evidence, kinds.SERVICE, common.predictor_name(evidence))
    if service is None:
        return [_raw_service_missing(evidence)]
    findings: list[Finding] = []
    mismatch = _selector_mismatch(evidence, service)
    if mismatch is not None:
        findings.append(mismatch)
    pods = common.predictor_pods(evidence)
    addresses = common.service_addresses(evidence, kube.name(service))
    if not addresses.ready:
        lines = [
            f"{kube.ref(service)} selector {_selector_text(service)}",
            *addresses.lines,
            *_deployment_lines(evidence),
            *(common.describe_pod_state(pod) for pod in pods[-MAX_LISTED:]),
        ]
        title = f"Service {kube.name(service)} has no ready endpoints"
        findings.append(
            _none_ready(evidence, title, f"Service {kube.name(service)}", addresses, pods, [kube.ref(service)], lines)
        )
    return findings


def _raw_service_missing(evidence: Evidence) -> Finding:
    name = common.predictor_name(evidence)
    lines = [f"InferenceService condition {kube.describe_condition(c)}" for c in kube.conditions(evidence.isvc)]
    lines.append(
        f"Services in {evidence.target.namespace}: "
        + (
            ", ".join(
                sorted(
                    kube.name(s) for s in evidence.of(kinds.SERVICE) if kube.namespace(s) == evidence.target.namespace
                )
            )
            or "none"
        )
    )
    return Finding(
        code="ROUTING_LAYER_MISMATCH",
        title=f"no Service {name} for a RawDeployment InferenceService",
        summary=f"In {evidence.deployment_mode_raw or evidence.deployment_mode} mode KServe serves the predictor through "
        f"the Service {name}, which does not exist: requests have nowhere to go even if the pods are ready.",
        objects=(kube.ref(evidence.isvc),),
        evidence=tuple(lines),
        fix=Fix(
            what="Check that the InferenceService really is reconciled in RawDeployment mode (its conditions above) and "
            "that the KServe controller runs; KServe recreates the Service on its next reconcile. "
            "Nothing to roll back: this finding changes nothing by itself."
        ),
    )


def _deployment_lines(evidence: Evidence) -> list[str]:
    lines = []
    for deployment in evidence.of(kinds.DEPLOYMENT):
        if kube.is_predictor(deployment) and kube.namespace(deployment) == evidence.target.namespace:
            status = kube.status(deployment)
            lines.append(
                f"{kube.ref(deployment)}: replicas {kube.spec(deployment).get('replicas', '?')}, "
                f"ready {status.get('readyReplicas', 0)}, available {status.get('availableReplicas', 0)}"
            )
    return lines


def _none_ready(
    evidence: Evidence,
    title: str,
    where: str,
    addresses: common.Addresses,
    pods: Sequence[Mapping[str, Any]],
    objects: list[str],
    lines: list[str],
) -> Finding:
    ready_pods = [pod for pod in pods if kube.pod_ready(pod)]
    if ready_pods:
        diagnosis = (
            f"{len(ready_pods)} of {len(pods)} predictor pods are Ready but none is a ready address: routing is "
            "broken, not the pods (a selector that misses them, or a targetPort that does not resolve)."
        )
        next_step = "Compare the Service selector and targetPort with the pods (ENDPOINTS_SELECTOR_MISMATCH, ports)."
    elif pods:
        diagnosis = (
            f"{len(pods)} predictor pods exist and none is ready: the cause is in the pods (probes, ports, "
            "resources, a crashing engine), not in routing."
        )
        next_step = "Follow the probes, ports and resources steps for why the pods are not ready."
    else:
        diagnosis = "No predictor pod exists: nothing is running to serve."
        next_step = "Look at the Deployment/ReplicaSet events (quota, admission, scheduling) and the autoscaler."
    summary = (
        f"{where} has {len(addresses.ready)} ready and {len(addresses.not_ready)} not-ready addresses, so requests "
        f"have nowhere to go (503 'no healthy upstream'). {diagnosis}"
    )
    refs = objects + [kube.ref(pod) for pod in pods[-MAX_LISTED:]]
    return Finding(
        code="ENDPOINTS_NONE_READY",
        title=title,
        summary=summary,
        objects=tuple(dict.fromkeys(refs)),
        evidence=tuple(lines),
        fix=Fix(
            what=f"{next_step} Watch: kubectl get endpointslices -n {evidence.target.namespace} "
            f"-l {common.SERVICE_NAME_LABEL}={where.split()[-1]} -w. "
            "Nothing to roll back: this finding changes nothing by itself."
        ),
    )


def _selector_text(service: Mapping[str, Any]) -> str:
    selector = kube.spec(service).get("selector") or {}
    return ",".join(f"{key}={value}" for key, value in sorted(selector.items())) or "(none)"


def _selector_mismatch(evidence: Evidence, service: Mapping[str, Any]) -> Finding | None:
    selector = kube.spec(service).get("selector") or {}
    pods = common.predictor_pods(evidence)
    if not selector or not pods or any(kube.selector_matches(selector, kube.labels(pod)) for pod in pods):
        return None
    sample = pods[-1]
    pod_labels = kube.labels(sample)
    differing = [
        f"{key}={value} (pod has {pod_labels[key]!r})" if key in pod_labels else f"{key}={value} (pod lacks the label)"
        for key, value in sorted(selector.items())
        if pod_labels.get(key) != str(value)
    ]
    lines = [
        f"{kube.ref(service)} selector {_selector_text(service)}",
        f"selector terms no predictor pod satisfies: {'; '.join(differing)}",
        *(
            f"{kube.ref(pod)} labels: " + ",".join(f"{k}={v}" for k, v in sorted(kube.labels(pod).items()))
            for pod in pods[-MAX_LISTED:]
        ),
    ]
    summary = (
        f"The selector of {kube.ref(service)} ({_selector_text(service)}) matches none of the {len(pods)} "
        f"predictor pods: {'; '.join(differing)}. The Service never gets endpoints, however healthy the pods are."
    )
    owner = common.controller_owner(service)
    plan = _selector_patch(evidence, service, selector, pod_labels, owner)
    what = "Make the selector match the predictor pods' labels."
    if owner and plan is None:
        what += (
            f" The Service is generated by {owner} from the pods' labels: find what changed the pod labels "
            "(an edited Deployment) and let KServe reconcile."
        )
    elif owner:
        what += f" The Service is generated by {owner}; the InferenceService sets a label that overrides the pods' own."
    return Finding(
        code="ENDPOINTS_SELECTOR_MISMATCH",
        title=f"selector of Service {kube.name(service)} matches no predictor pod",
        summary=summary,
        objects=(kube.ref(service), *(kube.ref(pod) for pod in pods[-MAX_LISTED:])),
        evidence=tuple(lines),
        fix=Fix.from_plan(what, plan),
    )


def _selector_patch(
    evidence: Evidence,
    service: Mapping[str, Any],
    selector: Mapping[str, Any],
    pod_labels: Mapping[str, str],
    owner: str | None,
) -> patches.PatchPlan | None:
    if owner is None:

        def fix_selector(obj: common.KubeObject) -> None:
            fixed = {key: pod_labels[key] for key in selector if key in pod_labels}
            obj["spec"]["selector"] = fixed or {
                kube.ISVC_LABEL: evidence.target.isvc,
                kube.COMPONENT_LABEL: "predictor",
            }

        return patches.plan_patch(service, fix_selector)
    # A label set on the InferenceService is copied onto the pods and can override the one KServe selects on.
    overridden = [
        (path, key)
        for path in (("metadata", "labels"), ("spec", "predictor", "labels"))
        for key in selector
        if key in _dig(evidence.isvc, path) and _dig(evidence.isvc, path)[key] == pod_labels.get(key)
    ]
    if not overridden:
        return None

    def drop_labels(isvc: common.KubeObject) -> None:
        for path, key in overridden:
            _dig(isvc, path).pop(key, None)

    return patches.plan_patch(evidence.isvc, drop_labels)


def _dig(obj: Mapping[str, Any], path: Iterable[str]) -> dict[str, Any]:
    node: Any = obj
    for step in path:
        node = (node or {}).get(step) if isinstance(node, Mapping) else None
    return node if isinstance(node, dict) else {}


# --- routing objects ------------------------------------------------------------------------------


@dataclass(frozen=True)
class IngressConfig:
    """The ``ingress`` entry of KServe's ``inferenceservice-config`` (KServe defaults when unreadable)."""

    enable_gateway_api: bool = False
    disable_istio_virtual_host: bool = False
    disable_ingress_creation: bool = False
    known: bool = False


def _ingress_config(evidence: Evidence) -> IngressConfig:
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


def _url_host(evidence: Evidence) -> str:
    url = str(kube.status(evidence.isvc).get("url") or "")
    return (urlparse(url).hostname or "").lower()


def _cluster_local(evidence: Evidence, host: str) -> bool:
    return kube.labels(evidence.isvc).get(VISIBILITY_LABEL) == "cluster-local" or host.endswith(
        (".svc", ".svc.cluster.local")
    )


def _routing(evidence: Evidence, mode: str) -> list[Finding]:
    host = _url_host(evidence)
    if _cluster_local(evidence, host):
        return []
    routes = _routes_of_service(evidence, host)
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
    config = _ingress_config(evidence)
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
        else:
            continue
        findings.append(_layer_finding(evidence, mode, kind, why, short, problem))
    return findings


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


def _owned_by_isvc(obj: Mapping[str, Any], isvc: str) -> bool:
    return any(
        owner.get("kind") == "InferenceService" and owner.get("name") == isvc
        for owner in kube.metadata(obj).get("ownerReferences") or []
    )


def _routes_of_service(evidence: Evidence, host: str) -> list[Route]:
    """VirtualServices, HTTPRoutes and Ingresses that belong to the ISVC, send to its predictor Service,
    or serve the host of its URL."""
    isvc, namespace = evidence.target.isvc, evidence.target.namespace
    names = {isvc, common.predictor_name(evidence)}
    routes = []
    for route in (
        *(_virtual_service(evidence, vs) for vs in evidence.of(kinds.VIRTUAL_SERVICE)),
        *(_http_route(evidence, hr) for hr in evidence.of(kinds.HTTP_ROUTE)),
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


def _virtual_service(evidence: Evidence, vs: Mapping[str, Any]) -> Route:
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


def _http_route(evidence: Evidence, route: Mapping[str, Any]) -> Route:
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


def _find_gateway(evidence: Evidence, kind: kinds.Kind, namespace: str, name: str) -> Mapping[str, Any] | None:
    return next(
        (g for g in evidence.of(kind) if kube.namespace(g) == namespace and kube.name(g) == name),
        None,
    )


def _gateway_hosts(gateway: Mapping[str, Any], section: str) -> list[str]:
    body = kube.spec(gateway)
    if "servers" in body:  # Istio
        return [str(h) for server in body.get("servers") or [] for h in server.get("hosts") or []]
    listeners = [lst for lst in body.get("listeners") or [] if not section or lst.get("name") == section]
    return [str(listener.get("hostname") or "*") for listener in listeners]


def _gateway_problems(evidence: Evidence, routes: list[Route], host: str) -> list[Finding]:
    findings = []
    for route in routes:
        for kind, namespace, name, section in route.gateways:
            ref = f"{kind.key}/{namespace}/{name}"
            gateway = _find_gateway(evidence, kind, namespace, name)
            if gateway is None:
                if evidence.failure(ref) is not None or evidence.failure(kind.key) is not None:
                    continue  # could not look
                findings.append(_missing_gateway(evidence, route, ref))
                continue
            hosts = _gateway_hosts(gateway, section)
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
                mismatch = _selector_mismatch(evidence, service)
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
