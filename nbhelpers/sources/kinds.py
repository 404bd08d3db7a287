"""The Kubernetes kinds the tool reads, with their API group, version and plural.

Both cluster sources use this table: the live source to build REST paths, the
bundle source to match objects by ``apiVersion`` and ``kind``. ``versions`` is
in preference order; the live source picks the first one the API server serves.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    kind: str
    group: str  # "" for the core group
    versions: tuple[str, ...]
    plural: str
    namespaced: bool = True

    @property
    def key(self) -> str:
        """The name used in object references: ``Pod`` or ``Service.serving.knative.dev``."""
        return self.kind if self.group in CORE_LIKE_GROUPS else f"{self.kind}.{self.group}"


# Built-in groups whose kinds are referenced by bare kind name (docs/contracts.md#object-references).
CORE_LIKE_GROUPS = frozenset(
    {"", "apps", "autoscaling", "discovery.k8s.io", "networking.k8s.io", "apiregistration.k8s.io", "events.k8s.io"}
)

INFERENCE_SERVICE = Kind("InferenceService", "serving.kserve.io", ("v1beta1",), "inferenceservices")
# KServe serves LLMInferenceService as v1alpha2 (storage version) and v1alpha1, converted by its webhook
# (pkg/apis/serving/v1alpha2/llm_inference_service_types.go, +kubebuilder:storageversion).
LLM_INFERENCE_SERVICE = Kind(
    "LLMInferenceService", "serving.kserve.io", ("v1alpha2", "v1alpha1"), "llminferenceservices"
)
# The presets an LLMInferenceService's spec is merged over (spec.baseRefs and KServe's well-known configs), served
# in the same versions (pkg/apis/serving/v1alpha2/llm_inference_service_types.go, LLMInferenceServiceConfig).
LLM_INFERENCE_SERVICE_CONFIG = Kind(
    "LLMInferenceServiceConfig", "serving.kserve.io", ("v1alpha2", "v1alpha1"), "llminferenceserviceconfigs"
)
SERVING_RUNTIME = Kind("ServingRuntime", "serving.kserve.io", ("v1alpha1",), "servingruntimes")
CLUSTER_SERVING_RUNTIME = Kind(
    "ClusterServingRuntime", "serving.kserve.io", ("v1alpha1",), "clusterservingruntimes", namespaced=False
)
KNATIVE_SERVICE = Kind("Service", "serving.knative.dev", ("v1",), "services")
KNATIVE_REVISION = Kind("Revision", "serving.knative.dev", ("v1",), "revisions")
KNATIVE_ROUTE = Kind("Route", "serving.knative.dev", ("v1",), "routes")
POD_AUTOSCALER = Kind("PodAutoscaler", "autoscaling.internal.knative.dev", ("v1alpha1",), "podautoscalers")
DEPLOYMENT = Kind("Deployment", "apps", ("v1",), "deployments")
REPLICA_SET = Kind("ReplicaSet", "apps", ("v1",), "replicasets")
POD = Kind("Pod", "", ("v1",), "pods")
SERVICE = Kind("Service", "", ("v1",), "services")
ENDPOINTS = Kind("Endpoints", "", ("v1",), "endpoints")
ENDPOINT_SLICE = Kind("EndpointSlice", "discovery.k8s.io", ("v1",), "endpointslices")
EVENT = Kind("Event", "", ("v1",), "events")
CONFIG_MAP = Kind("ConfigMap", "", ("v1",), "configmaps")
NODE = Kind("Node", "", ("v1",), "nodes", namespaced=False)
HPA = Kind("HorizontalPodAutoscaler", "autoscaling", ("v2",), "horizontalpodautoscalers")
SCALED_OBJECT = Kind("ScaledObject", "keda.sh", ("v1alpha1",), "scaledobjects")
VIRTUAL_SERVICE = Kind("VirtualService", "networking.istio.io", ("v1", "v1beta1", "v1alpha3"), "virtualservices")
ISTIO_GATEWAY = Kind("Gateway", "networking.istio.io", ("v1", "v1beta1", "v1alpha3"), "gateways")
HTTP_ROUTE = Kind("HTTPRoute", "gateway.networking.k8s.io", ("v1", "v1beta1"), "httproutes")
GATEWAY_API_GATEWAY = Kind("Gateway", "gateway.networking.k8s.io", ("v1", "v1beta1"), "gateways")
# Gateway API Inference Extension: the GA group (v1: selector.matchLabels, targetPorts, endpointPickerRef) and
# the experimental one (v1alpha2: selector, targetPortNumber, extensionRef). KServe creates both while it
# migrates (pkg/controller/v1alpha2/llmisvc/router.go); they live in different groups and may coexist.
INFERENCE_POOL = Kind("InferencePool", "inference.networking.k8s.io", ("v1",), "inferencepools")
INFERENCE_POOL_ALPHA = Kind("InferencePool", "inference.networking.x-k8s.io", ("v1alpha2",), "inferencepools")
# The multi-node workload KServe renders for an LLMInferenceService with spec.worker
# (pkg/controller/v1alpha2/llmisvc/workload_multi_node.go; kubernetes-sigs/lws api/leaderworkerset/v1).
LEADER_WORKER_SET = Kind("LeaderWorkerSet", "leaderworkerset.x-k8s.io", ("v1",), "leaderworkersets")
INGRESS = Kind("Ingress", "networking.k8s.io", ("v1",), "ingresses")
API_SERVICE = Kind("APIService", "apiregistration.k8s.io", ("v1",), "apiservices", namespaced=False)

ALL_KINDS: tuple[Kind, ...] = (
    INFERENCE_SERVICE,
    LLM_INFERENCE_SERVICE,
    LLM_INFERENCE_SERVICE_CONFIG,
    SERVING_RUNTIME,
    CLUSTER_SERVING_RUNTIME,
    KNATIVE_SERVICE,
    KNATIVE_REVISION,
    KNATIVE_ROUTE,
    POD_AUTOSCALER,
    DEPLOYMENT,
    REPLICA_SET,
    POD,
    SERVICE,
    ENDPOINTS,
    ENDPOINT_SLICE,
    EVENT,
    CONFIG_MAP,
    NODE,
    HPA,
    SCALED_OBJECT,
    VIRTUAL_SERVICE,
    ISTIO_GATEWAY,
    HTTP_ROUTE,
    GATEWAY_API_GATEWAY,
    INFERENCE_POOL,
    INFERENCE_POOL_ALPHA,
    LEADER_WORKER_SET,
    INGRESS,
    API_SERVICE,
)


def kind_for(api_version: str, kind: str) -> Kind | None:
    """The registered kind for an object's ``apiVersion`` and ``kind`` (any version of its group)."""
    group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
    for candidate in ALL_KINDS:
        if candidate.kind == kind and candidate.group == group:
            return candidate
    return None


def object_ref(obj: dict[str, object]) -> str:
    """``Kind/namespace/name`` (``Kind.group/...`` for non-core groups; cluster-scoped drop the namespace)."""
    metadata = obj.get("metadata") or {}
    assert isinstance(metadata, dict)
    api_version = str(obj.get("apiVersion", "v1"))
    kind_name = str(obj.get("kind", "Unknown"))
    registered = kind_for(api_version, kind_name)
    group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
    key = registered.key if registered else (kind_name if group in CORE_LIKE_GROUPS else f"{kind_name}.{group}")
    namespace = metadata.get("namespace")
    name = metadata.get("name", "?")
    return f"{key}/{namespace}/{name}" if namespace else f"{key}/{name}"
