"""Step 4, ``resources``: are requests and limits sane, GPUs schedulable and visible, host memory
enough, and /dev/shm memory-backed?

Facts it rests on (docs/upstream-facts.md):

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
  container's default /dev/shm is 64 MiB;
- a multi-node LLMInferenceService's vLLM engine starts only when every pod of its LeaderWorkerSet group has
  joined, so one worker that does not run keeps the group's leader from serving.
"""

from __future__ import annotations

from dataclasses import replace

from nbhelpers.checks.resources._admission import pod_creation_rejected
from nbhelpers.checks.resources._config_error import container_config_error
from nbhelpers.checks.resources._facts import ResourceFacts
from nbhelpers.checks.resources._gpu import gpu_not_visible
from nbhelpers.checks.resources._host_oom import host_oom_killed
from nbhelpers.checks.resources._images import image_pull_failed
from nbhelpers.checks.resources._init_containers import init_container_failed
from nbhelpers.checks.resources._lws_group import group_incomplete
from nbhelpers.checks.resources._requests import requests_missing
from nbhelpers.checks.resources._shm import shm_missing
from nbhelpers.checks.resources._unschedulable import unschedulable
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common, presets
from nbhelpers.findings.model import Finding
from nbhelpers.findings.steps import StepInfo

STEP = StepInfo(
    "resources",
    "Resources",
    "Are requests and limits sane, GPUs schedulable and visible, memory enough?",
)


def run(evidence: Evidence) -> list[Finding]:
    common.skip_modelmesh(evidence)
    facts = ResourceFacts(evidence, common.current_workload(evidence))
    findings: list[Finding] = []
    findings.extend(requests_missing(facts))
    findings.extend(unschedulable(facts))
    for finding in (
        group_incomplete(facts.evidence),
        pod_creation_rejected(facts),
        image_pull_failed(facts),
        container_config_error(facts),
        init_container_failed(facts),
        host_oom_killed(facts),
        gpu_not_visible(facts),
        shm_missing(facts),
    ):
        if finding is not None:
            findings.append(finding)
    origin = presets.origin_line(evidence, ("resources",))  # an LLMInferenceService's resources may be a preset's
    return [replace(finding, evidence=(*finding.evidence, origin)) for finding in findings] if origin else findings
