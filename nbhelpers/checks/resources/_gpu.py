"""``RESOURCES_GPU_NOT_VISIBLE``: vLLM finds no GPU, because none is requested or the container cannot reach it."""

from __future__ import annotations

import re
from collections.abc import Mapping

from nbhelpers.checks.resources._facts import LogHit, ResourceFacts, describe_resources, find_log_hits
from nbhelpers.facts import common, vllm_args
from nbhelpers.findings import patches
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.sources import kube

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


def gpu_not_visible(facts: ResourceFacts) -> Finding | None:
    devices = common.accelerator_requests(facts.serving)
    log_hits = find_log_hits(facts.evidence, facts.pods, facts.container_name, _NO_GPU_LOG)
    hidden = _hiding_env(facts)
    if log_hits:
        return _cuda_unavailable(facts, devices, log_hits, hidden)
    if devices or not _runs_vllm(facts):
        return None
    platform = _platform(facts)
    if platform not in PLATFORM_RESOURCES:
        return None
    return _gpu_not_requested(facts, platform, hidden)


def _runs_vllm(facts: ResourceFacts) -> bool:
    image = str(facts.serving.get("image") or "").lower()
    return facts.server.server == vllm_args.VLLM or "vllm" in image


def _platform(facts: ResourceFacts) -> str:
    """cuda | rocm | cpu | other, from flags, env, image name and vLLM's own platform log line."""
    image = str(facts.serving.get("image") or "").lower()
    env = vllm_args.literal_env(facts.serving)
    device = (facts.server.flag("device") or "").lower()
    if (
        device == "cpu"
        or env.get("VLLM_TARGET_DEVICE", "").lower() == "cpu"
        or "VLLM_CPU_KVCACHE_SPACE" in env
        or "cpu" in image
        or find_log_hits(facts.evidence, facts.pods, facts.container_name, _CPU_PLATFORM_LOG)
    ):
        return "cpu"
    if "rocm" in image:
        return "rocm"
    if device not in ("", "auto", "cuda") or any(marker in image for marker in _OTHER_PLATFORM_MARKERS):
        return "other"
    return "cuda"


def _gpu_not_requested(facts: ResourceFacts, platform: str, hidden: list[str]) -> Finding:
    resource = PLATFORM_RESOURCES[platform]
    count = facts.gpu_devices_wanted()
    summary = (
        f"{facts.container_name} runs vLLM built for {platform.upper()} ({facts.serving.get('image')}) but requests "
        f"no {resource}. The device plugin only hands GPUs to containers that ask for them, so vLLM finds no GPU "
        "and exits at start-up (or, on a node whose runtime exposes every GPU, shares GPUs the scheduler gave to "
        "other pods). The pod never becomes ready."
    )
    lines = [describe_resources(facts.serving), f"image: {facts.serving.get('image')}"]
    if facts.server.argv:
        lines.append(f"command line: {common.shorten(' '.join(facts.server.argv))}")
    lines.extend(hidden)
    what = (
        f"Request {count} {resource} (tensor-parallel × pipeline-parallel size) as a limit on "
        f"{facts.container_name}; device resources are limit-only. If the model is meant to run on CPU, use "
        "vLLM's CPU image instead."
    )
    plan = facts.isvc_resources_patch({"limits": {resource: str(count)}})
    return Finding(
        code="RESOURCES_GPU_NOT_VISIBLE",
        title=f"vLLM on {platform.upper()} with no {resource} request",
        summary=summary,
        objects=(facts.isvc_ref, facts.workload.ref),
        evidence=tuple(lines),
        fix=Fix.from_plan(what, plan),
    )


def _cuda_unavailable(
    facts: ResourceFacts, devices: Mapping[str, int], hits: list[LogHit], hidden: list[str]
) -> Finding:
    requested = ", ".join(f"{name} {count}" for name, count in sorted(devices.items())) or "no GPU"
    restarts = sum(kube.restart_count(pod) for pod in facts.pods)
    summary = (
        f"The engine in {facts.container_name} found no usable GPU ({hits[0].line!r}) although the container "
        f"requests {requested}. vLLM exits when it cannot pick a device, so the container restarts "
        f"({restarts} restarts across the predictor pods) and never serves."
    )
    lines = [hit.describe() for hit in hits] + [describe_resources(facts.serving), *hidden]
    plan = None
    if hidden:
        what = (
            "The container's env hides the GPUs from CUDA: remove "
            + ", ".join(line.split(":", 1)[0].removeprefix("env ") for line in hidden)
            + "."
        )
        plan = _isvc_env_patch(facts)
    elif not devices and _runs_vllm(facts) and _platform(facts) in PLATFORM_RESOURCES:
        resource = PLATFORM_RESOURCES[_platform(facts)]
        count = facts.gpu_devices_wanted()
        what = f"Request {count} {resource} as a limit on {facts.container_name} (device resources are limit-only)."
        plan = facts.isvc_resources_patch({"limits": {resource: str(count)}})
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
            facts.isvc_ref,
            *(f"Pod/{facts.evidence.target.namespace}/{pod}" for pod in dict.fromkeys(h.pod for h in hits)),
        ),
        evidence=tuple(lines),
        fix=Fix.from_plan(what, plan),
    )


def _hiding_env(facts: ResourceFacts) -> list[str]:
    """Literal env values that leave CUDA with no device."""
    env = vllm_args.literal_env(facts.serving)
    lines = []
    if "CUDA_VISIBLE_DEVICES" in env and env["CUDA_VISIBLE_DEVICES"].strip() in ("", "-1", "none"):
        lines.append(f"env CUDA_VISIBLE_DEVICES: {env['CUDA_VISIBLE_DEVICES']!r} hides every GPU from CUDA")
    if env.get("NVIDIA_VISIBLE_DEVICES", "").strip().lower() in ("void", "none"):
        lines.append(f"env NVIDIA_VISIBLE_DEVICES: {env['NVIDIA_VISIBLE_DEVICES']!r} mounts no GPU")
    return lines


def _isvc_env_patch(facts: ResourceFacts) -> patches.PatchPlan | None:
    located = common.isvc_serving_container(facts.evidence.isvc)
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

    return patches.plan_patch(facts.evidence.isvc, drop_hiding)
