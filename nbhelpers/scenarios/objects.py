"""Kubernetes objects of a scenario, shaped as the API server returns them (docs/upstream-facts.md naming).

Serverless: InferenceService, Knative Service ``<isvc>-predictor``, Revision
``-00001``, PodAutoscaler, Deployment ``<rev>-deployment``, ReplicaSet, pods
(kserve-container + queue-proxy), Services (ExternalName ``<isvc>-predictor``,
``<rev>``, ``<rev>-private``), Endpoints and EndpointSlices, Istio
VirtualServices and Gateways. RawDeployment: InferenceService, Deployment,
ReplicaSet, pods, Service and (class hpa) HPA ``<isvc>-predictor``, Ingress.
Both: the ServingRuntime, GPU nodes, APIServices, the KServe and Knative
config maps, and the metrics-server behind ``metrics.k8s.io``.

Pods follow their plan: Pending with only the scheduler's condition when no
node fits; Running with a container in CrashLoopBackOff (and its last
termination) when it keeps being killed; a pod the autoscaler scaled away is
not in the API any more (only its events are). On a Kourier cluster there are no
Istio objects at all; KServe's ``<isvc>`` ExternalName Service exists whenever
KServe expects a VirtualService and the predictor became ready.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import yaml

from nbhelpers.scenarios.spec import NGINX_DEFAULT_TIMEOUT_SECONDS, GpuNode, ScenarioSpec
from nbhelpers.scenarios.state import (
    Plan,
    PodPlan,
    Run,
    config_error,
    declared_resources,
    effective_resources,
    liveness_probe,
    logger_url,
    make_uid,
    nginx_timeout_seconds,
    readiness_probe,
    restart_back_off,
    rng_for,
    scales_out,
    stale_hpa_target,
    user_hpa_metric,
)
from nbhelpers.sources.kube import (
    AUTOSCALER_CLASS_ANNOTATION,
    DEPLOYMENT_MODE_ANNOTATION,
    ISVC_LABEL,
    SERVING_CONTAINER,
    KubeObject,
)
from nbhelpers.util.times import format_time

KNATIVE_SYSTEM = "knative-serving"
KSERVE_SYSTEM = "kserve"
INGRESS_DOMAIN = "example.com"
QUEUE_PORT = 8012
ISTIO_LOCAL_GATEWAY = "knative-local-gateway.istio-system.svc.cluster.local"
KOURIER_INTERNAL = "kourier-internal.kourier-system.svc.cluster.local"
NGINX_ANNOTATION_PREFIX = "nginx.ingress.kubernetes.io/"
QUEUE_IMAGE = "gcr.io/knative-releases/knative.dev/serving/cmd/queue:v1.15.2"
AGENT_IMAGE = "kserve/agent:v0.15.2"
AGENT_CONTAINER = "agent"
AGENT_PORT = 9081
MONITORING = "monitoring"
ADAPTER_LABELS = {"app.kubernetes.io/name": "prometheus-adapter", "app.kubernetes.io/instance": "prometheus-adapter"}
ADAPTER_IMAGE = "registry.k8s.io/prometheus-adapter/prometheus-adapter:v0.12.0"
# The canary copy of the predictor was made this long before the service's current deployment, and scaled to
# zero when its test ended; the owner's HPA was pointed at it during the test.
# The predictor Deployment's progressDeadlineSeconds (Knative's config-deployment progressDeadline default, 600s).
PROGRESS_DEADLINE_SECONDS = 600
STALE_COPY_AGE = timedelta(days=9)
STALE_COPY_SCALED_DOWN = timedelta(days=7)


def _at(moment: datetime) -> str:
    return format_time(moment)


def _meta(
    name: str,
    namespace: str | None,
    uid: str,
    created: datetime,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    owners: list[KubeObject] | None = None,
    generation: int | None = 1,
) -> KubeObject:
    meta: KubeObject = {"name": name, "uid": uid, "creationTimestamp": _at(created), "resourceVersion": "1"}
    if namespace:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    if owners:
        meta["ownerReferences"] = owners
    if generation is not None:
        meta["generation"] = generation
    return meta


def _owner(api_version: str, kind: str, name: str, uid: str) -> KubeObject:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _unknown(kind: str, moment: datetime, reason: str) -> KubeObject:
    return {"type": kind, "status": "Unknown", "lastTransitionTime": _at(moment), "reason": reason}


def _condition(kind: str, status: bool, moment: datetime, reason: str = "", message: str = "") -> KubeObject:
    entry: KubeObject = {"type": kind, "status": "True" if status else "False", "lastTransitionTime": _at(moment)}
    if reason:
        entry["reason"] = reason
    if message:
        entry["message"] = message
    return entry


class ObjectBuilder:
    """Builds every object of one scenario from its :class:`Plan`."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.spec = plan.spec
        self.isvc = plan.spec.isvc
        self.ns = plan.spec.isvc.namespace
        self.captured = plan.spec.timeline.captured_at
        self.deployed = plan.spec.timeline.deployed_at
        self.rng = rng_for(plan.spec, "objects")

    # ---- shared pieces -------------------------------------------------------------------------

    def predictor_labels(self) -> dict[str, str]:
        labels = {ISVC_LABEL: self.isvc.name, "component": "predictor", "app": f"isvc.{self.isvc.name}-predictor"}
        if self.plan.serverless:
            labels.update(
                {
                    "serving.knative.dev/configuration": self.plan.ksvc,
                    "serving.knative.dev/configurationGeneration": "1",
                    "serving.knative.dev/configurationUID": self.plan.uids["configuration"],
                    "serving.knative.dev/revision": self.plan.revision,
                    "serving.knative.dev/revisionUID": self.plan.uids["revision"],
                    "serving.knative.dev/service": self.plan.ksvc,
                    "serving.knative.dev/serviceUID": self.plan.uids["ksvc"],
                    "app": self.plan.revision,
                }
            )
        return labels

    @property
    def _cache_not_writable(self) -> bool:
        """``hf_cache_not_writable``: the runtime sets no HF_HOME, and the platform runs it as an arbitrary UID."""
        return any(fault.type == "hf_cache_not_writable" for fault in self.spec.faults)

    def serving_container(self, for_pod: bool) -> KubeObject:
        """The kserve-container as the pod runs it (Knative moves the readiness probe into queue-proxy).

        With ``for_pod`` False it is the ServingRuntime's template: the probes only when the owner
        declared them there, and the runtime's default resources.
        """
        isvc = self.isvc
        container: KubeObject = {
            "name": self.plan.container,
            "image": isvc.image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"]
            if isvc.server == "vllm"
            else ["python", "-m", "huggingfaceserver"],
            "args": list(self.plan.args),
            "ports": [{"containerPort": isvc.container_port, "name": "user-port", "protocol": "TCP"}],
            "env": [
                *([] if self._cache_not_writable else [{"name": "HF_HOME", "value": "/models-cache"}]),
                {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}},
            ],
            "resources": effective_resources(self.spec) if for_pod else declared_resources(self.spec)[1],
            "volumeMounts": [
                {"name": "dshm", "mountPath": "/dev/shm"},
                {"name": "models-cache", "mountPath": "/models-cache"},
            ],
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "FallbackToLogsOnError",
        }
        if self._cache_not_writable and for_pod:
            # OpenShift's restricted SCC admits the pod with a UID from the namespace's range and HOME unset (/).
            container["securityContext"] = {"runAsNonRoot": True, "runAsUser": 1000680000}
        probes_here = for_pod or isvc.probes_in == "runtime"
        liveness = liveness_probe(self.spec)
        if liveness and probes_here:
            container["livenessProbe"] = _probe(liveness)
        readiness = readiness_probe(self.spec)
        if readiness and probes_here and not (self.plan.serverless and for_pod):
            container["readinessProbe"] = _probe(readiness)
        if self.plan.serverless and for_pod:
            container["env"].append({"name": "PORT", "value": str(isvc.container_port)})
            container["env"].append({"name": "K_REVISION", "value": self.plan.revision})
        return container

    def queue_proxy(self) -> KubeObject:
        probe = readiness_probe(self.spec) or {"tcpSocket": {"port": self.isvc.container_port}}
        period = int(probe.get("periodSeconds", 10))
        return {
            "name": "queue-proxy",
            "image": QUEUE_IMAGE,
            "imagePullPolicy": "IfNotPresent",
            "ports": [
                {"containerPort": 8022, "name": "http-queueadm", "protocol": "TCP"},
                {"containerPort": 9090, "name": "http-autometric", "protocol": "TCP"},
                {"containerPort": 9091, "name": "http-usermetric", "protocol": "TCP"},
                {"containerPort": QUEUE_PORT, "name": "queue-port", "protocol": "TCP"},
                {"containerPort": 8112, "name": "https-port", "protocol": "TCP"},
            ],
            "env": [
                {"name": "SERVING_NAMESPACE", "value": self.ns},
                {"name": "SERVING_SERVICE", "value": self.plan.ksvc},
                {"name": "SERVING_CONFIGURATION", "value": self.plan.ksvc},
                {"name": "SERVING_REVISION", "value": self.plan.revision},
                {"name": "QUEUE_SERVING_PORT", "value": str(QUEUE_PORT)},
                {"name": "USER_PORT", "value": str(self.isvc.container_port)},
                {"name": "CONTAINER_CONCURRENCY", "value": "0"},
                {"name": "REVISION_TIMEOUT_SECONDS", "value": "300"},
                {"name": "SERVING_READINESS_PROBE", "value": json.dumps(_probe(probe), sort_keys=True)},
            ],
            "readinessProbe": {
                "httpGet": {
                    "path": "/",
                    "port": QUEUE_PORT,
                    "scheme": "HTTP",
                    "httpHeaders": [{"name": "K-Network-Probe", "value": "queue"}],
                },
                "periodSeconds": period,
                "timeoutSeconds": 1,
                "successThreshold": 1,
                "failureThreshold": 3,
            },
            "resources": {"requests": {"cpu": "25m"}},
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "readOnlyRootFilesystem": True,
                "runAsNonRoot": True,
            },
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
        }

    def agent(self) -> KubeObject:
        """The KServe agent the pod webhook injects for request logging. It receives the owner's readiness probe
        (SERVING_READINESS_PROBE) and serves that path; its own readinessProbe stays on '/', as in KServe before
        PR #5345 (kserve/kserve#5341)."""
        probe = self.isvc.readiness_probe or {"tcpSocket": {"port": self.isvc.container_port}}
        return {
            "name": AGENT_CONTAINER,
            "image": AGENT_IMAGE,
            "imagePullPolicy": "IfNotPresent",
            "args": [
                "--enable-puller=false",
                "--enable-logger",
                "--log-url",
                str(logger_url(self.spec)),
                "--log-mode",
                "all",
                "--component-port",
                str(self.isvc.container_port),
            ],
            "ports": [{"containerPort": AGENT_PORT, "name": "agent-port", "protocol": "TCP"}],
            "env": [{"name": "SERVING_READINESS_PROBE", "value": json.dumps(_probe(probe), sort_keys=True)}],
            "readinessProbe": {
                "httpGet": {"path": "/", "port": AGENT_PORT, "scheme": "HTTP"},
                "periodSeconds": 10,
                "timeoutSeconds": 1,
                "successThreshold": 1,
                "failureThreshold": 3,
            },
            "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
        }

    def pod_spec(self, for_pod: bool) -> KubeObject:
        containers = [self.serving_container(for_pod)]
        if self.plan.serverless:
            containers.append(self.queue_proxy())
        if logger_url(self.spec):
            containers.append(self.agent())
        return {
            "containers": containers,
            "volumes": [
                {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
                {"name": "models-cache", "persistentVolumeClaim": {"claimName": "hf-models-cache"}},
            ],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": self.plan.grace_seconds,
            "serviceAccountName": "default",
            "enableServiceLinks": False,
            "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler",
        }

    # ---- the InferenceService and its runtime ---------------------------------------------------

    def inference_service(self) -> KubeObject:
        isvc, plan = self.isvc, self.plan
        annotations = {DEPLOYMENT_MODE_ANNOTATION: isvc.deployment_mode}
        if isvc.autoscaler_class != "kpa":
            annotations[AUTOSCALER_CLASS_ANNOTATION] = isvc.autoscaler_class
        annotations.update(self._nginx_annotations())
        predictor: KubeObject = {
            "minReplicas": plan.min_scale,
            "maxReplicas": isvc.max_replicas,
            "model": {
                "modelFormat": {"name": "vLLM" if isvc.server == "vllm" else "huggingface"},
                "runtime": isvc.runtime_name,
                "resources": declared_resources(self.spec)[0],
            },
        }
        if isvc.probes_in == "isvc":
            liveness = liveness_probe(self.spec)
            if readiness_probe(self.spec):
                predictor["model"]["readinessProbe"] = json.loads(json.dumps(readiness_probe(self.spec)))
            if liveness:
                predictor["model"]["livenessProbe"] = json.loads(json.dumps(liveness))
        if logger_url(self.spec):
            predictor["logger"] = {"mode": "all", "url": logger_url(self.spec)}
        if isvc.scale_target is not None:
            predictor["scaleTarget"] = isvc.scale_target
            predictor["scaleMetric"] = "concurrency" if plan.serverless else "cpu"
        ready = bool(plan.ready_pods(self.captured))
        ready_since = min((pod.ready_at for pod in plan.pods if pod.ready_at), default=self.captured)
        url = f"http://{isvc.name}-{self.ns}.{INGRESS_DOMAIN}"
        status: KubeObject = {"observedGeneration": 1, "conditions": self._isvc_conditions(ready, ready_since)}
        status["url"] = url
        status["address"] = {"url": f"http://{isvc.name}.{self.ns}.svc.cluster.local"}
        status["modelStatus"] = {
            "states": {
                "activeModelState": "Loaded" if ready else "",
                "targetModelState": "Loaded" if ready else "Pending",
            },
            "transitionStatus": "UpToDate" if ready else "InProgress",
        }
        if plan.serverless:
            status["components"] = {
                "predictor": {
                    "latestCreatedRevision": plan.revision,
                    **(
                        {"latestReadyRevision": plan.revision, "latestRolledoutRevision": plan.revision}
                        if ready
                        else {}
                    ),
                    "traffic": [{"latestRevision": True, "percent": 100, "revisionName": plan.revision}],
                    "url": f"http://{plan.ksvc}-{self.ns}.{INGRESS_DOMAIN}",
                    "address": {"url": f"http://{plan.ksvc}.{self.ns}.svc.cluster.local"},
                }
            }
        else:
            status["components"] = {"predictor": {"url": f"http://{isvc.name}-predictor-{self.ns}.{INGRESS_DOMAIN}"}}
        if not plan.routed:
            # KServe fails its ingress reconcile (the VirtualService kind does not exist) and returns before
            # it writes the status: no conditions, no URL (kserve/kserve#4984).
            status = {}
        elif plan.serverless and not plan.expects_virtual_service:
            status["url"] = status["components"]["predictor"]["url"]  # disableIstioVirtualHost: the ksvc URL
        return {
            "apiVersion": "serving.kserve.io/v1beta1",
            "kind": "InferenceService",
            "metadata": _meta(isvc.name, self.ns, plan.uids["isvc"], self.deployed, annotations=annotations),
            "spec": {"predictor": predictor},
            "status": status,
        }

    def _isvc_conditions(self, ready: bool, ready_since: datetime) -> list[KubeObject]:
        created = self.deployed + timedelta(seconds=2)
        if self.plan.serverless:
            reason, message = (
                "RevisionMissing",
                f"Configuration {self.plan.ksvc!r} is waiting for a Revision to become ready.",
            )
            names = (
                "IngressReady",
                "LatestDeploymentReady",
                "PredictorConfigurationReady",
                "PredictorReady",
                "PredictorRouteReady",
                "Ready",
            )
            return [
                _condition(
                    name, ready, ready_since if ready else created, "" if ready else reason, "" if ready else message
                )
                for name in names
            ]
        reason, message = "MinimumReplicasUnavailable", "Deployment does not have minimum availability."
        return [
            _condition("IngressReady", True, created),
            _condition(
                "PredictorReady",
                ready,
                ready_since if ready else created,
                "" if ready else reason,
                "" if ready else message,
            ),
            _condition(
                "Ready", ready, ready_since if ready else created, "" if ready else reason, "" if ready else message
            ),
        ]

    def serving_runtime(self) -> KubeObject:
        isvc = self.isvc
        container = self.serving_container(for_pod=False)
        container.pop("terminationMessagePath")
        container.pop("terminationMessagePolicy")
        if not container["resources"]:
            container.pop("resources")
        return {
            "apiVersion": "serving.kserve.io/v1alpha1",
            "kind": "ServingRuntime",
            "metadata": _meta(isvc.runtime_name, self.ns, make_uid(self.rng), self.deployed - timedelta(days=3)),
            "spec": {
                "supportedModelFormats": [
                    {"name": "vLLM" if isvc.server == "vllm" else "huggingface", "autoSelect": True}
                ],
                "protocolVersions": ["v2"],
                "containers": [container],
            },
        }

    # ---- workload: Knative objects, Deployment, ReplicaSet, pods ------------------------------

    def knative_service(self) -> KubeObject:
        plan = self.plan
        ready = bool(plan.ready_pods(self.captured))
        created = self.deployed + timedelta(seconds=1)
        conditions = [
            _condition(kind, ready, self._ready_since() if ready else created, "" if ready else "RevisionMissing")
            for kind in ("ConfigurationsReady", "Ready", "RoutesReady")
        ]
        status: KubeObject = {
            "observedGeneration": 1,
            "conditions": conditions,
            "latestCreatedRevisionName": plan.revision,
            "url": f"http://{plan.ksvc}-{self.ns}.{INGRESS_DOMAIN}",
            "address": {"url": f"http://{plan.ksvc}.{self.ns}.svc.cluster.local"},
            "traffic": [{"latestRevision": True, "percent": 100, "revisionName": plan.revision}],
        }
        if ready:
            status["latestReadyRevisionName"] = plan.revision
        owner = _owner("serving.kserve.io/v1beta1", "InferenceService", self.isvc.name, plan.uids["isvc"])
        labels = {ISVC_LABEL: self.isvc.name, "component": "predictor"}
        return {
            "apiVersion": "serving.knative.dev/v1",
            "kind": "Service",
            "metadata": _meta(plan.ksvc, self.ns, plan.uids["ksvc"], created, labels, owners=[owner]),
            "spec": {"template": self._revision_template(), "traffic": [{"latestRevision": True, "percent": 100}]},
            "status": status,
        }

    def _ready_since(self) -> datetime:
        return min((pod.ready_at for pod in self.plan.pods if pod.ready_at), default=self.captured)

    def _knative_annotations(self) -> dict[str, str]:
        isvc = self.isvc
        annotations = {
            "autoscaling.knative.dev/class": "kpa.autoscaling.knative.dev",
            "autoscaling.knative.dev/min-scale": str(self.plan.min_scale),
            "autoscaling.knative.dev/max-scale": str(isvc.max_replicas),
            "serving.knative.dev/creator": "system:serviceaccount:kserve:kserve-controller-manager",
        }
        if isvc.scale_target is not None:
            annotations["autoscaling.knative.dev/metric"] = "concurrency"
            annotations["autoscaling.knative.dev/target"] = str(isvc.scale_target)
        return annotations

    def _revision_template(self) -> KubeObject:
        spec = self.pod_spec(for_pod=False)
        spec["containers"] = [spec["containers"][0]]
        # KServe writes the Knative Service with the runtime's container merged with the InferenceService's, key by key
        # (the API server defaults requests from limits only on the pods).
        isvc_resources, runtime_resources = declared_resources(self.spec)
        merged = {
            section: {**runtime_resources.get(section, {}), **isvc_resources.get(section, {})}
            for section in ("requests", "limits")
        }
        spec["containers"][0]["resources"] = {section: values for section, values in merged.items() if values}
        spec["containerConcurrency"] = 0
        spec["timeoutSeconds"] = 300
        return {
            "metadata": {
                "annotations": self._knative_annotations(),
                "labels": {ISVC_LABEL: self.isvc.name, "component": "predictor"},
            },
            "spec": spec,
        }

    def revision(self) -> KubeObject:
        plan = self.plan
        ready = bool(plan.ready_pods(self.captured))
        created = self.deployed + timedelta(seconds=1)
        labels = {
            ISVC_LABEL: self.isvc.name,
            "component": "predictor",
            "serving.knative.dev/configuration": plan.ksvc,
            "serving.knative.dev/configurationGeneration": "1",
            "serving.knative.dev/configurationUID": plan.uids["configuration"],
            "serving.knative.dev/service": plan.ksvc,
            "serving.knative.dev/serviceUID": plan.uids["ksvc"],
            "serving.knative.dev/routingState": "active",
        }
        owner = _owner("serving.knative.dev/v1", "Configuration", plan.ksvc, plan.uids["configuration"])
        template = self._revision_template()
        since = self._ready_since() if ready else created
        # A Revision without an available pod gets its conditions from its pods as Knative reads them: knative_status.
        conditions = [
            _condition("Active", ready, since, "" if ready else "Activating"),
            _condition("ContainerHealthy", True, since),
            _condition("Ready", ready, since, "" if ready else "Deploying"),
            _condition("ResourcesAvailable", True, since),
        ]
        return {
            "apiVersion": "serving.knative.dev/v1",
            "kind": "Revision",
            "metadata": _meta(
                plan.revision,
                self.ns,
                plan.uids["revision"],
                created,
                labels,
                template["metadata"]["annotations"],
                [owner],
            ),
            "spec": template["spec"],
            "status": {
                "observedGeneration": 1,
                "conditions": conditions,
                "actualReplicas": len(plan.ready_pods(self.captured)),
                "desiredReplicas": len(plan.live_pods),
                "containerStatuses": [
                    {"name": SERVING_CONTAINER, "imageDigest": f"{self.isvc.image}@sha256:{'0' * 64}"}
                ],
            },
        }

    def pod_autoscaler(self) -> KubeObject:
        plan = self.plan
        ready = bool(plan.ready_pods(self.captured))
        created = self.deployed + timedelta(seconds=2)
        owner = _owner("serving.knative.dev/v1", "Revision", plan.revision, plan.uids["revision"])
        labels = {ISVC_LABEL: self.isvc.name, "component": "predictor", "serving.knative.dev/revision": plan.revision}
        since = self._ready_since() if ready else created
        return {
            "apiVersion": "autoscaling.internal.knative.dev/v1alpha1",
            "kind": "PodAutoscaler",
            "metadata": _meta(
                plan.revision, self.ns, make_uid(self.rng), created, labels, self._knative_annotations(), [owner]
            ),
            "spec": {
                "protocolType": "http1",
                "reachability": "Reachable",
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": plan.deployment},
            },
            "status": {
                "observedGeneration": 1,
                "conditions": [
                    _condition("Active", ready, since, "" if ready else "Queued"),
                    _condition("Ready", ready, since, "" if ready else "Queued"),
                    _condition("SKSReady", True, created),
                ],
                "desiredScale": len(plan.live_pods),
                "actualScale": len(plan.ready_pods(self.captured)),
                "serviceName": plan.revision,
                "metricsServiceName": f"{plan.revision}-private",
            },
        }

    def deployment(self) -> KubeObject:
        plan = self.plan
        created = self.deployed + timedelta(seconds=2)
        labels = self.predictor_labels()
        labels.pop("pod-template-hash", None)
        ready = plan.ready_pods(self.captured)
        if plan.serverless:
            owner = _owner("serving.knative.dev/v1", "Revision", plan.revision, plan.uids["revision"])
            selector = {"serving.knative.dev/revisionUID": plan.uids["revision"]}
            strategy: KubeObject = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}}
        else:
            owner = _owner("serving.kserve.io/v1beta1", "InferenceService", self.isvc.name, plan.uids["isvc"])
            selector = {"app": f"isvc.{self.isvc.name}-predictor"}
            strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}
        deadline = PROGRESS_DEADLINE_SECONDS
        timed_out = not ready and (self.captured - created).total_seconds() > deadline
        since = min((pod.ready_at for pod in ready if pod.ready_at), default=created)
        conditions = [
            _condition(
                "Available",
                bool(ready),
                since,
                "MinimumReplicasAvailable" if ready else "MinimumReplicasUnavailable",
                "Deployment has minimum availability." if ready else "Deployment does not have minimum availability.",
            ),
            _condition(
                "Progressing",
                not timed_out,
                created + timedelta(seconds=deadline) if timed_out else since,
                "ProgressDeadlineExceeded" if timed_out else "NewReplicaSetAvailable",
                f'ReplicaSet "{plan.replica_set}" has timed out progressing.'
                if timed_out
                else f'ReplicaSet "{plan.replica_set}" has successfully progressed.',
            ),
        ]
        status: KubeObject = {
            "observedGeneration": 1,
            "replicas": len(plan.live_pods),
            "updatedReplicas": len(plan.live_pods),
            "readyReplicas": len(ready),
            "availableReplicas": len(ready),
            "conditions": conditions,
        }
        if len(ready) < len(plan.live_pods):
            status["unavailableReplicas"] = len(plan.live_pods) - len(ready)
        template = {
            "metadata": {"labels": self.predictor_labels(), "annotations": self._pod_annotations()},
            "spec": self.pod_spec(True),
        }
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": _meta(
                plan.deployment,
                self.ns,
                plan.uids["deployment"],
                created,
                labels,
                {"deployment.kubernetes.io/revision": "1"},
                [owner],
            ),
            "spec": {
                "replicas": len(plan.live_pods),
                "selector": {"matchLabels": selector},
                "strategy": strategy,
                "progressDeadlineSeconds": deadline,
                "revisionHistoryLimit": 10,
                "template": template,
            },
            "status": status,
        }

    def _pod_annotations(self) -> dict[str, str]:
        if self.plan.serverless:
            return self._knative_annotations()
        return {
            "prometheus.kserve.io/port": str(self.isvc.container_port),
            "prometheus.kserve.io/path": "/metrics",
        }

    def replica_set(self) -> KubeObject:
        plan = self.plan
        created = self.deployed + timedelta(seconds=2)
        deployment = self.deployment()
        labels = {**self.predictor_labels(), "pod-template-hash": plan.template_hash}
        ready = plan.ready_pods(self.captured)
        selector = {**deployment["spec"]["selector"]["matchLabels"], "pod-template-hash": plan.template_hash}
        template = json.loads(json.dumps(deployment["spec"]["template"]))
        template["metadata"]["labels"]["pod-template-hash"] = plan.template_hash
        owner = _owner("apps/v1", "Deployment", plan.deployment, plan.uids["deployment"])
        return {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": _meta(
                plan.replica_set,
                self.ns,
                plan.uids["replicaset"],
                created,
                labels,
                {
                    "deployment.kubernetes.io/desired-replicas": str(len(plan.live_pods)),
                    "deployment.kubernetes.io/revision": "1",
                },
                [owner],
            ),
            "spec": {"replicas": len(plan.live_pods), "selector": {"matchLabels": selector}, "template": template},
            "status": {
                "observedGeneration": 1,
                "replicas": len(plan.live_pods),
                "fullyLabeledReplicas": len(plan.live_pods),
                "readyReplicas": len(ready),
                "availableReplicas": len(ready),
            },
        }

    def pod(self, pod: PodPlan) -> KubeObject:
        plan = self.plan
        labels = {**self.predictor_labels(), "pod-template-hash": pod.template_hash}
        owner = _owner("apps/v1", "ReplicaSet", plan.replica_set, plan.uids["replicaset"])
        spec = self.pod_spec(for_pod=True)
        metadata = _meta(
            pod.name, self.ns, pod.uid, pod.created, labels, self._pod_annotations(), [owner], generation=None
        )
        if pod.node is None:
            return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": self._pending(pod)}
        spec["nodeName"] = pod.node.name
        ready = pod.ready(self.captured)
        scheduled = pod.created + timedelta(seconds=1)
        # Ready turns False when the kubelet first reports the pod, True when the probe first passes (again, after
        # a restart or a readiness blip: the condition keeps only its latest transition).
        ready_time = pod.ready_since or scheduled + timedelta(seconds=1)
        engine_ready = ready or (pod.engine_ready_at is not None and pod.engine_ready_at <= self.captured)
        statuses = [self._serving_status(pod, engine_ready)]
        if plan.serverless:
            queue_state = {"running": {"startedAt": _at(pod.containers_started + timedelta(milliseconds=150))}}
            statuses.append(self._container_status("queue-proxy", QUEUE_IMAGE, queue_state, ready))
        if pod.sidecar_started is not None:
            agent_state = {"running": {"startedAt": _at(pod.sidecar_started)}}
            statuses.insert(0, self._container_status(AGENT_CONTAINER, AGENT_IMAGE, agent_state, False))
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": spec,
            "status": {
                "phase": "Running",
                "conditions": [
                    _condition("PodReadyToStartContainers", True, scheduled + timedelta(seconds=1)),
                    _condition("Initialized", True, scheduled),
                    _condition(
                        "Ready",
                        ready,
                        ready_time,
                        "" if ready else "ContainersNotReady",
                        "" if ready else self._not_ready_message(statuses),
                    ),
                    _condition(
                        "ContainersReady",
                        ready,
                        ready_time,
                        "" if ready else "ContainersNotReady",
                        "" if ready else self._not_ready_message(statuses),
                    ),
                    _condition("PodScheduled", True, scheduled),
                ],
                "hostIP": node_ip(pod.node),
                "hostIPs": [{"ip": node_ip(pod.node)}],
                "podIP": pod.ip,
                "podIPs": [{"ip": pod.ip}],
                "startTime": _at(scheduled),
                "qosClass": self._qos_class(),
                "containerStatuses": statuses,
            },
        }

    def _pending(self, pod: PodPlan) -> KubeObject:
        """An unschedulable pod: only the scheduler has written to its status."""
        first = pod.scheduling_attempts[0] if pod.scheduling_attempts else pod.created
        return {
            "phase": "Pending",
            "conditions": [
                {
                    **_condition("PodScheduled", False, first, "Unschedulable", unschedulable_message(self.spec)),
                    "lastProbeTime": None,
                }
            ],
            "qosClass": self._qos_class(),
        }

    def _qos_class(self) -> str:
        resources = effective_resources(self.spec)
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        guaranteed = all(requests.get(name) == limits.get(name) for name in ("cpu", "memory")) and {
            "cpu",
            "memory",
        } <= set(limits)
        return "Guaranteed" if guaranteed and not self.plan.serverless else "Burstable"

    def _not_ready_message(self, statuses: list[KubeObject]) -> str:
        names = " ".join(str(status["name"]) for status in statuses if not status["ready"])
        return f"containers with unready status: [{names}]"

    def _container_id(self) -> str:
        return f"containerd://{self.rng.getrandbits(256):064x}"

    def _serving_status(self, pod: PodPlan, ready: bool) -> KubeObject:
        if not pod.runs:
            # Never created (CreateContainerConfigError): no container ID, no image ID, nothing started yet.
            return {
                "name": self.plan.container,
                "image": self.isvc.image,
                "imageID": "",
                "ready": False,
                "started": False,
                "restartCount": 0,
                "lastState": {},
                "state": {"waiting": {"reason": "CreateContainerConfigError", "message": config_error(self.spec)}},
            }
        last = pod.last_termination(self.captured)
        if pod.crash_looping:
            delay = restart_back_off(len(pod.runs))
            waiting = {
                "reason": "CrashLoopBackOff",
                "message": f"back-off {_go_duration(delay)} restarting failed container={self.plan.container} "
                f"pod={pod.name}_{self.ns}({pod.uid})",
            }
            state: KubeObject = {"waiting": waiting}
        else:
            state = {"running": {"startedAt": _at(pod.runs[-1].started)}}
        return self._container_status(self.plan.container, self.isvc.image, state, ready, pod.restart_count, last)

    def _container_status(
        self, name: str, image: str, state: KubeObject, ready: bool, restarts: int = 0, last: Run | None = None
    ) -> KubeObject:
        """A container status; a waiting container still names its last container's ID, as the kubelet does."""
        container_id = self._container_id()
        last_state: KubeObject = {}
        if last is not None and last.ended is not None:
            last_id = container_id if "waiting" in state else self._container_id()
            last_state = {
                "terminated": {
                    "exitCode": last.exit_code,
                    "reason": last.reason,
                    "startedAt": _at(last.started),
                    "finishedAt": _at(last.ended),
                    "containerID": last_id,
                }
            }
        return {
            "name": name,
            "image": image,
            "imageID": f"docker.io/{image}@sha256:{self.rng.getrandbits(256):064x}",
            "containerID": container_id,
            "ready": ready,
            "started": "running" in state,
            "restartCount": restarts,
            "lastState": last_state,
            "state": state,
        }

    # ---- Services, Endpoints, EndpointSlices ---------------------------------------------------

    def services(self) -> list[KubeObject]:
        if not self.plan.serverless:
            return [self._raw_service(), *self._service_link()]
        services = [*self._knative_services(), *self._service_link()]
        ready_since = min(
            (pod.ready_at for pod in self.plan.pods if pod.ready(self.captured) and pod.ready_at), default=None
        )
        if self.plan.expects_virtual_service and ready_since is not None:
            services.append(self._isvc_external_service(ready_since + timedelta(seconds=2)))
        return services

    def _service_link(self) -> list[KubeObject]:
        """``vllm_port_service_link``: the owner's own Service named ``vllm`` (a short in-cluster name in front of
        the predictor), created before the pods; the kubelet turns it into ``VLLM_PORT=tcp://<ip>:<port>``."""
        fault = next((fault for fault in self.spec.faults if fault.type == "vllm_port_service_link"), None)
        if fault is None:
            return []
        selector = {ISVC_LABEL: self.isvc.name, "component": "predictor"}
        port = int(fault.params["service_port"])
        host = str(fault.params["service_host"])
        created = self.spec.timeline.deployed_at - timedelta(minutes=40)
        return [
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": _meta(
                    "vllm", self.ns, make_uid(rng_for(self.spec, "service-link")), created, generation=None
                ),
                "spec": {
                    "type": "ClusterIP",
                    "clusterIP": host,
                    "clusterIPs": [host],
                    "ports": [
                        {"name": "http", "port": port, "protocol": "TCP", "targetPort": self.isvc.container_port}
                    ],
                    "selector": selector,
                    "sessionAffinity": "None",
                },
                "status": {"loadBalancer": {}},
            }
        ]

    def _isvc_external_service(self, created: datetime) -> KubeObject:
        """KServe's ``<isvc>`` Service: an ExternalName pointing at Istio's local gateway, for in-cluster callers.

        KServe creates it just before the VirtualService, so it exists even when the VirtualService cannot.
        """
        owner = _owner("serving.kserve.io/v1beta1", "InferenceService", self.isvc.name, self.plan.uids["isvc"])
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _meta(
                self.isvc.name,
                self.ns,
                make_uid(self.rng),
                created,
                owners=[owner],
                generation=None,
            ),
            "spec": {"type": "ExternalName", "externalName": ISTIO_LOCAL_GATEWAY, "sessionAffinity": "None"},
            "status": {"loadBalancer": {}},
        }

    def _raw_service(self) -> KubeObject:
        name = f"{self.isvc.name}-predictor"
        owner = _owner("serving.kserve.io/v1beta1", "InferenceService", self.isvc.name, self.plan.uids["isvc"])
        labels = {ISVC_LABEL: self.isvc.name, "component": "predictor", "app": f"isvc.{name}"}
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _meta(
                name,
                self.ns,
                make_uid(self.rng),
                self.deployed + timedelta(seconds=2),
                labels,
                owners=[owner],
                generation=None,
            ),
            "spec": {
                "type": "ClusterIP",
                "clusterIP": f"10.96.{self.rng.randint(1, 250)}.{self.rng.randint(2, 250)}",
                "selector": {"app": f"isvc.{name}"},
                "ports": [{"name": f"{name}", "port": 80, "protocol": "TCP", "targetPort": self.isvc.container_port}],
                "sessionAffinity": "None",
            },
            "status": {"loadBalancer": {}},
        }

    def _knative_services(self) -> list[KubeObject]:
        plan = self.plan
        created = self.deployed + timedelta(seconds=3)
        route_owner = _owner("serving.knative.dev/v1", "Route", plan.ksvc, make_uid(self.rng))
        sks_owner = _owner(
            "networking.internal.knative.dev/v1alpha1", "ServerlessService", plan.revision, make_uid(self.rng)
        )
        revision_labels = {
            ISVC_LABEL: self.isvc.name,
            "component": "predictor",
            "serving.knative.dev/revision": plan.revision,
            "serving.knative.dev/revisionUID": plan.uids["revision"],
            "serving.knative.dev/service": plan.ksvc,
            "networking.internal.knative.dev/serverlessservice": plan.revision,
        }
        external = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _meta(
                plan.ksvc,
                self.ns,
                make_uid(self.rng),
                created,
                {"serving.knative.dev/route": plan.ksvc, "serving.knative.dev/service": plan.ksvc},
                owners=[route_owner],
                generation=None,
            ),
            "spec": {
                "type": "ExternalName",
                "externalName": KOURIER_INTERNAL if self.spec.cluster.ingress == "kourier" else ISTIO_LOCAL_GATEWAY,
                "ports": [{"name": "http2", "port": 80, "protocol": "TCP", "targetPort": 80}],
                "sessionAffinity": "None",
            },
            "status": {"loadBalancer": {}},
        }
        public = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _meta(
                plan.revision,
                self.ns,
                make_uid(self.rng),
                created,
                {**revision_labels, "networking.internal.knative.dev/serviceType": "Public"},
                owners=[sks_owner],
                generation=None,
            ),
            "spec": {
                "type": "ClusterIP",
                "clusterIP": f"10.96.{self.rng.randint(1, 250)}.{self.rng.randint(2, 250)}",
                "ports": [
                    {"name": "http", "port": 80, "protocol": "TCP", "targetPort": QUEUE_PORT},
                    {"name": "https", "port": 443, "protocol": "TCP", "targetPort": 8112},
                ],
                "sessionAffinity": "None",
            },
            "status": {"loadBalancer": {}},
        }
        private = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _meta(
                f"{plan.revision}-private",
                self.ns,
                make_uid(self.rng),
                created,
                {**revision_labels, "networking.internal.knative.dev/serviceType": "Private"},
                owners=[sks_owner],
                generation=None,
            ),
            "spec": {
                "type": "ClusterIP",
                "clusterIP": f"10.96.{self.rng.randint(1, 250)}.{self.rng.randint(2, 250)}",
                "selector": {"serving.knative.dev/revisionUID": plan.uids["revision"]},
                "ports": [
                    {"name": "http", "port": 80, "protocol": "TCP", "targetPort": QUEUE_PORT},
                    {"name": "https", "port": 443, "protocol": "TCP", "targetPort": 8112},
                    {"name": "http-autometric", "port": 9090, "protocol": "TCP", "targetPort": "http-autometric"},
                    {"name": "http-usermetric", "port": 9091, "protocol": "TCP", "targetPort": "http-usermetric"},
                    {"name": "http-queueadm", "port": 8022, "protocol": "TCP", "targetPort": 8022},
                ],
                "sessionAffinity": "None",
            },
            "status": {"loadBalancer": {}},
        }
        return [external, public, private]

    def endpoints(self, service: KubeObject, activators: list[tuple[str, str]]) -> tuple[KubeObject, KubeObject] | None:
        """Endpoints and an EndpointSlice for a Service: its pods, or the activator for Knative's public one."""
        spec = service["spec"]
        if spec.get("type") == "ExternalName":
            return None
        ports = [{"name": port["name"], "port": self._target_number(port), "protocol": "TCP"} for port in spec["ports"]]
        meta = service["metadata"]
        if spec.get("selector"):
            members = [
                (pod.ip, pod.name, pod.node.name, pod.uid, self.ns, pod.ready(self.captured))
                for pod in self.plan.live_pods
                if pod.node is not None  # an unscheduled pod has no IP: it is in no endpoint list
            ]
        else:
            members = [(ip, name, "", "", KNATIVE_SYSTEM, True) for ip, name in activators]
            ports = [
                {"name": "http", "port": 8012, "protocol": "TCP"},
                {"name": "https", "port": 8112, "protocol": "TCP"},
            ]
        ready = [member for member in members if member[5]]
        not_ready = [member for member in members if not member[5]]
        subset: KubeObject = {"ports": ports}
        if ready:
            subset["addresses"] = [_address(*member[:5]) for member in ready]
        if not_ready:
            subset["notReadyAddresses"] = [_address(*member[:5]) for member in not_ready]
        changed = max(
            [moment for pod in self.plan.pods for moment in (pod.ready_since or pod.created, pod.stopping) if moment]
            + [self.deployed]
        )
        endpoints = {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {
                "name": meta["name"],
                "namespace": self.ns,
                "uid": make_uid(self.rng),
                "creationTimestamp": meta["creationTimestamp"],
                "resourceVersion": "1",
                "labels": dict(meta.get("labels") or {}),
                "annotations": {"endpoints.kubernetes.io/last-change-trigger-time": _at(changed)},
            },
            "subsets": [subset] if members else [],
        }
        slice_name = f"{meta['name']}-{''.join(self.rng.choice('bcdfghjklmnpqrstvwxz2456789') for _ in range(5))}"
        endpoint_slice = {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": slice_name,
                "namespace": self.ns,
                "uid": make_uid(self.rng),
                "creationTimestamp": meta["creationTimestamp"],
                "resourceVersion": "1",
                "generation": 1,
                "labels": {
                    **dict(meta.get("labels") or {}),
                    "kubernetes.io/service-name": meta["name"],
                    "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
                },
                "ownerReferences": [_owner("v1", "Service", meta["name"], meta["uid"])],
            },
            "addressType": "IPv4",
            "ports": ports,
            "endpoints": [
                {
                    "addresses": [ip],
                    "conditions": {"ready": is_ready, "serving": is_ready, "terminating": False},
                    "targetRef": {"kind": "Pod", "name": name, "namespace": namespace, **({"uid": uid} if uid else {})},
                    **({"nodeName": node} if node else {}),
                }
                for ip, name, node, uid, namespace, is_ready in members
            ],
        }
        return endpoints, endpoint_slice

    def _target_number(self, port: KubeObject) -> int:
        target = port.get("targetPort", port["port"])
        if isinstance(target, int):
            return target
        named = {"http-autometric": 9090, "http-usermetric": 9091}
        return named[str(target)]

    # ---- autoscaling and routing ---------------------------------------------------------------

    def hpa(self) -> KubeObject:
        """KServe's HPA: CPU utilization of the predictor pods against ``scale_target`` (80 % by default)."""
        plan = self.plan
        name = f"{self.isvc.name}-predictor"
        created = self.deployed + timedelta(seconds=2)
        owner = _owner("serving.kserve.io/v1beta1", "InferenceService", self.isvc.name, plan.uids["isvc"])
        target = cpu_target(self.spec)
        replicas = len(plan.live_pods)
        able = bool(plan.ready_pods(self.captured))
        status: KubeObject = {"currentReplicas": replicas, "desiredReplicas": replicas}
        limited = _condition(
            "ScalingLimited", False, created, "DesiredWithinRange", "the desired count is within the acceptable range"
        )
        if able:
            utilization = self._cpu_utilization()
            status["currentMetrics"] = [
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "current": {"averageUtilization": utilization}},
                }
            ]
            if utilization < target and replicas <= self.isvc.min_replicas:
                since = min(pod.ready_at for pod in plan.ready_pods(self.captured) if pod.ready_at)
                limited = _condition(
                    "ScalingLimited",
                    True,
                    since + timedelta(seconds=self.rng.uniform(1, 15)),
                    "TooFewReplicas",
                    "the desired replica count is less than the minimum replica count",
                )
        return {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": _meta(
                name,
                self.ns,
                make_uid(self.rng),
                created,
                {ISVC_LABEL: self.isvc.name, "component": "predictor"},
                owners=[owner],
                generation=None,
            ),
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": plan.deployment},
                "minReplicas": self.isvc.min_replicas,
                "maxReplicas": self.isvc.max_replicas,
                "metrics": [
                    {
                        "type": "Resource",
                        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": target}},
                    }
                ],
            },
            "status": {
                **status,
                "conditions": [
                    _condition(
                        "AbleToScale", True, created, "ReadyForNewScale", "recommended size matches current size"
                    ),
                    _condition(
                        "ScalingActive",
                        able,
                        created,
                        "ValidMetricFound" if able else "FailedGetResourceMetric",
                        "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)"
                        if able
                        else "the HPA was unable to compute the replica count: did not receive metrics for targeted pods (pods might be unready)",
                    ),
                    limited,
                ],
            },
        }

    def user_hpa(self) -> KubeObject:
        """The owner's own HPA on a Pods metric: blind while no adapter serves custom.metrics.k8s.io, disabled
        while it names a stale copy of the predictor scaled to zero."""
        plan = self.plan
        found = user_hpa_metric(self.spec)
        assert found is not None
        metric, average = found
        stale = stale_hpa_target(self.spec)
        if stale is not None:
            created = self.deployed - STALE_COPY_AGE + timedelta(hours=2)
            status = self._disabled_hpa_status(self.deployed - STALE_COPY_SCALED_DOWN)
        elif scales_out(self.spec) or self.isvc.owner_hpa is not None:
            created = self.deployed + timedelta(seconds=5)
            status = self._limited_hpa_status(metric, float(average), created)
        else:
            created = self.deployed + timedelta(seconds=5)
            status = self._blind_hpa_status(metric, created)
        return {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": _meta(plan.hpa_name, self.ns, make_uid(self.rng), created, generation=None),
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": stale or plan.deployment},
                "minReplicas": self.isvc.min_replicas,
                "maxReplicas": self.isvc.max_replicas,
                "metrics": [
                    {
                        "type": "Pods",
                        "pods": {
                            "metric": {"name": metric},
                            "target": {"type": "AverageValue", "averageValue": average},
                        },
                    }
                ],
            },
            "status": status,
        }

    def _limited_hpa_status(self, metric: str, target: float, created: datetime) -> KubeObject:
        """A working HPA at capture. Scaled out to its maximum and wanting more: current = desired = maxReplicas, the
        metric above its target, ScalingLimited=True with TooManyReplicas since the decision that reached the maximum.
        With a target at the pod's ceiling it never scaled: the metric reads its target, ScalingLimited=False."""
        plan = self.plan
        replicas = len(plan.live_pods)
        reached = next((moment for moment, size in plan.scale_ups if size >= self.isvc.max_replicas), None)
        states = [pod for pod in plan.live_pods if pod.listening is not None]
        average = round(_running_at_capture(self.plan) / max(1, len(states))) if states else 0
        limited = (
            _condition(
                "ScalingLimited",
                True,
                reached,
                "TooManyReplicas",
                "the desired replica count is more than the maximum replica count",
            )
            if reached is not None
            else _condition(
                "ScalingLimited",
                False,
                created,
                "DesiredWithinRange",
                "the desired count is within the acceptable range",
            )
        )
        scaled = {"lastScaleTime": _at(plan.scale_ups[-1][0])} if plan.scale_ups else {}  # unset until a rescale
        return {
            "currentReplicas": replicas,
            "desiredReplicas": replicas,
            **scaled,
            "currentMetrics": [
                {"type": "Pods", "pods": {"metric": {"name": metric}, "current": {"averageValue": str(average)}}}
            ],
            "conditions": [
                _condition(
                    "AbleToScale",
                    True,
                    created + timedelta(seconds=15),
                    "ReadyForNewScale",
                    "recommended size matches current size",
                ),
                _condition(
                    "ScalingActive",
                    True,
                    created + timedelta(seconds=15),
                    "ValidMetricFound",
                    f"the HPA was able to successfully calculate a replica count from pods metric {metric}",
                ),
                limited,
            ],
        }

    def _blind_hpa_status(self, metric: str, created: datetime) -> KubeObject:
        replicas = len(self.plan.live_pods)
        return {
            "currentReplicas": replicas,
            "desiredReplicas": replicas,
            "currentMetrics": [{"type": ""}],
            "conditions": [
                _condition(
                    "AbleToScale",
                    True,
                    created + timedelta(seconds=15),
                    "SucceededGetScale",
                    "the HPA controller was able to get the target's current scale",
                ),
                _condition(
                    "ScalingActive",
                    False,
                    created + timedelta(seconds=15),
                    "FailedGetPodsMetric",
                    f"the HPA was unable to compute the replica count: {custom_metric_error(metric)}",
                ),
            ],
        }

    @staticmethod
    def _disabled_hpa_status(since: datetime) -> KubeObject:
        """The HPA controller leaves a target at zero replicas alone (kubernetes pkg/controller/podautoscaler/
        horizontal.go): no metric is read, current and desired replicas are 0, ScalingActive=False."""
        return {
            "currentReplicas": 0,
            "desiredReplicas": 0,
            "lastScaleTime": _at(since),
            "conditions": [
                _condition(
                    "AbleToScale",
                    True,
                    since,
                    "SucceededGetScale",
                    "the HPA controller was able to get the target's current scale",
                ),
                _condition(
                    "ScalingActive",
                    False,
                    since + timedelta(seconds=15),
                    "ScalingDisabled",
                    "scaling is disabled since the replica count of the target is zero",
                ),
            ],
        }

    def stale_copy(self) -> list[KubeObject]:
        """The predictor's canary copy, scaled to zero: a Deployment (its labels copied from the predictor, so it
        is read with the service; its pods would carry their own ``app`` label, outside the Service's selector)
        and its empty ReplicaSet. Made by hand: no owner."""
        stale = stale_hpa_target(self.spec)
        assert stale is not None
        created = self.deployed - STALE_COPY_AGE
        template_hash = "".join(self.rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(10))
        labels = {**self.predictor_labels(), "app": f"isvc.{stale}"}
        template = {"metadata": {"labels": dict(labels)}, "spec": self.pod_spec(True)}
        uid = make_uid(self.rng)
        conditions = [
            _condition("Available", True, created, "MinimumReplicasAvailable", "Deployment has minimum availability."),
            _condition(
                "Progressing",
                True,
                created,
                "NewReplicaSetAvailable",
                f'ReplicaSet "{stale}-{template_hash}" has successfully progressed.',
            ),
        ]
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                **_meta(stale, self.ns, uid, created, labels, {"deployment.kubernetes.io/revision": "1"}),
                "generation": 2,
            },
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": f"isvc.{stale}"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
                "progressDeadlineSeconds": 600,
                "revisionHistoryLimit": 10,
                "template": template,
            },
            "status": {"observedGeneration": 2, "conditions": conditions},
        }
        rs_template = json.loads(json.dumps(template))
        rs_template["metadata"]["labels"]["pod-template-hash"] = template_hash
        replica_set = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                **_meta(
                    f"{stale}-{template_hash}",
                    self.ns,
                    make_uid(self.rng),
                    created,
                    {**labels, "pod-template-hash": template_hash},
                    {
                        "deployment.kubernetes.io/desired-replicas": "0",
                        "deployment.kubernetes.io/revision": "1",
                    },
                    [_owner("apps/v1", "Deployment", stale, uid)],
                ),
                "generation": 2,
            },
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": f"isvc.{stale}", "pod-template-hash": template_hash}},
                "template": rs_template,
            },
            "status": {"observedGeneration": 2, "replicas": 0},
        }
        return [deployment, replica_set]

    def prometheus_adapter(self) -> list[KubeObject]:
        """prometheus-adapter in ``monitoring``, serving the owner's Pods metric through custom.metrics.k8s.io:
        its Service, its Deployment and the rules ConfigMap (the chart's layout), and the APIService."""
        installed = self.deployed - timedelta(days=40)
        found = user_hpa_metric(self.spec)
        assert found is not None
        metric = found[0]
        rules = {
            "rules": [
                {
                    "seriesQuery": f'{metric}{{namespace!="",pod!=""}}',
                    "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
                    "name": {"matches": "^(.*)$", "as": "${1}"},
                    "metricsQuery": "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)",
                }
            ]
        }
        config_map = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(
                "prometheus-adapter", MONITORING, make_uid(self.rng), installed, ADAPTER_LABELS, generation=None
            ),
            "data": {"config.yaml": yaml.safe_dump(rules, sort_keys=False)},
        }
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _meta(
                "prometheus-adapter", MONITORING, make_uid(self.rng), installed, ADAPTER_LABELS, generation=None
            ),
            "spec": {
                "type": "ClusterIP",
                "clusterIP": "10.96.14.77",
                "selector": dict(ADAPTER_LABELS),
                "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": "https"}],
            },
            "status": {"loadBalancer": {}},
        }
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": _meta("prometheus-adapter", MONITORING, make_uid(self.rng), installed, ADAPTER_LABELS),
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": dict(ADAPTER_LABELS)},
                "template": {
                    "metadata": {"labels": dict(ADAPTER_LABELS)},
                    "spec": {
                        "containers": [
                            {
                                "name": "prometheus-adapter",
                                "image": ADAPTER_IMAGE,
                                "args": [
                                    "--secure-port=6443",
                                    "--cert-dir=/tmp/cert",
                                    "--prometheus-url=http://prometheus-operated.monitoring.svc:9090",
                                    "--metrics-relist-interval=1m",
                                    "--config=/etc/adapter/config.yaml",
                                ],
                                "ports": [{"containerPort": 6443, "name": "https", "protocol": "TCP"}],
                            }
                        ]
                    },
                },
            },
            "status": {
                "replicas": 1,
                "readyReplicas": 1,
                "availableReplicas": 1,
                "updatedReplicas": 1,
                "observedGeneration": 1,
            },
        }
        api_service = {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": _meta(
                "v1beta1.custom.metrics.k8s.io", None, make_uid(self.rng), installed, ADAPTER_LABELS, generation=None
            ),
            "spec": {
                "group": "custom.metrics.k8s.io",
                "version": "v1beta1",
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
                "insecureSkipTLSVerify": True,
                "service": {"name": "prometheus-adapter", "namespace": MONITORING, "port": 443},
            },
            "status": {"conditions": [_condition("Available", True, installed, "Passed", "all checks passed")]},
        }
        return [api_service, service, deployment, config_map]

    def _cpu_utilization(self) -> int:
        """CPU use as the HPA sees it, in percent of the request: vLLM's API server and engine loop keep
        about one core and a half busy whatever the GPU does, a quarter of a core when idle."""
        requested = str((effective_resources(self.spec).get("requests") or {}).get("cpu", "1"))
        cores = float(requested[:-1]) / 1000 if requested.endswith("m") else float(requested)
        busy = 1.45 if self.spec.traffic.rate_at(self.captured) > 0 else 0.25
        return round(100 * busy * self.rng.uniform(0.9, 1.1) / cores)

    def _nginx_annotations(self) -> dict[str, str]:
        """The owner's ingress-nginx timeouts on the InferenceService (none when nginx's default is left)."""
        seconds = nginx_timeout_seconds(self.spec)
        if seconds is None or seconds == NGINX_DEFAULT_TIMEOUT_SECONDS:
            return {}
        return {
            f"{NGINX_ANNOTATION_PREFIX}proxy-read-timeout": str(seconds),
            f"{NGINX_ANNOTATION_PREFIX}proxy-send-timeout": str(seconds),
        }

    def ingress(self) -> KubeObject:
        """KServe's Ingress for a RawDeployment; it copies the InferenceService's annotations onto it (only the
        ingress-nginx ones are shown: the others mean nothing to the controller)."""
        name = self.isvc.name
        owner = _owner("serving.kserve.io/v1beta1", "InferenceService", name, self.plan.uids["isvc"])
        host = f"{name}-{self.ns}.{INGRESS_DOMAIN}"
        backend = {"service": {"name": f"{name}-predictor", "port": {"number": 80}}}
        return {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": _meta(
                name,
                self.ns,
                make_uid(self.rng),
                self.deployed + timedelta(seconds=2),
                annotations=self._nginx_annotations(),
                owners=[owner],
            ),
            "spec": {
                "ingressClassName": self.spec.cluster.ingress,
                "rules": [{"host": host, "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]}}],
            },
            "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.10"}]}},
        }

    def virtual_services(self) -> list[KubeObject]:
        plan, name = self.plan, self.isvc.name
        created = self.deployed + timedelta(seconds=3)
        external_host = f"{name}-{self.ns}.{INGRESS_DOMAIN}"
        internal_host = f"{name}.{self.ns}.svc.cluster.local"
        predictor_host = f"{plan.ksvc}.{self.ns}.svc.cluster.local"
        isvc_owner = _owner("serving.kserve.io/v1beta1", "InferenceService", name, plan.uids["isvc"])
        top = {
            "apiVersion": "networking.istio.io/v1beta1",
            "kind": "VirtualService",
            "metadata": _meta(name, self.ns, make_uid(self.rng), created, {ISVC_LABEL: name}, owners=[isvc_owner]),
            "spec": {
                "gateways": [f"{KNATIVE_SYSTEM}/knative-local-gateway", f"{KNATIVE_SYSTEM}/knative-ingress-gateway"],
                "hosts": [internal_host, external_host],
                "http": [
                    {
                        "headers": {"request": {"set": {"Host": predictor_host}}},
                        "match": [
                            {
                                "authority": {
                                    "regex": f"^{name}\\.{self.ns}(\\.svc(\\.cluster\\.local)?)?(?::\\d{{1,5}})?$"
                                },
                                "gateways": [f"{KNATIVE_SYSTEM}/knative-local-gateway"],
                            },
                            {
                                "authority": {"regex": f"^{name}-{self.ns}\\.example\\.com(?::\\d{{1,5}})?$"},
                                "gateways": [f"{KNATIVE_SYSTEM}/knative-ingress-gateway"],
                            },
                        ],
                        "route": [
                            {
                                "destination": {
                                    "host": "knative-local-gateway.istio-system.svc.cluster.local",
                                    "port": {"number": 80},
                                },
                                "weight": 100,
                            }
                        ],
                    }
                ],
            },
        }
        ingress_owner = _owner("networking.internal.knative.dev/v1alpha1", "Ingress", plan.ksvc, make_uid(self.rng))
        knative_labels = {
            "networking.internal.knative.dev/ingress": plan.ksvc,
            "serving.knative.dev/route": plan.ksvc,
            "serving.knative.dev/routeNamespace": self.ns,
        }
        revision_route = {
            "destination": {"host": f"{plan.revision}.{self.ns}.svc.cluster.local", "port": {"number": 80}},
            "headers": {
                "request": {"set": {"Knative-Serving-Namespace": self.ns, "Knative-Serving-Revision": plan.revision}}
            },
            "weight": 100,
        }
        ingress_vs = {
            "apiVersion": "networking.istio.io/v1beta1",
            "kind": "VirtualService",
            "metadata": _meta(
                f"{plan.ksvc}-ingress", self.ns, make_uid(self.rng), created, knative_labels, owners=[ingress_owner]
            ),
            "spec": {
                "gateways": [f"{KNATIVE_SYSTEM}/knative-ingress-gateway", f"{KNATIVE_SYSTEM}/knative-local-gateway"],
                "hosts": [
                    f"{plan.ksvc}-{self.ns}.{INGRESS_DOMAIN}",
                    predictor_host,
                    f"{plan.ksvc}.{self.ns}",
                    f"{plan.ksvc}.{self.ns}.svc",
                ],
                "http": [{"retries": {}, "route": [revision_route]}],
            },
        }
        mesh_vs = {
            "apiVersion": "networking.istio.io/v1beta1",
            "kind": "VirtualService",
            "metadata": _meta(
                f"{plan.ksvc}-mesh", self.ns, make_uid(self.rng), created, knative_labels, owners=[ingress_owner]
            ),
            "spec": {
                "gateways": ["mesh"],
                "hosts": [predictor_host, f"{plan.ksvc}.{self.ns}", f"{plan.ksvc}.{self.ns}.svc"],
                "http": [{"retries": {}, "route": [revision_route]}],
            },
        }
        return [top, ingress_vs, mesh_vs]

    def istio_gateways(self) -> list[KubeObject]:
        installed = self.deployed - timedelta(days=30)
        gateways = []
        for name, selector, port in (
            ("knative-ingress-gateway", "ingressgateway", 80),
            ("knative-local-gateway", "ingressgateway", 8081),
        ):
            gateways.append(
                {
                    "apiVersion": "networking.istio.io/v1beta1",
                    "kind": "Gateway",
                    "metadata": _meta(
                        name,
                        KNATIVE_SYSTEM,
                        make_uid(self.rng),
                        installed,
                        {"networking.knative.dev/ingress-provider": "istio"},
                    ),
                    "spec": {
                        "selector": {"istio": selector},
                        "servers": [{"hosts": ["*"], "port": {"name": "http", "number": port, "protocol": "HTTP"}}],
                    },
                }
            )
        return gateways

    # ---- cluster-wide objects ------------------------------------------------------------------

    def nodes(self) -> list[KubeObject]:
        installed = self.deployed - timedelta(days=12)
        objects = []
        for node in self.spec.cluster.nodes:
            capacity = {
                "cpu": "96",
                "memory": "1056451048Ki",
                "nvidia.com/gpu": str(node.gpus),
                "pods": "110",
                "ephemeral-storage": "3750000000Ki",
            }
            allocatable = {**capacity, "cpu": "95500m", "memory": "1045965288Ki"}
            objects.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": _meta(
                        node.name,
                        None,
                        make_uid(self.rng),
                        installed,
                        {
                            "kubernetes.io/hostname": node.name,
                            "kubernetes.io/os": "linux",
                            "kubernetes.io/arch": "amd64",
                            "node.kubernetes.io/instance-type": "p4de.24xlarge",
                            "topology.kubernetes.io/zone": node.zone,
                            "nvidia.com/gpu.present": "true",
                            "nvidia.com/gpu.product": node.product,
                            "nvidia.com/gpu.count": str(node.gpus),
                            "nvidia.com/gpu.memory": str(int(node.memory_gib * 1024)),
                        },
                        generation=None,
                    ),
                    "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
                    "status": {
                        "capacity": capacity,
                        "allocatable": allocatable,
                        "addresses": [
                            {"type": "InternalIP", "address": node_ip(node)},
                            {"type": "Hostname", "address": node.name},
                        ],
                        "conditions": [
                            _condition("Ready", True, installed, "KubeletReady", "kubelet is posting ready status")
                        ],
                        "nodeInfo": {
                            "kubeletVersion": f"v{self.spec.cluster.kubernetes}.4",
                            "containerRuntimeVersion": "containerd://1.7.22",
                            "osImage": "Ubuntu 22.04.5 LTS",
                            "kernelVersion": "5.15.0-1068-aws",
                            "architecture": "amd64",
                            "operatingSystem": "linux",
                        },
                    },
                }
            )
        return objects

    def api_services(self) -> list[KubeObject]:
        installed = self.deployed - timedelta(days=12)
        available = _condition("Available", True, installed, "Passed", "all checks passed")
        local = [
            {
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": _meta(
                    f"{version}.{group}" if group else version, None, make_uid(self.rng), installed, generation=None
                ),
                "spec": {"group": group, "version": version, "groupPriorityMinimum": 18000, "versionPriority": 15},
                "status": {
                    "conditions": [
                        {**available, "reason": "Local", "message": "Local APIServices are always available"}
                    ]
                },
            }
            for group, version in (("apps", "v1"), ("autoscaling", "v2"), ("serving.kserve.io", "v1beta1"))
        ]
        metrics = {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": _meta(
                "v1beta1.metrics.k8s.io",
                None,
                make_uid(self.rng),
                installed,
                {"k8s-app": "metrics-server"},
                generation=None,
            ),
            "spec": {
                "group": "metrics.k8s.io",
                "version": "v1beta1",
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
                "insecureSkipTLSVerify": True,
                "service": {"name": "metrics-server", "namespace": "kube-system", "port": 443},
            },
            "status": {"conditions": [available]},
        }
        return [*local, metrics]

    def metrics_server(self) -> list[KubeObject]:
        installed = self.deployed - timedelta(days=12)
        labels = {"k8s-app": "metrics-server"}
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _meta("metrics-server", "kube-system", make_uid(self.rng), installed, labels, generation=None),
            "spec": {
                "type": "ClusterIP",
                "clusterIP": "10.96.0.200",
                "selector": labels,
                "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": "https"}],
            },
            "status": {"loadBalancer": {}},
        }
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": _meta("metrics-server", "kube-system", make_uid(self.rng), installed, labels),
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [
                            {
                                "name": "metrics-server",
                                "image": "registry.k8s.io/metrics-server/metrics-server:v0.7.2",
                                "args": ["--secure-port=10250", "--kubelet-preferred-address-types=InternalIP"],
                                "ports": [{"containerPort": 10250, "name": "https", "protocol": "TCP"}],
                            }
                        ]
                    },
                },
            },
            "status": {
                "replicas": 1,
                "readyReplicas": 1,
                "availableReplicas": 1,
                "updatedReplicas": 1,
                "observedGeneration": 1,
            },
        }
        return [service, deployment]

    def config_maps(self) -> list[KubeObject]:
        installed = self.deployed - timedelta(days=30)
        mode = self.isvc.deployment_mode
        kserve = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(
                "inferenceservice-config",
                KSERVE_SYSTEM,
                make_uid(self.rng),
                installed,
                {"app.kubernetes.io/name": "kserve"},
                generation=None,
            ),
            "data": {
                "deploy": json.dumps({"defaultDeploymentMode": "Serverless"}),
                "ingress": json.dumps(
                    {
                        "ingressGateway": "knative-serving/knative-ingress-gateway",
                        "localGateway": "knative-serving/knative-local-gateway",
                        "localGatewayService": ISTIO_LOCAL_GATEWAY,
                        "ingressDomain": INGRESS_DOMAIN,
                        "ingressClassName": "istio"
                        if self.spec.cluster.ingress == "kourier"
                        else self.spec.cluster.ingress,
                        "domainTemplate": "{{ .Name }}-{{ .Namespace }}.{{ .IngressDomain }}",
                        "urlScheme": "http",
                        "disableIstioVirtualHost": self.plan.serverless and not self.plan.expects_virtual_service,
                    },
                    sort_keys=True,
                ),
            },
        }
        objects = [kserve]
        if mode == "Serverless" or self.spec.cluster.knative:
            objects.extend(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": _meta(
                        name,
                        KNATIVE_SYSTEM,
                        make_uid(self.rng),
                        installed,
                        # Knative's release manifests label what they install with the release (1.15.2).
                        {"app.kubernetes.io/name": "knative-serving"}
                        | (
                            {"app.kubernetes.io/version": self.spec.cluster.knative}
                            if self.spec.cluster.knative
                            else {}
                        ),
                        generation=None,
                    ),
                    "data": data,
                }
                for name, data in (
                    (
                        "config-autoscaler",
                        {"_example": "# defaults apply: see the Knative docs", "enable-scale-to-zero": "true"},
                    ),
                    ("config-defaults", {"_example": "# defaults apply: see the Knative docs"}),
                    ("config-deployment", {"queue-sidecar-image": QUEUE_IMAGE, "progress-deadline": "600s"}),
                )
            )
        return objects


def _running_at_capture(plan: Plan) -> float:
    """Requests running on all serving pods at capture (every pod pinned at its ceiling while the queue grows)."""
    return float(plan.kv.max_num_seqs * sum(1 for pod in plan.live_pods if pod.ready(plan.spec.timeline.captured_at)))


def custom_metric_error(metric: str) -> str:
    """What the HPA controller reports when the aggregator has no custom.metrics.k8s.io API to route to."""
    return (
        f"unable to get metric {metric}: unable to fetch metrics from custom metrics API: the server could not "
        "find the requested resource (get pods.custom.metrics.k8s.io *)"
    )


def cpu_target(spec: ScenarioSpec) -> int:
    """The CPU utilization KServe's HPA aims at: the fault's, else ``scale_target``, else KServe's 80."""
    for fault in spec.faults:
        if fault.type == "cpu_autoscaling":
            return int(fault.params.get("cpu_target", spec.isvc.scale_target or 80))
    return spec.isvc.scale_target or 80


def _probe(probe: Any) -> KubeObject:
    """A probe with the fields the API server defaults filled in."""
    filled: KubeObject = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}
    filled.update(json.loads(json.dumps(probe)))
    if "httpGet" in filled:
        filled["httpGet"] = {"scheme": "HTTP", **filled["httpGet"]}
    return filled


def unschedulable_message(spec: ScenarioSpec) -> str:
    """The scheduler's verdict when every GPU node is full (Kubernetes 1.27+ wording, preemption included)."""
    nodes = len(spec.cluster.nodes)
    return (
        f"0/{nodes} nodes are available: {nodes} Insufficient nvidia.com/gpu. preemption: 0/{nodes} nodes are "
        f"available: {nodes} No preemption victims found for incoming pod."
    )


def _go_duration(seconds: float) -> str:
    """A duration as Go prints it: ``40s``, ``2m40s``, ``5m0s``."""
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m{rest}s" if minutes else f"{rest}s"


def node_ip(node: GpuNode) -> str:
    return f"10.0.{sum(map(ord, node.name)) % 200 + 1}.{len(node.name) * 7 % 250 + 2}"


def _address(ip: str, name: str, node: str, uid: str, namespace: str) -> KubeObject:
    address: KubeObject = {"ip": ip, "targetRef": {"kind": "Pod", "name": name, "namespace": namespace}}
    if uid:
        address["targetRef"]["uid"] = uid
    if node:
        address["nodeName"] = node
    return address
