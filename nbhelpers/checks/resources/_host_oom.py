"""``RESOURCES_HOST_OOMKILLED``: the kernel killed the serving container at its host memory limit."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from nbhelpers.checks.resources._facts import (
    OOM_HEADROOM,
    ResourceFacts,
    WeightsHint,
    container_named,
    describe_resources,
)
from nbhelpers.facts import common
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.sources import kube
from nbhelpers.util import quantities

# The default resources KServe's webhook gives a predictor container that sets none.
KSERVE_DEFAULT_MEMORY = "2Gi"


def host_oom_killed(facts: ResourceFacts) -> Finding | None:
    kills = []
    for pod in facts.pods:
        for status in kube.status(pod).get("containerStatuses") or []:
            if status.get("name") != facts.container_name:
                continue
            for state_key in ("state", "lastState"):
                terminated = (status.get(state_key) or {}).get("terminated") or {}
                if terminated.get("reason") == "OOMKilled":
                    kills.append((pod, status, terminated))
                    break
    gone = _oom_series_of_gone_pods(facts)
    if not kills and not gone:
        return None
    latest_pod = kills[-1][0] if kills else None
    container = (
        container_named(kube.pod_template_spec(latest_pod), facts.container_name) if latest_pod else None
    ) or facts.serving
    limit_value = ((container.get("resources") or {}).get("limits") or {}).get("memory")
    limit = quantities.try_parse(limit_value)
    lines = []
    for killed_pod, status, terminated in kills:
        lines.append(
            f"{kube.ref(killed_pod)} {status.get('name')}: terminated OOMKilled (exit code "
            f"{terminated.get('exitCode', '?')}) at {terminated.get('finishedAt', '?')}, "
            f"{int(status.get('restartCount') or 0)} restarts"
        )
    lines.extend(gone)
    lines.append(describe_resources(container))
    origin = _limit_origin(facts, limit_value)
    lines.append(f"memory limit origin: {origin}")
    hint = facts.weights_hint()
    if hint is not None:
        lines.append(f"model size: {hint.describe()}")
    restarts = sum(int(status.get("restartCount") or 0) for _, status, _ in kills)
    pods_text = ", ".join(dict.fromkeys(kube.name(p) for p, _, _ in kills)) or "pods no longer present"
    if limit is not None:
        limit_text = f"its memory limit of {limit_value} ({quantities.format_bytes(limit)}), set by {origin}"
    else:
        limit_text = "the node's memory: the container has no memory limit, so the node ran out"
    summary = (
        f"The kernel OOM-killed {facts.container_name} (exit code 137; {pods_text}, {restarts} restarts in all): "
        f"it exceeded {limit_text}. Each kill restarts the engine, which must reload the weights before it can "
        "serve again, so the pod keeps dropping out of the endpoints (503s)."
    )
    fix = _oom_fix(facts, limit, hint)
    return Finding(
        code="RESOURCES_HOST_OOMKILLED",
        title=f"{facts.container_name} OOMKilled at "
        + (f"memory limit {limit_value}" if limit_value else "no memory limit"),
        summary=summary,
        objects=(facts.isvc_ref, *dict.fromkeys(kube.ref(killed) for killed, _, _ in kills)),
        evidence=tuple(lines),
        fix=fix,
    )


def _oom_series_of_gone_pods(facts: ResourceFacts) -> list[str]:
    """kube-state-metrics' last termination reason for predictor pods that are no longer listed."""
    data = facts.evidence.metrics.get("pod_last_terminated_reason")
    if data is None or data.status != "ok":
        return []
    listed = {kube.name(pod) for pod in facts.pods}
    lines = []
    for series in data.series:
        labels = series.labels
        if labels.get("reason") != "OOMKilled" or labels.get("pod") in listed:
            continue
        if labels.get("container") not in (None, facts.container_name):
            continue
        if any(value > 0 for _, value in series.samples):
            lines.append(
                f"kube-state-metrics: Pod {labels.get('pod')} {labels.get('container')} last terminated OOMKilled"
            )
    return sorted(lines)


def _limit_origin(facts: ResourceFacts, limit_value: Any) -> str:
    if limit_value is None:
        return "no memory limit anywhere"
    if facts.evidence.target.is_llmisvc:
        return _llmisvc_limit_origin(facts)
    declared = _isvc_container_resources(facts)
    if (declared.get("limits") or {}).get("memory") is not None:
        return f"the InferenceService ({kube.name(facts.evidence.isvc)})"
    runtime = facts.runtime()
    if runtime is not None:
        runtime_container = facts.runtime_container(runtime)
        runtime_limit = (((runtime_container or {}).get("resources") or {}).get("limits") or {}).get("memory")
        if runtime_limit is not None:
            return f"the runtime default of {kube.ref(runtime)} (the InferenceService sets no memory limit)"
    if str(limit_value) == KSERVE_DEFAULT_MEMORY:
        return f"KServe's default for containers without resources ({KSERVE_DEFAULT_MEMORY})"
    return "neither the InferenceService nor its runtime (a LimitRange default or an admission webhook)"


def _llmisvc_limit_origin(facts: ResourceFacts) -> str:
    """An LLMInferenceService declares its vLLM container in ``spec.template``; what it leaves out comes from the
    LLMInferenceServiceConfig presets KServe merges in (pkg/controller/v1alpha2/llmisvc/config_merge.go)."""
    name = kube.name(facts.evidence.isvc)
    template = kube.spec(facts.evidence.isvc).get("template") or {}
    for container in template.get("containers") or []:
        limit = ((container.get("resources") or {}).get("limits") or {}).get("memory")
        if container.get("name") == facts.container_name and limit is not None:
            return f"the LLMInferenceService ({name}, spec.template)"
    return (
        f"not the LLMInferenceService's own spec.template ({name}): a preset it merges (LLMInferenceServiceConfig), "
        "a LimitRange default or an admission webhook"
    )


def _isvc_container_resources(facts: ResourceFacts) -> Mapping[str, Any]:
    located = common.isvc_serving_container(facts.evidence.isvc)
    if located is None:
        return {}
    _, accessor = located
    return dict(accessor.get(copy.deepcopy(dict(facts.evidence.isvc))).get("resources") or {})


def _oom_fix(facts: ResourceFacts, limit: Decimal | None, hint: WeightsHint | None) -> Fix:
    candidates = []
    reasons = []
    if limit is not None:
        candidates.append(limit * OOM_HEADROOM)
        reasons.append(f"1.5 × the limit that was exceeded ({quantities.format_bytes(limit)})")
    if hint is not None:
        candidates.append(Decimal(hint.weights_bytes))
        reasons.append(f"not below the weights ({hint.describe()}), which pass through host memory while they load")
    if not candidates:
        return Fix(
            what="Give the container a memory request and limit that hold its peak: measure it (kubectl top pod "
            "or container_memory_working_set_bytes) and add headroom."
        )
    size = quantities.gib_quantity(max(candidates))
    what = (
        f"Raise {facts.container_name}'s memory to {size} ({'; '.join(reasons)}), as request and limit so the "
        "scheduler reserves it. The kill shows only that the peak was above the old limit, so watch the "
        "working set after the change. Memory-backed volumes such as /dev/shm count against this limit."
    )
    plan = facts.isvc_resources_patch({"requests": {"memory": size}, "limits": {"memory": size}})
    return Fix.from_plan(what, plan)
