"""LiveCluster against the fixture API server, through the real kubernetes client over HTTP."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
import yaml
from fakeapi import DEFAULT_TOKEN, ApiError, FakeApiServer, write_kubeconfig

from nbhelpers.errors import ReadFailed, RunbookError
from nbhelpers.sources import kinds
from nbhelpers.sources.base import LogRequest
from nbhelpers.sources.cluster_live import PAGE_SIZE, LiveCluster

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).parent / "fixtures" / "cluster"
RAW_POD = "vllm-raw-predictor-5f8b9c7d64-h8d2x"


Connect = Callable[..., LiveCluster]


def paths(server: FakeApiServer) -> list[str]:
    return [request.path for request in server.requests]


# --- discovery and versions --------------------------------------------------------------------


def test_discovery_runs_once_and_picks_the_first_served_version(
    serverless_api: FakeApiServer, kubeconfig: Path, connect: Connect
) -> None:
    cluster = connect(kubeconfig)
    services = cluster.list(kinds.VIRTUAL_SERVICE, "llm")
    gateway = cluster.get(kinds.ISTIO_GATEWAY, "knative-serving", "knative-ingress-gateway")

    assert paths(serverless_api) == [
        "/apis",
        "/apis/networking.istio.io/v1/namespaces/llm/virtualservices",
        "/apis/networking.istio.io/v1/namespaces/knative-serving/gateways/knative-ingress-gateway",
    ]
    assert {service["apiVersion"] for service in services} == {"networking.istio.io/v1"}
    assert gateway is not None and gateway["apiVersion"] == "networking.istio.io/v1"


def test_an_older_istio_is_read_at_the_newest_version_it_serves(
    fake_api: FakeApiServer, kubeconfig: Path, connect: Connect
) -> None:
    fake_api.cluster.add_all(
        [
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": "virtualservices.networking.istio.io"},
                "spec": {
                    "group": "networking.istio.io",
                    "names": {"kind": "VirtualService", "plural": "virtualservices"},
                    "scope": "Namespaced",
                    "versions": [{"name": "v1alpha3", "served": True}, {"name": "v1beta1", "served": True}],
                },
            },
            {
                "apiVersion": "networking.istio.io/v1alpha3",
                "kind": "VirtualService",
                "metadata": {"name": "old", "namespace": "llm"},
                "spec": {"hosts": ["old.example.com"]},
            },
        ]
    )

    found = connect(kubeconfig).list(kinds.VIRTUAL_SERVICE, "llm")

    assert paths(fake_api)[-1] == "/apis/networking.istio.io/v1beta1/namespaces/llm/virtualservices"
    assert [(item["apiVersion"], item["metadata"]["name"]) for item in found] == [
        ("networking.istio.io/v1beta1", "old")
    ]


def test_a_failed_discovery_fails_the_read_and_is_tried_again(
    serverless_api: FakeApiServer, kubeconfig: Path, connect: Connect
) -> None:
    serverless_api.inject("/apis", status=503, message="the server is currently unable to handle the request")
    cluster = connect(kubeconfig)
    with pytest.raises(ReadFailed) as failure:
        cluster.list(kinds.KNATIVE_REVISION, "llm")
    assert failure.value.status == "error"
    assert failure.value.reason == (
        "API discovery (/apis) failed: HTTP 503 from the API server: the server is currently unable to handle the request"
    )

    serverless_api.clear_injections()
    assert [item["metadata"]["name"] for item in cluster.list(kinds.KNATIVE_REVISION, "llm")] == [
        "qwen-chat-predictor-00001",
        "vllm-llm-predictor-00001",
    ]
    assert paths(serverless_api) == ["/apis", "/apis", "/apis/serving.knative.dev/v1/namespaces/llm/revisions"]


def test_core_kinds_need_no_discovery(serverless_api: FakeApiServer, kubeconfig: Path, connect: Connect) -> None:
    connect(kubeconfig).list(kinds.POD, "llm")
    assert paths(serverless_api) == ["/api/v1/namespaces/llm/pods"]


def test_a_missing_crd_is_answered_without_a_request(
    raw_api: FakeApiServer, kubeconfig: Path, connect: Connect
) -> None:
    cluster = connect(kubeconfig)
    with pytest.raises(ReadFailed) as listed:
        cluster.list(kinds.KNATIVE_SERVICE, "raw", "serving.kserve.io/inferenceservice=vllm-raw")
    with pytest.raises(ReadFailed) as got:
        cluster.get(kinds.ISTIO_GATEWAY, "knative-serving", "knative-ingress-gateway")

    assert (listed.value.status, listed.value.reason) == (
        "not_installed",
        "API group serving.knative.dev is not installed (no CRD)",
    )
    assert got.value.status == "not_installed" and "networking.istio.io" in got.value.reason
    assert paths(raw_api) == ["/apis"]
    # The fixture server itself answers such paths as a real API server would.
    with pytest.raises(ApiError) as answered:
        raw_api.router.answer("/apis/serving.knative.dev/v1/namespaces/raw/services", {})
    assert answered.value.code == 404


def test_a_resource_the_group_does_not_serve_is_missing_not_absent(
    serverless_api: FakeApiServer, kubeconfig: Path, connect: Connect
) -> None:
    unknown = kinds.Kind("Widget", "apps", ("v1",), "widgets")
    with pytest.raises(ReadFailed) as failure:
        connect(kubeconfig).get(unknown, "llm", "anything")
    assert failure.value.status == "missing"
    assert failure.value.reason == "the server could not find the requested resource"


def test_server_version_is_major_dot_minor(fake_api: FakeApiServer, kubeconfig: Path, connect: Connect) -> None:
    assert connect(kubeconfig).server_version() == "1.31"
    fake_api.cluster.version = {"major": "1", "minor": "29+", "gitVersion": "v1.29.10-eks-7f9249a"}
    assert connect(kubeconfig).server_version() == "1.29"


# --- list and get ------------------------------------------------------------------------------


def test_list_items_get_apiversion_and_kind(serverless_api: FakeApiServer, kubeconfig: Path, connect: Connect) -> None:
    wire = serverless_api.router.answer("/apis/apps/v1/namespaces/llm/deployments", {})
    assert isinstance(wire, dict) and "kind" not in wire["items"][0]  # as a real API server sends them

    deployments = connect(kubeconfig).list(kinds.DEPLOYMENT, "llm")

    assert [(d["apiVersion"], d["kind"], d["metadata"]["name"]) for d in deployments] == [
        ("apps/v1", "Deployment", "qwen-chat-predictor-00001-deployment"),
        ("apps/v1", "Deployment", "vllm-llm-predictor-00001-deployment"),
    ]


def test_list_pages_with_limit_and_continue(fake_api: FakeApiServer, kubeconfig: Path, connect: Connect) -> None:
    total = 2 * PAGE_SIZE + 3
    fake_api.cluster.add_all(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{index:04d}", "namespace": "bulk"}}
        for index in range(total)
    )

    found = connect(kubeconfig).list(kinds.CONFIG_MAP, "bulk")

    assert [item["metadata"]["name"] for item in found] == [f"cm-{index:04d}" for index in range(total)]
    queries = [request.query for request in fake_api.requests]
    assert [query["limit"] for query in queries] == [str(PAGE_SIZE)] * 3
    assert "continue" not in queries[0]
    assert queries[1]["continue"] and queries[2]["continue"] and queries[1]["continue"] != queries[2]["continue"]


def endless_configmap_pages(query: Mapping[str, str]) -> str:
    following = int(query.get("continue") or 0) + 1
    item = {"metadata": {"name": f"cm-{following}", "namespace": "bulk"}}
    return json.dumps({"kind": "ConfigMapList", "metadata": {"continue": str(following)}, "items": [item]})


def test_a_list_stops_at_the_page_limit(
    fake_api: FakeApiServer, kubeconfig: Path, connect: Connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KSERVE_RUNBOOK_MAX_LIST_PAGES", "7")
    fake_api.inject("/api/v1/namespaces/bulk/configmaps", body=endless_configmap_pages)

    with pytest.raises(ReadFailed) as failed:
        connect(kubeconfig).list(kinds.CONFIG_MAP, "bulk")

    assert (failed.value.what, failed.value.status) == ("ConfigMap in bulk", "error")
    assert failed.value.reason == (
        "the API server still sent a continue token after 7 pages: over the limit of 7 for the pages of one list "
        "from the API server (raise it with KSERVE_RUNBOOK_MAX_LIST_PAGES=N)"
    )
    assert len(fake_api.requests) == 7


def test_a_list_stops_at_the_item_limit(
    fake_api: FakeApiServer, kubeconfig: Path, connect: Connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KSERVE_RUNBOOK_MAX_LIST_ITEMS", "1000")
    fake_api.cluster.add_all(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{index:04d}", "namespace": "bulk"}}
        for index in range(2 * PAGE_SIZE + 1)
    )
    with pytest.raises(ReadFailed, match=r"more than 1,000 objects for one list: .*KSERVE_RUNBOOK_MAX_LIST_ITEMS=N"):
        connect(kubeconfig).list(kinds.CONFIG_MAP, "bulk")
    assert len(fake_api.requests) == 3  # the page that went over was the last one asked for


def test_a_repeated_continue_token_stops_the_list(fake_api: FakeApiServer, kubeconfig: Path, connect: Connect) -> None:
    fake_api.inject("/api/v1/namespaces/bulk/configmaps", body='{"metadata": {"continue": "same"}, "items": []}')
    with pytest.raises(ReadFailed, match="repeated a continue token"):
        connect(kubeconfig).list(kinds.CONFIG_MAP, "bulk")
    assert len(fake_api.requests) == 2


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('{"items": ' + "[" * 10_000 + "]" * 10_000 + "}", "KSERVE_RUNBOOK_MAX_NESTING_DEPTH=N"),
        ('{"metadata": {"resourceVersion": ' + "4" * 5000 + '}, "items": []}', "KSERVE_RUNBOOK_MAX_INT_DIGITS=N"),
        ('{"items": [{"metadata": {"name": "e", "namespace": "bulk"}, "count": "many"}]}', "count is not an integer"),
        ('{"items": [{"metadata": {"name": "e", "labels": {"a": 1}}}]}', "metadata.labels is not a map of strings"),
    ],
    ids=["10000-deep", "5000-digits", "event-count-text", "label-not-text"],
)
def test_a_hostile_list_answer_is_a_failed_read(
    body: str, expected: str, fake_api: FakeApiServer, kubeconfig: Path, connect: Connect
) -> None:
    fake_api.inject("/api/v1/namespaces/bulk/events", body=body)
    with pytest.raises(ReadFailed) as failed:
        connect(kubeconfig).list(kinds.EVENT, "bulk")
    assert failed.value.status == "error" and expected in failed.value.reason, failed.value.reason


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("serving.kserve.io/inferenceservice=vllm-llm", ["vllm-llm-predictor-00001-deployment"]),
        ("serving.kserve.io/inferenceservice!=vllm-llm", ["qwen-chat-predictor-00001-deployment"]),
        (
            "serving.kserve.io/inferenceservice in (vllm-llm, qwen-chat)",
            ["qwen-chat-predictor-00001-deployment", "vllm-llm-predictor-00001-deployment"],
        ),
        (
            "component=predictor,serving.kserve.io/inferenceservice notin (qwen-chat)",
            ["vllm-llm-predictor-00001-deployment"],
        ),
        ("serving.knative.dev/revisionUID", ["vllm-llm-predictor-00001-deployment"]),
        ("!serving.knative.dev/revisionUID,component", ["qwen-chat-predictor-00001-deployment"]),
    ],
)
def test_label_selectors_are_sent_and_applied(
    serverless_api: FakeApiServer, kubeconfig: Path, selector: str, expected: list[str], connect: Connect
) -> None:
    found = connect(kubeconfig).list(kinds.DEPLOYMENT, "llm", selector)
    assert [item["metadata"]["name"] for item in found] == expected
    assert serverless_api.requests[-1].query == {"limit": str(PAGE_SIZE), "labelSelector": selector}


def test_the_fixture_server_applies_field_selectors(serverless_api: FakeApiServer) -> None:
    def names(path: str, selector: str) -> list[str]:
        answer = serverless_api.router.answer(path, {"fieldSelector": selector})
        assert isinstance(answer, dict)
        return [item["metadata"]["name"] for item in answer["items"]]

    assert names("/api/v1/namespaces/llm/events", "involvedObject.name=vllm-llm") == ["vllm-llm.188a9f3c1b2d4e01"]
    assert names(
        "/api/v1/pods", "metadata.namespace=llm,metadata.name!=vllm-llm-predictor-00001-deployment-7d9c5f6b8d-4xk2p"
    ) == ["vllm-llm-predictor-00001-deployment-7d9c5f6b8d-9tq7m"]
    with pytest.raises(ApiError) as refused:
        names("/api/v1/namespaces/llm/pods", "spec.containers=x")
    assert refused.value.code == 400


def test_the_fixture_server_discovery_matches_the_installed_crds(raw_api: FakeApiServer) -> None:
    groups = raw_api.router.answer("/apis", {})
    kserve = raw_api.router.answer("/apis/serving.kserve.io/v1beta1", {})
    core = raw_api.router.answer("/api/v1", {})
    assert isinstance(groups, dict) and isinstance(kserve, dict) and isinstance(core, dict)

    names = {group["name"] for group in groups["groups"]}
    assert {"serving.kserve.io", "apps", "autoscaling"} <= names
    assert not names & {"serving.knative.dev", "networking.istio.io", "keda.sh"}
    autoscaling = next(group for group in groups["groups"] if group["name"] == "autoscaling")
    assert autoscaling["preferredVersion"]["version"] == "v2"
    assert [(r["name"], r["namespaced"]) for r in kserve["resources"]] == [("inferenceservices", True)]
    assert {"pods", "pods/log", "nodes"} <= {r["name"] for r in core["resources"]}
    with pytest.raises(ApiError) as absent:
        raw_api.router.answer("/apis/serving.knative.dev/v1", {})
    assert absent.value.code == 404


def test_get_returns_the_object_or_none(serverless_api: FakeApiServer, kubeconfig: Path, connect: Connect) -> None:
    cluster = connect(kubeconfig)
    isvc = cluster.get(kinds.INFERENCE_SERVICE, "llm", "vllm-llm")
    node = cluster.get(kinds.NODE, None, "gpu-node-a1")
    absent = cluster.get(kinds.INFERENCE_SERVICE, "llm", "nope")

    assert isvc is not None and (isvc["apiVersion"], isvc["kind"]) == ("serving.kserve.io/v1beta1", "InferenceService")
    assert isvc["spec"]["predictor"]["minReplicas"] == 2
    assert node is not None and node["status"]["allocatable"]["nvidia.com/gpu"] == "1"
    assert absent is None
    assert paths(serverless_api)[1:] == [
        "/apis/serving.kserve.io/v1beta1/namespaces/llm/inferenceservices/vllm-llm",
        "/api/v1/nodes/gpu-node-a1",
        "/apis/serving.kserve.io/v1beta1/namespaces/llm/inferenceservices/nope",
    ]


def test_cluster_scoped_kinds_ignore_the_namespace(
    serverless_api: FakeApiServer, kubeconfig: Path, connect: Connect
) -> None:
    nodes = connect(kubeconfig).list(kinds.NODE, "llm")
    assert [node["metadata"]["name"] for node in nodes] == ["cpu-node-s1", "gpu-node-a1", "gpu-node-a2"]
    assert paths(serverless_api) == ["/api/v1/nodes"]


# --- logs --------------------------------------------------------------------------------------


def test_logs_send_every_parameter_and_keep_kubelet_timestamps(
    raw_api: FakeApiServer, kubeconfig: Path, connect: Connect
) -> None:
    request = LogRequest("raw", RAW_POD, "kserve-container", previous=True, tail_lines=5, limit_bytes=300)

    text = connect(kubeconfig).logs(request)

    sent = raw_api.requests[-1]
    assert sent.path == f"/api/v1/namespaces/raw/pods/{RAW_POD}/log"
    assert sent.query == {
        "container": "kserve-container",
        "previous": "true",
        "tailLines": "5",
        "limitBytes": "300",
        "timestamps": "true",
    }
    fixture = (FIXTURES / "raw" / "logs" / "raw" / RAW_POD / "kserve-container.previous.log").read_text()
    last_five = "".join(fixture.splitlines(keepends=True)[-5:])
    assert text == last_five.encode()[:300].decode()
    assert len(text.encode()) == 300 and text.startswith("2026-01-15T11:09:40.318207449Z (EngineCore_0 pid=241) INFO")


def test_logs_of_the_current_container_are_read_whole(
    raw_api: FakeApiServer, kubeconfig: Path, connect: Connect
) -> None:
    text = connect(kubeconfig).logs(LogRequest("raw", RAW_POD, "kserve-container"))
    assert text == (FIXTURES / "raw" / "logs" / "raw" / RAW_POD / "kserve-container.log").read_text()
    assert raw_api.requests[-1].query["previous"] == "false"


def test_missing_logs_are_reported_as_missing(
    serverless_api: FakeApiServer, kubeconfig: Path, connect: Connect
) -> None:
    cluster = connect(kubeconfig)
    pod = "vllm-llm-predictor-00001-deployment-7d9c5f6b8d-4xk2p"
    with pytest.raises(ReadFailed) as no_previous:
        cluster.logs(LogRequest("llm", pod, "kserve-container", previous=True))
    with pytest.raises(ReadFailed) as no_pod:
        cluster.logs(LogRequest("llm", "gone-pod", "kserve-container"))

    assert no_previous.value.status == "missing"
    assert no_previous.value.reason == f'previous terminated container "kserve-container" in pod "{pod}" not found'
    assert (no_pod.value.status, no_pod.value.reason) == ("missing", 'pods "gone-pod" not found')


# --- errors ------------------------------------------------------------------------------------


def test_forbidden_quotes_the_api_server(serverless_api: FakeApiServer, kubeconfig: Path, connect: Connect) -> None:
    serverless_api.inject("/api/v1/namespaces/llm/events", status=403)
    with pytest.raises(ReadFailed) as failure:
        connect(kubeconfig).list(kinds.EVENT, "llm")
    assert failure.value.status == "forbidden"
    assert failure.value.reason == (
        'events is forbidden: User "system:serviceaccount:ops:kserve-runbook" cannot list resource "events" '
        'in API group "" in the namespace "llm"'
    )


def test_not_found_on_a_list_is_missing(serverless_api: FakeApiServer, kubeconfig: Path, connect: Connect) -> None:
    serverless_api.inject("/apis/discovery.k8s.io/v1/namespaces/llm/endpointslices", status=404)
    with pytest.raises(ReadFailed) as failure:
        connect(kubeconfig).list(kinds.ENDPOINT_SLICE, "llm")
    assert (failure.value.status, failure.value.reason) == (
        "missing",
        "the server could not find the requested resource",
    )


def test_server_errors_are_errors(serverless_api: FakeApiServer, kubeconfig: Path, connect: Connect) -> None:
    serverless_api.inject("/api/v1/namespaces/llm/pods", status=500)
    with pytest.raises(ReadFailed) as failure:
        connect(kubeconfig).list(kinds.POD, "llm")
    assert failure.value.status == "error"
    assert (
        failure.value.reason == "HTTP 500 from the API server: Internal error occurred: etcdserver: request timed out"
    )


def test_a_malformed_answer_is_an_error(serverless_api: FakeApiServer, kubeconfig: Path, connect: Connect) -> None:
    serverless_api.inject("/api/v1/namespaces/llm/services", body="<html>502 Bad Gateway</html>")
    with pytest.raises(ReadFailed) as failure:
        connect(kubeconfig).list(kinds.SERVICE, "llm")
    assert failure.value.status == "error" and "not JSON" in failure.value.reason


def test_a_slow_answer_times_out_once(serverless_api: FakeApiServer, kubeconfig: Path, connect: Connect) -> None:
    serverless_api.inject("/api/v1/namespaces/llm/pods", delay=3.0)
    started = time.monotonic()
    with pytest.raises(ReadFailed) as failure:
        connect(kubeconfig, timeout=0.3).list(kinds.POD, "llm")
    elapsed = time.monotonic() - started

    assert failure.value.status == "timeout"
    assert failure.value.reason == f"the API server {serverless_api.url} did not answer within 0.3s"
    assert elapsed < 1.5  # a timed-out read is not retried
    assert paths(serverless_api).count("/api/v1/namespaces/llm/pods") == 1


def test_a_refused_connection_is_unreachable(tmp_path: Path, connect: Connect) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again below: nothing listens there
    config = write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{port}")

    with pytest.raises(ReadFailed) as failure:
        connect(config, None, 2.0).list(kinds.POD, "llm")

    assert failure.value.status == "unreachable"
    assert f"cannot connect to the API server http://127.0.0.1:{port}" in failure.value.reason
    assert "Connection refused" in failure.value.reason


def test_rejected_credentials_are_forbidden(fake_api: FakeApiServer, tmp_path: Path, connect: Connect) -> None:
    config = write_kubeconfig(tmp_path / "kubeconfig", fake_api.url, token="expired-token")
    with pytest.raises(ReadFailed) as failure:
        connect(config, None, 2.0).list(kinds.POD, "llm")
    assert failure.value.status == "forbidden" and failure.value.reason.startswith("unauthorized (401)")


# --- configuration -----------------------------------------------------------------------------


def _exec_kubeconfig(path: Path, server: str, script: str) -> Path:
    """A kubeconfig whose user gets its token from an exec credential plugin (a shell script)."""
    plugin = path.parent / "credential-plugin.sh"
    plugin.write_text("#!/bin/sh\n" + script)
    plugin.chmod(0o755)
    write_kubeconfig(path, server, token=None)
    document = yaml.safe_load(path.read_text())
    document["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": str(plugin),
            "interactiveMode": "Never",
        }
    }
    path.write_text(yaml.safe_dump(document))
    return path


def test_an_exec_credential_plugin_token_is_used(fake_api: FakeApiServer, tmp_path: Path) -> None:
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential",
        "status": {"token": DEFAULT_TOKEN},
    }
    config = _exec_kubeconfig(tmp_path / "kubeconfig", fake_api.url, f"echo '{json.dumps(credential)}'\n")
    cluster = LiveCluster(str(config), None, 2.0)
    pods = cluster.list(kinds.POD, "llm")  # the server answers 401 to any other token: ReadFailed
    cluster.close()
    assert pods == [] and fake_api.token == DEFAULT_TOKEN  # answered, so the token was accepted


def test_a_credential_plugin_that_never_answers_is_one_error_not_a_hang(
    fake_api: FakeApiServer, tmp_path: Path
) -> None:
    """A plugin waiting for an interactive login would hang the kubernetes client forever."""
    config = _exec_kubeconfig(tmp_path / "kubeconfig", fake_api.url, "exec sleep 30\n")
    began = time.monotonic()
    with pytest.raises(RunbookError, match=r"the credential plugin gave no token within 1s \(is it waiting"):
        LiveCluster(str(config), None, 1.0)
    assert time.monotonic() - began < 5
    assert fake_api.requests == []


def test_a_missing_kubeconfig_is_a_runbook_error(tmp_path: Path) -> None:
    with pytest.raises(RunbookError, match=r"^kubeconfig /nonexistent/kubeconfig not found$"):
        LiveCluster("/nonexistent/kubeconfig", None, 1.0)


def test_a_malformed_kubeconfig_is_a_runbook_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.write_text("apiVersion: v1\nclusters: [\n  - name: x\n")
    not_a_config = tmp_path / "list"
    not_a_config.write_text("- just\n- a list\n")

    with pytest.raises(RunbookError, match=rf"^kubeconfig {broken} is not valid YAML"):
        LiveCluster(str(broken), None, 1.0)
    with pytest.raises(RunbookError, match=rf"^kubeconfig {not_a_config} is not a kubeconfig"):
        LiveCluster(str(not_a_config), None, 1.0)


def test_an_unknown_context_lists_the_known_ones(fake_api: FakeApiServer, tmp_path: Path) -> None:
    config = write_kubeconfig(tmp_path / "kubeconfig", fake_api.url, extra_contexts={"staging": fake_api.url})
    with pytest.raises(RunbookError) as failure:
        LiveCluster(str(config), "prod", 1.0)
    assert str(failure.value) == f"context 'prod' not in kubeconfig {config} (contexts: fixture, staging)"


def test_the_chosen_context_decides_the_server(fake_api: FakeApiServer, tmp_path: Path, connect: Connect) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"
    config = write_kubeconfig(tmp_path / "kubeconfig", dead, extra_contexts={"fixture-live": fake_api.url})

    cluster = connect(config, "fixture-live", 2.0)

    assert cluster.server == fake_api.url
    assert cluster.server_version() == "1.31"
    assert paths(fake_api) == ["/version"]


def test_kubeconfig_environment_variable_is_honoured(
    fake_api: FakeApiServer, kubeconfig: Path, monkeypatch: pytest.MonkeyPatch, connect: Connect
) -> None:
    monkeypatch.setenv("KUBECONFIG", f"{kubeconfig.parent / 'absent'}:{kubeconfig}")
    assert connect(None, None, 2.0).server_version() == "1.31"


def test_a_kubeconfig_variable_naming_no_file_is_a_runbook_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    with pytest.raises(RunbookError, match=r"^KUBECONFIG=.*absent names no existing file$"):
        LiveCluster(None, None, 1.0)


def test_no_kubeconfig_outside_a_pod_is_a_runbook_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(RunbookError, match=r"no kubeconfig found .* and not running in a pod"):
        LiveCluster(None, None, 1.0)


# --- read-only ---------------------------------------------------------------------------------


def test_only_get_is_ever_sent(serverless_api: FakeApiServer, kubeconfig: Path, connect: Connect) -> None:
    cluster = connect(kubeconfig)
    cluster.server_version()
    cluster.list(kinds.REPLICA_SET, "llm", "serving.kserve.io/inferenceservice=vllm-llm")
    cluster.get(kinds.CONFIG_MAP, "knative-serving", "config-autoscaler")
    cluster.logs(LogRequest("llm", "vllm-llm-predictor-00001-deployment-7d9c5f6b8d-9tq7m", "queue-proxy"))

    assert paths(serverless_api) == [
        "/version",
        "/apis",
        "/apis/apps/v1/namespaces/llm/replicasets",
        "/api/v1/namespaces/knative-serving/configmaps/config-autoscaler",
        "/api/v1/namespaces/llm/pods/vllm-llm-predictor-00001-deployment-7d9c5f6b8d-9tq7m/log",
    ]
    assert {request.method for request in serverless_api.requests} == {"GET"}


def test_the_fixture_server_refuses_and_logs_writes(serverless_api: FakeApiServer) -> None:
    request = urllib.request.Request(f"{serverless_api.url}/api/v1/namespaces/llm/pods", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)
    refused.value.close()
    assert refused.value.code == 405
    assert [(r.method, r.path) for r in serverless_api.requests] == [("POST", "/api/v1/namespaces/llm/pods")]
