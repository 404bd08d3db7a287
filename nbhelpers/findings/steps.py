"""What a step of the runbook is: an id (a findings.json contract), a title and the question it answers.

Each check module declares its own ``STEP``; :mod:`nbhelpers.checks` orders them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nbhelpers.evidence.model import Evidence
    from nbhelpers.findings.model import Finding

CheckFunction = Callable[["Evidence"], "list[Finding]"]


@dataclass(frozen=True)
class StepInfo:
    id: str
    title: str
    question: str
