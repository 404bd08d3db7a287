"""Schema validation for tests: is an object, or the object a finding's merge patch produces, valid for its kind?

Built-in kinds are checked by PyPI ``kubernetes-validate`` against its strict schemas for ``KUBERNETES`` (unknown
fields fail). The custom resources a patch may target (InferenceService, ServingRuntime, VirtualService, HTTPRoute,
ScaledObject) are checked against the schemas in ``schemas/``, which reuse the same strict Kubernetes definitions
for the parts they embed (Container, PodSpec, Probe, Volume, ObjectMeta). Any other kind has no schema here and
fails loudly, so a patch on a new kind cannot pass unchecked.

``status`` is left out of every check: a merge patch on an object cannot change it (it is a subresource),
and fixtures keep it short (kubelet-required fields such as ``containerStatuses[].image`` are omitted).
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml
from referencing import Registry, Resource

KUBERNETES = "1.31"
KUBERNETES_DEFINITIONS = "https://kubernetes.io/api/_definitions.json"
SCHEMAS = Path(__file__).parent / "schemas"
# (apiVersion, kind) -> (schema file under schemas/, the definition in it that describes the kind).
CUSTOM_KINDS = {
    ("serving.kserve.io/v1beta1", "InferenceService"): ("kserve.json", "InferenceService"),
    ("serving.kserve.io/v1alpha1", "ServingRuntime"): ("kserve.json", "ServingRuntime"),
    ("serving.kserve.io/v1alpha1", "ClusterServingRuntime"): ("kserve.json", "ServingRuntime"),
    **{
        (f"networking.istio.io/{version}", "VirtualService"): ("istio.json", "VirtualService")
        for version in ("v1", "v1beta1", "v1alpha3")
    },
    **{
        (f"gateway.networking.k8s.io/{version}", "HTTPRoute"): ("gateway-api.json", "HTTPRoute")
        for version in ("v1", "v1beta1")
    },
    ("keda.sh/v1alpha1", "ScaledObject"): ("keda.json", "ScaledObject"),
}
# Kinds the user owns even though KServe reads them: docs/contracts.md#findingsjson-v1 lets a patch target them whatever their owners.
USER_OWNED_KINDS = frozenset({"InferenceService", "ServingRuntime", "ClusterServingRuntime"})
# Owners whose controllers rewrite what they generate, undoing a direct patch.
CONTROLLER_GROUP_SUFFIXES = ("kserve.io", "knative.dev")


class SchemaViolation(AssertionError):
    """An object its kind's schema rejects; the message names each bad field path."""


class NoSchema(AssertionError):
    """A kind with no schema here: failing keeps a patch on it from passing unchecked."""


def field_path(parts: Iterable[str | int]) -> str:
    """``spec.ports[0].targetPort`` from the path parts of a validation error."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _describe(error: jsonschema.ValidationError) -> list[str]:
    """One line per bad field; an unknown field is named by its own path rather than its parent's."""
    where = field_path(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = set((error.schema if isinstance(error.schema, dict) else {}).get("properties", {}))
        unknown = sorted(set(error.instance) - known)
        return [f"{field_path([*error.absolute_path, name])}: unknown field" for name in unknown]
    return [f"{where or '(object)'}: {error.message}"]


def _kubernetes_definitions() -> dict[str, Any]:
    """The strict ``_definitions.json`` that kubernetes-validate ships for ``KUBERNETES``."""
    folder = resources.files("kubernetes_validate") / "kubernetes-json-schema" / f"v{KUBERNETES}.0-local-strict"
    definitions: dict[str, Any] = json.loads((folder / "_definitions.json").read_text())
    return definitions


def _absolute_refs(node: Any) -> Any:
    """A copy of a Kubernetes subschema whose document-local ``$ref``s point into the Kubernetes definitions."""
    if isinstance(node, dict):
        rewritten = {key: _absolute_refs(value) for key, value in node.items()}
        if str(node.get("$ref", "")).startswith("#"):
            rewritten["$ref"] = KUBERNETES_DEFINITIONS + node["$ref"]
        return rewritten
    if isinstance(node, list):
        return [_absolute_refs(item) for item in node]
    return node


def _expand_inline(schema: dict[str, Any], kubernetes: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` with each ``x-inline`` replaced by the properties it names (Go's ``json:",inline"``).

    Inlined types lend their properties, not their ``required`` list: KServe makes ``containers`` optional in
    its PodSpec and ``name`` optional in the container fields of ``model``.
    """
    expanded = copy.deepcopy(schema)
    definitions = expanded["$defs"]
    done: set[str] = set()

    def properties_of(ref: str) -> dict[str, Any]:
        local, _, name = ref.partition("#/$defs/")
        if local == "":
            expand(name)
            return dict(definitions[name]["properties"])
        assert local == KUBERNETES_DEFINITIONS, f"x-inline {ref}: neither local nor a Kubernetes definition"
        return dict(_absolute_refs(kubernetes["$defs"][name]["properties"]))

    def expand(name: str) -> None:
        if name in done:
            return
        definition = definitions[name]
        merged: dict[str, Any] = {}
        for ref in definition.pop("x-inline", []):
            merged.update(properties_of(ref))
        merged.update(definition.get("properties", {}))
        definition["properties"] = merged
        done.add(name)

    for name in definitions:
        expand(name)
    return expanded


@functools.cache
def _custom_validators() -> dict[tuple[str, str], jsonschema.protocols.Validator]:
    """A validator per ``CUSTOM_KINDS`` entry, all sharing one registry of the schema files."""
    kubernetes = _kubernetes_definitions()
    documents = {
        name: _expand_inline(json.loads((SCHEMAS / name).read_text()), kubernetes)
        for name in {file for file, _ in CUSTOM_KINDS.values()}
    }
    resources_by_id = [(kubernetes["$id"], Resource.from_contents(kubernetes))]
    resources_by_id += [(document["$id"], Resource.from_contents(document)) for document in documents.values()]
    registry: Registry = Registry().with_resources(resources_by_id)
    return {
        key: jsonschema.Draft202012Validator({"$ref": f"{documents[file]['$id']}#/$defs/{name}"}, registry=registry)
        for key, (file, name) in CUSTOM_KINDS.items()
    }


def _is_built_in(api_version: str) -> bool:
    """Core and ``*.k8s.io`` groups, and the dotless built-in groups (apps, batch, autoscaling, policy)."""
    group = api_version.rpartition("/")[0]
    return "." not in group or group.endswith(".k8s.io")


def schema_errors(obj: Mapping[str, Any]) -> list[str]:
    """``path: problem`` for each field of ``obj`` (status left out) that its kind's schema rejects."""
    checked = {key: value for key, value in obj.items() if key != "status"}
    api_version, kind = str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")
    custom = _custom_validators().get((api_version, kind))
    if custom is not None:
        errors = sorted(custom.iter_errors(checked), key=lambda error: [str(part) for part in error.path])
        return [line for error in errors for line in _describe(error)]
    if _is_built_in(api_version):
        try:
            kubernetes_validate.validate(checked, KUBERNETES, strict=True)
        except kubernetes_validate.ValidationError as error:
            return _describe(error)
        except kubernetes_validate.SchemaNotFoundError:
            pass
        else:
            return []
    raise NoSchema(f"no schema for {kind} ({api_version}): add one under tests/schemas/ before patching it")


def assert_valid_object(obj: Mapping[str, Any], what: str = "") -> None:
    """Raise ``SchemaViolation`` listing the bad field paths when ``obj`` is not valid for its kind."""
    errors = schema_errors(obj)
    if errors:
        name = what or f"{obj.get('kind')} {(obj.get('metadata') or {}).get('name')}"
        raise SchemaViolation(f"{name} is not a valid {obj.get('kind')}:\n  " + "\n  ".join(errors))


def merge_patch_body(patch_type: str, body: str) -> dict[str, Any]:
    """The mapping of a docs/contracts.md#patches: ``type: merge``, a YAML body that is a non-empty mapping, no status."""
    assert patch_type == "merge", (
        f"patch type {patch_type!r}: docs/contracts.md#patches are JSON merge patches ('merge')"
    )
    parsed = yaml.safe_load(body)
    assert isinstance(parsed, dict) and parsed, f"patch body is not a non-empty YAML mapping:\n{body}"
    assert "status" not in parsed, "a merge patch cannot change status (a subresource): the patch would do nothing"
    return parsed


def controller_owner(obj: Mapping[str, Any]) -> str | None:
    """``Kind/name`` of a KServe or Knative owner of ``obj``, whose controller would revert a direct patch."""
    for owner in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if str(owner.get("apiVersion") or "").split("/")[0].endswith(CONTROLLER_GROUP_SUFFIXES):
            return f"{owner.get('kind')}/{owner.get('name')}"
    return None


def assert_user_owned(target: Mapping[str, Any]) -> None:
    """A patch target must be the ISVC or a ServingRuntime, or an object no KServe/Knative controller owns."""
    if target.get("kind") in USER_OWNED_KINDS:
        return
    owner = controller_owner(target)
    assert owner is None, (
        f"patch targets {target.get('kind')} {(target.get('metadata') or {}).get('name')}, "
        f"which {owner} owns: its controller would revert the change (patch the InferenceService instead)"
    )
