"""``PROBE_READINESS_MISSING``: no readiness probe on the serving container."""

from __future__ import annotations

from nbhelpers.checks.probes._facts import ProbeFacts
from nbhelpers.checks.probes._patches import new_probe, no_patch_reason, set_probe_plan
from nbhelpers.checks.probes._probe import Probe
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.models.load_time import READINESS, STARTUP


def readiness_missing(facts: ProbeFacts) -> Finding | None:
    if any(probe.kind == READINESS for probe in facts.probes):
        return None
    startup = next((probe for probe in facts.probes if probe.kind == STARTUP), None)
    summary = (
        f"Container {facts.container_name} ({facts.workload.ref}) has no readiness probe: the pod counts as ready "
        "as soon as its containers run, so the Service sends requests to a server that is still loading the "
        "model (connection refused, 502/503), and keeps sending them to an engine that stopped answering."
    )
    if not facts.serverless:
        summary += (
            " Recent KServe versions give kserve-container a TCP readiness probe in RawDeployment when it "
            "declares none; this pod has none, so it was created by an older KServe or the probe was removed."
        )
    if startup is not None and facts.problem(startup) is None:
        summary += (
            " The startupProbe holds traffic back during the first load, but once it has passed nothing takes "
            "the pod out of rotation."
        )
    severity = None
    raised = facts.user_facing()
    if raised is not None:
        severity = Severity.CRITICAL
        summary += f" Raised to critical: {raised[0]}, and the window shows {raised[1]}."
    probe = new_probe(facts, READINESS, {"periodSeconds": 10, "failureThreshold": 3})
    plan = set_probe_plan(facts, READINESS, probe) if probe is not None else None
    what = (
        f"Add a readinessProbe that asks the server: {Probe(READINESS, probe, 'kubelet').target()}, every 10 s."
        if probe is not None
        else "Add a readinessProbe on an endpoint that answers only once the model serves."
    )
    return Finding(
        code="PROBE_READINESS_MISSING",
        title=f"no readiness probe on {facts.container_name}",
        summary=summary,
        objects=(facts.isvc_ref, facts.workload.ref),
        evidence=tuple(facts.probe_lines()),
        fix=Fix.from_plan(what, plan, no_patch=no_patch_reason(facts)),
        severity=severity,
    )
