"""The tool's processes skip rfc3987-syntax's grammar build (nbhelpers/util/lean_imports.py)."""

from __future__ import annotations

import subprocess
import sys


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.strip()


def test_importing_the_package_keeps_jsonschema_from_building_the_iri_grammar() -> None:
    code = (
        "import nbhelpers, jsonschema, sys\n"
        "print(sorted(name for name in ('lark', 'rfc3987_syntax') if sys.modules.get(name) is not None))"
    )
    assert _run(code) == "[]"


def test_jsonschema_still_checks_the_formats_our_schemas_use() -> None:
    """Vega-Lite's schema uses ``uri`` and ``color-hex``; nbformat checks no formats; only ``iri`` is lost."""
    code = (
        "import nbhelpers, jsonschema\n"
        "checker = jsonschema.Draft7Validator.FORMAT_CHECKER\n"
        "print('iri' in checker.checkers, checker.conforms('not a date', 'date'))"
    )
    assert _run(code) == "False False"
