"""``RESOURCES_REQUESTS_MISSING``: no memory request on the serving container, or a container without the request
a Utilization HPA divides by.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nbhelpers.checks.resources._facts import OOM_HEADROOM, ResourceFacts, describe_resources
from nbhelpers.facts import common
from nbhelpers.findings import patches
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.sources import kinds, kube
from nbhelpers.util import quantities

# Knative's default cpu request for queue-proxy (config-deployment queue-sidecar-cpu-request).
QUEUE_PROXY_CPU_REQUEST = "25m"


def requests_missing(facts: ResourceFacts) -> list[Finding]:
    findings = []
    if "memory" not in common.effective_requests(facts.serving):
        findings.append(_memory_request_missing(facts))
    for hpa, resource, container_names in _utilization_metrics(facts):
        findings.extend(_hpa_request_missing(facts, hpa, resource, container_names))
    return findings


def _memory_request_missing(facts: ResourceFacts) -> Finding:
    hint = facts.weights_hint()
    summary = (
        f"Container {facts.container_name} of {facts.workload.ref} requests no memory. The scheduler then "
        "places the pod without reserving host memory for it, and under node memory pressure the kubelet "
        "evicts or the kernel OOM-kills it first; vLLM needs several GiB of host memory while it loads "
        "the weights and runs its workers."
    )
    evidence_lines = [describe_resources(facts.serving)]
    if hint is not None:
        evidence_lines.append(f"model size: {hint.describe()}")
    plan = None
    if hint is not None:
        size = quantities.gib_quantity(hint.weights_bytes * OOM_HEADROOM)
        what = (
            f"Request memory for {facts.container_name}: {size}, 1.5 × the model's weights "
            f"({hint.describe()}), as requests and limit so the memory is reserved. This is an estimate: "
            "check the container's peak working set (kubectl top pod) once it runs."
        )
        plan = facts.isvc_resources_patch({"requests": {"memory": size}, "limits": {"memory": size}})
    else:
        what = (
            f"Set resources.requests.memory (and the same limits.memory) on {facts.container_name}: at least "
            "the model's weights in GiB plus a few GiB for the engine processes. Measure the peak with "
            "kubectl top pod and size from that."
        )
    return Finding(
        code="RESOURCES_REQUESTS_MISSING",
        title=f"{facts.container_name} has no memory request",
        summary=summary,
        objects=(facts.isvc_ref, facts.workload.ref),
        evidence=tuple(evidence_lines),
        fix=Fix.from_plan(what, plan),
    )


def _utilization_metrics(facts: ResourceFacts) -> list[tuple[Mapping[str, Any], str, tuple[str, ...] | None]]:
    """(HPA, resource, containers it reads or None for all) for Utilization targets on predictor pods."""
    found: list[tuple[Mapping[str, Any], str, tuple[str, ...] | None]] = []
    for hpa in _predictor_hpas(facts):
        for metric in kube.spec(hpa).get("metrics") or []:
            kind = metric.get("type")
            source = metric.get("resource") if kind == "Resource" else metric.get("containerResource")
            if kind not in ("Resource", "ContainerResource") or not isinstance(source, Mapping):
                continue
            if (source.get("target") or {}).get("type") != "Utilization":
                continue
            containers = (str(source.get("container")),) if kind == "ContainerResource" else None
            found.append((hpa, str(source.get("name")), containers))
    return found


def _predictor_hpas(facts: ResourceFacts) -> list[Mapping[str, Any]]:
    prefix = common.predictor_name(facts.evidence)
    hpas = []
    for hpa in facts.evidence.of(kinds.HPA):
        target = kube.spec(hpa).get("scaleTargetRef") or {}
        name = str(target.get("name") or "")
        if kube.namespace(hpa) == facts.evidence.target.namespace and (name == prefix or name.startswith(prefix + "-")):
            hpas.append(hpa)
    return sorted(hpas, key=kube.name)


def _hpa_request_missing(
    facts: ResourceFacts, hpa: Mapping[str, Any], resource: str, container_names: tuple[str, ...] | None
) -> list[Finding]:
    containers = [
        c
        for c in kube.containers(facts.workload.pod_spec)
        if container_names is None or c.get("name") in container_names
    ]
    missing = [c for c in containers if not _requests_some(c, resource)]
    if not missing:
        return []
    names = [str(c.get("name")) for c in missing]
    scope = "every container" if container_names is None else f"container {container_names[0]}"
    summary = (
        f"{kube.ref(hpa)} scales on {resource} utilization, which is usage divided by the {resource} request "
        f"of {scope}; {', '.join(names)} of {facts.workload.ref} {'requests' if len(names) == 1 else 'request'} "
        f"no {resource}. The HPA cannot compute "
        "the metric (FailedGetResourceMetric), so it never scales and load piles up on the current replicas."
    )
    evidence_lines = [
        f"{kube.ref(hpa)}: target {resource} Utilization, scaleTargetRef "
        f"{(kube.spec(hpa).get('scaleTargetRef') or {}).get('name')}",
        *(describe_resources(c) for c in kube.containers(facts.workload.pod_spec)),
    ]
    objects = (facts.isvc_ref, facts.workload.ref, kube.ref(hpa))
    findings = []
    serving_missing = facts.container_name in names
    sidecars = [name for name in names if name != facts.container_name]
    if serving_missing:
        findings.append(_serving_request_finding(facts, resource, summary, evidence_lines, objects))
    for sidecar in sidecars:
        findings.append(_sidecar_request_finding(facts, sidecar, resource, summary, evidence_lines, objects))
    return findings


def _serving_request_finding(
    facts: ResourceFacts, resource: str, summary: str, evidence_lines: list[str], objects: tuple[str, ...]
) -> Finding:
    limit = ((facts.serving.get("resources") or {}).get("limits") or {}).get(resource)
    plan = None
    if limit is not None:
        what = f"Request {resource} {limit} (its limit) for {facts.container_name}."
        plan = facts.isvc_resources_patch({"requests": {resource: str(limit)}})
    else:
        what = (
            f"Set resources.requests.{resource} on {facts.container_name} to its steady usage (kubectl top pod); "
            "the HPA target is a percentage of that number."
        )
    return Finding(
        code="RESOURCES_REQUESTS_MISSING",
        title=f"{resource} HPA, but {facts.container_name} has no {resource} request",
        summary=summary,
        objects=objects,
        evidence=tuple(evidence_lines),
        fix=Fix.from_plan(what, plan),
    )


def _sidecar_request_finding(
    facts: ResourceFacts, sidecar: str, resource: str, summary: str, evidence_lines: list[str], objects: tuple[str, ...]
) -> Finding:
    plan = None
    config = facts.evidence.config_map(facts.evidence.site.knative_namespace, "config-deployment")
    if sidecar == "queue-proxy" and resource == "cpu":
        # Patch only a ConfigMap that was read: a merge patch on a missing object fails with NotFound.
        if config is not None:
            plan = patches.plan_patch(
                dict(config),
                lambda cm: cm.setdefault("data", {}).update({"queue-sidecar-cpu-request": QUEUE_PROXY_CPU_REQUEST}),
            )
        what = (
            f"Give queue-proxy a cpu request again: Knative's default is {QUEUE_PROXY_CPU_REQUEST} "
            "(config-deployment queue-sidecar-cpu-request). New revisions pick it up; when the Knative Operator "
            "owns the ConfigMap, set spec.config.deployment in the KnativeServing resource instead."
        )
    elif sidecar in common.AGENT_CONTAINERS:
        what = (
            f"Set a {resource} request for the KServe agent in the inferenceservice-config ConfigMap "
            f"(key agent, field {resource}Request), then restart the predictor."
        )
    else:
        what = f"Set a {resource} request on container {sidecar} where it is injected (its mesh or webhook config)."
    return Finding(
        code="RESOURCES_REQUESTS_MISSING",
        title=f"{resource} HPA, but sidecar {sidecar} has no {resource} request",
        summary=summary,
        objects=objects,
        evidence=tuple(evidence_lines),
        fix=Fix.from_plan(what, plan),
    )


def _requests_some(container: Mapping[str, Any], resource: str) -> bool:
    """A positive request: utilization over a zero request is undefined, like over a missing one."""
    amount = quantities.try_parse(common.effective_requests(container).get(resource))
    return amount is not None and amount > 0
