"""``gather()``: one pass that reads everything the checks need into :class:`Evidence`.

Reads are few and batched: one list per kind per namespace (label selectors
where the label is reliable), single GETs for named config maps and gateways,
and logs of at most three predictor pods. Every read that fails is recorded as
a :class:`ReadRecord` and the pass goes on; checks turn the missing pieces into
``EvidenceMissing`` or ``StepSkipped``.

Checks never read the clock: they use ``Evidence.observed_at``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property

from nbhelpers.metrics.series import MetricData
from nbhelpers.sources import kinds, kube
from nbhelpers.sources.kube import KubeObject
from nbhelpers.util.times import Window

INFERENCE_SERVICE = "InferenceService"
LLM_INFERENCE_SERVICE = "LLMInferenceService"
TARGET_KINDS = (INFERENCE_SERVICE, LLM_INFERENCE_SERVICE)


@dataclass(frozen=True)
class Target:
    """The service being triaged. ``isvc`` is its name, whichever ``kind`` it is (the field predates
    LLMInferenceService and is part of the findings.json and bundle contracts)."""

    namespace: str
    isvc: str
    kind: str = INFERENCE_SERVICE

    @property
    def is_llmisvc(self) -> bool:
        return self.kind == LLM_INFERENCE_SERVICE

    @property
    def pods_noun(self) -> str:
        """What the report calls the serving pods: KServe's predictor, or the llm-d stack's vLLM workload."""
        return "vLLM pods" if self.is_llmisvc else "predictor pods"

    @property
    def pod_prefix(self) -> str:
        """The name prefix every serving pod shares (``<name>-kserve-`` for KServe's llm-d workloads)."""
        return f"{self.isvc}-kserve-" if self.is_llmisvc else f"{self.isvc}-predictor-"


@dataclass(frozen=True)
class SiteConfig:
    """Where cluster-wide configuration lives (installation-specific namespaces)."""

    kserve_namespace: str = "kserve"
    knative_namespace: str = "knative-serving"
    client_timeout_seconds: float | None = None  # the callers' own timeout, when the user states it
    log_tail_lines: int = 5000
    log_limit_bytes: int = 4 * 1024 * 1024


@dataclass(frozen=True)
class ReadRecord:
    """The outcome of one read: ``status`` is ``ok`` or a :class:`ReadFailed` status."""

    what: str
    status: str
    reason: str = ""

    @property
    def lost(self) -> bool:
        """True when this read failed, so the run saw less than it should (the result is partial).

        A source that is not configured (``skipped``), an API group that is
        not installed (``not_installed``) or a Prometheus that answered with no
        series at all (``empty``) is a fact about the setup, not a loss; the
        coverage line still names it.
        """
        return self.status not in ("ok", "skipped", "not_installed", "empty")


@dataclass(frozen=True)
class ContainerLog:
    namespace: str
    pod: str
    container: str
    previous: bool
    text: str

    @property
    def file_name(self) -> str:
        return f"{self.container}.previous.log" if self.previous else f"{self.container}.log"


@dataclass(frozen=True)
class Evidence:
    """Everything the checks may look at for one InferenceService, read once."""

    target: Target
    window: Window
    observed_at: datetime
    isvc: KubeObject
    deployment_mode: str
    deployment_mode_raw: str
    objects: Mapping[str, tuple[KubeObject, ...]]
    events: tuple[KubeObject, ...]
    logs: tuple[ContainerLog, ...]
    metrics: Mapping[str, MetricData]
    reads: tuple[ReadRecord, ...]
    versions: Mapping[str, str]
    sources: Mapping[str, str]
    site: SiteConfig = SiteConfig()

    def of(self, kind: kinds.Kind) -> tuple[KubeObject, ...]:
        """Objects of one kind (empty when none exist or the read failed: see :meth:`failure`)."""
        return self.objects.get(kind.key, ())

    def failure(self, what: str) -> ReadRecord | None:
        """The first read record not ``ok`` whose ``what`` starts with ``what`` (not installed included)."""
        for record in self.reads:
            if record.status != "ok" and record.what.startswith(what):
                return record
        return None

    def failures(self) -> tuple[ReadRecord, ...]:
        """Reads that failed (see :attr:`ReadRecord.lost`)."""
        return tuple(record for record in self.reads if record.lost)

    def not_seen(self) -> tuple[ReadRecord, ...]:
        """Reads that failed or were skipped: the coverage line reports these."""
        return tuple(record for record in self.reads if record.status != "ok")

    def config_map(self, namespace: str, name: str) -> KubeObject | None:
        for config in self.of(kinds.CONFIG_MAP):
            if kube.namespace(config) == namespace and kube.name(config) == name:
                return config
        return None

    def logs_of(self, pod: str) -> tuple[ContainerLog, ...]:
        return tuple(log for log in self.logs if log.pod == pod)

    def events_about(self, kind: str, name: str) -> tuple[KubeObject, ...]:
        """The window's events whose involved object is ``kind/name``: one lookup, for checks that loop
        over every pod (a scan of all events per pod is quadratic on large namespaces)."""
        return self._events_by_object.get((kind, name), ())

    @cached_property
    def _events_by_object(self) -> dict[tuple[str, str], tuple[KubeObject, ...]]:
        index: dict[tuple[str, str], list[KubeObject]] = {}
        for event in self.events:
            involved = event.get("involvedObject") or event.get("regarding") or {}
            key = (str(involved.get("kind") or "Pod"), str(involved.get("name") or ""))
            index.setdefault(key, []).append(event)
        return {key: tuple(events) for key, events in index.items()}
