"""The finding-code reference, generated from the code catalog so it cannot drift (docs/contracts.md#finding-codes).

For every code in :data:`nbhelpers.findings.catalog.CATALOG` (one entry per code in
``nbhelpers/findings/catalog.yaml``): what it means, why it causes the symptom, how to
fix it and what evidence the check reads (the entry's ``title``, ``why``, ``fix`` and
``evidence``), and the cause edges in both directions
(:data:`nbhelpers.findings.catalog.CAUSE_EDGES`).

Two renderings: plain text for ``kserve-runbook codes [CODE]`` and an HTML
appendix for report.html whose anchors (``#code-<CODE>``) each finding links
to, so the links work offline.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from html import escape

from nbhelpers.checks import STEP_BY_ID
from nbhelpers.errors import RunbookError
from nbhelpers.findings.catalog import CATALOG, CAUSE_EDGES, Severity


@dataclass(frozen=True)
class CodeReference:
    code: str
    step: str
    step_title: str
    severity: Severity
    meaning: str
    why: str
    fix: str
    evidence: str
    explains: tuple[str, ...]
    explained_by: tuple[str, ...]


def anchor(code: str) -> str:
    """The HTML id of a code's entry in the report's appendix."""
    return f"code-{code}"


def reference(code: str) -> CodeReference:
    """Everything known about ``code``; ``RunbookError`` for a code that is not in the catalog."""
    info = CATALOG.get(code)
    if info is None:
        raise RunbookError(f"unknown code {code!r}: run 'kserve-runbook codes' for the list")
    return CodeReference(
        code=code,
        step=info.step,
        step_title=STEP_BY_ID[info.step].title,
        severity=info.severity,
        meaning=info.title,
        why=info.why,
        fix=info.fix,
        evidence=info.evidence,
        explains=tuple(sorted(CAUSE_EDGES[code])),
        explained_by=tuple(sorted(source for source, targets in CAUSE_EDGES.items() if code in targets)),
    )


def all_references() -> list[CodeReference]:
    return [reference(code) for code in CATALOG]


# ------------------------------------------------------------------------------------------------ text


def catalog_line(entry: CodeReference) -> str:
    return f"{entry.code}  [{entry.severity.value}, step {entry.step}]  {entry.meaning}"


def reference_text(code: str, width: int = 100) -> str:
    """The full entry for ``kserve-runbook codes CODE``."""
    import textwrap

    entry = reference(code)

    def block(heading: str, text: str) -> list[str]:
        return [f"{heading}:", *textwrap.wrap(text, width, initial_indent="  ", subsequent_indent="  "), ""]

    lines = [catalog_line(entry), ""]
    lines += block("What it means", entry.meaning)
    lines += block("Why it causes the symptom", entry.why)
    lines += block("How to fix", entry.fix)
    lines += block("Evidence it reads", entry.evidence)
    lines += [f"explains: {', '.join(entry.explains) or 'nothing'}"]
    lines += [f"explained by: {', '.join(entry.explained_by) or 'nothing'}"]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ html

_LABEL_CELL = (
    "padding:3px 8px;border:1px solid #d1d5db;background:#f3f4f6;text-align:left;vertical-align:top;"
    "font-weight:600;width:12em;"
)
_TEXT_CELL = "padding:3px 8px;border:1px solid #d1d5db;text-align:left;vertical-align:top;"
_SEVERITY_TEXT = {Severity.CRITICAL: "critical", Severity.WARNING: "warning", Severity.INFO: "info"}


def _code_list(codes: Iterable[str], linked: set[str]) -> str:
    """Codes as inline code, linked to their entry when that entry is on the page."""
    rendered = [
        f'<a href="#{anchor(code)}"><code>{escape(code)}</code></a>'
        if code in linked
        else f"<code>{escape(code)}</code>"
        for code in codes
    ]
    return ", ".join(rendered) or "nothing"


def reference_html(codes: Iterable[str]) -> str:
    """The appendix "Finding codes in this report": one entry per code, each with its ``#code-<CODE>`` anchor.

    Cause edges link to the other entries that are on the page.
    """
    listed = list(dict.fromkeys(codes))
    present = set(listed)
    entries = []
    for code in listed:
        entry = reference(code)
        rows = "".join(
            f'<tr><th style="{_LABEL_CELL}">{heading}</th><td style="{_TEXT_CELL}">{body}</td></tr>'
            for heading, body in (
                ("What it means", escape(entry.meaning)),
                ("Why it causes the symptom", escape(entry.why)),
                ("How to fix", escape(entry.fix)),
                ("Evidence it reads", escape(entry.evidence)),
                ("Explains", _code_list(entry.explains, present)),
                ("Explained by", _code_list(entry.explained_by, present)),
            )
        )
        entries.append(
            f'<div class="kr-code-entry" id="{anchor(code)}" style="margin:10px 0;break-inside:avoid;">'
            f'<div style="margin-bottom:2px;"><code style="font-weight:700;font-size:14px;">{escape(code)}</code> '
            f'<span style="color:#374151;">default severity {_SEVERITY_TEXT[entry.severity]}, step '
            f"{escape(entry.step_title)}</span></div>"
            f'<table style="border-collapse:collapse;width:100%;table-layout:auto;margin:0;">{rows}</table></div>'
        )
    return "".join(entries)
