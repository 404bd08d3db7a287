"""findings.json: the shipped schema, validation, the document's bytes, and writing the run's outputs.

The published schema, ``nbhelpers/schemas/findings-v1.json`` (:func:`findings_schema`), is what
readers validate against: it gives finding codes as a pattern, because codes are added, never
renamed, and a reader must accept codes added after it was written. Our own output is held to more:
before anything is written, ``findings.json`` is validated against :func:`strict_findings_schema`,
the published schema with ``code`` restricted to the codes of the catalog. A document that does not
match is a bug, and :class:`InvalidFindings` names the first offending field.

Our own check runs on every triage, before the verdict is printed, so it must be cheap: it uses
fastjsonschema (already installed with nbformat), which compiles the schema to Python in about 10 ms.
``import jsonschema`` costs about 0.9 s where jupyter-events has installed its format checkers
(rfc3987-syntax builds a grammar at import), more than the whole triage. The schema keeps to
keywords that mean the same in draft-07 and draft 2020-12 (``$defs`` are reached by JSON pointer), so
it is compiled as draft-07; tests/test_schema.py checks both that and that jsonschema's 2020-12
validator, which readers use, gives the same answers.

:func:`write_outputs` renders findings.json and summary.md before writing either, then writes each
atomically (:func:`~nbhelpers.util.files.write_atomic`), so a reader never sees half a report.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import fastjsonschema

from nbhelpers.findings.catalog import CATALOG
from nbhelpers.render.summary import summary_markdown
from nbhelpers.triage import TriageResult
from nbhelpers.util.files import write_atomic


class InvalidFindings(ValueError):
    """A findings document that does not match the strict findings.json schema (a bug: nothing is written)."""


@cache
def findings_schema() -> dict[str, Any]:
    """The shipped JSON Schema of findings.json (``nbhelpers/schemas/findings-v1.json``), for readers."""
    text = resources.files("nbhelpers").joinpath("schemas/findings-v1.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@cache
def strict_findings_schema() -> dict[str, Any]:
    """The shipped schema with ``code`` (of each finding and each root cause) one of the catalog's codes:
    what the findings.json this version writes must match."""
    schema = copy.deepcopy(findings_schema())
    schema["$defs"]["code"]["enum"] = sorted(CATALOG)
    return schema


@cache
def _strict_validator() -> Callable[[Any], Any]:
    """:func:`strict_findings_schema` compiled by fastjsonschema (see the module docstring for why draft-07)."""
    schema = dict(strict_findings_schema())
    schema["$schema"] = "http://json-schema.org/draft-07/schema#"
    return fastjsonschema.compile(schema)


def validate_findings(document: dict[str, Any]) -> None:
    """Raise :class:`InvalidFindings` naming the first offending field (against :func:`strict_findings_schema`)."""
    try:
        _strict_validator()(document)
    except fastjsonschema.JsonSchemaValueException as error:
        raise InvalidFindings(f"findings.json does not match schema at {_describe(error)}") from None


def _describe(error: fastjsonschema.JsonSchemaValueException) -> str:
    """``where: what`` for one validation error, e.g. ``findings/0: 'evidence' is a required property``."""
    path = list(error.path or [])[1:]  # the first element is fastjsonschema's name for the document, "data"
    where = "/".join(str(part) for part in path) or "(document)"
    if error.rule == "required" and isinstance(error.value, dict):
        missing = [name for name in error.rule_definition or [] if name not in error.value]
        return f"{where}: {missing[0]!r} is a required property"
    what = error.message.removeprefix(str(error.name)).strip()
    return f"{where}: {error.value!r} {what}"


def findings_json_bytes(result: TriageResult) -> bytes:
    """The validated findings.json text."""
    document = result.to_json()
    validate_findings(document)
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode()


def write_outputs(result: TriageResult, out_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """Write findings.json and summary.md into ``out_dir``; both are rendered before either is written."""
    directory = Path(out_dir)
    findings = findings_json_bytes(result)
    summary = summary_markdown(result).encode()
    return {
        "findings.json": write_atomic(directory / "findings.json", findings),
        "summary.md": write_atomic(directory / "summary.md", summary),
    }
