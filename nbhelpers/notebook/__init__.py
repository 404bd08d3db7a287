"""The bridge between the runbook's parameters cell and :func:`nbhelpers.triage.run`.

The notebook's first code cell calls :func:`start_triage` once with every
parameter (``start_triage(**parameters_from(globals()))``). Headless it runs the triage there (``run()``, once) and returns the
:class:`~nbhelpers.triage.TriageResult`; in interactive mode it shows the
widget panel (:mod:`nbhelpers.notebook.widgets`) and returns it. Every later cell calls
one ``show_*`` helper of this module, which displays the part of a result, or
the panel's output area for that part.

When the panel appears (:func:`wants_panel`): ``interactive`` is True, or no
target was given (no namespace, InferenceService or bundle) and the kernel
belongs to a Jupyter server session (``JPY_SESSION_NAME`` is set: JupyterLab
and Notebook set it, papermill does not). So opening the notebook in
JupyterLab and running all cells gives the panel without editing anything,
while headless runs (the CLI always passes a target and ``interactive=False``)
never create a widget and never wait for input.

Secrets never travel as parameters (papermill stores them in
the executed notebook): the parameters only name environment variables.

Two files let the CLI follow a headless run (both optional, named by env vars):
- ``KSERVE_RUNBOOK_PROGRESS_FILE``: one ``event<TAB>message`` line per progress event;
- ``KSERVE_RUNBOOK_ERROR_FILE``: the one-line message of a :class:`RunbookError`
  that stopped the run (the exception is re-raised so papermill fails too).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from nbhelpers.errors import RunbookError
from nbhelpers.notebook import display
from nbhelpers.render.findings_json import write_outputs
from nbhelpers.render.symptoms import reading_order_html, symptom_for
from nbhelpers.triage import TEXT_PARAMETERS, Progress, TriageParams, TriageResult, params_from_text, run
from nbhelpers.util.files import write_atomic
from nbhelpers.util.kernel_env import ERROR_FILE_ENV, PROGRESS_FILE_ENV, PROMETHEUS_URL_ENV
from nbhelpers.util.redaction import redact_url

if TYPE_CHECKING:
    from nbhelpers.notebook.widgets import TriagePanel

Triage: TypeAlias = "TriageResult | TriagePanel"
# Set by jupyter_server in the environment of kernels it starts for a notebook session; papermill does not set it.
SESSION_ENV = "JPY_SESSION_NAME"
# The triage runbook's parameters: the request as text (headers only by the name of a variable that holds
# them), and what the notebook itself needs. The parameters cell declares exactly these (a test checks).
TRIAGE_NOTEBOOK_PARAMETERS: tuple[str, ...] = (
    *("prometheus_headers_env" if name == "prometheus_headers" else name for name in TEXT_PARAMETERS),
    "out_dir",
    "symptom",
    "interactive",
)


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


def prometheus_url(parameter: str) -> str:
    """The Prometheus URL to read: the real one from :data:`PROMETHEUS_URL_ENV` when the parameter is its
    redacted form (the executed notebook and report.html keep only that), else the parameter itself."""
    real = os.environ.get(PROMETHEUS_URL_ENV, "")
    return real if real and redact_url(real) == parameter else parameter


def split_codes(ignore: str) -> tuple[str, ...]:
    return tuple(code.strip() for code in ignore.replace(" ", ",").split(",") if code.strip())


def wants_panel(interactive: bool, target_given: bool, environ: Mapping[str, str]) -> bool:
    """Show the widget panel: when asked, or in a Jupyter server session that was given no target."""
    return interactive or (not target_given and bool(environ.get(SESSION_ENV)))


def parameters_from(scope: Mapping[str, Any], names: Sequence[str] = TRIAGE_NOTEBOOK_PARAMETERS) -> dict[str, Any]:
    """The runbook's parameters, picked by name from the notebook's globals (its parameters cell sets them)."""
    return {name: scope[name] for name in names if name in scope}


def start_triage(**parameters: Any) -> Triage:
    """The runbook's first cell: run the triage once (headless), or open the panel (interactive).

    ``parameters`` are the notebook's (:data:`TRIAGE_NOTEBOOK_PARAMETERS`), as text: this is where they are
    parsed, once. Headless, the reading order for ``symptom`` is shown first, then the triage runs and
    findings.json and summary.md are written when ``out_dir`` is set. With the panel, the notebook's
    parameters are its starting choices; given a target, it runs once at once.
    """
    try:
        unknown = sorted(set(parameters) - set(TRIAGE_NOTEBOOK_PARAMETERS))
        if unknown:
            raise RunbookError(f"unknown runbook parameter(s): {', '.join(unknown)}")
        symptom = str(parameters.pop("symptom", ""))
        interactive = bool(parameters.pop("interactive", False))
        out_dir = str(parameters.pop("out_dir", ""))
        headers = headers_from_env(str(parameters.pop("prometheus_headers_env", "")))
        parameters["prometheus"] = prometheus_url(str(parameters.get("prometheus", "")))
        chosen = symptom_for(symptom)
        params = params_from_text(
            {**parameters, "ignore": split_codes(str(parameters.get("ignore", ""))), "prometheus_headers": headers}
        )
        if wants_panel(
            interactive, bool(params.namespace or params.isvc or params.llmisvc or params.bundle), os.environ
        ):
            return open_panel(params, symptom, out_dir)
        from IPython.display import HTML

        _show(HTML(reading_order_html(chosen)))  # type: ignore[no-untyped-call]
        return triage_headless(params, out_dir)
    except RunbookError as error:
        error_path = os.environ.get(ERROR_FILE_ENV)
        if error_path:
            write_atomic(Path(error_path), (_one_line(str(error)) + "\n").encode())
        raise


def triage_headless(params: TriageParams, out_dir: str = "") -> TriageResult:
    """``run()`` once, progress to ``KSERVE_RUNBOOK_PROGRESS_FILE`` when set, outputs into ``out_dir``."""
    progress_path = os.environ.get(PROGRESS_FILE_ENV)
    result = run(params, progress_to_file(progress_path) if progress_path else None)
    if out_dir:
        write_outputs(result, out_dir)
    return result


def open_panel(params: TriageParams, symptom: str, out_dir: str) -> TriagePanel:
    """Display the widget panel; run it once when the parameters name a target."""
    from nbhelpers.notebook.widgets import TriagePanel, has_target

    panel = TriagePanel(params, symptom_for(symptom), out_dir)
    _show(panel.widget)
    if has_target(params):
        panel.run_all()
    return panel


def _show(obj: Any) -> None:
    from IPython.display import display as ipython_display

    ipython_display(obj)  # type: ignore[no-untyped-call]


def show_coverage(triage: Triage) -> None:
    """Coverage and the incident timeline, or the panel's output area for them."""
    if isinstance(triage, TriageResult):
        display.show_coverage(triage)
    else:
        _show(triage.coverage_area)


def show_step(triage: Triage, step_id: str) -> None:
    """One step's question, status and findings, or the panel's output area for that step."""
    if isinstance(triage, TriageResult):
        display.show_step(triage, step_id)
    else:
        _show(triage.step_areas[step_id])


def show_root_causes(triage: Triage) -> None:
    """The ranked root causes and action items, or the panel's output area for them."""
    if isinstance(triage, TriageResult):
        display.show_root_causes(triage)
    else:
        _show(triage.root_causes_area)
