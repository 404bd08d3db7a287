"""Step 2, ``probes``: do the probes fit the model's load time, and do they test the engine?

Probe budgets and load times come from :mod:`nbhelpers.models.load_time`. Decisions this step rests on:

- **Which probe can kill a load.** Only a startupProbe or a livenessProbe restarts a container. A
  startupProbe holds liveness and readiness back until it succeeds, so it is the gating probe when
  present; otherwise the livenessProbe is. A failing readiness probe keeps the pod out of rotation,
  which is exactly what it should do while the model loads: readiness budgets are reported but never
  called short.
- **Serverless.** Knative hands the readiness probe to queue-proxy (``SERVING_READINESS_PROBE``) and
  declares a TCP probe on the user port when the service declares none; liveness and startup probes
  stay with the kubelet. Knative's default TCP probe counts as a readiness probe: vLLM opens its port
  only after the engine has loaded (docs/upstream-facts.md), so the probe holds traffic back during the load. The
  KServe agent (port 9081) relays the readiness probe to the server, so a queue-proxy probe on the
  agent's port is by design.
- **Model-aware.** A probe that passes while vLLM loads, or that cannot pass on a healthy engine,
  belongs to another process: a sidecar's port, a command that never talks to the server, a path the
  server does not serve, gRPC against an HTTP-only server. A probe on a port nobody listens on is a
  ``PORT_MISMATCH`` (ports step), not repeated here.
- **Killed during the load.** A restart counts when the kubelet's kill events (``failed liveness
  probe``) or a SIGKILL/SIGTERM exit come with a run that never served: its own log ends before
  ``Application startup complete.``, or it ended within the probe's budget.
- **Sidecars.** A pod is Ready only when every container is: a KServe agent, queue-proxy or istio-proxy that
  stays unready after the engine is shown serving keeps the pod out of rotation (``PROBE_SIDECAR_NOT_READY``).
- **Failing under load.** Probe timeouts that come after the run served, with requests running, are a busy
  engine answering ``/health`` slowly (``PROBE_FAILS_UNDER_LOAD``), fixed with timeouts, not a startup budget.
- **Severity.** ``PROBE_READINESS_MISSING`` and ``PROBE_NOT_MODEL_AWARE`` are raised to critical only
  when a pod turned Ready before its server served and the edge saw 5xx in the window (docs/contracts.md#findingsjson-v1).
"""

from __future__ import annotations

from dataclasses import replace

from nbhelpers.checks.probes._budget import budget_findings
from nbhelpers.checks.probes._facts import ProbeFacts
from nbhelpers.checks.probes._not_model_aware import not_model_aware
from nbhelpers.checks.probes._readiness import readiness_missing
from nbhelpers.checks.probes._sidecars import sidecar_findings
from nbhelpers.checks.probes._under_load import under_load_findings
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common, presets
from nbhelpers.findings.model import Finding
from nbhelpers.findings.steps import StepInfo

STEP = StepInfo(
    "probes",
    "Probes",
    "Do the probes fit the model's load time, and do they test the engine?",
)


def run(evidence: Evidence) -> list[Finding]:
    common.skip_modelmesh(evidence)
    facts = ProbeFacts(evidence, common.current_workload(evidence))
    findings = not_model_aware(facts)
    missing = readiness_missing(facts)
    if missing is not None:
        findings.append(missing)
    findings.extend(budget_findings(facts))
    findings.extend(sidecar_findings(facts))
    findings.extend(under_load_findings(facts))
    origin = presets.origin_line(evidence, presets.PROBE_FIELDS)  # an LLMInferenceService's probes may be a preset's
    return [replace(finding, evidence=(*finding.evidence, origin)) for finding in findings] if origin else findings
