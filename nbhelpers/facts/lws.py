"""The LeaderWorkerSets KServe renders for a multi-node LLMInferenceService, and the pods of each group.

KServe (pkg/controller/v1alpha2/llmisvc/workload_multi_node.go) names them ``<name>-kserve-mn`` (decode or both)
and ``<name>-kserve-mn-prefill``, labelled like the service's other workloads; ``leaderWorkerTemplate.size`` is
the pods per group, leader included. The LWS controller (kubernetes-sigs/lws pkg/controllers) creates the leaders
as the StatefulSet ``<lws>`` (pods ``<lws>-<group>``, ``worker-index=0``) and, per leader, the worker StatefulSet
``<lws>-<group>`` (pods ``<lws>-<group>-<index>``, index 1..size-1), every pod labelled with its ``group-index`` and
``worker-index``. vLLM's multi-node engine starts only when every rank of its group has joined, so a group with a
worker missing or stuck has a leader that never serves (docs/upstream-facts.md#leaderworkerset).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from nbhelpers.evidence.model import Evidence
from nbhelpers.sources import kinds, kube
from nbhelpers.sources.kube import KubeObject
from nbhelpers.util.times import parse_k8s_time

# A scheduled pod still creating its containers (image pull, volumes) is only a problem once it takes this long.
SLOW_START = timedelta(minutes=10)
WAITING_TROUBLE = frozenset(
    {
        "CrashLoopBackOff",
        "ImagePullBackOff",
        "ErrImagePull",
        "CreateContainerConfigError",
        "CreateContainerError",
        "InvalidImageName",
        "RunContainerError",
    }
)


@dataclass(frozen=True)
class Member:
    """One pod slot of a group: the pod when it exists, and what keeps it from running (``""``: nothing)."""

    index: int  # worker-index: 0 is the leader
    name: str
    pod: KubeObject | None
    trouble: str


@dataclass(frozen=True)
class Group:
    """One leader and its workers: group ``index`` of LeaderWorkerSet ``lws``."""

    lws: KubeObject
    index: int
    size: int
    members: tuple[Member, ...]  # every slot 0..size-1, in index order

    @property
    def leader(self) -> Member:
        return self.members[0]

    @property
    def name(self) -> str:
        return self.leader.name

    @property
    def blocked_workers(self) -> list[Member]:
        return [member for member in self.members[1:] if member.trouble]

    @property
    def leader_ready(self) -> bool:
        return self.leader.pod is not None and kube.pod_ready(self.leader.pod)


def leader_worker_sets(evidence: Evidence) -> list[KubeObject]:
    """The service's LeaderWorkerSets: KServe's two names, or any labelled as this service's, main first."""
    name = evidence.target.isvc
    wanted = (f"{name}-kserve-mn", f"{name}-kserve-mn-prefill")
    found = [
        obj
        for obj in evidence.of(kinds.LEADER_WORKER_SET)
        if kube.namespace(obj) == evidence.target.namespace
        and (kube.name(obj) in wanted or kube.labels(obj).get(kube.LLMISVC_NAME_LABEL) == name)
    ]
    return sorted(
        found, key=lambda obj: (kube.name(obj) not in wanted, kube.name(obj).endswith("-prefill"), kube.name(obj))
    )


def group_size(lws: Mapping[str, Any]) -> int:
    """Pods per group, leader included (``leaderWorkerTemplate.size``, LWS's default 1)."""
    size = (kube.spec(lws).get("leaderWorkerTemplate") or {}).get("size")
    return int(size) if isinstance(size, int) and size > 0 else 1


def desired_groups(lws: Mapping[str, Any]) -> int:
    replicas = kube.spec(lws).get("replicas")
    return int(replicas) if isinstance(replicas, int) and replicas >= 0 else 1


def role(lws: Mapping[str, Any]) -> str:
    """The llm-d role of the set's leaders as KServe labels them (``both`` for a service without a prefill workload),
    else by the set's name (``<name>-kserve-mn-prefill`` or the main ``<name>-kserve-mn``)."""
    template = ((kube.spec(lws).get("leaderWorkerTemplate") or {}).get("leaderTemplate") or {}).get("metadata") or {}
    labelled = (template.get("labels") or {}).get(kube.LLMISVC_ROLE_LABEL)
    if isinstance(labelled, str) and labelled:
        return labelled
    return "prefill" if kube.name(lws).endswith("-prefill") else "decode"


def groups(evidence: Evidence, lws: KubeObject) -> list[Group]:
    """Every group whose leader pod exists, its slots filled with the pods found (by LWS's labels)."""
    set_name = kube.name(lws)
    size = group_size(lws)
    by_slot: dict[tuple[int, int], KubeObject] = {}
    for pod in evidence.of(kinds.POD):
        labels = kube.labels(pod)
        if kube.namespace(pod) != kube.namespace(lws) or labels.get(kube.LWS_NAME_LABEL) != set_name:
            continue
        slot = _slot(labels)
        if slot is not None:
            by_slot[slot] = pod
    found = []
    for group in sorted({group for group, index in by_slot if index == 0}):
        members = tuple(
            _member(
                evidence, index, by_slot.get((group, index)), f"{set_name}-{group}" + (f"-{index}" if index else "")
            )
            for index in range(size)
        )
        found.append(Group(lws, group, size, members))
    return found


def _slot(labels: Mapping[str, str]) -> tuple[int, int] | None:
    group, index = labels.get(kube.LWS_GROUP_INDEX_LABEL, ""), labels.get(kube.LWS_WORKER_INDEX_LABEL, "")
    return (int(group), int(index)) if group.isdigit() and index.isdigit() else None


def _member(evidence: Evidence, index: int, pod: KubeObject | None, name: str) -> Member:
    if pod is None:
        return Member(index, name, None, _missing_reason(evidence, name))
    return Member(index, name, pod, pod_trouble(evidence, pod))


def _missing_reason(evidence: Evidence, name: str) -> str:
    """Why a worker pod does not exist: the latest warning about its StatefulSet (``<lws>-<group>``), else about the
    pod's name (a pod deleted after its events)."""
    statefulset = name.rsplit("-", 1)[0]
    for events in (evidence.events_about("StatefulSet", statefulset), evidence.events_about("Pod", name)):
        warnings = [event for event in events if event.get("type") == "Warning"]
        if warnings:
            latest = max(warnings, key=lambda event: kube.event_interval(event)[1] or evidence.observed_at)
            return f"pod {name} does not exist; {latest.get('reason')}: {_message(latest)}"
    return f"pod {name} does not exist"


def pod_trouble(evidence: Evidence, pod: KubeObject) -> str:
    """What keeps ``pod`` from running, in the kubelet's or scheduler's words; ``""`` when it runs (or finished)."""
    status = kube.status(pod)
    scheduled = kube.condition(pod, "PodScheduled")
    if status.get("phase") == "Pending" and scheduled is not None and str(scheduled.get("status")) != "True":
        failed = [e for e in evidence.events_about("Pod", kube.name(pod)) if e.get("reason") == "FailedScheduling"]
        latest = max(failed, key=lambda e: kube.event_interval(e)[1] or evidence.observed_at) if failed else None
        message = _message(latest) if latest is not None else str(scheduled.get("message") or "")
        reason = str(scheduled.get("reason") or "Unschedulable")
        state = "unschedulable" if reason == "Unschedulable" else f"not scheduled ({reason})"
        return f"Pending, {state}: {message}".rstrip(": ")
    statuses = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
    for container in statuses:
        waiting = (container.get("state") or {}).get("waiting") or {}
        reason = str(waiting.get("reason") or "")
        if reason in WAITING_TROUBLE:
            return _waiting_text(container, reason, waiting)
    if status.get("phase") == "Failed":
        return f"Failed: {status.get('reason') or ''} {status.get('message') or ''}".strip()
    if status.get("phase") == "Pending" and _age(evidence, pod) >= SLOW_START:
        reasons = [
            str(((c.get("state") or {}).get("waiting") or {}).get("reason") or "")
            for c in status.get("containerStatuses") or []
        ]
        waiting = f" ({', '.join(r for r in reasons if r)})" if any(reasons) else ""
        return f"Pending{waiting} for {int(_age(evidence, pod).total_seconds() // 60)} min"
    return ""


def _age(evidence: Evidence, pod: KubeObject) -> timedelta:
    created = parse_k8s_time(kube.created(pod))
    return evidence.observed_at - created if created is not None else timedelta(0)


def _waiting_text(container: Mapping[str, Any], reason: str, waiting: Mapping[str, Any]) -> str:
    text = f"{container.get('name')} waiting {reason}"
    restarts = int(container.get("restartCount") or 0)
    if restarts:
        text += f", {restarts} restarts"
    last = (container.get("lastState") or {}).get("terminated") or {}
    if last:
        text += f"; last exit {last.get('exitCode')} ({last.get('reason') or 'Error'})"
        if last.get("message"):
            text += f": {str(last['message']).strip()[:300]}"
    elif waiting.get("message"):
        text += f": {str(waiting['message']).strip()[:300]}"
    return text


def _message(event: Mapping[str, Any]) -> str:
    return str(event.get("message") or event.get("note") or "").strip()


def describe_status(lws: Mapping[str, Any]) -> str:
    """``LeaderWorkerSet .../name: 2 group(s) of 2 pods wanted, 1 ready; Available=False (...)``."""
    status = kube.status(lws)
    parts = [
        f"{kube.ref(lws)}: {desired_groups(lws)} group(s) of {group_size(lws)} pod(s) wanted, "
        f"{int(status.get('readyReplicas') or 0)} ready"
    ]
    parts += [kube.describe_condition(entry) for entry in kube.conditions(lws)]
    return "; ".join(parts)


def incomplete_groups(evidence: Evidence) -> list[Group]:
    """Groups of the service's LeaderWorkerSets with a worker missing or stuck, leaders not ready first."""
    found = [group for lws in leader_worker_sets(evidence) for group in groups(evidence, lws) if group.blocked_workers]
    return sorted(found, key=lambda group: (group.leader_ready, kube.name(group.lws), group.index))
