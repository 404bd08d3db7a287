"""The facts every resources finding quotes: the serving container and its pods, the InferenceService and
runtime that declare its resources, the model's size, and the log lines that match.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common, engine, vllm_args
from nbhelpers.findings import patches
from nbhelpers.models.load_time import WEIGHTS_LOADED
from nbhelpers.sources import kinds, kube
from nbhelpers.util import quantities

# The headroom an OOM-killed limit gets: the kill says the peak was above it, not by how much.
OOM_HEADROOM = Decimal("1.5")
_WEIGHTS_LOG = WEIGHTS_LOADED
_PARAMETERS = re.compile(r"(?:(\d+)x)?(\d+(?:\.\d+)?)[bB](?![a-zA-Z0-9])")


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


def find_log_hits(
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


def container_named(pod_spec: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    return next((c for c in kube.containers(pod_spec) if c.get("name") == name), None)


def describe_resources(container: Mapping[str, Any]) -> str:
    resources = container.get("resources") or {}
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}

    def show(values: Mapping[str, Any]) -> str:
        return ", ".join(f"{k}={v}" for k, v in sorted(values.items())) or "none"

    return f"{container.get('name')}: requests {show(requests)}; limits {show(limits)}"


class ResourceFacts:
    """The serving container and its pods, and the InferenceService and runtime that declare its resources."""

    def __init__(self, evidence: Evidence, workload: common.Workload) -> None:
        self.evidence = evidence
        self.workload = workload
        self.serving = workload.serving
        self.container_name = str(workload.serving.get("name"))
        self.server = vllm_args.parse_container(workload.serving)
        self.pods = common.predictor_pods(evidence)
        self.isvc_ref = kube.ref(evidence.isvc)

    def gpu_devices_wanted(self) -> int:
        tp = vllm_args.int_flag(self.server, "tensor-parallel-size") or 1
        pp = vllm_args.int_flag(self.server, "pipeline-parallel-size") or 1
        return tp * pp

    def runtime(self) -> Mapping[str, Any] | None:
        predictor = kube.spec(self.evidence.isvc).get("predictor") or {}
        model = predictor.get("model") or {}
        name = model.get("runtime") if isinstance(model, Mapping) else None
        if not name:
            return None
        runtime = common.named(self.evidence, kinds.SERVING_RUNTIME, str(name))
        if runtime is not None:
            return runtime
        return next((r for r in self.evidence.of(kinds.CLUSTER_SERVING_RUNTIME) if kube.name(r) == name), None)

    def runtime_container(self, runtime: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        if runtime is None:
            return None
        return common.serving_container(kube.spec(runtime))

    def isvc_resources_patch(self, change: Mapping[str, Mapping[str, str]]) -> patches.PatchPlan | None:
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

    def weights_hint(self) -> WeightsHint | None:
        workers = self.gpu_devices_wanted()
        for hit in find_log_hits(self.evidence, self.pods, self.container_name, _WEIGHTS_LOG):
            match = _WEIGHTS_LOG.search(hit.line)
            assert match is not None
            # V0 prints "GB" but divides by 2^30 (see nbhelpers/models/vllm_log.py): both units are GiB.
            per_gpu = Decimal(match.group(1)) * quantities.GIB
            return WeightsHint(int(per_gpu * workers), f"vLLM logged {match.group(0)!r} per GPU × {workers} GPU(s)")
        for name in engine.model_names(self.evidence, self.workload):
            match = _PARAMETERS.search(name.rsplit("/", 1)[-1])
            if match is None:
                continue
            experts = int(match.group(1) or 1)
            billions = Decimal(match.group(2)) * experts
            bytes_per_parameter = _bytes_per_parameter(name)
            return WeightsHint(
                int(billions * 10**9 * bytes_per_parameter),
                f"estimated from the name {name!r}: {billions.normalize():f}B parameters × {bytes_per_parameter} bytes",
            )
        return None


@dataclass(frozen=True)
class WeightsHint:
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
