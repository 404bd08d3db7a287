"""Step 5, ``cold_start``: is scale-to-zero or a slow cold start behind the errors?

What it reads and why:

- **Scale bounds.** KServe writes ``autoscaling.knative.dev/min-scale`` from ``spec.predictor.minReplicas``
  (default 1) and ``max-scale`` from ``maxReplicas`` onto the Knative revision template, and copies the
  InferenceService's other annotations there (all but min-scale, max-scale and a few internal ones: KServe's
  ``ServiceAnnotationDisallowedList`` in pkg/constants, applied by the predictor reconciler). So the Revision's
  annotations are what is in effect, and the InferenceService's are what the next revision will carry.
  Scale-to-zero needs the KPA class (``autoscaling.knative.dev/class``, KServe's default
  ``kpa.autoscaling.knative.dev``) and ``enable-scale-to-zero`` (default "true") in ``config-autoscaler``;
  "Scale to zero can only be enabled if you are using the KnativePodAutoscaler" (knative.dev
  docs/serving/autoscaling/scale-to-zero). RawDeployment reaches zero only through KEDA: a ScaledObject's
  ``minReplicaCount`` defaults to 0, and KServe 0.15's keda class writes ``spec.predictor.minReplicas`` there, 0
  allowed (kserve/kserve pkg/controller/v1beta1/inferenceservice/reconcilers/keda/keda_reconciler.go).
- **config-autoscaler keys and defaults** (knative.dev docs/serving/autoscaling/scale-to-zero and
  scale-bounds): ``enable-scale-to-zero`` true, ``scale-to-zero-grace-period`` 30s,
  ``scale-to-zero-pod-retention-period`` 0s (annotation ``autoscaling.knative.dev/scale-to-zero-pod-retention-period``),
  ``scale-down-delay`` 0s (annotation ``autoscaling.knative.dev/scale-down-delay``, 0s ≤ value ≤ 1h; the
  camelCase spellings ``scaleDownDelay`` etc. are the older names), ``stable-window`` 60s, ``initial-scale`` 1.
- **Cold starts**, one per start: a pod's creation, or its serving container's restart, to the Ready that
  follows it, phase by phase (:mod:`nbhelpers.facts.pod_phases`). A readiness blip on a serving pod is no start,
  and a start the pod status cannot place is reported unknown, never measured from the pod's creation.
- **Timeouts in effect** for a request that arrives while no replica is ready: the activator holds it until
  the revision's ``timeoutSeconds`` (the activator honours the revision timeout since knative/serving#7999,
  and its response-start and idle timeouts since #13261), and every layer in front of it (client, edge,
  mesh) gives up at its own value: the chain is the one the ``timeouts`` step collects
  (:func:`nbhelpers.facts.timeout_layers.collect`). Knative's progress deadline (``serving.knative.dev/progress-deadline``,
  else ``config-deployment`` ``progress-deadline``, default 600s: knative.dev docs/serving/configuration/deployment)
  bounds the initial scale of a revision, and the KPA abandons an activation from zero that takes longer
  (knative/serving#4614).

Decisions:

- ``COLDSTART_SCALE_TO_ZERO``: the revision can reach zero and its cold start (measured, else a labelled
  estimate of the model load) is at least 30 s, or the shortest timeout on the request path when that is
  shorter. With KEDA it is critical when no trigger can wake the predictor from zero (every one reads the
  pods' own series or resource usage) and it sits at zero now. 30 s is about as long as an interactive caller waits before it retries or gives up, and GKE's
  backend default; every LLM with more than a couple of billion parameters loads for longer. Raised to
  critical when 5xx answers fall into the periods with no ready pod.
- ``COLDSTART_EXCEEDS_TIMEOUT``: compared with measurements only (p95 of completed cold starts, raised to
  the longest pod still starting), never with an estimate: against the progress deadline (Serverless), and,
  when the revision can reach zero, against the shortest finite timeout on the request path. A revision
  that failed with ProgressDeadlineExceeded counts when its cold start reached 90 % of the deadline.
  Requests that wait at capacity (``containerConcurrency`` > 0) are left to the ``scale_target`` step. In
  RawDeployment nothing holds a request while no pod is ready (it is refused at once), so only Serverless
  is compared.
- ``COLDSTART_CHURN``: at least two valleys (a fall in ready pods followed by a rise) in the window, leaving
  out valleys during which a container restarted (that is a crash, not a scale-down) and valleys that a rollout,
  an eviction or a lost node explains (:mod:`nbhelpers.facts.disruptions`). When only such dips remain, the
  finding is information that names what took the pods. When the scale-down
  delay in effect now covers the longest valley, the finding is reported as info: the settings would have
  held those pods.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from nbhelpers.errors import StepSkipped
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import autoscalers, common, disruptions, pod_phases, timeout_layers
from nbhelpers.facts import timeout_path as chain
from nbhelpers.facts.cold_starts import (
    MAX_LISTED,
    ScaleSettings,
    clock_text,
    cold_starts,
    errors_during,
    pod_timeline,
)
from nbhelpers.facts.pod_phases import Valley
from nbhelpers.findings import patches
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.findings.steps import StepInfo
from nbhelpers.metrics import triggers
from nbhelpers.models import kpa
from nbhelpers.sources import kinds, kube
from nbhelpers.util.times import duration_seconds

STEP = StepInfo(
    "cold_start",
    "Cold start",
    "Is scale-to-zero or a slow cold start behind the errors?",
)

PROGRESS_DEADLINE_ANNOTATION = "serving.knative.dev/progress-deadline"
KNATIVE_PROGRESS_DEADLINE = 600.0
# A Deployment's spec.progressDeadlineSeconds when unset (kubernetes.io/docs/concepts/workloads/controllers/deployment,
# "Progress Deadline Seconds": defaults to 600).
DEPLOYMENT_PROGRESS_DEADLINE = 600.0
MAX_SCALE_DOWN_DELAY = 3600  # Knative refuses a scale-down delay above 1h
# A cold start at least this long makes scale-to-zero a user-visible wait (see the module docstring).
LONG_COLD_START = 30.0
# A revision that failed its progress deadline is blamed on the cold start when it reached this share of it.
DEADLINE_SHARE = 0.9
# Recommended deadlines and delays keep this factor above what was measured, rounded up to whole minutes.
MARGIN = 1.5
MIN_VALLEYS = 2
# Why a fix has no patch: the InferenceService already asks for the change, and the revision in effect is older.
ALREADY_ASKED = (
    "The InferenceService already asks for this: it takes effect with the next revision KServe rolls out; check "
    "that one was created and became ready."
)


def run(evidence: Evidence) -> list[Finding]:
    common.skip_modelmesh(evidence)
    common.require_read(evidence, kinds.POD.key + " ")
    judge = ColdStartJudge(evidence)
    if evidence.target.is_llmisvc:
        llm = LlmColdStart(evidence, judge)
        found = [llm.scale_to_zero(), llm.exceeds_progress_deadline(), judge.churn()]
    else:
        found = [judge.scale_to_zero(), judge.exceeds_timeout(), judge.churn()]
    return [finding for finding in found if finding is not None]


# --- the step -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Limit:
    """A timeout a cold start is compared with."""

    name: str
    seconds: float
    source: str
    obj: str | None
    consequence: str

    def describe(self) -> str:
        where = f" on {self.obj}" if self.obj else ""
        return f"{self.name}{where}: {chain.format_seconds(self.seconds)} ({self.source})"


class ColdStartJudge:
    """The scale settings, cold starts, ready-pod timeline and timeouts in effect, and the findings they make."""

    def __init__(self, evidence: Evidence) -> None:
        self.evidence = evidence
        self.settings = ScaleSettings(evidence)
        self.cold = cold_starts(evidence)
        self.timeline = pod_timeline(evidence)
        self.zero_allowed, self.zero_reason = self.settings.zero_allowed()
        self.path = timeout_layers.collect(evidence)

    @property
    def isvc_ref(self) -> str:
        return kube.ref(self.evidence.isvc)

    def objects(self) -> tuple[str, ...]:
        revision = self.settings.revision
        return (self.isvc_ref,) + ((kube.ref(revision),) if revision is not None else ())

    # --- timeouts --------------------------------------------------------------------------------------

    def request_limit(self) -> Limit | None:
        """The shortest finite timeout a request waiting for a cold start meets (nothing flows back while
        it waits, so idle and first-byte timeouts count as much as request timeouts)."""
        finite = [layer for layer in self.path.layers if layer.seconds is not None]
        if not finite:
            return None
        layer = min(finite, key=lambda item: (item.seconds or 0.0, -item.tier))
        assert layer.seconds is not None
        consequence = (
            "a request that arrives while no replica is ready waits in the activator and is answered 504 when it fires"
            if layer.role == "knative"
            else "a request that arrives while no replica is ready is given up at this layer while it still waits"
        )
        return Limit(layer.name, layer.seconds, layer.source, layer.obj, consequence)

    def progress_deadline(self) -> Limit:
        revision = self.settings.revision
        candidates: list[tuple[str | None, str, str | None]] = []
        if revision is not None:
            candidates.append(
                (kube.annotations(revision).get(PROGRESS_DEADLINE_ANNOTATION), "annotation", kube.ref(revision))
            )
        candidates.append(
            (kube.annotations(self.evidence.isvc).get(PROGRESS_DEADLINE_ANNOTATION), "annotation", self.isvc_ref)
        )
        config = self.evidence.config_map(self.evidence.site.knative_namespace, "config-deployment")
        config_name = f"{self.evidence.site.knative_namespace}/config-deployment"
        candidates.append(
            (((config or {}).get("data") or {}).get("progress-deadline"), "progress-deadline", config_name)
        )
        seconds, source, obj = KNATIVE_PROGRESS_DEADLINE, "Knative's default", None
        for value, how, where in candidates:
            parsed = duration_seconds(value) if value else None
            if parsed:
                seconds = parsed
                source = f"{PROGRESS_DEADLINE_ANNOTATION} {how}" if how == "annotation" else f"{config_name} {how}"
                obj = where if how == "annotation" else None
                break
        return Limit(
            "Knative progress deadline",
            seconds,
            source,
            obj,
            "a revision whose pods are not ready within it fails ('Initial scale was never achieved'), and the "
            "autoscaler abandons an activation from zero that takes longer",
        )

    def threshold(self) -> tuple[float, str]:
        limit = self.request_limit()
        if limit is not None and limit.seconds < LONG_COLD_START:
            return limit.seconds, f"the shortest timeout on the request path, {limit.describe()}"
        return LONG_COLD_START, (
            f"{LONG_COLD_START:g} s, about as long as an interactive caller waits before it retries or gives up"
        )

    def failed_revisions(self) -> list[tuple[common.KubeObject, str]]:
        failed = []
        for revision in self.evidence.of(kinds.KNATIVE_REVISION):
            if not kube.is_predictor(revision):
                continue
            for condition in kube.conditions(revision):
                if condition.get("reason") == "ProgressDeadlineExceeded" and str(condition.get("status")) == "False":
                    failed.append((revision, kube.describe_condition(condition)))
                    break
        return failed

    # --- findings ---------------------------------------------------------------------------------------

    def scale_to_zero(self) -> Finding | None:
        if not self.zero_allowed:
            return None
        sizing = self.cold.sizing()
        if sizing is None:
            return None
        seconds, basis, estimated = sizing
        threshold, why = self.threshold()
        if seconds < threshold:
            return None
        errors = errors_during(self.evidence, self.timeline.zero_periods()) if self.timeline else None
        label = "estimated" if estimated else "measured"
        waits = (
            "waits for a new pod to be scheduled, pull its image and load the model"
            if self.settings.serverless
            else "finds no pod at all: nothing holds it in RawDeployment, so it fails until KEDA has activated the "
            "Deployment and a new pod has pulled its image and loaded the model"
        )
        summary = (
            f"The predictor can scale to zero ({self.zero_reason}), and a cold start takes {seconds:.0f} s "
            f"({label}: {basis}). Every request that arrives after an idle period {waits}; the threshold for a long "
            f"cold start is {why}."
        )
        severity = None
        scaled = self.settings.scaled_object
        trap = self._keda_cannot_wake()
        if trap and scaled is not None:
            summary += (
                f" Worse, no trigger of {scaled.ref} can wake it: {trap}. At zero replicas no pod exports those series, KEDA reads the empty answer as "
                "0 (ignoreNullValues defaults to true) and never activates: once at zero the service stays there."
            )
            if self._at_zero_now():
                severity = Severity.CRITICAL
                summary += " Raised to critical: the predictor has no ready pod now."
        if errors is not None:
            severity = Severity.CRITICAL
            summary += (
                f" Raised to critical: ≈{errors[0]:.0f} 5xx answers in the window fell into the periods with no ready "
                f"pod ({errors[1]})."
            )
        evidence = self.settings.lines() + self.cold.lines()
        if self.timeline is not None:
            evidence.append(self.timeline.describe())
            zero = self.timeline.zero_periods()
            if zero:
                evidence.append(
                    "no ready pod: "
                    + ", ".join(f"{clock_text(start)} … {clock_text(end)}" for start, end in zero[:MAX_LISTED])
                )
        if errors is not None:
            evidence.append(f"5xx while no pod was ready: {errors[1]}")
        if trap:
            evidence.append(f"triggers that cannot activate from zero: {trap}")
        if scaled is not None and scaled.owner is None:
            where = f"set {scaled.ref} spec.minReplicaCount to 1 (the ScaledObject is yours; KServe does not write it)"
            plan = patches.plan_patch(scaled.obj, _keep_one_keda_replica)
        else:
            where = "set spec.predictor.minReplicas to 1 (KServe writes it as the " + (
                "revision's min-scale)" if self.settings.serverless else "ScaledObject's minReplicaCount)"
            )
            plan = patches.plan_patch(self.evidence.isvc, _set_min_replicas)
        what = (
            f"Keep one replica warm: {where}. {self.gpu_cost()} If the cost is not acceptable, keep scale-to-zero but "
            "make the callers wait longer than the cold start (revision timeout, gateway and client timeouts) and "
            "shorten the load (image pre-pulled on the GPU nodes, weights on a local cache)."
        )
        if trap:
            what += (
                " To keep scaling to zero with KEDA, activate on a signal that exists without pods (the ingress or "
                "gateway request rate for this service, or KEDA's HTTP add-on, which also holds requests while it "
                "activates)."
            )
        return Finding(
            code="COLDSTART_SCALE_TO_ZERO",
            title=f"Scale-to-zero on an LLM whose cold start takes {seconds:.0f} s ({label})",
            summary=summary,
            objects=self.objects(),
            evidence=tuple(evidence),
            fix=Fix.from_plan(what, plan, no_patch=ALREADY_ASKED),
            severity=severity,
        )

    def exceeds_timeout(self) -> Finding | None:
        measured = self.cold.measured
        if measured is None or not self.settings.serverless:
            return None
        deadline = self.progress_deadline()
        limits = [deadline]
        request = self.request_limit() if self.zero_allowed else None
        if request is not None:
            limits.append(request)
        exceeded = [limit for limit in limits if measured > limit.seconds]
        failed = [
            (revision, condition)
            for revision, condition in self.failed_revisions()
            if measured >= DEADLINE_SHARE * deadline.seconds
        ]
        if failed and deadline not in exceeded:
            exceeded.append(deadline)
        if not exceeded:
            return None
        shortest = min(exceeded, key=lambda limit: limit.seconds)
        summary = (
            f"The cold start ({measured:.0f} s; {self.cold.describe_measured()}) is longer than "
            + "; and than ".join(f"{limit.describe()}: {limit.consequence}" for limit in exceeded)
            + "."
        )
        if failed:
            summary += " " + "; ".join(f"{kube.ref(rev)} failed: {condition}" for rev, condition in failed) + "."
        if request is not None and request in exceeded:
            summary += f" Scale-to-zero is on ({self.zero_reason}), so requests do wait for cold starts."
        evidence = [f"{limit.describe()}" for limit in limits]
        evidence += [f"{kube.ref(rev)}: {condition}" for rev, condition in failed]
        evidence += self.cold.lines()
        evidence += [f"request path: {layer.describe()}" for layer in self.path.layers]
        if self.timeline is not None:
            evidence.append(self.timeline.describe())
        raise_deadline = deadline in exceeded
        new_deadline = _round_up_minutes(measured * MARGIN)
        keep_warm = request is not None and request in exceeded

        def mutate(isvc: common.KubeObject) -> None:
            if keep_warm:
                _set_min_replicas(isvc)
            if raise_deadline:
                annotations = isvc.setdefault("metadata", {}).setdefault("annotations", {})
                annotations[PROGRESS_DEADLINE_ANNOTATION] = f"{new_deadline}s"

        what = []
        if keep_warm:
            what.append(
                "set spec.predictor.minReplicas to 1 so that requests never wait for a cold start from zero "
                f"({self.gpu_cost()})"
            )
        if raise_deadline:
            what.append(
                f"raise the progress deadline to {new_deadline} s ({MARGIN}× the measured {measured:.0f} s, in "
                f"whole minutes) with the annotation {PROGRESS_DEADLINE_ANNOTATION}, which KServe copies onto the "
                "revision"
            )
        return Finding(
            code="COLDSTART_EXCEEDS_TIMEOUT",
            title=f"Cold start ({measured:.0f} s) is longer than the {shortest.name} ({chain.format_seconds(shortest.seconds)})",
            summary=summary,
            objects=self.objects(),
            evidence=tuple(evidence),
            fix=Fix.from_plan(
                "On the InferenceService: " + "; and ".join(what) + ". Shortening the cold start itself (image "
                "pre-pulled on the GPU nodes, weights cached locally, a warm node pool) helps every case.",
                patches.plan_patch(self.evidence.isvc, mutate),
                no_patch=ALREADY_ASKED,
            ),
        )

    def churn(self) -> Finding | None:
        if self.timeline is None:
            return None
        dips = self.timeline.churn()
        found = disruptions.disruptions(self.evidence)
        slack = 2 * self.timeline.step
        explained = {
            dip: causes for dip in dips if (causes := disruptions.explaining(found, dip.fell_at, dip.rose_at, slack))
        }
        valleys = [dip for dip in dips if dip not in explained]
        if len(valleys) < MIN_VALLEYS:
            return self._not_churn(explained) if len(dips) >= MIN_VALLEYS else None
        longest = max(valley.seconds for valley in valleys)
        errors = errors_during(self.evidence, [(v.fell_at, v.rose_at) for v in valleys])
        cold = self.cold.sizing()
        summary = (
            f"The ready pods fell and came back {len(valleys)} times in the window (the longest dip lasted "
            f"{longest:.0f} s): capacity was released and needed again, and every new pod paid the cold start"
            + (f" ({cold[0]:.0f} s, {'estimated' if cold[2] else 'measured'})" if cold else "")
            + " while the requests that needed it waited or failed."
        )
        evidence = [self.timeline.describe()]
        evidence += [f"scale-down then up: {valley.describe()}" for valley in valleys[:MAX_LISTED]]
        crash_valleys = [v for v in self.timeline.all_valleys() if self.timeline.restart_valley(v)]
        if crash_valleys:
            evidence.append(
                f"not counted: {len(crash_valleys)} dip(s) with a container restart (a crash, not a scale-down)"
            )
        if not self.timeline.restarts_known:
            evidence.append("restart counters not available: dips caused by crashes cannot be told apart")
        evidence += [_explained_line(dip, causes) for dip, causes in explained.items()]
        if not self.evidence.target.is_llmisvc:
            evidence += self.settings.lines()
        severity = None
        if errors is not None:
            severity = Severity.CRITICAL
            summary += f" Raised to critical: ≈{errors[0]:.0f} 5xx answers fell into the dips ({errors[1]})."
            evidence.append(f"5xx during the dips: {errors[1]}")
        unpatched_fix = self._churn_fix_without_patch(longest)
        if unpatched_fix is not None:
            return Finding(
                code="COLDSTART_CHURN",
                title=f"Ready pods fell and came back {len(valleys)} times in the window",
                summary=summary,
                objects=(self.isvc_ref,),
                evidence=tuple(evidence),
                fix=Fix(what=unpatched_fix),
                severity=severity,
            )
        delay, setting = self.settings.scale_down_delay()
        if delay >= longest:
            return Finding(
                code="COLDSTART_CHURN",
                title=f"Ready pods fell and came back {len(valleys)} times; the scale-down delay now in effect covers it",
                summary=summary
                + f" The scale-down delay now in effect ({setting.describe()}) is longer than the longest "
                "dip, so these pods would have been held: the churn predates that setting.",
                objects=self.objects(),
                evidence=tuple(evidence),
                fix=Fix(what="Nothing to change: confirm over the next window that the dips are gone."),
                severity=Severity.INFO,
            )
        wanted = min(_round_up_minutes(longest * MARGIN), MAX_SCALE_DOWN_DELAY)

        def mutate(isvc: common.KubeObject) -> None:
            annotations = isvc.setdefault("metadata", {}).setdefault("annotations", {})
            for legacy in kpa.SCALE_DOWN_DELAY_KEYS[1:]:
                annotations.pop(legacy, None)
            annotations[kpa.SCALE_DOWN_DELAY_KEYS[0]] = f"{wanted}s"

        capped = " (Knative's maximum)" if wanted == MAX_SCALE_DOWN_DELAY else ""
        return Finding(
            code="COLDSTART_CHURN",
            title=f"Ready pods fell and came back {len(valleys)} times in the window",
            summary=summary + f" The scale-down delay in effect is {setting.describe()}.",
            objects=self.objects(),
            evidence=tuple(evidence),
            fix=Fix.from_plan(
                f"Hold capacity for {wanted} s{capped} after the load drops before scaling down: the annotation "
                f"{kpa.SCALE_DOWN_DELAY_KEYS[0]} ({MARGIN}× the longest dip, in whole minutes) on the InferenceService, "
                "which KServe copies onto the revision template. Unlike minReplicas it still scales down when the "
                "load stays low.",
                patches.plan_patch(self.evidence.isvc, mutate),
                no_patch=ALREADY_ASKED,
            ),
            severity=severity,
        )

    def _churn_fix_without_patch(self, longest: float) -> str | None:
        """What to change where the scale-down delay is not an InferenceService annotation the tool can patch
        (an LLMInferenceService's spec.scaling, KServe's HPA on RawDeployment); None on Serverless (KPA)."""
        if self.evidence.target.is_llmisvc:
            return (
                "The autoscaler releases pods that take this long to start: in the LLMInferenceService's "
                f"spec.scaling (spec.prefill.scaling for prefill pods) keep them longer than {longest:.0f} s "
                "(keda.cooldownPeriod for KEDA, wva.hpa.behavior.scaleDown.stabilizationWindowSeconds for the "
                "HPA), or raise minReplicas to the count the dips fall from. KServe renders the ScaledObject or "
                "HPA from that spec (pkg/controller/v1alpha2/llmisvc/scaling.go). (No patch yet for an "
                "LLMInferenceService.)"
            )
        if not self.settings.serverless:
            return (
                "The HPA scales down too soon for pods that take this long to start: lengthen its scale-down "
                f"stabilization (behavior.scaleDown.stabilizationWindowSeconds) beyond {longest:.0f} s, or raise "
                "spec.predictor.minReplicas to the count the dips fall from. The HPA belongs to KServe, so its "
                "behavior is set where the scale_target step says (no patch here)."
            )
        return None

    def _not_churn(self, explained: dict[Valley, list[disruptions.Disruption]]) -> Finding:
        """The ready pods dipped, but a rollout, an eviction or a lost node took them: say so, as information."""
        kinds_seen = sorted({cause.kind for causes in explained.values() for cause in causes})
        names = {disruptions.ROLLOUT: "rollouts", disruptions.EVICTION: "evictions", disruptions.NODE: "lost nodes"}
        what = " and ".join(names[kind] for kind in kinds_seen)
        advice = []
        if disruptions.ROLLOUT in kinds_seen and self.evidence.target.is_llmisvc:
            advice.append(
                "for rollouts, enough replicas that the Deployment's rolling update (maxUnavailable 25 % by default) "
                "always leaves a ready vLLM pod"
            )
        elif disruptions.ROLLOUT in kinds_seen:
            advice.append(
                "for rollouts, a strategy that starts the new pod before it stops an old one (maxUnavailable 0 "
                "and maxSurge 1 in spec.predictor.deploymentStrategy in RawDeployment; Knative keeps the old "
                "revision until the new one is ready)"
            )
        if disruptions.EVICTION in kinds_seen or disruptions.NODE in kinds_seen:
            advice.append(
                "for evictions and lost nodes, a PodDisruptionBudget on the predictor pods, and on-demand rather "
                "than spot GPU nodes for the last replicas"
            )
        assert self.timeline is not None
        return Finding(
            code="COLDSTART_CHURN",
            title=f"Ready pods dipped {_times(len(explained))}, from {what}, not from scaling down",
            summary=f"The ready pods fell and came back {_times(len(explained))} in the window, but each such dip lines up "
            f"with {what}: the pods were replaced or taken away, not released by the autoscaler, so its scale-down "
            "settings are not the cause and lengthening them would not help.",
            objects=self.objects(),
            evidence=(self.timeline.describe(), *(_explained_line(dip, causes) for dip, causes in explained.items())),
            fix=Fix(
                what="Nothing to change in the autoscaler. To keep capacity through such events: "
                + "; ".join(advice)
                + "."
            ),
            severity=Severity.INFO,
        )

    def _keda_cannot_wake(self) -> str:
        """When every trigger of the predictor's ScaledObject reads something that only exists while pods run
        (cpu/memory, or a prometheus query on the vLLM pods' own series), what they read; else ``""``.

        KEDA activates a ScaledObject at zero only from a trigger whose value exceeds its activation threshold
        (keda.sh docs/concepts/scaling-deployments); a query on ``vllm:*`` has no series with no pod
        (llm-d/llm-d PR #2492 met the same with the EPP's queue metric)."""
        scaled = self.settings.scaled_object
        if scaled is None or not scaled.metrics:
            return ""
        blind = []
        for metric in scaled.metrics:
            if metric.trigger in autoscalers.KEDA_RESOURCE_TRIGGERS:
                blind.append(f"{metric.trigger} (pod resource usage)")
                continue
            query = metric.trigger_metadata.get("query", "") if metric.trigger == "prometheus" else ""
            series = triggers.pod_series(query)
            if not series:
                return ""
            blind.append(f"prometheus query on {', '.join(series)}")
        return "; ".join(blind)

    def _at_zero_now(self) -> bool:
        if any(kube.pod_ready(pod) for pod in common.predictor_pods(self.evidence)):
            return False
        return self.timeline is None or not self.timeline.samples or self.timeline.samples[-1][1] <= 0

    def gpu_cost(self) -> str:
        try:
            workload = common.current_workload(self.evidence)
        except StepSkipped:
            return "Cost: the GPUs of one replica stay allocated around the clock."
        devices = common.accelerator_requests(workload.serving)
        if not devices:
            return "Cost: one replica stays allocated around the clock."
        held = ", ".join(f"{count}× {name}" for name, count in sorted(devices.items()))
        hours = sum(devices.values()) * 730
        return f"Cost: one replica holds {held} around the clock (≈{hours} GPU-hours a month) even with no traffic."


# --- an LLMInferenceService ---------------------------------------------------------------------------------------


class LlmColdStart:
    """Scale-to-zero and the progress deadline for an LLMInferenceService's vLLM Deployments.

    KServe renders ``<name>-kserve`` (and ``<name>-kserve-prefill``) as plain Deployments: no activator holds a
    request while no pod is ready. spec.scaling makes a KEDA ScaledObject ``<name>-kserve-keda``
    (``<name>-kserve-prefill-keda``) with ``minReplicaCount`` = spec.scaling.minReplicas (default 1) and the user's
    ``idleReplicaCount``, or a WVA HPA ``<name>-kserve-hpa`` (minReplicas at least 1)
    (pkg/controller/v1alpha2/llmisvc/scaling.go). KServe copies a Deployment's ``Progressing=False`` condition into
    MainWorkloadReady / PrefillWorkloadReady (propagateWorkloadDeploymentStatus in workload_single_node.go)."""

    def __init__(self, evidence: Evidence, judge: ColdStartJudge) -> None:
        self.evidence = evidence
        self.judge = judge
        name = evidence.target.isvc
        self.deployments = sorted(
            (
                obj
                for obj in evidence.of(kinds.DEPLOYMENT)
                if kube.namespace(obj) == evidence.target.namespace
                and kube.name(obj) in (f"{name}-kserve", f"{name}-kserve-prefill")
            ),
            key=kube.name,
        )

    def scaled_to_zero(self) -> list[tuple[common.KubeObject, str]]:
        """ScaledObjects on the vLLM Deployments that may take them to zero, with the field that allows it."""
        found = []
        workloads = {f"{self.evidence.target.isvc}-kserve", f"{self.evidence.target.isvc}-kserve-prefill"}
        for obj in self.evidence.of(kinds.SCALED_OBJECT):
            spec = kube.spec(obj)
            if kube.namespace(obj) != self.evidence.target.namespace:
                continue
            if (spec.get("scaleTargetRef") or {}).get("name") not in workloads:
                continue
            for field_name in ("minReplicaCount", "idleReplicaCount"):
                if spec.get(field_name) == 0:
                    found.append((obj, f"{field_name} 0"))
                    break
        return found

    def scale_to_zero(self) -> Finding | None:
        zero = self.scaled_to_zero()
        sizing = self.judge.cold.sizing()
        if not zero or sizing is None or sizing[0] < LONG_COLD_START:
            return None
        seconds, basis, estimated = sizing
        names = ", ".join(f"{kube.ref(obj)} ({why})" for obj, why in zero)
        return Finding(
            code="COLDSTART_SCALE_TO_ZERO",
            title=f"vLLM can scale to zero with a {seconds:.0f} s cold start ({'estimated' if estimated else 'measured'})",
            summary=f"KEDA may scale the vLLM Deployment to zero ({names}), and a cold start takes {seconds:.0f} s "
            f"({basis}). Nothing holds a request while no vLLM pod is ready: the InferencePool has no endpoint, so "
            "the first requests after an idle period fail until KEDA has activated the Deployment and a new pod has "
            "loaded the model.",
            objects=(self.judge.isvc_ref, *(kube.ref(obj) for obj, _ in zero)),
            evidence=(*(f"{kube.ref(obj)}: {why}" for obj, why in zero), *self.judge.cold.lines()),
            fix=Fix(
                what="Keep a replica warm: remove idleReplicaCount 0 from spec.scaling.keda (or spec.scaling.wva.keda; "
                "spec.prefill.scaling for prefill pods), so that KEDA stops at minReplicas (at least 1), unless callers "
                f"can wait a cold start. {self.judge.gpu_cost()} (No patch yet for an LLMInferenceService.)"
            ),
        )

    def rollout_cold_start(self) -> float | None:
        """p95 of the cold starts from a pod's creation, raised to the longest such start still running. A container
        restart in a running pod is no rollout: the Deployment stays Progressing=True through it."""
        firsts = [pod for pod in self.judge.cold.pods if pod.start != pod_phases.RESTART]
        totals = pod_phases.Distribution.of([total for pod in firsts if (total := pod.total) is not None])
        running = [bound for pod in firsts if (bound := pod.starting_for) is not None]
        values = [value for value in (totals.p95 if totals else None, max(running, default=None)) if value is not None]
        return max(values) if values else None

    def exceeds_progress_deadline(self) -> Finding | None:
        measured = self.rollout_cold_start()
        if measured is None or not self.deployments:
            return None
        over = []
        for deployment in self.deployments:
            deadline = float(kube.spec(deployment).get("progressDeadlineSeconds") or DEPLOYMENT_PROGRESS_DEADLINE)
            failed = [
                kube.describe_condition(condition)
                for condition in kube.conditions(deployment)
                if condition.get("type") == "Progressing"
                and str(condition.get("status")) == "False"
                and condition.get("reason") == "ProgressDeadlineExceeded"
            ]
            if measured > deadline or (failed and measured >= DEADLINE_SHARE * deadline):
                over.append((deployment, deadline, failed))
        if not over:
            return None
        deadline = min(seconds for _, seconds, _ in over)
        raised = _round_up_minutes(measured * MARGIN)
        lines = [
            f"Deployment {kube.name(obj)} progressDeadlineSeconds: {seconds:.0f}"
            + ("" if kube.spec(obj).get("progressDeadlineSeconds") else " (Kubernetes' default)")
            for obj, seconds, _ in over
        ]
        lines += [f"Deployment {kube.name(obj)}: {condition}" for obj, _, failed in over for condition in failed]
        return Finding(
            code="COLDSTART_EXCEEDS_TIMEOUT",
            title=f"Cold start ({measured:.0f} s) is longer than the Deployment's progress deadline ({deadline:.0f} s)",
            summary=f"A vLLM pod takes {measured:.0f} s from its start to Ready ({self.judge.cold.describe_measured()}), "
            f"longer than the progress deadline of its Deployment ({deadline:.0f} s). Kubernetes then marks every "
            "rollout failed (Progressing=False, ProgressDeadlineExceeded) although the pods keep loading, and KServe "
            "may copy that reason into the service's MainWorkloadReady / PrefillWorkloadReady; rollout checks and "
            "GitOps tools read a failure (kserve/kserve#5684). The pods are not stopped, so requests are not lost by this alone.",
            objects=(self.judge.isvc_ref, *(kube.ref(obj) for obj, _, _ in over)),
            evidence=tuple(lines + self.judge.cold.lines()),
            fix=Fix(
                what=f"Raise the Deployment's spec.progressDeadlineSeconds to {raised} s ({MARGIN}× the measured "
                f"{measured:.0f} s, in whole minutes). The LLMInferenceService has no field for it: patch the "
                "Deployment KServe renders and check that the value survives KServe's next reconcile. A shorter "
                "cold start (weights cached on the node, image pre-pulled) helps as well.",
            ),
            severity=Severity.WARNING,
        )


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def _explained_line(dip: Valley, causes: list[disruptions.Disruption]) -> str:
    return f"not counted: dip {dip.describe()}: " + "; ".join(cause.text for cause in causes[:3])


def _keep_one_keda_replica(scaled_object: common.KubeObject) -> None:
    spec = scaled_object.setdefault("spec", {})
    spec["minReplicaCount"] = 1
    spec.pop("idleReplicaCount", None)
    scaled_object.pop("status", None)


def _set_min_replicas(isvc: common.KubeObject) -> None:
    isvc.setdefault("spec", {}).setdefault("predictor", {})["minReplicas"] = 1


def _round_up_minutes(seconds: float) -> int:
    return int(math.ceil(seconds / 60.0) * 60)
