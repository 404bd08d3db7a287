"""kserve-vllm-runbooks helper library.

Data flows one way: sources -> gather -> checks -> findings -> ranking -> render
(docs/architecture.md). The public entry point is :func:`run`: one triage of one
InferenceService, from a live cluster or an evidence bundle.

The names in ``__all__`` are the public API; they load on first use, so that importing one
layer (``nbhelpers.util.times``, say) does not pull in the whole package.

Importing the package also tells Python that rfc3987-syntax is absent (:mod:`nbhelpers.util.lean_imports`):
with it, every process that imports jsonschema (the CLI through papermill, the report's kernel through
altair) spends about 0.8 s building a grammar for a format none of their schemas use.
"""

from __future__ import annotations

import importlib
from typing import Any

from nbhelpers.util.lean_imports import skip_unused_slow_imports

skip_unused_slow_imports()

__version__ = "0.1.0"

# public name -> the module that defines it
_PUBLIC: dict[str, str] = {
    "run": "nbhelpers.triage",
    "TriageParams": "nbhelpers.triage",
    "TriageResult": "nbhelpers.triage",
    "params_from_text": "nbhelpers.triage",
    "Evidence": "nbhelpers.evidence.model",
    "Finding": "nbhelpers.findings.model",
    "Severity": "nbhelpers.findings.catalog",
    "CATALOG": "nbhelpers.findings.catalog",
    "RunbookError": "nbhelpers.errors",
}

__all__ = [
    "CATALOG",
    "Evidence",
    "Finding",
    "RunbookError",
    "Severity",
    "TriageParams",
    "TriageResult",
    "__version__",
    "params_from_text",
    "run",
]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'nbhelpers' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)
