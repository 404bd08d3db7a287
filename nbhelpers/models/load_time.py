"""Probe time budgets and model load times: the arithmetic of the ``probes`` step.

**Probe budget.** The kubelet probes every ``periodSeconds`` once ``initialDelaySeconds`` have passed
since the container started, and acts after ``failureThreshold`` consecutive failures. The budget a
probe gives a loading model is the conventional ``initialDelaySeconds + periodSeconds ×
failureThreshold`` (API defaults 0, 10 and 3; ``timeoutSeconds`` defaults to 1). Timeouts can only
stretch it: the kubelet never overlaps two attempts of one probe, so attempts that run into their
timeout are ``max(periodSeconds, timeoutSeconds)`` apart, and the last one adds its own timeout. The
worst case is therefore ``initialDelaySeconds + failureThreshold × max(periodSeconds, timeoutSeconds)
+ timeoutSeconds``. A vLLM server that is still loading refuses connections at once (docs/upstream-facts.md), so
a kill during the load comes close to the conventional budget; the worst case is the latest it can come.

**Load time.** The time from the container's start to the moment its server serves: the log line
``Application startup complete.`` (uvicorn) or ``Starting vLLM API server ... on`` when the log shows
it, else the pod's Ready transition (which lags the server by at most one readiness period). An
attempt that ended before the server started, or that is still loading, only gives a lower bound.

**Estimate.** When nothing was measured, the load can be estimated from the size of the weights (the
``Model loading took X GiB`` line of any attempt, else a parameter count in the model's name). The
estimate is labelled as such and its assumptions are spelled out: real storage is 5× faster or slower.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nbhelpers.util.times import format_time, parse_k8s_time

READINESS = "readinessProbe"
LIVENESS = "livenessProbe"
STARTUP = "startupProbe"
PROBE_KINDS = (READINESS, LIVENESS, STARTUP)

# Defaults the API server fills in for an unset probe field.
PROBE_DEFAULTS = {"initialDelaySeconds": 0, "periodSeconds": 10, "failureThreshold": 3, "timeoutSeconds": 1}

# The margin a recommended startup budget keeps above the sizing load time.
STARTUP_MARGIN = 1.5


@dataclass(frozen=True)
class ProbeBudget:
    """How long one probe lets a container fail before it acts."""

    kind: str
    initial_delay: int
    period: int
    failure_threshold: int
    timeout: int

    @classmethod
    def of(cls, kind: str, probe: Mapping[str, Any]) -> ProbeBudget:
        def field(name: str) -> int:
            value = probe.get(name)
            if isinstance(value, bool) or value in (None, ""):
                return PROBE_DEFAULTS[name]
            try:
                number = int(value)
            except (TypeError, ValueError, OverflowError):  # OverflowError: a YAML .inf in a bundle
                return PROBE_DEFAULTS[name]
            # The API server refuses negative values (and 0 for the others); a hand-written bundle may hold them.
            valid = number >= 0 if name == "initialDelaySeconds" else number > 0
            return number if valid else PROBE_DEFAULTS[name]

        return cls(
            kind,
            field("initialDelaySeconds"),
            field("periodSeconds"),
            field("failureThreshold"),
            field("timeoutSeconds"),
        )

    @property
    def seconds(self) -> int:
        """initialDelaySeconds + periodSeconds × failureThreshold."""
        return self.initial_delay + self.period * self.failure_threshold

    @property
    def worst_case_seconds(self) -> int:
        """The latest the kubelet can act when every attempt runs into its timeout."""
        return self.initial_delay + self.failure_threshold * max(self.period, self.timeout) + self.timeout

    def describe(self) -> str:
        return (
            f"{self.kind}: initialDelaySeconds {self.initial_delay} + periodSeconds {self.period} × "
            f"failureThreshold {self.failure_threshold} = {self.seconds} s "
            f"(worst case {self.worst_case_seconds} s with timeoutSeconds {self.timeout})"
        )


def nearest_rank(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile: with fewer than 20 values, p95 is the maximum (conservative)."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def startup_failure_threshold(load_seconds: float, period: int, margin: float = STARTUP_MARGIN) -> int:
    """failureThreshold so that periodSeconds × failureThreshold ≥ load × margin (rounded up to a period)."""
    return max(1, math.ceil(load_seconds * margin / period))


# --- vLLM log timeline -----------------------------------------------------------------------------

_KUBELET_PREFIX = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d))\s?(.*)$")
# vLLM's line once the weights are in GPU memory, the one definition of it (the memory facts and the
# resources and queue_vs_oom steps read it too): V1 ``Model loading took 14.99 GiB and 3.1 seconds``
# (newer: ``... GiB memory and ...``), V0 ``Loading model weights took 14.9888 GB`` (vLLM divides by
# 2^30: these "GB" are GiB). Group 1 is the size per GPU; the match ends at the unit.
WEIGHTS_LOADED = re.compile(r"(?:Model loading took|Loading model weights took) (\d+(?:\.\d+)?) ?Gi?B")
_LOAD_STARTED = re.compile(r"Starting to load model")
_WEIGHTS_LOAD_SECONDS = re.compile(r" and ([\d.]+) ?s")  # V1's "and 3.1 seconds" right after the size
_WEIGHTS_ONLY = re.compile(r"Loading weights took ([\d.]+) ?s")
_ENGINE_READY = re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) ?s")
_API_SERVER = re.compile(r"Starting vLLM (?:API )?server\b(?: \d+)? on ")
_STARTUP_COMPLETE = re.compile(r"Application startup complete")
# tqdm's bar while vLLM reads the shards: "... shards:  29% Completed | 5/17 [01:00<02:25, 12.05s/it]".
_SHARDS = re.compile(r"checkpoint shards:\s*\d+% Completed \| (\d+)/(\d+) \[([\d:]+)<([\d:]+)")


def _clock_seconds(text: str) -> float:
    """tqdm's ``MM:SS`` or ``H:MM:SS``."""
    total = 0.0
    for part in text.split(":"):
        total = total * 60 + float(part)
    return total


@dataclass(frozen=True)
class LogTimeline:
    """The start-up milestones of one container run, from its timestamped log."""

    first_at: datetime | None = None
    last_at: datetime | None = None
    last_message: str = ""
    load_started_at: datetime | None = None
    weights_loaded_at: datetime | None = None
    engine_ready_at: datetime | None = None
    api_server_at: datetime | None = None
    startup_complete_at: datetime | None = None
    weights_gib: float | None = None
    weights_seconds: float | None = None
    engine_init_seconds: float | None = None
    shards_at: datetime | None = None  # the last shard progress line
    shards_done: int = 0
    shards_total: int = 0
    shards_remaining_seconds: float | None = None  # tqdm's own projection on that line
    start_line: bool = False  # a line vLLM writes as the engine starts (version, non-default args)

    @property
    def serving_at(self) -> datetime | None:
        """When the server started serving: uvicorn's line, else vLLM's own announcement."""
        return self.startup_complete_at or self.api_server_at

    @property
    def serving_marker(self) -> str:
        if self.startup_complete_at is not None:
            return "Application startup complete."
        return "Starting vLLM API server" if self.api_server_at is not None else ""

    def stages(self) -> str:
        """What the engine reported about its own start, for evidence lines."""
        parts = []
        if self.weights_seconds is not None:
            size = f"{self.weights_gib:.1f} GiB in " if self.weights_gib is not None else ""
            parts.append(f"weights {size}{self.weights_seconds:.1f} s")
        if self.engine_init_seconds is not None:
            parts.append(f"engine init (profile, KV cache, warm-up) {self.engine_init_seconds:.1f} s")
        return ", ".join(parts)


def parse_log_timeline(text: str) -> LogTimeline:
    """Milestones of a log whose lines carry the kubelet's RFC 3339 prefix (unstamped lines are skipped)."""
    found: dict[str, Any] = {}
    first_at = last_at = None
    last_message = ""
    for line in text.splitlines():
        match = _KUBELET_PREFIX.match(line)
        moment = parse_k8s_time(match.group(1)) if match else None
        if match is None or moment is None:
            continue
        message = match.group(2).strip()
        first_at = first_at or moment
        last_at, last_message = moment, message or last_message
        if _LOAD_STARTED.search(message):
            found.setdefault("load_started_at", moment)
        if _ENGINE_START_LINE.search(message):
            found["start_line"] = True
        weights = WEIGHTS_LOADED.search(message)
        seconds = _WEIGHTS_LOAD_SECONDS.match(message, weights.end()) if weights else None
        if weights and seconds:
            found.setdefault("weights_loaded_at", moment)
            found.setdefault("weights_gib", float(weights.group(1)))
            found["weights_seconds"] = float(seconds.group(1))
        weights_only = _WEIGHTS_ONLY.search(message)
        if weights_only:
            found.setdefault("weights_seconds", float(weights_only.group(1)))
        engine = _ENGINE_READY.search(message)
        if engine:
            found.setdefault("engine_ready_at", moment)
            found.setdefault("engine_init_seconds", float(engine.group(1)))
        if _API_SERVER.search(message):
            found.setdefault("api_server_at", moment)
        if _STARTUP_COMPLETE.search(message):
            found.setdefault("startup_complete_at", moment)
        shards = _SHARDS.search(message)
        if shards:
            found.update(
                shards_at=moment,
                shards_done=int(shards.group(1)),
                shards_total=int(shards.group(2)),
                shards_remaining_seconds=_clock_seconds(shards.group(4)),
            )
    return LogTimeline(first_at=first_at, last_at=last_at, last_message=last_message, **found)


# --- load attempts -----------------------------------------------------------------------------------

SERVED = "served"  # the server started serving: a complete load time
CUT = "cut"  # the run ended before the server served: a lower bound
LOADING = "loading"  # still not serving when the evidence was read: a lower bound
UNKNOWN = "unknown"  # the run is visible but its load time is not


@dataclass(frozen=True)
class LoadAttempt:
    """One run of the serving container and what it shows about the load time."""

    pod: str
    container: str
    previous: bool
    started_at: datetime | None
    ended_at: datetime | None  # serving time (served), end of the run (cut), observation time (loading)
    outcome: str
    source: str
    log: LogTimeline | None = None
    exit_code: int | None = None
    reason: str = ""
    log_cut: bool = False  # the run's log does not reach back to the engine's start: it says nothing about the load

    @property
    def seconds(self) -> float | None:
        if self.started_at is None or self.ended_at is None:
            return None
        return max(0.0, (self.ended_at - self.started_at).total_seconds())

    @property
    def projected_weights_seconds(self) -> float | None:
        """For a run cut while reading shards: when the weights would have been read, from tqdm's projection."""
        log = self.log
        if self.outcome != CUT or log is None or log.shards_at is None or self.started_at is None:
            return None
        if log.shards_remaining_seconds is None or log.shards_done >= log.shards_total:
            return None
        return (log.shards_at - self.started_at).total_seconds() + log.shards_remaining_seconds

    @property
    def ended_mid_load(self) -> bool:
        """The run ended and its own log shows the server never started."""
        return self.outcome == CUT and self.log is not None

    def describe(self) -> str:
        run = "previous run" if self.previous else "current run"
        start = format_time(self.started_at) if self.started_at else "unknown start"
        head = f"Pod {self.pod} {self.container} {run} (started {start})"
        seconds = self.seconds
        if self.outcome == SERVED and seconds is not None:
            text = f"{head}: serving after {seconds:.0f} s ({self.source})"
        elif self.outcome == CUT and seconds is not None:
            text = f"{head}: ended after {seconds:.0f} s {self._termination()} before serving ({self.source})"
        elif self.outcome == LOADING and seconds is not None:
            text = f"{head}: still not serving after {seconds:.0f} s ({self.source})"
        else:
            text = f"{head}: load time not visible ({self.source})"
        if self.log is not None and self.log.stages():
            text += f"; engine reported {self.log.stages()}"
        return text

    def _termination(self) -> str:
        if self.exit_code is None:
            return ""
        return f"with exit code {self.exit_code}" + (f" ({self.reason})" if self.reason else "")


def measure_container(
    pod: str,
    status: Mapping[str, Any],
    ready_since: datetime | None,
    current_log: str | None,
    previous_log: str | None,
    observed_at: datetime,
    ready_means_serving: bool = True,
) -> list[LoadAttempt]:
    """The load attempts one container status shows: its current run and its last terminated one.

    ``ready_since`` is the pod's Ready condition lastTransitionTime when it ends this run's start (None after a
    readiness blip, see nbhelpers.facts.pod_phases); the logs are the window-filtered texts with kubelet timestamps
    (None when not read). ``ready_means_serving`` is False when no probe that asks the server gates readiness: Ready
    then says nothing about the load.
    """
    if not ready_means_serving:
        ready_since = None
    container = str(status.get("name") or "")
    attempts = []
    running = (status.get("state") or {}).get("running")
    if isinstance(running, Mapping):
        attempts.append(_current_attempt(pod, container, status, running, ready_since, current_log, observed_at))
    terminated = (status.get("lastState") or {}).get("terminated")
    if isinstance(terminated, Mapping):
        attempts.append(_previous_attempt(pod, container, terminated, previous_log))
    return attempts


def _current_attempt(
    pod: str,
    container: str,
    status: Mapping[str, Any],
    running: Mapping[str, Any],
    ready_since: datetime | None,
    log_text: str | None,
    observed_at: datetime,
) -> LoadAttempt:
    started = parse_k8s_time(running.get("startedAt"))
    timeline = parse_log_timeline(log_text) if log_text else None
    started = started or (timeline.first_at if timeline else None)
    serving = timeline.serving_at if timeline else None
    if timeline is not None and serving is not None and (started is None or serving >= started):
        return LoadAttempt(
            pod, container, False, started, serving, SERVED, f"log: {timeline.serving_marker!r}", timeline
        )
    if status.get("ready") and ready_since is not None and started is not None and ready_since >= started:
        return LoadAttempt(pod, container, False, started, ready_since, SERVED, "pod Ready transition", timeline)
    if not status.get("ready"):
        source = "not ready when observed" + (f"; log ends with {_quote(timeline.last_message)}" if timeline else "")
        return LoadAttempt(pod, container, False, started, observed_at, LOADING, source, timeline)
    return LoadAttempt(
        pod,
        container,
        False,
        started,
        None,
        UNKNOWN,
        "ready, but no Ready transition that ends this run's start",
        timeline,
    )


def _previous_attempt(pod: str, container: str, terminated: Mapping[str, Any], log_text: str | None) -> LoadAttempt:
    started = parse_k8s_time(terminated.get("startedAt"))
    finished = parse_k8s_time(terminated.get("finishedAt"))
    exit_code = terminated.get("exitCode")
    code = int(exit_code) if isinstance(exit_code, int) else None
    reason = str(terminated.get("reason") or "")
    timeline = parse_log_timeline(log_text) if log_text else None
    if timeline is not None:
        started = started or timeline.first_at
        serving = timeline.serving_at
        if serving is not None and (started is None or serving >= started):
            source = f"log: {timeline.serving_marker!r}"
            return LoadAttempt(pod, container, True, started, serving, SERVED, source, timeline, code, reason)
        if _log_cut(timeline, started):
            assert started is not None and timeline.first_at is not None
            gap = (timeline.first_at - started).total_seconds()
            source = (
                f"its log was cut: it begins {gap:.0f} s after the run started, with no engine start line, so it "
                "cannot show whether the server had started"
            )
            return LoadAttempt(pod, container, True, started, finished, UNKNOWN, source, timeline, code, reason, True)
        source = f"its log ends with {_quote(timeline.last_message)}, no {'Application startup complete.'!r}"
        return LoadAttempt(pod, container, True, started, finished, CUT, source, timeline, code, reason)
    return LoadAttempt(pod, container, True, started, finished, UNKNOWN, "no log of this run", None, code, reason)


# Lines vLLM writes as the engine starts; a log without any, beginning well after the run started, was cut
# (tailLines / limitBytes, or the window) and does not show the start.
_ENGINE_START_LINE = re.compile(r"vLLM API server version|non-default args|Initializing an? (?:V1 )?LLM engine")
_CUT_SLACK_SECONDS = 120.0


def _log_cut(timeline: LogTimeline, started: datetime | None) -> bool:
    if started is None or timeline.first_at is None:
        return False
    if (timeline.first_at - started).total_seconds() <= _CUT_SLACK_SECONDS:
        return False
    return not (
        timeline.start_line
        or timeline.load_started_at
        or timeline.weights_loaded_at
        or timeline.engine_ready_at
        or timeline.api_server_at
    )


def _quote(message: str, limit: int = 120) -> str:
    text = message if len(message) <= limit else message[: limit - 1] + "…"
    return repr(text)


# --- statistics and the sizing basis -------------------------------------------------------------------


@dataclass(frozen=True)
class LoadEstimate:
    """A labelled estimate of the load time from the size of the weights."""

    seconds: float
    basis: str


# Assumptions of the estimate, spelled out in its basis text.
_START_SECONDS = 20.0  # interpreter, imports, config and tokenizer before weights
_READ_GIB_PER_SECOND = 0.5  # weights from a PVC or object storage
_ENGINE_START_SECONDS = 60.0  # profiling, KV cache allocation, torch.compile and CUDA graphs

_PARAMETERS = re.compile(r"(?<![a-z0-9.])(?:(\d+)x)?(\d+(?:\.\d+)?)b(?![a-z0-9])")


def parameter_count_billion(name: str) -> float | None:
    """Parameters (billions) written in a model name: ``Llama-3.1-8B`` 8, ``Mixtral-8x7B`` 56, else None."""
    match = _PARAMETERS.search(name.lower())
    if match is None:
        return None
    experts = int(match.group(1)) if match.group(1) else 1
    return experts * float(match.group(2))


def _bytes_per_parameter(name: str) -> float:
    lowered = name.lower()
    if any(tag in lowered for tag in ("awq", "gptq", "int4", "4bit", "w4a16", "nf4")):
        return 0.5
    if any(tag in lowered for tag in ("fp8", "int8", "8bit", "w8a8")):
        return 1.0
    return 2.0


def estimate_load(weights_gib: float, how_known: str) -> LoadEstimate:
    read = weights_gib / _READ_GIB_PER_SECOND
    seconds = _START_SECONDS + read + _ENGINE_START_SECONDS
    basis = (
        f"estimate, not a measurement: {_START_SECONDS:.0f} s process start + {weights_gib:.1f} GiB of weights "
        f"({how_known}) at {_READ_GIB_PER_SECOND} GiB/s = {read:.0f} s + {_ENGINE_START_SECONDS:.0f} s engine start "
        f"(profiling, KV cache, CUDA graphs) ≈ {seconds:.0f} s; storage speed alone moves this by 5×"
    )
    return LoadEstimate(seconds, basis)


def estimate_from_names(names: Iterable[str]) -> LoadEstimate | None:
    """An estimate from the first name that carries a parameter count."""
    for name in names:
        billions = parameter_count_billion(name)
        if billions:
            per_parameter = _bytes_per_parameter(name)
            gib = billions * 1e9 * per_parameter / 2**30
            return estimate_load(gib, f"{billions:g}B parameters in {name!r} × {per_parameter:g} bytes")
    return None


@dataclass(frozen=True)
class LoadStats:
    """What all attempts together say about the load time."""

    complete: tuple[float, ...]
    lower_bound: float | None  # the longest run that ended without serving
    estimate: LoadEstimate | None
    projected_weights: float | None = None  # seconds to read the weights, projected from a cut run's shard bar

    @property
    def p95(self) -> float | None:
        return nearest_rank(self.complete, 0.95) if self.complete else None

    @property
    def maximum(self) -> float | None:
        return max(self.complete) if self.complete else None

    @property
    def known(self) -> float | None:
        """The load time the evidence proves: the measured p95, raised to any longer lower bound."""
        values = [value for value in (self.p95, self.lower_bound) if value is not None]
        return max(values) if values else None

    def sizing(self) -> tuple[float, str] | None:
        """(seconds, how) the recommended startup budget is sized from, or None."""
        if self.complete:
            assert self.p95 is not None
            if self.lower_bound is not None and self.lower_bound > self.p95:
                return self.lower_bound, f"a run that had not finished loading after {self.lower_bound:.0f} s"
            return self.p95, f"p95 of {len(self.complete)} measured load(s), {self.p95:.0f} s"
        candidates: list[tuple[float, str]] = []
        if self.projected_weights is not None:
            projected = self.projected_weights + _ENGINE_START_SECONDS
            candidates.append(
                (
                    projected,
                    f"the weights alone would take {self.projected_weights:.0f} s by the shard progress of a cut run, "
                    f"plus {_ENGINE_START_SECONDS:.0f} s assumed for the engine start ≈ {projected:.0f} s",
                )
            )
        if self.lower_bound is not None:
            candidates.append(
                (2 * self.lower_bound, f"twice the longest unfinished load ({self.lower_bound:.0f} s): none finished")
            )
        if self.estimate is not None:
            candidates.append((self.estimate.seconds, self.estimate.basis))
        return max(candidates) if candidates else None

    def describe(self) -> str:
        if self.complete:
            assert self.p95 is not None and self.maximum is not None
            text = (
                f"measured load times: {len(self.complete)} run(s), p95 {self.p95:.0f} s, max {self.maximum:.0f} s "
                "(nearest-rank p95: the maximum below 20 runs)"
            )
        else:
            text = "no load time measured: no run in the window reached 'Application startup complete.' or Ready"
        if self.lower_bound is not None:
            text += f"; longest run that ended before serving: {self.lower_bound:.0f} s (a lower bound)"
        if self.projected_weights is not None:
            text += f"; reading the weights alone projects to {self.projected_weights:.0f} s (tqdm's shard estimate)"
        return text


def load_stats(
    attempts: Iterable[LoadAttempt], estimate: LoadEstimate | None, killed_runs: Iterable[float] = ()
) -> LoadStats:
    """Complete loads, and the longest run that ended without serving (``killed_runs``: runs known to have
    been killed while loading, whose own log may be missing). A run that is still loading is no bound: if
    it outlasts a probe budget, the probe is passing, so the container is not simply loading."""
    complete: list[float] = []
    bounds: list[float] = list(killed_runs)
    projections: list[float] = []
    for attempt in attempts:
        seconds = attempt.seconds
        if seconds is None:
            continue
        if attempt.outcome == SERVED:
            complete.append(seconds)
        elif attempt.outcome == CUT:
            bounds.append(seconds)
        projected = attempt.projected_weights_seconds
        if projected is not None:
            projections.append(projected)
    return LoadStats(
        tuple(complete), max(bounds) if bounds else None, estimate, max(projections) if projections else None
    )
