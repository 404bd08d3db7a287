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
  docs/serving/autoscaling/scale-to-zero). RawDeployment never scales to zero (DESIGN §6).
- **config-autoscaler keys and defaults** (knative.dev docs/serving/autoscaling/scale-to-zero and
  scale-bounds): ``enable-scale-to-zero`` true, ``scale-to-zero-grace-period`` 30s,
  ``scale-to-zero-pod-retention-period`` 0s (annotation ``autoscaling.knative.dev/scale-to-zero-pod-retention-period``),
  ``scale-down-delay`` 0s (annotation ``autoscaling.knative.dev/scale-down-delay``, 0s ≤ value ≤ 1h; the
  camelCase spellings ``scaleDownDelay`` etc. are the older names), ``stable-window`` 60s, ``initial-scale`` 1.
- **Cold starts** per pod, phase by phase (:mod:`nbhelpers.facts.pod_phases`).
- **Timeouts in effect** for a request that arrives while no replica is ready: the activator holds it until
  the revision's ``timeoutSeconds`` (the activator honours the revision timeout since knative/serving#7999,
  and its response-start and idle timeouts since #13261), and every layer in front of it (client, edge,
  mesh) gives up at its own value: the chain is the one the ``timeouts`` step collects
  (:func:`nbhelpers.checks.timeouts.collect`). Knative's progress deadline (``serving.knative.dev/progress-deadline``,
  else ``config-deployment`` ``progress-deadline``, default 600s: knative.dev docs/serving/configuration/deployment)
  bounds the initial scale of a revision, and the KPA abandons an activation from zero that takes longer
  (knative/serving#4614).

Decisions:

- ``COLDSTART_SCALE_TO_ZERO``: the revision can reach zero and its cold start (measured, else a labelled
  estimate of the model load) is at least 30 s, or the shortest timeout on the request path when that is
  shorter. 30 s is about as long as an interactive caller waits before it retries or gives up, and GKE's
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
  out valleys during which a container restarted (that is a crash, not a scale-down). When the scale-down
  delay in effect now covers the longest valley, the finding is reported as info: the settings would have
  held those pods.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from nbhelpers.checks import timeouts
from nbhelpers.errors import StepSkipped
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common, pod_phases, vllm_args
from nbhelpers.facts import timeout_path as chain
from nbhelpers.facts.pod_phases import Distribution, PodPhases, Valley
from nbhelpers.findings import patches
from nbhelpers.findings.model import Finding, Patch, Severity
from nbhelpers.findings.steps import StepInfo
from nbhelpers.metrics.series import MetricData
from nbhelpers.models import load_time
from nbhelpers.sources import kinds, kube
from nbhelpers.util.times import duration_seconds, format_time

STEP = StepInfo(
    "cold_start",
    "Cold start",
    "Is scale-to-zero or a slow cold start behind the errors?",
)

MIN_SCALE = ("autoscaling.knative.dev/min-scale", "autoscaling.knative.dev/minScale")
MAX_SCALE = ("autoscaling.knative.dev/max-scale", "autoscaling.knative.dev/maxScale")
INITIAL_SCALE = ("autoscaling.knative.dev/initial-scale", "autoscaling.knative.dev/initialScale")
SCALE_DOWN_DELAY = ("autoscaling.knative.dev/scale-down-delay", "autoscaling.knative.dev/scaleDownDelay")
RETENTION = (
    "autoscaling.knative.dev/scale-to-zero-pod-retention-period",
    "autoscaling.knative.dev/scaleToZeroPodRetentionPeriod",
)
CLASS = ("autoscaling.knative.dev/class",)
METRIC = ("autoscaling.knative.dev/metric",)
TARGET = ("autoscaling.knative.dev/target",)
KPA_CLASS = "kpa.autoscaling.knative.dev"
KSERVE_AUTOSCALER_CLASS = "serving.kserve.io/autoscalerClass"
PROGRESS_DEADLINE_ANNOTATION = "serving.knative.dev/progress-deadline"
KNATIVE_PROGRESS_DEADLINE = 600.0
KSERVE_DEFAULT_MIN_REPLICAS = 1
MAX_SCALE_DOWN_DELAY = 3600  # Knative refuses a scale-down delay above 1h
# A cold start at least this long makes scale-to-zero a user-visible wait (see the module docstring).
LONG_COLD_START = 30.0
# A revision that failed its progress deadline is blamed on the cold start when it reached this share of it.
DEADLINE_SHARE = 0.9
# Recommended deadlines and delays keep this factor above what was measured, rounded up to whole minutes.
MARGIN = 1.5
MIN_VALLEYS = 2
MAX_LISTED = 6


def run(evidence: Evidence) -> list[Finding]:
    common.skip_modelmesh(evidence)
    common.require_read(evidence, kinds.POD.key + " ")
    context = _Context(evidence)
    found = [context.scale_to_zero(), context.exceeds_timeout(), context.churn()]
    return [finding for finding in found if finding is not None]


# --- scale settings ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    label: str
    value: str
    source: str

    def describe(self) -> str:
        return f"{self.label}: {self.value} ({self.source})"


class ScaleSettings:
    """Autoscaling settings in effect: the Revision's annotations, the InferenceService, config-autoscaler,
    defaults, in that order."""

    def __init__(self, evidence: Evidence) -> None:
        self.evidence = evidence
        self.serverless = common.effective_mode(evidence) == common.SERVERLESS
        self.predictor: Mapping[str, Any] = kube.spec(evidence.isvc).get("predictor") or {}
        latest = common.latest_revision_name(evidence) if self.serverless else None
        self.revision = common.named(evidence, kinds.KNATIVE_REVISION, latest) if latest else None
        config = evidence.config_map(evidence.site.knative_namespace, "config-autoscaler")
        self.config: Mapping[str, str] = dict((config or {}).get("data") or {})
        self.config_name = f"{evidence.site.knative_namespace}/config-autoscaler"
        self.config_seen = config is not None

    @property
    def isvc_ref(self) -> str:
        return kube.ref(self.evidence.isvc)

    def _annotation(self, keys: Sequence[str], config_key: str | None, default: str) -> Setting:
        label = keys[0].split("/", 1)[1]
        sources: list[tuple[Mapping[str, str], str]] = []
        if self.revision is not None:
            sources.append((kube.annotations(self.revision), f"annotation on {kube.ref(self.revision)}"))
        sources.append((kube.annotations(self.evidence.isvc), "InferenceService annotation"))
        for written, where in sources:
            for key in keys:
                if written.get(key) not in (None, ""):
                    return Setting(label, str(written[key]), f"{where} {key}")
        if config_key is not None and self.config.get(config_key) not in (None, ""):
            return Setting(label, str(self.config[config_key]), f"{self.config_name} {config_key}")
        return Setting(
            label, default, "Knative's default" + ("" if self.config_seen else ", config-autoscaler not seen")
        )

    def min_replicas(self) -> tuple[int, str]:
        declared = self.predictor.get("minReplicas")
        if self.serverless and self.revision is not None:
            for key in MIN_SCALE:
                value = _integer(kube.annotations(self.revision).get(key))
                if value is not None:
                    source = f"{key} on {kube.ref(self.revision)}"
                    if isinstance(declared, int) and declared != value:
                        source += f"; the InferenceService now asks for minReplicas {declared} (next revision)"
                    return value, source
        if isinstance(declared, int):
            return declared, "spec.predictor.minReplicas"
        return KSERVE_DEFAULT_MIN_REPLICAS, "KServe's default: spec.predictor.minReplicas is not set"

    def autoscaler_class(self) -> str:
        if self.serverless:
            return self._annotation(CLASS, None, KPA_CLASS).value
        return kube.annotations(self.evidence.isvc).get(KSERVE_AUTOSCALER_CLASS, "hpa")

    def zero_allowed(self) -> tuple[bool, str]:
        """Whether the revision can scale to zero, and why (or why not)."""
        if not self.serverless:
            return False, "RawDeployment: KServe never scales the predictor to zero"
        minimum, source = self.min_replicas()
        if minimum > 0:
            return False, f"min-scale {minimum} ({source})"
        autoscaler = self.autoscaler_class()
        if autoscaler != KPA_CLASS:
            return False, f"autoscaler class {autoscaler}: only the KPA scales to zero"
        enabled = self.config.get("enable-scale-to-zero", "true").strip().lower() != "false"
        if not enabled:
            return False, f"{self.config_name} enable-scale-to-zero is false: Knative keeps one replica"
        return True, f"min-scale 0 ({source}), class {autoscaler}, enable-scale-to-zero true"

    def scale_down_delay(self) -> tuple[float, Setting]:
        setting = self._annotation(SCALE_DOWN_DELAY, "scale-down-delay", "0s")
        return duration_seconds(setting.value) or 0.0, setting

    def lines(self) -> list[str]:
        minimum, min_source = self.min_replicas()
        lines = [f"min replicas: {minimum} ({min_source})"]
        maximum = self.predictor.get("maxReplicas")
        lines.append(f"max replicas: {maximum if maximum else 'no limit'} (spec.predictor.maxReplicas)")
        for field in ("scaleMetric", "scaleTarget", "containerConcurrency"):
            if self.predictor.get(field) is not None:
                lines.append(f"{field}: {self.predictor[field]} (spec.predictor.{field})")
        if not self.serverless:
            lines.append(f"autoscaler class: {self.autoscaler_class()} ({KSERVE_AUTOSCALER_CLASS})")
            return lines
        settings = [
            self._annotation(CLASS, None, KPA_CLASS),
            self._annotation(METRIC, None, "concurrency"),
            self._annotation(TARGET, "container-concurrency-target-default", "100"),
            self._annotation(INITIAL_SCALE, "initial-scale", "1"),
            self._annotation(SCALE_DOWN_DELAY, "scale-down-delay", "0s"),
            self._annotation(RETENTION, "scale-to-zero-pod-retention-period", "0s"),
        ]
        lines += [setting.describe() for setting in settings]
        for key, default in (
            ("enable-scale-to-zero", "true"),
            ("scale-to-zero-grace-period", "30s"),
            ("stable-window", "60s"),
        ):
            value = self.config.get(key)
            lines.append(f"{key}: {value} ({self.config_name})" if value else f"{key}: {default} (Knative's default)")
        return lines


def _integer(value: object) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


# --- cold starts ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ColdStarts:
    """Every predictor pod's cold start, and what they say together."""

    pods: tuple[PodPhases, ...]
    estimate: load_time.LoadEstimate | None

    @property
    def totals(self) -> Distribution | None:
        return Distribution.of([total for pod in self.pods if (total := pod.total) is not None])

    @property
    def lower_bound(self) -> float | None:
        """The longest cold start still in progress."""
        return max((bound for pod in self.pods if (bound := pod.starting_for) is not None), default=None)

    @property
    def measured(self) -> float | None:
        """p95 of the completed cold starts, raised to the longest one still in progress."""
        values = [value for value in (self.totals.p95 if self.totals else None, self.lower_bound) if value is not None]
        return max(values) if values else None

    def sizing(self) -> tuple[float, str, bool] | None:
        """(seconds, how known, estimated?) for judging the cold start: a measurement, else the estimate."""
        measured = self.measured
        if measured is not None:
            return measured, self.describe_measured(), False
        if self.estimate is not None:
            return self.estimate.seconds, f"{self.estimate.basis}; scheduling and image pull not included", True
        return None

    def describe_measured(self) -> str:
        parts = []
        if self.totals is not None:
            parts.append(f"completed cold starts (created → Ready) {self.totals.describe()}")
        if self.lower_bound is not None:
            parts.append(f"a pod still starting after {self.lower_bound:.0f} s (a lower bound)")
        return "; ".join(parts) or "no cold start measured"

    def lines(self) -> list[str]:
        lines = [self.describe_measured()]
        for name, distribution in pod_phases.phase_distributions(self.pods):
            lines.append(f"phase {name}: {distribution.describe()}")
        listed = sorted(self.pods, key=lambda pod: -(pod.total or pod.starting_for or 0.0))
        lines += [pod.describe() for pod in listed[:MAX_LISTED]]
        if len(listed) > MAX_LISTED:
            lines.append(f"… and {len(listed) - MAX_LISTED} more pod(s)")
        if self.measured is None and self.estimate is not None:
            lines.append(f"estimated model load: {self.estimate.basis}")
        return lines


def cold_starts(evidence: Evidence) -> ColdStarts:
    """Every predictor pod's phases (the pods listed now; pods that are gone only show in the timeline)."""
    pods = []
    for pod in common.predictor_pods(evidence):
        serving = common.serving_container(kube.spec(pod))
        if serving is not None:
            pods.append(
                pod_phases.measure_pod(
                    pod, evidence.events_about("Pod", kube.name(pod)), str(serving.get("name")), evidence.observed_at
                )
            )
    return ColdStarts(tuple(pods), _estimate(evidence))


def _estimate(evidence: Evidence) -> load_time.LoadEstimate | None:
    """The model load estimated from a parameter count in the model's name (flags, storageUri)."""
    names: list[str] = []
    try:
        workload = common.current_workload(evidence)
    except StepSkipped:
        workload = None
    if workload is not None:
        server = vllm_args.parse_container(workload.serving)
        names += [v for v in (server.flag("model"), server.flag("served-model-name")) if v]
        names += list(server.argv)
    predictor = kube.spec(evidence.isvc).get("predictor") or {}
    for key in ("model", "huggingface"):
        uri = (predictor.get(key) or {}).get("storageUri")
        if uri:
            names.append(str(uri))
    return load_time.estimate_from_names(names)


# --- the pod-count timeline -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PodTimeline:
    """Ready predictor pods over the window (``pod_ready``, else available replicas of the Deployments)."""

    metric: str
    samples: tuple[tuple[float, float], ...]
    step: float
    restarts_at: tuple[float, ...]
    restarts_known: bool

    def all_valleys(self) -> list[Valley]:
        return pod_phases.valleys(self.samples)

    def restart_valley(self, valley: Valley) -> bool:
        return any(valley.fell_at - self.step <= moment <= valley.rose_at for moment in self.restarts_at)

    def churn(self) -> list[Valley]:
        return [valley for valley in self.all_valleys() if not self.restart_valley(valley)]

    def zero_periods(self) -> list[tuple[float, float]]:
        """[first sample at zero, first sample back above zero] (the window's end when it never came back)."""
        periods: list[tuple[float, float]] = []
        start: float | None = None
        for moment, value in self.samples:
            if value <= 0 and start is None:
                start = moment
            elif value > 0 and start is not None:
                periods.append((start, moment))
                start = None
        if start is not None:
            periods.append((start, self.samples[-1][0] + self.step))
        return periods

    def describe(self) -> str:
        steps = pod_phases.changes(self.samples)
        text = ", ".join(f"{value:g} at {_clock(moment)}" for moment, value in steps[:16])
        if len(steps) > 16:
            text += f", … ({len(steps) - 16} more changes)"
        return f"ready pods over time ({self.metric}, step {self.step:g} s): {text}"


def pod_timeline(evidence: Evidence) -> PodTimeline | None:
    for metric in ("pod_ready", "deployment_available_replicas"):
        data = evidence.metrics.get(metric)
        if data is None or data.status != "ok" or not data.series:
            continue
        samples = pod_phases.sum_series(series.samples for series in data.series)
        if metric == "pod_ready":
            samples = pod_phases.fill_gaps(samples, data.step)
        restarts = evidence.metrics.get("pod_restarts")
        restarts_at = tuple(
            moment
            for series in (restarts.series if restarts is not None and restarts.status == "ok" else ())
            for moment in pod_phases.increases(series.samples)
        )
        known = restarts is not None and restarts.status in ("ok", "empty")
        return PodTimeline(metric, tuple(samples), float(data.step), restarts_at, known)
    return None


def _clock(moment: float) -> str:
    return format_time(datetime.fromtimestamp(moment, tz=timezone.utc))


# --- 5xx answers ----------------------------------------------------------------------------------------

# (query id, label holding the status code, where the answers were counted)
_ERROR_SOURCES = (
    ("knative_requests_by_code", "response_code", "Knative (activator / queue-proxy)"),
    ("istio_requests_by_code", "response_code", "Istio"),
    ("nginx_requests_by_status", "status", "ingress-nginx"),
)


def errors_during(evidence: Evidence, periods: Sequence[tuple[float, float]]) -> tuple[float, str] | None:
    """(≈ count, description) of 5xx answers whose samples fall in ``periods`` (each stretched by one step,
    since a request cut by a timeout is answered after it arrived), from the innermost layer that reports."""
    for query_id, label, where in _ERROR_SOURCES:
        data: MetricData | None = evidence.metrics.get(query_id)
        if data is None or data.status != "ok":
            continue
        by_code: dict[str, float] = {}
        for series in data.series:
            code = str(series.labels.get(label) or "")
            if not code.startswith("5"):
                continue
            for moment, rate in series.samples:
                if math.isfinite(rate) and any(start <= moment <= end + data.step for start, end in periods):
                    by_code[code] = by_code.get(code, 0.0) + rate * data.step
        total = sum(by_code.values())
        if total >= 1:
            codes = ", ".join(f"{code} ≈{count:.0f}" for code, count in sorted(by_code.items()))
            return total, f"{where}: {codes}"
    return None


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


class _Context:
    def __init__(self, evidence: Evidence) -> None:
        self.evidence = evidence
        self.settings = ScaleSettings(evidence)
        self.cold = cold_starts(evidence)
        self.timeline = pod_timeline(evidence)
        self.zero_allowed, self.zero_reason = self.settings.zero_allowed()
        self.path = timeouts.collect(evidence)

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
        summary = (
            f"The predictor can scale to zero ({self.zero_reason}), and a cold start takes {seconds:.0f} s "
            f"({label}: {basis}). Every request that arrives after an idle period waits for a new pod to be "
            f"scheduled, pull its image and load the model; the threshold for a long cold start is {why}."
        )
        severity = None
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
                    "no ready pod: " + ", ".join(f"{_clock(start)} … {_clock(end)}" for start, end in zero[:MAX_LISTED])
                )
        if errors is not None:
            evidence.append(f"5xx while no pod was ready: {errors[1]}")
        remediation, patch = _remedy(
            patches.plan_patch(self.evidence.isvc, _set_min_replicas),
            "Keep one replica warm: set spec.predictor.minReplicas to 1 (KServe writes it as the revision's "
            f"min-scale). {self._gpu_cost()} If the cost is not acceptable, keep scale-to-zero but make the "
            "callers wait longer than the cold start (revision timeout, gateway and client timeouts) and "
            "shorten the load (image pre-pulled on the GPU nodes, weights on a local cache).",
        )
        return Finding(
            "COLDSTART_SCALE_TO_ZERO",
            f"Scale-to-zero on an LLM whose cold start takes {seconds:.0f} s ({label})",
            summary,
            self.objects(),
            tuple(evidence),
            remediation,
            patch,
            severity,
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
                f"({self._gpu_cost()})"
            )
        if raise_deadline:
            what.append(
                f"raise the progress deadline to {new_deadline} s ({MARGIN}× the measured {measured:.0f} s, in "
                f"whole minutes) with the annotation {PROGRESS_DEADLINE_ANNOTATION}, which KServe copies onto the "
                "revision"
            )
        return Finding(
            "COLDSTART_EXCEEDS_TIMEOUT",
            f"Cold start ({measured:.0f} s) is longer than the {shortest.name} ({chain.format_seconds(shortest.seconds)})",
            summary,
            self.objects(),
            tuple(evidence),
            *_remedy(
                patches.plan_patch(self.evidence.isvc, mutate),
                "On the InferenceService: " + "; and ".join(what) + ". Shortening the cold start itself (image "
                "pre-pulled on the GPU nodes, weights cached locally, a warm node pool) helps every case.",
            ),
        )

    def churn(self) -> Finding | None:
        if self.timeline is None:
            return None
        valleys = self.timeline.churn()
        if len(valleys) < MIN_VALLEYS:
            return None
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
        evidence += self.settings.lines()
        severity = None
        if errors is not None:
            severity = Severity.CRITICAL
            summary += f" Raised to critical: ≈{errors[0]:.0f} 5xx answers fell into the dips ({errors[1]})."
            evidence.append(f"5xx during the dips: {errors[1]}")
        if not self.settings.serverless:
            return Finding(
                "COLDSTART_CHURN",
                f"Ready pods fell and came back {len(valleys)} times in the window",
                summary,
                (self.isvc_ref,),
                tuple(evidence),
                "The HPA scales down too soon for pods that take this long to start: lengthen its scale-down "
                f"stabilization (behavior.scaleDown.stabilizationWindowSeconds) beyond {longest:.0f} s, or raise "
                "spec.predictor.minReplicas to the count the dips fall from. The HPA belongs to KServe, so its "
                "behavior is set where the scale_target step says (no patch here).",
                None,
                severity,
            )
        delay, setting = self.settings.scale_down_delay()
        if delay >= longest:
            return Finding(
                "COLDSTART_CHURN",
                f"Ready pods fell and came back {len(valleys)} times; the scale-down delay now in effect covers it",
                summary + f" The scale-down delay now in effect ({setting.describe()}) is longer than the longest "
                "dip, so these pods would have been held: the churn predates that setting.",
                self.objects(),
                tuple(evidence),
                "Nothing to change: confirm over the next window that the dips are gone.",
                None,
                Severity.INFO,
            )
        wanted = min(_round_up_minutes(longest * MARGIN), MAX_SCALE_DOWN_DELAY)

        def mutate(isvc: common.KubeObject) -> None:
            annotations = isvc.setdefault("metadata", {}).setdefault("annotations", {})
            for legacy in SCALE_DOWN_DELAY[1:]:
                annotations.pop(legacy, None)
            annotations[SCALE_DOWN_DELAY[0]] = f"{wanted}s"

        capped = " (Knative's maximum)" if wanted == MAX_SCALE_DOWN_DELAY else ""
        return Finding(
            "COLDSTART_CHURN",
            f"Ready pods fell and came back {len(valleys)} times in the window",
            summary + f" The scale-down delay in effect is {setting.describe()}.",
            self.objects(),
            tuple(evidence),
            *_remedy(
                patches.plan_patch(self.evidence.isvc, mutate),
                f"Hold capacity for {wanted} s{capped} after the load drops before scaling down: the annotation "
                f"{SCALE_DOWN_DELAY[0]} ({MARGIN}× the longest dip, in whole minutes) on the InferenceService, "
                "which KServe copies onto the revision template. Unlike minReplicas it still scales down when the "
                "load stays low.",
            ),
            severity,
        )

    def _gpu_cost(self) -> str:
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


def _remedy(plan: patches.PatchPlan | None, what: str) -> tuple[str, Patch | None]:
    """(remediation, patch); no patch when the InferenceService already asks for the change (the revision
    in effect is older than the InferenceService)."""
    if plan is None:
        return (
            f"{what} The InferenceService already asks for this: it takes effect with the next revision KServe "
            "rolls out; check that one was created and became ready.",
            None,
        )
    return plan.remediation(what), plan.patch


def _set_min_replicas(isvc: common.KubeObject) -> None:
    isvc.setdefault("spec", {}).setdefault("predictor", {})["minReplicas"] = 1


def _round_up_minutes(seconds: float) -> int:
    return int(math.ceil(seconds / 60.0) * 60)
