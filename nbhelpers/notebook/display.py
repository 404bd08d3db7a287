"""What the runbook's cells show: one helper per part of a :class:`~nbhelpers.triage.TriageResult`.

The executed notebook doubles as the incident report (report.html), so the
helpers write it as one: :func:`show_coverage` opens with the header (target,
windows in UTC with the local offset, sources, versions, tool version,
generation time), the coverage line, the verdict (ranked root causes and the
impact) and the incident timeline; :func:`show_step` shows each step;
:func:`show_root_causes` closes with the action items (apply and roll-back
commands) and the reference of every finding code on the page.

Everything is plain HTML with inline styles, so it looks the same in
JupyterLab and in the nbconvert report, and every value coming from the
cluster (names, messages, log lines) goes through :func:`html.escape`.
Severity shows as colour *and* as a glyph and a word (✖ CRITICAL, ▲ WARNING,
● INFO), on a light background with a coloured border, so it survives grey
print, printers that drop backgrounds, and colour-blind readers.

Links: each finding's code links to its entry in the code reference
(``#code-<CODE>``), each root cause to its finding (``#finding-<CODE>``); all
anchors are on the same page, so they work offline.

Outputs that report.html rearranges carry :data:`ROLE_KEY` in their display
metadata (see :func:`nbhelpers.render.report_html.render_html`).

Charts: with ``static=True`` (the default: headless papermill runs and the
report) they are shown as SVG rendered by vl-convert, so report.html needs no
JavaScript; the widget panel passes ``static=False`` for interactive altair
charts with tooltips and an x-axis zoom.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from html import escape
from typing import Any

from nbhelpers import __version__
from nbhelpers.checks import STEP_BY_ID
from nbhelpers.findings.catalog import CATALOG, Severity
from nbhelpers.findings.model import Finding
from nbhelpers.render.code_reference import anchor, reference_html
from nbhelpers.render.report_html import HEADER_ROLE, ROLE_KEY, TARGET_KEY
from nbhelpers.render.summary import (
    coverage_notes,
    findings_by_code,
    impact_lines,
    ordered_findings,
    utc_text,
    window_text,
)
from nbhelpers.triage import StepResult, TriageResult
from nbhelpers.util.times import Window


@dataclass(frozen=True)
class Look:
    """How a severity or status is shown: a word, a glyph, and a dark colour on a light background."""

    label: str
    glyph: str
    foreground: str
    background: str


SEVERITY_LOOKS = {
    Severity.CRITICAL: Look("CRITICAL", "✖", "#991b1b", "#fee2e2"),
    Severity.WARNING: Look("WARNING", "▲", "#92400e", "#fef3c7"),
    Severity.INFO: Look("INFO", "●", "#374151", "#f3f4f6"),
}
STATUS_LOOKS = {
    "ok": Look("OK", "✔", "#166534", "#dcfce7"),
    "findings": Look("FINDINGS", "✖", "#991b1b", "#fee2e2"),
    "skipped": Look("SKIPPED", "–", "#374151", "#f3f4f6"),
    "error": Look("ERROR", "!", "#7c2d12", "#ffedd5"),
}
_BOX = "font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:14px;line-height:1.45;color:#111827;"
CELL_STYLE = "padding:4px 8px;border:1px solid #d1d5db;text-align:left;vertical-align:top;"
_HEAD_CELL = CELL_STYLE + "background:#f3f4f6;font-weight:600;white-space:nowrap;"
_MONO = "font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;"
_PRE = (
    f"background:#f8fafc;border:1px solid #d1d5db;border-radius:4px;padding:6px 8px;white-space:pre-wrap;"
    f"overflow-wrap:anywhere;{_MONO}font-size:12.5px;margin:2px 0 6px 0;"
)
_KEEP_COLOURS = "-webkit-print-color-adjust:exact;print-color-adjust:exact;"


def _display(*objects: Any, metadata: dict[str, str] | None = None) -> None:
    from IPython.display import display

    display(*objects, metadata=metadata)  # type: ignore[no-untyped-call]


def show_html(markup: str, metadata: dict[str, str] | None = None) -> None:
    from IPython.display import HTML

    _display(HTML(f'<div style="{_BOX}">{markup}</div>'), metadata=metadata)  # type: ignore[no-untyped-call]


def show_chart(chart: Any, static: bool = True) -> None:
    """A static SVG (headless runs and the report), or the interactive altair chart."""
    if chart is None:
        return
    if static:
        from IPython.display import SVG

        from nbhelpers.render.charts import to_svg

        _display(SVG(to_svg(chart)))  # type: ignore[no-untyped-call]
    else:
        _display(chart)


# -------------------------------------------------------------------------------------------- pieces


def badge(look: Look) -> str:
    return (
        f'<span style="display:inline-block;padding:0 7px;border-radius:4px;font-weight:700;font-size:12px;'
        f"letter-spacing:0.03em;white-space:nowrap;color:{look.foreground};background:{look.background};"
        f'border:1.5px solid {look.foreground};{_KEEP_COLOURS}">{look.glyph} {look.label}</span>'
    )


def severity_badge(level: Severity) -> str:
    return badge(SEVERITY_LOOKS[level])


def status_badge(status: str) -> str:
    return badge(STATUS_LOOKS.get(status, STATUS_LOOKS["error"]))


def code_link(code: str) -> str:
    """The code, linked to its entry in the reference at the end of the report."""
    return (
        f'<a href="#{anchor(code)}" title="what {escape(code)} means" style="color:#1e3a8a;">'
        f'<code style="{_MONO}font-weight:700;">{escape(code)}</code></a>'
    )


def finding_anchor(code: str) -> str:
    return f"finding-{code}"


def html_list(items: Iterable[str], style: str = "") -> str:
    rendered = "".join(f"<li>{escape(item)}</li>" for item in items)
    return f'<ul style="margin:4px 0 4px 18px;padding:0;{style}">{rendered}</ul>' if rendered else ""


def pre_block(text: str) -> str:
    return f'<pre style="{_PRE}">{escape(text)}</pre>'


def _label(text: str) -> str:
    return f'<div style="font-weight:600;margin-top:4px;">{escape(text)}</div>'


# ------------------------------------------------------------------------------------------ the header


def _offset_text(offset: timedelta | None) -> str:
    minutes = int((offset or timedelta()).total_seconds() // 60)
    sign = "+" if minutes >= 0 else "−"
    return f"UTC{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def _in_local(moment: datetime, local: tzinfo | None) -> datetime:
    """``moment`` in ``local``, or in the host's zone when ``local`` is None."""
    return moment.astimezone(local) if local is not None else moment.astimezone()


def local_text(moment: datetime, local: tzinfo | None = None) -> str:
    """``moment`` in the local zone (the host's unless ``local`` is given), with its name and UTC offset."""
    here = _in_local(moment, local)
    name = here.tzname() or ""
    offset = _offset_text(here.utcoffset())
    zone = f"{name}, {offset}" if name and name != offset and not name.startswith(("+", "-")) else offset
    return f"{here.strftime('%Y-%m-%d %H:%M:%S')} {zone}"


def _local_offset(moment: datetime, local: tzinfo | None) -> timedelta:
    return _in_local(moment, local).utcoffset() or timedelta()


def window_html(window: Window, local: tzinfo | None = None) -> str:
    """A window in UTC; the same interval in local time below it when the local zone is not UTC."""
    text = escape(window_text(window))
    if _local_offset(window.start, local) or _local_offset(window.end, local):
        text += (
            f'<br><span style="color:#4b5563;">local: {escape(local_text(window.start, local))} to '
            f"{escape(local_text(window.end, local))}</span>"
        )
    return text


def zone_note(moment: datetime, local: tzinfo | None = None) -> str:
    """Which zone "local" is, with its offset at ``moment``."""
    here = _in_local(moment, local)
    return (
        f"All times are UTC. The host that wrote this report is on {_offset_text(here.utcoffset())}"
        + (f" ({here.tzname()})" if here.tzname() and not str(here.tzname()).startswith(("+", "-", "UTC")) else "")
        + "; local times are shown where they differ."
    )


def header_facts(result: TriageResult, local: tzinfo | None = None) -> list[tuple[str, str]]:
    """(label, HTML) rows of the report header; the run parameters are added by render_html."""
    evidence = result.evidence
    mode = evidence.deployment_mode
    if evidence.deployment_mode_raw and evidence.deployment_mode_raw != mode:
        mode += f" (set as {evidence.deployment_mode_raw})"
    facts = [(evidence.target.kind, f"<code>{escape(evidence.target.namespace)}/{escape(evidence.target.isvc)}</code>")]
    if not evidence.target.is_llmisvc:  # a deployment mode is an InferenceService notion
        facts.append(("deployment mode", escape(mode)))
    facts.append(("analysis window", window_html(evidence.window, local)))
    if result.incident is not None:
        facts.append(("incident window", window_html(result.incident, local)))
    facts += [
        ("sources", escape(", ".join(f"{name}: {origin}" for name, origin in sorted(evidence.sources.items())))),
        (
            "versions seen",
            escape(", ".join(f"{name} {value}" for name, value in sorted(evidence.versions.items())) or "none"),
        ),
        ("generated", f"{escape(utc_text(result.generated_at))}{_local_suffix(result.generated_at, local)}"),
        ("tool", f"kserve-runbook {escape(__version__)}"),
    ]
    return facts


def _local_suffix(moment: datetime, local: tzinfo | None) -> str:
    if not _local_offset(moment, local):
        return ""
    return f' <span style="color:#4b5563;">(local: {escape(local_text(moment, local))})</span>'


def facts_table(facts: Iterable[tuple[str, str]]) -> str:
    rows = "".join(
        f'<tr><th style="{_HEAD_CELL}">{escape(name)}</th><td style="{CELL_STYLE}">{value}</td></tr>'
        for name, value in facts
    )
    return f'<table class="kr-facts" style="border-collapse:collapse;margin:4px 0 8px 0;">{rows}</table>'


def header_html(result: TriageResult, local: tzinfo | None = None) -> str:
    target = f"{result.evidence.target.namespace}/{result.evidence.target.isvc}"
    return (
        f'<h1 style="font-size:26px;margin:4px 0 8px 0;">Incident report: {escape(target)}</h1>'
        f"{facts_table(header_facts(result, local))}"
        f'<div style="color:#4b5563;font-size:12.5px;">{escape(zone_note(result.generated_at, local))}</div>'
    )


def coverage_html(result: TriageResult) -> str:
    """The coverage line: what could not be seen and why."""
    notes = coverage_notes(result)
    if notes and result.partial:
        text, look = (
            "<strong>Coverage: could not see everything.</strong>" + html_list(notes),
            SEVERITY_LOOKS[Severity.WARNING],
        )
    elif notes:
        text, look = (
            "<strong>Coverage: every read succeeded.</strong> Not covered:" + html_list(notes),
            SEVERITY_LOOKS[Severity.INFO],
        )
    else:
        text, look = "<strong>Coverage: complete.</strong> Every read succeeded.", STATUS_LOOKS["ok"]
    return (
        f'<div style="border:1px solid {look.foreground};border-left:5px solid {look.foreground};'
        f'background:{look.background};padding:6px 10px;margin:8px 0;{_KEEP_COLOURS}">{text}</div>'
    )


def verdict_html(result: TriageResult) -> str:
    """The verdict first: the most likely root cause, the ranked list, and the impact in numbers."""
    by_code = findings_by_code(result)
    counts = {level: sum(1 for f in result.findings if f.level is level) for level in Severity}
    tally = (
        f"{counts[Severity.CRITICAL]} critical, {counts[Severity.WARNING]} warning, "
        f"{counts[Severity.INFO]} info finding(s)"
    )
    if result.root_causes:
        top = by_code[result.root_causes[0]]
        look = SEVERITY_LOOKS[top.level]
        head = (
            f'<div style="font-size:16px;margin-bottom:4px;"><strong>Most likely root cause:</strong> '
            f"{severity_badge(top.level)} {_cause_link(top.code)}: {escape(top.title)}</div>"
            f'<p style="margin:4px 0;">{escape(top.summary)}</p>'
        )
        causes = "".join(
            f'<li style="margin:3px 0;">{severity_badge(by_code[code].level)} {_cause_link(code)}: '
            f"{escape(by_code[code].title)}</li>"
            for code in result.root_causes
        )
        ranked = (
            f"{_label('Ranked causes, cause before effect (' + tally + ')')}"
            f'<ol style="margin:2px 0 6px 22px;padding:0;">{causes}</ol>'
        )
    else:
        look = STATUS_LOOKS["ok"]
        head = f'<div style="font-size:16px;"><strong>No critical or warning finding</strong> ({escape(tally)}).</div>'
        ranked = ""
    impact = impact_lines(result.evidence)
    impact_part = _label("Impact") + (html_list(impact) or "<div>No metrics or pods to measure the impact from.</div>")
    partial = (
        '<div style="margin-top:4px;"><strong>The result is partial:</strong> see the coverage above.</div>'
        if result.partial
        else ""
    )
    return (
        '<h2 style="font-size:20px;margin:14px 0 4px 0;">Verdict</h2>'
        f'<div class="kr-verdict" style="border:1px solid {look.foreground};border-left:6px solid {look.foreground};'
        f'padding:8px 12px;margin:4px 0 10px 0;">{head}{ranked}{impact_part}{partial}</div>'
    )


def _cause_link(code: str) -> str:
    """A root cause linked to its finding in the steps below."""
    return (
        f'<a href="#{finding_anchor(code)}" style="color:#1e3a8a;"><code style="{_MONO}font-weight:700;">'
        f"{escape(code)}</code></a>"
    )


def show_coverage(result: TriageResult, static: bool = True) -> None:
    """The report's opening: header, coverage line, verdict with impact, and the incident timeline chart."""
    target = f"{result.evidence.target.namespace}/{result.evidence.target.isvc}"
    show_html(header_html(result), metadata={ROLE_KEY: HEADER_ROLE, TARGET_KEY: target})
    show_html(
        coverage_html(result)
        + verdict_html(result)
        + '<h2 style="font-size:20px;margin:14px 0 0 0;">Incident timeline</h2>'
        + '<div style="color:#4b5563;">The main metrics over the analysis window'
        + (", the incident shaded" if result.incident is not None else "")
        + ".</div>"
    )
    from nbhelpers.render.charts import incident_timeline

    show_chart(incident_timeline(result.evidence, result.incident, interactive=not static), static)


# ------------------------------------------------------------------------------------------- findings


@dataclass(frozen=True)
class Remedy:
    """A finding's remediation split into its prose and the commands the checks append."""

    text: str
    apply: str
    rollback: str


def split_remediation(text: str) -> Remedy:
    """Split ``what\\nApply:\\n  cmd\\nRoll back:\\n  cmd`` (the layout of Fix.remediation); other text is prose."""
    prose, found, commands = text.partition("\nApply:\n")
    if not found:
        return Remedy(text.strip(), "", "")
    apply, _, rollback = commands.partition("\nRoll back:\n")
    return Remedy(prose.strip(), textwrap.dedent(apply).strip(), textwrap.dedent(rollback).strip())


def _patch_file_command(finding: Finding) -> str:
    """An apply command for a patch whose remediation carries none: kubectl reads the YAML from a file."""
    assert finding.patch is not None
    parts = finding.patch.target.split("/")
    kind, _, group = parts[0].partition(".")
    resource = f"{kind.lower()}.{group}" if group else kind.lower()
    namespace = f" -n {parts[1]}" if len(parts) == 3 else ""
    return f"kubectl patch {resource} {parts[-1]}{namespace} --type {finding.patch.type} --patch-file patch.yaml"


def commands_html(finding: Finding) -> str:
    """The fix: what to change, the apply command, and how to roll it back."""
    remedy = split_remediation(finding.remediation or "no remediation recorded")
    parts = [f'<p style="margin:2px 0 4px 0;">{escape(remedy.text)}</p>']
    apply = remedy.apply
    if not apply and finding.patch is not None:
        apply = _patch_file_command(finding) + "    # patch.yaml: the YAML below"
    if apply:
        parts.append(_label("Apply") + pre_block(apply))
    if remedy.rollback:
        parts.append(_label("Roll back") + pre_block(remedy.rollback))
    elif finding.patch is not None:
        parts.append(
            _label("Roll back") + '<div style="margin:2px 0 6px 0;">Save the object before applying '
            "(kubectl get ... -o yaml &gt; before.yaml) and restore it with kubectl replace -f before.yaml.</div>"
        )
    return "".join(parts)


def patch_html(finding: Finding) -> str:
    if finding.patch is None:
        return ""
    return (
        f"{_label('Patch')}<div>{escape(finding.patch.type)} patch of "
        f"<code>{escape(finding.patch.target)}</code>, YAML:</div>{pre_block(finding.patch.body)}"
    )


def findings_table(findings: Iterable[Finding]) -> str:
    header = "".join(f'<th style="{_HEAD_CELL}">{name}</th>' for name in ("severity", "code", "finding", "objects"))
    narrow = "width:1%;white-space:nowrap;"
    rows = []
    for finding in findings:
        rows.append(
            "<tr>"
            f'<td style="{CELL_STYLE}{narrow}">{severity_badge(finding.level)}</td>'
            f'<td style="{CELL_STYLE}{narrow}">{code_link(finding.code)}</td>'
            f'<td style="{CELL_STYLE}">{escape(finding.title)}</td>'
            f'<td style="{CELL_STYLE}font-size:12.5px;overflow-wrap:anywhere;">'
            f"{'<br>'.join(escape(ref) for ref in finding.objects)}</td></tr>"
        )
    return (
        f'<table style="border-collapse:collapse;margin:6px 0;width:100%;table-layout:auto;"><tr>{header}</tr>'
        f"{''.join(rows)}</table>"
    )


def finding_details(finding: Finding, anchor_id: str = "") -> str:
    look = SEVERITY_LOOKS[finding.level]
    identity = f' id="{escape(anchor_id)}"' if anchor_id else ""
    parts = [
        f'<div class="kr-finding"{identity} style="border-left:5px solid {look.foreground};padding:4px 12px;'
        f'margin:12px 0;{_KEEP_COLOURS}">',
        f'<div style="font-size:15px;">{severity_badge(finding.level)} {code_link(finding.code)}: '
        f"<strong>{escape(finding.title)}</strong></div>",
        f'<p style="margin:4px 0;">{escape(finding.summary)}</p>',
    ]
    if finding.evidence:
        parts.append(_label("Evidence") + html_list(finding.evidence, "font-size:13px;"))
    parts.append(
        f'<div style="color:#374151;margin:4px 0;"><em>Why it matters:</em> {escape(CATALOG[finding.code].why)}</div>'
    )
    parts.append(_label("Fix") + commands_html(finding))
    parts.append(patch_html(finding))
    parts.append("</div>")
    return "".join(parts)


def _status_line(step: StepResult) -> str:
    reason = f" {escape(step.reason)}" if step.reason else ""
    return (
        f'<div style="margin:4px 0;">{status_badge(step.status)}{reason} '
        f'<span style="color:#4b5563;">({step.seconds:.2f} s)</span></div>'
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
        anchored: set[str] = set()
        for finding in ordered:
            parts.append(finding_details(finding, "" if finding.code in anchored else finding_anchor(finding.code)))
            anchored.add(finding.code)
    elif step.status == "ok":
        parts.append('<div style="color:#166534;">Nothing wrong found in this step.</div>')
    return "".join(parts)


def show_step(result: TriageResult, step_id: str, static: bool = True) -> None:
    """A step's question, status, findings with evidence and patches, and its charts (when it ran).

    A step that found nothing leaves out the panels the incident timeline already showed.
    """
    show_html(step_html(result, step_id))
    status = result.step(step_id).status
    if status not in ("ok", "findings"):
        return
    from nbhelpers.render.charts import TIMELINE_PANELS, step_charts

    seen = TIMELINE_PANELS if status == "ok" else ()
    for chart in step_charts(result.evidence, step_id, result.incident, interactive=not static, skip=seen):
        show_chart(chart, static)


# ---------------------------------------------------------------------------------------- the closing


def root_causes_html(result: TriageResult) -> str:
    """Action items in root-cause order (fix, apply, roll back), then the reference of every code shown."""
    by_code = findings_by_code(result)
    if result.root_causes:
        actions = "".join(
            f'<li style="margin:10px 0;break-inside:avoid;">{severity_badge(by_code[code].level)} '
            f"{_cause_link(code)}: <strong>{escape(by_code[code].title)}</strong>"
            f"{commands_html(by_code[code])}</li>"
            for code in result.root_causes
        )
        body = (
            '<div style="color:#374151;">Most likely cause first; each fix with its patch is under its finding '
            "above.</div>"
            f'<ol style="margin:4px 0 4px 22px;padding:0;">{actions}</ol>'
        )
    else:
        body = '<div style="color:#166534;"><strong>No critical or warning finding: nothing to change.</strong></div>'
    codes = list(dict.fromkeys(finding.code for finding in ordered_findings(result)))
    reference = (
        '<h2 style="font-size:20px;margin:18px 0 4px 0;">Finding codes in this report</h2>'
        '<div style="color:#374151;">What each code means, why it causes the symptom, how to fix it and what '
        "evidence it reads (also <code>kserve-runbook codes CODE</code>).</div>"
        f"{reference_html(codes)}"
        if codes
        else ""
    )
    return f"{body}{reference}"


def show_root_causes(result: TriageResult) -> None:
    """Ranked action items with their commands, and the reference of the codes found."""
    show_html(root_causes_html(result))
