"""``ENGINE_START_FAILED`` (the engine said why it would not start) and ``CONTAINER_FAILING_UNKNOWN_CAUSE`` (the
serving container keeps failing and no pattern names why: its own last error is quoted instead of an effect code;
also, as a warning, an engine that died while serving and is ready again after its restart; and, while the serving
container is fine, another container of the pod, a custom sidecar, that keeps exiting with an error).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nbhelpers.checks.queue_vs_oom._facts import (
    BATCHED_FLAG,
    LEN_FLAG,
    SERVING_CUT_PHASE,
    TP_FLAG,
    EngineFacts,
    scan,
)
from nbhelpers.evidence.model import ContainerLog
from nbhelpers.facts import common, engine_errors
from nbhelpers.facts.engine_errors import EngineError
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.sources import kinds, kube

_TITLES = {
    "batched_tokens": "--max-num-batched-tokens is below --max-model-len",
    "tensor_parallel": "--tensor-parallel-size asks for more GPUs than the pod sees",
    "vllm_port_uri": "VLLM_PORT was set by a Kubernetes Service named vllm",
    "hub_unauthorized": "the model hub refused the download (401/403, gated model)",
    "dtype": "the GPU does not support the model's dtype",
    "architecture": "vLLM does not support the model's architecture",
    "unrecognized_argument": "vLLM rejects an argument",
}


def engine_start(facts: EngineFacts) -> Finding | None:
    failing, error = engine_errors.find(facts.pods, facts.container, facts.logs)
    if not failing:
        died = engine_errors.died_while_serving(facts.pods, facts.container, facts.logs)
        return _died(facts, died) if died is not None else _failing_sidecar(facts)
    if error is None:
        return _unquoted(facts, failing)
    if not engine_errors.confirmed_while_running(error, facts.server, facts.workload.serving):
        return None
    refs = tuple(dict.fromkeys([kube.ref(facts.evidence.isvc), *(kube.ref(pod) for pod in failing)]))
    if error.cause == engine_errors.UNKNOWN:
        return _unknown(facts, failing, error, refs)
    what, changes = _fix(facts, error)
    plan = facts.args_patch(changes) if changes else None
    how = (
        "exits at start-up"
        if error.exited
        else "never finishes starting (killed by its probes or still waiting, not ready)"
    )
    summary = (
        f"The serving container {facts.container!r} {how} ({len(failing)} pod(s) not ready) and vLLM "
        f"says why ({error.cause}): {common.shorten(error.line, 300)!r}. Until this changes no replica turns "
        "ready, so endpoints stay empty and every request fails with 503."
    )
    return Finding(
        code="ENGINE_START_FAILED",
        title=_TITLES[error.cause],
        summary=summary,
        objects=refs,
        evidence=(error.describe(), *_service_link(facts, error), *facts.restarts()),
        fix=Fix.from_plan(what, plan, no_patch=facts.no_patch_reason() if changes else ""),
    )


def failing_container(facts: EngineFacts) -> Finding | None:
    """For a serving container that does not run vLLM (a custom predictor): the container of the pod that keeps
    exiting with an error, its last line quoted whatever it says (vLLM's causes and fixes do not apply)."""
    failing, error = engine_errors.find(facts.pods, facts.container, facts.logs)
    if not failing:
        return _failing_sidecar(facts)
    if error is None or not error.exited:
        return None
    refs = tuple(dict.fromkeys([kube.ref(facts.evidence.isvc), *(kube.ref(pod) for pod in failing)]))
    return _unknown(facts, failing, error, refs)


def _service_link(facts: EngineFacts, error: EngineError) -> tuple[str, ...]:
    """The Service named vllm behind a VLLM_PORT URI, when the capture holds it (vllm-project/vllm#34199)."""
    service = common.named(facts.evidence, kinds.SERVICE, "vllm") if error.cause == "vllm_port_uri" else None
    if service is None:
        return ()
    spec = service.get("spec") or {}
    ports = ", ".join(str(port.get("port")) for port in spec.get("ports") or [])
    return (
        f"{kube.ref(service)} (clusterIP {spec.get('clusterIP')}, port {ports}) exists in the namespace: the kubelet "
        "injects VLLM_PORT=tcp://<clusterIP>:<port> into every pod that keeps service links on",
    )


def _unknown(
    facts: EngineFacts,
    failing: Sequence[Mapping[str, Any]],
    error: EngineError,
    refs: tuple[str, ...],
    role: str = "serving container",
) -> Finding:
    pod = kube.name(failing[0])
    container = error.container
    quote = f"its last error ({error.source}): {common.shorten(error.line, 300)!r}"
    restarts = facts.restarts() if container == facts.container else _restarts(failing, container)
    return Finding(
        code="CONTAINER_FAILING_UNKNOWN_CAUSE",
        title=f"container {container!r} keeps failing",
        summary=(
            f"The {role} {container!r} of {pod} is not ready and exits with an error; no known "
            f"cause matched, and {quote}."
            + ("" if container == facts.container else " A pod is ready only when every container is.")
        ),
        objects=refs,
        evidence=(error.describe(), *restarts),
        fix=Fix(
            what=(
                f"Read the whole log of {container!r} (kubectl logs {pod} -c {container} --previous) "
                "from the first error on and fix what it names; the lines above show how it ends."
            )
        ),
    )


def _unquoted(facts: EngineFacts, failing: Sequence[Mapping[str, Any]]) -> Finding | None:
    """The serving container exits with an error and the capture holds no line of its own that says why (no
    termination message, no error line in a log it could read). The fallback still names the container, its exit
    code and restarts as the kubelet records them, the last line its log does hold, and, on Serverless, the Revision's
    report of the failure (ContainerHealthy=False, ExitCode<N>: knative/serving
    pkg/reconciler/revision/reconcile_resources.go), rather than leaving ENDPOINTS_NONE_READY alone at the top
    (docs/architecture.md, cause before effect).

    A memory code's error in its words belongs to the memory steps; a container killed from outside (137, 143) is
    not failing by itself (``engine_errors.failing``) and never gets here.
    """
    exited = [pod for pod in failing if _serving_status(pod, facts.container) is not None]
    if not exited or engine_errors.owned_elsewhere(failing, facts.container, facts.logs):
        return None
    pod = exited[0]
    knative = _revision_reports(facts, pod)
    status = _serving_status(pod, facts.container) or {}
    last = ((status.get("lastState") or {}).get("terminated")) or ((status.get("state") or {}).get("terminated")) or {}
    code = last.get("exitCode")
    read = [log for log in facts.logs if log.pod == kube.name(pod) and log.container == facts.container]
    last_line = _last_line(read)
    missing = "its log holds no error line" if last_line else "no line of its log was captured"
    summary = (
        f"The serving container {facts.container!r} of {kube.name(pod)} is not ready and exits with code {code} "
        f"({len(exited)} pod(s)); nothing the capture holds says why: no termination message, and {missing}."
        + (f" Its log ends with {common.shorten(last_line, 200)!r}." if last_line else "")
        + (f" Knative reports it as {knative[0].split(' condition ', 1)[-1]}." if knative else "")
    )
    return Finding(
        code="CONTAINER_FAILING_UNKNOWN_CAUSE",
        title=f"container {facts.container!r} keeps exiting with code {code}",
        summary=summary,
        objects=tuple(dict.fromkeys([kube.ref(facts.evidence.isvc), *(kube.ref(p) for p in exited)])),
        evidence=(
            _kubelet_record(pod, facts.container, last),
            *((f"last log line: {common.shorten(last_line, 300)}",) if last_line else ()),
            *knative,
            *facts.restarts(),
        ),
        fix=Fix(
            what=(
                f"Read the log of {facts.container!r} from its start (kubectl logs {kube.name(pod)} -c "
                f"{facts.container} --previous; reading pod logs needs get on pods/log) and fix the first error it "
                "names."
            )
        ),
    )


def _kubelet_record(pod: Mapping[str, Any], container: str, last: Mapping[str, Any]) -> str:
    """The container's last run as the kubelet records it in the pod's status."""
    ended = f" at {last['finishedAt']}" if last.get("finishedAt") else ""
    return (
        f"pod {kube.name(pod)} container {container}: last run ended {last.get('reason') or 'with an error'}, "
        f"exit code {last.get('exitCode')}{ended}"
    )


def _last_line(logs: Sequence[ContainerLog]) -> str:
    """The last non-empty line of the newest log read (the previous run's first, where the container died)."""
    for log in sorted(logs, key=lambda entry: not entry.previous):
        lines = [common.strip_log_timestamp(line).strip() for line in log.text.splitlines() if line.strip()]
        if lines:
            return lines[-1]
    return ""


def _serving_status(pod: Mapping[str, Any], container: str) -> Mapping[str, Any] | None:
    """The container's status when its current or last run ended by itself with an error."""
    for status in kube.status(pod).get("containerStatuses") or []:
        if status.get("name") == container and engine_errors.failing(status):
            return status  # type: ignore[no-any-return]
    return None


def _revision_reports(facts: EngineFacts, pod: Mapping[str, Any]) -> list[str]:
    """The failing condition of the pod's Knative Revision (its ContainerHealthy quotes the container's exit)."""
    name = kube.labels(pod).get(common.REVISION_LABEL)
    revision = common.named(facts.evidence, kinds.KNATIVE_REVISION, str(name)) if name else None
    if revision is None:
        return []
    return [
        f"{kube.ref(revision)} condition {kube.describe_condition(entry)}"
        for entry in kube.conditions(revision)
        if entry.get("type") == "ContainerHealthy" and str(entry.get("status")) == "False"
    ]


def _failing_sidecar(facts: EngineFacts) -> Finding | None:
    """The serving container is fine, but another container of the predictor pods keeps exiting with an error."""
    for name in engine_errors.failing_sidecars(facts.pods, facts.container):
        logs = [log for log in facts.evidence.logs if log.container == name and _of_pods(log, facts.pods)]
        failing, error = engine_errors.find(facts.pods, name, logs)
        if failing and error is not None:
            refs = tuple(dict.fromkeys([kube.ref(facts.evidence.isvc), *(kube.ref(pod) for pod in failing)]))
            return _unknown(facts, failing, error, refs, role="container")
    return None


def _of_pods(log: ContainerLog, pods: Sequence[Mapping[str, Any]]) -> bool:
    return any(kube.name(pod) == log.pod for pod in pods)


def _restarts(pods: Sequence[Mapping[str, Any]], container: str) -> list[str]:
    """Restarts and last exit of ``container`` in ``pods``, as the serving container's are listed."""
    lines = []
    for pod in pods:
        for status in kube.status(pod).get("containerStatuses") or []:
            if status.get("name") != container:
                continue
            last = ((status.get("lastState") or {}).get("terminated")) or {}
            lines.append(
                f"{kube.ref(pod)}: container {container}: {status.get('restartCount') or 0} restarts, last exit "
                f"{last.get('reason') or '?'} (code {last.get('exitCode')})"
            )
    return lines


def _died(facts: EngineFacts, error: EngineError) -> Finding:
    """An engine that died while serving, restarted and is ready again: a warning (the pod serves now), quoting its
    last error. A previous log that does not reach back to the engine's start says how the run ended, nothing about
    how it started, and the finding says the log was cut."""
    pod = next(p for p in facts.pods if kube.name(p) == error.pod)
    previous = [log for log in facts.logs if log.previous and log.pod == error.pod]
    hits = scan(previous, engine_errors.ENGINE_DIED)
    cut = bool(hits) and hits[0].phase == SERVING_CUT_PHASE
    where = "its previous log, which was cut after the engine's start," if cut else "its previous log"
    return Finding(
        code="CONTAINER_FAILING_UNKNOWN_CAUSE",
        title=f"the engine in {facts.container!r} died while serving",
        summary=(
            f"The engine in {facts.container!r} of {error.pod} died while serving and the container exited with an "
            f"error; it restarted and is ready again. No known cause matched; {where} ends with "
            f"{common.shorten(error.line, 300)!r}."
            + (" That log says how the run ended, nothing about how the engine started." if cut else "")
        ),
        objects=tuple(dict.fromkeys([kube.ref(facts.evidence.isvc), kube.ref(pod)])),
        evidence=(error.describe(), *(hit.describe() for hit in hits), *facts.restarts()),
        fix=Fix(
            what=(
                f"Read the previous log of {facts.container!r} (kubectl logs {error.pod} -c {facts.container} "
                "--previous) from the engine's first error on: a CUDA error raised in a kernel (an illegal memory "
                "access) is a vLLM or driver bug to upgrade past or report upstream with that traceback. Keep a "
                "second replica so the others serve while one restarts."
            )
        ),
        severity=Severity.WARNING,
    )


def _fix(facts: EngineFacts, error: EngineError) -> tuple[str, dict[str, str]]:
    match = error.match
    if error.cause == "batched_tokens" and match is not None:
        length = match.group(2).replace(",", "")
        return (
            f"Set {BATCHED_FLAG} to at least {LEN_FLAG} ({length}), or enable chunked prefill "
            f"(--enable-chunked-prefill) so a long prompt is split across batches, or lower {LEN_FLAG}.",
            {BATCHED_FLAG: length},
        )
    if error.cause == "tensor_parallel":
        gpus = sum(common.accelerator_requests(facts.workload.serving).values())
        if gpus:
            return (
                f"Set {TP_FLAG} equal to the GPUs the pod requests ({gpus}), or request as many GPUs "
                f"(nvidia.com/gpu) as {TP_FLAG}.",
                {TP_FLAG: str(gpus)},
            )
        return f"Request as many GPUs (nvidia.com/gpu) as {TP_FLAG}, or lower {TP_FLAG}.", {}
    if error.cause == "hub_unauthorized":
        return _hub_fix(engine_errors.hub_refusal(error.line)), {}
    if error.cause == "dtype":
        # float16 is what vLLM's own message proposes (--dtype=half), and what releases since
        # https://github.com/vllm-project/vllm/pull/17265 pick by themselves on such a GPU.
        return (
            "Set --dtype half (float16): this GPU has no bfloat16 (compute capability below 8.0). Or serve the model "
            "on an Ampere or newer GPU.",
            {"--dtype": "half"},
        )
    texts = {
        "vllm_port_uri": (
            "A Service named vllm in the namespace makes the kubelet inject VLLM_PORT=tcp://..., which vLLM reads "
            "as its own setting: rename that Service, or set enableServiceLinks: false on the predictor pod "
            "(spec.predictor.enableServiceLinks), or set VLLM_PORT explicitly in the container's env."
        ),
        "architecture": (
            "Use a vLLM release that supports this architecture (a newer image), pass --trust-remote-code when the "
            "model ships its own code, or serve it with a runtime that supports it."
        ),
        "unrecognized_argument": (
            "Remove or rename the argument the vLLM CLI rejects (check it against this image's vllm serve --help); "
            "flags change between releases."
        ),
    }
    return texts[error.cause], {}


_TOKEN = "HF_TOKEN from a Secret, through env valueFrom.secretKeyRef or the storage initializer's secret"


def _hub_fix(refusal: str) -> str:
    """A 403 and a 401 from the hub need different fixes: access for the token's account, or a token at all."""
    if refusal == "forbidden":
        return (
            "The hub knows the token and refuses its account (403): request access to the gated model (accept its "
            "licence) with the account that owns the token and wait for the grant, or use a token of an account that "
            "already has access. A new or re-mounted token of the same account does not help."
        )
    if refusal == "unauthorized":
        return f"The hub got no valid token (401): give the container one whose account has access ({_TOKEN})."
    return f"The model is gated or private: accept its licence on the hub and give the container a token ({_TOKEN})."
