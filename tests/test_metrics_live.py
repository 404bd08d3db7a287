"""LiveMetrics against the real Prometheus (backfilled incident) and against small HTTP servers on 127.0.0.1."""

from __future__ import annotations

import base64
import json
import logging
import math
import shutil
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from promharness import (
    ACTIVATOR_PER_SECOND,
    CALM_AT,
    E2E,
    GENERATION_TOKENS_PER_REQUEST,
    GPU_FB_RESERVED_MIB,
    GPU_FB_TOTAL_MIB,
    HOT_POD,
    HPA_CURRENT,
    HPA_DESIRED,
    INCIDENT_AT,
    ISTIO_PER_SECOND,
    ISVC,
    ITL,
    KNATIVE_PER_SECOND,
    KNATIVE_QUEUE_PER_SECOND,
    NAMESPACE,
    NGINX_PER_SECOND,
    NOT_READY_AT,
    NUM_GPU_BLOCKS,
    OLD_ISVC,
    OLD_POD,
    OLD_POD_PROFILE,
    OUTER_GATEWAY_PER_SECOND,
    PODS,
    PROMPT_TOKENS_PER_REQUEST,
    QUEUE,
    RECOVERY_AT,
    RESTART_AT,
    SECOND_POD,
    SERVICE_HOST,
    TTFT,
    WINDOW,
    HistogramTable,
    PrometheusServer,
    free_port,
    prometheus_server,  # noqa: F401  (the session fixture)
)

from nbhelpers.errors import ReadFailed, RunbookError
from nbhelpers.evidence.gather import _query_metrics
from nbhelpers.evidence.model import ReadRecord, Target
from nbhelpers.metrics import catalog
from nbhelpers.metrics.series import MetricData
from nbhelpers.sources.base import SeriesData
from nbhelpers.sources.metrics_live import LiveMetrics
from nbhelpers.util.times import query_step_seconds

pytestmark = pytest.mark.integration

STEP = query_step_seconds(WINDOW)
ANSWER_FILE = Path(__file__).parent / "fixtures" / "metrics" / "query_range_answer.json"
TOKEN = "s3cr3t-bearer-token"


def open_live(url: str, **options: object) -> LiveMetrics:
    """A LiveMetrics with plain defaults; ``options`` override them."""
    settings = {"token": None, "ca_file": None, "headers": {}, "verify": True, "timeout_seconds": 10.0, **options}
    return LiveMetrics(url, **settings)


@pytest.fixture(scope="module")
def live(prometheus_server: PrometheusServer) -> Iterator[LiveMetrics]:  # noqa: F811
    source = open_live(prometheus_server.url)
    yield source
    source.close()


@pytest.fixture(scope="module")
def vllm_llm(live: LiveMetrics) -> tuple[dict[str, MetricData], list[ReadRecord]]:
    records: list[ReadRecord] = []
    return _query_metrics(live, Target(NAMESPACE, ISVC), WINDOW, records), records


@pytest.fixture(scope="module")
def old_llm(live: LiveMetrics) -> tuple[dict[str, MetricData], list[ReadRecord]]:
    records: list[ReadRecord] = []
    return _query_metrics(live, Target(NAMESPACE, OLD_ISVC), WINDOW, records), records


# ---------------------------------------------------------------------------------------------------------------
# Reading answers


def keyed(data: MetricData, *labels: str) -> dict[tuple[str, ...], SeriesData]:
    """The series of an answer by the values of ``labels`` (each combination must be unique)."""
    found: dict[tuple[str, ...], SeriesData] = {}
    for series in data.series:
        key = tuple(series.labels.get(label, "") for label in labels)
        assert key not in found, f"{data.id}: two series for {key}"
        found[key] = series
    return found


def by_pod(data: MetricData, label: str = "pod") -> dict[str, SeriesData]:
    return {key[0]: series for key, series in keyed(data, label).items()}


def only(data: MetricData) -> SeriesData:
    assert len(data.series) == 1, f"{data.id}: expected one series, got {[s.labels for s in data.series]}"
    return data.series[0]


def value_at(series: SeriesData, moment: datetime) -> float:
    stamp = moment.timestamp()
    for timestamp, value in series.samples:
        if timestamp == stamp:
            return value
    raise AssertionError(f"no sample at {moment.isoformat()} in {series.labels}")


def values(series: SeriesData) -> list[float]:
    return [value for _, value in series.samples if not math.isnan(value)]


def approx(expected: float) -> object:
    return pytest.approx(expected, rel=1e-6, abs=1e-9)


# ---------------------------------------------------------------------------------------------------------------
# What each catalog query must answer for vllm-llm


def expect_running(data: MetricData) -> None:
    pods = by_pod(data)
    assert set(pods) == {HOT_POD, SECOND_POD}  # not the decoys in namespace "other" or the router pod
    assert max(values(pods[HOT_POD])) == PODS[HOT_POD].running.incident  # both engines summed
    assert value_at(pods[HOT_POD], CALM_AT) == PODS[HOT_POD].running.calm
    assert max(values(pods[SECOND_POD])) == PODS[SECOND_POD].running.incident


def expect_waiting(data: MetricData) -> None:
    pods = by_pod(data)
    for pod in (HOT_POD, SECOND_POD):
        assert value_at(pods[pod], INCIDENT_AT) == PODS[pod].waiting.incident
        assert value_at(pods[pod], CALM_AT) == 0


def expect_kv_usage(data: MetricData) -> None:
    pods = by_pod(data)
    assert set(pods) == {HOT_POD, SECOND_POD}
    for pod in pods:
        assert max(values(pods[pod])) == approx(PODS[pod].kv_usage.incident)  # the busier engine
        assert all(0 <= value <= 1 for value in values(pods[pod]))


def expect_preemptions(data: MetricData) -> None:
    series = only(data)
    total = sum(profile.preemptions_per_second.incident for profile in PODS.values())
    assert value_at(series, INCIDENT_AT) == approx(total)
    assert value_at(series, CALM_AT) == 0


def expect_quantile(table: HistogramTable, quantile: str) -> Callable[[MetricData], None]:
    def check(data: MetricData) -> None:
        expected = table.p99 if quantile == "p99" else table.p95
        assert expected is not None
        series = only(data)
        assert value_at(series, CALM_AT) == approx(expected.calm)
        assert value_at(series, INCIDENT_AT) == approx(expected.incident)
        assert value_at(series, RECOVERY_AT) == approx(expected.recovery)

    return check


def expect_per_request_rate(per_request: float) -> Callable[[MetricData], None]:
    def check(data: MetricData) -> None:
        requests_per_second = sum(profile.requests_per_second for profile in PODS.values())
        assert value_at(only(data), CALM_AT) == approx(requests_per_second * per_request)

    return check


def expect_cache_config(data: MetricData) -> None:
    pods = by_pod(data)
    assert set(pods) == {HOT_POD, SECOND_POD}  # the hot pod's two engines report the same configuration
    for series in pods.values():
        assert series.labels["num_gpu_blocks"] == NUM_GPU_BLOCKS
        assert series.labels["block_size"] == "16"


def expect_restarts(data: MetricData) -> None:
    series = keyed(data, "pod", "container")
    assert len(series) == 4
    hot = series[(HOT_POD, "kserve-container")]
    assert value_at(hot, CALM_AT) == 0
    assert value_at(hot, RECOVERY_AT) == 1
    assert all(max(values(other)) == 0 for key, other in series.items() if key != (HOT_POD, "kserve-container"))


def expect_last_terminated(data: MetricData) -> None:
    series = only(data)
    assert series.labels == {"pod": HOT_POD, "container": "kserve-container", "reason": "OOMKilled"}
    assert series.samples[0][0] == RESTART_AT.timestamp()


def expect_pod_ready(data: MetricData) -> None:
    series = only(data)
    assert value_at(series, CALM_AT) == 2
    assert value_at(series, NOT_READY_AT) == 1
    assert value_at(series, RECOVERY_AT) == 2


def expect_hpa_current(data: MetricData) -> None:
    assert set(values(only(data))) == {HPA_CURRENT.calm}


def expect_hpa_desired(data: MetricData) -> None:
    series = only(data)
    assert value_at(series, CALM_AT) == HPA_DESIRED.calm
    assert value_at(series, INCIDENT_AT) == HPA_DESIRED.incident


def expect_available(data: MetricData) -> None:
    series = only(data)
    assert value_at(series, CALM_AT) == 2
    assert value_at(series, NOT_READY_AT) == 1


def expect_fb_used(data: MetricData) -> None:
    pods = by_pod(data, "exported_pod")
    assert set(pods) == {HOT_POD, SECOND_POD}  # not the embedder's GPU
    assert max(values(pods[HOT_POD])) == PODS[HOT_POD].fb_used_before_restart_mib
    assert value_at(pods[HOT_POD], RECOVERY_AT) == PODS[HOT_POD].fb_used_mib.recovery


def expect_fb_free(data: MetricData) -> None:
    pods = by_pod(data, "exported_pod")
    peak_used = PODS[HOT_POD].fb_used_before_restart_mib
    assert min(values(pods[HOT_POD])) == GPU_FB_TOTAL_MIB - GPU_FB_RESERVED_MIB - peak_used


def expect_gpu_util(data: MetricData) -> None:
    pods = by_pod(data, "exported_pod")
    for pod in (HOT_POD, SECOND_POD):
        assert value_at(pods[pod], INCIDENT_AT) == PODS[pod].gpu_util.incident


def expect_istio(data: MetricData) -> None:
    series = keyed(data, "response_code", "response_flags")
    assert set(series) == set(ISTIO_PER_SECOND)  # the embedder's "UH" 503s stay out
    failing = series[("503", "UF,URX")]
    assert value_at(failing, INCIDENT_AT) == approx(ISTIO_PER_SECOND[("503", "UF,URX")].incident)
    assert value_at(failing, RECOVERY_AT) == 0
    assert value_at(series[("200", "-")], CALM_AT) == approx(ISTIO_PER_SECOND[("200", "-")].calm)


def expect_nginx(data: MetricData) -> None:
    series = by_pod(data, "status")
    assert value_at(series["504"], INCIDENT_AT) == approx(NGINX_PER_SECOND["504"].incident)
    assert value_at(series["200"], CALM_AT) == approx(NGINX_PER_SECOND["200"].calm)


def expect_knative(data: MetricData) -> None:
    series = by_pod(data, "response_code")
    for code in ("200", "503"):
        expected = sum(by_code[code].incident for by_code in KNATIVE_PER_SECOND.values())
        assert value_at(series[code], INCIDENT_AT) == approx(expected)


def expect_knative_queue(data: MetricData) -> None:
    series = keyed(data, "response_code", "response_code_class")
    assert set(series) == {("200", "2xx"), ("504", "5xx")}
    assert value_at(series[("504", "5xx")], INCIDENT_AT) == approx(KNATIVE_QUEUE_PER_SECOND[HOT_POD]["504"].incident)
    expected = sum(by_code["200"].calm for by_code in KNATIVE_QUEUE_PER_SECOND.values())
    assert value_at(series[("200", "2xx")], CALM_AT) == approx(expected)


def expect_activator(data: MetricData) -> None:
    series = keyed(data, "response_code")  # the embedder's 503s at the same activator stay out
    assert set(series) == {("200",), ("503",)}
    assert value_at(series[("503",)], INCIDENT_AT) == approx(ACTIVATOR_PER_SECOND["503"].incident)


def expect_outer_gateway(data: MetricData) -> None:
    series = keyed(data, "response_code", "response_flags", "request_host")
    assert set(series) == set(OUTER_GATEWAY_PER_SECOND)  # the sidecars' view of the revision stays out
    unhealthy = series[("503", "UH", SERVICE_HOST)]
    assert value_at(unhealthy, INCIDENT_AT) == approx(OUTER_GATEWAY_PER_SECOND[("503", "UH", SERVICE_HOST)].incident)


def expect_bucket_bounds(data: MetricData) -> None:
    bounds: dict[str, set[float]] = {}
    for series in data.series:
        bounds.setdefault(series.labels["__name__"], set()).add(float(series.labels["le"]))
    # Only the bounds from 10 s up are asked for: every version's top bound is among them.
    assert bounds == {f"{table.name}_bucket": {b for b in table.bounds if b >= 10} for table in (E2E, QUEUE, TTFT)}


EXPECTATIONS: dict[str, Callable[[MetricData], None]] = {
    "vllm_running": expect_running,
    "vllm_waiting": expect_waiting,
    "vllm_kv_cache_usage": expect_kv_usage,
    "vllm_preemptions_rate": expect_preemptions,
    "vllm_ttft_p95": expect_quantile(TTFT, "p95"),
    "vllm_e2e_p95": expect_quantile(E2E, "p95"),
    "vllm_e2e_p99": expect_quantile(E2E, "p99"),
    "vllm_queue_time_p95": expect_quantile(QUEUE, "p95"),
    "vllm_itl_p95": expect_quantile(ITL, "p95"),
    "vllm_request_rate": expect_per_request_rate(1),
    "vllm_prompt_tokens_rate": expect_per_request_rate(PROMPT_TOKENS_PER_REQUEST),
    "vllm_generation_tokens_rate": expect_per_request_rate(GENERATION_TOKENS_PER_REQUEST),
    "vllm_cache_config": expect_cache_config,
    "pod_restarts": expect_restarts,
    "pod_last_terminated_reason": expect_last_terminated,
    "pod_ready": expect_pod_ready,
    "hpa_current_replicas": expect_hpa_current,
    "hpa_desired_replicas": expect_hpa_desired,
    "deployment_available_replicas": expect_available,
    "gpu_fb_used_mib": expect_fb_used,
    "gpu_fb_free_mib": expect_fb_free,
    "gpu_util": expect_gpu_util,
    "istio_requests_by_code": expect_istio,
    "nginx_requests_by_status": expect_nginx,
    "knative_requests_by_code": expect_knative,
    "knative_queue_requests_by_code": expect_knative_queue,
    "knative_activator_requests_by_code": expect_activator,
    "istio_outer_gateway_by_code": expect_outer_gateway,
    "vllm_latency_buckets": expect_bucket_bounds,
}
# DCGM series in this data carry the workload only in exported_* labels.
# DCGM exports only exported_pod here; Istio reports from the pods' sidecars only (no gateway series).
EXPECTED_TEMPLATE = {"gpu_fb_used_mib": 1, "gpu_fb_free_mib": 1, "gpu_util": 1, "istio_requests_by_code": 1}


@pytest.mark.parametrize("spec", catalog.CATALOG, ids=lambda spec: spec.id)
def test_every_catalog_query_answers_for_vllm_llm(
    spec: catalog.QuerySpec, vllm_llm: tuple[dict[str, MetricData], list[ReadRecord]]
) -> None:
    results, _records = vllm_llm
    assert spec.id in EXPECTATIONS, f"no expectation for catalog id {spec.id}: add data and a check"
    data = results[spec.id]
    template_index = EXPECTED_TEMPLATE.get(spec.id, 0)
    assert (data.status, data.template_index, data.error) == ("ok", template_index, "")
    assert data.promql == catalog.render(spec, template_index, NAMESPACE, ISVC, STEP)
    assert data.step == STEP
    timestamps = [stamp for series in data.series for stamp, _ in series.samples]
    assert WINDOW.start.timestamp() <= min(timestamps) and max(timestamps) <= WINDOW.end.timestamp()
    EXPECTATIONS[spec.id](data)


def test_a_clean_pass_records_prometheus_ok(vllm_llm: tuple[dict[str, MetricData], list[ReadRecord]]) -> None:
    _results, records = vllm_llm
    assert records == [ReadRecord("prometheus", "ok")]


def test_older_names_are_found_through_the_fallback_templates(
    old_llm: tuple[dict[str, MetricData], list[ReadRecord]],
) -> None:
    results, records = old_llm
    kv = results["vllm_kv_cache_usage"]
    assert (kv.status, kv.template_index) == ("ok", 1)
    assert "vllm:gpu_cache_usage_perc" in kv.promql
    assert max(values(by_pod(kv)[OLD_POD])) == approx(OLD_POD_PROFILE.kv_usage.incident)

    itl = results["vllm_itl_p95"]
    assert (itl.status, itl.template_index) == ("ok", 1)
    assert value_at(only(itl), CALM_AT) == approx(ITL.p95.calm)

    # This exporter labels the workload's own pod: the first DCGM template is enough.
    used = results["gpu_fb_used_mib"]
    assert (used.status, used.template_index) == ("ok", 0)
    assert set(by_pod(used)) == {OLD_POD}
    assert records == [ReadRecord("prometheus", "ok")]


def test_a_query_without_series_keeps_its_first_template_as_empty(
    old_llm: tuple[dict[str, MetricData], list[ReadRecord]],
) -> None:
    results, _records = old_llm
    for query_id in ("vllm_preemptions_rate", "istio_requests_by_code", "knative_requests_by_code"):
        data = results[query_id]
        spec = catalog.BY_ID[query_id]
        assert (data.status, data.template_index, data.series) == ("empty", 0, ())
        assert data.promql == catalog.render(spec, 0, NAMESPACE, OLD_ISVC, STEP)


@pytest.mark.parametrize(
    ("promql", "prometheus_says"),
    [
        ("sum(rate(vllm:num_requests_running[1m])", "unclosed left parenthesis"),
        ('rate(vllm:num_requests_running{pod=~"("}[1m])', "error parsing regexp"),
    ],
)
def test_bad_promql_is_an_error_with_prometheus_message(live: LiveMetrics, promql: str, prometheus_says: str) -> None:
    with pytest.raises(ReadFailed) as caught:
        live.query_range("broken", promql, WINDOW.start, WINDOW.end, STEP)
    assert (caught.value.what, caught.value.status) == ("broken", "error")
    assert "HTTP 400" in caught.value.reason and prometheus_says in caught.value.reason


def test_too_many_points_is_refused_by_prometheus(live: LiveMetrics) -> None:
    """The reason the catalog's step is never below window / 11,000."""
    with pytest.raises(ReadFailed, match="11,000 points") as caught:
        live.query_range(
            "dense", "vllm:num_requests_running", WINDOW.start, WINDOW.end + (WINDOW.end - WINDOW.start) * 3, 1
        )
    assert caught.value.status == "error"


# ---------------------------------------------------------------------------------------------------------------
# Small HTTP servers: what LiveMetrics sends, and how it reads failures


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    hold_seconds: float = 0.0  # wait this long (or until the server stops) before answering
    declared_length: int | None = None  # a Content-Length other than the body's: a cut-off answer


@dataclass
class RecordedRequest:
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]


@dataclass
class StubPrometheus:
    """Answers each request with the next reply (the last one repeats) and records what came in."""

    replies: list[Reply]
    requests: list[RecordedRequest] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)
    url: str = ""

    def next_reply(self) -> Reply:
        index = min(len(self.requests) - 1, len(self.replies) - 1)
        return self.replies[index]


def _handler(stub: StubPrometheus) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            stub.requests.append(RecordedRequest(parts.path, parse_qs(parts.query), dict(self.headers.items())))
            reply = stub.next_reply()
            if reply.hold_seconds:
                stub.stopping.wait(reply.hold_seconds)
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(reply.declared_length or len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting: that is what the timeout test wants

        def log_message(self, format: str, *args: object) -> None:
            """Keep test output quiet."""

    return Handler


@dataclass(frozen=True)
class TlsFiles:
    cert: Path
    key: Path


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    """A self-signed certificate for 127.0.0.1, made by the openssl command."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    folder = tmp_path_factory.mktemp("tls")
    files = TlsFiles(folder / "cert.pem", folder / "key.pem")
    request = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1"]
    extension = ["-addext", "subjectAltName=IP:127.0.0.1"]
    subprocess.run(
        [openssl, *request, *extension, "-keyout", str(files.key), "-out", str(files.cert)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return files


@pytest.fixture
def stub_prometheus() -> Iterator[Callable[..., StubPrometheus]]:
    servers: list[tuple[ThreadingHTTPServer, StubPrometheus]] = []

    def start(*replies: Reply, tls: TlsFiles | None = None) -> StubPrometheus:
        stub = StubPrometheus(list(replies))
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(stub))
        server.daemon_threads = True
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(tls.cert, tls.key)
            server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        stub.url = f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}"
        servers.append((server, stub))
        return stub

    yield start
    for server, stub in servers:
        stub.stopping.set()
        server.shutdown()
        server.server_close()


@pytest.fixture
def live_factory() -> Iterator[Callable[..., LiveMetrics]]:
    opened: list[LiveMetrics] = []

    def make(url: str, **options: object) -> LiveMetrics:
        opened.append(open_live(url, **options))
        return opened[-1]

    yield make
    for source in opened:
        source.close()


def _query(source: LiveMetrics, query_id: str = "vllm_running") -> None:
    source.query_range(query_id, "vllm:num_requests_running", WINDOW.start, WINDOW.end, STEP)


def _json(body: object) -> bytes:
    return json.dumps(body).encode()


def test_token_headers_and_range_reach_prometheus(
    stub_prometheus: Callable[..., StubPrometheus],
    live_factory: Callable[..., LiveMetrics],
    caplog: pytest.LogCaptureFixture,
) -> None:
    stub = stub_prometheus(Reply(body=ANSWER_FILE.read_bytes()))
    source = live_factory(f"{stub.url}/tenant-proxy/", token=TOKEN, headers={"X-Scope-OrgID": "team-llm"})
    caplog.set_level(logging.DEBUG)
    promql = catalog.render(catalog.BY_ID["vllm_running"], 0, NAMESPACE, ISVC, STEP)

    answer = source.query_range("vllm_running", promql, WINDOW.start, WINDOW.end, STEP)

    (request,) = stub.requests
    assert request.path == "/tenant-proxy/api/v1/query_range"
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert request.headers["X-Scope-OrgID"] == "team-llm"
    assert request.query == {
        "query": [promql],
        "start": [str(int(WINDOW.start.timestamp()))],
        "end": [str(int(WINDOW.end.timestamp()))],
        "step": [str(STEP)],
    }
    assert answer.promql == promql
    assert [series.labels["pod"] for series in answer.series] == [HOT_POD, SECOND_POD]
    assert answer.series[0].samples == ((1768474800.0, 20.0), (1768474815.0, 21.0), (1768474830.0, 48.0))
    assert math.isnan(answer.series[1].samples[1][1])
    assert caplog.records, "expected the HTTP stack's debug log, to check it for the token"
    assert TOKEN not in caplog.text
    assert TOKEN not in repr(source)


@pytest.mark.parametrize("status", [401, 403])
def test_refused_credentials_are_forbidden(
    stub_prometheus: Callable[..., StubPrometheus], live_factory: Callable[..., LiveMetrics], status: int
) -> None:
    stub = stub_prometheus(Reply(status=status, body=b"Forbidden", content_type="text/plain"))
    source = live_factory(stub.url, token=TOKEN)
    with pytest.raises(ReadFailed) as caught:
        _query(source)
    assert caught.value.status == "forbidden"
    assert "--prometheus-token-env" in caught.value.reason and f"HTTP {status}" in caught.value.reason
    assert TOKEN not in str(caught.value)
    assert len(stub.requests) == 1  # refused credentials are not retried


def test_gateway_errors_are_retried(
    stub_prometheus: Callable[..., StubPrometheus], live_factory: Callable[..., LiveMetrics]
) -> None:
    bad_gateway = Reply(status=502, body=b"<html>502 Bad Gateway</html>", content_type="text/html")
    stub = stub_prometheus(bad_gateway, bad_gateway, Reply(body=ANSWER_FILE.read_bytes()))
    answer = live_factory(stub.url, retries=2).query_range("q", "up", WINDOW.start, WINDOW.end, STEP)
    assert len(stub.requests) == 3
    assert len(answer.series) == 2


def test_a_persistent_gateway_error_is_an_error_with_its_body(
    stub_prometheus: Callable[..., StubPrometheus], live_factory: Callable[..., LiveMetrics]
) -> None:
    stub = stub_prometheus(Reply(status=502, body=b"<html>502 Bad Gateway</html>", content_type="text/html"))
    with pytest.raises(ReadFailed) as caught:
        _query(live_factory(stub.url, retries=1))
    assert caught.value.status == "error"
    assert "HTTP 502" in caught.value.reason and "Bad Gateway" in caught.value.reason
    assert len(stub.requests) == 2


def test_prometheus_query_timeout_is_a_timeout(
    stub_prometheus: Callable[..., StubPrometheus], live_factory: Callable[..., LiveMetrics]
) -> None:
    body = {"status": "error", "errorType": "timeout", "error": "query timed out in expression evaluation"}
    stub = stub_prometheus(Reply(status=503, body=_json(body)))
    with pytest.raises(ReadFailed) as caught:
        _query(live_factory(stub.url, retries=2))
    assert caught.value.status == "timeout"
    assert "query timed out in expression evaluation" in caught.value.reason
    assert len(stub.requests) == 1  # a query that timed out would time out again


@pytest.mark.parametrize(
    "reply",
    [
        Reply(body=b"<html>login page</html>", content_type="text/html"),
        Reply(body=_json({"status": "success", "data": {"resultType": "vector"}})),
        Reply(body=_json({"status": "success", "data": {"resultType": "matrix", "result": {"not": "a list"}}})),
        Reply(body=ANSWER_FILE.read_bytes().replace(b'"20"', b'"twenty"')),
        Reply(body=ANSWER_FILE.read_bytes(), declared_length=len(ANSWER_FILE.read_bytes()) + 100),
    ],
    ids=["html", "no-result", "result-not-a-list", "value-not-a-number", "cut-off"],
)
def test_answers_that_are_not_a_readable_matrix_are_errors(
    stub_prometheus: Callable[..., StubPrometheus], live_factory: Callable[..., LiveMetrics], reply: Reply
) -> None:
    stub = stub_prometheus(reply)
    with pytest.raises(ReadFailed) as caught:
        _query(live_factory(stub.url))
    assert caught.value.status == "error"
    assert stub.url in caught.value.reason


def test_a_slow_server_is_a_timeout_without_retries(
    stub_prometheus: Callable[..., StubPrometheus], live_factory: Callable[..., LiveMetrics]
) -> None:
    stub = stub_prometheus(Reply(body=ANSWER_FILE.read_bytes(), hold_seconds=10))
    source = live_factory(stub.url, timeout_seconds=0.3, retries=2)
    began = time.monotonic()
    with pytest.raises(ReadFailed) as caught:
        _query(source)
    assert caught.value.status == "timeout"
    assert time.monotonic() - began < 2
    assert len(stub.requests) == 1


def test_nothing_listening_is_unreachable_fast(live_factory: Callable[..., LiveMetrics]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    source = live_factory(url, retries=2)
    began = time.monotonic()
    with pytest.raises(ReadFailed) as caught:
        _query(source, "vllm_waiting")
    assert (caught.value.what, caught.value.status) == ("vllm_waiting", "unreachable")
    assert url in caught.value.reason and "refused" in caught.value.reason.lower()
    assert time.monotonic() - began < 2


def test_an_unreachable_prometheus_stops_the_remaining_queries(live_factory: Callable[..., LiveMetrics]) -> None:
    source = live_factory(f"http://127.0.0.1:{free_port()}", retries=0)
    records: list[ReadRecord] = []
    results = _query_metrics(source, Target(NAMESPACE, ISVC), WINDOW, records)
    assert {data.status for data in results.values()} == {"unreachable"}
    assert [record.what for record in records] == ["prometheus"]
    assert records[0].status == "unreachable"


@pytest.mark.parametrize("url", ["prometheus:9090", "ftp://prometheus:9090", "", "http://", "/api/v1"])
def test_a_url_that_is_not_http_is_refused(url: str) -> None:
    with pytest.raises(RunbookError, match="not an http"):
        open_live(url)


def test_tls_is_verified_against_the_ca_file(
    stub_prometheus: Callable[..., StubPrometheus], live_factory: Callable[..., LiveMetrics], tls_files: TlsFiles
) -> None:
    stub = stub_prometheus(Reply(body=ANSWER_FILE.read_bytes()), tls=tls_files)
    answer = live_factory(stub.url, ca_file=str(tls_files.cert)).query_range("q", "up", WINDOW.start, WINDOW.end, STEP)
    assert len(answer.series) == 2


def test_an_unknown_certificate_says_how_to_trust_it(
    stub_prometheus: Callable[..., StubPrometheus], live_factory: Callable[..., LiveMetrics], tls_files: TlsFiles
) -> None:
    stub = stub_prometheus(Reply(body=ANSWER_FILE.read_bytes()), tls=tls_files)
    with pytest.raises(ReadFailed) as caught:
        _query(live_factory(stub.url, retries=0))
    assert caught.value.status == "unreachable"
    assert "--prometheus-ca-file" in caught.value.reason and "certificate" in caught.value.reason.lower()
    assert stub.requests == []


def test_insecure_mode_skips_verification_quietly(
    stub_prometheus: Callable[..., StubPrometheus], live_factory: Callable[..., LiveMetrics], tls_files: TlsFiles
) -> None:
    """pytest turns warnings into errors here, so urllib3's per-request InsecureRequestWarning would fail this."""
    stub = stub_prometheus(Reply(body=ANSWER_FILE.read_bytes()), tls=tls_files)
    answer = live_factory(stub.url, verify=False).query_range("q", "up", WINDOW.start, WINDOW.end, STEP)
    assert len(answer.series) == 2


# The URL may carry credentials (https://user:password@host, ?token=): they reach Prometheus, never a message.
URL_PASSWORD = "Pw-in-the-url-9f3c1e"
URL_TOKEN = "Tk-in-the-query-7a2b"


def _with_credentials(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://prom-user:{URL_PASSWORD}@{rest}"


def test_credentials_in_the_url_are_sent_and_never_shown(
    stub_prometheus: Callable[..., StubPrometheus], live_factory: Callable[..., LiveMetrics]
) -> None:
    stub = stub_prometheus(Reply(status=401, body=b"Unauthorized", content_type="text/plain"))
    source = live_factory(_with_credentials(stub.url))
    with pytest.raises(ReadFailed) as caught:
        _query(source)
    (request,) = stub.requests
    basic = base64.b64encode(f"prom-user:{URL_PASSWORD}".encode()).decode()
    assert request.headers["Authorization"] == f"Basic {basic}"  # the client got the real URL
    assert caught.value.status == "forbidden"
    assert URL_PASSWORD not in str(caught.value) and "<redacted>@127.0.0.1" in caught.value.reason
    assert URL_PASSWORD not in repr(source) and URL_PASSWORD not in source.url


@pytest.mark.parametrize(
    "reply",
    [Reply(body=b"<html>login page</html>", content_type="text/html"), Reply(status=500, body=b"oops")],
    ids=["malformed", "server-error"],
)
def test_failures_show_the_url_without_credentials(
    stub_prometheus: Callable[..., StubPrometheus], live_factory: Callable[..., LiveMetrics], reply: Reply
) -> None:
    stub = stub_prometheus(reply)
    with pytest.raises(ReadFailed) as caught:
        _query(live_factory(_with_credentials(stub.url), retries=0))
    assert URL_PASSWORD not in str(caught.value)


def test_an_unreachable_url_with_credentials_is_shown_without_them(live_factory: Callable[..., LiveMetrics]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ReadFailed) as caught:
        _query(live_factory(_with_credentials(url), retries=0))
    assert caught.value.status == "unreachable"
    assert f"http://<redacted>@{url.removeprefix('http://')}" in caught.value.reason
    assert URL_PASSWORD not in str(caught.value)


def test_a_refused_url_is_named_without_its_credentials() -> None:
    with pytest.raises(RunbookError) as caught:
        open_live(f"ftp://prom-user:{URL_PASSWORD}@prometheus:9090/?token={URL_TOKEN}")
    assert URL_PASSWORD not in str(caught.value) and URL_TOKEN not in str(caught.value)
    assert "prometheus:9090" in str(caught.value)
    source = open_live(f"http://prometheus:9090/?token={URL_TOKEN}")
    assert URL_TOKEN not in repr(source) and "token=<redacted>" in source.url
    source.close()
