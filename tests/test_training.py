"""Training mode: questions built from the real triage of every shipped scenario, answers, reveal, notebook."""

from __future__ import annotations

import ast
import html
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import nbformat
import papermill
import pytest
from ipywidgets.widgets import widget as widget_module
from scenario_cache import shipped_specs

from nbhelpers import training
from nbhelpers.findings.catalog import CATALOG
from nbhelpers.notebook import training_panel
from nbhelpers.scenarios import ScenarioSpec, load_spec
from nbhelpers.training import (
    CHOICE_COUNT,
    NOTHING_WRONG,
    SYMPTOM_STEPS,
    build_question,
    check_answer,
    primary_causes,
    question_text,
    reveal_text,
    too_close,
)
from nbhelpers.triage import TriageResult

NOTEBOOK = Path(__file__).parents[1] / "runbooks" / "training.ipynb"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
SCENARIOS = [spec.name for spec in shipped_specs()]
HEALTHY = [spec.name for spec in shipped_specs() if not spec.expected_root_causes]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("scenario-bundles")


@pytest.fixture(scope="module")
def triaged(shipped_result: Callable[[str], TriageResult]) -> dict[str, tuple[ScenarioSpec, TriageResult]]:
    # What training.triage_scenario returns (the same run on the same bundle), shared with the other modules.
    return {name: (load_spec(name), shipped_result(name)) for name in SCENARIOS}


def _right(question: training.Question) -> training.Choice:
    return next(choice for choice in question.choices if choice.code in question.answers)


def _wrong(question: training.Question) -> training.Choice:
    return next(choice for choice in question.choices if choice.code not in question.answers)


def test_healthy_scenarios_exist() -> None:
    assert HEALTHY, "the library ships healthy scenarios; their quiz asks whether anything is wrong"


@pytest.mark.parametrize("name", SCENARIOS)
def test_question_gives_nothing_away(name: str, triaged: dict[str, tuple[ScenarioSpec, TriageResult]]) -> None:
    spec, result = triaged[name]
    question = build_question(spec, result, seed=3)
    shown = question_text(question) + html.unescape(training_panel.question_html(question))
    assert question.evidence and question.reported == spec.story.reported
    for finding in result.findings:
        assert finding.title not in shown, finding.code
    for code in CATALOG:
        assert code not in shown
    assert spec.title not in shown
    assert spec.story.cause not in shown and spec.story.first_seen not in shown


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_scenario_yields_a_fair_question(
    name: str, triaged: dict[str, tuple[ScenarioSpec, TriageResult]]
) -> None:
    spec, result = triaged[name]
    question = build_question(spec, result, seed=0)
    codes = [choice.code for choice in question.choices]
    assert [choice.number for choice in question.choices] == list(range(1, CHOICE_COUNT + 1))
    assert len(set(codes)) == CHOICE_COUNT
    assert question.answers <= set(codes)
    found = {finding.code for finding in result.findings}
    for code in set(codes) - question.answers:
        assert code not in found and code not in spec.expected_root_causes, code
        assert CATALOG[code].severity.value != "info"
        assert not any(too_close(code, answer) for answer in question.answers), code
    if spec.expected_root_causes:
        assert question.answers == set(primary_causes(spec.expected_root_causes))
        assert question.answers <= set(spec.expected_root_causes)
        assert NOTHING_WRONG not in codes
    right, wrong = _right(question), _wrong(question)
    assert check_answer(question, right.number).correct
    verdict = check_answer(question, wrong.number)
    assert not verdict.correct and f"{right.number}. {right.text}" in verdict.message


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_scenario_asks_whether_anything_is_wrong(
    name: str, triaged: dict[str, tuple[ScenarioSpec, TriageResult]]
) -> None:
    spec, result = triaged[name]
    question = build_question(spec, result, seed=1)
    assert question.healthy and question.answers == {NOTHING_WRONG}
    assert question.prompt.startswith("Is anything wrong")
    nothing = _right(question)
    assert nothing.text.startswith("nothing is wrong")
    assert check_answer(question, nothing.number).message == "Right: nothing is wrong here."
    wrong = check_answer(question, _wrong(question).number)
    assert not wrong.correct and "nothing in this incident points to it" in wrong.message
    reveal = reveal_text(question)
    assert "True cause: none; the service is healthy." in reveal
    assert "The triage ranked no root cause" in reveal
    assert question.reveal.ranked == ()


def test_reproducible_with_a_seed_and_varied_across_seeds(
    triaged: dict[str, tuple[ScenarioSpec, TriageResult]],
) -> None:
    spec, result = triaged["port-mismatch"]
    assert build_question(spec, result, seed=7) == build_question(spec, result, seed=7)
    orders = {tuple(choice.code for choice in build_question(spec, result, seed).choices) for seed in range(8)}
    assert len(orders) > 1
    assert training.pick_scenario(5) == training.pick_scenario(5) and training.pick_scenario(5) in SCENARIOS


def test_distractors_come_from_the_symptom_family(triaged: dict[str, tuple[ScenarioSpec, TriageResult]]) -> None:
    spec, result = triaged["port-mismatch"]
    for seed in range(5):
        question = build_question(spec, result, seed)
        steps = {CATALOG[choice.code].step for choice in question.choices if choice.code not in question.answers}
        assert steps <= set(SYMPTOM_STEPS["503"]), steps


def test_port_mismatch_evidence_summary_shows_what_on_call_sees(
    triaged: dict[str, tuple[ScenarioSpec, TriageResult]],
) -> None:
    spec, result = triaged["port-mismatch"]
    question = build_question(spec, result)
    evidence = "\n".join(question.evidence)
    assert "Coverage: " in evidence
    assert "InferenceService conditions: PredictorReady=False (MinimumReplicasUnavailable)" in evidence
    assert "(codes 503)" in evidence and "1 predictor pod(s), 0 ready" in evidence
    assert 'Event: Unhealthy on 1 Pod(s), 286 time(s): Readiness probe failed: Get "http://' in evidence
    assert question.prompt == "What is the root cause?"
    assert question.answers == {"PORT_MISMATCH"}


def test_restarts_and_warning_events_reach_the_summary(
    triaged: dict[str, tuple[ScenarioSpec, TriageResult]],
) -> None:
    evidence = "\n".join(training.evidence_summary(triaged["host-oom"][1]))
    assert "10 container restarts in the window across 1 pod(s)." in evidence
    assert "Event: BackOff on 1 Pod(s)" in evidence


def test_reveal_explains_the_story_and_ranks_the_triage(triaged: dict[str, tuple[ScenarioSpec, TriageResult]]) -> None:
    spec, result = triaged["port-mismatch"]
    question = build_question(spec, result)
    reveal = " ".join(reveal_text(question).split())
    for part in (spec.title, spec.story.first_seen, spec.story.cause, spec.story.fix, spec.story.lesson):
        assert " ".join(part.split()) in reveal
    titles = {finding.code: finding.title for finding in result.findings}
    for index, code in enumerate(result.root_causes, 1):
        assert f"{index}. {code}: {titles[code]}" in reveal
    assert [cause.code for cause in question.reveal.ranked] == list(result.root_causes)
    rendered = html.unescape(training_panel.reveal_html(question))
    assert spec.story.lesson in rendered and titles["PORT_MISMATCH"] in rendered


def test_primary_causes_skip_effects_and_keep_independent_causes() -> None:
    assert primary_causes(("PORT_MISMATCH", "ENDPOINTS_NONE_READY", "ISVC_NOT_READY")) == ("PORT_MISMATCH",)
    assert primary_causes(("QUEUE_SATURATION", "HPA_CPU_METRIC_ON_GPU")) == ("HPA_CPU_METRIC_ON_GPU",)
    assert primary_causes(("PORT_MISMATCH", "TIMEOUT_LB_DEFAULT")) == ("PORT_MISMATCH", "TIMEOUT_LB_DEFAULT")
    assert primary_causes(()) == ()


def test_too_close_only_within_one_step() -> None:
    assert too_close("VLLM_MEMORY_UTILIZATION_RISKY", "GPU_OOM")
    assert too_close("COLDSTART_EXCEEDS_TIMEOUT", "COLDSTART_SCALE_TO_ZERO")
    assert not too_close("QUEUE_SATURATION", "TIMEOUT_LB_DEFAULT")  # another step: queueing is a fair distractor
    assert not too_close("ROUTING_LAYER_MISMATCH", "PORT_MISMATCH")


def test_two_simultaneous_causes_accept_either(triaged: dict[str, tuple[ScenarioSpec, TriageResult]]) -> None:
    spec, result = triaged["port-mismatch"]
    combined = replace(spec, expected_root_causes=("PORT_MISMATCH", "TIMEOUT_LB_DEFAULT", "ENDPOINTS_NONE_READY"))
    question = build_question(combined, result, seed=2)
    assert question.answers == {"PORT_MISMATCH", "TIMEOUT_LB_DEFAULT"}
    assert "2 things went wrong at once" in question.prompt
    for choice in question.choices:
        assert check_answer(question, choice.number).correct == (choice.code in question.answers)
    assert {choice.code for choice in question.reveal.true_causes} == question.answers


def test_an_answer_that_is_not_a_choice_is_refused(triaged: dict[str, tuple[ScenarioSpec, TriageResult]]) -> None:
    question = build_question(*triaged["port-mismatch"])
    with pytest.raises(ValueError, match="pick 1 to 5"):
        check_answer(question, CHOICE_COUNT + 1)


# ------------------------------------------------------------------------------------ widgets and notebook


def _built_from(triaged: dict[str, tuple[ScenarioSpec, TriageResult]]) -> training_panel.QuestionBuilder:
    return lambda name, seed: build_question(*triaged[name], seed)


def test_panel_checks_the_answer_and_follows_the_picker(triaged: dict[str, tuple[ScenarioSpec, TriageResult]]) -> None:
    panel = training_panel.TrainingPanel("port-mismatch", seed=0, build=_built_from(triaged))
    question = panel.question
    assert [number for _, number in panel.choices.options] == [choice.number for choice in question.choices]
    assert panel.choices.value is None and panel.picker.value == "port-mismatch"
    assert [name for _, name in panel.picker.options] == SCENARIOS

    panel.check.click()
    assert "Pick an answer first." in panel.output.outputs[0]["data"]["text/html"]

    panel.choices.value = _wrong(question).number
    panel.check.click()
    shown = html.unescape(panel.output.outputs[0]["data"]["text/html"])
    assert len(panel.output.outputs) == 1
    assert "Not this one" in shown and question.reveal.lesson in shown

    panel.choices.value = _right(question).number
    panel.check.click()
    assert "Right: " in panel.output.outputs[0]["data"]["text/html"]

    healthy = HEALTHY[0]
    panel.picker.value = healthy
    assert panel.question.scenario == healthy and panel.question.healthy
    assert panel.output.outputs == () and panel.choices.value is None
    assert NOTHING_WRONG in {choice.code for choice in panel.question.choices}


def test_static_quiz_creates_no_widget(
    cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache.parent / "static-cache"))
    before = set(widget_module._instances)
    quiz = training_panel.start_quiz("port-mismatch", seed=0, interactive=False)
    training_panel.show_answer(quiz)
    assert quiz.panel is None and quiz.question.scenario == "port-mismatch"
    assert set(widget_module._instances) == before
    assert "HTML object" in capsys.readouterr().out


@pytest.fixture(scope="module")
def committed() -> Any:
    return nbformat.read(NOTEBOOK, as_version=4)


def test_notebook_parameters_are_documented() -> None:
    inspected = papermill.inspect_notebook(str(NOTEBOOK))
    assert {name: entry["inferred_type_name"] for name, entry in inspected.items()} == {
        "scenario": "str",
        "seed": "int",
        "interactive": "bool",
    }
    assert all(len(entry["help"]) > 15 for entry in inspected.values())
    assert inspected["interactive"]["default"] == "False"
    assert load_spec(ast.literal_eval(inspected["scenario"]["default"])).name


def test_notebook_committed_without_outputs_and_without_logic(committed: Any) -> None:
    nbformat.validate(committed)
    code = [cell for cell in committed.cells if cell.cell_type == "code"]
    for cell in code:
        assert cell.outputs == [] and cell.execution_count is None
    assert "widgets" not in committed.metadata
    assert code[0].metadata.get("tags") == ["parameters"]
    calls = [
        ast.unparse(node.func)
        for cell in code[1:]
        for node in ast.walk(ast.parse(cell.source))
        if isinstance(node, ast.Call)
    ]
    assert calls == ["start_quiz", "show_answer"]
    assert code[1].source.splitlines()[-1] == "quiz = start_quiz(scenario=scenario, seed=seed, interactive=interactive)"


@pytest.mark.notebook
def test_headless_run_renders_question_and_reveal_without_widgets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    executed = tmp_path / "training.ipynb"
    papermill.execute_notebook(
        str(NOTEBOOK),
        str(executed),
        parameters={"scenario": "host-oom", "seed": 4, "interactive": False},
        kernel_name="python3",
        progress_bar=False,
    )
    notebook = nbformat.read(executed, as_version=4)
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not any(output.output_type == "error" for output in outputs)
    assert not any(WIDGET_MIME in output.get("data", {}) for output in outputs)
    assert "widgets" not in notebook.metadata
    rendered = html.unescape("".join(output.get("data", {}).get("text/html", "") for output in outputs))
    spec = load_spec("host-oom")
    question = training.question_for("host-oom", 4, tmp_path / "cache" / "kserve-runbook" / "scenarios")
    assert spec.story.reported in rendered and question.prompt in rendered
    assert all(choice.text in rendered for choice in question.choices)
    assert f"Answer: {spec.title}" in rendered
    assert spec.story.fix in rendered and spec.story.lesson in rendered
    assert "RESOURCES_HOST_OOMKILLED" in rendered
