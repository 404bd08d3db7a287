"""A multi-node LLMInferenceService (issue #18): KServe's LeaderWorkerSet ``<name>-kserve-mn``, one group of a leader
and a worker. From vllm-project/production-stack#653 and dsx-ai-factory/workload-map#228: a worker that finds no node
leaves the leader waiting for its rank, never ready. ``WORKLOAD_GROUP_INCOMPLETE`` names the group, the worker's index
and the scheduler's reason; a complete group raises nothing."""

from __future__ import annotations

import copy
from typing import Any

from builders import evidence_from_objects
from check_cases import load_case, only, serious

from nbhelpers.checks import STEP_IDS, resources
from nbhelpers.evidence.model import LLM_INFERENCE_SERVICE, Evidence
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import rank_root_causes

HEALTHY = ("checks/healthy/llmisvc.yaml", "checks/healthy/llmisvc_multinode.yaml")
PENDING = "checks/WORKLOAD_GROUP_INCOMPLETE/llmisvc_worker_pending.yaml"
# The single-node Deployment and its pods, which a multi-node service does not have.
MULTINODE_DROPPED = (
    "Deployment/llm/llama-llmd-kserve",
    "Pod/llm/llama-llmd-kserve-6d8f7c9b5-4xk2p",
    "Pod/llm/llama-llmd-kserve-6d8f7c9b5-9tq7m",
)
LEADER = "llama-llmd-kserve-mn-0"
WORKER = "llama-llmd-kserve-mn-0-1"


def _objects(*files: str) -> list[dict[str, Any]]:
    return copy.deepcopy(load_case(*HEALTHY, *files, drop=MULTINODE_DROPPED))


def _evidence(objects: list[dict[str, Any]]) -> Evidence:
    return evidence_from_objects(objects, "llm", "llama-llmd", target_kind=LLM_INFERENCE_SERVICE)


def _pod(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(obj for obj in objects if obj["kind"] == "Pod" and obj["metadata"]["name"] == name)


def test_a_complete_group_raises_nothing() -> None:
    assert serious(resources.run(_evidence(_objects()))) == []


def test_a_worker_without_a_node_keeps_the_leader_from_serving() -> None:
    finding = only(resources.run(_evidence(_objects(PENDING))), "WORKLOAD_GROUP_INCOMPLETE")
    assert finding.level is Severity.CRITICAL
    assert finding.title == f"multi-node group {LEADER} waits for worker 1 (Pending, unschedulable)"
    # The leaders carry llm-d.ai/role both (no prefill workload): no role is named.
    assert "Group 0 of llama-llmd-kserve-mn needs 2 pods, and worker 1 is not running" in finding.summary
    assert "3 Insufficient nvidia.com/gpu" in finding.summary
    assert f"Its leader {LEADER} is not ready" in finding.summary
    assert finding.objects == (
        "LLMInferenceService.serving.kserve.io/llm/llama-llmd",
        "LeaderWorkerSet.leaderworkerset.x-k8s.io/llm/llama-llmd-kserve-mn",
        f"Pod/llm/{LEADER}",
        f"Pod/llm/{WORKER}",
    )
    assert any("1 group(s) of 2 pod(s) wanted, 0 ready" in line for line in finding.evidence)
    assert any(line.startswith(f"group 0 leader {LEADER}: not ready (ContainersNotReady)") for line in finding.evidence)
    assert finding.fix is not None and "spec.worker" in finding.fix.what
    assert "leaderworkerset.sigs.k8s.io/group-index=0" in finding.fix.what


def test_a_worker_that_does_not_exist_is_named_by_its_index() -> None:
    objects = [obj for obj in _objects(PENDING) if obj["metadata"]["name"] != WORKER or obj["kind"] != "Pod"]
    objects.append(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "llama-llmd-kserve-mn-0.1", "namespace": "llm"},
            "involvedObject": {"kind": "StatefulSet", "name": LEADER, "namespace": "llm"},
            "reason": "FailedCreate",
            "type": "Warning",
            "message": f'create Pod {WORKER} in StatefulSet {LEADER} failed error: pods "{WORKER}" is forbidden: '
            "exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=8, "
            "limited: requests.nvidia.com/gpu=8",
            "count": 12,
            "firstTimestamp": "2026-01-15T11:12:05Z",
            "lastTimestamp": "2026-01-15T11:58:00Z",
        }
    )
    finding = only(resources.run(_evidence(objects)), "WORKLOAD_GROUP_INCOMPLETE")
    assert f"pod {WORKER} does not exist; FailedCreate: create Pod" in finding.summary
    assert "exceeded quota: gpu-quota" in finding.summary
    assert "StatefulSet does not create it" in finding.remediation


def test_a_crash_looping_worker_quotes_its_last_exit() -> None:
    objects = _objects(PENDING)
    worker = _pod(objects, WORKER)
    worker["spec"]["nodeName"] = "gpu-node-2"
    worker["status"] = {
        "phase": "Running",
        "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}],
        "containerStatuses": [
            {
                "name": "main",
                "ready": False,
                "restartCount": 6,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {
                    "terminated": {"exitCode": 1, "reason": "Error", "message": "RuntimeError: NCCL error: unhandled"}
                },
            }
        ],
    }
    finding = only(resources.run(_evidence(objects)), "WORKLOAD_GROUP_INCOMPLETE")
    assert "main waiting CrashLoopBackOff, 6 restarts; last exit 1 (Error): RuntimeError: NCCL error" in finding.summary
    assert "kubectl logs --previous" in finding.remediation


def test_a_leader_still_ready_makes_it_a_warning() -> None:
    objects = _objects(PENDING)
    leader = _pod(objects, LEADER)
    leader["status"]["conditions"][1]["status"] = "True"
    leader["status"]["containerStatuses"][0]["ready"] = True
    finding = only(resources.run(_evidence(objects)), "WORKLOAD_GROUP_INCOMPLETE")
    assert finding.level is Severity.WARNING
    assert "reports ready for now" in finding.summary
    assert finding.title == f"multi-node group {LEADER} is short of worker 1 (Pending, unschedulable)"


def test_without_a_leader_template_the_pending_worker_is_also_judged_as_a_vllm_pod() -> None:
    """No spec.template: KServe labels the workers kserve.io/component=workload, so the scheduler's finding on the
    worker comes too, and explains the incomplete group (catalog edge)."""
    objects = _objects(PENDING)
    worker = _pod(objects, WORKER)
    worker["metadata"]["labels"].update({"kserve.io/component": "workload", "llm-d.ai/role": "decode"})
    findings = resources.run(_evidence(objects))
    assert {"RESOURCES_GPU_UNSCHEDULABLE", "WORKLOAD_GROUP_INCOMPLETE"} <= {f.code for f in findings}
    ranked = rank_root_causes(findings, STEP_IDS)
    assert ranked.index("RESOURCES_GPU_UNSCHEDULABLE") < ranked.index("WORKLOAD_GROUP_INCOMPLETE")


def test_a_prefill_group_is_named_as_prefill() -> None:
    objects = _objects(PENDING)
    for obj in objects:
        name = obj["metadata"]["name"]
        if name.startswith("llama-llmd-kserve-mn"):
            obj["metadata"]["name"] = name.replace("kserve-mn", "kserve-mn-prefill")
        labels = obj["metadata"].get("labels") or {}
        if labels.get("leaderworkerset.sigs.k8s.io/name") == "llama-llmd-kserve-mn":
            labels["leaderworkerset.sigs.k8s.io/name"] = "llama-llmd-kserve-mn-prefill"
        if labels.get("llm-d.ai/role"):
            labels["llm-d.ai/role"] = "prefill"  # KServe's prefill set labels its leaders so (workload_multi_node.go)
        if obj["kind"] == "LeaderWorkerSet":
            obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["metadata"]["labels"]["llm-d.ai/role"] = "prefill"
        involved = obj.get("involvedObject") or {}
        if involved.get("name", "").startswith("llama-llmd-kserve-mn"):
            involved["name"] = involved["name"].replace("kserve-mn", "kserve-mn-prefill")
    finding = only(resources.run(_evidence(objects)), "WORKLOAD_GROUP_INCOMPLETE")
    assert "Group 0 of llama-llmd-kserve-mn-prefill (prefill) needs 2 pods" in finding.summary
    assert "3 Insufficient nvidia.com/gpu" in finding.summary


def test_a_worker_still_creating_its_container_is_not_blamed_at_once() -> None:
    """A scheduled worker pulling its image for two minutes is a start, not a fault; after ten it is named."""
    objects = _objects(PENDING)
    worker = _pod(objects, WORKER)
    worker["spec"]["nodeName"] = "gpu-node-2"
    worker["metadata"]["creationTimestamp"] = "2026-01-15T11:58:00Z"
    worker["status"] = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "True"}],
        "containerStatuses": [{"name": "main", "ready": False, "state": {"waiting": {"reason": "ContainerCreating"}}}],
    }
    assert "WORKLOAD_GROUP_INCOMPLETE" not in {f.code for f in resources.run(_evidence(objects))}
    worker["metadata"]["creationTimestamp"] = "2026-01-15T11:30:00Z"
    finding = only(resources.run(_evidence(objects)), "WORKLOAD_GROUP_INCOMPLETE")
    assert "Pending (ContainerCreating) for 30 min" in finding.summary
