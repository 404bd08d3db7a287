"""Merge patches for the objects a finding names, with the kubectl commands to apply and roll them back.

A finding's fix is always a patch of an object the user owns (the InferenceService, a ConfigMap, an
Ingress...), written as the smallest RFC 7386 merge patch, plus the exact commands; ``Fix.from_plan`` turns a
:class:`PatchPlan` into a finding's :class:`~nbhelpers.findings.model.Fix`.
"""

from __future__ import annotations

import copy
import json
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from nbhelpers.findings.model import Patch
from nbhelpers.sources import kinds, kube
from nbhelpers.sources.kube import KubeObject


def merge_diff(original: Any, changed: Any) -> Any:
    """The smallest RFC 7386 merge patch that turns ``original`` into ``changed``.

    Maps are diffed key by key (a removed key becomes ``null``); anything else, lists included,
    is carried whole, as docs/contracts.md#findingsjson-v1 asks for lists.
    """
    if not isinstance(original, Mapping) or not isinstance(changed, Mapping):
        return copy.deepcopy(changed)
    patch: dict[str, Any] = {}
    for key in original:
        if key not in changed:
            patch[key] = None
    for key, value in changed.items():
        if key not in original:
            patch[key] = copy.deepcopy(value)
        elif original[key] != value:
            patch[key] = merge_diff(original[key], value)
    return patch


@dataclass(frozen=True)
class PatchPlan:
    """A merge patch for one object, with the commands to apply and to roll it back."""

    patch: Patch
    apply_command: str
    rollback_command: str


def _resource_name(obj: Mapping[str, Any]) -> str:
    registered = kinds.kind_for(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""))
    if registered is None:
        return str(obj.get("kind") or "").lower()
    return f"{registered.plural}.{registered.group}" if registered.group else registered.plural


def kubectl_patch(obj: Mapping[str, Any], body: Mapping[str, Any]) -> str:
    payload = json.dumps(body, separators=(",", ":"), sort_keys=False)
    command = ["kubectl", "patch", _resource_name(obj), kube.name(obj)]
    if kube.namespace(obj):
        command += ["-n", kube.namespace(obj)]
    command += ["--type", "merge", "-p", payload]
    return " ".join(shlex.quote(part) for part in command)


class _PlainDumper(yaml.SafeDumper):
    """Writes repeated values out in full: a patch body must not use YAML anchors and aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def plan_patch(obj: Mapping[str, Any], mutate: Callable[[KubeObject], None]) -> PatchPlan | None:
    """Apply ``mutate`` to a copy of ``obj`` and describe the change as a merge patch (None: no change)."""
    current = {key: copy.deepcopy(value) for key, value in obj.items() if key not in ("status",)}
    changed = copy.deepcopy(current)
    mutate(changed)
    body = merge_diff(current, changed)
    if not body:
        return None
    rollback = merge_diff(changed, current)
    return PatchPlan(
        Patch(kube.ref(obj), yaml.dump(body, Dumper=_PlainDumper, sort_keys=False, default_flow_style=False)),
        kubectl_patch(obj, body),
        kubectl_patch(obj, rollback),
    )
