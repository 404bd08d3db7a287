"""``RESOURCES_GPU_UNSCHEDULABLE``: predictor pods the scheduler cannot place, and what the nodes offer."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from nbhelpers.checks.resources._facts import ResourceFacts, container_named, describe_resources
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common, vllm_args
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.sources import kinds, kube
from nbhelpers.sources.kube import event_interval
from nbhelpers.util import quantities
from nbhelpers.util.times import parse_k8s_time

# cluster-autoscaler's default --max-node-provision-time: a scale-up not done by then has failed.
SCALE_UP_PATIENCE = timedelta(minutes=15)
_INSUFFICIENT = re.compile(r"(\d+) Insufficient ([A-Za-z0-9][\w./-]*[A-Za-z0-9])")
_NODES_TOTAL = re.compile(r"\d+/(\d+) nodes are available")


@dataclass(frozen=True)
class _PendingPod:
    pod: Mapping[str, Any]
    failed: tuple[common.KubeObject, ...]  # FailedScheduling events, oldest first
    message: str  # the scheduler's latest message
    scale_up: tuple[bool, str] | None  # (still within the provisioning time, evidence line)


def unschedulable(facts: ResourceFacts) -> list[Finding]:
    """One finding for the predictor pods that the scheduler cannot place (the oldest one quoted first)."""
    pending = []
    for pod in facts.pods:
        if kube.status(pod).get("phase") != "Pending" or kube.condition_true(pod, "PodScheduled"):
            continue
        failed = sorted(
            _pod_events(facts.evidence, pod, "FailedScheduling"),
            key=lambda e: _last_seen(e) or facts.evidence.observed_at,
        )
        scheduled = kube.condition(pod, "PodScheduled")
        message = _event_message(failed[-1]) if failed else str((scheduled or {}).get("message") or "")
        if failed or "nodes are available" in message:
            pending.append(_PendingPod(pod, tuple(failed), message, _scale_up_state(facts, pod)))
    return [_unschedulable_finding(facts, pending)] if pending else []


def _unschedulable_finding(facts: ResourceFacts, pending: Sequence[_PendingPod]) -> Finding:
    first = pending[0]
    message = first.message
    shortages = {name: int(count) for count, name in _INSUFFICIENT.findall(message.split("preemption:")[0])}
    total = _NODES_TOTAL.search(message)
    container = container_named(kube.pod_template_spec(first.pod), facts.container_name) or facts.serving
    lines: list[str] = []
    for entry in pending:
        lines.extend(_describe_event(event) for event in entry.failed[-1:])
        if not entry.failed:
            lines.append(f"{kube.ref(entry.pod)} PodScheduled=False: {entry.message!r}")
        if entry.scale_up is not None:
            lines.append(entry.scale_up[1])
    lines.append(describe_resources(container))
    lines.extend(_node_capacity(facts, shortages or {"nvidia.com/gpu": 0}))
    pod_requests = _pod_requests(first.pod)
    asked = [f"{resource} {pod_requests.get(resource, 'none')}" for resource in shortages]
    shortage_text = ", ".join(f"{count} node(s) Insufficient {name}" for name, count in shortages.items())
    nodes_text = f"none of the {total.group(1)} nodes" if total else "no node"
    reason = shortage_text or message
    others = f" ({len(pending) - 1} more predictor pod(s) Pending the same way)" if len(pending) > 1 else ""
    summary = (
        f"{kube.ref(first.pod)} has been Pending for {_minutes(_age(facts, first.pod))}{others}: {nodes_text} "
        f"can take it ({reason}). Each pod asks for {'; '.join(asked) or 'resources no node offers'}. Without "
        "these pods the predictor has fewer (or no) ready replicas, so requests queue on the others or get 503."
    )
    severity = None
    title = f"{len(pending)} pod(s) Pending: {reason}"
    if all(entry.scale_up is not None and entry.scale_up[0] for entry in pending):
        severity = Severity.INFO
        title = f"{len(pending)} pod(s) Pending while a cluster-autoscaler scale-up provisions a node ({reason})"
        summary += (
            " A scale-up was triggered less than 15 minutes ago (cluster-autoscaler's default node provision "
            "time): the pods may still be scheduled, and that wait is cold start."
        )
    return Finding(
        code="RESOURCES_GPU_UNSCHEDULABLE",
        title=title,
        summary=summary,
        objects=(facts.isvc_ref, *(kube.ref(entry.pod) for entry in pending)),
        evidence=tuple(lines),
        fix=Fix(what=_capacity_remediation(facts, shortages, pod_requests)),
        severity=severity,
    )


def _age(facts: ResourceFacts, pod: Mapping[str, Any]) -> timedelta:
    created = parse_k8s_time(kube.created(pod))
    return facts.evidence.observed_at - created if created is not None else timedelta(0)


def _pod_requests(pod: Mapping[str, Any]) -> dict[str, str]:
    totals: dict[str, Decimal] = {}
    for container in kube.containers(kube.pod_template_spec(pod)):
        for name, value in common.effective_requests(container).items():
            amount = quantities.try_parse(value)
            if amount is not None:
                totals[str(name)] = totals.get(str(name), Decimal(0)) + amount
    return {
        name: (quantities.format_bytes(amount) if name == "memory" else f"{amount.normalize():f}")
        for name, amount in totals.items()
    }


def _node_capacity(facts: ResourceFacts, shortages: Mapping[str, int]) -> list[str]:
    failure = facts.evidence.failure(kinds.NODE.key)
    if failure is not None:
        return [f"nodes could not be read ({failure.status}): allocatable capacity unknown"]
    nodes = sorted(facts.evidence.of(kinds.NODE), key=kube.name)
    lines = []
    for resource in shortages:
        offering = []
        for node in nodes:
            amount = quantities.try_parse((kube.status(node).get("allocatable") or {}).get(resource))
            if amount is not None and amount > 0:
                shown = quantities.format_bytes(amount) if resource == "memory" else f"{amount.normalize():f}"
                offering.append(f"{kube.name(node)} {shown}")
        if offering:
            lines.append(f"nodes with allocatable {resource}: {', '.join(offering)} ({len(nodes)} nodes read)")
        else:
            lines.append(f"no node offers {resource} ({len(nodes)} nodes read)")
    return lines


def _scale_up_state(facts: ResourceFacts, pod: Mapping[str, Any]) -> tuple[bool, str] | None:
    """(still within the provisioning time, evidence line) for the pod's latest scale-up event."""
    triggered = _pod_events(facts.evidence, pod, "TriggeredScaleUp")
    refused = _pod_events(facts.evidence, pod, "NotTriggerScaleUp")
    latest = max(triggered + refused, key=lambda e: _last_seen(e) or facts.evidence.observed_at, default=None)
    if latest is None:
        return None
    seen = _last_seen(latest) or facts.evidence.observed_at
    waiting = latest.get("reason") == "TriggeredScaleUp" and facts.evidence.observed_at - seen < SCALE_UP_PATIENCE
    return waiting, _describe_event(latest)


def _capacity_remediation(facts: ResourceFacts, shortages: Mapping[str, int], requests: Mapping[str, str]) -> str:
    gpu = next((name for name in shortages if common.is_accelerator_resource(name)), None)
    options = []
    if gpu is not None:
        tp = vllm_args.int_flag(facts.server, "tensor-parallel-size")
        options.append(
            f"ask for fewer GPUs per pod if the model fits ({gpu} {requests.get(gpu, '?')} now"
            + (f", --tensor-parallel-size {tp}" if tp else "")
            + "; GPUs and tensor-parallel size change together)"
        )
        options.append("free GPUs held by other workloads (kubectl describe nodes | grep -A8 'Allocated resources')")
        options.append(
            "add GPU nodes: scale the GPU node pool, or let the cluster autoscaler do it (a node group that "
            "offers this GPU, with the pod's tolerations and node selector)"
        )
    else:
        options.append("lower the pod's requests to what it uses, or add nodes with more allocatable capacity")
    return (
        "Capacity, not a manifest field, blocks the pod, so there is no patch. Options: "
        + "; ".join(options)
        + ". Check with: kubectl describe pod <pod> (Events) and kubectl get nodes -o "
        "custom-columns=NAME:.metadata.name,GPU:.status.allocatable.nvidia\\.com/gpu."
    )


def _event_subject(event: common.KubeObject) -> str:
    involved = event.get("involvedObject") or event.get("regarding") or {}
    return str(involved.get("name") or "")


def _event_count(event: common.KubeObject) -> int:
    series = event.get("series") or {}
    return int(series.get("count") or event.get("count") or 1)


def _event_message(event: common.KubeObject) -> str:
    return str(event.get("message") or event.get("note") or "").strip()


def _describe_event(event: common.KubeObject) -> str:
    first, last = event_interval(event)
    when = ""
    if first is not None and last is not None and last != first:
        when = f" ({first:%H:%M:%S}–{last:%H:%M:%S}Z)"
    elif last is not None:
        when = f" ({last:%H:%M:%S}Z)"
    return f"event {event.get('reason')} on {_event_subject(event)}: {_event_message(event)!r} ×{_event_count(event)}{when}"


def _pod_events(evidence: Evidence, pod: Mapping[str, Any], reason: str) -> list[common.KubeObject]:
    return [e for e in evidence.events_about("Pod", kube.name(pod)) if e.get("reason") == reason]


def _last_seen(event: common.KubeObject) -> datetime | None:
    return event_interval(event)[1]


def _minutes(duration: timedelta) -> str:
    minutes = duration.total_seconds() / 60
    return f"{math.floor(minutes)} min" if minutes >= 1 else f"{int(duration.total_seconds())} s"
