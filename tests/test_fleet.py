"""``kserve-runbook fleet`` against the fixture API server (tests/fakeapi.py) with the real kubernetes client.

The fleet cluster (conftest ``fleet_api``): ``llm/vllm-llm`` healthy but its pod logs forbidden (partial),
``llm/qwen-chat`` scaled to zero with no GPU requested (critical), ``team-b/summarize`` healthy and
``team-b/chat`` listening on vLLM's default 8000 behind containerPort 8080 (PORT_MISMATCH, critical).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from builders import comparable, load_yaml
from fakeapi import FakeApiServer, crds_for_every_kind_read, write_kubeconfig
from promharness import PrometheusServer, prometheus_server  # noqa: F401  (pytest fixture)

from nbhelpers.cli.fleet import FleetRequest, run_fleet
from nbhelpers.errors import RunbookError
from nbhelpers.render.findings_json import findings_schema
from nbhelpers.triage import params_from_text, run
from nbhelpers.util.times import Window

pytestmark = pytest.mark.integration

START, END = "2026-01-15T10:00:00Z", "2026-01-15T12:00:00Z"  # every fixture time lies in 11:00-12:00
WORST_FIRST = ["team-b/chat", "llm/qwen-chat", "llm/vllm-llm", "team-b/summarize"]
ISVC_PATH = "/apis/serving.kserve.io/v1beta1"
# The fleet cluster serves serving.kserve.io/v1alpha1 (ServingRuntime) but has no LLMInferenceService CRD:
# this LIST answers 404, which says the CRD is not installed.
LLMISVC_LIST = "/apis/serving.kserve.io/v1alpha1/llminferenceservices"

# Reads that do not depend on the service: once per fleet, whatever the number of services.
CLUSTER_WIDE_PATHS = (
    "/apis",  # API discovery
    "/version",
    "/api/v1/nodes",
    "/apis/apiregistration.k8s.io/v1/apiservices",
    "/apis/serving.kserve.io/v1alpha1/clusterservingruntimes",
    "/api/v1/namespaces/kserve/configmaps/inferenceservice-config",
    "/api/v1/namespaces/knative-serving/configmaps/config-autoscaler",
    "/api/v1/namespaces/knative-serving/configmaps/config-defaults",
    "/api/v1/namespaces/knative-serving/configmaps/config-deployment",
    "/api/v1/namespaces/kube-system/services/metrics-server",
    "/apis/apps/v1/namespaces/kube-system/deployments",
    "/api/v1/namespaces/kube-system/configmaps",
    "/apis/networking.istio.io/v1/namespaces/knative-serving/gateways/knative-ingress-gateway",
    "/apis/networking.istio.io/v1/namespaces/knative-serving/gateways/knative-local-gateway",
)
# Namespace-wide lists (no label selector): once per namespace, shared by the services in it.
NAMESPACE_WIDE = (
    "/api/v1/namespaces/{ns}/services",
    "/api/v1/namespaces/{ns}/endpoints",
    "/api/v1/namespaces/{ns}/events",
    "/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
    "/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers",
    "/apis/networking.istio.io/v1/namespaces/{ns}/virtualservices",
    "/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses",
    "/apis/serving.kserve.io/v1alpha1/namespaces/{ns}/servingruntimes",
)


LLMISVC_STACK = "checks/healthy/llmisvc.yaml"  # llm/llama-llmd: LLMInferenceService, Gateway, route, pool, picker


def add_llmisvcs(server: FakeApiServer) -> None:
    """The fleet cluster with the LLMInferenceService CRD (and those of its stack) installed, the healthy
    ``llm/llama-llmd`` and an LLMInferenceService ``llm/qwen-chat`` beside the InferenceService of that name
    (no workload: KServe has not rendered it yet)."""
    installed = server.cluster.objects[("apiextensions.k8s.io", "customresourcedefinitions")]
    server.cluster.add_all(
        [crd for crd in crds_for_every_kind_read() if ("", crd["metadata"]["name"]) not in installed]
    )
    stack = load_yaml(LLMISVC_STACK)
    server.cluster.add_all(stack)
    (llmisvc,) = [obj for obj in stack if obj["kind"] == "LLMInferenceService"]
    namesake = json.loads(json.dumps(llmisvc).replace("llama-llmd", "qwen-chat"))
    server.cluster.add(namesake)


def request_for(kubeconfig: Path, out: Path, **options: Any) -> FleetRequest:
    namespace = options.pop("namespace", "")
    triage = params_from_text(
        {"kubeconfig": str(kubeconfig), "namespace": namespace, "start": START, "end": END, **options}
    )
    return FleetRequest(triage=triage, all_namespaces=not namespace, out=str(out))


def kserve_runbook(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nbhelpers", *arguments], capture_output=True, text=True, timeout=240, cwd=cwd
    )


def fleet_document(out: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((out / "fleet.json").read_text())
    return document


def service_findings(out: Path, entry: dict[str, Any]) -> dict[str, Any]:
    """A service's findings.json, validated against the shipped schema."""
    document: dict[str, Any] = json.loads((out / entry["path"] / "findings.json").read_text())
    jsonschema.validate(document, findings_schema())
    return document


def get_paths(server: FakeApiServer) -> Counter[str]:
    assert {request.method for request in server.requests} == {"GET"}
    return Counter(request.path for request in server.requests)


def add_copies(server: FakeApiServer, namespace: str, isvc: str, count: int) -> list[str]:
    """``count`` copies of a service under new names: every object whose name contains ``isvc``."""
    names = [f"{isvc}-copy{index}" for index in range(1, count + 1)]
    originals = [
        obj
        for bucket in server.cluster.objects.values()
        for (obj_namespace, name), obj in bucket.items()
        if obj_namespace == namespace and isvc in name
    ]
    assert len(originals) == 7  # InferenceService, Deployment, Pod, Service, Endpoints, EndpointSlice, Ingress
    for name in names:
        server.cluster.add_all(json.loads(json.dumps(obj).replace(isvc, name)) for obj in originals)
    return names


def test_all_namespaces_writes_each_service_and_an_index_worst_first(
    fleet_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    out = tmp_path / "fleet"
    result = run_fleet(request_for(kubeconfig, out))

    assert result.exit_code == 1  # PORT_MISMATCH and RESOURCES_GPU_NOT_VISIBLE are critical
    index = fleet_document(out)
    assert index["schema"] == "kserve-runbook/fleet/v1"
    assert index["scope"] == {"all_namespaces": True, "namespace": None}
    assert index["sources"] == {"cluster": "live", "prometheus": "none"}
    assert index["window"] == {"start": START, "end": END}
    services = index["services"]
    assert [f"{entry['namespace']}/{entry['isvc']}" for entry in services] == WORST_FIRST
    by_ref = {f"{entry['namespace']}/{entry['isvc']}": entry for entry in services}
    assert by_ref["team-b/chat"]["top_root_cause"] == "PORT_MISMATCH"
    assert by_ref["team-b/chat"]["counts"]["critical"] == 3
    assert by_ref["llm/qwen-chat"]["top_root_cause"] == "RESOURCES_GPU_NOT_VISIBLE"
    assert (by_ref["llm/qwen-chat"]["counts"]["critical"], by_ref["llm/qwen-chat"]["counts"]["warning"]) == (1, 3)
    assert by_ref["llm/vllm-llm"]["status"] == "partial" and by_ref["llm/vllm-llm"]["partial"] is True
    assert by_ref["team-b/summarize"]["status"] == "complete" and by_ref["team-b/summarize"]["top_root_cause"] is None
    assert index["totals"] == {
        "services": 4,
        "critical": 2,
        "error": 0,
        "warning": 0,
        "clean": 2,
        "partial": 1,
    }

    for entry in services:
        assert entry["path"] == f"{entry['namespace']}/{entry['isvc']}"
        assert sorted(path.name for path in (out / entry["path"]).iterdir()) == ["findings.json", "summary.md"]
        findings = service_findings(out, entry)
        assert findings["target"]["namespace"] == entry["namespace"] and findings["target"]["isvc"] == entry["isvc"]
        assert findings["partial"] is entry["partial"]
        assert findings["root_causes"][:1] == ([entry["top_root_cause"]] if entry["top_root_cause"] else [])
        severities = Counter(finding["severity"] for finding in findings["findings"])
        assert entry["counts"] == {level: severities[level] for level in ("critical", "warning", "info")}

    markdown = (out / "fleet.md").read_text().splitlines()
    assert markdown[0] == "# Fleet triage: all namespaces"
    assert markdown[2].startswith("_Coverage: could not see everything: 1 of 4 ran with reads missing (partial): ")
    assert "llm/vllm-llm" in markdown[2] and "no Prometheus configured" in markdown[2]
    rows = [line for line in markdown if re.match(r"^\| \d+ \|", line)]
    assert [row.split(" | ")[1] for row in rows] == WORST_FIRST
    assert "**partial**" in rows[2] and "[summary](llm/vllm-llm/summary.md)" in rows[2]


def test_each_service_gets_the_findings_of_its_own_triage(
    fleet_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    """Sharing reads between services changes no finding: each findings.json equals a lone ``run()``."""
    out = tmp_path / "fleet"
    run_fleet(request_for(kubeconfig, out))
    for entry in fleet_document(out)["services"]:
        alone = run(
            params_from_text(
                {
                    "kubeconfig": str(kubeconfig),
                    "namespace": entry["namespace"],
                    "isvc": entry["isvc"],
                    "start": START,
                    "end": END,
                }
            )
        )
        assert comparable(service_findings(out, entry)) == comparable(alone.to_json()), entry["isvc"]


def test_cluster_wide_reads_are_made_once_and_namespace_lists_once_per_namespace(
    fleet_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    run_fleet(request_for(kubeconfig, tmp_path / "fleet"))
    paths = get_paths(fleet_api)

    assert paths[f"{ISVC_PATH}/inferenceservices"] == 1  # one LIST across namespaces finds the four services
    assert paths[LLMISVC_LIST] == 1  # and one finds no LLMInferenceService
    for path in CLUSTER_WIDE_PATHS:
        assert paths[path] == 1, path
    for namespace in ("llm", "team-b"):
        for template in NAMESPACE_WIDE:
            assert paths[template.format(ns=namespace)] == 1, template.format(ns=namespace)
        for isvc in {"llm": ("vllm-llm", "qwen-chat"), "team-b": ("chat", "summarize")}[namespace]:
            # The GET of each InferenceService is the service's own: its freshest state.
            assert paths[f"{ISVC_PATH}/namespaces/{namespace}/inferenceservices/{isvc}"] == 1
        # The label-selected lists are per service: two services, two of each.
        assert paths[f"/api/v1/namespaces/{namespace}/pods"] == 2
        assert paths[f"/apis/apps/v1/namespaces/{namespace}/deployments"] == 2
    # 4 services: 2 lists (one per kind) + 14 cluster-wide + 2 x 8 namespace lists + 4 x (ISVC GET + 6
    # label-selected lists) + the logs (vllm-llm: 2 containers, forbidden; chat and summarize: 1 each; qwen-chat
    # has no pod).
    assert sum(paths.values()) == 2 + 14 + 16 + 4 * 7 + 4 == 64


def test_each_further_service_costs_only_its_own_reads(
    fleet_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    """N services -> M GETs: a service added to a namespace adds its own reads, not a whole triage's."""
    run_fleet(request_for(kubeconfig, tmp_path / "two", namespace="team-b"))
    two_services = len(fleet_api.requests)
    fleet_api.clear_requests()
    run(
        params_from_text(
            {"kubeconfig": str(kubeconfig), "namespace": "team-b", "isvc": "summarize", "start": START, "end": END}
        )
    )
    one_triage = len(fleet_api.requests)

    copies = add_copies(fleet_api, "team-b", "summarize", 5)
    fleet_api.clear_requests()
    result = run_fleet(request_for(kubeconfig, tmp_path / "seven", namespace="team-b"))
    seven_services = sum(get_paths(fleet_api).values())

    assert len(result.entries) == 7 and {f"team-b/{name}" for name in copies} <= {e.ref for e in result.entries}
    # A lone triage of one service makes 28 reads. Two services: 2 lists (one per kind) + 12 cluster-wide (no
    # Gateway is named in team-b) + 8 namespace-wide + 2 x 8 of their own = 38, not 56. Each further service
    # adds its own 8: the GET of the InferenceService, 6 lists by its label (ksvc, Revision, PodAutoscaler,
    # Deployment, ReplicaSet, Pod) and the log of its one container. Seven services: 78 reads, not 196.
    assert (one_triage, two_services, seven_services) == (28, 38, 78)
    assert (seven_services - two_services) / 5 == 8


def test_a_forbidden_cluster_wide_kind_costs_one_request_and_every_run_says_so(
    fleet_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    fleet_api.inject("/api/v1/nodes", status=403)
    out = tmp_path / "fleet"
    run_fleet(request_for(kubeconfig, out))

    assert get_paths(fleet_api)["/api/v1/nodes"] == 1
    for entry in fleet_document(out)["services"]:
        assert entry["status"] == "partial"
        summary = (out / entry["path"] / "summary.md").read_text()
        assert "forbidden (403): Node" in summary.splitlines()[2]


def test_namespace_scope_lists_one_namespace_and_reads_nothing_elsewhere(
    fleet_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    out = tmp_path / "fleet"
    result = run_fleet(request_for(kubeconfig, out, namespace="team-b"))

    assert [entry.ref for entry in result.entries] == ["team-b/chat", "team-b/summarize"]
    assert fleet_document(out)["scope"] == {"all_namespaces": False, "namespace": "team-b"}
    paths = get_paths(fleet_api)
    assert paths[f"{ISVC_PATH}/namespaces/team-b/inferenceservices"] == 1
    assert paths[f"{ISVC_PATH}/inferenceservices"] == 0
    assert not [path for path in paths if "/namespaces/llm/" in path]
    assert sorted(path.name for path in out.iterdir()) == ["fleet.html", "fleet.json", "fleet.md", "team-b"]


def test_a_service_whose_triage_fails_is_recorded_and_the_fleet_goes_on(
    fleet_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    fleet_api.inject(f"{ISVC_PATH}/namespaces/team-b/inferenceservices/summarize", status=500)
    out = tmp_path / "fleet"
    result = run_fleet(request_for(kubeconfig, out))

    assert result.exit_code == 1
    services = fleet_document(out)["services"]
    # Not triaged ranks after the critical services, before the rest: nobody knows what is wrong there.
    assert [f"{entry['namespace']}/{entry['isvc']}" for entry in services] == [
        "team-b/chat",
        "llm/qwen-chat",
        "team-b/summarize",
        "llm/vllm-llm",
    ]
    failed = services[2]
    assert failed["status"] == "error" and failed["path"] is None and failed["top_root_cause"] is None
    assert failed["reason"].startswith("cannot read InferenceService team-b/summarize: HTTP 500 from the API server")
    assert not (out / "team-b" / "summarize").exists()
    markdown = (out / "fleet.md").read_text()
    assert "1 of 4 could not be triaged: team-b/summarize (cannot read InferenceService" in markdown
    assert "| 3 | team-b/summarize | InferenceService | unknown | – | – | – | – | **error**: cannot read" in markdown


def test_no_critical_finding_in_any_service_exits_0(fleet_api: FakeApiServer, kubeconfig: Path, tmp_path: Path) -> None:
    del fleet_api.cluster.objects[("serving.kserve.io", "inferenceservices")][("team-b", "chat")]
    result = run_fleet(request_for(kubeconfig, tmp_path / "fleet", namespace="team-b"))

    assert [(entry.ref, entry.status) for entry in result.entries] == [("team-b/summarize", "complete")]
    assert result.exit_code == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"namespace": "nowhere"},
            "no InferenceService in namespace 'nowhere' (the LLMInferenceService CRD is not installed, so none was "
            "listed): nothing to triage",
        ),
        ({"namespace": "team-b", "isvc": "chat"}, "drop --isvc (or use triage for one)"),
        ({"namespace": "team-b", "llmisvc": "chat"}, "drop --llmisvc (or use triage for one)"),
    ],
)
def test_bad_scope_is_refused_before_anything_is_written(
    fleet_api: FakeApiServer, kubeconfig: Path, tmp_path: Path, options: dict[str, str], message: str
) -> None:
    with pytest.raises(RunbookError, match=re.escape(message)):
        run_fleet(request_for(kubeconfig, tmp_path / "fleet", **options))
    assert not (tmp_path / "fleet").exists()


def test_a_cluster_without_kserve_is_one_error(fake_api: FakeApiServer, kubeconfig: Path, tmp_path: Path) -> None:
    neither = (
        "the InferenceService CRD (serving.kserve.io) is not installed in this cluster, nor the LLMInferenceService"
    )
    with pytest.raises(RunbookError, match=re.escape(neither)):
        run_fleet(request_for(kubeconfig, tmp_path / "fleet"))
    assert [request.path for request in fake_api.requests] == ["/apis"]  # discovery alone tells


def test_a_forbidden_list_of_services_is_one_error(fleet_api: FakeApiServer, kubeconfig: Path, tmp_path: Path) -> None:
    fleet_api.inject(f"{ISVC_PATH}/inferenceservices", status=403)
    with pytest.raises(RunbookError) as refused:
        run_fleet(request_for(kubeconfig, tmp_path / "fleet"))
    assert str(refused.value).startswith(
        'cannot list InferenceServices in any namespace: inferenceservices is forbidden: User "system:serviceaccount'
    )
    assert not (tmp_path / "fleet").exists()


def test_an_unreachable_api_server_is_one_error(tmp_path: Path) -> None:
    closed = write_kubeconfig(tmp_path / "closed", "http://127.0.0.1:1", token=None)
    with pytest.raises(RunbookError, match=r"cannot connect to the API server http://127\.0\.0\.1:1"):
        run_fleet(request_for(closed, tmp_path / "fleet"))


def test_the_cli_writes_the_default_folder_and_exits_1_on_a_critical_finding(
    fleet_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    result = kserve_runbook(
        "fleet", "--kubeconfig", str(kubeconfig), "--all-namespaces", "--start", START, "--end", END, cwd=tmp_path
    )
    assert result.returncode == 1, result.stderr
    folders = list((tmp_path / "outputs").iterdir())
    assert len(folders) == 1 and re.fullmatch(r"\d{8}T\d{6}Z-fleet-all", folders[0].name)
    assert result.stdout.splitlines() == [
        f"fleet: {Path('outputs') / folders[0].name / 'fleet.md'}",
        "4 InferenceService(s): 2 critical, 0 not triaged, 0 warning only, 1 partial",
    ]
    assert [entry["isvc"] for entry in fleet_document(folders[0])["services"]] == [
        ref.split("/")[1] for ref in WORST_FIRST
    ]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["-n", "nowhere"], "no InferenceService in namespace 'nowhere' (the LLMInferenceService CRD"),
        (["-n", "llm", "-A"], "--namespace and --all-namespaces exclude each other"),
        ([], "pass --namespace NS, or --all-namespaces for every namespace"),
        (["-A", "--since", "9d"], "7 days"),
    ],
)
def test_the_cli_refuses_bad_input_with_one_line_and_exit_2(
    fleet_api: FakeApiServer, kubeconfig: Path, tmp_path: Path, arguments: list[str], message: str
) -> None:
    result = kserve_runbook("fleet", "--kubeconfig", str(kubeconfig), *arguments, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert message in result.stderr
    assert not (tmp_path / "outputs").exists()


def test_the_cli_refuses_an_out_folder_that_is_not_empty(
    fleet_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    out = tmp_path / "used"
    out.mkdir()
    (out / "keep.txt").write_text("earlier run")
    result = kserve_runbook("fleet", "--kubeconfig", str(kubeconfig), "-A", "--out", str(out), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == f"kserve-runbook: error: --out {out} exists and is not empty: choose a new folder"
    assert fleet_api.requests == []  # refused before anything was read


def test_metrics_from_a_real_prometheus_reach_the_fleet_index(
    fleet_api: FakeApiServer,
    kubeconfig: Path,
    prometheus_server: PrometheusServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    out = tmp_path / "fleet"
    result = run_fleet(request_for(kubeconfig, out, namespace="llm", prometheus=prometheus_server.url))

    index = fleet_document(out)
    assert index["sources"] == {"cluster": "live", "prometheus": "live"}
    by_isvc = {entry["isvc"]: entry for entry in index["services"]}
    # tests/promharness.py recorded an OOM kill and KV-cache pressure for llm/vllm-llm: only metrics show them.
    assert {"RESOURCES_HOST_OOMKILLED", "KV_CACHE_PRESSURE"} <= set(by_isvc["vllm-llm"]["root_causes"])
    assert by_isvc["vllm-llm"]["top_root_cause"] == "RESOURCES_HOST_OOMKILLED"
    alone = run(
        params_from_text(
            {
                "kubeconfig": str(kubeconfig),
                "namespace": "llm",
                "isvc": "vllm-llm",
                "prometheus": prometheus_server.url,
                "start": START,
                "end": END,
            }
        )
    )
    assert by_isvc["vllm-llm"]["root_causes"] == list(alone.root_causes)
    assert [entry.ref for entry in result.entries] == ["llm/vllm-llm", "llm/qwen-chat"]
    assert "no Prometheus configured" not in (out / "fleet.md").read_text()


@pytest.mark.notebook
def test_notebooks_add_the_executed_notebook_and_the_html_report(
    fleet_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    fleet_api.inject(f"{ISVC_PATH}/namespaces/team-b/inferenceservices/chat", status=500)
    out = tmp_path / "fleet"
    request = request_for(kubeconfig, out, namespace="team-b")
    result = run_fleet(replace(request, notebooks=True))

    folder = out / "team-b" / "summarize"
    assert sorted(path.name for path in folder.iterdir()) == [
        "findings.json",
        "report.html",
        "summary.md",
        "triage.ipynb",
    ]
    failed, done = fleet_document(out)["services"]
    assert done["status"] == "complete" and service_findings(out, done)["target"]["isvc"] == "summarize"
    # The service that cannot be read fails before a kernel starts, and leaves no folder behind.
    assert failed["status"] == "error" and failed["path"] is None and not (out / "team-b" / "chat").exists()
    assert "[report](team-b/summarize/report.html)" in (out / "fleet.md").read_text()
    assert result.exit_code == 0  # nothing critical was found; the service not triaged is flagged in the index


def test_fail_on_partial_turns_a_blind_spot_into_exit_1(
    fleet_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    """team-b's healthy service with its events forbidden is a partial run: exit 0 normally, 1 when asked."""
    del fleet_api.cluster.objects[("serving.kserve.io", "inferenceservices")][("team-b", "chat")]
    fleet_api.inject("/api/v1/namespaces/team-b/events*", status=403)
    arguments = ("fleet", "--kubeconfig", str(kubeconfig), "-n", "team-b", "--start", START, "--end", END)
    plain = kserve_runbook(*arguments, "--out", "plain", cwd=tmp_path)
    strict = kserve_runbook(*arguments, "--out", "strict", "--fail-on-partial", cwd=tmp_path)

    assert plain.returncode == 0 and "0 critical" in plain.stdout and "1 partial" in plain.stdout, plain.stdout
    assert strict.returncode == 1
    assert strict.stderr.strip().splitlines() == [
        f"kserve-runbook: partial result (--fail-on-partial): 1 service(s) not fully seen; see {Path('strict') / 'fleet.md'}"
    ]


def test_the_deadline_bounds_the_whole_fleet_and_names_the_services_not_reached(
    fleet_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    """Every GET of an InferenceService stalls 0.6 s: with 1.5 s for four services the fleet stops in time,
    says which services it did not reach, and still writes its index."""
    fleet_api.inject(f"{ISVC_PATH}/namespaces/*/inferenceservices/*", delay=0.6)
    began = time.monotonic()
    result = run_fleet(request_for(kubeconfig, tmp_path / "fleet", deadline="1500ms"))
    elapsed = time.monotonic() - began

    assert elapsed < 1.5 + 1.5, elapsed
    reasons = [entry.reason for entry in result.entries if entry.status == "error"]
    assert any("not triaged: --deadline 1500ms was reached before its turn" in reason for reason in reasons)
    assert len(result.entries) == 4 and (tmp_path / "fleet" / "fleet.json").exists()


def test_a_bad_fleet_deadline_is_refused_before_anything_is_read(
    fleet_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    with pytest.raises(RunbookError, match="bad duration 'soon'"):
        run_fleet(request_for(kubeconfig, tmp_path / "fleet", deadline="soon"))
    assert fleet_api.requests == [] and not (tmp_path / "fleet").exists()


def test_a_fleet_where_no_service_could_be_triaged_exits_2_not_0() -> None:
    from nbhelpers.cli.fleet import FleetResult, ServiceEntry

    def result(*statuses: str) -> FleetResult:
        window = Window(datetime(2026, 1, 15, 11, tzinfo=timezone.utc), datetime(2026, 1, 15, 12, tzinfo=timezone.utc))
        entries = tuple(ServiceEntry("llm", f"s{index}", status, "boom") for index, status in enumerate(statuses))
        return FleetResult(Path("f"), "namespace llm", False, "llm", window, {}, window.end, entries)

    assert result("error", "error").exit_code == 2  # automation must not read "nothing triaged" as healthy
    assert result("error", "complete").exit_code == 0
    assert result("complete").exit_code == 0


# ------------------------------------------------------------------------------------- LLMInferenceService


def test_llminferenceservices_are_triaged_beside_inferenceservices_each_as_its_kind(
    fleet_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    add_llmisvcs(fleet_api)
    out = tmp_path / "fleet"
    result = run_fleet(request_for(kubeconfig, out, namespace="llm"))

    index = fleet_document(out)
    kinds = {(entry["isvc"], entry["kind"]): entry for entry in index["services"]}
    assert sorted(kinds) == [
        ("llama-llmd", "LLMInferenceService"),
        ("qwen-chat", "InferenceService"),
        ("qwen-chat", "LLMInferenceService"),
        ("vllm-llm", "InferenceService"),
    ]
    assert index["listing"] == [
        {"kind": "InferenceService", "status": "ok", "services": 2, "reason": ""},
        {"kind": "LLMInferenceService", "status": "ok", "services": 2, "reason": ""},
    ]
    # InferenceServices keep their folders; an LLMInferenceService of the same name has its own.
    assert kinds[("qwen-chat", "InferenceService")]["path"] == "llm/qwen-chat"
    assert kinds[("vllm-llm", "InferenceService")]["path"] == "llm/vllm-llm"
    assert kinds[("qwen-chat", "LLMInferenceService")]["path"] == "llm/_llmisvc/qwen-chat"
    assert kinds[("llama-llmd", "LLMInferenceService")]["path"] == "llm/_llmisvc/llama-llmd"
    for (name, kind), entry in kinds.items():
        findings = service_findings(out, entry)
        assert (findings["target"]["isvc"], findings["target"].get("kind", "InferenceService")) == (name, kind)
    healthy = kinds[("llama-llmd", "LLMInferenceService")]
    assert healthy["status"] == "complete" and healthy["counts"]["critical"] == 0
    alone = run(
        params_from_text(
            {"kubeconfig": str(kubeconfig), "namespace": "llm", "llmisvc": "llama-llmd", "start": START, "end": END}
        )
    )
    assert comparable(service_findings(out, healthy)) == comparable(alone.to_json())
    assert {entry.kind for entry in result.entries} == {"InferenceService", "LLMInferenceService"}

    markdown = (out / "fleet.md").read_text()
    assert "| service | kind | mode |" in markdown
    assert "| llm/llama-llmd | LLMInferenceService | unknown |" in markdown
    assert "[summary](llm/_llmisvc/llama-llmd/summary.md)" in markdown
    assert "4 service(s) (2 InferenceService, 2 LLMInferenceService)" in markdown
    assert "not installed" not in markdown.splitlines()[2]
    assert "<td>LLMInferenceService</td>" in (out / "fleet.html").read_text()


def test_without_the_llminferenceservice_crd_the_fleet_says_so_and_triages_the_rest(
    fleet_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    """KServe before 0.16 serves serving.kserve.io without LLMInferenceService: a fact, not a failure."""
    out = tmp_path / "fleet"
    result = run_fleet(request_for(kubeconfig, out, namespace="team-b"))

    assert [entry.ref for entry in result.entries] == ["team-b/chat", "team-b/summarize"]
    (llmisvc,) = [item for item in fleet_document(out)["listing"] if item["kind"] == "LLMInferenceService"]
    assert (llmisvc["status"], llmisvc["services"]) == ("not_installed", 0)
    assert result.gaps == ()  # --fail-on-partial is not tripped by a CRD that is not installed
    caveat = (out / "fleet.md").read_text().splitlines()[2]
    assert caveat.endswith("; the LLMInferenceService CRD is not installed, so none was listed._")
    assert "Traceback" not in caveat and "could not be listed" not in caveat


def test_a_forbidden_llminferenceservice_list_is_a_gap_and_the_inferenceservices_are_triaged(
    fleet_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    """A role bound before LLMInferenceServices existed: the fleet goes on, and says what it could not list."""
    add_llmisvcs(fleet_api)
    fleet_api.inject("/apis/serving.kserve.io/*/namespaces/team-b/llminferenceservices", status=403)
    out = tmp_path / "fleet"
    arguments = ("fleet", "--kubeconfig", str(kubeconfig), "-n", "team-b", "--start", START, "--end", END)
    strict = kserve_runbook(*arguments, "--out", str(out), "--fail-on-partial", cwd=tmp_path)

    assert strict.returncode == 1 and "Traceback" not in strict.stderr
    assert "gap(s) in the listing or the merge" in strict.stderr
    index = fleet_document(out)
    assert [entry["isvc"] for entry in index["services"]] == ["chat", "summarize"]
    (llmisvc,) = [item for item in index["listing"] if item["kind"] == "LLMInferenceService"]
    assert llmisvc["status"] == "forbidden"
    caveat = (out / "fleet.md").read_text().splitlines()[2]
    assert "LLMInferenceServices could not be listed (forbidden: " in caveat


@pytest.mark.notebook
def test_notebooks_run_for_an_llminferenceservice_too(
    fleet_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    add_llmisvcs(fleet_api)
    for name in ("vllm-llm", "qwen-chat"):  # leave the healthy LLMInferenceService and its namesake-free stack
        del fleet_api.cluster.objects[("serving.kserve.io", "inferenceservices")][("llm", name)]
    del fleet_api.cluster.objects[("serving.kserve.io", "llminferenceservices")][("llm", "qwen-chat")]
    out = tmp_path / "fleet"
    result = run_fleet(replace(request_for(kubeconfig, out, namespace="llm"), notebooks=True))

    (entry,) = result.entries
    assert (entry.kind, entry.status, entry.path) == ("LLMInferenceService", "complete", "llm/_llmisvc/llama-llmd")
    folder = out / "llm" / "_llmisvc" / "llama-llmd"
    assert sorted(path.name for path in folder.iterdir()) == [
        "findings.json",
        "report.html",
        "summary.md",
        "triage.ipynb",
    ]
    assert json.loads((folder / "findings.json").read_text())["target"]["kind"] == "LLMInferenceService"
