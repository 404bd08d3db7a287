"""Step 6, ``metric_pipeline``: can the autoscaler read its metric at all?

The chain an HPA's metric travels (docs/contracts.md#the-nine-steps, docs/upstream-facts.md):

- the HPA controller asks an aggregated API for it: ``metrics.k8s.io`` (Resource and
  ContainerResource metrics), ``custom.metrics.k8s.io`` (Pods, Object) or
  ``external.metrics.k8s.io`` (External; every KEDA trigger but cpu/memory);
- the kube-aggregator routes the API to the Service its ``APIService`` names and reports an
  ``Available`` condition (``MissingEndpoints``, ``ServiceNotFound``, ``FailedDiscoveryCheck``);
- the provider behind it (metrics-server, prometheus-adapter, KEDA's metrics server) answers; the
  adapter turns the metric name back into a Prometheus series through its rules, and finds the
  pods' values through the series' namespace and pod labels;
- a KEDA ScaledObject's prometheus trigger skips the adapter: KEDA's metrics server runs the trigger's own
  query, and an empty answer reads as 0 (``_keda``);
- when any link fails the HPA sets ``ScalingActive=False`` with ``FailedGet<Source>Metric`` (the
  reason names the metric source; kubernetes ``pkg/controller/podautoscaler/horizontal.go``), emits
  the same reason as an event, and keeps the replica count where it is.

Knative's KPA reads queue-proxy's statistics directly, without a metrics API: a service scaled only
by the KPA skips this step. An HPA held at minReplicas (``ScalingLimited=True``, ``TooFewReplicas``)
or by its scale-down stabilization is working, and is not reported.
"""

from __future__ import annotations

from collections.abc import Sequence

from nbhelpers.checks.metric_pipeline._api import conflicts, unavailable
from nbhelpers.checks.metric_pipeline._fetch import fetch_failures
from nbhelpers.checks.metric_pipeline._keda import trigger_findings
from nbhelpers.checks.metric_pipeline._pipeline import MetricPipeline
from nbhelpers.checks.metric_pipeline._series import series_findings
from nbhelpers.errors import EvidenceMissing, StepSkipped
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import autoscalers, common, metrics_apis
from nbhelpers.facts.autoscalers import Autoscaler
from nbhelpers.findings.model import Finding
from nbhelpers.findings.steps import StepInfo
from nbhelpers.sources import kinds

STEP = StepInfo(
    "metric_pipeline",
    "Metric pipeline",
    "Can the autoscaler read its metric at all?",
)


def run(evidence: Evidence) -> list[Finding]:
    common.skip_modelmesh(evidence)
    common.require_read(evidence, f"{kinds.HPA.key} ")
    scalers = autoscalers.resolve(evidence)
    readers = tuple(a for a in scalers if a.kind != autoscalers.POD_AUTOSCALER and a.apis())
    if not readers:
        scaled_objects = evidence.failure(kinds.SCALED_OBJECT.key)
        if scaled_objects is not None and scaled_objects.lost:
            raise EvidenceMissing(scaled_objects.what, f"{scaled_objects.status}: {scaled_objects.reason}")
        raise StepSkipped(_nothing_reads_an_api(scalers, evidence.target.is_llmisvc))
    needed = tuple(dict.fromkeys(api for reader in readers for api in reader.apis()))
    pipeline = MetricPipeline(evidence, readers, metrics_apis.api_states(evidence, needed))
    findings: list[Finding] = []
    for api in needed:
        finding = unavailable(pipeline, api)
        if finding is not None:
            findings.append(finding)
    findings.extend(conflicts(pipeline, metrics_apis.providers(evidence)))
    findings.extend(fetch_failures(pipeline))
    findings.extend(series_findings(pipeline))
    findings.extend(trigger_findings(pipeline))
    return findings


def _nothing_reads_an_api(scalers: Sequence[Autoscaler], llmisvc: bool) -> str:
    knative = [a for a in scalers if a.klass == "kpa"]
    if knative:
        names = ", ".join(a.ref for a in knative)
        return (
            f"only Knative's KPA scales the predictor ({names}): it reads the concurrency and request rates "
            "that queue-proxy reports to the Knative autoscaler (Knative's own metric pipeline), not a metrics API"
        )
    if scalers:
        return "no autoscaler on the predictor reads a metrics API"
    if llmisvc:  # KServe renders an autoscaler only from spec.scaling (llmisvc/scaling.go, docs/upstream-facts.md)
        return "no HPA or ScaledObject acts on the vLLM workload: the LLMInferenceService sets no spec.scaling"
    return "no HPA or ScaledObject acts on the predictor (the scale_target step judges whether one is expected)"
