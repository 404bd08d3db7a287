"""``PROBE_SIDECAR_NOT_READY``: the engine serves, but another container of the pod is not ready, so the pod
is not Ready and gets no traffic.

A pod is Ready only when every container is (init containers that run as native sidecars included). The
sidecars KServe, Knative and Istio add have readiness probes of their own, and each fails for reasons of its
own while the model server is fine:

- the KServe agent answers its readiness path with 404 when KServe gave it a path it does not serve
  (kserve/kserve#5341, fixed by PR #5345: a custom httpGet readinessProbe on the model container made the
  agent serve only that path while its own probe stayed on ``/``);
- queue-proxy is ready when the probe it runs for the user container passes (Knative hands it the
  readiness probe as ``SERVING_READINESS_PROBE`` and probes aggressively until the first success); when it
  stays unready long after the server logged that it serves, its probe does not reach the server: a port
  the agent took (kserve/kserve#5569), a mesh rule, a delay copied from the readiness probe
  (knative/serving#14021, knative-extensions/net-istio#561);
- istio-proxy is ready once envoy has received its configuration from istiod (``/healthz/ready`` on 15021);
  a sidecar that never gets it keeps the pod out (kserve/kserve#2994).

Only a sidecar that stays unready after the engine is shown serving is reported: while the model loads, an
unready queue-proxy or agent is the model's readiness seen through them, not a fault of theirs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from nbhelpers.checks.probes._facts import ProbeFacts
from nbhelpers.checks.probes._loads import PodLoad, container_probe_events
from nbhelpers.checks.probes._not_model_aware import replace_probe_plan
from nbhelpers.checks.probes._probe import ISTIO_PROXY, QUEUE_PROXY, Probe
from nbhelpers.facts import common, vllm_args
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.models.load_time import READINESS
from nbhelpers.sources import kube
from nbhelpers.util.times import format_time, parse_k8s_time

# How long a sidecar may still be unready after the server serves: queue-proxy probes every few hundred
# milliseconds until ready, the agent and istio-proxy every 10 s or faster; a minute covers a few periods.
SETTLE = timedelta(seconds=60)
AGENT = "agent"
OTHER = "sidecar"


@dataclass(frozen=True)
class UnreadySidecar:
    """A running sidecar that is not ready on a pod whose engine serves."""

    load: PodLoad
    container: Mapping[str, Any]  # its spec
    role: str  # AGENT, QUEUE_PROXY, ISTIO_PROXY or OTHER
    running_since: datetime | None
    serving: str  # why the engine is known to serve
    events: tuple[str, ...]

    @property
    def name(self) -> str:
        return str(self.container.get("name"))

    def probe_line(self) -> str:
        if self.role == QUEUE_PROXY:
            text = vllm_args.literal_env(self.container).get("SERVING_READINESS_PROBE", "")
            return (
                f"{self.name} runs the serving container's readiness probe: SERVING_READINESS_PROBE={text or '(unset)'}"
            )
        probe = self.container.get(READINESS)
        if not isinstance(probe, Mapping):
            return f"{self.name} declares no readinessProbe"
        return f"{self.name} readinessProbe: {Probe(READINESS, probe, 'kubelet').target()}"


def sidecar_findings(facts: ProbeFacts) -> list[Finding]:
    unready = [sidecar for load in facts.loads for sidecar in _unready_sidecars(facts, load)]
    if not unready:
        return []
    findings = []
    for role in sorted({sidecar.role for sidecar in unready}):
        findings.append(_finding(facts, [sidecar for sidecar in unready if sidecar.role == role]))
    return findings


def _unready_sidecars(facts: ProbeFacts, load: PodLoad) -> list[UnreadySidecar]:
    if kube.pod_ready(load.pod):
        return []
    serving = _engine_serving(facts, load)
    if serving is None:
        return []
    found = []
    for container, since in _settled_unready(facts, load):
        name = str(container.get("name"))
        events = tuple(line for _, line in container_probe_events(facts.evidence, load.name, name))
        found.append(UnreadySidecar(load, container, _role(name), since, serving, events))
    return found


def _settled_unready(facts: ProbeFacts, load: PodLoad) -> list[tuple[Mapping[str, Any], datetime | None]]:
    """(spec, running since) of the pod's sidecars that have been running, not ready, for at least SETTLE."""
    spec = kube.spec(load.pod)
    specs = {str(c.get("name")): c for c in kube.containers(spec)}
    specs.update(
        {str(c.get("name")): c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"}
    )
    status = kube.status(load.pod)
    found = []
    for entry in [*(status.get("containerStatuses") or []), *(status.get("initContainerStatuses") or [])]:
        name = str(entry.get("name"))
        if name == facts.container_name or name not in specs or entry.get("ready"):
            continue
        running = (entry.get("state") or {}).get("running")
        if not isinstance(running, Mapping):
            continue  # waiting or terminated: the resources and engine steps read those
        since = parse_k8s_time(running.get("startedAt"))
        if since is not None and facts.evidence.observed_at - since < SETTLE:
            continue  # too young to call
        found.append((specs[name], since))
    return found


def _unproven_pods(facts: ProbeFacts, name: str, reported: Sequence[str]) -> list[str]:
    """The other not-ready pods whose ``name`` sidecar has been unready as long and whose engine log is not in the
    evidence (the capture reads the logs of a few pods only), so nothing shows whether their engine serves."""
    return [
        load.name
        for load in facts.loads
        if load.name not in reported
        and not kube.pod_ready(load.pod)
        and not any(log.container == facts.container_name for log in facts.evidence.logs_of(load.name))
        and any(str(container.get("name")) == name for container, _ in _settled_unready(facts, load))
    ]


def _engine_serving(facts: ProbeFacts, load: PodLoad) -> str | None:
    """Why the engine of this pod is known to serve (settled for SETTLE before the capture), or None."""
    observed = facts.evidence.observed_at
    current = load.current
    served = current.log.serving_at if current is not None and current.log is not None else None
    if served is not None and observed - served >= SETTLE:
        assert current is not None and current.log is not None
        return (
            f"Pod {load.name} {facts.container_name}: its log shows {current.log.serving_marker!r} at "
            f"{format_time(served)}, {(observed - served).total_seconds():.0f} s before the capture"
        )
    status = next(
        (s for s in kube.status(load.pod).get("containerStatuses") or [] if s.get("name") == facts.container_name),
        None,
    )
    readiness = next((p for p in facts.probes if p.kind == READINESS and p.run_by == "kubelet"), None)
    if status is not None and status.get("ready") and readiness is not None and facts.problem(readiness) is None:
        return (
            f"Pod {load.name} {facts.container_name} is ready: its own readiness probe ({readiness.target()}) "
            "passes, so the server answers"
        )
    return None


def _role(name: str) -> str:
    if name in common.AGENT_CONTAINERS:
        return AGENT
    if name in (QUEUE_PROXY, ISTIO_PROXY):
        return name
    return OTHER


def _finding(facts: ProbeFacts, sidecars: Sequence[UnreadySidecar]) -> Finding:
    first = sidecars[0]
    pods = sorted({sidecar.load.name for sidecar in sidecars})
    since = f" since {format_time(first.running_since)}" if first.running_since else ""
    summary = (
        f"On {len(pods)} pod(s) the {first.name} container runs but is not ready{since}, while the model server "
        f"serves ({first.serving}). A pod is Ready only when all its containers are, so the pod stays out of the "
        f"Service's endpoints and the engine gets no requests. {_why(facts, first)}"
    )
    unproven = _unproven_pods(facts, first.name, pods)
    if unproven:
        summary += (
            f" {len(unproven)} other pod(s) show {first.name} unready as long ({', '.join(unproven)}); their "
            "engine logs are not in the evidence, so they are not shown serving and not counted."
        )
    severity = None
    ready_pods = [load.name for load in facts.loads if kube.pod_ready(load.pod)]
    if ready_pods:
        severity = Severity.WARNING
        summary += f" Lowered to warning: {len(ready_pods)} other pod(s) are Ready and serve."
    evidence = [
        *(common.describe_pod_state(sidecar.load.pod) for sidecar in sidecars),
        *(sidecar.serving for sidecar in sidecars),
        first.probe_line(),
        *(line for sidecar in sidecars for line in sidecar.events),
    ]
    return Finding(
        code="PROBE_SIDECAR_NOT_READY",
        title=f"{first.name} sidecar not ready while the engine serves",
        summary=summary,
        objects=(facts.isvc_ref, *(f"Pod/{facts.evidence.target.namespace}/{pod}" for pod in pods)),
        evidence=tuple(evidence),
        fix=_fix(facts, first),
        severity=severity,
    )


def _why(facts: ProbeFacts, sidecar: UnreadySidecar) -> str:
    if sidecar.role == AGENT:
        not_found = any("statuscode: 404" in line for line in sidecar.events)
        return (
            "The KServe agent answers its own readiness probe by probing the server; "
            + (
                "here the probe gets 404, a path the agent does not serve. "
                if not_found
                else "here that probe keeps failing. "
            )
            + "KServe releases before PR #5345 (kserve/kserve#5341) left the agent's probe on '/' while a custom "
            "httpGet readinessProbe on the model container made the agent serve only that path."
        )
    if sidecar.role == QUEUE_PROXY:
        asked = _queue_probe_port(sidecar.container)
        if asked is not None and facts.server.port is not None and asked != facts.server.port:
            # knative/serving#14021: "aggressive probe error ... dial tcp 127.0.0.1:5000: connect: connection refused".
            return (
                "queue-proxy turns ready only when the readiness probe it runs for the serving container passes; "
                f"that probe (SERVING_READINESS_PROBE) asks port {asked}, while the server listens on "
                f"{facts.server.port}: it is refused for as long as the pod lives (knative/serving#14021)."
            )
        return (
            "queue-proxy turns ready only when the readiness probe it runs for the serving container passes; "
            "it stays unready although the server serves, so that probe does not reach the server: a port the "
            "KServe agent took (kserve/kserve#5569), an initialDelaySeconds copied from the readiness probe, "
            "or a mesh rule in between (knative/serving#14021)."
        )
    if sidecar.role == ISTIO_PROXY:
        return (
            "istio-proxy turns ready (/healthz/ready on port 15021) once envoy has received its configuration "
            "from istiod; a sidecar that stays unready has not got it: istiod unreachable or overloaded, a "
            "proxy configuration it rejects, or a probe rewritten by the injector (kserve/kserve#2994)."
        )
    return "Its readiness probe keeps failing, whatever the model server does."


def _fix(facts: ProbeFacts, sidecar: UnreadySidecar) -> Fix:
    if sidecar.role == AGENT:
        return _agent_fix(facts, sidecar)
    if sidecar.role == QUEUE_PROXY:
        asked = _queue_probe_port(sidecar.container)
        if asked is not None and facts.server.port is not None and asked != facts.server.port:
            return Fix(
                what=f"Let the readiness probe ask port {facts.server.port}, where the server listens, instead of "
                f"{asked} (or drop its port: Knative then probes the container port). Knative copies the probe "
                "into queue-proxy when it creates the revision."
            )
        what = (
            "Compare queue-proxy's SERVING_READINESS_PROBE and USER_PORT with the port and path the server "
            "answers on (kubectl get pod -o yaml), and read queue-proxy's log for the probe errors. With the "
            "KServe agent in the pod, USER_PORT is the agent's 9081: the agent must be up for traffic, and "
            "the probe must reach a port that answers. Drop a large initialDelaySeconds from the readiness "
            "probe: Knative copies it to queue-proxy."
        )
        return Fix(what=what)
    if sidecar.role == ISTIO_PROXY:
        what = (
            "Find why envoy has no configuration: istioctl proxy-status for the pod, the istio-proxy log "
            "('Envoy proxy is NOT ready'), istiod's health and the namespace's PeerAuthentication and "
            "Sidecar resources. Where the predictor needs no mesh, disable injection on it "
            "(sidecar.istio.io/inject: 'false' on the InferenceService's predictor labels or annotations)."
        )
        return Fix(what=what)
    return Fix(
        what=f"Fix the {sidecar.name} container's readiness probe or the process behind it; its failure "
        "keeps a serving pod out of rotation."
    )


def _queue_probe_port(container: Mapping[str, Any]) -> int | None:
    """The port of the probe queue-proxy runs for the serving container (SERVING_READINESS_PROBE), when numeric."""
    text = vllm_args.literal_env(container).get("SERVING_READINESS_PROBE", "")
    try:
        probe = json.loads(text) if text else None
    except json.JSONDecodeError:
        return None
    if not isinstance(probe, Mapping):
        return None
    for handler in ("httpGet", "tcpSocket", "grpc"):
        port = (probe.get(handler) or {}).get("port") if isinstance(probe.get(handler), Mapping) else None
        if isinstance(port, int) and not isinstance(port, bool):
            return port
    return None


def _agent_fix(facts: ProbeFacts, sidecar: UnreadySidecar) -> Fix:
    """Upgrade KServe; until then, a TCP readiness probe on vLLM's port keeps the agent on its default path."""
    what = (
        "Upgrade KServe to a release with PR #5345, which gives the agent's probe the path of the model "
        "container's httpGet readinessProbe."
    )
    readiness = next((p for p in facts.probes if p.kind == READINESS and p.run_by == "kubelet"), None)
    custom_path = (
        readiness is not None and readiness.handler == "httpGet" and (readiness.action.get("path") or "/") != "/"
    )
    if not custom_path or facts.server.server != vllm_args.VLLM or facts.server.port is None:
        return Fix(what=what + " Until then, read the agent's log and its readinessProbe against the paths it serves.")
    assert readiness is not None
    timings = {key: value for key, value in readiness.spec.items() if key != "httpGet"}
    replacement: dict[str, Any] = {"tcpSocket": {"port": facts.server.port}, **timings}
    what += (
        f" Until then, let the readiness probe be a TCP check of vLLM's port {facts.server.port} instead of "
        f"httpGet {readiness.action.get('path')}: vLLM opens its port only once the model has loaded, so the "
        "probe still waits for the engine, and the agent keeps the path it serves."
    )
    plan = replace_probe_plan(facts, READINESS, replacement)
    return Fix.from_plan(
        what, plan, no_patch="(No patch: the readiness probe is not declared where it can be patched.)"
    )
