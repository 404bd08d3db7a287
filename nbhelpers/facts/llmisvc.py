"""The objects KServe renders for an LLMInferenceService (llm-d), found in the evidence.

Names and labels are KServe's (pkg/controller/v1alpha2/llmisvc, kmeta.ChildName of the service's name):
the HTTPRoute ``<name>-kserve-route``, the InferencePool ``<name>-inference-pool`` (or the pool named by
``spec.router.scheduler.pool.ref``), the endpoint picker Deployment ``<name>-kserve-router-scheduler`` and its
Service ``<name>-epp-service``, the vLLM Deployments ``<name>-kserve`` and ``<name>-kserve-prefill``. The
InferencePool shapes of both API groups are read (docs/upstream-facts.md#llminferenceservice).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nbhelpers.evidence.model import Evidence
from nbhelpers.sources import kinds, kube
from nbhelpers.sources.kube import KubeObject

POOL_KINDS = (kinds.INFERENCE_POOL, kinds.INFERENCE_POOL_ALPHA)
FAIL_CLOSE = "FailClose"
FAIL_OPEN = "FailOpen"


@dataclass(frozen=True)
class Pool:
    """One InferencePool, read the same way from v1 and v1alpha2."""

    obj: KubeObject
    selector: Mapping[str, str]
    target_ports: tuple[int, ...]
    picker_service: str  # the endpoint picker's Service name ("" when the pool names none)
    failure_mode: str  # FailOpen | FailClose | "" (not stated)

    @property
    def ref(self) -> str:
        return kube.ref(self.obj)

    @property
    def name(self) -> str:
        return kube.name(self.obj)


def service_name(evidence: Evidence) -> str:
    return evidence.target.isvc


def _router(evidence: Evidence) -> Mapping[str, Any]:
    return kube.spec(evidence.isvc).get("router") or {}


def pool_name(evidence: Evidence) -> str:
    """The pool the service routes through: its ``pool.ref`` or KServe's ``<name>-inference-pool``."""
    scheduler = _router(evidence).get("scheduler") or {}
    referenced = ((scheduler.get("pool") or {}).get("ref") or {}).get("name")
    return str(referenced or f"{service_name(evidence)}-inference-pool")


def has_scheduler(evidence: Evidence) -> bool:
    """True when the service routes through an InferencePool and its endpoint picker (``spec.router.scheduler``)."""
    return "scheduler" in _router(evidence)


def read_pool(obj: KubeObject) -> Pool:
    """The pool's selector, target ports and picker, from v1 (``selector.matchLabels``, ``targetPorts[].number``,
    ``endpointPickerRef``) or v1alpha2 (``selector``, ``targetPortNumber``, ``extensionRef``)."""
    body = kube.spec(obj)
    raw_selector = body.get("selector") or {}
    selector = raw_selector.get("matchLabels") if "matchLabels" in raw_selector else raw_selector
    ports = [entry.get("number") for entry in body.get("targetPorts") or []]
    if body.get("targetPortNumber") is not None:
        ports.append(body.get("targetPortNumber"))
    picker = body.get("endpointPickerRef") or body.get("extensionRef") or {}
    return Pool(
        obj=obj,
        selector={str(key): str(value) for key, value in (selector or {}).items()},
        target_ports=tuple(int(port) for port in ports if isinstance(port, int)),
        picker_service=str(picker.get("name") or ""),
        failure_mode=str(picker.get("failureMode") or ""),
    )


def pools(evidence: Evidence) -> list[Pool]:
    """Every InferencePool named like the service's pool, in either API group (KServe writes both while it
    migrates), GA group first."""
    wanted = pool_name(evidence)
    found = []
    for kind in POOL_KINDS:
        for obj in evidence.of(kind):
            if kube.namespace(obj) == evidence.target.namespace and kube.name(obj) == wanted:
                found.append(read_pool(obj))
    return found


def routes(evidence: Evidence) -> list[KubeObject]:
    """The service's HTTPRoutes: KServe's ``<name>-kserve-route``, those it labels as this service's router,
    and those the spec names in ``router.route.http.refs``."""
    name = service_name(evidence)
    http = (_router(evidence).get("route") or {}).get("http") or {}
    referenced = {str(entry.get("name")) for entry in http.get("refs") or [] if entry.get("name")}
    chosen = []
    for route in evidence.of(kinds.HTTP_ROUTE):
        if kube.namespace(route) != evidence.target.namespace:
            continue
        labels = kube.labels(route)
        labelled = (
            labels.get(kube.LLMISVC_NAME_LABEL) == name
            and labels.get(kube.LLMISVC_PART_OF_LABEL) == kube.LLMISVC_PART_OF
        )
        if labelled or kube.name(route) in referenced or kube.name(route) == f"{name}-kserve-route":
            chosen.append(route)
    return sorted(chosen, key=kube.name)


def route_parents(route: KubeObject) -> list[tuple[str, str]]:
    """(namespace, name) of each Gateway a route hangs on."""
    parents = []
    for parent in kube.spec(route).get("parentRefs") or []:
        if parent.get("kind", "Gateway") == "Gateway" and parent.get("name"):
            parents.append((str(parent.get("namespace") or kube.namespace(route)), str(parent["name"])))
    return parents


def route_backends(route: KubeObject) -> list[str]:
    """``Kind/name`` of every backendRef of the route's rules (Kind defaults to Service)."""
    return [
        f"{ref.get('kind') or 'Service'}/{ref.get('name')}"
        for rule in kube.spec(route).get("rules") or []
        for ref in rule.get("backendRefs") or []
        if ref.get("name")
    ]


def gateway(evidence: Evidence, namespace: str, name: str) -> KubeObject | None:
    for obj in evidence.of(kinds.GATEWAY_API_GATEWAY):
        if kube.namespace(obj) == namespace and kube.name(obj) == name:
            return obj
    return None


def route_status_parents(route: KubeObject) -> list[Mapping[str, Any]]:
    return list(kube.status(route).get("parents") or [])


def parent_conditions(entry: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(entry.get("conditions") or [])


def false_conditions(entries: Sequence[Mapping[str, Any]], names: Sequence[str]) -> list[Mapping[str, Any]]:
    """The conditions among ``names`` that are present and not True."""
    return [entry for entry in entries if entry.get("type") in names and str(entry.get("status")) != "True"]


def workload_pods(evidence: Evidence) -> list[KubeObject]:
    """The vLLM pods of the service (every role), by the labels KServe sets on them."""
    name = service_name(evidence)
    return [
        pod
        for pod in evidence.of(kinds.POD)
        if kube.namespace(pod) == evidence.target.namespace
        and kube.labels(pod).get(kube.LLMISVC_NAME_LABEL) == name
        and kube.is_llmisvc_workload(pod)
    ]


def namespace_pods(evidence: Evidence) -> list[KubeObject]:
    return [pod for pod in evidence.of(kinds.POD) if kube.namespace(pod) == evidence.target.namespace]


def picker_pods(evidence: Evidence) -> list[KubeObject]:
    """The endpoint picker's pods (KServe's SchedulerLabels)."""
    name = service_name(evidence)
    return [
        pod
        for pod in namespace_pods(evidence)
        if kube.labels(pod).get(kube.LLMISVC_NAME_LABEL) == name
        and kube.labels(pod).get(kube.LLMISVC_COMPONENT_LABEL) == kube.LLMISVC_SCHEDULER_COMPONENT
    ]


def picker_deployment(evidence: Evidence) -> KubeObject | None:
    wanted = f"{service_name(evidence)}-kserve-router-scheduler"
    for obj in evidence.of(kinds.DEPLOYMENT):
        if kube.namespace(obj) == evidence.target.namespace and kube.name(obj) == wanted:
            return obj
    return None


def container_ports(pod: Mapping[str, Any]) -> set[int]:
    """Every containerPort a pod declares."""
    declared = set()
    for container in kube.containers(kube.spec(pod)):
        for port in container.get("ports") or []:
            if isinstance(port.get("containerPort"), int):
                declared.add(int(port["containerPort"]))
    return declared


# --- roles (prefill / decode) ----------------------------------------------------------------------------------

ROLE_PREFILL = "prefill"  # KServe's LLMDRolePrefill (pkg/constants/constants.go)
ROLE_DECODE = "decode"  # LLMDRoleDecode: the main workload when a prefill workload exists
ROLE_BOTH = "both"  # LLMDRoleBoth: the main workload of a service without disaggregated prefill


def pod_roles(evidence: Evidence) -> dict[str, str]:
    """Pod name → ``llm-d.ai/role`` of the service's vLLM pods; empty for an InferenceService or unlabelled pods."""
    if not evidence.target.is_llmisvc:
        return {}
    roles = {}
    for pod in workload_pods(evidence):
        role = kube.labels(pod).get(kube.LLMISVC_ROLE_LABEL)
        if role:
            roles[kube.name(pod)] = str(role)
    return roles


def role_label(role: str, plural: bool = True) -> str:
    """How a finding names a role's pods: ``prefill pods``, ``decode pods``, ``vLLM pods`` (role both)."""
    noun = "pods" if plural else "pod"
    return f"vLLM {noun}" if role == ROLE_BOTH else f"{role} {noun}"


# --- ports -----------------------------------------------------------------------------------------------------

ROUTING_SIDECAR = "llm-d-routing-sidecar"  # the P/D proxy in front of vLLM on decode pods (routingSidecar, workload.go)
WORKLOAD_PORT = 8000  # the workload Service's port and targetPort, fixed by KServe (reconcileWorkloadService)


def workload_service_name(evidence: Evidence) -> str:
    return f"{service_name(evidence)}-kserve-workload-svc"


def receivers(pod_spec: Mapping[str, Any]) -> dict[int, str]:
    """containerPort → container name, over the containers and the native sidecars (initContainers with
    ``restartPolicy: Always``, the way KServe's decode preset runs ``llm-d-routing-sidecar`` on 8000 in front of vLLM
    on 8001: config/llmisvcconfig/config-llm-decode-template.yaml)."""
    running = list(pod_spec.get("containers") or [])
    running += [c for c in pod_spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    found: dict[int, str] = {}
    for container in running:
        for port in container.get("ports") or []:
            if isinstance(port.get("containerPort"), int):
                found.setdefault(int(port["containerPort"]), str(container.get("name")))
    return found
