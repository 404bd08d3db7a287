"""Who took the predictor's pods away, when an autoscaler did not: rollouts, evictions, and nodes that went.

A dip in the ready pods is churn (``COLDSTART_CHURN``) only when the autoscaler released capacity it needed again.
The same dip comes from:

- **a rollout**: a new ReplicaSet (RawDeployment; KServe's default strategy lets 25 % of the pods be unavailable,
  and kserve/kserve#3768 shows an update dropping most of them at once) or a new Knative Revision. It lasts from
  the new ReplicaSet's or Revision's creation until the last ``ScalingReplicaSet`` event that scales an older one
  down (the Deployment controller's ``Scaled down replica set <old> to N``), and at least :data:`ROLLOUT_SPAN`;
- **an eviction or preemption**, in the pods' own events: ``Evicted`` (kubelet pressure, the eviction API used by
  drains, Karpenter and cluster-autoscaler), ``TaintManagerEviction`` (a NoExecute taint such as a node that went
  not-ready), ``Preempted``/``Preempting`` (a higher-priority pod), ``NodeNotReady``, ``NodeShutdown`` (graceful
  node shutdown, how spot and preemptible VMs are reclaimed), cluster-autoscaler's ``ScaleDown``;
- **a node that went away** under a predictor pod: its Ready condition turned False/Unknown, or a taint that drains
  or reclaims it was added (``node.kubernetes.io/unschedulable``, ``not-ready``, ``unreachable``,
  ``ToBeDeletedByClusterAutoscaler``, ``karpenter.sh/disrupted``, the spot-interruption taints), in the window.

Each :class:`Disruption` has a time span; :func:`explaining` picks those that overlap a dip.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from nbhelpers.evidence.model import Evidence
from nbhelpers.sources import kinds, kube
from nbhelpers.util.times import format_time, parse_k8s_time

ROLLOUT = "rollout"
EVICTION = "eviction"
NODE = "node"
# A rollout of an LLM lasts at least a model load; without events to bound it, this long after the new ReplicaSet.
ROLLOUT_SPAN = 600.0
EVICTION_REASONS = frozenset(
    {"Evicted", "TaintManagerEviction", "Preempted", "Preempting", "NodeNotReady", "NodeShutdown", "ScaleDown"}
)
_EVICTION_WORDS = re.compile(r"preempt|evict|spot|node shutdown|node is not ready|scale down|reclaim", re.IGNORECASE)
NODE_TAINTS = (
    "node.kubernetes.io/unschedulable",
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "ToBeDeletedByClusterAutoscaler",
    "karpenter.sh/disrupted",
    "karpenter.sh/disruption",
    "cloud.google.com/impending-node-termination",
    "aws-node-termination-handler/spot-itn",
)
_SCALED_DOWN = re.compile(r"Scaled down replica set (\S+)")
_ASSIGNED = re.compile(r"Successfully assigned \S+ to (\S+)")


@dataclass(frozen=True)
class Disruption:
    """Pods removed by something other than the autoscaler, from ``start`` to ``end`` (unix seconds)."""

    kind: str
    start: float
    end: float
    text: str

    def overlaps(self, start: float, end: float) -> bool:
        return self.start <= end and start <= self.end


def disruptions(evidence: Evidence) -> list[Disruption]:
    """Every rollout, eviction and node loss of the predictor the evidence shows, in time order."""
    found = [*_rollouts(evidence), *_evictions(evidence), *_node_losses(evidence)]
    return sorted(found, key=lambda item: (item.start, item.kind, item.text))


def explaining(found: Sequence[Disruption], fell_at: float, rose_at: float, slack: float) -> list[Disruption]:
    """The disruptions that overlap a dip from ``fell_at`` to ``rose_at``; ``slack`` (a scrape step or two) covers
    a removal seen one sample late."""
    return [item for item in found if item.overlaps(fell_at - slack, rose_at)]


def _seconds(moment: datetime | None) -> float | None:
    return moment.timestamp() if moment is not None else None


def _predictor(evidence: Evidence, kind: kinds.Kind) -> list[Mapping[str, Any]]:
    return [
        obj
        for obj in evidence.of(kind)
        if kube.namespace(obj) == evidence.target.namespace
        and kube.labels(obj).get(kube.ISVC_LABEL) == evidence.target.isvc
    ]


def _created(obj: Mapping[str, Any]) -> float | None:
    return _seconds(parse_k8s_time(kube.created(obj)))


def _rollouts(evidence: Evidence) -> list[Disruption]:
    """Each ReplicaSet or Revision after the first one, from its creation to the last scale-down of an older one."""
    found = []
    scale_downs = _scale_downs(evidence.events)
    for kind, what in ((kinds.REPLICA_SET, "ReplicaSet"), (kinds.KNATIVE_REVISION, "Revision")):
        dated = sorted(
            (created, kube.name(obj)) for obj in _predictor(evidence, kind) if (created := _created(obj)) is not None
        )
        for index, (created, name) in enumerate(dated[1:], start=1):
            older = {older_name for _, older_name in dated[:index]}
            end = max([created + ROLLOUT_SPAN, *(moment for rs, moment in scale_downs if rs in older)])
            previous = dated[index - 1][1]
            found.append(
                Disruption(
                    ROLLOUT, created, end, f"rollout: {what} {name} created at {_clock(created)}, replacing {previous}"
                )
            )
    return found


def _clock(moment: float) -> str:
    return format_time(datetime.fromtimestamp(moment, tz=timezone.utc))


def _scale_downs(events: Iterable[Mapping[str, Any]]) -> list[tuple[str, float]]:
    """(ReplicaSet, last time) of the Deployment controller's scale-downs."""
    found = []
    for event in events:
        if event.get("reason") != "ScalingReplicaSet":
            continue
        match = _SCALED_DOWN.search(str(event.get("message") or ""))
        last = _seconds(kube.event_interval(event)[1])
        if match is not None and last is not None:
            found.append((match.group(1), last))
    return found


def _evictions(evidence: Evidence) -> list[Disruption]:
    prefix = f"{evidence.target.isvc}-predictor"
    found = []
    for event in evidence.events:
        involved = event.get("involvedObject") or event.get("regarding") or {}
        if involved.get("kind") != "Pod" or not str(involved.get("name") or "").startswith(prefix):
            continue
        reason = str(event.get("reason") or "")
        message = str(event.get("message") or event.get("note") or "")
        if reason not in EVICTION_REASONS and not (reason == "Killing" and _EVICTION_WORDS.search(message)):
            continue
        first, last = (_seconds(moment) for moment in kube.event_interval(event))
        if first is None or last is None:
            continue
        found.append(Disruption(EVICTION, first, last, f"{reason} on Pod {involved.get('name')}: {message.strip()}"))
    return found


def _node_losses(evidence: Evidence) -> list[Disruption]:
    """Nodes that ran a predictor pod (now, or by a Scheduled event in the window) and went not-ready or were
    tainted for removal."""
    hosts = {str(kube.spec(pod).get("nodeName")) for pod in evidence.of(kinds.POD) if kube.spec(pod).get("nodeName")}
    for event in evidence.events:
        if event.get("reason") == "Scheduled":
            match = _ASSIGNED.search(str(event.get("message") or ""))
            if match is not None:
                hosts.add(match.group(1))
    found = []
    for node in evidence.of(kinds.NODE):
        name = kube.name(node)
        if name not in hosts:
            continue
        ready = kube.condition(node, "Ready")
        if ready is not None and str(ready.get("status")) != "True":
            since = _seconds(parse_k8s_time(ready.get("lastTransitionTime")))
            if since is not None:
                found.append(Disruption(NODE, since, since, f"Node {name} {kube.describe_condition(ready)}"))
        for taint in kube.spec(node).get("taints") or []:
            key = str(taint.get("key") or "")
            added = _seconds(parse_k8s_time(taint.get("timeAdded")))
            if key in NODE_TAINTS and added is not None:
                found.append(Disruption(NODE, added, added, f"Node {name} tainted {key}:{taint.get('effect')}"))
    return found
