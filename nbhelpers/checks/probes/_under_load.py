"""``PROBE_FAILS_UNDER_LOAD``: probes that time out on an engine that had already served, because it is busy.

vLLM's ``/health`` is answered by the same API server process that tokenizes, schedules and streams: with
many requests in flight it can take longer than the kubelet's default ``timeoutSeconds`` of 1. Reports:
llm-d/llm-d-benchmark PR #1734 ("a saturated vLLM only had to miss three 1s /health checks"; fixed with
timeoutSeconds 15 and failureThreshold 10), scaleapi/llm-engine PR #255 (vLLM "can't respond within 1s
during high load"; liveness timeoutSeconds 5), gonka-ai/gonka PR #1421 (a saturated engine missing a 2 s
health deadline restarted healthy nodes several times a day).

What separates this from a kill during the load (``PROBE_LIVENESS_KILLS_DURING_LOAD``) is the order of
events: the run logged that it serves (or the pod turned Ready) before the probe failed, the failures are
timeouts rather than refused connections, and requests were running when they came. On Serverless the kubelet
probes queue-proxy, which answers 503 when its own check of the engine times out: that event does not say
"timeout", so there only the kubelet's liveness timeouts count.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from nbhelpers.checks.probes._facts import ProbeFacts
from nbhelpers.checks.probes._loads import PodLoad, container_probe_events
from nbhelpers.checks.probes._patches import no_patch_reason, set_probe_plan
from nbhelpers.checks.probes._probe import QUEUE_PROXY, Probe
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.metrics import series
from nbhelpers.models import load_time
from nbhelpers.models.load_time import LIVENESS, READINESS, STARTUP
from nbhelpers.sources.kube import event_interval
from nbhelpers.util.times import format_time, parse_k8s_time

_TIMEOUT = re.compile(r"timeout|deadline exceeded|timed out", re.IGNORECASE)
# A request the server answered (uvicorn's access line) or vLLM's periodic throughput line.
_SERVED_REQUEST = re.compile(r'"(?:POST|GET) /v1/\S+ HTTP/[\d.]+" 2\d\d|Avg prompt throughput')
_KIND = re.compile(r"\b(Liveness|Readiness|Startup)\b", re.IGNORECASE)
# Prometheus samples up to this long before the first failure count as "at the time".
LOOKBACK = timedelta(minutes=5)
# What a busy engine gets: 10 s to answer, and a liveness probe that kills only after a minute of failures.
BUSY_TIMEOUT_SECONDS = 10
BUSY_TOLERANCE_SECONDS = 60
_KILL_EXIT_CODES = frozenset({137, 143})


@dataclass(frozen=True)
class BusyFailures:
    """One pod's probe timeouts after its engine served."""

    load: PodLoad
    served_at: datetime
    served_how: str
    kinds: frozenset[str]  # "liveness", "readiness"
    first: datetime
    last: datetime
    killed: str  # why the pod's restart was a kill of a serving engine, or ""
    lines: tuple[str, ...]


def under_load_findings(facts: ProbeFacts) -> list[Finding]:
    seen = [(found, _load_at(facts, found)) for load in facts.loads if (found := _busy_failures(facts, load))]
    # An engine the metrics show idle when its probes timed out was hung, not busy: not this code.
    busy = [(found, load) for found, load in seen if load is None or load[0] > 0]
    if not busy:
        return []
    return [_finding(facts, [found for found, _ in busy], [load for _, load in busy])]


def _busy_failures(facts: ProbeFacts, load: PodLoad) -> BusyFailures | None:
    served = _served_since(facts, load)
    if served is None:
        return None
    served_at, served_how = served
    kinds: set[str] = set()
    moments: list[datetime] = []
    lines: list[str] = []
    kills = 0
    for container in (facts.container_name, QUEUE_PROXY):
        for event, line in container_probe_events(facts.evidence, load.name, container):
            message = str(event.get("message") or event.get("note") or "")
            first, last = event_interval(event)
            if last is None or last <= served_at:
                continue
            if event.get("reason") == "Unhealthy" and not _TIMEOUT.search(message):
                continue  # refused connections belong to a (re)load, not to a busy engine
            if event.get("reason") == "Killing":
                kills += int(event.get("count") or 1)
            kind = _KIND.search(message)
            if kind is not None and kind.group(1).lower() != "startup":
                kinds.add(kind.group(1).lower())
            moments.extend(moment for moment in (first, last) if moment is not None and moment > served_at)
            lines.append(line)
    if not moments or not kinds:
        return None
    killed = _served_kill(load, served_at, kills)
    return BusyFailures(load, served_at, served_how, frozenset(kinds), min(moments), max(moments), killed, tuple(lines))


def _served_since(facts: ProbeFacts, load: PodLoad) -> tuple[datetime, str] | None:
    """The earliest moment a run of this pod is known to have served, and how it is known.

    A run that started before the window has a log cut by it: its start-up lines are gone, so it serves by
    the requests it logged, or by having outlived a model-aware startupProbe (the kubelet kills a run whose
    startupProbe does not pass within its budget).
    """
    known: list[tuple[datetime, str]] = []
    for attempt in load.attempts:
        run = "previous run" if attempt.previous else "current run"
        if attempt.outcome == load_time.SERVED and attempt.ended_at is not None:
            known.append(
                (attempt.ended_at, f"the {run} served from {format_time(attempt.ended_at)} ({attempt.source})")
            )
            continue
        activity = _first_request_line(facts, load.name, attempt.previous)
        if activity is not None:
            known.append((activity, f"the {run} logged served requests from {format_time(activity)}"))
        startup = next((p for p in facts.probes if p.kind == STARTUP and p.run_by == "kubelet"), None)
        if startup is not None and facts.problem(startup) is None and attempt.started_at and attempt.ended_at:
            passed = attempt.started_at + timedelta(seconds=startup.budget.worst_case_seconds + startup.budget.period)
            if passed < attempt.ended_at:
                known.append(
                    (
                        passed,
                        f"the {run} outlived its startupProbe budget, so the probe had passed by {format_time(passed)}",
                    )
                )
    if load.ready_since is not None:
        known.append((load.ready_since, f"Pod {load.name} turned Ready at {format_time(load.ready_since)}"))
    return min(known, key=lambda item: item[0]) if known else None


def _first_request_line(facts: ProbeFacts, pod: str, previous: bool) -> datetime | None:
    for log in facts.evidence.logs_of(pod):
        if log.container != facts.container_name or log.previous != previous:
            continue
        for line in log.text.splitlines():
            if _SERVED_REQUEST.search(line):
                stamp = line.split(" ", 1)[0]
                return parse_k8s_time(stamp)
    return None


def _served_kill(load: PodLoad, served_at: datetime, kills: int) -> str:
    """Why this pod's last restart killed an engine that had served (by ``served_at``), or ""."""
    previous = load.previous
    if load.restarts == 0 or previous is None:
        return ""
    if kills:
        return f"the kubelet killed the container for failed liveness probes ×{kills}"
    started = previous.started_at
    if previous.exit_code in _KILL_EXIT_CODES and previous.reason != "OOMKilled" and started and started <= served_at:
        return f"the previous run, which had served, was killed (exit code {previous.exit_code})"
    return ""


def _load_at(facts: ProbeFacts, found: BusyFailures) -> tuple[float, float] | None:
    """(peak running, peak waiting) of the pod from a little before the first failure to the last, or None
    when Prometheus has no answer for it."""
    running = series.by_pod(facts.evidence.metrics.get("vllm_running")).get(found.load.name)
    if not running:
        return None
    waiting = series.by_pod(facts.evidence.metrics.get("vllm_waiting")).get(found.load.name) or {}
    start = (found.first - LOOKBACK).timestamp()
    end = found.last.timestamp()

    def peak(values: Mapping[float, float]) -> float:
        return max((value for moment, value in values.items() if start <= moment <= end), default=0.0)

    return peak(running), peak(waiting)


def _finding(facts: ProbeFacts, busy: Sequence[BusyFailures], loads: Sequence[tuple[float, float] | None]) -> Finding:
    killed = [found for found in busy if found.killed]
    kinds = sorted({kind for found in busy for kind in found.kinds})
    first = busy[0]
    summary = (
        f"{' and '.join(kinds).capitalize()} probes of {facts.container_name} timed out on {len(busy)} pod(s) whose "
        f"engine was already serving: on pod {first.load.name} {first.served_how}, and its probes failed "
        f"{format_time(first.first)} … {format_time(first.last)}. {_load_sentence(loads)}"
    )
    severity = None
    if killed:
        summary += (
            f" The kubelet restarted {len(killed)} serving pod(s) for it ({killed[0].killed}): each restart drops "
            "the requests in flight and takes the pod out for a whole model load while the other pods take its share."
        )
    else:
        # Readiness alone only takes a busy pod out of rotation for a while, which the project reads as a healthy
        # blip (scenario healthy-readiness-blip): a note, with the fix for when it repeats.
        severity = Severity.INFO
        summary += (
            " No pod was restarted for it: the readiness failures took a busy pod out of rotation for a while. "
            "A note, not a fault, unless it repeats."
        )
    evidence = [*facts.probe_lines(), *(line for found in busy for line in found.lines)]
    evidence.extend(attempt.describe() for found in busy for attempt in found.load.attempts)
    evidence.extend(_load_line(found, load) for found, load in zip(busy, loads, strict=True))
    objects = (facts.isvc_ref, *(f"Pod/{facts.evidence.target.namespace}/{found.load.name}" for found in busy))
    return Finding(
        code="PROBE_FAILS_UNDER_LOAD",
        title=f"{'/'.join(kinds)} probe times out on a busy engine that was serving",
        summary=summary,
        objects=objects,
        evidence=tuple(evidence),
        fix=_fix(facts, LIVENESS if killed or "liveness" in kinds else READINESS),
        severity=severity,
    )


def _load_sentence(loads: Sequence[tuple[float, float] | None]) -> str:
    seen = [load for load in loads if load is not None]
    if not seen:
        return "The request metrics for the time are not in the evidence, so the load is inferred from the timeouts."
    running = max(load[0] for load in seen)
    waiting = max(load[1] for load in seen)
    queued = f" and up to {waiting:.0f} waiting" if waiting > 0 else ""
    return f"At the time the engine ran up to {running:.0f} requests{queued}: it was busy, not dead."


def _load_line(found: BusyFailures, load: tuple[float, float] | None) -> str:
    if load is None:
        return f"Pod {found.load.name}: vllm:num_requests_running not available for the time of the failures"
    return (
        f"Pod {found.load.name}: vllm:num_requests_running peak {load[0]:.0f}, num_requests_waiting peak "
        f"{load[1]:.0f} from {format_time(found.first - LOOKBACK)} to {format_time(found.last)}"
    )


def _fix(facts: ProbeFacts, kind: str) -> Fix:
    probe = next((p for p in facts.probes if p.kind == kind and p.run_by == "kubelet"), None)
    timings = _busy_timings(probe, kind)
    described = ", ".join(f"{key} {value}" for key, value in timings.items())
    what = (
        f"Let the {kind} wait for a busy engine: {described}. vLLM answers /health from the process that is "
        "serving the requests, so under load the answer is slow, not missing; a startupProbe does not help, "
        "since the failures come after the start."
    )
    if kind == LIVENESS:
        what += " Keep the readiness probe's timeoutSeconds as generous, or a busy pod leaves rotation."
    plan = set_probe_plan(facts, kind, timings, timing_only=True) if probe is not None else None
    return Fix.from_plan(what, plan, no_patch=no_patch_reason(facts))


def _busy_timings(probe: Probe | None, kind: str) -> dict[str, Any]:
    budget = probe.budget if probe is not None else None
    timeout = max(budget.timeout if budget else 1, BUSY_TIMEOUT_SECONDS)
    if kind != LIVENESS:
        return {"timeoutSeconds": timeout}
    period = budget.period if budget else 10
    threshold = max(budget.failure_threshold if budget else 3, math.ceil(BUSY_TOLERANCE_SECONDS / period))
    return {"timeoutSeconds": timeout, "failureThreshold": threshold}
