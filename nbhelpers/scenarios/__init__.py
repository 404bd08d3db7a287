"""Training and demo scenarios: incident specs turned into realistic evidence bundles.

``scenarios/<name>.yaml`` (shipped in the wheel as ``nbhelpers/_data/scenarios``)
describes one incident; :func:`generate` turns it into bundle files, and
:func:`scenario_bundle` writes them once into a cache and returns the path a
triage can open with ``--bundle``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from nbhelpers import __version__
from nbhelpers.errors import RunbookError
from nbhelpers.scenarios.generator import generate
from nbhelpers.scenarios.spec import ScenarioError, ScenarioSpec, load_spec_file
from nbhelpers.sources.bundle import write_bundle_files
from nbhelpers.util.paths import data_dir

DEFAULT_SCENARIO = "port-mismatch"

__all__ = [
    "DEFAULT_SCENARIO",
    "ScenarioError",
    "ScenarioSpec",
    "generate",
    "list_scenarios",
    "load_spec",
    "scenario_bundle",
    "scenarios_dir",
]


def scenarios_dir() -> Path:
    """The folder of shipped specs: the installed package data first, else the source checkout."""
    try:
        return data_dir("scenarios")
    except FileNotFoundError as error:
        raise RunbookError(str(error)) from None


def list_scenarios() -> list[ScenarioSpec]:
    """Every shipped scenario, by name."""
    return sorted((load_spec_file(path) for path in scenarios_dir().glob("*.yaml")), key=lambda spec: spec.name)


def load_spec(name: str) -> ScenarioSpec:
    path = scenarios_dir() / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(spec.name for spec in list_scenarios()) or "none"
        raise ScenarioError(f"unknown scenario {name!r} (known: {known})")
    spec = load_spec_file(path)
    if spec.name != name:
        raise ScenarioError(f"{path}: name is {spec.name!r}, but the file is named {name!r}")
    return spec


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kserve-runbook" / "scenarios"


def _generator_digest() -> str:
    """A hash of the code that shapes bundles, so a cached bundle is rebuilt when that code changes."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256(__version__.encode())
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def scenario_bundle(name: str, cache_dir: Path | None = None) -> Path:
    """The bundle directory of a shipped scenario, generated on first use and cached after."""
    spec = load_spec(name)
    root = cache_dir or default_cache_dir()
    destination = root / f"{spec.name}-{spec.digest}-{_generator_digest()}"
    if (destination / "manifest.json").is_file():
        return destination
    files = generate(spec)
    try:
        return write_bundle_files(files, destination)
    except OSError:
        if (destination / "manifest.json").is_file():
            return destination  # another process wrote the same bundle first
        raise
