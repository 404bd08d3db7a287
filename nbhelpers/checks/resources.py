"""Step 4, ``resources``: are requests and limits sane, GPUs schedulable and visible, host memory
enough, and /dev/shm memory-backed?

Facts it rests on (DESIGN §6):

- the live Pod spec is judged (it already merges the ServingRuntime with the InferenceService);
  a resource with a limit and no request requests its limit; device resources such as
  ``nvidia.com/gpu`` are limit-only;
- the HPA computes a Utilization target as usage / request over every container of the pod, so
  one container without a request for that resource leaves the HPA without a metric;
- a pod that waited for a node and was scheduled after a cluster-autoscaler scale-up paid that
  wait as cold start: only pods that stay Pending are ``RESOURCES_GPU_UNSCHEDULABLE``;
- ``OOMKilled`` is the kernel's cgroup (host memory) kill, exit code 137; a CUDA out-of-memory
  error is a Python exception and belongs to ``GPU_OOM`` (queue_vs_oom step);
- with tensor or pipeline parallelism the workers exchange tensors through /dev/shm (NCCL), and a
  container's default /dev/shm is 64 MiB.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common, engine, vllm_args
from nbhelpers.findings import patches
from nbhelpers.findings.model import Finding, Fix, Severity
from nbhelpers.findings.steps import StepInfo
from nbhelpers.sources import kinds, kube
from nbhelpers.sources.kube import event_interval
from nbhelpers.util import quantities
from nbhelpers.util.times import parse_k8s_time

STEP = StepInfo(
    "resources",
    "Resources",
    "Are requests and limits sane, GPUs schedulable and visible, memory enough?",
)

SHM_PATH = "/dev/shm"
SHM_VOLUME = "dshm"
# vLLM's Kubernetes guide mounts a 2 GiB memory-backed /dev/shm; it counts against the memory limit.
SHM_SIZE_LIMIT = "2Gi"
# The headroom an OOM-killed limit gets: the kill says the peak was above it, not by how much.
OOM_HEADROOM = Decimal("1.5")
# cluster-autoscaler's default --max-node-provision-time: a scale-up not done by then has failed.
SCALE_UP_PATIENCE = timedelta(minutes=15)
# Knative's default cpu request for queue-proxy (config-deployment queue-sidecar-cpu-request).
QUEUE_PROXY_CPU_REQUEST = "25m"
# The default resources KServe's webhook gives a predictor container that sets none.
KSERVE_DEFAULT_MEMORY = "2Gi"

# Device resource per accelerator platform, for the containers that request none.
PLATFORM_RESOURCES = {"cuda": "nvidia.com/gpu", "rocm": "amd.com/gpu"}
_OTHER_PLATFORM_MARKERS = ("tpu", "neuron", "hpu", "gaudi", "xpu", "habana")

# Log lines that say the engine found no GPU (vLLM platform detection, PyTorch, the CUDA driver).
_NO_GPU_LOG = re.compile(
    r"No CUDA GPUs are available"
    r"|Failed to infer device type"
    r"|No platform detected, vLLM is running on UnspecifiedPlatform"
    r"|Found no NVIDIA driver on your system"
    r"|CUDA driver initialization failed"
    r"|libcuda\.so[.\d]*: cannot open shared object file"
)
_CPU_PLATFORM_LOG = re.compile(r"Automatically detected platform cpu\b")
# NCCL and PyTorch failures of a too small /dev/shm.
_SHM_LOG = re.compile(
    r"Error while creating shared memory segment"
    r"|Bus error"
    r"|/dev/shm\S*.*(?:No space left on device|Cannot allocate memory)"
    r"|unable to write to file </torch_"
)
_WEIGHTS_LOG = re.compile(r"(?:Model loading took|Loading model weights took) ([\d.]+) (GiB|GB)")
_INSUFFICIENT = re.compile(r"(\d+) Insufficient ([A-Za-z0-9][\w./-]*[A-Za-z0-9])")
_NODES_TOTAL = re.compile(r"\d+/(\d+) nodes are available")
_PARAMETERS = re.compile(r"(?:(\d+)x)?(\d+(?:\.\d+)?)[bB](?![a-zA-Z0-9])")


def run(evidence: Evidence) -> list[Finding]:
    common.skip_modelmesh(evidence)
    workload = common.current_workload(evidence)
    context = _Context(evidence, workload)
    findings: list[Finding] = []
    findings.extend(context.requests_missing())
    findings.extend(context.unschedulable())
    oom = context.host_oom_killed()
    if oom is not None:
        findings.append(oom)
    not_visible = context.gpu_not_visible()
    if not_visible is not None:
        findings.append(not_visible)
    shm = context.shm_missing()
    if shm is not None:
        findings.append(shm)
    return findings


# --- small readers ------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogHit:
    pod: str
    container: str
    previous: bool
    line: str
    count: int

    def describe(self) -> str:
        where = f"{self.pod}/{self.container}{' (previous)' if self.previous else ''}"
        times = f" ×{self.count}" if self.count > 1 else ""
        return f"log {where}: {self.line!r}{times}"


def _log_hits(
    evidence: Evidence, pods: Iterable[Mapping[str, Any]], container: str, pattern: re.Pattern[str]
) -> list[LogHit]:
    """The first matching line of each log of ``container`` in ``pods``, with how often it matched."""
    hits = []
    for pod in pods:
        for log in evidence.logs_of(kube.name(pod)):
            if log.container != container:
                continue
            matching = [line for line in log.text.splitlines() if pattern.search(line)]
            if matching:
                hits.append(
                    LogHit(log.pod, log.container, log.previous, common.strip_log_timestamp(matching[0]), len(matching))
                )
    return hits


def _event_subject(event: common.KubeObject) -> str:
    involved = event.get("involvedObject") or event.get("regarding") or {}
    return str(involved.get("name") or "")


def _event_count(event: common.KubeObject) -> int:
    series = event.get("series") or {}
    return int(series.get("count") or event.get("count") or 1)


def _event_message(event: common.KubeObject) -> str:
    return str(event.get("message") or event.get("note") or "").strip()


def _describe_event(event: common.KubeObject) -> str:
    first, last = event_interval(event)
    when = ""
    if first is not None and last is not None and last != first:
        when = f" ({first:%H:%M:%S}–{last:%H:%M:%S}Z)"
    elif last is not None:
        when = f" ({last:%H:%M:%S}Z)"
    return f"event {event.get('reason')} on {_event_subject(event)}: {_event_message(event)!r} ×{_event_count(event)}{when}"


def _pod_events(evidence: Evidence, pod: Mapping[str, Any], reason: str) -> list[common.KubeObject]:
    return [e for e in evidence.events_about("Pod", kube.name(pod)) if e.get("reason") == reason]


def _last_seen(event: common.KubeObject) -> datetime | None:
    return event_interval(event)[1]


def _container_named(pod_spec: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    return next((c for c in kube.containers(pod_spec) if c.get("name") == name), None)


def _describe_resources(container: Mapping[str, Any]) -> str:
    resources = container.get("resources") or {}
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}

    def show(values: Mapping[str, Any]) -> str:
        return ", ".join(f"{k}={v}" for k, v in sorted(values.items())) or "none"

    return f"{container.get('name')}: requests {show(requests)}; limits {show(limits)}"


# --- the facts every finding quotes -------------------------------------------------------------


class _Context:
    def __init__(self, evidence: Evidence, workload: common.Workload) -> None:
        self.evidence = evidence
        self.workload = workload
        self.serving = workload.serving
        self.container_name = str(workload.serving.get("name"))
        self.server = vllm_args.parse_container(workload.serving)
        self.pods = common.predictor_pods(evidence)
        self.isvc_ref = kube.ref(evidence.isvc)

    # --- RESOURCES_REQUESTS_MISSING -------------------------------------------------------------

    def requests_missing(self) -> list[Finding]:
        findings = []
        if "memory" not in common.effective_requests(self.serving):
            findings.append(self._memory_request_missing())
        for hpa, resource, container_names in self._utilization_metrics():
            findings.extend(self._hpa_request_missing(hpa, resource, container_names))
        return findings

    def _memory_request_missing(self) -> Finding:
        hint = self._weights_hint()
        summary = (
            f"Container {self.container_name} of {self.workload.ref} requests no memory. The scheduler then "
            "places the pod without reserving host memory for it, and under node memory pressure the kubelet "
            "evicts or the kernel OOM-kills it first; vLLM needs several GiB of host memory while it loads "
            "the weights and runs its workers."
        )
        evidence_lines = [_describe_resources(self.serving)]
        if hint is not None:
            evidence_lines.append(f"model size: {hint.describe()}")
        plan = None
        if hint is not None:
            size = quantities.gib_quantity(hint.weights_bytes * OOM_HEADROOM)
            what = (
                f"Request memory for {self.container_name}: {size}, 1.5 × the model's weights "
                f"({hint.describe()}), as requests and limit so the memory is reserved. This is an estimate: "
                "check the container's peak working set (kubectl top pod) once it runs."
            )
            plan = self._isvc_resources_patch({"requests": {"memory": size}, "limits": {"memory": size}})
        else:
            what = (
                f"Set resources.requests.memory (and the same limits.memory) on {self.container_name}: at least "
                "the model's weights in GiB plus a few GiB for the engine processes. Measure the peak with "
                "kubectl top pod and size from that."
            )
        return Finding(
            code="RESOURCES_REQUESTS_MISSING",
            title=f"{self.container_name} has no memory request",
            summary=summary,
            objects=(self.isvc_ref, self.workload.ref),
            evidence=tuple(evidence_lines),
            fix=Fix.from_plan(what, plan),
        )

    def _utilization_metrics(self) -> list[tuple[Mapping[str, Any], str, tuple[str, ...] | None]]:
        """(HPA, resource, containers it reads or None for all) for Utilization targets on predictor pods."""
        found: list[tuple[Mapping[str, Any], str, tuple[str, ...] | None]] = []
        for hpa in self._predictor_hpas():
            for metric in kube.spec(hpa).get("metrics") or []:
                kind = metric.get("type")
                source = metric.get("resource") if kind == "Resource" else metric.get("containerResource")
                if kind not in ("Resource", "ContainerResource") or not isinstance(source, Mapping):
                    continue
                if (source.get("target") or {}).get("type") != "Utilization":
                    continue
                containers = (str(source.get("container")),) if kind == "ContainerResource" else None
                found.append((hpa, str(source.get("name")), containers))
        return found

    def _predictor_hpas(self) -> list[Mapping[str, Any]]:
        prefix = common.predictor_name(self.evidence)
        hpas = []
        for hpa in self.evidence.of(kinds.HPA):
            target = kube.spec(hpa).get("scaleTargetRef") or {}
            name = str(target.get("name") or "")
            if kube.namespace(hpa) == self.evidence.target.namespace and (
                name == prefix or name.startswith(prefix + "-")
            ):
                hpas.append(hpa)
        return sorted(hpas, key=kube.name)

    def _hpa_request_missing(
        self, hpa: Mapping[str, Any], resource: str, container_names: tuple[str, ...] | None
    ) -> list[Finding]:
        containers = [
            c
            for c in kube.containers(self.workload.pod_spec)
            if container_names is None or c.get("name") in container_names
        ]
        missing = [c for c in containers if not _requests_some(c, resource)]
        if not missing:
            return []
        names = [str(c.get("name")) for c in missing]
        scope = "every container" if container_names is None else f"container {container_names[0]}"
        summary = (
            f"{kube.ref(hpa)} scales on {resource} utilization, which is usage divided by the {resource} request "
            f"of {scope}; {', '.join(names)} of {self.workload.ref} {'requests' if len(names) == 1 else 'request'} "
            f"no {resource}. The HPA cannot compute "
            "the metric (FailedGetResourceMetric), so it never scales and load piles up on the current replicas."
        )
        evidence_lines = [
            f"{kube.ref(hpa)}: target {resource} Utilization, scaleTargetRef "
            f"{(kube.spec(hpa).get('scaleTargetRef') or {}).get('name')}",
            *(_describe_resources(c) for c in kube.containers(self.workload.pod_spec)),
        ]
        objects = (self.isvc_ref, self.workload.ref, kube.ref(hpa))
        findings = []
        serving_missing = self.container_name in names
        sidecars = [name for name in names if name != self.container_name]
        if serving_missing:
            findings.append(self._serving_request_finding(resource, summary, evidence_lines, objects))
        for sidecar in sidecars:
            findings.append(self._sidecar_request_finding(sidecar, resource, summary, evidence_lines, objects))
        return findings

    def _serving_request_finding(
        self, resource: str, summary: str, evidence_lines: list[str], objects: tuple[str, ...]
    ) -> Finding:
        limit = ((self.serving.get("resources") or {}).get("limits") or {}).get(resource)
        plan = None
        if limit is not None:
            what = f"Request {resource} {limit} (its limit) for {self.container_name}."
            plan = self._isvc_resources_patch({"requests": {resource: str(limit)}})
        else:
            what = (
                f"Set resources.requests.{resource} on {self.container_name} to its steady usage (kubectl top pod); "
                "the HPA target is a percentage of that number."
            )
        return Finding(
            code="RESOURCES_REQUESTS_MISSING",
            title=f"{resource} HPA, but {self.container_name} has no {resource} request",
            summary=summary,
            objects=objects,
            evidence=tuple(evidence_lines),
            fix=Fix.from_plan(what, plan),
        )

    def _sidecar_request_finding(
        self, sidecar: str, resource: str, summary: str, evidence_lines: list[str], objects: tuple[str, ...]
    ) -> Finding:
        plan = None
        config = self.evidence.config_map(self.evidence.site.knative_namespace, "config-deployment")
        if sidecar == "queue-proxy" and resource == "cpu":
            # Patch only a ConfigMap that was read: a merge patch on a missing object fails with NotFound.
            if config is not None:
                plan = patches.plan_patch(
                    dict(config),
                    lambda cm: cm.setdefault("data", {}).update({"queue-sidecar-cpu-request": QUEUE_PROXY_CPU_REQUEST}),
                )
            what = (
                f"Give queue-proxy a cpu request again: Knative's default is {QUEUE_PROXY_CPU_REQUEST} "
                "(config-deployment queue-sidecar-cpu-request). New revisions pick it up; when the Knative Operator "
                "owns the ConfigMap, set spec.config.deployment in the KnativeServing resource instead."
            )
        elif sidecar in common.AGENT_CONTAINERS:
            what = (
                f"Set a {resource} request for the KServe agent in the inferenceservice-config ConfigMap "
                f"(key agent, field {resource}Request), then restart the predictor."
            )
        else:
            what = f"Set a {resource} request on container {sidecar} where it is injected (its mesh or webhook config)."
        return Finding(
            code="RESOURCES_REQUESTS_MISSING",
            title=f"{resource} HPA, but sidecar {sidecar} has no {resource} request",
            summary=summary,
            objects=objects,
            evidence=tuple(evidence_lines),
            fix=Fix.from_plan(what, plan),
        )

    # --- RESOURCES_GPU_UNSCHEDULABLE ------------------------------------------------------------

    def unschedulable(self) -> list[Finding]:
        """One finding for the predictor pods that the scheduler cannot place (the oldest one quoted first)."""
        pending = []
        for pod in self.pods:
            if kube.status(pod).get("phase") != "Pending" or kube.condition_true(pod, "PodScheduled"):
                continue
            failed = sorted(
                _pod_events(self.evidence, pod, "FailedScheduling"),
                key=lambda e: _last_seen(e) or self.evidence.observed_at,
            )
            scheduled = kube.condition(pod, "PodScheduled")
            message = _event_message(failed[-1]) if failed else str((scheduled or {}).get("message") or "")
            if failed or "nodes are available" in message:
                pending.append(_PendingPod(pod, tuple(failed), message, self._scale_up_state(pod)))
        return [self._unschedulable_finding(pending)] if pending else []

    def _unschedulable_finding(self, pending: Sequence[_PendingPod]) -> Finding:
        first = pending[0]
        message = first.message
        shortages = {name: int(count) for count, name in _INSUFFICIENT.findall(message.split("preemption:")[0])}
        total = _NODES_TOTAL.search(message)
        container = _container_named(kube.pod_template_spec(first.pod), self.container_name) or self.serving
        lines: list[str] = []
        for entry in pending:
            lines.extend(_describe_event(event) for event in entry.failed[-1:])
            if not entry.failed:
                lines.append(f"{kube.ref(entry.pod)} PodScheduled=False: {entry.message!r}")
            if entry.scale_up is not None:
                lines.append(entry.scale_up[1])
        lines.append(_describe_resources(container))
        lines.extend(self._node_capacity(shortages or {"nvidia.com/gpu": 0}))
        pod_requests = self._pod_requests(first.pod)
        asked = [f"{resource} {pod_requests.get(resource, 'none')}" for resource in shortages]
        shortage_text = ", ".join(f"{count} node(s) Insufficient {name}" for name, count in shortages.items())
        nodes_text = f"none of the {total.group(1)} nodes" if total else "no node"
        reason = shortage_text or message
        others = f" ({len(pending) - 1} more predictor pod(s) Pending the same way)" if len(pending) > 1 else ""
        summary = (
            f"{kube.ref(first.pod)} has been Pending for {_minutes(self._age(first.pod))}{others}: {nodes_text} "
            f"can take it ({reason}). Each pod asks for {'; '.join(asked) or 'resources no node offers'}. Without "
            "these pods the predictor has fewer (or no) ready replicas, so requests queue on the others or get 503."
        )
        severity = None
        title = f"{len(pending)} pod(s) Pending: {reason}"
        if all(entry.scale_up is not None and entry.scale_up[0] for entry in pending):
            severity = Severity.INFO
            title = f"{len(pending)} pod(s) Pending while a cluster-autoscaler scale-up provisions a node ({reason})"
            summary += (
                " A scale-up was triggered less than 15 minutes ago (cluster-autoscaler's default node provision "
                "time): the pods may still be scheduled, and that wait is cold start."
            )
        return Finding(
            code="RESOURCES_GPU_UNSCHEDULABLE",
            title=title,
            summary=summary,
            objects=(self.isvc_ref, *(kube.ref(entry.pod) for entry in pending)),
            evidence=tuple(lines),
            fix=Fix(what=self._capacity_remediation(shortages, pod_requests)),
            severity=severity,
        )

    def _age(self, pod: Mapping[str, Any]) -> timedelta:
        created = parse_k8s_time(kube.created(pod))
        return self.evidence.observed_at - created if created is not None else timedelta(0)

    def _pod_requests(self, pod: Mapping[str, Any]) -> dict[str, str]:
        totals: dict[str, Decimal] = {}
        for container in kube.containers(kube.pod_template_spec(pod)):
            for name, value in common.effective_requests(container).items():
                amount = quantities.try_parse(value)
                if amount is not None:
                    totals[str(name)] = totals.get(str(name), Decimal(0)) + amount
        return {
            name: (quantities.format_bytes(amount) if name == "memory" else f"{amount.normalize():f}")
            for name, amount in totals.items()
        }

    def _node_capacity(self, shortages: Mapping[str, int]) -> list[str]:
        failure = self.evidence.failure(kinds.NODE.key)
        if failure is not None:
            return [f"nodes could not be read ({failure.status}): allocatable capacity unknown"]
        nodes = sorted(self.evidence.of(kinds.NODE), key=kube.name)
        lines = []
        for resource in shortages:
            offering = []
            for node in nodes:
                amount = quantities.try_parse((kube.status(node).get("allocatable") or {}).get(resource))
                if amount is not None and amount > 0:
                    shown = quantities.format_bytes(amount) if resource == "memory" else f"{amount.normalize():f}"
                    offering.append(f"{kube.name(node)} {shown}")
            if offering:
                lines.append(f"nodes with allocatable {resource}: {', '.join(offering)} ({len(nodes)} nodes read)")
            else:
                lines.append(f"no node offers {resource} ({len(nodes)} nodes read)")
        return lines

    def _scale_up_state(self, pod: Mapping[str, Any]) -> tuple[bool, str] | None:
        """(still within the provisioning time, evidence line) for the pod's latest scale-up event."""
        triggered = _pod_events(self.evidence, pod, "TriggeredScaleUp")
        refused = _pod_events(self.evidence, pod, "NotTriggerScaleUp")
        latest = max(triggered + refused, key=lambda e: _last_seen(e) or self.evidence.observed_at, default=None)
        if latest is None:
            return None
        seen = _last_seen(latest) or self.evidence.observed_at
        waiting = latest.get("reason") == "TriggeredScaleUp" and self.evidence.observed_at - seen < SCALE_UP_PATIENCE
        return waiting, _describe_event(latest)

    def _capacity_remediation(self, shortages: Mapping[str, int], requests: Mapping[str, str]) -> str:
        gpu = next((name for name in shortages if common.is_accelerator_resource(name)), None)
        options = []
        if gpu is not None:
            tp = vllm_args.int_flag(self.server, "tensor-parallel-size")
            options.append(
                f"ask for fewer GPUs per pod if the model fits ({gpu} {requests.get(gpu, '?')} now"
                + (f", --tensor-parallel-size {tp}" if tp else "")
                + "; GPUs and tensor-parallel size change together)"
            )
            options.append(
                "free GPUs held by other workloads (kubectl describe nodes | grep -A8 'Allocated resources')"
            )
            options.append(
                "add GPU nodes: scale the GPU node pool, or let the cluster autoscaler do it (a node group that "
                "offers this GPU, with the pod's tolerations and node selector)"
            )
        else:
            options.append("lower the pod's requests to what it uses, or add nodes with more allocatable capacity")
        return (
            "Capacity, not a manifest field, blocks the pod, so there is no patch. Options: "
            + "; ".join(options)
            + ". Check with: kubectl describe pod <pod> (Events) and kubectl get nodes -o "
            "custom-columns=NAME:.metadata.name,GPU:.status.allocatable.nvidia\\.com/gpu."
        )

    # --- RESOURCES_HOST_OOMKILLED ---------------------------------------------------------------

    def host_oom_killed(self) -> Finding | None:
        kills = []
        for pod in self.pods:
            for status in kube.status(pod).get("containerStatuses") or []:
                if status.get("name") != self.container_name:
                    continue
                for state_key in ("state", "lastState"):
                    terminated = (status.get(state_key) or {}).get("terminated") or {}
                    if terminated.get("reason") == "OOMKilled":
                        kills.append((pod, status, terminated))
                        break
        gone = self._oom_series_of_gone_pods()
        if not kills and not gone:
            return None
        latest_pod = kills[-1][0] if kills else None
        container = (
            _container_named(kube.pod_template_spec(latest_pod), self.container_name) if latest_pod else None
        ) or self.serving
        limit_value = ((container.get("resources") or {}).get("limits") or {}).get("memory")
        limit = quantities.try_parse(limit_value)
        lines = []
        for killed_pod, status, terminated in kills:
            lines.append(
                f"{kube.ref(killed_pod)} {status.get('name')}: terminated OOMKilled (exit code "
                f"{terminated.get('exitCode', '?')}) at {terminated.get('finishedAt', '?')}, "
                f"{int(status.get('restartCount') or 0)} restarts"
            )
        lines.extend(gone)
        lines.append(_describe_resources(container))
        origin = self._limit_origin(limit_value)
        lines.append(f"memory limit origin: {origin}")
        hint = self._weights_hint()
        if hint is not None:
            lines.append(f"model size: {hint.describe()}")
        restarts = sum(int(status.get("restartCount") or 0) for _, status, _ in kills)
        pods_text = ", ".join(dict.fromkeys(kube.name(p) for p, _, _ in kills)) or "pods no longer present"
        if limit is not None:
            limit_text = f"its memory limit of {limit_value} ({quantities.format_bytes(limit)}), set by {origin}"
        else:
            limit_text = "the node's memory: the container has no memory limit, so the node ran out"
        summary = (
            f"The kernel OOM-killed {self.container_name} (exit code 137; {pods_text}, {restarts} restarts in all): "
            f"it exceeded {limit_text}. Each kill restarts the engine, which must reload the weights before it can "
            "serve again, so the pod keeps dropping out of the endpoints (503s)."
        )
        fix = self._oom_fix(limit, hint)
        return Finding(
            code="RESOURCES_HOST_OOMKILLED",
            title=f"{self.container_name} OOMKilled at "
            + (f"memory limit {limit_value}" if limit_value else "no memory limit"),
            summary=summary,
            objects=(self.isvc_ref, *dict.fromkeys(kube.ref(killed) for killed, _, _ in kills)),
            evidence=tuple(lines),
            fix=fix,
        )

    def _oom_series_of_gone_pods(self) -> list[str]:
        """kube-state-metrics' last termination reason for predictor pods that are no longer listed."""
        data = self.evidence.metrics.get("pod_last_terminated_reason")
        if data is None or data.status != "ok":
            return []
        listed = {kube.name(pod) for pod in self.pods}
        lines = []
        for series in data.series:
            labels = series.labels
            if labels.get("reason") != "OOMKilled" or labels.get("pod") in listed:
                continue
            if labels.get("container") not in (None, self.container_name):
                continue
            if any(value > 0 for _, value in series.samples):
                lines.append(
                    f"kube-state-metrics: Pod {labels.get('pod')} {labels.get('container')} last terminated OOMKilled"
                )
        return sorted(lines)

    def _limit_origin(self, limit_value: Any) -> str:
        if limit_value is None:
            return "no memory limit anywhere"
        declared = self._isvc_container_resources()
        if (declared.get("limits") or {}).get("memory") is not None:
            return f"the InferenceService ({kube.name(self.evidence.isvc)})"
        runtime = self._runtime()
        if runtime is not None:
            runtime_container = self._runtime_container(runtime)
            runtime_limit = (((runtime_container or {}).get("resources") or {}).get("limits") or {}).get("memory")
            if runtime_limit is not None:
                return f"the runtime default of {kube.ref(runtime)} (the InferenceService sets no memory limit)"
        if str(limit_value) == KSERVE_DEFAULT_MEMORY:
            return f"KServe's default for containers without resources ({KSERVE_DEFAULT_MEMORY})"
        return "neither the InferenceService nor its runtime (a LimitRange default or an admission webhook)"

    def _oom_fix(self, limit: Decimal | None, hint: _WeightsHint | None) -> Fix:
        candidates = []
        reasons = []
        if limit is not None:
            candidates.append(limit * OOM_HEADROOM)
            reasons.append(f"1.5 × the limit that was exceeded ({quantities.format_bytes(limit)})")
        if hint is not None:
            candidates.append(Decimal(hint.weights_bytes))
            reasons.append(f"not below the weights ({hint.describe()}), which pass through host memory while they load")
        if not candidates:
            return Fix(
                what="Give the container a memory request and limit that hold its peak: measure it (kubectl top pod "
                "or container_memory_working_set_bytes) and add headroom."
            )
        size = quantities.gib_quantity(max(candidates))
        what = (
            f"Raise {self.container_name}'s memory to {size} ({'; '.join(reasons)}), as request and limit so the "
            "scheduler reserves it. The kill shows only that the peak was above the old limit, so watch the "
            "working set after the change. Memory-backed volumes such as /dev/shm count against this limit."
        )
        plan = self._isvc_resources_patch({"requests": {"memory": size}, "limits": {"memory": size}})
        return Fix.from_plan(what, plan)

    # --- RESOURCES_GPU_NOT_VISIBLE --------------------------------------------------------------

    def gpu_not_visible(self) -> Finding | None:
        devices = common.accelerator_requests(self.serving)
        log_hits = _log_hits(self.evidence, self.pods, self.container_name, _NO_GPU_LOG)
        hidden = self._hiding_env()
        if log_hits:
            return self._cuda_unavailable(devices, log_hits, hidden)
        if devices or not self._runs_vllm():
            return None
        platform = self._platform()
        if platform not in PLATFORM_RESOURCES:
            return None
        return self._gpu_not_requested(platform, hidden)

    def _runs_vllm(self) -> bool:
        image = str(self.serving.get("image") or "").lower()
        return self.server.server == vllm_args.VLLM or "vllm" in image

    def _platform(self) -> str:
        """cuda | rocm | cpu | other, from flags, env, image name and vLLM's own platform log line."""
        image = str(self.serving.get("image") or "").lower()
        env = vllm_args.literal_env(self.serving)
        device = (self.server.flag("device") or "").lower()
        if (
            device == "cpu"
            or env.get("VLLM_TARGET_DEVICE", "").lower() == "cpu"
            or "VLLM_CPU_KVCACHE_SPACE" in env
            or "cpu" in image
            or _log_hits(self.evidence, self.pods, self.container_name, _CPU_PLATFORM_LOG)
        ):
            return "cpu"
        if "rocm" in image:
            return "rocm"
        if device not in ("", "auto", "cuda") or any(marker in image for marker in _OTHER_PLATFORM_MARKERS):
            return "other"
        return "cuda"

    def _gpu_devices_wanted(self) -> int:
        tp = vllm_args.int_flag(self.server, "tensor-parallel-size") or 1
        pp = vllm_args.int_flag(self.server, "pipeline-parallel-size") or 1
        return tp * pp

    def _gpu_not_requested(self, platform: str, hidden: list[str]) -> Finding:
        resource = PLATFORM_RESOURCES[platform]
        count = self._gpu_devices_wanted()
        summary = (
            f"{self.container_name} runs vLLM built for {platform.upper()} ({self.serving.get('image')}) but requests "
            f"no {resource}. The device plugin only hands GPUs to containers that ask for them, so vLLM finds no GPU "
            "and exits at start-up (or, on a node whose runtime exposes every GPU, shares GPUs the scheduler gave to "
            "other pods). The pod never becomes ready."
        )
        lines = [_describe_resources(self.serving), f"image: {self.serving.get('image')}"]
        if self.server.argv:
            lines.append(f"command line: {common.shorten(' '.join(self.server.argv))}")
        lines.extend(hidden)
        what = (
            f"Request {count} {resource} (tensor-parallel × pipeline-parallel size) as a limit on "
            f"{self.container_name}; device resources are limit-only. If the model is meant to run on CPU, use "
            "vLLM's CPU image instead."
        )
        plan = self._isvc_resources_patch({"limits": {resource: str(count)}})
        return Finding(
            code="RESOURCES_GPU_NOT_VISIBLE",
            title=f"vLLM on {platform.upper()} with no {resource} request",
            summary=summary,
            objects=(self.isvc_ref, self.workload.ref),
            evidence=tuple(lines),
            fix=Fix.from_plan(what, plan),
        )

    def _cuda_unavailable(self, devices: Mapping[str, int], hits: list[LogHit], hidden: list[str]) -> Finding:
        requested = ", ".join(f"{name} {count}" for name, count in sorted(devices.items())) or "no GPU"
        restarts = sum(kube.restart_count(pod) for pod in self.pods)
        summary = (
            f"The engine in {self.container_name} found no usable GPU ({hits[0].line!r}) although the container "
            f"requests {requested}. vLLM exits when it cannot pick a device, so the container restarts "
            f"({restarts} restarts across the predictor pods) and never serves."
        )
        lines = [hit.describe() for hit in hits] + [_describe_resources(self.serving), *hidden]
        plan = None
        if hidden:
            what = (
                "The container's env hides the GPUs from CUDA: remove "
                + ", ".join(line.split(":", 1)[0].removeprefix("env ") for line in hidden)
                + "."
            )
            plan = self._isvc_env_patch()
        elif not devices and self._runs_vllm() and self._platform() in PLATFORM_RESOURCES:
            resource = PLATFORM_RESOURCES[self._platform()]
            count = self._gpu_devices_wanted()
            what = f"Request {count} {resource} as a limit on {self.container_name} (device resources are limit-only)."
            plan = self._isvc_resources_patch({"limits": {resource: str(count)}})
        else:
            what = (
                "The GPU is requested but the container cannot reach it: check the node's NVIDIA device plugin and "
                "container toolkit (kubectl -n gpu-operator get pods), whether the cluster needs "
                "runtimeClassName: nvidia on the predictor, and that the image's CUDA version fits the node driver."
            )
        return Finding(
            code="RESOURCES_GPU_NOT_VISIBLE",
            title="CUDA not available in the serving container",
            summary=summary,
            objects=(
                self.isvc_ref,
                *(f"Pod/{self.evidence.target.namespace}/{pod}" for pod in dict.fromkeys(h.pod for h in hits)),
            ),
            evidence=tuple(lines),
            fix=Fix.from_plan(what, plan),
        )

    def _hiding_env(self) -> list[str]:
        """Literal env values that leave CUDA with no device."""
        env = vllm_args.literal_env(self.serving)
        lines = []
        if "CUDA_VISIBLE_DEVICES" in env and env["CUDA_VISIBLE_DEVICES"].strip() in ("", "-1", "none"):
            lines.append(f"env CUDA_VISIBLE_DEVICES: {env['CUDA_VISIBLE_DEVICES']!r} hides every GPU from CUDA")
        if env.get("NVIDIA_VISIBLE_DEVICES", "").strip().lower() in ("void", "none"):
            lines.append(f"env NVIDIA_VISIBLE_DEVICES: {env['NVIDIA_VISIBLE_DEVICES']!r} mounts no GPU")
        return lines

    # --- RESOURCES_SHM_MISSING ------------------------------------------------------------------

    def shm_missing(self) -> Finding | None:
        tp = vllm_args.int_flag(self.server, "tensor-parallel-size") or 1
        pp = vllm_args.int_flag(self.server, "pipeline-parallel-size") or 1
        if tp * pp <= 1:
            return None
        mount = next(
            (m for m in self.serving.get("volumeMounts") or [] if str(m.get("mountPath", "")).rstrip("/") == SHM_PATH),
            None,
        )
        volume = None
        if mount is not None:
            volume = next(
                (v for v in self.workload.pod_spec.get("volumes") or [] if v.get("name") == mount.get("name")), None
            )
            if volume is not None and _memory_backed(volume):
                return None
        hits = _log_hits(self.evidence, self.pods, self.container_name, _SHM_LOG)
        restarts = sum(kube.restart_count(pod) for pod in self.pods)
        parallel = f"--tensor-parallel-size {tp}" + (f" and --pipeline-parallel-size {pp}" if pp > 1 else "")
        if mount is None:
            state = f"no volume is mounted at {SHM_PATH}, so the container gets the runtime's 64 MiB default"
        else:
            state = (
                f"{SHM_PATH} is mounted from volume {mount.get('name')!r}, which is not memory-backed "
                f"({_describe_volume(volume)})"
            )
        summary = (
            f"{self.container_name} runs {parallel} ({tp * pp} worker processes), and {state}. NCCL and vLLM's "
            "workers pass tensors through shared memory; a small or disk-backed /dev/shm makes them fail with bus "
            "errors or crawl."
        )
        severity = None
        if hits and restarts:
            severity = Severity.CRITICAL
            summary += (
                f" The logs show that failure and the pods restarted {restarts} times: it is breaking serving now."
            )
        lines = [f"command line: {common.shorten(' '.join(self.server.argv))}"]
        lines.append(
            f"volumeMounts of {self.container_name}: "
            + (
                ", ".join(f"{m.get('name')}→{m.get('mountPath')}" for m in self.serving.get("volumeMounts") or [])
                or "none"
            )
        )
        lines.extend(hit.describe() for hit in hits)
        plan = self._shm_patch(mount)
        what = (
            f"Mount a memory-backed emptyDir (medium: Memory, sizeLimit {SHM_SIZE_LIMIT}) at {SHM_PATH} in "
            f"{self.container_name}; the predictor's volumes list and the container's volumeMounts are carried whole. "
            "The size counts against the container's memory limit."
        )
        return Finding(
            code="RESOURCES_SHM_MISSING",
            title=f"tensor parallel {tp * pp} without a memory-backed /dev/shm",
            summary=summary,
            objects=(self.isvc_ref, self.workload.ref),
            evidence=tuple(lines),
            fix=Fix.from_plan(
                what, plan, no_patch="(No patch: the InferenceService does not declare the serving container.)"
            ),
            severity=severity,
        )

    def _shm_patch(self, mount: Mapping[str, Any] | None) -> patches.PatchPlan | None:
        located = common.isvc_serving_container(self.evidence.isvc)
        if located is None:
            return None
        _, accessor = located
        volume_name = str(mount.get("name")) if mount is not None else SHM_VOLUME
        runtime_container = None if accessor.is_custom_container else self._runtime_container(self._runtime())

        def add_shm(isvc: common.KubeObject) -> None:
            predictor = isvc["spec"]["predictor"]
            shm_volume = {"name": volume_name, "emptyDir": {"medium": "Memory", "sizeLimit": SHM_SIZE_LIMIT}}
            predictor["volumes"] = _replace_or_append(
                list(predictor.get("volumes") or []), lambda v: v.get("name") == volume_name, shm_volume
            )
            container = accessor.get(isvc)
            # KServe merges the runtime's mounts with the predictor's by mountPath: listing the runtime's
            # mounts here keeps them whether the merge is by key or wholesale.
            mounts = list(container.get("volumeMounts") or [])
            for inherited in (runtime_container or {}).get("volumeMounts") or []:
                if all(m.get("mountPath") != inherited.get("mountPath") for m in mounts):
                    mounts.append(dict(inherited))
            container["volumeMounts"] = _replace_or_append(
                mounts,
                lambda m: str(m.get("mountPath", "")).rstrip("/") == SHM_PATH,
                {"name": volume_name, "mountPath": SHM_PATH},
            )

        return patches.plan_patch(self.evidence.isvc, add_shm)

    # --- the InferenceService and its runtime ---------------------------------------------------

    def _isvc_container_resources(self) -> Mapping[str, Any]:
        located = common.isvc_serving_container(self.evidence.isvc)
        if located is None:
            return {}
        _, accessor = located
        return dict(accessor.get(copy.deepcopy(dict(self.evidence.isvc))).get("resources") or {})

    def _runtime(self) -> Mapping[str, Any] | None:
        predictor = kube.spec(self.evidence.isvc).get("predictor") or {}
        model = predictor.get("model") or {}
        name = model.get("runtime") if isinstance(model, Mapping) else None
        if not name:
            return None
        runtime = common.named(self.evidence, kinds.SERVING_RUNTIME, str(name))
        if runtime is not None:
            return runtime
        return next((r for r in self.evidence.of(kinds.CLUSTER_SERVING_RUNTIME) if kube.name(r) == name), None)

    def _runtime_container(self, runtime: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        if runtime is None:
            return None
        return common.serving_container(kube.spec(runtime))

    def _isvc_resources_patch(self, change: Mapping[str, Mapping[str, str]]) -> patches.PatchPlan | None:
        """Set resources on the InferenceService's serving container (other resource keys untouched)."""
        located = common.isvc_serving_container(self.evidence.isvc)
        if located is None:
            return None
        _, accessor = located

        def apply(isvc: common.KubeObject) -> None:
            container = accessor.get(isvc)
            resources = container.setdefault("resources", {})
            for section, values in change.items():
                resources.setdefault(section, {}).update(values)

        return patches.plan_patch(self.evidence.isvc, apply)

    def _isvc_env_patch(self) -> patches.PatchPlan | None:
        located = common.isvc_serving_container(self.evidence.isvc)
        if located is None:
            return None
        _, accessor = located

        def drop_hiding(isvc: common.KubeObject) -> None:
            container = accessor.get(isvc)
            env = [
                entry
                for entry in container.get("env") or []
                if not (
                    (
                        entry.get("name") == "CUDA_VISIBLE_DEVICES"
                        and str(entry.get("value", "")).strip() in ("", "-1", "none")
                    )
                    or (
                        entry.get("name") == "NVIDIA_VISIBLE_DEVICES"
                        and str(entry.get("value", "")).strip().lower() in ("void", "none")
                    )
                )
            ]
            if env:
                container["env"] = env
            else:
                container.pop("env", None)

        return patches.plan_patch(self.evidence.isvc, drop_hiding)

    # --- the model's size -----------------------------------------------------------------------

    def _weights_hint(self) -> _WeightsHint | None:
        workers = self._gpu_devices_wanted()
        for hit in _log_hits(self.evidence, self.pods, self.container_name, _WEIGHTS_LOG):
            match = _WEIGHTS_LOG.search(hit.line)
            assert match is not None
            # V0 prints "GB" but divides by 2^30 (see nbhelpers/models/vllm_log.py): both units are GiB.
            per_gpu = Decimal(match.group(1)) * quantities.GIB
            return _WeightsHint(int(per_gpu * workers), f"vLLM logged {match.group(0)!r} per GPU × {workers} GPU(s)")
        for name in engine.model_names(self.evidence, self.workload):
            match = _PARAMETERS.search(name.rsplit("/", 1)[-1])
            if match is None:
                continue
            experts = int(match.group(1) or 1)
            billions = Decimal(match.group(2)) * experts
            bytes_per_parameter = _bytes_per_parameter(name)
            return _WeightsHint(
                int(billions * 10**9 * bytes_per_parameter),
                f"estimated from the name {name!r}: {billions.normalize():f}B parameters × {bytes_per_parameter} bytes",
            )
        return None


@dataclass(frozen=True)
class _PendingPod:
    pod: Mapping[str, Any]
    failed: tuple[common.KubeObject, ...]  # FailedScheduling events, oldest first
    message: str  # the scheduler's latest message
    scale_up: tuple[bool, str] | None  # (still within the provisioning time, evidence line)


@dataclass(frozen=True)
class _WeightsHint:
    weights_bytes: int
    source: str

    def describe(self) -> str:
        return f"{quantities.format_bytes(self.weights_bytes)} of weights, {self.source}"


def _bytes_per_parameter(name: str) -> Decimal:
    lowered = name.lower()
    if any(marker in lowered for marker in ("awq", "gptq", "int4", "w4a16", "4bit", "bnb")):
        return Decimal("0.5")
    if any(marker in lowered for marker in ("fp8", "int8", "w8a8", "8bit")):
        return Decimal(1)
    return Decimal(2)


def _requests_some(container: Mapping[str, Any], resource: str) -> bool:
    """A positive request: utilization over a zero request is undefined, like over a missing one."""
    amount = quantities.try_parse(common.effective_requests(container).get(resource))
    return amount is not None and amount > 0


def _memory_backed(volume: Mapping[str, Any]) -> bool:
    empty_dir = volume.get("emptyDir")
    if isinstance(empty_dir, Mapping) and empty_dir.get("medium") == "Memory":
        return True
    host_path = volume.get("hostPath")
    return isinstance(host_path, Mapping) and str(host_path.get("path", "")).rstrip("/") == SHM_PATH


def _describe_volume(volume: Mapping[str, Any] | None) -> str:
    if volume is None:
        return "the pod declares no volume of that name"
    if isinstance(volume.get("emptyDir"), Mapping):
        return "an emptyDir without medium: Memory, i.e. on the node's disk"
    sources = [key for key in volume if key != "name"]
    return f"a {', '.join(sources) or 'sourceless'} volume"


def _replace_or_append(
    items: list[dict[str, Any]], matches: Callable[[dict[str, Any]], bool], new: dict[str, Any]
) -> list[dict[str, Any]]:
    """``items`` with the first matching entry replaced by ``new`` in place, or ``new`` appended."""
    for index, item in enumerate(items):
        if matches(item):
            return [*items[:index], new, *items[index + 1 :]]
    return [*items, new]


def _minutes(duration: timedelta) -> str:
    minutes = duration.total_seconds() / 60
    return f"{math.floor(minutes)} min" if minutes >= 1 else f"{int(duration.total_seconds())} s"
