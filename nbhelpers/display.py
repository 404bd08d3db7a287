"""What the runbook's cells show: one helper per part of a :class:`~nbhelpers.triage.TriageResult`.

Everything is plain HTML with inline styles, so it looks the same in
JupyterLab and in the nbconvert report, and every value coming from the
cluster (names, messages, log lines) goes through :func:`html.escape`.

Charts: when :data:`STATIC` is true (headless papermill runs, i.e. the
notebook parameter ``interactive`` is False) they are shown as SVG rendered by
vl-convert, so report.html needs no JavaScript; otherwise as interactive
altair charts.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from typing import Any

from nbhelpers import report
from nbhelpers.checks import STEP_BY_ID
from nbhelpers.findings import CATALOG, Finding, Severity
from nbhelpers.triage import StepResult, TriageResult

STATIC = True

SEVERITY_COLOURS = {
    Severity.CRITICAL: ("#b91c1c", "#fee2e2"),
    Severity.WARNING: ("#b45309", "#fef3c7"),
    Severity.INFO: ("#4b5563", "#f3f4f6"),
}
STATUS_COLOURS = {
    "ok": ("#166534", "#dcfce7"),
    "findings": ("#b91c1c", "#fee2e2"),
    "skipped": ("#4b5563", "#f3f4f6"),
    "error": ("#7c2d12", "#ffedd5"),
}
_BOX = "font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:14px;line-height:1.45;color:#111827;"
_CELL = "padding:4px 8px;border:1px solid #e5e7eb;text-align:left;vertical-align:top;"
_PRE = (
    "background:#f8fafc;border:1px solid #e5e7eb;border-radius:4px;padding:8px;white-space:pre-wrap;"
    "font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12.5px;margin:4px 0;"
)


def _display(*objects: Any) -> None:
    from IPython.display import display

    display(*objects)  # type: ignore[no-untyped-call]


def _html(markup: str) -> None:
    from IPython.display import HTML

    _display(HTML(f'<div style="{_BOX}">{markup}</div>'))  # type: ignore[no-untyped-call]


def show_chart(chart: Any) -> None:
    """Static SVG under papermill/headless (``STATIC``), the interactive altair chart otherwise."""
    if chart is None:
        return
    if STATIC:
        from IPython.display import SVG

        from nbhelpers.charts import to_svg

        _display(SVG(to_svg(chart)))  # type: ignore[no-untyped-call]
    else:
        _display(chart)


def badge(text: str, colours: tuple[str, str]) -> str:
    foreground, background = colours
    return (
        f'<span style="display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600;font-size:12px;'
        f'color:{foreground};background:{background};border:1px solid {foreground};">{escape(text)}</span>'
    )


def _list(items: Iterable[str], style: str = "") -> str:
    rendered = "".join(f"<li>{escape(item)}</li>" for item in items)
    return f'<ul style="margin:4px 0 4px 18px;padding:0;{style}">{rendered}</ul>' if rendered else ""


def _pre(text: str) -> str:
    return f'<pre style="{_PRE}">{escape(text)}</pre>'


def coverage_html(result: TriageResult) -> str:
    evidence = result.evidence
    target = f"{evidence.target.namespace}/{evidence.target.isvc}"
    facts = [
        ("InferenceService", target),
        (
            "deployment mode",
            evidence.deployment_mode + (f" ({evidence.deployment_mode_raw})" if evidence.deployment_mode_raw else ""),
        ),
        ("window", report.window_text(evidence.window)),
        ("sources", ", ".join(f"{name}: {mode}" for name, mode in sorted(evidence.sources.items()))),
        (
            "versions",
            ", ".join(f"{name} {value}" for name, value in sorted(evidence.versions.items())) or "none detected",
        ),
    ]
    if result.incident is not None:
        facts.insert(3, ("incident", report.window_text(result.incident)))
    rows = "".join(
        f'<tr><th style="{_CELL}background:#f9fafb;">{escape(name)}</th><td style="{_CELL}">{escape(value)}</td></tr>'
        for name, value in facts
    )
    notes = report.coverage_notes(result)
    if notes and result.partial:
        coverage = "<strong>Coverage: could not see everything.</strong>" + _list(notes)
        colours = SEVERITY_COLOURS[Severity.WARNING]
    elif notes:
        coverage = "<strong>Coverage: every read succeeded.</strong> Not covered:" + _list(notes)
        colours = SEVERITY_COLOURS[Severity.INFO]
    else:
        coverage = "<strong>Coverage: complete.</strong> Every read succeeded."
        colours = STATUS_COLOURS["ok"]
    return (
        f'<table style="border-collapse:collapse;margin:4px 0 10px 0;">{rows}</table>'
        f'<div style="border-left:4px solid {colours[0]};background:{colours[1]};padding:6px 10px;">{coverage}</div>'
    )


def show_coverage(result: TriageResult) -> None:
    """Target, window, sources, what could not be seen, and the incident timeline chart."""
    _html(coverage_html(result))
    from nbhelpers.charts import incident_timeline

    show_chart(incident_timeline(result.evidence, result.incident))


def _severity_cell(finding: Finding) -> str:
    return badge(finding.level.value, SEVERITY_COLOURS[finding.level])


def findings_table(findings: Iterable[Finding]) -> str:
    header = "".join(
        f'<th style="{_CELL}background:#f9fafb;">{name}</th>' for name in ("severity", "code", "finding", "objects")
    )
    rows = []
    for finding in findings:
        _, background = SEVERITY_COLOURS[finding.level]
        rows.append(
            f'<tr style="background:{background};">'
            f'<td style="{_CELL}">{_severity_cell(finding)}</td>'
            f'<td style="{_CELL}font-family:ui-monospace,monospace;">{escape(finding.code)}</td>'
            f'<td style="{_CELL}">{escape(finding.title)}</td>'
            f'<td style="{_CELL}">{"<br>".join(escape(ref) for ref in finding.objects)}</td></tr>'
        )
    return f'<table style="border-collapse:collapse;margin:6px 0;"><tr>{header}</tr>{"".join(rows)}</table>'


def patch_html(finding: Finding) -> str:
    if finding.patch is None:
        return ""
    return (
        f"<div><strong>Patch</strong> ({escape(finding.patch.type)} patch of "
        f"<code>{escape(finding.patch.target)}</code>), YAML ready to copy:</div>{_pre(finding.patch.body)}"
    )


def finding_details(finding: Finding) -> str:
    foreground, _ = SEVERITY_COLOURS[finding.level]
    parts = [
        f'<div style="border-left:4px solid {foreground};padding:2px 10px;margin:10px 0;">',
        f"<div>{_severity_cell(finding)} <strong>{escape(finding.code)}</strong>: {escape(finding.title)}</div>",
        f'<p style="margin:4px 0;">{escape(finding.summary)}</p>',
    ]
    if finding.evidence:
        parts.append("<div><strong>Evidence</strong></div>" + _list(finding.evidence, "font-size:13px;"))
    parts.append(
        f'<div style="color:#4b5563;"><em>Why it matters:</em> {escape(CATALOG[finding.code].reference)}</div>'
    )
    if finding.remediation:
        parts.append(f"<div><strong>Remediation</strong></div>{_pre(finding.remediation)}")
    parts.append(patch_html(finding))
    parts.append("</div>")
    return "".join(parts)


def _status_line(step: StepResult) -> str:
    reason = f" {escape(step.reason)}" if step.reason else ""
    return (
        f'<div style="margin:4px 0;">{badge(step.status, STATUS_COLOURS.get(step.status, STATUS_COLOURS["error"]))}'
        f'{reason} <span style="color:#6b7280;">({step.seconds:.2f} s)</span></div>'
    )


def step_html(result: TriageResult, step_id: str) -> str:
    """The step's question, status and findings (the notebook's markdown cell above holds its heading)."""
    info = STEP_BY_ID[step_id]
    step = result.step(step_id)
    parts = [
        f'<div style="color:#374151;font-style:italic;">{escape(info.question)}</div>',
        _status_line(step),
    ]
    ordered = sorted(step.findings, key=lambda finding: (finding.level.rank, finding.code))
    if ordered:
        parts.append(findings_table(ordered))
        parts.extend(finding_details(finding) for finding in ordered)
    elif step.status == "ok":
        parts.append('<div style="color:#166534;">Nothing wrong found in this step.</div>')
    return "".join(parts)


def show_step(result: TriageResult, step_id: str) -> None:
    """A step's question, status, findings with evidence and patches, and its charts (when it ran)."""
    _html(step_html(result, step_id))
    if result.step(step_id).status not in ("ok", "findings"):
        return
    from nbhelpers.charts import step_chart

    show_chart(step_chart(result.evidence, step_id, result.incident))


def root_causes_html(result: TriageResult) -> str:
    by_code = report.findings_by_code(result)
    if not result.root_causes:
        return '<div style="color:#166534;"><strong>No critical or warning finding.</strong></div>'
    causes = "".join(
        f'<li style="margin:3px 0;">{_severity_cell(by_code[code])} <strong>{escape(code)}</strong>: '
        f"{escape(by_code[code].title)}</li>"
        for code in result.root_causes
    )
    actions = "".join(
        f'<li style="margin:8px 0;"><strong>{escape(code)}</strong>'
        f"{_pre(by_code[code].remediation or 'no remediation recorded')}{patch_html(by_code[code])}</li>"
        for code in result.root_causes
    )
    return (
        '<h3 style="margin:6px 0;">Root causes, most likely first</h3>'
        f'<ol style="margin:4px 0 10px 22px;padding:0;">{causes}</ol>'
        f'<h3 style="margin:6px 0;">Action items</h3><ol style="margin:4px 0 4px 22px;padding:0;">{actions}</ol>'
    )


def show_root_causes(result: TriageResult) -> None:
    """Ranked root causes and what to do about each."""
    _html(root_causes_html(result))
