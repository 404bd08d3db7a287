"""The probe budget against the model load: ``PROBE_LIVENESS_KILLS_DURING_LOAD`` (the kubelet restarts the
loading container), ``PROBE_STARTUP_BUDGET_SHORT`` (below the load time, not yet killed) and
``PROBE_LOAD_TIME_UNKNOWN`` (nothing to compare the budget with).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from nbhelpers.checks.probes._facts import ProbeFacts
from nbhelpers.checks.probes._loads import PodLoad
from nbhelpers.checks.probes._patches import PROGRESS_DEADLINE_ANNOTATION, new_probe, no_patch_reason, set_probe_plan
from nbhelpers.checks.probes._probe import Probe, gating
from nbhelpers.errors import RunbookError
from nbhelpers.facts import common, engine_errors, knative_version
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.models import load_time
from nbhelpers.models.load_time import LIVENESS, READINESS, STARTUP, ProbeBudget
from nbhelpers.sources import kinds, kube
from nbhelpers.util.times import parse_duration, parse_k8s_time

KNATIVE_PROGRESS_DEADLINE_SECONDS = 600


def budget_findings(facts: ProbeFacts) -> list[Finding]:
    gate = gating(facts.probes)
    if gate is None:
        return []  # nothing restarts a loading container (kills seen came from an older spec)
    budget = gate.budget
    if facts.killed and _engine_never_loads(facts):
        return []  # ENGINE_START_FAILED names why: no budget lets an engine load that waits for GPUs it lacks
    if facts.killed:
        longest_cut = facts.stats.lower_bound or 0.0
        p95 = facts.stats.p95 or 0.0
        # The budget kills again when its earliest kill (one period before the nominal budget) comes
        # before the point where a killed run was still loading, or when it is below the measured p95.
        if budget.seconds - budget.period <= longest_cut or budget.seconds < p95:
            return [_kills_finding(facts, gate, facts.killed)]
        return []
    load, measured = _comparison_load(facts)
    if load is not None and load > budget.seconds:
        return [_short_finding(facts, gate, load, measured)]
    if load is None:
        return [_unknown_load_note(facts, gate)]
    return []


def _engine_never_loads(facts: ProbeFacts) -> bool:
    """The killed runs were not loading: the engine's own log names a cause it waits on and the pod spec confirms
    it (a tensor-parallel size above the pod's GPUs, vllm-project/vllm#25263), so a longer budget only delays its own
    failure and the kills are an effect."""
    _, error = engine_errors.find(common.predictor_pods(facts.evidence), facts.container_name, facts.evidence.logs)
    return (
        error is not None
        and not error.exited
        and engine_errors.confirmed_while_running(error, facts.server, facts.workload.serving)
    )


def _comparison_load(facts: ProbeFacts) -> tuple[float | None, bool]:
    """(load seconds to compare with the budget, whether measured) — measured p95, else the estimate."""
    known = facts.stats.known
    if facts.stats.complete and known is not None:
        return known, True
    if facts.estimate is not None and _passed_gate(facts) is None:
        return max(facts.estimate.seconds, known or 0.0), False
    return None, False


def _passed_gate(facts: ProbeFacts) -> str | None:
    """A pod that became Ready under a gating probe without a restart: it proves the load fits that
    budget, so an estimate above it is wrong and is not used."""
    for load in facts.loads:
        if load.restarts == 0 and kube.pod_ready(load.pod) and load.gating is not None:
            return f"Pod {load.name} became Ready within its {load.gating.kind} budget of {load.gating.seconds} s"
    return None


def _kills_finding(facts: ProbeFacts, gate: Probe, killed: Mapping[str, list[str]]) -> Finding:
    budget = gate.budget
    pods = sorted(killed)
    restarts = sum(load.restarts for load in facts.loads if load.name in killed)
    first = pods[0]
    summary = (
        f"The {gate.kind} of {facts.container_name} gives the model {budget.seconds} s to load "
        f"(initialDelaySeconds {budget.initial_delay} + periodSeconds {budget.period} × failureThreshold "
        f"{budget.failure_threshold}; at most {budget.worst_case_seconds} s with timeouts), but the load takes "
        f"longer: {len(pods)} pod(s) restarted {restarts} time(s) in total while loading. Pod {first}: "
        f"{'; '.join(killed[first])}. {_sentence(facts.stats.describe())} Every restart begins the load again, so the "
        "pod never serves."
    )
    if gate.kind == LIVENESS:
        summary += " No startupProbe holds the liveness probe back during the load."
    fix = _startup_fix(facts)
    objects = (facts.isvc_ref, *(f"Pod/{facts.evidence.target.namespace}/{name}" for name in pods))
    return Finding(
        code="PROBE_LIVENESS_KILLS_DURING_LOAD",
        title=f"{gate.kind} kills the container during the model load ({budget.seconds} s budget)",
        summary=summary,
        objects=objects,
        evidence=tuple([*facts.probe_lines(), *facts.load_lines()]),
        fix=fix,
    )


def _short_finding(facts: ProbeFacts, gate: Probe, load: float, measured: bool) -> Finding:
    budget = gate.budget
    if measured:
        basis = f"the measured load time ({facts.stats.describe()})"
    else:
        assert facts.estimate is not None
        basis = f"the estimated load time of {load:.0f} s ({facts.estimate.basis})"
    summary = (
        f"The {gate.kind} of {facts.container_name} gives the model {budget.seconds} s to load "
        f"(initialDelaySeconds {budget.initial_delay} + periodSeconds {budget.period} × failureThreshold "
        f"{budget.failure_threshold}; at most {budget.worst_case_seconds} s with timeouts), less than {basis}. "
        "No pod has been killed for it in the window yet: a slower node, a cold cache or a larger model "
        "version turns this into a restart loop."
    )
    fix = _startup_fix(facts)
    return Finding(
        code="PROBE_STARTUP_BUDGET_SHORT",
        title=f"{gate.kind} budget {budget.seconds} s is below the {'measured' if measured else 'estimated'} load "
        f"time {load:.0f} s",
        summary=summary,
        objects=(facts.isvc_ref, facts.workload.ref),
        evidence=tuple([*facts.probe_lines(), *facts.load_lines()]),
        fix=fix,
    )


def _unknown_load_note(facts: ProbeFacts, gate: Probe) -> Finding:
    return Finding(
        code="PROBE_LOAD_TIME_UNKNOWN",
        title=f"load time unknown: the {gate.kind} budget of {gate.budget.seconds} s cannot be checked",
        summary="No run in the window shows how long the model takes to load (no Ready transition time, no "
        f"'Application startup complete.' in a log) and no usable estimate ({_why_no_estimate(facts)}), so "
        f"the {gate.kind} budget of {gate.budget.seconds} s could not be compared with the load.",
        objects=(facts.isvc_ref, facts.workload.ref),
        evidence=tuple([*facts.probe_lines(), *facts.load_lines()]),
        fix=Fix(
            what="Compare the budget with the time between 'Starting to load model' and 'Application startup "
            "complete.' in the server's log (kubectl logs --timestamps)."
        ),
    )


def _why_no_estimate(facts: ProbeFacts) -> str:
    passed = _passed_gate(facts)
    if facts.estimate is None or passed is None:
        return "no model size visible"
    return f"{passed}, which the estimate of {facts.estimate.seconds:.0f} s contradicts"


def _startup_handler(facts: ProbeFacts) -> dict[str, Any] | None:
    """The handler of a model-aware kubelet probe already declared, else an HTTP check of the server."""
    for kind in (STARTUP, LIVENESS, READINESS):
        for probe in facts.probes:
            if probe.kind == kind and probe.run_by == "kubelet" and probe.handler and facts.problem(probe) is None:
                return {probe.handler: dict(probe.action)}
    return new_probe(facts, STARTUP, {})


def _startup_fix(facts: ProbeFacts) -> Fix:
    """A startupProbe sized to the load; on Knative before 1.15, which rejects it, a delayed liveness probe."""
    knative = knative_version.serving_version(facts.evidence) if facts.serverless else None
    if knative is not None and knative.allows_startup_probe is False:
        return _liveness_delay_fix(facts, knative)
    fix = _startup_probe_fix(facts)
    if knative is None or knative.allows_startup_probe:
        return fix
    alternative = _liveness_delay_text(facts)
    caveat = (
        f" Knative accepts a startupProbe only from 1.15 (knative/serving PR #15309) and the version is not "
        f"visible here ({knative.source}); check it (kubectl get cm config-deployment -n "
        f"{facts.evidence.site.knative_namespace} --show-labels). On an older Knative its webhook rejects the "
        f"patch: {alternative}"
    )
    return replace(fix, what=fix.what + caveat)


def _liveness_delay_text(facts: ProbeFacts) -> str:
    delay = _liveness_delay(facts)
    if delay is None:
        return (
            "hold the livenessProbe back with an initialDelaySeconds above the measured load, and raise the progress "
            "deadline above it."
        )
    return (
        f"hold the livenessProbe back instead with initialDelaySeconds {delay[0]} ({delay[1]}), and keep the "
        f"progress deadline ({PROGRESS_DEADLINE_ANNOTATION}) above it."
    )


def _liveness_delay(facts: ProbeFacts) -> tuple[int, str] | None:
    """(initialDelaySeconds, how it is sized): the sized load with the startup margin, rounded up to a period."""
    sizing = facts.stats.sizing()
    if sizing is None:
        return None
    seconds, how = sizing
    liveness = next((p for p in facts.probes if p.kind == LIVENESS and p.run_by == "kubelet"), None)
    period = liveness.budget.period if liveness is not None else 10
    return period * load_time.startup_failure_threshold(seconds, period), f"{load_time.STARTUP_MARGIN}× {how}"


def _liveness_delay_fix(facts: ProbeFacts, knative: knative_version.KnativeVersion) -> Fix:
    """Knative before 1.15: no startupProbe, so the liveness probe waits out the load (knative/serving#10037)."""
    head = (
        f"{knative.describe()} rejects a startupProbe: its webhook accepts one only from 1.15 (knative/serving "
        "PR #15309; issue #10037). Upgrade Knative to use one; until then "
    )
    delay = _liveness_delay(facts)
    liveness = next((p for p in facts.probes if p.kind == LIVENESS and p.run_by == "kubelet"), None)
    if delay is None or liveness is None:
        return Fix(what=head + _liveness_delay_text(facts))
    seconds = delay[0]
    budget = ProbeBudget(
        LIVENESS, seconds, liveness.budget.period, liveness.budget.failure_threshold, liveness.budget.timeout
    )
    deadline = _progress_deadline_needed(facts, budget)
    what = head + (
        f"hold the livenessProbe back with initialDelaySeconds {seconds} ({delay[1]}), rounded up to a period. The "
        "price: a later run that hangs in its first minutes is restarted only after that delay. Readiness stays "
        "as it is: queue-proxy runs it and holds traffic back until the engine serves."
    )
    if deadline is not None:
        what += (
            f" Knative gives up on a revision that is not ready within its progress deadline ({deadline[1]}): the "
            f"patch also sets {PROGRESS_DEADLINE_ANNOTATION}: {deadline[0]}s on the InferenceService."
        )
    plan = set_probe_plan(
        facts,
        LIVENESS,
        {"initialDelaySeconds": seconds},
        timing_only=True,
        annotation=deadline[0] if deadline else None,
    )
    return Fix.from_plan(what, plan, no_patch=no_patch_reason(facts))


def _startup_probe_fix(facts: ProbeFacts) -> Fix:
    sizing = facts.stats.sizing()
    existing = next((probe for probe in facts.probes if probe.kind == STARTUP and probe.run_by == "kubelet"), None)
    period = existing.budget.period if existing is not None else 10
    if sizing is None:
        what = (
            "Add a startupProbe whose periodSeconds × failureThreshold covers the model load with 50 % margin; "
            "measure the load first (kubectl logs --timestamps: 'Starting to load model' to "
            "'Application startup complete.')."
        )
        return Fix.from_plan(what, None, no_patch=no_patch_reason(facts))
    seconds, how = sizing
    threshold = load_time.startup_failure_threshold(seconds, period)
    timings: dict[str, Any] = {"periodSeconds": period, "failureThreshold": threshold}
    budget = ProbeBudget(STARTUP, 0, period, threshold, existing.budget.timeout if existing else 1)
    deadline = _progress_deadline_needed(facts, budget)
    what = (
        f"{'Raise the startupProbe to' if existing else 'Add a startupProbe of'} periodSeconds {period} × failureThreshold "
        f"{threshold} = {period * threshold} s: {load_time.STARTUP_MARGIN}× the load it is sized from "
        f"({how}), rounded up to a period. The kubelet starts the liveness and readiness probes only once it "
        "passes, and a healthy engine passes it as soon as it serves, so a generous budget costs nothing."
    )
    if deadline is not None:
        what += (
            f" Knative gives up on a revision that is not ready within its progress deadline "
            f"({deadline[1]}): the patch also sets the annotation {PROGRESS_DEADLINE_ANNOTATION}: "
            f"{deadline[0]}s on the InferenceService, which KServe copies to the revision template."
        )
    if existing is not None:
        probe: dict[str, Any] | None = timings
    else:
        handler = _startup_handler(facts)
        probe = {**handler, **timings} if handler is not None else None
    plan = (
        set_probe_plan(
            facts, STARTUP, probe, timing_only=existing is not None, annotation=deadline[0] if deadline else None
        )
        if probe is not None
        else None
    )
    return Fix.from_plan(what, plan, no_patch=no_patch_reason(facts))


def _progress_deadline_needed(facts: ProbeFacts, budget: ProbeBudget) -> tuple[int, str] | None:
    """(seconds, current setting) when Serverless needs a longer progress deadline for ``budget``."""
    if not facts.serverless:
        return None
    current, source = _progress_deadline(facts)
    before_start = max((_seconds_before_start(load) for load in facts.loads), default=0.0)
    needed = math.ceil((budget.worst_case_seconds + before_start + 60) / 60) * 60
    return (needed, f"{current} s from {source}") if needed > current else None


def _progress_deadline(facts: ProbeFacts) -> tuple[int, str]:
    candidates = [
        (kube.annotations(facts.evidence.isvc).get(PROGRESS_DEADLINE_ANNOTATION), "the InferenceService annotation"),
    ]
    latest = common.latest_revision_name(facts.evidence)
    revision = common.named(facts.evidence, kinds.KNATIVE_REVISION, latest) if latest else None
    if revision is not None:
        candidates.append((kube.annotations(revision).get(PROGRESS_DEADLINE_ANNOTATION), "the Revision"))
    config = facts.evidence.config_map(facts.evidence.site.knative_namespace, "config-deployment")
    if config is not None:
        candidates.append(((config.get("data") or {}).get("progress-deadline"), "config-deployment"))
    for value, source in candidates:
        if value:
            try:
                return int(parse_duration(str(value)).total_seconds()), source
            except RunbookError:
                continue  # a malformed value: the next source decides
    return KNATIVE_PROGRESS_DEADLINE_SECONDS, "Knative's default"


def _seconds_before_start(load: PodLoad) -> float:
    """Scheduling and image pull before the first start (known only while the pod never restarted)."""
    created = parse_k8s_time(kube.created(load.pod))
    current = load.current
    if created is None or current is None or current.started_at is None or load.restarts:
        return 0.0
    return max(0.0, (current.started_at - created).total_seconds())


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")
