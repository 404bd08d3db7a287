"""Cold starts as the evidence shows them: the scale-to-zero settings in force, how long each pod's latest start
took to reach Ready (phase by phase; a start is a pod's creation or its serving container's restart, never a period
of serving: :mod:`nbhelpers.facts.pod_phases`), the ready-pod timeline with its valleys, and the errors seen while
no pod was ready. The cold-start step judges them; HPA_BEHAVIOR_SLOW (through :mod:`nbhelpers.facts.scaling`),
charts and the what-if read the same facts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from nbhelpers.errors import StepSkipped
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import autoscalers, common, pod_phases, vllm_args
from nbhelpers.facts.autoscalers import Autoscaler
from nbhelpers.facts.pod_phases import Distribution, PodPhases, Valley
from nbhelpers.metrics import series as metric_series
from nbhelpers.metrics.series import MetricData
from nbhelpers.models import kpa, load_time
from nbhelpers.sources import kinds, kube
from nbhelpers.util.times import duration_seconds, format_time

INITIAL_SCALE = ("autoscaling.knative.dev/initial-scale", "autoscaling.knative.dev/initialScale")
CLASS_KEYS = (kpa.KNATIVE_CLASS_ANNOTATION,)
KSERVE_DEFAULT_MIN_REPLICAS = 1
MAX_LISTED = 6  # pods, valleys or periods listed in one line of evidence


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
        self.scaled_object = None if self.serverless else _predictor_scaled_object(evidence)

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
            for key in kpa.MIN_SCALE_KEYS:
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
            return self._annotation(CLASS_KEYS, None, kpa.KNATIVE_KPA_CLASS).value
        return kube.annotations(self.evidence.isvc).get(kube.AUTOSCALER_CLASS_ANNOTATION, "hpa")

    def zero_allowed(self) -> tuple[bool, str]:
        """Whether the revision can scale to zero, and why (or why not)."""
        if not self.serverless:
            return self._keda_zero_allowed()
        minimum, source = self.min_replicas()
        if minimum > 0:
            return False, f"min-scale {minimum} ({source})"
        autoscaler = self.autoscaler_class()
        if autoscaler != kpa.KNATIVE_KPA_CLASS:
            return False, f"autoscaler class {autoscaler}: only the KPA scales to zero"
        enabled = self.config.get("enable-scale-to-zero", "true").strip().lower() != "false"
        if not enabled:
            return False, f"{self.config_name} enable-scale-to-zero is false: Knative keeps one replica"
        return True, f"min-scale 0 ({source}), class {autoscaler}, enable-scale-to-zero true"

    def _keda_zero_allowed(self) -> tuple[bool, str]:
        """RawDeployment reaches zero only through KEDA: a ScaledObject with minReplicaCount 0 (KEDA's default; KServe's
        keda class writes spec.predictor.minReplicas there, 0 allowed: keda_reconciler.go) or idleReplicaCount 0."""
        scaled = self.scaled_object
        if scaled is None:
            return False, "RawDeployment without a KEDA ScaledObject: the HPA never scales the predictor to zero"
        if scaled.min_replicas == 0:
            return True, f"{scaled.ref} minReplicaCount 0 ({_keda_min_source(scaled)})"
        if kube.spec(scaled.obj).get("idleReplicaCount") == 0:
            return True, f"{scaled.ref} idleReplicaCount 0: KEDA scales to zero while no trigger is active"
        return False, f"{scaled.ref} minReplicaCount {scaled.min_replicas} ({_keda_min_source(scaled)})"

    def scale_down_delay(self) -> tuple[float, Setting]:
        setting = self._annotation(kpa.SCALE_DOWN_DELAY_KEYS, "scale-down-delay", "0s")
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
            lines.append(f"autoscaler class: {self.autoscaler_class()} ({kube.AUTOSCALER_CLASS_ANNOTATION})")
            if self.scaled_object is not None:
                lines.append(f"KEDA: {self._keda_zero_allowed()[1]}")
            return lines
        settings = [
            self._annotation(CLASS_KEYS, None, kpa.KNATIVE_KPA_CLASS),
            self._annotation(kpa.METRIC_KEYS, None, "concurrency"),
            self._annotation(kpa.TARGET_KEYS, "container-concurrency-target-default", "100"),
            self._annotation(INITIAL_SCALE, "initial-scale", "1"),
            self._annotation(kpa.SCALE_DOWN_DELAY_KEYS, "scale-down-delay", "0s"),
            self._annotation(kpa.POD_RETENTION_KEYS, "scale-to-zero-pod-retention-period", "0s"),
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


def _predictor_scaled_object(evidence: Evidence) -> Autoscaler | None:
    """The KEDA ScaledObject that scales the predictor's Deployment, if any."""
    return next(
        (a for a in autoscalers.resolve(evidence) if a.kind == autoscalers.SCALED_OBJECT and a.targets_predictor),
        None,
    )


def _keda_min_source(scaled: Autoscaler) -> str:
    if "minReplicaCount" not in kube.spec(scaled.obj):
        return "not set: KEDA's default is 0"
    if (scaled.owner or "").startswith("InferenceService/"):
        return "written by KServe from spec.predictor.minReplicas"
    return "spec.minReplicaCount"


def _integer(value: object) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


# --- cold starts ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ColdStarts:
    """Every predictor pod's latest start (:mod:`nbhelpers.facts.pod_phases`: one cold start per start, never across
    a period of serving), and what they say together."""

    pods: tuple[PodPhases, ...]
    estimate: load_time.LoadEstimate | None

    @property
    def completed(self) -> tuple[PodPhases, ...]:
        """The pods whose latest start reached Ready and can be measured."""
        return tuple(pod for pod in self.pods if pod.total is not None)

    @property
    def unknown(self) -> tuple[PodPhases, ...]:
        """The pods whose cold start cannot be measured (a readiness blip, a start the status cannot place)."""
        return tuple(pod for pod in self.pods if pod.unknown)

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
            restarted = any(pod.start == pod_phases.RESTART for pod in self.completed)
            span = "a start → its Ready: creation or the container's restart" if restarted else "created → Ready"
            parts.append(f"completed cold starts ({span}) {self.totals.describe()}")
        if self.lower_bound is not None:
            parts.append(f"a pod still starting after {self.lower_bound:.0f} s (a lower bound)")
        if self.unknown and parts:
            parts.append(f"{len(self.unknown)} pod(s) with no measurable start")
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
    """Every predictor pod's latest start (the pods listed now; pods that are gone only show in the timeline)."""
    return ColdStarts(latest_starts(evidence), _estimate(evidence))


def latest_starts(evidence: Evidence) -> tuple[PodPhases, ...]:
    """Each predictor pod's latest start, measured from its status, its events, its engine's per-pod metrics and
    its current log. Its Ready milestone is set only when the Ready transition ends that start (not a blip): the
    probes step reads a run's load from it too."""
    pods = []
    busy = _busy_samples(evidence)
    for pod in common.predictor_pods(evidence):
        serving = common.serving_container(kube.spec(pod))
        if serving is not None:
            name, container = kube.name(pod), str(serving.get("name"))
            signals = pod_phases.ServingSignals(busy.get(name, ()), _server_up(evidence, name, container))
            pods.append(
                pod_phases.measure_pod(
                    pod, evidence.events_about("Pod", name), container, evidence.observed_at, signals
                )
            )
    return tuple(pods)


def _busy_samples(evidence: Evidence) -> dict[str, tuple[datetime, ...]]:
    """Per pod, the sample times at which its engine ran requests (``vllm_running`` above 0)."""
    return {
        pod: tuple(
            datetime.fromtimestamp(moment, tz=timezone.utc) for moment, value in sorted(samples.items()) if value > 0
        )
        for pod, samples in metric_series.by_pod(evidence.metrics.get("vllm_running")).items()
    }


def _server_up(evidence: Evidence, pod: str, container: str) -> datetime | None:
    """When the current run's log (the window's part of it) says the server was up, if it says so."""
    for log in evidence.logs_of(pod):
        if log.container == container and not log.previous and log.text:
            return load_time.parse_log_timeline(log.text).serving_at
    return None


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
        text = ", ".join(f"{value:g} at {clock_text(moment)}" for moment, value in steps[:16])
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


def clock_text(moment: float) -> str:
    return format_time(datetime.fromtimestamp(moment, tz=timezone.utc))


# --- 5xx answers ----------------------------------------------------------------------------------------

# (query id, label holding the status code, where the answers were counted)
_ERROR_SOURCES = (
    # While no pod is ready the activator answers (503 when no capacity comes in time, 504 at the revision
    # timeout): its own counter, written outside its timeout handler (knative/serving cmd/activator/main.go).
    ("knative_activator_requests_by_code", "response_code", "Knative's activator"),
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
