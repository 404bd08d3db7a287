"""``HPA_METRIC_SERIES_MISSING`` on prometheus-adapter's path: the adapter has no series behind a Pods or External
metric, or none that carries the predictor pods' labels. KEDA's path (a trigger with its own query) is ``_keda``.
"""

from __future__ import annotations

import re

from nbhelpers.checks.metric_pipeline._pipeline import MetricPipeline, raw_metric_path
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import adapter_rules, autoscalers, common, metrics_apis
from nbhelpers.facts.autoscalers import Autoscaler, Metric
from nbhelpers.findings import patches
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.metrics import catalog

_SERIES_IN_TEMPLATE = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)\{")


def series_findings(pipeline: MetricPipeline) -> list[Finding]:
    findings = []
    for reader in pipeline.readers:
        if reader.klass == "keda":
            continue  # KEDA's triggers carry their own PromQL; the adapter's rules do not apply
        for index, metric in enumerate(reader.metrics):
            if metric.source not in ("Pods", "External") or metric.api is None:
                continue
            state = pipeline.states[metric.api]
            if state.provider != metrics_apis.PROMETHEUS_ADAPTER or state.service_namespace is None:
                continue
            configs = metrics_apis.adapter_configs(pipeline.evidence, state.service_namespace)
            finding = _SeriesCheck(pipeline, reader, index, metric, state, configs).judge()
            if finding is not None:
                findings.append(finding)
    return findings


class _SeriesCheck:
    """Does the adapter expose this metric for the predictor's pods, from series that carry their labels?"""

    def __init__(
        self,
        pipeline: MetricPipeline,
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
        matches = [(rule, series) for rule in self.rules for series in series_for(rule, self.metric.name)]
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


def _known_series(rule: adapter_rules.AdapterRule) -> list[str]:
    """Series names a rule can be tried on: its literal name, else the catalog's series names."""
    if rule.series_name is not None:
        return [rule.series_name]
    return sorted(_CATALOG_SERIES)


def series_for(rule: adapter_rules.AdapterRule, metric_name: str) -> list[str]:
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
