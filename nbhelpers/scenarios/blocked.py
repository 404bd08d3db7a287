"""Faults that keep the serving container from ever running: what the cluster shows when it never starts.

Four shapes, each from public reports (the scenarios cite them):

- ``init_container_fails``: KServe's pod webhook adds the storage-initializer init container to every predictor pod
  with a ``storageUri``; when its download fails, the kubelet restarts it with back-off (``Init:CrashLoopBackOff``),
  the pod stays ``Pending`` with ``Initialized=False``, and the serving container waits in ``PodInitializing``. The
  init container's log and, with ``FallbackToLogsOnError``, its termination message hold the error.
- ``image_pull_fails``: the kubelet cannot pull the serving image: ``ErrImagePull``, then ``ImagePullBackOff``, with
  Pulling / Failed / BackOff events (RawDeployment; on Serverless Knative resolves the tag first).
- ``image_digest_unresolved``: Knative's Revision reconciler resolves the image tag to a digest before it creates
  anything; when that fails the Revision is ``ContainerMissing`` ("Unable to fetch image ...: failed to resolve image
  to digest") and there is no Deployment, PodAutoscaler, SKS Service or pod (knative/serving
  pkg/reconciler/revision: reconcileDigest runs before the Deployment and PA phases).
- ``pod_creation_rejected``: the API server refuses the ReplicaSet's pods (quota, LimitRange, admission); no pod
  exists, the ReplicaSet records ``FailedCreate`` events and a ``ReplicaFailure`` condition that the Deployment
  copies; a Knative Revision above it reports it as ``ResourcesAvailable=False``, ``FailedCreate`` (knative_status;
  knative/serving#13708 saw only ``Deploying`` before PR #14453, in 1.13.0 and 1.12.1, propagated the failure).

The plan keeps such pods with no run of the serving container (or drops them when none is ever created); the
objects, events and logs the generator writes for them come from here, derived from the same plan.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from nbhelpers.scenarios import knative_status
from nbhelpers.scenarios.logs import kubelet_stamp
from nbhelpers.scenarios.objects import QUEUE_IMAGE, node_ip
from nbhelpers.scenarios.spec import Fault, ScenarioSpec
from nbhelpers.scenarios.state import (
    KUBELET_SYNC_SECONDS,
    Plan,
    PodPlan,
    Run,
    name_suffix,
    restart_back_off,
    rng_for,
)
from nbhelpers.sources.kube import SERVING_CONTAINER, KubeObject
from nbhelpers.util.times import format_time

if TYPE_CHECKING:
    from nbhelpers.scenarios.events import EventBuilder
    from nbhelpers.scenarios.objects import ObjectBuilder

STORAGE_INITIALIZER = "storage-initializer"
STORAGE_INITIALIZER_IMAGE = "kserve/storage-initializer:v0.15.2"
MODEL_MOUNT = "/mnt/models"
PROVISION_VOLUME = "kserve-provision-location"
NO_POD_FAULTS = ("image_digest_unresolved", "pod_creation_rejected")
# The kubelet keeps this much of a failed container's log as its termination message (FallbackToLogsOnError).
TERMINATION_LOG_LINES = 80
TERMINATION_LOG_BYTES = 2048
IMAGE_PULL_SECONDS = 1.8  # from Pulling to the registry's refusal


def blocking_fault(spec: ScenarioSpec) -> Fault | None:
    """The spec's fault that keeps the serving container from running, if it has one."""
    return next(
        (fault for fault in spec.faults if fault.type in ("init_container_fails", "image_pull_fails", *NO_POD_FAULTS)),
        None,
    )


def apply(plan: Plan) -> Plan:
    """The plan with the blocking fault applied: no pod at all, or pods whose serving container never starts."""
    fault = blocking_fault(plan.spec)
    if fault is None:
        return plan
    if fault.type in NO_POD_FAULTS:
        return replace(plan, pods=())
    never_started = tuple(
        replace(
            pod,
            runs=(),
            listening=None,
            ready_at=None,
            probe_failures=(),
            liveness_failures=(),
            back_offs=(),
            unready=(),
            blip_failures=(),
        )
        for pod in plan.pods
    )
    return replace(plan, pods=never_started)


def is_blocked(plan: Plan, pod: PodPlan) -> bool:
    """A scheduled pod whose serving container never ran because of the blocking fault."""
    return blocking_fault(plan.spec) is not None and pod.node is not None and not pod.runs


# ---- the storage-initializer's runs and the image pulls ----------------------------------------------------


def init_runs(plan: Plan, pod: PodPlan) -> list[Run]:
    """The storage-initializer's runs in ``pod``: each fails after ``run_seconds``, then the kubelet's back-off."""
    fault = blocking_fault(plan.spec)
    assert fault is not None and fault.type == "init_container_fails"
    captured = plan.spec.timeline.captured_at
    rng = rng_for(plan.spec, f"init:{pod.name}")
    seconds = float(fault.params.get("run_seconds", 5))
    reason = str(fault.params.get("reason", "Error"))
    exit_code = int(fault.params.get("exit_code", 137 if reason == "OOMKilled" else 1))
    start = pod.created + timedelta(seconds=2.5 + rng.uniform(0.2, 0.9))
    runs: list[Run] = []
    while start < captured:
        end = start + timedelta(seconds=seconds * rng.uniform(0.93, 1.07))
        if end >= captured:
            runs.append(Run(start, None))
            break
        runs.append(Run(start, end, reason, exit_code))
        start = end + timedelta(seconds=restart_back_off(len(runs)) + rng.uniform(0.5, 2.5))
    return runs


def pull_attempts(plan: Plan, pod: PodPlan) -> list[datetime]:
    """When the kubelet tries to pull the image: at once, then after the image back-off (10 s doubling to 300 s)."""
    captured = plan.spec.timeline.captured_at
    rng = rng_for(plan.spec, f"pull:{pod.name}")
    moment = pod.created + timedelta(seconds=1.5 + rng.uniform(0.1, 0.5))
    attempts: list[datetime] = []
    while moment < captured:
        attempts.append(moment)
        moment += timedelta(seconds=IMAGE_PULL_SECONDS + restart_back_off(len(attempts)) + rng.uniform(0.2, 1.5))
    return attempts


def _back_off_syncs(plan: Plan, pod: PodPlan, gaps: list[tuple[datetime, datetime]]) -> list[datetime]:
    """The kubelet's pod syncs that find the container in back-off, during each (from, to) gap."""
    rng = rng_for(plan.spec, f"backoff:{pod.name}")
    captured = plan.spec.timeline.captured_at
    syncs = []
    for start, end in gaps:
        sync = start + timedelta(seconds=rng.uniform(0.5, 1.5))
        while sync < min(end, captured):
            syncs.append(sync)
            sync += timedelta(seconds=KUBELET_SYNC_SECONDS + rng.uniform(0, 3))
    return syncs


def _init_gaps(runs: list[Run], captured: datetime) -> list[tuple[datetime, datetime]]:
    """The back-off spells: from the end of each failed run to the next start (or the capture)."""
    next_starts = [run.started for run in runs[1:]] + [captured]
    return [(run.ended, start) for run, start in zip(runs, next_starts, strict=True) if run.ended is not None]


def _pull_gaps(attempts: list[datetime], captured: datetime) -> list[tuple[datetime, datetime]]:
    failed = [moment + timedelta(seconds=IMAGE_PULL_SECONDS) for moment in attempts]
    return [(fail, attempts[i + 1] if i + 1 < len(attempts) else captured) for i, fail in enumerate(failed)]


# ---- logs -----------------------------------------------------------------------------------------------------


def _run_log(plan: Plan, run: Run) -> str:
    """One storage-initializer run's log, with the kubelet's stamps: the first line as the run starts, the rest as
    it fails (a traceback is written at once). ``{now}`` in a line is the initializer's own clock (KServe's logger
    format)."""
    fault = blocking_fault(plan.spec)
    assert fault is not None
    lines = [str(line) for line in fault.params["log"]]
    end = run.ended or plan.spec.timeline.captured_at
    stamped = []
    for index, line in enumerate(lines):
        if index == 0:
            moment = run.started + timedelta(seconds=0.8)
        else:
            moment = end - timedelta(seconds=0.3) + timedelta(milliseconds=index)
        clock = moment - timedelta(milliseconds=2)
        text = line.replace("{now}", clock.strftime("%Y-%m-%d %H:%M:%S.") + f"{clock.microsecond // 1000:03d}")
        stamped.append(f"{kubelet_stamp(moment)} {text}")
    return "\n".join(stamped) + "\n"


def init_logs(plan: Plan) -> dict[tuple[str, str, str, bool], str]:
    """The storage-initializer's logs of every blocked pod: the last run, and the last run that ended."""
    fault = blocking_fault(plan.spec)
    if fault is None or fault.type != "init_container_fails":
        return {}
    namespace = plan.spec.isvc.namespace
    logs = {}
    for pod in plan.live_pods:
        if not is_blocked(plan, pod):
            continue
        runs = init_runs(plan, pod)
        ended = [run for run in runs if run.ended is not None]
        logs[(namespace, pod.name, STORAGE_INITIALIZER, False)] = _run_log(plan, runs[-1])
        if ended:
            logs[(namespace, pod.name, STORAGE_INITIALIZER, True)] = _run_log(plan, ended[-1])
    return logs


def _termination_message(plan: Plan, run: Run) -> str:
    """What FallbackToLogsOnError keeps of a failed run: the log's last lines, without the kubelet's stamps."""
    lines = [line.split(" ", 1)[1] for line in _run_log(plan, run).splitlines()][-TERMINATION_LOG_LINES:]
    return ("\n".join(lines) + "\n").encode()[-TERMINATION_LOG_BYTES:].decode(errors="ignore")


# ---- objects --------------------------------------------------------------------------------------------------


def _at(moment: datetime) -> str:
    return format_time(moment)


def _condition(kind: str, status: str, moment: datetime, reason: str = "", message: str = "") -> KubeObject:
    entry: KubeObject = {"type": kind, "status": status, "lastTransitionTime": _at(moment)}
    if reason:
        entry["reason"] = reason
    if message:
        entry["message"] = message
    return entry


def storage_initializer(plan: Plan) -> KubeObject:
    """The init container KServe's pod webhook injects for a ``storageUri`` (resources from inferenceservice-config)."""
    fault = blocking_fault(plan.spec)
    assert fault is not None
    return {
        "name": STORAGE_INITIALIZER,
        "image": STORAGE_INITIALIZER_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "args": [str(fault.params["storage_uri"]), MODEL_MOUNT],
        "resources": {
            "requests": {"cpu": "100m", "memory": "100Mi"},
            "limits": {"cpu": "1", "memory": str(fault.params.get("memory_limit", "1Gi"))},
        },
        "volumeMounts": [{"name": PROVISION_VOLUME, "mountPath": MODEL_MOUNT}],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }


def _go_duration(seconds: int) -> str:
    """A whole number of seconds as Go prints a duration (10s, 2m40s, 5m0s)."""
    return f"{seconds}s" if seconds < 60 else f"{seconds // 60}m{seconds % 60}s"


def _not_ready(plan: Plan) -> str:
    names = f"[{SERVING_CONTAINER} queue-proxy]" if plan.serverless else f"[{SERVING_CONTAINER}]"
    return f"containers with unready status: {names}"


def _host_ip(pod: PodPlan) -> str:
    assert pod.node is not None
    return node_ip(pod.node)


def _waiting(name: str, image: str, reason: str, message: str = "") -> KubeObject:
    waiting: KubeObject = {"reason": reason}
    if message:
        waiting["message"] = message
    return {
        "name": name,
        "image": image,
        "imageID": "",
        "ready": False,
        "started": False,
        "restartCount": 0,
        "lastState": {},
        "state": {"waiting": waiting},
    }


def _init_status(builder: ObjectBuilder, pod: PodPlan) -> KubeObject:
    plan = builder.plan
    runs = init_runs(plan, pod)
    ended = [run for run in runs if run.ended is not None]
    container_id = f"containerd://{builder.rng.getrandbits(256):064x}"
    last_state: KubeObject = {}
    if ended:
        last = ended[-1]
        assert last.ended is not None
        last_state = {
            "terminated": {
                "exitCode": last.exit_code,
                "reason": last.reason,
                "message": _termination_message(plan, last),
                "startedAt": _at(last.started),
                "finishedAt": _at(last.ended),
                "containerID": container_id,
            }
        }
    current = runs[-1]
    if current.ended is None:
        state: KubeObject = {"running": {"startedAt": _at(current.started)}}
        container_id = f"containerd://{builder.rng.getrandbits(256):064x}"
    else:
        delay = int(restart_back_off(len(runs)))
        state = {
            "waiting": {
                "reason": "CrashLoopBackOff",
                "message": f"back-off {_go_duration(delay)} restarting failed container={STORAGE_INITIALIZER} "
                f"pod={pod.name}_{builder.ns}({pod.uid})",
            }
        }
    return {
        "name": STORAGE_INITIALIZER,
        "image": f"docker.io/{STORAGE_INITIALIZER_IMAGE}",
        "imageID": f"docker.io/kserve/storage-initializer@sha256:{builder.rng.getrandbits(256):064x}",
        "containerID": container_id,
        "ready": False,
        "started": current.ended is None,
        "restartCount": len(runs) - 1,
        "lastState": last_state,
        "state": state,
    }


def pod_object(builder: ObjectBuilder, pod: PodPlan) -> KubeObject:
    """A scheduled predictor pod whose serving container never started (init container failing or image unpullable)."""
    plan = builder.plan
    fault = blocking_fault(plan.spec)
    assert fault is not None and pod.node is not None
    spec = builder.pod_spec(for_pod=True)
    spec["nodeName"] = pod.node.name
    labels = {**builder.predictor_labels(), "pod-template-hash": pod.template_hash}
    annotations = builder._pod_annotations()
    scheduled = pod.created + timedelta(seconds=1)
    image = plan.spec.isvc.image
    statuses: list[KubeObject]
    init_statuses: list[KubeObject] = []
    if fault.type == "init_container_fails":
        uri = str(fault.params["storage_uri"])
        annotations["internal.serving.kserve.io/storage-initializer-sourceuri"] = uri
        spec["initContainers"] = [storage_initializer(plan)]
        spec["volumes"].append({"name": PROVISION_VOLUME, "emptyDir": {}})
        spec["containers"][0]["volumeMounts"].append(
            {"name": PROVISION_VOLUME, "mountPath": MODEL_MOUNT, "readOnly": True}
        )
        init_statuses = [_init_status(builder, pod)]
        statuses = [_waiting(SERVING_CONTAINER, image, "PodInitializing")]
        if plan.serverless:
            statuses.append(_waiting("queue-proxy", QUEUE_IMAGE, "PodInitializing"))
        initialized = _condition(
            "Initialized",
            "False",
            scheduled,
            "ContainersNotInitialized",
            f"containers with incomplete status: [{STORAGE_INITIALIZER}]",
        )
    else:
        error = str(fault.params["error"])
        statuses = [
            _waiting(
                SERVING_CONTAINER,
                image,
                "ImagePullBackOff",
                f'Back-off pulling image "{image}": ErrImagePull: {error}',
            )
        ]
        initialized = _condition("Initialized", "True", scheduled)
    status: KubeObject = {
        "phase": "Pending",
        "conditions": [
            _condition("PodReadyToStartContainers", "True", scheduled + timedelta(seconds=1)),
            initialized,
            _condition("Ready", "False", scheduled, "ContainersNotReady", _not_ready(plan)),
            _condition("ContainersReady", "False", scheduled, "ContainersNotReady", _not_ready(plan)),
            _condition("PodScheduled", "True", scheduled),
        ],
        "hostIP": _host_ip(pod),
        "hostIPs": [{"ip": _host_ip(pod)}],
        "podIP": pod.ip,
        "podIPs": [{"ip": pod.ip}],
        "startTime": _at(scheduled),
        "qosClass": builder._qos_class(),
    }
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    status["containerStatuses"] = statuses
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod.name,
            "namespace": builder.ns,
            "uid": pod.uid,
            "creationTimestamp": _at(pod.created),
            "resourceVersion": "1",
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": plan.replica_set,
                    "uid": plan.uids["replicaset"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
        "status": status,
    }


def adjust_objects(builder: ObjectBuilder, objects: list[KubeObject]) -> list[KubeObject]:
    """The generated objects as the blocking fault leaves them (unchanged without one)."""
    plan = builder.plan
    fault = blocking_fault(plan.spec)
    if fault is None:
        return objects
    if fault.type in ("init_container_fails", "image_pull_fails"):
        for obj in objects:
            if obj["kind"] == "InferenceService" and fault.type == "init_container_fails":
                obj["spec"]["predictor"]["model"]["storageUri"] = str(fault.params["storage_uri"])
            if obj["kind"] == "HorizontalPodAutoscaler":
                _no_pod_metrics(obj)
        return objects
    if fault.type == "image_digest_unresolved":
        return _digest_unresolved(plan, fault, objects)
    if fault.type == "pod_creation_rejected":
        return _creation_rejected(plan, fault, objects)
    return objects


# metrics-server has no metrics for a pod none of whose containers runs: the HPA controller's metrics client finds
# none for the selector (kubernetes pkg/controller/podautoscaler/metrics), before it looks at pod readiness.
NO_POD_METRICS = "failed to get cpu utilization: unable to get metrics for resource cpu: no metrics returned from resource metrics API"


def _no_pod_metrics(hpa: KubeObject) -> None:
    """KServe's CPU HPA over pods that never run a container: its metric read finds nothing at all."""
    for condition in hpa["status"]["conditions"]:
        if condition["type"] == "ScalingActive" and condition["status"] == "False":
            condition["message"] = f"the HPA was unable to compute the replica count: {NO_POD_METRICS}"


def _fetch_error(plan: Plan, fault: Fault) -> str:
    """Knative's message for a tag it cannot resolve (RevisionContainerMissingMessage)."""
    return f'Unable to fetch image "{plan.spec.isvc.image}": failed to resolve image to digest: {fault.params["error"]}'


def _digest_unresolved(plan: Plan, fault: Fault, objects: list[KubeObject]) -> list[KubeObject]:
    """No Deployment, ReplicaSet, PodAutoscaler, SKS Services or pods: the Revision reconciler stopped at the digest."""
    created = plan.spec.timeline.deployed_at + timedelta(seconds=1)
    message = _fetch_error(plan, fault)
    failed = f'Revision "{plan.revision}" failed with message: {message}.'
    sks_names = {plan.revision, f"{plan.revision}-private"}
    kept = []
    for obj in objects:
        kind, name = obj["kind"], obj["metadata"]["name"]
        if kind in ("Deployment", "ReplicaSet", "PodAutoscaler", "Pod"):
            continue
        if kind in ("Service", "Endpoints") and name in sks_names:
            continue
        if kind == "EndpointSlice" and obj["metadata"]["labels"].get("kubernetes.io/service-name") in sks_names:
            continue
        if kind == "Revision":
            obj["status"] = {
                "observedGeneration": 1,
                "conditions": [
                    _condition("Active", "Unknown", created, "Deploying"),
                    _condition("ContainerHealthy", "False", created, "ContainerMissing", message),
                    _condition("Ready", "False", created, "ContainerMissing", message),
                    _condition("ResourcesAvailable", "Unknown", created, "Deploying"),
                ],
            }
        if kind == "Service" and obj["apiVersion"] == "serving.knative.dev/v1":
            obj["status"]["conditions"] = knative_status.knative_service_failed(plan, format_time(created), failed)
        if kind == "InferenceService":
            obj["status"]["conditions"] = knative_status.isvc_failed(plan, format_time(created), failed)
        kept.append(obj)
    return kept


def rejected_pod_name(plan: Plan) -> str:
    """The name the API server refused (the ReplicaSet's generated pod name)."""
    return f"{plan.replica_set}-{name_suffix(rng_for(plan.spec, 'rejected'), 5)}"


def rejection_message(plan: Plan) -> str:
    fault = blocking_fault(plan.spec)
    assert fault is not None
    return f'pods "{rejected_pod_name(plan)}" is forbidden: {fault.params["message"]}'


def _creation_rejected(plan: Plan, fault: Fault, objects: list[KubeObject]) -> list[KubeObject]:
    """The Deployment asks for its replicas; the ReplicaSet cannot create one (ReplicaFailure, no pods)."""
    wanted = plan.spec.isvc.min_replicas
    first = plan.spec.timeline.deployed_at + timedelta(seconds=2.2)
    failure = _condition("ReplicaFailure", "True", first, "FailedCreate", rejection_message(plan))
    for obj in objects:
        kind = obj["kind"]
        if kind == "Deployment" and obj["metadata"]["name"] == plan.deployment:
            obj["spec"]["replicas"] = wanted
            status = obj["status"]
            status.update({"replicas": 0, "updatedReplicas": 0, "readyReplicas": 0, "availableReplicas": 0})
            status["unavailableReplicas"] = wanted
            status["conditions"].append(failure)
        if kind == "ReplicaSet" and obj["metadata"]["name"] == plan.replica_set:
            obj["spec"]["replicas"] = wanted
            obj["metadata"]["annotations"]["deployment.kubernetes.io/desired-replicas"] = str(wanted)
            obj["status"] = {
                "observedGeneration": 1,
                "replicas": 0,
                "conditions": [dict(failure)],
            }
        if kind == "Revision":
            # Its conditions: knative_status (the ReplicaFailure becomes ResourcesAvailable=False, FailedCreate).
            obj["status"]["desiredReplicas"] = wanted
            obj["status"]["actualReplicas"] = 0
            obj["status"].pop("containerStatuses", None)
        if kind == "PodAutoscaler":
            obj["status"]["desiredScale"] = wanted
            obj["status"]["actualScale"] = 0
    return objects


# ---- events ---------------------------------------------------------------------------------------------------


def pod_events(builder: EventBuilder, pod: PodPlan) -> list[KubeObject]:
    """The kubelet's events for a pod whose serving container never starts."""
    plan = builder.plan
    fault = blocking_fault(plan.spec)
    assert fault is not None and pod.node is not None
    base = {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid, "resourceVersion": "1"}
    host = pod.node.name
    captured = plan.spec.timeline.captured_at
    events = [builder.scheduled(pod, host, base)]
    if fault.type == "init_container_fails":
        involved = {**base, "fieldPath": f"spec.initContainers{{{STORAGE_INITIALIZER}}}"}
        runs = init_runs(plan, pod)
        starts = [run.started for run in runs]
        image = STORAGE_INITIALIZER_IMAGE
        events += builder.image_present_created_started(involved, STORAGE_INITIALIZER, image, starts, starts, host)
        syncs = _back_off_syncs(plan, pod, _init_gaps(runs, captured))
        if syncs:
            events.append(
                builder.event(
                    involved,
                    "BackOff",
                    f"Back-off restarting failed container {STORAGE_INITIALIZER} in pod "
                    f"{pod.name}_{builder.ns}({pod.uid})",
                    syncs[0],
                    syncs[-1],
                    len(syncs),
                    True,
                    host=host,
                )
            )
        return events
    involved = {**base, "fieldPath": f"spec.containers{{{SERVING_CONTAINER}}}"}
    image = plan.spec.isvc.image
    attempts = pull_attempts(plan, pod)
    failures = [moment + timedelta(seconds=IMAGE_PULL_SECONDS) for moment in attempts]
    syncs = _back_off_syncs(plan, pod, _pull_gaps(attempts, captured))
    error = str(fault.params["error"])
    events.append(
        builder.event(
            involved, "Pulling", f'Pulling image "{image}"', attempts[0], attempts[-1], len(attempts), host=host
        )
    )
    for message in (f'Failed to pull image "{image}": {error}', "Error: ErrImagePull"):
        events.append(
            builder.event(involved, "Failed", message, failures[0], failures[-1], len(failures), True, host=host)
        )
    if syncs:
        events.append(
            builder.event(
                involved, "BackOff", f'Back-off pulling image "{image}"', syncs[0], syncs[-1], len(syncs), host=host
            )
        )
        events.append(
            builder.event(
                involved, "Failed", "Error: ImagePullBackOff", syncs[0], syncs[-1], len(syncs), True, host=host
            )
        )
    return events


def adjust_events(builder: EventBuilder, events: list[KubeObject]) -> list[KubeObject]:
    """The workload's events as the blocking fault leaves them (unchanged without one)."""
    plan = builder.plan
    fault = blocking_fault(plan.spec)
    if fault is None or fault.type not in NO_POD_FAULTS:
        return events
    workload = {plan.deployment, plan.replica_set}
    kept = [
        event
        for event in events
        if not (
            event["involvedObject"]["kind"] in ("Deployment", "ReplicaSet")
            and event["involvedObject"]["name"] in workload
        )
    ]
    captured = plan.spec.timeline.captured_at
    if fault.type == "image_digest_unresolved":
        revision = {
            "apiVersion": "serving.knative.dev/v1",
            "kind": "Revision",
            "name": plan.revision,
            "uid": plan.uids["revision"],
        }
        first = plan.spec.timeline.deployed_at + timedelta(seconds=1.4)
        retries = _retries(first, captured)
        kept.append(
            builder.event(
                revision,
                "InternalError",
                _fetch_error(plan, fault),
                retries[0],
                retries[-1],
                len(retries),
                True,
                component="revision-controller",
            )
        )
        return kept
    created = plan.spec.timeline.deployed_at + timedelta(seconds=2)
    wanted = plan.spec.isvc.min_replicas
    deployment, replica_set = builder.workload_refs()
    kept.append(
        builder.event(
            deployment,
            "ScalingReplicaSet",
            f"Scaled up replica set {plan.replica_set} from 0 to {wanted}",
            created,
            component="deployment-controller",
        )
    )
    retries = _retries(created + timedelta(seconds=0.2), captured)
    kept.append(
        builder.event(
            replica_set,
            "FailedCreate",
            f"Error creating: {rejection_message(plan)}",
            retries[0],
            retries[-1],
            len(retries) * wanted,
            True,
            component="replicaset-controller",
        )
    )
    return kept


def hpa_events(builder: EventBuilder, events: list[KubeObject]) -> list[KubeObject]:
    """KServe's CPU HPA events as pods that never run a container leave them (unchanged without such pods)."""
    fault = blocking_fault(builder.plan.spec)
    if fault is None or fault.type not in ("init_container_fails", "image_pull_fails"):
        return events
    adjusted = []
    for event in events:
        if event["reason"] != "FailedGetResourceMetric":
            adjusted.append(event)
            continue
        event["message"] = NO_POD_METRICS
        summary = {
            **event,
            "metadata": {**event["metadata"], "name": f"{event['metadata']['name']}-replicas"},
            "reason": "FailedComputeMetricsReplicas",
            "message": f"invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric "
            f"value: {NO_POD_METRICS}",
        }
        adjusted += [event, summary]
    return adjusted


def _retries(first: datetime, captured: datetime) -> list[datetime]:
    """A controller's requeues after an error: the workqueue's back-off, 5 ms doubling up to 1000 s."""
    moments, delay, moment = [], 0.005, first
    while moment < captured:
        moments.append(moment)
        moment += timedelta(seconds=delay)
        delay = min(delay * 2, 1000.0)
    return moments
