"""The public API is pinned: what ``nbhelpers`` exports, and that each name is the defining object."""

from __future__ import annotations

import subprocess
import sys

import nbhelpers

PUBLIC = [
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


def test_the_exported_members_are_exactly_these() -> None:
    assert sorted(nbhelpers.__all__) == PUBLIC
    assert set(nbhelpers._PUBLIC) == set(PUBLIC) - {"__version__"}  # every exported name knows its module
    assert dir(nbhelpers) == PUBLIC


def test_each_public_name_is_the_object_its_module_defines() -> None:
    from nbhelpers.findings.catalog import CATALOG, Severity
    from nbhelpers.triage import TriageParams, run

    assert nbhelpers.run is run and nbhelpers.TriageParams is TriageParams
    assert nbhelpers.Severity is Severity and nbhelpers.CATALOG is CATALOG
    for name in PUBLIC:
        value = getattr(nbhelpers, name)
        if name != "__version__" and name != "CATALOG":
            assert getattr(value, "__module__", "").startswith("nbhelpers."), name


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        nbhelpers.triage_all  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as error:
        assert "triage_all" in str(error)
    else:
        raise AssertionError("no AttributeError")


def test_importing_a_lower_layer_does_not_load_the_checks() -> None:
    code = "import sys, nbhelpers.util.times; print(any(m.startswith('nbhelpers.checks') for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"
