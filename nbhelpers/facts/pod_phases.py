"""Cold-start arithmetic: how long each predictor pod took from creation to Ready, phase by phase, and how
the count of ready pods moved over the window (pure functions, no I/O).

**Milestones.** A pod's cold start runs through: created (``metadata.creationTimestamp``) → scheduled
(the ``PodScheduled`` condition's transition, else the ``Scheduled`` event) → image pulled (the serving
container's ``Pulled`` event; kubelet writes ``Successfully pulled image "x" in 1m2.5s`` or ``Container
image "x" already present on machine``) → container started (the serving container's ``startedAt``; the
earlier of the current and the last terminated run) → Ready (the ``Ready`` condition's transition). A
milestone that cannot be seen (events expire after about an hour) merges the two phases around it, so
a phase is always named by the milestones it spans.

Between the image pull and the container start lie the init containers (KServe's storage-initializer
downloads the model there) and volume mounts; between the start and Ready lies the model load.

**Waiting for a node.** A pod that was refused by the scheduler (``FailedScheduling``) and scheduled after
a cluster-autoscaler scale-up (``TriggeredScaleUp``) paid that wait as part of its cold start (docs/upstream-facts.md):
it is in the scheduling phase.

**Still starting.** A pod that has never been ready gives a lower bound (observation time − creation),
unless it is stuck for another reason that other steps own: unschedulable, restarting, or failing to pull
or create its container.

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

from nbhelpers.models.load_time import nearest_rank
from nbhelpers.sources import kube
from nbhelpers.util.times import duration_seconds, format_time, parse_k8s_time

CREATED = "created"
SCHEDULED = "scheduled"
PULLED = "image pulled"
STARTED = "container started"
READY = "Ready"
MILESTONES = (CREATED, SCHEDULED, PULLED, STARTED, READY)

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
class PodPhases:
    """The cold start of one pod: its milestones and what the events say about scheduling and the pull."""

    pod: str
    milestones: tuple[tuple[str, datetime], ...]  # known milestones in order
    ready: bool
    stuck: str  # why a not-ready pod is not counted as still starting ("" when it is, or when ready)
    restarts: int
    observed_at: datetime
    pull_seconds: float | None = None  # as the kubelet reported it
    image_cached: bool = False
    failed_scheduling: int = 0  # FailedScheduling events (count)
    scale_up: str = ""  # the cluster-autoscaler's TriggeredScaleUp message

    def at(self, milestone: str) -> datetime | None:
        return next((moment for name, moment in self.milestones if name == milestone), None)

    @property
    def created_at(self) -> datetime | None:
        return self.at(CREATED)

    @property
    def total(self) -> float | None:
        """Seconds from creation to Ready (None when either is unknown)."""
        created, ready = self.at(CREATED), self.at(READY)
        if created is None or ready is None or ready < created:
            return None
        return (ready - created).total_seconds()

    @property
    def starting_for(self) -> float | None:
        """For a pod that is still starting: seconds since its creation (a lower bound of its cold start)."""
        if self.ready or self.stuck or self.created_at is None:
            return None
        return max(0.0, (self.observed_at - self.created_at).total_seconds())

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
        if self.total is not None:
            text = f"{head}: Ready after {self.total:.0f} s"
        elif self.starting_for is not None:
            text = f"{head}: not ready after {self.starting_for:.0f} s (still starting: a lower bound)"
        elif self.stuck:
            text = f"{head}: not counted ({self.stuck})"
        else:
            text = f"{head}: cold start not visible"
        if parts and self.total is not None:
            text += " = " + " + ".join(parts)
        elif parts:
            text += "; " + ", ".join(parts)
        notes = []
        if self.waited_for_node:
            notes.append(
                f"waited for a node: {self.failed_scheduling}× FailedScheduling"
                + (f", then {self.scale_up!r}" if self.scale_up else "")
            )
        if self.pull_seconds is not None:
            notes.append(f"kubelet: image pulled in {self.pull_seconds:g} s")
        elif self.image_cached:
            notes.append("image already on the node")
        if self.restarts:
            notes.append(f"{self.restarts} restart(s) of the serving container included")
        return text + (f" ({'; '.join(notes)})" if notes else "")


def measure_pod(
    pod: Mapping[str, Any], events: Iterable[Mapping[str, Any]], container: str, observed_at: datetime
) -> PodPhases:
    """The phases of ``pod``'s cold start; ``events`` are the window's events (any object), ``container`` the
    serving container's name."""
    metadata = pod.get("metadata") or {}
    status = pod.get("status") or {}
    name = str(metadata.get("name") or "")
    image = next(
        (
            str(c.get("image") or "")
            for c in (pod.get("spec") or {}).get("containers") or []
            if c.get("name") == container
        ),
        "",
    )
    own = sorted(events_of_pod(events, name), key=lambda e: kube.event_interval(e)[0] or observed_at)
    conditions = {str(c.get("type")): c for c in status.get("conditions") or []}
    found: dict[str, datetime] = {}
    created = parse_k8s_time(metadata.get("creationTimestamp"))
    if created is not None:
        found[CREATED] = created
    scheduled = conditions.get("PodScheduled") or {}
    scheduled_at = parse_k8s_time(scheduled.get("lastTransitionTime")) if scheduled.get("status") == "True" else None
    failed_scheduling, scale_up = 0, ""
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
        elif (
            reason == "Pulled" and PULLED not in found and first is not None and _for_container(event, container, image)
        ):
            found[PULLED] = first
            pulled = _PULLED.search(_message(event))
            pull_seconds = duration_seconds(pulled.group(2)) if pulled else None
            cached = _PRESENT.search(_message(event)) is not None
    if scheduled_at is not None:
        found[SCHEDULED] = scheduled_at
    started_at, restarts, stuck_reason = _container_start(status, container)
    if started_at is not None:
        found[STARTED] = started_at
    ready_condition = conditions.get("Ready") or {}
    ready = ready_condition.get("status") == "True"
    ready_at = parse_k8s_time(ready_condition.get("lastTransitionTime")) if ready else None
    if ready_at is not None:
        found[READY] = ready_at
    stuck = "" if ready else _stuck(status, scheduled_at, started_at, ready_condition, restarts, stuck_reason)
    ordered = tuple((milestone, found[milestone]) for milestone in MILESTONES if milestone in found)
    return PodPhases(
        name, ordered, ready, stuck, restarts, observed_at, pull_seconds, cached, failed_scheduling, scale_up
    )


def _for_container(event: Mapping[str, Any], container: str, image: str) -> bool:
    """Whether a pull event is about the serving container (by its field path, else by its image)."""
    field = _CONTAINER_FIELD.search(str(_involved(event).get("fieldPath") or ""))
    if field is not None:
        return field.group(1) == container
    return bool(image) and f'"{image}"' in _message(event)


def _container_start(status: Mapping[str, Any], container: str) -> tuple[datetime | None, int, str]:
    """(first start seen, restarts, waiting reason) of the serving container."""
    for entry in status.get("containerStatuses") or []:
        if entry.get("name") != container:
            continue
        state = entry.get("state") or {}
        starts = [
            parse_k8s_time((state.get("running") or {}).get("startedAt")),
            parse_k8s_time(((entry.get("lastState") or {}).get("terminated") or {}).get("startedAt")),
        ]
        known = [moment for moment in starts if moment is not None]
        waiting = str((state.get("waiting") or {}).get("reason") or "")
        return (min(known) if known else None), int(entry.get("restartCount") or 0), waiting
    return None, 0, ""


def _stuck(
    status: Mapping[str, Any],
    scheduled_at: datetime | None,
    started_at: datetime | None,
    ready_condition: Mapping[str, Any],
    restarts: int,
    waiting: str,
) -> str:
    """Why a pod that is not ready is not simply starting ("" when it is)."""
    if status.get("phase") in ("Succeeded", "Failed"):
        return f"pod {status.get('phase')}"
    if scheduled_at is None:
        return "not scheduled: see the resources step"
    if waiting in STUCK_WAITING:
        return f"serving container waiting: {waiting}"
    if restarts:
        return f"serving container restarted {restarts}×: see the probes and resources steps"
    lost_at = parse_k8s_time(ready_condition.get("lastTransitionTime"))
    if started_at is not None and lost_at is not None and lost_at > started_at + _READY_FALSE_SLACK:
        return "was ready before and lost readiness"
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
