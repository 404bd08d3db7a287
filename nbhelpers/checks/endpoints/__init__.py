"""Step 1, ``endpoints``: does the serving path have ready endpoints, and does the routing layer match
how the InferenceService is deployed?

What "the serving path" is depends on the mode (docs/upstream-facts.md):

- Serverless (Knative): ``<isvc>-predictor`` is an ExternalName Service with no endpoints by design;
  the pods sit behind ``<revision>-private`` for each revision that receives traffic. A revision
  scaled to zero with min-scale 0 has no pods and the activator answers for it: not an error.
  KServe adds an Istio VirtualService ``<isvc>`` unless ``disableIstioVirtualHost`` is set.
- RawDeployment (Standard): the Service ``<isvc>-predictor`` selects the pods directly; KServe adds
  an Ingress ``<isvc>``, or HTTPRoutes when the Gateway API is enabled, unless ingress creation is
  disabled.
- LLMInferenceService (llm-d): Gateway → HTTPRoute → InferencePool → endpoint picker → pods (``_llmisvc``).

Findings tell "no ready pods" (the cause is in the pods: probes, ports, resources) apart from
"routing broken" (pods are fine, the path to them is not).
"""

from __future__ import annotations

from nbhelpers.checks.endpoints._llmisvc import llmisvc_path
from nbhelpers.checks.endpoints._raw import raw_path
from nbhelpers.checks.endpoints._routing import routing
from nbhelpers.checks.endpoints._serverless import serverless_path
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.findings.steps import StepInfo
from nbhelpers.sources import kube

STEP = StepInfo(
    "endpoints",
    "Endpoints and routing",
    "Does the serving path have ready endpoints, and does the routing layer match the deployment mode?",
)
ISVC_CONDITIONS = ("Ready", "PredictorReady", "IngressReady")


def run(evidence: Evidence) -> list[Finding]:
    if evidence.target.is_llmisvc:
        return llmisvc_path(evidence)
    common.skip_modelmesh(evidence)
    mode = common.effective_mode(evidence)
    findings = serverless_path(evidence) if mode == common.SERVERLESS else raw_path(evidence)
    findings += routing(evidence, mode)
    not_ready = _isvc_not_ready(evidence, findings)
    return ([not_ready] if not_ready else []) + findings


def _isvc_not_ready(evidence: Evidence, others: list[Finding]) -> Finding | None:
    isvc = evidence.isvc
    failing = [
        entry
        for name in ISVC_CONDITIONS
        if (entry := kube.condition(isvc, name)) is not None and str(entry.get("status")) != "True"
    ]
    conditions = kube.conditions(isvc)
    if conditions and not failing:
        return None
    found = sorted({finding.code for finding in others})
    if failing:
        first = failing[0]
        title = f"InferenceService not ready: {first.get('type')}={first.get('status')}" + (
            f" ({first['reason']})" if first.get("reason") else ""
        )
        what = "KServe reports " + "; ".join(kube.describe_condition(entry) for entry in failing) + "."
    else:
        title = "InferenceService has no status conditions"
        what = "The InferenceService has no status conditions: the KServe controller has not reconciled it."
    why = " Clients get 503 (or no answer) until it turns ready; this is usually an effect of a cause found below."
    if found:
        why += f" This step also found: {', '.join(found)}."
    stale = failing and _serving_anyway(evidence, others)
    if stale:
        why = (
            " But every revision that carries traffic has ready pods behind its private Service and this step found "
            "nothing wrong on the serving path: the condition copies a stale Knative one (the revision findings say "
            "which) rather than stopping requests."
        )
    lines = [f"InferenceService condition {kube.describe_condition(entry)}" for entry in conditions]
    if kube.status(isvc).get("url"):
        lines.append(f"status.url: {kube.status(isvc)['url']}")
    return Finding(
        code="ISVC_NOT_READY",
        title=title,
        summary=what + why,
        objects=(kube.ref(isvc),),
        evidence=tuple(lines),
        fix=Fix(
            what="Fix the cause the condition names (see the other findings of this run, in root-cause order); "
            f"watch it with: kubectl get inferenceservice {evidence.target.isvc} -n {evidence.target.namespace} -w. "
            "Nothing to roll back: this finding changes nothing by itself."
        ),
        severity=Severity.INFO if stale else None,
    )


def _serving_anyway(evidence: Evidence, others: list[Finding]) -> bool:
    """Serverless, every revision that carries traffic has ready addresses behind ``<revision>-private``, and the
    step's other findings are at most info: KServe's conditions say not ready while the pods serve (a Knative
    condition that stays False after recovery, knative/serving#15487, copied up by KServe's PropagateStatus)."""
    if common.effective_mode(evidence) != common.SERVERLESS or any(f.level is not Severity.INFO for f in others):
        return False
    revisions = [name for name, percent in common.traffic_revisions(evidence) if percent]
    return bool(revisions) and all(common.service_addresses(evidence, f"{name}-private").ready for name in revisions)
