"""Step 8, ``queue_vs_oom``: was it queueing (capacity), KV-cache pressure or GPU out-of-memory, and do the
vLLM flags fit the GPU?

Sources, all read from the Evidence:

- Prometheus (DESIGN §5 ids): ``vllm_running`` / ``vllm_waiting`` per pod against the ``--max-num-seqs`` in
  effect, ``vllm_kv_cache_usage`` (a 0-1 fraction), ``vllm_preemptions_rate``, ``vllm_queue_time_p95``,
  request and token rates, 503/504 at the edge (Istio, ingress-nginx, Knative), restart counters, DCGM
  framebuffer (MiB, ``pod`` or ``exported_pod`` labels).
- Logs of the serving container (current and previous), matched on vLLM's and PyTorch's own wording:

  - ``torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 108.00 MiB. GPU 0 has a total capacity
    of 19.57 GiB of which 105.81 MiB is free`` (PyTorch's caching allocator), ``CUDA error: out of memory``;
  - V1: ``To serve at least one request with the models's max seq len (8192), (2.63 GiB KV cache is needed,
    which is larger than the available KV cache memory (1.64 GiB). Based on the available memory, the
    estimated maximum model length is 5088.`` (``check_enough_kv_cache_memory`` in
    vllm/v1/core/kv_cache_utils.py; quoted from vllm-project/vllm#20148; newer releases spell "model's"),
    and ``No available memory for the cache blocks`` from the same function;
  - V0: ``The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in
    KV cache (23648).`` (vllm-project/vllm#10517);
  - ``Free memory on device cuda:0 (3.25/23.43 GiB) on startup is less than desired GPU memory utilization
    (0.96, 22.49 GiB)`` (vLLM's worker start-up check; older releases omit the device name);
  - engine death: ``EngineDeadError`` ("EngineCore encountered an issue", vllm/v1/engine/exceptions.py),
    ``AsyncEngineDeadError`` and ``RuntimeError('Engine loop has died')`` (V0's multiprocessing client);
  - the start-up memory lines, read by :func:`nbhelpers.facts.vllm_log.parse_engine_log`.

The queue criteria (pinned, sustained, felt) and the regime decision live in :mod:`nbhelpers.models.regime`.
Flag values that fit the card come from :mod:`nbhelpers.models.vllm_memory` when the model and the GPU are
known; the engine's own numbers win over the estimate whenever the logs hold them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone

from nbhelpers.errors import RunbookError, StepSkipped
from nbhelpers.evidence.model import ContainerLog, Evidence
from nbhelpers.facts import common, engine, vllm_args
from nbhelpers.facts.engine import Valued
from nbhelpers.facts.vllm_log import EngineMemoryFacts, parse_engine_log
from nbhelpers.findings import patches
from nbhelpers.findings.model import Finding, Fix, Severity
from nbhelpers.findings.steps import StepInfo
from nbhelpers.metrics import series
from nbhelpers.models import regime
from nbhelpers.models.model_table import ModelArchitecture, lookup_model
from nbhelpers.models.vllm_memory import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_GPU_MEMORY_UTILIZATION,
    GIB,
    SAFE_MAX_UTILIZATION,
    KvCacheReport,
    ServingPlan,
    default_max_num_batched_tokens,
    estimate,
    safe_max_utilization,
)
from nbhelpers.sources import kube

STEP = StepInfo(
    "queue_vs_oom",
    "Queue vs OOM",
    "Is it queueing, KV-cache pressure or GPU OOM, and do the flags fit?",
)

UTIL_FLAG = "--gpu-memory-utilization"
SEQS_FLAG = engine.SEQS_FLAG
LEN_FLAG = "--max-model-len"
BATCHED_FLAG = "--max-num-batched-tokens"
TP_FLAG = "--tensor-parallel-size"

ESTIMATE_MARGIN_GIB = 0.6  # the memory model's largest measured error against real start-ups is 0.52 GiB
KV_HEADROOM = 0.8  # below this peak KV usage while saturated, more concurrency fits in the cache
KV_TARGET = 0.85  # the KV usage a recommended --max-num-seqs aims for
ROUND_TOKENS = 1024
EDGE_SOURCES = (
    ("istio_requests_by_code", "response_code", "Istio"),
    ("nginx_requests_by_status", "status", "ingress-nginx"),
    ("knative_requests_by_code", "response_code", "Knative"),
)
FAILED_CODES = frozenset({"503", "504"})

_NUMBER = r"([\d,]+(?:\.\d+)?)"
_CUDA_OOM = re.compile(r"CUDA out of memory|torch\.(?:cuda\.)?OutOfMemoryError|CUDA error: out of memory")
_OOM_ALLOCATION = re.compile(rf"Tried to allocate {_NUMBER} ?(GiB|MiB|KiB)")
_OOM_CAPACITY = re.compile(rf"total capacity of {_NUMBER} ?GiB of which {_NUMBER} ?(GiB|MiB|KiB|bytes) is free")
_KV_V1 = re.compile(
    rf"models?'s max seq len \({_NUMBER}\), \(?{_NUMBER} ?GiB KV cache is needed, which is larger than the "
    rf"available KV cache memory \({_NUMBER} ?GiB\)"
)
_KV_V1_ESTIMATE = re.compile(rf"estimated maximum model length is {_NUMBER}")
_KV_V0 = re.compile(
    rf"max seq len \({_NUMBER}\) is larger than the maximum number of tokens that can be stored in KV cache "
    rf"\({_NUMBER}\)"
)
_KV_NONE = re.compile(r"No available memory for the cache blocks")
_FREE_MEMORY = re.compile(
    rf"Free memory on device[^(]*\({_NUMBER}/{_NUMBER} ?GiB\) on startup is less than desired GPU memory "
    rf"utilization \({_NUMBER}, {_NUMBER} ?GiB\)"
)
_ENGINE_DEAD = re.compile(r"EngineDeadError|Engine loop has died|EngineCore encountered an issue")
_LOADED = re.compile(r"Model loading took|Loading model weights took")
_SERVING = re.compile(r"Application startup complete|Starting vLLM API server")


def run(evidence: Evidence) -> list[Finding]:
    common.skip_modelmesh(evidence)
    workload = common.current_workload(evidence)
    server = vllm_args.parse_container(workload.serving)
    context = _Context(evidence, workload, server)
    if server.server == vllm_args.UNKNOWN and not context.vllm_seen:
        raise StepSkipped("the serving container does not run vLLM and no vLLM metrics or logs were seen")
    findings: list[Finding] = []
    capacity = context.kv_capacity_exceeded()
    oom = context.gpu_oom()
    for finding in (capacity, oom, context.utilization_risky()):
        if finding is not None:
            findings.append(finding)
    findings.extend(context.queue_findings(gpu_oom=oom is not None, cannot_fit=capacity is not None))
    return findings


# --- small readers ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogHit:
    """Matching lines of one container log: the first line quoted, how often it matched, in which phase."""

    pod: str
    previous: bool
    line: str
    count: int
    phase: str  # "loading weights" | "starting up" | "serving"
    match: re.Match[str]

    def describe(self) -> str:
        where = f"{self.pod}{' (previous container)' if self.previous else ''}"
        times = f" ×{self.count}" if self.count > 1 else ""
        return f"log {where}, {self.phase}: {common.shorten(self.line, 300)!r}{times}"


def _phase(lines: Sequence[str], index: int) -> str:
    before = lines[:index]
    if any(_SERVING.search(line) for line in before):
        return "serving"
    if any(_LOADED.search(line) for line in before):
        return "starting up"
    return "loading weights"


def _scan(logs: Iterable[ContainerLog], pattern: re.Pattern[str]) -> list[LogHit]:
    hits = []
    for log in logs:
        lines = log.text.splitlines()
        matching = [(index, line) for index, line in enumerate(lines) if pattern.search(line)]
        if matching:
            index, line = matching[0]
            match = pattern.search(line)
            assert match is not None
            hits.append(
                LogHit(
                    log.pod, log.previous, common.strip_log_timestamp(line), len(matching), _phase(lines, index), match
                )
            )
    return hits


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _gib(amount: float, unit: str) -> float:
    return amount * {"GiB": 1.0, "MiB": 1 / 1024, "KiB": 1 / 1024**2, "bytes": 1 / GIB}[unit]


def _clock(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%H:%M:%S")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def _round_down(tokens: int) -> int:
    return tokens // ROUND_TOKENS * ROUND_TOKENS if tokens >= 2 * ROUND_TOKENS else tokens // 16 * 16


# --- the facts every finding of this step uses -------------------------------------------------------


class _Context:
    def __init__(self, evidence: Evidence, workload: common.Workload, server: vllm_args.ServerCommand) -> None:
        self.evidence = evidence
        self.workload = workload
        self.server = server
        self.container = str(workload.serving.get("name"))
        self.pods = common.predictor_pods(evidence)
        self.logs = engine.serving_logs(evidence, workload)
        self.engine = self._engine_facts()
        version = engine.vllm_version(evidence, workload)
        self.version = version.number if version is not None else None
        self.gpu = engine.serving_gpu(evidence, workload)
        self.model = self._model()
        self.plan = self._plan()
        self.step = float(next((d.step for d in evidence.metrics.values() if d.step), 15))
        self.rate_range = float(max(60, 4 * self.step))

    # --- what runs ---------------------------------------------------------------------------------

    @property
    def vllm_seen(self) -> bool:
        metrics = any(series.ok(self.evidence.metrics.get(query)) for query in ("vllm_running", "vllm_waiting"))
        return metrics or any("vllm" in log.text.lower() for log in self.logs)

    @property
    def objects(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((kube.ref(self.evidence.isvc), self.workload.ref)))

    def flag(self, name: str) -> str | None:
        return vllm_args.flag_value(self.server, name)

    def int_flag(self, name: str) -> int | None:
        return vllm_args.int_flag(self.server, name)

    def utilization(self) -> Valued:
        text = self.flag(UTIL_FLAG)
        try:
            return Valued(float(text), f"{UTIL_FLAG}={text}") if text else self._default_utilization()
        except ValueError:
            return self._default_utilization()

    @staticmethod
    def _default_utilization() -> Valued:
        return Valued(DEFAULT_GPU_MEMORY_UTILIZATION, f"{UTIL_FLAG} not set: vLLM default")

    def _engine_facts(self) -> EngineMemoryFacts:
        """The memory lines of the newest start-up that printed any: current containers first."""
        for log in sorted(self.logs, key=lambda log: log.previous):
            facts = parse_engine_log(log.text)
            if facts.found:
                return facts
        return EngineMemoryFacts()

    # --- the model ---------------------------------------------------------------------------------

    def _model(self) -> ModelArchitecture | None:
        for name in engine.model_names(self.evidence, self.workload):
            path = re.sub(r"^[a-z0-9]+://", "", name).strip("/")
            parts = path.split("/")
            for candidate in dict.fromkeys((path, "/".join(parts[-2:]), parts[-1])):
                try:
                    return lookup_model(candidate)
                except RunbookError:
                    continue
        return None

    def _plan(self) -> ServingPlan | None:
        if self.model is None or self.gpu is None:
            return None
        return ServingPlan(
            architecture=self.model,
            gpu=self.gpu.gpu,
            tensor_parallel_size=self.int_flag(TP_FLAG) or 1,
            pipeline_parallel_size=self.int_flag("--pipeline-parallel-size") or 1,
            gpu_memory_utilization=self.utilization().value,
            dtype=self.flag("dtype") or "auto",
            kv_cache_dtype=self.flag("kv-cache-dtype") or "auto",
            max_model_len=self.int_flag(LEN_FLAG),
            max_num_seqs=self.int_flag(SEQS_FLAG),
            max_num_batched_tokens=self.int_flag(BATCHED_FLAG),
            block_size=self.int_flag("block-size") or DEFAULT_BLOCK_SIZE,
            weights_gib=self.engine.model_loading_gib,
            vllm_version=self.version,
        )

    def estimate(self, plan: ServingPlan | None = None) -> KvCacheReport | None:
        chosen = plan or self.plan
        if chosen is None:
            return None
        try:
            return estimate(chosen)
        except RunbookError:
            return None

    def describe_plan(self) -> str:
        if self.plan is None:
            missing = [what for what, known in (("model", self.model), ("GPU", self.gpu)) if known is None]
            return f"memory model not applied: {' and '.join(missing)} not known"
        assert self.model is not None and self.gpu is not None
        return f"memory model: {self.model.name} on a GPU of {self.gpu.origin}"

    # --- the ceiling -------------------------------------------------------------------------------

    def ceiling(self) -> Valued | None:
        """Requests one pod runs at most (the metrics are summed over its data-parallel engines)."""
        return engine.max_num_seqs(self.evidence, self.workload)

    # --- restarts and 5xx --------------------------------------------------------------------------

    def restarts(self) -> list[str]:
        lines = []
        for pod in self.pods:
            for status in kube.status(pod).get("containerStatuses") or []:
                if status.get("name") != self.container or not int(status.get("restartCount") or 0):
                    continue
                last = ((status.get("lastState") or {}).get("terminated")) or {}
                waiting = ((status.get("state") or {}).get("waiting")) or {}
                detail = f"{status.get('restartCount')} restarts"
                if last:
                    detail += f", last exit {last.get('reason') or '?'} (code {last.get('exitCode')})"
                if waiting.get("reason"):
                    detail += f", now {waiting['reason']}"
                lines.append(f"{kube.ref(pod)}: {detail}")
        counted = series.by_pod(self.evidence.metrics.get("pod_restarts"))
        for pod_name, samples in sorted(counted.items()):
            values = [samples[t] for t in sorted(samples)]
            if values and values[-1] > values[0] and not any(pod_name in line for line in lines):
                lines.append(
                    f"pod {pod_name}: restart counter +{values[-1] - values[0]:.0f} in the window (kube-state-metrics)"
                )
        return lines

    def failed_requests(self) -> tuple[list[tuple[float, float]], list[str]]:
        """503/504 per second at the edge (the largest source per sample: they count the same requests)."""
        combined: dict[float, float] = {}
        lines = []
        for query, label, name in EDGE_SOURCES:
            data = series.ok(self.evidence.metrics.get(query))
            if data is None:
                continue
            per_t: dict[float, float] = {}
            for answer in data.series:
                if answer.labels.get(label) in FAILED_CODES:
                    for t, value in answer.samples:
                        if math.isfinite(value):
                            per_t[t] = per_t.get(t, 0.0) + value
            count = sum(per_t.values()) * data.step
            lines.append(f"{name}: ≈{count:.0f} answers 503/504 in the window")
            for t, value in per_t.items():
                combined[t] = max(combined.get(t, 0.0), value)
        return sorted(combined.items()), lines

    def gpu_memory_lines(self) -> list[str]:
        used = series.by_pod(self.evidence.metrics.get("gpu_fb_used_mib"))
        free = series.by_pod(self.evidence.metrics.get("gpu_fb_free_mib"))
        lines = []
        for pod, samples in sorted(used.items()):
            if not samples:
                continue
            peak_t = max(samples, key=lambda t: samples[t])
            total = samples[peak_t] + free.get(pod, {}).get(peak_t, math.nan)
            share = f" of {total:,.0f} MiB ({samples[peak_t] / total:.0%})" if math.isfinite(total) else ""
            lines.append(f"DCGM {pod}: framebuffer used up to {samples[peak_t]:,.0f} MiB{share} at {_clock(peak_t)}")
        return lines

    # --- VLLM_KV_CAPACITY_EXCEEDED --------------------------------------------------------------------

    def kv_capacity_exceeded(self) -> Finding | None:
        v1 = _scan(self.logs, _KV_V1)
        v0 = _scan(self.logs, _KV_V0)
        empty = _scan(self.logs, _KV_NONE)
        if v1 or v0:
            return self._capacity_from_log(v1, v0)
        if empty:
            return self._no_cache_blocks(empty)
        return self._capacity_computed()

    def _capacity_from_log(self, v1: list[LogHit], v0: list[LogHit]) -> Finding:
        hit = (v1 or v0)[0]
        rejected = int(_number(hit.match.group(1)))
        lines = [hit.describe() for hit in v1 + v0]
        if v1:
            needed, available = _number(hit.match.group(2)), _number(hit.match.group(3))
            estimated = _KV_V1_ESTIMATE.search(hit.line)
            fits = int(_number(estimated.group(1))) if estimated else None
            engine = (
                f"vLLM needs {needed:.2f} GiB of KV cache for one request of {rejected:,} tokens but has "
                f"{available:.2f} GiB"
            )
        else:
            fits = int(_number(hit.match.group(2)))
            engine = f"vLLM can store {fits:,} tokens in its KV cache, fewer than one request of {rejected:,}"
        what = engine + (f"; its own estimate of the longest length that fits is {fits:,}" if fits else "")
        summary = (
            f"{what}. The engine refuses to start, so the container exits and restarts: the pods never turn ready "
            f"and every request fails (503) until the configuration changes."
        )
        change = {LEN_FLAG: str(_round_down(fits))} if fits else {}
        return self._capacity_finding(summary, lines, change, rejected)

    def _no_cache_blocks(self, hits: list[LogHit]) -> Finding:
        report = self.estimate()
        detail = ""
        if report is not None and not report.budget.exact:
            budget = report.budget
            detail = (
                f" The memory model agrees: usable {budget.usable / GIB:.2f} GiB minus weights {budget.weights / GIB:.2f}"
                f" GiB and activation peak {budget.activation / GIB:.2f} GiB leaves {budget.available / GIB:.2f} GiB."
            )
        summary = (
            "vLLM found no memory at all for KV-cache blocks after loading the weights and profiling a forward pass "
            f'("No available memory for the cache blocks"): the engine refuses to start.{detail}'
        )
        remediation = self._more_memory_text(report)
        return Finding(
            code="VLLM_KV_CAPACITY_EXCEEDED",
            title="no GPU memory left for the KV cache after the weights",
            summary=summary,
            objects=self.objects,
            evidence=tuple([hit.describe() for hit in hits] + self._memory_lines()),
            fix=Fix(what=remediation),
        )

    def _capacity_computed(self) -> Finding | None:
        if self.engine.kv_cache_tokens or self.engine.gpu_blocks or self.engine.max_concurrency:
            return None  # the engine sized its cache and started: its numbers beat any estimate
        if _scan(self.logs, _CUDA_OOM) or self._weights_exceed_gpu():
            return None  # the engine dies before it sizes a cache: GPU_OOM says so
        report = self.estimate()
        if report is None or report.fits:
            return None
        needed_gib = report.max_model_len * report.kv_bytes_per_token / GIB
        summary = (
            f"Computed (no start-up line of the engine was seen): one request of --max-model-len "
            f"{report.max_model_len:,} tokens needs {needed_gib:.2f} GiB of KV cache, but about "
            f"{report.available_kv_gib:.2f} GiB ({report.kv_tokens:,} tokens) remain after the weights and the "
            "activation peak. vLLM checks this at start-up and refuses to start, so the pods never turn ready."
        )
        usable = self._tokens_with_margin(report)
        change = {LEN_FLAG: str(_round_down(usable))} if usable >= 16 else {}
        return self._capacity_finding(summary, [], change, report.max_model_len)

    def utilization_cap(self) -> float:
        """The highest --gpu-memory-utilization worth suggesting on this card (less than 0.95 on small ones)."""
        return safe_max_utilization(self.gpu.gpu.total_bytes) if self.gpu is not None else SAFE_MAX_UTILIZATION

    def _capacity_finding(self, summary: str, lines: list[str], change: dict[str, str], rejected: int) -> Finding:
        plan = self.args_patch(change) if change else None
        if change:
            what = (
                f"Set {LEN_FLAG} {change[LEN_FLAG]} (the longest context that fits, rounded down): requests longer "
                "than that are refused with a 400 instead of the whole service failing. To keep "
                f"{rejected:,} tokens instead, give the KV cache more memory: a GPU with more memory, more GPUs "
                f"({TP_FLAG}), --kv-cache-dtype fp8, or {UTIL_FLAG} up to {self.utilization_cap()}."
            )
        else:
            what = self._more_memory_text(self.estimate())
        report = self.estimate()
        if report is not None and report.recommended_flags and report.budget.available > 0:
            advice = " ".join(f"{name} {value}" for name, value in report.recommended_flags.items())
            what += f" The memory model's cheapest change that keeps {report.max_model_len:,} tokens: {advice}."
        return Finding(
            code="VLLM_KV_CAPACITY_EXCEEDED",
            title=f"--max-model-len {rejected:,} does not fit the KV cache",
            summary=summary,
            objects=self.objects,
            evidence=tuple(lines + self._memory_lines() + self.restarts()),
            fix=Fix.from_plan(what, plan, no_patch=self._no_patch_reason()),
        )

    def _more_memory_text(self, report: KvCacheReport | None) -> str:
        text = (
            "Leave more of the GPU to the KV cache: a smaller (quantized) model, a GPU with more memory, or more "
            f"GPUs per replica ({TP_FLAG})."
        )
        if report is not None:
            size = self._tensor_parallel_that_fits()
            if size:
                text += f" The memory model fits the model and its context at {TP_FLAG} {size} ({size} GPUs per pod)."
        return text

    def _tokens_with_margin(self, report: KvCacheReport) -> int:
        """KV tokens that fit when the estimate is ESTIMATE_MARGIN_GIB too optimistic (exact numbers need none)."""
        margin = 0 if report.budget.exact else int(ESTIMATE_MARGIN_GIB * GIB)
        assert self.plan is not None
        block = self.plan.block_size
        blocks = max(0, (report.budget.available - margin) // (report.kv_bytes_per_token * block))
        return int(min(blocks * block, self.plan.architecture.max_position_embeddings))

    def _weights_exceed_gpu(self) -> bool:
        """The estimated weights per GPU are larger than the whole GPU: loading them runs out of memory."""
        report = self.estimate()
        return report is not None and self.plan is not None and report.budget.weights > self.plan.gpu.total_bytes

    def _tensor_parallel_that_fits(self) -> int | None:
        if self.plan is None:
            return None
        heads = self.plan.architecture.num_key_value_heads
        for size in (2, 4, 8):
            if size <= self.plan.tensor_parallel_size or (heads % size and size % heads):
                continue
            wider = replace(self.plan, tensor_parallel_size=size, weights_gib=None, available_kv_gib=None)
            report = self.estimate(wider)
            if report is not None and report.fits and report.budget.available > 0:
                return size
        return None

    def _memory_lines(self) -> list[str]:
        lines = [self.describe_plan()]
        engine = self.engine
        if engine.model_loading_gib is not None:
            lines.append(f"engine: weights {engine.model_loading_gib:.2f} GiB per GPU")
        if engine.available_kv_gib is not None:
            lines.append(f"engine: available KV cache memory {engine.available_kv_gib:.2f} GiB")
        if engine.kv_cache_tokens is not None:
            lines.append(f"engine: KV cache {engine.kv_cache_tokens:,} tokens")
        lines.append(f"GPU memory utilization: {self.utilization().value} ({self.utilization().origin})")
        return lines + self.gpu_memory_lines()

    # --- GPU_OOM --------------------------------------------------------------------------------------

    def gpu_oom(self) -> Finding | None:
        hits = _scan(self.logs, _CUDA_OOM)
        if not hits:
            return self._oom_computed()
        dead = _scan(self.logs, _ENGINE_DEAD)
        details = []
        for hit in hits:
            allocation = _OOM_ALLOCATION.search(hit.line)
            capacity = _OOM_CAPACITY.search(hit.line)
            if allocation:
                detail = f"tried to allocate {_number(allocation.group(1)):g} {allocation.group(2)}"
                if capacity:
                    free = _gib(_number(capacity.group(2)), capacity.group(3))
                    detail += f" with {free:.2f} GiB free of {_number(capacity.group(1)):.2f} GiB"
                details.append(detail)
        phases = sorted({hit.phase for hit in hits})
        pods = sorted({hit.pod for hit in hits})
        restarts = self.restarts()
        summary = (
            f"The GPU ran out of memory ({'; '.join(dict.fromkeys(details)) or 'CUDA out of memory'}) while "
            f"{' and '.join(phases)} in {len(pods)} pod(s). vLLM preallocates its KV cache at start-up, so an "
            "out-of-memory error means the weights, the activation peak or memory outside vLLM's budget (CUDA graphs, "
            "other processes) do not fit the card with these flags; the engine dies"
            + (", the container restarts" if restarts else "")
            + " and requests fail until it is back."
        )
        fix = self._oom_fix(hits)
        return Finding(
            code="GPU_OOM",
            title=f"CUDA out of memory in {len(pods)} pod(s) while {' and '.join(phases)}",
            summary=summary,
            objects=tuple(
                dict.fromkeys([*self.objects, *(f"Pod/{self.evidence.target.namespace}/{pod}" for pod in pods)])
            ),
            evidence=tuple([hit.describe() for hit in hits + dead] + restarts + self._memory_lines()),
            fix=fix,
        )

    def _oom_computed(self) -> Finding | None:
        """No out-of-memory line was seen (logs rotated or not captured), but the pods crash and the weights
        alone are larger than the GPU: loading them cannot succeed."""
        restarts = self.restarts()
        if not restarts or not self._weights_exceed_gpu():
            return None
        report = self.estimate()
        assert report is not None and self.plan is not None and self.model is not None
        weights, total = report.budget.weights / GIB, self.plan.gpu.total_bytes / GIB
        summary = (
            f"Computed (no log line of the crash was seen): {self.model.name} needs about {weights:.1f} GiB of weights "
            f"per GPU at {TP_FLAG} {self.plan.tensor_parallel_size}, more than the {total:.2f} GiB of the GPU, and the "
            "serving container keeps restarting: loading the weights runs out of GPU memory."
        )
        fix = self._oom_fix([])
        return Finding(
            code="GPU_OOM",
            title=f"weights of {weights:.0f} GiB per GPU do not fit a {total:.0f} GiB GPU",
            summary=summary,
            objects=self.objects,
            evidence=tuple(restarts + self._memory_lines()),
            fix=fix,
        )

    def _oom_fix(self, hits: list[LogHit]) -> Fix:
        if all(hit.phase == "loading weights" for hit in hits):
            text = (
                "The weights alone do not fit the GPU (the error came before vLLM finished loading them), so no flag "
                "of a single GPU helps: use more GPUs per replica, a quantized model, or a larger GPU."
            )
            size = self._tensor_parallel_that_fits()
            if size:
                text += (
                    f" The memory model fits it at {TP_FLAG} {size}: request {size} GPUs (nvidia.com/gpu: {size}) "
                    "and mount a memory-backed /dev/shm."
                )
            return Fix(what=text)
        current = self.utilization().value
        lowered = (
            DEFAULT_GPU_MEMORY_UTILIZATION if current > DEFAULT_GPU_MEMORY_UTILIZATION else round(current - 0.05, 2)
        )
        changes = {UTIL_FLAG: f"{lowered:g}"}
        batched = self.int_flag(BATCHED_FLAG)
        if batched is not None and self.gpu is not None:
            default = default_max_num_batched_tokens(self.version, self.gpu.gpu, self.int_flag(LEN_FLAG) or batched)
            if batched > default.value:
                changes[BATCHED_FLAG] = str(default.value)
        fitted, notes = self.fitting(changes)
        if fitted is None:
            return Fix(what=" ".join(notes))
        reasons = [
            f"{UTIL_FLAG} {fitted[UTIL_FLAG]} leaves memory outside vLLM's budget for CUDA graphs, the sampler and "
            "the CUDA context"
        ]
        if BATCHED_FLAG in fitted:
            reasons.append(f"{BATCHED_FLAG} {fitted[BATCHED_FLAG]} (the default here) shrinks the activation peak")
        if LEN_FLAG in fitted:
            reasons.append(f"{LEN_FLAG} {fitted[LEN_FLAG]} is what then still fits the smaller KV cache")
        what = "Choose flags that fit the card: " + "; ".join(reasons) + ". " + " ".join(notes)
        plan = self.args_patch(fitted)
        return Fix.from_plan(what, plan, no_patch=self._no_patch_reason())

    def fitting(self, changes: dict[str, str]) -> tuple[dict[str, str] | None, list[str]]:
        """``changes`` plus a --max-model-len that still fits, when the memory model can tell (None: nothing fits)."""
        if self.plan is None:
            return dict(changes), [
                f"({self.describe_plan()}: check the engine's 'Maximum concurrency' line after the change.)"
            ]
        plan = replace(
            self.plan,
            gpu_memory_utilization=float(changes.get(UTIL_FLAG, self.plan.gpu_memory_utilization)),
            max_num_batched_tokens=int(changes[BATCHED_FLAG])
            if BATCHED_FLAG in changes
            else self.plan.max_num_batched_tokens,
            available_kv_gib=None,
        )
        report = self.estimate(plan)
        if report is None:
            return dict(changes), [f"({self.describe_plan()}, but it cannot size this configuration.)"]
        tokens = self._tokens_with_margin(report)
        if tokens < 16:
            size = self._tensor_parallel_that_fits()
            more = f" ({TP_FLAG} {size} would)" if size else ""
            return None, [
                f"No flag on one GPU fits: the memory model leaves {report.available_kv_gib:.2f} GiB for the KV cache "
                f"after the weights and activations; use more GPUs per replica{more}, a quantized model or a larger GPU."
            ]
        fitted = dict(changes)
        if tokens < report.max_model_len:
            fitted[LEN_FLAG] = str(_round_down(tokens))
        concurrency = tokens / int(fitted.get(LEN_FLAG, report.max_model_len))
        return fitted, [
            f"The memory model estimates {tokens:,} KV tokens with these flags (after a {ESTIMATE_MARGIN_GIB} GiB "
            f"safety margin), {concurrency:.2f} requests of full length at once; confirm with the engine's 'GPU KV "
            "cache size' line after the rollout."
        ]

    # --- VLLM_MEMORY_UTILIZATION_RISKY -------------------------------------------------------------------

    def utilization_risky(self) -> Finding | None:
        hits = _scan(self.logs, _FREE_MEMORY)
        utilization = self.utilization()
        if hits:
            return self._free_memory_short(hits)
        if utilization.value > SAFE_MAX_UTILIZATION:
            return self._utilization_too_high(utilization)
        return None

    def _utilization_too_high(self, utilization: Valued) -> Finding:
        summary = (
            f"{utilization.origin} lets vLLM take {utilization.value:.0%} of the GPU's memory for weights, activations "
            f"and KV cache, leaving {1 - utilization.value:.0%} for everything outside its budget: CUDA graphs, the "
            "CUDA context and NCCL buffers, and any other process on the GPU. Above "
            f"{SAFE_MAX_UTILIZATION} that headroom is too small and the engine fails with CUDA out of memory when "
            "one of them grows."
        )
        fitted, notes = self.fitting({UTIL_FLAG: f"{DEFAULT_GPU_MEMORY_UTILIZATION:g}"})
        what = f"Set {UTIL_FLAG} {DEFAULT_GPU_MEMORY_UTILIZATION:g} (vLLM's default). " + " ".join(notes)
        plan = self.args_patch(fitted) if fitted else None
        if fitted and LEN_FLAG in fitted:
            what += f" With less KV memory {LEN_FLAG} {fitted[LEN_FLAG]} is what still fits."
        return Finding(
            code="VLLM_MEMORY_UTILIZATION_RISKY",
            title=f"{UTIL_FLAG} {utilization.value} leaves no headroom",
            summary=summary,
            objects=self.objects,
            evidence=tuple(self._memory_lines()),
            fix=Fix.from_plan(what, plan, no_patch=self._no_patch_reason()),
        )

    def _free_memory_short(self, hits: list[LogHit]) -> Finding:
        hit = hits[0]
        free, total, wanted, wanted_gib = (_number(hit.match.group(i)) for i in range(1, 5))
        others = total - free
        restarts = self.restarts()
        repeated = sum(h.count for h in hits) > 1 or bool(restarts)
        summary = (
            f"At start-up only {free:.2f} of {total:.2f} GiB were free on the GPU, less than the {wanted_gib:.2f} GiB "
            f"that {UTIL_FLAG} {wanted:g} asks for: {others:.2f} GiB were held by something else (another process on a "
            "shared or time-sliced GPU, or a previous engine that had not exited). vLLM refuses to start."
        )
        severity = None
        if repeated:
            summary += (
                " It failed repeatedly and the container restarted: raised to critical (requests fail meanwhile)."
            )
            severity = Severity.CRITICAL
        safe = math.floor((free / total - 0.02) * 100) / 100
        plan = None
        what = (
            "Find what else holds the GPU (nvidia-smi on the node; GPU sharing by time-slicing or MPS gives every "
            "pod the whole card's size) and free it, or give vLLM a share that is really free."
        )
        if safe >= 0.5:
            fitted, notes = self.fitting({UTIL_FLAG: f"{safe:g}"})
            if fitted:
                what += f" {UTIL_FLAG} {safe:g} fits into the {free:.2f} GiB that were free. " + " ".join(notes)
                plan = self.args_patch(fitted)
        return Finding(
            code="VLLM_MEMORY_UTILIZATION_RISKY",
            title=f"free GPU memory at start ({free:.2f} GiB) is below {UTIL_FLAG} {wanted:g}",
            summary=summary,
            objects=self.objects,
            evidence=tuple([h.describe() for h in hits] + restarts + self._memory_lines()),
            fix=Fix.from_plan(what, plan),
            severity=severity,
        )

    # --- QUEUE_SATURATION and KV_CACHE_PRESSURE ------------------------------------------------------------

    def queue_facts(self, ceiling: Valued | None) -> regime.QueueFacts | None:
        running = series.by_pod(self.evidence.metrics.get("vllm_running"))
        waiting = series.by_pod(self.evidence.metrics.get("vllm_waiting"))
        usage = series.by_pod(self.evidence.metrics.get("vllm_kv_cache_usage"))
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
        failed, _ = self.failed_requests()
        return regime.QueueFacts(
            step=self.step,
            rate_range=self.rate_range,
            pods=pods,
            ceiling=ceiling.value if ceiling else None,
            preemptions=tuple(series.summed(self.evidence.metrics.get("vllm_preemptions_rate")).items()),
            queue_time_p95=tuple(series.summed(self.evidence.metrics.get("vllm_queue_time_p95")).items()),
            failed_requests=failed,
        )

    def queue_findings(self, gpu_oom: bool, cannot_fit: bool) -> list[Finding]:
        ceiling = self.ceiling()
        facts = self.queue_facts(ceiling)
        if facts is None:
            return []
        analysis = regime.analyse(facts)
        regimes = regime.decide(analysis, gpu_oom, cannot_fit)
        regime_line = f"regime of the window: {regime.explain(regimes)}"
        findings = []
        if analysis.kv_pressures:
            findings.append(self._kv_pressure(analysis, facts, ceiling, regime_line))
        if analysis.saturated:
            findings.append(self._saturation(analysis, facts, ceiling, regime_line))
        return findings

    def _ceiling_text(self, analysis: regime.QueueAnalysis, ceiling: Valued | None) -> str:
        used = sorted({s.ceiling for s in analysis.saturated})
        if ceiling is not None and used == [ceiling.value]:
            return f"ceiling {ceiling.value:.0f} ({ceiling.origin})"
        why = "flag not set" if ceiling is None else f"running exceeded {ceiling.origin}: other flags then"
        return f"ceiling {', '.join(f'{p:.0f}' for p in used)} (observed plateau of running requests; {why})"

    def _traffic_lines(self) -> list[str]:
        lines = []
        for query, label in (
            ("vllm_request_rate", "finished requests"),
            ("vllm_prompt_tokens_rate", "prompt tokens"),
            ("vllm_generation_tokens_rate", "generated tokens"),
        ):
            peak = series.peak(series.summed(self.evidence.metrics.get(query)))
            if peak is not None:
                lines.append(f"{label}: peak {peak:,.1f}/s")
        queue = series.peak(series.summed(self.evidence.metrics.get("vllm_queue_time_p95")))
        ttft = series.peak(series.summed(self.evidence.metrics.get("vllm_ttft_p95")))
        e2e = series.peak(series.summed(self.evidence.metrics.get("vllm_e2e_p99")))
        for name, value in (("queue time p95", queue), ("time to first token p95", ttft), ("end-to-end p99", e2e)):
            if value is not None:
                lines.append(f"{name}: peak {value:.1f} s")
        return lines

    def _saturation(
        self,
        analysis: regime.QueueAnalysis,
        facts: regime.QueueFacts,
        ceiling: Valued | None,
        regime_line: str,
    ) -> Finding:
        saturated = analysis.saturated
        longest = max(saturated, key=lambda s: s.episode.seconds)
        pods = sorted({s.episode.pod for s in saturated})
        failed = regime.count_during(facts.failed_requests, [s.episode for s in saturated], facts.rate_range)
        deepest = max(s.episode.peak_waiting for s in saturated)
        queue_peak = max((s.queue_time_peak for s in saturated if s.queue_time_peak is not None), default=None)
        summary = (
            f"For up to {_minutes(longest.episode.seconds)} requests waited in vLLM's queue (up to {deepest:.0f}) "
            f"while {len(pods)} pod(s) ran at their {self._ceiling_text(analysis, ceiling)}"
            + (f"; queue time p95 reached {queue_peak:.1f} s" if queue_peak is not None else "")
            + ". No KV-cache pressure or GPU out-of-memory explains it: the service had less capacity than demand."
        )
        severity = None
        if failed >= 1:
            summary += (
                f" About {failed:.0f} requests were answered 503/504 at the edge during these episodes: raised to "
                "critical."
            )
            severity = Severity.CRITICAL
        evidence = [
            f"pod {s.episode.pod}: {_clock(s.episode.start)}-{_clock(s.episode.end)} ({_minutes(s.episode.seconds)}): "
            f"running up to {s.episode.peak_running:.0f}/{s.ceiling:.0f}, waiting up to {s.episode.peak_waiting:.0f}"
            + (f", KV usage up to {s.episode.peak_kv:.2f}" if s.episode.peak_kv is not None else "")
            for s in saturated
        ]
        evidence.append(
            f"criterion: waiting ≥ 1 and running ≥ {regime.PINNED:.0%} of the ceiling on every sample for ≥ "
            f"{_minutes(regime.min_episode_seconds(facts.step))}, with a queue of ≥ "
            f"{regime.deep_queue(longest.ceiling):.0f}, queue time ≥ {regime.SLOW_QUEUE_SECONDS:.0f} s or 503/504"
        )
        if analysis.short_queues:
            evidence.append(f"{analysis.short_queues} shorter queue episode(s) drained on their own (not counted)")
        evidence += self._traffic_lines() + self.failed_requests()[1] + [regime_line]
        fix = self._capacity_fix(saturated, facts, ceiling)
        return Finding(
            code="QUEUE_SATURATION",
            title=f"requests queued at the concurrency ceiling for {_minutes(longest.episode.seconds)} ({len(pods)} pod(s))",
            summary=summary,
            objects=tuple(
                dict.fromkeys([*self.objects, *(f"Pod/{self.evidence.target.namespace}/{pod}" for pod in pods)])
            ),
            evidence=tuple(evidence),
            fix=fix,
            severity=severity,
        )

    def _capacity_fix(
        self, saturated: Sequence[regime.Saturation], facts: regime.QueueFacts, ceiling: Valued | None
    ) -> Fix:
        kv_peaks = [s.episode.peak_kv for s in saturated]
        known = [kv for kv in kv_peaks if kv is not None]
        current = max(s.ceiling for s in saturated)
        if known and len(known) == len(kv_peaks) and max(known) <= KV_HEADROOM and self.server.server == vllm_args.VLLM:
            raised = int(min(2 * current, math.floor(current * KV_TARGET / max(max(known), 0.01))))
            if raised > current:
                what = (
                    f"The KV cache was at most {max(known):.0%} full while running sat at {current:.0f}: the pods can "
                    f"run more requests at once. Raise {SEQS_FLAG} to {raised} (aims at {KV_TARGET:.0%} KV usage at "
                    "the same request sizes; at most double per change), then watch vllm:kv_cache_usage_perc and "
                    "preemptions. Add replicas if demand grows further."
                )
                plan = self.args_patch({SEQS_FLAG: str(raised)})
                return Fix.from_plan(what, plan, no_patch=self._no_patch_reason())
        demand = max((s.episode.peak_running + s.episode.peak_waiting) / s.ceiling for s in saturated)
        serving = max(
            sum(1 for samples in facts.pods.values() if any(s.episode.overlaps(p.t, 0) for p in samples))
            for s in saturated
        )
        needed = math.ceil(serving * demand)
        predictor = kube.spec(self.evidence.isvc).get("predictor") or {}
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
                what=what
                + f" maxReplicas is already {max_replicas}: the autoscaler did not scale out in time; see the "
                "scale_target and metric_pipeline steps (a per-pod target at or above the ceiling scales too late)."
            )

        def raise_max(isvc: common.KubeObject) -> None:
            isvc["spec"]["predictor"]["maxReplicas"] = needed

        plan = patches.plan_patch(self.evidence.isvc, raise_max)
        return Fix.from_plan(
            what + f" Raise maxReplicas from {max_replicas} to {needed} (and make sure GPUs for them exist).", plan
        )

    def _kv_pressure(
        self, analysis: regime.QueueAnalysis, facts: regime.QueueFacts, ceiling: Valued | None, regime_line: str
    ) -> Finding:
        pressures = analysis.kv_pressures
        longest = max(pressures, key=lambda p: p.episode.seconds)
        pods = sorted({p.episode.pod for p in pressures})
        preempted = sum(p.preemptions for p in pressures)
        failed = regime.count_during(facts.failed_requests, [p.episode for p in pressures], facts.rate_range)
        peak_running = max(p.episode.peak_running for p in pressures)
        blocked = any(p.blocked_queue for p in pressures)
        parts = []
        if preempted >= 1:
            parts.append(f"about {preempted:.0f} preemptions (running requests evicted and recomputed later)")
        if blocked:
            parts.append(
                "requests waiting while running stayed below the concurrency ceiling (admission blocked by the cache)"
            )
        summary = (
            f"The KV cache was ≥ {regime.KV_FULL:.0%} full for up to {_minutes(longest.episode.seconds)} in "
            f"{len(pods)} pod(s) with {' and '.join(parts)}, at up to {peak_running:.0f} running requests. The requests "
            "in flight needed more context than the cache holds: throughput drops and latency grows."
        )
        if self.engine.kv_cache_tokens:
            summary += (
                f" The engine's cache holds {self.engine.kv_cache_tokens:,} tokens, about "
                f"{self.engine.kv_cache_tokens / max(peak_running, 1):,.0f} per running request at that concurrency."
            )
        severity = None
        if failed >= 1:
            summary += f" About {failed:.0f} requests were answered 503/504 during these episodes: raised to critical."
            severity = Severity.CRITICAL
        target = max(1, math.floor(peak_running * KV_TARGET / max(longest.episode.peak_kv or 1.0, regime.KV_FULL)))
        current = ceiling.value if ceiling else None
        evidence = [
            f"pod {p.episode.pod}: {_clock(p.episode.start)}-{_clock(p.episode.end)} ({_minutes(p.episode.seconds)}): "
            f"KV usage up to {p.episode.peak_kv or 0:.2f}, running up to {p.episode.peak_running:.0f}, "
            f"waiting up to {p.episode.peak_waiting:.0f}, ≈{p.preemptions:.0f} preemptions"
            for p in pressures
        ]
        if ceiling is not None:
            evidence.append(f"concurrency ceiling: {ceiling.value:.0f} ({ceiling.origin})")
        evidence += self._traffic_lines() + self._memory_lines() + self.failed_requests()[1] + [regime_line]
        alternatives = (
            f"Alternatives: {LEN_FLAG} lower (bounds each request's share), --kv-cache-dtype fp8 (halves the bytes per "
            f"token), more memory for the cache ({UTIL_FLAG} up to {self.utilization_cap()}, more GPUs per replica), and "
            "replicas to keep throughput."
        )
        if current is not None and current <= target:
            return Finding(
                code="KV_CACHE_PRESSURE",
                title="KV cache was full with preemptions; the current --max-num-seqs already caps below that load",
                summary=summary
                + f" The current ceiling {current:.0f} is already below the {peak_running:.0f} running then.",
                objects=self.objects,
                evidence=tuple(evidence),
                fix=Fix(what=alternatives),
                severity=Severity.INFO,
            )
        what = (
            f"Lower {SEQS_FLAG} to {target}: at the observed request sizes that keeps the cache near {KV_TARGET:.0%}, "
            "so requests wait in the queue instead of being preempted and recomputed. " + alternatives
        )
        plan = self.args_patch({SEQS_FLAG: str(target)})
        return Finding(
            code="KV_CACHE_PRESSURE",
            title=f"KV cache full for {_minutes(longest.episode.seconds)} with "
            + ("preemptions" if preempted >= 1 else "requests held back"),
            summary=summary,
            objects=tuple(
                dict.fromkeys([*self.objects, *(f"Pod/{self.evidence.target.namespace}/{pod}" for pod in pods)])
            ),
            evidence=tuple(evidence),
            fix=Fix.from_plan(what, plan, no_patch=self._no_patch_reason()),
            severity=severity,
        )

    # --- patches -----------------------------------------------------------------------------------

    def _no_patch_reason(self) -> str:
        if self.server.shell_wrapped:
            return "(No patch: the server starts through a shell script; change the flags there.)"
        return "(No patch: the InferenceService does not declare the serving container.)"

    def args_patch(self, changes: Mapping[str, str]) -> patches.PatchPlan | None:
        """A merge patch of the ISVC's serving container args with each flag set (the whole list, DESIGN §4.3).

        An existing spelling (``--flag v``, ``--flag=v``, underscores) is replaced where it stands; a flag the ISVC
        does not carry is appended: KServe appends the ISVC's args after the runtime's, and vLLM keeps the last.
        """
        located = common.isvc_serving_container(self.evidence.isvc)
        if located is None or self.server.shell_wrapped or not changes:
            return None
        _, accessor = located

        def set_flags(isvc: common.KubeObject) -> None:
            container = accessor.get(isvc)
            args = [str(arg) for arg in container.get("args") or []]
            for flag, value in changes.items():
                args = common.set_flag(args, flag, value)
            container["args"] = args

        return patches.plan_patch(self.evidence.isvc, set_flags)
