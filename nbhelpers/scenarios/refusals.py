"""The serving container's log when the engine refuses to start before it loads any weight.

Each refusal is written in the words of the release and report it comes from (the fault's comment in
:mod:`nbhelpers.scenarios.spec` names the report):

- ``vllm_port_uri``: vLLM V1 reads ``VLLM_PORT`` when the engine picks the port of its distributed init;
  ``vllm/envs.py`` ``get_vllm_port`` refuses a URI (traceback as quoted in
  https://github.com/vllm-project/vllm/issues/34199, including the missing space after "issue,").
- ``dtype``: a vLLM V0 release before the automatic float16 fallback of https://github.com/vllm-project/vllm/pull/17265
  keeps the checkpoint's bfloat16 with ``--dtype auto``; the GPU worker's ``_check_if_gpu_supports_dtype`` refuses
  it on a GPU below compute capability 8.0 (message of https://github.com/vllm-project/vllm/pull/2374, as quoted in
  https://github.com/substratusai/vllm-docker/issues/37), and the API server gives up on its engine process.
- ``cache_permission``: the API server resolves the model's config from the hub before it starts the engine;
  with HOME=/ and an arbitrary UID the cache /.cache cannot be created, and transformers wraps the PermissionError
  in an OSError (log of https://github.com/huggingface/inference-benchmarker/issues/30, vLLM 0.9.1).
- ``hub_forbidden``: a gated model whose token's account was not granted access: huggingface_hub raises a
  GatedRepoError for the 403 on config.json and transformers re-raises it as "OSError: You are trying to access a
  gated repo." (transformers/utils/hub.py ``cached_files``; the 403 wording "you are not in the authorized list" as
  quoted in https://github.com/rh-ai-quickstart/ai-virtual-agent/issues/200 and
  https://github.com/huggingface/transformers/issues/31367).
- ``tensor_parallel``: with --tensor-parallel-size above the GPUs the pod sees, vLLM V1 falls back to its Ray
  executor and warns (wording of https://github.com/vllm-project/vllm/pull/25775 as quoted in
  https://github.com/vllm-project/vllm/issues/36861), starts a local Ray instance and waits for a placement group
  of one GPU bundle per rank, logging the wait with a doubling interval (``_wait_until_pg_ready`` in
  vllm/v1/executor/ray_utils.py, line as quoted in https://github.com/vllm-project/vllm/issues/8908) until it gives
  up after 1800 s with "Cannot provide a placement group of placement_group_specs=... within 1800 seconds".
"""

from __future__ import annotations

from datetime import datetime, timedelta

from nbhelpers.scenarios.spec import flag_value
from nbhelpers.scenarios.state import (
    CACHE_PERMISSION_ERROR,
    DTYPE_ERROR,
    HUB_FORBIDDEN_ERROR,
    PLACEMENT_GROUP_TIMEOUT_SECONDS,
    TENSOR_PARALLEL_ERROR,
    TENSOR_PARALLEL_WAIT_STARTS_SECONDS,
    VLLM_PORT_ERROR,
    Plan,
    Run,
)

PYTHON_PACKAGES = "/usr/local/lib/python3.12/dist-packages"
HUB_PACKAGE = f"{PYTHON_PACKAGES}/huggingface_hub"
VLLM_PACKAGE = f"{PYTHON_PACKAGES}/vllm"
Line = tuple[datetime, str]


def vllm_line(moment: datetime, source: str, message: str, level: str = "INFO") -> Line:
    """One line of vLLM's own logger (V1 format): level, time, [file:line], message."""
    return moment, f"{level} {moment.strftime('%m-%d %H:%M:%S')} [{source}] {message}"


def startup_lines(plan: Plan, start: datetime, non_default_args: str) -> list[Line]:
    """The first lines every vLLM start logs: the platform, the version and the non-default arguments."""
    return [
        vllm_line(start + timedelta(seconds=2.1), "__init__.py:241", "Automatically detected platform cuda."),
        vllm_line(
            start + timedelta(seconds=5.3),
            "api_server.py:1805",
            f"vLLM API server version {plan.spec.isvc.vllm_version}",
        ),
        vllm_line(start + timedelta(seconds=5.3), "utils.py:326", f"non-default args: {non_default_args}"),
    ]


def _v0(moment: datetime, source: str, message: str, level: str = "INFO") -> Line:
    """vLLM V0's logger prefix has no brackets around the source."""
    return moment, f"{level} {moment.strftime('%m-%d %H:%M:%S')} {source}] {message}"


def refusal_lines(plan: Plan, run: Run, until: datetime, non_default_args: str) -> list[Line]:
    """The whole log of one run whose engine refuses to start (``run.engine_error``, a ``START_REFUSALS`` class),
    up to ``until``: its exit, or the liveness kill or the capture while it still waits."""
    error, start, ended = run.engine_error, run.started, until
    if error == TENSOR_PARALLEL_ERROR:
        return _tensor_parallel_lines(plan, start, until, non_default_args, gave_up=run.exit_code == 1)
    if error == VLLM_PORT_ERROR:
        return _vllm_port_lines(plan, start, ended, non_default_args)
    if error == DTYPE_ERROR:
        return _dtype_lines(plan, start, ended)
    if error == CACHE_PERMISSION_ERROR:
        return _cache_permission_lines(plan, start, ended, non_default_args)
    if error == HUB_FORBIDDEN_ERROR:
        return _hub_forbidden_lines(plan, start, ended, non_default_args)
    raise ValueError(f"no log for the start refusal {error!r}")


def _vllm_port_lines(plan: Plan, start: datetime, ended: datetime, non_default_args: str) -> list[Line]:
    spec = plan.spec
    fault = next(fault for fault in spec.faults if fault.type == "vllm_port_service_link")
    uri = f"tcp://{fault.params['service_host']}:{int(fault.params['service_port'])}"
    model = spec.isvc.model
    error = (
        f"ValueError: VLLM_PORT '{uri}' appears to be a URI. This may be caused by a Kubernetes service discovery "
        "issue,check the warning in: https://docs.vllm.ai/en/stable/serving/env_vars.html"
    )
    at = ended - timedelta(seconds=1.1)
    frames = (
        ("v1/engine/core.py", 709, "run_engine_core", "engine_core = EngineCoreProc(*args, **kwargs)"),
        ("v1/engine/core.py", 505, "__init__", "super().__init__(vllm_config, executor_class, log_stats,"),
        ("v1/engine/core.py", 82, "__init__", "self.model_executor = executor_class(vllm_config)"),
        ("executor/executor_base.py", 54, "__init__", "self._init_executor()"),
        ("executor/uniproc_executor.py", 42, "_init_executor", "get_ip(), get_open_port())"),
        ("utils/__init__.py", 866, "get_open_port", "return _get_open_port()"),
        ("utils/__init__.py", 870, "_get_open_port", "port = envs.VLLM_PORT"),
        ("envs.py", 1111, "__getattr__", "return environment_variables[name]()"),
        ("envs.py", 188, "get_vllm_port", "raise ValueError("),
    )
    lines = [
        *startup_lines(plan, start, non_default_args),
        vllm_line(start + timedelta(seconds=12.4), "config.py:1604", f"Using max model len {plan.kv.max_model_len}"),
        vllm_line(start + timedelta(seconds=15.2), "core.py:636", "Waiting for init message from front-end."),
        vllm_line(
            start + timedelta(seconds=15.3),
            "core.py:74",
            f"Initializing a V1 LLM engine (v{spec.isvc.vllm_version}) with config: model='{model.id}', "
            f"tokenizer='{model.id}', dtype=torch.bfloat16, max_seq_len={plan.kv.max_model_len}, "
            f"tensor_parallel_size={flag_value(plan.args, '--tensor-parallel-size') or 1}, "
            f"served_model_name={model.served_name}",
        ),
        vllm_line(at, "core.py:718", "EngineCore failed to start.", "ERROR"),
        vllm_line(at, "core.py:718", "Traceback (most recent call last):", "ERROR"),
    ]
    for path, number, function, code in frames:
        lines.append(
            vllm_line(at, "core.py:718", f'  File "{VLLM_PACKAGE}/{path}", line {number}, in {function}', "ERROR")
        )
        lines.append(vllm_line(at, "core.py:718", f"    {code}", "ERROR"))
    lines.append(vllm_line(at, "core.py:718", error, "ERROR"))
    exit_at, failed = ended - timedelta(seconds=0.6), ended - timedelta(seconds=0.2)
    lines += [
        (exit_at, "Process EngineCore_0:"),
        (exit_at, "Traceback (most recent call last):"),
        (exit_at, error),
        (failed, "Traceback (most recent call last):"),
        (failed, f'  File "{VLLM_PACKAGE}/v1/engine/core_client.py", line 448, in __init__'),
        (failed, "    self._init_engines_direct("),
        (failed, "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"),
    ]
    return lines


def _dtype_lines(plan: Plan, start: datetime, ended: datetime) -> list[Line]:
    spec = plan.spec
    model = spec.isvc.model
    version = spec.isvc.vllm_version
    gpu = spec.cluster.nodes[0].product.replace("-", " ")
    capability = "7.0" if "V100" in gpu else "7.5"
    error = (
        f"ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your {gpu} GPU "
        f"has compute capability {capability}. You can use float16 instead by explicitly setting the`dtype` flag "
        "in CLI, for example: --dtype=half."
    )
    port = flag_value(plan.args, "--port") or "8000"
    raised, failed = ended - timedelta(seconds=1.3), ended - timedelta(seconds=0.3)
    frames = (
        ("/usr/lib/python3.12/multiprocessing/process.py", 314, "_bootstrap", "self.run()"),
        (
            f"{VLLM_PACKAGE}/engine/multiprocessing/engine.py",
            390,
            "run_mp_engine",
            "engine = MQLLMEngine.from_engine_args(",
        ),
        (f"{VLLM_PACKAGE}/engine/llm_engine.py", 335, "__init__", "self.model_executor = executor_class("),
        (f"{VLLM_PACKAGE}/executor/gpu_executor.py", 37, "_init_executor", "self.driver_worker.init_device()"),
        (
            f"{VLLM_PACKAGE}/worker/worker.py",
            176,
            "init_device",
            "_check_if_gpu_supports_dtype(self.model_config.dtype)",
        ),
        (f"{VLLM_PACKAGE}/worker/worker.py", 487, "_check_if_gpu_supports_dtype", "raise ValueError("),
    )
    lines = [
        _v0(start + timedelta(seconds=4.8), "api_server.py:528", f"vLLM API server version {version}"),
        _v0(
            start + timedelta(seconds=4.8),
            "api_server.py:529",
            f"args: Namespace(host=None, port={port}, model='{model.id}', served_model_name=['{model.served_name}'], "
            f"dtype='auto', max_model_len={plan.kv.max_model_len}, tensor_parallel_size=1)",
        ),
        _v0(
            start + timedelta(seconds=4.9),
            "api_server.py:166",
            "Multiprocessing frontend to use ipc:///tmp/5f1c2a4e-3b7d-4e0a-9c8f-2d6b1e7a9c30 for IPC Path.",
        ),
        _v0(start + timedelta(seconds=4.9), "api_server.py:179", "Started engine process with PID 77"),
        _v0(
            start + timedelta(seconds=14.6),
            "llm_engine.py:237",
            f"Initializing an LLM engine (v{version}) with config: model='{model.id}', tokenizer='{model.id}', "
            f"dtype=torch.bfloat16, max_seq_len={plan.kv.max_model_len}, tensor_parallel_size=1, "
            f"served_model_name={model.served_name}",
        ),
        (raised, "Process SpawnProcess-1:"),
        (raised, "Traceback (most recent call last):"),
    ]
    for path, number, function, code in frames:
        lines += [(raised, f'  File "{path}", line {number}, in {function}'), (raised, f"    {code}")]
    lines += [
        (raised, error),
        (failed, "Traceback (most recent call last):"),
        (
            failed,
            f'  File "{VLLM_PACKAGE}/entrypoints/openai/api_server.py", line 202, in build_async_engine_client_from_engine_args',
        ),
        (failed, '    raise RuntimeError("Engine process failed to start")'),
        (failed, "RuntimeError: Engine process failed to start"),
    ]
    return lines


def _cache_permission_lines(plan: Plan, start: datetime, ended: datetime, non_default_args: str) -> list[Line]:
    spec = plan.spec
    model = spec.isvc.model
    failed = ended - timedelta(seconds=0.3)
    hub = HUB_PACKAGE
    frames = (
        (f"{PYTHON_PACKAGES}/transformers/utils/hub.py", 470, "cached_files", "hf_hub_download("),
        (f"{hub}/utils/_validators.py", 114, "_inner_fn", "return fn(*args, **kwargs)"),
        (f"{hub}/file_download.py", 1008, "hf_hub_download", "return _hf_hub_download_to_cache_dir("),
        (
            f"{hub}/file_download.py",
            1115,
            "_hf_hub_download_to_cache_dir",
            "os.makedirs(os.path.dirname(blob_path), exist_ok=True)",
        ),
        ("<frozen os>", 215, "makedirs", None),
        ("<frozen os>", 225, "makedirs", None),
    )
    lines = [
        vllm_line(start + timedelta(seconds=2.0), "__init__.py:244", "Automatically detected platform cuda."),
        vllm_line(
            start + timedelta(seconds=4.9), "api_server.py:1287", f"vLLM API server version {spec.isvc.vllm_version}"
        ),
        vllm_line(start + timedelta(seconds=4.9), "cli_args.py:309", f"non-default args: {non_default_args}"),
        (failed, "Traceback (most recent call last):"),
    ]
    for path, number, function, code in frames:
        lines.append((failed, f'  File "{path}", line {number}, in {function}'))
        if code is not None:
            lines.append((failed, f"    {code}"))
    lines += [
        (failed, "PermissionError: [Errno 13] Permission denied: '/.cache'"),
        (failed, ""),
        (failed, "During handling of the above exception, another exception occurred:"),
        (failed, ""),
        (failed, "Traceback (most recent call last):"),
        (failed, '  File "/usr/local/bin/vllm", line 10, in <module>'),
        (failed, "    sys.exit(main())"),
        (failed, f'  File "{PYTHON_PACKAGES}/transformers/utils/hub.py", line 533, in cached_files'),
        (failed, "    raise OSError("),
        (
            failed,
            f"OSError: PermissionError at /.cache when downloading {model.id}. Check cache directory permissions. "
            "Common causes: 1) another user is downloading the same model (please wait); 2) a previous download was "
            "canceled and the lock file needs manual removal.",
        ),
    ]
    return lines


def _tensor_parallel_lines(
    plan: Plan, start: datetime, until: datetime, non_default_args: str, *, gave_up: bool
) -> list[Line]:
    spec = plan.spec
    model = spec.isvc.model
    size = int(flag_value(plan.args, "--tensor-parallel-size") or 1)
    gpus = int((spec.isvc.resources.get("limits") or {}).get("nvidia.com/gpu", 1))
    node_ip = "10.244.7.23"
    specs = ", ".join([f"{{'GPU': 1.0, 'node:{node_ip}': 0.001}}", *(["{'GPU': 1.0}"] * (size - 1))])
    core = "(EngineCore_0 pid=213)"
    waiting = start + timedelta(seconds=TENSOR_PARALLEL_WAIT_STARTS_SECONDS)
    lines = [
        *startup_lines(plan, start, non_default_args),
        vllm_line(start + timedelta(seconds=12.4), "config.py:1604", f"Using max model len {plan.kv.max_model_len}"),
        vllm_line(start + timedelta(seconds=15.2), "core.py:636", "Waiting for init message from front-end."),
        (
            start + timedelta(seconds=15.3),
            f"{core} "
            + vllm_line(
                start + timedelta(seconds=15.3),
                "core.py:74",
                f"Initializing a V1 LLM engine (v{spec.isvc.vllm_version}) with config: model='{model.id}', "
                f"tokenizer='{model.id}', dtype=torch.bfloat16, max_seq_len={plan.kv.max_model_len}, "
                f"tensor_parallel_size={size}, served_model_name={model.served_name}",
            )[1],
        ),
        (
            start + timedelta(seconds=15.9),
            f"{core} "
            + vllm_line(
                start + timedelta(seconds=15.9),
                "ray_utils.py:352",
                f"Tensor parallel size ({size}) exceeds available GPUs ({gpus}). This may result in Ray placement "
                f"group allocation failures. Consider reducing tensor_parallel_size to {gpus} or less, or ensure "
                f"your Ray cluster has {size} GPUs available.",
                "WARNING",
            )[1],
        ),
        (
            start + timedelta(seconds=18.6),
            f"{core} {(start + timedelta(seconds=18.6)).strftime('%Y-%m-%d %H:%M:%S')},412\tINFO worker.py:1927 -- "
            "Started a local Ray instance.",
        ),
    ]
    waited, interval = 0.0, 10.0
    while waited + interval < PLACEMENT_GROUP_TIMEOUT_SECONDS:
        waited += interval
        moment = waiting + timedelta(seconds=waited)
        lines.append(
            (
                moment,
                f"{core} "
                + vllm_line(
                    moment,
                    "ray_utils.py:427",
                    f"Waiting for creating a placement group of specs for {int(waited)} seconds. specs=[{specs}]. "
                    "Check `ray status` and `ray list nodes` to see if you have enough resources, and make sure the IP "
                    "addresses used by ray cluster are the same as VLLM_HOST_IP environment variable specified in each "
                    "node if you are running on a multi-node.",
                )[1],
            )
        )
        interval *= 2
    if gave_up:
        error = (
            f"ValueError: Cannot provide a placement group of placement_group_specs=[{specs}] within "
            f"{int(PLACEMENT_GROUP_TIMEOUT_SECONDS)} seconds. See `ray status` and `ray list nodes` to make sure "
            "the cluster has enough resources."
        )
        at, failed = until - timedelta(seconds=1.2), until - timedelta(seconds=0.2)
        lines += [
            (at, f"{core} " + vllm_line(at, "core.py:718", "EngineCore failed to start.", "ERROR")[1]),
            (at, f"{core} " + vllm_line(at, "core.py:718", error, "ERROR")[1]),
            (failed, "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"),
        ]
    return [line for line in lines if line[0] <= until]


def _hub_forbidden_lines(plan: Plan, start: datetime, ended: datetime, non_default_args: str) -> list[Line]:
    spec = plan.spec
    model = spec.isvc.model
    failed = ended - timedelta(seconds=0.3)
    url = f"https://huggingface.co/{model.id}/resolve/main/config.json"
    request_id = "Root=1-69a41c2e-5b0d7f3e1c9a4b2d6e8f0a13;4c1e9b7a-2d3f-4a5b-8c6d-7e9f0a1b2c3d"
    hub = HUB_PACKAGE
    gated = [
        "",
        f"Cannot access gated repo for url {url}.",
        f"Access to model {model.id} is restricted and you are not in the authorized list. Visit "
        f"https://huggingface.co/{model.id} to ask for access.",
    ]
    lines = [
        *startup_lines(plan, start, non_default_args),
        (failed, "Traceback (most recent call last):"),
        (failed, f'  File "{hub}/utils/_http.py", line 409, in hf_raise_for_status'),
        (failed, "    response.raise_for_status()"),
        (failed, f'  File "{PYTHON_PACKAGES}/requests/models.py", line 1024, in raise_for_status'),
        (failed, "    raise HTTPError(http_error_msg, response=self)"),
        (failed, f"requests.exceptions.HTTPError: 403 Client Error: Forbidden for url: {url}"),
        (failed, ""),
        (failed, "The above exception was the direct cause of the following exception:"),
        (failed, ""),
        (failed, "Traceback (most recent call last):"),
        (failed, f'  File "{hub}/file_download.py", line 1484, in _get_metadata_or_catch_error'),
        (failed, "    metadata = get_hf_file_metadata("),
        (failed, f"huggingface_hub.errors.GatedRepoError: 403 Client Error. (Request ID: {request_id})"),
        *((failed, text) for text in gated),
        (failed, ""),
        (failed, "The above exception was the direct cause of the following exception:"),
        (failed, ""),
        (failed, "Traceback (most recent call last):"),
        (failed, '  File "/usr/local/bin/vllm", line 10, in <module>'),
        (failed, "    sys.exit(main())"),
        (failed, f'  File "{PYTHON_PACKAGES}/transformers/utils/hub.py", line 543, in cached_files'),
        (failed, "    raise OSError("),
        (failed, "OSError: You are trying to access a gated repo."),
        (failed, f"Make sure to have access to it at https://huggingface.co/{model.id}."),
        (failed, f"403 Client Error. (Request ID: {request_id})"),
        *((failed, text) for text in gated),
    ]
    return lines
