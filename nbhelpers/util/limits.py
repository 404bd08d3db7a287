"""Limits on input from outside: bundles, API server and Prometheus answers (issue #19).

Evidence bundles travel between people after incidents, and a live source may misbehave: every
byte read is treated as hostile. Each limit has a default here and an environment variable that
raises it; going over one stops that input with a one-line :class:`LimitExceeded` (a
``RunbookError``, so the CLI exits 2) saying which limit was hit and how to raise it. Live
readers turn it into a failed read instead, so the run goes on partial.

The shipped scenarios stay far below every default.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from nbhelpers.errors import RunbookError

MIB = 1024 * 1024
GIB = 1024 * MIB


@dataclass(frozen=True)
class Limit:
    """One bound: ``default`` unless the environment variable ``env`` says otherwise."""

    env: str
    default: int
    what: str  # what is bounded, e.g. "size of one bundle file"
    unit: str = ""  # "bytes" shows the value with a binary unit

    @property
    def value(self) -> int:
        """The limit in force (read from the environment at each use, so a test or a caller can change it)."""
        text = os.environ.get(self.env, "").strip().replace("_", "")
        if not text:
            return self.default
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise RunbookError(
                f"{self.env}={os.environ[self.env]!r}: give the {self.what} limit as a whole number >= 1"
            )
        return value

    def shown(self, number: int | None = None) -> str:
        amount = self.value if number is None else number
        return format_bytes(amount) if self.unit == "bytes" else f"{amount:,}"

    def exceeded(self, finding: str) -> LimitExceeded:
        """The error for ``finding`` (what was seen, e.g. "logs/x.log is 2.0 GiB") over this limit."""
        return LimitExceeded(self, finding)


class LimitExceeded(RunbookError):
    """An input went over a :class:`Limit`; the message names the limit and the variable that raises it."""

    def __init__(self, limit: Limit, finding: str) -> None:
        example = "BYTES" if limit.unit == "bytes" else "N"
        super().__init__(
            f"{finding}: over the limit of {limit.shown()} for the {limit.what} (raise it with {limit.env}={example})"
        )
        self.limit = limit
        self.finding = finding


def format_bytes(amount: int) -> str:
    """``2,000 bytes``, ``64 MiB``, ``1.5 GiB``."""
    for unit, size in (("GiB", GIB), ("MiB", MIB)):
        if amount >= size:
            return f"{amount / size:.1f}".removesuffix(".0") + f" {unit}"
    return f"{amount:,} bytes"


# --- bundles: checked before a byte of a file is read --------------------------------------------

MAX_BUNDLE_BYTES = Limit("KSERVE_RUNBOOK_MAX_BUNDLE_BYTES", 128 * MIB, "size of a bundle archive", "bytes")
MAX_BUNDLE_UNCOMPRESSED_BYTES = Limit(
    "KSERVE_RUNBOOK_MAX_BUNDLE_UNCOMPRESSED_BYTES", 256 * MIB, "total size of a bundle's files", "bytes"
)
MAX_BUNDLE_FILE_BYTES = Limit("KSERVE_RUNBOOK_MAX_BUNDLE_FILE_BYTES", 64 * MIB, "size of one bundle file", "bytes")
MAX_BUNDLE_FILES = Limit("KSERVE_RUNBOOK_MAX_BUNDLE_FILES", 10_000, "number of entries in a bundle")

# --- documents: JSON and YAML from bundles, the API server and Prometheus ------------------------

MAX_NESTING_DEPTH = Limit("KSERVE_RUNBOOK_MAX_NESTING_DEPTH", 100, "nesting depth of a JSON or YAML document")
MAX_INT_DIGITS = Limit("KSERVE_RUNBOOK_MAX_INT_DIGITS", 100, "digits of an integer in a JSON or YAML document")
MAX_YAML_ALIAS_NODES = Limit(
    "KSERVE_RUNBOOK_MAX_YAML_ALIAS_NODES", 10_000, "nodes repeated by YAML aliases in one document"
)

# --- live lists: one list request may page, but not forever --------------------------------------

MAX_LIST_PAGES = Limit("KSERVE_RUNBOOK_MAX_LIST_PAGES", 100, "pages of one list from the API server")
MAX_LIST_ITEMS = Limit("KSERVE_RUNBOOK_MAX_LIST_ITEMS", 50_000, "objects in one list from the API server")

ALL_LIMITS = (
    MAX_BUNDLE_BYTES,
    MAX_BUNDLE_UNCOMPRESSED_BYTES,
    MAX_BUNDLE_FILE_BYTES,
    MAX_BUNDLE_FILES,
    MAX_NESTING_DEPTH,
    MAX_INT_DIGITS,
    MAX_YAML_ALIAS_NODES,
    MAX_LIST_PAGES,
    MAX_LIST_ITEMS,
)
