"""The finding-code reference, generated from the code catalog so it cannot drift (DESIGN §4.4).

For every code in :data:`nbhelpers.findings.model.CATALOG`: what it means and why it
causes the symptom (the catalog's ``meaning`` and ``reference``), how to fix
it and what evidence the check reads (:data:`GUIDES`, kept here beside the
renderers; a test asserts it covers exactly the catalog's codes), and the
cause edges in both directions (:data:`nbhelpers.findings.model.CAUSE_EDGES`).

Two renderings: plain text for ``kserve-runbook codes [CODE]`` and an HTML
appendix for report.html whose anchors (``#code-<CODE>``) each finding links
to, so the links work offline.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from html import escape

from nbhelpers.checks import STEP_BY_ID
from nbhelpers.errors import RunbookError
from nbhelpers.findings.model import CATALOG, CAUSE_EDGES, Severity


@dataclass(frozen=True)
class CodeGuide:
    fix: str  # what to change, in general terms (each finding carries the exact command)
    evidence: str  # what the check reads to raise the code


GUIDES: dict[str, CodeGuide] = {
    "ISVC_NOT_READY": CodeGuide(
        "Fix the layer the failing condition names; the code ranked above it in the report is usually that "
        "layer. The InferenceService turns Ready by itself once its predictor and ingress are.",
        "The InferenceService's Ready, PredictorReady and IngressReady conditions, with reason and message.",
    ),
    "ENDPOINTS_NONE_READY": CodeGuide(
        "Make the predictor pods ready: follow the probes, ports and resources findings. For a scaled-to-zero "
        "Knative revision, keep minReplicas at 1 or more while traffic is expected.",
        "Endpoints / EndpointSlices of the serving Service (Serverless: <revision>-private of each revision "
        "with traffic), the predictor pods' Ready condition, the ready-pods metric.",
    ),
    "ENDPOINTS_SELECTOR_MISMATCH": CodeGuide(
        "Make the Service's selector match the predictor pods' labels (or the labels the selector expects); "
        "for objects KServe generates, change the InferenceService, not the Service.",
        "Services in the namespace with a selector, compared with the labels of the predictor pods.",
    ),
    "ROUTING_REVISION_NOT_READY": CodeGuide(
        "Fix what the Revision's condition reports (progress deadline, missing container, failing probes); "
        "KServe creates a new revision when the InferenceService changes.",
        "Knative Service, Configuration and Revision conditions, and the revisions' traffic split.",
    ),
    "ROUTING_LAYER_MISMATCH": CodeGuide(
        "Install the routing layer the deployment mode needs (Knative and its networking layer for Serverless, "
        "an Ingress or Gateway API controller for RawDeployment), or change the mode or the inferenceservice-"
        "config ingress settings to one that exists.",
        "The deployment mode, which routing CRDs exist (Knative, Istio, Gateway API), the VirtualService, "
        "HTTPRoute or Ingress KServe should have created, and the inferenceservice-config ConfigMap.",
    ),
    "ROUTING_HOST_MISMATCH": CodeGuide(
        "Point the route at the host clients use and at a gateway that serves it, or call the URL the "
        "InferenceService reports in status.url.",
        "status.url of the InferenceService, hosts and parentRefs/gateways of its routes, the gateways' "
        "listeners and their hostnames.",
    ),
    "PROBE_READINESS_MISSING": CodeGuide(
        "Add a readiness probe on the engine's own endpoint (vLLM: httpGet /health on its port) so a pod "
        "receives traffic only once the model is loaded.",
        "The serving container's probes on the live pod (Serverless: as queue-proxy receives them), pod "
        "Ready transitions and 5xx at the edge in the window.",
    ),
    "PROBE_LIVENESS_KILLS_DURING_LOAD": CodeGuide(
        "Give the load its own budget: a startupProbe whose failureThreshold × periodSeconds exceeds the "
        "longest load seen (with margin), keeping liveness tight for later hangs. Serverless also needs a "
        "progress deadline above that budget.",
        "Liveness and startup probe settings, Killing and Unhealthy events, restart counts and exit reasons, "
        "the previous container's log (did it reach 'Application startup complete.'), load times measured "
        "from the logs or estimated from the model size.",
    ),
    "PROBE_STARTUP_BUDGET_SHORT": CodeGuide(
        "Raise the startup (or liveness) budget above the longest load with a margin, before a cold node or "
        "an empty image cache makes the load slower.",
        "Probe budgets against the load time measured in engine logs and pod timings, or estimated from the "
        "model's parameter count.",
    ),
    "PROBE_NOT_MODEL_AWARE": CodeGuide(
        "Probe the inference engine itself: httpGet on vLLM's port and /health, not a sidecar's port, a "
        "shell command or a path the server does not serve.",
        "Probe handlers (port, path, command, gRPC), the containers and ports they reach, and whether pods "
        "turned Ready before the server logged that it was serving.",
    ),
    "PROBE_LOAD_TIME_UNKNOWN": CodeGuide(
        "Nothing to fix. Capture a bundle that includes a pod start (its events and log), or name the model "
        "so its size is visible, to let the probe budgets be judged.",
        "Engine start-up log lines, pod start and Ready times, the model name in flags or storageUri.",
    ),
    "PORT_MISMATCH": CodeGuide(
        "Make the server listen where traffic is sent (the --port flag) or declare the port it listens on as "
        "the containerPort; keep probes on that same port.",
        "The server's command line and its defaults, containerPorts, the Service port → targetPort chain "
        "(through queue-proxy or the KServe agent when present), probe ports.",
    ),
    "RESOURCES_REQUESTS_MISSING": CodeGuide(
        "Set a memory request on the serving container (about the host memory the model load needs), and a "
        "cpu request on every container when a CPU-utilization HPA scales the pods.",
        "Requests and limits of each container on the live pod, and the HPA's metrics.",
    ),
    "RESOURCES_GPU_UNSCHEDULABLE": CodeGuide(
        "Free or add GPU nodes (a node pool or cluster-autoscaler that can provide the GPU type), or lower "
        "the replica count or GPUs per pod; check taints, tolerations and node selectors.",
        "Pending pods, FailedScheduling events and their reasons, nodes' allocatable GPUs, cluster-autoscaler events.",
    ),
    "RESOURCES_HOST_OOMKILLED": CodeGuide(
        "Raise the container's memory limit (and request) above what the load and serving need in host RAM, "
        "or load weights in a way that uses less CPU memory.",
        "Containers' last termination reason OOMKilled and exit code 137, the termination-reason metric, "
        "memory limits.",
    ),
    "RESOURCES_GPU_NOT_VISIBLE": CodeGuide(
        "Request the GPU as a limit (nvidia.com/gpu), make sure the node runs the device plugin and the "
        "NVIDIA runtime, and that the image's CUDA matches the driver.",
        "GPU limits of the serving container, nodes' GPU capacity, CUDA / 'no GPU' errors in the engine log.",
    ),
    "RESOURCES_SHM_MISSING": CodeGuide(
        "Mount an emptyDir with medium: Memory at /dev/shm, sized for NCCL (a few GiB) on tensor-parallel pods.",
        "--tensor-parallel-size of the server and the pod's volumes and mounts at /dev/shm.",
    ),
    "COLDSTART_SCALE_TO_ZERO": CodeGuide(
        "Keep at least one replica (minReplicas ≥ 1) for a model with a long load, or make sure every client "
        "and proxy waits longer than the cold start.",
        "minReplicas, Knative min-scale / scale-to-zero settings and config-autoscaler, measured cold starts.",
    ),
    "COLDSTART_EXCEEDS_TIMEOUT": CodeGuide(
        "Shorten the cold start (minReplicas ≥ 1, a cached image, a faster model load) or raise the timeout "
        "that fires first above it.",
        "Cold-start phases per pod (scheduling, image pull, start, model load), the timeout chain from the "
        "client to the revision, Knative's progress deadline, activator errors.",
    ),
    "COLDSTART_CHURN": CodeGuide(
        "Keep replicas longer: a scale-down stabilization window or Knative scale-down-delay that outlasts "
        "the gaps between bursts, or a higher minimum.",
        "The ready-pods series (falls followed by rises), cold starts paid in the window, autoscaler "
        "scale-down settings.",
    ),
    "HPA_METRICS_API_UNAVAILABLE": CodeGuide(
        "Install or repair the provider behind the API (metrics-server, prometheus-adapter, KEDA) until its "
        "APIService reports Available=True.",
        "APIServices for metrics.k8s.io, custom.metrics.k8s.io and external.metrics.k8s.io with their "
        "Available condition, and the Service each one names.",
    ),
    "HPA_METRIC_FETCH_FAILED": CodeGuide(
        "Fix the link the HPA's message names: the metrics API, the adapter rule, the metric name or its "
        "labels; the HPA resumes by itself once the metric is served.",
        "The HPA's ScalingActive condition and FailedGet*Metric events, with their messages.",
    ),
    "HPA_METRIC_SERIES_MISSING": CodeGuide(
        "Make Prometheus scrape the metric with namespace and pod labels, or fix the adapter rule's series "
        "query and name mapping so the HPA's metric name maps to a series that exists.",
        "The HPA's metric names, the prometheus-adapter rules (renaming included) and the matching series "
        "in Prometheus for the predictor pods.",
    ),
    "HPA_METRICS_API_CONFLICT": CodeGuide(
        "Keep one provider per metrics API group version: remove or rename the other APIService (for "
        "example, let KEDA own external metrics and the adapter custom metrics).",
        "APIServices and the providers that register them (prometheus-adapter, KEDA, others).",
    ),
    "HPA_MISSING": CodeGuide(
        "Let KServe create the HPA (autoscaler class hpa with scaleMetric and scaleTarget on the predictor) "
        "or create one that targets the predictor Deployment; set the class to none if a fixed count is "
        "intended.",
        "The deployment mode, serving.kserve.io/autoscalerClass, HPAs and ScaledObjects in the namespace and "
        "what they target.",
    ),
    "HPA_TARGET_NOT_FOUND": CodeGuide(
        "Point scaleTargetRef at the predictor's Deployment (RawDeployment: <isvc>-predictor), or delete the "
        "stale autoscaler.",
        "scaleTargetRef of each HPA or ScaledObject and the workloads that exist.",
    ),
    "HPA_TARGET_NOT_SERVING": CodeGuide(
        "Point the autoscaler at the workload whose pods back the serving Service.",
        "scaleTargetRef, the Deployments' pod labels and the serving Service's selector and endpoints.",
    ),
    "HPA_CONFLICT": CodeGuide(
        "Leave one autoscaler per workload: delete the extra HPA, or choose between the KPA and an HPA with "
        "the autoscaler class.",
        "HPAs, ScaledObjects and the Knative autoscaler class acting on the same workload; replica changes "
        "that undo each other.",
    ),
    "HPA_CPU_METRIC_ON_GPU": CodeGuide(
        "Scale on a signal vLLM exposes: requests running or waiting per pod (vllm:num_requests_running / "
        "_waiting) through an adapter or KEDA, or Knative concurrency.",
        "The HPA's metrics (Resource cpu/memory) and the serving container's GPU limit.",
    ),
    "HPA_TARGET_ABOVE_POD_CAPACITY": CodeGuide(
        "Set the per-pod target below the pod's request ceiling (about 80 % of the --max-num-seqs in effect, "
        "or of the running plateau), so a pod is added before the engine saturates.",
        "The HPA averageValue or KPA target, the --max-num-seqs in effect (flag, version and GPU default, or "
        "the observed plateau of running requests).",
    ),
    "HPA_AT_MAX": CodeGuide(
        "Raise maxReplicas to what the demand needs, and check the cluster has GPUs for that many pods; or "
        "add capacity per pod where the KV cache has room.",
        "HPA current/desired replicas against maxReplicas, ScalingLimited=TooManyReplicas, waiting requests "
        "in the window.",
    ),
    "HPA_BEHAVIOR_SLOW": CodeGuide(
        "Let scale-up add pods early (short or no stabilization, a pods-per-period policy that fits the burst) "
        "and keep scale-down slow enough to outlast the cold start.",
        "The HPA's behavior (policies, stabilization windows) against the measured cold start and the load.",
    ),
    "QUEUE_SATURATION": CodeGuide(
        "Add capacity: more replicas (and an autoscaler that reacts to queueing), or more concurrent "
        "sequences per pod where the KV cache has room.",
        "vllm:num_requests_running and _waiting per pod against the ceiling in effect, queue time, KV usage, "
        "preemptions and 503/504 at the edge.",
    ),
    "KV_CACHE_PRESSURE": CodeGuide(
        "Give the KV cache more room (higher gpu-memory-utilization where safe, a smaller max-model-len, "
        "fp8 KV cache, more GPUs per replica) or admit fewer concurrent sequences.",
        "vllm:kv_cache_usage_perc per pod, the preemption rate, prompt and generation lengths, the cache "
        "configuration the engine logged.",
    ),
    "GPU_OOM": CodeGuide(
        "Lower what the engine claims (gpu-memory-utilization, max-num-seqs, max-num-batched-tokens), or "
        "give it a larger GPU or more GPUs; make sure nothing else uses the card.",
        "CUDA out-of-memory lines and engine-death errors in current and previous logs, restarts, DCGM "
        "framebuffer usage.",
    ),
    "VLLM_KV_CAPACITY_EXCEEDED": CodeGuide(
        "Lower max-model-len to what fits (vLLM's message states it), or free memory for the cache: a higher "
        "gpu-memory-utilization, fp8 KV cache, more tensor-parallel GPUs.",
        "vLLM's start-up KV-cache error and memory lines in the log, or the KV bytes per token computed from "
        "the model's configuration and the flags.",
    ),
    "VLLM_MEMORY_UTILIZATION_RISKY": CodeGuide(
        "Leave headroom: gpu-memory-utilization at or below about 0.9, or lower where other processes share the card.",
        "--gpu-memory-utilization, vLLM's free-memory-at-start check in the log, DCGM free framebuffer.",
    ),
    "TIMEOUT_MISALIGNED": CodeGuide(
        "Order the timeouts from outside in: each layer waits a little longer than the one behind it, and the "
        "innermost longer than p99 latency plus a replica's warm-up.",
        "Timeouts of the client (when stated), ingress annotations, VirtualService / HTTPRoute, the "
        "InferenceService and Revision, against observed latency.",
    ),
    "TIMEOUT_LB_DEFAULT": CodeGuide(
        "Set the load balancer's or ingress's timeout explicitly above the longest requests (for example the "
        "ingress-nginx proxy-read-timeout annotation), or bound generation length.",
        "Which edge sits in front (Ingress class, gateway, LB annotations), its default timeout, observed "
        "long-request latency and 504s at the edge.",
    ),
}


@dataclass(frozen=True)
class CodeReference:
    code: str
    step: str
    step_title: str
    severity: Severity
    meaning: str
    why: str
    fix: str
    evidence: str
    explains: tuple[str, ...]
    explained_by: tuple[str, ...]


def anchor(code: str) -> str:
    """The HTML id of a code's entry in the report's appendix."""
    return f"code-{code}"


def reference(code: str) -> CodeReference:
    """Everything known about ``code``; ``RunbookError`` for a code that is not in the catalog."""
    info = CATALOG.get(code)
    if info is None:
        raise RunbookError(f"unknown code {code!r}: run 'kserve-runbook codes' for the list")
    guide = GUIDES[code]
    return CodeReference(
        code=code,
        step=info.step,
        step_title=STEP_BY_ID[info.step].title,
        severity=info.severity,
        meaning=info.meaning,
        why=info.reference,
        fix=guide.fix,
        evidence=guide.evidence,
        explains=tuple(sorted(CAUSE_EDGES[code])),
        explained_by=tuple(sorted(source for source, targets in CAUSE_EDGES.items() if code in targets)),
    )


def all_references() -> list[CodeReference]:
    return [reference(code) for code in CATALOG]


# ------------------------------------------------------------------------------------------------ text


def catalog_line(entry: CodeReference) -> str:
    return f"{entry.code}  [{entry.severity.value}, step {entry.step}]  {entry.meaning}"


def reference_text(code: str, width: int = 100) -> str:
    """The full entry for ``kserve-runbook codes CODE``."""
    import textwrap

    entry = reference(code)

    def block(heading: str, text: str) -> list[str]:
        return [f"{heading}:", *textwrap.wrap(text, width, initial_indent="  ", subsequent_indent="  "), ""]

    lines = [catalog_line(entry), ""]
    lines += block("What it means", entry.meaning)
    lines += block("Why it causes the symptom", entry.why)
    lines += block("How to fix", entry.fix)
    lines += block("Evidence it reads", entry.evidence)
    lines += [f"explains: {', '.join(entry.explains) or 'nothing'}"]
    lines += [f"explained by: {', '.join(entry.explained_by) or 'nothing'}"]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ html

_LABEL_CELL = (
    "padding:3px 8px;border:1px solid #d1d5db;background:#f3f4f6;text-align:left;vertical-align:top;"
    "font-weight:600;width:12em;"
)
_TEXT_CELL = "padding:3px 8px;border:1px solid #d1d5db;text-align:left;vertical-align:top;"
_SEVERITY_TEXT = {Severity.CRITICAL: "critical", Severity.WARNING: "warning", Severity.INFO: "info"}


def _code_list(codes: Iterable[str], linked: set[str]) -> str:
    """Codes as inline code, linked to their entry when that entry is on the page."""
    rendered = [
        f'<a href="#{anchor(code)}"><code>{escape(code)}</code></a>'
        if code in linked
        else f"<code>{escape(code)}</code>"
        for code in codes
    ]
    return ", ".join(rendered) or "nothing"


def reference_html(codes: Iterable[str]) -> str:
    """The appendix "Finding codes in this report": one entry per code, each with its ``#code-<CODE>`` anchor.

    Cause edges link to the other entries that are on the page.
    """
    listed = list(dict.fromkeys(codes))
    present = set(listed)
    entries = []
    for code in listed:
        entry = reference(code)
        rows = "".join(
            f'<tr><th style="{_LABEL_CELL}">{heading}</th><td style="{_TEXT_CELL}">{body}</td></tr>'
            for heading, body in (
                ("What it means", escape(entry.meaning)),
                ("Why it causes the symptom", escape(entry.why)),
                ("How to fix", escape(entry.fix)),
                ("Evidence it reads", escape(entry.evidence)),
                ("Explains", _code_list(entry.explains, present)),
                ("Explained by", _code_list(entry.explained_by, present)),
            )
        )
        entries.append(
            f'<div class="kr-code-entry" id="{anchor(code)}" style="margin:10px 0;break-inside:avoid;">'
            f'<div style="margin-bottom:2px;"><code style="font-weight:700;font-size:14px;">{escape(code)}</code> '
            f'<span style="color:#374151;">default severity {_SEVERITY_TEXT[entry.severity]}, step '
            f"{escape(entry.step_title)}</span></div>"
            f'<table style="border-collapse:collapse;width:100%;table-layout:auto;margin:0;">{rows}</table></div>'
        )
    return "".join(entries)
