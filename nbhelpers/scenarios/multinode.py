"""A multi-node LLMInferenceService (``llmisvc.parallelism``): KServe renders LeaderWorkerSets, not a Deployment.

Each replica is a group of ``data / data_local`` pods (KServe's ``kserve-config-llm-worker-data-parallel`` preset:
every pod runs ``data_local`` data-parallel ranks, the leader also vLLM's API server). The plan's pods are the
groups' leaders: they are what the InferencePool selects and what serves, so the traffic model and the vLLM metrics
stay theirs. This module renames them as the LeaderWorkerSet controller does, adds each group's workers, and replaces
the Deployment with the LeaderWorkerSet ``<name>-kserve-mn``:

- names, labels, conditions: KServe pkg/controller/v1alpha2/llmisvc/workload_multi_node.go (expectedMainMultiNodeLWS,
  propagateLeaderWorkerSetStatus), kubernetes-sigs/lws pkg/controllers (pods ``<lws>-<group>`` and
  ``<lws>-<group>-<index>``, conditions of makeCondition); docs/upstream-facts.md#leaderworkerset;
- ``group_worker_unschedulable``: the last worker of every group finds no node with the GPUs it asks for; the leader's
  API server waits for the missing ranks and never listens, so its readiness probe is refused until the capture
  (dsx-ai-factory/workload-map#228; vllm-project/production-stack#653 for the leader that stays 0/1).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from nbhelpers.scenarios.events import EventBuilder
from nbhelpers.scenarios.logs import _non_default_args, kubelet_stamp
from nbhelpers.scenarios.objects import _condition, _meta, _owner
from nbhelpers.scenarios.refusals import startup_lines, vllm_line
from nbhelpers.scenarios.state import Plan, PodPlan, make_uid, readiness_probe, rng_for
from nbhelpers.sources import kube
from nbhelpers.sources.kube import KubeObject

if TYPE_CHECKING:
    from nbhelpers.scenarios.llmisvc import LlmObjectBuilder

LWS_API = "leaderworkerset.x-k8s.io/v1"
LEADER_COMPONENT = "llminferenceservice-workload-leader"
WORKER_COMPONENT = "llminferenceservice-workload-worker"
GROUP_KEY_LABEL = "leaderworkerset.sigs.k8s.io/group-key"
LEADER_NAME_ANNOTATION = "leaderworkerset.sigs.k8s.io/leader-name"
DP_RPC_PORT = 5555  # the preset's --data-parallel-rpc-port
API_SERVER_COUNT = 8  # the preset's --api-server-count on the leader (VLLM_API_SERVER_COUNT unset)
WORKER_CREATED_SECONDS = 5.0  # the leader's worker StatefulSet, then its pods, follow the leader pod


def is_multinode(plan: Plan) -> bool:
    router = plan.spec.router
    return plan.llmisvc and router is not None and router.group_size > 1


def worker_blocked(plan: Plan) -> bool:
    return any(fault.type == "group_worker_unschedulable" for fault in plan.spec.faults)


def lws_name(plan: Plan) -> str:
    return f"{plan.spec.isvc.name}-kserve-mn"


def apply(plan: Plan) -> Plan:
    """The plan's pods as the groups' leaders; with a worker missing, leaders that never listen nor turn ready."""
    if not is_multinode(plan):
        return plan
    leaders = []
    for group, pod in enumerate(plan.pods):
        leader = replace(pod, name=f"{lws_name(plan)}-{group}")
        if worker_blocked(plan):
            leader = replace(
                leader, listening=None, ready_at=None, unready=(), probe_failures=_refused_probes(plan, leader)
            )
        leaders.append(leader)
    return replace(plan, pods=tuple(leaders))


def _refused_probes(plan: Plan, pod: PodPlan) -> tuple[datetime, ...]:
    """The leader's readiness checks from its first run's start to the capture: nothing listens on the port."""
    probe = readiness_probe(plan.spec) or {}
    period = float(probe.get("periodSeconds", 10))
    moment = pod.started + timedelta(seconds=float(probe.get("initialDelaySeconds", 0)) + period)
    failures = []
    while moment < plan.spec.timeline.captured_at:
        failures.append(moment)
        moment += timedelta(seconds=period)
    return tuple(failures)


def workers(plan: Plan, leader: PodPlan, group: int) -> list[tuple[int, PodPlan]]:
    """A group's workers (index 1..size-1) as pod plans: Pending ones have no node, no IP and no run."""
    assert plan.spec.router is not None
    rng = rng_for(plan.spec, f"multinode:{leader.name}")
    created = leader.created + timedelta(seconds=WORKER_CREATED_SECONDS)
    size = plan.spec.router.group_size
    found = []
    for index in range(1, size):
        name = f"{lws_name(plan)}-{group}-{index}"
        worker = replace(leader, name=name, uid=make_uid(rng), created=created, probe_failures=())
        if worker_blocked(plan) and index == size - 1:
            attempts = _scheduling_attempts(created, plan.spec.timeline.captured_at)
            worker = replace(
                worker,
                node=None,
                ip="",
                runs=(),
                listening=None,
                ready_at=None,
                unready=(),
                scheduling_attempts=attempts,
            )
        else:
            worker = replace(worker, ip=f"10.244.{rng.randint(2, 250)}.{rng.randint(2, 250)}")
        found.append((index, worker))
    return found


def _scheduling_attempts(first: datetime, captured: datetime) -> tuple[datetime, ...]:
    """The scheduler's retries of an unschedulable pod: back-off doubling from 1 s up to its 5 min ceiling."""
    attempts, moment, gap = [], first + timedelta(seconds=0.3), 1.0
    while moment < captured:
        attempts.append(moment)
        moment += timedelta(seconds=gap)
        gap = min(gap * 2, 300.0)
    return tuple(attempts)


# ---- objects -------------------------------------------------------------------------------------------------------


def group_key(plan: Plan, group: int) -> str:
    return f"{rng_for(plan.spec, f'multinode-key:{group}').getrandbits(160):040x}"


def leader_labels(name: str) -> dict[str, str]:
    return {
        kube.LLMISVC_COMPONENT_LABEL: LEADER_COMPONENT,
        kube.LLMISVC_NAME_LABEL: name,
        kube.LLMISVC_PART_OF_LABEL: kube.LLMISVC_PART_OF,
        kube.LLMISVC_WORKLOAD_LABEL: "workload",
        kube.LLMISVC_ROLE_LABEL: "both",
    }


def worker_labels(name: str) -> dict[str, str]:
    return {
        kube.LLMISVC_COMPONENT_LABEL: WORKER_COMPONENT,
        kube.LLMISVC_NAME_LABEL: name,
        kube.LLMISVC_PART_OF_LABEL: kube.LLMISVC_PART_OF,
    }


def _dp_args(plan: Plan, index: int, address: str) -> list[str]:
    """The data-parallel flags the preset's command gives ``vllm serve`` (``address``: the leader's, resolved)."""
    router = plan.spec.router
    assert router is not None
    args = [
        "--data-parallel-size",
        str(router.data),
        "--data-parallel-size-local",
        str(router.data_local),
        "--data-parallel-address",
        address,
        "--data-parallel-rpc-port",
        str(DP_RPC_PORT),
        "--data-parallel-start-rank",
        str(index * router.data_local),
    ]
    return [*args, "--headless"] if index else ["--api-server-count", str(API_SERVER_COUNT), *args]


def _command(plan: Plan, index: int) -> list[str]:
    """The preset's command, condensed to what decides the ranks (config-llm-worker-data-parallel.yaml: it resolves
    the leader's address, computes the start rank from LWS_WORKER_INDEX, and passes the pod's args on as ``$@``)."""
    router = plan.spec.router
    assert router is not None
    start = "0" if index == 0 else f"$(( ${{LWS_WORKER_INDEX:-0}} * {router.data_local} ))"
    flags = " ".join(_dp_args(plan, index, "${DP_ADDRESS}")).replace(
        f"--data-parallel-start-rank {index * router.data_local}", "--data-parallel-start-rank $START_RANK"
    )
    flags = flags.replace(f"--api-server-count {API_SERVER_COUNT}", "--api-server-count ${VLLM_API_SERVER_COUNT:-8}")
    script = (
        "DP_ADDRESS=$(getent hosts ${LWS_LEADER_ADDRESS} | cut -d' ' -f1)\n"
        f"START_RANK={start}\n"
        f'eval "exec vllm serve --port {plan.listen_port} {flags} $@"'
    )
    return ["/bin/bash", "-c", script, "--"]


def _group_pod(builder: LlmObjectBuilder, pod_object: KubeObject, group: int, index: int) -> KubeObject:
    """A pod of group ``group`` (index 0: its leader) with the labels, owner and args the LWS controller gives it."""
    plan, name = builder.plan, builder.isvc.name
    lws = lws_name(plan)
    meta = pod_object["metadata"]
    meta["labels"] = {
        **(leader_labels(name) if index == 0 else worker_labels(name)),
        **builder.state.pod_labels,
        kube.LWS_NAME_LABEL: lws,
        kube.LWS_GROUP_INDEX_LABEL: str(group),
        kube.LWS_WORKER_INDEX_LABEL: str(index),
        GROUP_KEY_LABEL: group_key(plan, group),
        "statefulset.kubernetes.io/pod-name": meta["name"],
    }
    meta["annotations"] = {kube.LWS_SIZE_ANNOTATION: str(builder.router.group_size)}
    if index:
        meta["annotations"][LEADER_NAME_ANNOTATION] = f"{lws}-{group}"
    owner = lws if index == 0 else f"{lws}-{group}"
    meta["ownerReferences"] = [_owner("apps/v1", "StatefulSet", owner, _statefulset_uid(plan, owner))]
    container = pod_object["spec"]["containers"][0]
    container["command"] = _command(plan, index)
    container["env"] = [
        *container.get("env", []),
        {"name": "LWS_LEADER_ADDRESS", "value": f"{lws}-{group}.{lws}.{builder.ns}"},
        {"name": "LWS_GROUP_SIZE", "value": str(builder.router.group_size)},
        {"name": "LWS_WORKER_INDEX", "value": str(index)},
    ]
    if index:
        container.pop("readinessProbe", None)  # the worker template has no server to probe
        container.pop("livenessProbe", None)
        pod_object["spec"]["hostname"] = meta["name"]
    pod_object["spec"]["subdomain"] = lws
    return pod_object


def _statefulset_uid(plan: Plan, name: str) -> str:
    return make_uid(rng_for(plan.spec, f"multinode-sts:{name}"))


def leader_worker_set(builder: LlmObjectBuilder) -> KubeObject:
    plan, name, router = builder.plan, builder.isvc.name, builder.router
    created = builder.deployed + timedelta(seconds=2)
    ready = len(plan.ready_pods(builder.captured))
    groups = len(plan.live_pods)
    available = ready == groups and groups > 0
    since = min((pod.ready_at for pod in plan.pods if pod.ready_at), default=created)
    template = builder.pod_spec(for_pod=False)
    conditions = [
        _condition(
            "Available",
            available,
            since if available else created,
            "AllGroupsReady" if available else "GroupsProgressing",
            "All replicas are ready" if available else "Replicas are progressing",
        ),
        _condition("Progressing", not available, created, "GroupsProgressing", "Replicas are progressing"),
    ]
    return {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": _meta(
            lws_name(plan),
            builder.ns,
            make_uid(builder.names),
            created,
            worker_labels(name),
            owners=[builder._llmisvc_owner()],
        ),
        "spec": {
            "replicas": builder.isvc.min_replicas,
            "startupPolicy": "LeaderCreated",
            "rolloutStrategy": {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": {"maxSurge": 0, "maxUnavailable": 1},
            },
            "networkConfig": {"subdomainPolicy": "Shared"},
            "leaderWorkerTemplate": {
                "size": router.group_size,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": {"metadata": {"labels": leader_labels(name)}, "spec": template},
                "workerTemplate": {"metadata": {"labels": worker_labels(name)}, "spec": builder.pod_spec(False)},
            },
        },
        "status": {
            "observedGeneration": 1,
            "replicas": groups,
            "readyReplicas": ready,
            "updatedReplicas": groups,
            "conditions": conditions,
        },
    }


def adjust_objects(builder: LlmObjectBuilder, objects: list[KubeObject]) -> list[KubeObject]:
    """The single-node rendering turned multi-node: the LeaderWorkerSet for the Deployment, the groups' pods."""
    plan = builder.plan
    if not is_multinode(plan):
        return objects
    workload_names = {plan.deployment, plan.replica_set}
    leaders = {pod.name: group for group, pod in enumerate(plan.pods)}
    adjusted: list[KubeObject] = []
    for obj in objects:
        kind, name = obj["kind"], kube.name(obj)
        if kind in ("Deployment", "ReplicaSet") and name in workload_names:
            continue
        if kind == "LLMInferenceService":
            adjusted += [_multinode_service(builder, obj), leader_worker_set(builder)]
            continue
        if kind == "Pod" and name in leaders:
            group = leaders[name]
            adjusted.append(_group_pod(builder, obj, group, 0))
            pod = plan.pods[group]
            for index, worker in workers(plan, pod, group):
                adjusted.append(_group_pod(builder, builder.pod(worker), group, index))
            continue
        adjusted.append(obj)
    return adjusted


def _multinode_service(builder: LlmObjectBuilder, service: KubeObject) -> KubeObject:
    """spec.parallelism and spec.worker; WorkerWorkloadReady (the LWS's Available) in place of MainWorkloadReady."""
    router = builder.router
    spec = service["spec"]
    spec["parallelism"] = {"data": router.data, "dataLocal": router.data_local, "tensor": 1}
    spec["worker"] = {"containers": [{"name": kube.LLMISVC_CONTAINER, "image": builder.isvc.image}]}
    conditions = []
    for condition in service["status"]["conditions"]:
        if condition["type"] == "MainWorkloadReady":
            condition = {**condition, "type": "WorkerWorkloadReady"}
        if condition.get("reason") == "MinimumReplicasUnavailable":  # the Deployment's, carried up by the roll-ups
            condition = {**condition, "reason": "GroupsProgressing", "message": "Replicas are progressing"}
        conditions.append(condition)
    service["status"]["conditions"] = sorted(conditions, key=lambda entry: entry["type"])
    return service


# ---- events and logs -----------------------------------------------------------------------------------------------


def adjust_events(builder: LlmObjectBuilder, events: list[KubeObject]) -> list[KubeObject]:
    """The StatefulSet controllers' creations for the ReplicaSet's, and the workers' own events."""
    plan = builder.plan
    if not is_multinode(plan):
        return events
    workload_names = {plan.deployment, plan.replica_set}
    kept = [
        event
        for event in events
        if not (
            event["involvedObject"]["kind"] in ("Deployment", "ReplicaSet")
            and event["involvedObject"]["name"] in workload_names
        )
    ]
    maker = EventBuilder(plan)
    maker.rng = rng_for(plan.spec, "multinode-events")
    lws = lws_name(plan)
    for group, leader in enumerate(plan.pods):
        group_pods = [(lws, leader)] + [(f"{lws}-{group}", worker) for _, worker in workers(plan, leader, group)]
        for owner, pod in group_pods:
            statefulset = {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "name": owner,
                "uid": _statefulset_uid(plan, owner),
            }
            kept.append(
                maker.event(
                    statefulset,
                    "SuccessfulCreate",
                    f"create Pod {pod.name} in StatefulSet {owner} successful",
                    pod.created,
                    component="statefulset-controller",
                )
            )
            if pod is not leader:
                kept += maker.pod_events(pod)
    return kept


def leader_logs(plan: Plan) -> dict[tuple[str, str, str, bool], str]:
    """A waiting leader's log: vLLM's start, the data-parallel coordinator, then silence at INFO (the API server
    logs its wait for the remote engines at DEBUG only: vllm/v1/engine/utils.py wait_for_engine_startup)."""
    if not (is_multinode(plan) and worker_blocked(plan)):
        return {}
    logs = {}
    for pod in plan.live_pods:
        if not pod.runs:
            continue
        start = pod.runs[-1].started
        pid = 1000 + rng_for(plan.spec, f"multinode-pid:{pod.name}").randint(100, 8000)
        with_ranks = replace(plan, args=(*plan.args, *_dp_args(plan, 0, pod.ip)))
        lines = [
            *startup_lines(plan, start, _non_default_args(with_ranks)),
            vllm_line(start + timedelta(seconds=14.1), "utils.py:651", f"Started DP Coordinator process (PID: {pid})"),
        ]
        text = "".join(f"{kubelet_stamp(moment)} {line}\n" for moment, line in lines)
        logs[(plan.spec.isvc.namespace, pod.name, plan.container, False)] = text
    return logs
