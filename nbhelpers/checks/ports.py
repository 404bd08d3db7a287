"""Step 3, ``ports``: do the listening port, containerPort, Service targetPort and probe ports agree?

The chain a request follows to the model server (docs/upstream-facts.md):

- RawDeployment: Service ``<isvc>-predictor`` port → targetPort (number or name, resolved on the
  pod's containers) → the serving container, or the KServe agent (9081) which forwards to its
  ``--component-port``;
- Serverless: ``<revision>-private`` → queue-proxy → its ``USER_PORT`` (the declared containerPort,
  8080 when none is declared; 9081 when the agent sits in between) → the serving container.

The listening port comes from the server's command line (:mod:`nbhelpers.facts.vllm_args`). Every link
that disagrees is a ``PORT_MISMATCH`` with the whole chain in its evidence.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common, llmisvc, vllm_args
from nbhelpers.findings import patches
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.findings.steps import StepInfo
from nbhelpers.sources import kinds, kube

STEP = StepInfo(
    "ports",
    "Ports",
    "Do the listening port, containerPort, Service targetPort and probe ports agree?",
)
PROBE_KINDS = ("readinessProbe", "livenessProbe", "startupProbe")
PROBE_HANDLERS = ("httpGet", "tcpSocket", "grpc")


@dataclass(frozen=True)
class TrafficPath:
    """Where requests reach the serving container: ``port`` (None when it cannot be told) and the hops."""

    port: int | None
    hops: tuple[str, ...]
    service: Mapping[str, Any] | None = None
    unresolved_target: str | None = None  # a named targetPort that no container declares

    @property
    def chain(self) -> str:
        return " → ".join(self.hops)


@dataclass(frozen=True)
class ProbePort:
    kind: str  # readinessProbe | livenessProbe | startupProbe
    handler: str  # httpGet | tcpSocket | grpc
    declared: int | str
    number: int | None  # resolved number, None for a name the container does not declare
    run_by: str  # "kubelet" or "queue-proxy"


def run(evidence: Evidence) -> list[Finding]:
    common.skip_modelmesh(evidence)
    if evidence.target.is_llmisvc:
        return _llmisvc_ports(evidence)
    workload = common.current_workload(evidence)
    server = vllm_args.parse_container(workload.serving)
    path = _traffic_path(evidence, workload)
    judge = PortJudge(evidence, workload, server, path)
    findings: list[Finding] = []
    if path.unresolved_target is not None:
        findings.append(judge.unresolved_target_port())
    if judge.listening_disagrees:
        findings.append(judge.listening_port_mismatch())
    findings.extend(judge.probe_mismatches())
    stale = judge.stale_container_port()
    if stale is not None:
        findings.append(stale)
    return findings


# --- the traffic path ---------------------------------------------------------------------------


def _traffic_path(evidence: Evidence, workload: common.Workload) -> TrafficPath:
    if common.effective_mode(evidence) == common.SERVERLESS:
        return _knative_path(workload)
    return _service_path(evidence, workload)


def _expected_port(container: Mapping[str, Any]) -> int:
    """KServe sends to the first declared containerPort, else 8080."""
    ports = common.declared_ports(container)
    return int(ports[0]["containerPort"]) if ports else common.KSERVE_DEFAULT_PORT


def _through_agent(workload: common.Workload, number: int, hops: list[str]) -> int:
    """Follow the KServe agent to its ``--component-port`` when ``number`` is the agent's port."""
    agent = common.container_named(workload.pod_spec, common.AGENT_CONTAINERS)
    agent_ports = {int(p["containerPort"]) for p in common.declared_ports(agent or {})} or {common.AGENT_PORT}
    if agent is None or number not in agent_ports:
        return number
    flags = vllm_args.parse_flags([str(arg) for arg in agent.get("args") or []])
    component = flags.get("component-port", "")
    forwarded = int(component) if component.isdigit() else common.KSERVE_DEFAULT_PORT
    how = f"--component-port {component}" if component else "default component port 8080"
    hops.append(f"agent sidecar {agent.get('name')}:{number} forwards to {forwarded} ({how})")
    return forwarded


def _knative_path(workload: common.Workload) -> TrafficPath:
    revision = workload.labels.get(common.REVISION_LABEL, "<revision>")
    hops = [f"Service {revision}-private", "queue-proxy"]
    queue = common.container_named(workload.pod_spec, {"queue-proxy"})
    user_port = vllm_args.literal_env(queue).get("USER_PORT", "") if queue is not None else ""
    if user_port.isdigit():
        number = int(user_port)
        hops.append(f"USER_PORT {number}")
    else:
        number = _expected_port(workload.serving)
        hops.append(f"containerPort {number} (Knative's user port)")
    forwarded = _through_agent(workload, number, hops)
    hops.append(f"{workload.serving.get('name')}:{forwarded}")
    return TrafficPath(forwarded, tuple(hops))


def _service_path(evidence: Evidence, workload: common.Workload) -> TrafficPath:
    service = common.named(evidence, kinds.SERVICE, common.predictor_name(evidence))
    if service is None:
        expected = _expected_port(workload.serving)
        hops = [f"no Service {common.predictor_name(evidence)}: KServe would target {expected}"]
        return TrafficPath(expected, (*hops, f"{workload.serving.get('name')}:{expected}"))
    ports = list(kube.spec(service).get("ports") or [])
    if not ports:
        return TrafficPath(None, (f"{kube.ref(service)} declares no port",), service)
    port = next((p for p in ports if p.get("name") == "http"), ports[0])
    target = common.as_port(port.get("targetPort")) or int(port.get("port") or 0)
    hops = [f"{kube.ref(service)} port {port.get('port')}", f"targetPort {target}"]
    number, owner = common.resolve_named_port(kube.containers(workload.pod_spec), target)
    if number is None:
        hops.append("no container declares a port with that name")
        return TrafficPath(None, tuple(hops), service, unresolved_target=str(target))
    if isinstance(target, str):
        hops.append(f"{owner}:{number}")
    forwarded = _through_agent(workload, number, hops)
    if owner not in (None, workload.serving.get("name")) and forwarded == number:
        hops.append(f"container {owner}, not the model server")
        return TrafficPath(None, tuple(hops), service)
    hops.append(f"{workload.serving.get('name')}:{forwarded}")
    return TrafficPath(forwarded, tuple(hops), service)


# --- findings -----------------------------------------------------------------------------------


class PortJudge:
    """The listening port, the traffic path and the probe ports every ports finding quotes, and the findings."""

    def __init__(
        self,
        evidence: Evidence,
        workload: common.Workload,
        server: vllm_args.ServerCommand,
        path: TrafficPath,
    ) -> None:
        self.evidence = evidence
        self.workload = workload
        self.server = server
        self.path = path
        self.container_name = str(workload.serving.get("name"))

    @property
    def objects(self) -> tuple[str, ...]:
        refs = [kube.ref(self.evidence.isvc), self.workload.ref]
        if self.path.service is not None:
            refs.append(kube.ref(self.path.service))
        return tuple(refs)

    def base_evidence(self) -> list[str]:
        listening = f"{self.server.port}" if self.server.port is not None else "unknown"
        lines = [
            f"chain: {self.path.chain}",
            f"listening port: {listening} ({self.server.port_source})",
            f"containerPorts of {self.container_name}: {common.describe_ports(self.workload.serving)}",
        ]
        if self.server.argv:
            lines.append(f"command line ({self.workload.ref}): {common.shorten(' '.join(self.server.argv))}")
        for probe in _probe_ports(self.workload):
            lines.append(
                f"{probe.kind} ({probe.run_by}): {probe.handler} port {probe.declared}"
                + (f" = {probe.number}" if probe.number is not None and probe.number != probe.declared else "")
            )
        return lines

    def listening_port_mismatch(self) -> Finding:
        assert self.server.port is not None and self.path.port is not None
        listening, target = self.server.port, self.path.port
        summary = (
            f"{self.server.server} in container {self.container_name} listens on {listening} "
            f"({self.server.port_source}), but traffic reaches the container on {target} "
            f"({self.path.chain}). Connections to {target} are refused, so readiness never passes and the "
            "Service gets no ready endpoints (503)."
        )
        plan = self._server_port_patch(target)
        flag = self.server.port_flag or "--port"
        what = (
            f"Make the server listen where KServe sends traffic: add {flag}={target} to the predictor's args "
            "(KServe appends the InferenceService's args after the runtime's, and the last flag wins). "
            f"Alternatively declare containerPort {listening} on the predictor so that KServe targets {listening}."
        )
        return Finding(
            code="PORT_MISMATCH",
            title=f"server listens on {listening}, traffic goes to {target}",
            summary=summary,
            objects=self.objects,
            evidence=tuple(self.base_evidence()),
            fix=Fix.from_plan(what, plan, no_patch=self._no_patch_reason()),
        )

    def unresolved_target_port(self) -> Finding:
        service = self.path.service
        assert service is not None and self.path.unresolved_target is not None
        name = self.path.unresolved_target
        wanted = self.server.port or _expected_port(self.workload.serving)
        summary = (
            f"{kube.ref(service)} targets the named port {name!r}, but no container of {self.workload.ref} "
            f"declares a port with that name ({self.container_name}: "
            f"{common.describe_ports(self.workload.serving)}). The endpoints controller cannot resolve it, so "
            "the pods never become endpoints of the Service."
        )
        owner = common.controller_owner(service)
        plan = None if owner else patches.plan_patch(service, lambda obj: _retarget(obj, name, wanted))
        what = f"Point targetPort at the port the server listens on ({wanted}), or name that containerPort {name!r}."
        if owner:
            what += f" The Service is generated by {owner}: change the port declared on the InferenceService instead."
        return Finding(
            code="PORT_MISMATCH",
            title=f"Service targetPort {name!r} matches no container port",
            summary=summary,
            objects=self.objects,
            evidence=tuple(self.base_evidence()),
            fix=Fix.from_plan(what, plan),
        )

    @property
    def listening_disagrees(self) -> bool:
        return self.server.port is not None and self.path.port is not None and self.server.port != self.path.port

    @property
    def reference_port(self) -> int | None:
        """The port probes must use: where traffic arrives when the listening port is being moved there."""
        if self.listening_disagrees:
            return self.path.port
        return self.server.port if self.server.port is not None else self.path.port

    def probe_mismatches(self) -> list[Finding]:
        reference = self.reference_port
        if reference is None:
            return []
        sidecar_ports = {
            int(port["containerPort"])
            for container in kube.containers(self.workload.pod_spec)
            if container.get("name") != self.container_name
            for port in common.declared_ports(container)
        }
        findings = []
        for probe in _probe_ports(self.workload):
            if probe.number == reference or (probe.number is not None and probe.number in sidecar_ports):
                continue  # a probe aimed at a sidecar is judged by the probes step
            findings.append(self._probe_finding(probe, reference))
        return findings

    def _probe_finding(self, probe: ProbePort, reference: int) -> Finding:
        if self.listening_disagrees:
            known = "receives traffic on (and the listening-port fix moves it there)"
        elif self.server.port is not None:
            known = "listens on"
        else:
            known = "receives traffic on"
        if probe.number is None:
            problem = f"names the port {probe.declared!r}, which container {self.container_name} does not declare"
        else:
            problem = f"checks port {probe.number}"
        consequence = {
            "readinessProbe": "the pod never turns ready and gets no traffic",
            "livenessProbe": "the kubelet restarts a healthy server over and over",
            "startupProbe": "the container is killed before it ever counts as started",
        }[probe.kind]
        summary = (
            f"The {probe.kind} ({probe.handler}, run by {probe.run_by}) {problem}, while the server {known} "
            f"{reference}: the probe fails, so {consequence}."
        )
        plan = self._probe_patch(probe, reference)
        what = f"Set the {probe.kind} port to {reference}."
        return Finding(
            code="PORT_MISMATCH",
            title=f"{probe.kind} port {probe.declared} is not the server's port {reference}",
            summary=summary,
            objects=self.objects,
            evidence=tuple(self.base_evidence()),
            fix=Fix.from_plan(what, plan, no_patch=self._no_patch_reason()),
        )

    def stale_container_port(self) -> Finding | None:
        """A containerPort that names another port while traffic and probes reach the server: info only."""
        declared = {int(p["containerPort"]) for p in common.declared_ports(self.workload.serving)}
        listening = self.server.port
        if listening is None or not declared or listening in declared or self.path.port != listening:
            return None
        return Finding(
            code="PORT_MISMATCH",
            title=f"containerPort {sorted(declared)} does not name the listening port {listening}",
            summary=f"Container {self.container_name} declares {common.describe_ports(self.workload.serving)} but the "
            f"server listens on {listening}. Traffic and probes use {listening}, so nothing fails today; the "
            "declaration misleads readers and any tool that takes the first containerPort (KServe does).",
            objects=self.objects,
            evidence=tuple(self.base_evidence()),
            fix=Fix(
                what=f"Declare containerPort {listening} on the predictor so that the spec says what the server does."
            ),
            severity=Severity.INFO,
        )

    # --- patches --------------------------------------------------------------------------------

    def _no_patch_reason(self) -> str:
        if self.server.shell_wrapped:
            return "(No patch: the server starts through a shell script; edit the script.)"
        return common.no_owner_patch(self.evidence)

    def _server_port_patch(self, port: int) -> patches.PatchPlan | None:
        located = common.isvc_serving_container(self.evidence.isvc)
        flag = self.server.port_flag
        if located is None or flag is None or self.server.shell_wrapped:
            return None
        _, accessor = located

        def set_port(isvc: common.KubeObject) -> None:
            container = accessor.get(isvc)
            container["args"] = common.set_flag([str(arg) for arg in container.get("args") or []], flag, str(port))

        return patches.plan_patch(self.evidence.isvc, set_port)

    def _probe_patch(self, probe: ProbePort, port: int) -> patches.PatchPlan | None:
        located = common.isvc_serving_container(self.evidence.isvc)
        if located is None:
            return None
        _, accessor = located

        def set_probe_port(isvc: common.KubeObject) -> None:
            container = accessor.get(isvc)
            current = container.get(probe.kind)
            if isinstance(current, dict) and isinstance(current.get(probe.handler), dict):
                current[probe.handler]["port"] = port
            elif accessor.is_custom_container:
                live = copy.deepcopy(dict(self.workload.serving.get(probe.kind) or {probe.handler: {}}))
                live.setdefault(probe.handler, {})["port"] = port
                container[probe.kind] = live
            else:
                # KServe merges this field by field into the runtime's probe: only the port changes.
                container[probe.kind] = {probe.handler: {"port": port}}

        return patches.plan_patch(self.evidence.isvc, set_probe_port)


def _probe_ports(workload: common.Workload) -> list[ProbePort]:
    """Probe ports of the serving container, and the readiness probe Knative hands to queue-proxy."""
    container = workload.serving
    probes: list[ProbePort] = []
    for kind in PROBE_KINDS:
        probe = container.get(kind) or {}
        for handler in PROBE_HANDLERS:
            if isinstance(probe.get(handler), Mapping) and probe[handler].get("port") not in (None, ""):
                declared = common.as_port(probe[handler]["port"])
                assert declared is not None
                number, _ = common.resolve_named_port([container], declared)
                probes.append(ProbePort(kind, handler, declared, number, "kubelet"))
    queue = common.container_named(workload.pod_spec, {"queue-proxy"})
    if queue is not None:
        probes.extend(_queue_proxy_probes(queue))
    return probes


def _queue_proxy_probes(queue: Mapping[str, Any]) -> list[ProbePort]:
    """Knative moves the user's readiness probe into queue-proxy's ``SERVING_READINESS_PROBE`` (JSON)."""
    text = vllm_args.literal_env(queue).get("SERVING_READINESS_PROBE", "")
    try:
        parsed = json.loads(text) if text.strip().startswith(("{", "[")) else None
    except json.JSONDecodeError:
        return []
    entries = parsed if isinstance(parsed, list) else [parsed] if isinstance(parsed, dict) else []
    probes = []
    for entry in entries:
        for handler in PROBE_HANDLERS:
            port = common.as_port((entry.get(handler) or {}).get("port")) if isinstance(entry, dict) else None
            if isinstance(port, int) and port > 0:
                probes.append(ProbePort("readinessProbe", handler, port, port, "queue-proxy"))
    return probes


def _retarget(service: common.KubeObject, name: str, port: int) -> None:
    for entry in service["spec"]["ports"]:
        if entry.get("targetPort") == name:
            entry["targetPort"] = port


# --- an LLMInferenceService ---------------------------------------------------------------------------------------
#
# The Gateway sends to the InferencePool's targetPorts on the pod the endpoint picker chose (spec.router.scheduler),
# else through the HTTPRoute to the Service <name>-kserve-workload-svc, whose targetPort KServe fixes at 8000
# (reconcileWorkloadService, pkg/controller/v1alpha2/llmisvc/workload.go). On that port sits the "main receiver": vLLM
# in container main, or on decode pods of the P/D presets the llm-d routing sidecar, which forwards to vLLM on 8001
# (config/llmisvcconfig/config-llm-decode-template.yaml). docs/upstream-facts.md#llminferenceservice.


@dataclass(frozen=True)
class LlmTarget:
    """A port the request path sends to: the pool's targetPort or the workload Service's targetPort."""

    port: int
    kind: str  # InferencePool | Service
    ref: str
    text: str  # "InferencePool.../x targetPorts 8000"


def _llmisvc_ports(evidence: Evidence) -> list[Finding]:
    common.require_read(evidence, kinds.POD.key + " ")
    targets = _llmisvc_targets(evidence)
    findings = []
    for role, pod in _pods_by_role(evidence).items():
        pod_spec = kube.pod_template_spec(pod)
        container = common.container_named(pod_spec, {kube.LLMISVC_CONTAINER}) or common.serving_container(pod_spec)
        if container is None:
            continue
        server = vllm_args.parse_container(container)
        receivers = llmisvc.receivers(pod_spec)
        for target in targets:
            finding = _llmisvc_target_mismatch(evidence, role, pod, container, server, receivers, target)
            if finding is not None:
                findings.append(finding)
        findings.extend(_llmisvc_probe_mismatches(evidence, role, pod, container, server, receivers))
    return findings


def _pods_by_role(evidence: Evidence) -> dict[str, common.KubeObject]:
    """The newest vLLM pod of each llm-d role (else each workload Deployment's template, when no pod exists)."""
    chosen: dict[str, common.KubeObject] = {}
    pods = sorted(llmisvc.workload_pods(evidence), key=lambda pod: (kube.created(pod) or "", kube.name(pod)))
    if not pods:
        pods = [
            obj
            for obj in evidence.of(kinds.DEPLOYMENT)
            if kube.namespace(obj) == evidence.target.namespace
            and kube.is_llmisvc_workload(obj)
            and kube.labels(obj).get(kube.LLMISVC_NAME_LABEL) == llmisvc.service_name(evidence)
        ]
    for pod in pods:
        chosen[kube.labels(pod).get(kube.LLMISVC_ROLE_LABEL) or llmisvc.ROLE_BOTH] = pod
    return chosen


def _llmisvc_targets(evidence: Evidence) -> list[LlmTarget]:
    """The ports requests arrive on: every target port of the pool(s) with a scheduler, and the workload Service's
    targetPorts when a route sends to it (without a scheduler always; with one, KServe's preset route sends the
    paths the picker does not handle, /v1/models or /health, straight to the Service:
    config/llmisvcconfig/config-llm-router-route.yaml)."""
    targets = []
    if llmisvc.has_scheduler(evidence):
        targets += [
            LlmTarget(port, "InferencePool", pool.ref, f"{pool.ref} targetPorts {port}")
            for pool in llmisvc.pools(evidence)
            for port in pool.target_ports
        ]
    name = llmisvc.workload_service_name(evidence)
    routed = any(f"Service/{name}" in llmisvc.route_backends(route) for route in llmisvc.routes(evidence))
    service = common.named(evidence, kinds.SERVICE, name)
    if service is None or (llmisvc.has_scheduler(evidence) and not routed):
        return targets
    for entry in kube.spec(service).get("ports") or []:
        port = common.as_port(entry.get("targetPort")) or entry.get("port")
        if isinstance(port, int):
            text = f"{kube.ref(service)} port {entry.get('port')} → {port}"
            targets.append(LlmTarget(port, "Service", kube.ref(service), text))
    return targets


def _llmisvc_lines(
    pod: common.KubeObject, container: Mapping[str, Any], server: vllm_args.ServerCommand, receivers: dict[int, str]
) -> list[str]:
    listening = f"{server.port}" if server.port is not None else "unknown"
    lines = [
        f"listening port of {container.get('name')} in {kube.ref(pod)}: {listening} ({server.port_source})",
        "containerPorts (containers and native sidecars): "
        + (", ".join(f"{port} ({name})" for port, name in sorted(receivers.items())) or "none declared"),
    ]
    if server.argv:
        lines.append(f"command line: {common.shorten(' '.join(server.argv))}")
    return lines


def _llmisvc_target_mismatch(
    evidence: Evidence,
    role: str,
    pod: common.KubeObject,
    container: Mapping[str, Any],
    server: vllm_args.ServerCommand,
    receivers: dict[int, str],
    target: LlmTarget,
) -> Finding | None:
    """vLLM listens elsewhere than the port requests are sent to, and no other container of the pod takes that port
    (a routing sidecar on it forwards to vLLM: not judged here)."""
    listening = server.port
    if listening is None or listening == target.port or receivers.get(target.port) not in (None, container.get("name")):
        return None
    pods = llmisvc.role_label(role)
    via_pool = target.kind == "InferencePool"
    consequence = (
        "the endpoint picker hands out pod:port pairs that refuse the connection, so requests through the Gateway fail"
        if via_pool
        else "the Service's endpoints refuse the connection, so requests through the Gateway fail"
    )
    return Finding(
        code="PORT_MISMATCH",
        title=f"vLLM on the {pods} listens on {listening}, the {target.kind} sends to {target.port}",
        summary=f"vLLM in container {container.get('name')} of the {pods} listens on {listening} "
        f"({server.port_source}), but {target.text}: {consequence}.",
        objects=(kube.ref(evidence.isvc), target.ref, kube.ref(pod)),
        evidence=(
            f"request path: {target.text} → {kube.name(pod)}:{target.port}",
            *_llmisvc_lines(pod, container, server, receivers),
        ),
        fix=Fix(
            what=f"Make vLLM listen on {target.port}: KServe's presets and its workload Service use 8000 for the "
            "container that receives requests, and KServe does not support another port there (workload.go). Remove "
            f"the --port {listening} the LLMInferenceService's template (spec.template, or spec.prefill.template for "
            "prefill pods) adds"
            + (
                ", or set the pool's targetPorts to the listening port (spec.router.scheduler.pool.spec)"
                if via_pool
                else ""
            )
            + ". (No patch yet for an LLMInferenceService.)"
        ),
    )


def _llmisvc_probe_mismatches(
    evidence: Evidence,
    role: str,
    pod: common.KubeObject,
    container: Mapping[str, Any],
    server: vllm_args.ServerCommand,
    receivers: dict[int, str],
) -> list[Finding]:
    """A probe of the vLLM container on a port vLLM does not listen on and no other container takes."""
    if server.port is None:
        return []
    findings = []
    for kind in PROBE_KINDS:
        probe = container.get(kind) or {}
        for handler in PROBE_HANDLERS:
            declared = (
                common.as_port((probe.get(handler) or {}).get("port"))
                if isinstance(probe.get(handler), Mapping)
                else None
            )
            if declared is None:
                continue
            number, _ = common.resolve_named_port([container], declared)
            if number == server.port or (
                number is not None and receivers.get(number) not in (None, container.get("name"))
            ):
                continue
            findings.append(
                Finding(
                    code="PORT_MISMATCH",
                    title=f"{kind} port {declared} is not vLLM's port {server.port} ({llmisvc.role_label(role)})",
                    summary=f"The {kind} of container {container.get('name')} on the {llmisvc.role_label(role)} "
                    f"checks port {declared}, while vLLM listens on {server.port}: the probe fails, so "
                    + {
                        "readinessProbe": "the pods never turn ready and get no traffic.",
                        "livenessProbe": "the kubelet restarts a healthy server over and over.",
                        "startupProbe": "the container is killed before it ever counts as started.",
                    }[kind],
                    objects=(kube.ref(evidence.isvc), kube.ref(pod)),
                    evidence=tuple(_llmisvc_lines(pod, container, server, receivers)),
                    fix=Fix(
                        what=f"Set the {kind} port to {server.port} on container {container.get('name')} in the "
                        "LLMInferenceService's template. (No patch yet for an LLMInferenceService.)"
                    ),
                )
            )
    return findings
