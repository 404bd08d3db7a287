"""The fault matrix of issue #9: every way the cluster, Prometheus, a bundle or the input can fail, with its outcome.

Each case ends in one of the two outcomes docs/contracts.md#cli and #findingsjson-v1 allow:

- **report**: the triage runs, ``findings.json`` is written and valid (``report.write_outputs`` validates it
  against the shipped schema before writing), the affected steps say why, ``summary.md`` opens with a
  coverage line that names what could not be seen, and ``partial`` says whether a read was lost;
- **refused**: ``RunbookError`` with one line that names the problem (the CLI prints it and exits 2;
  tests/test_cli.py and the subprocess tests at the end show the exit code and that no traceback leaks).

Most cases call ``triage.run`` in-process against the fixture API server (tests/fakeapi.py) and a stand-in
Prometheus; only the cases whose point is the exit code run the CLI. Cases already covered elsewhere are not
repeated: the CLI's unreachable API server, bad duration, reversed window and unknown ISVC (tests/test_cli.py),
per-source failure statuses (tests/test_cluster_live.py, tests/test_metrics_live.py), the CLI deadline
(tests/test_e2e_live.py), bundle reader errors at unit level (tests/test_bundle.py).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from builders import bundle_files
from conftest import load_serverless_with_every_kind
from fakeapi import (
    FakeApiServer,
    FakePrometheus,
    GeneratedLog,
    PolicyRule,
    PrometheusReply,
    request_attributes,
    write_kubeconfig,
)

from nbhelpers.cli import headless
from nbhelpers.errors import RunbookError
from nbhelpers.evidence.model import Target
from nbhelpers.render.findings_json import write_outputs
from nbhelpers.sources import kinds
from nbhelpers.sources.base import LogRequest
from nbhelpers.sources.bundle import write_bundle_files
from nbhelpers.triage import TriageParams, TriageResult, params_from_text, run
from nbhelpers.util.files import write_atomic

pytestmark = pytest.mark.integration

WINDOW = {"start": "2026-01-15T11:00:00Z", "end": "2026-01-15T12:00:00Z"}
NAMESPACE, ISVC = "llm", "vllm-llm"
POD = "vllm-llm-predictor-00001-deployment-7d9c5f6b8d-4xk2p"  # the pod whose logs gather() reads
# Every kind gather() reads from this cluster; Knative's Route is in the kind table but never read.
KINDS_READ = tuple(kind for kind in kinds.ALL_KINDS if kind is not kinds.KNATIVE_ROUTE)


# --- the cluster -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cluster:
    server: FakeApiServer
    kubeconfig: Path

    def params(self, **overrides: Any) -> TriageParams:
        settings: dict[str, Any] = {
            "kubeconfig": str(self.kubeconfig),
            "namespace": NAMESPACE,
            "isvc": ISVC,
            "request_timeout": "2s",
            **WINDOW,
            **overrides,
        }
        return params_from_text(settings)


def serverless_cluster(server: FakeApiServer, without_groups: tuple[str, ...] = ()) -> FakeApiServer:
    """The serverless fixture with every CRD the tool reads installed (KEDA, Gateway API too), minus
    ``without_groups`` (removing a CRD removes its API group, as uninstalling it does)."""
    load_serverless_with_every_kind(server)
    crds = server.cluster.objects[("apiextensions.k8s.io", "customresourcedefinitions")]
    for key in [key for key, crd in crds.items() if crd["spec"]["group"] in without_groups]:
        del crds[key]
    return server


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One fixture API server for the module; each test's injections and policy are undone after it."""
    with FakeApiServer() as server:
        serverless_cluster(server)
        yield Cluster(server, write_kubeconfig(tmp_path_factory.mktemp("kube") / "config", server.url))


@pytest.fixture
def cluster(shared: Cluster) -> Iterator[Cluster]:
    logs = dict(shared.server.cluster.logs)
    yield shared
    shared.server.clear_injections()
    shared.server.policy = None
    shared.server.clear_requests()
    shared.server.cluster.logs.clear()
    shared.server.cluster.logs.update(logs)


# --- outcomes ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Report:
    result: TriageResult
    document: dict[str, Any]
    summary: str

    @property
    def coverage(self) -> str:
        """The coverage line summary.md opens with (after its title)."""
        return self.summary.splitlines()[2]


def report_of(params: TriageParams, out: Path) -> Report:
    """Run the triage and write its outputs; write_outputs refuses a findings.json that breaks the schema."""
    result = run(params)
    written = write_outputs(result, out)
    summary = written["summary.md"].read_text(encoding="utf-8")
    assert summary.splitlines()[2].startswith("_Coverage: "), "summary.md must open with the coverage line"
    return Report(result, json.loads(written["findings.json"].read_text(encoding="utf-8")), summary)


def refusal(params: TriageParams) -> str:
    with pytest.raises(RunbookError) as refused:
        run(params)
    message = str(refused.value)
    assert message and "\n" not in message, "a refusal is one line"
    return message


def assert_partial_naming(report: Report, heading: str, what: str) -> None:
    """A partial report whose coverage line names the lost read; every step has a status, an error a reason."""
    assert report.document["partial"] is True
    assert report.coverage.startswith("_Coverage: could not see everything: ")
    assert heading in report.coverage and what in report.coverage, report.coverage
    for step in report.document["steps"]:
        assert step["status"] in ("ok", "findings", "skipped", "error")
        if step["status"] == "error":
            assert step["reason"], step


# --- 403 on each kind the tool reads -----------------------------------------------------------------


def everything_read_except(cluster: Cluster, forbidden: set[tuple[str, str]]) -> list[PolicyRule]:
    """RBAC rules granting every (group, resource) a clean run reads, except ``forbidden``."""
    run(cluster.params())
    granted = resources_requested(cluster.server) - forbidden
    cluster.server.clear_requests()
    rules = [
        PolicyRule(frozenset({"get", "list"}), frozenset({group}), frozenset({resource})) for group, resource in granted
    ]
    return [
        *rules,
        PolicyRule(frozenset({"get"}), non_resource_urls=("/api", "/api/*", "/apis", "/apis/*", "/version")),
    ]


def resources_requested(server: FakeApiServer) -> set[tuple[str, str]]:
    """(API group, resource) of every resource request the server saw."""
    found = (request_attributes(request.path) for request in server.requests)
    return {(attributes[0], attributes[2]) for attributes in found if attributes is not None}


def test_the_matrix_covers_every_kind_a_triage_reads(cluster: Cluster) -> None:
    run(cluster.params())
    assert resources_requested(cluster.server) == {(kind.group, kind.plural) for kind in KINDS_READ} | {
        ("", "pods/log")
    }


@pytest.mark.parametrize(
    "kind", [kind for kind in KINDS_READ if kind is not kinds.INFERENCE_SERVICE], ids=lambda k: k.key
)
def test_403_on_a_kind_gives_a_partial_report_naming_it(kind: kinds.Kind, cluster: Cluster, tmp_path: Path) -> None:
    cluster.server.restrict_to(everything_read_except(cluster, {(kind.group, kind.plural)}))

    report = report_of(cluster.params(), tmp_path)

    assert_partial_naming(report, "forbidden (403): ", kind.key)
    failed = [record for record in report.result.evidence.failures() if record.status == "forbidden"]
    assert failed and all(record.what.startswith(kind.key) for record in failed)
    assert all("is forbidden" in record.reason for record in failed)  # the API server's own words
    for step in report.document["steps"]:
        if step["status"] in ("ok", "findings"):
            assert step["reason"].startswith("partial: forbidden on ") and kind.key in step["reason"], step
        elif step["status"] == "error":
            assert kind.key in step["reason"] or "forbidden" in step["reason"], step


def test_403_on_pod_logs_gives_a_partial_report_naming_them(cluster: Cluster, tmp_path: Path) -> None:
    cluster.server.restrict_to(everything_read_except(cluster, {("", "pods/log")}))
    report = report_of(cluster.params(), tmp_path)
    assert_partial_naming(report, "forbidden (403): ", f"logs {NAMESPACE}/{POD}/kserve-container")
    assert report.result.evidence.logs == ()


def test_403_on_the_inference_service_is_refused(cluster: Cluster) -> None:
    cluster.server.restrict_to(everything_read_except(cluster, {("serving.kserve.io", "inferenceservices")}))
    message = refusal(cluster.params())
    assert message.startswith(f"cannot read InferenceService {NAMESPACE}/{ISVC}: ")
    assert 'cannot get resource "inferenceservices"' in message


def test_403_on_discovery_is_refused_naming_discovery(cluster: Cluster) -> None:
    cluster.server.inject("/apis", status=403)
    message = refusal(cluster.params())
    assert "API discovery (/apis) failed" in message and "forbidden" in message


def test_403_on_the_server_version_is_a_partial_report(cluster: Cluster, tmp_path: Path) -> None:
    cluster.server.inject("/version", status=403)
    report = report_of(cluster.params(), tmp_path)
    assert_partial_naming(report, "forbidden (403): ", "version")
    assert "kubernetes" not in report.document["versions"]


# --- missing CRDs ------------------------------------------------------------------------------------

KNATIVE = ("serving.knative.dev", "autoscaling.internal.knative.dev")


@pytest.mark.parametrize(
    ("missing", "named", "root_cause"),
    [
        (KNATIVE, ["Service.serving.knative.dev", "Revision.serving.knative.dev"], "ROUTING_LAYER_MISMATCH"),
        (("networking.istio.io",), ["VirtualService.networking.istio.io"], "ROUTING_LAYER_MISMATCH"),
        (("gateway.networking.k8s.io",), ["HTTPRoute.gateway.networking.k8s.io"], None),
        (("keda.sh",), ["ScaledObject.keda.sh"], None),
    ],
    ids=["no-knative", "no-istio", "no-gateway-api", "no-keda"],
)
def test_a_missing_crd_is_named_in_the_coverage_line_and_is_not_a_loss(
    missing: tuple[str, ...],
    named: list[str],
    root_cause: str | None,
    fake_api: FakeApiServer,
    kubeconfig: Path,
    tmp_path: Path,
) -> None:
    serverless_cluster(fake_api, missing)
    report = report_of(Cluster(fake_api, kubeconfig).params(), tmp_path)

    # A CRD that is not installed is a fact about the cluster, not a read that failed: not partial.
    assert report.document["partial"] is False
    assert "not installed (CRD missing): " in report.coverage
    assert all(kind in report.coverage for kind in named), report.coverage
    assert not any(group in missing for group, _ in resources_requested(fake_api))
    if root_cause:  # the Serverless ISVC's routing layer is gone: that is the finding, not an error
        assert root_cause in report.document["root_causes"]
    else:
        assert report.document["root_causes"] == []


def test_no_kserve_is_refused(fake_api: FakeApiServer, kubeconfig: Path) -> None:
    serverless_cluster(fake_api, ("serving.kserve.io",))
    assert refusal(Cluster(fake_api, kubeconfig).params()) == (
        "the InferenceService CRD (serving.kserve.io) is not installed in this cluster"
    )


# --- the API server: slow, failing, unreachable -----------------------------------------------------


def test_an_api_server_slower_than_the_timeout_is_refused_after_one_timeout(cluster: Cluster) -> None:
    cluster.server.inject("/*", delay=3.0)
    began = time.monotonic()
    message = refusal(cluster.params(request_timeout="0.3s"))
    assert time.monotonic() - began < 2.0
    assert f"the API server {cluster.server.url} did not answer within 0.3s" in message
    assert len(cluster.server.requests) == 1  # discovery timed out; nothing else was tried


def test_one_slow_kind_times_out_and_the_rest_is_read(cluster: Cluster, tmp_path: Path) -> None:
    cluster.server.inject(f"/api/v1/namespaces/{NAMESPACE}/events", delay=3.0)
    began = time.monotonic()
    report = report_of(cluster.params(request_timeout="0.3s"), tmp_path)
    assert time.monotonic() - began < 2.5
    assert_partial_naming(report, "read failed (timeout): ", f"Event in {NAMESPACE}")


def test_http_500_on_one_kind_is_a_partial_report(cluster: Cluster, tmp_path: Path) -> None:
    cluster.server.inject(f"/apis/apps/v1/namespaces/{NAMESPACE}/replicasets", status=500)
    report = report_of(cluster.params(), tmp_path)
    assert_partial_naming(report, "read failed (error): ", "HTTP 500 from the API server")


def test_http_500_everywhere_is_refused(cluster: Cluster) -> None:
    cluster.server.inject("/*", status=500)
    assert "HTTP 500 from the API server" in refusal(cluster.params())


def test_an_unreachable_api_server_is_refused_naming_it(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        address = f"http://127.0.0.1:{probe.getsockname()[1]}"
    config = write_kubeconfig(tmp_path / "config", address)
    params = params_from_text({"kubeconfig": str(config), "namespace": NAMESPACE, "isvc": ISVC, **WINDOW})
    assert f"cannot connect to the API server {address}" in refusal(params)


def test_the_deadline_bounds_an_in_process_run_on_a_slow_api_server(cluster: Cluster, tmp_path: Path) -> None:
    """Every answer takes 0.4 s (under the 5 s request timeout): ~30 reads would take 12 s. With --deadline 1.5s
    the reads stop at the deadline (the one in flight is cut to the time left) and the report says so."""
    cluster.server.inject("/*", delay=0.4)
    began = time.monotonic()
    report = report_of(cluster.params(request_timeout="5s", deadline="1.5s"), tmp_path)
    elapsed = time.monotonic() - began

    assert elapsed < 1.5 + 0.8, elapsed
    assert report.result.deadline_hit and report.document["partial"] is True
    assert "the deadline stopped the run before every step ran" in report.coverage
    cut = [record for record in report.result.evidence.failures() if record.status == "timeout"]
    assert cut and cut[-1].reason == "not read: the run reached its --deadline"
    assert len(cluster.server.requests) < 6  # reads after the deadline are not sent at all


# --- Prometheus --------------------------------------------------------------------------------------


def free_address() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


@pytest.mark.parametrize(
    ("reply", "heading", "named"),
    [
        (PrometheusReply(status=401, body=b"Unauthorized"), "metrics error: ", "HTTP 401"),
        (PrometheusReply(status=403, body=b"Forbidden"), "metrics error: ", "check --prometheus-token-env"),
        (PrometheusReply.error(500, "internal", "storage is unavailable"), "metrics error: ", "storage is unavailable"),
        (
            PrometheusReply.error(422, "execution", "many-to-many matching not allowed"),
            "metrics error: ",
            "many-to-many",
        ),
        (PrometheusReply(body=b"<html>sign in</html>"), "metrics error: ", "malformed answer"),
        (PrometheusReply(delay=3.0), "metrics timeout: ", "within the timeout"),
    ],
    ids=["401", "403", "500", "bad-query", "not-json", "slow"],
)
def test_a_failing_prometheus_gives_a_partial_report_naming_it(
    reply: PrometheusReply, heading: str, named: str, cluster: Cluster, tmp_path: Path
) -> None:
    with FakePrometheus(reply) as prometheus:
        began = time.monotonic()
        report = report_of(cluster.params(prometheus=prometheus.url, request_timeout="0.5s"), tmp_path)
    assert time.monotonic() - began < 5
    assert_partial_naming(report, heading, named)
    assert report.document["sources"]["prometheus"] == "live"


def test_a_prometheus_that_is_down_is_tried_once(cluster: Cluster, tmp_path: Path) -> None:
    report = report_of(cluster.params(prometheus=free_address()), tmp_path)
    assert_partial_naming(report, "metrics unreachable: ", "cannot connect to")
    assert {data.status for data in report.result.evidence.metrics.values()} == {"unreachable"}


def test_a_prometheus_without_series_is_named_but_not_partial(cluster: Cluster, tmp_path: Path) -> None:
    with FakePrometheus() as prometheus:
        report = report_of(cluster.params(prometheus=prometheus.url), tmp_path)
    assert report.document["partial"] is False
    assert report.coverage.startswith("_Coverage: every read succeeded; not covered: metrics empty: none of the ")
    assert "check that this Prometheus scrapes the service" in report.coverage


# --- logs: 100 MB, non-UTF-8 -------------------------------------------------------------------------

HUGE_LINE = 100  # bytes per line, newline included
HUGE_LINES = 1_000_000  # 100 MB


def huge_line(index: int) -> bytes:
    stamp = datetime(2026, 1, 15, 11, 0, tzinfo=timezone.utc) + timedelta(milliseconds=3 * index)
    prefix = stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ ").encode()
    text = f"INFO [engine.py:1] step {index} running 12 waiting 0".encode()
    return prefix + text.ljust(HUGE_LINE - len(prefix) - 1, b".") + b"\n"


def test_a_100_mb_log_is_read_only_up_to_the_tool_limits(cluster: Cluster, tmp_path: Path) -> None:
    cluster.server.cluster.add_log(NAMESPACE, POD, "kserve-container", GeneratedLog(HUGE_LINES, huge_line))
    began = time.monotonic()
    report = report_of(cluster.params(), tmp_path)
    assert time.monotonic() - began < 5

    log_path = f"/api/v1/namespaces/{NAMESPACE}/pods/{POD}/log"
    (request,) = [
        r for r in cluster.server.requests if r.path == log_path and r.query["container"] == "kserve-container"
    ]
    site = LogRequest(NAMESPACE, POD, "kserve-container")
    assert request.query["tailLines"] == str(site.tail_lines) and request.query["limitBytes"] == str(site.limit_bytes)
    sent = [size for path, size in cluster.server.sent_bytes if path == log_path]
    assert max(sent) == site.tail_lines * HUGE_LINE  # the last 5000 lines, well under 4 MiB
    (log,) = [log for log in report.result.evidence.logs if log.container == "kserve-container"]
    assert log.text.startswith(huge_line(HUGE_LINES - site.tail_lines).decode()[:40])
    assert report.document["partial"] is False


def test_a_server_that_ignores_limit_bytes_is_read_only_up_to_the_limit(cluster: Cluster, tmp_path: Path) -> None:
    """A kubelet or proxy that sends the whole log anyway: the client stops reading at limitBytes."""
    cluster.server.cluster.add_log(
        NAMESPACE, POD, "kserve-container", GeneratedLog(HUGE_LINES, huge_line, honours_limits=False)
    )
    began = time.monotonic()
    report = report_of(cluster.params(), tmp_path)
    assert time.monotonic() - began < 10
    (log,) = [log for log in report.result.evidence.logs if log.container == "kserve-container"]
    # +1: the window filter ends the last (cut) line with a newline.
    assert 0 < len(log.text.encode()) <= LogRequest(NAMESPACE, POD, "kserve-container").limit_bytes + 1


NOT_UTF8 = (
    b"2026-01-15T11:10:00.000000000Z INFO vLLM API server version 0.10.1\n"
    b"2026-01-15T11:10:01.000000000Z \xff\xfe\x00\x1b[31mbinary \xc3\x28 junk \xed\xa0\x80 \x80\x81\r\n"
    b"2026-01-15T11:10:02.000000000Z torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB \xe2\x82\n"
    b"\xf0\x9f\x98\n"
)


def test_non_utf8_bytes_in_logs_give_a_report(cluster: Cluster, tmp_path: Path) -> None:
    cluster.server.cluster.add_log(NAMESPACE, POD, "kserve-container", NOT_UTF8)
    report = report_of(cluster.params(), tmp_path)
    (log,) = [log for log in report.result.evidence.logs if log.container == "kserve-container"]
    assert "\ufffd" in log.text and "CUDA out of memory" in log.text
    assert report.document["versions"]["vllm"] == "0.10.1"
    assert "GPU_OOM" in report.document["root_causes"]  # the line after the junk is still parsed


# --- the target and the window -----------------------------------------------------------------------


def test_an_unknown_namespace_is_refused(cluster: Cluster) -> None:
    assert refusal(cluster.params(namespace="nope")) == (
        f"InferenceService '{ISVC}' not found in namespace 'nope' (existing: none)"
    )


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        ({"start": "2999-01-01T00:00:00Z", "end": "2999-01-01T01:00:00Z"}, "window ends in the future"),
        ({"start": "2026-01-15T11:00:00Z", "end": "2026-01-15T11:00:00Z"}, "empty or reversed window"),
        ({"start": "2026-01-15T12:00:00Z", "end": "2026-01-15T11:00:00Z"}, "empty or reversed window"),
        ({"start": "2026-01-01T00:00:00Z", "end": "2026-01-15T00:00:00Z"}, "window longer than 7 days"),
        ({"start": "", "end": "", "since": "8d"}, "window longer than 7 days"),
        ({"start": "", "end": "", "since": "99999999999d"}, "is too long"),
        ({"start": "", "end": "", "since": "0s"}, "empty or reversed window"),
        ({"start": "", "end": "", "since": "ten minutes"}, "bad duration 'ten minutes'"),
        ({"since": "1h"}, "either --since or --start/--end"),
        ({"start": "9999-12-31T23:00:00-05:00"}, "out of range"),
        ({"deadline": "soon"}, "bad duration 'soon'"),
        ({"request_timeout": "-1s"}, "bad duration '-1s'"),
    ],
    ids=["future", "empty", "reversed", "over-7-days", "since-8d", "since-overflow", "since-0", "bad-since",
         "since-and-start", "year-10000", "bad-deadline", "bad-request-timeout"],
)  # fmt: skip
def test_bad_windows_and_durations_are_refused(window: dict[str, str], expected: str, cluster: Cluster) -> None:
    try:
        params = cluster.params(**window)  # text is parsed here, where it enters
    except RunbookError as error:
        message = str(error)
    else:
        message = refusal(params)
    assert expected in message
    assert cluster.server.requests == []  # refused before anything is read


# --- bundles -----------------------------------------------------------------------------------------

BUNDLE_ISVC = {
    "apiVersion": "serving.kserve.io/v1beta1",
    "kind": "InferenceService",
    "metadata": {"name": "x", "namespace": "llm"},
}


def bundle_dir(tmp_path: Path, changes: dict[str, bytes | None]) -> Path:
    files = bundle_files([BUNDLE_ISVC], "llm", "x", logs={("x-predictor-1", "kserve-container"): "ok\n"})
    for name, data in changes.items():
        if data is None:
            files.pop(name)
        else:
            files[name] = data
    return write_bundle_files(files, tmp_path / "bundle")


def manifest_with(**fields: Any) -> bytes:
    document = json.loads(bundle_files([], "llm", "x")["manifest.json"])
    document.update(fields)
    return json.dumps(document).encode()


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"manifest.json": None}, "has no manifest.json: is it an evidence bundle?"),
        ({"manifest.json": b"{not json"}, "manifest.json is not valid JSON"),
        ({"manifest.json": b"[1, 2]"}, "manifest.json is not a JSON object"),
        ({"manifest.json": manifest_with(bundle_version="1")}, "has no valid bundle_version"),
        ({"manifest.json": manifest_with(bundle_version=7)}, "has bundle_version 7; this tool reads up to 1"),
        ({"manifest.json": manifest_with(captured_at="yesterday")}, "bad captured_at 'yesterday'"),
        ({"manifest.json": manifest_with(window={"start": "x"})}, "bad window start 'x'"),
        ({"objects/fixture.yaml": b"kind: Pod\n  metadata: [\n"}, "fixture.yaml is not valid YAML"),
        ({"metrics/index.json": b"{"}, "metrics/index.json is not valid JSON"),
        ({"metrics/index.json": b"[]"}, "metrics/index.json is not an object of query entries"),
        ({"manifest.json": manifest_with(reads={"what": "x"})}, "field 'reads' is not a list of objects"),
        ({"objects/fixture.yaml": b"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nstatus: true\n"}, "Pod p: status is not an object"),
        ({"objects/fixture.yaml": b"apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {v: 1}}\n"}, "metadata.labels is not a map"),
    ],
    ids=["no-manifest", "manifest-not-json", "manifest-not-object", "version-not-int", "newer-version",
         "bad-captured-at", "bad-window", "bad-yaml", "bad-metrics-index", "metrics-index-not-object",
         "reads-not-a-list", "status-not-object", "label-not-string"],
)  # fmt: skip
def test_malformed_bundles_are_refused(changes: dict[str, bytes | None], expected: str, tmp_path: Path) -> None:
    assert expected in refusal(TriageParams(bundle=str(bundle_dir(tmp_path, changes))))


def test_malformed_recorded_metrics_and_binary_logs_give_a_partial_report(tmp_path: Path) -> None:
    index = {"vllm_running": {"promql": "x", "template_index": 0, "status": "ok", "error": ""}}
    bundle = bundle_dir(
        tmp_path,
        {
            "metrics/index.json": json.dumps(index).encode(),
            "metrics/vllm_running.json": b'{"data": {"result": [{"values": [[1, "many"]]}]}}',
            "logs/llm/x-predictor-1/kserve-container.log": b"\xff\xfe\x00 not text \xc3\n",
            "objects/empty.yaml": b"",
            "objects/scalars.yaml": b"--- 42\n--- [a, b]\n--- {apiVersion: v9, kind: Unknown}\n",
        },
    )
    report = report_of(TriageParams(bundle=str(bundle)), tmp_path / "out")
    assert report.document["partial"] is True
    assert report.document["sources"] == {"cluster": "bundle", "prometheus": "bundle"}


def test_a_truncated_tarball_is_refused(tmp_path: Path) -> None:
    tarball = write_bundle_files(bundle_files([BUNDLE_ISVC], "llm", "x"), tmp_path / "b.tar.gz")
    truncated = tmp_path / "cut.tar.gz"
    truncated.write_bytes(tarball.read_bytes()[: len(tarball.read_bytes()) // 2])
    assert "is not a readable .tar.gz" in refusal(TriageParams(bundle=str(truncated)))


def test_a_tarball_with_links_and_odd_members_reads_only_regular_files(tmp_path: Path) -> None:
    """Symlinks and absolute names in an archive are never followed or written anywhere."""
    source = bundle_dir(tmp_path, {})
    archive = tmp_path / "odd.tar.gz"
    with tarfile.open(archive, "w:gz") as bundle:
        bundle.add(source, arcname="b")
        link = tarfile.TarInfo("b/objects/link.yaml")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        bundle.addfile(link)
    result = run(TriageParams(bundle=str(archive)))
    assert result.evidence.target == Target("llm", "x")


# --- outputs -----------------------------------------------------------------------------------------


def test_two_runs_in_the_same_second_never_share_a_folder(tmp_path: Path) -> None:
    now = datetime(2026, 1, 15, 12, 0, tzinfo=timezone.utc)
    folders = [headless.output_dir(None, Target("llm", "x"), now, tmp_path) for _ in range(3)]
    assert [folder.name for folder in folders] == [
        "20260115T120000Z-llm-x",
        "20260115T120000Z-llm-x-1",
        "20260115T120000Z-llm-x-2",
    ]


def test_a_failed_write_leaves_the_previous_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "findings.json"
    target.write_text("previous")
    with pytest.raises(TypeError):
        write_atomic(target, "not bytes")  # type: ignore[arg-type]
    assert target.read_text() == "previous"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["findings.json"]
    write_atomic(target, b"new")
    assert target.read_text() == "new" and sorted(path.name for path in tmp_path.iterdir()) == ["findings.json"]
    assert oct(target.stat().st_mode & 0o777) == oct(0o644)


# --- the CLI: exit codes, one line, no traceback -----------------------------------------------------


def kserve_runbook(*arguments: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nbhelpers", *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], expected: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("kserve-runbook: error: "), result.stderr
    assert expected in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("command", "case"),
    [("triage", "missing-kubeconfig"), ("triage", "unknown-context"), ("capture", "no-kubeconfig-at-all")],
)
def test_cli_refuses_a_bad_kubeconfig_in_one_line(command: str, case: str, shared: Cluster, tmp_path: Path) -> None:
    target = ["-n", NAMESPACE, "--isvc", ISVC, "--out", str(tmp_path / "out")]
    if case == "missing-kubeconfig":
        result = kserve_runbook(command, "--kubeconfig", str(tmp_path / "absent"), *target, cwd=tmp_path)
        assert_one_line_error(result, f"kubeconfig {tmp_path / 'absent'} not found")
    elif case == "unknown-context":
        config = ["--kubeconfig", str(shared.kubeconfig), "--context", "prod"]
        result = kserve_runbook(command, *config, *target, cwd=tmp_path)
        assert_one_line_error(result, "context 'prod' not in kubeconfig")
    else:
        outside_a_pod = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
        result = kserve_runbook(command, *target, cwd=tmp_path, env={**outside_a_pod, "HOME": str(tmp_path)})
        assert_one_line_error(result, "no kubeconfig found")
    assert not (tmp_path / "out").exists()  # nothing is written for a run that could not start


def test_cli_refuses_a_newer_bundle_and_a_truncated_tarball(tmp_path: Path) -> None:
    newer = bundle_dir(tmp_path, {"manifest.json": manifest_with(bundle_version=2)})
    assert_one_line_error(
        kserve_runbook("triage", "--bundle", str(newer), cwd=tmp_path), "upgrade kserve-vllm-runbooks"
    )
    tarball = write_bundle_files(bundle_files([BUNDLE_ISVC], "llm", "x"), tmp_path / "b.tar.gz")
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(tarball.read_bytes()[:100])
    assert_one_line_error(kserve_runbook("triage", "--bundle", str(cut), cwd=tmp_path), "not a readable .tar.gz")
    not_an_archive = tmp_path / "notes.txt"
    not_an_archive.write_text("this is not a bundle\n")
    assert_one_line_error(
        kserve_runbook("triage", "--bundle", str(not_an_archive), cwd=tmp_path), "(not a tar archive, or cut short)"
    )


def test_capture_with_fail_on_partial_exits_1_naming_the_lost_reads(shared: Cluster, tmp_path: Path) -> None:
    """Without the flag a partial capture exits 0 (the bundle is what was asked for); with it, 1."""
    shared.server.inject(f"/api/v1/namespaces/{NAMESPACE}/events", status=403)
    arguments = ["capture", "--kubeconfig", str(shared.kubeconfig), "-n", NAMESPACE, "--isvc", ISVC]
    window = ["--start", WINDOW["start"], "--end", WINDOW["end"]]
    try:
        failed = kserve_runbook(*arguments, *window, "--out", str(tmp_path / "b"), "--fail-on-partial", cwd=tmp_path)
    finally:
        shared.server.clear_injections()
    assert failed.returncode == 1, failed.stderr
    assert failed.stdout == f"bundle: {tmp_path / 'b'} (1 reads failed; see manifest.json)\n"
    assert failed.stderr.splitlines() == [
        f"kserve-runbook: partial result (--fail-on-partial): 1 reads failed: forbidden on Event in {NAMESPACE}"
    ]
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())  # the bundle is written all the same
    assert {read["what"]: read["status"] for read in manifest["reads"]}[f"Event in {NAMESPACE}"] == "forbidden"


@pytest.mark.notebook
@pytest.mark.timeout(180)
def test_the_cli_deadline_still_writes_findings_and_summary_on_a_slow_api_server(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Issue #19: with --deadline, reading stops early enough that findings.json and summary.md are always
    written (partial, saying why), instead of papermill's cell timeout killing the run with nothing on disk."""
    cluster.server.inject("/apis/*", delay=0.4)  # discovery and the InferenceService stay quick for the preflight
    out = tmp_path / "out"
    window = [f"--{name}={value}" for name, value in WINDOW.items()]
    finished = subprocess.run(
        [sys.executable, "-m", "nbhelpers", "triage", "--kubeconfig", str(cluster.kubeconfig), "--namespace",
         NAMESPACE, "--isvc", ISVC, *window, "--request-timeout", "5s", "--deadline", "3s", "--out", str(out), "-q"],
        capture_output=True, text=True, timeout=170,
    )  # fmt: skip
    assert finished.returncode in (0, 1), finished.stderr
    document = json.loads((out / "findings.json").read_text())
    assert document["partial"] is True
    assert "_Coverage: " in (out / "summary.md").read_text()
