"""Where to start reading for each reported symptom: the runbook's ``symptom`` parameter.

The triage always runs all nine steps; the symptom only changes the reading
order. For each symptom (503, 504, GPU/host OOM, an HPA that does not scale)
this module names the steps whose findings can cause it, most direct first,
with one line saying why, and renders that as a short map with links to the
steps' sections in the notebook.

It owns no I/O and no findings: it maps a symptom to step ids and renders text.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from nbhelpers.checks import STEP_BY_ID, STEPS
from nbhelpers.errors import RunbookError


@dataclass(frozen=True)
class Lead:
    """One step to read first, and why it matters for the symptom."""

    step: str
    why: str


@dataclass(frozen=True)
class Symptom:
    key: str  # the notebook parameter value
    label: str  # what the on-call engineer would say
    scenario_symptom: str  # the same symptom as scenario specs and the training quiz name it
    leads: tuple[Lead, ...]

    @property
    def steps(self) -> tuple[str, ...]:
        return tuple(lead.step for lead in self.leads)


SYMPTOMS: tuple[Symptom, ...] = (
    Symptom(
        "503",
        "HTTP 503 (service unavailable)",
        "503",
        (
            Lead("endpoints", "a 503 almost always means the route ends in no ready pod address"),
            Lead("probes", "a probe that fails while the model loads keeps the pod unready or restarts it"),
            Lead("ports", "a server listening on another port than the probes and the Service never turns ready"),
            Lead("resources", "a pod that stays Pending, is OOMKilled or cannot see its GPU never serves"),
            Lead("cold_start", "after scale-to-zero, requests wait for a new pod and can be refused meanwhile"),
        ),
    ),
    Symptom(
        "504",
        "HTTP 504 (gateway timeout), hanging requests",
        "504",
        (
            Lead("timeouts", "a 504 comes from whichever layer gives up first; line the timeouts up"),
            Lead("queue_vs_oom", "requests queueing in vLLM, or preempted for KV cache, outlast the timeouts"),
            Lead("cold_start", "a cold start longer than a gateway's timeout surfaces as 504s"),
            Lead("scale_target", "an autoscaler that adds no replica under load lets the queue grow"),
        ),
    ),
    Symptom(
        "oom",
        "out of memory (CUDA OOM, OOMKilled)",
        "OOM",
        (
            Lead("queue_vs_oom", "CUDA out-of-memory, KV-cache sizing and vLLM's memory flags against the GPU"),
            Lead("resources", "host memory limits (OOMKilled), /dev/shm for tensor parallelism, GPU visibility"),
        ),
    ),
    Symptom(
        "hpa",
        "the autoscaler does not scale",
        "HPA not scaling",
        (
            Lead("metric_pipeline", "an autoscaler that cannot read its metric does nothing, silently"),
            Lead("scale_target", "it may scale another workload, or on a signal that never crosses its target"),
            Lead("resources", "without requests a utilization target cannot be computed; GPU capacity can block pods"),
        ),
    ),
)
SYMPTOM_BY_KEY: dict[str, Symptom] = {symptom.key: symptom for symptom in SYMPTOMS}


def symptom_for(key: str) -> Symptom | None:
    """The symptom named by the ``symptom`` parameter (case-insensitive); ``None`` for "" (all steps)."""
    cleaned = key.strip().lower()
    if not cleaned:
        return None
    if cleaned not in SYMPTOM_BY_KEY:
        known = ", ".join(SYMPTOM_BY_KEY)
        raise RunbookError(f"unknown symptom {key!r}: use one of {known}, or leave it empty for all steps")
    return SYMPTOM_BY_KEY[cleaned]


def reading_order(symptom: Symptom | None) -> tuple[str, ...]:
    """Every step id once: the symptom's steps first, then the others in the runbook's order."""
    first = symptom.steps if symptom else ()
    return first + tuple(step.id for step in STEPS if step.id not in first)


def step_heading(step_id: str) -> str:
    """The markdown heading of a step's section in runbooks/triage.ipynb (without the ``## ``)."""
    number = next(index for index, step in enumerate(STEPS, 1) if step.id == step_id)
    return f"Step {number}: {STEP_BY_ID[step_id].title}"


def step_anchor(step_id: str) -> str:
    """The fragment JupyterLab and nbconvert give that heading: its text with spaces turned into dashes."""
    return "#" + step_heading(step_id).replace(" ", "-")


_CELL = "padding:3px 8px;border:1px solid #e5e7eb;text-align:left;vertical-align:top;"
_BOX = "font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:14px;line-height:1.45;color:#111827;"


def reading_order_html(symptom: Symptom | None) -> str:
    """The "read these steps first" map, with links to the step sections."""
    return f'<div style="{_BOX}">{_reading_order_body(symptom)}</div>'


def _step_link(step_id: str) -> str:
    return f"<a href='{step_anchor(step_id)}'>{escape(step_heading(step_id))}</a>"


def _reading_order_body(symptom: Symptom | None) -> str:
    if symptom is None:
        rows = "".join(
            f"<tr><th style='{_CELL}'>{escape(item.label)}</th>"
            f"<td style='{_CELL}'>{', '.join(_step_link(step) for step in item.steps)}</td></tr>"
            for item in SYMPTOMS
        )
        return (
            "<p style='margin:4px 0;'><strong>Where to start:</strong> the steps to read first for what users "
            "report (set <code>symptom</code> to 503, 504, oom or hpa to keep one line). Every step runs anyway.</p>"
            f"<table style='border-collapse:collapse;margin:4px 0;'>{rows}</table>"
        )
    items = "".join(f"<li>{_step_link(lead.step)}: {escape(lead.why)}</li>" for lead in symptom.leads)
    return (
        f"<p style='margin:4px 0;'><strong>For {escape(symptom.label)}, read these steps first:</strong></p>"
        f"<ol style='margin:4px 0 4px 22px;padding:0;'>{items}</ol>"
        "<p style='margin:4px 0;color:#4b5563;'>Every step still ran: a cause can sit elsewhere, and the root "
        "causes at the end rank everything found.</p>"
    )
