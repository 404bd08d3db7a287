"""``QUEUE_SATURATION`` and ``KV_CACHE_PRESSURE``: requests waiting at the concurrency ceiling, or held back by
a full KV cache, decided by :mod:`nbhelpers.models.regime`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from nbhelpers.checks.queue_vs_oom._facts import LEN_FLAG, SEQS_FLAG, UTIL_FLAG, EngineFacts, clock
from nbhelpers.checks.queue_vs_oom._memory import utilization_cap
from nbhelpers.facts import common, engine, llmisvc, vllm_args
from nbhelpers.facts.engine import Valued
from nbhelpers.findings import patches
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.metrics import series
from nbhelpers.models import regime
from nbhelpers.sources import kube
from nbhelpers.sources.kube import KubeObject

KV_HEADROOM = 0.8  # below this peak KV usage while saturated, more concurrency fits in the cache
KV_TARGET = 0.85  # the KV usage a recommended --max-num-seqs aims for


def queue_facts(
    facts: EngineFacts, ceiling: Valued | None, role_ceilings: Mapping[str, Valued] | None = None
) -> regime.QueueFacts | None:
    running = series.by_pod(facts.evidence.metrics.get("vllm_running"))
    waiting = series.by_pod(facts.evidence.metrics.get("vllm_waiting"))
    usage = series.by_pod(facts.evidence.metrics.get("vllm_kv_cache_usage"))
    if not running or not waiting:
        return None
    pods: dict[str, list[regime.PodSample]] = {}
    for pod, run_series in running.items():
        wait_series = waiting.get(pod, {})
        kv_series = usage.get(pod, {})
        pods[pod] = [
            regime.PodSample(t, run_series[t], wait_series[t], kv_series.get(t))
            for t in sorted(run_series)
            if t in wait_series
        ]
    failed, _ = facts.failed_requests()
    return regime.QueueFacts(
        step=facts.step,
        rate_range=facts.rate_range,
        pods=pods,
        ceiling=ceiling.value if ceiling else None,
        preemptions=tuple(series.summed(facts.evidence.metrics.get("vllm_preemptions_rate")).items()),
        queue_time_p95=tuple(series.summed(facts.evidence.metrics.get("vllm_queue_time_p95")).items()),
        failed_requests=failed,
        pod_ceilings={pod: valued.value for pod, valued in (role_ceilings or {}).items()},
    )


def role_ceilings(facts: EngineFacts) -> dict[str, Valued]:
    """Pod → the ceiling of its llm-d role, when an LLMInferenceService's vLLM pods have more than one role: the
    prefill and decode workloads take their containers from spec.prefill.template and spec.template, so each role
    has its own --max-num-seqs (read from the role's newest pod, as the service's ceiling is from its newest pod)."""
    roles = llmisvc.pod_roles(facts.evidence)
    if len(set(roles.values())) < 2:
        return {}
    newest: dict[str, KubeObject] = {}
    for pod in sorted(llmisvc.workload_pods(facts.evidence), key=lambda p: (kube.created(p) or "", kube.name(p))):
        role = roles.get(kube.name(pod))
        if role is not None:
            newest[role] = pod
    by_role: dict[str, Valued] = {}
    for role, pod in newest.items():
        pod_spec = kube.spec(pod)
        container = common.container_named(pod_spec, {facts.container})
        if container is None:
            continue
        ceiling = engine.max_num_seqs(facts.evidence, common.Workload(pod, pod_spec, container, kube.labels(pod)))
        if ceiling is not None:
            by_role[role] = Valued(ceiling.value, f"{ceiling.origin} on the {llmisvc.role_label(role)}")
    return {pod: by_role[role] for pod, role in roles.items() if role in by_role}


def _ceiling_in_effect(
    analysis: regime.QueueAnalysis, ceiling: Valued | None, per_pod: Mapping[str, Valued]
) -> Valued | None:
    """The ceiling a finding names: the role's when every episode is on pods of roles with the same one."""
    episodes = [s.episode.pod for s in analysis.saturated] + [p.episode.pod for p in analysis.kv_pressures]
    found = {per_pod[pod] for pod in episodes if pod in per_pod}
    if found and len(found) == 1 and all(pod in per_pod for pod in episodes):
        return found.pop()
    return ceiling


def queue_findings(facts: EngineFacts, gpu_oom: bool, cannot_fit: bool) -> list[Finding]:
    per_pod = role_ceilings(facts)
    queue = queue_facts(facts, facts.ceiling(), per_pod)
    if queue is None:
        return []
    analysis = regime.analyse(queue)
    ceiling = _ceiling_in_effect(analysis, facts.ceiling(), per_pod)
    regimes = regime.decide(analysis, gpu_oom, cannot_fit)
    regime_line = f"regime of the window: {regime.explain(regimes)}"
    findings = []
    if analysis.kv_pressures:
        findings.append(_kv_pressure(facts, analysis, queue, ceiling, regime_line))
    if analysis.saturated:
        findings.append(_saturation(facts, analysis, queue, ceiling, regime_line))
    return findings


def _ceiling_text(analysis: regime.QueueAnalysis, ceiling: Valued | None) -> str:
    used = sorted({s.ceiling for s in analysis.saturated})
    if ceiling is not None and used == [ceiling.value]:
        return f"ceiling {ceiling.value:.0f} ({ceiling.origin})"
    why = "flag not set" if ceiling is None else f"running exceeded {ceiling.origin}: other flags then"
    return f"ceiling {', '.join(f'{p:.0f}' for p in used)} (observed plateau of running requests; {why})"


def _traffic_lines(facts: EngineFacts) -> list[str]:
    lines = []
    for query, label in (
        ("vllm_request_rate", "finished requests"),
        ("vllm_prompt_tokens_rate", "prompt tokens"),
        ("vllm_generation_tokens_rate", "generated tokens"),
    ):
        peak = series.peak(series.summed(facts.evidence.metrics.get(query)))
        if peak is not None:
            lines.append(f"{label}: peak {peak:,.1f}/s")
    queue = series.peak(series.summed(facts.evidence.metrics.get("vllm_queue_time_p95")))
    ttft = series.peak(series.summed(facts.evidence.metrics.get("vllm_ttft_p95")))
    e2e = series.peak(series.summed(facts.evidence.metrics.get("vllm_e2e_p99")))
    for name, value in (("queue time p95", queue), ("time to first token p95", ttft), ("end-to-end p99", e2e)):
        if value is not None:
            lines.append(f"{name}: peak {value:.1f} s")
    return lines


def _saturation(
    facts: EngineFacts,
    analysis: regime.QueueAnalysis,
    queue: regime.QueueFacts,
    ceiling: Valued | None,
    regime_line: str,
) -> Finding:
    saturated = analysis.saturated
    longest = max(saturated, key=lambda s: s.episode.seconds)
    pods = sorted({s.episode.pod for s in saturated})
    failed = regime.count_during(queue.failed_requests, [s.episode for s in saturated], queue.rate_range)
    deepest = max(s.episode.peak_waiting for s in saturated)
    queue_peak = max((s.queue_time_peak for s in saturated if s.queue_time_peak is not None), default=None)
    roles = llmisvc.pod_roles(facts.evidence)
    summary = (
        f"For up to {_minutes(longest.episode.seconds)} requests waited in vLLM's queue (up to {deepest:.0f}) "
        f"while {_pods_text(pods, roles)} ran at their {_ceiling_text(analysis, ceiling)}"
        + (f"; queue time p95 reached {queue_peak:.1f} s" if queue_peak is not None else "")
        + ". No KV-cache pressure or GPU out-of-memory explains it: the service had less capacity than demand."
        + _by_role(queue, roles)
    )
    severity = None
    if failed >= 1:
        summary += (
            f" About {failed:.0f} requests were answered 503/504 at the edge during these episodes: raised to critical."
        )
        severity = Severity.CRITICAL
    evidence = [
        f"pod {_pod_text(s.episode.pod, roles)}: {clock(s.episode.start)}-{clock(s.episode.end)} "
        f"({_minutes(s.episode.seconds)}): "
        f"running up to {s.episode.peak_running:.0f}/{s.ceiling:.0f}, waiting up to {s.episode.peak_waiting:.0f}"
        + (f", KV usage up to {s.episode.peak_kv:.2f}" if s.episode.peak_kv is not None else "")
        for s in saturated
    ]
    evidence.append(
        f"criterion: waiting ≥ 1 and running ≥ {regime.PINNED:.0%} of the ceiling on every sample for ≥ "
        f"{_minutes(regime.min_episode_seconds(queue.step))}, with a queue of ≥ "
        f"{regime.deep_queue(longest.ceiling):.0f}, queue time ≥ {regime.SLOW_QUEUE_SECONDS:.0f} s or 503/504"
    )
    if analysis.short_queues:
        evidence.append(f"{analysis.short_queues} shorter queue episode(s) drained on their own (not counted)")
    evidence += _traffic_lines(facts) + facts.failed_requests()[1] + [regime_line]
    fix = _capacity_fix(facts, saturated, queue)
    return Finding(
        code="QUEUE_SATURATION",
        title=f"requests queued at the concurrency ceiling for {_minutes(longest.episode.seconds)} "
        f"({_pods_text(pods, roles)})",
        summary=summary,
        objects=_objects(facts, pods, roles),
        evidence=tuple(evidence),
        fix=fix,
        severity=severity,
    )


def _objects(facts: EngineFacts, pods: Sequence[str], roles: dict[str, str]) -> tuple[str, ...]:
    """The step's objects and the pods of the episodes; with several llm-d roles, of the service's vLLM pods only those
    (the pod the flags were read from may be of a role the finding does not concern)."""
    namespace = facts.evidence.target.namespace
    several = len(set(roles.values())) > 1
    kept = [
        ref for ref in facts.objects if not (several and ref.startswith("Pod/") and ref.rsplit("/", 1)[-1] in roles)
    ]
    return tuple(dict.fromkeys([*kept, *(f"Pod/{namespace}/{pod}" for pod in pods)]))


def _capacity_fix(facts: EngineFacts, saturated: Sequence[regime.Saturation], queue: regime.QueueFacts) -> Fix:
    kv_peaks = [s.episode.peak_kv for s in saturated]
    known = [kv for kv in kv_peaks if kv is not None]
    current = max(s.ceiling for s in saturated)
    # Replicas and flags are set per workload: for an LLMInferenceService only the pods of the saturated llm-d role.
    roles = llmisvc.pod_roles(facts.evidence)
    saturated_roles = {roles.get(s.episode.pod, "") for s in saturated}
    if known and len(known) == len(kv_peaks) and max(known) <= KV_HEADROOM and facts.server.server == vllm_args.VLLM:
        raised = int(min(2 * current, math.floor(current * KV_TARGET / max(max(known), 0.01))))
        if raised > current:
            what = (
                f"The KV cache was at most {max(known):.0%} full while running sat at {current:.0f}: the pods can "
                f"run more requests at once. Raise {SEQS_FLAG} to {raised} (aims at {KV_TARGET:.0%} KV usage at "
                "the same request sizes; at most double per change), then watch vllm:kv_cache_usage_perc and "
                "preemptions. Add replicas if demand grows further."
            )
            plan = facts.args_patch({SEQS_FLAG: str(raised)})
            no_patch = facts.no_patch_reason()
            if llmisvc.ROLE_PREFILL in saturated_roles:
                no_patch = (
                    "(No patch yet for an LLMInferenceService: the prefill pods take their container from "
                    "spec.prefill.template; change the flag there.)"
                )
            return Fix.from_plan(what, plan, no_patch=no_patch)
    demand = max((s.episode.peak_running + s.episode.peak_waiting) / s.ceiling for s in saturated)
    peers = {pod: samples for pod, samples in queue.pods.items() if roles.get(pod, "") in saturated_roles}
    serving = max(
        sum(1 for samples in peers.values() if any(s.episode.overlaps(p.t, 0) for p in samples)) for s in saturated
    )
    needed = math.ceil(serving * demand)
    if facts.evidence.target.is_llmisvc:
        return _llmisvc_capacity_fix(facts, saturated_roles, demand, serving, needed)
    predictor = kube.spec(facts.evidence.isvc).get("predictor") or {}
    max_replicas = int(predictor.get("maxReplicas") or predictor.get("minReplicas") or 1)
    room = (
        f"the KV cache was up to {max(known):.0%} full, no room for more requests per pod"
        if known
        else "KV usage not measured, so more requests per pod cannot be promised"
    )
    what = (
        f"Demand reached {demand:.1f}x what {serving} pod(s) at their ceiling serve: about {needed} replicas would "
        f"have served it without queueing ({room})."
    )
    if needed <= max_replicas:
        return Fix(
            what=what + f" maxReplicas is already {max_replicas}: the autoscaler did not scale out in time; see the "
            "scale_target and metric_pipeline steps (a per-pod target at or above the ceiling scales too late)."
        )

    def raise_max(isvc: common.KubeObject) -> None:
        isvc["spec"]["predictor"]["maxReplicas"] = needed

    plan = patches.plan_patch(facts.evidence.isvc, raise_max)
    return Fix.from_plan(
        what + f" Raise maxReplicas from {max_replicas} to {needed} (and make sure GPUs for them exist).", plan
    )


def _kv_pressure(
    facts: EngineFacts,
    analysis: regime.QueueAnalysis,
    queue: regime.QueueFacts,
    ceiling: Valued | None,
    regime_line: str,
) -> Finding:
    pressures = analysis.kv_pressures
    longest = max(pressures, key=lambda p: p.episode.seconds)
    pods = sorted({p.episode.pod for p in pressures})
    preempted = sum(p.preemptions for p in pressures)
    failed = regime.count_during(queue.failed_requests, [p.episode for p in pressures], queue.rate_range)
    peak_running = max(p.episode.peak_running for p in pressures)
    blocked = any(p.blocked_queue for p in pressures)
    parts = []
    if preempted >= 1:
        parts.append(f"about {preempted:.0f} preemptions (running requests evicted and recomputed later)")
    if blocked:
        parts.append(
            "requests waiting while running stayed below the concurrency ceiling (admission blocked by the cache)"
        )
    roles = llmisvc.pod_roles(facts.evidence)
    summary = (
        f"The KV cache was ≥ {regime.KV_FULL:.0%} full for up to {_minutes(longest.episode.seconds)} in "
        f"{_pods_text(pods, roles)} with {' and '.join(parts)}, at up to {peak_running:.0f} running requests. The "
        "requests in flight needed more context than the cache holds: throughput drops and latency grows."
        + _by_role(queue, roles)
    )
    if facts.engine.kv_cache_tokens:
        summary += (
            f" The engine's cache holds {facts.engine.kv_cache_tokens:,} tokens, about "
            f"{facts.engine.kv_cache_tokens / max(peak_running, 1):,.0f} per running request at that concurrency."
        )
    severity = None
    if failed >= 1:
        summary += f" About {failed:.0f} requests were answered 503/504 during these episodes: raised to critical."
        severity = Severity.CRITICAL
    target = max(1, math.floor(peak_running * KV_TARGET / max(longest.episode.peak_kv or 1.0, regime.KV_FULL)))
    current = ceiling.value if ceiling else None
    evidence = [
        f"pod {_pod_text(p.episode.pod, roles)}: {clock(p.episode.start)}-{clock(p.episode.end)} "
        f"({_minutes(p.episode.seconds)}): KV usage up to {p.episode.peak_kv or 0:.2f}, running up to {p.episode.peak_running:.0f}, "
        f"waiting up to {p.episode.peak_waiting:.0f}, ≈{p.preemptions:.0f} preemptions"
        for p in pressures
    ]
    if ceiling is not None:
        evidence.append(f"concurrency ceiling: {ceiling.value:.0f} ({ceiling.origin})")
    evidence += _traffic_lines(facts) + facts.memory_lines() + facts.failed_requests()[1] + [regime_line]
    alternatives = (
        f"Alternatives: {LEN_FLAG} lower (bounds each request's share), --kv-cache-dtype fp8 (halves the bytes per "
        f"token), more memory for the cache ({UTIL_FLAG} up to {utilization_cap(facts)}, more GPUs per replica), and "
        "replicas to keep throughput."
    )
    if current is not None and current <= target:
        return Finding(
            code="KV_CACHE_PRESSURE",
            title="KV cache was full with preemptions; the current --max-num-seqs already caps below that load",
            summary=summary
            + f" The current ceiling {current:.0f} is already below the {peak_running:.0f} running then.",
            objects=facts.objects,
            evidence=tuple(evidence),
            fix=Fix(what=alternatives),
            severity=Severity.INFO,
        )
    what = (
        f"Lower {SEQS_FLAG} to {target}: at the observed request sizes that keeps the cache near {KV_TARGET:.0%}, "
        "so requests wait in the queue instead of being preempted and recomputed. " + alternatives
    )
    plan = facts.args_patch({SEQS_FLAG: str(target)})
    return Finding(
        code="KV_CACHE_PRESSURE",
        title=f"KV cache full for {_minutes(longest.episode.seconds)} with "
        + ("preemptions" if preempted >= 1 else "requests held back"),
        summary=summary,
        objects=_objects(facts, pods, roles),
        evidence=tuple(evidence),
        fix=Fix.from_plan(what, plan, no_patch=facts.no_patch_reason()),
        severity=severity,
    )


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


# --- roles of an LLMInferenceService (llm-d.ai/role on its vLLM pods) -----------------------------------------


def _pod_text(pod: str, roles: dict[str, str]) -> str:
    return f"{pod} ({roles[pod]})" if pod in roles else pod


def _pods_text(pods: Sequence[str], roles: dict[str, str]) -> str:
    """``2 pod(s)``, or ``2 prefill pod(s)`` when every pod named has that llm-d role."""
    found = {roles.get(pod, "") for pod in pods}
    role = found.pop() if len(found) == 1 else ""
    return f"{len(pods)} {role} pod(s)" if role and role != llmisvc.ROLE_BOTH else f"{len(pods)} pod(s)"


def _by_role(queue: regime.QueueFacts, roles: dict[str, str]) -> str:
    """`` By role: prefill pods (2): up to 14 waiting, 8 running; decode pods (2): idle.`` when the pods have more
    than one llm-d role, so the reader sees which workload ran out; ``""`` otherwise."""
    samples_by_role: dict[str, list[regime.PodSample]] = {}
    pods_by_role: dict[str, int] = {}
    for pod, samples in queue.pods.items():
        role = roles.get(pod)
        if role is not None:
            samples_by_role.setdefault(role, []).extend(samples)
            pods_by_role[role] = pods_by_role.get(role, 0) + 1
    if len(samples_by_role) < 2:
        return ""
    parts = []
    for role in sorted(samples_by_role, key=lambda name: (name != llmisvc.ROLE_PREFILL, name)):
        samples = samples_by_role[role]
        waiting = max((sample.waiting for sample in samples), default=0.0)
        running = max((sample.running for sample in samples), default=0.0)
        if waiting > 0:
            state = f"up to {waiting:.0f} waiting, {running:.0f} running"
        else:
            state = f"no queue (up to {running:.0f} running)" if running > 0 else "idle"
        parts.append(f"{llmisvc.role_label(role)} ({pods_by_role[role]}): {state}")
    return " By role: " + "; ".join(parts) + "."


def _llmisvc_capacity_fix(
    facts: EngineFacts, saturated_roles: set[str], demand: float, serving: int, needed: int
) -> Fix:
    """Replicas of an LLMInferenceService are set per workload: ``spec.replicas`` (or ``spec.scaling``) for the main
    (decode/both) pods, ``spec.prefill.replicas`` (``spec.prefill.scaling``) for the prefill pods
    (``WorkloadSpec`` in pkg/apis/serving/v1alpha2/llm_inference_service_types.go)."""
    spec = kube.spec(facts.evidence.isvc)
    prefill = llmisvc.ROLE_PREFILL in saturated_roles
    block = (spec.get("prefill") or {}) if prefill else spec
    where = "spec.prefill" if prefill else "spec"
    scaling = block.get("scaling") or {}
    if scaling.get("maxReplicas"):
        field, current = f"{where}.scaling.maxReplicas", int(scaling["maxReplicas"])
    else:
        field, current = f"{where}.replicas", int(block.get("replicas") or 1)
    whose = "the prefill workload" if prefill else "the main (decode) workload"
    what = (
        f"Demand reached {demand:.1f}x what {serving} pod(s) at their ceiling serve: about {needed} replicas of {whose} "
        f"would have served it without queueing. {field} is {current}"
    )
    if needed <= current:
        return Fix(what=what + ": the autoscaler did not add replicas in time; look at spec.scaling's triggers.")
    return Fix(
        what=what + f": raise it to {needed} on the LLMInferenceService (and make sure GPUs for them exist). "
        "(No patch yet for an LLMInferenceService.)"
    )
