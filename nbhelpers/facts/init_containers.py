"""Init containers that fail: KServe's storage-initializer (it downloads the model before the server starts) and any
other init container of a predictor pod.

A pod's containers start only after every init container has exited 0, so a failing init container keeps the pod
out of the endpoints for good: the kubelet restarts it with back-off (``Init:CrashLoopBackOff``) while the serving
container waits in ``PodInitializing``. Such a pod is not "still starting". Its status holds the reason
(``lastState.terminated.reason``, ``exitCode``) and, when the container wrote one, the termination message
(/dev/termination-log, or the log's tail with ``FallbackToLogsOnError``); its log holds the error line.

Everything here is a pure function of the evidence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nbhelpers.evidence.model import Evidence
from nbhelpers.facts.common import strip_log_timestamp
from nbhelpers.sources import kube

STORAGE_INITIALIZER = "storage-initializer"

# Waiting reasons of an init container that only say it has not run yet or is being created.
_NOT_FAILING_WAITING = frozenset({"", "PodInitializing", "ContainerCreating"})
# Waiting reasons that are image problems rather than a failing run (another code owns them, and
# CreateContainerConfigError too).
IMAGE_WAITING = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})

AUTH = "auth"
NOT_FOUND = "not found"
NO_SPACE = "no space"
OOM = "OOMKilled"
TIMEOUT = "timeout"
UNKNOWN = "unknown"

# In the order they are tried: the first class whose pattern matches the message or the log wins.
_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (NO_SPACE, re.compile(r"No space left on device|ENOSPC|disk quota exceeded|ephemeral.storage", re.IGNORECASE)),
    (
        AUTH,
        re.compile(
            r"\b40[13]\b|Unauthori[sz]ed|Forbidden|AccessDenied|Access denied|GatedRepoError|InvalidAccessKeyId|"
            r"SignatureDoesNotMatch|is restricted|NoCredentialsError|credentials",
            re.IGNORECASE,
        ),
    ),
    (
        NOT_FOUND,
        re.compile(
            r"\b404\b|NoSuchKey|NoSuchBucket|RepositoryNotFound|EntryNotFound|RevisionNotFound|not found|"
            r"does not exist|No such file",
            re.IGNORECASE,
        ),
    ),
    (TIMEOUT, re.compile(r"timed? ?out|Timeout|DeadlineExceeded", re.IGNORECASE)),
)


@dataclass(frozen=True)
class InitFailure:
    """One failing init container of one pod."""

    pod: str
    container: str
    state: str  # the current state: its waiting reason, or "running"/"terminated"
    reason: str  # the last termination's reason (OOMKilled, Error, ...), "" when none is recorded
    exit_code: int | None
    restarts: int
    cause: str  # one of the classes above
    line: str  # the error line quoted from the log or the termination message ("" when there is none)
    line_from: str  # "log", "termination message", either with "'s last line" (no error line in it), or ""

    def describe(self) -> str:
        exit_text = f", exit code {self.exit_code}" if self.exit_code is not None else ""
        last = f"; last terminated {self.reason or '?'}{exit_text}" if self.reason or self.exit_code is not None else ""
        text = f"Pod {self.pod} init container {self.container}: {self.state}{last}, {self.restarts} restarts"
        if self.line:
            text += f"; {self.line_from}: {self.line!r}"
        return text


def _terminated(status: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """The termination that says why the container failed: the current one, else the previous run's."""
    for key in ("state", "lastState"):
        terminated = (status.get(key) or {}).get("terminated")
        if terminated:
            return key, terminated
    return "", {}


def _is_failing(status: Mapping[str, Any]) -> bool:
    state = status.get("state") or {}
    current = state.get("terminated")
    if current is not None:
        return int(current.get("exitCode") or 0) != 0
    waiting = str((state.get("waiting") or {}).get("reason") or "")
    if waiting in IMAGE_WAITING or waiting == "CreateContainerConfigError":
        return False
    if waiting not in _NOT_FAILING_WAITING:
        return True
    last = (status.get("lastState") or {}).get("terminated")
    return last is not None and int(last.get("exitCode") or 0) != 0


def _classify(reason: str, texts: Iterable[str]) -> tuple[str, str]:
    """(cause class, the line that shows it) from the termination reason and the lines of message and log."""
    lines = [strip_log_timestamp(line.strip()) for text in texts for line in text.splitlines() if line.strip()]
    if reason == "OOMKilled":
        return OOM, ""
    for cause, pattern in _CLASSES:
        matching = [line for line in lines if pattern.search(line)]
        if matching:
            return cause, matching[-1]
    return UNKNOWN, ""


LAST_LINE = "last line"  # ends ``line_from`` when the quoted line is only the last one written, not an error


def _last_error_line(text: str) -> str:
    lines = [strip_log_timestamp(line.strip()) for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if re.search(r"error|exception|fail", line, re.IGNORECASE)]
    return (errors or [""])[-1]


def _last_line(text: str) -> str:
    lines = [strip_log_timestamp(line.strip()) for line in text.splitlines() if line.strip()]
    return (lines or [""])[-1]


def init_failures(evidence: Evidence, pods: Iterable[Mapping[str, Any]]) -> list[InitFailure]:
    """The failing init containers of ``pods``, in pod order then container order."""
    failures = []
    for pod in pods:
        name = kube.name(pod)
        for status in kube.status(pod).get("initContainerStatuses") or []:
            if not _is_failing(status):
                continue
            container = str(status.get("name"))
            state = status.get("state") or {}
            waiting = str((state.get("waiting") or {}).get("reason") or "")
            current = waiting or ("running" if "running" in state else "terminated")
            _, terminated = _terminated(status)
            reason = str(terminated.get("reason") or "")
            exit_code = terminated.get("exitCode")
            message = str(terminated.get("message") or "")
            logs = [log.text for log in evidence.logs_of(name) if log.container == container]
            cause, line = _classify(reason, [*logs, message])
            line_from = ""
            if line:
                line_from = "log" if any(line in text for text in logs) else "termination message"
            else:
                # An error line if there is one; else the last line written (an OOM kill leaves no error behind).
                sources = (*(("log", text) for text in logs), ("termination message", message))
                candidates = [(_last_error_line(text), source) for source, text in sources]
                candidates += [(_last_line(text), f"{source}'s {LAST_LINE}") for source, text in sources]
                line, line_from = next(((found, source) for found, source in candidates if found), ("", ""))
            failures.append(
                InitFailure(
                    name,
                    container,
                    current,
                    reason,
                    int(exit_code) if isinstance(exit_code, int) else None,
                    int(status.get("restartCount") or 0),
                    cause,
                    line[:300],
                    line_from,
                )
            )
    return failures


def failing_init_container(pod_status: Mapping[str, Any]) -> str:
    """The first failing init container in a pod's status, with its state ("" when none fails)."""
    for status in pod_status.get("initContainerStatuses") or []:
        if _is_failing(status):
            state = status.get("state") or {}
            waiting = str((state.get("waiting") or {}).get("reason") or "")
            _, terminated = _terminated(status)
            return f"{status.get('name')} {waiting or terminated.get('reason') or 'failing'}"
    return ""
