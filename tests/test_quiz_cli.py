"""``kserve-runbook scenarios quiz`` in a terminal: plain pipes, no tmux, the real process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nbhelpers import training
from nbhelpers.scenarios import load_spec

SCENARIO = "port-mismatch"


@pytest.fixture(scope="module")
def cache_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One XDG cache for the module: the subprocesses and the expected question share the generated bundle."""
    return tmp_path_factory.mktemp("xdg-cache")


@pytest.fixture(scope="module")
def question(cache_home: Path) -> training.Question:
    return training.question_for(SCENARIO, 0, cache_home / "kserve-runbook" / "scenarios")


def quiz(cache_home: Path, *arguments: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nbhelpers", "scenarios", "quiz", *arguments],
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "XDG_CACHE_HOME": str(cache_home)},
    )


def _numbers(question: training.Question) -> tuple[int, int]:
    right = next(choice.number for choice in question.choices if choice.code in question.answers)
    wrong = next(choice.number for choice in question.choices if choice.code not in question.answers)
    return right, wrong


def test_right_answer_is_confirmed_and_explained(cache_home: Path, question: training.Question) -> None:
    right, _ = _numbers(question)
    result = quiz(cache_home, SCENARIO, "--answer", str(right))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    out = result.stdout
    assert out.startswith(training.question_text(question) + "\n" + training.choices_text(question) + "\n")
    assert "Right: listening port, containerPort, targetPort or probe port disagree (PORT_MISMATCH)." in out
    assert "True cause: PORT_MISMATCH" in out
    assert "1. PORT_MISMATCH: server listens on 8000, traffic goes to 8080" in out
    assert " ".join(load_spec(SCENARIO).story.lesson.split()) in " ".join(out.split())


def test_wrong_answer_names_the_right_one_and_still_exits_0(cache_home: Path, question: training.Question) -> None:
    right, wrong = _numbers(question)
    result = quiz(cache_home, SCENARIO, "--answer", str(wrong))
    assert result.returncode == 0, result.stderr
    right_text = question.choice(right).text
    assert f"Not this one: nothing in this incident points to it ({question.choice(wrong).code})." in result.stdout
    assert f"The answer was {right}. {right_text}." in result.stdout
    assert "The fix:" in result.stdout


def test_answer_read_from_stdin(cache_home: Path, question: training.Question) -> None:
    right, _ = _numbers(question)
    result = quiz(cache_home, SCENARIO, stdin=f"{right}\n")
    assert result.returncode == 0, result.stderr
    assert "Your answer: " in result.stdout and "Right: " in result.stdout


def test_no_stdin_exits_2_with_one_line(cache_home: Path) -> None:
    result = quiz(cache_home, SCENARIO)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "kserve-runbook: error: no answer read from the terminal; pass --answer N to answer without one"
    ]
    assert "The incident:" not in result.stdout and "The fix:" not in result.stdout


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ([SCENARIO, "--answer", "9"], "kserve-runbook: error: answer 9 is not a choice: pick 1 to 5"),
        (["no-such-scenario", "--answer", "1"], "kserve-runbook: error: unknown scenario 'no-such-scenario'"),
    ],
)
def test_bad_input_exits_2_with_one_line(cache_home: Path, arguments: list[str], expected: str) -> None:
    result = quiz(cache_home, *arguments)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(expected), result.stderr


def test_without_a_name_the_seed_picks_the_scenario(cache_home: Path) -> None:
    name = training.pick_scenario(11)
    result = quiz(cache_home, "--seed", "11", "--answer", "1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"Scenario {name} (")
    assert f"The incident: {load_spec(name).title}" in result.stdout
