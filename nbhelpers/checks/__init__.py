"""The check registry: the nine steps of DESIGN §2, in order.

Each implemented step is a module here exposing ``STEP`` (a :class:`StepInfo`)
and ``run(evidence) -> list[Finding]``: a pure function of the evidence, no I/O.
:func:`check_for` is the one place that wires them; a step without a module is
reported as skipped, "not implemented yet".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nbhelpers.findings.model import STEP_ORDER

if TYPE_CHECKING:
    from nbhelpers.evidence.model import Evidence
    from nbhelpers.findings.model import Finding

CheckFunction = Callable[["Evidence"], "list[Finding]"]


@dataclass(frozen=True)
class StepInfo:
    id: str
    title: str
    question: str


STEPS: tuple[StepInfo, ...] = (
    StepInfo(
        "endpoints",
        "Endpoints and routing",
        "Does the serving path have ready endpoints, and does the routing layer match the deployment mode?",
    ),
    StepInfo("probes", "Probes", "Do the probes fit the model's load time, and do they test the engine?"),
    StepInfo("ports", "Ports", "Do the listening port, containerPort, Service targetPort and probe ports agree?"),
    StepInfo("resources", "Resources", "Are requests and limits sane, GPUs schedulable and visible, memory enough?"),
    StepInfo("cold_start", "Cold start", "Is scale-to-zero or a slow cold start behind the errors?"),
    StepInfo("metric_pipeline", "Metric pipeline", "Can the autoscaler read its metric at all?"),
    StepInfo(
        "scale_target",
        "Scale target",
        "Does the autoscaler scale the workload that serves traffic, on a signal that fits an LLM?",
    ),
    StepInfo("queue_vs_oom", "Queue vs OOM", "Is it queueing, KV-cache pressure or GPU OOM, and do the flags fit?"),
    StepInfo("timeouts", "Timeouts", "Are timeouts aligned from the client to the server, against observed latency?"),
)
assert tuple(step.id for step in STEPS) == STEP_ORDER

STEP_BY_ID: dict[str, StepInfo] = {step.id: step for step in STEPS}


def check_for(step_id: str) -> CheckFunction | None:
    """The ``run`` function of a step's module, or ``None`` while the step is not implemented."""
    # Imported here, not at the top: the check modules import STEP_BY_ID from this module.
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

    implemented: dict[str, CheckFunction] = {
        "endpoints": endpoints.run,
        "probes": probes.run,
        "ports": ports.run,
        "resources": resources.run,
        "cold_start": cold_start.run,
        "metric_pipeline": metric_pipeline.run,
        "scale_target": scale_target.run,
        "queue_vs_oom": queue_vs_oom.run,
        "timeouts": timeouts.run,
    }
    return implemented.get(step_id)
