"""Fixture cases for the check tests: a healthy base plus a file of changed objects, merge patches,
and the part of KServe's reconcile that carries an InferenceService change into its pods.

A failing case is ``healthy/<base>.yaml`` followed by ``<CODE>/<case>.yaml``: an object of the second
file replaces the object with the same reference in the first, and ``drop`` removes objects.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

import patchcheck
from builders import evidence_from_objects, load_yaml

from nbhelpers.evidence.model import Evidence
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding
from nbhelpers.sources import kube

KubeObject = dict[str, Any]
NAMESPACE = "llm"
ISVC = "vllm-llm"


def load_case(*names: str, drop: Iterable[str] = ()) -> list[KubeObject]:
    """Objects of the fixture files; later files replace objects with the same reference."""
    dropped = set(drop)
    merged: dict[str, KubeObject] = {}
    for obj in load_yaml(*names):
        merged[kube.ref(obj)] = obj
    return [obj for ref, obj in merged.items() if ref not in dropped]


def evidence_of(objects: list[KubeObject], **options: Any) -> Evidence:
    return evidence_from_objects(copy.deepcopy(objects), NAMESPACE, ISVC, **options)


def serious(findings: Iterable[Finding]) -> list[Finding]:
    return [finding for finding in findings if finding.level is not Severity.INFO]


def codes(findings: Iterable[Finding]) -> set[str]:
    return {finding.code for finding in findings}


def only(findings: Iterable[Finding], code: str) -> Finding:
    matching = [finding for finding in findings if finding.code == code]
    assert len(matching) == 1, f"expected one {code}, got {[f.code for f in findings]}"
    return matching[0]


def json_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386, written out independently of the code under test."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = json_merge_patch(result.get(key), value)
    return result


def apply_patch(objects: list[KubeObject], finding: Finding) -> list[KubeObject]:
    """The objects with the finding's patch merged into its target, after checking the patch is valid
    for the target's kind (:func:`assert_valid_patch`)."""
    patched_target = assert_valid_patch(finding, objects)
    assert finding.patch is not None
    return [patched_target if kube.ref(obj) == finding.patch.target else obj for obj in objects]


def assert_valid_patch(finding: Finding, objects: list[KubeObject]) -> KubeObject:
    """The finding's patch target after the patch, checked against docs/contracts.md#findingsjson-v1: a ``merge`` patch whose YAML
    body, merged (RFC 7386) into an object the user owns, leaves an object its kind's schema accepts."""
    assert finding.patch is not None, f"{finding.code} carries no patch"
    body = patchcheck.merge_patch_body(finding.patch.type, finding.patch.body)
    target = next((obj for obj in objects if kube.ref(obj) == finding.patch.target), None)
    assert target is not None, f"{finding.code} patch target {finding.patch.target} is not in the fixture"
    patchcheck.assert_user_owned(target)
    patched: KubeObject = json_merge_patch(target, body)
    patchcheck.assert_valid_object(patched, f"{finding.patch.target} after the {finding.code} patch")
    return patched


def _merge_container(base: Mapping[str, Any], override: Mapping[str, Any]) -> KubeObject:
    """KServe's merge of a ServingRuntime container with the predictor's fields: maps merged field by
    field (strategic merge), lists replaced, and args concatenated (runtime's first)."""
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if key == "args":
            merged["args"] = [*base.get("args", []), *value]
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge_container(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def rollout(objects: list[KubeObject]) -> list[KubeObject]:
    """Rebuild the predictor pods' serving container from the InferenceService, as a new rollout would (its new
    pods' serving container has just started: no restart, no earlier run)."""
    isvc = next(obj for obj in objects if obj.get("kind") == "InferenceService")
    predictor = isvc["spec"]["predictor"]
    if predictor.get("containers"):
        wanted = copy.deepcopy(predictor["containers"][0])
    else:
        runtime = next(
            obj
            for obj in objects
            if obj.get("kind") == "ServingRuntime" and kube.name(obj) == predictor["model"]["runtime"]
        )
        model = {k: v for k, v in predictor["model"].items() if k not in ("modelFormat", "runtime", "storageUri")}
        wanted = _merge_container(runtime["spec"]["containers"][0], model)
    result = []
    for obj in objects:
        if obj.get("kind") == "Pod" and kube.is_predictor(obj):
            obj = copy.deepcopy(obj)
            containers = obj["spec"]["containers"]
            index = next(i for i, c in enumerate(containers) if c["name"] == "kserve-container")
            live = containers[index]
            rebuilt = {**wanted, "name": "kserve-container"}
            # The pod keeps what Knative adds to the container (the PORT variable, its port name).
            for key in ("env", "ports"):
                if key in live and key not in wanted:
                    rebuilt[key] = live[key]
            containers[index] = rebuilt
            _fresh_start(obj, "kserve-container")
            if predictor.get("volumes"):
                # Predictor-level volumes join the pod's, replacing those of the same name.
                declared = {volume["name"] for volume in predictor["volumes"]}
                kept = [v for v in obj["spec"].get("volumes") or [] if v["name"] not in declared]
                obj["spec"]["volumes"] = [*kept, *copy.deepcopy(predictor["volumes"])]
        result.append(obj)
    return result


def _fresh_start(pod: KubeObject, container: str) -> None:
    """The container as the kubelet reports it in a new pod: running since its start, never restarted."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == container:
            started = (status.get("state") or {}).get("running", {}).get("startedAt") or pod["metadata"].get(
                "creationTimestamp"
            )
            status.pop("lastState", None)
            status["restartCount"] = 0
            status["state"] = {"running": {"startedAt": started}}
