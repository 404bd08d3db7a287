"""``PROBE_NOT_MODEL_AWARE``: a probe that passes while the engine cannot answer, or fails while it can."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from nbhelpers.checks.probes._facts import ProbeFacts
from nbhelpers.checks.probes._patches import new_probe, no_patch_reason, set_probe_plan
from nbhelpers.checks.probes._probe import HANDLERS, QUEUE_PROXY, Probe
from nbhelpers.facts import common
from nbhelpers.findings import patches
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.models.load_time import LIVENESS, READINESS, STARTUP
from nbhelpers.sources import kinds, kube


def not_model_aware(facts: ProbeFacts) -> list[Finding]:
    findings = []
    for probe in facts.probes:
        problem = facts.problem(probe)
        if problem is not None:
            findings.append(_not_model_aware_finding(facts, probe, problem))
    return findings


def _not_model_aware_finding(facts: ProbeFacts, probe: Probe, problem: str) -> Finding:
    consequence = {
        READINESS: "the pod can be Ready, and get requests, while vLLM cannot answer them",
        LIVENESS: "the kubelet either restarts a healthy server or keeps a dead one",
        STARTUP: "the startup window ends on a signal that has nothing to do with the model load",
    }[probe.kind]
    summary = f"The {probe.kind} of {facts.container_name} (run by {probe.run_by}) {problem}; {consequence}."
    severity = None
    raised = facts.user_facing() if probe.kind == READINESS else None
    if raised is not None:
        severity = Severity.CRITICAL
        summary += f" Raised to critical: {raised[0]}, and the window shows {raised[1]}."
    replacement = _model_aware_probe(facts, probe)
    plan = replace_probe_plan(facts, probe.kind, replacement) if replacement is not None else None
    if replacement is not None:
        what = f"Let the {probe.kind} ask the server itself: {Probe(probe.kind, replacement, 'kubelet').target()}."
    else:
        what = f"Point the {probe.kind} at an endpoint of the model server that answers only once the model serves."
    evidence = [*facts.probe_lines(), f"server: {facts.server.server}, listening port {facts.server.port}"]
    return Finding(
        code="PROBE_NOT_MODEL_AWARE",
        title=f"{probe.kind} {probe.target()} does not test the engine",
        summary=summary,
        objects=(facts.isvc_ref, facts.workload.ref),
        evidence=tuple(evidence),
        fix=Fix.from_plan(what, plan, no_patch=no_patch_reason(facts)),
        severity=severity,
    )


def _model_aware_probe(facts: ProbeFacts, probe: Probe) -> dict[str, Any] | None:
    """The probe with its handler replaced by an HTTP check of the server (timings kept)."""
    timings = {key: value for key, value in probe.spec.items() if key not in HANDLERS}
    if probe.run_by == QUEUE_PROXY:
        timings = {key: value for key, value in timings.items() if key in ("periodSeconds", "failureThreshold")}
    return new_probe(facts, probe.kind, timings)


def replace_probe_plan(facts: ProbeFacts, kind: str, probe: Mapping[str, Any]) -> patches.PatchPlan | None:
    """Replace a probe's handler where it is declared: KServe's field-by-field merge cannot drop the
    runtime's handler from the InferenceService, so a runtime's probe is changed in the runtime."""
    if _declared_by(facts, kind) != "runtime":
        return set_probe_plan(facts, kind, probe)
    runtime = _runtime(facts)
    assert runtime is not None

    serving_name = str((common.serving_container(kube.spec(runtime)) or {}).get("name"))

    def mutate(obj: common.KubeObject) -> None:
        for container in obj["spec"]["containers"]:
            if container.get("name") == serving_name:
                container[kind] = dict(probe)

    return patches.plan_patch(runtime, mutate)


def _declared_by(facts: ProbeFacts, kind: str) -> str | None:
    """Where the probe of ``kind`` comes from: "isvc", "runtime" or None (declared nowhere we can see)."""
    located = common.isvc_serving_container(facts.evidence.isvc)
    if located is None:
        return None
    _, accessor = located
    if kind in accessor.get(_copy(facts.evidence.isvc)):
        return "isvc"
    runtime = _runtime(facts)
    if not accessor.is_custom_container and runtime is not None:
        container = common.serving_container(kube.spec(runtime))
        if container is not None and kind in container:
            return "runtime"
    return None


def _runtime(facts: ProbeFacts) -> common.KubeObject | None:
    predictor = kube.spec(facts.evidence.isvc).get("predictor") or {}
    name = (predictor.get("model") or {}).get("runtime")
    if not name:
        return None
    return common.named(facts.evidence, kinds.SERVING_RUNTIME, str(name)) or next(
        (r for r in facts.evidence.of(kinds.CLUSTER_SERVING_RUNTIME) if kube.name(r) == name), None
    )


def _copy(obj: Mapping[str, Any]) -> common.KubeObject:
    return json.loads(json.dumps(obj))  # type: ignore[no-any-return]
