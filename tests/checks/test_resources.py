"""The ``resources`` step: a failing fixture per code (Raw and Serverless), the tricky healthy cases, and
patches that, merged and rolled out, make the finding go away."""

from __future__ import annotations

import copy
import shlex
from typing import Any

import pytest
import yaml
from check_cases import apply_patch, evidence_of, json_merge_patch, load_case, only, rollout, serious
from patchcheck import assert_valid_object

from nbhelpers.checks import resources
from nbhelpers.facts import vllm_args
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding

ISVC_REF = "InferenceService.serving.kserve.io/llm/vllm-llm"
RAW_POD = "Pod/llm/vllm-llm-predictor-6d5f8b7c9-q8w2e"
KNATIVE_POD = "Pod/llm/vllm-llm-predictor-00001-deployment-7f9c6d-x2k4p"
RAW = ("checks/healthy/raw.yaml", "checks/healthy/resources_raw.yaml")
SERVERLESS = ("checks/healthy/serverless.yaml", "checks/healthy/resources_serverless.yaml")

HEALTHY = {
    "raw with GPU, memory, cpu and a CPU HPA": RAW,
    "serverless, resources from the runtime": SERVERLESS,
    "requests only via limits": (*RAW, "checks/healthy/resources_limits_only.yaml"),
    "Pending, then scheduled after a scale-up": (*RAW, "checks/healthy/resources_scheduled_after_scale_up.yaml"),
    "CPU build of vLLM without a GPU": (*RAW, "checks/healthy/resources_cpu_vllm.yaml"),
    "TP=2 with a memory-backed /dev/shm": (*RAW, "checks/healthy/resources_tp2_shm.yaml"),
    "queue-proxy without cpu request, no CPU HPA": (*SERVERLESS, "checks/healthy/resources_queue_proxy_no_cpu.yaml"),
    "pods created under a GPU quota with room": (*RAW, "checks/healthy/resources_pods_created_under_quota.yaml"),
    "one failed pull, then pulled": (*RAW, "checks/healthy/resources_image_pulled_after_retry.yaml"),
    "storage-initializer OOM-killed once, then completed": (
        *RAW,
        "checks/healthy/resources_storage_initializer_completed.yaml",
    ),
}


def _case(base: tuple[str, ...], failing: str) -> list[dict[str, Any]]:
    return load_case(*base, f"checks/{failing}")


def _run(objects: list[dict[str, Any]], **options: Any) -> list[Finding]:
    return resources.run(evidence_of(objects, **options))


def _fresh_pods(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the new pods of a rollout show: no restart history (the stand-in keeps the old status)."""
    result = []
    for obj in objects:
        if obj.get("kind") == "Pod":
            obj = copy.deepcopy(obj)
            obj["status"]["conditions"] = [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "True"},
            ]
            obj["status"]["containerStatuses"] = [
                {"name": c["name"], "ready": True, "restartCount": 0, "state": {"running": {}}}
                for c in obj["spec"]["containers"]
            ]
        result.append(obj)
    return result


def _after_fix(objects: list[dict[str, Any]], finding: Finding) -> list[dict[str, Any]]:
    """Merge the patch, validate the merged target and the rebuilt pods, and return the new cluster state."""
    assert finding.patch is not None
    patched = apply_patch(objects, finding)
    target = next(obj for obj in patched if _ref(obj) == finding.patch.target)
    assert_valid_object(target)
    rolled = _fresh_pods(rollout(patched))
    for pod in (obj for obj in rolled if obj["kind"] == "Pod"):
        assert_valid_object(pod)
    return rolled


def _ref(obj: dict[str, Any]) -> str:
    from nbhelpers.sources import kube

    return kube.ref(obj)


def _serving(objects: list[dict[str, Any]]) -> dict[str, Any]:
    pod = next(obj for obj in objects if obj["kind"] == "Pod")
    return next(c for c in pod["spec"]["containers"] if c["name"] == "kserve-container")


def _rollback_body(remediation: str) -> Any:
    words = shlex.split(remediation.split("Roll back:\n", 1)[1].strip())
    return yaml.safe_load(words[words.index("-p") + 1])


@pytest.mark.parametrize("case", sorted(HEALTHY))
def test_healthy_fixtures_have_no_resource_problem(case: str) -> None:
    assert serious(_run(load_case(*HEALTHY[case]))) == []


# --- RESOURCES_REQUESTS_MISSING -------------------------------------------------------------------


def test_serving_container_without_memory_request() -> None:
    objects = _case(RAW, "RESOURCES_REQUESTS_MISSING/raw_no_memory_request.yaml")
    finding = only(_run(objects), "RESOURCES_REQUESTS_MISSING")
    assert finding.level is Severity.WARNING
    assert finding.objects == (ISVC_REF, RAW_POD)
    assert "requests no memory" in finding.summary
    assert "kserve-container: requests cpu=4, nvidia.com/gpu=1; limits cpu=8, nvidia.com/gpu=1" in finding.evidence
    assert any("8B parameters × 2 bytes" in line for line in finding.evidence)
    # 8e9 parameters × 2 bytes × 1.5 = 24e9 bytes = 22.4 GiB, rounded up to whole GiB.
    resources_body = yaml.safe_load(finding.patch.body if finding.patch else "")["spec"]["predictor"]["containers"][0]
    assert resources_body["resources"]["requests"] == {"cpu": "4", "nvidia.com/gpu": "1", "memory": "23Gi"}
    assert resources_body["resources"]["limits"]["memory"] == "23Gi"
    assert "kubectl patch inferenceservices.serving.kserve.io vllm-llm -n llm --type merge" in finding.remediation
    fixed = _after_fix(objects, finding)
    assert _serving(fixed)["resources"]["requests"]["memory"] == "23Gi"
    assert [f for f in serious(_run(fixed)) if f.code == "RESOURCES_REQUESTS_MISSING"] == []


def test_rollback_restores_the_inference_service() -> None:
    objects = _case(RAW, "RESOURCES_REQUESTS_MISSING/raw_no_memory_request.yaml")
    finding = only(_run(objects), "RESOURCES_REQUESTS_MISSING")
    isvc = next(obj for obj in objects if obj["kind"] == "InferenceService")
    patched = next(obj for obj in apply_patch(objects, finding) if obj["kind"] == "InferenceService")
    assert json_merge_patch(patched, _rollback_body(finding.remediation)) == isvc


def test_cpu_hpa_with_a_serving_container_that_requests_no_cpu() -> None:
    objects = _case(RAW, "RESOURCES_REQUESTS_MISSING/raw_cpu_hpa_no_cpu_request.yaml")
    finding = only(_run(objects), "RESOURCES_REQUESTS_MISSING")
    assert finding.objects == (ISVC_REF, RAW_POD, "HorizontalPodAutoscaler/llm/vllm-llm-predictor")
    assert "scales on cpu utilization" in finding.summary and "kserve-container" in finding.summary
    assert (
        "HorizontalPodAutoscaler/llm/vllm-llm-predictor: target cpu Utilization, scaleTargetRef vllm-llm-predictor"
        in (finding.evidence)
    )
    # No cpu limit to copy and no usage measured: the finding says how to size it instead of inventing a number.
    assert finding.patch is None
    assert "kubectl top pod" in finding.remediation
    # The same container with a cpu limit requests that limit, and the HPA has its denominator.
    for obj in objects:
        if obj["kind"] == "Pod":
            obj["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "8"
            obj["spec"]["containers"][0]["resources"]["requests"].pop("cpu", None)
    assert [f for f in serious(_run(objects)) if f.code == "RESOURCES_REQUESTS_MISSING"] == []


def test_container_resource_metric_only_reads_its_container() -> None:
    objects = _case(RAW, "RESOURCES_REQUESTS_MISSING/raw_cpu_hpa_no_cpu_request.yaml")
    hpa = next(obj for obj in objects if obj["kind"] == "HorizontalPodAutoscaler")
    hpa["spec"]["metrics"] = [
        {
            "type": "ContainerResource",
            "containerResource": {"name": "cpu", "container": "istio-proxy", "target": {"type": "Utilization"}},
        }
    ]
    assert serious(_run(objects)) == []


def test_cpu_hpa_and_a_queue_proxy_with_zero_cpu_request() -> None:
    objects = _case(SERVERLESS, "RESOURCES_REQUESTS_MISSING/serverless_hpa_queue_proxy.yaml")
    finding = only(_run(objects), "RESOURCES_REQUESTS_MISSING")
    assert finding.title == "cpu HPA, but sidecar queue-proxy has no cpu request"
    assert finding.objects == (ISVC_REF, KNATIVE_POD, "HorizontalPodAutoscaler/llm/vllm-llm-predictor-00001")
    assert "queue-proxy: requests cpu=0; limits none" in finding.evidence
    assert finding.patch is not None and finding.patch.target == "ConfigMap/knative-serving/config-deployment"
    assert yaml.safe_load(finding.patch.body) == {"data": {"queue-sidecar-cpu-request": "25m"}}
    patched = apply_patch(objects, finding)
    config = next(
        obj for obj in patched if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == "config-deployment"
    )
    assert_valid_object(config)
    # Knative stamps the new value into queue-proxy of the next revision's pods.
    for obj in patched:
        if obj["kind"] == "Pod":
            queue = next(c for c in obj["spec"]["containers"] if c["name"] == "queue-proxy")
            queue["resources"] = {"requests": {"cpu": config["data"]["queue-sidecar-cpu-request"]}}
    assert serious(_run(patched)) == []


# --- RESOURCES_GPU_UNSCHEDULABLE -------------------------------------------------------------------


PENDING_POD = "Pod/llm/vllm-llm-predictor-6d5f8b7c9-p3n8v"


def test_pending_pod_with_insufficient_gpus() -> None:
    objects = _case(RAW, "RESOURCES_GPU_UNSCHEDULABLE/raw_insufficient_gpu.yaml")
    finding = only(_run(objects), "RESOURCES_GPU_UNSCHEDULABLE")
    assert finding.level is Severity.CRITICAL
    assert finding.objects == (ISVC_REF, PENDING_POD)
    assert finding.title == "1 pod(s) Pending: 2 node(s) Insufficient nvidia.com/gpu"
    assert "Pending for 40 min" in finding.summary and "none of the 3 nodes" in finding.summary
    assert "Each pod asks for nvidia.com/gpu 1" in finding.summary
    assert any(line.startswith("event FailedScheduling") and "×31" in line for line in finding.evidence)
    assert "nodes with allocatable nvidia.com/gpu: gpu-node-a 4, gpu-node-b 4 (3 nodes read)" in finding.evidence
    assert any("NotTriggerScaleUp" in line and "max node group size reached" in line for line in finding.evidence)
    # Capacity is the problem: options, no manifest patch.
    assert finding.patch is None
    assert "cluster autoscaler" in finding.remediation and "fewer GPUs per pod" in finding.remediation


def test_pending_pod_while_a_scale_up_provisions_is_only_info() -> None:
    objects = _case(RAW, "RESOURCES_GPU_UNSCHEDULABLE/raw_insufficient_gpu.yaml")
    for obj in objects:
        if obj["kind"] == "Event" and obj["reason"] == "NotTriggerScaleUp":
            obj["reason"] = "TriggeredScaleUp"
            obj["message"] = "pod triggered scale-up: [{gpu-l40s-pool 2->3 (max: 6)}]"
            obj["firstTimestamp"] = obj["lastTimestamp"] = "2026-01-15T11:52:00Z"
    finding = only(_run(objects), "RESOURCES_GPU_UNSCHEDULABLE")
    assert finding.level is Severity.INFO
    assert "scale-up" in finding.title
    # The same pod still Pending 20 minutes after the scale-up was triggered: the scale-up failed.
    for obj in objects:
        if obj["kind"] == "Event" and obj["reason"] == "TriggeredScaleUp":
            obj["firstTimestamp"] = obj["lastTimestamp"] = "2026-01-15T11:40:00Z"
    assert only(_run(objects), "RESOURCES_GPU_UNSCHEDULABLE").level is Severity.CRITICAL


def test_pod_that_no_node_can_ever_hold_names_the_largest_node() -> None:
    objects = _case(RAW, "RESOURCES_GPU_UNSCHEDULABLE/raw_insufficient_gpu.yaml")
    for obj in objects:
        if obj["kind"] == "Pod" and obj["metadata"]["name"].endswith("p3n8v"):
            for section in ("requests", "limits"):
                obj["spec"]["containers"][0]["resources"][section]["nvidia.com/gpu"] = "8"
    finding = only(_run(objects), "RESOURCES_GPU_UNSCHEDULABLE")
    assert "asks for nvidia.com/gpu 8" in finding.summary
    assert "gpu-node-a 4, gpu-node-b 4" in " ".join(finding.evidence)


# --- RESOURCES_INIT_CONTAINER_FAILED -----------------------------------------------------------------


def test_storage_initializer_oom_killed_at_its_small_limit() -> None:
    """kserve/kserve#5326: the init container is the one OOM-killed, not vLLM."""
    objects = _case(RAW, "RESOURCES_INIT_CONTAINER_FAILED/raw_storage_initializer_oomkilled.yaml")
    findings = _run(objects)
    finding = only(findings, "RESOURCES_INIT_CONTAINER_FAILED")
    assert "RESOURCES_HOST_OOMKILLED" not in {f.code for f in findings}
    assert finding.level is Severity.CRITICAL
    assert finding.objects == (ISVC_REF, RAW_POD)
    assert finding.title == "init container storage-initializer failing (OOMKilled)"
    assert "5 restarts" in finding.summary and "OOM-killed at its memory limit" in finding.summary
    assert (
        f"Pod {RAW_POD.rsplit('/', 1)[1]} init container storage-initializer: CrashLoopBackOff; last terminated "
        "OOMKilled, exit code 137, 5 restarts" in finding.evidence
    )
    assert "storage-initializer: requests cpu=100m, memory=100Mi; limits cpu=1, memory=1Gi" in finding.evidence
    assert "storageUri: hf://meta-llama/Llama-3.1-8B-Instruct" in finding.evidence
    assert "storageInitializer" in finding.remediation


def test_gated_model_refused_to_the_storage_initializer() -> None:
    """rh-ai-quickstart/ai-virtual-agent#200, the download done by the storage-initializer: 403 on a gated repo."""
    objects = _case(RAW, "RESOURCES_INIT_CONTAINER_FAILED/raw_gated_model_403.yaml")
    finding = only(_run(objects), "RESOURCES_INIT_CONTAINER_FAILED")
    assert finding.title == "init container storage-initializer failing (auth)"
    assert "is restricted and you are not in the authorized list" in finding.summary
    assert "termination message:" in " ".join(finding.evidence)
    assert "HF_TOKEN" in finding.remediation


def test_the_init_containers_log_is_read_and_quoted() -> None:
    """kserve/kserve#4400: the storage-initializer gets no HF_TOKEN; its log names the gated repository."""
    objects = _case(RAW, "RESOURCES_INIT_CONTAINER_FAILED/raw_storage_initializer_oomkilled.yaml")
    for pod in (obj for obj in objects if obj["kind"] == "Pod"):
        pod["status"]["initContainerStatuses"][0]["lastState"]["terminated"].update(reason="Error", exitCode=1)
    line = (
        "Access to model meta-llama/Meta-Llama-3-8B-Instruct is restricted. You must have access to it and be "
        "authenticated to access it. Please log in."
    )
    log = f"2026-01-15T11:54:51.000Z Downloading hf://meta-llama/Meta-Llama-3-8B-Instruct\n2026-01-15T11:54:52.000Z {line}\n"
    logs = {("vllm-llm-predictor-6d5f8b7c9-q8w2e", "storage-initializer.previous"): log}
    finding = only(_run(objects, logs=logs), "RESOURCES_INIT_CONTAINER_FAILED")
    assert finding.title == "init container storage-initializer failing (auth)"
    assert line in finding.summary
    assert any(entry.endswith(f"log: {line!r}") for entry in finding.evidence)


def test_an_oom_killed_init_container_is_not_quoted_as_an_error() -> None:
    """kserve/kserve#4726: the kernel kills the download; the log's last line is progress, not an error."""
    objects = _case(RAW, "RESOURCES_INIT_CONTAINER_FAILED/raw_storage_initializer_oomkilled.yaml")
    line = "2026-01-15 11:54:51.212 1 kserve INFO [storage.py:download():68] Copying contents of hf://m/x to local"
    logs = {
        ("vllm-llm-predictor-6d5f8b7c9-q8w2e", "storage-initializer.previous"): f"2026-01-15T11:54:51.214Z {line}\n"
    }
    finding = only(_run(objects, logs=logs), "RESOURCES_INIT_CONTAINER_FAILED")
    assert f"It last wrote: {line!r}." in finding.summary
    assert "Its error" not in finding.summary
    assert any(entry.endswith(f"log's last line: {line!r}") for entry in finding.evidence)


def test_a_failing_init_container_is_not_a_pod_still_starting() -> None:
    from nbhelpers.facts import pod_phases

    objects = _case(RAW, "RESOURCES_INIT_CONTAINER_FAILED/raw_storage_initializer_oomkilled.yaml")
    pod = next(obj for obj in objects if obj["kind"] == "Pod")
    stuck = pod_phases._stuck(pod["status"], None, None, {}, 0, "PodInitializing")
    assert stuck == "not scheduled: see the resources step"
    scheduled = pod_phases.parse_k8s_time("2026-01-15T11:30:01Z")
    stuck = pod_phases._stuck(pod["status"], scheduled, None, {}, 0, "PodInitializing")
    assert stuck == "init container failing: storage-initializer CrashLoopBackOff, see the resources step"


# --- RESOURCES_POD_CREATION_REJECTED ---------------------------------------------------------------


def test_gpu_quota_rejects_the_pods_with_the_numbers() -> None:
    """kserve/kserve#867: a namespace ResourceQuota; only FailedCreate shows it and no pod exists."""
    objects = load_case(*RAW, "checks/RESOURCES_POD_CREATION_REJECTED/raw_gpu_quota_exceeded.yaml", drop=[RAW_POD])
    finding = only(_run(objects), "RESOURCES_POD_CREATION_REJECTED")
    assert finding.level is Severity.CRITICAL
    assert finding.title == "pods rejected at creation (quota)"
    assert (
        "ResourceQuota gpu-quota: requested requests.nvidia.com/gpu=1, used requests.nvidia.com/gpu=4, "
        "limited requests.nvidia.com/gpu=4" in finding.summary
    )
    assert finding.objects == (
        ISVC_REF,
        "Deployment/llm/vllm-llm-predictor",
        "ReplicaSet/llm/vllm-llm-predictor-6d5f8b7c9",
    )
    assert any(line.startswith("event FailedCreate on ReplicaSet") and "×14" in line for line in finding.evidence)


def test_knative_revision_deploying_while_the_quota_wants_queue_proxy_requests() -> None:
    """knative/serving#13708: the Revision only says Deploying; the ReplicaSet's FailedCreate holds the quota rule."""
    objects = load_case(
        *SERVERLESS,
        "checks/RESOURCES_POD_CREATION_REJECTED/serverless_quota_requires_queue_proxy_requests.yaml",
        drop=[KNATIVE_POD],
    )
    finding = only(_run(objects), "RESOURCES_POD_CREATION_REJECTED")
    assert finding.title == "pods rejected at creation (quota requests)"
    assert (
        "ResourceQuota resource-quota: must specify limits.cpu,limits.memory,requests.cpu,requests.memory"
        in finding.summary
    )
    assert "queue-proxy" in finding.remediation


@pytest.mark.parametrize(
    ("message", "kind", "named"),
    [
        (
            'Error creating: pods "x" is forbidden: failed quota: resource-quota: must specify '
            "limits.cpu,limits.memory,requests.cpu,requests.memory",
            "quota requests",
            "ResourceQuota resource-quota: must specify limits.cpu,limits.memory,requests.cpu,requests.memory",
        ),
        (
            'Error creating: admission webhook "validate.kyverno.svc" denied the request: images must be signed',
            "webhook",
            "admission webhook validate.kyverno.svc: images must be signed",
        ),
        (
            'Error creating: pods "x" is forbidden: violates PodSecurity "restricted:latest": '
            "allowPrivilegeEscalation != false",
            "pod security",
            'PodSecurity "restricted:latest": allowPrivilegeEscalation != false',
        ),
        (
            'Error creating: pods "x" is forbidden: maximum memory usage per Container is 16Gi, but limit is 32Gi',
            "limit range",
            "LimitRange: maximum memory usage per Container is 16Gi, but limit is 32Gi",
        ),
    ],
)
def test_each_admission_rule_is_named(message: str, kind: str, named: str) -> None:
    objects = load_case(*RAW, "checks/RESOURCES_POD_CREATION_REJECTED/raw_gpu_quota_exceeded.yaml", drop=[RAW_POD])
    for obj in objects:
        if obj["kind"] == "Event":
            obj["message"] = message
        if obj["kind"] == "Deployment":
            obj["status"]["conditions"] = obj["status"]["conditions"][:1]
    finding = only(_run(objects), "RESOURCES_POD_CREATION_REJECTED")
    assert finding.title == f"pods rejected at creation ({kind})"
    assert named in finding.summary


# --- RESOURCES_CONTAINER_CONFIG_ERROR --------------------------------------------------------------


def test_storage_initializer_secret_missing() -> None:
    """ibm-cloud-labs/iks-handson#7's Init:CreateContainerConfigError, on the storage-initializer's HF_TOKEN Secret."""
    objects = _case(RAW, "RESOURCES_CONTAINER_CONFIG_ERROR/raw_storage_initializer_secret_missing.yaml")
    findings = _run(objects)
    finding = only(findings, "RESOURCES_CONTAINER_CONFIG_ERROR")
    assert "RESOURCES_INIT_CONTAINER_FAILED" not in {f.code for f in findings}
    assert finding.title == "container cannot be created: missing secret storage-config"
    assert finding.objects == (ISVC_REF, RAW_POD)
    assert (
        "Pod vllm-llm-predictor-6d5f8b7c9-q8w2e init container storage-initializer: waiting "
        "CreateContainerConfigError: 'secret \"storage-config\" not found'" in finding.evidence
    )


# --- RESOURCES_IMAGE_PULL_FAILED -------------------------------------------------------------------


def test_knative_cannot_resolve_the_image_digest() -> None:
    """kserve/kserve#993: Knative's controller cannot reach the private registry; no pod is ever created."""
    objects = load_case(
        *SERVERLESS,
        "checks/RESOURCES_IMAGE_PULL_FAILED/serverless_digest_resolution.yaml",
        drop=[KNATIVE_POD],
    )
    finding = only(_run(objects), "RESOURCES_IMAGE_PULL_FAILED")
    assert finding.level is Severity.CRITICAL
    assert finding.title == "image cannot be resolved (registry unreachable)"
    assert finding.objects == (ISVC_REF, "Revision.serving.knative.dev/llm/vllm-llm-predictor-00001")
    assert "failed to resolve image to digest" in finding.summary
    assert "registries-skipping-tag-resolving" in finding.remediation


def test_image_pull_denied_on_a_raw_deployment() -> None:
    """kserve/kserve#6215: the registry denies the repository; the pod sits in ImagePullBackOff."""
    objects = _case(RAW, "RESOURCES_IMAGE_PULL_FAILED/raw_image_pull_denied.yaml")
    finding = only(_run(objects), "RESOURCES_IMAGE_PULL_FAILED")
    assert finding.title == "image cannot be pulled (access denied)"
    assert finding.objects == (ISVC_REF, RAW_POD)
    assert "403 Forbidden" in finding.summary
    assert any("waiting ImagePullBackOff" in line for line in finding.evidence)


def test_the_pull_error_is_quoted_not_the_bare_reason_event() -> None:
    """The kubelet also records "Error: ErrImagePull" (reason Failed); it says nothing about why."""
    objects = _case(RAW, "RESOURCES_IMAGE_PULL_FAILED/raw_image_pull_denied.yaml")
    failed = next(obj for obj in objects if obj["kind"] == "Event" and obj["reason"] == "Failed")
    bare = {**failed, "metadata": {**failed["metadata"], "name": "bare-reason"}, "message": "Error: ErrImagePull"}
    finding = only(
        _run([*objects[: objects.index(failed)], bare, *objects[objects.index(failed) :]]),
        "RESOURCES_IMAGE_PULL_FAILED",
    )
    assert "The error: 'Failed to pull image" in finding.summary
    assert not any("Error: ErrImagePull" in line for line in finding.evidence)


# --- RESOURCES_HOST_OOMKILLED ----------------------------------------------------------------------


def test_oom_killed_at_the_runtime_default_limit() -> None:
    objects = _case(SERVERLESS, "RESOURCES_HOST_OOMKILLED/serverless_runtime_default_limit.yaml")
    finding = only(_run(objects), "RESOURCES_HOST_OOMKILLED")
    assert finding.level is Severity.CRITICAL
    assert finding.objects == (ISVC_REF, KNATIVE_POD)
    assert "6 restarts" in finding.summary and "8Gi" in finding.summary
    assert "runtime default of ServingRuntime.serving.kserve.io/llm/vllm-runtime" in finding.summary
    assert (
        f"{KNATIVE_POD} kserve-container: terminated OOMKilled (exit code 137) at 2026-01-15T11:52:10Z, 6 restarts"
        in finding.evidence
    )
    # max(1.5 × 8 GiB = 12 GiB, the 8B model's 14.9 GiB of weights) → 15Gi, set on the ISVC (merged into the runtime).
    assert yaml.safe_load(finding.patch.body if finding.patch else "") == {
        "spec": {"predictor": {"model": {"resources": {"requests": {"memory": "15Gi"}, "limits": {"memory": "15Gi"}}}}}
    }
    assert "1.5 × the limit that was exceeded (8 GiB)" in finding.remediation
    fixed = _after_fix(objects, finding)
    assert _serving(fixed)["resources"]["limits"] == {"cpu": "8", "memory": "15Gi", "nvidia.com/gpu": "1"}
    assert [f for f in serious(_run(fixed)) if f.code == "RESOURCES_HOST_OOMKILLED"] == []


def test_oom_killed_at_the_limit_the_inference_service_sets() -> None:
    objects = _case(RAW, "RESOURCES_HOST_OOMKILLED/raw_isvc_limit.yaml")
    finding = only(_run(objects), "RESOURCES_HOST_OOMKILLED")
    assert finding.objects == (ISVC_REF, RAW_POD)
    assert "memory limit origin: the InferenceService (vllm-llm)" in finding.evidence
    container = yaml.safe_load(finding.patch.body if finding.patch else "")["spec"]["predictor"]["containers"][0]
    assert container["resources"]["limits"] == {"cpu": "8", "memory": "6Gi", "nvidia.com/gpu": "1"}
    assert container["resources"]["requests"]["memory"] == "6Gi"
    fixed = _after_fix(objects, finding)
    assert [f for f in serious(_run(fixed)) if f.code == "RESOURCES_HOST_OOMKILLED"] == []


def test_oom_kills_of_pods_that_are_gone_come_from_kube_state_metrics() -> None:
    objects = load_case(*RAW)
    metric = {
        "promql": (
            "max by (pod, container, reason) "
            '(kube_pod_container_status_last_terminated_reason{namespace="llm", pod=~"vllm-llm-predictor-.+"})'
        ),
        "result": [
            {
                "metric": {
                    "pod": "vllm-llm-predictor-6d5f8b7c9-old01",
                    "container": "kserve-container",
                    "reason": "OOMKilled",
                },
                "values": [[1768476600, "1"]],
            },
            {
                "metric": {
                    "pod": "vllm-llm-predictor-6d5f8b7c9-old02",
                    "container": "kserve-container",
                    "reason": "Completed",
                },
                "values": [[1768476600, "1"]],
            },
        ],
    }
    finding = only(_run(objects, metrics={"pod_last_terminated_reason": metric}), "RESOURCES_HOST_OOMKILLED")
    assert (
        "kube-state-metrics: Pod vllm-llm-predictor-6d5f8b7c9-old01 kserve-container last terminated OOMKilled"
        in finding.evidence
    )
    assert not any("old02" in line for line in finding.evidence)
    assert "32Gi" in finding.summary


# --- RESOURCES_GPU_NOT_VISIBLE ---------------------------------------------------------------------


def test_cuda_vllm_without_a_gpu_request() -> None:
    objects = _case(RAW, "RESOURCES_GPU_NOT_VISIBLE/raw_no_gpu_request.yaml")
    finding = only(_run(objects), "RESOURCES_GPU_NOT_VISIBLE")
    assert finding.level is Severity.CRITICAL
    assert finding.objects == (ISVC_REF, RAW_POD)
    assert "requests no nvidia.com/gpu" in finding.summary
    # Two GPUs: one per tensor-parallel rank; a limit only, as for every device resource.
    container = yaml.safe_load(finding.patch.body if finding.patch else "")["spec"]["predictor"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert "nvidia.com/gpu" not in container["resources"]["requests"]
    fixed = _after_fix(objects, finding)
    assert serious(_run(fixed)) == []


def test_vllm_log_says_no_device_was_found() -> None:
    objects = _case(RAW, "RESOURCES_GPU_NOT_VISIBLE/raw_no_gpu_request.yaml")
    log = (
        "2026-01-15T11:55:03.120Z INFO 01-15 11:55:03 [__init__.py:241] No platform detected, vLLM is running on "
        "UnspecifiedPlatform\n"
        "2026-01-15T11:55:08.402Z RuntimeError: Failed to infer device type\n"
    )
    logs = {("vllm-llm-predictor-6d5f8b7c9-q8w2e", "kserve-container.previous"): log}
    finding = only(_run(objects, logs=logs), "RESOURCES_GPU_NOT_VISIBLE")
    assert finding.title == "CUDA not available in the serving container"
    assert "vllm-llm-predictor-6d5f8b7c9-q8w2e/kserve-container (previous)" in finding.evidence[0]
    assert "×2" in finding.evidence[0]  # both lines counted, the first quoted without its timestamp
    assert "'INFO 01-15 11:55:03" in finding.evidence[0]
    assert "5 restarts" in finding.summary and "requests no GPU" in finding.summary
    assert finding.patch is not None and "nvidia.com/gpu: '2'" in finding.patch.body


def test_cuda_hidden_by_an_env_variable() -> None:
    objects = _case(SERVERLESS, "RESOURCES_GPU_NOT_VISIBLE/serverless_cuda_hidden.yaml")
    assert serious(_run(objects)) == []  # the spec alone looks right: a GPU is requested
    logs = {
        ("vllm-llm-predictor-00001-deployment-7f9c6d-x2k4p", "kserve-container.previous"): (
            "2026-01-15T11:56:39.001Z RuntimeError: No CUDA GPUs are available\n"
        )
    }
    finding = only(_run(objects, logs=logs), "RESOURCES_GPU_NOT_VISIBLE")
    assert finding.objects == (ISVC_REF, KNATIVE_POD)
    assert "requests nvidia.com/gpu 1" in finding.summary and "4 restarts" in finding.summary
    assert "env CUDA_VISIBLE_DEVICES: '' hides every GPU from CUDA" in finding.evidence
    body = yaml.safe_load(finding.patch.body if finding.patch else "")
    assert body == {"spec": {"predictor": {"model": {"env": [{"name": "HF_HOME", "value": "/tmp/hf"}]}}}}
    fixed = _after_fix(objects, finding)
    assert all(entry["name"] != "CUDA_VISIBLE_DEVICES" for entry in _serving(fixed).get("env", []))


def test_gpu_requested_but_unreachable_explains_the_node_side() -> None:
    objects = load_case(*RAW)
    logs = {(RAW_POD.rsplit("/", 1)[1], "kserve-container"): "RuntimeError: Found no NVIDIA driver on your system.\n"}
    finding = only(_run(objects, logs=logs), "RESOURCES_GPU_NOT_VISIBLE")
    assert "requests nvidia.com/gpu 1" in finding.summary
    assert finding.patch is None
    assert "device plugin" in finding.remediation and "runtimeClassName" in finding.remediation


def test_rocm_image_asks_for_amd_gpus() -> None:
    objects = _case(RAW, "RESOURCES_GPU_NOT_VISIBLE/raw_no_gpu_request.yaml")
    for obj in objects:
        for container in _containers(obj):
            container["image"] = "rocm/vllm:rocm6.3.1_vllm_0.8.5"
    finding = only(_run(objects), "RESOURCES_GPU_NOT_VISIBLE")
    assert "requests no amd.com/gpu" in finding.summary
    assert finding.patch is not None and "amd.com/gpu: '2'" in finding.patch.body


@pytest.mark.parametrize(
    "change",
    [
        {"args": ["--model", "/mnt/models", "--device", "cpu"]},
        {"env": [{"name": "VLLM_TARGET_DEVICE", "value": "cpu"}]},
        {"image": "ghcr.io/example/vllm-cpu:0.10.1"},
    ],
)
def test_cpu_vllm_needs_no_gpu(change: dict[str, Any]) -> None:
    objects = _case(RAW, "RESOURCES_GPU_NOT_VISIBLE/raw_no_gpu_request.yaml")
    for obj in objects:
        for container in _containers(obj):
            container.update(copy.deepcopy(change))
    assert [f.code for f in serious(_run(objects))] == []


def _containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    if obj["kind"] == "Pod":
        return list(obj["spec"]["containers"])
    if obj["kind"] == "InferenceService":
        return list(obj["spec"]["predictor"].get("containers") or [])
    return []


# --- RESOURCES_SHM_MISSING -------------------------------------------------------------------------


def test_tensor_parallel_without_shm() -> None:
    objects = _case(RAW, "RESOURCES_SHM_MISSING/raw_tp2_no_shm.yaml")
    finding = only(_run(objects), "RESOURCES_SHM_MISSING")
    assert finding.level is Severity.WARNING
    assert finding.objects == (ISVC_REF, RAW_POD)
    assert "--tensor-parallel-size 2" in finding.summary and "64 MiB" in finding.summary
    assert "volumeMounts of kserve-container: none" in finding.evidence
    predictor = yaml.safe_load(finding.patch.body if finding.patch else "")["spec"]["predictor"]
    assert predictor["volumes"] == [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}}]
    assert predictor["containers"][0]["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]
    assert predictor["containers"][0]["args"][-2:] == ["-tp", "2"]  # the container is carried whole
    fixed = _after_fix(objects, finding)
    assert serious(_run(fixed)) == []


def test_disk_backed_shm_with_bus_errors_is_critical() -> None:
    objects = _case(SERVERLESS, "RESOURCES_SHM_MISSING/serverless_tp2_disk_shm.yaml")
    assert only(_run(objects), "RESOURCES_SHM_MISSING").level is Severity.WARNING
    logs = {
        ("vllm-llm-predictor-00001-deployment-7f9c6d-x2k4p", "kserve-container.previous"): (
            "2026-01-15T11:57:01.5Z (VllmWorker rank=1 pid=212) ERROR Bus error (core dumped)\n"
        )
    }
    finding = only(_run(objects, logs=logs), "RESOURCES_SHM_MISSING")
    assert finding.level is Severity.CRITICAL
    assert "restarted 3 times" in finding.summary and "on the node's disk" in finding.summary
    predictor = yaml.safe_load(finding.patch.body if finding.patch else "")["spec"]["predictor"]
    # The disk-backed volume is replaced in place; the other volume and the existing mount are kept.
    assert predictor == {
        "volumes": [
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
            {"name": "cache", "emptyDir": {"sizeLimit": "20Gi"}},
        ]
    }
    fixed = _after_fix(objects, finding)
    assert serious(_run(fixed)) == []


def test_pipeline_parallel_counts_too_and_tp_1_does_not() -> None:
    objects = _case(RAW, "RESOURCES_SHM_MISSING/raw_tp2_no_shm.yaml")
    for obj in objects:
        for container in _containers(obj):
            container["args"] = [*container["args"][:-2], "-tp", "1", "--pipeline-parallel-size=2"]
    assert "pipeline-parallel-size 2" in only(_run(objects), "RESOURCES_SHM_MISSING").summary
    for obj in objects:
        for container in _containers(obj):
            container["args"] = [*container["args"][:-3], "--tensor-parallel-size", "1"]
    assert serious(_run(objects)) == []


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-tp", "4"], 4),
        (["-tp=4"], 4),
        (["--tensor-parallel-size", "2"], 2),
        (["--tensor_parallel_size=8"], 8),
        (["-tp", "2", "--tensor-parallel-size", "4"], 4),  # the last spelling wins, as with argparse
        (["--tensor-parallel-size", "4", "-tp", "2"], 2),
        (["--model", "/mnt/models"], None),
        (["-tp", "$(TP)"], None),
    ],
)
def test_tensor_parallel_flag_spellings(args: list[str], expected: int | None) -> None:
    command = vllm_args.parse_command(["vllm", "serve", "/mnt/models"], args)
    assert vllm_args.int_flag(command, "tensor-parallel-size") == expected


# --- evidence the step needs -----------------------------------------------------------------------


def test_modelmesh_is_skipped() -> None:
    from nbhelpers.errors import StepSkipped

    objects = load_case(*RAW)
    for obj in objects:
        if obj["kind"] == "InferenceService":
            obj["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] = "ModelMesh"
    with pytest.raises(StepSkipped):
        _run(objects)


def test_unreadable_nodes_are_said_so() -> None:
    objects = _case(RAW, "RESOURCES_GPU_UNSCHEDULABLE/raw_insufficient_gpu.yaml")
    objects = [obj for obj in objects if obj["kind"] != "Node"]
    reads = [{"what": "Node", "status": "forbidden", "reason": "nodes is forbidden"}]
    finding = only(_run(objects, reads=reads), "RESOURCES_GPU_UNSCHEDULABLE")
    assert "nodes could not be read (forbidden): allocatable capacity unknown" in finding.evidence


def test_several_pending_pods_make_one_finding() -> None:
    objects = _case(RAW, "RESOURCES_GPU_UNSCHEDULABLE/raw_insufficient_gpu.yaml")
    pending = next(obj for obj in objects if obj["kind"] == "Pod" and obj["metadata"]["name"].endswith("p3n8v"))
    twin = copy.deepcopy(pending)
    twin["metadata"]["name"] = "vllm-llm-predictor-6d5f8b7c9-w9t2c"
    twin["metadata"]["creationTimestamp"] = "2026-01-15T11:25:00Z"
    finding = only(_run([*objects, twin]), "RESOURCES_GPU_UNSCHEDULABLE")
    assert finding.objects == (ISVC_REF, PENDING_POD, "Pod/llm/vllm-llm-predictor-6d5f8b7c9-w9t2c")
    assert finding.title.startswith("2 pod(s) Pending")
    assert "(1 more predictor pod(s) Pending the same way)" in finding.summary
    # The twin has no event of its own: its PodScheduled condition is quoted instead.
    assert any(
        line.startswith("Pod/llm/vllm-llm-predictor-6d5f8b7c9-w9t2c PodScheduled=False") for line in finding.evidence
    )
