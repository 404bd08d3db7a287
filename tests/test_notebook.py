"""runbooks/triage.ipynb: documented parameters, no logic, no outputs committed, headless runs (docs/contracts.md#execution-model).

Papermill runs never wait for input: with ``interactive`` False or True, with a target or without one, the
notebook completes under a pytest timeout (the panel's buttons only act when clicked in a browser).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import nbformat
import papermill
import pytest
from builders import bundle_files, comparable

from nbhelpers.checks import STEPS
from nbhelpers.errors import RunbookError
from nbhelpers.notebook import (
    SESSION_ENV,
    TRIAGE_NOTEBOOK_PARAMETERS,
    display,
    headers_from_env,
    split_codes,
    start_triage,
)
from nbhelpers.notebook.widgets import TriagePanel
from nbhelpers.sources.bundle import write_bundle_files
from nbhelpers.triage import TriageParams, TriageResult, run
from nbhelpers.util.kernel_env import ERROR_FILE_ENV, PROGRESS_FILE_ENV

RUNBOOK = Path(__file__).parents[1] / "runbooks" / "triage.ipynb"
PARAMETERS = {
    "namespace": "str",
    "isvc": "str",
    "llmisvc": "str",
    "bundle": "str",
    "kubeconfig": "str",
    "context": "str",
    "prometheus": "str",
    "prometheus_token_env": "str",
    "prometheus_ca_file": "str",
    "prometheus_headers_env": "str",
    "prometheus_insecure": "bool",
    "since": "str",
    "start": "str",
    "end": "str",
    "incident_start": "str",
    "incident_end": "str",
    "ignore": "str",
    "deadline": "str",
    "request_timeout": "str",
    "client_timeout": "str",
    "kserve_namespace": "str",
    "knative_namespace": "str",
    "out_dir": "str",
    "symptom": "str",
    "interactive": "bool",
}
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
ISVC = {
    "apiVersion": "serving.kserve.io/v1beta1",
    "kind": "InferenceService",
    "metadata": {"name": "vllm-llm", "namespace": "llm"},
    "spec": {"predictor": {"model": {"modelFormat": {"name": "huggingface"}}}},
}


@pytest.fixture(scope="module")
def committed() -> Any:
    return nbformat.read(RUNBOOK, as_version=4)


def _code_cells(notebook: Any) -> list[Any]:
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def test_parameters_are_documented_for_papermill() -> None:
    inspected = papermill.inspect_notebook(str(RUNBOOK))
    assert {name: entry["inferred_type_name"] for name, entry in inspected.items()} == PARAMETERS
    assert tuple(inspected) == TRIAGE_NOTEBOOK_PARAMETERS  # what start_triage accepts, in the same order
    for name, entry in inspected.items():
        assert len(entry["help"]) > 15, name
    assert inspected["interactive"]["default"] == "False"
    assert inspected["request_timeout"]["default"] == '"30s"'


def test_committed_without_outputs_on_python3(committed: Any) -> None:
    nbformat.validate(committed)
    assert committed.nbformat == 4
    assert committed.metadata.kernelspec.name == "python3"
    for cell in _code_cells(committed):
        assert cell.outputs == [] and cell.execution_count is None
    assert "widgets" not in committed.metadata


def test_cells_hold_no_logic(committed: Any) -> None:
    code = _code_cells(committed)
    assert code[0].metadata.get("tags") == ["parameters"]
    run_cell = ast.parse(code[1].source)
    calls = [node for node in ast.walk(run_cell) if isinstance(node, ast.Call)]
    assert [ast.unparse(call.func) for call in calls] == ["start_triage", "parameters_from", "globals"]
    assert ast.unparse(run_cell.body[-1]) == "triage = start_triage(**parameters_from(globals()))"
    assert code[2].source == "show_coverage(triage)"
    assert [cell.source for cell in code[3:-1]] == [f'show_step(triage, "{step.id}")' for step in STEPS]
    assert code[-1].source == "show_root_causes(triage)"
    assert sum("start_triage(" in cell.source for cell in code) == 1


def test_every_step_has_its_guidance(committed: Any) -> None:
    cells = committed.cells
    for number, step in enumerate(STEPS, 1):
        index = next(i for i, cell in enumerate(cells) if cell.source == f'show_step(triage, "{step.id}")')
        guidance = cells[index - 1]
        assert guidance.cell_type == "markdown"
        assert guidance.source.startswith(f"## Step {number}: {step.title}\n\n")
        assert len(guidance.source) > 150


@pytest.mark.notebook
@pytest.mark.timeout(120)
def test_headless_run_writes_outputs_reports_progress_and_creates_no_widgets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = write_bundle_files(bundle_files([ISVC], "llm", "vllm-llm"), tmp_path / "bundle")
    progress = tmp_path / "progress.tsv"
    monkeypatch.setenv(PROGRESS_FILE_ENV, str(progress))
    out = tmp_path / "out"
    executed = tmp_path / "executed.ipynb"
    papermill.execute_notebook(
        str(RUNBOOK),
        str(executed),
        parameters={
            "bundle": str(bundle),
            "out_dir": str(out),
            "ignore": "PORT_MISMATCH",
            "symptom": "503",
            "interactive": False,
        },
        kernel_name="python3",
        progress_bar=False,
    )
    notebook = nbformat.read(executed, as_version=4)
    outputs = [output for cell in _code_cells(notebook) for output in cell.outputs]
    assert not any(WIDGET_MIME in output.get("data", {}) for output in outputs)
    assert "widgets" not in notebook.metadata
    assert not any(output.output_type == "error" for output in outputs)
    run_cell = next(cell for cell in notebook.cells if cell.get("id") == "run")
    reading_map = run_cell.outputs[0]["data"]["text/html"]
    assert "read these steps first" in reading_map and "href='#Step-1:-Endpoints-and-routing'" in reading_map

    written = json.loads((out / "findings.json").read_text())
    expected = run(TriageParams(bundle=str(bundle), ignore=("PORT_MISMATCH",))).to_json()
    assert comparable(written) == comparable(expected)
    assert (out / "summary.md").read_text().startswith("# Incident draft: llm/vllm-llm\n")

    lines = [line.split("\t") for line in progress.read_text().splitlines()]
    assert all(len(line) == 2 for line in lines)
    assert [message for event, message in lines if event == "step-start"] == [step.id for step in STEPS]
    assert sum(1 for event, _ in lines if event == "step-end") == len(STEPS)
    assert ["gather", "reading the InferenceService"] in lines


def test_runbook_error_reaches_the_error_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    error_file = tmp_path / "error.txt"
    monkeypatch.setenv(ERROR_FILE_ENV, str(error_file))
    monkeypatch.delenv(PROGRESS_FILE_ENV, raising=False)
    bundle = write_bundle_files(bundle_files([ISVC], "llm", "vllm-llm"), tmp_path / "bundle")
    with pytest.raises(RunbookError) as raised:
        start_triage(bundle=str(bundle), isvc="missing-model")
    message = error_file.read_text()
    assert message == str(raised.value) + "\n"
    assert message.count("\n") == 1 and "'missing-model' not found" in message and "vllm-llm" in message


def test_headless_renders_static_charts_and_the_panel_runs_a_given_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(PROGRESS_FILE_ENV, raising=False)
    monkeypatch.delenv(SESSION_ENV, raising=False)
    bundle = write_bundle_files(bundle_files([ISVC], "llm", "vllm-llm"), tmp_path / "bundle")
    headless = start_triage(bundle=str(bundle), symptom="503")
    assert isinstance(headless, TriageResult)

    panel = start_triage(bundle=str(bundle), interactive=True, out_dir=str(tmp_path / "out"))
    assert isinstance(panel, TriagePanel) and panel.result is not None  # a target given: it ran once
    assert comparable(panel.result.to_json()) == comparable(headless.to_json())
    assert json.loads((tmp_path / "out" / "findings.json").read_text())["root_causes"] == list(headless.root_causes)


def test_display_shows_static_svg_charts_unless_asked_for_interactive_ones() -> None:
    from nbhelpers.notebook.widgets import captured
    from nbhelpers.scenarios import scenario_bundle
    from nbhelpers.triage import run

    result = run(TriageParams(bundle=str(scenario_bundle("host-oom"))))
    static = captured(lambda: display.show_step(result, "resources"))  # headless runs and the report
    assert any("image/svg+xml" in output["data"] for output in static)
    assert not any("vegaEmbed" in str(output["data"]) for output in static)
    live = captured(lambda: display.show_step(result, "resources", static=False))
    assert not any("image/svg+xml" in output["data"] for output in live)


def test_unknown_symptom_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PROGRESS_FILE_ENV, raising=False)
    with pytest.raises(RunbookError, match="unknown symptom '502'"):
        start_triage(bundle=str(tmp_path), symptom="502")


@pytest.mark.notebook
@pytest.mark.timeout(120)
@pytest.mark.parametrize("with_target", [False, True], ids=["no-target", "bundle"])
def test_papermill_with_interactive_true_completes_without_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_target: bool
) -> None:
    """The panel is created, runs once when given a target, and the notebook finishes: nothing waits for a click."""
    monkeypatch.delenv(PROGRESS_FILE_ENV, raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)  # the panel must not list a real cluster's services
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    parameters: dict[str, Any] = {"interactive": True, "symptom": "503"}
    if with_target:
        parameters["bundle"] = str(write_bundle_files(bundle_files([ISVC], "llm", "vllm-llm"), tmp_path / "bundle"))
    executed = tmp_path / "executed.ipynb"
    papermill.execute_notebook(
        str(RUNBOOK), str(executed), parameters=parameters, kernel_name="python3", progress_bar=False
    )
    notebook = nbformat.read(executed, as_version=4)
    outputs = [output for cell in _code_cells(notebook) for output in cell.outputs]
    assert not any(output.output_type == "error" for output in outputs)
    widgets = [output for output in outputs if WIDGET_MIME in output.get("data", {})]
    assert len(widgets) == 1 + 1 + len(STEPS) + 1  # the panel, coverage, each step, root causes


@pytest.mark.notebook
@pytest.mark.timeout(120)
def test_papermill_without_a_target_fails_at_once_instead_of_showing_a_panel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SESSION_ENV, raising=False)  # papermill's kernel is no Jupyter server session
    with pytest.raises(papermill.PapermillExecutionError, match="--namespace and --isvc are required"):
        papermill.execute_notebook(
            str(RUNBOOK), str(tmp_path / "executed.ipynb"), parameters={}, kernel_name="python3", progress_bar=False
        )


def test_secrets_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROM_HEADERS", json.dumps({"X-Scope-OrgID": "tenant-a", "Authorization": "Basic abc"}))
    assert headers_from_env("PROM_HEADERS") == ("X-Scope-OrgID: tenant-a", "Authorization: Basic abc")
    assert headers_from_env("") == ()
    monkeypatch.setenv("PROM_HEADERS", '["not", "an", "object"]')
    with pytest.raises(RunbookError, match="JSON object"):
        headers_from_env("PROM_HEADERS")
    monkeypatch.delenv("PROM_HEADERS")
    with pytest.raises(RunbookError, match="PROM_HEADERS: that variable is not set"):
        headers_from_env("PROM_HEADERS")


def test_ignore_codes_split() -> None:
    assert split_codes(" PORT_MISMATCH, GPU_OOM ,,HPA_MISSING ") == ("PORT_MISMATCH", "GPU_OOM", "HPA_MISSING")
    assert split_codes("") == ()


def test_a_prometheus_url_with_credentials_reaches_the_kernel_but_not_the_notebook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nbhelpers.cli.headless import notebook_parameters
    from nbhelpers.notebook import prometheus_url
    from nbhelpers.triage import params_from_text
    from nbhelpers.util.kernel_env import PROMETHEUS_URL_ENV

    real = "https://reader:s3cret-pass@prom.example:9090/?token=tok-123456789&timeout=30s"
    parameters = notebook_parameters(params_from_text({"prometheus": real, "bundle": "b"}), tmp_path)
    shown = parameters["prometheus"]
    assert "s3cret-pass" not in shown and "tok-123456789" not in shown and "prom.example:9090" in shown
    monkeypatch.setenv(PROMETHEUS_URL_ENV, real)
    assert prometheus_url(shown) == real  # the kernel reads the real URL from its environment
    assert prometheus_url("https://other.example") == "https://other.example"  # only for the URL it stands for
