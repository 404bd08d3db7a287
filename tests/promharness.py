"""A real Prometheus for integration tests, backfilled with one hour of a known incident.

The data describes InferenceService ``vllm-llm`` (namespace ``llm``, vLLM V1,
two predictor pods, the first one running two engines) through a queueing
incident from 11:20 to 11:40 on 2026-01-15, in which the first pod is
OOMKilled and restarts at 11:30. Every query of the catalog has series for it,
in the shapes real exporters produce:

- DCGM series carry the exporter's own ``namespace``/``pod`` and the workload's
  ``exported_namespace``/``exported_pod`` (so the catalog falls back to its
  ``exported_pod`` template);
- ``old-llm`` is a vLLM V0 service with ``vllm:gpu_cache_usage_perc`` and
  ``vllm:time_per_output_token_seconds`` (the older names), whose DCGM series
  carry ``pod`` directly;
- decoys (the same pod name in another namespace, a non-predictor pod, another
  service's GPU and 503s) must never leak into ``vllm-llm``'s answers.

The tables below generate the data and are the expected values the tests
assert: rates are exact where the rate window lies inside one phase, and the
quantiles were worked out by hand from the bucket tables (noted beside them).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import NamedTuple

import pytest

from nbhelpers.metrics.openmetrics import (
    Family,
    HistogramFamily,
    HistogramPoint,
    HistogramSeries,
    SampleFamily,
    Series,
    render,
)
from nbhelpers.util.times import Window

UTC = timezone.utc
WINDOW = Window(datetime(2026, 1, 15, 11, 0, tzinfo=UTC), datetime(2026, 1, 15, 12, 0, tzinfo=UTC))
DATA_START = WINDOW.start - timedelta(minutes=10)  # full rate windows from the first step on
SCRAPE_SECONDS = 15
INCIDENT_START = datetime(2026, 1, 15, 11, 20, tzinfo=UTC)
INCIDENT_END = datetime(2026, 1, 15, 11, 40, tzinfo=UTC)
RESTART_AT = datetime(2026, 1, 15, 11, 30, tzinfo=UTC)
READY_AGAIN_AT = datetime(2026, 1, 15, 11, 33, tzinfo=UTC)

# Evaluation times whose 60 s rate window lies inside one phase (all on the 15 s query grid).
CALM_AT = datetime(2026, 1, 15, 11, 10, tzinfo=UTC)
INCIDENT_AT = datetime(2026, 1, 15, 11, 27, tzinfo=UTC)
RECOVERY_AT = datetime(2026, 1, 15, 11, 50, tzinfo=UTC)
NOT_READY_AT = datetime(2026, 1, 15, 11, 31, tzinfo=UTC)

NAMESPACE = "llm"
ISVC = "vllm-llm"
OLD_ISVC = "old-llm"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
HOT_POD = "vllm-llm-predictor-00001-deployment-abc12-xyz"
SECOND_POD = "vllm-llm-predictor-00001-deployment-abc12-qrs"
OLD_POD = "old-llm-predictor-7d9f8b6c5-k2x4p"
OTHER_NAMESPACE_POD = "vllm-llm-predictor-00001-deployment-zzz99-aaa"  # in namespace "other"
ROUTER_POD = "vllm-llm-router-6b7c9d-r2d2x"  # in "llm", not a predictor
EMBEDDER_POD = "embedder-predictor-00001-deployment-9f8e7-bbbbb"
REVISION = "vllm-llm-predictor-00001"
DEPLOYMENT = f"{REVISION}-deployment"

GPU_FB_TOTAL_MIB = 81559  # H100 80GB HBM3 as DCGM reports it
GPU_FB_RESERVED_MIB = 512


class Phased(NamedTuple):
    """A value per phase: before, during and after the incident."""

    calm: float
    incident: float
    recovery: float

    def at(self, moment: datetime) -> float:
        if moment < INCIDENT_START:
            return self.calm
        return self.incident if moment < INCIDENT_END else self.recovery


@dataclass(frozen=True)
class PodProfile:
    """One predictor pod. Additive values are per pod and split evenly over its engines."""

    engines: tuple[str, ...]
    running: Phased
    waiting: Phased
    kv_usage: Phased  # 0-1; engine "1" runs KV_SECOND_ENGINE_OFFSET lower, so the max is this value
    preemptions_per_second: Phased
    requests_per_second: float  # in multiples of 1: 15 requests per scrape each (the histogram unit)
    gpu_util: Phased
    fb_used_mib: Phased
    fb_used_before_restart_mib: float  # from the incident start until the OOM kill at RESTART_AT


KV_SECOND_ENGINE_OFFSET = 0.04
PROMPT_TOKENS_PER_REQUEST = 800
GENERATION_TOKENS_PER_REQUEST = 200
FINISHED_REASON_SHARE = {"stop": 0.8, "length": 0.2}

PODS: dict[str, PodProfile] = {
    HOT_POD: PodProfile(
        engines=("0", "1"),
        running=Phased(20, 48, 24),
        waiting=Phased(0, 12, 0),
        kv_usage=Phased(0.42, 0.97, 0.5),
        preemptions_per_second=Phased(0, 0.2, 0),
        requests_per_second=4,
        gpu_util=Phased(55, 98, 60),
        fb_used_mib=Phased(73216, 73216, 73216),
        fb_used_before_restart_mib=80930,
    ),
    SECOND_POD: PodProfile(
        engines=("0",),
        running=Phased(18, 40, 22),
        waiting=Phased(0, 7, 0),
        kv_usage=Phased(0.38, 0.91, 0.45),
        preemptions_per_second=Phased(0, 0.1, 0),
        requests_per_second=3,
        gpu_util=Phased(50, 97, 58),
        fb_used_mib=Phased(73216, 73216, 73216),
        fb_used_before_restart_mib=73216,
    ),
}
OLD_POD_PROFILE = PodProfile(
    engines=(),
    running=Phased(5, 9, 5),
    waiting=Phased(0, 2, 0),
    kv_usage=Phased(0.3, 0.55, 0.3),
    preemptions_per_second=Phased(0, 0, 0),
    requests_per_second=1,
    gpu_util=Phased(30, 45, 30),
    fb_used_mib=Phased(40000, 40000, 40000),
    fb_used_before_restart_mib=40000,
)
DECOY_RUNNING = {("other", OTHER_NAMESPACE_POD): 500.0, (NAMESPACE, ROUTER_POD): 999.0}


@dataclass(frozen=True)
class HistogramTable:
    """Per 15 requests: cumulative counts at each bound, in calm and in incident (recovery = calm)."""

    name: str
    bounds: tuple[float, ...]
    calm: tuple[int, ...]
    incident: tuple[int, ...]
    observations_per_request: int
    p95: Phased
    p99: Phased | None = None


# Quantiles by histogram_quantile's interpolation: rank q*15 inside the bucket that reaches it.
TTFT = HistogramTable(
    "vllm:time_to_first_token_seconds",
    (0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0),
    (0, 2, 5, 8, 10, 13, 14, 15, 15, 15, 15, 15, 15),  # p95: 14.25 in (0.5, 0.75]: 0.5 + 0.25 * 0.25
    (0, 0, 1, 1, 2, 4, 6, 7, 8, 11, 13, 14, 15),  # p95: 14.25 in (7.5, 10]: 7.5 + 2.5 * 0.25
    1,
    p95=Phased(0.5625, 8.125, 0.5625),
)
E2E = HistogramTable(
    "vllm:e2e_request_latency_seconds",
    (0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0),
    (0, 1, 4, 10, 14, 15, 15, 15, 15, 15, 15),  # p95 in (10, 15]: 10 + 5 * 0.25; p99: 10 + 5 * 0.85
    (0, 0, 1, 3, 6, 8, 10, 12, 13, 14, 15),  # p95 in (50, 60]: 50 + 10 * 0.25; p99: 50 + 10 * 0.85
    1,
    p95=Phased(11.25, 52.5, 11.25),
    p99=Phased(14.25, 58.5, 14.25),
)
QUEUE = HistogramTable(
    "vllm:request_queue_time_seconds",
    (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0),
    (15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15),  # p95 in (0, 0.3]: 0.3 * 14.25 / 15
    (2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 15, 15),  # p95 in (20, 30]: 20 + 10 * 0.25
    1,
    p95=Phased(0.285, 22.5, 0.285),
)
ITL = HistogramTable(
    "vllm:inter_token_latency_seconds",
    (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0),
    (0, 6, 12, 14, 15, 15, 15, 15, 15, 15, 15, 15),  # p95 in (0.075, 0.1]: 0.075 + 0.025 * 0.25
    (0, 2, 6, 9, 11, 13, 14, 15, 15, 15, 15, 15),  # p95 in (0.2, 0.3]: 0.2 + 0.1 * 0.25
    GENERATION_TOKENS_PER_REQUEST,
    p95=Phased(0.08125, 0.225, 0.08125),
)
# vLLM V0's name for inter-token latency, served by old-llm with ITL's distribution.
OLD_ITL = HistogramTable(
    "vllm:time_per_output_token_seconds", ITL.bounds, ITL.calm, ITL.incident, ITL.observations_per_request, ITL.p95
)

# Edge and Knative traffic of vllm-llm, per second, by response code.
ISTIO_PER_SECOND = {("200", "-"): Phased(7, 5, 7), ("503", "UF,URX"): Phased(0, 2, 0)}
ISTIO_EMBEDDER_503_PER_SECOND = 9.0
NGINX_PER_SECOND = {"200": Phased(7, 6, 7), "504": Phased(0, 1, 0)}
KNATIVE_PER_SECOND = {  # per pod: (200, 503)
    HOT_POD: {"200": Phased(4, 3, 4), "503": Phased(0, 1, 0)},
    SECOND_POD: {"200": Phased(3, 2, 3), "503": Phased(0, 1, 0)},
}
# Knative's outer layers (knative/serving pkg/queue/sharedmain/handlers.go): queue-proxy's revision_request_count,
# outside the revision timeout, counts the cut requests as 504 (the app-side counter above saw 502 for them); the
# activator answers 503 when no capacity comes in time. Per second, by response code.
KNATIVE_QUEUE_PER_SECOND = {
    HOT_POD: {"200": Phased(4, 3, 4), "504": Phased(0, 0.5, 0)},
    SECOND_POD: {"200": Phased(3, 2, 3)},
}
ACTIVATOR_POD = "activator-7c8d9f6b5-w4x7z"
ACTIVATOR_PER_SECOND = {"200": Phased(1, 1, 1), "503": Phased(0, 0.25, 0)}
ACTIVATOR_EMBEDDER_503_PER_SECOND = 3.0
# The external gateway's requests to knative-local-gateway (Serverless), by (code, flags, request_host): the
# Telemetry override that adds request_host is in place here.
SERVICE_HOST = f"{ISVC}.{NAMESPACE}.example.com"
OUTER_GATEWAY_PER_SECOND = {
    ("200", "-", SERVICE_HOST): Phased(7, 5, 7),
    ("503", "UH", SERVICE_HOST): Phased(0, 1, 0),
    ("200", "-", "embedder.llm.example.com"): Phased(2, 2, 2),
}
HPA_NAME = REVISION
HPA_CURRENT = Phased(2, 2, 2)
HPA_DESIRED = Phased(2, 4, 2)
NUM_GPU_BLOCKS = "4547"


def _grid() -> list[datetime]:
    count = int((WINDOW.end - DATA_START).total_seconds()) // SCRAPE_SECONDS
    return [DATA_START + timedelta(seconds=SCRAPE_SECONDS * index) for index in range(count + 1)]


def _ts(moment: datetime) -> float:
    return moment.timestamp()


def _constant(value: float, since: datetime = DATA_START) -> list[tuple[float, float]]:
    return [(_ts(moment), value) for moment in _grid() if moment >= since]


def _gauge(profile: Callable[[datetime], float]) -> tuple[tuple[float, float], ...]:
    return tuple((_ts(moment), profile(moment)) for moment in _grid())


def _counter(per_second: Callable[[datetime], float], since: datetime = DATA_START) -> tuple[tuple[float, float], ...]:
    """Cumulative samples whose increase into each scrape is the rate of that scrape's phase."""
    total = 0.0
    samples = []
    for moment in _grid():
        if moment < since:
            continue
        if samples:
            total += per_second(moment) * SCRAPE_SECONDS
        samples.append((_ts(moment), total))
    return tuple(samples)


def _vllm_labels(namespace: str, pod: str, engine: str | None) -> dict[str, str]:
    labels = {
        "namespace": namespace,
        "pod": pod,
        "container": "kserve-container",
        "job": f"{namespace}/vllm",
        "instance": f"{pod}:8080",
        "model_name": MODEL,
    }
    if engine is not None:
        labels["engine"] = engine
    return labels


def _engine_series(
    make: Callable[[PodProfile, int], tuple[tuple[float, float], ...]],
    include_old: bool = True,
) -> tuple[Series, ...]:
    """One series per (pod, engine) of vllm-llm, and one for old-llm (V0: no engine label)."""
    series = []
    for pod, profile in PODS.items():
        for engine_index, engine in enumerate(profile.engines):
            series.append(Series(_vllm_labels(NAMESPACE, pod, engine), make(profile, engine_index)))
    if include_old:
        series.append(Series(_vllm_labels(NAMESPACE, OLD_POD, None), make(OLD_POD_PROFILE, 0)))
    return tuple(series)


def _share(profile: PodProfile) -> float:
    return 1 / max(1, len(profile.engines))


def _vllm_families() -> list[Family]:
    def running(profile: PodProfile, _engine: int) -> tuple[tuple[float, float], ...]:
        return _gauge(lambda moment: profile.running.at(moment) * _share(profile))

    def waiting(profile: PodProfile, _engine: int) -> tuple[tuple[float, float], ...]:
        return _gauge(lambda moment: profile.waiting.at(moment) * _share(profile))

    def kv_usage(profile: PodProfile, engine: int) -> tuple[tuple[float, float], ...]:
        return _gauge(lambda moment: round(profile.kv_usage.at(moment) - engine * KV_SECOND_ENGINE_OFFSET, 4))

    def per_request(amount: float) -> Callable[[PodProfile, int], tuple[tuple[float, float], ...]]:
        return lambda profile, _engine: _counter(lambda _m: profile.requests_per_second * amount * _share(profile))

    running_series = list(_engine_series(running))
    running_series += [
        Series(_vllm_labels(namespace, pod, "0"), _gauge(lambda _m, value=value: value))
        for (namespace, pod), value in DECOY_RUNNING.items()
    ]
    success = tuple(
        Series(
            {**series.labels, "finished_reason": reason},
            tuple((stamp, value * share) for stamp, value in series.samples),
        )
        for reason, share in FINISHED_REASON_SHARE.items()
        for series in _engine_series(per_request(1))
    )
    cache_info = tuple(
        Series(
            {
                **_vllm_labels(NAMESPACE, pod, engine),
                "block_size": "16",
                "cache_dtype": "auto",
                "gpu_memory_utilization": "0.9",
                "num_gpu_blocks": NUM_GPU_BLOCKS,
                "enable_prefix_caching": "True",
            },
            tuple(_constant(1.0)),
        )
        for pod, profile in PODS.items()
        for engine in profile.engines
    )
    preemptions = _engine_series(
        lambda profile, _engine: _counter(lambda moment: profile.preemptions_per_second.at(moment) * _share(profile)),
        include_old=False,
    )
    return [
        SampleFamily("vllm:num_requests_running", "gauge", tuple(running_series), "Requests on the GPU"),
        SampleFamily("vllm:num_requests_waiting", "gauge", _engine_series(waiting), "Requests waiting"),
        SampleFamily("vllm:kv_cache_usage_perc", "gauge", _engine_series(kv_usage, include_old=False)),
        SampleFamily(
            "vllm:gpu_cache_usage_perc",
            "gauge",
            (Series(_vllm_labels(NAMESPACE, OLD_POD, None), _gauge(OLD_POD_PROFILE.kv_usage.at)),),
        ),
        SampleFamily("vllm:cache_config_info", "gauge", cache_info),
        SampleFamily("vllm:num_preemptions", "counter", preemptions),
        SampleFamily("vllm:request_success", "counter", success),
        SampleFamily("vllm:prompt_tokens", "counter", _engine_series(per_request(PROMPT_TOKENS_PER_REQUEST))),
        SampleFamily("vllm:generation_tokens", "counter", _engine_series(per_request(GENERATION_TOKENS_PER_REQUEST))),
        *(_histogram_family(table, include_old=False) for table in (TTFT, E2E, QUEUE, ITL)),
        _histogram_family(OLD_ITL, include_old=True, include_current=False),
    ]


def _histogram_family(table: HistogramTable, include_old: bool, include_current: bool = True) -> HistogramFamily:
    midpoints = [(low + high) / 2 for low, high in zip((0.0, *table.bounds), table.bounds, strict=False)]

    def points(profile: PodProfile) -> tuple[HistogramPoint, ...]:
        units = profile.requests_per_second * _share(profile) * table.observations_per_request
        cumulative = [0.0] * len(table.bounds)
        count = total = 0.0
        result = []
        for index, moment in enumerate(_grid()):
            if index:
                shape = table.incident if INCIDENT_START <= moment < INCIDENT_END else table.calm
                per_bucket = [upper - lower for lower, upper in zip((0, *shape), shape, strict=False)]
                cumulative = [value + units * added for value, added in zip(cumulative, shape, strict=True)]
                count += units * 15
                total += units * sum(n * mid for n, mid in zip(per_bucket, midpoints, strict=True))
            buckets = tuple(zip(table.bounds, cumulative, strict=True))
            result.append(HistogramPoint(_ts(moment), buckets, round(total, 6), count))
        return tuple(result)

    series = []
    if include_current:
        for pod, profile in PODS.items():
            for engine in profile.engines:
                series.append(HistogramSeries(_vllm_labels(NAMESPACE, pod, engine), points(profile)))
    if include_old:
        series.append(HistogramSeries(_vllm_labels(NAMESPACE, OLD_POD, None), points(OLD_POD_PROFILE)))
    return HistogramFamily(table.name, tuple(series))


def _ksm_labels(pod: str, **extra: str) -> dict[str, str]:
    return {"namespace": NAMESPACE, "pod": pod, "job": "kube-state-metrics", "uid": f"uid-{pod[-5:]}", **extra}


def restarts_of(pod: str, container: str, moment: datetime) -> float:
    """The OOM kill at RESTART_AT restarts the hot pod's serving container once."""
    return 1.0 if (pod, container) == (HOT_POD, "kserve-container") and moment >= RESTART_AT else 0.0


def ready(pod: str, moment: datetime) -> bool:
    return not (pod == HOT_POD and RESTART_AT <= moment < READY_AGAIN_AT)


def _kube_state_families() -> list[Family]:
    restarts = [
        Series(
            _ksm_labels(pod, container=container),
            _gauge(lambda m, pod=pod, container=container: restarts_of(pod, container, m)),
        )
        for pod in PODS
        for container in ("kserve-container", "queue-proxy")
    ]
    readiness = [
        Series(
            _ksm_labels(pod, condition=condition),
            _gauge(lambda m, pod=pod, condition=condition: float((condition == "true") == ready(pod, m))),
        )
        for pod in PODS
        for condition in ("true", "false")
    ]
    hpa_labels = {"namespace": NAMESPACE, "horizontalpodautoscaler": HPA_NAME, "job": "kube-state-metrics"}
    deployment_labels = {"namespace": NAMESPACE, "deployment": DEPLOYMENT, "job": "kube-state-metrics"}
    last_reason = Series(
        _ksm_labels(HOT_POD, container="kserve-container", reason="OOMKilled"),
        tuple(_constant(1.0, since=RESTART_AT)),
    )
    return [
        SampleFamily("kube_pod_container_status_restarts", "counter", tuple(restarts)),
        SampleFamily("kube_pod_container_status_last_terminated_reason", "gauge", (last_reason,)),
        SampleFamily("kube_pod_status_ready", "gauge", tuple(readiness)),
        SampleFamily(
            "kube_horizontalpodautoscaler_status_current_replicas",
            "gauge",
            (Series(hpa_labels, _gauge(HPA_CURRENT.at)),),
        ),
        SampleFamily(
            "kube_horizontalpodautoscaler_status_desired_replicas",
            "gauge",
            (Series(hpa_labels, _gauge(HPA_DESIRED.at)),),
        ),
        SampleFamily(
            "kube_deployment_status_replicas_available",
            "gauge",
            (Series(deployment_labels, _gauge(lambda m: float(sum(ready(pod, m) for pod in PODS)))),),
        ),
    ]


def fb_used(pod: str, moment: datetime) -> float:
    profile = PODS[pod]
    if INCIDENT_START <= moment < RESTART_AT:
        return profile.fb_used_before_restart_mib
    return profile.fb_used_mib.at(moment)


def fb_free(used_mib: float) -> float:
    return GPU_FB_TOTAL_MIB - GPU_FB_RESERVED_MIB - used_mib


def _dcgm_labels(gpu: int, namespace: str, pod: str, exported: bool) -> dict[str, str]:
    labels = {
        "gpu": str(gpu),
        "UUID": f"GPU-5d3c1a2b-0000-4000-8000-00000000000{gpu}",
        "device": f"nvidia{gpu}",
        "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname": "gpu-node-1",
        "job": "nvidia-dcgm-exporter",
    }
    if exported:  # scraped through the exporter's pod: the workload moves to exported_* labels
        workload = {"exported_namespace": namespace, "exported_pod": pod, "exported_container": "kserve-container"}
        return {**labels, "namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-7xk2p", **workload}
    return {**labels, "namespace": namespace, "pod": pod, "container": "kserve-container"}


def _dcgm_families() -> list[Family]:
    used: list[Series] = []
    free: list[Series] = []
    util: list[Series] = []
    for gpu, (pod, profile) in enumerate(PODS.items()):
        labels = _dcgm_labels(gpu, NAMESPACE, pod, exported=True)
        used.append(Series(labels, _gauge(lambda m, pod=pod: fb_used(pod, m))))
        free.append(Series(labels, _gauge(lambda m, pod=pod: fb_free(fb_used(pod, m)))))
        util.append(Series(labels, _gauge(profile.gpu_util.at)))
    embedder = _dcgm_labels(2, NAMESPACE, EMBEDDER_POD, exported=True)
    used.append(Series(embedder, tuple(_constant(20000.0))))
    old = _dcgm_labels(3, NAMESPACE, OLD_POD, exported=False)
    used.append(Series(old, _gauge(OLD_POD_PROFILE.fb_used_mib.at)))
    free.append(Series(old, _gauge(lambda m: fb_free(OLD_POD_PROFILE.fb_used_mib.at(m)))))
    util.append(Series(old, _gauge(OLD_POD_PROFILE.gpu_util.at)))
    return [
        SampleFamily("DCGM_FI_DEV_FB_USED", "gauge", tuple(used), "Framebuffer memory used (in MiB)."),
        SampleFamily("DCGM_FI_DEV_FB_FREE", "gauge", tuple(free), "Framebuffer memory free (in MiB)."),
        SampleFamily("DCGM_FI_DEV_GPU_UTIL", "gauge", tuple(util), "GPU utilization (in %)."),
    ]


def _edge_families() -> list[Family]:
    istio_base = {
        "reporter": "destination",
        "destination_workload_namespace": NAMESPACE,
        "destination_service_name": f"{REVISION}-private",
        "source_workload": "istio-ingressgateway",
        "source_workload_namespace": "istio-system",
        "request_protocol": "http",
    }
    istio = [
        Series(
            {**istio_base, "destination_workload": DEPLOYMENT, "response_code": code, "response_flags": flags},
            _counter(rate.at, since=DATA_START if code == "200" else INCIDENT_START),
        )
        for (code, flags), rate in ISTIO_PER_SECOND.items()
    ]
    istio.append(
        Series(
            {
                **istio_base,
                "destination_workload": "embedder-predictor-00001-deployment",
                "destination_service_name": "embedder-predictor-00001-private",
                "response_code": "503",
                "response_flags": "UH",
            },
            _counter(lambda _m: ISTIO_EMBEDDER_503_PER_SECOND),
        )
    )
    nginx_base = {
        "namespace": "ingress-nginx",
        "exported_namespace": NAMESPACE,
        "exported_service": f"{ISVC}-predictor",
        "ingress": ISVC,
        "method": "POST",
    }
    nginx = [Series({**nginx_base, "status": code}, _counter(rate.at)) for code, rate in NGINX_PER_SECOND.items()]
    knative_base = {
        "namespace_name": NAMESPACE,
        "configuration_name": f"{ISVC}-predictor",
        "revision_name": REVISION,
        "container_name": "queue-proxy",
    }
    knative = [
        Series(
            {**knative_base, "pod_name": pod, "response_code": code, "response_code_class": f"{code[0]}xx"},
            _counter(rate.at),
        )
        for pod, by_code in KNATIVE_PER_SECOND.items()
        for code, rate in by_code.items()
    ]
    queue = [
        Series(
            {**knative_base, "pod_name": pod, "response_code": code, "response_code_class": f"{code[0]}xx"},
            _counter(rate.at),
        )
        for pod, by_code in KNATIVE_QUEUE_PER_SECOND.items()
        for code, rate in by_code.items()
    ]
    activator_base = {**knative_base, "pod_name": ACTIVATOR_POD, "container_name": "activator"}
    activator = [
        Series({**activator_base, "response_code": code, "response_code_class": f"{code[0]}xx"}, _counter(rate.at))
        for code, rate in ACTIVATOR_PER_SECOND.items()
    ]
    activator.append(
        Series(
            {
                **activator_base,
                "configuration_name": "embedder-predictor",
                "revision_name": "embedder-predictor-00001",
                "response_code": "503",
                "response_code_class": "5xx",
            },
            _counter(lambda _m: ACTIVATOR_EMBEDDER_503_PER_SECOND),
        )
    )
    outer_base = {
        "reporter": "source",
        "source_workload": "istio-ingressgateway",
        "source_workload_namespace": "istio-system",
        "destination_service": "knative-local-gateway.istio-system.svc.cluster.local",
        "destination_service_name": "knative-local-gateway",
        "destination_service_namespace": "istio-system",
        "destination_workload": "knative-local-gateway",
        "request_protocol": "http",
    }
    istio += [
        Series(
            {**outer_base, "response_code": code, "response_flags": flags, "request_host": host},
            _counter(rate.at, since=DATA_START if code == "200" else INCIDENT_START),
        )
        for (code, flags, host), rate in OUTER_GATEWAY_PER_SECOND.items()
    ]
    return [
        SampleFamily("istio_requests", "counter", tuple(istio)),
        SampleFamily("nginx_ingress_controller_requests", "unknown", tuple(nginx)),
        SampleFamily("revision_app_request_count", "unknown", tuple(knative)),
        SampleFamily("revision_request_count", "unknown", tuple(queue)),
        SampleFamily("activator_request_count", "unknown", tuple(activator)),
    ]


def openmetrics_text() -> str:
    """The whole backfill: vLLM, kube-state-metrics, DCGM and the edge, for every catalog query."""
    return render([*_vllm_families(), *_kube_state_families(), *_dcgm_families(), *_edge_families()])


# ---------------------------------------------------------------------------------------------------------------
# The server


@dataclass(frozen=True)
class PrometheusServer:
    url: str
    log_file: Path


START_TIMEOUT_SECONDS = 10.0


def require_prometheus_binaries() -> tuple[str, str]:
    """(prometheus, promtool); a missing binary fails the run in CI and skips the test elsewhere."""
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if prometheus and promtool:
        return prometheus, promtool
    message = "Prometheus is not installed: apt-get install --no-install-recommends prometheus"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def backfill(promtool: str, workdir: Path, text: str) -> Path:
    """Write the OpenMetrics ``text`` and turn it into TSDB blocks under ``workdir/data``."""
    source = workdir / "backfill.om"
    source.write_text(text)
    data_dir = workdir / "data"
    done = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"promtool backfill failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return data_dir


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_ready(
    process: subprocess.Popen[bytes], url: str, log_file: Path, timeout: float = START_TIMEOUT_SECONDS
) -> None:
    """Until ``url``/-/ready answers 200 (Prometheus and Alertmanager both serve it); fail with the log's tail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"{url} exited with {process.returncode}: {log_file.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError):
            pass
        time.sleep(0.05)
    pytest.fail(f"{url} not ready after {timeout:.0f} s: {log_file.read_text()[-2000:]}")


@contextmanager
def prometheus_serving(text: str, workdir: Path) -> Iterator[PrometheusServer]:
    """A real Prometheus on 127.0.0.1 serving the OpenMetrics ``text`` (backfilled with promtool into ``workdir``);
    stopped on exit."""
    prometheus, promtool = require_prometheus_binaries()
    data_dir = backfill(promtool, workdir, text)
    config = workdir / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 15s\nscrape_configs: []\n")
    log_file = workdir / "prometheus.log"
    url = f"http://127.0.0.1:{free_port()}"
    command = [
        prometheus,
        f"--config.file={config}",
        f"--storage.tsdb.path={data_dir}",
        # The backfilled window lies in the past: keep it rather than letting retention delete it.
        "--storage.tsdb.retention.time=100y",
        f"--web.listen-address={url.removeprefix('http://')}",
    ]
    with serving_process(command, url, log_file):
        yield PrometheusServer(url, log_file)


@pytest.fixture(scope="session")
def prometheus_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """A real Prometheus on 127.0.0.1 serving the backfilled incident; stopped at the end of the session."""
    with prometheus_serving(openmetrics_text(), tmp_path_factory.mktemp("prometheus")) as server:
        yield server


@contextmanager
def serving_process(
    command: list[str], url: str, log_file: Path, timeout: float = START_TIMEOUT_SECONDS
) -> Iterator[None]:
    """``command`` running with its output in ``log_file``, once ``url``/-/ready answers; stopped on exit."""
    with log_file.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_ready(process, url, log_file, timeout)
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
