"""Events of a scenario, as the scheduler, kubelet and controllers record them.

Repeated kubelet events (a readiness probe that keeps failing) are one Event
with a count and first/last timestamps, the way the API server aggregates
them. The scheduler writes through events.k8s.io, so its events carry
``eventTime`` and no first/last timestamps.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from nbhelpers.scenarios import blocked
from nbhelpers.scenarios.objects import (
    AGENT_CONTAINER,
    AGENT_IMAGE,
    QUEUE_IMAGE,
    custom_metric_error,
    unschedulable_message,
)
from nbhelpers.scenarios.state import (
    Plan,
    PodPlan,
    config_error,
    custom_metrics_api_missing,
    liveness_probe,
    make_uid,
    readiness_probe,
    rng_for,
    user_hpa_metric,
)
from nbhelpers.sources.kube import KubeObject
from nbhelpers.util.times import format_time


def _refused(probe: Any, ip: str, default_port: int) -> str:
    """What the kubelet reports for a probe that finds nothing listening."""
    for handler in ("httpGet", "tcpSocket"):
        if handler in probe:
            port = probe[handler].get("port", default_port)
            if handler == "httpGet":
                path = probe[handler].get("path", "/")
                return f'Get "http://{ip}:{port}{path}": dial tcp {ip}:{port}: connect: connection refused'
            return f"dial tcp {ip}:{port}: connect: connection refused"
    return f"dial tcp {ip}:{default_port}: connect: connection refused"


def _timed_out(probe: Any, ip: str, default_port: int) -> str:
    """What the kubelet reports for a probe the server does not answer within ``timeoutSeconds``."""
    http = probe.get("httpGet")
    if http is not None:
        port, path = http.get("port", default_port), http.get("path", "/")
        return (
            f'Get "http://{ip}:{port}{path}": context deadline exceeded (Client.Timeout exceeded while awaiting '
            "headers)"
        )
    return f"dial tcp {ip}:{default_port}: i/o timeout"


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

    def scheduled(self, pod: PodPlan, node: str, involved: dict[str, Any]) -> KubeObject:
        moment = pod.created + timedelta(milliseconds=self.rng.randint(20, 400))
        event = self.event(
            involved,
            "Scheduled",
            f"Successfully assigned {self.ns}/{pod.name} to {node}",
            moment,
            component="default-scheduler",
        )
        event.update({"firstTimestamp": None, "lastTimestamp": None, "eventTime": _micro(moment), "action": "Binding"})
        event.pop("count")
        event["reportingInstance"] = "default-scheduler-control-plane"
        return event

    def pod_events(self, pod: PodPlan) -> list[KubeObject]:
        base = {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid, "resourceVersion": "1"}
        if pod.node is None:
            return self.unschedulable(pod, base)
        events = [self.scheduled(pod, pod.node.name, base)]
        if pod.config_error_syncs:
            return events + self.config_errors(pod, base)
        events += self.container_starts(pod, base, self.plan.container, self.plan.spec.isvc.image, 0.0)
        if self.plan.serverless:
            events += self.container_starts(pod, base, "queue-proxy", QUEUE_IMAGE, 0.15)
        if pod.sidecar_started is not None:
            events += self.container_starts(pod, base, AGENT_CONTAINER, AGENT_IMAGE, 0.2)
            events += self.agent_unhealthy(pod, base)
        if pod.probe_failures or pod.blip_failures:
            events += self.unhealthy(pod, base)
        if pod.stopping is not None:
            events += self.stopped(pod, base)
        if pod.liveness_failures or pod.busy_liveness_failures:
            events += self.liveness(pod, base)
        if pod.back_offs:
            involved = {**base, "fieldPath": f"spec.containers{{{self.plan.container}}}"}
            events.append(
                self.event(
                    involved,
                    "BackOff",
                    f"Back-off restarting failed container {self.plan.container} in pod {pod.name}_{self.ns}({pod.uid})",
                    pod.back_offs[0],
                    pod.back_offs[-1],
                    len(pod.back_offs),
                    True,
                    host=pod.node.name,
                )
            )
        return events

    def container_starts(
        self, pod: PodPlan, base: dict[str, Any], name: str, image: str, offset: float
    ) -> list[KubeObject]:
        """Pulling/Pulled, Created and Started: one aggregated event each, counted over the container's runs."""
        spec, host = self.plan.spec, pod.node.name if pod.node else ""
        involved = {**base, "fieldPath": f"spec.containers{{{name}}}"}
        # A sidecar starts once, with the pod's first containers (even when the serving container is never created).
        firsts = [run.started for run in pod.runs] if name == self.plan.container else [pod.containers_started]
        starts = [moment + timedelta(seconds=offset) for moment in firsts]
        events = []
        pull_seconds = spec.isvc.image_pull_seconds if name == self.plan.container else 0.0
        present = starts
        if pull_seconds > 0:
            pulling = pod.created + timedelta(seconds=1.5)
            events.append(self.event(involved, "Pulling", f'Pulling image "{image}"', pulling, host=host))
            took = (
                f"{int(pull_seconds // 60)}m{pull_seconds % 60:.3f}s" if pull_seconds >= 60 else f"{pull_seconds:.3f}s"
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
            present = starts[1:]
        return [*events, *self.image_present_created_started(involved, name, image, present, starts, host)]

    def image_present_created_started(
        self,
        involved: dict[str, Any],
        name: str,
        image: str,
        present: list[datetime],
        starts: list[datetime],
        host: str,
    ) -> list[KubeObject]:
        """ "Container image ... already present" (for the ``present`` starts), then Created and Started: one
        aggregated event each, as the kubelet writes them for a container's runs."""
        events = []
        if present:
            events.append(
                self.event(
                    involved,
                    "Pulled",
                    f'Container image "{image}" already present on machine',
                    present[0] - timedelta(seconds=1),
                    present[-1] - timedelta(seconds=1),
                    len(present),
                    host=host,
                )
            )
        for reason, shift in (("Created", 0.5), ("Started", 0.0)):
            events.append(
                self.event(
                    involved,
                    reason,
                    f"{reason} container {name}",
                    starts[0] - timedelta(seconds=shift),
                    starts[-1] - timedelta(seconds=shift),
                    len(starts),
                    host=host,
                )
            )
        return events

    def config_errors(self, pod: PodPlan, base: dict[str, Any]) -> list[KubeObject]:
        """A container the kubelet cannot configure: on every sync the image is present, then creation fails."""
        syncs, host = pod.config_error_syncs, pod.node.name if pod.node else ""
        involved = {**base, "fieldPath": f"spec.containers{{{self.plan.container}}}"}
        image = self.plan.spec.isvc.image
        present = f'Container image "{image}" already present on machine'
        failed = f"Error: {config_error(self.plan.spec)}"
        events = [
            self.event(involved, "Pulled", present, syncs[0], syncs[-1], len(syncs), host=host),
            self.event(involved, "Failed", failed, syncs[0], syncs[-1], len(syncs), True, host=host),
        ]
        if self.plan.serverless:  # the kubelet goes on with the pod's other containers: queue-proxy starts once
            events += self.container_starts(pod, base, "queue-proxy", QUEUE_IMAGE, 0.15)
        return events

    def stopped(self, pod: PodPlan, base: dict[str, Any]) -> list[KubeObject]:
        """The kubelet stopping the containers of a pod the autoscaler scaled away."""
        assert pod.stopping is not None and pod.node is not None
        names = [self.plan.container] + (["queue-proxy"] if self.plan.serverless else [])
        return [
            self.event(
                {**base, "fieldPath": f"spec.containers{{{name}}}"},
                "Killing",
                f"Stopping container {name}",
                pod.stopping + timedelta(seconds=0.3),
                host=pod.node.name,
            )
            for name in names
        ]

    def liveness(self, pod: PodPlan, base: dict[str, Any]) -> list[KubeObject]:
        """Liveness failures on the serving container and, when they reach the threshold, the kubelet's kills."""
        probe: Any = liveness_probe(self.plan.spec) or {}
        involved = {**base, "fieldPath": f"spec.containers{{{self.plan.container}}}"}
        host = pod.node.name if pod.node else ""
        port = self.plan.spec.isvc.container_port
        groups = (
            (f"Liveness probe failed: {_refused(probe, pod.ip, port)}", pod.liveness_failures),
            (f"Liveness probe failed: {_timed_out(probe, pod.ip, port)}", pod.busy_liveness_failures),
        )
        events = [
            self.event(involved, "Unhealthy", message, failures[0], failures[-1], len(failures), True, host=host)
            for message, failures in groups
            if failures
        ]
        kills = [run.killed_at for run in pod.runs if run.killed_at is not None]
        if kills:
            events.append(
                self.event(
                    involved,
                    "Killing",
                    f"Container {self.plan.container} failed liveness probe, will be restarted",
                    kills[0],
                    kills[-1],
                    len(kills),
                    host=host,
                )
            )
        return events

    def unschedulable(self, pod: PodPlan, base: dict[str, Any]) -> list[KubeObject]:
        """The scheduler's FailedScheduling (events.k8s.io: a series) and the cluster autoscaler's verdict."""
        attempts = pod.scheduling_attempts
        message = unschedulable_message(self.plan.spec)
        failed = self.event(base, "FailedScheduling", message, attempts[0], warning=True, component="default-scheduler")
        failed.update({"firstTimestamp": None, "lastTimestamp": None, "eventTime": _micro(attempts[0])})
        failed.pop("count")
        failed["reportingInstance"] = "default-scheduler-control-plane"
        failed["action"] = "Scheduling"
        if len(attempts) > 1:
            failed["series"] = {"count": len(attempts), "lastObservedTime": _micro(attempts[-1])}
        first = attempts[0] + timedelta(seconds=11)
        last = self.plan.spec.timeline.captured_at - timedelta(seconds=self.rng.uniform(5, 40))
        checks = max(1, int((last - first).total_seconds() // 10) + 1)
        not_triggered = self.event(
            base,
            "NotTriggerScaleUp",
            "pod didn't trigger scale-up: 1 max node group size reached",
            first,
            last,
            checks,
            component="cluster-autoscaler",
        )
        return [failed, not_triggered]

    def unhealthy(self, pod: PodPlan, base: dict[str, Any]) -> list[KubeObject]:
        """The aggregated readiness failures: on kserve-container, or on queue-proxy under Knative.

        A readiness blip on a serving engine is a health check that times out: the kubelet says so on
        kserve-container (a message of its own, so an event of its own); under Knative the kubelet probes
        queue-proxy, which answers 503 when its own check of the engine times out (the same event as the
        failures during the load)."""
        spec = self.plan.spec
        probe: Any = readiness_probe(spec) or {}
        port = self.plan.probe_port
        groups: list[tuple[str, tuple[datetime, ...]]]
        if self.plan.serverless:
            container = "queue-proxy"
            message = "Readiness probe failed: HTTP probe failed with statuscode: 503"
            groups = [(message, tuple(sorted(pod.probe_failures + pod.blip_failures)))]
        else:
            container = self.plan.container
            groups = [
                (f"Readiness probe failed: {_refused(probe, pod.ip, port)}", pod.probe_failures),
                (f"Readiness probe failed: {_timed_out(probe, pod.ip, port)}", pod.blip_failures),
            ]
        involved = {**base, "fieldPath": f"spec.containers{{{container}}}"}
        host = pod.node.name if pod.node else ""
        return [
            self.event(involved, "Unhealthy", message, failures[0], failures[-1], len(failures), True, host=host)
            for message, failures in groups
            if failures
        ]

    def agent_unhealthy(self, pod: PodPlan, base: dict[str, Any]) -> list[KubeObject]:
        """The agent's own readiness probe on '/', every 10 s from its start: 404, the path it does not serve."""
        assert pod.sidecar_started is not None
        first = pod.sidecar_started + timedelta(seconds=2.5)
        if first >= self.plan.spec.timeline.captured_at:
            return []
        count = int((self.plan.spec.timeline.captured_at - first).total_seconds() // 10) + 1
        last = first + timedelta(seconds=10 * (count - 1))
        involved = {**base, "fieldPath": f"spec.containers{{{AGENT_CONTAINER}}}"}
        message = "Readiness probe failed: HTTP probe failed with statuscode: 404"
        host = pod.node.name if pod.node else ""
        return [self.event(involved, "Unhealthy", message, first, last, count, True, host=host)]

    def workload_refs(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The involvedObject of the predictor Deployment's events and of its ReplicaSet's."""
        plan = self.plan
        return (
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": plan.deployment, "uid": plan.uids["deployment"]},
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": plan.replica_set, "uid": plan.uids["replicaset"]},
        )

    def workload_events(self) -> list[KubeObject]:
        """The Deployment's scaling decisions and the ReplicaSet's pod creations and deletions.

        The first scale-up is the rollout; every later change follows a pod created or scaled away. Equal
        messages are one aggregated event, as the API server keeps them.
        """
        plan = self.plan
        created = plan.spec.timeline.deployed_at + timedelta(seconds=2)
        deployment, replica_set = self.workload_refs()
        initial = [pod for pod in plan.pods if pod.created <= created + timedelta(seconds=60)]
        changes: list[tuple[datetime, int]] = [(created, len(initial))]
        changes += [(pod.created - timedelta(seconds=0.4), +1) for pod in plan.pods if pod not in initial]
        changes += [(pod.stopping, -1) for pod in plan.pods if pod.stopping is not None]
        changes.sort(key=lambda change: change[0])
        scaled: dict[str, list[datetime]] = {}
        count = 0
        for moment, delta in changes:
            before, count = count, count + delta
            direction = "up" if count > before else "down"
            message = f"Scaled {direction} replica set {plan.replica_set} from {before} to {count}"
            scaled.setdefault(message, []).append(moment)
        events = [
            self.event(
                deployment,
                "ScalingReplicaSet",
                message,
                moments[0],
                moments[-1],
                len(moments),
                component="deployment-controller",
            )
            for message, moments in scaled.items()
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
        events.extend(
            self.event(
                replica_set,
                "SuccessfulDelete",
                f"Deleted pod: {pod.name}",
                pod.stopping + timedelta(seconds=0.2),
                component="replicaset-controller",
            )
            for pod in plan.pods
            if pod.stopping is not None
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

    def metric_fetch_events(self, metric: str) -> list[KubeObject]:
        """The HPA controller's complaints, every sync, about a Pods metric it cannot fetch."""
        plan = self.plan
        first = plan.spec.timeline.deployed_at + timedelta(seconds=5 + 15 + self.rng.uniform(0, 2))
        last = plan.spec.timeline.captured_at - timedelta(seconds=self.rng.uniform(1, 14))
        count = int((last - first).total_seconds() // 15) + 1
        involved = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "name": plan.hpa_name}
        error = custom_metric_error(metric)
        return [
            self.event(involved, "FailedGetPodsMetric", error, first, last, count, True, "horizontal-pod-autoscaler"),
            self.event(
                involved,
                "FailedComputeMetricsReplicas",
                f"invalid metrics (1 invalid out of 1), first error is: failed to get pods metric value: {error}",
                first,
                last,
                count,
                True,
                "horizontal-pod-autoscaler",
            ),
        ]

    def rescale_events(self, metric: str) -> list[KubeObject]:
        """The HPA controller's SuccessfulRescale event for each scale-out decision."""
        plan = self.plan
        involved = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "name": plan.hpa_name}
        return [
            self.event(
                involved,
                "SuccessfulRescale",
                f"New size: {size}; reason: pods metric {metric} above target",
                moment,
                component="horizontal-pod-autoscaler",
            )
            for moment, size in plan.scale_ups
        ]


def build_events(plan: Plan) -> list[KubeObject]:
    builder = EventBuilder(plan)
    events = blocked.adjust_events(builder, builder.workload_events())
    for pod in plan.pods:
        events.extend(blocked.pod_events(builder, pod) if blocked.is_blocked(plan, pod) else builder.pod_events(pod))
    isvc = plan.spec.isvc
    if isvc.deployment_mode == "RawDeployment" and isvc.autoscaler_class == "hpa":
        events.extend(blocked.hpa_events(builder, builder.hpa_events()))
    user_metric = user_hpa_metric(plan.spec)
    if user_metric is not None and custom_metrics_api_missing(plan.spec):
        events.extend(builder.metric_fetch_events(user_metric[0]))
    if user_metric is not None and plan.scale_ups:
        events.extend(builder.rescale_events(user_metric[0]))
    return events
