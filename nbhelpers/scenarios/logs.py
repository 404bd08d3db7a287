"""Container logs of a scenario: vLLM's V1 start-up and stats lines, and Knative's queue-proxy.

Every line carries the kubelet's RFC 3339 timestamp prefix (what ``kubectl
logs --timestamps`` and the capture read). The engine's numbers (KV cache
size, maximum concurrency, blocks) come from the same arithmetic that sizes
the metrics, and the listening port from the effective flags, so logs,
objects and metrics agree. uvicorn access lines are not written: the shipped
scenarios run with ``--disable-uvicorn-access-log``, as many deployments do.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta

from nbhelpers.scenarios.refusals import refusal_lines, startup_lines, vllm_line
from nbhelpers.scenarios.runtime_errors import RUNTIME_ERRORS, runtime_error_lines
from nbhelpers.scenarios.spec import Model, flag_value
from nbhelpers.scenarios.state import (
    BATCHED_TOKENS_ERROR,
    CUDA_OOM_ERROR,
    KV_CAPACITY_ERROR,
    START_REFUSALS,
    WEIGHTS_SHARE,
    Plan,
    PodPlan,
    Run,
    probe_port,
    rng_for,
    weights_span,
)
from nbhelpers.scenarios.traffic import TickState

STATS_INTERVAL_SECONDS = 10
ROUTES = (
    "/openapi.json",
    "/docs",
    "/health",
    "/metrics",
    "/ping",
    "/version",
    "/v1/models",
    "/v1/chat/completions",
    "/v1/completions",
)


# Start refusals whose whole log nbhelpers.scenarios.refusals writes (the batched-tokens one is written here).
_OTHER_REFUSALS = frozenset(error for error, _ in START_REFUSALS.values()) - {BATCHED_TOKENS_ERROR}


def kubelet_stamp(moment: datetime) -> str:
    """RFC 3339 with nanoseconds, as the kubelet prefixes log lines."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond:06d}" + "000Z"


def _non_default_args(plan: Plan) -> str:
    """vLLM's ``non-default args`` dict, as Python prints it."""
    parsed: dict[str, object] = {}
    args = list(plan.args)
    index = 0
    while index < len(args):
        flag = args[index]
        if not flag.startswith("--"):
            index += 1
            continue
        key, _, inline = flag[2:].partition("=")
        key = key.replace("-", "_")
        value: object
        if inline:
            value, index = inline, index + 1
        elif index + 1 < len(args) and not args[index + 1].startswith("--"):
            value, index = args[index + 1], index + 2
        else:
            value, index = True, index + 1
        if isinstance(value, str) and value.replace(".", "", 1).isdigit():
            value = float(value) if "." in value else int(value)
        parsed[key] = [value] if key == "served_model_name" else value
    return repr(parsed)


def _clock(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes:02d}:{rest:02d}"


def shard_progress(model: Model, start: datetime, end: datetime) -> list[tuple[datetime, str]]:
    """vLLM's tqdm bar over checkpoint shards, one line per shard (stderr, no logger prefix)."""
    kind = "safetensors" if model.weights_format == "safetensors" else "pt"
    per_shard = (end - start).total_seconds() / model.shards
    lines = [(start, f"Loading {kind} checkpoint shards:   0% Completed | 0/{model.shards} [00:00<?, ?it/s]")]
    for done in range(1, model.shards + 1):
        elapsed, left = per_shard * done, per_shard * (model.shards - done)
        rate = f"{per_shard:.2f}s/it" if per_shard >= 1 else f"{1 / per_shard:5.2f}it/s"
        lines.append(
            (
                start + timedelta(seconds=elapsed),
                f"Loading {kind} checkpoint shards: {100 * done / model.shards:3.0f}% Completed | "
                f"{done}/{model.shards} [{_clock(elapsed)}<{_clock(left)}, {rate}]",
            )
        )
    return lines


def vllm_log(plan: Plan, pod: PodPlan, run: Run, states: tuple[TickState, ...]) -> str:
    """One run of the engine: its start-up, then (if it got there) the server and its periodic stats.

    A run that was killed (liveness, OOM) simply stops: neither SIGKILL nor the OOM killer leaves a
    last word in the container's log.
    """
    spec, kv = plan.spec, plan.kv
    model = spec.isvc.model
    rng = rng_for(spec, f"logs:{pod.name}:{run.started.isoformat()}")
    start = run.started
    load = pod.load_seconds
    weights_start, weights_end = weights_span(load)
    weights_done = start + timedelta(seconds=load * WEIGHTS_SHARE)
    compiled = start + timedelta(seconds=load * 0.7)
    profiled = start + timedelta(seconds=load * 0.78)
    graphs = start + timedelta(seconds=load * 0.95)
    batched = flag_value(plan.args, "--max-num-batched-tokens") or "2048"
    weights_seconds = (weights_done - start).total_seconds() - 18
    host = "0.0.0.0"
    listening = start + timedelta(seconds=load)
    if run.engine_error == BATCHED_TOKENS_ERROR and run.ended is not None:
        return "".join(
            f"{kubelet_stamp(moment)} {text}\n" for moment, text in _batched_tokens_lines(plan, start, run.ended)
        )
    if run.engine_error in _OTHER_REFUSALS:
        until = run.killed_at or run.ended or spec.timeline.captured_at
        refused = refusal_lines(plan, run, until, _non_default_args(plan))
        return "".join(f"{kubelet_stamp(moment)} {text}\n" for moment, text in refused if moment <= until)
    lines = [
        *startup_lines(plan, start, _non_default_args(plan)),
        vllm_line(start + timedelta(seconds=12.4), "config.py:1604", f"Using max model len {kv.max_model_len}"),
        vllm_line(
            start + timedelta(seconds=12.6),
            "config.py:2434",
            f"Chunked prefill is enabled with max_num_batched_tokens={batched}.",
        ),
        vllm_line(start + timedelta(seconds=15.2), "core.py:636", "Waiting for init message from front-end."),
        vllm_line(
            start + timedelta(seconds=15.3),
            "core.py:74",
            f"Initializing a V1 LLM engine (v{spec.isvc.vllm_version}) with config: model='{model.id}', "
            f"tokenizer='{model.id}', dtype=torch.bfloat16, max_seq_len={kv.max_model_len}, "
            f"tensor_parallel_size={flag_value(plan.args, '--tensor-parallel-size') or 1}, "
            f"served_model_name={model.served_name}, enable_prefix_caching=True, chunked_prefill_enabled=True",
        ),
        vllm_line(
            start + timedelta(seconds=17.0),
            "parallel_state.py:1134",
            "rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, TP rank 0, EP rank 0",
        ),
        vllm_line(start + timedelta(seconds=17.9), "gpu_model_runner.py:1953", f"Starting to load model {model.id}..."),
        vllm_line(start + timedelta(seconds=18.0), "gpu_model_runner.py:1985", "Loading model from scratch..."),
        vllm_line(start + timedelta(seconds=18.1), "cuda.py:328", "Using Flash Attention backend on V1 engine."),
        vllm_line(
            start + timedelta(seconds=weights_start),
            "weight_utils.py:296",
            f"Using model weights format ['*.{'safetensors' if model.weights_format == 'safetensors' else 'bin'}']",
        ),
        *shard_progress(
            model, start + timedelta(seconds=weights_start + 0.05), start + timedelta(seconds=weights_end - 0.05)
        ),
        vllm_line(
            weights_done - timedelta(seconds=0.6),
            "default_loader.py:262",
            f"Loading weights took {weights_seconds:.2f} seconds",
        ),
        vllm_line(
            weights_done,
            "gpu_model_runner.py:2007",
            f"Model loading took {model.weights_gib:.4f} GiB and {weights_seconds + 0.7:.6f} seconds",
        ),
        vllm_line(
            compiled,
            "monitor.py:34",
            f"torch.compile takes {(compiled - weights_done).total_seconds():.2f} s in total",
        ),
        vllm_line(profiled, "gpu_worker.py:276", f"Available KV cache memory: {kv.available_gib:.2f} GiB"),
    ]
    if run.engine_error == KV_CAPACITY_ERROR and run.ended is not None:
        # vLLM checks that one request of --max-model-len tokens fits before it sizes the cache: nothing follows.
        lines.extend(_kv_capacity_lines(plan, run.ended))
        return "".join(f"{kubelet_stamp(moment)} {text}\n" for moment, text in lines if moment < run.ended)
    lines += [
        vllm_line(profiled, "kv_cache_utils.py:849", f"GPU KV cache size: {kv.tokens:,} tokens"),
        vllm_line(
            profiled,
            "kv_cache_utils.py:853",
            f"Maximum concurrency for {kv.max_model_len:,} tokens per request: {kv.max_concurrency:.2f}x",
        ),
        vllm_line(
            graphs, "gpu_model_runner.py:2708", f"Graph capturing finished in {rng.randint(8, 14)} secs, took 0.52 GiB"
        ),
        vllm_line(
            graphs + timedelta(seconds=0.1),
            "core.py:214",
            f"init engine (profile, create kv cache, warmup model) took {(graphs - weights_done).total_seconds():.2f} seconds",
        ),
        vllm_line(
            listening - timedelta(seconds=0.8),
            "loggers.py:142",
            f"Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: {kv.num_blocks}",
        ),
        vllm_line(listening - timedelta(seconds=0.4), "api_server.py:1611", "Supported_tasks: ['generate']"),
        vllm_line(listening, "api_server.py:1880", f"Starting vLLM API server 0 on http://{host}:{plan.listen_port}"),
        vllm_line(listening, "launcher.py:36", "Available routes are:"),
    ]
    lines.extend(
        vllm_line(listening, "launcher.py:44", f"Route: {route}, Methods: {_methods(route)}") for route in ROUTES
    )
    started = listening + timedelta(seconds=0.2)
    lines.extend(
        (started, f"INFO:     {text}")
        for text in ("Started server process [1]", "Waiting for application startup.", "Application startup complete.")
    )
    if run.engine_error == CUDA_OOM_ERROR and run.ended is not None:
        lines.extend(_cuda_oom_lines(plan, run.ended, rng))
    # A liveness kill interrupts the API server at once (its SIGTERM handler stops the start-up); the engine
    # process, blocked in loading, holds the container until the kubelet's SIGKILL after the grace period.
    end = run.killed_at or run.ended or spec.timeline.captured_at
    if pod.listening is not None and run.ended is None:
        lines.extend(_stats_lines(pod.listening, states, end, plan.kv.max_num_seqs, rng))
    elif run.engine_error in RUNTIME_ERRORS and run.ended is not None:
        # An engine that served for hours and then died: its stats, then its last words (runtime_errors.py).
        served_from = run.started + timedelta(seconds=pod.load_seconds)
        lines.extend(_stats_lines(served_from, states, end, plan.kv.max_num_seqs, rng))
        lines.extend(runtime_error_lines(plan, run.engine_error, run.ended, rng))
    elif run.killed_at is not None and run.ended is not None and pod.serving(run.killed_at - timedelta(seconds=1)):
        # A serving engine the kubelet killed (liveness_timeouts_under_load): it logged its stats until the kill.
        served_from = run.started + timedelta(seconds=pod.load_seconds)
        lines.extend(_stats_lines(served_from, states, end, plan.kv.max_num_seqs, rng))
    return "".join(f"{kubelet_stamp(moment)} {text}\n" for moment, text in lines if moment < end)


VLLM_PACKAGE = "/usr/local/lib/python3.12/dist-packages/vllm"


def _cuda_oom_lines(plan: Plan, ended: datetime, rng: random.Random) -> list[tuple[datetime, str]]:
    """The engine core's death while it captures CUDA graphs: PyTorch's out-of-memory error, logged by the
    engine process, then the API server's own failure (both just before the container exits with code 1)."""
    total_gib = plan.spec.cluster.nodes[0].memory_gib
    free_mib = rng.uniform(38, 96)
    in_use_gib = total_gib - free_mib / 1024 - 0.02
    allocated_gib = total_gib * plan.kv.gpu_memory_utilization - rng.uniform(0.15, 0.3)
    oom = (
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 224.00 MiB. GPU 0 has a total capacity of "
        f"{total_gib:.2f} GiB of which {free_mib:.2f} MiB is free. Including non-PyTorch memory, this process has "
        f"{in_use_gib:.2f} GiB memory in use. Of the allocated memory {allocated_gib:.2f} GiB is allocated by "
        f"PyTorch, with 166.00 MiB allocated in private pools (e.g., CUDA Graphs), and "
        f"{rng.uniform(120, 260):.2f} MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory "
        "is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
        "documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )
    frames = (
        ("v1/engine/core.py", 709, "run_engine_core", "engine_core = EngineCoreProc(*args, **kwargs)"),
        ("v1/engine/core.py", 91, "__init__", "self._initialize_kv_caches(vllm_config)"),
        (
            "v1/engine/core.py",
            205,
            "_initialize_kv_caches",
            "self.model_executor.initialize_from_config(kv_cache_configs)",
        ),
        ("v1/worker/gpu_worker.py", 336, "compile_or_warm_up_model", "self.model_runner.capture_model()"),
        (
            "v1/worker/gpu_model_runner.py",
            2708,
            "capture_model",
            "self._dummy_run(num_tokens, capture_attn_cudagraph=full_cg)",
        ),
    )
    return _engine_core_failure(ended - timedelta(seconds=1.4), ended, frames, oom)


def _kv_capacity_lines(plan: Plan, ended: datetime) -> list[tuple[datetime, str]]:
    """vLLM V1's refusal to start when one request of --max-model-len tokens needs more KV cache than is left
    (vllm/v1/core/kv_cache_utils.py ``check_enough_kv_cache_memory``, spelled "models's" in the releases that
    print the estimate), logged by the engine process, then the API server's own failure."""
    kv = plan.kv
    needed_gib = kv.max_model_len * kv.bytes_per_token / 2**30
    error = (
        f"ValueError: To serve at least one request with the models's max seq len ({kv.max_model_len}), "
        f"({needed_gib:.2f} GiB KV cache is needed, which is larger than the available KV cache memory "
        f"({kv.available_gib:.2f} GiB). Based on the available memory, the estimated maximum model length is "
        f"{kv.tokens}. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing "
        "the engine."
    )
    frames = (
        ("v1/engine/core.py", 709, "run_engine_core", "engine_core = EngineCoreProc(*args, **kwargs)"),
        ("v1/engine/core.py", 91, "__init__", "self._initialize_kv_caches(vllm_config)"),
        (
            "v1/engine/core.py",
            190,
            "_initialize_kv_caches",
            "get_kv_cache_config(vllm_config, kv_cache_spec_one_worker,",
        ),
        (
            "v1/core/kv_cache_utils.py",
            1097,
            "get_kv_cache_config",
            "check_enough_kv_cache_memory(vllm_config, kv_cache_spec,",
        ),
        ("v1/core/kv_cache_utils.py", 694, "check_enough_kv_cache_memory", "raise ValueError("),
    )
    return _engine_core_failure(ended - timedelta(seconds=1.0), ended, frames, error)


def _batched_tokens_lines(plan: Plan, start: datetime, ended: datetime) -> list[tuple[datetime, str]]:
    """vLLM's refusal of a batch budget below --max-model-len with chunked prefill off: the scheduler config's
    validation in the API server process, before the engine core starts (wording quoted in
    https://github.com/verl-project/verl/pull/7626: "max_num_batched_tokens (8192) is smaller than max_model_len
    (131072)")."""
    batched = flag_value(plan.args, "--max-num-batched-tokens") or "2048"
    failed = ended - timedelta(seconds=0.4)
    return [
        *startup_lines(plan, start, _non_default_args(plan)),
        (failed, "Traceback (most recent call last):"),
        (failed, '  File "/usr/local/bin/vllm", line 10, in <module>'),
        (failed, "    sys.exit(main())"),
        (failed, f'  File "{VLLM_PACKAGE}/engine/arg_utils.py", line 1290, in create_engine_config'),
        (failed, "    scheduler_config = SchedulerConfig("),
        (failed, "pydantic_core._pydantic_core.ValidationError: 1 validation error for SchedulerConfig"),
        (
            failed,
            f"  Value error, max_num_batched_tokens ({batched}) is smaller than max_model_len ({plan.kv.max_model_len}). "
            "This effectively limits the maximum sequence length to max_num_batched_tokens and makes vLLM reject "
            "longer sequences. Please increase max_num_batched_tokens or decrease max_model_len. "
            "[type=value_error, input_value=ArgsKwargs(()), input_type=ArgsKwargs]",
        ),
    ]


def _engine_core_failure(
    at: datetime, ended: datetime, frames: tuple[tuple[str, int, str, str], ...], error: str
) -> list[tuple[datetime, str]]:
    """How a V1 engine that fails during start-up ends its log: the engine core's logged traceback (``frames``
    then ``error``), the engine process's own exit traceback, then the API server's RuntimeError."""
    lines = [vllm_line(at, "core.py:718", "EngineCore failed to start.", "ERROR")]
    lines.append(vllm_line(at, "core.py:718", "Traceback (most recent call last):", "ERROR"))
    for path, line, function, code in frames:
        lines.append(
            vllm_line(at, "core.py:718", f'  File "{VLLM_PACKAGE}/{path}", line {line}, in {function}', "ERROR")
        )
        lines.append(vllm_line(at, "core.py:718", f"    {code}", "ERROR"))
    lines.append(vllm_line(at, "core.py:718", error, "ERROR"))
    exit_at = ended - timedelta(seconds=0.6)
    lines += [(exit_at, "Process EngineCore_0:"), (exit_at, "Traceback (most recent call last):"), (exit_at, error)]
    failed = ended - timedelta(seconds=0.2)
    lines += [
        (failed, "Traceback (most recent call last):"),
        (failed, f'  File "{VLLM_PACKAGE}/v1/engine/core_client.py", line 448, in __init__'),
        (failed, "    self._init_engines_direct("),
        (failed, "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"),
    ]
    return lines


def _methods(route: str) -> str:
    if route.startswith("/v1/") and route != "/v1/models":
        return "POST"
    return "GET" if route in ("/metrics", "/version", "/v1/models") else "HEAD, GET"


def _stats_lines(
    listening: datetime, states: tuple[TickState, ...], end: datetime, ceiling: int, rng: random.Random
) -> list[tuple[datetime, str]]:
    """vLLM's periodic engine stats, logged every 10 s while the engine has work.

    Metrics are scraped every 15 s, so each stats line takes the latest scrape's
    state with the small drift the engine shows between two scrapes.
    """
    lines = []
    moment = listening + timedelta(seconds=STATS_INTERVAL_SECONDS)
    index = -1
    while moment < end:
        while index + 1 < len(states) and states[index + 1].at <= moment:
            index += 1
        state = states[index] if index >= 0 else None
        if state is not None and (state.running or state.waiting or state.prompt_tokens):
            drift = rng.uniform(0.85, 1.15)
            running = min(ceiling, max(0, state.running + rng.choice((-1, 0, 0, 1)))) if state.running else 0
            kv_usage = min(1.0, state.kv_usage * running / state.running) if state.running else 0.0
            lines.append(
                vllm_line(
                    moment,
                    "loggers.py:123",
                    f"Engine 000: Avg prompt throughput: {state.prompt_tokens * drift / 15:.1f} tokens/s, "
                    f"Avg generation throughput: {state.generation_tokens * drift / 15:.1f} tokens/s, "
                    f"Running: {running} reqs, Waiting: {state.waiting} reqs, "
                    f"GPU KV cache usage: {kv_usage * 100:.1f}%, Prefix cache hit rate: 0.0%",
                )
            )
        moment += timedelta(seconds=STATS_INTERVAL_SECONDS)
    return lines


def queue_proxy_log(plan: Plan, pod: PodPlan) -> str:
    """Knative's queue-proxy start-up lines (structured JSON, as it logs them)."""
    key = f"{plan.spec.isvc.namespace}/{plan.revision}"
    start = pod.containers_started + timedelta(seconds=0.3)
    messages = (
        ("sharedmain/main.go:259", "Starting queue-proxy"),
        ("sharedmain/main.go:303", "Starting http server metrics:9090"),
        ("sharedmain/main.go:303", "Starting http server main:8012"),
        ("sharedmain/main.go:303", "Starting http server admin:8022"),
    )
    lines = []
    for offset, (caller, message) in enumerate(messages):
        moment = start + timedelta(milliseconds=3 * offset)
        record = {
            "severity": "INFO",
            "timestamp": moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z",
            "logger": "queueproxy",
            "caller": caller,
            "message": message,
            "commit": "6f3e1a9",
            "knative.dev/key": key,
            "knative.dev/pod": pod.name,
        }
        lines.append(f"{kubelet_stamp(moment)} {json.dumps(record)}\n")
    if any(fault.type == "readiness_probe_port_unserved" for fault in plan.spec.faults):
        lines += _aggressive_probe_errors(pod, probe_port(plan.spec))
    return "".join(lines)


# How many times queue-proxy's aggressive probe fails within one kubelet check (the count knative/serving#14021 shows).
AGGRESSIVE_PROBE_FAILURES = 202


def _aggressive_probe_errors(pod: PodPlan, port: int) -> list[str]:
    """queue-proxy's plain-text lines for each kubelet check it fails because its own probe of the serving
    container is refused (readiness_probe_port_unserved), as knative/serving#14021 shows them."""
    error = (
        f"aggressive probe error (failed {AGGRESSIVE_PROBE_FAILURES} times): dial tcp 127.0.0.1:{port}: connect: "
        "connection refused"
    )
    lines = []
    for moment in pod.probe_failures:
        lines.append(f"{kubelet_stamp(moment)} {error}\n")
        lines.append(f"{kubelet_stamp(moment)} timed out waiting for the condition\n")
    return lines
