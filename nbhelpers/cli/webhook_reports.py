"""What the receiver serves of what it wrote: the run index, a run's files, and pruning old runs.

Only run folders directly under ``--out`` are ever read or removed: a folder named
``<UTC time>-<namespace>-<isvc>`` (see :func:`nbhelpers.cli.headless.output_dir`) that is a real
directory, not a symbolic link. A request names a file as ``/runs/<folder>/<file>`` in the raw request
path: the folder must have that exact form (so ``..``, ``%2e%2e``, ``/`` and every other escape
character fail before the file system is touched), the file must be one of :data:`SERVED_FILES`, and
both are opened with ``O_NOFOLLOW`` relative to the folder's descriptor, so a symbolic link planted
in the output folder or inside a run's folder is never followed.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

# The files of a run a browser may fetch, with their content types.
SERVED_FILES = {
    "report.html": "text/html; charset=utf-8",
    "summary.md": "text/markdown; charset=utf-8",
    "findings.json": "application/json",
    "evidence.tar.gz": "application/gzip",
}
INDEX_LINKS = ("report.html", "summary.md", "findings.json")
MAX_INDEX_ROWS = 200  # the newest runs listed on GET /
MAX_SERVED_BYTES = 64 << 20  # a larger file is not a report this tool wrote
MAX_FINDINGS_BYTES = 8 << 20
RUN_FOLDER = re.compile(r"(?P<stamp>\d{8}T\d{6}Z)-[a-z0-9][-a-z0-9.]*")
_RUN_FILE_PATH = re.compile(r"/runs/(?P<folder>[^/]+)/(?P<file>[^/]+)")
_SEVERITY_ORDER = ("critical", "warning", "info")


@dataclass(frozen=True)
class RunEntry:
    """One row of the index, read from a run folder's findings.json."""

    folder: str
    at: datetime
    service: str
    top_cause: str
    severity: str  # the worst finding's severity, "none", or "unreadable"
    coverage: str  # complete | partial | unknown
    files: tuple[str, ...]


def folder_time(name: str) -> datetime | None:
    """When the run started, from its folder name; ``None`` when the name is not a run folder's."""
    match = RUN_FOLDER.fullmatch(name)
    if not match:
        return None
    try:
        return datetime.strptime(match.group("stamp"), "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def run_folders(out: Path) -> list[tuple[str, datetime]]:
    """The run folders directly under ``out`` (real directories, never links), newest first."""
    found: list[tuple[str, datetime]] = []
    try:
        entries = list(os.scandir(out))
    except OSError:
        return []
    for entry in entries:
        at = folder_time(entry.name)
        if at is not None and entry.is_dir(follow_symlinks=False):
            found.append((entry.name, at))
    return sorted(found, key=lambda item: (item[1], item[0]), reverse=True)


def _open_in_run(out: Path, folder: str, file: str) -> int | None:
    """A read-only descriptor of ``out/folder/file`` when both are what they claim, else ``None``."""
    if folder_time(folder) is None or file not in SERVED_FILES:
        return None
    nofollow = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
    try:
        folder_fd = os.open(out / folder, nofollow | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return None
    try:
        file_fd = os.open(file, nofollow, dir_fd=folder_fd)
    except OSError:
        return None
    finally:
        os.close(folder_fd)
    if not stat.S_ISREG(os.fstat(file_fd).st_mode):
        os.close(file_fd)
        return None
    return file_fd


def _read_bounded(descriptor: int, limit: int) -> bytes | None:
    with os.fdopen(descriptor, "rb") as handle:
        data = handle.read(limit + 1)
    return None if len(data) > limit else data


def read_run_file(out: Path, raw_path: str) -> tuple[bytes, str] | None:
    """The bytes and content type of the run file ``raw_path`` names (``/runs/<folder>/<file>``), or ``None``.

    ``raw_path`` is the path exactly as sent, not percent-decoded: names with escapes never match.
    """
    match = _RUN_FILE_PATH.fullmatch(raw_path)
    if not match:
        return None
    descriptor = _open_in_run(out, match.group("folder"), match.group("file"))
    if descriptor is None:
        return None
    data = _read_bounded(descriptor, MAX_SERVED_BYTES)
    return None if data is None else (data, SERVED_FILES[match.group("file")])


def _findings(out: Path, folder: str) -> dict[str, Any] | None:
    descriptor = _open_in_run(out, folder, "findings.json")
    data = None if descriptor is None else _read_bounded(descriptor, MAX_FINDINGS_BYTES)
    if data is None:
        return None
    try:
        document = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return document if isinstance(document, dict) else None


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def read_entry(out: Path, folder: str, at: datetime) -> RunEntry:
    """The index row of one run folder; a folder without readable findings is listed as unreadable."""
    files = tuple(name for name in INDEX_LINKS if _has_file(out, folder, name))
    document = _findings(out, folder)
    if document is None:
        return RunEntry(folder, at, folder.split("-", 1)[-1], "", "unreadable", "unknown", files)
    target = document.get("target")
    target = target if isinstance(target, dict) else {}
    service = f"{_text(target.get('namespace'))}/{_text(target.get('isvc'))}"
    causes = document.get("root_causes")
    top = _text(causes[0]) if isinstance(causes, list) and causes else ""
    findings = document.get("findings")
    findings = findings if isinstance(findings, list) else []
    seen = {_text(finding.get("severity")) for finding in findings if isinstance(finding, dict)}
    severity = next((level for level in _SEVERITY_ORDER if level in seen), "none")
    partial = document.get("partial")
    coverage = "partial" if partial is True else "complete" if partial is False else "unknown"
    return RunEntry(folder, at, service, top, severity, coverage, files)


def _has_file(out: Path, folder: str, name: str) -> bool:
    descriptor = _open_in_run(out, folder, name)
    if descriptor is None:
        return False
    os.close(descriptor)
    return True


def recent_runs(out: Path, limit: int = MAX_INDEX_ROWS) -> list[RunEntry]:
    """The newest ``limit`` runs under ``out``, newest first."""
    return [read_entry(out, folder, at) for folder, at in run_folders(out)[:limit]]


_INDEX_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}"
    "th,td{border-bottom:1px solid #ddd;padding:.3em .8em;text-align:left;vertical-align:top}td:first-child,td:nth-child(2){white-space:nowrap}"
    ".critical{color:#b00020;font-weight:bold}.warning{color:#a15c00}"
)


def index_html(entries: Sequence[RunEntry], failures: Sequence[str] = ()) -> str:
    """The report index: one row per run with links relative to ``/`` (so it works behind a path prefix)."""
    rows = []
    for entry in entries:
        quoted = html.escape(entry.folder, quote=True)
        links = " ".join(f'<a href="runs/{quoted}/{name}">{name}</a>' for name in entry.files)
        rows.append(
            "<tr>"
            f"<td>{entry.at.strftime('%Y-%m-%d %H:%M:%S')} UTC</td>"
            f"<td>{html.escape(entry.service)}</td>"
            f"<td>{html.escape(entry.top_cause) or 'none'}</td>"
            f'<td class="{html.escape(entry.severity, quote=True)}">{html.escape(entry.severity)}</td>'
            f"<td>{html.escape(entry.coverage)}</td>"
            f"<td>{links}</td>"
            "</tr>"
        )
    table = (
        "<table><thead><tr><th>Time</th><th>Service</th><th>Top cause</th><th>Severity</th><th>Coverage</th>"
        "<th>Files</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
        if rows
        else "<p>No runs yet.</p>"
    )
    failed = (
        "<h2>Failed runs since the receiver started</h2><ul>"
        + "".join(f"<li>{html.escape(line)}</li>" for line in failures)
        + "</ul>"
        if failures
        else ""
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>kserve-runbook reports</title>'
        f"<style>{_INDEX_STYLE}</style></head><body><h1>kserve-runbook reports</h1>"
        f"<p>The newest runs first (at most {MAX_INDEX_ROWS}).</p>{table}{failed}</body></html>"
    )


def prune(out: Path, now: datetime, keep: int, keep_days: float) -> list[str]:
    """Remove run folders beyond the newest ``keep`` or older than ``keep_days`` (0: no such limit).

    Only run folders (see the module docstring) are removed; links and other files are left alone.
    Returns the names removed.
    """
    folders = run_folders(out)
    doomed = folders[keep:] if keep > 0 else []
    if keep_days > 0:
        oldest = now - timedelta(days=keep_days)
        doomed += [item for item in folders if item[1] < oldest and item not in doomed]
    removed = []
    for name, _at in doomed:
        with contextlib.suppress(OSError):
            shutil.rmtree(out / name)  # rmtree never follows links inside the folder
            removed.append(name)
    return removed
