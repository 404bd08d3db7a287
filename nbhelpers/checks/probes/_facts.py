"""The facts every probes finding quotes: the probes, the pods' loads and kills, the load time measured or
estimated, and whether a probe asks the engine itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from nbhelpers.checks.probes._loads import estimate_load, pod_loads
from nbhelpers.checks.probes._probe import ISTIO_PROXY, QUEUE_PROXY, Probe, serving_probes
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common, vllm_args
from nbhelpers.models import load_time
from nbhelpers.models.load_time import PROBE_KINDS, READINESS, STARTUP
from nbhelpers.sources import kube

# Paths each server answers with 2xx once it serves (vLLM's OpenAI server; KServe's model server).
_ENGINE_PATHS: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {
    vllm_args.VLLM: (frozenset({"/health", "/ping", "/v1/models", "/version", "/metrics"}), ()),
    vllm_args.HUGGINGFACESERVER: (
        frozenset({"/", "/v2", "/v2/health/live", "/v2/health/ready", "/v1/models", "/metrics", "/openai/v1/models"}),
        ("/v1/models/", "/v2/models/"),
    ),
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


class ProbeFacts:
    """The probes of the serving container, what the pods show about the load, and whether a probe asks the engine."""

    def __init__(self, evidence: Evidence, workload: common.Workload) -> None:
        self.evidence = evidence
        self.workload = workload
        self.serverless = common.effective_mode(evidence) == common.SERVERLESS
        self.server = vllm_args.parse_container(workload.serving)
        self.container_name = str(workload.serving.get("name"))
        self.probes = serving_probes(workload, self.serverless)
        gated = [p for p in self.probes if p.kind in (READINESS, STARTUP) and self.problem(p) is None]
        self.loads = pod_loads(evidence, ready_means_serving=bool(gated))
        self.killed = {load.name: reasons for load in self.loads if (reasons := load.killed_during_load())}
        self.estimate = estimate_load(evidence, workload, self.loads)
        killed_runs = [
            seconds
            for load in self.loads
            if load.name in self.killed and load.previous is not None
            if (seconds := load.previous.seconds) is not None
        ]
        self.stats = load_time.load_stats(
            [attempt for load in self.loads for attempt in load.attempts], self.estimate, killed_runs
        )

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

    def user_facing(self) -> tuple[str, str] | None:
        """(why, evidence line) when the window shows 5xx while a pod was Ready before it served."""
        early = [line for line in (load.ready_before_serving() for load in self.loads) if line]
        errors = _server_errors(self.evidence)
        if not early or errors is None:
            return None
        return early[0], errors

    def problem(self, probe: Probe) -> str | None:
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
            return self.problem(Probe(probe.kind, original, probe.run_by)) if original else None
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
