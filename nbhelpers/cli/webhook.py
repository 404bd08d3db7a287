"""``kserve-runbook webhook``: an Alertmanager receiver that triages the service a firing alert names (docs/contracts.md#cli).

``POST /alerts`` takes Alertmanager's webhook payload (version 4). Each firing
alert that names an InferenceService (see :func:`find_target`) becomes a job;
alerts without a target, and targets already queued, running or triaged within
the cooldown are ignored, and the answer (202) says why for each. A resolved
alert becomes one more job over the incident as it was, [startsAt, endsAt]: the
run made while it fired saw only its beginning. That run ignores the cooldown,
and each resolved incident (service and startsAt) is triaged once however often
Alertmanager resends it. One worker thread takes the jobs in order and runs ``triage.run()``
in-process (docs/contracts.md#execution-model), so a burst of alerts never starts more than one run
at a time; each run writes ``findings.json`` and ``summary.md`` into
``<out>/<UTC time>-<namespace>-<isvc>/`` (docs/contracts.md#output-folder) and, with
``--reports html``, then renders ``report.html`` from the evidence bundle it wrote (verdict first).

Read-only pages: ``GET /`` lists the recent runs and ``GET /runs/<folder>/<file>`` serves their files
(nbhelpers/cli/webhook_reports.py says what can be reached and why nothing else can); ``GET /metrics``
is the receiver's own Prometheus metrics and ``GET /healthz`` answers 200. Old runs are pruned by
count (``--keep``) and age (``--keep-days``) after each run.

The window of a run is [startsAt − lookback, now) (at most 7 days), and the
incident interval [startsAt, now). Against the cluster the receiver is as
read-only as ``triage``: all reads go through ``nbhelpers.sources``. The only
request it sends itself is the optional POST of a summary to a Slack incoming
webhook, whose URL is a secret and, like the shared bearer secret, never
appears in an answer, a log line or a written file.
"""

from __future__ import annotations

import contextlib
import hmac
import io
import ipaddress
import json
import queue
import re
import signal
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from nbhelpers.cli import webhook_reports
from nbhelpers.cli.headless import output_dir, render_report, write_verdict
from nbhelpers.cli.webhook_metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from nbhelpers.cli.webhook_metrics import ReceiverMetrics
from nbhelpers.errors import RunbookError
from nbhelpers.evidence.model import LLM_INFERENCE_SERVICE, Target
from nbhelpers.findings.catalog import Severity
from nbhelpers.render.findings_json import write_outputs
from nbhelpers.render.summary import coverage_line
from nbhelpers.triage import TriageParams, open_live_sources, run
from nbhelpers.util.redaction import redact_text
from nbhelpers.util.times import MAX_WINDOW, format_time, parse_duration

MAX_BODY_BYTES = 1 << 20
MAX_QUEUED = 32  # distinct services waiting for the worker; more are refused until it catches up
SLACK_TIMEOUT_SECONDS = 5.0
READ_TIMEOUT_SECONDS = 10.0  # a client that stalls mid-request loses its connection, not a thread forever
CONNECTION_DEADLINE_SECONDS = 30.0  # a connection is closed after this long, however slowly its sender trickles
MAX_CONNECTIONS = 16  # connections served at once; more are closed at once (Alertmanager retries)
MIN_SECRET_LENGTH = 16  # a shorter shared secret is refused at start-up: it could be guessed
MAX_ALERT_NAME = 120  # characters of an alertname kept for logs and notifications
MAX_ROOT_CAUSES_NOTIFIED = 3
MAX_RESOLVED_REMEMBERED = 1024  # resolved incidents remembered so that a resent resolve is not triaged twice
MAX_FAILURES_LISTED = 20  # failed runs (nothing written) the index lists, newest first
REPORT_KINDS = ("none", "html")
# Labels that name the InferenceService directly, in order of preference. The last two are how
# Prometheus spells the pod label serving.kserve.io/inferenceservice (kube-state-metrics adds "label_").
ISVC_LABELS = (
    "inferenceservice",
    "isvc",
    "serving_kserve_io_inferenceservice",
    "label_serving_kserve_io_inferenceservice",
)
# Labels that name an LLMInferenceService (KServe's llm-d stack), checked first: its pods carry no InferenceService
# label, so an alert with one of these is about the LLMInferenceService.
LLMISVC_LABELS = ("llminferenceservice", "llmisvc")
# Labels holding the name of a predictor Service (vLLM scraped through its Service, Istio, Knative).
SERVICE_LABELS = ("service", "service_name", "destination_service_name")
NAMESPACE_LABELS = ("namespace", "destination_service_namespace")
Progress = Callable[[str], None]
Clock = Callable[[], datetime]

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")  # used with fullmatch: no trailing newline
# <isvc>-predictor, older <isvc>-predictor-default, Knative revisions <isvc>-predictor-00001 and their
# -private Services; the greedy name keeps an InferenceService whose own name contains "-predictor".
_PREDICTOR_SERVICE = re.compile(
    r"(?P<isvc>[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)-predictor(?:-default)?(?:-\d{5})?(?:-private)?"
)
# Pods: <isvc>-predictor-<replicaset hash>-<suffix> (RawDeployment) or
# <isvc>-predictor-00001-deployment-<hash>-<suffix> (Serverless).
_PREDICTOR_POD = re.compile(
    r"(?P<isvc>[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)-predictor(?:-default)?(?:-\d{5}-deployment)?-[a-z0-9]+-[a-z0-9]+"
)
_RFC3339 = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|z|[+-]\d\d:\d\d)")


# --------------------------------------------------------------------------------------------- payload


class PayloadError(ValueError):
    """A request body that is not an Alertmanager webhook payload (answered 400 with this one-line reason)."""


@dataclass(frozen=True)
class Alert:
    """The parts of one alert of the payload the receiver uses."""

    name: str  # the alertname label
    status: str  # firing | resolved
    labels: Mapping[str, str]
    starts_at: str  # as sent (RFC 3339, nanoseconds allowed)
    ends_at: str = ""  # as sent; Alertmanager writes the zero time while the alert fires


@dataclass(frozen=True)
class Skip:
    """Why an alert is not triaged."""

    reason: str


@dataclass(frozen=True)
class Job:
    """One triage to run: the service and the alert that asked for it."""

    target: Target
    alert: str
    starts_at: datetime
    ends_at: datetime | None = None  # set for a resolved alert: the run covers [starts_at, ends_at]

    @property
    def ref(self) -> str:
        return f"{self.target.namespace}/{self.target.isvc}"

    @property
    def resolved(self) -> bool:
        return self.ends_at is not None


def _string_map(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(item, str) for item in (*value, *value.values())):
        raise PayloadError(f"{where} must be an object of strings")
    return dict(value)


def parse_payload(body: bytes) -> list[Alert]:
    """The alerts of an Alertmanager webhook payload; :class:`PayloadError` when the body has another shape."""
    try:
        document = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        reason = "too deeply nested" if isinstance(error, RecursionError) else str(error).splitlines()[0]
        raise PayloadError(f"body is not JSON: {reason}") from None
    if not isinstance(document, dict):
        raise PayloadError("body must be a JSON object (Alertmanager's webhook payload)")
    version = document.get("version")
    if version is not None and version != "4":
        raise PayloadError(f'unsupported payload version {version!r}: this receiver reads version "4"')
    alerts = document.get("alerts")
    if not isinstance(alerts, list):
        raise PayloadError("'alerts' must be a list")
    parsed = []
    for index, alert in enumerate(alerts):
        where = f"alerts[{index}]"
        if not isinstance(alert, dict):
            raise PayloadError(f"{where} must be an object")
        status, starts_at, ends_at = alert.get("status"), alert.get("startsAt", ""), alert.get("endsAt", "")
        if not isinstance(status, str) or not isinstance(starts_at, str) or not isinstance(ends_at, str):
            raise PayloadError(f"{where}: 'status', 'startsAt' and 'endsAt' must be strings")
        labels = _string_map(alert.get("labels"), f"{where}.labels")
        _string_map(alert.get("annotations"), f"{where}.annotations")
        parsed.append(Alert(labels.get("alertname", ""), status, labels, starts_at, ends_at))
    return parsed


def parse_alert_time(text: str) -> datetime | None:
    """An alert timestamp (RFC 3339; Go writes nanoseconds) in UTC; ``None`` when absent, malformed or zero."""
    match = _RFC3339.fullmatch(text.strip())
    if not match:
        return None
    seconds, fraction, offset = match.groups()
    moment_text = seconds + (f".{fraction[:6]}" if fraction else "") + ("+00:00" if offset in "Zz" else offset)
    try:
        moment = datetime.fromisoformat(moment_text).astimezone(timezone.utc)
    except (ValueError, OverflowError):
        return None
    return None if moment.year <= 1 else moment  # Go's zero time means "not set"


# ---------------------------------------------------------------------------------------------- target


def isvc_from_predictor_name(name: str, pod: bool = False) -> str | None:
    """The InferenceService behind a predictor Service (or, with ``pod``, a predictor pod) name, if it is one."""
    short = name.split(".", 1)[0]  # a Service's cluster DNS name: <name>.<namespace>.svc...
    match = (_PREDICTOR_POD if pod else _PREDICTOR_SERVICE).fullmatch(short)
    return match.group("isvc") if match else None


def find_target(labels: Mapping[str, str]) -> Target | Skip:
    """The InferenceService (or LLMInferenceService) an alert is about, from its labels, or why there is none.

    The namespace is the ``namespace`` label (Istio's ``destination_service_namespace`` otherwise). An
    LLMInferenceService is named by one of :data:`LLMISVC_LABELS`. An InferenceService's name is the first of
    :data:`ISVC_LABELS` present, else a predictor Service name in
    :data:`SERVICE_LABELS`, else a predictor pod name in ``pod`` (kube-state-metrics alerts such as
    restarts carry only the pod).
    """
    namespace = next((labels[name] for name in NAMESPACE_LABELS if labels.get(name)), "")
    if not namespace:
        return Skip("no namespace label")
    if not _DNS_LABEL.fullmatch(namespace):
        return Skip(f"namespace {namespace!r} is not a valid namespace name")
    for label in LLMISVC_LABELS:
        if labels.get(label):
            if not _DNS_LABEL.fullmatch(labels[label]):
                return Skip(f"label {label}={labels[label]!r} is not a valid LLMInferenceService name")
            return Target(namespace, labels[label], LLM_INFERENCE_SERVICE)
    for label in ISVC_LABELS:
        if labels.get(label):
            if not _DNS_LABEL.fullmatch(labels[label]):
                return Skip(f"label {label}={labels[label]!r} is not a valid InferenceService name")
            return Target(namespace, labels[label])
    derived = [isvc_from_predictor_name(labels.get(label, "")) for label in SERVICE_LABELS]
    derived.append(isvc_from_predictor_name(labels.get("pod", ""), pod=True))
    isvc = next((name for name in derived if name), None)
    if isvc:
        return Target(namespace, isvc)
    return Skip(
        "no InferenceService label ("
        + ", ".join(ISVC_LABELS)
        + ") and no predictor Service ("
        + ", ".join(SERVICE_LABELS)
        + ") or pod name"
    )


def job_for(alert: Alert) -> Job | Skip:
    """The triage a single alert asks for, or why it asks for none."""
    if alert.status not in ("firing", "resolved"):
        return Skip(f"status {alert.status!r}: only firing and resolved alerts are triaged")
    target = find_target(alert.labels)
    if isinstance(target, Skip):
        return target
    starts_at = parse_alert_time(alert.starts_at)
    if starts_at is None:
        return Skip(f"startsAt {alert.starts_at!r} is not an RFC 3339 time")
    name = printable(alert.name)[:MAX_ALERT_NAME]
    if alert.status == "firing":
        return Job(target, name, starts_at)
    ends_at = parse_alert_time(alert.ends_at)
    if ends_at is None or ends_at <= starts_at:
        return Skip(f"resolved, but endsAt {alert.ends_at!r} is not an RFC 3339 time after startsAt")
    return Job(target, name, starts_at, ends_at)


def _whole_seconds(moment: datetime) -> datetime:
    return moment.replace(microsecond=0)


def job_params(base: TriageParams, job: Job, now: datetime, lookback: timedelta) -> TriageParams:
    """The run's parameters: window [startsAt − lookback, end) capped at 7 days, incident [startsAt, end),
    where ``end`` is now for a firing alert and its endsAt (at the latest now) for a resolved one."""
    if job.ends_at is not None:
        now = min(now, job.ends_at)
    began = min(job.starts_at, now - timedelta(seconds=1))  # a clock running behind Alertmanager's
    start = max(began - lookback, now - MAX_WINDOW)
    return replace(
        base,
        namespace=job.target.namespace,
        isvc="" if job.target.is_llmisvc else job.target.isvc,
        llmisvc=job.target.isvc if job.target.is_llmisvc else "",
        since=None,
        start=_whole_seconds(start),
        end=_whole_seconds(now),
        incident_start=_whole_seconds(began),
        incident_end=_whole_seconds(now),
    )


# ------------------------------------------------------------------------------------- admission state


class Admissions:
    """Which services may be queued now: not while queued or running, not again within the cooldown.

    Pure bookkeeping: every call gets the current time from the caller; the caller serialises calls.
    The cooldown counts from the end of a service's last run, whether it succeeded or not.
    """

    def __init__(self, cooldown: timedelta, max_queued: int = MAX_QUEUED) -> None:
        self.cooldown = cooldown
        self.max_queued = max_queued
        self._queued: set[Target] = set()
        self._running: Target | None = None
        self._finished: dict[Target, datetime] = {}
        self._resolved: dict[tuple[Target, datetime], None] = {}  # incidents whose resolve was queued, oldest first
        self._resolved_waiting = 0

    def admit_resolved(self, target: Target, starts_at: datetime) -> str | None:
        """Queue the run over a resolved incident once per (service, startsAt); the cooldown does not apply."""
        key = (target, starts_at)
        if key in self._resolved:
            return "this resolved incident was already triaged or queued"
        if self.queued >= self.max_queued:
            return f"queue full ({self.max_queued} runs waiting); Alertmanager will send it again"
        self._resolved[key] = None
        self._resolved_waiting += 1
        while len(self._resolved) > MAX_RESOLVED_REMEMBERED:
            del self._resolved[next(iter(self._resolved))]
        return None

    def admit(self, target: Target, now: datetime) -> str | None:
        """Queue ``target`` and return ``None``, or return why it is not queued."""
        if target in self._queued:
            return "already queued"
        if target == self._running:
            return "a triage of this service is running"
        last = self._finished.get(target)
        if last is not None and now - last < self.cooldown:
            return (
                f"triaged {_duration_text(now - last)} ago; not again within the cooldown of "
                f"{_duration_text(self.cooldown)}"
            )
        if self.queued >= self.max_queued:
            return f"queue full ({self.max_queued} runs waiting); Alertmanager will send it again"
        self._queued.add(target)
        return None

    def started(self, target: Target, resolved: bool = False) -> None:
        if resolved:
            self._resolved_waiting -= 1
        else:
            self._queued.discard(target)
        self._running = target

    def finished(self, target: Target, now: datetime) -> None:
        self._running = None
        self._finished[target] = now
        self._finished = {key: when for key, when in self._finished.items() if now - when < self.cooldown}

    @property
    def queued(self) -> int:
        return len(self._queued) + self._resolved_waiting


def _duration_text(delta: timedelta) -> str:
    seconds = max(0, int(delta.total_seconds()))
    if seconds % 3600 == 0 and seconds:
        return f"{seconds // 3600}h"
    if seconds % 60 == 0 and seconds:
        return f"{seconds // 60}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


# ---------------------------------------------------------------------------------------------- runs


@dataclass(frozen=True)
class RunRecord:
    """What one triage produced (``error`` set: it could not run, and nothing was written).

    ``report``: ``"html"`` when report.html was rendered, ``""`` when none was asked for, else why it
    could not be (the verdict files are there all the same).
    """

    job: Job
    folder: Path | None
    root_causes: tuple[str, ...] = ()
    critical: int = 0
    coverage: str = ""
    error: str = ""
    report: str = ""
    public_url: str = ""  # the receiver's --public-url, for the link in the notification

    @property
    def report_failed(self) -> bool:
        return self.report not in ("", "html")

    @property
    def link(self) -> str:
        """Where to read the run: the report (or summary) under --public-url, else the folder on disk."""
        if self.folder is None:
            return ""
        file = "report.html" if self.report == "html" else "summary.md"
        if self.public_url:
            return f"{self.public_url}/runs/{self.folder.name}/{file}"
        return str(self.folder / file) if self.report == "html" else str(self.folder)


def _error_text(error: Exception) -> str:
    text = " ".join(str(error).split())
    return text if isinstance(error, RunbookError) else f"{type(error).__name__}: {text}"


def triage_job(settings: Settings, job: Job, clock: Clock) -> RunRecord:
    """Run the triage in-process, write the verdict, then (``--reports html``) render report.html.

    Any failure before the verdict is written becomes ``error``; a report that cannot be rendered
    costs the report only (``report`` says why).
    """
    began, now = time.monotonic(), clock()
    params = job_params(settings.triage, job, now, settings.lookback)
    html = settings.reports == "html"
    try:
        result = run(params, clock=clock)
        folder = output_dir(None, job.target, now, base=settings.out)
        if html:
            bundle = write_verdict(result, folder)
        else:
            write_outputs(result, folder)
    except Exception as error:  # one failed run must not stop the receiver
        return RunRecord(job, None, error=_error_text(error))
    report = ""
    if html:
        left = params.deadline.total_seconds() - (time.monotonic() - began) if params.deadline else None
        try:
            report = render_report(result, params, folder, bundle, left) or "html"
        except Exception as error:  # the verdict stands; only the report is missing
            report = _error_text(error)
    critical = sum(1 for finding in result.findings if finding.level is Severity.CRITICAL)
    return RunRecord(
        job, folder, result.root_causes, critical, coverage_line(result), report=report, public_url=settings.public_url
    )


def printable(text: str) -> str:
    """Untrusted text for one log line: control characters (newlines, terminal escapes) become '?'."""
    return "".join(char if char.isprintable() else "?" for char in text)


def slack_text(text: str) -> str:
    """Text Slack shows as written: ``&``, ``<`` and ``>`` escaped, so labels cannot mention or link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def run_line(record: RunRecord) -> str:
    """The progress line, and the notification text, of a finished run."""
    head = f"{record.job.ref} (alert {record.job.alert or 'unnamed'})"
    if record.error:
        return f"{head}: triage failed: {redact_text(record.error)}"
    causes = ", ".join(record.root_causes[:MAX_ROOT_CAUSES_NOTIFIED]) or "none"
    more = len(record.root_causes) - MAX_ROOT_CAUSES_NOTIFIED
    causes += f" and {more} more" if more > 0 else ""
    unrendered = f" (report.html not rendered: {redact_text(record.report)})" if record.report_failed else ""
    return (
        f"{head}: root causes: {causes} ({record.critical} critical findings). {record.coverage} "
        f"Report: {record.link}{unrendered}"
    )


def post_to_slack(url: str, text: str, timeout: float = SLACK_TIMEOUT_SECONDS) -> str:
    """POST ``{"text": text}`` to a Slack incoming webhook; ``""`` on success, else one line without the URL."""
    request = urllib.request.Request(
        url,
        data=json.dumps({"text": text}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read(4096)
    except Exception as error:  # a notification failure is logged, never raised into the worker
        message = " ".join(f"{type(error).__name__}: {error}".split())
        return redact_text(message, [url])
    return ""


# ---------------------------------------------------------------------------------------------- server


@dataclass(frozen=True)
class Listen:
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False  # a host name: it may resolve to any interface

    def url(self, port: int) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{port}"


def parse_listen(text: str) -> Listen:
    """``HOST:PORT`` or ``[IPv6]:PORT`` (port 0: any free port)."""
    host, separator, port = text.strip().rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not separator or not host or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise RunbookError(f"bad --listen {text!r}: use HOST:PORT, e.g. 127.0.0.1:9095")
    return Listen(host, int(port))


@dataclass(frozen=True)
class Settings:
    """The receiver's configuration; ``triage`` carries the live options every run uses."""

    triage: TriageParams
    listen: Listen
    out: Path = Path("outputs")
    lookback: timedelta = timedelta(minutes=30)
    cooldown: timedelta = timedelta(minutes=10)
    secret: str = field(default="", repr=False)  # the bearer token Alertmanager must send; "": none asked
    slack_url: str = field(default="", repr=False)
    secret_env: str = ""  # the variable's name, for the startup line
    reports: str = "none"  # none | html: also render report.html after the verdict
    public_url: str = ""  # where the receiver is reachable from a browser, no trailing slash
    keep: int = 0  # run folders kept (newest first); 0: no limit
    keep_days: float = 0.0  # run folders older than this are removed; 0: no limit


def _env_value(environment: Mapping[str, str], variable: str, option: str) -> str:
    if not variable:
        return ""
    value = environment.get(variable, "").strip()
    if not value:
        raise RunbookError(f"{option} {variable}: that variable is not set or empty")
    return value


def settings_from_options(triage: TriageParams, options: Mapping[str, Any], environment: Mapping[str, str]) -> Settings:
    """Validate the command line (``RunbookError`` on bad input) into :class:`Settings`."""
    listen = parse_listen(str(options["listen"]))
    secret = _env_value(environment, options["secret_env"], "--secret-env")
    if secret and len(secret) < MIN_SECRET_LENGTH:
        raise RunbookError(
            f"--secret-env {options['secret_env']}: the secret has {len(secret)} characters; use at least "
            f"{MIN_SECRET_LENGTH} (e.g. openssl rand -hex 24)"
        )
    if not secret and not listen.loopback and not options["insecure_no_auth"]:
        raise RunbookError(
            f"refusing to listen on {listen.host} without authentication: set --secret-env VAR (the shared "
            "secret Alertmanager sends as a bearer token), or pass --insecure-no-auth"
        )
    lookback, cooldown = parse_duration(options["lookback"]), parse_duration(options["cooldown"])
    if not timedelta(seconds=1) <= lookback <= MAX_WINDOW:
        raise RunbookError(f"--lookback {options['lookback']}: use 1s to 7d")
    slack_url = _env_value(environment, options["slack_webhook_env"], "--slack-webhook-env")
    if slack_url and urlsplit(slack_url).scheme not in ("http", "https"):
        raise RunbookError(f"--slack-webhook-env {options['slack_webhook_env']}: the value is not an http(s) URL")
    return Settings(
        triage=triage,
        listen=listen,
        out=Path(options["out"] or "outputs").resolve(),  # report folders named in full in logs and Slack
        lookback=lookback,
        cooldown=cooldown,
        secret=secret,
        slack_url=slack_url,
        secret_env=options["secret_env"],
        reports=_reports_kind(options.get("reports") or "none"),
        public_url=parse_public_url(options.get("public_url") or ""),
        keep=int(_not_negative(options.get("keep") or 0, "--keep")),
        keep_days=_not_negative(options.get("keep_days") or 0, "--keep-days"),
    )


def _reports_kind(value: str) -> str:
    if value not in REPORT_KINDS:
        raise RunbookError(f"--reports {value!r}: use one of {', '.join(REPORT_KINDS)}")
    return value


def _not_negative(value: float, option: str) -> float:
    if value < 0:
        raise RunbookError(f"{option} {value}: use 0 (no limit) or more")
    return value


def parse_public_url(text: str) -> str:
    """``--public-url``: an http(s) URL without query or fragment, kept without its trailing slash."""
    if not text:
        return ""
    parts = urlsplit(text.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise RunbookError(f"--public-url {text!r}: use an http(s) URL such as https://runbooks.example.com")
    if parts.username or parts.password:
        raise RunbookError("--public-url: the URL must not carry credentials (it is sent in notifications)")
    return text.strip().rstrip("/")


@dataclass(frozen=True)
class Reply:
    """An answer: a JSON object, or ``content`` bytes of type ``content_type``."""

    status: int
    body: Mapping[str, Any]
    headers: tuple[tuple[str, str], ...] = ()
    close: bool = False  # the request body was not read: the connection cannot be reused
    content: bytes | None = None
    content_type: str = "application/json"


_ROUTES = {"/alerts": "POST", "/healthz": "GET", "/": "GET", "/metrics": "GET"}
_RUNS_PREFIX = "/runs/"
_PATHS_TEXT = "POST /alerts, GET / (the report index), GET /runs/<run>/<file>, GET /metrics, GET /healthz"
# The index and the files are static: no script of the receiver's origin runs, and a report runs sandboxed.
_PAGE_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
_REPORT_POLICY = (
    "sandbox allow-scripts; default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'unsafe-inline'"
)
_READ_HEADERS = ("Authorization", "Content-Length")


def _error(status: int, message: str, *headers: tuple[str, str], close: bool = False) -> Reply:
    return Reply(status, {"error": message}, headers, close)


class _HttpServer(ThreadingHTTPServer):
    """One thread per connection, at most :data:`MAX_CONNECTIONS` at once: further ones are closed unserved."""

    daemon_threads = True
    receiver: WebhookServer

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kserve-runbook-webhook"
    sys_version = ""
    timeout = READ_TIMEOUT_SECONDS
    server: _HttpServer

    def log_message(self, format: str, *args: Any) -> None:  # no access log: runs are reported instead
        return

    def setup(self) -> None:
        super().setup()
        # The socket timeout bounds each read; this bounds the whole connection (a sender trickling bytes).
        self._deadline = threading.Timer(CONNECTION_DEADLINE_SECONDS, self._expire)
        self._deadline.daemon = True
        self._deadline.start()

    def _expire(self) -> None:
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def finish(self) -> None:
        self._deadline.cancel()
        with contextlib.suppress(OSError):
            super().finish()

    def _handle(self) -> None:
        headers = {name: value for name in _READ_HEADERS if (value := self.headers.get(name)) is not None}
        reply = self.server.receiver.answer(self.command, self.path, headers, self.rfile)
        body = json.dumps(reply.body).encode() if reply.content is None else reply.content
        try:
            self.send_response(reply.status)
            for name, value in (("Content-Type", reply.content_type), *reply.headers):
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            if reply.close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
        except OSError:
            self.close_connection = True  # the client went away

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _handle


class WebhookServer:
    """The running receiver: an HTTP server thread and one worker thread. Use :func:`serve`."""

    def __init__(self, settings: Settings, clock: Clock, progress: Progress | None) -> None:
        self.settings = settings
        self._clock = clock
        self._say = progress or (lambda _message: None)
        self._admissions = Admissions(settings.cooldown)
        self.metrics = ReceiverMetrics(self._queued)
        self._failures: list[str] = []
        self._jobs: queue.Queue[Job | None] = queue.Queue()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._runs: list[RunRecord] = []
        self._stopping = threading.Event()
        self._http = _bind(settings.listen)
        self._http.receiver = self
        self._http_thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.1}, name="webhook-http", daemon=True
        )
        self._worker = threading.Thread(target=self._work, name="webhook-worker", daemon=True)

    @property
    def url(self) -> str:
        return self.settings.listen.url(int(self._http.server_address[1]))

    @property
    def runs(self) -> list[RunRecord]:
        """Finished runs, oldest first."""
        with self._lock:
            return list(self._runs)

    def _queued(self) -> float:
        with self._lock:
            return float(self._admissions.queued)

    def start(self) -> WebhookServer:
        self._prune()
        self._worker.start()
        self._http_thread.start()
        return self

    def wait_for_runs(self, count: int, timeout: float) -> list[RunRecord]:
        """Block until ``count`` runs have finished (or ``timeout`` seconds pass); the runs so far."""
        with self._changed:
            self._changed.wait_for(lambda: len(self._runs) >= count, timeout)
            return list(self._runs)

    def stop(self, grace: float = 5.0) -> None:
        """Stop listening, drop queued jobs, give a running triage ``grace`` seconds, then abandon it."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._http.shutdown()
        self._http.server_close()
        with self._lock:
            dropped = self._admissions.queued
        if dropped:
            self._say(f"webhook: {dropped} queued run(s) dropped")
        self._jobs.put(None)
        self._worker.join(grace)
        self._http_thread.join(grace)

    # -- HTTP --

    def answer(self, method: str, target: str, headers: Mapping[str, str], body: io.BufferedIOBase) -> Reply:
        """Route one request: 404 unknown path, 405 wrong method, 401 bad secret, 411/413/400 bad body."""
        path = urlsplit(target).path
        allowed = "GET" if path.startswith(_RUNS_PREFIX) else _ROUTES.get(path)
        if allowed is None:
            return _error(404, f"no such path {printable(path)[:200]!r}: {_PATHS_TEXT}", close=True)
        if method != allowed:
            return _error(405, f"{path} accepts {allowed} only", ("Allow", allowed), close=True)
        if allowed == "GET":
            reply = self._read_only(path)
            unread_body = headers.get("Content-Length", "0").strip() not in ("", "0")
            return replace(reply, close=True) if unread_body else reply
        if not self._authorized(headers.get("Authorization", "")):
            return _error(401, "missing or wrong bearer token", ("WWW-Authenticate", "Bearer"), close=True)
        raw_length = headers.get("Content-Length")
        if raw_length is None:
            return _error(411, "Content-Length is required", close=True)
        if not (raw_length.strip().isascii() and raw_length.strip().isdigit()):
            return _error(400, "bad Content-Length", close=True)
        length = int(raw_length)
        if length > MAX_BODY_BYTES:
            return _error(413, f"body of {length} bytes exceeds the limit of {MAX_BODY_BYTES}", close=True)
        try:
            alerts = parse_payload(body.read(length))
        except PayloadError as error:
            return _error(400, str(error))
        except OSError:
            return _error(400, "the body could not be read", close=True)
        if self._stopping.is_set():
            return _error(503, "shutting down", close=True)
        return Reply(202, self.admit(alerts))

    def _read_only(self, path: str) -> Reply:
        """The GET pages. ``path`` is as sent (never percent-decoded); nothing here writes."""
        if path == "/healthz":
            return Reply(200, {"status": "stopping" if self._stopping.is_set() else "ok"})
        if path == "/metrics":
            return Reply(200, {}, content=self.metrics.exposition(), content_type=METRICS_CONTENT_TYPE)
        nosniff = ("X-Content-Type-Options", "nosniff")
        if path == "/":
            with self._lock:
                failures = list(reversed(self._failures))
            page = webhook_reports.index_html(webhook_reports.recent_runs(self.settings.out), failures)
            policy = ("Content-Security-Policy", _PAGE_POLICY)
            return Reply(200, {}, (policy, nosniff), content=page.encode(), content_type="text/html; charset=utf-8")
        found = webhook_reports.read_run_file(self.settings.out, path)
        if found is None:
            return _error(404, "no such run file: GET / lists the runs and their files")
        content, content_type = found
        policy = ("Content-Security-Policy", _REPORT_POLICY if path.endswith(".html") else _PAGE_POLICY)
        return Reply(200, {}, (policy, nosniff), content=content, content_type=content_type)

    def _authorized(self, header: str) -> bool:
        if not self.settings.secret:
            return True
        scheme, _, token = header.strip().partition(" ")
        expected = self.settings.secret.encode()
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), expected)

    def admit(self, alerts: list[Alert]) -> dict[str, Any]:
        """Queue a job per admitted alert; the answer lists what was accepted and what was ignored, and why."""
        accepted: list[dict[str, str]] = []
        ignored: list[dict[str, str]] = []
        now = self._clock()
        for alert in alerts:
            self.metrics.alerts_received.labels("firing" if alert.status == "firing" else "resolved").inc()
            job = job_for(alert)
            if isinstance(job, Skip):
                ignored.append({"alert": alert.name, "reason": job.reason})
                continue
            with self._lock:
                if job.ends_at is not None:
                    refusal = self._admissions.admit_resolved(job.target, job.starts_at)
                    state = f"resolved, {format_time(job.starts_at)} to {format_time(job.ends_at)}"
                else:
                    refusal = self._admissions.admit(job.target, now)
                    state = f"firing since {format_time(job.starts_at)}"
                if refusal is None:  # said before the worker can pick it up, so the lines keep their order
                    self._say(f"webhook: queued {job.ref} (alert {job.alert or 'unnamed'} {state})")
                    self._jobs.put(job)
            if refusal is None:
                self.metrics.alerts_queued.inc()
                accepted.append({"alert": alert.name, "namespace": job.target.namespace, "isvc": job.target.isvc})
            else:
                ignored.append({"alert": alert.name, "reason": f"{job.ref}: {refusal}"})
        return {"accepted": accepted, "ignored": ignored}

    # -- worker --

    def _work(self) -> None:
        try:
            self._work_until_stopped()
        finally:
            if self.settings.reports == "html":
                _close_event_loop()

    def _work_until_stopped(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None or self._stopping.is_set():
                return
            with self._lock:
                self._admissions.started(job.target, job.resolved)
            settings = self.settings
            self.metrics.runs_started.inc()
            began = time.monotonic()
            record = triage_job(settings, job, self._clock)
            self.metrics.run_duration.observe(time.monotonic() - began)
            if record.error:
                self.metrics.runs_failed.inc()
            elif record.report_failed:
                self.metrics.reports_failed.inc()
            self._prune()  # before the run counts as finished, so a finished run's folder list is final
            line = printable(f"webhook: {'failed' if record.error else 'done'} {run_line(record)}")
            with self._changed:
                self._admissions.finished(job.target, self._clock())
                self._runs.append(record)
                if record.error:
                    self._failures = [*self._failures, f"{format_time(self._clock())} {run_line(record)}"]
                    self._failures = self._failures[-MAX_FAILURES_LISTED:]
                self._changed.notify_all()
            self._say(line)
            if settings.slack_url:
                failure = post_to_slack(settings.slack_url, slack_text(f"kserve-runbook: {run_line(record)}"))
                if failure:
                    self._say(f"webhook: Slack notification for {job.ref} failed: {failure}")

    def _prune(self) -> None:
        settings = self.settings
        if settings.keep or settings.keep_days:
            removed = webhook_reports.prune(settings.out, self._clock(), settings.keep, settings.keep_days)
            if removed:
                self._say(f"webhook: pruned {len(removed)} old run(s), oldest {removed[-1]}")


def _close_event_loop() -> None:
    """Close the event loop papermill's kernel client left open in this thread (one per thread, reused)."""
    from jupyter_core.utils import ensure_event_loop

    loop = ensure_event_loop()
    if not loop.is_running():
        loop.close()


def _bind(listen: Listen) -> _HttpServer:
    family = socket.AF_INET6 if ":" in listen.host else socket.AF_INET

    class Bound(_HttpServer):
        address_family = family

    try:
        return Bound((listen.host, listen.port), _Handler)
    except OSError as error:
        raise RunbookError(f"cannot listen on {listen.host}:{listen.port}: {error.strerror or error}") from None


def serve(settings: Settings, clock: Clock | None = None, progress: Progress | None = None) -> WebhookServer:
    """Start the receiver (HTTP and worker threads) and return it; ``stop()`` ends it.

    ``clock`` (tests): the current time used for windows, folder names and the cooldown.
    """
    return WebhookServer(settings, clock or (lambda: datetime.now(timezone.utc)), progress).start()


def run_receiver(settings: Settings, progress: Progress | None) -> None:
    """The command: check the live options, serve until SIGTERM or Ctrl-C, then stop cleanly."""
    live = open_live_sources(settings.triage)  # a bad kubeconfig or token variable fails now, not per alert
    live.cluster.close()
    if live.metrics is not None:
        live.metrics.close()
    try:
        settings.out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise RunbookError(f"--out {settings.out}: {error.strerror or error}") from None
    server = serve(settings, progress=progress)
    say = progress or (lambda _message: None)
    auth = f"bearer secret from ${settings.secret_env}" if settings.secret else "none (loopback or --insecure-no-auth)"
    say(f"webhook: listening on {server.url} ({_PATHS_TEXT}); authentication of POST /alerts: {auth}")
    stopping = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda _signal, _frame: stopping.set())
    try:
        stopping.wait()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        say("webhook: stopping")
        server.stop()
