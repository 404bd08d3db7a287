"""report.html: the executed notebook exported with nbconvert as an incident report.

:func:`report_view` puts the notebook in the report's reading order (it opens with the header the
runbook displayed, then the run parameters; code cells that display nothing and sections that show
nothing are dropped); :func:`render_html` exports it without code, with the SVG charts inlined,
refuses a page that would load anything from the network (:func:`external_references`) and writes
it atomically. ``ROLE_KEY``,
``HEADER_ROLE`` and ``TARGET_KEY`` are the display metadata the notebook layer sets on the outputs
this module rearranges.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from html import escape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from nbhelpers.errors import RunbookError
from nbhelpers.util.files import write_atomic

# Display metadata that marks outputs report.html rearranges (nbhelpers.notebook.display sets it).
ROLE_KEY = "kserve-runbook/role"
HEADER_ROLE = "header"
TARGET_KEY = "kserve-runbook/target"  # on the header: namespace/isvc, for the page's <title>
# Notebook parameters that say nothing about the run to a reader of the report.
_UNREPORTED_PARAMETERS = frozenset({"out_dir", "interactive"})

_REPORT_CSS = """
main { max-width: 1120px; margin: 0 auto; }
.jp-RenderedSVG svg { max-width: 100%; height: auto; }
.jp-RenderedHTMLCommon a code { color: inherit; }
@media print {
  @page { size: A4; margin: 12mm 10mm; }
  main { max-width: none; }
  .jp-Cell { padding: 0 !important; }
  .kr-finding, .kr-code-entry, .kr-verdict, .jp-RenderedSVG, table, pre { break-inside: avoid; }
  h1, h2, h3 { break-after: avoid; }
  a { color: inherit !important; text-decoration: none; }
  .anchor-link { display: none !important; }
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
}
"""

_REPORT_TEMPLATE = (
    """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block extra_css -%}<style type="text/css">"""
    + _REPORT_CSS
    + """</style>{%- endblock extra_css -%}
{%- block data_svg scoped -%}
<div class="jp-RenderedSVG jp-OutputArea-output {{ extra_class }}" data-mime-type="image/svg+xml">
{{ output.data['image/svg+xml'] }}
</div>
{%- endblock data_svg -%}
"""
)


def _role(output: Any) -> str:
    return str((output.get("metadata") or {}).get(ROLE_KEY) or "")


def _header_position(cells: Sequence[Any]) -> tuple[int, int] | None:
    """(cell index, output index) of the report header, when the notebook displayed one."""
    for cell_index, cell in enumerate(cells):
        for output_index, output in enumerate(cell.get("outputs") or ()):
            if _role(output) == HEADER_ROLE:
                return cell_index, output_index
    return None


def _without_empty_sections(cells: list[Any]) -> list[Any]:
    """Drop each markdown cell directly followed by another markdown cell or by nothing: after code
    cells without output are gone, that is a section heading with nothing under it."""
    kept = []
    for index, cell in enumerate(cells):
        following = cells[index + 1] if index + 1 < len(cells) else None
        if cell.get("cell_type") == "markdown" and (following is None or following.get("cell_type") == "markdown"):
            continue
        kept.append(cell)
    return kept


def _safe_value(value: Any) -> str:
    """A parameter as text, with credentials and query strings removed from URLs."""
    from urllib.parse import urlsplit, urlunsplit

    text = str(value)
    if "://" in text:
        parts = urlsplit(text)
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        text = urlunsplit((parts.scheme, host, parts.path, "", ""))
    return text


def run_parameters(notebook: Any) -> list[tuple[str, str]]:
    """The parameters papermill injected (the ones the run was given), minus empty and internal ones."""
    injected = ((notebook.get("metadata") or {}).get("papermill") or {}).get("parameters") or {}
    return [
        (name, _safe_value(value))
        for name, value in injected.items()
        if name not in _UNREPORTED_PARAMETERS and value not in ("", None, False, [], {})
    ]


def _parameters_output(parameters: Sequence[tuple[str, str]]) -> Any:
    import nbformat

    listed = " &nbsp;·&nbsp; ".join(f"<code>{escape(name)}={escape(value)}</code>" for name, value in parameters)
    markup = (
        '<div class="kr-parameters" style="font-family:system-ui,sans-serif;font-size:13px;margin:0 0 6px 0;'
        f'overflow-wrap:anywhere;"><strong>Run parameters:</strong> {listed or "none (the defaults)"}</div>'
    )
    return nbformat.v4.new_output("display_data", data={"text/html": markup})  # type: ignore[no-untyped-call]


def report_view(notebook: Any) -> Any:
    """The executed notebook as an incident report: it opens with the header the runbook displayed.

    Before the header sit the notebook's title, its parameters and the cell that runs the triage:
    written for someone running the notebook, not for a reader of the report. Their markdown is
    dropped, what their code cells displayed follows the header's cell, and the run parameters
    papermill recorded are shown under the header. Code cells that display nothing and sections
    that show nothing are dropped everywhere. A notebook without a header keeps its order.
    """
    cells = list(notebook.cells)
    position = _header_position(cells)
    if position is not None:
        cell_index, output_index = position
        header_cell = cells[cell_index]
        header_cell.outputs.insert(output_index + 1, _parameters_output(run_parameters(notebook)))
        earlier = [cell for cell in cells[:cell_index] if cell.get("cell_type") == "code"]
        cells = [header_cell, *earlier, *cells[cell_index + 1 :]]
    shown = [cell for cell in cells if cell.get("cell_type") != "code" or cell.get("outputs")]
    notebook.cells = _without_empty_sections(shown)
    return notebook


def _report_title(notebook: Any) -> str:
    """``Incident report: <namespace>/<isvc>``, the target named in the header's display metadata."""
    position = _header_position(list(notebook.cells))
    if position is None:
        return "kserve-runbook report"
    cell_index, output_index = position
    target = notebook.cells[cell_index].outputs[output_index].get("metadata", {}).get(TARGET_KEY, "")
    return f"Incident report: {target}" if target else "Incident report"


class _ExternalReferences(HTMLParser):
    """Collects scripts, stylesheets, frames and images that a browser would fetch from the network."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag in ("script", "img", "iframe", "embed", "source") and _remote(values.get("src")):
            self.found.append(f"<{tag} src={values['src']}>")
        if tag == "link" and _remote(values.get("href")):
            self.found.append(f"<link href={values['href']}>")
        self._in_script = tag in ("script", "style")

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and ('import("http' in data or "@import url(http" in data or "import 'http" in data):
            self.found.append(f"inline code loading a remote module: {data.strip()[:80]}")


def _remote(url: str | None) -> bool:
    return bool(url) and str(url).strip().lower().startswith(("http://", "https://", "//"))


def external_references(html_text: str) -> list[str]:
    """Every network fetch the page would make on load (empty for an offline report)."""
    parser = _ExternalReferences()
    parser.feed(html_text)
    return parser.found


def render_html(executed_notebook_path: str | os.PathLike[str], html_path: str | os.PathLike[str]) -> Path:
    """report.html from an executed notebook: outputs only, no code, nothing loaded from a CDN.

    The notebook is first turned into the report's reading order (:func:`report_view`).

    SVG outputs (the charts, rendered by vl-convert) are inlined as markup rather than base64 images,
    so their text stays searchable and the file smaller.
    """
    import nbformat
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    notebook = report_view(nbformat.read(os.fspath(executed_notebook_path), as_version=4))  # type: ignore[no-untyped-call]
    exporter = HTMLExporter(  # type: ignore[no-untyped-call]
        template_name="lab",
        extra_loaders=[DictLoader({"kserve_report.html.j2": _REPORT_TEMPLATE})],
        template_file="kserve_report.html.j2",
        exclude_input=True,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
    )
    body, _resources = exporter.from_notebook_node(notebook, resources={"metadata": {"name": _report_title(notebook)}})
    remote = external_references(body)
    if remote:
        raise RunbookError(f"report.html would load from the network: {', '.join(remote[:3])}")
    return write_atomic(Path(html_path), body.encode())
