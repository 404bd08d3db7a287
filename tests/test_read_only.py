"""The read-only guarantee (issue #9): the tool sends GET requests and nothing else.

Two halves:

- **observed**: ``triage``, ``capture``, ``fleet`` and ``webhook`` (fed one alert) run as a user runs them (the
  CLI, a subprocess) against the fixture API server and a stand-in Prometheus; every request either of them
  saw was a GET, and none asked the API server what the tool may do (a SelfSubjectAccessReview is a POST:
  permissions are inferred from 403 answers instead).
- **by construction**: only ``nbhelpers/sources/cluster_live.py`` and ``metrics_live.py`` import an HTTP or
  Kubernetes client; the one request call in the former sends the literal method "GET", no generated API
  class (whose methods create, patch and delete) is imported anywhere, and every request call in both has a
  timeout. So no call path to a write exists, and no network call can wait forever. The one exception,
  ``cli/webhook.py``, imports ``urllib.request`` for a single call with a timeout: the POST of its summary to
  the Slack URL the user configured, never to the cluster or Prometheus (and ``socket`` only for the
  address family it listens on).
"""

from __future__ import annotations

import ast
import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import cache
from pathlib import Path

import pytest
from conftest import CLUSTER_FIXTURES
from fakeapi import FakeApiServer, FakePrometheus, write_kubeconfig

import nbhelpers

PACKAGE = Path(nbhelpers.__file__).parent
SOURCES = {"sources/cluster_live.py", "sources/metrics_live.py"}
NOTIFIER = "cli/webhook.py"  # may POST a run's summary to Slack, nothing else
NETWORK_MODULES = ("requests", "urllib3", "urllib.request", "http.client", "socket", "httpx", "aiohttp")
NETWORK_PACKAGES = ("kubernetes", "prometheus_api_client", *NETWORK_MODULES)
# The only part of the kubernetes package other modules may use: quantity arithmetic, no I/O.
PURE_KUBERNETES = "kubernetes.utils.quantity"
WINDOW = ["--start", "2026-01-15T11:00:00Z", "--end", "2026-01-15T12:00:00Z"]


# --- observed --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fixture:
    api: FakeApiServer
    prometheus: FakePrometheus
    kubeconfig: Path


@pytest.fixture(scope="module")
def fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fixture]:
    with FakeApiServer() as api, FakePrometheus() as prometheus:
        api.load(CLUSTER_FIXTURES / "common", CLUSTER_FIXTURES / "serverless")
        yield Fixture(api, prometheus, write_kubeconfig(tmp_path_factory.mktemp("kube") / "config", api.url))


COMMANDS = {
    "triage": ["triage", "-n", "llm", "--isvc", "vllm-llm", "--quiet"],
    "capture": ["capture", "-n", "llm", "--isvc", "vllm-llm"],
    "fleet": ["fleet", "-n", "llm", "--quiet"],
}


@pytest.mark.integration
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_sends_only_get(command: str, fixture: Fixture, tmp_path: Path) -> None:
    out = tmp_path / ("bundle.tar.gz" if command == "capture" else "out")
    arguments = [*COMMANDS[command], "--kubeconfig", str(fixture.kubeconfig), "--prometheus", fixture.prometheus.url]
    fixture.api.clear_requests()
    seen_by_prometheus = len(fixture.prometheus.requests)

    result = subprocess.run(
        [sys.executable, "-m", "nbhelpers", *arguments, *WINDOW, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )

    assert result.returncode in (0, 1), result.stderr  # it ran (1: a critical finding)
    assert out.exists()
    api_requests = fixture.api.requests
    prometheus_requests = fixture.prometheus.requests[seen_by_prometheus:]
    assert api_requests and prometheus_requests
    assert {request.method for request in api_requests} == {"GET"}
    assert {request.method for request in prometheus_requests} == {"GET"}
    assert {request.path for request in prometheus_requests} == {"/api/v1/query_range"}
    assert not [r.path for r in api_requests if "accessreview" in r.path.lower() or "tokenreview" in r.path.lower()]


@pytest.mark.integration
def test_the_webhook_sends_only_get(fixture: Fixture, tmp_path: Path) -> None:
    out = tmp_path / "out"
    arguments = ["webhook", "--listen", "127.0.0.1:0", "--kubeconfig", str(fixture.kubeconfig)]
    arguments += ["--prometheus", fixture.prometheus.url, "--out", str(out)]
    fixture.api.clear_requests()
    seen_by_prometheus = len(fixture.prometheus.requests)
    starts_at = (datetime.now(timezone.utc) - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    alert = {"status": "firing", "labels": {"namespace": "llm", "isvc": "vllm-llm"}, "startsAt": starts_at}
    body = json.dumps({"version": "4", "status": "firing", "alerts": [alert]}).encode()

    with subprocess.Popen(
        [sys.executable, "-m", "nbhelpers", *arguments], stderr=subprocess.PIPE, text=True, cwd=tmp_path
    ) as receiver:
        assert receiver.stderr is not None
        first_line = receiver.stderr.readline()
        assert first_line.startswith("webhook: listening on http://127.0.0.1:"), first_line
        url = first_line.split()[3]
        post = urllib.request.Request(f"{url}/alerts", data=body, method="POST")
        with urllib.request.urlopen(post, timeout=10) as answer:
            assert answer.status == 202
        deadline = time.monotonic() + 120
        while not list(out.glob("*/findings.json")) and time.monotonic() < deadline:
            time.sleep(0.1)
        receiver.send_signal(signal.SIGTERM)
        _, errors = receiver.communicate(timeout=60)

    assert receiver.returncode == 0, errors
    assert len(list(out.glob("*-llm-vllm-llm/findings.json"))) == 1
    api_requests = fixture.api.requests
    prometheus_requests = fixture.prometheus.requests[seen_by_prometheus:]
    assert api_requests and prometheus_requests
    assert {request.method for request in api_requests} == {"GET"}
    assert {request.method for request in prometheus_requests} == {"GET"}


# --- by construction -------------------------------------------------------------------------------


@cache
def modules() -> dict[str, ast.Module]:
    """Every module of the package, parsed (once per test session)."""
    return {
        path.relative_to(PACKAGE).as_posix(): ast.parse(path.read_text(encoding="utf-8"), str(path))
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def imported(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def is_network(name: str) -> bool:
    return any(name == package or name.startswith(f"{package}.") for package in NETWORK_PACKAGES)


def calls_named(tree: ast.Module, *names: str) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in names
    ]


def test_only_the_two_source_modules_touch_the_network() -> None:
    parsed = modules()
    assert set(parsed) >= SOURCES
    outside = {
        module: sorted(name for name in imported(tree) if is_network(name) and not name.startswith(PURE_KUBERNETES))
        for module, tree in parsed.items()
        if module not in SOURCES
    }
    assert outside.pop(NOTIFIER) == ["socket", "urllib.request"]
    assert {module: names for module, names in outside.items() if names} == {}


def test_the_webhook_sends_one_request_itself_a_post_with_a_timeout() -> None:
    tree = modules()[NOTIFIER]
    used_of_socket = {
        node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute) and ast.unparse(node.value) == "socket"
    }
    # the listening socket's address family, and shutting down a connection past its deadline; nothing else
    assert used_of_socket <= {"AF_INET", "AF_INET6", "SHUT_RDWR"}
    (call,) = calls_named(tree, "urlopen")
    assert "timeout" in {keyword.arg for keyword in call.keywords}
    (built,) = calls_named(tree, "Request")
    assert {keyword.arg: ast.unparse(keyword.value) for keyword in built.keywords}["method"] == "'POST'"
    (caller,) = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and any(inner is call for inner in ast.walk(node))
    ]
    assert caller.name == "post_to_slack"
    notified = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and ast.unparse(node.func) == caller.name]
    assert [ast.unparse(node.args[0]) for node in notified] == ["settings.slack_url"]


def test_no_generated_api_class_and_no_write_verb_is_reachable() -> None:
    for module, tree in modules().items():
        for name in imported(tree):
            assert not name.startswith(("kubernetes.client.api", "kubernetes.dynamic", "kubernetes.stream")), module
            assert not (name.startswith("kubernetes.client.") and name.endswith("Api")), (module, name)
        verbs = [
            node.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and node.attr.startswith(("create_namespaced", "patch_", "replace_namespaced", "delete_", "call_api"))
        ]
        assert verbs == [], (module, verbs)
        text = ast.unparse(tree).lower()
        assert "subjectaccessreview" not in text and "tokenreview" not in text, module


def test_the_kubernetes_request_call_sends_get_with_a_timeout() -> None:
    tree = modules()["sources/cluster_live.py"]
    requests = calls_named(tree, "request")
    assert len(requests) == 1
    (call,) = requests
    assert isinstance(call.args[0], ast.Constant) and call.args[0].value == "GET"
    assert "_request_timeout" in {keyword.arg for keyword in call.keywords}


def test_every_prometheus_query_has_a_timeout_and_uses_get() -> None:
    tree = modules()["sources/metrics_live.py"]
    queries = calls_named(
        tree, "custom_query_range", "custom_query", "get_metric_range_data", "get_current_metric_value"
    )
    assert queries and all("timeout" in {keyword.arg for keyword in call.keywords} for call in queries)
    (connect,) = [
        call for call in ast.walk(tree) if isinstance(call, ast.Call) and ast.unparse(call.func) == "PrometheusConnect"
    ]
    keywords = {keyword.arg: keyword.value for keyword in connect.keywords}
    assert "timeout" in keywords
    # PrometheusConnect's method defaults to GET; it must not be switched to POST.
    assert "method" not in keywords or ast.literal_eval(keywords["method"]) == "GET"
    assert calls_named(tree, "post", "put", "patch", "delete") == []
