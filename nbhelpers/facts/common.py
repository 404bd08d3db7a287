"""Facts shared by the checks: predictor pods, the serving container, Services and their
addresses, Knative revisions that receive traffic, ownership, accelerator resources.

Everything here is a pure function of the evidence.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nbhelpers.errors import EvidenceMissing, StepSkipped
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import vllm_args
from nbhelpers.sources import kinds, kube
from nbhelpers.sources.kube import KubeObject as KubeObject  # the checks name it common.KubeObject
from nbhelpers.util import quantities

SERVERLESS = "Serverless"
RAW = "RawDeployment"
MODELMESH = "ModelMesh"

# Containers that KServe, Knative or a mesh add next to the model server.
SIDECAR_CONTAINERS = frozenset({"queue-proxy", "agent", "kserve-agent", "istio-proxy", "linkerd-proxy"})
AGENT_CONTAINERS = frozenset({"agent", "kserve-agent"})
AGENT_PORT = 9081
KSERVE_DEFAULT_PORT = 8080
REVISION_LABEL = "serving.knative.dev/revision"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"


def skip_modelmesh(evidence: Evidence) -> None:
    if evidence.deployment_mode == MODELMESH:
        raise StepSkipped("ModelMesh serves many models from shared pods; this step covers Serverless and Raw")


def require_read(evidence: Evidence, what: str) -> None:
    """Raise ``EvidenceMissing`` when the read recorded as ``what`` (a prefix) failed."""
    failure = evidence.failure(what)
    if failure is not None:
        raise EvidenceMissing(failure.what, f"{failure.status}: {failure.reason}".rstrip(": "))


def no_owner_patch(evidence: Evidence) -> str:
    """Why a finding carries no patch when the owner does not declare the serving container to patch."""
    if evidence.target.is_llmisvc:
        container = next((c.get("name") for c in _template_containers(evidence)), None) or kube.LLMISVC_CONTAINER
        return (
            "(No patch yet for an LLMInferenceService: make the change on container "
            f"{container} in its spec.template, which KServe merges over its presets.)"
        )
    return "(No patch: the InferenceService does not declare the serving container.)"


def _template_containers(evidence: Evidence) -> list[Mapping[str, Any]]:
    return list((kube.spec(evidence.isvc).get("template") or {}).get("containers") or [])


def predictor_name(evidence: Evidence) -> str:
    return f"{evidence.target.isvc}-predictor"


def predictor_pods(evidence: Evidence) -> list[KubeObject]:
    """Predictor pods of the service, oldest first (name breaks ties)."""
    pods = [pod for pod in evidence.of(kinds.POD) if kube.is_predictor(pod)]
    return sorted(pods, key=lambda pod: (kube.created(pod) or "", kube.name(pod)))


def named(evidence: Evidence, kind: kinds.Kind, name: str) -> KubeObject | None:
    """The object of ``kind`` called ``name`` in the target namespace."""
    for obj in evidence.of(kind):
        if kube.name(obj) == name and kube.namespace(obj) == evidence.target.namespace:
            return obj
    return None


def serving_container(pod_spec: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``kserve-container``, else the first container that is not a known sidecar."""
    containers = kube.containers(pod_spec)
    for container in containers:
        if container.get("name") == kube.SERVING_CONTAINER:
            return container
    return next((c for c in containers if c.get("name") not in SIDECAR_CONTAINERS), None)


def container_named(pod_spec: Mapping[str, Any], names: frozenset[str] | set[str]) -> Mapping[str, Any] | None:
    return next((c for c in kube.containers(pod_spec) if c.get("name") in names), None)


@dataclass(frozen=True)
class Workload:
    """The pod spec that serves: from the newest predictor pod, else a Deployment, else a Revision."""

    source: KubeObject
    pod_spec: Mapping[str, Any]
    serving: Mapping[str, Any]
    labels: Mapping[str, str]

    @property
    def ref(self) -> str:
        return kube.ref(self.source)


def current_workload(evidence: Evidence) -> Workload:
    """The newest predictor pod's spec (it already merges runtime and ISVC), or its Deployment's template.

    In Serverless mode the pods and Deployment of the newest revision are preferred. Raises
    ``EvidenceMissing`` when pods could not be listed and ``StepSkipped`` when nothing shows a spec.
    """
    require_read(evidence, kinds.POD.key + " ")
    pods = predictor_pods(evidence)
    latest = latest_revision_name(evidence) if effective_mode(evidence) == SERVERLESS else None
    if latest:
        pods = [pod for pod in pods if kube.labels(pod).get(REVISION_LABEL) == latest] or pods
    candidates: list[KubeObject] = pods[-1:]
    deployments = sorted(
        (
            d
            for d in evidence.of(kinds.DEPLOYMENT)
            if kube.is_predictor(d) and kube.namespace(d) == evidence.target.namespace
        ),
        key=lambda d: (kube.name(d) == f"{latest}-deployment", kube.created(d) or "", kube.name(d)),
    )
    candidates += deployments[-1:]
    revisions = [r for r in evidence.of(kinds.KNATIVE_REVISION) if kube.name(r) == latest]
    candidates += revisions
    for source in candidates:
        pod_spec = kube.pod_template_spec(source)
        container = serving_container(pod_spec)
        if container is not None:
            template_labels = ((kube.spec(source).get("template") or {}).get("metadata") or {}).get("labels")
            labels = kube.labels(source) if source.get("kind") == "Pod" else dict(template_labels or {})
            return Workload(source, pod_spec, container, labels)
    raise StepSkipped("no predictor pod, Deployment or Revision shows the serving container")


def declared_ports(container: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(container.get("ports") or [])


def describe_ports(container: Mapping[str, Any]) -> str:
    ports = declared_ports(container)
    if not ports:
        return "none declared"
    parts = []
    for port in ports:
        text = f"{port.get('containerPort')}/{port.get('protocol') or 'TCP'}"
        if port.get("name"):
            text += f" ({port['name']})"
        parts.append(text)
    return ", ".join(parts)


def resolve_named_port(containers: Sequence[Mapping[str, Any]], port: int | str) -> tuple[int | None, str | None]:
    """(number, owning container name) for a port number or name among ``containers``."""
    for container in containers:
        for declared in declared_ports(container):
            if (isinstance(port, str) and declared.get("name") == port) or (
                not isinstance(port, str) and declared.get("containerPort") == port
            ):
                return int(declared["containerPort"]), str(container.get("name"))
    if isinstance(port, int):
        return port, None
    return None, None


def as_port(value: Any) -> int | str | None:
    """A port given as number, numeric string or name."""
    if value is None or value == "":
        return None
    if isinstance(value, int):
        return value
    text = str(value)
    return int(text) if text.isdigit() else text


# --- Services and their addresses -------------------------------------------------------------


@dataclass(frozen=True)
class Addresses:
    """Ready and not-ready addresses of one Service, from its EndpointSlices, else its Endpoints."""

    service: str
    ready: tuple[str, ...]
    not_ready: tuple[str, ...]
    lines: tuple[str, ...]  # one evidence line per Endpoints / EndpointSlice object


def _describe_address(ip: str, target: Mapping[str, Any] | None) -> str:
    if target and target.get("name"):
        return f"{ip} ({target.get('kind') or 'Pod'} {target['name']})"
    return ip


def service_addresses(evidence: Evidence, service_name: str) -> Addresses:
    namespace = evidence.target.namespace
    slice_ready: list[str] = []
    slice_not_ready: list[str] = []
    lines: list[str] = []
    slices = [
        s
        for s in evidence.of(kinds.ENDPOINT_SLICE)
        if kube.namespace(s) == namespace and kube.labels(s).get(SERVICE_NAME_LABEL) == service_name
    ]
    for endpoint_slice in sorted(slices, key=kube.name):
        ready_here, not_ready_here = [], []
        for endpoint in endpoint_slice.get("endpoints") or []:
            for ip in endpoint.get("addresses") or []:
                text = _describe_address(str(ip), endpoint.get("targetRef"))
                # A nil ready condition means "unknown", which consumers treat as ready (API docs).
                if (endpoint.get("conditions") or {}).get("ready", True) is False:
                    not_ready_here.append(text)
                else:
                    ready_here.append(text)
        slice_ready += ready_here
        slice_not_ready += not_ready_here
        lines.append(_address_line(kube.ref(endpoint_slice), ready_here, not_ready_here))
    endpoints_ready: list[str] = []
    endpoints_not_ready: list[str] = []
    endpoints = named(evidence, kinds.ENDPOINTS, service_name)
    if endpoints is not None:
        for subset in endpoints.get("subsets") or []:
            for address in subset.get("addresses") or []:
                endpoints_ready.append(_describe_address(str(address.get("ip")), address.get("targetRef")))
            for address in subset.get("notReadyAddresses") or []:
                endpoints_not_ready.append(_describe_address(str(address.get("ip")), address.get("targetRef")))
        lines.append(_address_line(kube.ref(endpoints), endpoints_ready, endpoints_not_ready))
    if slices:
        ready, not_ready = slice_ready, slice_not_ready
    else:
        ready, not_ready = endpoints_ready, endpoints_not_ready
    return Addresses(
        service_name,
        tuple(dict.fromkeys(ready)),
        tuple(dict.fromkeys(not_ready)),
        tuple(lines),
    )


def _address_line(ref: str, ready: Sequence[str], not_ready: Sequence[str]) -> str:
    return (
        f"{ref}: {len(ready)} ready [{', '.join(ready) or '-'}], "
        f"{len(not_ready)} not ready [{', '.join(not_ready) or '-'}]"
    )


def require_address_reads(evidence: Evidence) -> None:
    """Addresses need Endpoints or EndpointSlices: raise only when both reads failed."""
    endpoints = evidence.failure(kinds.ENDPOINTS.key + " ")
    slices = evidence.failure(kinds.ENDPOINT_SLICE.key)
    if endpoints is not None and slices is not None:
        raise EvidenceMissing(
            endpoints.what, f"{endpoints.status}: {endpoints.reason}; EndpointSlices: {slices.status}"
        )


def describe_pod_state(pod: Mapping[str, Any]) -> str:
    """``Pod/ns/name: Running, not ready (ContainersNotReady); kserve-container waiting CrashLoopBackOff, 7 restarts``."""
    status = kube.status(pod)
    parts = [str(status.get("phase") or "Unknown")]
    ready = kube.condition(pod, "Ready")
    if kube.pod_ready(pod):
        parts.append("ready")
    else:
        parts.append("not ready" + (f" ({ready.get('reason')})" if ready and ready.get("reason") else ""))
    scheduled = kube.condition(pod, "PodScheduled")
    if scheduled is not None and str(scheduled.get("status")) != "True":
        parts.append(kube.describe_condition(scheduled))
    for container in status.get("containerStatuses") or []:
        state = container.get("state") or {}
        detail = ""
        if "waiting" in state:
            detail = f"waiting {(state['waiting'] or {}).get('reason') or ''}".rstrip()
        elif "terminated" in state:
            detail = f"terminated {(state['terminated'] or {}).get('reason') or ''}".rstrip()
        elif "running" in state and not container.get("ready"):
            detail = "running, not ready"
        restarts = int(container.get("restartCount") or 0)
        if restarts:
            detail += f"{', ' if detail else ''}{restarts} restarts"
        if detail:
            parts.append(f"{container.get('name')} {detail}")
    return f"{kube.ref(pod)}: " + "; ".join(parts)


# --- Knative ----------------------------------------------------------------------------------


def knative_service(evidence: Evidence) -> KubeObject | None:
    return named(evidence, kinds.KNATIVE_SERVICE, predictor_name(evidence))


def effective_mode(evidence: Evidence) -> str:
    """The normalized mode; an unknown one is inferred from what exists (a ksvc means Knative)."""
    if evidence.deployment_mode in (SERVERLESS, RAW):
        return evidence.deployment_mode
    return SERVERLESS if knative_service(evidence) is not None else RAW


def latest_revision_name(evidence: Evidence) -> str | None:
    """The newest revision of the predictor: ksvc status, else ISVC status, else the newest Revision."""
    ksvc = knative_service(evidence)
    if ksvc is not None and kube.status(ksvc).get("latestCreatedRevisionName"):
        return str(kube.status(ksvc)["latestCreatedRevisionName"])
    predictor_status = ((kube.status(evidence.isvc).get("components") or {}).get("predictor")) or {}
    if predictor_status.get("latestCreatedRevision"):
        return str(predictor_status["latestCreatedRevision"])
    revisions = sorted(
        (r for r in evidence.of(kinds.KNATIVE_REVISION) if kube.is_predictor(r)),
        key=lambda r: (kube.created(r) or "", kube.name(r)),
    )
    return kube.name(revisions[-1]) if revisions else None


def traffic_revisions(evidence: Evidence) -> list[tuple[str, int]]:
    """(revision, percent) pairs that receive traffic, from the ksvc status, else the ISVC status."""
    ksvc = knative_service(evidence)
    traffic = list(kube.status(ksvc).get("traffic") or []) if ksvc is not None else []
    if not traffic:
        predictor_status = ((kube.status(evidence.isvc).get("components") or {}).get("predictor")) or {}
        traffic = list(predictor_status.get("traffic") or [])
    shares: dict[str, int] = {}
    for entry in traffic:
        percent = int(entry.get("percent") or 0)
        if entry.get("revisionName") and percent > 0:
            shares[str(entry["revisionName"])] = shares.get(str(entry["revisionName"]), 0) + percent
    return sorted(shares.items())


# --- ownership --------------------------------------------------------------------------------


def controller_owner(obj: Mapping[str, Any]) -> str | None:
    """``Kind/name`` of the KServe or Knative object that owns ``obj`` (it would revert a direct edit)."""
    for owner in kube.metadata(obj).get("ownerReferences") or []:
        group = str(owner.get("apiVersion") or "").split("/")[0]
        if group.endswith(("kserve.io", "knative.dev")):
            return f"{owner.get('kind')}/{owner.get('name')}"
    return None


# --- where the serving container is declared --------------------------------------------------


# The predictor keys of the v1beta1 API that hold a model-server container merged with a ServingRuntime.
_FRAMEWORK_KEYS = (
    "model",
    "huggingface",
    "pytorch",
    "triton",
    "tensorflow",
    "sklearn",
    "xgboost",
    "onnx",
    "lightgbm",
    "paddle",
    "pmml",
)


def isvc_serving_container(isvc: KubeObject) -> tuple[str, MutableContainer] | None:
    """Where the ISVC declares the serving container: (description, accessor on a copy of the ISVC).

    ``spec.predictor.containers[i]`` for a custom container; ``spec.predictor.model`` (or a framework
    key) when a ServingRuntime supplies the container: KServe merges those fields into the runtime's
    container and appends their ``args`` after the runtime's.
    """
    predictor = (isvc.get("spec") or {}).get("predictor") or {}
    containers = predictor.get("containers")
    if containers:
        index = next(
            (i for i, c in enumerate(containers) if c.get("name") == kube.SERVING_CONTAINER),
            next((i for i, c in enumerate(containers) if c.get("name") not in SIDECAR_CONTAINERS), 0),
        )
        return f"spec.predictor.containers[{index}]", MutableContainer(("containers", index))
    key = next((k for k in _FRAMEWORK_KEYS if isinstance(predictor.get(k), Mapping)), None)
    if key is None:
        return None
    return f"spec.predictor.{key}", MutableContainer((key,))


@dataclass(frozen=True)
class MutableContainer:
    """A path below ``spec.predictor`` to a container-like mapping."""

    path: tuple[str | int, ...]

    @property
    def is_custom_container(self) -> bool:
        return self.path[0] == "containers"

    def get(self, isvc: KubeObject) -> dict[str, Any]:
        node: Any = isvc.setdefault("spec", {}).setdefault("predictor", {})
        for step in self.path:
            node = node[step]
        assert isinstance(node, dict)
        return node


# --- resources ----------------------------------------------------------------------------------

# Extended resources that hand a device to the container (limit-only: the request equals the limit).
ACCELERATOR_RESOURCES = frozenset(
    {
        "nvidia.com/gpu",
        "amd.com/gpu",
        "gpu.intel.com/i915",
        "gpu.intel.com/xe",
        "habana.ai/gaudi",
        "google.com/tpu",
        "aws.amazon.com/neuron",
        "aws.amazon.com/neuroncore",
    }
)


def is_accelerator_resource(name: str) -> bool:
    """A GPU-like device resource (MIG slices such as ``nvidia.com/mig-1g.10gb`` included)."""
    return name in ACCELERATOR_RESOURCES or name.startswith("nvidia.com/mig-")


def effective_requests(container: Mapping[str, Any]) -> dict[str, Any]:
    """The container's requests as the API server stores them: a resource with a limit and no request
    requests its limit (docs/upstream-facts.md), so a spec read before defaulting is judged like a live Pod."""
    resources = container.get("resources") or {}
    merged = dict(resources.get("limits") or {})
    merged.update(resources.get("requests") or {})
    return merged


def accelerator_requests(container: Mapping[str, Any]) -> dict[str, int]:
    """Device resources the container asks for, with their counts (zero counts left out)."""
    counts: dict[str, int] = {}
    for name, value in effective_requests(container).items():
        amount = quantities.try_parse(value)
        if is_accelerator_resource(str(name)) and amount is not None and amount > 0:
            counts[str(name)] = int(amount)
    return counts


# --- text and args helpers shared by several checks ---------------------------------------------------

_LOG_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\S+\s+")


def strip_log_timestamp(line: str) -> str:
    """A log line without the kubelet's RFC 3339 timestamp prefix, for quoting."""
    return _LOG_TIMESTAMP.sub("", line, count=1).strip()


def shorten(text: str, limit: int = 400) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def set_flag(args: Sequence[str], flag: str, value: str) -> list[str]:
    """``args`` with ``flag`` set to ``value``: an existing spelling (``--flag v``, ``--flag=v``, underscores) is
    replaced where it stands and any repeat dropped; a flag not there is appended as ``flag=value`` (KServe
    appends the InferenceService's args after the runtime's, and vLLM keeps the last)."""
    wanted = vllm_args.normalize_flag(flag)
    result: list[str] = []
    placed = False
    skip_next = False
    for index, arg in enumerate(args):
        if skip_next:
            skip_next = False
            continue
        name, separator, _ = arg.partition("=")
        if not (arg.startswith("--") and vllm_args.normalize_flag(name) == wanted):
            result.append(arg)
            continue
        pair = not separator and index + 1 < len(args) and not args[index + 1].startswith("--")
        skip_next = pair
        if not placed:
            result.extend([name, value] if pair else [f"{name}={value}"])
            placed = True
    if not placed:
        result.append(f"{flag}={value}")
    return result


def host_matches(pattern: str, host: str) -> bool:
    """Istio / Gateway API / Ingress host matching: exact, ``*`` or a ``*.suffix`` wildcard."""
    pattern = pattern.rpartition("/")[2].lower()
    if pattern in ("", "*"):
        return True
    if pattern.startswith("*."):
        return host.endswith(pattern[1:]) and host != pattern[2:]
    return pattern == host
