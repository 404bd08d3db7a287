"""Where the shipped runbooks and scenario specs live.

In a wheel they are package data under ``nbhelpers/_data/`` (pyproject's
force-include); in a source checkout (editable install, tests) they are the
top-level ``runbooks/`` and ``scenarios/`` folders.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def data_dir(name: str) -> Path:
    """The ``runbooks`` or ``scenarios`` folder."""
    installed = Path(str(resources.files("nbhelpers"))) / "_data" / name
    if installed.is_dir():
        return installed
    checkout = Path(str(resources.files("nbhelpers"))).parent / name
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"shipped folder {name!r} not found (looked in {installed} and {checkout})")


def runbook_path(name: str = "triage") -> Path:
    return data_dir("runbooks") / f"{name}.ipynb"
