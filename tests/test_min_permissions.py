"""Minimum permissions (issue #9): deploy/base/clusterrole.yaml is enough, all of it is needed, and a run that sees
almost nothing says so first.

The fixture API server enforces RBAC from the ClusterRole's own rules (``FakeApiServer.restrict_to``): a
request the role does not grant is answered 403 in the API server's words, as it would be for a service
account bound to the role. Knative's and Istio's CRDs come with the serverless fixture; KEDA's and the
Gateway API's are added, with an HTTPRoute that names a Gateway, so that every kind the triage reads is served.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from builders import comparable, load_yaml
from conftest import load_serverless_with_every_kind
from fakeapi import (
    FakeApiServer,
    PolicyRule,
    request_attributes,
    rules_of_cluster_roles,
    write_kubeconfig,
)

from nbhelpers.render.summary import inline
from nbhelpers.triage import TriageParams, params_from_text, run

pytestmark = pytest.mark.integration

CLUSTER_ROLE = Path(__file__).parents[1] / "deploy" / "base" / "clusterrole.yaml"
LLMISVC_STACK = "checks/healthy/llmisvc.yaml"  # an LLMInferenceService with its Gateway, route, pool and picker
WINDOW = {"start": "2026-01-15T11:00:00Z", "end": "2026-01-15T12:00:00Z"}


@pytest.fixture
def every_kind(fake_api: FakeApiServer, tmp_path: Path) -> Iterator[tuple[FakeApiServer, TriageParams]]:
    load_serverless_with_every_kind(fake_api)
    config = write_kubeconfig(tmp_path / "kubeconfig", fake_api.url)
    yield fake_api, params_from_text({"kubeconfig": str(config), "namespace": "llm", "isvc": "vllm-llm", **WINDOW})


def granted(rules: list[PolicyRule]) -> set[tuple[str, str]]:
    return {(group, resource) for rule in rules for group in rule.api_groups for resource in rule.resources}


def test_the_role_only_reads() -> None:
    rules = rules_of_cluster_roles(CLUSTER_ROLE)
    assert rules and {verb for rule in rules for verb in rule.verbs} == {"get", "list"}
    assert not [resource for _, resource in granted(rules) if resource in ("secrets", "*")]
    assert not [rule for rule in rules if "*" in rule.api_groups or rule.resource_names]


def test_a_triage_with_only_the_role_is_complete(every_kind: tuple[FakeApiServer, TriageParams]) -> None:
    server, params = every_kind
    unrestricted = run(params)
    server.clear_requests()
    server.restrict_to(rules_of_cluster_roles(CLUSTER_ROLE))

    restricted = run(params)

    assert [record for record in restricted.evidence.reads if record.status == "forbidden"] == []
    assert restricted.partial is False
    assert not [step.id for step in restricted.steps if step.status == "error"]
    assert comparable(restricted.to_json()) == comparable(unrestricted.to_json())


def test_every_rule_of_the_role_is_used(every_kind: tuple[FakeApiServer, TriageParams]) -> None:
    """Nothing in the role is there 'just in case': a triage of an InferenceService and one of an
    LLMInferenceService read every resource it grants between them."""
    server, params = every_kind
    server.restrict_to(rules := rules_of_cluster_roles(CLUSTER_ROLE))
    run(params)
    server.cluster.add_all(load_yaml(LLMISVC_STACK))
    llmisvc = run(replace(params, isvc="", llmisvc="llama-llmd"))
    assert [record for record in llmisvc.evidence.reads if record.status == "forbidden"] == []
    requested = {
        (attributes[0], attributes[2])
        for attributes in (request_attributes(request.path) for request in server.requests)
        if attributes is not None
    }
    assert granted(rules) == requested
    discovery = {request.path for request in server.requests if request_attributes(request.path) is None}
    assert discovery == {"/apis", "/version"}
    assert all(any(rule.grants_url("get", path) for rule in rules) for path in discovery)


def test_a_fleet_with_only_the_role_lists_both_kinds_in_a_namespace_and_across_namespaces(
    every_kind: tuple[FakeApiServer, TriageParams], tmp_path: Path
) -> None:
    """``fleet`` LISTs InferenceServices and LLMInferenceServices (issue #18): the role grants both lists."""
    from nbhelpers.cli.fleet import FleetRequest, run_fleet

    server, params = every_kind
    server.cluster.add_all(load_yaml(LLMISVC_STACK))
    server.restrict_to(rules_of_cluster_roles(CLUSTER_ROLE))
    fleet_params = replace(params, isvc="")
    for all_namespaces, out in ((False, "one"), (True, "all")):
        scope = replace(fleet_params, namespace="" if all_namespaces else "llm")
        result = run_fleet(FleetRequest(triage=scope, all_namespaces=all_namespaces, out=str(tmp_path / out)))
        assert [(item.kind, item.status) for item in result.listing] == [
            ("InferenceService", "ok"),
            ("LLMInferenceService", "ok"),
        ]
        assert {(entry.kind, entry.isvc) for entry in result.entries} >= {
            ("InferenceService", "vllm-llm"),
            ("LLMInferenceService", "llama-llmd"),
        }
    listed = {
        (attributes[2], attributes[1] or "*")
        for attributes in (request_attributes(request.path) for request in server.requests)
        if attributes is not None and not attributes[3]
    }
    assert {("inferenceservices", "llm"), ("llminferenceservices", "llm")} <= listed
    assert {("inferenceservices", "*"), ("llminferenceservices", "*")} <= listed


def test_a_run_that_sees_almost_nothing_says_so_first_and_fails_with_the_flag(
    every_kind: tuple[FakeApiServer, TriageParams], tmp_path: Path
) -> None:
    """403 on everything but the InferenceService, and Prometheus down: partial, the coverage line first in
    every output, and ``--fail-on-partial`` turns it into exit 1 for automation."""
    server, params = every_kind
    server.restrict_to(
        [
            PolicyRule(frozenset({"get"}), frozenset({"serving.kserve.io"}), frozenset({"inferenceservices"})),
            PolicyRule(frozenset({"get"}), non_resource_urls=("/apis",)),
        ]
    )
    out = tmp_path / "out"
    result = subprocess.run(
        [
            sys.executable, "-m", "nbhelpers", "triage", "--kubeconfig", params.kubeconfig, "-n", "llm",
            "--isvc", "vllm-llm", "--start", WINDOW["start"], "--end", WINDOW["end"],
            "--prometheus", "http://127.0.0.1:9", "--out", str(out), "--fail-on-partial", "--quiet",
        ],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip

    findings = json.loads((out / "findings.json").read_text())
    assert findings["partial"] is True
    assert [f for f in findings["findings"] if f["severity"] == "critical"] == []  # exit 1 is the flag's doing
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("kserve-runbook: partial result (--fail-on-partial): Coverage: could not see")

    coverage = result.stdout.splitlines()[0]
    assert coverage.startswith("Coverage: could not see everything: forbidden (403): ")
    assert "metrics unreachable: " in coverage
    summary = (out / "summary.md").read_text().splitlines()
    # the same line: summary.md writes it as markdown text (cluster text escaped), the terminal as printed
    assert summary[0].startswith("# ") and summary[2] == f"_{inline(coverage)}_"
    html = (out / "report.html").read_text()
    assert html.index("Coverage: could not see everything") < html.index("Step 1: Endpoints")
    steps = {step["id"]: step for step in findings["steps"]}
    assert all(
        step["status"] in ("error", "skipped") or step["reason"].startswith("partial: ") for step in steps.values()
    )
