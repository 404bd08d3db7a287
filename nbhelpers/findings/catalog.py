"""The finding-code catalog (docs/contracts.md#finding-codes): one source of truth per code, read from ``catalog.yaml``.

The data file beside this module holds, for every code in the order ``kserve-runbook codes``
lists them, its step, default severity, title (what it means), why it causes the symptom, how to
fix it and the evidence its check reads; and the cause graph as groups of causes and effects. It is
read once, at import, through :mod:`importlib.resources` (so it works from a wheel) and validated:
a malformed catalog stops the import with a :class:`CatalogError` that names the entry at fault.

:data:`CATALOG` maps each code to its :class:`CodeInfo`. :data:`CAUSE_EDGES` is the cause graph:
an edge ``A -> B`` says "A, when present, explains B", and ranking puts A first; :func:`reachable`
follows it transitively. Info-severity codes are notes, not problems: they take no edges.

Arrangement, free of import cycles: this module defines :class:`Severity` (the catalog's default
severities are its values) and imports nothing else from nbhelpers. :mod:`nbhelpers.findings.model`
imports ``CATALOG``, ``Severity`` and ``reachable`` from here to build ``Finding`` and to rank root
causes; the catalog never imports the model. Everyone imports these names from this module.
"""

from __future__ import annotations

import enum
import fnmatch
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

import yaml

# libyaml's parser when it is installed; the pure-Python one reads the same document.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Severity(str, enum.Enum):
    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"critical": 0, "warning": 1, "info": 2}[self.value]


@dataclass(frozen=True)
class CodeInfo:
    code: str
    step: str
    severity: Severity
    title: str  # what it means, in one line
    why: str  # why it causes the symptom
    fix: str  # how to fix it, in general terms (each finding carries the exact command)
    evidence: str  # what the check reads to raise it


@dataclass(frozen=True)
class Catalog:
    codes: dict[str, CodeInfo]  # in the file's order
    edges: dict[str, frozenset[str]]  # every code, with the codes it explains directly


class CatalogError(ValueError):
    """The catalog data file is malformed; the message names the file and the entry."""


_FIELDS = ("code", "step", "severity", "title", "why", "fix", "evidence")
_EDGE_FIELDS = ("causes", "effects")
_CODE_PATTERN = re.compile(r"[A-Z][A-Z0-9_]*")


def parse_catalog(text: str, source: str = "catalog.yaml") -> Catalog:
    """Read and validate a catalog document; :class:`CatalogError` says what is wrong and where."""

    def fail(message: str) -> CatalogError:
        return CatalogError(f"{source}: {message}")

    try:
        document = yaml.load(text, Loader=_YAML_LOADER)
    except yaml.YAMLError as error:
        raise fail(f"not valid YAML: {error}") from None
    if not isinstance(document, dict) or set(document) != {"codes", "edges"}:
        raise fail("expected a mapping with exactly the keys 'codes' and 'edges'")
    codes = _parse_codes(document["codes"], fail)
    edges = _parse_edges(document["edges"], codes, fail)
    return Catalog(codes, edges)


def _parse_codes(entries: Any, fail: Callable[[str], CatalogError]) -> dict[str, CodeInfo]:
    if not isinstance(entries, list) or not entries:
        raise fail("'codes' must be a non-empty list of entries")
    codes: dict[str, CodeInfo] = {}
    for index, entry in enumerate(entries):
        where = f"codes[{index}]"
        if isinstance(entry, dict) and isinstance(entry.get("code"), str):
            where += f" ({entry['code']})"
        if not isinstance(entry, dict) or set(entry) != set(_FIELDS):
            found = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
            raise fail(f"{where}: expected exactly the fields {', '.join(_FIELDS)}; found {found}")
        empty = [name for name in _FIELDS if not isinstance(entry[name], str) or not entry[name].strip()]
        if empty:
            raise fail(f"{where}: {', '.join(empty)} must be non-empty text")
        code = entry["code"]
        if not _CODE_PATTERN.fullmatch(code):
            raise fail(f"{where}: code {code!r} is not UPPER_SNAKE_CASE")
        if code in codes:
            raise fail(f"{where}: duplicate code {code!r}")
        try:
            severity = Severity(entry["severity"])
        except ValueError:
            allowed = ", ".join(level.value for level in Severity)
            raise fail(f"{where}: severity {entry['severity']!r} is not one of {allowed}") from None
        codes[code] = CodeInfo(
            code=code,
            step=entry["step"],
            severity=severity,
            title=entry["title"],
            why=entry["why"],
            fix=entry["fix"],
            evidence=entry["evidence"],
        )
    return codes


def _parse_edges(
    groups: Any, codes: dict[str, CodeInfo], fail: Callable[[str], CatalogError]
) -> dict[str, frozenset[str]]:
    if not isinstance(groups, list):
        raise fail("'edges' must be a list of groups with 'causes' and 'effects'")

    def expand(where: str, pattern: str) -> list[str]:
        """Codes matching a pattern such as ``PROBE_*``; info codes (notes, not problems) take no edges."""
        matched = [code for code in codes if fnmatch.fnmatchcase(code, pattern)]
        if not matched:
            raise fail(f"{where}: pattern {pattern!r} matches no code")
        usable = sorted(code for code in matched if codes[code].severity is not Severity.INFO)
        if not usable:
            raise fail(f"{where}: pattern {pattern!r} matches only info codes, which take no edges")
        return usable

    edges: dict[str, set[str]] = {code: set() for code in codes}
    for index, group in enumerate(groups):
        where = f"edges[{index}]"
        if not isinstance(group, dict) or set(group) != set(_EDGE_FIELDS):
            raise fail(f"{where}: expected exactly the fields causes, effects")
        for name in _EDGE_FIELDS:
            patterns = group[name]
            if not isinstance(patterns, list) or not patterns or not all(isinstance(p, str) for p in patterns):
                raise fail(f"{where}: {name} must be a non-empty list of codes or patterns")
        sources = [code for pattern in group["causes"] for code in expand(f"{where}.causes", pattern)]
        targets = [code for pattern in group["effects"] for code in expand(f"{where}.effects", pattern)]
        for source in sources:
            edges[source].update(target for target in targets if target != source)
    return {code: frozenset(targets) for code, targets in edges.items()}


@functools.cache
def load() -> Catalog:
    """The packaged catalog, read and validated on first use; every later call returns the same object."""
    text = files("nbhelpers.findings").joinpath("catalog.yaml").read_text(encoding="utf-8")
    return parse_catalog(text)


CATALOG: dict[str, CodeInfo] = load().codes
CAUSE_EDGES: dict[str, frozenset[str]] = load().edges


def reachable(code: str) -> frozenset[str]:
    """Every code that ``code`` explains, directly or through any path."""
    seen: set[str] = set()
    stack = list(CAUSE_EDGES.get(code, ()))
    while stack:
        current = stack.pop()
        if current not in seen:
            seen.add(current)
            stack.extend(CAUSE_EDGES.get(current, ()))
    return frozenset(seen)
