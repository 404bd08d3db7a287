"""The probes of the serving container, who runs each (the kubelet, or queue-proxy for Knative's readiness
probe), and which one can kill a loading container.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nbhelpers.facts import common, vllm_args
from nbhelpers.models.load_time import LIVENESS, PROBE_KINDS, READINESS, STARTUP, ProbeBudget

HANDLERS = ("httpGet", "tcpSocket", "grpc", "exec")
QUEUE_PROXY = "queue-proxy"
ISTIO_PROXY = "istio-proxy"


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
