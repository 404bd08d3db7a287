"""``run(params) -> TriageResult``: the only code that produces findings (docs/contracts.md#execution-model).

sources -> gather -> every step through one ``run_step()`` -> ignores -> ranking.
The notebook, the CLI, fleet and the scenario tests all come through here.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta, timezone
from typing import Any

from nbhelpers import __version__
from nbhelpers.checks import STEP_IDS, STEPS, check_for
from nbhelpers.errors import BundleError, EvidenceMissing, RunbookError, StepSkipped
from nbhelpers.evidence.gather import gather
from nbhelpers.evidence.model import INFERENCE_SERVICE, LLM_INFERENCE_SERVICE, Evidence, SiteConfig, Target
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding, apply_ignores, rank_root_causes
from nbhelpers.findings.steps import CheckFunction, StepInfo
from nbhelpers.sources import kube
from nbhelpers.sources.base import ClusterSource, MetricsSource
from nbhelpers.util.times import Window, format_duration, format_time, parse_duration, parse_time, resolve_window

SCHEMA_ID = "kserve-runbook/findings/v1"
IGNORE_ANNOTATION = "kserve-runbook/ignore"
Progress = Callable[[str, str], None]  # (event, message): event is "gather", "step-start", "step-end"


@dataclass(frozen=True)
class TriageParams:
    """One triage request, validated: durations are ``timedelta``, moments aware UTC ``datetime``.

    Text enters once, at the edge (CLI options, notebook parameters, widget fields, webhook labels),
    through :func:`params_from_text`; everything after it trusts these values. A bad combination
    (``since`` with ``start``/``end``, half an incident) is refused here with a one-line error.
    """

    namespace: str = ""
    isvc: str = ""
    llmisvc: str = ""
    bundle: str = ""
    kubeconfig: str = ""
    context: str = ""
    prometheus: str = ""
    prometheus_token_env: str = ""
    prometheus_ca_file: str = ""
    prometheus_headers: tuple[str, ...] = ()
    prometheus_insecure: bool = False
    since: timedelta | None = None
    start: datetime | None = None
    end: datetime | None = None
    incident_start: datetime | None = None
    incident_end: datetime | None = None
    ignore: tuple[str, ...] = ()
    deadline: timedelta | None = None
    request_timeout: timedelta = timedelta(seconds=30)
    client_timeout: timedelta | None = None
    kserve_namespace: str = "kserve"
    knative_namespace: str = "knative-serving"

    def __post_init__(self) -> None:
        if self.isvc and self.llmisvc:
            raise RunbookError("give either --isvc or --llmisvc, not both")
        if self.since is not None and (self.start or self.end):
            raise RunbookError("give either --since or --start/--end, not both")
        if (self.start is None) != (self.end is None):
            raise RunbookError("--start and --end go together")
        if (self.incident_start is None) != (self.incident_end is None):
            raise RunbookError("--incident-start and --incident-end go together")
        if self.incident_start and self.incident_end and self.incident_start >= self.incident_end:
            raise RunbookError("--incident-start must be before --incident-end")

    def target(self, namespace: str = "", name: str = "", kind: str = INFERENCE_SERVICE) -> Target:
        """The target these parameters name; ``namespace``, ``name`` and ``kind`` fill what they leave out
        (a bundle's manifest)."""
        if self.llmisvc:
            return Target(self.namespace or namespace, self.llmisvc, LLM_INFERENCE_SERVICE)
        if self.isvc:
            return Target(self.namespace or namespace, self.isvc, INFERENCE_SERVICE)
        return Target(self.namespace or namespace, name, kind)

    @property
    def incident(self) -> Window | None:
        """The incident interval (shaded in charts, the timeline's focus), when one was given."""
        if self.incident_start is None or self.incident_end is None:
            return None
        return Window(self.incident_start, self.incident_end)

    def to_text(self) -> dict[str, str | bool]:
        """The same request as text, the inverse of :func:`params_from_text` (papermill's parameters)."""
        return {item.name: _field_text(getattr(self, item.name)) for item in fields(self)}


def _field_text(value: object) -> str | bool:
    if isinstance(value, bool):
        return value
    if value is None:
        return ""
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
    if isinstance(value, tuple):
        return ",".join(str(item) for item in value)
    return str(value)


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")


def _from_text(name: str, kind: str, value: object) -> object:
    """One field from its text form; ``kind`` is the field's annotation as written above."""
    if kind == "bool":
        return bool(value)
    if kind == "tuple[str, ...]":
        items = value.split(",") if isinstance(value, str) else list(value)  # type: ignore[call-overload]
        return tuple(str(item).strip() for item in items if str(item).strip())
    text = str(value).strip()
    if kind == "str":
        return text
    if kind.startswith("timedelta"):
        if not text:
            return None if kind.endswith("None") else timedelta(seconds=30)
        return parse_duration(text)
    if kind.startswith("datetime"):
        return parse_time(text, _option(name)) if text else None
    raise AssertionError(f"no text form for {name}: {kind}")  # a new field type needs a converter above


def params_from_text(values: Mapping[str, object]) -> TriageParams:
    """Build :class:`TriageParams` from text (the one place where durations and times are parsed).

    ``values`` maps field names to what the user typed (empty means "not given"; tuples may come as
    comma-separated text or as a sequence). ``RunbookError`` names the option for bad input.
    """
    known = {item.name: str(item.type) for item in fields(TriageParams)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise RunbookError(f"unknown triage parameter(s): {', '.join(unknown)}")
    converted: dict[str, Any] = {}
    for name, value in values.items():
        if name == "request_timeout" and not str(value).strip():
            continue  # empty: the default
        try:
            converted[name] = _from_text(name, known[name], value)
        except RunbookError as error:
            raise RunbookError(f"{_option(name)}: {error}") from None
    return TriageParams(**converted)


TEXT_PARAMETERS: tuple[str, ...] = tuple(item.name for item in fields(TriageParams))


@dataclass(frozen=True)
class StepResult:
    id: str
    title: str
    status: str  # ok | findings | skipped | error
    reason: str
    seconds: float
    findings: tuple[Finding, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "status": self.status, "reason": self.reason, "seconds": round(self.seconds, 3)}


@dataclass(frozen=True)
class TriageResult:
    evidence: Evidence
    steps: tuple[StepResult, ...]
    findings: tuple[Finding, ...]
    root_causes: tuple[str, ...]
    generated_at: datetime
    incident: Window | None = None
    deadline_hit: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def partial(self) -> bool:
        return self.deadline_hit or bool(self.evidence.failures()) or any(s.status == "error" for s in self.steps)

    @property
    def has_critical(self) -> bool:
        return any(finding.level is Severity.CRITICAL for finding in self.findings)

    def step(self, step_id: str) -> StepResult:
        for step in self.steps:
            if step.id == step_id:
                return step
        raise KeyError(step_id)

    def to_json(self) -> dict[str, Any]:
        """The ``findings.json`` document (schema ``kserve-runbook/findings/v1``)."""
        evidence = self.evidence
        document: dict[str, Any] = {
            "schema": SCHEMA_ID,
            "tool_version": __version__,
            "generated_at": format_time(self.generated_at),
            "target": {
                "namespace": evidence.target.namespace,
                "isvc": evidence.target.isvc,
                "deployment_mode": evidence.deployment_mode,
                "deployment_mode_raw": evidence.deployment_mode_raw,
                # optional (docs/contracts.md): only for targets other than an InferenceService
                **({"kind": evidence.target.kind} if evidence.target.kind != INFERENCE_SERVICE else {}),
            },
            "window": evidence.window.to_json(),
            "sources": dict(evidence.sources),
            "versions": dict(evidence.versions),
            "partial": self.partial,
            "steps": [step.to_json() for step in self.steps],
            "findings": [finding.to_json() for finding in self.findings],
            "root_causes": list(self.root_causes),
        }
        if self.incident is not None:
            document["incident"] = self.incident.to_json()
        return document


def run_step(
    step: StepInfo,
    check: CheckFunction,
    evidence: Evidence,
    progress: Progress | None = None,
    ignored: dict[str, str] | None = None,
) -> StepResult:
    """Run one check: owns timing, error capture, ignores and progress."""
    notify = progress or (lambda _event, _message: None)
    notify("step-start", step.id)
    began = time.monotonic()
    findings: list[Finding] = []
    try:
        findings = apply_ignores(check(evidence), ignored or {})
    except StepSkipped as skipped:
        status, reason = "skipped", skipped.reason
    except EvidenceMissing as missing:
        status, reason = "error", f"missing evidence: {missing.what}: {missing.reason}"
    except Exception as error:  # a bug in one check must not hide the other eight
        status, reason = "error", f"{type(error).__name__}: {error}"
    else:
        serious = any(finding.level is not Severity.INFO for finding in findings)
        status, reason = ("findings" if serious else "ok"), _partial_reason(step.id, evidence)
    seconds = time.monotonic() - began
    notify("step-end", f"{step.id} {status} {seconds:.2f}s")
    return StepResult(step.id, step.title, status, reason, seconds, tuple(findings))


def _partial_reason(step_id: str, evidence: Evidence) -> str:
    failed = [record for record in evidence.failures() if not record.what.startswith(("logs ", "prometheus"))]
    if not failed:
        return ""
    listed = ", ".join(f"{record.status} on {record.what}" for record in failed[:3])
    more = f" and {len(failed) - 3} more" if len(failed) > 3 else ""
    return f"partial: {listed}{more}"


def ignored_codes(params: TriageParams, evidence: Evidence) -> dict[str, str]:
    """Codes to report as info: ``--ignore`` and the ISVC annotation ``kserve-runbook/ignore``."""
    ignored = {code.strip(): "--ignore" for code in params.ignore if code.strip()}
    annotation = kube.annotations(evidence.isvc).get(IGNORE_ANNOTATION, "")
    for code in annotation.split(","):
        if code.strip():
            ignored.setdefault(code.strip(), f"annotation {IGNORE_ANNOTATION}")
    return ignored


def open_sources(
    params: TriageParams, deadline: float | None = None
) -> tuple[ClusterSource, MetricsSource | None, Target, Window]:
    """Build the sources and resolve target and window. Raises ``RunbookError`` for bad input.

    ``deadline`` (a ``time.monotonic()`` moment) bounds every live request: none is sent after it.
    """
    timeout = params.request_timeout.total_seconds()
    if params.bundle:
        from nbhelpers.sources.bundle import open_bundle

        cluster, bundle_metrics, manifest = open_bundle(params.bundle)
        target = params.target(manifest.namespace, manifest.isvc, manifest.kind)
        captured = manifest.captured_at
        if params.since is not None or params.start or params.end:
            window = resolve_window(captured, params.since, params.start, params.end)
        else:
            window = manifest.window
        metrics: MetricsSource | None = bundle_metrics if bundle_metrics.index else None
        if params.prometheus:
            metrics = _live_metrics(params, timeout, deadline)
        return cluster, metrics, target, window
    if not params.namespace or not (params.isvc or params.llmisvc):
        raise RunbookError(
            "--namespace and --isvc are required without --bundle (--llmisvc instead of --isvc for an LLMInferenceService)"
        )
    live = open_live_sources(params, deadline)
    return live.cluster, live.metrics, params.target(), live.window


def open_live_sources(params: TriageParams, deadline: float | None = None) -> SharedSources:
    """The live cluster, Prometheus (with ``--prometheus``) and the window (now is read here, once).

    Raises ``RunbookError`` for bad input; the caller closes the sources.
    """
    from nbhelpers.sources.cluster_live import LiveCluster

    timeout = params.request_timeout.total_seconds()
    live = LiveCluster(
        kubeconfig=params.kubeconfig or None,
        context=params.context or None,
        timeout_seconds=timeout,
        deadline=deadline,
    )
    try:
        now = datetime.now(timezone.utc)
        window = resolve_window(now, params.since, params.start, params.end)
        metrics = _live_metrics(params, timeout, deadline) if params.prometheus else None
    except BaseException:
        live.close()
        raise
    return SharedSources(live, metrics, window)


def _live_metrics(params: TriageParams, timeout: float, deadline: float | None = None) -> MetricsSource:
    from nbhelpers.sources.metrics_live import LiveMetrics

    token = ""
    if params.prometheus_token_env:
        token = os.environ.get(params.prometheus_token_env, "")
        if not token:
            raise RunbookError(f"--prometheus-token-env {params.prometheus_token_env}: that variable is not set")
    headers: dict[str, str] = {}
    for header in params.prometheus_headers:
        name, separator, value = header.partition(":")
        if not separator or not name.strip():
            raise RunbookError("bad --prometheus-header (value not shown: it may be a credential): use 'Name: value'")
        headers[name.strip()] = value.strip()
    return LiveMetrics(
        url=params.prometheus,
        token=token or None,
        ca_file=params.prometheus_ca_file or None,
        headers=headers,
        verify=not params.prometheus_insecure,
        timeout_seconds=timeout,
        deadline=deadline,
    )


def observed_at_for(cluster: ClusterSource, params: TriageParams, window: Window) -> datetime:
    """The moment the evidence describes: the capture time for bundles, else the window end."""
    if params.bundle:
        from nbhelpers.sources.bundle import BundleCluster

        if isinstance(cluster, BundleCluster):
            return cluster.manifest.captured_at
    return window.end


@dataclass(frozen=True)
class SharedSources:
    """Sources opened once by a caller that triages many services (``fleet``), and the window they share.

    ``run()`` reads through them as given and leaves them open; the target still comes from the params.
    """

    cluster: ClusterSource
    metrics: MetricsSource | None
    window: Window


@contextmanager
def opened_sources(
    params: TriageParams, shared: SharedSources | None = None, deadline: float | None = None
) -> Iterator[tuple[ClusterSource, MetricsSource | None, Target, Window]]:
    """:func:`open_sources`, closing the sources' connections afterwards (``shared`` ones stay open)."""
    if shared is not None:
        yield shared.cluster, shared.metrics, params.target(), shared.window
        return
    cluster, metrics, target, window = open_sources(params, deadline)
    try:
        yield cluster, metrics, target, window
    finally:
        cluster.close()
        if metrics is not None:
            metrics.close()


@contextmanager
def _malformed_bundle(params: TriageParams) -> Iterator[None]:
    """Turn a crash on a hand-edited bundle into a one-line ``BundleError``.

    The bundle reader checks the fields every object has; a field deeper down with the wrong type (a
    list where the API server always writes an object) is only met while reading. Live answers come
    from the API server's schemas, so for them such an error stays a bug and is not caught here.
    """
    try:
        yield
    except (TypeError, AttributeError, KeyError, ValueError) as error:
        if not params.bundle:
            raise
        raise BundleError(
            f"bundle {params.bundle} holds an object with a field of the wrong type "
            f"({type(error).__name__}: {error}): was it edited by hand?"
        ) from None


def collect(
    params: TriageParams,
    progress: Progress | None = None,
    shared: SharedSources | None = None,
    deadline: float | None = None,
) -> Evidence:
    """Open the sources (unless ``shared``) and gather the evidence (shared by ``run`` and ``capture``)."""
    notify = progress or (lambda _event, _message: None)
    with opened_sources(params, shared, deadline) as (cluster, metrics, target, window), _malformed_bundle(params):
        return gather(
            cluster,
            metrics,
            target,
            window,
            observed_at_for(cluster, params, window),
            SiteConfig(
                kserve_namespace=params.kserve_namespace,
                knative_namespace=params.knative_namespace,
                client_timeout_seconds=params.client_timeout.total_seconds() if params.client_timeout else None,
            ),
            progress=lambda message: notify("gather", message),
        )


def run(
    params: TriageParams,
    progress: Progress | None = None,
    clock: Callable[[], datetime] | None = None,
    shared: SharedSources | None = None,
) -> TriageResult:
    """Triage one InferenceService: every step runs, whatever earlier steps found.

    ``shared``: read through sources the caller already opened (``fleet``) instead of opening new ones.
    """
    now = clock or (lambda: datetime.now(timezone.utc))
    incident = params.incident
    deadline = time.monotonic() + params.deadline.total_seconds() if params.deadline else None
    evidence = collect(params, progress, shared, deadline)
    ignored = ignored_codes(params, evidence)
    steps: list[StepResult] = []
    deadline_hit = False
    for step in STEPS:
        if deadline is not None and time.monotonic() > deadline:
            deadline_hit = True
            steps.append(StepResult(step.id, step.title, "error", "deadline reached before this step ran", 0.0))
            continue
        steps.append(run_step(step, check_for(step.id), evidence, progress, ignored))
    findings = [finding for step in steps for finding in step.findings]
    return TriageResult(
        evidence=evidence,
        steps=tuple(steps),
        findings=tuple(findings),
        root_causes=tuple(rank_root_causes(findings, STEP_IDS)),
        generated_at=now(),
        incident=incident,
        deadline_hit=deadline_hit,
    )
