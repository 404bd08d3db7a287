"""Headless triage: run ``runbooks/triage.ipynb`` with papermill and write the report (docs/contracts.md#execution-model, docs/contracts.md#output-folder).

The CLI checks the input first (sources, window, the InferenceService) so a
bad input fails in a second with one line, then executes the notebook, relays
its per-step progress to the terminal, renders ``report.html`` and reads the
exit code from the written ``findings.json``. Secrets never travel as notebook
parameters: the Prometheus token and headers reach the kernel through
environment variables that name them.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TextIO

from nbhelpers.errors import RunbookError
from nbhelpers.evidence.model import Target
from nbhelpers.triage import TriageParams, TriageResult
from nbhelpers.util.kernel_env import ERROR_FILE_ENV, HEADERS_ENV, PROGRESS_FILE_ENV, PROMETHEUS_URL_ENV
from nbhelpers.util.paths import runbook_path
from nbhelpers.util.redaction import redact_url
from nbhelpers.util.safe_paths import child_path, safe_component

OUTPUT_FILES = ("triage.ipynb", "report.html", "findings.json", "summary.md")
EVIDENCE_FILE = "evidence.tar.gz"  # the redacted evidence the verdict came from; the report is rendered from it
# Of a --deadline, the share kept back from reading so that findings.json and summary.md are always written:
# the kernel stops reading this much earlier than the deadline (at most WRITE_RESERVE_MAX seconds).
WRITE_RESERVE_SHARE = 0.25
WRITE_RESERVE_MAX = timedelta(seconds=20)


def reading_budget(deadline: timedelta) -> timedelta:
    """How long the kernel may read: the deadline less a reserve for writing the findings."""
    return deadline - min(deadline * WRITE_RESERVE_SHARE, WRITE_RESERVE_MAX)


@dataclass(frozen=True)
class Report:
    out_dir: Path
    findings: dict[str, Any]

    @property
    def has_critical(self) -> bool:
        return any(finding.get("severity") == "critical" for finding in self.findings.get("findings", []))


def output_dir(out: str | None, target: Target, now: datetime, base: Path = Path("outputs")) -> Path:
    """The run's output folder: ``--out`` (must be empty) or a fresh timestamped one."""
    if out:
        chosen = Path(out)
        if chosen.exists() and (not chosen.is_dir() or any(chosen.iterdir())):
            raise RunbookError(f"--out {chosen} exists and is not empty: choose a new folder")
        chosen.mkdir(parents=True, exist_ok=True)
        return chosen
    stamp = now.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    # The names come from the bundle or the alert: one safe path component, and the folder stays under base.
    stem = safe_component(f"{stamp}-{target.namespace}-{target.isvc}")
    for suffix in range(1000):
        candidate = child_path(base, stem if suffix == 0 else f"{stem}-{suffix}")
        try:
            candidate.mkdir(parents=True)
        except FileExistsError:
            continue
        return candidate
    raise RunbookError(f"could not create an output folder under {base}")


def notebook_parameters(params: TriageParams, out_dir: Path, symptom: str = "") -> dict[str, Any]:
    """The papermill parameters: the request as text (never a secret value) plus where to write.

    Prometheus headers may carry credentials: they travel in the kernel's environment
    (:data:`HEADERS_ENV`), and the notebook only learns that variable's name.
    """
    if params.deadline is not None:
        params = replace(params, deadline=reading_budget(params.deadline))
    text = params.to_text()
    del text["prometheus_headers"]
    text |= {
        "prometheus": redact_url(params.prometheus),  # the real one, credentials and all, in PROMETHEUS_URL_ENV
        "bundle": str(Path(params.bundle).resolve()) if params.bundle else "",
        "kubeconfig": str(Path(params.kubeconfig).resolve()) if params.kubeconfig else "",
        "prometheus_headers_env": HEADERS_ENV if params.prometheus_headers else "",
    }
    return {**text, "out_dir": str(out_dir.resolve()), "symptom": symptom, "interactive": False}


class ProgressRelay:
    """Tails the kernel's progress file and prints step lines to a terminal."""

    def __init__(self, path: Path, stream: TextIO, enabled: bool) -> None:
        self.path, self.stream, self.enabled = path, stream, enabled
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._began = time.monotonic()

    def __enter__(self) -> ProgressRelay:
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        if self.enabled:
            self._thread.join(timeout=2)

    def _follow(self) -> None:
        position = 0
        while True:
            stopping = self._stop.is_set()
            if self.path.exists():
                with self.path.open() as handle:
                    handle.seek(position)
                    for line in handle:
                        self._show(line.rstrip("\n"))
                    position = handle.tell()
            if stopping:
                return
            time.sleep(0.1)

    def _show(self, line: str) -> None:
        event, _, message = line.partition("\t")
        elapsed = f"[{time.monotonic() - self._began:6.1f}s]"
        if event == "gather":
            self.stream.write(f"  {elapsed} {message}\n")
        elif event == "step-end":
            step_id, status, seconds = [*message.split(), "", "", ""][:3]
            self.stream.write(f"  {elapsed} step {step_id:<16} {status:<9} {seconds}\n")
        self.stream.flush()


@contextmanager
def _kernel_environment(params: TriageParams, progress_file: Path, error_file: Path) -> Iterator[None]:
    """Environment for the kernel (papermill starts it as a child of this process)."""
    added: dict[str, str] = {PROGRESS_FILE_ENV: str(progress_file), ERROR_FILE_ENV: str(error_file)}
    if params.prometheus_headers:
        headers = {}
        for header in params.prometheus_headers:
            name, _, value = header.partition(":")
            headers[name.strip()] = value.strip()
        added[HEADERS_ENV] = json.dumps(headers)
    if params.prometheus and redact_url(params.prometheus) != params.prometheus:
        added[PROMETHEUS_URL_ENV] = params.prometheus
    saved: dict[str, str | None] = {name: os.environ.get(name) for name in added}
    os.environ.update(added)
    try:
        yield
    finally:
        for name, previous in saved.items():
            if previous is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = previous


@contextmanager
def _stderr_to(log_file: Path) -> Iterator[TextIO]:
    """Send file descriptor 2 to ``log_file`` while the kernel runs; yield a stream on the real stderr.

    The kernel inherits our stderr: its transport warnings, and the traceback it prints when
    a deadline kills it, would otherwise reach the user's terminal. They are kept in the log.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    terminal = os.fdopen(os.dup(saved), "w", buffering=1)
    with log_file.open("wb") as log:
        os.dup2(log.fileno(), 2)
    try:
        yield terminal
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        terminal.close()


def execute(
    params: TriageParams, out_dir: Path, show_progress: bool, stream: TextIO = sys.stderr, symptom: str = ""
) -> Report:
    """Run the notebook headless into ``out_dir`` and render the HTML report.

    ``symptom`` (503, 504, oom, hpa or empty) only orders the reading: every step runs regardless.
    """
    import papermill
    from papermill.exceptions import PapermillExecutionError

    from nbhelpers.render.report_html import render_html

    deadline = params.deadline.total_seconds() if params.deadline else None
    with tempfile.TemporaryDirectory(prefix="kserve-runbook-") as scratch:
        progress_file, error_file = Path(scratch) / "progress", Path(scratch) / "error"
        partial_notebook = out_dir / ".triage.partial.ipynb"
        try:
            with (
                _kernel_environment(params, progress_file, error_file),
                _stderr_to(Path(scratch) / "kernel.log") as terminal,
                ProgressRelay(progress_file, terminal if stream is sys.stderr else stream, show_progress),
            ):
                papermill.execute_notebook(
                    str(runbook_path("triage")),
                    str(partial_notebook),
                    parameters=notebook_parameters(params, out_dir, symptom),
                    kernel_name="python3",
                    progress_bar=False,
                    shutdown_kernel="immediate",  # nbclient: the cells are done and their files written; a graceful shutdown waits ~0.5 s
                    cwd=str(out_dir),
                    execution_timeout=math.ceil(deadline) if deadline else None,
                )
        except PapermillExecutionError as error:
            message = error_file.read_text().strip() if error_file.exists() else ""
            if message:
                raise RunbookError(message) from None
            raise RunbookError(
                f"the runbook failed in cell {error.exec_count}: {error.ename}: {error.evalue} "
                f"(executed notebook kept at {partial_notebook})"
            ) from None
        except TimeoutError:
            findings_file = out_dir / "findings.json"
            if not findings_file.exists():
                raise RunbookError(f"the run did not finish within --deadline {params.to_text()['deadline']}") from None
            # The findings were written within the reading budget; only the notebook's display cells ran out.
            return Report(out_dir, json.loads(findings_file.read_text()))
    notebook_file = out_dir / "triage.ipynb"
    os.replace(partial_notebook, notebook_file)
    render_html(notebook_file, out_dir / "report.html")
    findings_file = out_dir / "findings.json"
    if not findings_file.exists():
        raise RunbookError(f"the runbook ran but wrote no {findings_file}")
    return Report(out_dir, json.loads(findings_file.read_text()))


# --------------------------------------------------------------------------------- verdict first


def write_verdict(result: TriageResult, out_dir: Path) -> Path:
    """The fast part's files: findings.json and summary.md (:func:`write_findings`), then the redacted
    evidence bundle they came from (:func:`write_evidence`)."""
    write_findings(result, out_dir)
    return write_evidence(result, out_dir)


def write_findings(result: TriageResult, out_dir: Path) -> None:
    """findings.json and summary.md: the verdict, printed as soon as they are on disk."""
    from nbhelpers.render.findings_json import write_outputs

    write_outputs(result, out_dir)


def write_evidence(result: TriageResult, out_dir: Path) -> Path:
    """The redacted evidence bundle, ``evidence.tar.gz``.

    The bundle is what the report notebook reads, so the report shows the evidence the verdict was drawn
    from and never reads the cluster a second time; it is also the file to attach to a postmortem.
    """
    from nbhelpers.evidence.capture import write_bundle

    return write_bundle(result.evidence, out_dir / EVIDENCE_FILE, result.evidence.observed_at)


def report_parameters(result: TriageResult, params: TriageParams, bundle: Path) -> TriageParams:
    """The request the report notebook runs: the same target, window and settings, read from ``bundle``."""
    window = result.evidence.window
    return replace(
        params,
        bundle=str(bundle),
        namespace=result.evidence.target.namespace,
        isvc="" if result.evidence.target.is_llmisvc else result.evidence.target.isvc,
        llmisvc=result.evidence.target.isvc if result.evidence.target.is_llmisvc else "",
        kubeconfig="",
        context="",
        prometheus="",
        prometheus_token_env="",
        prometheus_ca_file="",
        prometheus_headers=(),
        since=None,
        start=window.start,
        end=window.end,
        deadline=None,
    )


def render_report(
    result: TriageResult,
    params: TriageParams,
    out_dir: Path,
    bundle: Path,
    seconds_left: float | None,
    symptom: str = "",
) -> str:
    """Execute the notebook on ``bundle`` and export report.html; "" when done, else why it was not.

    findings.json and summary.md are already written and stay as they are: a report that cannot be
    rendered (the deadline, a broken kernel) costs the report, never the verdict.
    """
    import papermill
    from papermill.exceptions import PapermillExecutionError

    from nbhelpers.render.report_html import render_html

    if seconds_left is not None and seconds_left <= 0:
        return "the --deadline was reached before the report could be rendered"
    parameters = notebook_parameters(report_parameters(result, params, bundle), out_dir, symptom)
    parameters["out_dir"] = ""  # the notebook must not write findings.json again: the CLI's files are the verdict
    partial_notebook = out_dir / ".triage.partial.ipynb"
    with tempfile.TemporaryDirectory(prefix="kserve-runbook-") as scratch:
        try:
            with _stderr_to(Path(scratch) / "kernel.log"):
                papermill.execute_notebook(
                    str(runbook_path("triage")),
                    str(partial_notebook),
                    parameters=parameters,
                    kernel_name="python3",
                    progress_bar=False,
                    shutdown_kernel="immediate",  # nbclient: the cells are done and their files written; a graceful shutdown waits ~0.5 s
                    cwd=str(out_dir),
                    execution_timeout=math.ceil(seconds_left) if seconds_left is not None else None,
                )
        except PapermillExecutionError as error:
            return f"the report notebook failed in cell {error.exec_count}: {error.ename}: {error.evalue}"
        except TimeoutError:
            return "the --deadline was reached while the report was rendered"
    notebook_file = out_dir / "triage.ipynb"
    os.replace(partial_notebook, notebook_file)
    render_html(notebook_file, out_dir / "report.html")
    return ""
