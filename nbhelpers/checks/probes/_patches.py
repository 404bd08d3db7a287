"""Probes to recommend and the patches that set them on the InferenceService's serving container."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nbhelpers.checks.probes._facts import ProbeFacts
from nbhelpers.facts import common, vllm_args
from nbhelpers.findings import patches
from nbhelpers.models.load_time import LIVENESS, READINESS, STARTUP

PROGRESS_DEADLINE_ANNOTATION = "serving.knative.dev/progress-deadline"
# The path a recommended probe asks, per server and probe kind.
_DEFAULT_PATHS: dict[str, dict[str, str]] = {
    vllm_args.VLLM: {READINESS: "/health", LIVENESS: "/health", STARTUP: "/health"},
    vllm_args.HUGGINGFACESERVER: {
        READINESS: "/v2/health/ready",
        LIVENESS: "/v2/health/live",
        STARTUP: "/v2/health/ready",
    },
}


def new_probe(facts: ProbeFacts, kind: str, timings: Mapping[str, Any]) -> dict[str, Any] | None:
    paths = _DEFAULT_PATHS.get(facts.server.server)
    if paths is None or facts.server.port is None:
        return None
    return {"httpGet": {"path": paths[kind], "port": facts.server.port}, **timings}


def no_patch_reason(facts: ProbeFacts) -> str:
    if facts.server.port is None or facts.server.server not in _DEFAULT_PATHS:
        return "(No patch: the server or its listening port cannot be told from the spec.)"
    return common.no_owner_patch(facts.evidence)


def set_probe_plan(
    facts: ProbeFacts, kind: str, probe: Mapping[str, Any], timing_only: bool = False, annotation: int | None = None
) -> patches.PatchPlan | None:
    """Set ``kind`` on the InferenceService's container (KServe merges it field by field into the runtime's)."""
    located = common.isvc_serving_container(facts.evidence.isvc)
    if located is None:
        return None
    _, accessor = located

    def mutate(isvc: common.KubeObject) -> None:
        container = accessor.get(isvc)
        if timing_only and isinstance(container.get(kind), dict):
            container[kind].update(probe)
        elif timing_only and accessor.is_custom_container:
            container[kind] = {**dict(facts.workload.serving.get(kind) or {}), **probe}
        else:
            container[kind] = dict(probe)
        if annotation is not None:
            annotations = isvc.setdefault("metadata", {}).setdefault("annotations", {})
            annotations[PROGRESS_DEADLINE_ANNOTATION] = f"{annotation}s"

    return patches.plan_patch(facts.evidence.isvc, mutate)
