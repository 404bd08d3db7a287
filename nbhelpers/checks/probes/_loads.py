"""What each predictor pod shows about the model load: its runs and their load times, restarts, the kubelet's
probe events, and an estimate of the load when no run measured it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from nbhelpers.checks.probes._probe import QUEUE_PROXY, Probe, gating
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common, pod_phases, vllm_args
from nbhelpers.facts.cold_starts import latest_starts
from nbhelpers.models import load_time
from nbhelpers.models.load_time import PROBE_KINDS, LoadAttempt, ProbeBudget
from nbhelpers.sources import kube
from nbhelpers.sources.kube import event_interval
from nbhelpers.util.times import format_time

_PROBE_EVENT = re.compile(r"^(Liveness|Readiness|Startup) probe (?:failed|errored)", re.IGNORECASE)
_KILL_EVENT = re.compile(r"failed (liveness|startup) probe", re.IGNORECASE)
_FIELD_CONTAINER = re.compile(r"spec\.(?:init)?[cC]ontainers\{([^}]+)\}")
_KILL_EXIT_CODES = frozenset({137, 143})  # SIGKILL, SIGTERM


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
        lines.append(_event_line(event, pod, container))
    return ProbeEvents(failures, kills, tuple(lines))


def container_probe_events(evidence: Evidence, pod: str, container: str) -> list[tuple[Mapping[str, Any], str]]:
    """The kubelet's probe events (Unhealthy, and Killing for a failed probe) about one container of ``pod``,
    each with its line for the evidence."""
    found: list[tuple[Mapping[str, Any], str]] = []
    for event in evidence.events_about("Pod", pod):
        involved = event.get("involvedObject") or event.get("regarding") or {}
        match = _FIELD_CONTAINER.search(str(involved.get("fieldPath") or ""))
        if (match.group(1) if match else "") != container:
            continue
        message = str(event.get("message") or event.get("note") or "")
        reason = str(event.get("reason") or "")
        if (reason == "Unhealthy" and _PROBE_EVENT.match(message)) or (
            reason == "Killing" and _KILL_EVENT.search(message)
        ):
            found.append((event, _event_line(event, pod, container)))
    return found


def _event_line(event: Mapping[str, Any], pod: str, container: str) -> str:
    message = str(event.get("message") or event.get("note") or "")
    count = int(event.get("count") or (event.get("series") or {}).get("count") or 1)
    first, last = event_interval(event)
    when = f"{format_time(first)} … {format_time(last)}" if first and last and first != last else ""
    when = when or (format_time(last) if last else "time unknown")
    return f"event {event.get('reason')} on Pod {pod} ({container or 'pod'}) ×{count}, {when}: {message!r}"


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
        gate = self.gating
        if (
            previous is not None
            and previous.log_cut
            and previous.seconds is not None
            and gate is not None
            and previous.seconds > gate.worst_case_seconds + gate.period
        ):
            return []  # outlived the probe's load budget, and its cut log cannot say more about the load
        reasons: list[str] = []
        if previous is not None and previous.ended_mid_load:
            reasons.append(f"the previous run's log ends before the server started ({previous.source})")
        run_seconds = previous.seconds if previous is not None else None
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
    starts = {phases.pod: phases for phases in latest_starts(evidence)}
    for pod in common.predictor_pods(evidence):
        serving = common.serving_container(kube.spec(pod))
        if serving is None:
            continue
        name = str(serving.get("name"))
        status = next(
            (s for s in kube.status(pod).get("containerStatuses") or [] if s.get("name") == name),
            None,
        )
        # The Ready transition ends this run's load only when it ends the pod's latest start: not after a readiness
        # blip, not when the status cannot place the start (nbhelpers.facts.pod_phases).
        phases = starts.get(kube.name(pod))
        ready_since = phases.at(pod_phases.READY) if phases is not None else None
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


def estimate_load(
    evidence: Evidence, workload: common.Workload, loads: Sequence[PodLoad]
) -> load_time.LoadEstimate | None:
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
