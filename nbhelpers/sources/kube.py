"""Small, typed accessors for Kubernetes objects held as plain dicts.

Objects arrive from the API server (JSON) or from bundle YAML; both give the
same camelCase dicts. These helpers keep ``obj.get("x") or {}`` chains out of
the checks.
"""

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from nbhelpers.sources.kinds import object_ref
from nbhelpers.util.times import parse_k8s_time

KubeObject = dict[str, Any]

ISVC_LABEL = "serving.kserve.io/inferenceservice"
COMPONENT_LABEL = "component"
DEPLOYMENT_MODE_ANNOTATION = "serving.kserve.io/deploymentMode"
AUTOSCALER_CLASS_ANNOTATION = "serving.kserve.io/autoscalerClass"
SERVING_CONTAINER = "kserve-container"
# What KServe sets on the objects it renders for an LLMInferenceService (pkg/constants/constants.go;
# GetWorkloadLabelSelector in pkg/controller/v1alpha2/llmisvc/workload.go is the InferencePool's default selector).
LLMISVC_PART_OF_LABEL = "app.kubernetes.io/part-of"
LLMISVC_PART_OF = "llminferenceservice"
LLMISVC_NAME_LABEL = "app.kubernetes.io/name"
LLMISVC_COMPONENT_LABEL = "app.kubernetes.io/component"
LLMISVC_WORKLOAD_LABEL = "kserve.io/component"  # "workload" on every vLLM pod (main, prefill, leader, worker)
LLMISVC_ROLE_LABEL = "llm-d.ai/role"  # both | decode | prefill
LLMISVC_SCHEDULER_COMPONENT = "llminferenceservice-router-scheduler"  # the endpoint picker (EPP)
LLMISVC_CONTAINER = "main"  # the vLLM container of KServe's config-llm-template presets
# LeaderWorkerSet pod labels and annotations (kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go).
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"  # "0" is the group's leader
LWS_SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"  # pods per group, leader included


# Fields every reader of an object relies on, and the type the API server guarantees for them.
_OBJECT_FIELDS = ("metadata", "spec", "status", "data", "involvedObject", "regarding")
_METADATA_MAPS = ("labels", "annotations")


def shape_problem(obj: Mapping[str, Any]) -> str | None:
    """What breaks a field the API server always types, in ``obj``; ``None`` when nothing does.

    Checked: the fields every reader relies on (``metadata``, ``spec``, ``status`` ... are objects, labels
    and annotations maps of strings) and the numbers read outside the checks, whose failure would stop
    the whole run rather than one step (an Event's ``count`` and ``series.count``, a container status'
    ``restartCount``: integers). A check that meets a wrong type deeper down fails alone.
    """
    meta = obj.get("metadata")
    shown = f"{obj.get('kind')} {meta.get('name') if isinstance(meta, dict) else ''}".strip()
    for field in _OBJECT_FIELDS:
        if obj.get(field) is not None and not isinstance(obj[field], dict):
            return f"{shown}: {field} is not an object"
    for field in _METADATA_MAPS:
        values = (meta or {}).get(field)
        if values is not None and not (isinstance(values, dict) and all(isinstance(v, str) for v in values.values())):
            return f"{shown}: metadata.{field} is not a map of strings"
    if obj.get("kind") == "Event":
        series = obj.get("series")
        if series is not None and not isinstance(series, dict):
            return f"{shown}: series is not an object"
        for field, value in (("count", obj.get("count")), ("series.count", (series or {}).get("count"))):
            if value is not None and not _is_integer(value):
                return f"{shown}: {field} is not an integer"
    for field in ("containerStatuses", "initContainerStatuses"):
        entries = (obj.get("status") or {}).get(field)
        if entries is None:
            continue
        if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
            return f"{shown}: status.{field} is not a list of objects"
        if any(entry.get("restartCount") is not None and not _is_integer(entry["restartCount"]) for entry in entries):
            return f"{shown}: status.{field}[].restartCount is not an integer"
    return None


def _is_integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def name(obj: Mapping[str, Any]) -> str:
    return str(metadata(obj).get("name") or "")


def namespace(obj: Mapping[str, Any]) -> str:
    return str(metadata(obj).get("namespace") or "")


def labels(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict(metadata(obj).get("labels") or {})


def annotations(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict(metadata(obj).get("annotations") or {})


def created(obj: Mapping[str, Any]) -> str | None:
    value = metadata(obj).get("creationTimestamp")
    return str(value) if value else None


def ref(obj: Mapping[str, Any]) -> str:
    """The object reference of ``obj`` (docs/contracts.md#object-references)."""
    return object_ref(dict(obj))


def spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("status") or {}


def conditions(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(status(obj).get("conditions") or [])


def condition(obj: Mapping[str, Any], condition_type: str) -> Mapping[str, Any] | None:
    for entry in conditions(obj):
        if entry.get("type") == condition_type:
            return entry
    return None


def condition_true(obj: Mapping[str, Any], condition_type: str) -> bool:
    entry = condition(obj, condition_type)
    return entry is not None and str(entry.get("status")) == "True"


def describe_condition(entry: Mapping[str, Any]) -> str:
    """``Ready=False (RevisionFailed): "message"`` for quoting a condition in evidence."""
    text = f"{entry.get('type')}={entry.get('status')}"
    if entry.get("reason"):
        text += f" ({entry['reason']})"
    if entry.get("message"):
        text += f": {str(entry['message']).strip()!r}"
    return text


def is_predictor(obj: Mapping[str, Any]) -> bool:
    """Predictor objects carry ``component=predictor``; unlabelled ones are judged by name. An LLMInferenceService's
    vLLM workload (``kserve.io/component=workload``, a label only its controller sets) is its predictor."""
    if is_llmisvc_workload(obj):
        return True
    component = labels(obj).get(COMPONENT_LABEL)
    if component is not None:
        return component == "predictor"
    return "-predictor" in name(obj)


def is_llmisvc_workload(obj: Mapping[str, Any]) -> bool:
    """A vLLM workload object of an LLMInferenceService (not its endpoint picker or router)."""
    return labels(obj).get(LLMISVC_WORKLOAD_LABEL) == "workload"


def pod_ready(pod: Mapping[str, Any]) -> bool:
    return condition_true(pod, "Ready")


def restart_count(pod: Mapping[str, Any]) -> int:
    return sum(int(entry.get("restartCount") or 0) for entry in status(pod).get("containerStatuses") or [])


def containers(pod_spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(pod_spec.get("containers") or [])


def pod_template_spec(workload: Mapping[str, Any]) -> Mapping[str, Any]:
    """The pod spec of a Deployment/ReplicaSet/Revision/ksvc template, or of a Pod itself."""
    body = spec(workload)
    if "template" in body:
        template = body.get("template") or {}
        return template.get("spec") or {}
    return body


def selector_matches(selector: Mapping[str, Any] | None, object_labels: Mapping[str, str]) -> bool:
    """Match a Service-style map selector or a LabelSelector (matchLabels/matchExpressions).

    An empty or missing selector matches nothing here: a Service without a
    selector is managed by hand and has no pods of its own.
    """
    if not selector:
        return False
    if "matchLabels" in selector or "matchExpressions" in selector:
        match_labels = selector.get("matchLabels") or {}
        expressions = selector.get("matchExpressions") or []
    else:
        match_labels, expressions = selector, []
    if any(object_labels.get(key) != str(value) for key, value in match_labels.items()):
        return False
    for expression in expressions:
        key, operator = expression.get("key"), expression.get("operator")
        values = [str(value) for value in expression.get("values") or []]
        present = key in object_labels
        if operator == "In" and not (present and object_labels[key] in values):
            return False
        if operator == "NotIn" and present and object_labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def owner_names(obj: Mapping[str, Any], kind: str | None = None) -> list[str]:
    return [
        str(owner.get("name"))
        for owner in metadata(obj).get("ownerReferences") or []
        if kind is None or owner.get("kind") == kind
    ]


def label_selector_matches(selector: str | None, object_labels: Mapping[str, str]) -> bool:
    """Match a label selector string (``a=b,c!=d,e,!f,g in (x,y)``) as the API server does."""
    if not selector:
        return True
    for requirement in _split_requirements(selector):
        if not _requirement_matches(requirement.strip(), object_labels):
            return False
    return True


def _split_requirements(selector: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [part for part in parts if part.strip()]


def _requirement_matches(requirement: str, object_labels: Mapping[str, str]) -> bool:
    for operator in (" notin ", " in "):
        if operator in requirement:
            key, _, values_text = requirement.partition(operator)
            values = {value.strip() for value in values_text.strip().strip("()").split(",")}
            value = object_labels.get(key.strip())
            return (value in values) if operator == " in " else (value not in values)
    if "!=" in requirement:
        key, _, value = requirement.partition("!=")
        return object_labels.get(key.strip()) != value.strip()
    if "=" in requirement:
        key, _, value = requirement.replace("==", "=").partition("=")
        return object_labels.get(key.strip()) == value.strip()
    if requirement.startswith("!"):
        return requirement[1:].strip() not in object_labels
    return requirement in object_labels


def event_interval(event: Mapping[str, Any]) -> tuple[datetime | None, datetime | None]:
    """(first, last) time an event was seen, from whichever fields the API server filled."""
    first = parse_k8s_time(event.get("firstTimestamp")) or parse_k8s_time(event.get("eventTime"))
    last = (
        parse_k8s_time((event.get("series") or {}).get("lastObservedTime"))
        or parse_k8s_time(event.get("lastTimestamp"))
        or first
    )
    return first, last
