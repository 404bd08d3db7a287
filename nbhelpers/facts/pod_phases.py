"""Cold-start arithmetic: how long each predictor pod's latest start took to reach Ready, phase by phase, and how
the count of ready pods moved over the window (pure functions, no I/O).

**One cold start per start.** A cold start runs from a start to the Ready that follows it, never across a period
of serving. A pod has a start when it is created and each time its serving container is started again; a
readiness blip (Ready turning False and back to True while no container restarted) is no start at all.

**What the pod status can tell** (verified against the upstream documentation: Pod conditions,
https://kubernetes.io/docs/concepts/workloads/pods/pod-condition/ , and container states,
https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#container-states , and the v1 API's ContainerStatus
field descriptions, as k8s-openapi carries them:
https://docs.rs/k8s-openapi/0.16.0/k8s_openapi/api/core/v1/struct.ContainerStatus.html):

- a condition's ``lastTransitionTime`` is the "last time the condition transitioned from one status to another":
  the Ready condition keeps only its latest transition. It is the end of the pod's first start only while the pod
  has never been Ready before; after a restart it closes the restart, after a blip it closes the blip;
- ``state.running.startedAt`` is the "time at which the container was last (re-)started", and ``lastState`` holds
  "details about the container's last termination condition" (its ``terminated.startedAt`` and ``finishedAt``);
- ``restartCount`` was documented as "based on the number of dead containers that have not yet been removed",
  which "are subject to garbage collection" (the same API's earlier description, k8s-openapi 0.10:
  https://docs.rs/k8s-openapi/0.10.0/k8s_openapi/api/core/v1/struct.ContainerStatus.html): a container whose
  current run began long after its pod was scheduled may have restarted without a record.

So, for the serving container:

- **no restart** (``restartCount`` 0, no ``lastState``), started within :data:`FIRST_START_LIMIT` of the pod's
  scheduling: the first start, created → Ready;
- **a restart** (``restartCount`` > 0 or a ``lastState.terminated``), or a run that began later than that with no
  record: that start, ``state.running.startedAt`` (else ``lastState.terminated.finishedAt``: the restart began
  when the previous run ended) → Ready;
- a Ready transition later than the pod was seen serving since that start (its engine running requests, or its log
  saying the server was up longer before than a readiness check takes) is a **blip**: the Ready that ended the
  start is no longer in the status, and the cold start of that pod is **unknown**, as it is when the status cannot
  say where the start began (a restart with neither time, a sidecar's restart). Unknown is never replaced by the
  pod's creation time.

**Milestones of a first start:** created (``metadata.creationTimestamp``) → scheduled (the ``PodScheduled``
condition's transition, else the ``Scheduled`` event) → image pulled (the serving container's ``Pulled`` event;
kubelet writes ``Successfully pulled image "x" in 1m2.5s`` or ``Container image "x" already present on machine``)
→ container started (``startedAt``) → Ready. A milestone that cannot be seen (events expire after about an hour)
merges the two phases around it, so a phase is always named by the milestones it spans. Between the image pull and
the container start lie the init containers (KServe's storage-initializer downloads the model there) and volume
mounts; between the start and Ready lies the model load. A restart has two milestones: container started (or the
previous run's end) → Ready.

**Waiting for a node.** A pod that was refused by the scheduler (``FailedScheduling``) and scheduled after
a cluster-autoscaler scale-up (``TriggeredScaleUp``) paid that wait as part of its cold start (docs/upstream-facts.md):
it is in the scheduling phase.

**Still starting.** A pod that has never been ready gives a lower bound (observation time − the start), unless it
is stuck for another reason that other steps own: unschedulable, restarting, or failing to pull or create its
container.

**Timeline.** Ready pods over time (a sum over pods, one sample per query step). A *valley* is a fall in
the count followed by a rise: a scale-down whose capacity was needed again, which re-pays a cold start.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from nbhelpers.facts import init_containers
from nbhelpers.models.load_time import nearest_rank
from nbhelpers.sources import kube
from nbhelpers.util.times import duration_seconds, format_time, parse_k8s_time

CREATED = "created"
SCHEDULED = "scheduled"
PULLED = "image pulled"
STOPPED = "previous run ended"
STARTED = "container started"
READY = "Ready"
MILESTONES = (CREATED, SCHEDULED, PULLED, STOPPED, STARTED, READY)

FIRST_START = "first start"
RESTART = "restart"

# Waiting reasons that mean a pod is stuck, not loading: the resources and probes steps own these.
STUCK_WAITING = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "CrashLoopBackOff",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)
# A Ready=False transition this long after the container started means the pod was ready once and lost it.
_READY_FALSE_SLACK = timedelta(seconds=5)
# Between a pod's scheduling and its serving container's first start lie only image pulls and init containers
# (KServe's storage-initializer downloads the model there): an hour holds a download of several hundred GB. A run
# that began later than this after scheduling, with no restart recorded, is a later start.
FIRST_START_LIMIT = timedelta(hours=1)
# The model load (container start -> Ready) takes minutes, tens of minutes for the largest models: a Ready transition
# later than this after the container started, that no log line places just after the server came up, ends a
# readiness blip rather than the load.
LOAD_LIMIT = timedelta(hours=1)
# Prometheus answers a sample time with the latest scrape up to its lookback (query.lookback-delta, 5 minutes by
# default) before it: just after a restart, a sample can still be the previous run's.
PROMETHEUS_LOOKBACK = timedelta(minutes=5)
# Clocks of the API server and Prometheus may disagree by this much.
CLOCK_SKEW = timedelta(seconds=5)
# What a readiness check adds to a server that is up: the response itself and the kubelet's worker offset.
_CHECK_SLACK = timedelta(seconds=10)

_PULLED = re.compile(r'Successfully pulled image "([^"]+)" in (\S+?)(?:\s|$)')
_PRESENT = re.compile(r'Container image "([^"]+)" already present on machine')
_CONTAINER_FIELD = re.compile(r"spec\.(?:initContainers|containers)\{(.+)\}")


def _message(event: Mapping[str, Any]) -> str:
    return str(event.get("message") or event.get("note") or "")


def _involved(event: Mapping[str, Any]) -> Mapping[str, Any]:
    return event.get("involvedObject") or event.get("regarding") or {}


def events_of_pod(events: Iterable[Mapping[str, Any]], pod: str) -> list[Mapping[str, Any]]:
    return [e for e in events if _involved(e).get("kind", "Pod") == "Pod" and _involved(e).get("name") == pod]


@dataclass(frozen=True)
class ServingSignals:
    """What shows a pod serving besides its status: the sample times at which its engine ran requests (vLLM's
    per-pod ``num_requests_running`` above 0) and, from the current run's log, when the server came up."""

    busy_at: tuple[datetime, ...] = ()
    up_at: datetime | None = None


@dataclass(frozen=True)
class PodPhases:
    """The latest start of one pod: its milestones and what the events say about scheduling and the pull.

    ``start`` is :data:`FIRST_START` (milestones from creation) or :data:`RESTART` (from the serving container's
    start, or its previous run's end); ``unknown`` says why the cold start of this pod cannot be measured ("" when
    it can), ``note`` what the status says about the start."""

    pod: str
    milestones: tuple[tuple[str, datetime], ...]  # known milestones of the latest start, in order
    ready: bool
    stuck: str  # why a not-ready pod is not counted as still starting ("" when it is, or when ready)
    restarts: int
    observed_at: datetime
    pull_seconds: float | None = None  # as the kubelet reported it
    image_cached: bool = False
    failed_scheduling: int = 0  # FailedScheduling events (count)
    scale_up: str = ""  # the cluster-autoscaler's TriggeredScaleUp message
    start: str = FIRST_START
    unknown: str = ""
    note: str = ""
    created: datetime | None = None

    def at(self, milestone: str) -> datetime | None:
        return next((moment for name, moment in self.milestones if name == milestone), None)

    @property
    def created_at(self) -> datetime | None:
        return self.created or self.at(CREATED)

    @property
    def began(self) -> datetime | None:
        """When the latest start began: the pod's creation, or the container's (re)start."""
        return self.milestones[0][1] if self.milestones else None

    @property
    def total(self) -> float | None:
        """Seconds from the start to its Ready (None when either is unknown)."""
        began, ready = self.began, self.at(READY)
        if self.unknown or began is None or ready is None or ready < began:
            return None
        return (ready - began).total_seconds()

    @property
    def starting_for(self) -> float | None:
        """For a pod that is still starting: seconds since its start began (a lower bound of its cold start)."""
        if self.ready or self.stuck or self.unknown or self.began is None:
            return None
        return max(0.0, (self.observed_at - self.began).total_seconds())

    @property
    def waited_for_node(self) -> bool:
        return self.failed_scheduling > 0 and self.at(SCHEDULED) is not None

    def phases(self) -> list[tuple[str, float]]:
        """(name, seconds) between consecutive known milestones; a missing milestone merges its neighbours."""
        spans = []
        for (start_name, start), (end_name, end) in itertools.pairwise(self.milestones):
            spans.append((f"{start_name} → {end_name}", max(0.0, (end - start).total_seconds())))
        return spans

    def describe(self) -> str:
        created = self.created_at
        head = f"Pod {self.pod}" + (f" (created {format_time(created)})" if created else "")
        parts = [f"{name} {seconds:.0f} s" for name, seconds in self.phases()]
        began = self.began
        since = f"restarted at {format_time(began)}, " if self.start == RESTART and began is not None else ""
        if self.unknown:
            text = f"{head}: cold start unknown ({self.unknown})"
            parts = []
        elif self.total is not None:
            text = f"{head}: {since}Ready after {self.total:.0f} s"
        elif self.starting_for is not None:
            text = f"{head}: {since}not ready after {self.starting_for:.0f} s (still starting: a lower bound)"
        elif self.stuck:
            text = f"{head}: not counted ({self.stuck})"
        else:
            text = f"{head}: cold start not visible"
        if parts and self.total is not None:
            text += " = " + " + ".join(parts)
        elif parts:
            text += "; " + ", ".join(parts)
        notes = [self.note] if self.note else []
        if self.waited_for_node:
            notes.append(
                f"waited for a node: {self.failed_scheduling}× FailedScheduling"
                + (f", then {self.scale_up!r}" if self.scale_up else "")
            )
        if self.pull_seconds is not None:
            notes.append(f"kubelet: image pulled in {self.pull_seconds:g} s")
        elif self.image_cached:
            notes.append("image already on the node")
        return text + (f" ({'; '.join(notes)})" if notes else "")


@dataclass(frozen=True)
class _Run:
    """What the serving container's status says about its runs."""

    found: bool
    restarts: int
    started: datetime | None  # state.running.startedAt: the current run
    last_started: datetime | None  # lastState.terminated.startedAt
    last_finished: datetime | None  # lastState.terminated.finishedAt
    last_end: str  # "reason, exit code N" of the last termination ("" when none)
    waiting: str  # state.waiting.reason
    sidecars_restarted: tuple[str, ...]  # other containers with restarts

    @property
    def restarted(self) -> bool:
        return self.restarts > 0 or self.last_finished is not None or self.last_started is not None

    @property
    def first_seen(self) -> datetime | None:
        """The earliest start the status shows (the last terminated run's, else the current one's)."""
        known = [moment for moment in (self.started, self.last_started) if moment is not None]
        return min(known) if known else None


def measure_pod(
    pod: Mapping[str, Any],
    events: Iterable[Mapping[str, Any]],
    container: str,
    observed_at: datetime,
    signals: ServingSignals | None = None,
) -> PodPhases:
    """The phases of ``pod``'s latest start; ``events`` are the window's events (any object), ``container`` the
    serving container's name, ``signals`` what else shows the pod serving (see :class:`ServingSignals`)."""
    metadata = pod.get("metadata") or {}
    status = pod.get("status") or {}
    name = str(metadata.get("name") or "")
    serving_spec: Mapping[str, Any] = next(
        (c for c in (pod.get("spec") or {}).get("containers") or [] if c.get("name") == container),
        {},
    )
    image = str(serving_spec.get("image") or "")
    own = sorted(events_of_pod(events, name), key=lambda e: kube.event_interval(e)[0] or observed_at)
    conditions = {str(c.get("type")): c for c in status.get("conditions") or []}
    created = parse_k8s_time(metadata.get("creationTimestamp"))
    scheduled = conditions.get("PodScheduled") or {}
    scheduled_at = parse_k8s_time(scheduled.get("lastTransitionTime")) if scheduled.get("status") == "True" else None
    failed_scheduling, scale_up = 0, ""
    pulled_at: datetime | None = None
    pull_seconds: float | None = None
    cached = False
    for event in own:
        reason = str(event.get("reason") or "")
        first, _ = kube.event_interval(event)
        if reason == "FailedScheduling":
            failed_scheduling += int(event.get("count") or (event.get("series") or {}).get("count") or 1)
        elif reason == "TriggeredScaleUp" and not scale_up:
            scale_up = _message(event)
        elif reason == "Scheduled" and scheduled_at is None and first is not None:
            scheduled_at = first
        elif reason == "Pulled" and pulled_at is None and first is not None and _for_container(event, container, image):
            pulled_at = first
            pulled = _PULLED.search(_message(event))
            pull_seconds = duration_seconds(pulled.group(2)) if pulled else None
            cached = _PRESENT.search(_message(event)) is not None
    run = _serving_run(status, container)
    ready_condition = conditions.get("Ready") or {}
    ready = ready_condition.get("status") == "True"
    ready_at = parse_k8s_time(ready_condition.get("lastTransitionTime")) if ready else None
    start, began, note, unknown = _latest_start(run, created, scheduled_at)
    found: dict[str, datetime] = {}
    if start == FIRST_START and not unknown:
        for milestone, moment in ((CREATED, created), (SCHEDULED, scheduled_at), (PULLED, pulled_at)):
            if moment is not None:
                found[milestone] = moment
        if run.started is not None:
            found[STARTED] = run.started
    elif began is not None and not unknown:
        found[STARTED if began == run.started else STOPPED] = began
    if ready and not unknown:
        if ready_at is None:
            unknown = "Ready, but the condition has no lastTransitionTime"
        elif began is not None and ready_at < began:
            unknown = f"the Ready transition at {format_time(ready_at)} is older than the start at {format_time(began)}"
        elif began is not None:
            seen = signals or ServingSignals()
            loaded_from = run.started or began
            blip = _served_before(ready_at, began, loaded_from, start, seen, serving_spec)
            loading = ready_at - loaded_from
            if blip:
                unknown = (
                    f"its Ready transition at {format_time(ready_at)} ends a readiness blip, not a start: {blip}, "
                    "with no container restart since; the Ready that ended its start is no longer in the status"
                )
            elif loading > LOAD_LIMIT and not _up_just_before(ready_at, loaded_from, seen, serving_spec):
                unknown = (
                    f"its Ready transition at {format_time(ready_at)} came {_span(loading.total_seconds())} after "
                    f"the container started at {format_time(loaded_from)}, longer than a model load takes: a readiness "
                    "blip on a serving pod, whose first Ready is no longer in the status"
                )
            else:
                found[READY] = ready_at
    up_at = (signals or ServingSignals()).up_at
    server_up = up_at if up_at is not None and (run.started is None or up_at >= run.started) else None
    stuck = (
        ""
        if ready
        else _stuck(status, scheduled_at, run.first_seen, ready_condition, run.restarts, run.waiting, server_up)
    )
    ordered = tuple((milestone, found[milestone]) for milestone in MILESTONES if milestone in found)
    return PodPhases(
        name,
        ordered if not unknown else (),
        ready,
        stuck,
        run.restarts,
        observed_at,
        pull_seconds if start == FIRST_START else None,
        cached and start == FIRST_START,
        failed_scheduling,
        scale_up,
        start,
        unknown,
        note,
        created,
    )


def _latest_start(
    run: _Run, created: datetime | None, scheduled_at: datetime | None
) -> tuple[str, datetime | None, str, str]:
    """(kind, when it began, note, why unknown) of the start the pod's latest Ready transition can close."""
    if run.restarted:
        note = f"restart {run.restarts} of the serving container"
        if run.last_finished is not None:
            note += f"; the previous run ended {format_time(run.last_finished)}"
        if run.last_end:
            note += f"{'' if run.last_finished else '; the previous run ended'}: {run.last_end}"
        if run.started is not None:
            return RESTART, run.started, note, ""
        if run.last_finished is not None:
            return RESTART, run.last_finished, note + "; no state.running.startedAt: measured from that end", ""
        return (
            RESTART,
            None,
            note,
            f"the serving container restarted {run.restarts}×, but its status shows neither state.running.startedAt "
            "nor lastState.terminated.finishedAt: where its latest start began is not known",
        )
    if run.sidecars_restarted:
        names = ", ".join(run.sidecars_restarted)
        return (
            RESTART,
            None,
            "",
            f"container {names} restarted: the latest Ready transition follows that restart, not a model load",
        )
    if created is None:
        return FIRST_START, None, "", "the pod has no creationTimestamp"
    anchor = scheduled_at or created
    if run.started is not None and run.started - anchor > FIRST_START_LIMIT:
        gap = (run.started - anchor).total_seconds()
        note = (
            f"no restart recorded, but the container started {_span(gap)} after the pod was "
            f"{'scheduled' if scheduled_at else 'created'}: a later start whose record is gone (restartCount counts "
            "dead containers, which garbage collection removes), measured from that start"
        )
        return RESTART, run.started, note, ""
    return FIRST_START, created, "", ""


def _span(seconds: float) -> str:
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} days"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds:.0f} s"


def _served_before(
    ready_at: datetime,
    began: datetime,
    container_started: datetime,
    start: str,
    signals: ServingSignals,
    serving_spec: Mapping[str, Any],
) -> str:
    """Evidence that the pod served between its start and its latest Ready transition ("" when none): then that
    transition ended a readiness blip. Traffic reaches a pod only through the endpoints of ready pods, so an engine
    running requests before the transition was Ready before it; a server that was up longer before the transition
    than a readiness check takes was Ready before it too."""
    # After a restart the first samples may still be the previous run's (Prometheus' lookback).
    earliest = began + (PROMETHEUS_LOOKBACK if start == RESTART else timedelta(0))
    busy = [moment for moment in signals.busy_at if earliest <= moment <= ready_at - CLOCK_SKEW]
    if busy:
        return f"its engine was running requests at {format_time(busy[0])}"
    up = signals.up_at
    if up is not None and up >= began:
        allowance = _readiness_allowance(serving_spec, container_started, up)
        if ready_at - up > allowance:
            return (
                f"its log has the server up at {format_time(up)}, {(ready_at - up).total_seconds():.0f} s before it, "
                f"where a readiness check follows within {allowance.total_seconds():.0f} s"
            )
    return ""


def _up_just_before(
    ready_at: datetime, container_started: datetime, signals: ServingSignals, serving_spec: Mapping[str, Any]
) -> bool:
    """Whether the current run's log has the server up just before the Ready transition (which then ends the load)."""
    up = signals.up_at
    if up is None or up < container_started or up > ready_at:
        return False
    return ready_at - up <= _readiness_allowance(serving_spec, container_started, up)


def _readiness_allowance(serving_spec: Mapping[str, Any], container_started: datetime, up: datetime) -> timedelta:
    """How long after the server is up its pod turns Ready at the latest: the readiness probe's initial delay
    (counted from the container's start), a startup probe's period before it, then ``successThreshold`` readiness
    periods."""
    readiness = serving_spec.get("readinessProbe") or {}
    startup = serving_spec.get("startupProbe") or {}
    initial = timedelta(seconds=_number(readiness, "initialDelaySeconds", 0))
    delay = max(timedelta(0), container_started + initial - up)
    startup_wait = timedelta(seconds=_number(startup, "periodSeconds", 10)) if startup else timedelta(0)
    checks = _number(readiness, "periodSeconds", 10) * max(1.0, _number(readiness, "successThreshold", 1))
    return delay + startup_wait + timedelta(seconds=checks) + _CHECK_SLACK


def _number(probe: Mapping[str, Any], key: str, default: float) -> float:
    value = probe.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def _for_container(event: Mapping[str, Any], container: str, image: str) -> bool:
    """Whether a pull event is about the serving container (by its field path, else by its image)."""
    field = _CONTAINER_FIELD.search(str(_involved(event).get("fieldPath") or ""))
    if field is not None:
        return field.group(1) == container
    return bool(image) and f'"{image}"' in _message(event)


def _serving_run(status: Mapping[str, Any], container: str) -> _Run:
    """What the serving container's status says about its runs, and which other containers restarted."""
    sidecars = tuple(
        str(entry.get("name"))
        for entry in status.get("containerStatuses") or []
        if entry.get("name") != container and int(entry.get("restartCount") or 0) > 0
    )
    for entry in status.get("containerStatuses") or []:
        if entry.get("name") != container:
            continue
        state = entry.get("state") or {}
        terminated = (entry.get("lastState") or {}).get("terminated") or {}
        end = ""
        if terminated:
            reason, code = terminated.get("reason"), terminated.get("exitCode")
            end = ", ".join(
                part for part in (str(reason or ""), f"exit code {code}" if code is not None else "") if part
            )
        return _Run(
            True,
            int(entry.get("restartCount") or 0),
            parse_k8s_time((state.get("running") or {}).get("startedAt")),
            parse_k8s_time(terminated.get("startedAt")),
            parse_k8s_time(terminated.get("finishedAt")),
            end,
            str((state.get("waiting") or {}).get("reason") or ""),
            sidecars,
        )
    return _Run(False, 0, None, None, None, "", "", sidecars)


def _stuck(
    status: Mapping[str, Any],
    scheduled_at: datetime | None,
    started_at: datetime | None,
    ready_condition: Mapping[str, Any],
    restarts: int,
    waiting: str,
    server_up: datetime | None = None,
) -> str:
    """Why a pod that is not ready is not simply starting ("" when it is). ``server_up``: when the current run's
    log said the server was up; a pod whose engine serves but is kept unready is not in a cold start."""
    if status.get("phase") in ("Succeeded", "Failed"):
        return f"pod {status.get('phase')}"
    if scheduled_at is None:
        return "not scheduled: see the resources step"
    failing_init = init_containers.failing_init_container(status)
    if failing_init:
        return f"init container failing: {failing_init}, see the resources step"
    for init in status.get("initContainerStatuses") or []:
        init_waiting = str(((init.get("state") or {}).get("waiting") or {}).get("reason") or "")
        if init_waiting in STUCK_WAITING:
            return f"init container {init.get('name')} waiting: {init_waiting}"
    if waiting in STUCK_WAITING:
        return f"serving container waiting: {waiting}"
    if restarts:
        return f"serving container restarted {restarts}×: see the probes and resources steps"
    lost_at = parse_k8s_time(ready_condition.get("lastTransitionTime"))
    if started_at is not None and lost_at is not None and lost_at > started_at + _READY_FALSE_SLACK:
        return "was ready before and lost readiness"
    if server_up is not None:
        return f"its server has been up since {format_time(server_up)} but the pod is not Ready: see the probes step"
    return ""


# --- distributions ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Distribution:
    """p50 / p95 / max of a set of durations (nearest rank: with fewer than 20 values p95 is the maximum)."""

    count: int
    p50: float
    p95: float
    maximum: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Distribution | None:
        if not values:
            return None
        return cls(len(values), nearest_rank(values, 0.5), nearest_rank(values, 0.95), max(values))

    def describe(self) -> str:
        return f"p50 {self.p50:.0f} s, p95 {self.p95:.0f} s, max {self.maximum:.0f} s over {self.count} pod(s)"


def phase_distributions(pods: Iterable[PodPhases]) -> list[tuple[str, Distribution]]:
    """One distribution per phase name, in milestone order."""
    values: dict[str, list[float]] = {}
    for pod in pods:
        for name, seconds in pod.phases():
            values.setdefault(name, []).append(seconds)

    def order(name: str) -> tuple[int, int]:
        start, _, end = name.partition(" → ")
        return MILESTONES.index(start), MILESTONES.index(end)

    result = []
    for name in sorted(values, key=order):
        distribution = Distribution.of(values[name])
        assert distribution is not None
        result.append((name, distribution))
    return result


# --- the pod-count timeline -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Valley:
    """A fall in the pod count followed by a rise: ``before`` → ``low`` (from ``fell_at``) → ``after``."""

    fell_at: float  # unix seconds of the first sample at the lower count
    rose_at: float  # unix seconds of the first sample back up
    before: float
    low: float
    after: float

    @property
    def seconds(self) -> float:
        """How long the count stayed down before it was needed again."""
        return self.rose_at - self.fell_at

    def describe(self) -> str:
        fell = format_time(datetime.fromtimestamp(self.fell_at, tz=timezone.utc))
        rose = format_time(datetime.fromtimestamp(self.rose_at, tz=timezone.utc))
        return (
            f"{_count(self.before)} → {_count(self.low)} at {fell}, back to {_count(self.after)} at {rose} "
            f"({self.seconds:.0f} s down)"
        )


def _count(value: float) -> str:
    return f"{value:g}"


def sum_series(series: Iterable[Sequence[tuple[float, float]]]) -> list[tuple[float, float]]:
    """Samples of several series added up per timestamp (a series missing at a timestamp adds nothing)."""
    totals: dict[float, float] = {}
    for samples in series:
        for moment, value in samples:
            totals[moment] = totals.get(moment, 0.0) + value
    return sorted(totals.items())


def fill_gaps(samples: Sequence[tuple[float, float]], step: float, value: float = 0.0) -> list[tuple[float, float]]:
    """Interior gaps of more than one step filled with ``value``: ``sum(kube_pod_status_ready)`` has no sample
    while no predictor pod exists, which is a count of zero."""
    if not samples or step <= 0:
        return list(samples)
    filled = [samples[0]]
    for moment, sample in samples[1:]:
        previous = filled[-1][0]
        missing = round((moment - previous) / step) - 1
        filled.extend((previous + step * (i + 1), value) for i in range(missing))
        filled.append((moment, sample))
    return filled


def changes(samples: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The first sample and every sample whose value differs from the one before."""
    kept: list[tuple[float, float]] = []
    for moment, value in samples:
        if not kept or value != kept[-1][1]:
            kept.append((moment, value))
    return kept


def valleys(samples: Sequence[tuple[float, float]]) -> list[Valley]:
    """Every fall followed by a rise. A staircase down and up (2 → 1 → 0 → 1 → 2) is one valley: from the
    first step down to the first step up."""
    found: list[Valley] = []
    steps = changes(samples)
    fall: tuple[float, float] | None = None  # (time of the first lower sample, count before it)
    low = 0.0
    for (_, before), (moment, value) in itertools.pairwise(steps):
        if value < before:
            if fall is None:
                fall, low = (moment, before), value
            else:
                low = min(low, value)
        elif fall is not None:
            found.append(Valley(fall[0], moment, fall[1], low, value))
            fall = None
    return found


def increases(samples: Sequence[tuple[float, float]]) -> list[float]:
    """Times at which a counter went up (a restart, for a restart counter)."""
    return [moment for (_, before), (moment, value) in itertools.pairwise(samples) if value > before]
