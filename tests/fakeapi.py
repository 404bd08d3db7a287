"""A fixture Kubernetes API server for integration tests (docs/architecture.md#testing).

It serves objects loaded from YAML on the real REST paths, so the real
``kubernetes`` client talks to it over HTTP exactly as it talks to a cluster:

- discovery: ``/api``, ``/api/v1``, ``/apis``, ``/apis/<group>``, ``/apis/<group>/<version>``, ``/version``;
- list and get, namespaced and cluster-scoped, core and named groups, with
  label selectors (``=``, ``==``, ``!=``, ``in``, ``notin``, exists, ``!key``),
  field selectors (``metadata.name``, ``metadata.namespace``, ``involvedObject.*`` ...)
  and ``limit``/``continue`` paging;
- pod logs with ``container``, ``previous``, ``tailLines``, ``limitBytes`` and ``timestamps``;
- per-path injection of an HTTP status (403, 404, 500 ...) and of a delay;
- RBAC: with :meth:`FakeApiServer.restrict_to` only what a ClusterRole's rules grant is
  answered, everything else is refused with 403 as the API server words it;
- logs made on demand (:class:`GeneratedLog`, e.g. 100 MB that are never held in memory)
  and logs of raw bytes (not UTF-8);
- a log of every request (method, path, query) and of the body bytes each answer sent.

Built-in kinds are always served. A custom resource is served only when its
``CustomResourceDefinition`` is loaded (fixtures carry the CRDs of what they
install), so a missing CRD answers 404 on its paths and is absent from
discovery, as on a real API server. Objects are served at every version their
CRD serves (conversion strategy ``None``). Anything other than GET answers
405 and is logged.

Log fixtures are files ``logs/<namespace>/<pod>/<container>[.previous].log``
whose lines carry the kubelet's RFC 3339 timestamp prefix; the prefix is
removed unless the request asks for ``timestamps=true``.
"""

from __future__ import annotations

import base64
import fnmatch
import json
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import yaml

DEFAULT_TOKEN = "fixture-bearer-token-7c1d0e5a"
RBAC_USER = "system:serviceaccount:ops:kserve-runbook"
SERVER_VERSION = {"major": "1", "minor": "31", "gitVersion": "v1.31.4", "platform": "linux/amd64"}
RESOURCE_VERSION = "48213"
JsonObject = dict[str, Any]


@dataclass(frozen=True)
class Resource:
    """One REST resource: where it lives and how it is addressed."""

    group: str
    versions: tuple[str, ...]  # served, preferred first
    kind: str
    plural: str
    namespaced: bool
    custom: bool = False  # defined by a CRD: list items keep apiVersion/kind

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version


BUILTIN_RESOURCES: tuple[Resource, ...] = (
    Resource("", ("v1",), "Pod", "pods", True),
    Resource("", ("v1",), "Service", "services", True),
    Resource("", ("v1",), "Endpoints", "endpoints", True),
    Resource("", ("v1",), "Event", "events", True),
    Resource("", ("v1",), "ConfigMap", "configmaps", True),
    Resource("", ("v1",), "Secret", "secrets", True),
    Resource("", ("v1",), "ServiceAccount", "serviceaccounts", True),
    Resource("", ("v1",), "Namespace", "namespaces", False),
    Resource("", ("v1",), "Node", "nodes", False),
    Resource("apps", ("v1",), "Deployment", "deployments", True),
    Resource("apps", ("v1",), "ReplicaSet", "replicasets", True),
    Resource("apps", ("v1",), "StatefulSet", "statefulsets", True),
    Resource("autoscaling", ("v2", "v1"), "HorizontalPodAutoscaler", "horizontalpodautoscalers", True),
    Resource("discovery.k8s.io", ("v1",), "EndpointSlice", "endpointslices", True),
    Resource("networking.k8s.io", ("v1",), "Ingress", "ingresses", True),
    Resource("networking.k8s.io", ("v1",), "IngressClass", "ingressclasses", False),
    Resource("apiregistration.k8s.io", ("v1",), "APIService", "apiservices", False),
    Resource("apiextensions.k8s.io", ("v1",), "CustomResourceDefinition", "customresourcedefinitions", False),
)

# Field selectors the fixture server accepts beyond metadata.name / metadata.namespace (as the real one does).
_EXTRA_FIELDS = {
    "events": {
        "involvedObject.kind",
        "involvedObject.name",
        "involvedObject.namespace",
        "involvedObject.uid",
        "reason",
        "type",
    },
    "pods": {"spec.nodeName", "status.phase"},
}


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]


@dataclass(frozen=True)
class GeneratedLog:
    """A container log made line by line when asked: as large as wanted, never held in memory.

    ``line(i)`` is line ``i`` (0-based) with the kubelet's timestamp prefix and its newline. As the
    kubelet does, ``tailLines`` starts ``lines - N`` lines in and ``limitBytes`` stops the stream early,
    so a client that sends both receives only what it asked for. ``honours_limits=False`` plays a
    server that ignores both and sends everything.
    """

    lines: int
    line: Callable[[int], bytes]
    honours_limits: bool = True

    def chunks(self, first: int, chunk_bytes: int = 1 << 16) -> Iterator[bytes]:
        batch: list[bytes] = []
        size = 0
        for index in range(first, self.lines):
            batch.append(self.line(index))
            size += len(batch[-1])
            if size >= chunk_bytes:
                yield b"".join(batch)
                batch, size = [], 0
        if batch:
            yield b"".join(batch)


LogText = str | bytes | GeneratedLog


@dataclass(frozen=True)
class PolicyRule:
    """One rule of a Role/ClusterRole (``rbac.authorization.k8s.io/v1``)."""

    verbs: frozenset[str]
    api_groups: frozenset[str] = frozenset()
    resources: frozenset[str] = frozenset()
    resource_names: frozenset[str] = frozenset()
    non_resource_urls: tuple[str, ...] = ()

    @classmethod
    def of(cls, rule: Mapping[str, Any]) -> PolicyRule:
        return cls(
            verbs=frozenset(rule.get("verbs") or ()),
            api_groups=frozenset(rule.get("apiGroups") or ()),
            resources=frozenset(rule.get("resources") or ()),
            resource_names=frozenset(rule.get("resourceNames") or ()),
            non_resource_urls=tuple(rule.get("nonResourceURLs") or ()),
        )

    def grants(self, verb: str, group: str, resource: str, name: str) -> bool:
        return (
            _matches(self.verbs, verb)
            and _matches(self.api_groups, group)
            and _matches(self.resources, resource)
            and (not self.resource_names or name in self.resource_names)
        )

    def grants_url(self, verb: str, path: str) -> bool:
        return _matches(self.verbs, verb) and any(
            path == url or (url.endswith("*") and path.startswith(url[:-1])) for url in self.non_resource_urls
        )


def _matches(allowed: frozenset[str], value: str) -> bool:
    return "*" in allowed or value in allowed


def rules_of_cluster_roles(path: Path) -> list[PolicyRule]:
    """The rules of every ClusterRole in a YAML file (e.g. ``deploy/base/clusterrole.yaml``)."""
    return [
        PolicyRule.of(rule)
        for document in read_yaml_objects(path)
        if document.get("kind") == "ClusterRole"
        for rule in document.get("rules") or []
    ]


@dataclass
class Injection:
    """Answer requests whose path matches ``pattern`` (fnmatch) after ``delay`` seconds.

    ``status`` answers with a ``Status`` error; ``body`` answers 200 with that raw text (a malformed answer),
    or with what it returns for the request's query when it is a function (an answer that changes per request).
    """

    pattern: str
    status: int | None = None
    delay: float = 0.0
    message: str | None = None
    body: str | Callable[[Mapping[str, str]], Answer] | None = None


class ApiError(Exception):
    """An error answer as a ``Status`` object."""

    def __init__(self, code: int, reason: str, message: str, details: JsonObject | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.status: JsonObject = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
        if details is not None:
            self.status["details"] = details


_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}


def _version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes version ordering: GA before beta before alpha, higher numbers first."""
    match = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not match:
        return (0, 0, 0)
    stage = {None: 3, "beta": 2, "alpha": 1}[match.group(2)]
    return (stage, int(match.group(1)), int(match.group(3) or 0))


def resource_from_crd(crd: Mapping[str, Any]) -> Resource:
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    served = [str(entry["name"]) for entry in spec.get("versions") or [] if entry.get("served", True)]
    return Resource(
        group=str(spec["group"]),
        versions=tuple(sorted(served, key=_version_priority, reverse=True)),
        kind=str(names["kind"]),
        plural=str(names["plural"]),
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        custom=True,
    )


def _plain(node: Any) -> Any:
    """YAML timestamps become RFC 3339 strings, as the API server writes them."""
    if isinstance(node, dict):
        return {str(key): _plain(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_plain(item) for item in node]
    if isinstance(node, datetime):
        moment = node if node.tzinfo else node.replace(tzinfo=timezone.utc)
        text = moment.astimezone(timezone.utc).isoformat()
        return text.replace("+00:00", "Z")
    if isinstance(node, date):
        return node.isoformat()
    return node


def read_yaml_objects(path: Path) -> list[JsonObject]:
    """Objects of a YAML file: single documents, multi-document files and ``kind: List`` alike."""
    objects: list[JsonObject] = []
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: fixtures load 10x faster
    for document in yaml.load_all(path.read_text(encoding="utf-8"), Loader=loader):
        if not isinstance(document, dict):
            continue
        if document.get("kind") == "List" or str(document.get("kind", "")).endswith("List"):
            objects.extend(_plain(item) for item in document.get("items") or [] if isinstance(item, dict))
        else:
            objects.append(_plain(document))
    return objects


# --- selectors -------------------------------------------------------------------------------

_REQUIREMENT = re.compile(
    r"^\s*(?:(?P<not>!)\s*(?P<absent>[\w./-]+)"
    r"|(?P<setkey>[\w./-]+)\s+(?P<setop>in|notin)\s*\((?P<values>[^)]*)\)"
    r"|(?P<key>[\w./-]+)\s*(?P<op>==|!=|=)\s*(?P<value>[\w./-]*)"
    r"|(?P<exists>[\w./-]+))\s*$"
)


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part for part in parts if part.strip()]


def label_selector_matches(selector: str, labels: Mapping[str, str]) -> bool:
    """The API server's label selector grammar; raises ``ApiError`` 400 for a malformed one."""
    for requirement in _split_top_level(selector):
        match = _REQUIREMENT.match(requirement)
        if match is None:
            raise ApiError(400, "BadRequest", f"unable to parse requirement: {requirement.strip()!r}")
        if match.group("absent"):
            satisfied = match.group("absent") not in labels
        elif match.group("setkey"):
            values = {value.strip() for value in match.group("values").split(",")}
            key = match.group("setkey")
            if match.group("setop") == "in":
                satisfied = key in labels and labels[key] in values
            else:
                satisfied = key not in labels or labels[key] not in values
        elif match.group("key"):
            actual = labels.get(match.group("key"))
            expected = match.group("value")
            satisfied = actual != expected if match.group("op") == "!=" else actual == expected
        else:
            satisfied = match.group("exists") in labels
        if not satisfied:
            return False
    return True


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    node: Any = obj
    for part in path.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return "" if node is None else str(node)


def field_selector_matches(selector: str, obj: Mapping[str, Any], plural: str) -> bool:
    allowed = {"metadata.name", "metadata.namespace"} | _EXTRA_FIELDS.get(plural, set())
    for requirement in _split_top_level(selector):
        match = re.fullmatch(r"\s*([\w.]+)\s*(==|!=|=)\s*(\S*)\s*", requirement)
        if match is None:
            raise ApiError(400, "BadRequest", f"invalid field selector: {requirement.strip()!r}")
        path, operator, expected = match.groups()
        if path not in allowed:
            raise ApiError(400, "BadRequest", f'field label not supported: "{path}"')
        actual = _field_value(obj, path)
        if (actual == expected) == (operator == "!="):
            return False
    return True


# --- the cluster state -----------------------------------------------------------------------


@dataclass
class FakeCluster:
    """Objects by (group, plural) and (namespace, name); container logs by (namespace, pod, container, previous)."""

    objects: dict[tuple[str, str], dict[tuple[str, str], JsonObject]] = field(default_factory=dict)
    logs: dict[tuple[str, str, str, bool], LogText] = field(default_factory=dict)
    version: JsonObject = field(default_factory=lambda: dict(SERVER_VERSION))

    def resources(self) -> list[Resource]:
        custom = [resource_from_crd(crd) for crd in self._items("apiextensions.k8s.io", "customresourcedefinitions")]
        return [*BUILTIN_RESOURCES, *custom]

    def _items(self, group: str, plural: str) -> list[JsonObject]:
        return list(self.objects.get((group, plural), {}).values())

    def resource_for(self, api_version: str, kind: str) -> Resource | None:
        group = api_version.rpartition("/")[0]
        return next((r for r in self.resources() if r.group == group and r.kind == kind), None)

    def add(self, obj: Mapping[str, Any]) -> None:
        resource = self.resource_for(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        if resource is None:
            raise ValueError(
                f"fixture object {obj.get('apiVersion')}/{obj.get('kind')} {(obj.get('metadata') or {}).get('name')}: "
                "no built-in kind and no CRD loaded for it"
            )
        stored = _plain(dict(obj))
        metadata = stored.setdefault("metadata", {})
        namespace = str(metadata.get("namespace") or "") if resource.namespaced else ""
        if resource.namespaced and not namespace:
            raise ValueError(f"fixture {resource.kind} {metadata.get('name')} has no namespace")
        name = str(metadata["name"])
        metadata.setdefault(
            "uid", str(uuid.uuid5(uuid.NAMESPACE_URL, f"{resource.group}/{resource.plural}/{namespace}/{name}"))
        )
        metadata.setdefault("resourceVersion", RESOURCE_VERSION)
        self.objects.setdefault((resource.group, resource.plural), {})[(namespace, name)] = stored

    def add_all(self, objects: Iterable[Mapping[str, Any]]) -> None:
        """Add objects, CRDs first, so custom resources in the same batch find their definition."""
        batch = list(objects)
        crds = [obj for obj in batch if obj.get("kind") == "CustomResourceDefinition"]
        for obj in crds + [obj for obj in batch if obj.get("kind") != "CustomResourceDefinition"]:
            self.add(obj)

    def add_log(self, namespace: str, pod: str, container: str, text: LogText, previous: bool = False) -> None:
        self.logs[(namespace, pod, container, previous)] = text

    def load(self, *locations: Path) -> None:
        """Load YAML files and directories (recursively); ``logs/`` subtrees become container logs."""
        objects: list[JsonObject] = []
        for location in locations:
            files = sorted(location.rglob("*")) if location.is_dir() else [location]
            for path in files:
                relative = path.relative_to(location).parts if location.is_dir() else ()
                if "logs" in relative[:-1] and path.suffix == ".log":
                    self._load_log(path)
                elif path.suffix in (".yaml", ".yml") and path.is_file():
                    objects.extend(read_yaml_objects(path))
        self.add_all(objects)

    def _load_log(self, path: Path) -> None:
        previous = path.name.endswith(".previous.log")
        container = path.name.removesuffix(".log").removesuffix(".previous")
        self.add_log(path.parent.parent.name, path.parent.name, container, path.read_text(encoding="utf-8"), previous)


# --- REST routing ----------------------------------------------------------------------------


def _discovery_group(resources: list[Resource], group: str) -> JsonObject:
    versions = sorted(
        {v for r in resources if r.group == group for v in r.versions}, key=_version_priority, reverse=True
    )
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def _resource_list(resources: list[Resource], group: str, version: str) -> JsonObject:
    served = [r for r in resources if r.group == group and version in r.versions]
    entries = []
    for resource in served:
        verbs = ["get", "list", "watch"]
        entries.append(
            {
                "name": resource.plural,
                "singularName": resource.kind.lower(),
                "namespaced": resource.namespaced,
                "kind": resource.kind,
                "verbs": verbs,
            }
        )
        if resource.plural == "pods":
            entries.append(
                {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get"]}
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": entries,
    }


def _not_found_path() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


@dataclass(frozen=True)
class _Address:
    resource: Resource
    version: str
    namespace: str  # "" for cluster-wide
    name: str  # "" for a collection
    subresource: str


Answer = JsonObject | str | bytes | Iterator[bytes]


class Router:
    """Answers one GET against a :class:`FakeCluster` (pure: no sockets, no clock)."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster

    def answer(self, path: str, query: Mapping[str, str]) -> Answer:
        resources = self.cluster.resources()
        segments = [unquote(part) for part in path.strip("/").split("/")] if path.strip("/") else []
        if segments == ["version"]:
            return dict(self.cluster.version)
        if segments == ["api"]:
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        if segments == ["apis"]:
            groups = sorted({r.group for r in resources if r.group})
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [_discovery_group(resources, g) for g in groups],
            }
        if segments == ["api", "v1"]:
            return _resource_list(resources, "", "v1")
        if len(segments) == 2 and segments[0] == "apis" and any(r.group == segments[1] for r in resources):
            return {"kind": "APIGroup", "apiVersion": "v1", **_discovery_group(resources, segments[1])}
        if len(segments) == 3 and segments[0] == "apis":
            if any(r.group == segments[1] and segments[2] in r.versions for r in resources):
                return _resource_list(resources, segments[1], segments[2])
            raise _not_found_path()
        address = self._address(resources, segments)
        if address.subresource == "log" and address.resource.plural == "pods":
            return self._pod_log(address, query)
        if address.subresource:
            raise _not_found_path()
        if address.name:
            return self._get(address)
        return self._list(address, query)

    @staticmethod
    def _address(resources: list[Resource], segments: list[str]) -> _Address:
        if len(segments) >= 3 and segments[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", segments[2:]
        elif len(segments) >= 4 and segments[0] == "apis":
            group, version, rest = segments[1], segments[2], segments[3:]
        else:
            raise _not_found_path()
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        plural, name, subresource = [*rest, "", ""][:3]
        if len(rest) > 3:
            raise _not_found_path()
        resource = next(
            (r for r in resources if r.group == group and r.plural == plural and version in r.versions), None
        )
        if resource is None or (namespace and not resource.namespaced):
            raise _not_found_path()
        return _Address(resource, version, namespace, name, subresource)

    def _stored(self, resource: Resource) -> list[JsonObject]:
        bucket = self.cluster.objects.get((resource.group, resource.plural), {})
        return [bucket[key] for key in sorted(bucket)]

    def _served_copy(self, address: _Address, obj: JsonObject) -> JsonObject:
        copied: JsonObject = json.loads(json.dumps(obj))
        copied["apiVersion"] = address.resource.api_version(address.version)
        copied["kind"] = address.resource.kind
        return copied

    def _get(self, address: _Address) -> JsonObject:
        bucket = self.cluster.objects.get((address.resource.group, address.resource.plural), {})
        found = bucket.get((address.namespace, address.name))
        if found is None:
            qualified = (
                f"{address.resource.plural}.{address.resource.group}"
                if address.resource.group
                else address.resource.plural
            )
            raise ApiError(
                404,
                "NotFound",
                f'{qualified} "{address.name}" not found',
                {"name": address.name, "group": address.resource.group, "kind": address.resource.plural},
            )
        return self._served_copy(address, found)

    def _list(self, address: _Address, query: Mapping[str, str]) -> JsonObject:
        matching = [
            obj
            for obj in self._stored(address.resource)
            if (not address.namespace or (obj.get("metadata") or {}).get("namespace") == address.namespace)
            and label_selector_matches(query.get("labelSelector", ""), (obj.get("metadata") or {}).get("labels") or {})
            and field_selector_matches(query.get("fieldSelector", ""), obj, address.resource.plural)
        ]
        offset = _decode_continue(query.get("continue", ""))
        limit = int(query.get("limit") or 0)
        page = matching[offset : offset + limit] if limit > 0 else matching[offset:]
        metadata: JsonObject = {"resourceVersion": RESOURCE_VERSION}
        following = offset + len(page)
        if following < len(matching):
            metadata["continue"] = _encode_continue(following)
            metadata["remainingItemCount"] = len(matching) - following
        items = [self._served_copy(address, obj) for obj in page]
        if not address.resource.custom:
            # Built-in list answers leave apiVersion/kind off their items; CRD answers keep them.
            for item in items:
                item.pop("apiVersion", None)
                item.pop("kind", None)
        return {
            "kind": f"{address.resource.kind}List",
            "apiVersion": address.resource.api_version(address.version),
            "metadata": metadata,
            "items": items,
        }

    def _pod_log(self, address: _Address, query: Mapping[str, str]) -> bytes | Iterator[bytes]:
        pod = self._get(address)
        spec = pod.get("spec") or {}
        names = [str(c["name"]) for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])]
        container = query.get("container") or ""
        if not container:
            if len(spec.get("containers") or []) != 1:
                choices = " ".join(str(c["name"]) for c in spec.get("containers") or [])
                raise ApiError(
                    400,
                    "BadRequest",
                    f"a container name must be specified for pod {address.name}, choose one of: [{choices}]",
                )
            container = names[-1]
        if container not in names:
            raise ApiError(400, "BadRequest", f"container {container} is not valid for pod {address.name}")
        previous = query.get("previous") == "true"
        waiting = _waiting_to_start(pod, container)
        if waiting and not previous:
            raise ApiError(400, "BadRequest", f'container "{container}" in pod "{address.name}" is {waiting}')
        text = self.cluster.logs.get((address.namespace, address.name, container, previous))
        if text is None:
            if previous:
                raise ApiError(
                    400, "BadRequest", f'previous terminated container "{container}" in pod "{address.name}" not found'
                )
            text = ""
        tail = int(query["tailLines"]) if query.get("tailLines") else None
        limit = int(query["limitBytes"]) if query.get("limitBytes") else None
        timestamps = query.get("timestamps") == "true"
        if isinstance(text, GeneratedLog):
            if not text.honours_limits:
                tail = limit = None
            first = 0 if tail is None else max(0, text.lines - max(tail, 0))
            stream = _limited(_log_lines(text.chunks(first), timestamps), limit)
            return stream if tail != 0 else iter(())
        data = text.encode() if isinstance(text, str) else text
        # The kubelet splits on newlines only (a progress bar's carriage returns stay inside a line).
        lines = [line + b"\n" for line in data.split(b"\n")]
        lines[-1] = lines[-1][:-1]
        lines = [line for line in lines if line]
        if not timestamps:
            lines = [_without_timestamp(line) for line in lines]
        if tail is not None:
            lines = lines[-tail:] if tail > 0 else []
        # The kubelet stops after limitBytes: the first bytes of the (tailed) stream are kept.
        output = b"".join(lines)
        return output[:limit] if limit is not None else output


def _waiting_to_start(pod: JsonObject, container: str) -> str:
    """The kubelet's refusal for a container that has never run (no log exists yet), "" when it has run."""
    status = pod.get("status") or {}
    for entry in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        if entry.get("name") != container:
            continue
        state = entry.get("state") or {}
        if "running" in state or "terminated" in state or (entry.get("lastState") or {}).get("terminated"):
            return ""
        reason = str((state.get("waiting") or {}).get("reason") or "ContainerCreating")
        if reason in ("ErrImagePull", "ImagePullBackOff"):
            return "waiting to start: trying and failing to pull image"
        return f"waiting to start: {reason}"
    return ""


def _without_timestamp(line: bytes) -> bytes:
    return line.split(b" ", 1)[1] if b" " in line else line


def _log_lines(chunks: Iterator[bytes], timestamps: bool) -> Iterator[bytes]:
    for chunk in chunks:
        yield chunk if timestamps else b"".join(_without_timestamp(line) for line in chunk.splitlines(keepends=True))


def _limited(chunks: Iterator[bytes], limit: int | None) -> Iterator[bytes]:
    """The stream cut after ``limit`` bytes (as the kubelet's limitBytes does)."""
    left = limit
    for chunk in chunks:
        if left is None:
            yield chunk
            continue
        if left <= 0:
            return
        yield chunk[:left]
        left -= len(chunk)


def _encode_continue(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"rv": RESOURCE_VERSION, "start": offset}).encode()).decode()


def _decode_continue(token: str) -> int:
    if not token:
        return 0
    try:
        return int(json.loads(base64.urlsafe_b64decode(token.encode()))["start"])
    except (ValueError, KeyError, TypeError):
        raise ApiError(400, "BadRequest", "continue key is not valid: illegal base64 data") from None


# --- the HTTP server -------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as two writes: no 40 ms delayed-ACK stall
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the request log is the record
        return

    def do_GET(self) -> None:
        self.server.fake.handle(self, "GET")

    def _refuse(self) -> None:
        self.server.fake.handle(self, self.command)

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _refuse

    def send(self, status: int, payload: Answer) -> int:
        """Answer; returns the number of body bytes written."""
        if not isinstance(payload, (str, bytes, dict)):
            return self._send_chunked(status, payload)
        if isinstance(payload, str):
            body, content_type = payload.encode(), "text/plain; charset=utf-8"
        elif isinstance(payload, bytes):
            body, content_type = payload, "text/plain"
        else:
            body, content_type = json.dumps(payload).encode(), "application/json"
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (a timeout test): nothing to answer
            return 0
        return len(body)

    def _send_chunked(self, status: int, chunks: Iterator[bytes]) -> int:
        """A body made while it is sent (HTTP/1.1 chunked transfer encoding), as the kubelet streams logs."""
        sent = 0
        try:
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for chunk in chunks:
                if chunk:
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    sent += len(chunk)
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client stopped reading
        return sent


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeApiServer


class FakeApiServer:
    """The fixture API server on 127.0.0.1 and a free port; use as a context manager."""

    def __init__(self, cluster: FakeCluster | None = None, token: str | None = DEFAULT_TOKEN) -> None:
        self.cluster = cluster or FakeCluster()
        self.token = token
        self.router = Router(self.cluster)
        self.injections: list[Injection] = []
        self.policy: list[PolicyRule] | None = None
        self._requests: list[RecordedRequest] = []
        self._sent: list[tuple[str, int]] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-kube-apiserver", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeApiServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # cut injected delays short
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    # -- test controls --

    def load(self, *locations: Path) -> FakeApiServer:
        self.cluster.load(*locations)
        return self

    def inject(
        self,
        pattern: str,
        *,
        status: int | None = None,
        delay: float = 0.0,
        message: str | None = None,
        body: str | Callable[[Mapping[str, str]], Answer] | None = None,
    ) -> None:
        """Make paths matching ``pattern`` (fnmatch, e.g. ``/api/v1/namespaces/llm/events``) fail or stall."""
        with self._lock:
            self.injections.append(Injection(pattern, status, delay, message, body))

    def restrict_to(self, rules: Iterable[PolicyRule]) -> None:
        """Answer only what ``rules`` grant (as RBAC would for a user bound to them); 403 for the rest."""
        with self._lock:
            self.policy = list(rules)

    def clear_injections(self) -> None:
        with self._lock:
            self.injections.clear()

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def sent_bytes(self) -> list[tuple[str, int]]:
        """(path, body bytes sent) for every answer, in order."""
        with self._lock:
            return list(self._sent)

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()
            self._sent.clear()

    # -- serving --

    def handle(self, handler: _Handler, method: str) -> None:
        parts = urlsplit(handler.path)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        with self._lock:
            self._requests.append(RecordedRequest(method, parts.path, query))
            injection = next((i for i in self.injections if fnmatch.fnmatchcase(parts.path, i.pattern)), None)
        length = int(handler.headers.get("Content-Length") or 0)
        if length:
            handler.rfile.read(length)
        try:
            sent = handler.send(200, self._answer(handler, method, parts.path, query, injection))
        except ApiError as error:
            sent = handler.send(error.code, error.status)
        with self._lock:
            self._sent.append((parts.path, sent))

    def _answer(
        self, handler: _Handler, method: str, path: str, query: Mapping[str, str], injection: Injection | None
    ) -> Answer:
        if method != "GET":
            raise ApiError(405, "MethodNotAllowed", "the fixture API server is read-only: only GET is allowed")
        if self.token is not None and handler.headers.get("Authorization") != f"Bearer {self.token}":
            raise ApiError(401, "Unauthorized", "Unauthorized")
        if self.policy is not None:
            self._authorize(path, self.policy)
        if injection is not None:
            self._stopping.wait(injection.delay)
            if injection.status is not None:
                raise ApiError(
                    injection.status,
                    _REASONS.get(injection.status, "Unknown"),
                    injection.message or _default_message(injection.status, path),
                )
            if callable(injection.body):
                return injection.body(query)
            if injection.body is not None:
                return injection.body
        return self.router.answer(path, query)

    @staticmethod
    def _authorize(path: str, rules: list[PolicyRule]) -> None:
        """Raise 403 unless a rule grants this GET: resource requests as get/list, other paths as URLs.

        As on a real API server, authorization comes before routing: a forbidden request for a
        resource that does not exist is still 403.
        """
        attributes = request_attributes(path)
        if attributes is None:
            if not any(rule.grants_url("get", path) for rule in rules):
                raise ApiError(403, "Forbidden", f'forbidden: User "{RBAC_USER}" cannot get path "{path}"')
            return
        group, namespace, resource, name = attributes
        verb = "get" if name else "list"
        if any(rule.grants(verb, group, resource, name) for rule in rules):
            return
        subject = f'{resource} "{name}"' if name else resource
        scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
        raise ApiError(
            403,
            "Forbidden",
            f'{subject} is forbidden: User "{RBAC_USER}" cannot {verb} resource "{resource}" '
            f'in API group "{group}" {scope}',
        )


def request_attributes(path: str) -> tuple[str, str, str, str] | None:
    """(API group, namespace, resource[/subresource], name) of a resource path; None for other paths."""
    segments = [unquote(part) for part in path.strip("/").split("/") if part]
    if segments[:2] == ["api", "v1"]:
        group, rest = "", segments[2:]
    elif len(segments) >= 3 and segments[0] == "apis":
        group, rest = segments[1], segments[3:]
    else:
        return None
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest:
        return None
    resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    return group, namespace, resource, rest[1] if len(rest) > 1 else ""


def _default_message(status: int, path: str) -> str:
    """A message worded as the real API server words it for this status."""
    if status == 403:
        segments = path.strip("/").split("/")
        group = segments[1] if segments[:1] == ["apis"] and len(segments) > 1 else ""
        namespace = segments[segments.index("namespaces") + 1] if "namespaces" in segments[:-1] else ""
        resource = segments[-1]
        scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
        return (
            f'{resource} is forbidden: User "system:serviceaccount:ops:kserve-runbook" cannot list resource '
            f'"{resource}" in API group "{group}" {scope}'
        )
    if status == 404:
        return "the server could not find the requested resource"
    if status >= 500:
        return "Internal error occurred: etcdserver: request timed out"
    return f"injected HTTP {status}"


def write_kubeconfig(
    path: Path,
    server: str,
    token: str | None = DEFAULT_TOKEN,
    context: str = "fixture",
    namespace: str = "default",
    extra_contexts: Mapping[str, str] | None = None,
) -> Path:
    """A kubeconfig with a token user and ``context`` as current-context.

    ``extra_contexts`` maps further context names to their server URLs (one cluster entry each).
    """
    servers = {context: server, **(extra_contexts or {})}
    user: JsonObject = {"token": token} if token else {}
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": context,
        "clusters": [{"name": name, "cluster": {"server": url}} for name, url in servers.items()],
        "users": [{"name": "runbook", "user": user}],
        "contexts": [
            {"name": name, "context": {"cluster": name, "user": "runbook", "namespace": namespace}} for name in servers
        ],
        "preferences": {},
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def crds_for_every_kind_read() -> list[JsonObject]:
    """A CustomResourceDefinition for every custom kind the tool reads, so the server serves them all."""
    from nbhelpers.sources import kinds

    return [
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{kind.plural}.{kind.group}"},
            "spec": {
                "group": kind.group,
                "names": {"kind": kind.kind, "plural": kind.plural},
                "scope": "Namespaced" if kind.namespaced else "Cluster",
                "versions": [{"name": kind.versions[0], "served": True, "storage": True}],
            },
        }
        for kind in kinds.ALL_KINDS
        if kind.group not in kinds.CORE_LIKE_GROUPS
    ]


# --- a stand-in Prometheus -----------------------------------------------------------------------

EMPTY_MATRIX = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}}).encode()


@dataclass(frozen=True)
class PrometheusReply:
    """What the stand-in Prometheus answers to every query: a status, a body, after a delay."""

    status: int = 200
    body: bytes = EMPTY_MATRIX
    delay: float = 0.0

    @classmethod
    def error(cls, status: int, error_type: str, message: str) -> PrometheusReply:
        """An error answer in Prometheus' JSON error format."""
        body = {"status": "error", "errorType": error_type, "error": message}
        return cls(status=status, body=json.dumps(body).encode())


@dataclass(frozen=True)
class PrometheusRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]


class FakePrometheus:
    """A Prometheus HTTP API on 127.0.0.1 that answers every request with ``reply`` and records it.

    For the failures of a real server (down, slow, 401/403, errors, no series); the real
    server with real data is tests/promharness.py.
    """

    def __init__(self, reply: PrometheusReply = PrometheusReply()) -> None:
        self.reply = reply
        self._requests: list[PrometheusRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # no 40 ms delayed-ACK stall per answer

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                fake._answer(self)

            do_POST = do_GET  # recorded like a GET: a read-only client must never send one

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-prometheus", daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def requests(self) -> list[PrometheusRequest]:
        with self._lock:
            return list(self._requests)

    def __enter__(self) -> FakePrometheus:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(handler.path)
        with self._lock:
            self._requests.append(
                PrometheusRequest(
                    handler.command, parts.path, dict(parse_qsl(parts.query)), dict(handler.headers.items())
                )
            )
        reply = self.reply
        self._stopping.wait(reply.delay)
        try:
            handler.send_response(reply.status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(reply.body)))
            handler.end_headers()
            handler.wfile.write(reply.body)
        except (BrokenPipeError, ConnectionResetError):
            handler.close_connection = True  # the client gave up waiting
