"""``WORKLOAD_GROUP_INCOMPLETE``: a multi-node (LeaderWorkerSet) group of an LLMInferenceService with a worker pod
missing, unschedulable or failing, so its leader's vLLM engine waits for a rank that never joins.

Reports behind it: vllm-project/production-stack#653 (the head pod stayed 0/1 "Ray cluster status: 1/2 nodes
alive" while the worker pod was never started), dsx-ai-factory/workload-map#228 (a 1-leader/3-worker LWS whose
workers stayed Pending on insufficient nvidia.com/gpu), kserve/kserve#6043 (the LWS status KServe turns into
WorkerWorkloadReady). The pods are judged, not the LWS status: a group's readiness is what the leader reports.
"""

from __future__ import annotations

from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import lws
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.sources import kube


def group_incomplete(evidence: Evidence) -> Finding | None:
    """One finding for the service's incomplete groups, the first (a leader not ready) described in full."""
    if not evidence.target.is_llmisvc:
        return None
    incomplete = lws.incomplete_groups(evidence)
    if not incomplete:
        return None
    first = incomplete[0]
    blocked = first.blocked_workers
    worker = blocked[0]
    lines = [lws.describe_status(first.lws)]
    for group in incomplete[:3]:
        leader = group.leader
        leader_state = "ready" if group.leader_ready else "not ready"
        lines.append(f"group {group.index} leader {leader.name}: {leader_state}" + _leader_detail(leader))
        lines += [f"group {group.index} worker {m.index} ({m.name}): {m.trouble}" for m in group.blocked_workers[:3]]
    others = len(incomplete) - 1
    role = lws.role(first.lws)
    waiting = not first.leader_ready
    indices = ", ".join(str(member.index) for member in blocked)
    role_text = "" if role == "both" else f" ({role})"  # a service without a prefill workload has one role
    summary = (
        f"Group {first.index} of {kube.name(first.lws)}{role_text} needs {first.size} pods, and worker {indices} "
        f"is not running: {worker.trouble.rstrip('.')}. "
        + (
            f"Its leader {first.name} is not ready: vLLM's multi-node engine starts only when every rank of the "
            "group has joined, so the leader waits for this worker and never serves; the endpoint picker and "
            "the Gateway have no endpoint in this group."
            if waiting
            else f"Its leader {first.name} reports ready for now, but the group runs short of a rank: a restart "
            "of any member recreates the group (RecreateGroupOnPodRestart), which then waits for this worker."
        )
        + (f" {others} more group(s) are incomplete the same way." if others else "")
    )
    return Finding(
        code="WORKLOAD_GROUP_INCOMPLETE",
        title=f"multi-node group {first.name} {'waits for' if waiting else 'is short of'} worker {indices} "
        f"({_short(worker.trouble)})",
        summary=summary,
        objects=(
            kube.ref(evidence.isvc),
            kube.ref(first.lws),
            *(kube.ref(m.pod) for m in (first.leader, *blocked) if m.pod is not None),
        ),
        evidence=tuple(lines),
        fix=Fix(
            what=f"Make worker {indices} of group {first.index} run: {_remedy(worker)} The LeaderWorkerSet is "
            "KServe's, so change the LLMInferenceService's spec.worker (or spec.prefill.worker), not the "
            f"LeaderWorkerSet; watch the group with: kubectl get pods -n {evidence.target.namespace} "
            f"-l {kube.LWS_NAME_LABEL}={kube.name(first.lws)},{kube.LWS_GROUP_INDEX_LABEL}={first.index}"
        ),
        severity=None if waiting else Severity.WARNING,
    )


def _leader_detail(leader: lws.Member) -> str:
    if leader.pod is None:
        return " (pod missing)"
    if leader.trouble:
        return f" ({leader.trouble})"
    ready = kube.condition(leader.pod, "Ready")
    return f" ({ready.get('reason')})" if ready and ready.get("reason") else ""


def _short(trouble: str) -> str:
    head = trouble.split(":", 1)[0]
    return head if len(head) <= 60 else head[:57] + "..."


def _remedy(worker: lws.Member) -> str:
    trouble = worker.trouble
    if worker.pod is None:
        return "find why its StatefulSet does not create it (quota, admission webhook; see its events)."
    if trouble.startswith(("Pending, unschedulable", "Pending, not scheduled")):
        return (
            "every pod of a group needs its own node with the same GPUs as the leader; free or add a node that "
            "can take it, or lower the parallelism so the group needs fewer pods."
        )
    if "CrashLoopBackOff" in trouble or "last exit" in trouble:
        return "read its previous log (kubectl logs --previous) and fix what makes it exit."
    return "fix what its state names (image, configuration, volume)."
