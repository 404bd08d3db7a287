"""The bridge between the runbook's parameters cell and :func:`nbhelpers.triage.run`.

The notebook's first code cell calls :func:`triage_from_parameters` once with
every parameter. Secrets never travel as parameters (papermill stores them in
the executed notebook): the parameters only name environment variables.

Two files let the CLI follow a headless run (both optional, named by env vars):
- ``KSERVE_RUNBOOK_PROGRESS_FILE``: one ``event<TAB>message`` line per progress event;
- ``KSERVE_RUNBOOK_ERROR_FILE``: the one-line message of a :class:`RunbookError`
  that stopped the run (the exception is re-raised so papermill fails too).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from nbhelpers import display
from nbhelpers.errors import RunbookError
from nbhelpers.headless import ERROR_FILE_ENV, PROGRESS_FILE_ENV
from nbhelpers.report import write_atomic, write_outputs
from nbhelpers.triage import Progress, TriageParams, TriageResult, run


def progress_to_file(path: str) -> Progress:
    """A progress callback appending ``event<TAB>message`` lines, flushed one by one."""

    def notify(event: str, message: str) -> None:
        line = f"{_one_line(event)}\t{_one_line(message)}\n"
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line)

    return notify


def _one_line(text: str) -> str:
    return " ".join(str(text).replace("\t", " ").split())


def headers_from_env(variable: str) -> tuple[str, ...]:
    """Extra Prometheus headers from a JSON object held in the environment variable ``variable``."""
    if not variable:
        return ()
    raw = os.environ.get(variable)
    if raw is None:
        raise RunbookError(f"prometheus_headers_env {variable}: that variable is not set")
    try:
        headers = json.loads(raw)
    except json.JSONDecodeError:
        raise RunbookError(f"{variable} must hold a JSON object of header names and values") from None
    if not isinstance(headers, dict) or not all(isinstance(value, str) for value in headers.values()):
        raise RunbookError(f"{variable} must hold a JSON object of header names and string values")
    return tuple(f"{name}: {value}" for name, value in headers.items())


def split_codes(ignore: str) -> tuple[str, ...]:
    return tuple(code.strip() for code in ignore.replace(" ", ",").split(",") if code.strip())


def triage_from_parameters(
    *,
    namespace: str = "",
    isvc: str = "",
    bundle: str = "",
    kubeconfig: str = "",
    context: str = "",
    prometheus: str = "",
    prometheus_token_env: str = "",
    prometheus_ca_file: str = "",
    prometheus_headers_env: str = "",
    prometheus_insecure: bool = False,
    since: str = "",
    start: str = "",
    end: str = "",
    incident_start: str = "",
    incident_end: str = "",
    ignore: str = "",
    deadline: str = "",
    request_timeout: str = "30s",
    client_timeout: str = "",
    kserve_namespace: str = "kserve",
    knative_namespace: str = "knative-serving",
    out_dir: str = "",
    interactive: bool = False,
) -> TriageResult:
    """Run the triage once for the notebook; write findings.json and summary.md when ``out_dir`` is set."""
    display.STATIC = not interactive
    progress_path = os.environ.get(PROGRESS_FILE_ENV)
    try:
        params = TriageParams(
            namespace=namespace,
            isvc=isvc,
            kubeconfig=kubeconfig,
            context=context,
            bundle=bundle,
            prometheus=prometheus,
            prometheus_token_env=prometheus_token_env,
            prometheus_ca_file=prometheus_ca_file,
            prometheus_headers=headers_from_env(prometheus_headers_env),
            prometheus_insecure=prometheus_insecure,
            since=since,
            start=start,
            end=end,
            incident_start=incident_start,
            incident_end=incident_end,
            ignore=split_codes(ignore),
            deadline=deadline,
            request_timeout=request_timeout,
            client_timeout=client_timeout,
            kserve_namespace=kserve_namespace,
            knative_namespace=knative_namespace,
        )
        result = run(params, progress_to_file(progress_path) if progress_path else None)
        if out_dir:
            write_outputs(result, out_dir)
    except RunbookError as error:
        error_path = os.environ.get(ERROR_FILE_ENV)
        if error_path:
            write_atomic(Path(error_path), (_one_line(str(error)) + "\n").encode())
        raise
    return result
