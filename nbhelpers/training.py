"""Training mode: turn a shipped scenario into a multiple-choice question, check the answer, explain it.

The question shows what an on-call engineer meets first: the symptom as it was
reported and a summary of the evidence taken from the real triage of the
scenario's bundle (coverage, the InferenceService's readiness, 5xx, latency,
queue, restarts, ready pods, notable events). It never shows a finding's code
or title: those are the answer.

The candidate causes are the scenario's true root cause(s) plus distractors
drawn from the finding codes of the same symptom family (a 503 quiz offers
other 503 causes). A distractor is never a code the triage found or the
scenario expects, so every wrong choice is wrong for this incident. The order
comes from a random generator seeded with the scenario name and ``seed``, so a
question is reproducible.

:func:`build_question` is pure (spec + triage result + seed); :func:`question_for`
adds the I/O: the scenario's bundle and the triage run.
"""

from __future__ import annotations

import random
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from nbhelpers.checks import STEP_IDS
from nbhelpers.evidence.model import Evidence
from nbhelpers.findings.catalog import CATALOG, Severity, reachable
from nbhelpers.render.summary import coverage_line, impact_lines, window_text
from nbhelpers.render.symptoms import SYMPTOMS
from nbhelpers.scenarios import ScenarioSpec, list_scenarios, load_spec, scenario_bundle
from nbhelpers.sources import kube
from nbhelpers.triage import TriageParams, TriageResult, run

NOTHING_WRONG = "NOTHING_WRONG"
NOTHING_WRONG_TEXT = "nothing is wrong: the service is healthy"
CHOICE_COUNT = 5
# The steps whose findings can produce each reported symptom: distractors come from there first.
SYMPTOM_STEPS: dict[str, tuple[str, ...]] = {symptom.scenario_symptom: symptom.steps for symptom in SYMPTOMS}
# Normal events that matter in an incident; every Warning event counts as notable.
NOTABLE_NORMAL_REASONS = frozenset({"Killing", "NotTriggerScaleUp", "TriggeredScaleUp", "ScaleDown"})
MAX_EVENT_LINES = 5
MAX_MESSAGE_CHARS = 200
WRAP_WIDTH = 100


@dataclass(frozen=True)
class Choice:
    number: int  # 1-based, as shown to the trainee
    code: str  # a finding code, or NOTHING_WRONG
    text: str


@dataclass(frozen=True)
class RankedCause:
    code: str
    title: str


@dataclass(frozen=True)
class Reveal:
    """The explanation shown after an answer: the story's truth and what the tool itself concluded."""

    title: str
    true_causes: tuple[Choice, ...]
    first_seen: str
    cause: str
    fix: str
    lesson: str
    ranked: tuple[RankedCause, ...]


@dataclass(frozen=True)
class Question:
    scenario: str
    symptom: str
    difficulty: str
    reported: str
    evidence: tuple[str, ...]
    prompt: str
    choices: tuple[Choice, ...]
    answers: frozenset[str]  # the codes that count as right
    reveal: Reveal

    @property
    def healthy(self) -> bool:
        return self.answers == frozenset({NOTHING_WRONG})

    def choice(self, number: int) -> Choice:
        """The choice shown as ``number``; ``ValueError`` when there is none."""
        for choice in self.choices:
            if choice.number == number:
                return choice
        raise ValueError(f"answer {number} is not a choice: pick 1 to {len(self.choices)}")


@dataclass(frozen=True)
class Verdict:
    correct: bool
    chosen: Choice
    message: str


# ------------------------------------------------------------------------------------------ the question


def primary_causes(expected: Sequence[str]) -> tuple[str, ...]:
    """The expected codes no other expected code explains: the causes a trainee should name."""
    return tuple(code for code in expected if not any(code in reachable(other) for other in expected if other != code))


def too_close(code: str, answer: str) -> bool:
    """A cause or effect of the answer within the same step: the summary cannot tell the two apart.

    For example "gpu-memory-utilization leaves no headroom" next to "CUDA out of memory": the first is
    how the second usually happens, so offering it as a wrong choice would punish a right reading.
    """
    linked = code in reachable(answer) or answer in reachable(code)
    return linked and CATALOG[code].step == CATALOG[answer].step


def _distractor_pool(symptom: str, excluded: set[str], answers: Sequence[str]) -> tuple[list[str], list[str]]:
    """(same-family codes, every other code) that may serve as wrong choices, each sorted for reproducibility."""
    usable = sorted(
        code
        for code, info in CATALOG.items()
        if info.severity is not Severity.INFO
        and code not in excluded
        and not any(too_close(code, answer) for answer in answers)
    )
    family_steps = SYMPTOM_STEPS.get(symptom, STEP_IDS)
    family = [code for code in usable if CATALOG[code].step in family_steps]
    others = [code for code in usable if code not in family]
    return family, others


def _pick_distractors(
    symptom: str, excluded: set[str], answers: Sequence[str], wanted: int, rng: random.Random
) -> list[str]:
    family, others = _distractor_pool(symptom, excluded, answers)
    picked = rng.sample(family, min(wanted, len(family)))
    if len(picked) < wanted:
        picked += rng.sample(others, min(wanted - len(picked), len(others)))
    return picked


def build_question(spec: ScenarioSpec, result: TriageResult, seed: int = 0) -> Question:
    """The quiz question for one scenario, from the triage of its bundle; the same inputs give the same question."""
    rng = random.Random(f"{spec.name}:{seed}")
    # A cycle in the cause graph would leave no primary cause: fall back to the first expected code.
    causes = primary_causes(spec.expected_root_causes) or spec.expected_root_causes[:1]
    found = {finding.code for finding in result.findings}
    excluded = found | set(spec.expected_root_causes)
    right = list(causes) if causes else [NOTHING_WRONG]
    codes = right + _pick_distractors(spec.symptom, excluded, causes, CHOICE_COUNT - len(right), rng)
    rng.shuffle(codes)
    choices = tuple(
        Choice(number, code, NOTHING_WRONG_TEXT if code == NOTHING_WRONG else CATALOG[code].title)
        for number, code in enumerate(codes, 1)
    )
    answers = frozenset(right)
    return Question(
        scenario=spec.name,
        symptom=spec.symptom,
        difficulty=spec.difficulty,
        reported=spec.story.reported,
        evidence=tuple(evidence_summary(result)),
        prompt=_prompt(causes),
        choices=choices,
        answers=answers,
        reveal=Reveal(
            title=spec.title,
            true_causes=tuple(choice for choice in choices if choice.code in answers),
            first_seen=spec.story.first_seen,
            cause=spec.story.cause,
            fix=spec.story.fix,
            lesson=spec.story.lesson,
            ranked=tuple(_ranked(result)),
        ),
    )


def _prompt(causes: Sequence[str]) -> str:
    if not causes:
        return "Is anything wrong with this service? Pick the problem you see, or that nothing is wrong."
    if len(causes) > 1:
        return f"What caused this? {len(causes)} things went wrong at once: pick one of them."
    return "What is the root cause?"


def _ranked(result: TriageResult) -> list[RankedCause]:
    titles: dict[str, str] = {}
    for finding in result.findings:
        titles.setdefault(finding.code, finding.title)
    return [RankedCause(code, titles.get(code, CATALOG[code].title)) for code in result.root_causes]


# ------------------------------------------------------------------------------------ the evidence summary


def evidence_summary(result: TriageResult) -> list[str]:
    """What the on-call sees first, as sentences: coverage, readiness, impact, notable events. No findings."""
    evidence = result.evidence
    # An LLMInferenceService has no deployment mode: its kind says what it is.
    mode = "" if evidence.target.is_llmisvc else f" ({evidence.deployment_mode})"
    lines = [
        f"{evidence.target.kind} {evidence.target.namespace}/{evidence.target.isvc}{mode}; "
        f"window {window_text(evidence.window)}.",
        coverage_line(result),
        _readiness_line(evidence),
    ]
    lines += impact_lines(evidence)
    events = notable_events(evidence)
    lines += [f"Event: {line}" for line in events] if events else ["No warning events in the window."]
    return lines


def _readiness_line(evidence: Evidence) -> str:
    conditions = [entry for entry in kube.conditions(evidence.isvc) if entry.get("type") in ("Ready", "PredictorReady")]
    if not conditions:
        return f"The {evidence.target.kind} reports no Ready condition yet."
    shown = ", ".join(
        f"{entry.get('type')}={entry.get('status')}" + (f" ({entry['reason']})" if entry.get("reason") else "")
        for entry in conditions
    )
    return f"{evidence.target.kind} conditions: {shown}."


def _event_count(event: kube.KubeObject) -> int:
    series = event.get("series") or {}
    return int(series.get("count") or event.get("count") or 1)


def notable_events(evidence: Evidence) -> list[str]:
    """Warning (and a few telling Normal) events grouped by object kind and reason, most frequent first."""
    groups: dict[tuple[str, str], list[kube.KubeObject]] = {}
    for event in evidence.events:
        reason = str(event.get("reason") or "")
        if event.get("type") != "Warning" and reason not in NOTABLE_NORMAL_REASONS:
            continue
        involved = event.get("involvedObject") or event.get("regarding") or {}
        groups.setdefault((str(involved.get("kind") or "Pod"), reason), []).append(event)
    lines = []
    for (kind, reason), events in groups.items():
        total = sum(_event_count(event) for event in events)
        objects = {str((event.get("involvedObject") or event.get("regarding") or {}).get("name")) for event in events}
        loudest = max(events, key=_event_count)
        message = " ".join(str(loudest.get("note") or loudest.get("message") or "").split())
        if len(message) > MAX_MESSAGE_CHARS:
            message = message[: MAX_MESSAGE_CHARS - 3] + "..."
        lines.append((total, f"{reason} on {len(objects)} {kind}(s), {total} time(s): {message}"))
    lines.sort(key=lambda item: -item[0])
    return [line for _, line in lines[:MAX_EVENT_LINES]]


# ------------------------------------------------------------------------------------------- the answer


def check_answer(question: Question, number: int) -> Verdict:
    """Judge the choice shown as ``number``; ``ValueError`` when no choice has that number."""
    chosen = question.choice(number)
    right = " or ".join(f"{choice.number}. {choice.text}" for choice in question.reveal.true_causes)
    if chosen.code in question.answers:
        if question.healthy:
            return Verdict(True, chosen, "Right: nothing is wrong here.")
        return Verdict(True, chosen, f"Right: {chosen.text} ({chosen.code}).")
    if chosen.code == NOTHING_WRONG:
        reason = "the service is failing"
    else:
        reason = f"nothing in this incident points to it ({chosen.code})"
    return Verdict(False, chosen, f"Not this one: {reason}. The answer was {right}.")


# ----------------------------------------------------------------------------------------- with I/O


def triage_scenario(name: str, cache_dir: Path | None = None) -> TriageResult:
    """The real triage of a shipped scenario's bundle (generated on first use)."""
    return run(TriageParams(bundle=str(scenario_bundle(name, cache_dir))))


def question_for(name: str, seed: int = 0, cache_dir: Path | None = None) -> Question:
    return build_question(load_spec(name), triage_scenario(name, cache_dir), seed)


def pick_scenario(seed: int) -> str:
    """A scenario chosen by ``seed`` among the shipped ones (for a quiz started without a name)."""
    names = [spec.name for spec in list_scenarios()]
    return random.Random(seed).choice(names)


# ------------------------------------------------------------------------------------------ as text


def _wrapped(text: str, indent: str = "") -> str:
    return textwrap.fill(" ".join(text.split()), WRAP_WIDTH, initial_indent=indent, subsequent_indent=indent)


def _bullets(lines: Iterable[str]) -> list[str]:
    return [
        textwrap.fill(line, WRAP_WIDTH, initial_indent="  - ", subsequent_indent="    ", break_on_hyphens=False)
        for line in lines
    ]


def question_text(question: Question) -> str:
    """The question as a terminal shows it (without the choices): symptom, evidence, prompt."""
    parts = [
        f"Scenario {question.scenario} ({question.difficulty}); reported symptom: {question.symptom}",
        "",
        "As reported:",
        _wrapped(question.reported, "  "),
        "",
        "What you see first:",
        *_bullets(question.evidence),
        "",
        question.prompt,
    ]
    return "\n".join(parts)


def choices_text(question: Question) -> str:
    return "\n".join(f"  {choice.number}. {choice.text}" for choice in question.choices)


def reveal_text(question: Question) -> str:
    reveal = question.reveal
    causes = ", ".join(f"{choice.code}: {choice.text}" for choice in reveal.true_causes if choice.code != NOTHING_WRONG)
    ranked = [_wrapped(f"{index}. {cause.code}: {cause.title}", "  ") for index, cause in enumerate(reveal.ranked, 1)]
    parts = [
        f"The incident: {reveal.title}",
        f"True cause: {causes}" if causes else "True cause: none; the service is healthy.",
        "",
        "What to notice first:",
        _wrapped(reveal.first_seen, "  "),
        "What happened:",
        _wrapped(reveal.cause, "  "),
        "The fix:",
        _wrapped(reveal.fix, "  "),
        "The lesson:",
        _wrapped(reveal.lesson, "  "),
        "",
        "The triage's ranked root causes:" if ranked else "The triage ranked no root cause (no warning or critical).",
        *ranked,
    ]
    return "\n".join(parts)
