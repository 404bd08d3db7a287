"""Why the serving container exits at start-up, in the engine's own words.

When vLLM cannot start it says why, as the last Python exception or validation error of its log, and the kubelet
may keep the tail of it as the container's termination message. This module finds that line in the serving
container's current and previous logs (already redacted by ``gather()``) and in
``containerStatuses[].state.terminated.message`` / ``lastState.terminated.message``, and classifies the known
causes. The patterns, with where their wording comes from:

- ``batched_tokens``: ``max_num_batched_tokens (8192) is smaller than max_model_len (131072)``, vLLM's scheduler
  config validation when chunked prefill is off (quoted in https://github.com/verl-project/verl/pull/7626).
- ``tensor_parallel``: a tensor-parallel size above the GPUs the pod sees. Since
  https://github.com/vllm-project/vllm/pull/25775 (fixing https://github.com/vllm-project/vllm/issues/25263) the
  Ray fallback warns ``Tensor parallel size (4) exceeds available GPUs (1). This may result in Ray placement group
  allocation failures.`` (vllm/v1/executor/ray_utils.py, quoted in https://github.com/vllm-project/vllm/issues/36861);
  older releases raise ``ValueError: The number of required GPUs exceeds the total number of available GPUs in the
  placement group.`` (vllm/engine/ray_utils.py, quoted in https://github.com/vllm-project/vllm/issues/2416).
- ``vllm_port_uri``: ``ValueError: VLLM_PORT 'tcp://169.169.193.120:6785' appears to be a URI. This may be caused
  by a Kubernetes service discovery issue`` (vllm/envs.py, added by https://github.com/vllm-project/vllm/pull/18209;
  reported in https://github.com/vllm-project/vllm/issues/34199).
- ``hub_unauthorized``: ``401 Client Error`` / ``403 Client Error: Forbidden for url: https://huggingface.co/...``,
  ``GatedRepoError`` / ``Cannot access gated repo`` and the hub's own reason, the last line of the error: "Access to
  model X is restricted. You must have access to it and be authenticated to access it. Please log in." (401: no
  valid token) or "Access to model X is restricted and you are not in the authorized list." (403: the token's
  account has no access) (huggingface_hub; reported in https://github.com/rh-ai-quickstart/ai-virtual-agent/issues/200,
  https://github.com/huggingface/transformers/issues/31367). :func:`hub_refusal` tells the two apart.
- ``dtype``: ``Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has
  compute capability 7.5`` (vLLM's ``_check_if_gpu_supports_dtype`` in the GPU worker).
- ``architecture``: ``Model architectures ['...'] are not supported for now. Supported architectures: ...``
  (vLLM's model registry / ``_get_model_architecture``).
- ``unrecognized_argument``: ``vllm: error: unrecognized arguments: --enable-metrics`` (argparse; reported in
  https://github.com/defilantech/LLMKube/issues/1030).

Anything else that ends a start-up with an exception is class ``unknown``: the line is still quoted.

A container whose output holds no Python exception still says why it stopped, in other words (class ``unknown``,
read only when no exception line is found, see :data:`OTHER_FAILURE`):

- KServe's model servers log the exception's message through their logger and exit 1: ``kserve ERROR
  [__main__.py:<module>():254] Failed to start model server: integer division or modulo by zero``
  (python/huggingfaceserver/huggingfaceserver/__main__.py; the whole log of https://github.com/kserve/kserve/issues/3769);
  current releases add the traceback, whose last line is then quoted as above;
- the container runtime cannot start the entrypoint and the log holds one line: ``exec /opt/venv/bin/vllm: exec
  format error`` (an amd64 image on an arm64 node, https://github.com/vllm-project/vllm/issues/30076; a Go binary in
  https://github.com/kubernetes/node-problem-detector/issues/797), older runc's ``standard_init_linux.go:219: exec
  user process caused: exec format error`` (https://github.com/canonical/microk8s/issues/1942), ``exec
  /usr/bin/python3: no such file or directory``; or the start itself fails and the kubelet keeps the runtime's words
  as the termination message (reason ``StartError``, exit code 128): ``exec: "vllm": executable file not found in
  $PATH: unknown`` (https://github.com/vllm-project/production-stack/issues/454);
- Go and Rust programs (a custom sidecar, a router): ``panic: ...``, ``fatal error: ...``, ``thread 'main' panicked
  at ...``, a logger's ``level=fatal`` / ``F0115 ...`` line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nbhelpers.evidence.model import ContainerLog
from nbhelpers.facts import vllm_args
from nbhelpers.facts.common import accelerator_requests, shorten, strip_log_timestamp

UNKNOWN = "unknown"

CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "batched_tokens",
        re.compile(r"max_num_batched_tokens \(([\d,]+)\) is smaller than max_model_len \(([\d,]+)\)"),
    ),
    (
        "tensor_parallel",
        re.compile(
            r"required GPUs exceeds the total number of available GPUs"
            r"|tensor[_ ]parallel[_ ]size \(?(\d+)\)?.{0,80}(?:exceeds|greater than|larger than|more than).{0,40}GPU",
            re.IGNORECASE,
        ),
    ),
    ("vllm_port_uri", re.compile(r"VLLM_PORT '([^']*)' appears to be a URI")),
    (
        "hub_unauthorized",
        re.compile(
            r"\b40[13] Client Error|GatedRepoError|Cannot access gated repo|Invalid user token|Unauthorized for url"
            r"|Access to model \S+ is restricted"
        ),
    ),
    ("dtype", re.compile(r"Bfloat16 is only supported on GPUs with compute capability", re.IGNORECASE)),
    ("architecture", re.compile(r"Model architectures? \[?[^\]]*\]? (?:are|is) not supported")),
    ("unrecognized_argument", re.compile(r"error: unrecognized arguments: (.+)$")),
)
# The last exception of a start-up: "ValueError: ...", "pydantic_core._pydantic_core.ValidationError: 1 validation
# error for ...", "RuntimeError: ...", argparse's "vllm: error: ...", vLLM's "ERROR ... [core.py:700] ValueError: ...".
_EXCEPTION = re.compile(r"\b(?:[A-Za-z_][\w.]*(?:Error|Exception)|error): \S")
# vLLM's API server's own failure after the engine core's: it only points at the root cause above it.
_WRAPPER = re.compile(
    r"Engine core initialization failed|See root cause above|EngineCore failed to start"
    r"|See stack trace \(above\) for the root cause"
)
_NOISE = re.compile(r"^\s*(?:Traceback|File \"|\^+$)")
# How programs other than a Python traceback say they failed (sources in the module docstring). Read only when a
# container's output has no exception line, so vLLM's own ERROR lines never outrank its exception.
OTHER_FAILURE = re.compile(
    r"(?i:\bexec\b[^:]{0,200}: (?:no such file or directory|exec format error|permission denied))"
    r"|exec user process caused|executable file not found in \$PATH|error while loading shared libraries"
    r"|^(?:panic|fatal error): |\bpanicked at\b"
    r"|\b(?:ERROR|CRITICAL|FATAL|Fatal)\b|\blevel=(?:error|fatal)\b|^[EF]\d{4} \d\d:\d\d:\d\d"
)
# Lines the dedicated memory codes own (GPU_OOM, VLLM_KV_CAPACITY_EXCEEDED): never classified here.
OWNED_ELSEWHERE = re.compile(
    r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|KV cache is needed|stored in KV cache"
    r"|No available memory for the cache blocks|less than desired GPU memory utilization"
)


# An engine that died after it had served: V1's engine core logs its fatal error and the API server raises
# EngineDeadError (vllm/v1/engine/exceptions.py, as in vllm-project/vllm#19483); V0 says its engine loop died.
ENGINE_DIED = re.compile(r"EngineCore encountered a fatal error|EngineDeadError|Engine loop has died")


@dataclass(frozen=True)
class EngineError:
    """The engine's last error: its class, the line quoted, and where it was read."""

    cause: str  # one of the CLASSES names, or "unknown"
    line: str
    pod: str
    container: str
    source: str  # "termination message" | "log" | "previous log"
    match: re.Match[str] | None = None
    # False when the container did not end by itself: killed (liveness, 137/143) or still running unready while
    # the engine waits on what its log names (a tensor-parallel size above the pod's GPUs makes it wait for Ray).
    exited: bool = True

    def describe(self) -> str:
        return f"{self.source} of {self.pod}/{self.container}: {shorten(self.line, 300)!r}"


def classify(line: str) -> tuple[str, re.Match[str] | None]:
    for name, pattern in CLASSES:
        match = pattern.search(line)
        if match:
            return name, match
    return UNKNOWN, None


def _error_lines(text: str) -> list[str]:
    lines = [strip_log_timestamp(line) for line in text.splitlines()]
    return [
        line for line in lines if line and not _NOISE.match(line) and (_EXCEPTION.search(line) or _classified(line))
    ]


def _classified(line: str) -> bool:
    return classify(line)[0] != UNKNOWN


def _other_failures(text: str) -> list[str]:
    """Failure lines in other programs' words; one that ends with a colon takes the next line with it (since Rust
    1.73 a panic prints ``thread 'main' panicked at src/main.rs:14:10:`` and its message on the line after)."""
    lines = [line for line in (strip_log_timestamp(line) for line in text.splitlines()) if line]
    found = []
    for index, line in enumerate(lines):
        if _NOISE.match(line) or not OTHER_FAILURE.search(line):
            continue
        follows = lines[index + 1] if index + 1 < len(lines) else ""
        found.append(f"{line} {follows}" if line.endswith(":") and follows else line)
    return found


def last_error(text: str) -> tuple[str, re.Match[str] | None, str] | None:
    """The cause class, its match and the line of the last classified error in ``text``; else its last exception;
    else, for output without a Python exception, its last failure line in another program's words."""
    lines = _error_lines(text)
    for line in reversed(lines):
        cause, match = classify(line)
        if cause != UNKNOWN:
            return cause, match, line
    causes = [line for line in lines if not _WRAPPER.search(line)] or lines
    if causes:
        return UNKNOWN, None, causes[-1]
    other = _other_failures(text)
    return (UNKNOWN, None, other[-1]) if other else None


def _terminated(status: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [
        (status.get(key) or {}).get("terminated") or {}
        for key in ("state", "lastState")
        if (status.get(key) or {}).get("terminated")
    ]


# 137 and 143 are SIGKILL and SIGTERM from outside (the OOM killer, a liveness probe, a drain): the codes of the
# resources and probes steps name those; the engine's own failure ends with its own exit code (1 for an exception).
_KILLED = frozenset({137, 143})


def failing(status: Mapping[str, Any]) -> bool:
    """Not ready, and the container's current or last run ended by itself with a non-zero exit code."""
    if status.get("ready"):
        return False
    codes = [int(term.get("exitCode") or 0) for term in _terminated(status)]
    return bool(codes) and codes[0] != 0 and codes[0] not in _KILLED


def termination_message(status: Mapping[str, Any]) -> str:
    return "\n".join(str(term.get("message") or "") for term in _terminated(status) if term.get("message"))


def find(
    pods: Sequence[Mapping[str, Any]], container: str, logs: Iterable[ContainerLog]
) -> tuple[list[Mapping[str, Any]], EngineError | None]:
    """The failing predictor pods and the engine's last error among them.

    A pod fails when its serving container is not ready and either exits by itself with an error, or (killed from
    outside, or still running unready) its own log names a known cause: an engine that waits for what it cannot get
    never exits by itself before a liveness probe kills it (vllm-project/vllm#25263).

    Order of preference for the quote: a classified error (termination message, previous log, current log), then an
    unclassified exception of a container that exited by itself. None when no error line was read or when the memory
    codes (``GPU_OOM``, ``VLLM_KV_CAPACITY_EXCEEDED``, ``VLLM_MEMORY_UTILIZATION_RISKY``) own the failure.
    """
    by_pod: dict[str, list[ContainerLog]] = {}
    for log in logs:
        by_pod.setdefault(log.pod, []).append(log)
    failing_pods: list[Mapping[str, Any]] = []
    found: list[EngineError] = []
    for pod in pods:
        name = str((pod.get("metadata") or {}).get("name"))
        statuses = [s for s in (pod.get("status") or {}).get("containerStatuses") or [] if s.get("name") == container]
        if not statuses or statuses[0].get("ready"):
            continue
        exited = failing(statuses[0])
        sources = [("termination message", termination_message(statuses[0]))]
        for log in sorted(by_pod.get(name, []), key=lambda log: not log.previous):
            sources.append(("previous log" if log.previous else "log", log.text))
        hits: list[EngineError] = []
        if not exited and any(OWNED_ELSEWHERE.search(text) for _, text in sources):
            continue  # killed while a memory code's error shows: the memory and probe steps name it
        for source, text in sources:
            if OWNED_ELSEWHERE.search(text):
                return [*failing_pods, pod], None  # a memory code names this failure
            hit = last_error(text) if text else None
            if hit is not None and (exited or hit[0] != UNKNOWN):
                hits.append(EngineError(hit[0], hit[2], name, container, source, hit[1], exited))
        if exited or hits:
            failing_pods.append(pod)
            found += hits
    classified = [error for error in found if error.cause != UNKNOWN]
    chosen = classified or found
    return failing_pods, chosen[0] if chosen else None


def owned_elsewhere(pods: Sequence[Mapping[str, Any]], container: str, logs: Iterable[ContainerLog]) -> bool:
    """A memory code's error (``OWNED_ELSEWHERE``) shows in the termination message or a log of ``container`` in
    ``pods``: the memory steps name that failure."""
    names = {str((pod.get("metadata") or {}).get("name")) for pod in pods}
    texts = [log.text for log in logs if log.pod in names and log.container == container]
    for pod in pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            if status.get("name") == container:
                texts.append(termination_message(status))
    return any(OWNED_ELSEWHERE.search(text) for text in texts if text)


def failing_sidecars(pods: Sequence[Mapping[str, Any]], serving: str) -> list[str]:
    """Names of the pods' other regular containers that are not ready and whose run ended by itself with an error
    (a custom sidecar that crashes keeps the pod unready as surely as the model server would). Init containers are
    the resources step's (``RESOURCES_INIT_CONTAINER_FAILED``)."""
    names: list[str] = []
    for pod in pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            name = str(status.get("name"))
            if name != serving and name not in names and failing(status):
                names.append(name)
    return names


def confirmed_while_running(error: EngineError, server: vllm_args.ServerCommand, serving: Mapping[str, Any]) -> bool:
    """A cause read from a container that did not exit by itself (killed, or running unready) must be one the pod
    spec confirms: only a tensor-parallel size above the pod's GPUs makes the engine wait instead of exiting, and
    the same warning is routine on a multi-node Ray cluster whose pods each see part of the GPUs (printed with the
    world size, vllm-project/vllm#31005), so it counts only when --tensor-parallel-size exceeds this pod's GPUs."""
    if error.exited:
        return True
    if error.cause != "tensor_parallel":
        return False
    size = vllm_args.int_flag(server, "--tensor-parallel-size")
    # A tensor-parallel size of 1 never asks Ray for a placement group, whatever the pod requests.
    return size is not None and size > max(1, sum(accelerator_requests(serving).values()))


_FORBIDDEN = re.compile(r"not in the authorized list|\b403\b")
_UNAUTHORIZED = re.compile(r"be authenticated|Please log in|Invalid user token|Unauthorized|\b401\b")


def hub_refusal(line: str) -> str:
    """ "forbidden" (403: the hub knows the token and its account has no access), "unauthorized" (401: no valid token),
    or "" when the quoted line does not say which."""
    if _FORBIDDEN.search(line):
        return "forbidden"
    if _UNAUTHORIZED.search(line):
        return "unauthorized"
    return ""


def died_while_serving(
    pods: Sequence[Mapping[str, Any]], container: str, logs: Iterable[ContainerLog]
) -> EngineError | None:
    """The last error of an engine that died while serving and came back: the serving container is ready again,
    its previous run ended by itself with an error, and that run's log says the engine died (vllm-project/vllm#5687:
    an illegal memory access after hours of serving). None when a memory code (``GPU_OOM``) owns the failure."""
    previous = {log.pod: log for log in logs if log.previous}
    for pod in pods:
        name = str((pod.get("metadata") or {}).get("name"))
        statuses = [s for s in (pod.get("status") or {}).get("containerStatuses") or [] if s.get("name") == container]
        log = previous.get(name)
        if not statuses or not statuses[0].get("ready") or log is None:
            continue
        last = ((statuses[0].get("lastState") or {}).get("terminated")) or {}
        code = int(last.get("exitCode") or 0)
        if code == 0 or code in _KILLED or not ENGINE_DIED.search(log.text) or OWNED_ELSEWHERE.search(log.text):
            continue
        hit = last_error(log.text)
        if hit is not None:
            return EngineError(hit[0], hit[2], name, container, "previous log", hit[1])
    return None
