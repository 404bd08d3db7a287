"""run_step and run(): statuses, error capture, ignores, partial (docs/contracts.md#execution-model, docs/contracts.md#findingsjson-v1)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from builders import CAPTURED_AT, bundle_files, evidence_from_objects

from nbhelpers.checks import STEP_BY_ID, STEPS
from nbhelpers.errors import EvidenceMissing, RunbookError, StepSkipped
from nbhelpers.evidence.model import Evidence
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding
from nbhelpers.sources.bundle import write_bundle_files
from nbhelpers.triage import TriageParams, ignored_codes, params_from_text, run, run_step
from nbhelpers.util.times import Window

ISVC = {
    "apiVersion": "serving.kserve.io/v1beta1",
    "kind": "InferenceService",
    "metadata": {"name": "x", "namespace": "llm", "annotations": {"kserve-runbook/ignore": "PORT_MISMATCH"}},
}


@pytest.fixture(scope="module")
def evidence() -> Evidence:
    return evidence_from_objects([ISVC], "llm", "x")


def test_every_step_is_a_check_module_that_registers_itself() -> None:
    from nbhelpers.checks import CHECKS, STEP_IDS, check_for

    assert STEP_IDS == (
        "endpoints",
        "probes",
        "ports",
        "resources",
        "cold_start",
        "metric_pipeline",
        "scale_target",
        "queue_vs_oom",
        "timeouts",
    )
    for module in CHECKS:
        assert module.__name__ == f"nbhelpers.checks.{module.STEP.id}"
        assert check_for(module.STEP.id) is module.run
    with pytest.raises(KeyError):
        check_for("not-a-step")


def test_step_statuses_from_what_the_check_does(evidence: Evidence) -> None:
    step = STEP_BY_ID["ports"]

    def skipped(_evidence: Evidence) -> list[Finding]:
        raise StepSkipped("ModelMesh is out of scope")

    def missing(_evidence: Evidence) -> list[Finding]:
        raise EvidenceMissing("Pod in llm", "forbidden")

    def broken(_evidence: Evidence) -> list[Finding]:
        raise KeyError("spec")

    def finds(_evidence: Evidence) -> list[Finding]:
        return [Finding(code="PORT_MISMATCH", title="t", summary="s")]

    def informs(_evidence: Evidence) -> list[Finding]:
        return [Finding(code="PORT_MISMATCH", title="t", summary="s", severity=Severity.INFO)]

    assert run_step(step, skipped, evidence).status == "skipped"
    assert run_step(step, missing, evidence).reason == "missing evidence: Pod in llm: forbidden"
    assert run_step(step, broken, evidence).reason == "KeyError: 'spec'"
    assert run_step(step, finds, evidence).status == "findings"
    assert run_step(step, informs, evidence).status == "ok"
    ignored = run_step(step, finds, evidence, ignored={"PORT_MISMATCH": "--ignore"})
    assert ignored.status == "ok" and ignored.findings[0].level is Severity.INFO


def test_progress_reports_each_step(evidence: Evidence) -> None:
    events: list[tuple[str, str]] = []

    def skipped(_evidence: Evidence) -> list[Finding]:
        raise StepSkipped("out of scope")

    run_step(STEP_BY_ID["probes"], skipped, evidence, progress=lambda event, message: events.append((event, message)))
    assert events[0] == ("step-start", "probes")
    assert events[1][0] == "step-end" and events[1][1].startswith("probes skipped")


def test_run_on_a_bundle_reports_all_nine_steps(tmp_path: Path) -> None:
    bundle = write_bundle_files(bundle_files([ISVC], "llm", "x"), tmp_path / "b")
    result = run(TriageParams(bundle=str(bundle)), clock=lambda: CAPTURED_AT)
    assert [step.id for step in result.steps] == [step.id for step in STEPS]
    document = result.to_json()
    assert document["target"] == {
        "namespace": "llm",
        "isvc": "x",
        "deployment_mode": "unknown",
        "deployment_mode_raw": "",
    }
    assert document["sources"] == {"cluster": "bundle", "prometheus": "none"}
    assert document["generated_at"] == "2026-01-15T12:00:00Z"
    assert document["window"] == {"start": "2026-01-15T11:00:00Z", "end": "2026-01-15T12:00:00Z"}


def test_run_refuses_bad_input_with_one_line(tmp_path: Path) -> None:
    bundle = write_bundle_files(bundle_files([ISVC], "llm", "x"), tmp_path / "b")
    with pytest.raises(RunbookError, match=r"InferenceService 'nope' not found in namespace 'llm' \(existing: x\)"):
        run(TriageParams(bundle=str(bundle), isvc="nope"))
    with pytest.raises(RunbookError, match="window ends in the future"):
        run(params_from_text({"bundle": str(bundle), "start": "2026-01-15T11:00:00Z", "end": "2026-01-16T11:00:00Z"}))
    with pytest.raises(RunbookError, match="--namespace and --isvc are required"):
        run(TriageParams())


def test_ignores_come_from_the_flag_and_the_isvc_annotation(evidence: Evidence) -> None:
    assert ignored_codes(TriageParams(ignore=("GPU_OOM",)), evidence) == {
        "GPU_OOM": "--ignore",
        "PORT_MISMATCH": "annotation kserve-runbook/ignore",
    }


def test_text_is_parsed_once_into_typed_params_and_round_trips() -> None:
    params = params_from_text(
        {
            "namespace": "llm",
            "since": "1h30m",
            "incident_start": "2026-01-15T11:10:00+01:00",
            "incident_end": "2026-01-15T11:30:00Z",
            "ignore": "GPU_OOM, PORT_MISMATCH",
            "request_timeout": "",
            "client_timeout": "60s",
        }
    )
    assert params.since == timedelta(minutes=90) and params.request_timeout == timedelta(seconds=30)
    assert params.incident == Window(
        datetime(2026, 1, 15, 10, 10, tzinfo=timezone.utc), datetime(2026, 1, 15, 11, 30, tzinfo=timezone.utc)
    )
    assert params.ignore == ("GPU_OOM", "PORT_MISMATCH") and params.client_timeout == timedelta(seconds=60)
    assert params_from_text(params.to_text()) == params


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ({"since": "soon"}, "--since: bad duration 'soon'"),
        ({"start": "yesterday", "end": "2026-01-15T11:00:00Z"}, "--start"),
        ({"incident_start": "2026-01-15T11:00:00Z"}, "--incident-start and --incident-end go together"),
        ({"since": "1h", "start": "2026-01-15T11:00:00Z", "end": "2026-01-15T12:00:00Z"}, "not both"),
        ({"nmespace": "llm"}, "unknown triage parameter(s): nmespace"),
    ],
)
def test_bad_text_is_one_line_naming_the_option(text: dict[str, str], message: str) -> None:
    with pytest.raises(RunbookError) as raised:
        params_from_text(text)
    assert message in str(raised.value) and "\n" not in str(raised.value)
