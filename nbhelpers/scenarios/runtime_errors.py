"""How a V1 engine that had served dies of a runtime error: the last lines of its container log.

vllm-project/vllm#13067: the server had started and answered requests; a long prompt's forward pass asked PyTorch
for more memory than was free, the engine core died with ``torch.OutOfMemoryError`` and the API server, finding
the engine dead, shut down (the container exits with code 1). V1 logs it in ``EngineCoreProc.run_engine_core``
("EngineCore encountered a fatal error.") and the API server's output handler raises ``EngineDeadError``
(vllm/v1/engine/exceptions.py: "EngineCore encountered an issue. See stack trace (above) for the root cause.").

vllm-project/vllm#5687: a server ran fine for about 20,000 long calls, then died in the night of "CUDA error: an
illegal memory access was encountered"; a V1 engine logs that failure as in vllm-project/vllm#19483, the same
engine-core traceback ending in the sampled tokens' copy to the host (``sampled_token_ids.tolist()``), where CUDA
reports a kernel's earlier illegal access.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from nbhelpers.scenarios.refusals import VLLM_PACKAGE, vllm_line
from nbhelpers.scenarios.state import RUNTIME_CUDA_OOM_ERROR, RUNTIME_ENGINE_ERRORS, Plan

RUNTIME_ERRORS = RUNTIME_ENGINE_ERRORS


def runtime_cuda_oom_lines(plan: Plan, ended: datetime, rng: random.Random) -> list[tuple[datetime, str]]:
    """The engine core's fatal error in a forward pass, then the API server's EngineDeadError and shutdown."""
    total_gib = plan.spec.cluster.nodes[0].memory_gib
    free_mib = rng.uniform(60, 140)
    tried_gib = rng.uniform(1.1, 1.6)
    oom = (
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {tried_gib:.2f} GiB. GPU 0 has a total "
        f"capacity of {total_gib:.2f} GiB of which {free_mib:.2f} MiB is free. Process 1 has "
        f"{total_gib - free_mib / 1024:.2f} GiB memory in use. Of the allocated memory "
        f"{total_gib * plan.kv.gpu_memory_utilization - rng.uniform(1.2, 1.8):.2f} GiB is allocated by PyTorch, with "
        f"{rng.uniform(60, 110):.2f} MiB allocated in private pools (e.g., CUDA Graphs), and {rng.uniform(1.2, 1.6):.2f} "
        "GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."
    )
    return _engine_death(
        ended, oom, last_frame=("v1/worker/gpu_model_runner.py", 1556, "execute_model", "model_output = self.model(")
    )


def runtime_illegal_access_lines(ended: datetime) -> list[tuple[datetime, str]]:
    """The engine core's fatal CUDA illegal memory access, then the API server's EngineDeadError and shutdown."""
    error = (
        "RuntimeError: CUDA error: an illegal memory access was encountered. CUDA kernel errors might be "
        "asynchronously reported at some other API call, so the stacktrace below might be incorrect. For debugging "
        "consider passing CUDA_LAUNCH_BLOCKING=1. Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."
    )
    last_frame = (
        "v1/worker/gpu_model_runner.py",
        1602,
        "execute_model",
        "valid_sampled_token_ids = sampled_token_ids.tolist()",
    )
    return _engine_death(ended, error, last_frame)


def runtime_error_lines(plan: Plan, error: str, ended: datetime, rng: random.Random) -> list[tuple[datetime, str]]:
    """The last lines of an engine that had served and died of ``error`` (one of RUNTIME_ERRORS) at ``ended``."""
    if error == RUNTIME_CUDA_OOM_ERROR:
        return runtime_cuda_oom_lines(plan, ended, rng)
    return runtime_illegal_access_lines(ended)


def _engine_death(ended: datetime, error: str, last_frame: tuple[str, int, str, str]) -> list[tuple[datetime, str]]:
    """V1's engine-core traceback from its busy loop down to ``last_frame`` ending in ``error``, then the API
    server's EngineDeadError and its shutdown."""
    frames = (
        ("v1/engine/core.py", 701, "run_engine_core", "engine_core.run_busy_loop()"),
        ("v1/engine/core.py", 728, "run_busy_loop", "self._process_engine_step()"),
        ("v1/engine/core.py", 754, "_process_engine_step", "outputs, model_executed = self.step_fn()"),
        ("v1/engine/core.py", 273, "step", "model_output = self.execute_model_with_error_logging("),
        ("v1/worker/gpu_worker.py", 369, "execute_model", "output = self.model_runner.execute_model(scheduler_output)"),
        last_frame,
    )
    failed = ended - timedelta(seconds=1.2)
    lines = [vllm_line(failed, "core.py:710", "EngineCore encountered a fatal error.", "ERROR")]
    lines.append(vllm_line(failed, "core.py:710", "Traceback (most recent call last):", "ERROR"))
    for path, number, function, code in frames:
        lines.append(
            vllm_line(failed, "core.py:710", f'  File "{VLLM_PACKAGE}/{path}", line {number}, in {function}', "ERROR")
        )
        lines.append(vllm_line(failed, "core.py:710", f"    {code}", "ERROR"))
    lines.append(vllm_line(failed, "core.py:710", error, "ERROR"))
    dead = ended - timedelta(seconds=0.8)
    lines += [
        vllm_line(dead, "async_llm.py:416", "AsyncLLM output_handler failed.", "ERROR"),
        vllm_line(
            dead,
            "async_llm.py:416",
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for "
            "the root cause.",
            "ERROR",
        ),
        (ended - timedelta(seconds=0.5), "INFO:     Shutting down"),
        (ended - timedelta(seconds=0.3), "INFO:     Finished server process [1]"),
    ]
    return lines
