"""A Serverless predictor's Revision, Knative Service and InferenceService conditions, derived from its pods.

Knative's Revision reconciler (knative/serving 1.15, the release the scenarios' clusters run;
``pkg/reconciler/revision/reconcile_resources.go``, ``reconcileDeployment``) does this on every pass:

1. ``PropagateDeploymentStatus`` (``pkg/apis/serving/v1/revision_lifecycle.go``, through
   ``TransformDeploymentStatus`` in ``pkg/apis/serving/k8s_lifecycle.go``): the Deployment's ``Progressing=False``
   (``ProgressDeadlineExceeded``, "ReplicaSet ... has timed out progressing.") or ``ReplicaFailure=True``
   (``FailedCreate``) becomes ``ResourcesAvailable=False`` with the same reason and message; a Deployment that
   progresses makes it True.
2. When the Deployment wants replicas and has none available, it lists the pods (the first by name, "as they all
   should be crashing") and looks at that pod: ``PodScheduled=False`` becomes ``ResourcesAvailable=False`` with the
   scheduler's reason (``Unschedulable``) and message; then, for the first container other than queue-proxy (the
   kubelet lists them by name), a ``lastState.terminated`` becomes ``ContainerHealthy=False`` with reason
   ``ExitCode<N>`` and message "Container failed with: <termination message>" ("container exited with no error"
   for exit code 0 without a message), and a waiting container, once the Deployment has exceeded its progress
   deadline, becomes ``ResourcesAvailable=False`` with the waiting reason and message.
3. ``PropagateAutoscalerStatus``: the PodAutoscaler's ``Active`` becomes the Revision's; only a PodAutoscaler whose
   scale target was initialized (the first ready pod) marks ``ResourcesAvailable`` and ``ContainerHealthy`` True,
   and never over a False one.

``Ready`` follows the living condition set (knative.dev/pkg ``apis/condition_set.go``): False with the reason and
message of the condition marked False last, Unknown while any is Unknown. The Configuration then marks itself
``RevisionFailed`` ('Revision "x" failed with message: ...', ``MarkLatestCreatedFailed`` in
``pkg/apis/serving/v1/configuration_lifecycle.go``), the Route ``RevisionMissing``, and KServe copies the Knative
Service's conditions into PredictorReady, PredictorConfigurationReady and PredictorRouteReady
(``PropagateStatus`` in kserve ``pkg/apis/serving/v1beta1/inference_service_status.go``).

Releases differ in two ways. In 1.14 to 1.16 a ContainerHealthy=False is never set True again after the pods
recover (knative/serving#15487), and the Configuration, the Route and KServe copy the failure over pods that serve:
``keeps_container_unhealthy`` writes that for the cluster's release; 1.17 fixed it (PR #15503). In 1.18.2 and from
1.20 ``ResourcesAvailable`` stays Unknown until the scale target is initialized (PRs #16100, #16094); the scenarios
run 1.15.
"""

from __future__ import annotations

from nbhelpers.scenarios.state import Plan
from nbhelpers.sources.kube import KubeObject
from nbhelpers.util.times import format_time

QUEUE_CONTAINER = "queue-proxy"
DEPLOYING = "Deploying"
# The PodAutoscaler while it waits for its first ready pod (MarkActivating in pkg/reconciler/autoscaling/kpa/kpa.go).
QUEUED = "Queued"
QUEUED_MESSAGE = "Requests to the target are being buffered as resources are provisioned."


def condition(kind: str, status: str, moment: str, reason: str = "", message: str = "") -> KubeObject:
    entry: KubeObject = {"type": kind, "status": status, "lastTransitionTime": moment}
    if reason:
        entry["reason"] = reason
    if message:
        entry["message"] = message
    return entry


def exit_message(terminated: KubeObject) -> str:
    """Knative's ContainerHealthy message for a terminated container (RevisionContainerExitingMessage)."""
    message = str(terminated.get("message") or "")
    if int(terminated.get("exitCode") or 0) == 0 and not message:
        message = "container exited with no error"
    return f"Container failed with: {message}"


def _named(objects: list[KubeObject], kind: str, name: str) -> KubeObject | None:
    return next((obj for obj in objects if obj["kind"] == kind and obj["metadata"]["name"] == name), None)


def _deployment_condition(deployment: KubeObject) -> KubeObject | None:
    """The Deployment's failure as TransformDeploymentStatus reads it (ReplicaFailure is read after Progressing)."""
    failed = None
    for kind, bad in (("Progressing", "False"), ("ReplicaFailure", "True")):
        for entry in deployment["status"].get("conditions") or []:
            if entry["type"] == kind and entry["status"] == bad:
                failed = entry
    return failed


def _timed_out(deployment: KubeObject) -> bool:
    return any(
        entry["type"] == "Progressing"
        and entry["status"] == "False"
        and entry.get("reason") == "ProgressDeadlineExceeded"
        for entry in deployment["status"].get("conditions") or []
    )


def _first_pod(plan: Plan, objects: list[KubeObject]) -> KubeObject | None:
    pods = [
        obj
        for obj in objects
        if obj["kind"] == "Pod"
        and obj["metadata"].get("labels", {}).get("serving.knative.dev/revision") == plan.revision
    ]
    return min(pods, key=lambda pod: pod["metadata"]["name"], default=None)


def _first_exit(plan: Plan, pod: KubeObject) -> str | None:
    """When the pod's serving container first exited: ContainerHealthy keeps that transition while its reason stays."""
    life = next((item for item in plan.pods if item.name == pod["metadata"]["name"]), None)
    ended = [run.ended for run in life.runs if run.ended is not None] if life is not None else []
    return format_time(min(ended)) if ended else None


def _pod_failures(plan: Plan, pod: KubeObject, timed_out: bool, deadline: str) -> list[KubeObject]:
    """What reconcileDeployment reads from the first pod, in the order it marks it."""
    marked = []
    status = pod.get("status") or {}
    for entry in status.get("conditions") or []:
        if entry["type"] == "PodScheduled" and entry["status"] == "False":
            marked.append(
                condition("ResourcesAvailable", "False", entry["lastTransitionTime"], entry["reason"], entry["message"])
            )
            break
    for container in sorted(status.get("containerStatuses") or [], key=lambda item: str(item["name"])):
        if container["name"] == QUEUE_CONTAINER:
            continue
        terminated = (container.get("lastState") or {}).get("terminated")
        waiting = (container.get("state") or {}).get("waiting")
        if terminated:
            reason = f"ExitCode{int(terminated.get('exitCode') or 0)}"
            since = _first_exit(plan, pod) or terminated["finishedAt"]
            marked.append(condition("ContainerHealthy", "False", since, reason, exit_message(terminated)))
            break
        if waiting and timed_out:
            reason, message = str(waiting.get("reason") or ""), str(waiting.get("message") or "")
            marked.append(condition("ResourcesAvailable", "False", deadline, reason, message))
            break
    return marked


def revision_conditions(plan: Plan, objects: list[KubeObject], deployment: KubeObject) -> list[KubeObject] | None:
    """The Revision's conditions at capture for a Deployment without an available replica (None when it has one)."""
    status = deployment["status"]
    wanted = int(deployment["spec"].get("replicas") or 0)
    if wanted == 0 or int(status.get("availableReplicas") or 0) > 0:
        return None
    created = deployment["metadata"]["creationTimestamp"]
    resources = condition("ResourcesAvailable", "True", created)
    healthy = condition("ContainerHealthy", "Unknown", created, DEPLOYING)
    failed = _deployment_condition(deployment)
    marked = []
    if failed is not None:
        marked.append(
            condition("ResourcesAvailable", "False", failed["lastTransitionTime"], failed["reason"], failed["message"])
        )
    deadline = failed["lastTransitionTime"] if failed is not None else created
    pod = _first_pod(plan, objects)
    if pod is not None:
        marked += _pod_failures(plan, pod, _timed_out(deployment), deadline)
    for entry in marked:
        if entry["type"] == "ResourcesAvailable":
            resources = entry
        else:
            healthy = entry
    if marked:
        last = marked[-1]
        moment = max(entry["lastTransitionTime"] for entry in marked)
        ready = condition("Ready", "False", moment, last["reason"], last.get("message", ""))
    else:
        ready = condition("Ready", "Unknown", created, DEPLOYING)
    active = condition("Active", "Unknown", created, QUEUED, QUEUED_MESSAGE)
    return [active, healthy, ready, resources]


def apply(plan: Plan, objects: list[KubeObject]) -> list[KubeObject]:
    """The objects with the Revision's conditions Knative would write for the pods, and the failure propagated."""
    if not plan.serverless or plan.llmisvc:
        return objects
    deployment = _named(objects, "Deployment", plan.deployment)
    revision = _named(objects, "Revision", plan.revision)
    if deployment is None or revision is None:
        return objects  # the Revision reconciler stopped before the Deployment (the image digest)
    conditions = revision_conditions(plan, objects, deployment)
    if conditions is None:
        _stale_exit(plan, objects, revision)
        return objects
    revision["status"]["conditions"] = conditions
    autoscaler = _named(objects, "PodAutoscaler", plan.revision)
    if autoscaler is not None:
        autoscaler["status"]["conditions"] = autoscaler_conditions(plan, autoscaler)
    ready = conditions[2]
    if ready["status"] == "False":
        first = min(entry["lastTransitionTime"] for entry in conditions if entry["status"] == "False")
        _propagate_failure(plan, objects, ready, first)
    return objects


def keeps_container_unhealthy(release: str) -> bool:
    """Knative 1.14 to 1.16: ``PropagateAutoscalerStatus`` counts ContainerHealthy=False as resources unavailable
    (PR #14744, in 1.14) and so never sets it back to True, and nothing else does until 1.17 (PR #15503):
    knative/serving#15487."""
    parts = release.split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return False
    return (int(parts[0]), int(parts[1])) in ((1, 14), (1, 15), (1, 16))


def _first_unavailable_exit(plan: Plan) -> tuple[str, int] | None:
    """The first moment a container had exited while no pod was available, as the Revision reconciler saw it (the
    Deployment's availableReplicas fell to 0, and the first pod by name showed a ``lastState.terminated``): its time
    and exit code."""
    captured = plan.spec.timeline.captured_at
    ends = sorted(run.ended for pod in plan.pods for run in pod.runs if run.ended is not None and run.ended <= captured)
    for moment in ends:
        if plan.ready_pods(moment):
            continue
        alive = sorted((pod for pod in plan.pods if pod.alive(moment) and pod.runs), key=lambda pod: pod.name)
        last = alive[0].last_termination(moment) if alive else None
        if last is not None:
            return format_time(moment), last.exit_code
    return None


def _stale_exit(plan: Plan, objects: list[KubeObject], revision: KubeObject) -> None:
    """A revision with an available pod whose ContainerHealthy went False on an earlier exit and, on 1.14 to 1.16,
    stayed False: Ready=False over pods that serve, copied up by the Configuration, the Route and KServe."""
    if not keeps_container_unhealthy(plan.spec.cluster.knative):
        return
    exit_seen = _first_unavailable_exit(plan)
    if exit_seen is None:
        return
    moment, code = exit_seen
    message = exit_message({"exitCode": code})
    conditions = revision["status"]["conditions"]
    for index, entry in enumerate(conditions):
        if entry["type"] in ("ContainerHealthy", "Ready"):
            conditions[index] = condition(entry["type"], "False", moment, f"ExitCode{code}", message)
    failed = f'Revision "{plan.revision}" failed with message: {message}.'
    unready = f'Revision "{plan.revision}" failed to become ready.'
    for obj in objects:
        if obj["kind"] == "Service" and obj["apiVersion"] == "serving.knative.dev/v1":
            obj["status"]["conditions"] = [
                condition("ConfigurationsReady", "False", moment, "RevisionFailed", failed),
                condition("Ready", "False", moment, "RevisionMissing", unready),
                condition("RoutesReady", "False", moment, "RevisionMissing", unready),
            ]
        if obj["kind"] == "InferenceService" and obj["status"]:
            # PredictorReady copies the Knative Service's Ready (the Route's words); the ingress reconciler then marks IngressReady
            # False ("Predictor ingress not created") but keeps the VirtualService it made (ingress_reconciler.go).
            obj["status"]["conditions"] = [
                condition("IngressReady", "False", moment, "Predictor ingress not created"),
                condition("LatestDeploymentReady", "False", moment, "PredictorConfigurationReady not ready"),
                condition("PredictorConfigurationReady", "False", moment, "RevisionFailed", failed),
                condition("PredictorReady", "False", moment, "RevisionMissing", unready),
                condition("PredictorRouteReady", "False", moment, "RevisionMissing", unready),
                condition("Ready", "False", moment, "RevisionMissing", unready),
            ]


def autoscaler_conditions(plan: Plan, autoscaler: KubeObject) -> list[KubeObject]:
    """The KPA of a revision without a ready pod: activating (computeActiveCondition in
    pkg/reconciler/autoscaling/kpa/kpa.go: wanted pods, fewer ready than the minimum), its scale target initialized
    only if a pod was ever ready. With min-scale 1 or more it never scales to zero, so it keeps activating."""
    created = autoscaler["metadata"]["creationTimestamp"]
    initialized = [pod.ready_at for pod in plan.pods if pod.ready_at is not None]
    return [
        condition("Active", "Unknown", created, QUEUED, QUEUED_MESSAGE),
        condition("Ready", "Unknown", created, QUEUED, QUEUED_MESSAGE),
        condition("ScaleTargetInitialized", "True", format_time(min(initialized)))
        if initialized
        else condition("ScaleTargetInitialized", "Unknown", created),
        condition("SKSReady", "True", created),
    ]


def _propagate_failure(plan: Plan, objects: list[KubeObject], ready: KubeObject, moment: str) -> None:
    """The Configuration fails when the Revision's Ready first turns False (later passes leave its message as is)."""
    failed = f'Revision "{plan.revision}" failed with message: {ready.get("message", "")}.'
    for obj in objects:
        if obj["kind"] == "Service" and obj["apiVersion"] == "serving.knative.dev/v1":
            obj["status"]["conditions"] = knative_service_failed(plan, moment, failed)
        if obj["kind"] == "InferenceService" and obj["status"]:
            obj["status"]["conditions"] = isvc_failed(plan, moment, failed)


def knative_service_failed(plan: Plan, moment: str, failed: str) -> list[KubeObject]:
    """The Knative Service over a failed latest Revision that never became ready: its Configuration's RevisionFailed,
    the Route's RevisionMissing, and Ready from the Route, propagated last (the status in knative/serving#11337)."""
    missing = f'Configuration "{plan.ksvc}" does not have any ready Revision.'
    return [
        condition("ConfigurationsReady", "False", moment, "RevisionFailed", failed),
        condition("Ready", "False", moment, "RevisionMissing", missing),
        condition("RoutesReady", "False", moment, "RevisionMissing", missing),
    ]


def isvc_failed(plan: Plan, moment: str, failed: str) -> list[KubeObject]:
    """KServe copies the Knative Service's conditions (as in kubeflow/kubeflow#7560's status)."""
    missing = f'Configuration "{plan.ksvc}" does not have any ready Revision.'
    return [
        condition("IngressReady", "False", moment, "RevisionMissing", missing),
        condition("LatestDeploymentReady", "False", moment, "PredictorConfigurationReady not ready"),
        condition("PredictorConfigurationReady", "False", moment, "RevisionFailed", failed),
        condition("PredictorReady", "False", moment, "RevisionMissing", missing),
        condition("PredictorRouteReady", "False", moment, "RevisionMissing", missing),
        condition("Ready", "False", moment, "RevisionMissing", missing),
    ]
