"""Step 2, ``probes``: do the probes fit the model's load time, and do they test the engine?

Probe budgets and load times come from :mod:`nbhelpers.models.load_time`. Decisions this step rests on:

- **Which probe can kill a load.** Only a startupProbe or a livenessProbe restarts a container. A
  startupProbe holds liveness and readiness back until it succeeds, so it is the gating probe when
  present; otherwise the livenessProbe is. A failing readiness probe keeps the pod out of rotation,
  which is exactly what it should do while the model loads: readiness budgets are reported but never
  called short.
- **Serverless.** Knative hands the readiness probe to queue-proxy (``SERVING_READINESS_PROBE``) and
  declares a TCP probe on the user port when the service declares none; liveness and startup probes
  stay with the kubelet. Knative's default TCP probe counts as a readiness probe: vLLM opens its port
  only after the engine has loaded (DESIGN §6), so the probe holds traffic back during the load. The
  KServe agent (port 9081) relays the readiness probe to the server, so a queue-proxy probe on the
  agent's port is by design.
- **Model-aware.** A probe that passes while vLLM loads, or that cannot pass on a healthy engine,
  belongs to another process: a sidecar's port, a command that never talks to the server, a path the
  server does not serve, gRPC against an HTTP-only server. A probe on a port nobody listens on is a
  ``PORT_MISMATCH`` (ports step), not repeated here.
- **Killed during the load.** A restart counts when the kubelet's kill events (``failed liveness
  probe``) or a SIGKILL/SIGTERM exit come with a run that never served: its own log ends before
  ``Application startup complete.``, or it ended within the probe's budget.
- **Severity.** ``PROBE_READINESS_MISSING`` and ``PROBE_NOT_MODEL_AWARE`` are raised to critical only
  when a pod turned Ready before its server served and the edge saw 5xx in the window (DESIGN §4.3).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from nbhelpers.errors import RunbookError
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common, vllm_args
from nbhelpers.findings import patches
from nbhelpers.findings.model import Finding, Fix, Severity
from nbhelpers.findings.steps import StepInfo
from nbhelpers.models import load_time
from nbhelpers.models.load_time import LIVENESS, PROBE_KINDS, READINESS, STARTUP, LoadAttempt, ProbeBudget
from nbhelpers.sources import kinds, kube
from nbhelpers.sources.kube import event_interval
from nbhelpers.util.times import format_time, parse_duration, parse_k8s_time

STEP = StepInfo(
    "probes",
    "Probes",
    "Do the probes fit the model's load time, and do they test the engine?",
)
HANDLERS = ("httpGet", "tcpSocket", "grpc", "exec")
PROGRESS_DEADLINE_ANNOTATION = "serving.knative.dev/progress-deadline"
KNATIVE_PROGRESS_DEADLINE_SECONDS = 600
QUEUE_PROXY = "queue-proxy"
ISTIO_PROXY = "istio-proxy"

# Paths each server answers with 2xx once it serves (vLLM's OpenAI server; KServe's model server).
_ENGINE_PATHS: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {
    vllm_args.VLLM: (frozenset({"/health", "/ping", "/v1/models", "/version", "/metrics"}), ()),
    vllm_args.HUGGINGFACESERVER: (
        frozenset({"/", "/v2", "/v2/health/live", "/v2/health/ready", "/v1/models", "/metrics", "/openai/v1/models"}),
        ("/v1/models/", "/v2/models/"),
    ),
}
# The path a recommended probe asks, per server and probe kind.
_DEFAULT_PATHS: dict[str, dict[str, str]] = {
    vllm_args.VLLM: {READINESS: "/health", LIVENESS: "/health", STARTUP: "/health"},
    vllm_args.HUGGINGFACESERVER: {
        READINESS: "/v2/health/ready",
        LIVENESS: "/v2/health/live",
        STARTUP: "/v2/health/ready",
    },
}
# Ports of the sidecars KServe, Knative and Istio add, when no container declares them.
_SIDECAR_PORTS = {
    8012: QUEUE_PROXY,
    8022: QUEUE_PROXY,
    9090: QUEUE_PROXY,
    9091: QUEUE_PROXY,
    common.AGENT_PORT: "agent",
    15020: ISTIO_PROXY,
    15021: ISTIO_PROXY,
}
_NETWORK_CALL = re.compile(r"curl|wget|https?://|urllib|requests|httpx|grpc_health_probe|\bnc\b")
_PROBE_EVENT = re.compile(r"^(Liveness|Readiness|Startup) probe (?:failed|errored)", re.IGNORECASE)
_KILL_EVENT = re.compile(r"failed (liveness|startup) probe", re.IGNORECASE)
_FIELD_CONTAINER = re.compile(r"spec\.(?:init)?[cC]ontainers\{([^}]+)\}")
_KILL_EXIT_CODES = frozenset({137, 143})  # SIGKILL, SIGTERM


# --- probes -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """One probe of the serving container, and who runs it."""

    kind: str
    spec: Mapping[str, Any]
    run_by: str  # "kubelet" or "queue-proxy"

    @property
    def handler(self) -> str | None:
        return next((name for name in HANDLERS if isinstance(self.spec.get(name), Mapping)), None)

    @property
    def action(self) -> Mapping[str, Any]:
        return self.spec.get(self.handler, {}) if self.handler else {}

    @property
    def budget(self) -> ProbeBudget:
        return ProbeBudget.of(self.kind, self.spec)

    def target(self) -> str:
        action = self.action
        if self.handler == "exec":
            return f"exec {[str(part) for part in action.get('command') or []]}"
        if self.handler == "httpGet":
            return f"httpGet {action.get('path') or '/'} port {action.get('port')}"
        if self.handler is None:
            return "no handler"
        return f"{self.handler} port {action.get('port')}"

    def describe(self) -> str:
        if self.run_by == QUEUE_PROXY:
            return (
                f"{self.kind} (run by queue-proxy, Knative's fast probing until ready): {self.target()}; "
                "failures hold traffic back, they never restart the container"
            )
        return f"{self.kind} (kubelet): {self.target()}; {self.budget.describe()}"


def serving_probes(workload: common.Workload, serverless: bool) -> list[Probe]:
    """Probes of the serving container, and the readiness probe(s) Knative hands to queue-proxy."""
    probes = [
        Probe(kind, workload.serving[kind], "kubelet")
        for kind in PROBE_KINDS
        if isinstance(workload.serving.get(kind), Mapping)
    ]
    queue = common.container_named(workload.pod_spec, {QUEUE_PROXY})
    if queue is not None:
        probes.extend(Probe(READINESS, entry, QUEUE_PROXY) for entry in _queue_proxy_probes(queue))
    elif serverless and not any(probe.kind == READINESS for probe in probes):
        # A Revision or Deployment template before Knative's defaulting shows in a pod: Knative adds a
        # TCP probe on the user port.
        probes.append(Probe(READINESS, {"tcpSocket": {"port": 0}}, QUEUE_PROXY))
    return probes


def _queue_proxy_probes(queue: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    text = vllm_args.literal_env(queue).get("SERVING_READINESS_PROBE", "").strip()
    if not text.startswith(("{", "[")):
        return []
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return []
    entries = parsed if isinstance(parsed, list) else [parsed]
    return [entry for entry in entries if isinstance(entry, dict)]


def gating(probes: Sequence[Probe]) -> Probe | None:
    """The probe that can kill a loading container: the startupProbe, else the livenessProbe."""
    kubelet = {probe.kind: probe for probe in probes if probe.run_by == "kubelet"}
    return kubelet.get(STARTUP) or kubelet.get(LIVENESS)


# --- per-pod load evidence -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ProbeEvents:
    """The kubelet's probe events for one pod's serving container."""

    failures: dict[str, int] = field(default_factory=dict)  # "liveness" | "readiness" | "startup" -> count
    kills: dict[str, int] = field(default_factory=dict)  # "liveness" | "startup" -> count
    lines: tuple[str, ...] = ()

    @property
    def kill_count(self) -> int:
        return sum(self.kills.values())


def probe_events(evidence: Evidence, pod: str, serving: str) -> ProbeEvents:
    failures: dict[str, int] = {}
    kills: dict[str, int] = {}
    lines: list[str] = []
    for event in evidence.events_about("Pod", pod):
        involved = event.get("involvedObject") or event.get("regarding") or {}
        container_match = _FIELD_CONTAINER.search(str(involved.get("fieldPath") or ""))
        container = container_match.group(1) if container_match else ""
        message = str(event.get("message") or event.get("note") or "")
        count = int(event.get("count") or (event.get("series") or {}).get("count") or 1)
        reason = str(event.get("reason") or "")
        failure = _PROBE_EVENT.match(message) if reason == "Unhealthy" else None
        kill = _KILL_EVENT.search(message) if reason == "Killing" else None
        if failure and container in (serving, QUEUE_PROXY, ""):
            kind = failure.group(1).lower()
            failures[kind] = failures.get(kind, 0) + count
        elif kill and container in (serving, "") and serving in message:
            kind = kill.group(1).lower()
            kills[kind] = kills.get(kind, 0) + count
        else:
            continue
        first, last = event_interval(event)
        when = f"{format_time(first)} … {format_time(last)}" if first and last and first != last else ""
        when = when or (format_time(last) if last else "time unknown")
        lines.append(f"event {reason} on Pod {pod} ({container or 'pod'}) ×{count}, {when}: {message!r}")
    return ProbeEvents(failures, kills, tuple(lines))


@dataclass(frozen=True)
class PodLoad:
    """What one predictor pod shows about the load and the probes."""

    pod: Mapping[str, Any]
    attempts: tuple[LoadAttempt, ...]
    restarts: int
    events: ProbeEvents
    gating: ProbeBudget | None
    ready_since: datetime | None

    @property
    def name(self) -> str:
        return kube.name(self.pod)

    @property
    def previous(self) -> LoadAttempt | None:
        return next((attempt for attempt in self.attempts if attempt.previous), None)

    @property
    def current(self) -> LoadAttempt | None:
        return next((attempt for attempt in self.attempts if not attempt.previous), None)

    def killed_during_load(self) -> list[str]:
        """Why this pod's restarts were probe kills during the load (empty: they were not, or no restarts)."""
        if self.restarts == 0:
            return []
        previous = self.previous
        if previous is not None and previous.outcome == load_time.SERVED:
            return []  # the last run had loaded: a later kill is not about the load
        reasons: list[str] = []
        if previous is not None and previous.ended_mid_load:
            reasons.append(f"the previous run's log ends before the server started ({previous.source})")
        run_seconds = previous.seconds if previous is not None else None
        gate = self.gating
        if gate is not None and run_seconds is not None and run_seconds <= gate.worst_case_seconds + gate.period:
            reasons.append(
                f"the previous run ended after {run_seconds:.0f} s, within the {gate.kind} budget "
                f"of {gate.seconds} s (worst case {gate.worst_case_seconds} s)"
            )
        never_served = not any(attempt.outcome == load_time.SERVED for attempt in self.attempts)
        if self.events.kill_count:
            if reasons or never_served:
                kinds_killed = ", ".join(f"{kind} ×{count}" for kind, count in sorted(self.events.kills.items()))
                return [f"the kubelet killed the container for failed probes ({kinds_killed})", *reasons]
            return []
        signalled = (
            previous is not None
            and previous.exit_code in _KILL_EXIT_CODES
            and previous.reason != "OOMKilled"
            and previous.ended_mid_load
        )
        if signalled and len(reasons) == 2:
            assert previous is not None
            return [f"the previous run was killed (exit code {previous.exit_code}) while loading", *reasons]
        return []

    def ready_before_serving(self) -> str | None:
        current = self.current
        if current is None or current.log is None or self.ready_since is None:
            return None
        serving = current.log.serving_at
        if serving is None or (serving - self.ready_since).total_seconds() <= 1:
            return None
        return (
            f"Pod {self.name} turned Ready at {format_time(self.ready_since)}, "
            f"{(serving - self.ready_since).total_seconds():.0f} s before its log shows the server serving "
            f"({format_time(serving)})"
        )


def _logs_by_run(evidence: Evidence, pod: str, container: str) -> tuple[str | None, str | None]:
    current = previous = None
    for log in evidence.logs_of(pod):
        if log.container == container:
            if log.previous:
                previous = log.text
            else:
                current = log.text
    return current, previous


def pod_loads(evidence: Evidence, ready_means_serving: bool) -> list[PodLoad]:
    loads = []
    for pod in common.predictor_pods(evidence):
        serving = common.serving_container(kube.spec(pod))
        if serving is None:
            continue
        name = str(serving.get("name"))
        status = next(
            (s for s in kube.status(pod).get("containerStatuses") or [] if s.get("name") == name),
            None,
        )
        ready = kube.condition(pod, "Ready")
        ready_since = (
            parse_k8s_time(ready.get("lastTransitionTime"))
            if ready is not None and str(ready.get("status")) == "True"
            else None
        )
        current_log, previous_log = _logs_by_run(evidence, kube.name(pod), name)
        attempts = (
            load_time.measure_container(
                kube.name(pod),
                status,
                ready_since,
                current_log,
                previous_log,
                evidence.observed_at,
                ready_means_serving,
            )
            if status is not None
            else []
        )
        pod_probes = [
            Probe(kind, serving[kind], "kubelet") for kind in PROBE_KINDS if isinstance(serving.get(kind), Mapping)
        ]
        gate = gating(pod_probes)
        loads.append(
            PodLoad(
                pod,
                tuple(attempts),
                int((status or {}).get("restartCount") or 0),
                probe_events(evidence, kube.name(pod), name),
                gate.budget if gate is not None else None,
                ready_since,
            )
        )
    return loads


def _estimate(evidence: Evidence, workload: common.Workload, loads: Sequence[PodLoad]) -> load_time.LoadEstimate | None:
    """From the weights vLLM reported loading (any run), else a parameter count in a model name."""
    reported = [
        attempt.log.weights_gib
        for load in loads
        for attempt in load.attempts
        if attempt.log is not None and attempt.log.weights_gib is not None
    ]
    if reported:
        return load_time.estimate_load(max(reported), "reported by vLLM: 'Model loading took … GiB'")
    server = vllm_args.parse_container(workload.serving)
    predictor = kube.spec(evidence.isvc).get("predictor") or {}
    names = [
        value
        for value in (
            server.flag("model"),
            server.flag("model-id"),
            server.flag("model-name"),
            server.flag("served-model-name"),
            *[str((predictor.get(key) or {}).get("storageUri") or "") for key in ("model", "huggingface")],
            str(predictor.get("storageUri") or ""),
            *server.argv,
        )
        if value
    ]
    return load_time.estimate_from_names(names)


# --- the step ---------------------------------------------------------------------------------------------


def run(evidence: Evidence) -> list[Finding]:
    common.skip_modelmesh(evidence)
    workload = common.current_workload(evidence)
    context = _Context(evidence, workload)
    findings: list[Finding] = []
    findings.extend(context.not_model_aware())
    missing = context.readiness_missing()
    if missing is not None:
        findings.append(missing)
    findings.extend(context.budget_findings())
    return findings


class _Context:
    """The facts every probes finding quotes, and the findings built from them."""

    def __init__(self, evidence: Evidence, workload: common.Workload) -> None:
        self.evidence = evidence
        self.workload = workload
        self.serverless = common.effective_mode(evidence) == common.SERVERLESS
        self.server = vllm_args.parse_container(workload.serving)
        self.container_name = str(workload.serving.get("name"))
        self.probes = serving_probes(workload, self.serverless)
        gated = [p for p in self.probes if p.kind in (READINESS, STARTUP) and self._problem(p) is None]
        self.loads = pod_loads(evidence, ready_means_serving=bool(gated))
        self.killed = {load.name: reasons for load in self.loads if (reasons := load.killed_during_load())}
        self.estimate = _estimate(evidence, workload, self.loads)
        killed_runs = [
            seconds
            for load in self.loads
            if load.name in self.killed and load.previous is not None
            if (seconds := load.previous.seconds) is not None
        ]
        self.stats = load_time.load_stats(
            [attempt for load in self.loads for attempt in load.attempts], self.estimate, killed_runs
        )

    # --- shared evidence ---------------------------------------------------------------------------

    @property
    def isvc_ref(self) -> str:
        return kube.ref(self.evidence.isvc)

    def probe_lines(self) -> list[str]:
        lines = [probe.describe() for probe in self.probes]
        missing = [kind for kind in PROBE_KINDS if not any(p.kind == kind for p in self.probes)]
        if missing:
            lines.append(f"{self.container_name} ({self.workload.ref}) declares no {', '.join(missing)}")
        return lines

    def load_lines(self) -> list[str]:
        lines = [self.stats.describe()]
        for load in self.loads:
            lines.extend(attempt.describe() for attempt in load.attempts)
            if load.restarts:
                lines.append(f"Pod {load.name} {self.container_name}: restartCount {load.restarts}")
            lines.extend(load.events.lines)
        if self.estimate is not None and not self.stats.complete:
            lines.append(f"load time estimate: {self.estimate.basis}")
        return lines

    def _user_facing(self) -> tuple[str, str] | None:
        """(why, evidence line) when the window shows 5xx while a pod was Ready before it served."""
        early = [line for line in (load.ready_before_serving() for load in self.loads) if line]
        errors = _server_errors(self.evidence)
        if not early or errors is None:
            return None
        return early[0], errors

    # --- PROBE_NOT_MODEL_AWARE ------------------------------------------------------------------------

    def not_model_aware(self) -> list[Finding]:
        findings = []
        for probe in self.probes:
            problem = self._problem(probe)
            if problem is not None:
                findings.append(self._not_model_aware_finding(probe, problem))
        return findings

    def _problem(self, probe: Probe) -> str | None:
        handler, action = probe.handler, probe.action
        if handler == "exec":
            command = " ".join(str(part) for part in action.get("command") or [])
            if _asks_server(command, self.server.port, self._known_paths()):
                return None
            return f"runs {command!r}, a command that never asks the server whether the model is loaded and answering"
        if handler == "grpc":
            if self.server.server == vllm_args.UNKNOWN:
                return None
            return (
                f"uses a gRPC health check on port {action.get('port')}, but {self.server.server} serves only HTTP: "
                "the probe cannot pass on a healthy engine"
            )
        if handler not in ("httpGet", "tcpSocket"):
            return None
        declared = common.as_port(action.get("port"))
        if declared in (None, 0):
            return None  # Knative fills in the user port
        assert declared is not None
        number, owner = self._port_owner(declared)
        path = str(action.get("path") or "/")
        if owner == ISTIO_PROXY and handler == "httpGet" and path.startswith("/app-health/"):
            original = self._istio_original(path)
            return self._problem(Probe(probe.kind, original, probe.run_by)) if original else None
        if owner is not None and owner != self.container_name:
            if probe.run_by == QUEUE_PROXY and owner in common.AGENT_CONTAINERS:
                return None  # the agent relays readiness to the server (KServe's design)
            return (
                f"checks port {number}, which belongs to the {owner} sidecar, not to {self.server.server} in "
                f"{self.container_name}: that process answers while the model is still loading, or after the "
                "engine died"
            )
        if self.server.port is not None and number != self.server.port:
            return None  # a port nobody listens on: the ports step reports it
        if handler == "httpGet" and not self._path_served(path):
            return (
                f"asks {path!r}, a path {self.server.server} does not serve: it answers 404, so the probe fails "
                "on a healthy engine and says nothing about the load"
            )
        return None

    def _known_paths(self) -> tuple[str, ...]:
        exact, prefixes = _ENGINE_PATHS.get(self.server.server, (frozenset(), ()))
        return (*sorted(exact - {"/"}), *prefixes)

    def _path_served(self, path: str) -> bool:
        if self.server.server not in _ENGINE_PATHS:
            return True  # unknown server: its paths cannot be judged
        exact, prefixes = _ENGINE_PATHS[self.server.server]
        bare = path.split("?", 1)[0].rstrip("/") or "/"
        return bare in exact or any(bare.startswith(prefix) for prefix in prefixes)

    def _port_owner(self, declared: int | str) -> tuple[int | None, str | None]:
        containers = kube.containers(self.workload.pod_spec)
        number, owner = common.resolve_named_port(containers, declared)
        if owner is None and number in _SIDECAR_PORTS:
            sidecar = _SIDECAR_PORTS[number]
            names = common.AGENT_CONTAINERS if sidecar == "agent" else frozenset({sidecar})
            present = common.container_named(self.workload.pod_spec, names)
            owner = str(present.get("name")) if present is not None else None
        return number, owner

    def _istio_original(self, path: str) -> Mapping[str, Any] | None:
        """The probe Istio's sidecar runs on the app's behalf for a rewritten ``/app-health/...`` path."""
        proxy = common.container_named(self.workload.pod_spec, {ISTIO_PROXY})
        text = vllm_args.literal_env(proxy).get("ISTIO_KUBE_APP_PROBERS", "") if proxy is not None else ""
        try:
            probers = json.loads(text) if text else {}
        except json.JSONDecodeError:
            return None
        original = probers.get(path) if isinstance(probers, dict) else None
        return original if isinstance(original, dict) else None

    def _not_model_aware_finding(self, probe: Probe, problem: str) -> Finding:
        consequence = {
            READINESS: "the pod can be Ready, and get requests, while vLLM cannot answer them",
            LIVENESS: "the kubelet either restarts a healthy server or keeps a dead one",
            STARTUP: "the startup window ends on a signal that has nothing to do with the model load",
        }[probe.kind]
        summary = f"The {probe.kind} of {self.container_name} (run by {probe.run_by}) {problem}; {consequence}."
        severity = None
        raised = self._user_facing() if probe.kind == READINESS else None
        if raised is not None:
            severity = Severity.CRITICAL
            summary += f" Raised to critical: {raised[0]}, and the window shows {raised[1]}."
        replacement = self._model_aware_probe(probe)
        plan = self._replace_probe_plan(probe.kind, replacement) if replacement is not None else None
        if replacement is not None:
            what = f"Let the {probe.kind} ask the server itself: {Probe(probe.kind, replacement, 'kubelet').target()}."
        else:
            what = f"Point the {probe.kind} at an endpoint of the model server that answers only once the model serves."
        evidence = [*self.probe_lines(), f"server: {self.server.server}, listening port {self.server.port}"]
        return Finding(
            code="PROBE_NOT_MODEL_AWARE",
            title=f"{probe.kind} {probe.target()} does not test the engine",
            summary=summary,
            objects=(self.isvc_ref, self.workload.ref),
            evidence=tuple(evidence),
            fix=Fix.from_plan(what, plan, no_patch=self._no_patch_reason()),
            severity=severity,
        )

    # --- PROBE_READINESS_MISSING ------------------------------------------------------------------------

    def readiness_missing(self) -> Finding | None:
        if any(probe.kind == READINESS for probe in self.probes):
            return None
        startup = next((probe for probe in self.probes if probe.kind == STARTUP), None)
        summary = (
            f"Container {self.container_name} ({self.workload.ref}) has no readiness probe: the pod counts as ready "
            "as soon as its containers run, so the Service sends requests to a server that is still loading the "
            "model (connection refused, 502/503), and keeps sending them to an engine that stopped answering."
        )
        if not self.serverless:
            summary += (
                " Recent KServe versions give kserve-container a TCP readiness probe in RawDeployment when it "
                "declares none; this pod has none, so it was created by an older KServe or the probe was removed."
            )
        if startup is not None and self._problem(startup) is None:
            summary += (
                " The startupProbe holds traffic back during the first load, but once it has passed nothing takes "
                "the pod out of rotation."
            )
        severity = None
        raised = self._user_facing()
        if raised is not None:
            severity = Severity.CRITICAL
            summary += f" Raised to critical: {raised[0]}, and the window shows {raised[1]}."
        probe = self._new_probe(READINESS, {"periodSeconds": 10, "failureThreshold": 3})
        plan = self._set_probe_plan(READINESS, probe) if probe is not None else None
        what = (
            f"Add a readinessProbe that asks the server: {Probe(READINESS, probe, 'kubelet').target()}, every 10 s."
            if probe is not None
            else "Add a readinessProbe on an endpoint that answers only once the model serves."
        )
        return Finding(
            code="PROBE_READINESS_MISSING",
            title=f"no readiness probe on {self.container_name}",
            summary=summary,
            objects=(self.isvc_ref, self.workload.ref),
            evidence=tuple(self.probe_lines()),
            fix=Fix.from_plan(what, plan, no_patch=self._no_patch_reason()),
            severity=severity,
        )

    # --- budgets: PROBE_LIVENESS_KILLS_DURING_LOAD, PROBE_STARTUP_BUDGET_SHORT -------------------------

    def budget_findings(self) -> list[Finding]:
        gate = gating(self.probes)
        if gate is None:
            return []  # nothing restarts a loading container (kills seen came from an older spec)
        budget = gate.budget
        if self.killed:
            longest_cut = self.stats.lower_bound or 0.0
            p95 = self.stats.p95 or 0.0
            # The budget kills again when its earliest kill (one period before the nominal budget) comes
            # before the point where a killed run was still loading, or when it is below the measured p95.
            if budget.seconds - budget.period <= longest_cut or budget.seconds < p95:
                return [self._kills_finding(gate, self.killed)]
            return []
        load, measured = self._comparison_load()
        if load is not None and load > budget.seconds:
            return [self._short_finding(gate, load, measured)]
        if load is None:
            return [self._unknown_load_note(gate)]
        return []

    def _comparison_load(self) -> tuple[float | None, bool]:
        """(load seconds to compare with the budget, whether measured) — measured p95, else the estimate."""
        known = self.stats.known
        if self.stats.complete and known is not None:
            return known, True
        if self.estimate is not None and self._passed_gate() is None:
            return max(self.estimate.seconds, known or 0.0), False
        return None, False

    def _passed_gate(self) -> str | None:
        """A pod that became Ready under a gating probe without a restart: it proves the load fits that
        budget, so an estimate above it is wrong and is not used."""
        for load in self.loads:
            if load.restarts == 0 and kube.pod_ready(load.pod) and load.gating is not None:
                return f"Pod {load.name} became Ready within its {load.gating.kind} budget of {load.gating.seconds} s"
        return None

    def _kills_finding(self, gate: Probe, killed: Mapping[str, list[str]]) -> Finding:
        budget = gate.budget
        pods = sorted(killed)
        restarts = sum(load.restarts for load in self.loads if load.name in killed)
        first = pods[0]
        summary = (
            f"The {gate.kind} of {self.container_name} gives the model {budget.seconds} s to load "
            f"(initialDelaySeconds {budget.initial_delay} + periodSeconds {budget.period} × failureThreshold "
            f"{budget.failure_threshold}; at most {budget.worst_case_seconds} s with timeouts), but the load takes "
            f"longer: {len(pods)} pod(s) restarted {restarts} time(s) in total while loading. Pod {first}: "
            f"{'; '.join(killed[first])}. {_sentence(self.stats.describe())} Every restart begins the load again, so the "
            "pod never serves."
        )
        if gate.kind == LIVENESS:
            summary += " No startupProbe holds the liveness probe back during the load."
        fix = self._startup_fix()
        objects = (self.isvc_ref, *(f"Pod/{self.evidence.target.namespace}/{name}" for name in pods))
        return Finding(
            code="PROBE_LIVENESS_KILLS_DURING_LOAD",
            title=f"{gate.kind} kills the container during the model load ({budget.seconds} s budget)",
            summary=summary,
            objects=objects,
            evidence=tuple([*self.probe_lines(), *self.load_lines()]),
            fix=fix,
        )

    def _short_finding(self, gate: Probe, load: float, measured: bool) -> Finding:
        budget = gate.budget
        if measured:
            basis = f"the measured load time ({self.stats.describe()})"
        else:
            assert self.estimate is not None
            basis = f"the estimated load time of {load:.0f} s ({self.estimate.basis})"
        summary = (
            f"The {gate.kind} of {self.container_name} gives the model {budget.seconds} s to load "
            f"(initialDelaySeconds {budget.initial_delay} + periodSeconds {budget.period} × failureThreshold "
            f"{budget.failure_threshold}; at most {budget.worst_case_seconds} s with timeouts), less than {basis}. "
            "No pod has been killed for it in the window yet: a slower node, a cold cache or a larger model "
            "version turns this into a restart loop."
        )
        fix = self._startup_fix()
        return Finding(
            code="PROBE_STARTUP_BUDGET_SHORT",
            title=f"{gate.kind} budget {budget.seconds} s is below the {'measured' if measured else 'estimated'} load "
            f"time {load:.0f} s",
            summary=summary,
            objects=(self.isvc_ref, self.workload.ref),
            evidence=tuple([*self.probe_lines(), *self.load_lines()]),
            fix=fix,
        )

    def _unknown_load_note(self, gate: Probe) -> Finding:
        return Finding(
            code="PROBE_LOAD_TIME_UNKNOWN",
            title=f"load time unknown: the {gate.kind} budget of {gate.budget.seconds} s cannot be checked",
            summary="No run in the window shows how long the model takes to load (no Ready transition time, no "
            f"'Application startup complete.' in a log) and no usable estimate ({self._why_no_estimate()}), so "
            f"the {gate.kind} budget of {gate.budget.seconds} s could not be compared with the load.",
            objects=(self.isvc_ref, self.workload.ref),
            evidence=tuple([*self.probe_lines(), *self.load_lines()]),
            fix=Fix(
                what="Compare the budget with the time between 'Starting to load model' and 'Application startup "
                "complete.' in the server's log (kubectl logs --timestamps)."
            ),
        )

    def _why_no_estimate(self) -> str:
        passed = self._passed_gate()
        if self.estimate is None or passed is None:
            return "no model size visible"
        return f"{passed}, which the estimate of {self.estimate.seconds:.0f} s contradicts"

    # --- probes to recommend -----------------------------------------------------------------------------

    def _model_aware_probe(self, probe: Probe) -> dict[str, Any] | None:
        """The probe with its handler replaced by an HTTP check of the server (timings kept)."""
        timings = {key: value for key, value in probe.spec.items() if key not in HANDLERS}
        if probe.run_by == QUEUE_PROXY:
            timings = {key: value for key, value in timings.items() if key in ("periodSeconds", "failureThreshold")}
        return self._new_probe(probe.kind, timings)

    def _new_probe(self, kind: str, timings: Mapping[str, Any]) -> dict[str, Any] | None:
        paths = _DEFAULT_PATHS.get(self.server.server)
        if paths is None or self.server.port is None:
            return None
        return {"httpGet": {"path": paths[kind], "port": self.server.port}, **timings}

    def _startup_handler(self) -> dict[str, Any] | None:
        """The handler of a model-aware kubelet probe already declared, else an HTTP check of the server."""
        for kind in (STARTUP, LIVENESS, READINESS):
            for probe in self.probes:
                if probe.kind == kind and probe.run_by == "kubelet" and probe.handler and self._problem(probe) is None:
                    return {probe.handler: dict(probe.action)}
        return self._new_probe(STARTUP, {})

    def _startup_fix(self) -> Fix:
        sizing = self.stats.sizing()
        existing = next((probe for probe in self.probes if probe.kind == STARTUP and probe.run_by == "kubelet"), None)
        period = existing.budget.period if existing is not None else 10
        if sizing is None:
            what = (
                "Add a startupProbe whose periodSeconds × failureThreshold covers the model load with 50 % margin; "
                "measure the load first (kubectl logs --timestamps: 'Starting to load model' to "
                "'Application startup complete.')."
            )
            return Fix.from_plan(what, None, no_patch=self._no_patch_reason())
        seconds, how = sizing
        threshold = load_time.startup_failure_threshold(seconds, period)
        timings: dict[str, Any] = {"periodSeconds": period, "failureThreshold": threshold}
        budget = ProbeBudget(STARTUP, 0, period, threshold, existing.budget.timeout if existing else 1)
        deadline = self._progress_deadline_needed(budget)
        what = (
            f"{'Raise the startupProbe to' if existing else 'Add a startupProbe of'} periodSeconds {period} × failureThreshold "
            f"{threshold} = {period * threshold} s: {load_time.STARTUP_MARGIN}× the load it is sized from "
            f"({how}), rounded up to a period. The kubelet starts the liveness and readiness probes only once it "
            "passes, and a healthy engine passes it as soon as it serves, so a generous budget costs nothing."
        )
        if deadline is not None:
            what += (
                f" Knative gives up on a revision that is not ready within its progress deadline "
                f"({deadline[1]}): the patch also sets the annotation {PROGRESS_DEADLINE_ANNOTATION}: "
                f"{deadline[0]}s on the InferenceService, which KServe copies to the revision template."
            )
        if existing is not None:
            probe: dict[str, Any] | None = timings
        else:
            handler = self._startup_handler()
            probe = {**handler, **timings} if handler is not None else None
        plan = (
            self._set_probe_plan(
                STARTUP, probe, timing_only=existing is not None, annotation=deadline[0] if deadline else None
            )
            if probe is not None
            else None
        )
        return Fix.from_plan(what, plan, no_patch=self._no_patch_reason())

    def _progress_deadline_needed(self, budget: ProbeBudget) -> tuple[int, str] | None:
        """(seconds, current setting) when Serverless needs a longer progress deadline for ``budget``."""
        if not self.serverless:
            return None
        current, source = self._progress_deadline()
        before_start = max((self._seconds_before_start(load) for load in self.loads), default=0.0)
        needed = math.ceil((budget.worst_case_seconds + before_start + 60) / 60) * 60
        return (needed, f"{current} s from {source}") if needed > current else None

    def _progress_deadline(self) -> tuple[int, str]:
        candidates = [
            (kube.annotations(self.evidence.isvc).get(PROGRESS_DEADLINE_ANNOTATION), "the InferenceService annotation"),
        ]
        latest = common.latest_revision_name(self.evidence)
        revision = common.named(self.evidence, kinds.KNATIVE_REVISION, latest) if latest else None
        if revision is not None:
            candidates.append((kube.annotations(revision).get(PROGRESS_DEADLINE_ANNOTATION), "the Revision"))
        config = self.evidence.config_map(self.evidence.site.knative_namespace, "config-deployment")
        if config is not None:
            candidates.append(((config.get("data") or {}).get("progress-deadline"), "config-deployment"))
        for value, source in candidates:
            if value:
                try:
                    return int(parse_duration(str(value)).total_seconds()), source
                except RunbookError:
                    continue  # a malformed value: the next source decides
        return KNATIVE_PROGRESS_DEADLINE_SECONDS, "Knative's default"

    @staticmethod
    def _seconds_before_start(load: PodLoad) -> float:
        """Scheduling and image pull before the first start (known only while the pod never restarted)."""
        created = parse_k8s_time(kube.created(load.pod))
        current = load.current
        if created is None or current is None or current.started_at is None or load.restarts:
            return 0.0
        return max(0.0, (current.started_at - created).total_seconds())

    # --- patches -------------------------------------------------------------------------------------------

    def _no_patch_reason(self) -> str:
        if self.server.port is None or self.server.server not in _DEFAULT_PATHS:
            return "(No patch: the server or its listening port cannot be told from the spec.)"
        return "(No patch: the InferenceService does not declare the serving container.)"

    def _runtime(self) -> common.KubeObject | None:
        predictor = kube.spec(self.evidence.isvc).get("predictor") or {}
        name = (predictor.get("model") or {}).get("runtime")
        if not name:
            return None
        return common.named(self.evidence, kinds.SERVING_RUNTIME, str(name)) or next(
            (r for r in self.evidence.of(kinds.CLUSTER_SERVING_RUNTIME) if kube.name(r) == name), None
        )

    def _declared_by(self, kind: str) -> str | None:
        """Where the probe of ``kind`` comes from: "isvc", "runtime" or None (declared nowhere we can see)."""
        located = common.isvc_serving_container(self.evidence.isvc)
        if located is None:
            return None
        _, accessor = located
        if kind in accessor.get(_copy(self.evidence.isvc)):
            return "isvc"
        runtime = self._runtime()
        if not accessor.is_custom_container and runtime is not None:
            container = common.serving_container(kube.spec(runtime))
            if container is not None and kind in container:
                return "runtime"
        return None

    def _set_probe_plan(
        self, kind: str, probe: Mapping[str, Any], timing_only: bool = False, annotation: int | None = None
    ) -> patches.PatchPlan | None:
        """Set ``kind`` on the InferenceService's container (KServe merges it field by field into the runtime's)."""
        located = common.isvc_serving_container(self.evidence.isvc)
        if located is None:
            return None
        _, accessor = located

        def mutate(isvc: common.KubeObject) -> None:
            container = accessor.get(isvc)
            if timing_only and isinstance(container.get(kind), dict):
                container[kind].update(probe)
            elif timing_only and accessor.is_custom_container:
                container[kind] = {**dict(self.workload.serving.get(kind) or {}), **probe}
            else:
                container[kind] = dict(probe)
            if annotation is not None:
                annotations = isvc.setdefault("metadata", {}).setdefault("annotations", {})
                annotations[PROGRESS_DEADLINE_ANNOTATION] = f"{annotation}s"

        return patches.plan_patch(self.evidence.isvc, mutate)

    def _replace_probe_plan(self, kind: str, probe: Mapping[str, Any]) -> patches.PatchPlan | None:
        """Replace a probe's handler where it is declared: KServe's field-by-field merge cannot drop the
        runtime's handler from the InferenceService, so a runtime's probe is changed in the runtime."""
        if self._declared_by(kind) != "runtime":
            return self._set_probe_plan(kind, probe)
        runtime = self._runtime()
        assert runtime is not None

        serving_name = str((common.serving_container(kube.spec(runtime)) or {}).get("name"))

        def mutate(obj: common.KubeObject) -> None:
            for container in obj["spec"]["containers"]:
                if container.get("name") == serving_name:
                    container[kind] = dict(probe)

        return patches.plan_patch(runtime, mutate)


def _copy(obj: Mapping[str, Any]) -> common.KubeObject:
    return json.loads(json.dumps(obj))  # type: ignore[no-any-return]


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _asks_server(command: str, port: int | None, paths: Sequence[str]) -> bool:
    """An exec probe talks to the server when it makes a network call naming its port or one of its paths."""
    if not _NETWORK_CALL.search(command):
        return False
    if port is not None and re.search(rf"(?<!\d){port}(?!\d)", command):
        return True
    return any(path in command for path in paths)


def _server_errors(evidence: Evidence) -> str | None:
    """The peak 5xx rate at the edge in the window, described, or None."""
    sources: tuple[tuple[str, str, str], ...] = (
        ("istio_requests_by_code", "response_code", "the Istio proxies"),
        ("knative_requests_by_code", "response_code", "Knative"),
        ("nginx_requests_by_status", "status", "ingress-nginx"),
    )
    for metric_id, label, where in sources:
        data = evidence.metrics.get(metric_id)
        if data is None or data.status != "ok":
            continue
        peaks: dict[str, float] = {}
        for series in data.series:
            code = str(series.labels.get(label, ""))
            if code.startswith("5"):
                peak = max((value for _, value in series.samples), default=0.0)
                peaks[code] = max(peaks.get(code, 0.0), peak)
        if any(value > 0 for value in peaks.values()):
            listed = ", ".join(f"{code} peak {value:.2f}/s" for code, value in sorted(peaks.items()) if value > 0)
            return f"5xx at {where} ({listed})"
    return None
