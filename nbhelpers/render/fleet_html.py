"""``fleet.html``: the fleet index as one self-contained page (docs/contracts.md#output-folder).

A table, worst service first, that sorts by any column when its header is clicked, with links to
each service's files. It opens offline: the style and the few lines of script are inline, and a
Content-Security-Policy forbids loading anything else. Every text comes from a cluster or from a
shard's ``fleet.json`` and is escaped; links are relative paths the caller has checked, quoted again.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import quote

_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
_COLUMNS = ("#", "service", "kind", "mode", "critical", "warning", "info", "top root cause", "run", "files")

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; color: #1b1b1b; }
table { border-collapse: collapse; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f0f0f0; cursor: pointer; user-select: none; }
th[aria-sort=ascending]::after { content: " \\25B2"; }
th[aria-sort=descending]::after { content: " \\25BC"; }
tr.critical td:nth-child(5) { background: #fbd5d5; font-weight: bold; }
tr.error td:nth-child(9) { background: #fde8c8; }
.caveat { font-style: italic; }
"""

# Sort the body's rows by the clicked column: numbers as numbers (cells carry data-sort), else text.
_SCRIPT = """
document.querySelectorAll("th").forEach((header, column) => {
  header.addEventListener("click", () => {
    const body = header.closest("table").tBodies[0];
    const ascending = header.getAttribute("aria-sort") !== "ascending";
    header.parentElement.querySelectorAll("th").forEach((other) => other.removeAttribute("aria-sort"));
    header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    const key = (row) => row.cells[column].dataset.sort ?? row.cells[column].textContent.trim();
    const rows = Array.from(body.rows);
    rows.sort((a, b) => {
      const x = key(a), y = key(b);
      const numeric = x !== "" && y !== "" && !isNaN(Number(x)) && !isNaN(Number(y));
      const order = numeric ? Number(x) - Number(y) : x.localeCompare(y);
      return ascending ? order : -order;
    });
    rows.forEach((row) => body.appendChild(row));
  });
});
"""


@dataclass(frozen=True)
class IndexRow:
    """One service's row; ``counts`` is ``None`` when it could not be triaged."""

    service: str  # namespace/name
    kind: str  # InferenceService | LLMInferenceService
    mode: str
    counts: tuple[int, int, int] | None
    top_cause: str
    run: str
    tier: str  # critical | error | warning | clean: the row's class
    links: tuple[tuple[str, str], ...]  # (label, path relative to the page)


def _text(value: str) -> str:
    return html.escape(value, quote=True)


def _href(path: str) -> str:
    return _text(quote(path, safe="/._-"))


def _row(position: int, row: IndexRow) -> str:
    counts = row.counts
    count_cells = (
        [f'<td data-sort="{count}">{count}</td>' for count in counts]
        if counts is not None
        else ['<td data-sort="-1">–</td>'] * 3
    )
    links = " · ".join(f'<a href="{_href(path)}">{_text(label)}</a>' for label, path in row.links) or "–"
    cells = [
        f'<td data-sort="{position}">{position}</td>',
        f"<td>{_text(row.service)}</td>",
        f"<td>{_text(row.kind)}</td>",
        f"<td>{_text(row.mode)}</td>",
        *count_cells,
        f"<td><code>{_text(row.top_cause)}</code></td>" if row.top_cause else "<td>–</td>",
        f"<td>{_text(row.run)}</td>",
        f"<td>{links}</td>",
    ]
    return f'<tr class="{_text(row.tier)}">' + "".join(cells) + "</tr>"


def fleet_html(title: str, caveat: str, facts: Sequence[str], rows: Sequence[IndexRow]) -> str:
    """The page: title, coverage caveat, a list of facts (totals, window ...), the sortable table."""
    header = "".join(f'<th scope="col">{_text(name)}</th>' for name in _COLUMNS)
    body = "\n".join(_row(position, row) for position, row in enumerate(rows, 1))
    fact_items = "".join(f"<li>{_text(fact)}</li>" for fact in facts)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_text(title)}</title>
<style>{_STYLE}</style>
</head>
<body>
<h1>{_text(title)}</h1>
<p class="caveat">{_text(caveat)}</p>
<ul>{fact_items}</ul>
<table>
<thead><tr>{header}</tr></thead>
<tbody>
{body}
</tbody>
</table>
<p>Click a column header to sort by it; click again to reverse.</p>
<script>{_SCRIPT}</script>
</body>
</html>
"""
