"""What runbooks/training.ipynb shows: the quiz of :mod:`nbhelpers.training` as HTML or as widgets.

Headless (papermill, ``interactive=False``) the question, the choices and the
reveal are rendered as static HTML and no widget is created, so the executed
notebook carries no widget state. In JupyterLab (``interactive=True``) a
scenario picker, the question, radio buttons of the choices and a "Check"
button that reveals the explanation into an output area.

Every value from the scenario or the cluster goes through :func:`html.escape`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from typing import Any

from nbhelpers.scenarios import list_scenarios
from nbhelpers.training import NOTHING_WRONG, Question, Verdict, check_answer, question_for

_BOX = "font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:14px;line-height:1.45;color:#111827;"
_RIGHT = ("#166534", "#dcfce7")
_WRONG = ("#b91c1c", "#fee2e2")
QuestionBuilder = Callable[[str, int], Question]


def _html(markup: str) -> Any:
    from IPython.display import HTML

    return HTML(f'<div style="{_BOX}">{markup}</div>')  # type: ignore[no-untyped-call]


def _display(markup: str) -> None:
    from IPython.display import display

    display(_html(markup))  # type: ignore[no-untyped-call]


def _items(lines: list[str]) -> str:
    return "".join(f"<li>{escape(line)}</li>" for line in lines)


def question_html(question: Question) -> str:
    """Symptom as reported, what the on-call sees first, and the prompt (not the choices)."""
    return (
        f"<h3 style='margin:4px 0;'>Scenario {escape(question.scenario)}</h3>"
        f"<p><strong>Reported symptom:</strong> {escape(question.symptom)} "
        f"&middot; <strong>difficulty:</strong> {escape(question.difficulty)}</p>"
        f"<blockquote style='margin:6px 0;padding:4px 10px;border-left:4px solid #9ca3af;'>"
        f"{escape(question.reported)}</blockquote>"
        f"<p><strong>What you see first</strong></p><ul style='margin:4px 0 4px 18px;padding:0;'>"
        f"{_items(list(question.evidence))}</ul>"
        f"<p><strong>{escape(question.prompt)}</strong></p>"
    )


def choices_html(question: Question) -> str:
    items = "".join(f"<li value='{choice.number}'>{escape(choice.text)}</li>" for choice in question.choices)
    return f"<ol style='margin:4px 0 4px 18px;padding:0;'>{items}</ol>"


def verdict_html(verdict: Verdict) -> str:
    foreground, background = _RIGHT if verdict.correct else _WRONG
    return (
        f"<div style='border-left:4px solid {foreground};background:{background};padding:6px 10px;margin:6px 0;'>"
        f"{escape(verdict.message)}</div>"
    )


def reveal_html(question: Question) -> str:
    """The story's truth (cause, fix, lesson) and the triage's own ranked root causes with their titles."""
    reveal = question.reveal
    causes = [f"{choice.code}: {choice.text}" for choice in reveal.true_causes if choice.code != NOTHING_WRONG]
    ranked = "".join(f"<li><code>{escape(cause.code)}</code>: {escape(cause.title)}</li>" for cause in reveal.ranked)
    sections = "".join(
        f"<p><strong>{heading}</strong><br>{escape(text)}</p>"
        for heading, text in (
            ("What to notice first", reveal.first_seen),
            ("What happened", reveal.cause),
            ("The fix", reveal.fix),
            ("The lesson", reveal.lesson),
        )
    )
    triage = (
        f"<p><strong>The triage's ranked root causes</strong></p><ol style='margin:4px 0 4px 18px;padding:0;'>"
        f"{ranked}</ol>"
        if ranked
        else "<p><strong>The triage ranked no root cause</strong> (no warning or critical finding).</p>"
    )
    return (
        f"<h3 style='margin:4px 0;'>Answer: {escape(reveal.title)}</h3>"
        f"<p><strong>True cause:</strong> {escape('; '.join(causes) or 'none, the service is healthy')}</p>"
        f"{sections}{triage}"
    )


class TrainingPanel:
    """The interactive quiz: pick a scenario, read the question, choose, press Check."""

    def __init__(self, scenario: str, seed: int = 0, build: QuestionBuilder = question_for) -> None:
        import ipywidgets as widgets  # type: ignore[import-untyped]

        self.seed, self._build = seed, build
        self.question = build(scenario, seed)  # first, so an unknown name fails with the scenario error
        self.picker = widgets.Dropdown(
            options=[(f"{spec.name} ({spec.symptom}, {spec.difficulty})", spec.name) for spec in list_scenarios()],
            value=scenario,
            description="Scenario",
            layout=widgets.Layout(width="32em"),
        )
        self.question_area = widgets.HTML()
        self.choices = widgets.RadioButtons(options=[], layout=widgets.Layout(width="100%"))
        self.check = widgets.Button(description="Check", button_style="primary")
        self.output = widgets.Output()
        self.picker.observe(self._on_pick, names="value")
        self.check.on_click(self._on_check)
        self.widget = widgets.VBox([self.picker, self.question_area, self.choices, self.check, self.output])
        self._show(self.question)

    def _show(self, question: Question) -> None:
        self.question = question
        self.question_area.value = f'<div style="{_BOX}">{question_html(question)}</div>'
        self.choices.options = [(choice.text, choice.number) for choice in question.choices]
        self.choices.value = None
        self.output.outputs = ()

    def _on_pick(self, change: dict[str, Any]) -> None:
        self._show(self._build(str(change["new"]), self.seed))

    def _on_check(self, _button: Any) -> None:
        self.output.outputs = ()
        if self.choices.value is None:
            self.output.append_display_data(_html("Pick an answer first."))
            return
        verdict = check_answer(self.question, int(self.choices.value))
        self.output.append_display_data(_html(verdict_html(verdict) + reveal_html(self.question)))


@dataclass(frozen=True)
class Quiz:
    """What :func:`start_quiz` set up: the static question, or the panel whose question follows the picker."""

    question: Question
    panel: TrainingPanel | None


def start_quiz(scenario: str, seed: int = 0, interactive: bool = False) -> Quiz:
    """Show the question: as a widget panel when ``interactive``, else as static HTML with the choices."""
    if interactive:
        from IPython.display import display

        panel = TrainingPanel(scenario, seed)
        display(panel.widget)  # type: ignore[no-untyped-call]
        return Quiz(panel.question, panel)
    question = question_for(scenario, seed)
    _display(question_html(question) + choices_html(question))
    return Quiz(question, None)


def show_answer(quiz: Quiz) -> None:
    """The reveal for a static quiz; the panel reveals on its Check button instead."""
    if quiz.panel is not None:
        _display("Choose an answer above and press <strong>Check</strong> to see the explanation.")
        return
    _display(reveal_html(quiz.question))
