"""``kserve-runbook webhook``: the Alertmanager receiver (nbhelpers/webhook.py).

Payload format: Alertmanager's webhook notifier sends version "4" with ``status``, ``alerts`` (each with
``status`` firing|resolved, ``labels``, ``annotations``, ``startsAt`` in RFC 3339 with Go's nanoseconds,
``endsAt`` "0001-01-01T00:00:00Z" while firing, ``fingerprint``), ``groupLabels``, ``commonLabels`` ...
(sample payload of https://docs.rs/crate/alertmanager-webhook-types, and the Prometheus docs' webhook_config;
``http_config.authorization`` sends ``Authorization: Bearer <credentials>``).

Integration tests send real HTTP to the receiver on 127.0.0.1 and let it triage through the real
kubernetes client against the fixture API server (tests/fakeapi.py). The receiver's clock is frozen
at the end of the fixtures' hour (2026-01-15 12:00 UTC), so windows fall where the fixture data lies.
"""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from fakeapi import FakeApiServer
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from nbhelpers.cli.webhook import (
    ISVC_LABELS,
    MAX_BODY_BYTES,
    Admissions,
    Alert,
    Job,
    Listen,
    PayloadError,
    Settings,
    Skip,
    WebhookServer,
    find_target,
    job_for,
    job_params,
    parse_alert_time,
    parse_listen,
    parse_payload,
    serve,
    settings_from_options,
)
from nbhelpers.errors import RunbookError
from nbhelpers.evidence.model import LLM_INFERENCE_SERVICE, Target
from nbhelpers.render.findings_json import validate_findings
from nbhelpers.triage import TriageParams, params_from_text

NOW = datetime(2026, 1, 15, 12, 0, tzinfo=timezone.utc)
SECRET = "whk-shared-Secret-93be1f0c"
SLACK_PATH = "/services/T0PLANT/B0PLANT/slackPlantedPath77"


# --------------------------------------------------------------------------------------------- helpers


def alert(
    labels: dict[str, str], status: str = "firing", starts_at: str = "2026-01-15T11:40:00.123456789Z"
) -> dict[str, Any]:
    return {
        "status": status,
        "labels": {"alertname": "VLLMHigh503", **labels},
        "annotations": {"summary": "503s from the predictor"},
        "startsAt": starts_at,
        "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": "http://prometheus.example:9090/graph",
        "fingerprint": "1a30ba71cca2921f",
    }


def payload(*alerts: dict[str, Any]) -> bytes:
    return json.dumps(
        {
            "version": "4",
            "groupKey": '{}:{alertname="VLLMHigh503"}',
            "truncatedAlerts": 0,
            "status": "firing",
            "receiver": "kserve-runbook",
            "groupLabels": {"alertname": "VLLMHigh503"},
            "commonLabels": {},
            "commonAnnotations": {},
            "externalURL": "http://alertmanager.example:9093",
            "alerts": list(alerts),
        }
    ).encode()


@dataclass
class Answer:
    status: int
    body: dict[str, Any]
    headers: dict[str, str]


def request(url: str, method: str, path: str, body: bytes | None = None, **headers: str) -> Answer:
    """One HTTP request with exactly these headers (Content-Length added for a body)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        connection.putrequest(method, path, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name.replace("_", "-"), value)
        if body is not None and "Content_Length" not in headers:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        text = response.read()
        return Answer(response.status, json.loads(text) if text else {}, dict(response.getheaders()))
    finally:
        connection.close()


def post_alerts(url: str, body: bytes, token: str | None = None) -> Answer:
    headers = {"Content_Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return request(url, "POST", "/alerts", body, **headers)


@dataclass
class Clock:
    now: datetime = NOW

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Receiver:
    server: WebhookServer
    clock: Clock
    out: Path
    lines: list[str] = field(default_factory=list)


def settings(kubeconfig: Path, out: Path, **changes: Any) -> Settings:
    return Settings(
        triage=params_from_text({"kubeconfig": str(kubeconfig), "request_timeout": "5s"}),
        listen=Listen("127.0.0.1", 0),
        out=out,
        **changes,
    )


@pytest.fixture
def start_receiver(kubeconfig: Path, tmp_path: Path) -> Iterator[Any]:
    """``start_receiver(**settings changes)`` serves on a free port; stopped after the test."""
    started: list[WebhookServer] = []

    def start(**changes: Any) -> Receiver:
        clock, out, lines = Clock(), tmp_path / "out", []

        def progress(line: str) -> None:
            lines.append(line)
            print(line, file=sys.stderr)

        server = serve(settings(kubeconfig, out, **changes), clock=clock, progress=progress)
        started.append(server)
        return Receiver(server, clock, out, lines)

    yield start
    for server in started:
        server.stop()


class SlackReceiver:
    """A stand-in for Slack's incoming webhook on 127.0.0.1: records each POST body, answers ``status``."""

    def __init__(self, status: int = 200) -> None:
        self.posts: list[tuple[str, dict[str, Any]]] = []
        received = self.posts

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.append((self.path, json.loads(body)))
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05})

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{SLACK_PATH}"

    def __enter__(self) -> SlackReceiver:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def written_text(folder: Path) -> str:
    return "\n".join(path.read_text(errors="replace") for path in sorted(folder.rglob("*")) if path.is_file())


# ------------------------------------------------------------------------------------- payload parsing


def test_a_version_4_payload_parses_into_its_alerts() -> None:
    alerts = parse_payload(payload(alert({"namespace": "llm", "isvc": "vllm-llm"}), alert({}, status="resolved")))

    assert alerts == [
        Alert(
            "VLLMHigh503",
            "firing",
            {"alertname": "VLLMHigh503", "namespace": "llm", "isvc": "vllm-llm"},
            "2026-01-15T11:40:00.123456789Z",
            "0001-01-01T00:00:00Z",
        ),
        Alert(
            "VLLMHigh503",
            "resolved",
            {"alertname": "VLLMHigh503"},
            "2026-01-15T11:40:00.123456789Z",
            "0001-01-01T00:00:00Z",
        ),
    ]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"{not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "not JSON"),
        (b"[]", "JSON object"),
        (b'{"version": "4"}', "'alerts' must be a list"),
        (b'{"version": "3", "alerts": []}', "version '3'"),
        (b'{"alerts": ["x"]}', "alerts[0] must be an object"),
        (b'{"alerts": [{"status": 1, "startsAt": ""}]}', "must be strings"),
        (b'{"alerts": [{"status": "firing", "labels": {"a": 1}}]}', "alerts[0].labels must be an object of strings"),
        (b'{"alerts": [{"status": "firing", "annotations": []}]}', "alerts[0].annotations"),
    ],
)
def test_a_body_of_another_shape_is_refused_with_one_reason(body: bytes, reason: str) -> None:
    with pytest.raises(PayloadError) as raised:
        parse_payload(body)
    message = str(raised.value)
    assert reason in message and "\n" not in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-01-15T11:40:00.123456789Z", datetime(2026, 1, 15, 11, 40, 0, 123456, tzinfo=timezone.utc)),
        ("2026-01-15T12:40:00.5+01:00", datetime(2026, 1, 15, 11, 40, 0, 500000, tzinfo=timezone.utc)),
        ("2026-01-15T11:40:00Z", datetime(2026, 1, 15, 11, 40, tzinfo=timezone.utc)),
        ("0001-01-01T00:00:00Z", None),  # Go's zero time: not set
        ("2026-01-15 11:40", None),
        ("", None),
    ],
)
def test_alert_times_parse_with_nanoseconds_and_offsets(text: str, expected: datetime | None) -> None:
    assert parse_alert_time(text) == expected


# ---------------------------------------------------------------------------------------------- target


@pytest.mark.parametrize(
    ("labels", "isvc"),
    [
        ({"inferenceservice": "vllm-llm"}, "vllm-llm"),
        ({"isvc": "vllm-llm"}, "vllm-llm"),
        ({"serving_kserve_io_inferenceservice": "vllm-llm"}, "vllm-llm"),
        ({"label_serving_kserve_io_inferenceservice": "vllm-llm"}, "vllm-llm"),
        ({"service": "vllm-llm-predictor"}, "vllm-llm"),  # RawDeployment Service
        ({"service_name": "vllm-llm-predictor-default"}, "vllm-llm"),  # older KServe naming
        ({"destination_service_name": "vllm-llm-predictor-00001-private"}, "vllm-llm"),  # Knative revision
        ({"service": "vllm-llm-predictor-00002"}, "vllm-llm"),
        ({"service": "vllm-llm-predictor.llm.svc.cluster.local"}, "vllm-llm"),
        ({"service": "a-predictor-b-predictor"}, "a-predictor-b"),  # the last "-predictor" is the suffix
        ({"pod": "vllm-llm-predictor-00001-deployment-7d9c5f6b8d-4xk2p"}, "vllm-llm"),  # Serverless pod
        ({"pod": "vllm-llm-predictor-6f8b9c7d5-x2kq9"}, "vllm-llm"),  # RawDeployment pod
        # An explicit label wins over a name it could be derived from.
        ({"isvc": "chat", "service": "vllm-llm-predictor"}, "chat"),
        ({"service": "kube-state-metrics", "pod": "vllm-llm-predictor-6f8b9c7d5-x2kq9"}, "vllm-llm"),
    ],
)
def test_the_target_comes_from_the_labels_in_order(labels: dict[str, str], isvc: str) -> None:
    assert find_target({"namespace": "llm", **labels}) == Target("llm", isvc)


def test_istio_metrics_give_the_namespace_of_the_destination() -> None:
    labels = {"destination_service_namespace": "team-b", "destination_service_name": "chat-predictor-00003"}
    assert find_target(labels) == Target("team-b", "chat")


@pytest.mark.parametrize(
    ("labels", "reason"),
    [
        ({"isvc": "vllm-llm"}, "no namespace label"),
        ({"namespace": "llm"}, "no InferenceService label"),
        ({"namespace": "llm", "service": "kube-state-metrics", "pod": "kube-state-metrics-7c9-abcde"}, "no "),
        ({"namespace": "llm", "service": "vllm-llm-transformer"}, "no InferenceService label"),
        ({"namespace": "../etc", "isvc": "vllm-llm"}, "not a valid namespace name"),
        ({"namespace": "llm", "isvc": "../../x"}, "not a valid InferenceService name"),
        ({"namespace": "llm", "isvc": "A" * 64}, "not a valid InferenceService name"),
        ({"namespace": "llm\n", "isvc": "vllm-llm"}, "not a valid namespace name"),  # `$` would let it pass
        ({"namespace": "llm", "isvc": "vllm-llm\n"}, "not a valid InferenceService name"),
    ],
)
def test_an_alert_without_a_usable_target_is_skipped_with_the_reason(labels: dict[str, str], reason: str) -> None:
    found = find_target(labels)
    assert isinstance(found, Skip) and reason in found.reason


def test_firing_and_resolved_alerts_with_their_times_become_jobs() -> None:
    labels = {"alertname": "X", "namespace": "llm", "isvc": "vllm-llm"}
    began, ended = (
        datetime(2026, 1, 15, 11, 40, tzinfo=timezone.utc),
        datetime(2026, 1, 15, 11, 55, tzinfo=timezone.utc),
    )
    assert job_for(Alert("X", "firing", labels, "2026-01-15T11:40:00Z")) == Job(Target("llm", "vllm-llm"), "X", began)
    resolved = job_for(Alert("X", "resolved", labels, "2026-01-15T11:40:00Z", "2026-01-15T11:55:00.5Z"))
    assert resolved == Job(Target("llm", "vllm-llm"), "X", began, ended.replace(microsecond=500000))
    for ends_at in ("0001-01-01T00:00:00Z", "2026-01-15T11:39:00Z", "soon"):
        unended = job_for(Alert("X", "resolved", labels, "2026-01-15T11:40:00Z", ends_at))
        assert isinstance(unended, Skip) and "endsAt" in unended.reason
    other = job_for(Alert("X", "suppressed", labels, "2026-01-15T11:40:00Z"))
    assert isinstance(other, Skip) and "only firing and resolved" in other.reason
    untimed = job_for(Alert("X", "firing", labels, "yesterday"))
    assert isinstance(untimed, Skip) and "startsAt" in untimed.reason


def test_a_resolved_alert_runs_over_the_incident_as_it_was() -> None:
    began, ended = (
        datetime(2026, 1, 15, 11, 20, tzinfo=timezone.utc),
        datetime(2026, 1, 15, 11, 45, tzinfo=timezone.utc),
    )
    job = Job(Target("llm", "vllm-llm"), "X", began, ended)
    params = job_params(params_from_text({"kubeconfig": "k"}), job, NOW, timedelta(minutes=30))
    assert (params.start, params.end) == (began - timedelta(minutes=30), ended)
    assert (params.incident_start, params.incident_end) == (began, ended)


def test_a_resolved_incident_is_queued_once_and_the_cooldown_does_not_hold_it_back() -> None:
    admissions = Admissions(cooldown=timedelta(minutes=10))
    target, began = Target("llm", "vllm-llm"), datetime(2026, 1, 15, 11, 20, tzinfo=timezone.utc)
    assert admissions.admit(target, NOW) is None
    admissions.started(target)
    admissions.finished(target, NOW)
    assert admissions.admit(target, NOW) is not None  # firing again: within the cooldown
    assert admissions.admit_resolved(target, began) is None  # the resolve: once, cooldown or not
    assert admissions.queued == 1
    assert "already triaged" in (admissions.admit_resolved(target, began) or "")
    admissions.started(target, resolved=True)
    assert admissions.queued == 0
    assert admissions.admit_resolved(target, began + timedelta(hours=1)) is None  # a later incident


def test_the_window_reaches_back_a_lookback_before_the_alert_and_the_incident_starts_with_it() -> None:
    job = Job(Target("llm", "vllm-llm"), "X", datetime(2026, 1, 15, 11, 40, 0, 900000, tzinfo=timezone.utc))
    params = job_params(params_from_text({"kubeconfig": "k", "since": "1h"}), job, NOW, timedelta(minutes=30))

    text = params.to_text()
    assert (params.namespace, params.isvc, params.kubeconfig, params.since) == ("llm", "vllm-llm", "k", None)
    assert (text["start"], text["end"]) == ("2026-01-15T11:10:00Z", "2026-01-15T12:00:00Z")
    assert (text["incident_start"], text["incident_end"]) == ("2026-01-15T11:40:00Z", "2026-01-15T12:00:00Z")


def test_a_long_firing_alert_gets_the_longest_window_and_a_future_start_is_clamped() -> None:
    old = Job(Target("llm", "x"), "X", NOW - timedelta(days=30))
    text = job_params(TriageParams(), old, NOW, timedelta(minutes=30)).to_text()
    assert (text["start"], text["end"]) == ("2026-01-08T12:00:00Z", "2026-01-15T12:00:00Z")  # 7 days

    ahead = Job(Target("llm", "x"), "X", NOW + timedelta(minutes=2))  # the receiver's clock runs behind
    text = job_params(TriageParams(), ahead, NOW, timedelta(minutes=30)).to_text()
    assert (text["start"], text["incident_start"]) == ("2026-01-15T11:29:59Z", "2026-01-15T11:59:59Z")


# ---------------------------------------------------------------------------------------- admissions


def test_a_service_is_not_queued_twice_nor_again_within_the_cooldown() -> None:
    admissions = Admissions(timedelta(minutes=10))
    target, other = Target("llm", "vllm-llm"), Target("llm", "qwen-chat")

    assert admissions.admit(target, NOW) is None
    assert admissions.admit(target, NOW) == "already queued"
    assert admissions.admit(other, NOW) is None
    admissions.started(target)
    assert admissions.admit(target, NOW) == "a triage of this service is running"
    admissions.finished(target, NOW + timedelta(minutes=1))
    refusal = admissions.admit(target, NOW + timedelta(minutes=5))
    assert refusal == "triaged 4m ago; not again within the cooldown of 10m"
    assert admissions.admit(target, NOW + timedelta(minutes=11)) is None
    assert admissions.queued == 2


def test_the_queue_has_a_bound() -> None:
    admissions = Admissions(timedelta(minutes=10), max_queued=2)
    assert admissions.admit(Target("a", "one"), NOW) is None
    assert admissions.admit(Target("a", "two"), NOW) is None
    refusal = admissions.admit(Target("a", "three"), NOW)
    assert refusal is not None and refusal.startswith("queue full")


# ------------------------------------------------------------------------------------------- settings


@pytest.mark.parametrize(
    ("text", "expected", "loopback"),
    [
        ("127.0.0.1:9095", Listen("127.0.0.1", 9095), True),
        ("localhost:0", Listen("localhost", 0), True),
        ("[::1]:9095", Listen("::1", 9095), True),
        ("0.0.0.0:9095", Listen("0.0.0.0", 9095), False),
        ("alerts.example:9095", Listen("alerts.example", 9095), False),
    ],
)
def test_listen_addresses_parse_and_know_whether_they_are_loopback(text: str, expected: Listen, loopback: bool) -> None:
    assert parse_listen(text) == expected
    assert expected.loopback is loopback


@pytest.mark.parametrize("text", ["9095", ":9095", "127.0.0.1:", "127.0.0.1:http", "127.0.0.1:70000"])
def test_a_bad_listen_address_is_an_error(text: str) -> None:
    with pytest.raises(RunbookError, match="--listen"):
        parse_listen(text)


OPTIONS = {
    "listen": "127.0.0.1:9095",
    "out": "outputs",
    "lookback": "30m",
    "cooldown": "10m",
    "secret_env": "",
    "insecure_no_auth": False,
    "slack_webhook_env": "",
}


@pytest.mark.parametrize(
    ("changes", "environment", "message"),
    [
        ({"listen": "0.0.0.0:9095"}, {}, "refusing to listen on 0.0.0.0 without authentication"),
        ({"secret_env": "HOOK_SECRET"}, {}, "--secret-env HOOK_SECRET: that variable is not set"),
        ({"slack_webhook_env": "SLACK_URL"}, {"SLACK_URL": "file:///etc/passwd"}, "not an http(s) URL"),
        ({"lookback": "0s"}, {}, "--lookback"),
        ({"lookback": "8d"}, {}, "--lookback"),
        ({"secret_env": "HOOK_SECRET"}, {"HOOK_SECRET": "x"}, "use at least 16"),
    ],
)
def test_unsafe_or_bad_settings_are_refused(changes: dict[str, Any], environment: dict[str, str], message: str) -> None:
    with pytest.raises(RunbookError) as raised:
        settings_from_options(TriageParams(), {**OPTIONS, **changes}, environment)
    assert message in str(raised.value)
    assert "file:///etc/passwd" not in str(raised.value)


def test_the_command_offers_no_window_options() -> None:
    """Each run's window comes from its alert."""
    from nbhelpers.cli.main import webhook_command

    offered = {name for param in webhook_command.params for name in param.opts}
    assert not offered & {"--since", "--start", "--end"} and "--lookback" in offered


def test_a_public_address_needs_a_secret_or_an_explicit_opt_out() -> None:
    public = {**OPTIONS, "listen": "0.0.0.0:9095"}
    with_secret = settings_from_options(TriageParams(), {**public, "secret_env": "S"}, {"S": SECRET})
    assert with_secret.secret == SECRET and not with_secret.listen.loopback
    assert SECRET not in repr(with_secret)
    opted_out = settings_from_options(TriageParams(), {**public, "insecure_no_auth": True}, {})
    assert opted_out.secret == ""


# ------------------------------------------------------------------------------------- the HTTP server


@pytest.mark.integration
def test_a_firing_alert_is_triaged_and_its_findings_written(serverless_api: FakeApiServer, start_receiver: Any) -> None:
    receiver = start_receiver()
    serverless_api.clear_requests()
    body = payload(
        alert({"namespace": "llm", "destination_service_name": "vllm-llm-predictor-00001-private"}),
        alert({"namespace": "llm", "isvc": "qwen-chat"}, status="resolved"),
        alert({"namespace": "llm", "job": "kube-state-metrics"}),
    )

    answer = post_alerts(receiver.server.url, body)
    (record,) = receiver.server.wait_for_runs(1, timeout=30)

    assert answer.status == 202
    assert answer.body["accepted"] == [{"alert": "VLLMHigh503", "namespace": "llm", "isvc": "vllm-llm"}]
    reasons = [entry["reason"] for entry in answer.body["ignored"]]
    assert len(reasons) == 2 and "endsAt" in reasons[0] and "no InferenceService label" in reasons[1]
    assert record.error == "" and record.folder is not None
    assert record.folder.parent == receiver.out and record.folder.name == "20260115T120000Z-llm-vllm-llm"
    assert sorted(path.name for path in record.folder.iterdir()) == ["findings.json", "summary.md"]
    findings = json.loads((record.folder / "findings.json").read_text())
    validate_findings(findings)
    assert findings["target"]["namespace"] == "llm" and findings["target"]["isvc"] == "vllm-llm"
    assert findings["window"] == {"start": "2026-01-15T11:10:00Z", "end": "2026-01-15T12:00:00Z"}
    assert findings["incident"] == {"start": "2026-01-15T11:40:00Z", "end": "2026-01-15T12:00:00Z"}
    assert (record.folder / "summary.md").read_text().count(record.coverage) == 1
    assert {request.method for request in serverless_api.requests} == {"GET"}
    assert any("/inferenceservices/vllm-llm" in request.path for request in serverless_api.requests)
    assert receiver.lines[0].startswith("webhook: queued llm/vllm-llm (alert VLLMHigh503 firing since")
    assert receiver.lines[1].startswith("webhook: done llm/vllm-llm") and "Coverage:" in receiver.lines[1]


@pytest.mark.integration
def test_the_same_service_is_not_triaged_again_within_the_cooldown(
    serverless_api: FakeApiServer, start_receiver: Any
) -> None:
    receiver = start_receiver(cooldown=timedelta(minutes=10))
    first = payload(alert({"namespace": "llm", "isvc": "vllm-llm"}), alert({"namespace": "llm", "isvc": "vllm-llm"}))

    answer = post_alerts(receiver.server.url, first)
    assert len(answer.body["accepted"]) == 1
    assert answer.body["ignored"][0]["reason"] in (
        "llm/vllm-llm: already queued",
        "llm/vllm-llm: a triage of this service is running",
    )
    receiver.server.wait_for_runs(1, timeout=30)

    receiver.clock.now = NOW + timedelta(minutes=4)
    again = post_alerts(receiver.server.url, payload(alert({"namespace": "llm", "isvc": "vllm-llm"})))
    other = post_alerts(receiver.server.url, payload(alert({"namespace": "llm", "isvc": "qwen-chat"})))
    assert again.body["accepted"] == [] and "within the cooldown of 10m" in again.body["ignored"][0]["reason"]
    assert other.body["accepted"] == [{"alert": "VLLMHigh503", "namespace": "llm", "isvc": "qwen-chat"}]
    receiver.server.wait_for_runs(2, timeout=30)

    receiver.clock.now = NOW + timedelta(minutes=11)
    later = post_alerts(receiver.server.url, payload(alert({"namespace": "llm", "isvc": "vllm-llm"})))
    assert len(later.body["accepted"]) == 1
    runs = receiver.server.wait_for_runs(3, timeout=30)
    assert [run.job.ref for run in runs] == ["llm/vllm-llm", "llm/qwen-chat", "llm/vllm-llm"]
    assert len(list(receiver.out.iterdir())) == 3


@pytest.mark.integration
def test_an_unknown_service_is_a_failed_run_and_the_receiver_goes_on(
    serverless_api: FakeApiServer, start_receiver: Any
) -> None:
    receiver = start_receiver()
    post_alerts(
        receiver.server.url,
        payload(alert({"namespace": "llm", "isvc": "gone"}), alert({"namespace": "llm", "isvc": "vllm-llm"})),
    )
    failed, succeeded = receiver.server.wait_for_runs(2, timeout=30)

    assert failed.folder is None and "'gone' not found in namespace 'llm'" in failed.error
    assert "qwen-chat" in failed.error and "vllm-llm" in failed.error  # it lists what exists
    assert succeeded.error == "" and succeeded.folder is not None
    assert [path.name for path in receiver.out.iterdir()] == [succeeded.folder.name]
    assert any(line.startswith("webhook: failed llm/gone") for line in receiver.lines)


@pytest.mark.integration
def test_with_a_secret_only_the_right_bearer_token_is_accepted_and_slack_hears_the_root_causes(
    raw_api: FakeApiServer, start_receiver: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    with SlackReceiver() as slack:
        receiver = start_receiver(secret=SECRET, secret_env="HOOK_SECRET", slack_url=slack.url)
        body = payload(alert({"namespace": "raw", "service": "vllm-raw-predictor"}))

        missing = post_alerts(receiver.server.url, body)
        wrong = post_alerts(receiver.server.url, body, token=SECRET[:-1] + "x")
        other_scheme = request(receiver.server.url, "POST", "/alerts", body, Authorization=f"Basic {SECRET}")
        right = post_alerts(receiver.server.url, body, token=SECRET)
        (record,) = receiver.server.wait_for_runs(1, timeout=30)
        deadline = time.monotonic() + 10
        while not slack.posts and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)  # a second POST, if any, would arrive now

    assert [missing.status, wrong.status, other_scheme.status, right.status] == [401, 401, 401, 202]
    assert missing.headers["WWW-Authenticate"] == "Bearer"
    assert record.root_causes and record.critical >= 1
    ((path, message),) = slack.posts
    assert path == SLACK_PATH
    text = message["text"]
    assert "raw/vllm-raw" in text and record.root_causes[0] in text and str(record.folder) in text
    assert f"({record.critical} critical findings)" in text and record.coverage in text
    captured = capsys.readouterr()
    everything = written_text(receiver.out) + captured.out + captured.err + "\n".join(receiver.lines)
    everything += json.dumps([missing.body, wrong.body, right.body])
    assert "raw/vllm-raw" in everything
    for secret in (SECRET, slack.url, SLACK_PATH):
        assert secret not in everything


@pytest.mark.integration
def test_a_failing_slack_is_one_log_line_without_its_url(raw_api: FakeApiServer, start_receiver: Any) -> None:
    with SlackReceiver(status=500) as slack:
        receiver = start_receiver(slack_url=slack.url)
        post_alerts(receiver.server.url, payload(alert({"namespace": "raw", "isvc": "vllm-raw"})))
        receiver.server.wait_for_runs(1, timeout=30)
        deadline = time.monotonic() + 10
        while not any("Slack" in line for line in receiver.lines) and time.monotonic() < deadline:
            time.sleep(0.02)

    (line,) = [line for line in receiver.lines if "Slack" in line]
    assert (
        line == "webhook: Slack notification for raw/vllm-raw failed: HTTPError: HTTP Error 500: Internal Server Error"
    )
    assert len(slack.posts) == 1


@pytest.mark.integration
def test_bad_requests_get_their_status_and_one_line(fake_api: FakeApiServer, start_receiver: Any) -> None:
    url = start_receiver().server.url

    answers = {
        "healthz": request(url, "GET", "/healthz"),
        "too big": request(url, "POST", "/alerts", Content_Length=str(MAX_BODY_BYTES + 1)),
        "bad json": request(url, "POST", "/alerts", b"{"),
        "wrong shape": request(url, "POST", "/alerts", b'{"alerts": {}}'),
        "no length": request(url, "POST", "/alerts"),
        "unknown path": request(url, "POST", "/api/v2/alerts", b"{}"),
        "GET alerts": request(url, "GET", "/alerts"),
        "POST healthz": request(url, "POST", "/healthz", b"{}"),
        "DELETE alerts": request(url, "DELETE", "/alerts"),
    }

    assert {name: answer.status for name, answer in answers.items()} == {
        "healthz": 200,
        "too big": 413,
        "bad json": 400,
        "wrong shape": 400,
        "no length": 411,
        "unknown path": 404,
        "GET alerts": 405,
        "POST healthz": 405,
        "DELETE alerts": 405,
    }
    assert answers["healthz"].body == {"status": "ok"}
    assert answers["GET alerts"].headers["Allow"] == "POST"
    for name, answer in answers.items():
        if name != "healthz":
            assert "\n" not in answer.body["error"] and answer.body["error"], name
    assert fake_api.requests == []  # nothing was triaged


@pytest.mark.integration
def test_stop_returns_promptly_and_drops_queued_work(serverless_api: FakeApiServer, start_receiver: Any) -> None:
    serverless_api.inject("/apis/serving.kserve.io/*", delay=1.0)  # every run takes a while
    receiver = start_receiver()
    url = receiver.server.url
    post_alerts(
        url,
        payload(*(alert({"namespace": "llm", "isvc": name}) for name in ("vllm-llm", "qwen-chat", "third"))),
    )
    deadline = time.monotonic() + 10
    while not serverless_api.requests and time.monotonic() < deadline:  # the worker started the first run
        time.sleep(0.02)

    began = time.monotonic()
    receiver.server.stop(grace=0.5)
    stopped_in = time.monotonic() - began

    assert stopped_in < 2
    assert "webhook: 2 queued run(s) dropped" in receiver.lines
    with pytest.raises(OSError):
        request(url, "GET", "/healthz")
    time.sleep(1.5)  # the abandoned run may end; the queued ones never start
    assert len(receiver.server.runs) <= 1


def test_the_command_refuses_a_public_address_without_a_secret(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "nbhelpers", "webhook", "--listen", "0.0.0.0:0"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )

    assert result.returncode == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("kserve-runbook: error: refusing to listen on 0.0.0.0 without authentication")
    assert "--secret-env" in line and "--insecure-no-auth" in line


def test_an_alertname_cannot_forge_log_lines_nor_mention_or_link_in_slack() -> None:
    from nbhelpers.cli.webhook import RunRecord, run_line, slack_text

    labels = {"namespace": "llm", "isvc": "vllm-llm"}
    hostile = "X\nwebhook: done llm/other: root causes: none\x1b[2J <!channel> <https://evil.example|click>"
    job = job_for(Alert(hostile, "firing", labels, "2026-01-15T11:40:00Z"))
    assert isinstance(job, Job) and "\n" not in job.alert and "\x1b" not in job.alert
    line = slack_text(run_line(RunRecord(job=job, folder=None, error="boom")))
    assert "<!channel>" not in line and "<https://" not in line and "&lt;!channel&gt;" in line


def test_slow_senders_and_too_many_connections_are_cut(
    monkeypatch: pytest.MonkeyPatch, fake_api: FakeApiServer, start_receiver: Any
) -> None:
    import socket
    import time

    from nbhelpers.cli import webhook

    monkeypatch.setattr(webhook, "CONNECTION_DEADLINE_SECONDS", 2.0)
    monkeypatch.setattr(webhook, "MAX_CONNECTIONS", 2)
    receiver = start_receiver()
    host, port = receiver.server.url.removeprefix("http://").rsplit(":", 1)
    slow = [socket.create_connection((host, int(port)), timeout=5) for _ in range(2)]
    for connection in slow:
        connection.sendall(b"POST /alerts HTTP/1.1\r\nContent-Length: 100\r\n")  # and then nothing more
    time.sleep(1.0)  # both taken by the server (a loaded machine needs a moment), neither near its deadline
    third = socket.create_connection((host, int(port)), timeout=5)
    assert third.recv(1) == b""  # no slot: closed unserved
    began = time.monotonic()
    assert all(connection.recv(1) == b"" for connection in slow)  # the deadline closes a trickling sender
    assert time.monotonic() - began < 5
    for connection in (*slow, third):
        connection.close()
    assert _eventually_healthy(receiver.server.url)  # slots are free again once their handlers have seen the close


def _eventually_healthy(url: str, within: float = 10.0) -> bool:
    """A closed connection's slot is free once its handler thread notices; on a loaded machine that takes a moment."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=5) as answer:
                return bool(answer.status == 200)
        except OSError:
            time.sleep(0.2)
    return False


# ------------------------------------------------------------------------------------------- fuzzing

_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=12,
)
_LABEL_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["llm", "vllm-llm", "vllm-llm-predictor-00001-private", "../x", "llm\n", "<!channel>", "\x1b[2J"]),
)
_ALERT = st.fixed_dictionaries(
    {"status": st.sampled_from(["firing", "resolved", "", "x"]), "startsAt": st.one_of(_LABEL_TEXT, _JSON)},
    optional={
        "labels": st.one_of(
            st.dictionaries(st.sampled_from([*ISVC_LABELS, "namespace", "alertname", "pod"]), _LABEL_TEXT), _JSON
        ),
        "annotations": _JSON,
    },
)
_PAYLOAD = st.one_of(
    _JSON,
    st.fixed_dictionaries(
        {"version": st.sampled_from(["4", 4, None]), "alerts": st.one_of(st.lists(_ALERT, max_size=5), _JSON)}
    ),
)


_DNS = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


@hypothesis_settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_PAYLOAD)
def test_any_payload_is_a_list_of_alerts_or_one_payload_error(document: Any) -> None:
    """Whatever a sender posts ends as alerts (each a job or a skip with a reason) or a 400-style reason."""
    body = json.dumps(document).encode()
    try:
        alerts = parse_payload(body)
    except PayloadError as error:
        assert "\n" not in str(error)
        return
    for alert in alerts:
        job = job_for(alert)
        if isinstance(job, Job):
            assert "\n" not in job.alert and all(char.isprintable() for char in job.alert)
            assert _DNS.fullmatch(job.target.namespace) and _DNS.fullmatch(job.target.isvc)
        else:
            assert isinstance(job, Skip) and job.reason


def test_an_alert_naming_an_llminferenceservice_triages_it_as_one() -> None:
    """Issue #18: an alert labelled with an LLMInferenceService (its pods carry no InferenceService label)."""
    labels = {"namespace": "llm", "llminferenceservice": "llama-llmd", "pod": "llama-llmd-kserve-6d8f7c9b5-4xk2p"}
    target = find_target(labels)
    assert target == Target("llm", "llama-llmd", LLM_INFERENCE_SERVICE)
    starts = datetime(2026, 1, 15, 11, 30, tzinfo=timezone.utc)
    params = job_params(
        TriageParams(), Job(target, "VllmDown", starts), starts + timedelta(minutes=5), timedelta(minutes=30)
    )
    assert (params.isvc, params.llmisvc) == ("", "llama-llmd")
    bad = find_target({"namespace": "llm", "llmisvc": "../x"})
    assert isinstance(bad, Skip) and "not a valid LLMInferenceService name" in bad.reason
