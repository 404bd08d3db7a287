"""What if the autoscaler had been set differently? The incident's demand replayed through the current and a
proposed autoscaler, with the queue and the timeouts each would have produced.

From the evidence (a bundle or a live read):

1. **Capacity and demand** (:mod:`nbhelpers.models.capacity`): what one pod serves, measured from the vLLM
   series, and the requests per second that arrived (the first edge layer that counts them, else completions
   plus the growth of the requests in the engines).
2. **The autoscaler as it is**: the live HPA (:func:`nbhelpers.models.hpa.hpa_spec_from_manifest`), or the
   InferenceService with Knative's config-autoscaler for the KPA (:func:`nbhelpers.models.kpa.kpa_spec_from_manifests`).
3. **A proposal**: the recommendations of :func:`nbhelpers.models.capacity.recommend`, each overridable,
   applied to copies of the same objects, so what is replayed is exactly what the patches would set.
4. **Closed loop**: the autoscaler sees what the pods it gave would show. The replay starts from a fixed
   replica count; the fluid queue turns the resulting ready pods into running and waiting requests; those
   become the autoscaler's series for the next replay; until the replica timeline stops changing. New pods
   serve after the measured cold start (``pod_ready_delay``).

:func:`whatif` returns a :class:`WhatIfResult`: a per-time frame (replicas, queue, predicted timeouts for the
current and the proposed settings), totals, and the patches. :mod:`nbhelpers.notebook.whatif_panel` shows it;
:func:`whatif_from_parameters` is what runbooks/whatif.ipynb calls.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

import yaml

from nbhelpers.errors import EvidenceMissing, RunbookError, StepSkipped
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import cold_starts, common, engine, timeout_layers
from nbhelpers.facts import scaling as scale_facts
from nbhelpers.facts.autoscalers import HPA, POD_AUTOSCALER, Autoscaler, resolve
from nbhelpers.facts.traffic import status_rates
from nbhelpers.metrics import series
from nbhelpers.models import capacity as cap
from nbhelpers.models import hpa as hpa_model
from nbhelpers.models import kpa as kpa_model
from nbhelpers.sources import kube
from nbhelpers.util.times import Window, duration_seconds, parse_k8s_time

GRID_SECONDS = 5.0  # the fluid queue's step
# The autoscaler sees the pods' state this late (a scrape and the metrics pipeline take at least that long). The
# lag also makes the closed loop causal: what a sync reads depends only on earlier decisions, so each round of
# :func:`replay` settles at least one more sync and the rounds converge.
METRIC_LAG_SECONDS = GRID_SECONDS
MAX_ITERATIONS = 300  # closed-loop rounds before giving up (a one-hour window settles within 240 HPA syncs)
# When no timeout on the path is known: the most common load balancer / ingress default (docs/upstream-facts.md).
ASSUMED_TIMEOUT_SECONDS = 60.0
CURRENT, PROPOSED = "current", "proposed"
# The shipped scenario replayed when the notebook is given no target at all.
DEFAULT_SCENARIO = "hpa-at-max-spike"


# --- parameters and result types ------------------------------------------------------------------------


@dataclass(frozen=True)
class Overrides:
    """Proposed settings that replace the recommendation (None: use the recommendation)."""

    min_replicas: int | None = None
    max_replicas: int | None = None
    scale_target: float | None = None
    stabilization_seconds: float | None = None  # HPA scale-up stabilization, or the KPA stable window
    pod_ready_delay: float | None = None
    client_timeout: float | None = None


@dataclass(frozen=True)
class Settings:
    """The knobs the what-if turns, as in effect (current) or proposed."""

    min_replicas: int
    max_replicas: int | None
    target: float | None
    stabilization_seconds: float | None
    stabilization_label: str = "scale-up stabilization"  # the KPA's equivalent is its stable window

    def describe(self) -> str:
        parts = [f"min {self.min_replicas}", f"max {self.max_replicas if self.max_replicas is not None else 'none'}"]
        if self.target is not None:
            parts.append(f"target {self.target:g}")
        if self.stabilization_seconds is not None:
            parts.append(f"{self.stabilization_label} {self.stabilization_seconds:g} s")
        return ", ".join(parts)


@dataclass(frozen=True)
class Outcome:
    """One replay: replica counts (relative seconds), ready pods, and the queue they produce."""

    name: str
    settings: Settings
    replicas: tuple[tuple[float, float], ...]
    ready: tuple[tuple[float, float], ...]
    forecast: cap.QueueForecast
    iterations: int
    converged: bool

    @property
    def max_replicas_reached(self) -> int:
        return int(max((value for _, value in self.replicas), default=0))

    @property
    def pod_hours(self) -> float:
        """Ready-or-starting pods integrated over the replay, in hours (the GPU cost)."""
        total = 0.0
        points = list(self.replicas)
        end = self.forecast.steps[-1].t if self.forecast.steps else 0.0
        for index, (moment, value) in enumerate(points):
            until = points[index + 1][0] if index + 1 < len(points) else end
            total += value * max(0.0, until - moment)
        return total / 3600.0


@dataclass(frozen=True)
class Inputs:
    """Everything measured from the evidence once; :func:`project` replays it for any overrides."""

    evidence: Evidence
    kind: str  # hpa | kpa
    autoscaler: Autoscaler
    setup: cap.ScalerSetup
    current: Settings
    capacity: cap.PodCapacity
    demand: tuple[tuple[float, float], ...]  # relative seconds, requests/s
    start: float  # unix seconds of t = 0
    end: float  # relative seconds of the last grid point
    cold_start: float
    cold_start_origin: str
    timeout: float
    timeout_origin: str
    initial_replicas: int
    initial_in_flight: float
    kv_per_running: float | None
    config_autoscaler: Mapping[str, Any] | None
    incident: Window | None
    observed_5xx: float | None = None  # 5xx answers the first reporting edge layer counted in the window
    observed_where: str = ""
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class WhatIfResult:
    inputs: Inputs
    overrides: Overrides
    current: Outcome
    proposed: Outcome
    recommendations: tuple[cap.Recommendation, ...]
    patches: tuple[cap.Recommendation, ...]  # what the proposal sets: recommendations, overrides applied
    notes: tuple[str, ...] = field(default_factory=tuple)

    def frame(self) -> Any:
        """One row per grid time: demand, and per outcome replicas, ready pods, waiting requests, queueing
        delay, timed-out requests in the step and cumulated (pandas DataFrame, time in UTC)."""
        import pandas as pd

        start = self.inputs.start
        rows: dict[str, list[Any]] = {"time": [], "demand_rps": []}
        steps = self.current.forecast.steps
        rows["time"] = [datetime.fromtimestamp(start + step.t, tz=timezone.utc) for step in steps]
        rows["demand_rps"] = [step.demand for step in steps]
        for outcome in (self.current, self.proposed):
            replicas = list(outcome.replicas)
            times = [t for t, _ in replicas]
            cumulative = 0.0
            totals = []
            for step in outcome.forecast.steps:
                cumulative += step.timed_out
                totals.append(cumulative)
            rows[f"replicas_{outcome.name}"] = [cap.value_at(replicas, step.t, times) for step in steps]
            rows[f"ready_{outcome.name}"] = [step.ready for step in outcome.forecast.steps]
            rows[f"queue_{outcome.name}"] = [step.waiting for step in outcome.forecast.steps]
            rows[f"delay_{outcome.name}"] = [step.delay for step in outcome.forecast.steps]
            rows[f"timed_out_{outcome.name}"] = [step.timed_out for step in outcome.forecast.steps]
            rows[f"timed_out_total_{outcome.name}"] = totals
        return pd.DataFrame(rows)

    def totals(self) -> dict[str, dict[str, float]]:
        """Per outcome: arrivals, timed out (count and share), peak queue and delay, most replicas, pod-hours."""
        return {
            outcome.name: {
                "arrivals": outcome.forecast.arrivals,
                "timed_out": outcome.forecast.timed_out,
                "timed_out_share": outcome.forecast.timed_out_share,
                "peak_queue": outcome.forecast.peak_waiting,
                "peak_delay_s": outcome.forecast.peak_delay,
                "max_replicas": float(outcome.max_replicas_reached),
                "pod_hours": outcome.pod_hours,
            }
            for outcome in (self.current, self.proposed)
        }


# --- measuring the evidence -----------------------------------------------------------------------------


def prepare(evidence: Evidence, incident: Window | None = None, client_timeout: float | None = None) -> Inputs:
    """Measure capacity, demand, cold start, timeout and the autoscaler from ``evidence``."""
    notes: list[str] = []
    try:
        workload = common.current_workload(evidence)
    except (StepSkipped, EvidenceMissing) as problem:
        raise RunbookError(f"cannot tell the serving pod spec: {problem}") from None
    ceiling = _ceiling(evidence, workload, notes)
    pod = cap.measure_capacity(
        series.by_pod(evidence.metrics.get("vllm_running")),
        series.by_pod(evidence.metrics.get("vllm_waiting")),
        series.summed(evidence.metrics.get("vllm_request_rate")),
        series.summed(evidence.metrics.get("vllm_generation_tokens_rate")),
        ceiling.value if ceiling else None,
        ceiling.origin if ceiling else "",
    )
    if pod is None:
        raise RunbookError(
            "cannot measure what a pod serves: the evidence has no vLLM running-request and completion series "
            "(give a Prometheus address, or a bundle captured with one)"
        )
    start = evidence.window.start.timestamp()
    demand_abs, demand_origin = _demand(evidence, notes)
    if not demand_abs:
        raise RunbookError("no request rate in the evidence: neither an edge layer nor vLLM counted requests")
    demand = tuple((t - start, value) for t, value in demand_abs if t >= start)
    notes.append(f"demand: {demand_origin}")
    cold, cold_origin = _cold_start(evidence)
    timeout, timeout_origin = _timeout(evidence, client_timeout)
    autoscaler = _primary_autoscaler(evidence)
    kind = "hpa" if autoscaler.kind == HPA else "kpa"
    config = evidence.config_map(evidence.site.knative_namespace, "config-autoscaler")
    setup, current = _setup(evidence, autoscaler, kind, config)
    in_flight = _totals_at(evidence, ("vllm_running", "vllm_waiting"), start)
    observed = _observed_5xx(evidence)
    serving = scale_facts.serving_workloads(evidence, common.effective_mode(evidence)).deployments
    if serving and autoscaler.scale_target.name not in serving:
        notes.append(
            f"{autoscaler.ref} scales {autoscaler.scale_target.kind} {autoscaler.scale_target.name}, but traffic goes "
            f"to {', '.join(serving)}: the replay shows what it would do if it scaled the serving pods"
        )
    active = autoscaler.condition("ScalingActive")
    if active is not None and str(active.get("status")) == "False":
        notes.append(
            f"{autoscaler.ref} could not read its metric during the window (ScalingActive=False: "
            f"{active.get('message') or active.get('reason') or 'no reason given'}); the replay assumes it can"
        )
    return Inputs(
        evidence=evidence,
        kind=kind,
        autoscaler=autoscaler,
        setup=setup,
        current=current,
        capacity=pod,
        demand=demand,
        start=start,
        end=evidence.window.end.timestamp() - start,
        cold_start=cold,
        cold_start_origin=cold_origin,
        timeout=timeout,
        timeout_origin=timeout_origin,
        initial_replicas=_initial_replicas(evidence, start),
        initial_in_flight=in_flight,
        kv_per_running=_kv_per_running(evidence),
        config_autoscaler=config,
        incident=incident,
        observed_5xx=observed[0] if observed else None,
        observed_where=observed[1] if observed else "",
        notes=tuple(notes),
    )


def _observed_5xx(evidence: Evidence) -> tuple[float, str] | None:
    """(count, where) of the 5xx answers the first edge layer that reports counted: what the current replay's
    predicted timeouts can be held against (a client's or a cloud load balancer's own timeouts are not in it)."""
    rates = status_rates(evidence)
    if rates is None:
        return None
    count = sum(value for _, value in rates.matching("5")) * rates.step
    return count, rates.where


def _ceiling(evidence: Evidence, workload: common.Workload, notes: list[str]) -> engine.Valued | None:
    """The running-request ceiling: the flag in effect (else the plateau), lowered to what the KV cache holds for
    the requests of this window (a request keeps its prompt and its output in the cache until it finishes)."""
    flag = engine.max_num_seqs_or_plateau(evidence, workload)
    kv = _kv_ceiling(evidence)
    if kv is not None and (flag is None or kv.value < flag.value):
        if flag is not None:
            notes.append(f"the KV cache holds fewer requests ({kv.value:g}) than {flag.origin} allows")
        return kv
    return flag


def _kv_ceiling(evidence: Evidence) -> engine.Valued | None:
    info = series.ok(evidence.metrics.get("vllm_cache_config"))
    rate = series.summed(evidence.metrics.get("vllm_request_rate"))
    prompt = series.summed(evidence.metrics.get("vllm_prompt_tokens_rate"))
    generated = series.summed(evidence.metrics.get("vllm_generation_tokens_rate"))
    if info is None or not info.series or not rate:
        return None
    labels = info.series[0].labels
    try:
        tokens = int(labels.get("num_gpu_blocks", "")) * int(labels.get("block_size", ""))
    except ValueError:
        return None
    completed = sum(rate.values())
    if completed <= 0:
        return None
    per_request = (sum(prompt.values()) + sum(generated.values())) / completed
    if per_request <= 0:
        return None
    seats = math.floor(tokens / per_request)
    origin = f"KV cache of {tokens:,} tokens over {per_request:,.0f} tokens per request (prompt + output)"
    return engine.Valued(float(max(1, seats)), origin)


def _demand(evidence: Evidence, notes: list[str]) -> tuple[list[tuple[float, float]], str]:
    """Arrivals per second: every response code at the first edge that counts requests, else vLLM's completions
    plus the growth of the requests in the engines."""
    rates = status_rates(evidence)
    if rates is not None:
        total: dict[float, float] = {}
        for samples in rates.by_code.values():
            for moment, value in samples:
                total[moment] = total.get(moment, 0.0) + value
        notes.append(
            "edge layers count a request when it is answered: requests that waited long show up later than they arrived"
        )
        demand = sorted(total.items())
        moved = _held_while_scaled_to_zero(evidence, demand, rates.step)
        if moved:
            notes.append(moved[1])
            demand = moved[0]
        return demand, f"every response at {rates.where} (requests/s)"
    completions = sorted(series.summed(evidence.metrics.get("vllm_request_rate")).items())
    in_system: dict[float, float] = {}
    for query_id in ("vllm_running", "vllm_waiting"):
        for moment, value in series.summed(evidence.metrics.get(query_id)).items():
            in_system[moment] = in_system.get(moment, 0.0) + value
    arrivals = cap.demand_from_conservation(completions, sorted(in_system.items()))
    return arrivals, "vLLM completions plus the growth of running + waiting requests (no edge layer counted them)"


FOLLOWING_SECONDS = 120.0  # the demand nearest the held stretch


def _held_while_scaled_to_zero(
    evidence: Evidence, demand: list[tuple[float, float]], step: float
) -> tuple[list[tuple[float, float]], str] | None:
    """Serverless: while no pod was ready, Knative's activator held the requests and the edge counted them only
    when answered (504 after the revision timeout, or all at once when the pod became ready). The first of them
    woke the revision, so a pod created during a stretch with no ready pod marks when they began to arrive:
    the answers counted from that creation until a rate() range after a pod was ready again are spread evenly
    over that time. A counter series born in that stretch (the first 504, the first 200 after the wake-up) loses
    its first increase in rate(), so that total is a lower bound: the rate seen over the next
    :data:`FOLLOWING_SECONDS` is used when it is higher. None when nothing was held."""
    if common.effective_mode(evidence) != common.SERVERLESS:
        return None
    timeline = cold_starts.pod_timeline(evidence)
    if timeline is None:
        return None
    created = sorted(
        when.timestamp()
        for pod in common.predictor_pods(evidence)
        if (when := parse_k8s_time(kube.created(pod))) is not None
    )
    rates = dict(demand)
    spans = []
    for zero_start, back in timeline.zero_periods():
        woke = next((moment for moment in created if zero_start <= moment < back), None)
        if woke is None or back >= evidence.window.end.timestamp():
            continue
        until = back + max(60.0, 4 * step)  # the catalog's rate() range: a burst shows for that long
        inside = [moment for moment in rates if woke <= moment <= until]
        total = sum(rates.pop(moment) for moment in inside) * step
        after = [rate for moment, rate in rates.items() if until < moment <= until + FOLLOWING_SECONDS]
        count = max(1, math.floor((until - woke) / step) + 1)
        held_rate = max(total / (count * step), sum(after) / len(after) if after else 0.0)
        if held_rate <= 0:
            continue
        for index in range(count):
            rates[woke + index * step] = held_rate
        spans.append(f"{_clock(woke)}–{_clock(back)}")
    if not spans:
        return None
    note = (
        "requests the activator held while no pod was ready (" + ", ".join(spans) + ") are spread from the moment "
        "the first one woke the revision (its new pod's creation) to the moment a pod was ready"
    )
    return sorted(rates.items()), note


def _clock(moment: float) -> str:
    return datetime.fromtimestamp(moment, tz=timezone.utc).strftime("%H:%M:%S")


def _cold_start(evidence: Evidence) -> tuple[float, str]:
    sizing = cold_starts.cold_starts(evidence).sizing()
    if sizing is None:
        return 0.0, "not measured (no pod's start was seen and the model's load time cannot be estimated)"
    seconds, how, estimated = sizing
    return seconds, ("estimated: " if estimated else "measured: ") + how


def _timeout(evidence: Evidence, client_timeout: float | None) -> tuple[float, str]:
    """The shortest finite timeout on the request's path (the layer that gives up first)."""
    if client_timeout is not None:
        return client_timeout, "the client timeout given as a parameter"
    layers = [layer for layer in timeout_layers.collect(evidence).layers if layer.seconds is not None]
    if layers:
        shortest = min(layers, key=lambda layer: layer.seconds or 0.0)
        assert shortest.seconds is not None
        return shortest.seconds, f"the shortest timeout on the path: {shortest.describe()}"
    return ASSUMED_TIMEOUT_SECONDS, (
        f"assumed {ASSUMED_TIMEOUT_SECONDS:g} s (no timeout on the path is known; set client_timeout to the one your "
        "clients or load balancer use)"
    )


def _primary_autoscaler(evidence: Evidence) -> Autoscaler:
    """The HPA that scales the predictor, else its Knative KPA PodAutoscaler (the newest revision's)."""
    found = [a for a in resolve(evidence) if a.targets_predictor]
    hpas = [a for a in found if a.kind == HPA]
    if hpas:
        return hpas[0]
    kpas = [a for a in found if a.kind == POD_AUTOSCALER and a.klass == "kpa"]
    if kpas:
        return sorted(kpas, key=lambda a: a.name)[-1]
    raise RunbookError("no HPA or Knative KPA scales this predictor in the evidence: there is no autoscaler to replay")


def _setup(
    evidence: Evidence, autoscaler: Autoscaler, kind: str, config: Mapping[str, Any] | None
) -> tuple[cap.ScalerSetup, Settings]:
    isvc_ref = kube.ref(evidence.isvc)
    if kind == "hpa":
        spec = kube.spec(autoscaler.obj)
        metrics = tuple(spec.get("metrics") or ())
        target, name = _hpa_request_target(hpa_model.hpa_spec_from_manifest(autoscaler.obj))
        scale_up = (spec.get("behavior") or {}).get("scaleUp")
        setup = cap.ScalerSetup(
            kind="hpa",
            isvc_ref=isvc_ref,
            min_replicas=int(spec.get("minReplicas") or 1),
            max_replicas=int(spec["maxReplicas"]) if spec.get("maxReplicas") is not None else None,
            target=target,
            target_metric=name,
            hpa_ref=autoscaler.ref,
            hpa_user_owned=common.controller_owner(autoscaler.obj) is None and autoscaler.owner is None,
            hpa_metrics=metrics,
            scale_up=scale_up,
        )
        stabilization = float((scale_up or {}).get("stabilizationWindowSeconds") or 0)
        return setup, Settings(setup.min_replicas, setup.max_replicas, target, stabilization)
    predictor = kube.spec(evidence.isvc).get("predictor") or {}
    knative = kpa_model.kpa_spec_from_manifests(evidence.isvc, config)  # defaults, ConfigMap, annotations, KServe
    target, window = knative.total, knative.stable_window
    setup = cap.ScalerSetup(
        kind="kpa",
        isvc_ref=isvc_ref,
        # the live PodAutoscaler says what Knative runs with; the InferenceService what KServe asks for
        min_replicas=autoscaler.min_replicas if autoscaler.min_replicas is not None else knative.min_scale,
        max_replicas=autoscaler.max_replicas or knative.max_scale or None,
        target=target,
        target_metric="concurrency",
        uses_scale_target_field="scaleTarget" in predictor or "scaleMetric" in predictor,
        knative_utilization=knative.target / knative.total,
    )
    return setup, Settings(setup.min_replicas, setup.max_replicas, target, window, "stable window")


# HPA metric names (the series each reads, as nbhelpers.models.hpa.series_key names them) that count requests.
def metric_kind(name: str) -> str | None:
    """What an HPA metric measures, from its name: running | waiting | in_flight | kv | rate; None: not modelled."""
    lowered = name.lower()
    if "kv_cache" in lowered or "cache_usage" in lowered:
        return "kv"
    if ("running" in lowered and "waiting" in lowered) or "in_flight" in lowered or "concurrency" in lowered:
        return "in_flight"
    if "num_requests_running" in lowered or lowered.endswith("running"):
        return "running"
    if "num_requests_waiting" in lowered or lowered.endswith("waiting") or "queue" in lowered:
        return "waiting"
    if "request_success" in lowered or "requests_total" in lowered or lowered.endswith("rps"):
        return "rate"
    return None


def _hpa_request_target(spec: hpa_model.HpaSpec) -> tuple[float | None, str | None]:
    """The per-pod target of the first AverageValue metric that counts running or in-flight requests."""
    for metric in spec.metrics:
        name = hpa_model.series_key(metric)
        if metric_kind(name) in ("running", "in_flight") and metric.target_type == "AverageValue":
            return metric.target / 1000, name  # MetricSpec holds milli-units
    return None, None


def _totals_at(evidence: Evidence, query_ids: Sequence[str], moment: float) -> float:
    total = 0.0
    for query_id in query_ids:
        samples = sorted(series.summed(evidence.metrics.get(query_id)).items())
        later = [value for t, value in samples if t >= moment]
        total += later[0] if later else 0.0
    return total


def _initial_replicas(evidence: Evidence, start: float) -> int:
    """Pods at the window's start: the HPA's current replicas, else ready pods, else available replicas."""
    for query_id in ("hpa_current_replicas", "pod_ready", "deployment_available_replicas"):
        samples = sorted(series.summed(evidence.metrics.get(query_id)).items())
        if samples:
            first = next((value for t, value in samples if t >= start), samples[-1][1])
            return round(first)
    return 0


def _kv_per_running(evidence: Evidence) -> float | None:
    """KV cache usage (0-1) per running request, the median over pods and samples (for KV-usage metrics)."""
    running = series.by_pod(evidence.metrics.get("vllm_running"))
    usage = series.by_pod(evidence.metrics.get("vllm_kv_cache_usage"))
    ratios = sorted(
        usage[pod][moment] / value
        for pod, samples in running.items()
        for moment, value in samples.items()
        if value > 0 and moment in usage.get(pod, {})
    )
    return ratios[len(ratios) // 2] if ratios else None


# --- the proposal ---------------------------------------------------------------------------------------


def proposal(
    inputs: Inputs, overrides: Overrides
) -> tuple[Settings, list[cap.Recommendation], list[cap.Recommendation]]:
    """(proposed settings, recommendations, patches of the proposal): overrides replace recommended values."""
    cold = overrides.pod_ready_delay if overrides.pod_ready_delay is not None else inputs.cold_start
    recommendations = cap.recommend(inputs.setup, inputs.demand, inputs.capacity, cold or None)
    by_setting = {rec.setting: rec for rec in recommendations}
    current = inputs.current
    patches: dict[str, cap.Recommendation] = dict(by_setting)
    minimum = by_setting["minReplicas"].value if "minReplicas" in by_setting else current.min_replicas
    maximum = by_setting["maxReplicas"].value if "maxReplicas" in by_setting else current.max_replicas
    target = by_setting["target"].value if "target" in by_setting else current.target
    stabilization = current.stabilization_seconds
    if "scaleUp" in by_setting:
        stabilization = float(by_setting["scaleUp"].value.get("stabilizationWindowSeconds") or 0)
    setup = inputs.setup
    chosen = "set by the what-if parameters"
    if overrides.min_replicas is not None:
        minimum = overrides.min_replicas
        patches["minReplicas"] = cap.replicas_change("minReplicas", minimum, setup, chosen, {})
    if overrides.max_replicas is not None:
        maximum = overrides.max_replicas
        patches["maxReplicas"] = cap.replicas_change("maxReplicas", maximum, setup, chosen, {})
    if maximum is not None and minimum > maximum:
        raise RunbookError(f"proposed minReplicas {minimum} is above maxReplicas {maximum}")
    if overrides.scale_target is not None:
        target = overrides.scale_target
        change = cap.target_change(setup, target, chosen, {})
        if change is None:
            raise RunbookError("scale_target applies only to an autoscaler on running or in-flight requests")
        patches["target"] = change
    if overrides.stabilization_seconds is not None and overrides.stabilization_seconds != stabilization:
        stabilization = overrides.stabilization_seconds
        recommended = by_setting.get("scaleUp")
        base = replace(setup, scale_up=recommended.value) if recommended is not None else setup
        change = cap.stabilization_change(base, stabilization, chosen)
        if change is not None:
            patches[change.setting] = change
        if stabilization == current.stabilization_seconds and recommended is None:
            patches.pop(change.setting if change is not None else "", None)  # back to the current value
    for setting, value in (("minReplicas", minimum), ("maxReplicas", maximum), ("target", target)):
        if setting in patches and value == getattr(current, _SETTING_FIELDS[setting]):
            del patches[setting]  # an override back to the current value needs no patch
    settings = replace(
        current, min_replicas=minimum, max_replicas=maximum, target=target, stabilization_seconds=stabilization
    )
    return settings, recommendations, list(patches.values())


_SETTING_FIELDS = {"minReplicas": "min_replicas", "maxReplicas": "max_replicas", "target": "target"}


def proposed_manifests(inputs: Inputs, patches: Sequence[cap.Recommendation]) -> dict[str, Any]:
    """The objects with the proposal applied: the HPA (KServe copies the ISVC's minReplicas / maxReplicas into
    the HPA it owns, so those land there too), or the InferenceService for the KPA."""
    if inputs.kind == "hpa":
        hpa = copy.deepcopy(dict(inputs.autoscaler.obj))
        for patch in patches:
            body = patch.patch
            if patch.target == inputs.setup.isvc_ref:
                body = {"spec": dict((body.get("spec") or {}).get("predictor") or {})}
            hpa = merge_patch(hpa, body)
        return {"hpa": hpa}
    isvc = copy.deepcopy(dict(inputs.evidence.isvc))
    for patch in patches:
        if patch.target == inputs.setup.isvc_ref:
            isvc = merge_patch(isvc, patch.patch)
    return {"isvc": isvc}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# --- the closed loop ------------------------------------------------------------------------------------


Replay = Callable[
    [Mapping[str, Sequence[tuple[float, float]]]], tuple[list[tuple[float, float]], list[tuple[float, float]]]
]


def _hpa_replay(inputs: Inputs, manifest: Mapping[str, Any], initial: int, delay: float) -> tuple[Replay, list[str]]:
    """The HPA replay as a function of the series, and the series names its metrics read."""
    spec = hpa_model.hpa_spec_from_manifest(manifest)

    def run(
        series_by_name: Mapping[str, Sequence[tuple[float, float]]],
    ) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
        syncs = hpa_model.replay_hpa(
            spec, series_by_name, initial, pod_ready_delay=delay, end=inputs.end, per_pod_from_total=True
        )
        replicas = cap.changes_only([(sync.t, float(sync.current_replicas)) for sync in syncs])
        return replicas, cap.ready_timeline(replicas, delay)

    return run, [hpa_model.series_key(metric) for metric in spec.metrics]


def _kpa_replay(inputs: Inputs, isvc: Mapping[str, Any], initial: int, delay: float) -> tuple[Replay, list[str]]:
    """The KPA replay as a function of the series, and the one series name it reads."""
    spec = kpa_model.kpa_spec_from_manifests(isvc, inputs.config_autoscaler)

    def run(
        series_by_name: Mapping[str, Sequence[tuple[float, float]]],
    ) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
        ticks = kpa_model.replay_kpa(spec, series_by_name, initial, pod_ready_delay=delay, end=inputs.end)
        replicas = cap.changes_only([(tick.t, float(tick.desired_pods)) for tick in ticks])
        ready = cap.changes_only([(tick.t, float(tick.ready_pods)) for tick in ticks])
        return replicas, ready

    return run, [spec.metric]


def autoscaler_series(
    inputs: Inputs, forecast: cap.QueueForecast, names: Sequence[str]
) -> dict[str, list[tuple[float, float]]]:
    """The totals each metric would have read under ``forecast`` (the replay divides by ready pods), each
    sample stamped :data:`METRIC_LAG_SECONDS` after the state it describes."""
    built: dict[str, list[tuple[float, float]]] = {}
    for name in names:
        kind = "in_flight" if inputs.kind == "kpa" and name == "concurrency" else metric_kind(name)
        if inputs.kind == "kpa" and name == "rps":
            kind = "arrivals"
        values: list[tuple[float, float]] = []
        for step in forecast.steps:
            if kind == "running":
                value = step.running
            elif kind == "waiting":
                value = step.waiting
            elif kind == "in_flight":
                value = step.running + step.waiting
            elif kind == "kv":
                value = step.running * (inputs.kv_per_running or 0.0)
            elif kind == "rate":
                value = step.running / forecast.service_seconds if forecast.service_seconds else 0.0
            elif kind == "arrivals":
                value = step.demand
            else:
                break
            values.append((step.t + METRIC_LAG_SECONDS, value))
        if values:
            built[name] = values
    return built


def replay(inputs: Inputs, name: str, settings: Settings, manifest: Mapping[str, Any], delay: float) -> Outcome:
    """Replay one autoscaler in closed loop with the fluid queue until the replica timeline stops changing."""
    initial = max(settings.min_replicas, inputs.initial_replicas)
    if settings.max_replicas is not None:
        initial = min(initial, settings.max_replicas)
    run, names = (
        _hpa_replay(inputs, manifest, initial, delay)
        if inputs.kind == "hpa"
        else _kpa_replay(inputs, manifest, initial, delay)
    )
    modelled = [name for name in names if inputs.kind == "kpa" or metric_kind(name) is not None]
    if not modelled:
        raise RunbookError(
            f"the autoscaler scales on {', '.join(names) or 'no metric'}: the what-if models only request metrics "
            "(running, waiting, in flight, KV cache usage, request rate)"
        )
    replicas: list[tuple[float, float]] = [(0.0, float(initial))]
    ready = cap.ready_timeline(replicas, delay)
    forecast = _forecast(inputs, ready)
    converged = False
    iterations = 0
    while not converged and iterations < MAX_ITERATIONS:
        iterations += 1
        new_replicas, new_ready = run(autoscaler_series(inputs, forecast, modelled))
        converged = new_replicas == replicas and new_ready == ready
        if not converged:
            replicas, ready = new_replicas, new_ready
            forecast = _forecast(inputs, ready)
    return Outcome(name, settings, tuple(replicas), tuple(ready), forecast, iterations, converged)


def _forecast(inputs: Inputs, ready: Sequence[tuple[float, float]]) -> cap.QueueForecast:
    return cap.predict_queue(
        inputs.demand,
        ready,
        inputs.capacity,
        inputs.timeout,
        start=0.0,
        end=inputs.end,
        step=GRID_SECONDS,
        initial_in_flight=inputs.initial_in_flight,
    )


def project(inputs: Inputs, overrides: Overrides = Overrides()) -> WhatIfResult:
    """Replay the current autoscaler and the proposal on the measured demand."""
    if overrides.client_timeout is not None:
        inputs = replace(
            inputs, timeout=overrides.client_timeout, timeout_origin="the client timeout given as a parameter"
        )
    delay = overrides.pod_ready_delay if overrides.pod_ready_delay is not None else inputs.cold_start
    settings, recommendations, patches = proposal(inputs, overrides)
    current_manifest = dict(inputs.autoscaler.obj) if inputs.kind == "hpa" else dict(inputs.evidence.isvc)
    proposed = proposed_manifests(inputs, patches)
    current = replay(inputs, CURRENT, inputs.current, current_manifest, delay)
    future = replay(inputs, PROPOSED, settings, proposed["hpa" if inputs.kind == "hpa" else "isvc"], delay)
    notes = list(inputs.notes)
    for outcome in (current, future):
        if not outcome.converged:
            notes.append(
                f"the {outcome.name} replay did not settle after {outcome.iterations} closed-loop rounds: its replica "
                "timeline is the last round's"
            )
    return WhatIfResult(inputs, overrides, current, future, tuple(recommendations), tuple(patches), tuple(notes))


def whatif(evidence: Evidence, overrides: Overrides = Overrides(), incident: Window | None = None) -> WhatIfResult:
    """Measure the evidence and replay current vs proposed (see the module docstring)."""
    return project(prepare(evidence, incident, overrides.client_timeout), overrides)


def patch_yaml(recommendation: cap.Recommendation) -> str:
    return yaml.safe_dump(dict(recommendation.patch), sort_keys=False, default_flow_style=False)


# --- the notebook's entry point -------------------------------------------------------------------------


def _seconds(text: str, what: str) -> float | None:
    """A duration parameter (``90s``, ``2m``, ``120``): None when empty or zero (use the recommendation)."""
    if not text or not str(text).strip():
        return None
    seconds = duration_seconds(str(text).strip())
    if seconds is None or seconds < 0:
        raise RunbookError(f"{what} {text!r} is not a duration (write e.g. 90s, 2m or 120)")
    return seconds or None


def _count(value: int | float, what: str) -> int | None:
    if value < 0:
        raise RunbookError(f"{what} must be 0 (use the recommendation) or more, got {value}")
    return int(value) or None


# The what-if runbook's own parameters; the rest of its parameters cell is a triage request as text.
WHATIF_ONLY = ("scenario", "min_replicas", "max_replicas", "scale_target", "stabilization", "pod_ready_delay")


def whatif_from_parameters(
    *,
    scenario: str = "",
    min_replicas: int = 0,
    max_replicas: int = 0,
    scale_target: float = 0,
    stabilization: str = "",
    pod_ready_delay: str = "",
    client_timeout: str = "",
    **triage_text: Any,
) -> WhatIfResult:
    """Read the evidence once (a bundle, a shipped scenario, or a live cluster) and replay current vs proposed.

    ``triage_text``: the evidence to read, as the triage's text parameters (bundle, namespace, isvc, window...).
    Numbers set to 0 and empty strings mean "use the recommendation"; ``stabilization`` is the only one where
    an explicit ``0s`` is a proposal of its own (no stabilization)."""
    from nbhelpers.triage import collect, params_from_text

    bundle = str(triage_text.get("bundle", ""))
    if bundle and scenario:
        raise RunbookError("give either bundle or scenario, not both")
    if not (bundle or scenario or triage_text.get("namespace") or triage_text.get("isvc")):
        scenario = DEFAULT_SCENARIO
    incident: Window | None = None
    if scenario:
        from nbhelpers.scenarios import load_spec, scenario_bundle

        triage_text["bundle"] = str(scenario_bundle(scenario))
        incident = load_spec(scenario).timeline.incident
    params = params_from_text(triage_text)
    incident = params.incident or incident
    text = str(stabilization).strip()
    overrides = Overrides(
        min_replicas=_count(min_replicas, "min_replicas"),
        max_replicas=_count(max_replicas, "max_replicas"),
        scale_target=float(scale_target) if scale_target and scale_target > 0 else None,
        stabilization_seconds=(duration_seconds(text) if text else None),
        pod_ready_delay=_seconds(pod_ready_delay, "pod_ready_delay"),
        client_timeout=_seconds(client_timeout, "client_timeout"),
    )
    if text and overrides.stabilization_seconds is None:
        raise RunbookError(f"stabilization {stabilization!r} is not a duration (write e.g. 0s, 60s or 2m)")
    if scale_target and scale_target < 0:
        raise RunbookError(f"scale_target must be 0 (use the recommendation) or more, got {scale_target}")
    return whatif(collect(params), overrides, incident)
