"""The facts every queue_vs_oom finding uses: the engine's flags, logs and start-up memory lines, the model and
the GPU, restarts and 503/504 at the edge, and the patch of the serving container's args.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from nbhelpers.errors import RunbookError
from nbhelpers.evidence.model import ContainerLog, Evidence
from nbhelpers.facts import common, engine, vllm_args
from nbhelpers.facts.engine import Valued
from nbhelpers.facts.vllm_log import EngineMemoryFacts, parse_engine_log
from nbhelpers.findings import patches
from nbhelpers.metrics import series
from nbhelpers.models.load_time import WEIGHTS_LOADED
from nbhelpers.models.model_table import ModelArchitecture, lookup_model
from nbhelpers.models.vllm_memory import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_GPU_MEMORY_UTILIZATION,
    KvCacheReport,
    ServingPlan,
    estimate,
)
from nbhelpers.sources import kube

UTIL_FLAG = "--gpu-memory-utilization"
SEQS_FLAG = engine.SEQS_FLAG
LEN_FLAG = "--max-model-len"
BATCHED_FLAG = "--max-num-batched-tokens"
TP_FLAG = "--tensor-parallel-size"
ROUND_TOKENS = 1024
EDGE_SOURCES = (
    ("istio_requests_by_code", "response_code", "Istio"),
    ("nginx_requests_by_status", "status", "ingress-nginx"),
    ("knative_requests_by_code", "response_code", "Knative"),
)
FAILED_CODES = frozenset({"503", "504"})
NUMBER = r"([\d,]+(?:\.\d+)?)"
CUDA_OOM = re.compile(r"CUDA out of memory|torch\.(?:cuda\.)?OutOfMemoryError|CUDA error: out of memory")
_LOADED = WEIGHTS_LOADED
_SERVING = re.compile(r"Application startup complete|Starting vLLM API server")
# Lines vLLM writes when the engine starts: a log with none of them before a match does not reach back to
# the start (cut by tailLines / limitBytes, or by the window), so it cannot say the engine was loading.
_ENGINE_START = re.compile(
    r"vLLM API server version|non-default args|Starting to load model|Initializing an? (?:V1 )?LLM engine"
)
CUT_PHASE = "in a phase the log cannot show (it was cut after the engine's start)"
# Lines only a serving engine writes: vLLM's periodic stats (vllm/v1/metrics/loggers.py LoggingStatLogger, V0's
# "Avg prompt throughput: ... Running: N reqs") and uvicorn's access log of an API request. A cut log that holds
# them before the error shows the phase although it misses the start.
_SERVED_REQUESTS = re.compile(r"Avg prompt throughput: |\"(?:POST|GET) /v1/[^\"]*\" \d{3}")
SERVING_CUT_PHASE = "serving, as its request and stats lines show (the log was cut after the engine's start)"


@dataclass(frozen=True)
class LogHit:
    """Matching lines of one container log: the first line quoted, how often it matched, in which phase."""

    pod: str
    previous: bool
    line: str
    count: int
    phase: str  # "loading weights" | "starting up" | "serving" | SERVING_CUT_PHASE | CUT_PHASE
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
    if not any(_ENGINE_START.search(line) for line in before):
        return SERVING_CUT_PHASE if any(_SERVED_REQUESTS.search(line) for line in before) else CUT_PHASE
    return "loading weights"


def scan(logs: Iterable[ContainerLog], pattern: re.Pattern[str]) -> list[LogHit]:
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


def number(text: str) -> float:
    return float(text.replace(",", ""))


def clock(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%H:%M:%S")


def round_down(tokens: int) -> int:
    return tokens // ROUND_TOKENS * ROUND_TOKENS if tokens >= 2 * ROUND_TOKENS else tokens // 16 * 16


class EngineFacts:
    """The vLLM engine as deployed and as it ran: flags, logs, memory lines, model, GPU, restarts and edge errors."""

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
            parsed = parse_engine_log(log.text)
            if parsed.found:
                return parsed
        return EngineMemoryFacts()

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

    def ceiling(self) -> Valued | None:
        """Requests one pod runs at most (the metrics are summed over its data-parallel engines)."""
        return engine.max_num_seqs(self.evidence, self.workload)

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
            lines.append(f"DCGM {pod}: framebuffer used up to {samples[peak_t]:,.0f} MiB{share} at {clock(peak_t)}")
        return lines

    def memory_lines(self) -> list[str]:
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

    def no_patch_reason(self) -> str:
        if self.server.shell_wrapped:
            return "(No patch: the server starts through a shell script; change the flags there.)"
        return common.no_owner_patch(self.evidence)

    def args_patch(self, changes: Mapping[str, str]) -> patches.PatchPlan | None:
        """A merge patch of the ISVC's serving container args with each flag set (the whole list, docs/contracts.md#findingsjson-v1).

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
