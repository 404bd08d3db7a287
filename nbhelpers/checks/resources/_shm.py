"""``RESOURCES_SHM_MISSING``: tensor or pipeline parallelism without a memory-backed /dev/shm."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from nbhelpers.checks.resources._facts import ResourceFacts, find_log_hits
from nbhelpers.facts import common, vllm_args
from nbhelpers.findings import patches
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.sources import kube

SHM_PATH = "/dev/shm"
SHM_VOLUME = "dshm"
# vLLM's Kubernetes guide mounts a 2 GiB memory-backed /dev/shm; it counts against the memory limit.
SHM_SIZE_LIMIT = "2Gi"
# NCCL and PyTorch failures of a too small /dev/shm.
_SHM_LOG = re.compile(
    r"Error while creating shared memory segment"
    r"|Bus error"
    r"|/dev/shm\S*.*(?:No space left on device|Cannot allocate memory)"
    r"|unable to write to file </torch_"
)


def shm_missing(facts: ResourceFacts) -> Finding | None:
    tp = vllm_args.int_flag(facts.server, "tensor-parallel-size") or 1
    pp = vllm_args.int_flag(facts.server, "pipeline-parallel-size") or 1
    if tp * pp <= 1:
        return None
    mount = next(
        (m for m in facts.serving.get("volumeMounts") or [] if str(m.get("mountPath", "")).rstrip("/") == SHM_PATH),
        None,
    )
    volume = None
    if mount is not None:
        volume = next(
            (v for v in facts.workload.pod_spec.get("volumes") or [] if v.get("name") == mount.get("name")), None
        )
        if volume is not None and _memory_backed(volume):
            return None
    hits = find_log_hits(facts.evidence, facts.pods, facts.container_name, _SHM_LOG)
    restarts = sum(kube.restart_count(pod) for pod in facts.pods)
    parallel = f"--tensor-parallel-size {tp}" + (f" and --pipeline-parallel-size {pp}" if pp > 1 else "")
    if mount is None:
        state = f"no volume is mounted at {SHM_PATH}, so the container gets the runtime's 64 MiB default"
    else:
        state = (
            f"{SHM_PATH} is mounted from volume {mount.get('name')!r}, which is not memory-backed "
            f"({_describe_volume(volume)})"
        )
    summary = (
        f"{facts.container_name} runs {parallel} ({tp * pp} worker processes), and {state}. NCCL and vLLM's "
        "workers pass tensors through shared memory; a small or disk-backed /dev/shm makes them fail with bus "
        "errors or crawl."
    )
    severity = None
    if hits and restarts:
        severity = Severity.CRITICAL
        summary += f" The logs show that failure and the pods restarted {restarts} times: it is breaking serving now."
    lines = [f"command line: {common.shorten(' '.join(facts.server.argv))}"]
    lines.append(
        f"volumeMounts of {facts.container_name}: "
        + (
            ", ".join(f"{m.get('name')}→{m.get('mountPath')}" for m in facts.serving.get("volumeMounts") or [])
            or "none"
        )
    )
    lines.extend(hit.describe() for hit in hits)
    plan = _shm_patch(facts, mount)
    what = (
        f"Mount a memory-backed emptyDir (medium: Memory, sizeLimit {SHM_SIZE_LIMIT}) at {SHM_PATH} in "
        f"{facts.container_name}; the predictor's volumes list and the container's volumeMounts are carried whole. "
        "The size counts against the container's memory limit."
    )
    return Finding(
        code="RESOURCES_SHM_MISSING",
        title=f"tensor parallel {tp * pp} without a memory-backed /dev/shm",
        summary=summary,
        objects=(facts.isvc_ref, facts.workload.ref),
        evidence=tuple(lines),
        fix=Fix.from_plan(what, plan, no_patch=common.no_owner_patch(facts.evidence)),
        severity=severity,
    )


def _shm_patch(facts: ResourceFacts, mount: Mapping[str, Any] | None) -> patches.PatchPlan | None:
    located = common.isvc_serving_container(facts.evidence.isvc)
    if located is None:
        return None
    _, accessor = located
    volume_name = str(mount.get("name")) if mount is not None else SHM_VOLUME
    runtime_container = None if accessor.is_custom_container else facts.runtime_container(facts.runtime())

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

    return patches.plan_patch(facts.evidence.isvc, add_shm)


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
