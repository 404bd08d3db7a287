"""Step 6, ``metric_pipeline``: can the autoscaler read its metric at all?

The chain an HPA's metric travels (DESIGN §2, §6):

- the HPA controller asks an aggregated API for it: ``metrics.k8s.io`` (Resource and
  ContainerResource metrics), ``custom.metrics.k8s.io`` (Pods, Object) or
  ``external.metrics.k8s.io`` (External; every KEDA trigger but cpu/memory);
- the kube-aggregator routes the API to the Service its ``APIService`` names and reports an
  ``Available`` condition (``MissingEndpoints``, ``ServiceNotFound``, ``FailedDiscoveryCheck``);
- the provider behind it (metrics-server, prometheus-adapter, KEDA's metrics server) answers; the
  adapter turns the metric name back into a Prometheus series through its rules, and finds the
  pods' values through the series' namespace and pod labels;
- when any link fails the HPA sets ``ScalingActive=False`` with ``FailedGet<Source>Metric`` (the
  reason names the metric source; kubernetes ``pkg/controller/podautoscaler/horizontal.go``), emits
  the same reason as an event, and keeps the replica count where it is.

Knative's KPA reads queue-proxy's statistics directly, without a metrics API: a service scaled only
by the KPA skips this step. An HPA held at minReplicas (``ScalingLimited=True``, ``TooFewReplicas``)
or by its scale-down stabilization is working, and is not reported.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nbhelpers.errors import EvidenceMissing, StepSkipped
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import adapter_rules, autoscalers, common, metrics_apis
from nbhelpers.facts.autoscalers import Autoscaler, Metric
from nbhelpers.findings import patches
from nbhelpers.findings.model import Finding, Fix, Severity
from nbhelpers.findings.steps import StepInfo
from nbhelpers.metrics import catalog
from nbhelpers.sources import kinds, kube
from nbhelpers.sources.kube import event_interval
from nbhelpers.util.times import format_time

STEP = StepInfo(
    "metric_pipeline",
    "Metric pipeline",
    "Can the autoscaler read its metric at all?",
)

# ScalingActive=False reasons (and HPA event reasons) that mean the metric could not be read.
FETCH_REASONS = frozenset(
    {
        "FailedGetResourceMetric",
        "FailedGetContainerResourceMetric",
        "FailedGetPodsMetric",
        "FailedGetObjectMetric",
        "FailedGetExternalMetric",
        "InvalidMetricSourceType",
    }
)
# The controller's summary event for a sync whose metrics all failed.
FETCH_EVENT_REASONS = FETCH_REASONS | {"FailedComputeMetricsReplicas"}
# Warning events KEDA's operator writes on a ScaledObject whose scaler cannot be queried.
KEDA_FAILURE_EVENTS = frozenset({"KEDAScalerFailed", "KEDAMetricSourceFailed", "ScaledObjectCheckFailed"})
# Fewer failed syncs than this, with the condition healthy now, is the usual start-up blip (a new pod
# or HPA before the first scrape), not a blind autoscaler.
TRANSIENT_FAILURES = 3
_FORBIDDEN = re.compile(r"forbidden|unauthorized|cannot (?:get|list|watch) resource", re.IGNORECASE)
_RBAC_USER = re.compile(r'User "([^"]+)"')
_SERIES_IN_TEMPLATE = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)\{")
_HPA_CONTROLLER = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"

_HOW_TO_PROVIDE = {
    autoscalers.RESOURCE_METRICS_API: "install metrics-server (it registers v1beta1.metrics.k8s.io)",
    autoscalers.CUSTOM_METRICS_API: "install a custom metrics adapter, e.g. prometheus-adapter with a rule that "
    "exposes the metric for pods",
    autoscalers.EXTERNAL_METRICS_API: "install KEDA (its metrics server registers v1beta1.external.metrics.k8s.io) "
    "or prometheus-adapter with externalRules",
}
_AVAILABILITY_HINTS = {
    "MissingEndpoints": "the Service has no ready endpoint: the provider's pods are down or not ready",
    "ServiceNotFound": "the Service the APIService names does not exist (deleted, or the provider was "
    "uninstalled without its APIService)",
    "FailedDiscoveryCheck": "the API server could not get a good discovery answer from the provider: the "
    "provider fails, its TLS is refused, or the control plane cannot reach the pod's port (on managed "
    "clusters a firewall rule or security group from the control plane to the port is the usual cause)",
}


def run(evidence: Evidence) -> list[Finding]:
    common.skip_modelmesh(evidence)
    common.require_read(evidence, f"{kinds.HPA.key} ")
    scalers = autoscalers.resolve(evidence)
    readers = tuple(a for a in scalers if a.kind != autoscalers.POD_AUTOSCALER and a.apis())
    if not readers:
        scaled_objects = evidence.failure(kinds.SCALED_OBJECT.key)
        if scaled_objects is not None and scaled_objects.lost:
            raise EvidenceMissing(scaled_objects.what, f"{scaled_objects.status}: {scaled_objects.reason}")
        raise StepSkipped(_nothing_reads_an_api(scalers))
    needed = tuple(dict.fromkeys(api for reader in readers for api in reader.apis()))
    pipeline = _Pipeline(evidence, readers, metrics_apis.api_states(evidence, needed))
    findings: list[Finding] = []
    for api in needed:
        unavailable = pipeline.unavailable(api)
        if unavailable is not None:
            findings.append(unavailable)
    findings.extend(pipeline.conflicts(metrics_apis.providers(evidence)))
    findings.extend(pipeline.fetch_failures())
    findings.extend(pipeline.series_findings())
    return findings


def _nothing_reads_an_api(scalers: Sequence[Autoscaler]) -> str:
    knative = [a for a in scalers if a.klass == "kpa"]
    if knative:
        names = ", ".join(a.ref for a in knative)
        return (
            f"only Knative's KPA scales the predictor ({names}): it reads the concurrency and request rates "
            "that queue-proxy reports to the Knative autoscaler (Knative's own metric pipeline), not a metrics API"
        )
    if scalers:
        return "no autoscaler on the predictor reads a metrics API"
    return "no HPA or ScaledObject acts on the predictor (the scale_target step judges whether one is expected)"


@dataclass(frozen=True)
class _Consumer:
    """One autoscaler metric that reads a given API."""

    autoscaler: Autoscaler
    metric: Metric

    def describe(self) -> str:
        return f"{self.autoscaler.ref} reads {self.metric.describe()} through {self.metric.api}"


@dataclass
class _Family:
    """The failures of one metric path: a ScaledObject and the HPA KEDA generated for it count as one."""

    head: Autoscaler
    members: list[Autoscaler] = field(default_factory=list)
    current: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    context: list[str] = field(default_factory=list)
    failed_syncs: int = 0

    @property
    def failing(self) -> bool:
        return bool(self.current) or self.failed_syncs >= TRANSIENT_FAILURES


class _Pipeline:
    def __init__(self, evidence: Evidence, readers: tuple[Autoscaler, ...], states: dict[str, metrics_apis.ApiState]):
        self.evidence = evidence
        self.readers = readers
        self.states = states
        self.namespace = evidence.target.namespace
        self.isvc_ref = kube.ref(evidence.isvc)

    def consumers(self, api: str) -> list[_Consumer]:
        return [_Consumer(a, m) for a in self.readers for m in a.metrics if m.api == api]

    # --- APIService present and Available ------------------------------------------------------

    def unavailable(self, api: str) -> Finding | None:
        state = self.states[api]
        consumers = self.consumers(api)
        problem = _availability_problem(state)
        if problem is None:
            return None
        first = consumers[0]
        objects = [state.ref] if state.api_service is not None else []
        objects += [ref for ref in (state.service_ref,) if ref and state.service is not None]
        objects += [kube.ref(d) for d in state.deployments]
        objects += [c.autoscaler.ref for c in consumers]
        summary = (
            f"{first.autoscaler.ref} reads {first.metric.describe()} through {api}, but {problem}. "
            "Until the API answers, the HPA cannot compute a replica count (ScalingActive=False) and keeps the "
            "replicas it has: no scale-up however long the queue grows."
        )
        return Finding(
            code="HPA_METRICS_API_UNAVAILABLE",
            title=f"{state.name} is {'not registered' if state.api_service is None else 'not available'}: "
            f"{len({c.autoscaler.ref for c in consumers})} autoscaler(s) cannot read their metric",
            summary=summary,
            objects=tuple(dict.fromkeys(objects)),
            evidence=tuple([*(c.describe() for c in consumers), *state.describe()]),
            fix=Fix(what=_unavailable_remediation(state, consumers, self.namespace)),
        )

    # --- two providers for one API --------------------------------------------------------------

    def conflicts(self, providers: list[metrics_apis.Provider]) -> list[Finding]:
        findings = []
        for api, state in self.states.items():
            if state.api_service is None or state.local or state.provider is None:
                continue
            claimants = sorted({p.kind for p in providers if api in p.claims} | {state.provider})
            if len(claimants) < 2:
                continue
            stranded = [
                (consumer, required)
                for consumer in self.consumers(api)
                for required in (self.required_provider(consumer),)
                if required is not None and required != state.provider and required in claimants
            ]
            if stranded:
                findings.append(self.conflict(state, providers, stranded))
        return findings

    def required_provider(self, consumer: _Consumer) -> str | None:
        """The provider that can serve this metric: KEDA for its own triggers, prometheus-adapter when one of
        its readable configurations exposes the name; ``None`` when the evidence cannot tell."""
        if consumer.autoscaler.klass == "keda":
            return metrics_apis.KEDA if consumer.metric.api == autoscalers.EXTERNAL_METRICS_API else None
        for namespace in self.adapter_namespaces():
            for config in metrics_apis.adapter_configs(self.evidence, namespace):
                for rule in config.rules_for(str(consumer.metric.api)):
                    if _series_for(rule, consumer.metric.name):
                        return metrics_apis.PROMETHEUS_ADAPTER
        return None

    def adapter_namespaces(self) -> list[str]:
        namespaces = {
            kube.namespace(d)
            for d in self.evidence.of(kinds.DEPLOYMENT)
            if metrics_apis.provider_kind(d) == metrics_apis.PROMETHEUS_ADAPTER
        }
        namespaces |= {
            str(s.service_namespace) for s in self.states.values() if s.provider == metrics_apis.PROMETHEUS_ADAPTER
        }
        return sorted(namespaces)

    def conflict(
        self,
        state: metrics_apis.ApiState,
        providers: list[metrics_apis.Provider],
        stranded: list[tuple[_Consumer, str]],
    ) -> Finding:
        claiming = [p for p in providers if state.api in p.claims]
        consumer, required = stranded[0]
        summary = (
            f"{state.api} is claimed by {' and '.join(sorted({p.kind for p in claiming} | {str(state.provider)}))}, "
            f"but an APIService routes an API to one Service only: {state.name} points at {state.service_ref} "
            f"({state.provider}). {consumer.autoscaler.ref} reads {consumer.metric.describe()}, which only "
            f"{required} serves, so its requests reach a provider that does not know the metric. Whichever "
            "provider was installed or upgraded last took the APIService; the next upgrade of the other takes "
            "it back, and the other set of autoscalers goes blind."
        )
        evidence_lines = [
            *(f"{p.kind} claims {state.api}: {p.seen_as}" for p in claiming),
            *state.describe(),
            *(f"{c.describe()} (needs {needed})" for c, needed in stranded),
        ]
        objects = [state.ref, *(ref for ref in (state.service_ref,) if ref)]
        objects += [kube.ref(p.deployment) for p in claiming if p.deployment is not None]
        objects += [c.autoscaler.ref for c, _ in stranded]
        return Finding(
            code="HPA_METRICS_API_CONFLICT",
            title=f"two providers claim {state.api}; {state.name} routes to {state.provider}, not {required}",
            summary=summary,
            objects=tuple(dict.fromkeys(objects)),
            evidence=tuple(evidence_lines),
            fix=Fix(what=_conflict_remediation(state, required, stranded, self.namespace)),
        )

    # --- HPA and ScaledObject conditions and events ----------------------------------------------

    def fetch_failures(self) -> list[Finding]:
        families: dict[str, _Family] = {}
        for reader in self.readers:
            head = self.family_head(reader)
            family = families.setdefault(head.ref, _Family(head))
            family.members.append(reader)
            if reader.kind == autoscalers.HPA:
                self.read_hpa(reader, family)
            else:
                self.read_scaled_object(reader, family)
        return [self.fetch_failure(family) for family in families.values() if family.failing]

    def family_head(self, reader: Autoscaler) -> Autoscaler:
        if reader.kind == autoscalers.HPA and reader.klass == "keda" and reader.owner:
            owner_name = reader.owner.split("/", 1)[1]
            for candidate in self.readers:
                if candidate.kind == autoscalers.SCALED_OBJECT and candidate.name == owner_name:
                    return candidate
        return reader

    def read_hpa(self, hpa: Autoscaler, family: _Family) -> None:
        active = hpa.condition("ScalingActive")
        if active is not None and str(active.get("status")) == "False" and active.get("reason") in FETCH_REASONS:
            family.current.append(f"{hpa.ref}: {kube.describe_condition(active)}")
            family.messages.append(str(active.get("message") or ""))
            family.reasons.append(str(active["reason"]))
            able = hpa.condition("AbleToScale")
            if able is not None and str(able.get("status")) == "False":
                family.context.append(f"{hpa.ref}: {kube.describe_condition(able)}")
        self.read_events(hpa, "HorizontalPodAutoscaler", FETCH_EVENT_REASONS, family)

    def read_scaled_object(self, scaled_object: Autoscaler, family: _Family) -> None:
        ready = scaled_object.condition("Ready")
        if ready is not None and str(ready.get("status")) == "False":
            family.current.append(f"{scaled_object.ref}: {kube.describe_condition(ready)}")
            family.messages.append(str(ready.get("message") or ""))
            family.reasons.append(str(ready.get("reason") or "Ready=False"))
        fallback = scaled_object.condition("Fallback")
        if fallback is not None and str(fallback.get("status")) == "True":
            family.current.append(
                f"{scaled_object.ref}: {kube.describe_condition(fallback)} (a trigger is failing; KEDA holds "
                "the fallback replica count)"
            )
            family.reasons.append(str(fallback.get("reason") or "Fallback"))
        self.read_events(scaled_object, "ScaledObject", KEDA_FAILURE_EVENTS, family)

    def read_events(self, autoscaler: Autoscaler, kind: str, reasons: frozenset[str], family: _Family) -> None:
        for event in self.evidence.events:
            involved = event.get("involvedObject") or event.get("regarding") or {}
            if involved.get("kind") != kind or involved.get("name") != autoscaler.name:
                continue
            reason = str(event.get("reason") or "")
            if reason not in reasons:
                continue
            count = _event_count(event)
            first, last = event_interval(event)
            span = f"{format_time(first)} – {format_time(last)}" if first and last else "time unknown"
            message = str(event.get("message") or event.get("note") or "").strip()
            family.events.append(f"event on {autoscaler.ref}: {reason} x{count} ({span}): {message!r}")
            family.messages.append(message)
            family.failed_syncs += count
            if reason not in family.reasons:
                family.reasons.append(reason)

    def fetch_failure(self, family: _Family) -> Finding:
        head = family.head
        reasons = ", ".join(dict.fromkeys(family.reasons))
        quoted = next((m for m in family.messages if m), "")
        parts = [
            (
                f"{head.ref} cannot read its metric now ({reasons})"
                if family.current
                else f"{head.ref} failed to read its metric {family.failed_syncs} times in the window ({reasons}), "
                "although its conditions show it reading again now"
            )
            + (f": {quoted!r}." if quoted else ".")
        ]
        parts.append(
            "Without the metric the HPA computes no replica count and holds the current one, so load that "
            "should have added replicas queued on the pods instead."
        )
        forbidden = [m for m in family.messages if _FORBIDDEN.search(m)]
        if forbidden:
            user = _RBAC_USER.search(forbidden[0])
            who = f"{user.group(1)!r}" if user else "the caller"
            parts.append(f"The message is an RBAC refusal: {who} is not allowed to read the metrics API.")
        if any("missing request for" in m for m in family.messages):
            parts.append(
                "A container without a request for the resource leaves utilization undefined "
                "(see RESOURCES_REQUESTS_MISSING in the resources step)."
            )
        for api in dict.fromkeys(api for member in family.members for api in member.apis()):
            if _availability_problem(self.states[api]) is not None:
                parts.append(f"{api} itself is down (HPA_METRICS_API_UNAVAILABLE), which explains this.")
        objects = [self.isvc_ref, *(member.ref for member in family.members)]
        return Finding(
            code="HPA_METRIC_FETCH_FAILED",
            title=f"{head.ref} cannot fetch its metric ({reasons})",
            summary=" ".join(parts),
            objects=tuple(dict.fromkeys(objects)),
            evidence=tuple([*family.current, *family.context, *family.events[:10]]),
            fix=Fix(what=self.fetch_remediation(family, forbidden)),
        )

    def fetch_remediation(self, family: _Family, forbidden: list[str]) -> str:
        hpas = [m for m in family.members if m.kind == autoscalers.HPA]
        # The HPA's own metrics when it is in the evidence (KEDA's carry the ScaledObject selector).
        metrics = [metric for member in (hpas or family.members) for metric in member.metrics if metric.api]
        lines = ["See what the autoscaler sees, then ask the metrics API the same question:"]
        lines += [f"  kubectl -n {self.namespace} describe hpa {hpa.name}" for hpa in hpas]
        scaled_objects = [m for m in family.members if m.kind == autoscalers.SCALED_OBJECT]
        lines += [f"  kubectl -n {self.namespace} describe scaledobject {m.name}" for m in scaled_objects]
        for api_name in dict.fromkeys(str(metric.api) for metric in metrics):
            lines.append(f"  kubectl get apiservice {autoscalers.API_SERVICE_NAMES[api_name]}")
        lines += list(
            dict.fromkeys(f'  kubectl get --raw "{raw_metric_path(metric, self.namespace)}"' for metric in metrics)
        )
        if scaled_objects:
            lines.append("  kubectl -n keda logs deploy/keda-operator --tail=200   # KEDA's namespace, keda by default")
        if forbidden:
            user_match = _RBAC_USER.search(forbidden[0])
            user = user_match.group(1) if user_match else _HPA_CONTROLLER
            resources = {metric.api: _raw_resource(metric) for metric in metrics}
            for api, resource in resources.items():
                lines.append(f"  kubectl auth can-i get {resource}.{api} --all-namespaces --as={user}")
            lines.append(
                "Grant the missing permission: the HPA controller needs get/list on the metrics APIs (the "
                "adapter's chart ships a ClusterRole and ClusterRoleBinding for "
                f"{_HPA_CONTROLLER}); an adapter needs to read the pods and namespaces it maps series to."
            )
        lines.append(
            "Fix the failing link the answers point at: the APIService and provider (HPA_METRICS_API_UNAVAILABLE), "
            "the metric name or the adapter rule (HPA_METRIC_SERIES_MISSING), or the KEDA trigger's query and "
            "server address. Nothing in the HPA needs to change while the provider cannot answer."
        )
        return "\n".join(lines)

    # --- Prometheus series behind a Pods or External metric --------------------------------------

    def series_findings(self) -> list[Finding]:
        findings = []
        for reader in self.readers:
            if reader.klass == "keda":
                continue  # KEDA's triggers carry their own PromQL; the adapter's rules do not apply
            for index, metric in enumerate(reader.metrics):
                if metric.source not in ("Pods", "External") or metric.api is None:
                    continue
                state = self.states[metric.api]
                if state.provider != metrics_apis.PROMETHEUS_ADAPTER or state.service_namespace is None:
                    continue
                configs = metrics_apis.adapter_configs(self.evidence, state.service_namespace)
                finding = _SeriesCheck(self, reader, index, metric, state, configs).judge()
                if finding is not None:
                    findings.append(finding)
        return findings


class _SeriesCheck:
    """Does the adapter expose this metric for the predictor's pods, from series that carry their labels?"""

    def __init__(
        self,
        pipeline: _Pipeline,
        hpa: Autoscaler,
        index: int,
        metric: Metric,
        state: metrics_apis.ApiState,
        configs: list[adapter_rules.AdapterConfig],
    ) -> None:
        self.pipeline = pipeline
        self.evidence = pipeline.evidence
        self.hpa = hpa
        self.index = index
        self.metric = metric
        self.state = state
        self.configs = configs
        self.namespace = pipeline.namespace
        self.rules = [rule for config in configs for rule in config.rules_for(str(metric.api))]
        self.sources = [config.source for config in configs]

    def judge(self) -> Finding | None:
        if not self.configs:
            return self.unverified(
                f"the adapter behind {self.state.name} ({self.state.service_ref}) has no readable rules ConfigMap "
                f"labelled {adapter_rules.ADAPTER_LABEL} in {self.state.service_namespace}"
            )
        matches = [(rule, series) for rule in self.rules for series in _series_for(rule, self.metric.name)]
        if not matches:
            return self.not_exposed()
        rule, series = matches[0]
        if self.metric.source == "Pods" and rule.label_for("pod") is None:
            return self.missing(
                rule,
                series,
                f"the rule that exposes it ({rule.describe()}) associates no label with pods, so the adapter "
                "serves it for namespaces only and has no value for the predictor's pods",
            )
        return self.series_present(rule, series)

    def not_exposed(self) -> Finding | None:
        renamed = [
            (rule, series, exposed)
            for rule in self.rules
            for series in _known_series(rule)
            for exposed in (rule.exposes(series),)
            if exposed is not None and exposed != self.metric.name and series == self.metric.name
        ]
        if not renamed and any(rule.series_name is None for rule in self.rules):
            return self.unverified(
                f"no rule of {', '.join(self.sources)} exposes {self.metric.name!r} from a series the evidence "
                "knows, but some rules discover series by pattern, and which series match only Prometheus can tell"
            )
        exposed_names = sorted(
            {name for rule in self.rules for s in _known_series(rule) for name in (rule.exposes(s),) if name}
        )
        detail = (
            f"the adapter's rules in {', '.join(self.sources)} do not expose {self.metric.name!r}; they expose "
            f"{', '.join(exposed_names) or 'nothing the evidence can name'}"
        )
        if renamed:
            rule, series, exposed = renamed[0]
            detail += (
                f". {series!r} is a Prometheus series name: the rule ({rule.describe()}) renames it to {exposed!r}, "
                "and the HPA must ask for the renamed one"
            )
            return self.missing(rule, series, detail, rename_to=exposed)
        return self.missing(None, None, detail)

    def series_present(self, rule: adapter_rules.AdapterRule, series: str) -> Finding | None:
        query_id = _catalog_query_for(series)
        if query_id is None:
            return self.unverified(
                f"the adapter reads series {series!r} ({rule.describe()}); the metric catalog does not query it, so "
                "whether it carries the predictor pods' labels was not checked"
            )
        data = self.evidence.metrics.get(query_id)
        if data is None or data.status not in ("ok", "empty"):
            why = "no Prometheus configured" if data is None else f"query {query_id} {data.status}: {data.error}"
            return self.unverified(f"the adapter reads series {series!r}; it could not be looked up ({why})")
        pod_label, namespace_label = rule.label_for("pod"), rule.label_for("namespace")
        if data.status == "ok":
            if (pod_label in (None, "pod") or self.metric.source == "External") and namespace_label == "namespace":
                return None
            return self.unverified(
                f"Prometheus has {series!r} with namespace and pod labels for the predictor pods "
                f"({len(data.series)} series from {query_id}), but the rule associates them through "
                f"{namespace_label!r} / {pod_label!r}, labels the catalog query does not read"
            )
        seen = _other_pod_queries_with_data(self.evidence, query_id)
        if not seen:
            return self.unverified(
                f"Prometheus returned no {series!r} series for the predictor pods, and no other series for them "
                "either: the Prometheus read may not be the one the adapter queries"
            )
        return self.missing(
            rule,
            series,
            f"Prometheus has no {series!r} series with namespace={self.namespace!r} and a predictor pod label "
            f"in the window (query {query_id} is empty), while it has other series for these pods "
            f"({', '.join(seen)}). The adapter finds a pod's value through the series' "
            f"{namespace_label or 'namespace'!r} and {pod_label or 'pod'!r} labels: series scraped without "
            "them (for example through a Service scrape that does not attach pod labels, or relabelled to "
            "exported_pod) give the HPA nothing",
            query=data.promql,
        )

    def missing(
        self,
        rule: adapter_rules.AdapterRule | None,
        series: str | None,
        detail: str,
        rename_to: str | None = None,
        query: str | None = None,
    ) -> Finding:
        summary = (
            f"{self.hpa.ref} scales on {self.metric.describe()}, served by prometheus-adapter "
            f"({self.state.service_ref}), but {detail}. The adapter then answers 'not found' and the HPA "
            "reports FailedGet" + ("PodsMetric" if self.metric.source == "Pods" else "ExternalMetric") + "."
        )
        evidence_lines = [f"{self.hpa.ref}: {self.metric.describe()}"]
        if rule is not None:
            evidence_lines.append(f"adapter rule ({', '.join(self.sources)}): {rule.describe()}")
            evidence_lines.append(f"metricsQuery: {rule.metrics_query!r}")
        if series is not None:
            evidence_lines.append(f"Prometheus series behind it: {series}")
        if query is not None:
            evidence_lines.append(f"query with no series in the window: {query}")
        plan = self.rename_patch(rename_to) if rename_to else None
        what = self.series_remediation(series, rename_to)
        if plan is None and rename_to is not None:
            owner = self.hpa.owner or "its owner"
            what += (
                f"\n(No patch: {self.hpa.ref} is generated by {owner}; change the metric name where {owner} "
                "declares it.)"
            )
        objects = [self.pipeline.isvc_ref, self.hpa.ref, *self.sources]
        return Finding(
            code="HPA_METRIC_SERIES_MISSING",
            title=f"{self.hpa.ref}: no series behind {self.metric.source} metric {self.metric.name!r}",
            summary=summary,
            objects=tuple(dict.fromkeys(objects)),
            evidence=tuple(evidence_lines),
            fix=Fix.from_plan(what, plan),
        )

    def unverified(self, why: str) -> Finding:
        return Finding(
            code="HPA_METRIC_SERIES_MISSING",
            title=f"{self.hpa.ref}: series behind {self.metric.name!r} not verified",
            summary=f"Could not verify that Prometheus has series for {self.metric.describe()} of {self.hpa.ref}: {why}.",
            objects=(self.pipeline.isvc_ref, self.hpa.ref),
            evidence=(f"{self.hpa.ref}: {self.metric.describe()}",),
            fix=Fix(what=self.series_remediation(None, None)),
            severity=Severity.INFO,
        )

    def series_remediation(self, series: str | None, rename_to: str | None) -> str:
        lines = [
            "Ask the adapter what it serves, then Prometheus what it has:",
            f'  kubectl get --raw "{raw_metric_path(self.metric, self.namespace)}"',
            f'  kubectl get --raw "/apis/{self.metric.api}/v1beta1" | grep -o \'"name":"[^"]*"\'',
        ]
        if series is not None:
            lines.append(
                f"  PromQL: count by (namespace, pod, exported_namespace, exported_pod) ({{__name__={series!r}}})"
            )
        if rename_to is not None:
            lines.append(f"Point the HPA at the name the adapter exposes: {rename_to!r}.")
        else:
            lines.append(
                "Then either make the series carry namespace and pod labels (scrape the pods with a PodMonitor, "
                "or keep the target's pod and namespace labels when relabelling), or change the adapter rule's "
                "resources.overrides to the labels the series carry, or add a rule that exposes the metric; "
                "restart the adapter after changing its ConfigMap."
            )
        return "\n".join(lines)

    def rename_patch(self, rename_to: str) -> patches.PatchPlan | None:
        if self.hpa.kind != autoscalers.HPA or self.hpa.owner is not None:
            return None
        source_key = "pods" if self.metric.source == "Pods" else "external"

        def rename(hpa: common.KubeObject) -> None:
            entry = hpa["spec"]["metrics"][self.index]
            entry[source_key]["metric"]["name"] = rename_to

        return patches.plan_patch(self.hpa.obj, rename)


# --- helpers ----------------------------------------------------------------------------------------


def _availability_problem(state: metrics_apis.ApiState) -> str | None:
    """Why ``state``'s API cannot answer, ``None`` when it can (or when the evidence cannot tell)."""
    if state.api_service is None:
        if state.read_failure is not None:
            return None  # the coverage line reports the unread APIServices
        return f"no APIService {state.name} is registered, so nothing serves {state.api}"
    available = state.available
    if available is not None:
        if str(available.get("status")) == "True":
            return None
        reason = str(available.get("reason") or "")
        hint = _AVAILABILITY_HINTS.get(reason)
        return f"{state.name} is {kube.describe_condition(available)}" + (f" — {hint}" if hint else "")
    if state.local:
        return None
    if state.service is None:
        return f"{state.name} names {state.service_ref}, which does not exist"
    if state.deployments and not state.ready_deployments():
        names = ", ".join(metrics_apis.describe_deployment(d) for d in state.deployments)
        return f"no pod of the provider behind {state.name} is ready ({names})"
    return None


def _unavailable_remediation(state: metrics_apis.ApiState, consumers: list[_Consumer], namespace: str) -> str:
    lines = [
        "Check the API and the provider behind it:",
        f"  kubectl get apiservice {state.name} -o yaml",
        f'  kubectl get --raw "/apis/{state.api}/v1beta1"',
    ]
    lines += [f'  kubectl get --raw "{raw_metric_path(consumers[0].metric, namespace)}"']
    if state.service is not None:
        lines.append(f"  kubectl -n {state.service_namespace} get endpoints {state.service_name}")
        for deployment in state.deployments:
            lines.append(f"  kubectl -n {kube.namespace(deployment)} describe deployment {kube.name(deployment)}")
            lines.append(f"  kubectl -n {kube.namespace(deployment)} logs deploy/{kube.name(deployment)} --tail=100")
    if state.api_service is None:
        lines.append(f"Fix: {_HOW_TO_PROVIDE[state.api]}.")
    else:
        lines.append(
            "Fix the provider (pods ready, Service endpoints present, port reachable from the control plane, TLS "
            "accepted); the HPA recovers on its next sync without any change to it. This is a cluster "
            "component: no patch to the InferenceService helps."
        )
    return "\n".join(lines)


def _conflict_remediation(
    state: metrics_apis.ApiState, required: str, stranded: list[tuple[_Consumer, str]], namespace: str
) -> str:
    lines = [
        "See which Service the API points at and which providers are installed:",
        f"  kubectl get apiservice {state.name} -o jsonpath='{{.spec.service}}'",
        "  kubectl get deploy -A | grep -Ei 'keda|prometheus-adapter|metrics-server'",
        f'  kubectl get --raw "{raw_metric_path(stranded[0][0].metric, namespace)}"',
    ]
    if required == metrics_apis.KEDA:
        lines.append(
            "Keep one provider per API. With KEDA on the cluster, let KEDA own external.metrics.k8s.io: remove "
            "the adapter's externalRules (chart value rules.external: []) so its upgrades stop re-registering "
            "the API, then reinstall or upgrade KEDA so its APIService points at keda-operator-metrics-apiserver; "
            "serve other external metrics through KEDA triggers (prometheus scaler) instead."
        )
    else:
        lines.append(
            f"Keep one provider per API: move the metrics that need {required} off {state.api} (for a Pods "
            "value, a Pods metric through custom.metrics.k8s.io; or a ScaledObject with a prometheus trigger "
            "so that KEDA serves it), or stop the other provider from registering the API."
        )
    return "\n".join(lines)


def raw_metric_path(metric: Metric, namespace: str) -> str:
    """The metrics-API path the HPA controller reads for ``metric`` (for ``kubectl get --raw``)."""
    if metric.api == autoscalers.RESOURCE_METRICS_API:
        return f"/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods"
    if metric.source == "External":
        path = f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{metric.name}"
        match_labels = (metric.selector or {}).get("matchLabels") or {}
        if match_labels:
            selector = ",".join(f"{key}={value}" for key, value in sorted(match_labels.items()))
            path += "?labelSelector=" + urllib.parse.quote(selector, safe="")
        return path
    if metric.source == "Object" and metric.described_object:
        return (
            f"/apis/custom.metrics.k8s.io/v1beta1/namespaces/{namespace}/{_plural(metric.described_object)}/"
            f"{metric.described_object.get('name')}/{metric.name}"
        )
    return f"/apis/custom.metrics.k8s.io/v1beta1/namespaces/{namespace}/pods/*/{metric.name}"


def _raw_resource(metric: Metric) -> str:
    if metric.api == autoscalers.RESOURCE_METRICS_API:
        return "pods"
    if metric.source == "External":
        return metric.name
    return f"pods/{metric.name}"


def _plural(described: Mapping[str, Any]) -> str:
    kind = str(described.get("kind") or "")
    registered = next((k for k in kinds.ALL_KINDS if k.kind == kind), None)
    return registered.plural if registered else kind.lower() + "s"


def _event_count(event: Mapping[str, Any]) -> int:
    series = event.get("series") or {}
    return int(series.get("count") or event.get("count") or 1)


def _known_series(rule: adapter_rules.AdapterRule) -> list[str]:
    """Series names a rule can be tried on: its literal name, else the catalog's series names."""
    if rule.series_name is not None:
        return [rule.series_name]
    return sorted(_CATALOG_SERIES)


def _series_for(rule: adapter_rules.AdapterRule, metric_name: str) -> list[str]:
    """The series (among those the evidence can name) that ``rule`` exposes as ``metric_name``."""
    return [series for series in _known_series(rule) if rule.exposes(series) == metric_name]


def _catalog_series() -> dict[str, str]:
    """Series name -> the first catalog query that selects it by namespace and predictor pod."""
    found: dict[str, str] = {}
    for spec in catalog.CATALOG:
        for template in spec.templates:
            if "{sel}" not in template:
                continue
            for name in _SERIES_IN_TEMPLATE.findall(template):
                found.setdefault(name, spec.id)
    return found


_CATALOG_SERIES = _catalog_series()


def _catalog_query_for(series: str) -> str | None:
    return _CATALOG_SERIES.get(series)


def _other_pod_queries_with_data(evidence: Evidence, excluded: str) -> list[str]:
    """Catalog queries on the predictor pods (namespace and pod labels) that returned series."""
    pod_queries = {query_id for query_id in _CATALOG_SERIES.values() if query_id != excluded}
    return sorted(
        query_id
        for query_id in pod_queries
        if (data := evidence.metrics.get(query_id)) is not None and data.status == "ok"
    )
