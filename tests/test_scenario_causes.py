"""Every shipped scenario, triaged end to end: the run's root causes are the ones its spec expects.

This is the scenario library as a regression suite (issue 8): the bundle is generated from the
spec, written to disk, and read back by ``triage.run`` exactly as ``--bundle`` reads a capture.
A healthy scenario must give no critical or warning finding at all.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from scenario_cache import shipped_specs

from nbhelpers.findings.catalog import Severity
from nbhelpers.scenarios import scenario_bundle
from nbhelpers.triage import TriageResult

SCENARIOS = [spec.name for spec in shipped_specs()]
EXPECTED = {spec.name: spec.expected_root_causes for spec in shipped_specs()}
SERIOUS = (Severity.CRITICAL, Severity.WARNING)


@pytest.fixture(scope="module")
def results(shipped_result: Callable[[str], TriageResult]) -> dict[str, TriageResult]:
    return {name: shipped_result(name) for name in SCENARIOS}


def test_the_library_covers_the_503_504_oom_and_autoscaling_families_and_both_healthy_modes() -> None:
    first_causes = {causes[0] for causes in EXPECTED.values() if causes}
    assert {
        "ROUTING_LAYER_MISMATCH",
        "PROBE_LIVENESS_KILLS_DURING_LOAD",
        "PORT_MISMATCH",
        "RESOURCES_GPU_UNSCHEDULABLE",
        "RESOURCES_HOST_OOMKILLED",
        "COLDSTART_SCALE_TO_ZERO",
        "HPA_METRICS_API_UNAVAILABLE",
        "HPA_CPU_METRIC_ON_GPU",
        "TIMEOUT_LB_DEFAULT",
        "GPU_OOM",
        "HPA_TARGET_NOT_SERVING",
        "VLLM_KV_CAPACITY_EXCEEDED",
        "ENGINE_START_FAILED",
        "KV_CACHE_PRESSURE",
        "HPA_TARGET_ABOVE_POD_CAPACITY",
    } <= first_causes
    assert {"healthy-serverless", "healthy-raw"} <= {name for name, causes in EXPECTED.items() if not causes}
    # One incident with two independent causes, both expected at the top of the ranking.
    combined = next(spec for spec in shipped_specs() if spec.name == "rag-long-prompts-behind-nginx")
    assert len(combined.faults) == 2 and combined.expected_root_causes == ("KV_CACHE_PRESSURE", "TIMEOUT_LB_DEFAULT")


@pytest.mark.parametrize("name", SCENARIOS)
def test_root_causes_are_the_expected_ones(name: str, results: dict[str, TriageResult]) -> None:
    result = results[name]
    assert list(result.root_causes) == list(EXPECTED[name]), [
        (finding.code, finding.level.value, finding.title) for finding in result.findings
    ]


@pytest.mark.parametrize("name", [name for name in SCENARIOS if not EXPECTED[name]])
def test_healthy_scenarios_have_no_serious_finding(name: str, results: dict[str, TriageResult]) -> None:
    serious = [(finding.code, finding.title) for finding in results[name].findings if finding.level in SERIOUS]
    assert serious == []
    assert all(step.status != "error" for step in results[name].steps), [
        (step.id, step.reason) for step in results[name].steps if step.status == "error"
    ]


@pytest.mark.parametrize("name", [name for name in SCENARIOS if EXPECTED[name]])
def test_the_first_cause_is_reported_by_its_own_step_with_evidence(name: str, results: dict[str, TriageResult]) -> None:
    first = EXPECTED[name][0]
    findings = [finding for finding in results[name].findings if finding.code == first]
    assert findings, f"{first} not found"
    assert all(finding.evidence and finding.remediation for finding in findings)


def test_bundles_are_read_from_disk_like_a_capture(tmp_path: Path) -> None:
    bundle = scenario_bundle("gpu-capacity", tmp_path)
    assert (bundle / "manifest.json").is_file() and list((bundle / "objects").glob("*.yaml"))
    assert not (bundle / "logs").exists(), "pods that never ran have no logs"
