"""Golden outputs: every bundled scenario's findings.json and summary.md, pinned.

Written before the package was regrouped into layers, so that a move that is meant to change no
behaviour provably changes none. Only what varies from run to run is masked: ``generated_at`` and
each step's ``seconds`` (in findings.json and in summary.md's step table). After an intended change of
findings, refresh the files with ``KSERVE_RUNBOOK_UPDATE_GOLDEN=1 ./dev test tests/test_golden.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from scenario_cache import shipped_specs

from nbhelpers.triage import TriageParams, run

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("KSERVE_RUNBOOK_UPDATE_GOLDEN") == "1"
FIXED_NOW = datetime(2030, 1, 1, tzinfo=timezone.utc)


def _masked(document: dict[str, Any]) -> dict[str, Any]:
    document = dict(document)
    document["generated_at"] = "<generated_at>"
    document["tool_version"] = "<tool_version>"
    document["steps"] = [{**step, "seconds": 0} for step in document["steps"]]
    return document


# A row of summary.md's step table: | step | status | seconds | reason |
_STEP_ROW_SECONDS = re.compile(r"^(\| \w+ \| \w+ \| )\d+\.\d+( \|)", re.MULTILINE)


def _without_step_seconds(summary: str) -> str:
    """The step table with every step's seconds at 0.00, as the golden files hold them (a loaded machine
    can take 0.01 s for a step)."""
    return _STEP_ROW_SECONDS.sub(r"\g<1>0.00\g<2>", summary)


def _summary(result: Any) -> str:
    from nbhelpers.render.summary import summary_markdown

    return _without_step_seconds(re.sub(r"\b\d+\.\d+ s\b", "<seconds>", summary_markdown(result)))


SCENARIOS = [spec.name for spec in shipped_specs()]


@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario_output_matches_golden(name: str, shipped_bundle: Callable[[str], Path]) -> None:
    result = run(TriageParams(bundle=str(shipped_bundle(name))), clock=lambda: FIXED_NOW)
    produced = {
        "findings.json": json.dumps(_masked(result.to_json()), indent=1, sort_keys=True) + "\n",
        "summary.md": _summary(result),
    }
    for file_name, text in produced.items():
        path = GOLDEN / name / file_name
        if UPDATE:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        assert path.is_file(), f"no golden {path}: run with KSERVE_RUNBOOK_UPDATE_GOLDEN=1"
        assert text == path.read_text(), f"{name}/{file_name} differs from the golden file"
