"""Events of a scenario, as the scheduler, kubelet and controllers record them.

Repeated kubelet events (a readiness probe that keeps failing) are one Event
with a count and first/last timestamps, the way the API server aggregates
them. The scheduler writes through events.k8s.io, so its events carry
``eventTime`` and no first/last timestamps.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from nbhelpers.kube import SERVING_CONTAINER
from nbhelpers.scenarios.objects import QUEUE_IMAGE, KubeObject
from nbhelpers.scenarios.state import Plan, PodPlan, make_uid, rng_for
from nbhelpers.timeutil import format_time


def _micro(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond:06d}Z"


class EventBuilder:
    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.ns = plan.spec.isvc.namespace
        self.rng = rng_for(plan.spec, "events")

    def event(
        self,
        involved: dict[str, Any],
        reason: str,
        message: str,
        first: datetime,
        last: datetime | None = None,
        count: int = 1,
        warning: bool = False,
        component: str = "kubelet",
        host: str = "",
    ) -> KubeObject:
        event: KubeObject = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{involved['name']}.{self.rng.getrandbits(64):016x}",
                "namespace": self.ns,
                "uid": make_uid(self.rng),
                "creationTimestamp": format_time(first),
                "resourceVersion": "1",
            },
            "involvedObject": {**involved, "namespace": self.ns},
            "reason": reason,
            "message": message,
            "type": "Warning" if warning else "Normal",
            "source": {"component": component, **({"host": host} if host else {})},
            "reportingComponent": component,
            "reportingInstance": host,
            "firstTimestamp": format_time(first),
            "lastTimestamp": format_time(last or first),
            "count": count,
        }
        return event

    def scheduled(self, pod: PodPlan, involved: dict[str, Any]) -> KubeObject:
        moment = pod.created + timedelta(milliseconds=self.rng.randint(20, 400))
        event = self.event(
            involved,
            "Scheduled",
            f"Successfully assigned {self.ns}/{pod.name} to {pod.node.name}",
            moment,
            component="default-scheduler",
        )
        event.update({"firstTimestamp": None, "lastTimestamp": None, "eventTime": _micro(moment), "action": "Binding"})
        event.pop("count")
        event["reportingInstance"] = "default-scheduler-control-plane"
        return event

    def pod_events(self, pod: PodPlan) -> list[KubeObject]:
        spec = self.plan.spec
        base = {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid, "resourceVersion": "1"}
        events = [self.scheduled(pod, base)]
        containers = [(SERVING_CONTAINER, spec.isvc.image, spec.isvc.image_pull_seconds)]
        if self.plan.serverless:
            containers.append(("queue-proxy", QUEUE_IMAGE, 0.0))
        for name, image, pull_seconds in containers:
            involved = {**base, "fieldPath": f"spec.containers{{{name}}}"}
            host = pod.node.name
            started = pod.started + timedelta(milliseconds=150 if name == "queue-proxy" else 0)
            if pull_seconds > 0:
                pulling = pod.created + timedelta(seconds=1.5)
                events.append(self.event(involved, "Pulling", f'Pulling image "{image}"', pulling, host=host))
                took = (
                    f"{int(pull_seconds // 60)}m{pull_seconds % 60:.3f}s"
                    if pull_seconds >= 60
                    else f"{pull_seconds:.3f}s"
                )
                events.append(
                    self.event(
                        involved,
                        "Pulled",
                        f'Successfully pulled image "{image}" in {took} ({took} including waiting). Image size: 9783216482 bytes.',
                        pulling + timedelta(seconds=pull_seconds),
                        host=host,
                    )
                )
            else:
                events.append(
                    self.event(
                        involved,
                        "Pulled",
                        f'Container image "{image}" already present on machine',
                        started - timedelta(seconds=1),
                        host=host,
                    )
                )
            events.append(
                self.event(
                    involved, "Created", f"Created container {name}", started - timedelta(seconds=0.5), host=host
                )
            )
            events.append(self.event(involved, "Started", f"Started container {name}", started, host=host))
        if pod.probe_failures:
            events.append(self.unhealthy(pod, base))
        return events

    def unhealthy(self, pod: PodPlan, base: dict[str, Any]) -> KubeObject:
        """The aggregated readiness failures: on kserve-container, or on queue-proxy under Knative."""
        spec = self.plan.spec
        probe: Any = spec.isvc.readiness_probe or {}
        port = self.plan.probe_port
        if self.plan.serverless:
            container, message = "queue-proxy", "Readiness probe failed: HTTP probe failed with statuscode: 503"
        elif "httpGet" in probe:
            path = probe["httpGet"].get("path", "/")
            container = SERVING_CONTAINER
            message = f'Readiness probe failed: Get "http://{pod.ip}:{port}{path}": dial tcp {pod.ip}:{port}: connect: connection refused'
        else:
            container = SERVING_CONTAINER
            message = f"Readiness probe failed: dial tcp {pod.ip}:{port}: connect: connection refused"
        involved = {**base, "fieldPath": f"spec.containers{{{container}}}"}
        failures = pod.probe_failures
        return self.event(
            involved, "Unhealthy", message, failures[0], failures[-1], len(failures), True, host=pod.node.name
        )

    def workload_events(self) -> list[KubeObject]:
        plan = self.plan
        created = plan.spec.timeline.deployed_at + timedelta(seconds=2)
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": plan.deployment,
            "uid": plan.uids["deployment"],
        }
        replica_set = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": plan.replica_set,
            "uid": plan.uids["replicaset"],
        }
        events = [
            self.event(
                deployment,
                "ScalingReplicaSet",
                f"Scaled up replica set {plan.replica_set} from 0 to {len(plan.pods)}",
                created,
                component="deployment-controller",
            )
        ]
        events.extend(
            self.event(
                replica_set,
                "SuccessfulCreate",
                f"Created pod: {pod.name}",
                pod.created,
                component="replicaset-controller",
            )
            for pod in plan.pods
        )
        return events

    def hpa_events(self) -> list[KubeObject]:
        """An HPA that cannot read CPU from pods that never became ready complains every sync."""
        plan = self.plan
        if plan.ready_pods(plan.spec.timeline.captured_at):
            return []
        name = f"{plan.spec.isvc.name}-predictor"
        first = plan.spec.timeline.deployed_at + timedelta(seconds=17)
        last = plan.spec.timeline.captured_at - timedelta(seconds=9)
        count = int((last - first).total_seconds() // 15) + 1
        involved = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "name": name}
        return [
            self.event(
                involved,
                "FailedGetResourceMetric",
                "failed to get cpu utilization: did not receive metrics for targeted pods (pods might be unready)",
                first,
                last,
                count,
                True,
                component="horizontal-pod-autoscaler",
            )
        ]


def build_events(plan: Plan) -> list[KubeObject]:
    builder = EventBuilder(plan)
    events = builder.workload_events()
    for pod in plan.pods:
        events.extend(builder.pod_events(pod))
    isvc = plan.spec.isvc
    if isvc.deployment_mode == "RawDeployment" and isvc.autoscaler_class == "hpa":
        events.extend(builder.hpa_events())
    return events
