"""The distribution: conda environment in step with pyproject, data files shipped in the wheel."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import tomllib
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _names(requirements: list[str]) -> dict[str, str]:
    return {re.split(r"[<>=!~\[ ]", item, maxsplit=1)[0].lower(): item for item in requirements}


def test_environment_yml_pip_section_matches_pyproject_dependencies() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(entry["pip"] for entry in environment["dependencies"] if isinstance(entry, dict))
    declared = _names(pyproject["project"]["dependencies"])
    listed = _names([item for item in pip_section if not item.startswith("-e")])
    assert listed == declared
    python_pin = next(
        entry for entry in environment["dependencies"] if isinstance(entry, str) and entry.startswith("python")
    )
    minimum = pyproject["project"]["requires-python"].removeprefix(">=")
    assert tuple(map(int, python_pin.split("=")[1].split("."))) >= tuple(map(int, minimum.split(".")))


def test_wheel_ships_runbooks_scenarios_and_schema(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    [wheel] = tmp_path.glob("kserve_vllm_runbooks-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "nbhelpers/_data/runbooks/triage.ipynb" in names
    assert any(name.startswith("nbhelpers/_data/scenarios/") and name.endswith(".yaml") for name in names)
    assert "nbhelpers/schemas/findings-v1.json" in names
    assert "nbhelpers/findings/catalog.yaml" in names  # the code catalog, read through importlib.resources
    assert "nbhelpers/py.typed" in names
    entry_points = next(name for name in names if name.endswith("entry_points.txt"))
    assert "kserve-runbook = nbhelpers.cli.main:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
