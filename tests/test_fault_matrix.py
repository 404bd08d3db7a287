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

import gzip
import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from builders import CAPTURED_AT, bundle_files, evidence_from_objects
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
from nbhelpers.evidence.capture import write_bundle
from nbhelpers.evidence.model import ContainerLog, Evidence, Target
from nbhelpers.render.findings_json import write_outputs
from nbhelpers.sources import kinds
from nbhelpers.sources.base import LogRequest
from nbhelpers.sources.bundle import open_bundle, write_bundle_files
from nbhelpers.sources.cluster_live import LiveCluster
from nbhelpers.triage import TriageParams, TriageResult, params_from_text, run
from nbhelpers.util.files import write_atomic
from nbhelpers.util.safe_paths import child_path

pytestmark = pytest.mark.integration

WINDOW = {"start": "2026-01-15T11:00:00Z", "end": "2026-01-15T12:00:00Z"}
NAMESPACE, ISVC = "llm", "vllm-llm"
POD = "vllm-llm-predictor-00001-deployment-7d9c5f6b8d-4xk2p"  # the pod whose logs gather() reads
# Every kind gather() reads for an InferenceService; Knative's Route is in the kind table but never read, and the
# LLMInferenceService's own kinds are read only for that target (tests/test_llmisvc_live.py).
LLMISVC_ONLY = (
    kinds.LLM_INFERENCE_SERVICE,
    kinds.LLM_INFERENCE_SERVICE_CONFIG,
    kinds.INFERENCE_POOL,
    kinds.INFERENCE_POOL_ALPHA,
    kinds.LEADER_WORKER_SET,
)
KINDS_READ = tuple(kind for kind in kinds.ALL_KINDS if kind is not kinds.KNATIVE_ROUTE and kind not in LLMISVC_ONLY)


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
    # Reads after the deadline are not sent at all: one after the other, fewer than 6 fit before it; reading ahead
    # adds at most the other reads in flight beside one (LiveCluster.parallel_reads), each cut at the deadline.
    assert len(cluster.server.requests) < 6 + LiveCluster.parallel_reads - 1


# --- Prometheus --------------------------------------------------------------------------------------


def free_address() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


DEEP_MATRIX = (
    b'{"status": "success", "data": {"resultType": "matrix", "result": ' + b"[" * 10_000 + b"]" * 10_000 + b"}}"
)
HUGE_TIMESTAMP_MATRIX = (
    json.dumps(
        {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": [[0, "1"]]}]}}
    )
    .replace("[0,", "[" + "9" * 4000 + ",")
    .encode()
)  # under Python's 4,300 digits, too large for a float


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
        (PrometheusReply(body=DEEP_MATRIX), "metrics error: ", "KSERVE_RUNBOOK_MAX_NESTING_DEPTH"),
        (PrometheusReply(body=HUGE_TIMESTAMP_MATRIX), "metrics error: ", "malformed answer"),
    ],
    ids=["401", "403", "500", "bad-query", "not-json", "slow", "10000-deep-json", "4000-digit-timestamp"],
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
        ({"objects/fixture.yaml": b"apiVersion: v1\nkind: Event\nmetadata: {name: e}\ncount: many\n"}, "Event e: count is not an integer"),
        ({"objects/fixture.yaml": b"apiVersion: v1\nkind: Event\nmetadata: {name: e}\nseries: {count: .inf}\n"}, "Event e: series.count is not an integer"),
        ({"objects/fixture.yaml": b"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nstatus: {containerStatuses: [{restartCount: .inf}]}\n"}, "Pod p: status.containerStatuses[].restartCount is not an integer"),
        ({"objects/fixture.yaml": b"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nstatus: {containerStatuses: kserve-container}\n"}, "Pod p: status.containerStatuses is not a list of objects"),
        ({"objects/fixture.yaml": b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: !!binary aGk=\n"}, "values are not JSON"),
    ],
    ids=["no-manifest", "manifest-not-json", "manifest-not-object", "version-not-int", "newer-version",
         "bad-captured-at", "bad-window", "bad-yaml", "bad-metrics-index", "metrics-index-not-object",
         "reads-not-a-list", "status-not-object", "label-not-string", "event-count-text", "event-series-count-inf",
         "restart-count-inf", "container-statuses-text", "binary-tag"],
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


def test_cli_refuses_a_wrong_typed_event_count_in_one_line(tmp_path: Path) -> None:
    """It ended in a traceback (exit 1, which automation reads as a critical finding) when summary.md was written."""
    event = b"apiVersion: v1\nkind: Event\nmetadata: {name: e, namespace: llm}\ncount: many\n"
    bundle = bundle_dir(tmp_path, {"objects/events.yaml": event})
    result = kserve_runbook("triage", "--bundle", str(bundle), cwd=tmp_path)
    assert_one_line_error(result, "bundle file objects/events.yaml: Event e: count is not an integer")


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


# --- hostile input: bombs, endless pages, names that leave their folder (issue #19) -----------------
#
# Each bomb is generated here, small on disk, and triaged by the CLI in a child process whose peak RSS is
# measured: it must end in one line naming the limit (exit 2) long before it costs memory.

PEAK_RSS_BOUND_MB = 400  # generous: a refused bomb peaks near the interpreter's own ~80 MB
BOMB_MAX_ON_DISK = 512 * 1024

# Runs the command as the only child of a fresh interpreter, so RUSAGE_CHILDREN is that command's peak
# alone (this test process may have waited for heavier children before).
MEASURE = """\
import json, resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=120)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr, "peak": peak}))
"""


@dataclass(frozen=True)
class Measured:
    result: subprocess.CompletedProcess[str]
    peak_mb: float


def kserve_runbook_measured(*arguments: str, cwd: Path) -> Measured:
    wrapper = subprocess.run(
        [sys.executable, "-c", MEASURE, sys.executable, "-m", "nbhelpers", *arguments],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd,
    )
    assert wrapper.returncode == 0, wrapper.stderr
    report = json.loads(wrapper.stdout)
    unit = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is in bytes on macOS, KiB on Linux
    result = subprocess.CompletedProcess(list(arguments), report["returncode"], report["stdout"], report["stderr"])
    return Measured(result, report["peak"] * unit / 2**20)


def healthy_members() -> dict[str, bytes]:
    """A small valid bundle (manifest and an InferenceService) that each bomb is added to."""
    return bundle_files([BUNDLE_ISVC], "llm", "x")


def tar_member(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = size
    return info.tobuf(tarfile.PAX_FORMAT)


def tar_file(name: str, data: bytes) -> bytes:
    return tar_member(name, len(data)) + data + bytes(-len(data) % tarfile.BLOCKSIZE)


def sparse_member_bomb(tmp_path: Path) -> Path:
    """A PAX 1.0 sparse member: a one-block map declaring 1 GiB that is all hole (~350 bytes on disk)."""
    archive = tmp_path / "sparse.tar.gz"
    with tarfile.open(archive, "w:gz", format=tarfile.PAX_FORMAT) as bundle:
        for name, data in healthy_members().items():
            info = tarfile.TarInfo(f"b/{name}")
            info.size = len(data)
            bundle.addfile(info, io.BytesIO(data))
        sparse_map = f"1\n{2**30}\n0\n".encode().ljust(tarfile.BLOCKSIZE, b"\0")
        hole = tarfile.TarInfo("b/logs/llm/x-predictor-1/kserve-container.log")
        hole.size = len(sparse_map)
        hole.pax_headers = {
            "GNU.sparse.major": "1",
            "GNU.sparse.minor": "0",
            "GNU.sparse.name": hole.name,
            "GNU.sparse.realsize": str(2**30),
        }
        bundle.addfile(hole, io.BytesIO(sparse_map))
    return archive


def zeros_bomb(tmp_path: Path, name: str, member_sizes: list[int]) -> Path:
    """A .tar.gz of zero-filled members, written as concatenated gzip members (one per MiB of zeros),
    so that hundreds of MiB cost a few hundred KB and no time to build."""
    archive = tmp_path / name
    mib_of_zeros = gzip.compress(bytes(2**20), mtime=0)
    with archive.open("wb") as out:
        out.write(gzip.compress(b"".join(tar_file(f"b/{n}", d) for n, d in healthy_members().items()), mtime=0))
        for index, size in enumerate(member_sizes):
            out.write(gzip.compress(tar_member(f"b/logs/llm/x-predictor-1/c{index}.log", size), mtime=0))
            out.writelines(mib_of_zeros for _ in range(size // 2**20))
        out.write(gzip.compress(bytes(2 * tarfile.BLOCKSIZE), mtime=0))
    return archive


def gzip_of_zeros_bomb(tmp_path: Path) -> Path:
    """One member of 400 MiB of zeros (the probe's 333 KB gzip that took 399 MB)."""
    return zeros_bomb(tmp_path, "zeros.tar.gz", [400 * 2**20])


def many_zeros_bomb(tmp_path: Path) -> Path:
    """Five members of 60 MiB, each under the per-file limit, 300 MiB together."""
    return zeros_bomb(tmp_path, "many-zeros.tar.gz", [60 * 2**20] * 5)


def many_members_bomb(tmp_path: Path) -> Path:
    """10,001 empty members."""
    archive = tmp_path / "members.tar.gz"
    headers = b"".join(tar_member(f"b/objects/empty-{index}.yaml", 0) for index in range(10_001))
    archive.write_bytes(gzip.compress(tar_file("b/manifest.json", healthy_members()["manifest.json"]) + headers))
    return archive


def directory_bomb(tmp_path: Path, name: str, text: str) -> Path:
    return write_bundle_files({**healthy_members(), name: text.encode()}, tmp_path / "bundle")


def billion_laughs_bomb(tmp_path: Path) -> Path:
    """Nine levels of nine aliases: 9^9 (387 million) references in 1.2 KB of YAML."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * 9)}]" for level in range(1, 10)]
    return directory_bomb(
        tmp_path,
        "objects/laughs.yaml",
        "apiVersion: v1\nkind: ConfigMap\ndata:\n" + "\n".join(f"  {line}" for line in lines),
    )


def recursive_alias_bomb(tmp_path: Path) -> Path:
    return directory_bomb(tmp_path, "objects/loop.yaml", "apiVersion: v1\nkind: ConfigMap\ndata: &loop {a: *loop}\n")


def deep_json_bomb(tmp_path: Path) -> Path:
    manifest = healthy_members()["manifest.json"].decode()
    deep = "[" * 10_000 + "]" * 10_000
    bundle = write_bundle_files(healthy_members(), tmp_path / "bundle")
    (bundle / "manifest.json").write_text(manifest[:-1] + f', "versions": {{"kubernetes": {deep}}}}}')
    return bundle


def huge_integer_bomb(tmp_path: Path) -> Path:
    manifest = healthy_members()["manifest.json"].decode()
    bundle = write_bundle_files(healthy_members(), tmp_path / "bundle")
    (bundle / "manifest.json").write_text(manifest[:-1] + f', "tool_version": {"9" * 5000}}}')
    return bundle


@pytest.mark.parametrize(
    ("bomb", "expected"),
    [
        (sparse_member_bomb, "is a sparse file"),
        (gzip_of_zeros_bomb, "is 400 MiB: over the limit of 64 MiB for the size of one bundle file "
                             "(raise it with KSERVE_RUNBOOK_MAX_BUNDLE_FILE_BYTES=BYTES)"),
        (many_zeros_bomb, "files add up to more than 256 MiB: over the limit of 256 MiB for the total size of a "
                          "bundle's files (raise it with KSERVE_RUNBOOK_MAX_BUNDLE_UNCOMPRESSED_BYTES=BYTES)"),
        (many_members_bomb, "it holds more than 10,000 entries: over the limit of 10,000 for the number of "
                            "entries in a bundle (raise it with KSERVE_RUNBOOK_MAX_BUNDLE_FILES=N)"),
        (billion_laughs_bomb, "objects/laughs.yaml: YAML aliases repeat more than 10,000 nodes: over the limit of "
                              "10,000 for the nodes repeated by YAML aliases in one document "
                              "(raise it with KSERVE_RUNBOOK_MAX_YAML_ALIAS_NODES=N)"),
        (recursive_alias_bomb, "objects/loop.yaml is not valid YAML (found an alias *loop inside the node it names)"),
        (deep_json_bomb, "manifest.json: a document nested too deep to parse: over the limit of 100 for the "
                         "nesting depth of a JSON or YAML document (raise it with KSERVE_RUNBOOK_MAX_NESTING_DEPTH=N)"),
        (huge_integer_bomb, "manifest.json: an integer of 5,000 digits: over the limit of 100 for the digits of an "
                            "integer in a JSON or YAML document (raise it with KSERVE_RUNBOOK_MAX_INT_DIGITS=N)"),
    ],
    ids=["sparse-member", "gzip-of-zeros", "zeros-over-the-total", "10001-members", "billion-laughs",
         "recursive-alias", "10000-deep-json", "5000-digit-integer"],
)  # fmt: skip
def test_a_bomb_bundle_is_refused_in_one_line_within_bounded_memory(
    bomb: Any, expected: str, tmp_path: Path, record_property: Any
) -> None:
    bundle = bomb(tmp_path)
    on_disk = sum(path.stat().st_size for path in bundle.rglob("*")) if bundle.is_dir() else bundle.stat().st_size
    assert on_disk < BOMB_MAX_ON_DISK

    measured = kserve_runbook_measured("triage", "--bundle", str(bundle), cwd=tmp_path)

    record_property("peak_rss_mb", round(measured.peak_mb, 1))
    assert_one_line_error(measured.result, expected)
    assert measured.peak_mb < PEAK_RSS_BOUND_MB, f"peak RSS {measured.peak_mb:.0f} MB"
    assert not (tmp_path / "outputs").exists()


def test_a_limit_is_raised_by_its_environment_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = json.loads(healthy_members()["manifest.json"])
    bundle = write_bundle_files(healthy_members(), tmp_path / "bundle")
    (bundle / "manifest.json").write_text(json.dumps(manifest)[:-1] + f', "tool_version": {"7" * 150}}}')
    assert "KSERVE_RUNBOOK_MAX_INT_DIGITS=N" in refusal(TriageParams(bundle=str(bundle)))

    monkeypatch.setenv("KSERVE_RUNBOOK_MAX_INT_DIGITS", "200")
    assert run(TriageParams(bundle=str(bundle))).evidence.target == Target("llm", "x")

    monkeypatch.setenv("KSERVE_RUNBOOK_MAX_BUNDLE_BYTES", "100")
    tarball = write_bundle_files(healthy_members(), tmp_path / "b.tar.gz")
    assert "(raise it with KSERVE_RUNBOOK_MAX_BUNDLE_BYTES=BYTES)" in refusal(TriageParams(bundle=str(tarball)))

    monkeypatch.setenv("KSERVE_RUNBOOK_MAX_BUNDLE_BYTES", "lots")
    assert refusal(TriageParams(bundle=str(tarball))) == (
        "KSERVE_RUNBOOK_MAX_BUNDLE_BYTES='lots': give the size of a bundle archive limit as a whole number >= 1"
    )


# --- live lists that never end -------------------------------------------------------------------------


def endless_pages(query: Mapping[str, str]) -> str:
    """A list answer with no items and a new continue token every time."""
    following = int(query.get("continue") or 0) + 1
    return json.dumps({"kind": "EventList", "apiVersion": "v1", "metadata": {"continue": str(following)}, "items": []})


def test_an_endless_continue_token_stops_at_the_page_limit_with_a_partial_report(
    cluster: Cluster, tmp_path: Path
) -> None:
    events = f"/api/v1/namespaces/{NAMESPACE}/events"
    cluster.server.clear_requests()  # tests on the shared server before this one leave theirs
    cluster.server.inject(events, body=endless_pages)

    report = report_of(cluster.params(), tmp_path)

    assert_partial_naming(report, "read failed (error): ", f"Event in {NAMESPACE}")
    record = report.result.evidence.failure(f"Event in {NAMESPACE}")
    assert record is not None and record.reason == (
        "the API server still sent a continue token after 100 pages: over the limit of 100 for the pages of one "
        "list from the API server (raise it with KSERVE_RUNBOOK_MAX_LIST_PAGES=N)"
    )
    assert len([request for request in cluster.server.requests if request.path == events]) == 100


def test_a_repeated_continue_token_stops_at_once_with_a_partial_report(cluster: Cluster, tmp_path: Path) -> None:
    events = f"/api/v1/namespaces/{NAMESPACE}/events"
    cluster.server.clear_requests()
    cluster.server.inject(events, body='{"kind": "EventList", "metadata": {"continue": "again"}, "items": []}')
    report = report_of(cluster.params(), tmp_path)
    assert_partial_naming(report, "read failed (error): ", "repeated a continue token")
    assert len([request for request in cluster.server.requests if request.path == events]) == 2


def test_capture_against_an_endless_list_ends_partial_within_bounded_memory(
    shared: Cluster, tmp_path: Path, record_property: Any
) -> None:
    shared.server.inject(f"/api/v1/namespaces/{NAMESPACE}/events", body=endless_pages)
    arguments = ["capture", "--kubeconfig", str(shared.kubeconfig), "-n", NAMESPACE, "--isvc", ISVC]
    window = ["--start", WINDOW["start"], "--end", WINDOW["end"]]
    try:
        measured = kserve_runbook_measured(
            *arguments, *window, "--out", str(tmp_path / "b"), "--fail-on-partial", cwd=tmp_path
        )
    finally:
        shared.server.clear_injections()
    record_property("peak_rss_mb", round(measured.peak_mb, 1))
    assert measured.result.returncode == 1, measured.result.stderr
    assert measured.result.stderr.splitlines() == [
        f"kserve-runbook: partial result (--fail-on-partial): 1 reads failed: error on Event in {NAMESPACE}"
    ]
    assert measured.peak_mb < PEAK_RSS_BOUND_MB
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    (record,) = [read for read in manifest["reads"] if read["what"] == f"Event in {NAMESPACE}"]
    assert "KSERVE_RUNBOOK_MAX_LIST_PAGES" in record["reason"]


# --- names that would leave their folder ---------------------------------------------------------------


def tree(root: Path) -> set[str]:
    return {path.relative_to(root).as_posix() for path in root.rglob("*")}


HOSTILE_NAMESPACE, HOSTILE_POD, HOSTILE_CONTAINER = "a/../../b", "../../../../pod", "../../x"


def hostile_evidence() -> Evidence:
    """Evidence (as a live source or a re-capture could produce it) whose names climb out of any folder."""
    isvc = {**BUNDLE_ISVC, "metadata": {"name": "x", "namespace": HOSTILE_NAMESPACE}}
    evidence = evidence_from_objects([isvc], HOSTILE_NAMESPACE, "x")
    logs = tuple(
        ContainerLog(HOSTILE_NAMESPACE, HOSTILE_POD, HOSTILE_CONTAINER, previous, f"log text {previous}\n")
        for previous in (False, True)
    )
    return replace(evidence, logs=logs)


@pytest.mark.parametrize("destination", ["b", "b.tar.gz"])
def test_capture_of_names_holding_dot_dot_writes_nothing_outside_the_bundle(destination: str, tmp_path: Path) -> None:
    before = tree(tmp_path)
    written = write_bundle(hostile_evidence(), tmp_path / "out" / destination, CAPTURED_AT)

    created = tree(tmp_path) - before
    assert all(name == "out" or name.startswith(f"out/{destination}") for name in created), created
    if written.is_file():
        with tarfile.open(written) as archive:
            names = archive.getnames()
        assert not [name for name in names if name.startswith("/") or ".." in name.split("/")], names
    cluster, _metrics, _manifest = open_bundle(written)
    for previous in (False, True):  # read back under the same names
        request = LogRequest(HOSTILE_NAMESPACE, HOSTILE_POD, HOSTILE_CONTAINER, previous)
        assert cluster.logs(request) == f"log text {previous}\n"


def test_recapturing_a_tarball_with_dot_dot_member_names_writes_nothing_outside(tmp_path: Path) -> None:
    """The probe's attack: a container named ``../../…/outside/evil`` and an archive member at that path."""
    escape = "../" * 30 + (tmp_path / "outside" / "evil").as_posix().lstrip("/")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "x-predictor-1",
            "namespace": "llm",
            "labels": {"serving.kserve.io/inferenceservice": "x"},
        },
        "status": {"containerStatuses": [{"name": escape, "restartCount": 0}]},
    }
    files = bundle_files([BUNDLE_ISVC, pod], "llm", "x")
    files[f"logs/llm/x-predictor-1/{escape}.log"] = b"2026-01-15T11:30:00Z planted\n"
    hostile = tmp_path / "hostile.tar.gz"
    with tarfile.open(hostile, "w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(f"b/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    before = tree(tmp_path)

    for out in ("recaptured", "recaptured.tar.gz"):
        result = kserve_runbook("capture", "--bundle", str(hostile), "--out", str(tmp_path / out), cwd=tmp_path)
        assert result.returncode == 0, result.stderr

    assert not (tmp_path / "outside").exists()
    created = tree(tmp_path) - before
    assert all(name.startswith(("recaptured/", "recaptured.tar.gz")) or name == "recaptured" for name in created)
    with tarfile.open(tmp_path / "recaptured.tar.gz") as archive:
        assert not [name for name in archive.getnames() if ".." in name.split("/")]


@pytest.mark.parametrize("link", ["file", "folder"])
def test_a_symlink_in_a_directory_bundle_is_refused_and_never_followed(link: str, tmp_path: Path) -> None:
    secret = tmp_path / "elsewhere"
    secret.mkdir()
    (secret / "secret.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: stolen, namespace: llm}\n")
    bundle = write_bundle_files(healthy_members(), tmp_path / "bundle")
    if link == "file":
        (bundle / "objects" / "linked.yaml").symlink_to(secret / "secret.yaml")
        expected = "objects/linked.yaml is a symbolic link, and links in a bundle are not followed"
    else:
        (bundle / "objects" / "linked").symlink_to(secret, target_is_directory=True)
        expected = "objects/linked is a symbolic link, and links in a bundle are not followed"

    assert_one_line_error(kserve_runbook("triage", "--bundle", str(bundle), cwd=tmp_path), expected)
    recapture = kserve_runbook("capture", "--bundle", str(bundle), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert_one_line_error(recapture, expected)
    assert not (tmp_path / "out").exists()


def test_an_output_folder_named_from_a_bundle_stays_under_outputs(tmp_path: Path) -> None:
    """The helper the CLI names run folders with: a bundle's ``a/../../b`` namespace cannot climb out."""
    outputs = tmp_path / "outputs"
    folder = child_path(outputs, f"20260115T120000Z-{HOSTILE_NAMESPACE}-x")
    assert folder.parent == outputs and folder.name.startswith("20260115T120000Z-a_.._.._b-x_")
    assert child_path(outputs, "20260115T120000Z-llm-vllm-llm") == outputs / "20260115T120000Z-llm-vllm-llm"


@pytest.mark.notebook
@pytest.mark.timeout(180)
def test_the_cli_deadline_still_writes_findings_and_summary_on_a_slow_api_server(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Issue #19: with --deadline, reading stops early enough that findings.json and summary.md are always
    written (partial, saying why), instead of papermill's cell timeout killing the run with nothing on disk."""
    cluster.server.inject("/apis/*", delay=0.4)  # every API group read is slow; the core ones stay quick
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


def test_a_hostile_target_name_cannot_put_the_report_outside_outputs(tmp_path: Path) -> None:
    """Issue #19: the output folder is named from the bundle's namespace and name, which anyone can write."""
    base = tmp_path / "outputs"
    now = datetime(2026, 1, 15, 12, tzinfo=timezone.utc)
    folder = headless.output_dir(None, Target("x/../../../escape", "../isvc"), now, base)
    assert folder.resolve().parent == base.resolve()
    assert [path for path in tmp_path.rglob("*") if base not in path.parents and path != base] == []
