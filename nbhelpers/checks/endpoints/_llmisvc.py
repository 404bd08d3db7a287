"""Step 1 for an LLMInferenceService: the chain a request follows through KServe's llm-d stack.

client → Gateway (Programmed, Accepted) → HTTPRoute (Accepted, ResolvedRefs per parent) → InferencePool
(Accepted, ResolvedRefs per parent) → endpoint picker (EPP) ready? → the pods the pool selects, ready?

A route hanging on a broken Gateway is not judged itself (the Gateway is the finding); the pool, the picker
and the pods are judged whatever the links before them show, and the cause edges (findings/catalog.yaml) rank
the first broken link before the ones behind it and before the service's own not-ready condition. Shapes and
defaults: docs/upstream-facts.md (LLMInferenceService).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from nbhelpers.checks.endpoints._llmisvc_presets import preset_not_found
from nbhelpers.errors import EvidenceMissing
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common, llmisvc, traffic, vllm_args
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.sources import kinds, kube
from nbhelpers.sources.kube import KubeObject

# The conditions KServe rolls up into Ready (pkg/apis/serving/v1alpha2/llm_inference_service_lifecycle.go).
LLMISVC_CONDITIONS = (
    "Ready",
    "WorkloadsReady",
    "RouterReady",
    "PresetsCombined",
    "MainWorkloadReady",
    "PrefillWorkloadReady",
    "WorkerWorkloadReady",
    "PrefillWorkerWorkloadReady",
    "SchedulerWorkloadReady",
    "GatewaysReady",
    "HTTPRoutesReady",
    "InferencePoolReady",
)
ROLL_UPS = ("Ready", "WorkloadsReady", "RouterReady")
RECENT_SECONDS = 600  # "serving now": requests finished in the window's last ten minutes
GATEWAY_CONDITIONS = ("Programmed", "Accepted")
PARENT_CONDITIONS = ("Accepted", "ResolvedRefs")


def llmisvc_path(evidence: Evidence) -> list[Finding]:
    """Every finding of the route chain, then the service's own conditions as the effect they explain."""
    preset = preset_not_found(evidence)
    findings = ([preset] if preset is not None else []) + _gateways_and_routes(evidence)
    if llmisvc.has_scheduler(evidence):
        findings += _pool_chain(evidence)
    else:
        workload = _workload_finding(evidence)
        findings += [workload] if workload is not None else []
    not_ready = _not_ready(evidence, findings)
    return ([not_ready] if not_ready else []) + findings


def _kubectl(kind: str, namespace: str, name: str) -> str:
    return f"kubectl describe {kind} {name} -n {namespace}"


def _describe(entries: Sequence[Mapping[str, Any]]) -> str:
    return "; ".join(kube.describe_condition(entry) for entry in entries)


def _gateways_and_routes(evidence: Evidence) -> list[Finding]:
    findings: list[Finding] = []
    for route in llmisvc.routes(evidence):
        broken_parent = False
        for namespace, name in llmisvc.route_parents(route):
            finding = _gateway_finding(evidence, route, namespace, name)
            if finding is not None:
                findings.append(finding)
                broken_parent = True
        if not broken_parent:
            finding = _route_finding(evidence, route)
            if finding is not None:
                findings.append(finding)
    return findings


def _gateway_finding(evidence: Evidence, route: KubeObject, namespace: str, name: str) -> Finding | None:
    gateway = llmisvc.gateway(evidence, namespace, name)
    ref = f"Gateway.gateway.networking.k8s.io/{namespace}/{name}"
    if gateway is None:
        failed = evidence.failure(f"{kinds.GATEWAY_API_GATEWAY.key}/{namespace}/{name}")
        if failed is not None and failed.status != "not_installed":
            return None  # not seen: the coverage line says so; absence is not proven
        what = (
            "the Gateway API is not installed in this cluster"
            if failed is not None
            else f"Gateway {namespace}/{name} does not exist"
        )
        summary = (
            f"HTTPRoute {kube.name(route)} hangs on Gateway {namespace}/{name}, but {what}: no listener serves the "
            "service's address, so clients get connection errors or the load balancer's 404/503."
        )
        lines = [f"HTTPRoute {kube.ref(route)} parentRef {namespace}/{name}", what]
    else:
        failing = llmisvc.false_conditions(kube.conditions(gateway), GATEWAY_CONDITIONS)
        if kube.conditions(gateway) and not failing:
            return None
        state = _describe(failing) if failing else "no status conditions (no Gateway controller has reconciled it)"
        summary = (
            f"Gateway {namespace}/{name}, which the service's HTTPRoute {kube.name(route)} hangs on, is not "
            f"programmed: {state}. Until its controller programs the data plane no request reaches the route."
        )
        lines = [f"Gateway condition {kube.describe_condition(entry)}" for entry in kube.conditions(gateway)] or [
            f"{ref}: no status conditions"
        ]
        address = [str(entry.get("value")) for entry in kube.status(gateway).get("addresses") or []]
        lines.append(f"status.addresses: {', '.join(address) if address else 'none'}")
    return Finding(
        code="ROUTING_GATEWAY_NOT_PROGRAMMED",
        title=f"Gateway {namespace}/{name} is not programmed",
        summary=summary,
        objects=(ref, kube.ref(route)),
        evidence=tuple(lines),
        fix=Fix(
            what="Fix what the Gateway's Programmed/Accepted condition names (a GatewayClass no controller owns, an "
            "address the load balancer cannot allocate, an invalid listener), or point the LLMInferenceService's "
            f"spec.router.gateway.refs at a Gateway that is programmed. Inspect: {_kubectl('gateway', namespace, name)}"
        ),
    )


def _route_finding(evidence: Evidence, route: KubeObject) -> Finding | None:
    parents = llmisvc.route_status_parents(route)
    failing = [
        (entry, condition)
        for entry in parents
        for condition in llmisvc.false_conditions(llmisvc.parent_conditions(entry), PARENT_CONDITIONS)
    ]
    backends = llmisvc.route_backends(route)
    if parents and not failing and backends:
        return None
    name, namespace = kube.name(route), kube.namespace(route)
    if not backends:
        # KServe generated a route with empty backendRefs and waited for the Gateway forever (kserve/kserve#5385).
        state = "none of its rules has a backendRef, so there is nothing to send requests to"
    elif failing:
        entry, condition = failing[0]
        parent = entry.get("parentRef") or {}
        state = f"{kube.describe_condition(condition)} for parent {parent.get('name', '?')}"
    else:
        state = "no Gateway controller has written a status for it (it is not attached to any listener)"
    lines = [
        f"parent {(entry.get('parentRef') or {}).get('name', '?')}: {kube.describe_condition(condition)}"
        for entry in parents
        for condition in llmisvc.parent_conditions(entry)
    ] or [f"{kube.ref(route)}: status.parents is empty"]
    lines.append(f"backendRefs: {', '.join(backends) if backends else 'none'}")
    return Finding(
        code="ROUTING_HTTPROUTE_NOT_ACCEPTED",
        title=f"HTTPRoute {name} has no backend"
        if not backends
        else f"HTTPRoute {name} is not accepted by its Gateway",
        summary=f"The service's HTTPRoute {name}: {state}. A route its Gateway does not accept, or whose backend "
        "(the InferencePool) it cannot resolve, sends nothing to the model: clients get 404 or 500 from the Gateway.",
        objects=(kube.ref(route),),
        evidence=tuple(lines),
        fix=Fix(
            what="Read the condition's reason: NotAllowedByListeners (the listener's allowedRoutes excludes this "
            "namespace), NoMatchingParent (wrong sectionName or port), BackendNotFound / InvalidKind on ResolvedRefs "
            "(the InferencePool is missing, or the Gateway implementation does not support that InferencePool API "
            f"group). Inspect: {_kubectl('httproute', namespace, name)}"
        ),
    )


def _pool_chain(evidence: Evidence) -> list[Finding]:
    pools = llmisvc.pools(evidence)
    if not pools:
        return _missing_pool(evidence)
    findings = [finding for candidate in pools if (finding := _pool_status(candidate)) is not None]
    picker = _picker_finding(evidence, pools[0])
    if picker is not None:
        findings.append(picker)
    # Each API group's pool is judged: which one a Gateway uses depends on the implementation.
    findings += [finding for candidate in pools if (finding := _selection_finding(evidence, candidate)) is not None]
    return findings


def _missing_pool(evidence: Evidence) -> list[Finding]:
    failed = [record for kind in llmisvc.POOL_KINDS if (record := evidence.failure(f"{kind.key} in ")) is not None]
    if failed and all(record.status == "not_installed" for record in failed):
        what = "the Gateway API Inference Extension (InferencePool CRD) is not installed in this cluster"
    elif failed and len(failed) == len(llmisvc.POOL_KINDS):
        raise EvidenceMissing("InferencePool", f"{failed[0].status} on {failed[0].what}")
    else:
        what = f"InferencePool {evidence.target.namespace}/{llmisvc.pool_name(evidence)} does not exist"
    return [
        Finding(
            code="ROUTING_POOL_NOT_ACCEPTED",
            title=f"InferencePool {llmisvc.pool_name(evidence)} is missing",
            summary=f"The LLMInferenceService routes through a scheduler, but {what}: the HTTPRoute's backend "
            "cannot be resolved and the Gateway answers 500 or 503.",
            objects=(kube.ref(evidence.isvc),),
            evidence=(what,),
            fix=Fix(
                what="Install the Gateway API Inference Extension CRDs KServe expects (inference.networking.k8s.io "
                "InferencePool), or fix spec.router.scheduler.pool.ref to name an existing pool; KServe recreates a "
                "pool it manages on its next reconcile."
            ),
        )
    ]


def _pool_status(pool: llmisvc.Pool) -> Finding | None:
    parents = list(kube.status(pool.obj).get("parents") or kube.status(pool.obj).get("parent") or [])
    failing = [
        (entry, condition)
        for entry in parents
        for condition in llmisvc.false_conditions(llmisvc.parent_conditions(entry), PARENT_CONDITIONS)
    ]
    if not failing:
        return None  # no parent status yet is what a pool behind a not-accepted route looks like: the route says it
    entry, condition = failing[0]
    parent = entry.get("parentRef") or entry.get("gatewayRef") or {}
    lines = [
        f"parent {(item.get('parentRef') or item.get('gatewayRef') or {}).get('name', '?')}: "
        f"{kube.describe_condition(cond)}"
        for item in parents
        for cond in llmisvc.parent_conditions(item)
    ]
    return Finding(
        code="ROUTING_POOL_NOT_ACCEPTED",
        title=f"InferencePool {pool.name} is not accepted by Gateway {parent.get('name', '?')}",
        summary=f"InferencePool {pool.name}: {kube.describe_condition(condition)}. The Gateway does not route "
        "to a pool it has not accepted or whose endpoint picker reference it cannot resolve.",
        objects=(pool.ref,),
        evidence=tuple(lines),
        fix=Fix(
            what="Read the condition's reason: on ResolvedRefs the endpoint picker Service named by the pool "
            "(endpointPickerRef / extensionRef) is missing or has the wrong port; on Accepted the Gateway "
            "implementation does not support this InferencePool API version. Inspect: "
            f"{_kubectl('inferencepool', kube.namespace(pool.obj), pool.name)}"
        ),
    )


def _picker_finding(evidence: Evidence, pool: llmisvc.Pool) -> Finding | None:
    pods = llmisvc.picker_pods(evidence)
    if any(kube.pod_ready(pod) for pod in pods):
        return None
    deployment = llmisvc.picker_deployment(evidence)
    if deployment is None and not pods and not pool.picker_service.startswith(llmisvc.service_name(evidence)):
        return None  # a picker the user runs elsewhere: its pods are not in this evidence
    common.require_read(evidence, f"{kinds.POD.key} in ")
    # The InferencePool API's default is FailClose (the CRD KServe ships: failureMode default FailClose);
    # KServe's own scheduler preset states FailOpen (config/llmisvcconfig/config-llm-scheduler.yaml).
    mode = pool.failure_mode or llmisvc.FAIL_CLOSE
    closed = mode == llmisvc.FAIL_CLOSE
    states = [common.describe_pod_state(pod) for pod in pods] or ["no endpoint picker pod"]
    states += _picker_log_errors(evidence, pods)
    consequence = (
        "Under failureMode FailClose the Gateway rejects every request while the picker does not answer: "
        "the whole service is down even though the model pods may be ready."
        if closed
        else "Under failureMode FailOpen the Gateway sends requests on without the picker's choice: the service "
        "answers, but without prefix-cache or load-aware routing, so latency and KV-cache use degrade. Some "
        "Gateway implementations still answer 500 once a request body has gone to the picker "
        "(agentgateway/agentgateway#3473): if clients see 500s, treat this as critical."
    )
    name = kube.name(deployment) if deployment else f"{llmisvc.service_name(evidence)}-kserve-router-scheduler"
    return Finding(
        code="ENDPOINTS_PICKER_NOT_READY",
        title=f"endpoint picker {name} has no ready pod ({mode})",
        summary=f"No pod of the endpoint picker (EPP) that InferencePool {pool.name} uses is ready. {consequence}",
        objects=tuple(ref for ref in (kube.ref(deployment) if deployment else "", pool.ref) if ref),
        evidence=(
            f"{pool.ref}: picker Service {pool.picker_service or '?'}, failureMode {mode}",
            *states,
        ),
        fix=Fix(
            what="Make the picker's pods ready (its logs say why: an RBAC error listing pods or InferencePools, a "
            "bad scheduler config, a wrong --pool-name). Inspect: "
            f"{_kubectl('deployment', evidence.target.namespace, name)}"
        ),
        severity=Severity.CRITICAL if closed else Severity.WARNING,
    )


_LOG_ERROR = re.compile(r"\b(error|forbidden|fatal|panic|failed)\b", re.IGNORECASE)


# What differs between two occurrences of one message: zap's JSON "ts" field, klog's header (E0115 11:49:59.123 1 ...).
_LOG_MOMENT = re.compile(r'"ts":\s*("[^"]*"|[0-9.e+]+),?\s*|^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+\s+\d+\s+')
MAX_QUOTED = 3


def _picker_log_errors(evidence: Evidence, pods: list[KubeObject]) -> list[str]:
    """The picker's last distinct error lines (an RBAC refusal, a bad flag: istio/istio.io#17528), at most three; a
    picker retries what fails, so one message repeats: it is quoted once, with how often the log holds it."""
    lines = []
    for pod in pods:
        for log in evidence.logs_of(kube.name(pod)):
            errors = [common.strip_log_timestamp(line) for line in log.text.splitlines() if _LOG_ERROR.search(line)]
            where = f"{log.pod}/{log.container}{' (previous)' if log.previous else ''}"
            lines += [
                f"log {where}: {common.shorten(line, 300)}" + (f" (×{count} in the log)" if count > 1 else "")
                for line, count in _last_distinct(errors, MAX_QUOTED)
            ]
    return lines[-MAX_QUOTED:]


def _last_distinct(lines: list[str], limit: int) -> list[tuple[str, int]]:
    """The last ``limit`` distinct messages (compared without their moment), each as its latest line, oldest first,
    with how many lines carry it."""
    counts: dict[str, int] = {}
    latest: dict[str, str] = {}
    for line in lines:
        key = _LOG_MOMENT.sub("", line)
        counts[key] = counts.get(key, 0) + 1
        latest.pop(key, None)  # re-inserted last: the dict keeps the order of latest occurrence
        latest[key] = line
    return [(latest[key], counts[key]) for key in list(latest)[-limit:]]


def _selection_finding(evidence: Evidence, pool: llmisvc.Pool) -> Finding | None:
    common.require_read(evidence, f"{kinds.POD.key} in ")
    if not pool.selector:
        return None
    selected = [pod for pod in llmisvc.namespace_pods(evidence) if _labels_match(pool.selector, kube.labels(pod))]
    selector_text = ",".join(f"{key}={value}" for key, value in sorted(pool.selector.items()))
    if selected:
        ready = [pod for pod in selected if kube.pod_ready(pod)]
        if ready:
            return _target_port_finding(pool, ready, selector_text)
        return Finding(
            code="ENDPOINTS_NONE_READY",
            title=f"InferencePool {pool.name} selects {len(selected)} pod(s), none ready",
            summary="The pool's selector finds the model pods, but none is ready, so the endpoint picker has no "
            "endpoint to choose and the Gateway answers 503. The cause is in the pods: see probes, ports, "
            "resources.",
            objects=(pool.ref, *(kube.ref(pod) for pod in selected[:5])),
            evidence=tuple(common.describe_pod_state(pod) for pod in selected[:5]),
            fix=Fix(what="Follow the probes, ports and resources findings for these pods."),
        )
    workload = llmisvc.workload_pods(evidence)
    lines = [f"{pool.ref} selector: {selector_text}"]
    lines += [
        f"{kube.name(pod)} labels: "
        + ",".join(f"{key}={value}" for key, value in sorted(kube.labels(pod).items()) if key != "pod-template-hash")
        for pod in workload[:3]
    ] or ["no pod of the service in the namespace"]
    ready_count = sum(1 for pod in workload if kube.pod_ready(pod))
    return Finding(
        code="ENDPOINTS_POOL_SELECTS_NO_POD",
        title=f"InferencePool {pool.name} selects no pod",
        summary=f"The pool's selector {selector_text} matches no pod in {evidence.target.namespace}"
        + (f", while {ready_count} of the service's {len(workload)} vLLM pod(s) are ready" if workload else "")
        + ": the endpoint picker has nothing to choose from and every request through the Gateway fails.",
        objects=(pool.ref, *(kube.ref(pod) for pod in workload[:3])),
        evidence=tuple(lines),
        fix=Fix(
            what="Make the pool's selector match the vLLM pods' labels (KServe's default: "
            f"{kube.LLMISVC_PART_OF_LABEL}={kube.LLMISVC_PART_OF}, {kube.LLMISVC_NAME_LABEL}=<name>, "
            f"{kube.LLMISVC_WORKLOAD_LABEL}=workload), or restore the labels a change to spec.labels / the "
            "template removed; for a pool KServe manages, change the LLMInferenceService, not the pool."
        ),
    )


def _target_port_finding(pool: llmisvc.Pool, ready: list[KubeObject], selector_text: str) -> Finding | None:
    """The pool sends to ``targetPorts``; a ready pod whose server listens elsewhere refuses every request."""
    if not pool.target_ports:
        return None
    listening: dict[str, tuple[int, str]] = {}
    for pod in ready:
        container = common.serving_container(kube.spec(pod))
        receivers = llmisvc.receivers(kube.spec(pod))
        others = {receivers[port] for port in pool.target_ports if port in receivers} - {
            str((container or {}).get("name"))
        }
        if others:
            return None  # another container takes the port: the P/D routing sidecar in front of vLLM
        command = vllm_args.parse_container(container) if container is not None else None
        if command is not None and command.port is not None:
            listening[kube.name(pod)] = (
                command.port,
                f"{container.get('name') if container else '?'}: {command.port_source}",
            )
    if not listening or any(port in pool.target_ports for port, _ in listening.values()):
        return None  # a port that cannot be told is not a mismatch
    ports = ", ".join(str(port) for port in pool.target_ports)
    heard = sorted({port for port, _ in listening.values()})
    return Finding(
        code="ENDPOINTS_POOL_SELECTS_NO_POD",
        title=f"InferencePool {pool.name} targets port {ports}, where no selected pod listens",
        summary=f"The pool's selector {selector_text} finds {len(ready)} ready pod(s), but it sends requests to port "
        f"{ports} while their server listens on {', '.join(str(port) for port in heard)}: the endpoint picker "
        "hands out endpoints that refuse the connection, so every request through the Gateway fails.",
        objects=(pool.ref, *(kube.ref(pod) for pod in ready[:3])),
        evidence=(
            f"{pool.ref} targetPorts: {ports}",
            *(f"{name} {source}" for name, (_, source) in sorted(listening.items())[:3]),
        ),
        fix=Fix(
            what="Make the pool's target port and the server's listening port agree: KServe's presets use 8000 on "
            "both (the vLLM default); a --port set in the LLMInferenceService's template must be matched by the "
            "pool (spec.router.scheduler.pool.spec.targetPorts) or removed."
        ),
    )


def _workload_finding(evidence: Evidence) -> Finding | None:
    """Without a scheduler the route sends to the Service ``<name>-kserve-workload-svc``, which needs a ready pod."""
    common.require_read(evidence, f"{kinds.POD.key} in ")
    pods = llmisvc.workload_pods(evidence)
    if any(kube.pod_ready(pod) for pod in pods):
        return None
    service = f"{llmisvc.service_name(evidence)}-kserve-workload-svc"
    return Finding(
        code="ENDPOINTS_NONE_READY",
        title=f"no ready vLLM pod behind {service}" if pods else f"no vLLM pod behind {service}",
        summary=f"The LLMInferenceService routes to the Service {service} (no scheduler), and "
        + (f"none of its {len(pods)} vLLM pod(s) is ready" if pods else "it has no vLLM pod at all")
        + ": the Gateway has no endpoint and answers 503. The cause is in the pods: see probes and resources.",
        objects=(kube.ref(evidence.isvc), *(kube.ref(pod) for pod in pods[:5])),
        evidence=tuple(common.describe_pod_state(pod) for pod in pods[:5]) or ("no pod with KServe's workload labels",),
        fix=Fix(what="Follow the probes and resources findings for these pods."),
    )


def _labels_match(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def _not_ready(evidence: Evidence, others: list[Finding]) -> Finding | None:
    service = evidence.isvc
    conditions = kube.conditions(service)
    failing = [
        entry
        for name in LLMISVC_CONDITIONS
        if (entry := kube.condition(service, name)) is not None and str(entry.get("status")) != "True"
    ]
    if conditions and not failing:
        return None
    name = evidence.target.isvc
    if failing:
        # The most specific condition names the layer: a sub-condition before the roll-ups.
        first = next((entry for entry in failing if entry.get("type") not in ROLL_UPS), failing[-1])
        title = f"LLMInferenceService not ready: {first.get('type')}={first.get('status')}" + (
            f" ({first['reason']})" if first.get("reason") else ""
        )
        what = "KServe reports " + _describe(failing) + "."
    else:
        title = "LLMInferenceService has no status conditions"
        what = "The LLMInferenceService has no status conditions: KServe's llmisvc controller has not reconciled it."
    found = sorted({finding.code for finding in others})
    why = " Clients get errors from the Gateway until it turns ready; usually an effect of a cause found below."
    if found:
        why += f" This step also found: {', '.join(found)}."
    url = kube.status(service).get("url")
    serving = _recent_request_rate(evidence)
    contradicted = serving is not None and not any(finding.level is not Severity.INFO for finding in others)
    if contradicted:
        # kserve/kserve#5986 (incidents #68): Ready=False (WaitingForGateway) while the data plane answers 200s.
        why = (
            f" But the vLLM pods finished about {serving:.2g} requests/s in the last {RECENT_SECONDS // 60} minutes "
            "of the window and the route chain shows no fault: requests are being served, so the condition lags "
            "behind the data plane (a readiness computation KServe has got wrong before) rather than stopping it."
        )
    return Finding(
        code="LLMISVC_NOT_READY",
        title=title,
        summary=what + why,
        objects=(kube.ref(service),),
        evidence=tuple(f"condition {kube.describe_condition(entry)}" for entry in conditions)
        + ((f"status.url: {url}",) if url else ()),
        fix=Fix(
            what="Fix the cause the failing condition names (the other findings of this run, in root-cause order); "
            f"watch it with: kubectl get llminferenceservice {name} -n {evidence.target.namespace} -w."
        ),
        severity=Severity.INFO if contradicted else None,
    )


def _recent_request_rate(evidence: Evidence) -> float | None:
    """The highest rate of requests the vLLM pods finished in the window's last minutes, when above zero."""
    data = traffic.usable(evidence, "vllm_request_rate")
    if data is None:
        return None
    since = evidence.window.end.timestamp() - RECENT_SECONDS
    recent = [value for t, value in traffic.sum_by_time(data.series) if t >= since]
    peak = max(recent, default=0.0)
    return peak if peak > 0 else None
