"""``kserve-runbook fleet``: triage every InferenceService and LLMInferenceService of a namespace, or of the cluster (docs/contracts.md#execution-model, docs/contracts.md#cli).

One LIST per kind finds the services (per namespace, or cluster-wide with
``--all-namespaces``; see :mod:`nbhelpers.evidence.listing`). A kind whose CRD
is not installed is said in the coverage line, and the other kind is triaged.
Each service then goes through ``triage.run()``
in-process, over one API client and one Prometheus client, and gets
``<namespace>/<isvc>/findings.json`` and ``summary.md`` (an LLMInferenceService:
``<namespace>/_llmisvc/<name>/``, see :func:`service_folder`); with ``--notebooks``
the headless notebook run of ``triage`` writes those two and adds
``triage.ipynb`` and ``report.html`` (each notebook opens its own connections).

Reads that do not depend on the service are made once per fleet (see
:class:`SharedReads`). A service whose triage raises is recorded with status
``error`` and the reason, and the fleet goes on.

The index is ``fleet.json`` (schema ``kserve-runbook/fleet/v1``) and
``fleet.md``, both worst service first: critical findings, then services that
could not be triaged, then warnings, then the rest (a partial run before a
complete one). ``fleet.json`` holds ``scope``, ``window``, ``sources``, ``listing`` (what each
kind's LIST answered), ``totals`` and ``services``: one entry each with ``namespace``, ``isvc`` (the name),
``kind``,
``status`` (complete | partial | error), ``partial`` (true unless complete), ``reason`` (why it could
not be triaged), ``counts`` by severity, ``top_root_cause``, ``root_causes``,
``deployment_mode`` and ``path`` (its folder, relative to the index; null when
nothing was written). ``fleet.html`` is the same index as a sortable table that opens offline.

``--shard I/N`` (see :class:`Shard`) keeps the services whose stable hash falls in part ``I`` of
``N``, so N processes (an Indexed Job) together triage the fleet exactly once; ``fleet.json`` then
records ``shard`` (index, count, and how many services the scope listed). ``fleet merge``
(``nbhelpers.cli.fleet_merge``) joins the shards' folders into one index.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TypeVar

from nbhelpers import __version__
from nbhelpers.errors import ReadFailed, RunbookError
from nbhelpers.evidence.gather import require_isvc, require_llmisvc
from nbhelpers.evidence.listing import KindListed, Listing, list_targets
from nbhelpers.evidence.model import INFERENCE_SERVICE, LLM_INFERENCE_SERVICE, TARGET_KINDS, Target
from nbhelpers.render.findings_json import write_outputs
from nbhelpers.render.fleet_html import IndexRow, fleet_html
from nbhelpers.render.summary import utc_text, window_text
from nbhelpers.sources import kinds
from nbhelpers.sources.base import ClusterSource, LogRequest
from nbhelpers.sources.kinds import Kind
from nbhelpers.sources.kube import KubeObject
from nbhelpers.triage import SharedSources, TriageParams, open_live_sources, run
from nbhelpers.util.files import write_atomic
from nbhelpers.util.redaction import redact_text
from nbhelpers.util.safe_paths import child_path
from nbhelpers.util.times import Window, format_time

FLEET_SCHEMA_ID = "kserve-runbook/fleet/v1"
SEVERITIES = ("critical", "warning", "info")
MAX_LISTED = 8  # services named in one coverage note before "and N more"
MAX_SHARDS = 10_000
_TIERS = {"critical": 0, "error": 1, "warning": 2, "clean": 3}
# An LLMInferenceService's folder sits under this component of its namespace's folder. Kubernetes
# names never contain "_", so no InferenceService's folder (<namespace>/<name>) can be this one, and a
# service of each kind with the same name keeps its own files.
LLMISVC_FOLDER = "_llmisvc"
K = TypeVar("K")
V = TypeVar("V")


_SHARD_TEXT = re.compile(r"(\d{1,9})/(\d{1,9})")


def shard_of(namespace: str, name: str, count: int) -> int:
    """The part (0 to ``count`` - 1) a service belongs to: sha256 of ``namespace/name``, the same on
    every machine and in every process (Python's ``hash()`` of a string changes with each process)."""
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % count


@dataclass(frozen=True)
class Shard:
    """Part ``index`` of ``count``. The index counts from 0, like an Indexed Job's JOB_COMPLETION_INDEX
    (the control plane sets that variable in each pod's containers, kubernetes.io/docs/tasks/job/
    indexed-parallel-processing-static), so a Job passes ``--shard $(JOB_COMPLETION_INDEX)/N`` as it is."""

    index: int
    count: int

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"

    def owns(self, namespace: str, name: str) -> bool:
        return shard_of(namespace, name, self.count) == self.index

    def to_json(self) -> dict[str, int]:
        return {"index": self.index, "count": self.count}


def parse_shard(text: str) -> Shard | None:
    """``--shard I/N`` (``None`` when empty); anything else is a one-line ``RunbookError``."""
    if not text:
        return None
    match = _SHARD_TEXT.fullmatch(text.strip())
    if not match:
        shown = repr(text[:40])
        raise RunbookError(f"--shard takes I/N with 0 <= I < N, e.g. 0/4 (I counts from 0), not {shown}")
    index, count = int(match.group(1)), int(match.group(2))
    if not 1 <= count <= MAX_SHARDS:
        raise RunbookError(f"--shard {index}/{count}: N must be between 1 and {MAX_SHARDS}")
    if index >= count:
        raise RunbookError(f"--shard {index}/{count}: I counts from 0, so it must be below N (0 to {count - 1})")
    return Shard(index, count)


@dataclass(frozen=True)
class FleetRequest:
    """What to triage and where to write: ``triage`` carries the live options and the window."""

    triage: TriageParams
    all_namespaces: bool = False
    out: str = ""
    notebooks: bool = False
    progress: Callable[[str], None] | None = None
    shard: Shard | None = None

    @property
    def scope_label(self) -> str:
        scope = "all namespaces" if self.all_namespaces else f"namespace {self.triage.namespace}"
        return scope if self.shard is None else f"{scope}, shard {self.shard.label}"


def check_request(request: FleetRequest) -> None:
    """Refuse contradictory or missing options before anything is opened (``RunbookError``)."""
    params = request.triage
    if params.isvc or params.llmisvc:
        option = "--isvc" if params.isvc else "--llmisvc"
        raise RunbookError(f"fleet triages every service in its scope: drop {option} (or use triage for one)")
    if params.namespace and request.all_namespaces:
        raise RunbookError("--namespace and --all-namespaces exclude each other: pass one")
    if not params.namespace and not request.all_namespaces:
        raise RunbookError("pass --namespace NS, or --all-namespaces for every namespace")
    out = Path(request.out) if request.out else None
    if out is not None and out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise RunbookError(f"--out {out} exists and is not empty: choose a new folder")


# ------------------------------------------------------------------------------------------ shared reads


def _remembered(store: dict[K, V | ReadFailed], key: K, read: Callable[[], V]) -> V:
    """``read()`` once per key; a failure is remembered and raised again as a fresh ``ReadFailed``."""
    if key not in store:
        try:
            store[key] = read()
        except ReadFailed as failure:
            store[key] = failure
    value = store[key]
    if isinstance(value, ReadFailed):
        raise ReadFailed(value.what, value.status, value.reason)
    return value


class SharedReads:
    """A :class:`~nbhelpers.sources.base.ClusterSource` that answers a repeated read from memory.

    Triage asks the same questions for every service: the nodes, the APIServices, KServe's and
    Knative's config maps, API discovery, and, for services of one namespace, the same namespace-wide
    lists (Services, Endpoints, HTTPRoutes, events ...). A fleet reads each of those once. Lists by a
    service's label are asked once anyway. Passed through every time: logs, and the GET of an
    InferenceService or LLMInferenceService (the freshest state; a service deleted since the fleet
    listed it is reported as such). A failed read is remembered too, so a forbidden or slow kind costs
    one request per fleet, not one per service.

    Objects are shared between services: callers must not modify them (``gather()`` only reads what a
    source returns and redacts it into copies before any check sees it).
    """

    def __init__(self, cluster: ClusterSource) -> None:
        self.mode = cluster.mode
        self.parallel_reads = 1  # the memo below is shared by every read: one at a time
        self._cluster = cluster
        self._lists: dict[tuple[Kind, str | None, str | None], list[KubeObject] | ReadFailed] = {}
        self._gets: dict[tuple[Kind, str | None, str], KubeObject | ReadFailed | None] = {}
        self._version: dict[str, str | ReadFailed | None] = {}

    def server_version(self) -> str | None:
        return _remembered(self._version, "version", self._cluster.server_version)

    def list(self, kind: Kind, namespace: str | None, label_selector: str | None = None) -> list[KubeObject]:
        key = (kind, namespace, label_selector)
        found = _remembered(self._lists, key, lambda: self._cluster.list(kind, namespace, label_selector))
        return [*found]

    def get(self, kind: Kind, namespace: str | None, name: str) -> KubeObject | None:
        if kind in (kinds.INFERENCE_SERVICE, kinds.LLM_INFERENCE_SERVICE):
            return self._cluster.get(kind, namespace, name)
        return _remembered(self._gets, (kind, namespace, name), lambda: self._cluster.get(kind, namespace, name))

    def logs(self, request: LogRequest) -> str:
        return self._cluster.logs(request)

    def release(self, namespace: str) -> None:
        """Forget what was read in ``namespace`` once its services are done (memory stays flat)."""
        self._lists = {key: value for key, value in self._lists.items() if key[1] != namespace}
        self._gets = {key: value for key, value in self._gets.items() if key[1] != namespace}

    def close(self) -> None:
        self._cluster.close()


def list_services(cluster: ClusterSource, namespace: str | None) -> Listing:
    """Every InferenceService and LLMInferenceService in ``namespace`` (``None``: all), sorted; one LIST per kind.

    ``RunbookError`` when the fleet cannot run: the cluster cannot be reached, the InferenceServices
    cannot be listed (fatal, as it always was), neither CRD is installed, or nothing is found. An
    LLMInferenceService LIST that fails while InferenceServices were listed is not fatal (a role bound
    before that kind existed may lack it): :func:`listing_gaps` says it in the coverage line.
    """
    where = f"in namespace {namespace!r}" if namespace else "in any namespace"
    listing = list_targets(cluster, namespace)
    isvcs, llmisvcs = listing.of(INFERENCE_SERVICE), listing.of(LLM_INFERENCE_SERVICE)
    for listed in (isvcs, llmisvcs):
        if listed.status in ("unreachable", "timeout"):
            raise RunbookError(listed.reason)
    if not isvcs.installed and not llmisvcs.installed:
        raise RunbookError(
            "the InferenceService CRD (serving.kserve.io) is not installed in this cluster, nor the LLMInferenceService CRD"
        )
    for listed in (isvcs, llmisvcs) if not isvcs.installed else (isvcs,):
        if listed.failed:
            raise RunbookError(f"cannot list {listed.kind}s {where}: {listed.reason}")
    if not listing.targets:
        hint = "" if namespace is None else " (--all-namespaces looks everywhere)"
        looked = " or ".join(listed.kind for listed in listing.kinds if listed.status == "ok")
        aside = "".join(f" ({note})" for note in listing_facts(listing.kinds) + listing_gaps(listing.kinds))
        raise RunbookError(f"no {looked} {where}{aside}: nothing to triage{hint}")
    return listing


def listing_facts(listed: tuple[KindListed, ...]) -> list[str]:
    """What the listing says about the cluster's setup: a kind whose CRD is not installed (not a gap)."""
    return [f"the {item.kind} CRD is not installed, so none was listed" for item in listed if not item.installed]


def listing_gaps(listed: tuple[KindListed, ...]) -> list[str]:
    """Kinds whose LIST failed: services of that kind may exist that this fleet did not see."""
    return [f"{item.kind}s could not be listed ({item.status}: {item.reason})" for item in listed if item.failed]


def service_folder(fleet_dir: Path, target: Target) -> Path:
    """Where a service's files go: ``<namespace>/<name>`` for an InferenceService (as always),
    ``<namespace>/_llmisvc/<name>`` for an LLMInferenceService (docs/contracts.md#output-folder)."""
    if target.is_llmisvc:
        return child_path(fleet_dir, target.namespace, LLMISVC_FOLDER, target.isvc)
    return child_path(fleet_dir, target.namespace, target.isvc)  # names from the cluster: safe components


# ------------------------------------------------------------------------------------------ one service


@dataclass(frozen=True)
class ServiceEntry:
    """One service's line in the fleet index."""

    namespace: str
    isvc: str  # the service's name, whichever its kind (as in findings.json's target)
    status: str  # complete | partial | error
    reason: str = ""  # why it could not be triaged (status error)
    counts: Mapping[str, int] = field(default_factory=lambda: dict.fromkeys(SEVERITIES, 0))
    root_causes: tuple[str, ...] = ()
    deployment_mode: str = "unknown"
    path: str | None = None  # the service's folder relative to the fleet folder; None when nothing was written
    kind: str = INFERENCE_SERVICE  # or LLMInferenceService

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.isvc}"

    @property
    def label(self) -> str:
        """``ref`` for people: an LLMInferenceService says so (one of each kind may share a name)."""
        return self.ref if self.kind == INFERENCE_SERVICE else f"{self.ref} ({self.kind})"

    @property
    def target(self) -> Target:
        return Target(self.namespace, self.isvc, self.kind)

    @property
    def partial(self) -> bool:
        return self.status != "complete"

    @property
    def tier(self) -> str:
        """critical | error | warning | clean: the order of the index."""
        if self.counts["critical"]:
            return "critical"
        if self.status == "error":
            return "error"
        return "warning" if self.counts["warning"] else "clean"

    def sort_key(self) -> tuple[int, int, int, bool, str, str, int]:
        """Worst first; among equals a partial run before a complete one, then by name."""
        return (
            _TIERS[self.tier],
            -self.counts["critical"],
            -self.counts["warning"],
            not self.partial,
            self.namespace,
            self.isvc,
            TARGET_KINDS.index(self.kind) if self.kind in TARGET_KINDS else len(TARGET_KINDS),
        )

    def headline(self) -> str:
        if self.status == "error":
            return f"error: {self.reason}"
        counted = ", ".join(f"{self.counts[level]} {level}" for level in ("critical", "warning") if self.counts[level])
        text = counted or "no critical or warning finding"
        if self.root_causes:
            text += f"; top root cause {self.root_causes[0]}"
        return text + (" (partial)" if self.partial else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "isvc": self.isvc,
            "kind": self.kind,
            "status": self.status,
            "partial": self.partial,
            "reason": self.reason,
            "counts": dict(self.counts),
            "top_root_cause": self.root_causes[0] if self.root_causes else None,
            "root_causes": list(self.root_causes),
            "deployment_mode": self.deployment_mode,
            "path": self.path,
        }


def entry_from_findings(document: Mapping[str, Any], path: str) -> ServiceEntry:
    """The index entry of a written ``findings.json`` document."""
    counts = dict.fromkeys(SEVERITIES, 0)
    for finding in document.get("findings") or []:
        counts[str(finding["severity"])] += 1
    target = document.get("target") or {}
    return ServiceEntry(
        namespace=str(target.get("namespace")),
        isvc=str(target.get("isvc")),
        status="partial" if document.get("partial") else "complete",
        counts=counts,
        root_causes=tuple(document.get("root_causes") or ()),
        deployment_mode=str(target.get("deployment_mode") or "unknown"),
        path=path,
        kind=str(target.get("kind") or INFERENCE_SERVICE),
    )


def _failure_reason(error: Exception) -> str:
    text = " ".join(redact_text(str(error)).split())
    return text if isinstance(error, RunbookError) else f"{type(error).__name__}: {text}"


def triage_service(
    request: FleetRequest, shared: SharedSources, target: Target, fleet_dir: Path, seconds_left: float | None = None
) -> ServiceEntry:
    """Triage one service into its :func:`service_folder`; an exception becomes an ``error`` entry.

    ``seconds_left``: what remains of the fleet's ``--deadline``; it becomes this service's own deadline.
    """
    folder = service_folder(fleet_dir, target)
    relative = folder.relative_to(fleet_dir).as_posix()
    window = shared.window
    params = replace(
        request.triage,
        namespace=target.namespace,
        isvc="" if target.is_llmisvc else target.isvc,
        llmisvc=target.isvc if target.is_llmisvc else "",
        since=None,
        start=window.start.replace(microsecond=0),  # every service, and every notebook, sees the same window
        end=window.end.replace(microsecond=0),
        deadline=None if seconds_left is None else timedelta(seconds=round(seconds_left, 3)),
    )
    try:
        if request.notebooks:
            document = _run_notebook(params, folder, shared.cluster)
        else:
            result = run(params, shared=shared)
            write_outputs(result, folder)
            document = result.to_json()
    except Exception as error:  # one service's failure must not stop the fleet
        written = folder.is_dir() and any(folder.iterdir())
        if folder.is_dir() and not written:
            folder.rmdir()
        return ServiceEntry(
            target.namespace,
            target.isvc,
            "error",
            _failure_reason(error),
            path=relative if written else None,
            kind=target.kind,
        )
    return entry_from_findings(document, relative)


def _run_notebook(params: TriageParams, folder: Path, cluster: ClusterSource) -> dict[str, Any]:
    """The headless path of ``triage`` (papermill, nbconvert) into ``folder``; its findings.json document."""
    from nbhelpers.cli import headless

    target = params.target()
    require = require_llmisvc if target.is_llmisvc else require_isvc
    require(cluster, target)  # as triage's preflight: fail before a kernel starts
    folder.mkdir(parents=True, exist_ok=True)
    return headless.execute(params, folder, show_progress=False).findings


# ----------------------------------------------------------------------------------------------- fleet


@dataclass(frozen=True)
class FleetResult:
    out_dir: Path
    scope: str  # "all namespaces" | "namespace NS"
    all_namespaces: bool
    namespace: str
    window: Window
    sources: Mapping[str, str]
    generated_at: datetime
    entries: tuple[ServiceEntry, ...]  # worst first
    notebooks: bool = False
    shard: Shard | None = None
    listed: int = 0  # services in the scope before sharding
    caveats: tuple[str, ...] = ()  # what else the coverage line must say (fleet merge: missing shards ...)
    listing: tuple[KindListed, ...] = ()  # what each kind's LIST answered (empty: not recorded)
    extra: Mapping[str, Any] = field(default_factory=dict)  # more top-level keys of fleet.json (fleet merge)

    @property
    def has_critical(self) -> bool:
        return any(entry.counts["critical"] for entry in self.entries)

    @property
    def exit_code(self) -> int:
        """1 when a service has a critical finding; 2 when no service could be triaged at all."""
        if self.entries and all(entry.status == "error" for entry in self.entries):
            return 2
        return 1 if self.has_critical else 0

    @property
    def gaps(self) -> tuple[str, ...]:
        """What the index could not cover beyond its services: kinds not listed, merge caveats."""
        return (*listing_gaps(self.listing), *self.caveats)

    def totals(self) -> dict[str, int]:
        totals = {"services": len(self.entries), **dict.fromkeys(_TIERS, 0), "partial": 0}
        for entry in self.entries:
            totals[entry.tier] += 1
            totals["partial"] += entry.status == "partial"
        return totals

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": FLEET_SCHEMA_ID,
            "tool_version": __version__,
            "generated_at": format_time(self.generated_at),
            "scope": {"all_namespaces": self.all_namespaces, "namespace": self.namespace or None},
            "window": self.window.to_json(),
            "sources": dict(self.sources),
            "shard": None if self.shard is None else {**self.shard.to_json(), "listed": self.listed},
            "listing": [listed.to_json() for listed in self.listing],
            **self.extra,
            "totals": self.totals(),
            "services": [entry.to_json() for entry in self.entries],
        }


def run_fleet(request: FleetRequest, clock: Callable[[], datetime] | None = None) -> FleetResult:
    """List the services once, triage each one, write the index. ``RunbookError`` when it cannot run at all."""
    check_request(request)
    now = clock or (lambda: datetime.now(timezone.utc))
    notify = request.progress or (lambda _message: None)
    budget = request.triage.deadline.total_seconds() if request.triage.deadline else None
    deadline = time.monotonic() + budget if budget is not None else None
    opened = open_live_sources(request.triage, deadline)
    cluster = SharedReads(opened.cluster)
    shared = SharedSources(cluster, opened.metrics, opened.window)
    try:
        listing = list_services(cluster, None if request.all_namespaces else request.triage.namespace)
        shard = request.shard
        services = [target for target in listing.targets if shard is None or shard.owns(target.namespace, target.isvc)]
        out_dir = _output_dir(request, now())
        notify(f"fleet: {_counted(services)} in {request.scope_label} -> {out_dir}")
        for note in listing_facts(listing.kinds) + listing_gaps(listing.kinds):
            notify(f"fleet: {note}")
        entries: list[ServiceEntry] = []
        for index, target in enumerate(services):
            seconds_left = None if deadline is None else deadline - time.monotonic()
            if seconds_left is not None and seconds_left <= 0:
                given = request.triage.to_text()["deadline"]
                reason = f"not triaged: --deadline {given} was reached before its turn"
                entry = ServiceEntry(target.namespace, target.isvc, "error", reason, kind=target.kind)
            else:
                entry = triage_service(request, shared, target, out_dir, seconds_left)
            entries.append(entry)
            notify(f"[{index + 1}/{len(services)}] {entry.label}: {entry.headline()}")
            if index + 1 == len(services) or services[index + 1].namespace != target.namespace:
                cluster.release(target.namespace)
    finally:
        cluster.close()
        if opened.metrics is not None:
            opened.metrics.close()
    result = FleetResult(
        out_dir=out_dir,
        scope=request.scope_label,
        all_namespaces=request.all_namespaces,
        namespace=request.triage.namespace,
        window=opened.window,
        sources={"cluster": cluster.mode, "prometheus": opened.metrics.mode if opened.metrics else "none"},
        generated_at=now(),
        entries=tuple(sorted(entries, key=ServiceEntry.sort_key)),
        notebooks=request.notebooks,
        shard=request.shard,
        listed=len(listing.targets),
        listing=listing.kinds,
    )
    write_index(result)
    return result


def _counted(targets: list[Target]) -> str:
    """``3 InferenceService(s)``, or ``3 InferenceService(s) and 1 LLMInferenceService(s)``."""
    counts = {kind: sum(1 for target in targets if target.kind == kind) for kind in TARGET_KINDS}
    shown = [f"{count} {kind}(s)" for kind, count in counts.items() if count or kind == INFERENCE_SERVICE]
    return " and ".join(shown)


def _output_dir(request: FleetRequest, now: datetime) -> Path:
    """``--out``, or ``outputs/<UTC timestamp>-fleet-<namespace|all>/`` (docs/contracts.md#output-folder)."""
    from nbhelpers.cli import headless

    # headless names its folders <stamp>-<namespace>-<isvc>: here the two slots read "fleet" and the scope.
    scope = "all" if request.all_namespaces else request.triage.namespace
    if request.shard is not None:
        scope += f"-shard-{request.shard.index}-of-{request.shard.count}"
    return headless.output_dir(request.out or None, Target("fleet", scope), now)


# ----------------------------------------------------------------------------------------------- index


def write_index(result: FleetResult) -> dict[str, Path]:
    """fleet.json, fleet.md and fleet.html, atomically; all are rendered before any is written."""
    rendered = {
        "fleet.json": (json.dumps(result.to_json(), indent=2, ensure_ascii=False) + "\n").encode(),
        "fleet.md": fleet_markdown(result).encode(),
        "fleet.html": fleet_html_page(result).encode(),
    }
    return {name: write_atomic(result.out_dir / name, content) for name, content in rendered.items()}


def _named(entries: list[ServiceEntry], describe: Callable[[ServiceEntry], str]) -> str:
    shown = ", ".join(describe(entry) for entry in entries[:MAX_LISTED])
    more = len(entries) - MAX_LISTED
    return shown + (f" and {more} more" if more > 0 else "")


def coverage_caveat(result: FleetResult) -> str:
    """What the fleet could not see: services not triaged, partial runs, no metrics."""
    notes = []
    errors = [entry for entry in result.entries if entry.status == "error"]
    partial = [entry for entry in result.entries if entry.status == "partial"]
    total = len(result.entries)
    if errors:
        notes.append(
            f"{len(errors)} of {total} could not be triaged: "
            + _named(errors, lambda entry: f"{entry.label} ({entry.reason})")
        )
    if partial:
        notes.append(
            f"{len(partial)} of {total} ran with reads missing (partial): "
            + _named(partial, lambda entry: entry.label)
            + "; each one's summary.md opens with what it could not see"
        )
    if result.sources.get("prometheus") == "none":
        notes.append("no Prometheus configured (--prometheus), so nothing was judged from metrics")
    notes += result.gaps
    facts = listing_facts(result.listing)
    if not notes:
        return "Coverage: every service was triaged and every read succeeded" + "".join(f"; {f}" for f in facts) + "."
    return "Coverage: could not see everything: " + "; ".join(notes + facts) + "."


def _cell(text: str) -> str:
    """Text as one Markdown table cell: one line, no column break, no raw HTML (names and reasons come from outside)."""
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _links(entry: ServiceEntry, notebooks: bool) -> list[tuple[str, str]]:
    """(label, path relative to the index) of a service's files; none for a service not triaged."""
    if entry.path is None or entry.status == "error":
        return []
    links = [("summary", f"{entry.path}/summary.md"), ("findings", f"{entry.path}/findings.json")]
    if notebooks:
        links.append(("report", f"{entry.path}/report.html"))
    return links


def _run_text(entry: ServiceEntry) -> str:
    if entry.status == "error":
        return f"error: {entry.reason}"
    return "partial" if entry.partial else "complete"


def _row(position: int, entry: ServiceEntry, notebooks: bool) -> str:
    if entry.status == "error":
        run_cell = f"**error**: {_cell(entry.reason)}"
    else:
        run_cell = "**partial**" if entry.partial else "complete"
    links = [f"[{label}]({path})" for label, path in _links(entry, notebooks)]
    counts = [str(entry.counts[level]) if entry.status != "error" else "–" for level in SEVERITIES]
    top = f"`{_cell(entry.root_causes[0]).replace('`', '')}`" if entry.root_causes else "–"
    cells = [
        str(position),
        _cell(entry.ref),
        _cell(entry.kind),
        _cell(entry.deployment_mode),
        *counts,
        top,
        run_cell,
        " · ".join(links) or "–",
    ]
    return "| " + " | ".join(cells) + " |"


def _facts(result: FleetResult) -> list[str]:
    """The lines under the title: totals, window, sources, time."""
    totals = result.totals()
    return [
        f"{service_count(result)}: {totals['critical']} with critical findings, "
        f"{totals['error']} not triaged, {totals['warning']} with warnings only, {totals['clean']} with neither "
        f"({totals['partial']} partial).",
        f"Window: {window_text(result.window)}",
        f"Sources: cluster {result.sources.get('cluster')}, metrics {result.sources.get('prometheus')}",
        f"Generated: {utc_text(result.generated_at)}",
    ]


def service_count(result: FleetResult) -> str:
    """``4 InferenceService(s)``, or with LLMInferenceServices ``5 service(s) (4 InferenceService, 1 LLMInferenceService)``."""
    counts = {kind: sum(1 for entry in result.entries if entry.kind == kind) for kind in TARGET_KINDS}
    if not counts[LLM_INFERENCE_SERVICE]:
        return f"{len(result.entries)} InferenceService(s)"
    split = ", ".join(f"{count} {kind}" for kind, count in counts.items())
    return f"{len(result.entries)} service(s) ({split})"


def fleet_html_page(result: FleetResult) -> str:
    """fleet.html: the same rows as fleet.md in a table that sorts by any column, offline."""
    rows = [
        IndexRow(
            service=entry.ref,
            kind=entry.kind,
            mode=entry.deployment_mode,
            counts=None
            if entry.status == "error"
            else (entry.counts["critical"], entry.counts["warning"], entry.counts["info"]),
            top_cause=entry.root_causes[0] if entry.root_causes else "",
            run=_run_text(entry),
            tier=entry.tier,
            links=tuple(_links(entry, result.notebooks)),
        )
        for entry in result.entries
    ]
    return fleet_html(f"Fleet triage: {result.scope}", coverage_caveat(result), _facts(result), rows)


def fleet_markdown(result: FleetResult) -> str:
    """The fleet index for people: the coverage caveat, the totals, one row per service, worst first."""
    summary, *facts = _facts(result)
    lines = [f"# Fleet triage: {_cell(result.scope)}", "", f"_{_cell(coverage_caveat(result))}_", ""]
    lines += [
        summary,
        "",
        *(f"- {fact}" for fact in facts),
        "",
        "| # | service | kind | mode | critical | warning | info | top root cause | run | files |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_row(position, entry, result.notebooks) for position, entry in enumerate(result.entries, 1)]
    lines += [
        "",
        "Each service's folder holds `findings.json` (schema `kserve-runbook/findings/v1`), "
        + ("`summary.md`, `triage.ipynb` and `report.html`." if result.notebooks else "and `summary.md`."),
    ]
    return "\n".join(lines) + "\n"
