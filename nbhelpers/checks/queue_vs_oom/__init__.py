"""Step 8, ``queue_vs_oom``: was it queueing (capacity), KV-cache pressure or GPU out-of-memory, and do the
vLLM flags fit the GPU?

Sources, all read from the Evidence:

- Prometheus (docs/contracts.md#metric-catalog ids): ``vllm_running`` / ``vllm_waiting`` per pod against the ``--max-num-seqs`` in
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
  - the start-up memory lines, read by :func:`nbhelpers.facts.vllm_log.parse_engine_log`;
  - the last error of a start-up that failed (and the termination message), read and classified by
    :mod:`nbhelpers.facts.engine_errors` (its docstring cites each vLLM message). For a serving container that
    does not run vLLM only this fallback applies (``CONTAINER_FAILING_UNKNOWN_CAUSE``); otherwise the step is skipped.

The queue criteria (pinned, sustained, felt) and the regime decision live in :mod:`nbhelpers.models.regime`.
Flag values that fit the card come from :mod:`nbhelpers.models.vllm_memory` when the model and the GPU are
known; the engine's own numbers win over the estimate whenever the logs hold them.
"""

from __future__ import annotations

from nbhelpers.checks.queue_vs_oom._engine_start import engine_start, failing_container
from nbhelpers.checks.queue_vs_oom._facts import EngineFacts
from nbhelpers.checks.queue_vs_oom._gpu_oom import gpu_oom
from nbhelpers.checks.queue_vs_oom._kv_capacity import kv_capacity_exceeded
from nbhelpers.checks.queue_vs_oom._queue import queue_findings
from nbhelpers.checks.queue_vs_oom._utilization import utilization_risky
from nbhelpers.errors import StepSkipped
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common, vllm_args
from nbhelpers.findings.model import Finding
from nbhelpers.findings.steps import StepInfo

STEP = StepInfo(
    "queue_vs_oom",
    "Queue vs OOM",
    "Is it queueing, KV-cache pressure or GPU OOM, and do the flags fit?",
)


def run(evidence: Evidence) -> list[Finding]:
    common.skip_modelmesh(evidence)
    workload = common.current_workload(evidence)
    server = vllm_args.parse_container(workload.serving)
    facts = EngineFacts(evidence, workload, server)
    if server.server == vllm_args.UNKNOWN and not facts.vllm_seen:
        # Not vLLM (a custom predictor in Go or Rust...): nothing here applies but the honest fallback, a container
        # of the pod that keeps exiting with an error, quoted in its own words.
        fallback = failing_container(facts)
        if fallback is not None:
            return [fallback]
        raise StepSkipped("the serving container does not run vLLM and no vLLM metrics or logs were seen")
    findings: list[Finding] = []
    capacity = kv_capacity_exceeded(facts)
    oom = gpu_oom(facts)
    utilization = utilization_risky(facts)
    # The memory codes say more than the engine's last line: the start-up error is read only without them. A
    # classified start-up error beats a computed KV verdict: the engine stopped before it sized its cache.
    start = engine_start(facts) if oom is None and (capacity is None or _computed(capacity)) else None
    if start is not None and start.code == "ENGINE_START_FAILED" and capacity is not None:
        capacity = None
    if start is not None and start.code == "CONTAINER_FAILING_UNKNOWN_CAUSE" and (capacity or utilization):
        start = None
    for finding in (start, capacity, oom, utilization):
        if finding is not None:
            findings.append(finding)
    findings.extend(queue_findings(facts, gpu_oom=oom is not None, cannot_fit=capacity is not None))
    return findings


def _computed(finding: Finding) -> bool:
    return finding.summary.startswith("Computed")
