"""The objects KServe renders for an LLMInferenceService (llm-d), for a scenario whose ``isvc.kind`` says so.

The vLLM pods are the plan's pods (state.py models their lives exactly as for a RawDeployment predictor); this
module names and labels them as KServe's llmisvc controller does and adds the router in front of them:

- the LLMInferenceService ``serving.kserve.io/v1alpha2`` with the conditions KServe rolls up
  (pkg/apis/serving/v1alpha2/llm_inference_service_lifecycle.go; reasons from pkg/controller/v1alpha2/llmisvc:
  router.go, scheduler.go propagateComponentDeploymentStatus, workload_single_node.go);
- the main workload Deployment ``<name>-kserve`` (workload_single_node.go), its pods' container ``main`` on port 8000
  (config/llmisvcconfig/config-llm-template.yaml), the Service ``<name>-kserve-workload-svc`` (workload.go);
- the HTTPRoute ``<name>-kserve-route`` (config-llm-router-route.yaml) on the Gateway the service names in
  ``spec.router.gateway.refs``, the InferencePool ``<name>-inference-pool`` (inference.networking.k8s.io/v1) and the
  endpoint picker Deployment ``<name>-kserve-router-scheduler`` with its Service ``<name>-epp-service``
  (config-llm-scheduler.yaml, scheduler.go SchedulerLabels).

With ``llmisvc.prefill_replicas`` the main workload takes the decode role and a prefill Deployment
``<name>-kserve-prefill`` stands beside it (nbhelpers/scenarios/disagg.py); with ``llmisvc.parallelism`` the main
workload is a LeaderWorkerSet (nbhelpers/scenarios/multinode.py). Shapes: docs/upstream-facts.md#llminferenceservice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from nbhelpers.scenarios import blocked, disagg, multinode, routes
from nbhelpers.scenarios.events import EventBuilder, build_events
from nbhelpers.scenarios.logs import kubelet_stamp
from nbhelpers.scenarios.objects import ObjectBuilder, _condition, _meta, _owner, _probe
from nbhelpers.scenarios.spec import Router, ScenarioSpec
from nbhelpers.scenarios.state import Plan, make_uid, name_suffix, rng_for
from nbhelpers.sources import kube
from nbhelpers.sources.kube import KubeObject
from nbhelpers.util.times import format_time as _at

LLMISVC_API = "serving.kserve.io/v1alpha2"
POOL_API = "inference.networking.k8s.io/v1"
GATEWAY_API = "gateway.networking.k8s.io/v1"
WORKLOAD_COMPONENT = "llminferenceservice-workload"
ROUTER_COMPONENT = "llminferenceservice-router"
PICKER_PORTS = (("grpc", 9002), ("grpc-health", 9003), ("metrics", 9090), ("zmq", 5557))
VLLM_PORT = 8000  # KServe's presets: vLLM (or the P/D routing sidecar) receives on 8000, the pool targets it
PICKER_READY_SECONDS = 35.0  # the preset's readinessProbe waits 30 s, then the first gRPC check passes
DEPLOYMENT_DEADLINE_SECONDS = 600
# The picker's scheduling profile when it routes on prompt prefixes: the prefix-cache scorer weighted above the
# load scorers (the Gateway API Inference Extension's EndpointPickerConfig; plugin names of its scheduling framework).
PREFIX_CACHE_CONFIG = """apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: prefix-cache-scorer
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-scorer
    weight: 3
  - pluginRef: queue-scorer
    weight: 1
  - pluginRef: kv-cache-utilization-scorer
    weight: 1
  - pluginRef: max-score-picker
"""
# The CRD's defaulted status of a Gateway no controller has reconciled (gateway-api apis/v1 gateway_types.go).
WAITING_FOR_CONTROLLER = "Waiting for controller"


def base_labels(name: str, component: str) -> dict[str, str]:
    """What KServe sets on every object it renders for ``name`` (pkg/constants: KubernetesAppNameLabelKey, ...)."""
    return {
        kube.LLMISVC_COMPONENT_LABEL: component,
        kube.LLMISVC_NAME_LABEL: name,
        kube.LLMISVC_PART_OF_LABEL: kube.LLMISVC_PART_OF,
    }


def workload_labels(name: str, role: str = "both") -> dict[str, str]:
    """A vLLM pod's labels (singleNodeLabels): ``role`` is both for the main workload, decode for it beside a prefill
    workload, prefill for ``-prefill`` (whose component alone differs: LLMComponentWorkloadPrefill)."""
    component = f"{WORKLOAD_COMPONENT}-prefill" if role == "prefill" else WORKLOAD_COMPONENT
    return {**base_labels(name, component), kube.LLMISVC_WORKLOAD_LABEL: "workload", kube.LLMISVC_ROLE_LABEL: role}


def pool_default_selector(name: str) -> dict[str, str]:
    """GetWorkloadLabelSelector (workload.go): the pool's and the workload Service's selector."""
    return {
        kube.LLMISVC_NAME_LABEL: name,
        kube.LLMISVC_PART_OF_LABEL: kube.LLMISVC_PART_OF,
        kube.LLMISVC_WORKLOAD_LABEL: "workload",
    }


@dataclass(frozen=True)
class RouterState:
    """What the spec's faults leave of the router: the Gateway, the picker, the pool's selector."""

    controller: bool  # a Gateway controller owns the GatewayClass (else nothing writes any status)
    programmed: bool
    gateway_reason: str
    gateway_message: str
    picker_ready: bool
    picker_restarts: int
    picker_log: tuple[str, ...]
    extra_selector: dict[str, str]  # labels the owner added to the pool's selector
    pod_labels: dict[str, str]  # labels the owner set on the workload (spec.labels)
    route_backends: bool  # the managed HTTPRoute names its backends (False: KServe's empty stub)
    readiness_stuck: bool  # KServe misses the pool's acceptance (kserve/kserve#5986)

    @property
    def pool_attached(self) -> bool:
        """A Gateway controller has accepted the pool: a route names it, or (no managed route) another controller."""
        return self.controller and self.route_backends


def router_state(spec: ScenarioSpec) -> RouterState:
    faults = {fault.type: fault.params for fault in spec.faults}
    gateway = faults.get("gateway_not_programmed")
    picker = faults.get("picker_not_ready")
    pool = faults.get("pool_selector_misses") or {}
    reason = str(gateway.get("reason", "")) if gateway is not None else ""
    return RouterState(
        controller=gateway is None or bool(reason),
        programmed=gateway is None,
        gateway_reason=reason,
        gateway_message=str(gateway.get("message", "")) if gateway is not None else "",
        picker_ready=picker is None,
        picker_restarts=int(picker.get("restarts", 0)) if picker is not None else 0,
        picker_log=tuple(str(line) for line in picker.get("log", ())) if picker is not None else (),
        extra_selector={str(k): str(v) for k, v in (pool.get("selector") or {}).items()},
        pod_labels={str(k): str(v) for k, v in (pool.get("pod_labels") or {}).items()},
        route_backends="route_without_backends" not in faults,
        readiness_stuck="pool_readiness_stuck" in faults,
    )


class LlmObjectBuilder(ObjectBuilder):
    """KServe's rendering of the main vLLM workload, on top of the predictor builder's pod lifecycle."""

    def __init__(self, plan: Plan) -> None:
        super().__init__(plan)
        assert plan.spec.router is not None
        self.router: Router = plan.spec.router
        self.state = router_state(plan.spec)
        self.names = rng_for(plan.spec, "llmisvc")
        self.picker_hash = name_suffix(self.names, 10)
        self.picker_pod = f"{self.picker_deployment_name}-{self.picker_hash}-{name_suffix(self.names, 5)}"
        self.picker_uids = {kind: make_uid(self.names) for kind in ("deployment", "replicaset", "pod")}
        self.picker_ip = f"10.244.{self.names.randint(2, 250)}.{self.names.randint(2, 250)}"
        self.service_uid = make_uid(self.names)
        self.gateway_ip = f"10.96.{self.names.randint(2, 250)}.{self.names.randint(2, 250)}"
        # llm-d.ai/role of the pods: decode beside a prefill workload, else both (disagg.PrefillBuilder: prefill).
        self.role = "decode" if self.router.prefill_replicas else "both"

    # ---- names and the picker's timeline ---------------------------------------------------------

    @property
    def picker_deployment_name(self) -> str:
        return f"{self.isvc.name}-kserve-router-scheduler"

    @property
    def picker_replica_set(self) -> str:
        return f"{self.picker_deployment_name}-{self.picker_hash}"

    @property
    def pool_name(self) -> str:
        return f"{self.isvc.name}-inference-pool"

    @property
    def picker_started(self) -> datetime:
        return self.deployed + timedelta(seconds=4)

    @property
    def picker_ready_at(self) -> datetime | None:
        return self.picker_started + timedelta(seconds=PICKER_READY_SECONDS) if self.state.picker_ready else None

    def _llmisvc_owner(self) -> KubeObject:
        return _owner(LLMISVC_API, "LLMInferenceService", self.isvc.name, self.plan.uids["isvc"])

    # ---- the vLLM workload (overrides of the predictor builder) ----------------------------------

    def predictor_labels(self) -> dict[str, str]:
        return {**workload_labels(self.isvc.name, self.role), **self.state.pod_labels}

    def _pod_annotations(self) -> dict[str, str]:
        return {}

    def serving_container(self, for_pod: bool) -> KubeObject:
        """The preset's ``main`` container (config-llm-template.yaml) with the owner's image, args and resources."""
        container = super().serving_container(for_pod)
        container["command"] = ["vllm", "serve"]
        container["ports"] = [{"containerPort": self.isvc.container_port, "protocol": "TCP"}]
        container["env"] = [
            {"name": "HOME", "value": "/home"},
            {"name": "VLLM_LOGGING_LEVEL", "value": "INFO"},
            {"name": "HF_HUB_CACHE", "value": "/models"},
        ]
        container["volumeMounts"] = [
            {"name": "home", "mountPath": "/home"},
            {"name": "tmp-dir", "mountPath": "/tmp"},
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "model-cache", "mountPath": "/models"},
        ]
        container["terminationMessagePolicy"] = "FallbackToLogsOnError"
        return container

    def pod_spec(self, for_pod: bool) -> KubeObject:
        return {
            **({"initContainers": [disagg.routing_sidecar(self)]} if self.role == "decode" else {}),
            "containers": [self.serving_container(for_pod)],
            "volumes": [
                {"name": "home", "emptyDir": {}},
                {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
                {"name": "model-cache", "emptyDir": {}},
                {"name": "tmp-dir", "emptyDir": {}},
            ],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": self.plan.grace_seconds,
            "serviceAccountName": f"{self.isvc.name}-kserve",
            "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler",
        }

    def deployment(self) -> KubeObject:
        deployment = super().deployment()
        deployment["metadata"]["ownerReferences"] = [self._llmisvc_owner()]
        deployment["spec"]["selector"] = {"matchLabels": workload_labels(self.isvc.name, self.role)}
        deployment["spec"]["strategy"] = {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
        }
        return deployment

    # ---- the LLMInferenceService -----------------------------------------------------------------

    def llm_inference_service(self) -> KubeObject:
        isvc, router = self.isvc, self.router
        container: KubeObject = {"name": kube.LLMISVC_CONTAINER, "image": isvc.image}
        if self.plan.args:
            container["args"] = list(self.plan.args)
        container["resources"] = dict(isvc.resources)
        spec: KubeObject = {
            "model": {"uri": f"hf://{isvc.model.id}", "name": isvc.model.served_name},
            "replicas": isvc.min_replicas,
            "template": {"containers": [container]},
            "router": {
                **({"route": {}} if router.route else {}),
                "gateway": {"refs": [{"name": router.gateway_name, "namespace": router.gateway_namespace}]},
            },
        }
        if self.state.pod_labels:
            spec["labels"] = dict(self.state.pod_labels)
        if router.scheduler:
            scheduler: KubeObject = {}
            if self.state.extra_selector:
                scheduler["pool"] = {"spec": {"selector": {"matchLabels": dict(self.state.extra_selector)}}}
            spec["router"]["scheduler"] = scheduler
        status: KubeObject = {"observedGeneration": 1, "conditions": self._conditions()}
        if self.state.programmed:
            status["url"] = f"http://{self.gateway_ip}/{self.ns}/{isvc.name}"
        return {
            "apiVersion": LLMISVC_API,
            "kind": "LLMInferenceService",
            "metadata": _meta(isvc.name, self.ns, self.plan.uids["isvc"], self.deployed),
            "spec": spec,
            "status": status,
        }

    def _conditions(self) -> list[KubeObject]:
        """KServe's conditions: each sub-condition, then the roll-ups carrying the first failing one's reason."""
        ready = self.plan.ready_pods(self.captured)
        since = min((pod.ready_at for pod in ready if pod.ready_at), default=self.deployed + timedelta(seconds=3))
        early = self.deployed + timedelta(seconds=3)
        not_available = ("MinimumReplicasUnavailable", "Deployment does not have minimum availability.")
        gateway = f"{self.router.gateway_namespace}/{self.router.gateway_name}"
        route = f"{self.ns}/{self.isvc.name}-kserve-route"
        workload = [
            ("MainWorkloadReady", bool(ready), since if ready else early, *(("", "") if ready else not_available))
        ]
        routing = [
            (
                "GatewaysReady",
                self.state.programmed,
                early,
                *(
                    ("", "")
                    if self.state.programmed
                    else ("GatewaysNotReady", f"The following Gateways are not ready: [{gateway}]")
                ),
            ),
            (
                "HTTPRoutesReady",
                self.state.controller,
                early,
                *(
                    ("", "")
                    if self.state.controller
                    else (
                        "HTTPRoutesNotReady",
                        f"The following HTTPRoutes are not ready: [{route}: v1.HTTPRouteStatus{{}}]",
                    )
                ),
            ),
        ]
        if self.router.scheduler:
            routing.append(("InferencePoolReady", *self._pool_readiness(early, gateway)))
            picker_ready_at = self.picker_ready_at
            routing.append(
                (
                    "SchedulerWorkloadReady",
                    picker_ready_at is not None,
                    picker_ready_at or early,
                    *(("", "") if picker_ready_at else self._picker_unavailable()),
                )
            )
        entries = [
            _condition(kind, ok, moment, reason, message) for kind, ok, moment, reason, message in workload + routing
        ]
        rollups = [
            ("WorkloadsReady", entries[:1]),
            ("RouterReady", entries[1:]),
            ("Ready", entries),
        ]
        for kind, parts in rollups:
            failing = next((entry for entry in parts if entry["status"] != "True"), None)
            moment = max(datetime.fromisoformat(entry["lastTransitionTime"].replace("Z", "+00:00")) for entry in parts)
            entries.append(
                _condition(
                    kind,
                    failing is None,
                    moment,
                    *((failing.get("reason", ""), failing.get("message", "")) if failing else ()),
                )
            )
        return sorted(entries, key=lambda entry: entry["type"])

    def _pool_readiness(self, early: datetime, gateway: str) -> tuple[bool, datetime, str, str]:
        """InferencePoolReady as router.go computes it: WaitingForGateway until a Gateway's controller accepted the
        pool, and (kserve/kserve#5986) still WaitingForGateway when KServe misses an acceptance that is there."""
        pool = f"{self.ns}/{self.pool_name}"
        if not self.state.pool_attached:
            return (
                False,
                early,
                "WaitingForGateway",
                f"Inference Pool {pool} exists but no Gateway controller has accepted it yet",
            )
        if self.state.readiness_stuck:
            return False, early, "WaitingForGateway", f"Inference Pool {pool} is not yet accepted by gateway {gateway}"
        return True, early, "", ""

    def _picker_unavailable(self) -> tuple[str, str]:
        if self._picker_deadline_exceeded:
            return "ProgressDeadlineExceeded", f'ReplicaSet "{self.picker_replica_set}" has timed out progressing.'
        return "MinimumReplicasUnavailable", "Deployment does not have minimum availability."

    @property
    def _picker_deadline_exceeded(self) -> bool:
        waited = (self.captured - self.picker_started).total_seconds()
        return not self.state.picker_ready and waited > DEPLOYMENT_DEADLINE_SECONDS

    # ---- the Service in front of the pods ---------------------------------------------------------

    def workload_service(self) -> KubeObject:
        name = f"{self.isvc.name}-kserve-workload-svc"
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _meta(
                name,
                self.ns,
                self.service_uid,
                self.deployed + timedelta(seconds=2),
                base_labels(self.isvc.name, WORKLOAD_COMPONENT),
                owners=[self._llmisvc_owner()],
                generation=None,
            ),
            "spec": {
                "type": "ClusterIP",
                "clusterIP": f"10.96.{self.rng.randint(1, 250)}.{self.rng.randint(2, 250)}",
                "selector": pool_default_selector(self.isvc.name),
                "ports": [
                    {
                        "name": "http",
                        "appProtocol": "http",
                        "port": VLLM_PORT,
                        "protocol": "TCP",
                        "targetPort": VLLM_PORT,
                    }
                ],
                "sessionAffinity": "None",
            },
            "status": {"loadBalancer": {}},
        }

    # ---- the endpoint picker ----------------------------------------------------------------------

    def picker_labels(self) -> dict[str, str]:
        return base_labels(self.isvc.name, kube.LLMISVC_SCHEDULER_COMPONENT)

    def picker_container(self) -> KubeObject:
        grpc_probe = {"grpc": {"port": 9003}, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3}
        return {
            "name": kube.LLMISVC_CONTAINER,
            "image": self.router.picker_image,
            "imagePullPolicy": "IfNotPresent",
            "command": [
                "/app/epp",
                "--pool-name",
                self.pool_name,
                "--pool-namespace",
                self.ns,
                "--zap-encoder",
                "json",
                "--grpc-port",
                "9002",
                "--grpc-health-port",
                "9003",
                *(["--config-text", PREFIX_CACHE_CONFIG] if self.router.prefix_cache else []),
                *(["--config-text", disagg.PD_CONFIG] if self.router.prefill_replicas else []),
            ],
            "ports": [{"containerPort": port, "name": name, "protocol": "TCP"} for name, port in PICKER_PORTS],
            "livenessProbe": _probe(
                {
                    **grpc_probe,
                    "grpc": {"port": 9003, "service": "liveness"},
                    "initialDelaySeconds": 5,
                    "periodSeconds": 10,
                }
            ),
            "readinessProbe": _probe(
                {
                    **grpc_probe,
                    "grpc": {"port": 9003, "service": "readiness"},
                    "initialDelaySeconds": 30,
                    "periodSeconds": 10,
                }
            ),
            "resources": {"limits": {"cpu": "6", "memory": "16Gi"}, "requests": {"cpu": "1", "memory": "2Gi"}},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "FallbackToLogsOnError",
        }

    def picker_pod_spec(self) -> KubeObject:
        return {
            "containers": [self.picker_container()],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 60,
            "serviceAccountName": f"{self.isvc.name}-epp-sa",
            "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler",
        }

    def picker_objects(self) -> list[KubeObject]:
        """The picker's Deployment, ReplicaSet, pod, Service, and the Service's Endpoints and EndpointSlice."""
        created = self.deployed + timedelta(seconds=2)
        ready = self.state.picker_ready
        labels = self.picker_labels()
        template = {"metadata": {"labels": labels}, "spec": self.picker_pod_spec()}
        since = self.picker_ready_at or created
        conditions = [
            _condition(
                "Available",
                ready,
                since,
                "MinimumReplicasAvailable" if ready else "MinimumReplicasUnavailable",
                "Deployment has minimum availability." if ready else "Deployment does not have minimum availability.",
            ),
            _condition(
                "Progressing",
                not self._picker_deadline_exceeded,
                created + timedelta(seconds=DEPLOYMENT_DEADLINE_SECONDS) if self._picker_deadline_exceeded else since,
                *self._picker_progress(),
            ),
        ]
        counts = {"replicas": 1, "updatedReplicas": 1, "readyReplicas": int(ready), "availableReplicas": int(ready)}
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": _meta(
                self.picker_deployment_name,
                self.ns,
                self.picker_uids["deployment"],
                created,
                labels,
                {"deployment.kubernetes.io/revision": "1"},
                [self._llmisvc_owner()],
            ),
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
                "progressDeadlineSeconds": DEPLOYMENT_DEADLINE_SECONDS,
                "template": template,
            },
            "status": {
                "observedGeneration": 1,
                **counts,
                **({} if ready else {"unavailableReplicas": 1}),
                "conditions": conditions,
            },
        }
        rs_labels = {**labels, "pod-template-hash": self.picker_hash}
        replica_set = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": _meta(
                self.picker_replica_set,
                self.ns,
                self.picker_uids["replicaset"],
                created,
                rs_labels,
                {"deployment.kubernetes.io/desired-replicas": "1", "deployment.kubernetes.io/revision": "1"},
                [_owner("apps/v1", "Deployment", self.picker_deployment_name, self.picker_uids["deployment"])],
            ),
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": rs_labels},
                "template": {"metadata": {"labels": rs_labels}, "spec": self.picker_pod_spec()},
            },
            "status": {
                "observedGeneration": 1,
                "replicas": 1,
                "fullyLabeledReplicas": 1,
                "readyReplicas": int(ready),
                "availableReplicas": int(ready),
            },
        }
        service = self.picker_service()
        return [deployment, replica_set, self.picker_pod_object(), service, *self.picker_endpoints(service)]

    def _picker_progress(self) -> tuple[str, str]:
        if self._picker_deadline_exceeded:
            return "ProgressDeadlineExceeded", f'ReplicaSet "{self.picker_replica_set}" has timed out progressing.'
        return "NewReplicaSetAvailable" if self.state.picker_ready else "ReplicaSetUpdated", (
            f'ReplicaSet "{self.picker_replica_set}" has successfully progressed.'
            if self.state.picker_ready
            else f'ReplicaSet "{self.picker_replica_set}" is progressing.'
        )

    def picker_runs(self) -> list[tuple[datetime, datetime | None]]:
        """The picker container's runs: (started, ended); a crashing picker's last run ended before the capture."""
        restarts = self.state.picker_restarts
        if restarts == 0:
            return [(self.picker_started, None)]
        last_end = self.captured - timedelta(seconds=95)
        runs: list[tuple[datetime, datetime | None]] = []
        for index in range(restarts + 1):
            end = last_end - timedelta(seconds=(restarts - index) * 310)
            runs.append((end - timedelta(seconds=8), end))
        runs[0] = (self.picker_started, runs[0][1])
        return runs

    def picker_pod_object(self) -> KubeObject:
        node = self.spec.cluster.nodes[0]
        created = self.deployed + timedelta(seconds=2)
        ready = self.state.picker_ready
        runs = self.picker_runs()
        statuses: KubeObject = {
            "name": kube.LLMISVC_CONTAINER,
            "image": self.router.picker_image,
            "imageID": f"ghcr.io/{self.router.picker_image.split('/', 1)[1].split(':')[0]}@sha256:{self.names.getrandbits(256):064x}",
            "containerID": f"containerd://{self.names.getrandbits(256):064x}",
            "ready": ready,
            "started": runs[-1][1] is None,
            "restartCount": len(runs) - 1,
            "lastState": {},
            "state": {"running": {"startedAt": _at(runs[-1][0])}},
        }
        if len(runs) > 1:
            started, ended = runs[-1]
            assert ended is not None
            statuses["lastState"] = {
                "terminated": {
                    "exitCode": 1,
                    "reason": "Error",
                    "startedAt": _at(started),
                    "finishedAt": _at(ended),
                    "containerID": statuses["containerID"],
                }
            }
            statuses["state"] = {
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": f"back-off 5m0s restarting failed container={kube.LLMISVC_CONTAINER} "
                    f"pod={self.picker_pod}_{self.ns}({self.picker_uids['pod']})",
                }
            }
        ready_time = self.picker_ready_at or created + timedelta(seconds=2)
        not_ready = f"containers with unready status: [{kube.LLMISVC_CONTAINER}]"
        spec = self.picker_pod_spec()
        spec["nodeName"] = node.name
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": _meta(
                self.picker_pod,
                self.ns,
                self.picker_uids["pod"],
                created,
                {**self.picker_labels(), "pod-template-hash": self.picker_hash},
                owners=[_owner("apps/v1", "ReplicaSet", self.picker_replica_set, self.picker_uids["replicaset"])],
                generation=None,
            ),
            "spec": spec,
            "status": {
                "phase": "Running",
                "conditions": [
                    _condition("PodReadyToStartContainers", True, created + timedelta(seconds=2)),
                    _condition("Initialized", True, created + timedelta(seconds=1)),
                    _condition(
                        "Ready", ready, ready_time, "" if ready else "ContainersNotReady", "" if ready else not_ready
                    ),
                    _condition(
                        "ContainersReady",
                        ready,
                        ready_time,
                        "" if ready else "ContainersNotReady",
                        "" if ready else not_ready,
                    ),
                    _condition("PodScheduled", True, created + timedelta(seconds=1)),
                ],
                "podIP": self.picker_ip,
                "podIPs": [{"ip": self.picker_ip}],
                "startTime": _at(created + timedelta(seconds=1)),
                "qosClass": "Burstable",
                "containerStatuses": [statuses],
            },
        }

    def picker_service(self) -> KubeObject:
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _meta(
                f"{self.isvc.name}-epp-service",
                self.ns,
                make_uid(self.names),
                self.deployed + timedelta(seconds=2),
                self.picker_labels(),
                owners=[self._llmisvc_owner()],
                generation=None,
            ),
            "spec": {
                "type": "ClusterIP",
                "clusterIP": f"10.96.{self.names.randint(1, 250)}.{self.names.randint(2, 250)}",
                "selector": self.picker_labels(),
                "ports": [
                    {"name": name, "port": port, "protocol": "TCP", "targetPort": name}
                    for name, port in sorted(PICKER_PORTS)
                ],
                "sessionAffinity": "None",
            },
            "status": {"loadBalancer": {}},
        }

    def picker_endpoints(self, service: KubeObject) -> list[KubeObject]:
        """The picker Service's Endpoints and EndpointSlice: its one pod, ready or not."""
        ready = self.state.picker_ready
        name = kube.name(service)
        ports = [{"name": n, "port": p, "protocol": "TCP"} for n, p in sorted(PICKER_PORTS)]
        address = {
            "ip": self.picker_ip,
            "nodeName": self.spec.cluster.nodes[0].name,
            "targetRef": {"kind": "Pod", "name": self.picker_pod, "namespace": self.ns, "uid": self.picker_uids["pod"]},
        }
        subset: KubeObject = {"ports": ports, ("addresses" if ready else "notReadyAddresses"): [address]}
        meta = service["metadata"]
        endpoints = {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {
                "name": name,
                "namespace": self.ns,
                "uid": make_uid(self.names),
                "creationTimestamp": meta["creationTimestamp"],
                "resourceVersion": "1",
                "labels": dict(meta["labels"]),
            },
            "subsets": [subset],
        }
        endpoint_slice = {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{name}-{name_suffix(self.names, 5)}",
                "namespace": self.ns,
                "uid": make_uid(self.names),
                "creationTimestamp": meta["creationTimestamp"],
                "resourceVersion": "1",
                "generation": 1,
                "labels": {
                    **dict(meta["labels"]),
                    "kubernetes.io/service-name": name,
                    "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
                },
                "ownerReferences": [_owner("v1", "Service", name, meta["uid"])],
            },
            "addressType": "IPv4",
            "ports": ports,
            "endpoints": [
                {
                    "addresses": [self.picker_ip],
                    "conditions": {"ready": ready, "serving": ready, "terminating": False},
                    "targetRef": address["targetRef"],
                    "nodeName": address["nodeName"],
                }
            ],
        }
        return [endpoints, endpoint_slice]

    # ---- the route, the Gateway and the pool -------------------------------------------------------

    def _parent_ref(self) -> KubeObject:
        return {
            "group": "gateway.networking.k8s.io",
            "kind": "Gateway",
            "name": self.router.gateway_name,
            "namespace": self.router.gateway_namespace,
        }

    def _accepted_parents(self, moment: datetime, with_controller: bool, message: str = "") -> list[KubeObject]:
        if not self.state.controller:
            return []
        entry: KubeObject = {
            "parentRef": self._parent_ref(),
            "conditions": [
                {**_condition("Accepted", True, moment, "Accepted", message), "observedGeneration": 1},
                {**_condition("ResolvedRefs", True, moment, "ResolvedRefs"), "observedGeneration": 1},
            ],
        }
        if with_controller:
            entry["controllerName"] = self.router.gateway_controller
        return [entry]

    def _pool_parents(self, moment: datetime) -> list[KubeObject]:
        """The pool's status: written by the Gateway controller that routes to it (through KServe's route, or its own
        route when KServe manages none)."""
        if not self.state.pool_attached:
            return []
        if self.router.route:
            return self._accepted_parents(moment, False)
        accepted = f"InferencePool has been Accepted by controller {self.router.gateway_controller}"
        return self._accepted_parents(moment, False, accepted)

    def http_route(self) -> KubeObject:
        name, created = self.isvc.name, self.deployed + timedelta(seconds=2)
        backend: KubeObject = (
            {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": self.pool_name}
            if self.router.scheduler
            else {"kind": "Service", "name": f"{name}-kserve-workload-svc"}
        )
        rules = [
            {
                "name": rule,
                "backendRefs": [{**backend, "port": VLLM_PORT, "weight": 1}],
                "matches": [{"path": {"type": "PathPrefix", "value": f"/{self.ns}/{name}/v1/{path}"}}],
                "filters": [
                    {
                        "type": "URLRewrite",
                        "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": f"/v1/{path}"}},
                    }
                ],
                "timeouts": {"backendRequest": "0s", "request": "0s"},
            }
            for rule, path in (("v1-completions-path", "completions"), ("v1-chat-completions-path", "chat/completions"))
        ]
        rules.append(
            {
                "name": "v1-catch-all-path",
                "backendRefs": [
                    {"kind": "Service", "name": f"{name}-kserve-workload-svc", "port": VLLM_PORT, "weight": 1}
                ],
                "matches": [{"path": {"type": "PathPrefix", "value": f"/{self.ns}/{name}"}}],
                "filters": [
                    {
                        "type": "URLRewrite",
                        "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}},
                    }
                ],
                "timeouts": {"backendRequest": "0s", "request": "0s"},
            }
        )
        if not self.state.route_backends:
            # kserve/kserve#5385: the generated route as the report shows it, a bare PathPrefix / and no backendRefs.
            rules = [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}]}]
        status: KubeObject = {"parents": self._accepted_parents(created + timedelta(seconds=1), True)}
        return {
            "apiVersion": GATEWAY_API,
            "kind": "HTTPRoute",
            "metadata": _meta(
                f"{name}-kserve-route",
                self.ns,
                make_uid(self.names),
                created,
                base_labels(name, ROUTER_COMPONENT),
                owners=[self._llmisvc_owner()],
            ),
            "spec": {"parentRefs": [self._parent_ref()], "rules": rules},
            "status": status,
        }

    def gateway(self) -> KubeObject:
        router = self.router
        installed = self.deployed - timedelta(days=12)
        status: KubeObject
        if not self.state.controller:
            # Nothing owns the class: the API server's defaulted status, never updated.
            epoch = datetime.fromisoformat("1970-01-01T00:00:00+00:00")
            status = {
                "conditions": [
                    {
                        "type": kind,
                        "status": "Unknown",
                        "reason": "Pending",
                        "message": WAITING_FOR_CONTROLLER,
                        "lastTransitionTime": _at(epoch),
                    }
                    for kind in ("Accepted", "Programmed")
                ]
            }
        else:
            programmed = self.state.programmed
            status = {
                "addresses": [{"type": "IPAddress", "value": self.gateway_ip}] if programmed else [],
                "conditions": [
                    {
                        **_condition("Accepted", True, installed, "Accepted", "Resource accepted"),
                        "observedGeneration": 1,
                    },
                    {
                        **_condition(
                            "Programmed",
                            programmed,
                            installed if programmed else self.deployed - timedelta(minutes=20),
                            "Programmed" if programmed else self.state.gateway_reason,
                            "Resource programmed" if programmed else self.state.gateway_message,
                        ),
                        "observedGeneration": 1,
                    },
                ],
            }
        return {
            "apiVersion": GATEWAY_API,
            "kind": "Gateway",
            "metadata": _meta(router.gateway_name, router.gateway_namespace, make_uid(self.names), installed),
            "spec": {
                "gatewayClassName": router.gateway_class,
                "listeners": [
                    {"name": "http", "port": 80, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "All"}}}
                ],
            },
            "status": status,
        }

    def inference_pool(self) -> KubeObject:
        name, created = self.isvc.name, self.deployed + timedelta(seconds=2)
        selector = {**pool_default_selector(name), **self.state.extra_selector}
        return {
            "apiVersion": POOL_API,
            "kind": "InferencePool",
            "metadata": _meta(
                self.pool_name,
                self.ns,
                make_uid(self.names),
                created,
                self.picker_labels(),
                owners=[self._llmisvc_owner()],
            ),
            "spec": {
                "selector": {"matchLabels": selector},
                "targetPorts": [{"number": VLLM_PORT}],
                "endpointPickerRef": {
                    "kind": "Service",
                    "name": f"{name}-epp-service",
                    "port": {"number": 9002},
                    "failureMode": self.router.failure_mode,
                },
            },
            "status": {"parents": self._pool_parents(created + timedelta(seconds=1))},
        }


def build_objects(scenario: Plan) -> list[KubeObject]:
    """Every object of an LLMInferenceService scenario (the predictor path's ``build_objects`` for KServe's llm-d)."""
    builder = LlmObjectBuilder(scenario)
    objects = [builder.llm_inference_service(), builder.deployment(), builder.replica_set()]
    objects += [
        blocked.pod_object(builder, pod) if blocked.is_blocked(scenario, pod) else builder.pod(pod)
        for pod in scenario.live_pods
    ]
    service = builder.workload_service()
    objects.append(service)
    pair = builder.endpoints(service, [])
    if pair is not None:
        objects += list(pair)
    objects += [builder.http_route()] if builder.router.route else []
    objects.append(builder.gateway())
    if builder.router.scheduler:
        objects += [builder.inference_pool(), *builder.picker_objects()]
    objects += builder.nodes() + builder.api_services() + builder.metrics_server()
    objects = routes.adjust_objects(builder, blocked.adjust_objects(builder, objects))
    objects = disagg.adjust_objects(builder, multinode.adjust_objects(builder, objects))
    events = multinode.adjust_events(builder, build_events(scenario)) + disagg.prefill_events(scenario)
    return objects + events + picker_events(builder)


def picker_events(builder: LlmObjectBuilder) -> list[KubeObject]:
    """The picker's rollout and its pod's kubelet events: starts, failing readiness, back-off."""
    if not builder.router.scheduler:
        return []
    events = EventBuilder(builder.plan)
    events.rng = rng_for(builder.spec, "llmisvc-events")
    created = builder.deployed + timedelta(seconds=2)
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": builder.picker_deployment_name,
        "uid": builder.picker_uids["deployment"],
    }
    replica_set = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": builder.picker_replica_set,
        "uid": builder.picker_uids["replicaset"],
    }
    pod = {"apiVersion": "v1", "kind": "Pod", "name": builder.picker_pod, "uid": builder.picker_uids["pod"]}
    host = builder.spec.cluster.nodes[0].name
    message = f"Scaled up replica set {builder.picker_replica_set} from 0 to 1"
    found = [
        events.event(deployment, "ScalingReplicaSet", message, created, component="deployment-controller"),
        events.event(
            replica_set,
            "SuccessfulCreate",
            f"Created pod: {builder.picker_pod}",
            created,
            component="replicaset-controller",
        ),
    ]
    scheduled = events.event(
        pod,
        "Scheduled",
        f"Successfully assigned {builder.ns}/{builder.picker_pod} to {host}",
        created + timedelta(milliseconds=150),
        component="default-scheduler",
    )
    found.append(scheduled)
    starts = [started for started, _ in builder.picker_runs()]
    container = {**pod, "fieldPath": f"spec.containers{{{kube.LLMISVC_CONTAINER}}}"}
    found += events.image_present_created_started(
        container, kube.LLMISVC_CONTAINER, builder.router.picker_image, starts, starts, host
    )
    if not builder.state.picker_ready:
        first = builder.picker_started + timedelta(seconds=30)
        last = builder.captured - timedelta(seconds=12)
        count = max(1, int((last - first).total_seconds() // 10))
        found.append(
            events.event(
                container,
                "Unhealthy",
                'Readiness probe failed: service unhealthy (responded with "NOT_SERVING")',
                first,
                last,
                count,
                True,
                host=host,
            )
        )
    if builder.state.picker_restarts:
        ended = [end for _, end in builder.picker_runs() if end is not None]
        found.append(
            events.event(
                container,
                "BackOff",
                f"Back-off restarting failed container {kube.LLMISVC_CONTAINER} in pod "
                f"{builder.picker_pod}_{builder.ns}({builder.picker_uids['pod']})",
                ended[0] + timedelta(seconds=1),
                builder.captured - timedelta(seconds=5),
                max(1, len(ended) * 12),
                True,
                host=host,
            )
        )
    return found


def _zap(moment: datetime, logger: str, message: str, **fields: str) -> str:
    """One line of the picker's JSON log (--zap-encoder json)."""
    return json.dumps({"level": "info", "ts": _at(moment), "logger": logger, "msg": message, **fields})


def picker_log(builder: LlmObjectBuilder) -> str:
    """The picker's last run's log: its start, then (a picker that never turns ready) the report's error lines,
    repeated as its informers retry. The kubelet serves it both as the current log and, once the run ended, as the
    previous one."""
    started, ended = builder.picker_runs()[-1]
    end = ended or builder.captured
    lines = [
        (started, _zap(started, "setup", "Starting EPP")),
        (started, _zap(started, "setup", "Pool", name=builder.pool_name, namespace=builder.ns)),
    ]
    if builder.state.picker_log:
        moment = started + timedelta(seconds=2)
        while moment < end:
            lines += [(moment + timedelta(milliseconds=3 * i), text) for i, text in enumerate(builder.state.picker_log)]
            moment += timedelta(seconds=60 if ended is None else 3)
    else:
        serving = started + timedelta(seconds=31)
        lines.append((serving, _zap(serving, "setup", "gRPC health server is serving")))
    return "".join(f"{kubelet_stamp(moment)} {text}\n" for moment, text in lines if moment < end)
