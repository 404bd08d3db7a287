"""Step 7, ``scale_target``: does the autoscaler scale the workload that serves traffic, on a signal that fits
an LLM?

Autoscalers come from :func:`nbhelpers.facts.autoscalers.resolve`. One *unit* is one decision maker: a plain HPA,
a KEDA ScaledObject together with the HPA KEDA generates for it (``keda-hpa-<name>``), or a Knative
PodAutoscaler together with the HPA it delegates to (class ``hpa.autoscaling.knative.dev``). Two units on one
workload fight; a ScaledObject and its own HPA do not.

Facts relied on (verified against the sources cited):

- KServe picks the autoscaler from ``serving.kserve.io/autoscalerClass``; absent means ``hpa``. Classes hpa,
  external and none go through the HPA reconciler, which creates ``<isvc>-predictor`` (scaleTargetRef the
  Deployment of the same name) only for hpa, and deletes its own HPA for external and none; keda makes a
  ScaledObject ``<isvc>-predictor``; any other class is an error, so nothing is created (kserve/kserve
  pkg/controller/v1beta1/inferenceservice/reconcilers/autoscaler/autoscaler_reconciler.go, hpa/hpa_reconciler.go,
  keda/keda_reconciler.go). KServe's HPA only takes cpu or memory metrics, and writes an empty ``behavior``
  that its reconcile restores, so a direct edit of that HPA is reverted (``_reverted``).
- HPA behavior defaults (kubernetes/kubernetes pkg/apis/autoscaling/v2/defaults.go): scale-up no
  stabilization, max(4 pods, 100 %) per 15 s; scale-down 100 % per 15 s with the controller's
  ``--horizontal-pod-autoscaler-downscale-stabilization`` window, 5 minutes by default.
- The KPA aims at ``total x utilization`` concurrent requests per pod, where total is the
  ``autoscaling.knative.dev/target`` annotation (capped by containerConcurrency when both are set), else
  containerConcurrency, else ``container-concurrency-target-default`` (100); utilization is the
  ``target-utilization-percentage`` annotation, else ``container-concurrency-target-percentage`` (0.7; values
  above 1 are percentages) (knative/serving pkg/reconciler/autoscaling/resources/target.go,
  pkg/autoscaler/config/config.go). The default is therefore 70 requests per pod.
"""

from __future__ import annotations

from nbhelpers.checks.scale_target._at_max import at_max
from nbhelpers.checks.scale_target._behavior import slow_behavior
from nbhelpers.checks.scale_target._conflict import conflicts
from nbhelpers.checks.scale_target._facts import ScaleTargetFacts
from nbhelpers.checks.scale_target._missing import hpa_missing
from nbhelpers.checks.scale_target._reverted import reverted
from nbhelpers.checks.scale_target._signal import resource_metrics_on_gpu, targets_above_capacity
from nbhelpers.checks.scale_target._targets import wrong_targets
from nbhelpers.errors import EvidenceMissing
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common
from nbhelpers.findings.model import Finding
from nbhelpers.findings.steps import StepInfo
from nbhelpers.sources import kinds

STEP = StepInfo(
    "scale_target",
    "Scale target",
    "Does the autoscaler scale the workload that serves traffic, on a signal that fits an LLM?",
)


def run(evidence: Evidence) -> list[Finding]:
    common.skip_modelmesh(evidence)
    common.require_read(evidence, kinds.HPA.key + " ")
    for kind in (kinds.SCALED_OBJECT, kinds.POD_AUTOSCALER):
        failure = evidence.failure(kind.key + " ")
        if failure is not None and failure.lost:
            raise EvidenceMissing(failure.what, f"{failure.status}: {failure.reason}")
    facts = ScaleTargetFacts(evidence)
    findings = hpa_missing(facts)
    findings += wrong_targets(facts)
    findings += conflicts(facts)
    fights = reverted(facts)
    findings += fights
    findings += resource_metrics_on_gpu(facts)
    findings += targets_above_capacity(facts)
    findings += at_max(facts)
    # The behavior of an HPA whose edits KServe reverts is not the one that will scale the service.
    edited = {finding.objects[0] for finding in fights}
    findings += [finding for finding in slow_behavior(facts) if not edited.intersection(finding.objects)]
    return findings
