"""Raw metric series of a scenario, simulated from its traffic shape with a seeded generator.

A fluid model per ready pod, one step per Prometheus scrape (15 s): the pod's
share of the demand needs ``rate x latency`` requests in flight (Little's
law); vLLM runs at most ``--max-num-seqs`` of them, and the rest wait in its
queue, which drains when demand falls. Latency per request grows with the
batch (decode is memory-bound). Each completed request is drawn from
distributions around the model's means, so counters and histograms carry
ordinary noise. Pods that do not listen where Prometheus scrapes have no vLLM
series at all (their scrape fails), exactly as a real capture would show.
Under Knative the activator holds requests while no pod is ready: they reach
the first pod that becomes ready, or are answered 504 after the revision
timeout. A request that runs past the revision timeout on a pod is cut by
queue-proxy: 504 in ``revision_request_count`` (outside its timeout handler),
502 in ``revision_app_request_count`` (inside it), and vLLM aborts it.

The output is the families of :mod:`nbhelpers.metrics.openmetrics` (the
format the Prometheus test harness backfills), plus the per-pod states the
log writer needs for vLLM's periodic stats lines.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from nbhelpers.metrics.openmetrics import (
    Family,
    HistogramFamily,
    HistogramPoint,
    HistogramSeries,
    SampleFamily,
    SampleType,
    Series,
)
from nbhelpers.scenarios.routes import nginx_route
from nbhelpers.scenarios.spec import (
    BLOCK_SIZE,
    IDLE_SECONDS_PER_TOKEN,
    ITL_PER_RUNNING_SECONDS,
    PREFILL_TOKENS_PER_SECOND,
    blocks_per_request,
)
from nbhelpers.scenarios.state import (
    CACHE_PERMISSION_ERROR,
    CUDA_OOM_ERROR,
    DTYPE_ERROR,
    HUB_FORBIDDEN_ERROR,
    KV_CAPACITY_ERROR,
    REVISION_TIMEOUT_SECONDS,
    TENSOR_PARALLEL_ERROR,
    VLLM_PORT_ERROR,
    Plan,
    PodPlan,
    long_contexts,
    nginx_timeout_seconds,
    prompt_tokens_at,
    rng_for,
    stale_hpa_target,
)

SCRAPE_SECONDS = 15
SCRAPE_OFFSET_SECONDS = 4  # scrapes are not aligned to the query grid, as in a real Prometheus
ITL_IDLE_SECONDS = IDLE_SECONDS_PER_TOKEN
SCHEDULER_DELAY_SECONDS = 0.003
KV_SIZED_SHARE = 0.78  # the engine has sized and allocated its KV cache (the log's "Available KV cache memory")
# Memory bandwidth of common data-centre GPUs, GB/s (the vendors' data sheets).
GPU_BANDWIDTH_GBPS = {"L40S": 864.0, "L4": 300.0, "A10G": 600.0, "A100": 2039.0, "H100": 3350.0}
NGINX_CONTROLLER_POD = "ingress-nginx-controller-6b7d9c5f4-k2x8w"
ACTIVATOR_POD = "activator-5f7d8c9b6-m3n4p"

# vLLM's histogram bounds (vllm/v1/metrics/loggers.py).
TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
REQUEST_LATENCY_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
# Before vllm-project/vllm PR #15202 (issue #15167) the e2e and queue-time buckets stopped at 60 s and TTFT at 10 s.
SHORT_BUCKETS_BEFORE = (0, 8, 3)
SHORT_TTFT_BUCKETS = tuple(bound for bound in TTFT_BUCKETS if bound <= 10.0)
SHORT_REQUEST_LATENCY_BUCKETS = tuple(bound for bound in REQUEST_LATENCY_BUCKETS if bound <= 60.0)
HISTOGRAMS = {
    "vllm:time_to_first_token_seconds": TTFT_BUCKETS,
    "vllm:e2e_request_latency_seconds": REQUEST_LATENCY_BUCKETS,
    "vllm:request_queue_time_seconds": REQUEST_LATENCY_BUCKETS,
    "vllm:inter_token_latency_seconds": ITL_BUCKETS,
}


@dataclass
class _Histogram:
    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def observe(self, value: float, times: int = 1) -> None:
        if not self.counts:
            self.counts = [0] * len(self.bounds)
        for index, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[index] += times
        self.total += value * times
        self.count += times

    def point(self, timestamp: float) -> HistogramPoint:
        counts = self.counts or [0] * len(self.bounds)
        return HistogramPoint(
            timestamp, tuple(zip(self.bounds, map(float, counts), strict=True)), round(self.total, 6), float(self.count)
        )


@dataclass(frozen=True)
class TickState:
    """What one pod's engine looked like at one scrape."""

    at: datetime
    running: int
    waiting: int
    kv_usage: float
    prompt_tokens: int  # completed since the previous scrape
    generation_tokens: int


@dataclass(frozen=True)
class Simulation:
    families: tuple[Family, ...]
    pod_states: dict[str, tuple[TickState, ...]]


@dataclass
class _PodEngine:
    """The running totals of one pod's vLLM engine."""

    pod: PodPlan
    histograms: dict[str, _Histogram]
    backlog: float = 0.0
    success: int = 0
    prompt: int = 0
    generation: int = 0
    preemptions: int = 0
    revision_cut: int = 0  # requests queue-proxy cut at the revision timeout (Serverless)
    run_started: datetime | None = None  # the run whose queue ``backlog`` is: a new process starts empty


def histogram_bounds(vllm_version: str) -> dict[str, tuple[float, ...]]:
    """vLLM's histogram bounds for its version: the short ones of the releases before PR #15202."""
    numbers = tuple(int(part) for part in vllm_version.split(".")[:3] if part.isdigit())
    if not numbers or numbers >= SHORT_BUCKETS_BEFORE:
        return dict(HISTOGRAMS)
    short = {
        "vllm:time_to_first_token_seconds": SHORT_TTFT_BUCKETS,
        "vllm:e2e_request_latency_seconds": SHORT_REQUEST_LATENCY_BUCKETS,
        "vllm:request_queue_time_seconds": SHORT_REQUEST_LATENCY_BUCKETS,
    }
    return {**HISTOGRAMS, **short}


def poisson(rng: random.Random, mean: float) -> int:
    """A Poisson draw (normal approximation above 50, where the difference does not show)."""
    if mean <= 0:
        return 0
    if mean > 50:
        return max(0, round(rng.gauss(mean, math.sqrt(mean))))
    limit, product, count = math.exp(-mean), rng.random(), 0
    while product > limit:
        product *= rng.random()
        count += 1
    return count


def scrape_times(plan: Plan) -> list[datetime]:
    window = plan.spec.timeline.window
    times = []
    moment = window.start + timedelta(seconds=SCRAPE_OFFSET_SECONDS)
    while moment < window.end:
        times.append(moment)
        moment += timedelta(seconds=SCRAPE_SECONDS)
    return times


class _Simulator:
    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.spec = plan.spec
        self.traffic = plan.spec.traffic
        self.rng = rng_for(plan.spec, "traffic")
        self.prompt_tokens = self.traffic.prompt_tokens
        self.prompt_shift = long_contexts(plan.spec)
        self.ceiling = self.ceiling_now()
        self.scraped = plan.listen_port == plan.spec.isvc.container_port
        histograms = histogram_bounds(plan.spec.isvc.vllm_version)
        self.engines = {
            pod.name: _PodEngine(pod, {name: _Histogram(bounds) for name, bounds in histograms.items()})
            for pod in plan.pods
        }
        self.samples: dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[float, float]]] = {}
        self.histogram_points: dict[tuple[str, tuple[tuple[str, str], ...]], list[HistogramPoint]] = {}
        self.pod_states: dict[str, list[TickState]] = {pod.name: [] for pod in plan.pods}
        self.gateway: dict[tuple[str, str], int] = {}
        self.held: list[tuple[datetime, float]] = []  # requests the activator holds: (arrived, how many)
        self.nginx_timeout = nginx_timeout_seconds(plan.spec)
        self.nginx: dict[str, int] = {}  # ingress-nginx's request counter by status
        self.finished_now = 0  # requests the engines answered in the current scrape interval
        self.cut_now = 0  # requests nginx gave up on (504) in the current scrape interval
        # Knative's revision timeout bounds every request through queue-proxy (Serverless only).
        self.revision_timeout = float(REVISION_TIMEOUT_SECONDS) if plan.serverless else None
        self.revision_cut_now = 0  # requests queue-proxy cut at the revision timeout in the current interval
        self.activator_answers: dict[str, int] = {}  # what the activator answered for the requests it held

    def blocks_per_request(self) -> int:
        return blocks_per_request(self.prompt_tokens, self.traffic.output_tokens)

    def ceiling_now(self) -> int:
        """Requests one engine runs at once: --max-num-seqs, or fewer when the KV cache cannot hold that many."""
        return min(self.plan.kv.max_num_seqs, self.plan.kv.num_blocks // self.blocks_per_request())

    @property
    def cache_bound(self) -> bool:
        """The KV cache, not --max-num-seqs, caps the batch at the current request sizes, for long enough that the
        scheduler works at the cache's edge (admitting, preempting). Only modelled for ``long_contexts``: other
        scenarios reach the cache's limit briefly, and keep the simpler proportional usage model (and their bytes)."""
        return self.prompt_shift is not None and self.ceiling < self.plan.kv.max_num_seqs

    def itl(self, running: float) -> float:
        return ITL_IDLE_SECONDS + ITL_PER_RUNNING_SECONDS * running + self.kv_read_seconds(running)

    def kv_read_seconds(self, running: float) -> float:
        """Decode reads every running request's KV cache each step: with long contexts that read, not the weights,
        sets the pace (e.g. 16 requests of 12k tokens of Llama 3.1 8B are 24 GiB per step, 28 ms on an L40S).
        Modelled for ``long_contexts`` only; the short prompts of other scenarios keep the plain batch model."""
        if self.prompt_shift is None:
            return 0.0
        node = self.spec.cluster.nodes[0]
        bandwidth = next((rate for name, rate in GPU_BANDWIDTH_GBPS.items() if name in node.product), 1000.0)
        tokens = self.prompt_tokens + self.traffic.output_tokens / 2
        return running * tokens * self.plan.kv.bytes_per_token / (bandwidth * 1e9)

    def service_seconds(self, running: float) -> float:
        prefill = self.prompt_tokens / PREFILL_TOKENS_PER_SECOND
        return prefill + self.traffic.output_tokens * self.itl(running)

    def in_flight(self, rate: float) -> float:
        """Requests in flight for an arrival rate, from Little's law with batch-dependent latency."""
        running = rate * self.service_seconds(0)
        for _ in range(30):
            running = min(float(self.ceiling), rate * self.service_seconds(running))
        return running

    def record(self, name: str, labels: dict[str, str], moment: datetime, value: float) -> None:
        key = (name, tuple(sorted(labels.items())))
        self.samples.setdefault(key, []).append((moment.timestamp(), value))

    def run(self) -> Simulation:
        previous: datetime | None = None
        for moment in scrape_times(self.plan):
            seconds = SCRAPE_SECONDS if previous is None else (moment - previous).total_seconds()
            previous = moment
            self.prompt_tokens = prompt_tokens_at(self.spec, moment)
            self.ceiling = self.ceiling_now()
            demand = self.traffic.rate_at(moment)
            self.finished_now = self.cut_now = self.revision_cut_now = 0
            ready = self.plan.ready_pods(moment) if self.plan.routed else []
            released = timed_out = 0.0
            if self.plan.serverless and self.plan.routed:
                released, timed_out = self.activator(moment, demand * seconds, bool(ready))
            for pod in self.plan.pods:
                share = (demand + released / seconds) / len(ready) if pod in ready else 0.0
                self.step_pod(self.engines[pod.name], moment, share, seconds)
            self.step_edge(moment, demand, bool(ready), seconds, released, timed_out)
        return Simulation(self.families(), {name: tuple(states) for name, states in self.pod_states.items()})

    def activator(self, moment: datetime, arrived: float, any_ready: bool) -> tuple[float, float]:
        """Knative's activator while no pod is ready: it holds the requests, and answers 504 to each one that
        waited the whole revision timeout. (released to the first ready pods, timed out) for this scrape."""
        if any_ready:
            released = sum(count for _, count in self.held)
            self.held = []
            return released, 0.0
        if arrived > 0:
            self.held.append((moment, arrived))
        expired = [count for at, count in self.held if (moment - at).total_seconds() >= REVISION_TIMEOUT_SECONDS]
        self.held = [(at, count) for at, count in self.held if (moment - at).total_seconds() < REVISION_TIMEOUT_SECONDS]
        return 0.0, sum(expired)

    def step_pod(self, engine: _PodEngine, moment: datetime, rate: float, seconds: float) -> None:
        pod = engine.pod
        if not pod.alive(moment):
            return
        self.kube_state(pod, moment)
        if self.scraped and pod.serving(moment):
            run = pod.run_at(moment)
            if run is not None and run.started != engine.run_started:
                engine.backlog, engine.run_started = 0.0, run.started
            self.engine_step(engine, moment, rate, seconds)
        if pod.runs and moment >= pod.started:
            self.gpu(pod, moment)

    def engine_step(self, engine: _PodEngine, moment: datetime, rate: float, seconds: float) -> None:
        wanted = self.in_flight(rate)
        saturated = engine.backlog > 0 or rate * self.service_seconds(self.ceiling) > self.ceiling
        running = float(self.ceiling) if saturated else wanted
        throughput = running / self.service_seconds(running) if running else 0.0
        if saturated:
            engine.backlog = max(0.0, engine.backlog + (rate - throughput) * seconds)
        queue_mean = engine.backlog / throughput if throughput else 0.0
        completed = poisson(self.rng, throughput * seconds)
        prompt, generated = self.complete(engine, completed, running, queue_mean)
        if saturated and self.cache_bound:
            # The scheduler admits a waiting request only when the cache has its blocks: the batch is as large as
            # the cache allows, a request fewer while a preempted one waits to be recomputed, and the cache full.
            observed = self.ceiling - self.rng.choice((0, 0, 1))
        elif saturated:
            observed = self.ceiling
        else:
            observed = min(self.ceiling, max(0, round(self.rng.gauss(running, math.sqrt(running) / 2))))
        waiting = round(engine.backlog) if engine.backlog >= 0.5 else 0
        kv = 0.0
        if saturated and self.cache_bound:
            kv = round(self.rng.uniform(0.97, 1.0), 6)
        elif observed:
            kv = observed * self.blocks_per_request() / self.plan.kv.num_blocks * self.rng.uniform(0.93, 1.07)
            kv = min(1.0, round(kv, 6))
        if kv >= 0.98:
            engine.preemptions += poisson(self.rng, 0.5 * seconds)
        self.pod_states[engine.pod.name].append(TickState(moment, observed, waiting, kv, prompt, generated))
        self.vllm_series(engine, moment, observed, waiting, kv)

    def complete(self, engine: _PodEngine, completed: int, running: float, queue_mean: float) -> tuple[int, int]:
        """Draw the completed requests of one scrape interval and observe them in the histograms."""
        rng, traffic = self.rng, self.traffic
        prompt_total = generated_total = cut = by_revision = 0
        max_len = self.plan.kv.max_model_len
        for _ in range(completed):
            prompt = max(16, min(max_len - 1, round(rng.lognormvariate(math.log(self.prompt_tokens), 0.35))))
            output = max(1, min(max_len - prompt, round(rng.lognormvariate(math.log(traffic.output_tokens), 0.5))))
            queued = (
                rng.expovariate(1 / queue_mean)
                if queue_mean > SCHEDULER_DELAY_SECONDS
                else rng.uniform(0.0005, SCHEDULER_DELAY_SECONDS)
            )
            step = self.itl(running) * rng.lognormvariate(0, 0.1)
            first = queued + prompt / PREFILL_TOKENS_PER_SECOND * (1 + running / max(1, self.ceiling)) + step
            engine.histograms["vllm:time_to_first_token_seconds"].observe(first)
            limit = self.cut_limit(first)
            if limit is not None and first + (output - 1) * step > limit:
                # nginx (idle) or queue-proxy (the revision timeout) answers 504 and closes the connection;
                # vLLM's API server aborts the request, which never finishes: no success, no end-to-end or queue
                # time, only the tokens made so far.
                made = max(1, min(output, 1 + int((limit - first) / step)))
                if made > 1:
                    engine.histograms["vllm:inter_token_latency_seconds"].observe(step, made - 1)
                prompt_total += prompt
                generated_total += made
                cut += 1
                if limit == self.revision_timeout:
                    by_revision += 1
                continue
            engine.histograms["vllm:e2e_request_latency_seconds"].observe(first + (output - 1) * step)
            engine.histograms["vllm:request_queue_time_seconds"].observe(queued)
            if output > 1:
                engine.histograms["vllm:inter_token_latency_seconds"].observe(step, output - 1)
            prompt_total += prompt
            generated_total += output
        engine.success += completed - cut
        self.finished_now += completed - cut
        self.cut_now += cut - by_revision
        self.revision_cut_now += by_revision
        engine.revision_cut += by_revision
        engine.prompt += prompt_total
        engine.generation += generated_total
        return prompt_total, generated_total

    def cut_limit(self, first_token: float) -> float | None:
        """The first timeout a request meets: nginx's idle timeout (for a stream, only while its first token is
        not out: the tokens keep the connection busy after it) or Knative's revision timeout (cuts both)."""
        idle = self.nginx_timeout
        if idle is not None and self.traffic.streamed and first_token <= idle:
            idle = None
        limits = [float(t) for t in (idle, self.revision_timeout) if t is not None]
        return min(limits) if limits else None

    def target_labels(self, pod: PodPlan) -> dict[str, str]:
        port = self.spec.isvc.container_port
        return {
            "namespace": self.spec.isvc.namespace,
            "pod": pod.name,
            "container": self.plan.container,
            "instance": f"{pod.ip}:{port}",
            "job": "kserve-predictors",
        }

    def vllm_series(self, engine: _PodEngine, moment: datetime, running: int, waiting: int, kv: float) -> None:
        model = {"model_name": self.spec.isvc.model.served_name, "engine": "0"}
        labels = {**self.target_labels(engine.pod), **model}
        self.record("vllm:num_requests_running", labels, moment, running)
        self.record("vllm:num_requests_waiting", labels, moment, waiting)
        self.record("vllm:kv_cache_usage_perc", labels, moment, kv)
        self.record("vllm:request_success", {**labels, "finished_reason": "stop"}, moment, engine.success)
        self.record("vllm:prompt_tokens", labels, moment, engine.prompt)
        self.record("vllm:generation_tokens", labels, moment, engine.generation)
        self.record("vllm:num_preemptions", labels, moment, engine.preemptions)
        cache = {
            "block_size": str(BLOCK_SIZE),
            "cache_dtype": "auto",
            "enable_prefix_caching": "True",
            "gpu_memory_utilization": str(self.plan.kv.gpu_memory_utilization),
            "num_gpu_blocks": str(self.plan.kv.num_blocks),
        }
        self.record("vllm:cache_config_info", {**self.target_labels(engine.pod), "engine": "0", **cache}, moment, 1.0)
        for name, histogram in engine.histograms.items():
            key = (name, tuple(sorted(labels.items())))
            self.histogram_points.setdefault(key, []).append(histogram.point(moment.timestamp()))

    def kube_state(self, pod: PodPlan, moment: datetime) -> None:
        """kube-state-metrics: series exist only for what the pod status holds (no Ready condition while
        unscheduled, no container series before the first start, a terminated reason after the first end)."""
        if not pod.runs and not pod.config_error_syncs:
            return
        ksm = {"namespace": self.spec.isvc.namespace, "pod": pod.name, "uid": pod.uid, "job": "kube-state-metrics"}
        ready = pod.ready(moment)
        for condition, value in (("true", ready), ("false", not ready), ("unknown", False)):
            self.record("kube_pod_status_ready", {**ksm, "condition": condition}, moment, float(value))
        if not pod.runs:
            return  # the container was never created: it has no restarts and no termination
        if moment < pod.started:
            return
        restarts = {self.plan.container: pod.restarts_at(moment)}
        if self.plan.serverless:
            restarts["queue-proxy"] = 0
        for container, count in restarts.items():
            self.record("kube_pod_container_status_restarts", {**ksm, "container": container}, moment, float(count))
        last = pod.last_termination(moment)
        if last is not None:
            labels = {**ksm, "container": self.plan.container, "reason": last.reason}
            self.record("kube_pod_container_status_last_terminated_reason", labels, moment, 1.0)

    def gpu(self, pod: PodPlan, moment: datetime) -> None:
        """DCGM keeps attributing the GPU to the pod between container runs; with no process it holds nothing."""
        node = pod.node
        if node is None:
            return
        total_mib = round(node.memory_gib * 1024) + 768
        run = pod.run_at(moment)
        full = node.memory_gib * 1024 * self.plan.kv.gpu_memory_utilization + 530
        if run is None or run.engine_error in (CACHE_PERMISSION_ERROR, HUB_FORBIDDEN_ERROR, TENSOR_PARALLEL_ERROR):
            # The API server failed on its config before any process touched the GPU, or the engine waits for Ray
            # to place workers that would use it.
            used = 0
        elif run.engine_error in (DTYPE_ERROR, VLLM_PORT_ERROR):
            used = 500  # the engine process holds its CUDA context and nothing else when it refuses
        elif run.engine_error == CUDA_OOM_ERROR and (moment - run.started).total_seconds() >= (
            KV_SIZED_SHARE * pod.load_seconds
        ):
            # The KV cache is allocated and graph capture fills the last of the card: the OOM is imminent.
            used = round(total_mib - 768 - self.rng.uniform(40, 90))
        elif run.engine_error == KV_CAPACITY_ERROR:
            # The engine refuses before it allocates any KV cache: the weights, the CUDA context and (while it
            # profiles) the activation peak are all it ever holds.
            model = self.spec.isvc.model
            loading = min(1.0, (moment - run.started).total_seconds() / (KV_SIZED_SHARE * pod.load_seconds))
            used = round(500 + ((model.weights_gib + model.activation_gib) * 1024 + 30) * loading)
        else:
            loading = min(1.0, (moment - run.started).total_seconds() / max(1.0, pod.load_seconds))
            used = round(500 + (full - 500) * loading)
        states = self.pod_states[pod.name]
        running = states[-1].running if states and states[-1].at == moment else 0
        busy = 35 + 60 * running / max(1, self.ceiling) + self.rng.uniform(-3, 3) if running else 0.0
        labels = {
            "gpu": "0",
            "UUID": f"GPU-{pod.uid[:8]}-{pod.uid[9:13]}-{pod.uid[14:18]}-{pod.uid[19:23]}-{pod.uid[24:]}",
            "device": "nvidia0",
            "modelName": node.product.replace("-", " "),
            "Hostname": node.name,
            "namespace": self.spec.isvc.namespace,
            "pod": pod.name,
            "container": self.plan.container,
            "job": "dcgm-exporter",
        }
        self.record("DCGM_FI_DEV_FB_USED", labels, moment, used)
        self.record("DCGM_FI_DEV_FB_FREE", labels, moment, total_mib - 768 - used)
        self.record("DCGM_FI_DEV_GPU_UTIL", labels, moment, round(min(99.0, busy)))

    def step_edge(
        self, moment: datetime, demand: float, any_ready: bool, seconds: float, released: float, timed_out: float
    ) -> None:
        """Requests at the gateway (Istio) and, for Knative, at the revision; deployment availability."""
        isvc = self.spec.isvc
        ready = self.plan.ready_pods(moment)
        if moment >= self.spec.timeline.deployed_at:
            deployment = {"namespace": isvc.namespace, "deployment": self.plan.deployment, "job": "kube-state-metrics"}
            self.record("kube_deployment_status_replicas_available", deployment, moment, len(ready))
            stale = stale_hpa_target(self.spec)
            if stale is not None:
                # The canary copy scaled to zero: kube-state-metrics still exports its Deployment, at 0.
                self.record("kube_deployment_status_replicas_available", {**deployment, "deployment": stale}, moment, 0)
            if self.plan.hpa_name:
                hpa = {
                    "namespace": isvc.namespace,
                    "horizontalpodautoscaler": self.plan.hpa_name,
                    "job": "kube-state-metrics",
                }
                # The HPA reports its target's replicas: none for a target scaled to zero (scaling disabled).
                replicas = 0 if stale is not None else sum(1 for pod in self.plan.pods if pod.alive(moment))
                self.record("kube_horizontalpodautoscaler_status_current_replicas", hpa, moment, replicas)
                self.record("kube_horizontalpodautoscaler_status_desired_replicas", hpa, moment, replicas)
        if self.nginx_timeout is not None and moment >= self.spec.timeline.deployed_at:
            self.step_nginx(moment, demand * seconds if not ready else 0.0)
        if self.plan.llmisvc:
            return  # the Gateway's own metrics are its implementation's: the scenario serves none
        if self.spec.cluster.ingress != "istio" or moment < self.spec.timeline.deployed_at:
            return
        # Without a ready pod Istio finds no healthy upstream (503 UH), unless Knative's activator holds the
        # requests: those are answered when a pod is ready, or 504 when the revision timeout runs out.
        held = self.plan.serverless and self.plan.routed
        code, flags = ("200", "-") if any_ready or held else ("503", "UH")
        answered = demand * seconds + released if any_ready or not held else 0.0
        expired = 0  # requests the activator held past the revision timeout, answered 504 through the gateway
        for key, mean in (((code, flags), answered), (("504", "-"), timed_out)):
            count = poisson(self.rng, mean)
            if count:  # Istio creates a series with the first request of its kind
                self.gateway[key] = self.gateway.get(key, 0) + count
            if key == ("504", "-"):
                expired = count
        if self.revision_cut_now:  # queue-proxy's 504s pass the gateway unchanged (no Envoy flag)
            self.gateway[("504", "-")] = self.gateway.get(("504", "-"), 0) + self.revision_cut_now
        for (response_code, response_flags), total in sorted(self.gateway.items()):
            labels = {
                "reporter": "source",
                "source_workload": "istio-ingressgateway",
                "source_workload_namespace": "istio-system",
                "destination_workload": self.plan.deployment,
                "destination_workload_namespace": isvc.namespace,
                "destination_service_name": f"{isvc.name}-predictor",
                "destination_service_namespace": isvc.namespace,
                "request_protocol": "http",
                "response_code": response_code,
                "response_flags": response_flags,
            }
            self.record("istio_requests", labels, moment, total)
        if self.plan.serverless:
            self.step_knative(moment, ready, released, expired)

    def step_knative(self, moment: datetime, ready: list[PodPlan], released: float, expired: int) -> None:
        """queue-proxy's two counters per ready pod (knative/serving pkg/queue/sharedmain/handlers.go): the app's
        inside the revision timeout, which sees a cut request as 502, and the revision's outside it, which sees
        504; and the activator's for the requests it held while no pod was ready (200 released, 504 expired)."""
        base = {
            "namespace_name": self.spec.isvc.namespace,
            "configuration_name": self.plan.ksvc,
            "revision_name": self.plan.revision,
            "service_name": self.plan.ksvc,
        }
        for pod in ready:
            engine = self.engines[pod.name]
            labels = {**base, "pod_name": pod.name, "container_name": "queue-proxy"}
            for metric, cut_code in (("revision_app_request_count", "502"), ("revision_request_count", "504")):
                for code, total in (("200", engine.success), (cut_code, engine.revision_cut)):
                    if total:  # queue-proxy exports a series from the first request of its kind on
                        coded = {**labels, "response_code": code, "response_code_class": f"{code[0]}xx"}
                        self.record(metric, coded, moment, total)
        for code, count in (("200", round(released)), ("504", expired)):
            if count:
                self.activator_answers[code] = self.activator_answers.get(code, 0) + count
        for code, total in sorted(self.activator_answers.items()):
            labels = {
                **base,
                "pod_name": ACTIVATOR_POD,
                "container_name": "activator",
                "response_code": code,
                "response_code_class": f"{code[0]}xx",
            }
            self.record("activator_request_count", labels, moment, total)

    def step_nginx(self, moment: datetime, unserved: float) -> None:
        """ingress-nginx's request counter, scraped from the controller by a ServiceMonitor (so the Ingress's
        namespace and Service come as ``exported_*``): 200 for what vLLM answered, 504 for what its
        proxy-read-timeout cut, 503 while the Service has no ready endpoint."""
        isvc = self.spec.isvc
        ingress, host = nginx_route(self.spec)
        for status, count in (("200", self.finished_now), ("504", self.cut_now), ("503", poisson(self.rng, unserved))):
            if count:  # the controller creates a series with the first request of its kind
                self.nginx[status] = self.nginx.get(status, 0) + count
        for status, total in sorted(self.nginx.items()):
            labels = {
                "controller_class": "k8s.io/ingress-nginx",
                "controller_namespace": "ingress-nginx",
                "controller_pod": NGINX_CONTROLLER_POD,
                "exported_namespace": isvc.namespace,
                "exported_service": f"{isvc.name}-predictor",
                "host": host,
                "ingress": ingress,
                "method": "POST",
                "path": "/",
                "status": status,
                "namespace": "ingress-nginx",
                "service": "ingress-nginx-controller-metrics",
                "pod": NGINX_CONTROLLER_POD,
                "container": "controller",
                "endpoint": "metrics",
                "job": "ingress-nginx-controller-metrics",
            }
            self.record("nginx_ingress_controller_requests", labels, moment, total)

    def families(self) -> tuple[Family, ...]:
        kinds: dict[str, SampleType] = {
            "vllm:request_success": "counter",
            "vllm:prompt_tokens": "counter",
            "vllm:generation_tokens": "counter",
            "vllm:num_preemptions": "counter",
            "kube_pod_container_status_restarts": "counter",
            "istio_requests": "counter",
            "revision_app_request_count": "unknown",  # Knative publishes this counter without _total
            "revision_request_count": "unknown",
            "activator_request_count": "unknown",
            "nginx_ingress_controller_requests": "unknown",  # so does ingress-nginx
        }
        grouped: dict[str, list[Series]] = {}
        for (name, labels), samples in sorted(self.samples.items()):
            grouped.setdefault(name, []).append(Series(dict(labels), tuple(samples)))
        families: list[Family] = [
            SampleFamily(name, kinds.get(name, "gauge"), tuple(series)) for name, series in sorted(grouped.items())
        ]
        histogram_series: dict[str, list[HistogramSeries]] = {}
        for (name, labels), points in sorted(self.histogram_points.items()):
            histogram_series.setdefault(name, []).append(HistogramSeries(dict(labels), tuple(points)))
        families.extend(HistogramFamily(name, tuple(series)) for name, series in sorted(histogram_series.items()))
        return tuple(families)


def simulate(plan: Plan) -> Simulation:
    """The plan's series; an LLMInferenceService with a prefill workload adds that workload's, simulated from the
    same demand on its own plan (the prefill pods' requests end at their first token: disagg.prefill_plan)."""
    simulation = _Simulator(plan).run()
    if plan.prefill is None:
        return simulation
    return merged(simulation, _Simulator(plan.prefill).run())


def merged(first: Simulation, second: Simulation) -> Simulation:
    """Two simulations of disjoint pods as one: each family's series together (no label set may repeat)."""
    by_name: dict[tuple[str, str], list[Family]] = {}
    for family in (*first.families, *second.families):
        by_name.setdefault((type(family).__name__, family.name), []).append(family)
    families: list[Family] = []
    for parts in by_name.values():
        if len(parts) == 1:
            families.append(parts[0])
            continue
        labels = [tuple(sorted(series.labels.items())) for part in parts for series in part.series]
        if len(set(labels)) != len(labels):
            raise ValueError(f"metric family {parts[0].name!r}: both simulations wrote the same series")
        first_part = parts[0]
        if isinstance(first_part, SampleFamily):
            samples = tuple(series for part in parts if isinstance(part, SampleFamily) for series in part.series)
            families.append(replace(first_part, series=samples))
        else:
            points = tuple(series for part in parts if isinstance(part, HistogramFamily) for series in part.series)
            families.append(replace(first_part, series=points))
    overlap = set(first.pod_states) & set(second.pod_states)
    if overlap:
        raise ValueError(f"pods simulated twice: {sorted(overlap)}")
    return Simulation(tuple(families), {**first.pod_states, **second.pod_states})
