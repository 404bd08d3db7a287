"""The alert rules in deploy/alerts/: generated from one source, valid for promtool, unit-tested, and
labelled so that the webhook receiver triages the right InferenceService and the on-call engineer
reads the right step.

promtool comes with Debian's ``prometheus`` package (``./dev test`` installs it); without it the
promtool tests are skipped, the others still run.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from nbhelpers.checks import STEP_IDS
from nbhelpers.cli.webhook import find_target
from nbhelpers.evidence.model import Target

ROOT = Path(__file__).parents[1]
ALERTS = ROOT / "deploy" / "alerts"
RULE_FILE = ALERTS / "kserve-vllm.rules.yaml"
UNIT_TESTS = sorted((ROOT / "tests" / "alerts").glob("*.test.yaml"))
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian package prometheus)")


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_alerts", ALERTS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rules() -> list[dict[str, Any]]:
    document = yaml.safe_load(RULE_FILE.read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def _unit_cases() -> list[dict[str, Any]]:
    return [
        case
        for path in UNIT_TESTS
        for test in yaml.safe_load(path.read_text())["tests"]
        for case in test["alert_rule_test"]
    ]


def test_generated_files_are_up_to_date() -> None:
    generate = _generator()
    for path, content in generate.outputs(generate.load_source()).items():
        assert path.read_text() == content, f"{path.relative_to(ROOT)} is stale: run python deploy/alerts/generate.py"


def test_prometheusrule_holds_the_same_groups_as_the_rule_file() -> None:
    custom_resource = yaml.safe_load((ALERTS / "prometheusrule.yaml").read_text())
    assert custom_resource["apiVersion"] == "monitoring.coreos.com/v1"
    assert custom_resource["kind"] == "PrometheusRule"
    assert custom_resource["spec"]["groups"] == yaml.safe_load(RULE_FILE.read_text())["groups"]


def test_every_alert_names_the_service_a_severity_and_a_runbook_step() -> None:
    rules = _rules()
    assert len(rules) == len({rule["alert"] for rule in rules})
    for rule in rules:
        assert "by (namespace, inferenceservice)" in rule["expr"], rule["alert"]
        assert rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]
        step = rule["annotations"]["runbook_step"]
        assert step in STEP_IDS, rule["alert"]
        assert f"read step {step}" in rule["annotations"]["runbook"], rule["alert"]
        assert rule["annotations"]["summary"].startswith("{{ $labels.namespace }}/{{ $labels.inferenceservice }}")


def test_every_alert_has_a_firing_and_a_quiet_unit_test() -> None:
    cases = _unit_cases()
    for rule in _rules():
        mine = [case for case in cases if case["alertname"] == rule["alert"]]
        assert any(case.get("exp_alerts") for case in mine), f"{rule['alert']}: no test where it fires"
        assert any(case.get("exp_alerts") == [] for case in mine), f"{rule['alert']}: no test where it stays quiet"


def test_the_webhook_triages_the_service_each_expected_alert_names() -> None:
    """The labels of every alert the unit tests expect lead the receiver to that InferenceService."""
    expected = [alert for case in _unit_cases() for alert in case.get("exp_alerts") or []]
    assert expected
    for alert in expected:
        labels = {key: str(value) for key, value in alert["exp_labels"].items()}
        assert find_target(labels) == Target(labels["namespace"], labels["inferenceservice"])


@needs_promtool
def test_promtool_accepts_the_rule_files(tmp_path: Path) -> None:
    groups = yaml.safe_load((ALERTS / "prometheusrule.yaml").read_text())["spec"]
    from_custom_resource = tmp_path / "from-prometheusrule.yaml"
    from_custom_resource.write_text(yaml.safe_dump(groups))
    checked = subprocess.run(
        [str(PROMTOOL), "check", "rules", str(RULE_FILE), str(from_custom_resource)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


@needs_promtool
@pytest.mark.parametrize("unit_test", UNIT_TESTS, ids=lambda path: path.name)
def test_promtool_unit_tests_pass(unit_test: Path) -> None:
    result = subprocess.run(
        [str(PROMTOOL), "test", "rules", unit_test.name],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=unit_test.parent,
    )
    assert result.returncode == 0, result.stdout + result.stderr
