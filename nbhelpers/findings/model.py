"""Findings, the code catalog (DESIGN §4.4) and root-cause ranking (§4.3).

Every finding's code comes from :data:`CATALOG`; its default severity, step and
reference text live there, so ``kserve-runbook codes`` and the docs are
generated from one place. :data:`CAUSE_EDGES` is the cause graph: an edge
``A -> B`` says "A, when present, explains B", and ranking puts A first.
"""

from __future__ import annotations

import enum
import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nbhelpers.findings.patches import PatchPlan


class Severity(str, enum.Enum):
    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"critical": 0, "warning": 1, "info": 2}[self.value]


@dataclass(frozen=True)
class CodeInfo:
    code: str
    step: str
    severity: Severity
    meaning: str
    reference: str


_SEVERITY_LETTERS = {"C": Severity.CRITICAL, "W": Severity.WARNING, "I": Severity.INFO}


def _c(code: str, step: str, sev: str, meaning: str, reference: str) -> CodeInfo:
    return CodeInfo(code, step, _SEVERITY_LETTERS[sev], meaning, reference)


CATALOG: dict[str, CodeInfo] = {
    info.code: info
    for info in (
        _c(
            "ISVC_NOT_READY",
            "endpoints",
            "C",
            "InferenceService Ready, PredictorReady or IngressReady is false",
            "KServe reports the service as not ready; the condition's reason and message say which layer "
            "gave up. Clients see 503 until it turns ready. Usually an effect: look for the cause below it.",
        ),
        _c(
            "ENDPOINTS_NONE_READY",
            "endpoints",
            "C",
            "no ready address behind the serving path",
            "The Service that receives traffic has no ready pod address, so the mesh or kube-proxy has nowhere "
            "to send requests (503 'no healthy upstream'). Find out why the pods are not ready: probes, ports, "
            "resources, a crashing engine.",
        ),
        _c(
            "ENDPOINTS_SELECTOR_MISMATCH",
            "endpoints",
            "C",
            "a Service selector matches no pod",
            "A Service whose selector matches none of the predictor pods never gets endpoints, even when every "
            "pod is healthy.",
        ),
        _c(
            "ROUTING_REVISION_NOT_READY",
            "endpoints",
            "C",
            "Knative Service or Revision not ready",
            "Knative will not route to a revision that is not ready; its condition reason (for example "
            "ProgressDeadlineExceeded or ContainerMissing) names the failing stage.",
        ),
        _c(
            "ROUTING_LAYER_MISMATCH",
            "endpoints",
            "C",
            "deployment mode and installed routing layer disagree",
            "The InferenceService asks for a routing layer (Knative, Istio VirtualService, Gateway API HTTPRoute, "
            "Ingress) that is not installed or not created, so requests never reach the pods although they are "
            "ready.",
        ),
        _c(
            "ROUTING_HOST_MISMATCH",
            "endpoints",
            "C",
            "route hosts or gateway do not match the URL clients call",
            "The gateway only forwards requests whose Host header matches a route; a route for another host or "
            "gateway leaves the service's URL unanswered (404 or 503 at the edge).",
        ),
        _c(
            "PROBE_READINESS_MISSING",
            "probes",
            "W",
            "no readiness probe",
            "Without a readiness probe a pod counts as ready as soon as its process starts, so requests reach a "
            "model that is still loading and fail.",
        ),
        _c(
            "PROBE_LIVENESS_KILLS_DURING_LOAD",
            "probes",
            "C",
            "liveness/startup budget shorter than the model load",
            "The kubelet restarts the container before the weights finish loading; every restart starts the load "
            "again, so the pod never serves.",
        ),
        _c(
            "PROBE_STARTUP_BUDGET_SHORT",
            "probes",
            "W",
            "startup/readiness budget shorter than the load time",
            "The probe budget is below the observed or estimated load time: it works today only by luck of a warm "
            "cache or a fast node.",
        ),
        _c(
            "PROBE_NOT_MODEL_AWARE",
            "probes",
            "W",
            "probe cannot tell a loaded, healthy engine",
            "The probe checks something other than the inference engine (another process, path, port or a "
            "sidecar), so a pod can be 'ready' while vLLM cannot answer.",
        ),
        _c(
            "PROBE_LOAD_TIME_UNKNOWN",
            "probes",
            "I",
            "the model's load time could not be measured or estimated",
            "No run in the window shows how long the model takes to load and no model size is visible, so the "
            "probe budgets could not be compared with the load. Not a problem by itself: a gap in what was seen.",
        ),
        _c(
            "PORT_MISMATCH",
            "ports",
            "C",
            "listening port, containerPort, targetPort or probe port disagree",
            "Traffic and probes go to a port the server does not listen on: connections are refused, readiness "
            "never passes, and the Service has no ready endpoints.",
        ),
        _c(
            "RESOURCES_REQUESTS_MISSING",
            "resources",
            "W",
            "requests missing where they matter",
            "Without a memory request the scheduler may pack the pod onto a node that cannot hold the model; "
            "under a CPU-utilization HPA, a container without a cpu request makes utilization uncomputable.",
        ),
        _c(
            "RESOURCES_GPU_UNSCHEDULABLE",
            "resources",
            "C",
            "pods Pending for lack of GPUs or another resource",
            "No node can satisfy the pod's requests, so the new replica never starts.",
        ),
        _c(
            "RESOURCES_HOST_OOMKILLED",
            "resources",
            "C",
            "container OOMKilled by its host memory limit",
            "The kernel killed the container for exceeding its memory limit (host RAM, not GPU memory); loading "
            "weights through CPU memory is the usual moment.",
        ),
        _c(
            "RESOURCES_GPU_NOT_VISIBLE",
            "resources",
            "C",
            "GPU not requested or not visible in the container",
            "vLLM cannot find a CUDA device, so the engine fails at start.",
        ),
        _c(
            "RESOURCES_SHM_MISSING",
            "resources",
            "W",
            "tensor parallel without a memory-backed /dev/shm",
            "NCCL between GPU workers needs a large shared memory segment; the 64 MiB default crashes or "
            "stalls tensor-parallel engines.",
        ),
        _c(
            "COLDSTART_SCALE_TO_ZERO",
            "cold_start",
            "W",
            "scale-to-zero on a model with a long load",
            "The first request after an idle period waits for a GPU node, an image pull and the weight load; for "
            "an LLM that is minutes, longer than most client and gateway timeouts.",
        ),
        _c(
            "COLDSTART_EXCEEDS_TIMEOUT",
            "cold_start",
            "C",
            "cold start longer than a request or progress timeout",
            "A request that arrives while no replica is ready waits for the cold start and is cut by the timeout "
            "before the pod is ready.",
        ),
        _c(
            "COLDSTART_CHURN",
            "cold_start",
            "W",
            "repeated scale-down and scale-up cycles",
            "Replicas are removed and added again within the window; each new one pays the full cold start.",
        ),
        _c(
            "HPA_METRICS_API_UNAVAILABLE",
            "metric_pipeline",
            "C",
            "a metrics APIService is missing or not Available",
            "The HPA reads its metric through an aggregated API; when that API is missing or down it cannot "
            "compute a desired replica count and does not scale.",
        ),
        _c(
            "HPA_METRIC_FETCH_FAILED",
            "metric_pipeline",
            "C",
            "the HPA cannot fetch its metric",
            "ScalingActive=False or FailedGet*Metric events: the autoscaler is blind and holds the replica count.",
        ),
        _c(
            "HPA_METRIC_SERIES_MISSING",
            "metric_pipeline",
            "W",
            "no Prometheus series for the HPA's metric",
            "The adapter can only serve a metric for which Prometheus has series labelled with the pods' "
            "namespace and pod; a missing or mislabelled series leaves the HPA without data.",
        ),
        _c(
            "HPA_METRICS_API_CONFLICT",
            "metric_pipeline",
            "W",
            "two providers claim the same metrics API",
            "Only one APIService can own a metrics API group version; the other provider's metrics vanish.",
        ),
        _c(
            "HPA_MISSING",
            "scale_target",
            "W",
            "autoscaling expected but no HPA targets the predictor",
            "The service is configured to autoscale with an HPA, but none exists for the predictor, so it runs at "
            "a fixed replica count.",
        ),
        _c(
            "HPA_TARGET_NOT_FOUND",
            "scale_target",
            "C",
            "scaleTargetRef names a missing workload",
            "The HPA points at a Deployment that does not exist and can never scale anything.",
        ),
        _c(
            "HPA_TARGET_NOT_SERVING",
            "scale_target",
            "C",
            "the scaled workload is not the one serving traffic",
            "The HPA scales a workload whose pods are not behind the serving Service; traffic does not move.",
        ),
        _c(
            "HPA_CONFLICT",
            "scale_target",
            "W",
            "two autoscalers act on one workload",
            "Two controllers write the same replica count and undo each other's decisions.",
        ),
        _c(
            "HPA_CPU_METRIC_ON_GPU",
            "scale_target",
            "W",
            "CPU or memory metric drives a GPU-bound vLLM",
            "vLLM's load shows in GPU queues, not host CPU; a CPU target stays low while requests queue.",
        ),
        _c(
            "HPA_TARGET_ABOVE_POD_CAPACITY",
            "scale_target",
            "W",
            "per-pod target at or above the pod's ceiling",
            "The autoscaler waits for a per-pod value the pod can never report before it saturates, so it scales "
            "only after requests already queue.",
        ),
        _c(
            "HPA_AT_MAX",
            "scale_target",
            "W",
            "at maxReplicas while demand exceeds capacity",
            "The autoscaler wants more replicas than it is allowed; the rest of the demand queues.",
        ),
        _c(
            "HPA_BEHAVIOR_SLOW",
            "scale_target",
            "W",
            "scale-up too slow or scale-down too fast for GPU pods",
            "Scaling policies tuned for fast web pods either add GPU replicas too slowly for a burst or remove "
            "them before the burst is over.",
        ),
        _c(
            "QUEUE_SATURATION",
            "queue_vs_oom",
            "W",
            "requests wait while running is at its ceiling",
            "Every pod runs as many sequences as it can and new requests wait in vLLM's queue: a capacity "
            "shortfall, which becomes 504s once waiting exceeds a timeout.",
        ),
        _c(
            "KV_CACHE_PRESSURE",
            "queue_vs_oom",
            "W",
            "KV cache near full with preemptions",
            "The KV cache is full, so vLLM preempts running sequences and recomputes them; latency climbs.",
        ),
        _c(
            "GPU_OOM",
            "queue_vs_oom",
            "C",
            "CUDA out of memory",
            "The engine ran out of GPU memory and crashed or refused to start.",
        ),
        _c(
            "VLLM_KV_CAPACITY_EXCEEDED",
            "queue_vs_oom",
            "C",
            "one full-length request does not fit the KV cache",
            "max-model-len needs more KV cache than the GPU memory left after the weights; vLLM refuses to start.",
        ),
        _c(
            "VLLM_MEMORY_UTILIZATION_RISKY",
            "queue_vs_oom",
            "W",
            "gpu-memory-utilization leaves no headroom",
            "vLLM claims nearly the whole GPU up front; any other allocation (CUDA graphs, another process) then "
            "runs out of memory.",
        ),
        _c(
            "TIMEOUT_MISALIGNED",
            "timeouts",
            "W",
            "an outer layer times out before an inner one or before p99",
            "A proxy in front gives up before the layer behind it or before slow requests finish; the client gets "
            "504 while the server keeps working.",
        ),
        _c(
            "TIMEOUT_LB_DEFAULT",
            "timeouts",
            "W",
            "an LB/ingress/gateway default timeout is below long requests",
            "A default idle or read timeout (often 60 s) cuts long generations.",
        ),
    )
}


def _expand(pattern: str) -> list[str]:
    """Codes matching a pattern such as ``PROBE_*``; info-only codes (notes, not problems) take no edges."""
    return sorted(
        code
        for code, info in CATALOG.items()
        if fnmatch.fnmatchcase(code, pattern) and info.severity is not Severity.INFO
    )


_EDGE_GROUPS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (
        (
            "GPU_OOM",
            "VLLM_KV_CAPACITY_EXCEEDED",
            "RESOURCES_HOST_OOMKILLED",
            "RESOURCES_GPU_NOT_VISIBLE",
            "PORT_MISMATCH",
        ),
        ("PROBE_*",),
    ),
    (
        (
            "PROBE_*",
            "PORT_MISMATCH",
            "RESOURCES_*",
            "GPU_OOM",
            "VLLM_KV_CAPACITY_EXCEEDED",
            "ENDPOINTS_SELECTOR_MISMATCH",
        ),
        ("ENDPOINTS_NONE_READY", "ROUTING_REVISION_NOT_READY"),
    ),
    (("COLDSTART_EXCEEDS_TIMEOUT",), ("ROUTING_REVISION_NOT_READY", "ENDPOINTS_NONE_READY")),
    (("ENDPOINTS_NONE_READY", "ROUTING_*", "COLDSTART_EXCEEDS_TIMEOUT"), ("ISVC_NOT_READY",)),
    (("COLDSTART_SCALE_TO_ZERO",), ("COLDSTART_EXCEEDS_TIMEOUT",)),
    (("HPA_BEHAVIOR_SLOW", "HPA_CONFLICT"), ("COLDSTART_CHURN",)),
    (
        (
            "RESOURCES_REQUESTS_MISSING",
            "HPA_METRICS_API_UNAVAILABLE",
            "HPA_METRICS_API_CONFLICT",
            "HPA_METRIC_SERIES_MISSING",
        ),
        ("HPA_METRIC_FETCH_FAILED",),
    ),
    (
        (
            "HPA_METRIC_FETCH_FAILED",
            "HPA_CPU_METRIC_ON_GPU",
            "HPA_TARGET_*",
            "HPA_AT_MAX",
            "HPA_BEHAVIOR_SLOW",
            "HPA_CONFLICT",
            "HPA_MISSING",
            "RESOURCES_GPU_UNSCHEDULABLE",
            "COLDSTART_CHURN",
        ),
        ("QUEUE_SATURATION",),
    ),
    (("VLLM_MEMORY_UTILIZATION_RISKY",), ("GPU_OOM",)),
    (("KV_CACHE_PRESSURE",), ("QUEUE_SATURATION",)),
    (
        ("QUEUE_SATURATION", "KV_CACHE_PRESSURE", "COLDSTART_EXCEEDS_TIMEOUT"),
        ("TIMEOUT_MISALIGNED", "TIMEOUT_LB_DEFAULT"),
    ),
)


def _build_edges() -> dict[str, frozenset[str]]:
    edges: dict[str, set[str]] = {code: set() for code in CATALOG}
    for sources, targets in _EDGE_GROUPS:
        for source in (code for pattern in sources for code in _expand(pattern)):
            for target in (code for pattern in targets for code in _expand(pattern)):
                if source != target:
                    edges[source].add(target)
    return {code: frozenset(targets) for code, targets in edges.items()}


CAUSE_EDGES: dict[str, frozenset[str]] = _build_edges()


def reachable(code: str) -> frozenset[str]:
    """Every code that ``code`` explains, directly or through any path."""
    seen: set[str] = set()
    stack = list(CAUSE_EDGES.get(code, ()))
    while stack:
        current = stack.pop()
        if current not in seen:
            seen.add(current)
            stack.extend(CAUSE_EDGES.get(current, ()))
    return frozenset(seen)


@dataclass(frozen=True)
class Patch:
    target: str
    body: str
    type: str = "merge"

    def to_json(self) -> dict[str, str]:
        return {"target": self.target, "type": self.type, "body": self.body}


@dataclass(frozen=True, kw_only=True)
class Fix:
    """What to change, and when a merge patch does it, the patch with the commands that apply and roll it back.

    ``manifest`` is an object to create once the patch is applied (``kubectl apply -f``), when the change needs one.
    """

    what: str
    patch: Patch | None = None
    apply_command: str = ""
    rollback_command: str = ""
    manifest: dict[str, Any] | None = None

    @classmethod
    def from_plan(
        cls, what: str, plan: PatchPlan | None, *, no_patch: str = "", manifest: dict[str, Any] | None = None
    ) -> Fix:
        """``what`` done by ``plan``; without a plan, ``what`` followed by ``no_patch``, the reason there is none."""
        if plan is None:
            return cls(what=f"{what} {no_patch}" if no_patch else what, manifest=manifest)
        return cls(
            what=what,
            patch=plan.patch,
            apply_command=plan.apply_command,
            rollback_command=plan.rollback_command,
            manifest=manifest,
        )

    @property
    def remediation(self) -> str:
        if not self.apply_command:
            return self.what
        return f"{self.what}\nApply:\n  {self.apply_command}\nRoll back:\n  {self.rollback_command}"


@dataclass(frozen=True, kw_only=True)
class Finding:
    code: str
    title: str
    summary: str
    objects: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()
    fix: Fix | None = None
    severity: Severity | None = None  # None: the catalog default

    def __post_init__(self) -> None:
        if self.code not in CATALOG:
            raise ValueError(f"unknown finding code {self.code}")
        if self.severity is None:
            object.__setattr__(self, "severity", CATALOG[self.code].severity)

    @property
    def step(self) -> str:
        return CATALOG[self.code].step

    @property
    def level(self) -> Severity:
        assert self.severity is not None
        return self.severity

    @property
    def remediation(self) -> str:
        return self.fix.remediation if self.fix is not None else ""

    @property
    def patch(self) -> Patch | None:
        return self.fix.patch if self.fix is not None else None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "code": self.code,
            "step": self.step,
            "severity": self.level.value,
            "title": self.title,
            "summary": self.summary,
            "objects": list(self.objects),
            "evidence": list(self.evidence),
            "remediation": self.remediation,
        }
        if self.patch is not None:
            body["patch"] = self.patch.to_json()
        return body


def apply_ignores(findings: Sequence[Finding], ignored: dict[str, str]) -> list[Finding]:
    """Report ignored codes as ``info`` with who ignored them; ``ignored`` maps code -> origin."""
    result = []
    for finding in findings:
        origin = ignored.get(finding.code)
        if origin:
            finding = replace(finding, severity=Severity.INFO, summary=f"{finding.summary} (ignored by {origin})")
        result.append(finding)
    return result


def rank_root_causes(findings: Iterable[Finding], step_order: Sequence[str]) -> list[str]:
    """Order the distinct critical/warning codes as DESIGN §4.3 'Ranking' says.

    A code that explains another comes first; ties go by severity, then by ``step_order`` (the
    order of the checks), then by name.
    """
    best: dict[str, Severity] = {}
    for finding in findings:
        if finding.level is Severity.INFO:
            continue
        current = best.get(finding.code)
        if current is None or finding.level.rank < current.rank:
            best[finding.code] = finding.level
    present = set(best)

    def tie_key(code: str) -> tuple[int, int, str]:
        return (best[code].rank, step_order.index(CATALOG[code].step), code)

    explains = {code: reachable(code) & present for code in present}
    ordered: list[str] = []
    remaining = set(present)
    while remaining:
        # A code is free when no remaining code explains it; cycles fall back to the tie key.
        free = [code for code in remaining if not any(code in explains[other] for other in remaining - {code})]
        chosen = min(free or remaining, key=tie_key)
        ordered.append(chosen)
        remaining.discard(chosen)
    return ordered
