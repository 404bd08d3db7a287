"""The nine steps of the runbook, in the order an on-call engineer reads them.

Each module here is one step: it declares ``STEP`` (id, title, question) and ``run(evidence)``, a pure
function of the evidence that returns findings and performs no I/O. :data:`CHECKS` is the one place that
orders them (docs/architecture.md explains the order); a check never imports another check.
"""

from __future__ import annotations

from types import ModuleType

from nbhelpers.checks import (
    cold_start,
    endpoints,
    metric_pipeline,
    ports,
    probes,
    queue_vs_oom,
    resources,
    scale_target,
    timeouts,
)
from nbhelpers.findings.steps import CheckFunction, StepInfo

CHECKS: tuple[ModuleType, ...] = (
    endpoints,
    probes,
    ports,
    resources,
    cold_start,
    metric_pipeline,
    scale_target,
    queue_vs_oom,
    timeouts,
)

STEPS: tuple[StepInfo, ...] = tuple(module.STEP for module in CHECKS)
STEP_IDS: tuple[str, ...] = tuple(step.id for step in STEPS)
STEP_BY_ID: dict[str, StepInfo] = {step.id: step for step in STEPS}
_RUN_BY_ID: dict[str, CheckFunction] = {module.STEP.id: module.run for module in CHECKS}


def check_for(step_id: str) -> CheckFunction:
    """The ``run`` function of a step (``KeyError`` for an id that is not one of the nine)."""
    return _RUN_BY_ID[step_id]
