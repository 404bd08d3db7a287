"""The findings.json schema (docs/contracts.md#findingsjson-v1) accepts what the contract allows and nothing else."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from builders import CAPTURED_AT, bundle_files

from nbhelpers.checks import STEP_IDS, STEPS
from nbhelpers.findings.catalog import CATALOG, Severity
from nbhelpers.render.findings_json import (
    InvalidFindings,
    findings_schema,
    strict_findings_schema,
    validate_findings,
)
from nbhelpers.sources.bundle import write_bundle_files
from nbhelpers.triage import params_from_text, run

MINIMAL: dict[str, Any] = {
    "schema": "kserve-runbook/findings/v1",
    "tool_version": "0.1.0",
    "generated_at": "2026-01-01T00:00:00Z",
    "target": {"namespace": "llm", "isvc": "vllm-llm", "deployment_mode": "unknown"},
    "window": {"start": "2026-01-01T00:00:00Z", "end": "2026-01-01T01:00:00Z"},
    "sources": {"cluster": "bundle", "prometheus": "none"},
    "steps": [],
    "findings": [],
    "root_causes": [],
}


def full_document() -> dict[str, Any]:
    document = copy.deepcopy(MINIMAL)
    document.update(
        {
            "target": {
                "namespace": "llm",
                "isvc": "vllm-llm",
                "deployment_mode": "RawDeployment",
                "deployment_mode_raw": "Standard",
            },
            "incident": {"start": "2026-01-01T00:10:00Z", "end": "2026-01-01T00:40:00+00:00"},
            "sources": {"cluster": "live", "prometheus": "live"},
            "versions": {"kubernetes": "1.31", "vllm": "0.10.1"},
            "partial": True,
            "steps": [
                {"id": "probes", "status": "findings", "reason": "partial: forbidden on Event in llm", "seconds": 0.12}
            ],
            "findings": [
                {
                    "code": "PROBE_LIVENESS_KILLS_DURING_LOAD",
                    "step": "probes",
                    "severity": "critical",
                    "title": "liveness kills the container during the model load",
                    "summary": "load takes 240 s, liveness allows 90 s",
                    "objects": ["Pod/llm/vllm-llm-predictor-abc"],
                    "evidence": ["event: Liveness probe failed x12"],
                    "remediation": "kubectl patch ... --type merge",
                    "patch": {
                        "target": "InferenceService.serving.kserve.io/llm/vllm-llm",
                        "type": "merge",
                        "body": "spec: {}\n",
                    },
                }
            ],
            "root_causes": ["PROBE_LIVENESS_KILLS_DURING_LOAD"],
            "fleet_run_id": "extra top-level fields are allowed",
        }
    )
    return document


def test_schema_is_draft_2020_12() -> None:
    assert findings_schema()["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_schema_enums_are_the_codes_enums() -> None:
    definitions = findings_schema()["$defs"]
    assert tuple(definitions["step_id"]["enum"]) == STEP_IDS
    assert definitions["finding"]["properties"]["severity"]["enum"] == [level.value for level in Severity]


def test_published_schema_takes_any_well_formed_code_and_ours_only_the_catalog() -> None:
    published = findings_schema()["$defs"]["code"]
    assert "enum" not in published  # readers must accept codes added later: codes are added, never renamed
    assert all(re.fullmatch(published["pattern"], code) for code in CATALOG)
    assert strict_findings_schema()["$defs"]["code"]["enum"] == sorted(CATALOG)
    later = _set(full_document(), ("findings", 0, "code"), "CODE_ADDED_LATER")
    jsonschema.validate(later, findings_schema())
    with pytest.raises(InvalidFindings, match="at findings/0/code:"):
        validate_findings(later)
    with pytest.raises(InvalidFindings, match="at root_causes/0:"):
        validate_findings(_set(full_document(), ("root_causes", 0), "CODE_ADDED_LATER"))


def test_minimal_and_full_documents_validate() -> None:
    validate_findings(copy.deepcopy(MINIMAL))
    validate_findings(full_document())
    assert _reader_accepts(full_document())


def _set(document: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    node = document
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return document


@pytest.mark.parametrize(
    ("path", "value", "where"),
    [
        (("steps", 0, "status"), "failed", "steps/0/status"),
        (("findings", 0, "severity"), "high", "findings/0/severity"),
        (("target", "deployment_mode"), "Knative", "target/deployment_mode"),
        (("sources", "prometheus"), "thanos", "sources/prometheus"),
        (("sources", "cluster"), "none", "sources/cluster"),
        (("findings", 0, "code"), "probe-liveness", "findings/0/code"),
        (("root_causes", 0), "lower_case", "root_causes/0"),
        (("findings", 0, "patch", "type"), "json", "findings/0/patch/type"),
        (("findings", 0, "step"), "probe", "findings/0/step"),
        (("schema",), "kserve-runbook/findings/v2", "schema"),
        (("generated_at",), "2026-01-01 00:00", "generated_at"),
        (("partial",), "no", "partial"),
    ],
)
def test_wrong_values_fail(path: tuple[Any, ...], value: Any, where: str) -> None:
    document = _set(full_document(), path, value)
    with pytest.raises(InvalidFindings, match=f"at {where}:"):
        validate_findings(document)
    assert not _reader_accepts(document)


def _reader_accepts(document: dict[str, Any]) -> bool:
    """What a reader's draft 2020-12 validator (jsonschema) says of the document against the strict schema:
    our own check compiles the schema as draft-07 with fastjsonschema, and the two must agree."""
    return jsonschema.Draft202012Validator(strict_findings_schema()).is_valid(document)


def test_schema_keeps_to_keywords_both_drafts_share() -> None:
    """fastjsonschema compiles the schema as draft-07: a keyword that exists only in 2020-12 (or means
    something else there) would be silently ignored by our own check."""
    only_2020_12 = {
        "prefixItems", "$dynamicRef", "$dynamicAnchor", "unevaluatedProperties", "unevaluatedItems",
        "dependentRequired", "dependentSchemas", "minContains", "maxContains", "$anchor", "$vocabulary",
    }  # fmt: skip
    text = json.dumps(findings_schema())
    used = {keyword for keyword in only_2020_12 if f'"{keyword}"' in text}
    assert not used
    assert re.search(r'"items": \[', text) is None  # an array under "items" is a tuple in draft-07 only


@pytest.mark.parametrize(
    "path",
    [
        ("schema",),
        ("target",),
        ("window",),
        ("steps",),
        ("root_causes",),
        ("findings", 0, "evidence"),
        ("findings", 0, "remediation"),
        ("findings", 0, "patch", "body"),
        ("steps", 0, "seconds"),
        ("target", "isvc"),
    ],
)
def test_missing_fields_fail(path: tuple[Any, ...]) -> None:
    document = full_document()
    node = document
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    with pytest.raises(InvalidFindings, match=f"'{path[-1]}' is a required property"):
        validate_findings(document)
    assert not _reader_accepts(document)


def test_real_triage_result_validates(tmp_path: Path) -> None:
    isvc = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "vllm-llm", "namespace": "llm"},
        "spec": {"predictor": {"model": {"modelFormat": {"name": "huggingface"}}}},
    }
    bundle = write_bundle_files(bundle_files([isvc], "llm", "vllm-llm"), tmp_path / "bundle")
    result = run(
        params_from_text(
            {"bundle": str(bundle), "incident_start": "2026-01-15T11:10:00Z", "incident_end": "2026-01-15T11:30:00Z"}
        )
    )
    document = result.to_json()
    validate_findings(document)
    assert document["window"]["end"] == "2026-01-15T12:00:00Z" == CAPTURED_AT.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert [step["id"] for step in document["steps"]] == [step.id for step in STEPS]
