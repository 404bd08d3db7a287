"""The metrics APIs themselves: ``HPA_METRICS_API_UNAVAILABLE`` (an APIService missing or not Available) and
``HPA_METRICS_API_CONFLICT`` (two providers claim one API).
"""

from __future__ import annotations

from nbhelpers.checks.metric_pipeline._pipeline import Consumer, MetricPipeline, availability_problem, raw_metric_path
from nbhelpers.checks.metric_pipeline._series import series_for
from nbhelpers.facts import autoscalers, metrics_apis
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.sources import kinds, kube

_HOW_TO_PROVIDE = {
    autoscalers.RESOURCE_METRICS_API: "install metrics-server (it registers v1beta1.metrics.k8s.io)",
    autoscalers.CUSTOM_METRICS_API: "install a custom metrics adapter, e.g. prometheus-adapter with a rule that "
    "exposes the metric for pods",
    autoscalers.EXTERNAL_METRICS_API: "install KEDA (its metrics server registers v1beta1.external.metrics.k8s.io) "
    "or prometheus-adapter with externalRules",
}


def unavailable(pipeline: MetricPipeline, api: str) -> Finding | None:
    state = pipeline.states[api]
    consumers = pipeline.consumers(api)
    problem = availability_problem(state)
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
        fix=Fix(what=_unavailable_remediation(state, consumers, pipeline.namespace)),
    )


def conflicts(pipeline: MetricPipeline, providers: list[metrics_apis.Provider]) -> list[Finding]:
    findings = []
    for api, state in pipeline.states.items():
        if state.api_service is None or state.local or state.provider is None:
            continue
        claimants = sorted({p.kind for p in providers if api in p.claims} | {state.provider})
        if len(claimants) < 2:
            continue
        stranded = [
            (consumer, required)
            for consumer in pipeline.consumers(api)
            for required in (_required_provider(pipeline, consumer),)
            if required is not None and required != state.provider and required in claimants
        ]
        if stranded:
            findings.append(_conflict(pipeline, state, providers, stranded))
    return findings


def _required_provider(pipeline: MetricPipeline, consumer: Consumer) -> str | None:
    """The provider that can serve this metric: KEDA for its own triggers, prometheus-adapter when one of
    its readable configurations exposes the name; ``None`` when the evidence cannot tell."""
    if consumer.autoscaler.klass == "keda":
        return metrics_apis.KEDA if consumer.metric.api == autoscalers.EXTERNAL_METRICS_API else None
    for namespace in _adapter_namespaces(pipeline):
        for config in metrics_apis.adapter_configs(pipeline.evidence, namespace):
            for rule in config.rules_for(str(consumer.metric.api)):
                if series_for(rule, consumer.metric.name):
                    return metrics_apis.PROMETHEUS_ADAPTER
    return None


def _adapter_namespaces(pipeline: MetricPipeline) -> list[str]:
    namespaces = {
        kube.namespace(d)
        for d in pipeline.evidence.of(kinds.DEPLOYMENT)
        if metrics_apis.provider_kind(d) == metrics_apis.PROMETHEUS_ADAPTER
    }
    namespaces |= {
        str(s.service_namespace) for s in pipeline.states.values() if s.provider == metrics_apis.PROMETHEUS_ADAPTER
    }
    return sorted(namespaces)


def _conflict(
    pipeline: MetricPipeline,
    state: metrics_apis.ApiState,
    providers: list[metrics_apis.Provider],
    stranded: list[tuple[Consumer, str]],
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
        fix=Fix(what=_conflict_remediation(state, required, stranded, pipeline.namespace)),
    )


def _unavailable_remediation(state: metrics_apis.ApiState, consumers: list[Consumer], namespace: str) -> str:
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
            "component: no patch to the service helps."
        )
    return "\n".join(lines)


def _conflict_remediation(
    state: metrics_apis.ApiState, required: str, stranded: list[tuple[Consumer, str]], namespace: str
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
