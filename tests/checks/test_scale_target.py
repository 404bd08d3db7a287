"""The ``scale_target`` step: a failing fixture per code (Raw, KEDA and Serverless), the no-false-alarm cases, and
patches that, merged (and rolled out by a stand-in for KServe/Knative where the InferenceService is patched),
make the finding go away."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from builders import CAPTURED_AT
from check_cases import apply_patch, codes, evidence_of, load_case, only, serious
from patchcheck import assert_valid_object

from nbhelpers.checks import scale_target
from nbhelpers.facts import scaling
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding
from nbhelpers.metrics import catalog
from nbhelpers.sources import kube

ISVC_REF = "InferenceService.serving.kserve.io/llm/vllm-llm"
HPA_REF = "HorizontalPodAutoscaler/llm/vllm-llm-predictor"
POD = "vllm-llm-predictor-6d5f8b7c9-q8w2e"
RAW = ("checks/healthy/raw.yaml", "checks/healthy/resources_raw.yaml", "checks/healthy/scale_target_raw.yaml")
SERVERLESS = (
    "checks/healthy/serverless.yaml",
    "checks/healthy/resources_serverless.yaml",
    "checks/healthy/scale_target_serverless.yaml",
)
SLS_POD = "vllm-llm-predictor-00001-deployment-7f9c6d-x2k4p"
# The engine's start-up line that tells its version (the Serverless image tag rhoai-2.20 does not).
VERSION_LOG = {
    (SLS_POD, "kserve-container"): "2026-01-15T11:40:05.000000000Z INFO 01-15 11:40:05 [api_server.py:1805] "
    "vLLM API server version 0.10.1\n"
}
KSERVE_CPU_RAW = ("checks/healthy/raw.yaml", "checks/healthy/resources_raw.yaml")
START = CAPTURED_AT.timestamp() - 1800


def _series(query_id: str, *series: tuple[dict[str, str], list[float]]) -> dict[str, Any]:
    """A catalog query's answer: each series' values at 15 s steps from 30 minutes before capture."""
    result = [
        {"metric": labels, "values": [[START + 15 * i, str(value)] for i, value in enumerate(values)]}
        for labels, values in series
    ]
    return {"promql": catalog.render(catalog.BY_ID[query_id], 0, "llm", "vllm-llm", 15), "result": result}


def _spike(running: list[float], waiting: list[float], **replicas: list[float]) -> dict[str, dict[str, Any]]:
    metrics = {
        "vllm_running": _series("vllm_running", ({"pod": POD}, running)),
        "vllm_waiting": _series("vllm_waiting", ({"pod": POD}, waiting)),
    }
    for query_id, values in replicas.items():
        metrics[query_id] = _series(query_id, ({}, values))
    return metrics


def _run(objects: list[dict[str, Any]], **options: Any) -> list[Finding]:
    return scale_target.run(evidence_of(objects, **options))


def _without_status(objects: list[dict[str, Any]], ref: str) -> list[dict[str, Any]]:
    """The object after the controller that owns its status has caught up: stale conditions are gone."""
    return [{k: v for k, v in obj.items() if k != "status"} if kube.ref(obj) == ref else obj for obj in objects]


def _kserve_reconcile(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """KServe's HPA reconciler: classes external and none delete the HPA it owns; class hpa (or none set) creates
    ``<isvc>-predictor`` on cpu when it is missing (hpa_reconciler.go shouldDeleteHPA / shouldCreateHPA)."""
    isvc = next(obj for obj in objects if obj["kind"] == "InferenceService")
    klass = kube.annotations(isvc).get(kube.AUTOSCALER_CLASS_ANNOTATION, "hpa")
    owned = [
        obj
        for obj in objects
        if obj["kind"] == "HorizontalPodAutoscaler"
        and any(o.get("kind") == "InferenceService" for o in kube.metadata(obj).get("ownerReferences") or [])
    ]
    if klass in ("external", "none"):
        return [obj for obj in objects if obj not in owned]
    if klass == "hpa" and not owned:
        kserve_hpa = next(o for o in load_case(*KSERVE_CPU_RAW) if o["kind"] == "HorizontalPodAutoscaler")
        kserve_hpa = copy.deepcopy(kserve_hpa)
        kserve_hpa["spec"]["maxReplicas"] = isvc["spec"]["predictor"].get("maxReplicas", 1)
        kept = [obj for obj in objects if kube.ref(obj) != kube.ref(kserve_hpa)]
        return [*kept, kserve_hpa]
    return objects


def _with_manifest(objects: list[dict[str, Any]], finding: Finding) -> list[dict[str, Any]]:
    """Create the HPA a remediation asks for next to its InferenceService patch, after validating it."""
    manifest = finding.fix.manifest
    assert_valid_object(manifest)
    assert manifest["metadata"]["name"] in finding.remediation
    return [*objects, copy.deepcopy(manifest)]


def _knative_rollout(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Knative copies the InferenceService's autoscaling annotations to the revision's PodAutoscaler."""
    isvc = next(obj for obj in objects if obj["kind"] == "InferenceService")
    wanted = {k: v for k, v in kube.annotations(isvc).items() if k.startswith("autoscaling.knative.dev/")}
    result = []
    for obj in objects:
        if obj["kind"] == "PodAutoscaler":
            obj = copy.deepcopy(obj)
            obj["metadata"].setdefault("annotations", {}).update(wanted)
        result.append(obj)
    return result


# --- no false alarms ------------------------------------------------------------------------------------

HEALTHY: dict[str, tuple[tuple[str, ...], tuple[str, ...], dict[str, Any]]] = {
    "raw, own HPA on running requests, at minReplicas with ScalingLimited/TooFewReplicas": (RAW, (), {}),
    "desired replicas held by the scale-down stabilization window": (
        (*RAW, "checks/healthy/scale_target_stabilization_hold.yaml"),
        (),
        {
            "metrics": _spike(
                [60, 40, 20, 10, 5], [0, 0, 0, 0, 0], hpa_current_replicas=[3] * 5, hpa_desired_replicas=[3] * 5
            )
        },
    ),
    "KEDA ScaledObject with the HPA it generated": (
        (*RAW, "checks/healthy/scale_target_keda.yaml"),
        (HPA_REF,),
        {},
    ),
    "serverless KPA with Knative's default target under vLLM's default ceiling": (
        SERVERLESS,
        (),
        {"logs": VERSION_LOG},
    ),
    "no class and fixed bounds without an HPA": (("checks/healthy/raw.yaml",), (), {}),
    "at maxReplicas with ScalingLimited=False since before a queue": (
        (*RAW, "checks/healthy/scale_target_at_max_within_range.yaml"),
        (),
        {
            "metrics": {
                # At the HPA's aim of 48 per pod (within its 10 % tolerance), a short queue: the HPA is content.
                "vllm_running": _series("vllm_running", ({"pod": POD}, [50.0] * 20)),
                "vllm_waiting": _series("vllm_waiting", ({"pod": POD}, [2.0] * 20)),
                "hpa_current_replicas": _series("hpa_current_replicas", ({}, [4.0] * 20)),
            }
        },
    ),
}


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_cases_raise_nothing(name: str) -> None:
    files, dropped, options = HEALTHY[name]
    assert serious(_run(load_case(*files, drop=dropped), **options)) == []


# --- HPA_MISSING ------------------------------------------------------------------------------------------


def test_unknown_class_in_raw_mode_leaves_no_autoscaler() -> None:
    objects = load_case(*RAW, "checks/HPA_MISSING/raw_kpa_class.yaml", drop=(HPA_REF,))
    finding = only(_run(objects), "HPA_MISSING")
    assert finding.level is Severity.WARNING
    assert finding.objects == (ISVC_REF,)
    assert "'kpa'" in finding.summary and "RawDeployment" in finding.summary
    fixed = _kserve_reconcile(apply_patch(objects, finding))
    assert "HPA_MISSING" not in codes(_run(fixed))
    assert any(kube.ref(obj) == HPA_REF for obj in fixed)


# --- HPA_TARGET_NOT_FOUND / HPA_TARGET_NOT_SERVING ------------------------------------------------------


def test_hpa_naming_a_deployment_that_does_not_exist() -> None:
    objects = load_case(*RAW, "checks/HPA_TARGET_NOT_FOUND/raw_old_deployment_name.yaml")
    finding = only(_run(objects), "HPA_TARGET_NOT_FOUND")
    assert finding.level is Severity.CRITICAL
    assert finding.objects == (HPA_REF, ISVC_REF)
    assert "vllm-llm-predictor-default" in finding.title
    assert any("FailedGetScale" in line for line in finding.evidence)
    fixed = _without_status(apply_patch(objects, finding), HPA_REF)
    assert serious(_run(fixed)) == []


def test_hpa_scaling_a_deployment_the_service_does_not_select() -> None:
    objects = load_case(*RAW, "checks/HPA_TARGET_NOT_SERVING/raw_canary_deployment.yaml")
    finding = only(_run(objects), "HPA_TARGET_NOT_SERVING")
    assert finding.level is Severity.CRITICAL
    assert "vllm-llm-predictor-canary" in finding.summary and "traffic goes to vllm-llm-predictor" in finding.summary
    assert any(
        "ReplicaSet vllm-llm-predictor-6d5f8b7c9 -> Deployment vllm-llm-predictor" in e for e in finding.evidence
    )
    fixed = apply_patch(objects, finding)
    assert serious(_run(fixed)) == []


# --- HPA_CONFLICT -----------------------------------------------------------------------------------------


def test_kserve_hpa_next_to_a_hand_made_hpa() -> None:
    objects = load_case(*RAW, "checks/HPA_CONFLICT/raw_kserve_and_user_hpa.yaml")
    findings = _run(objects)
    finding = only(findings, "HPA_CONFLICT")
    assert finding.level is Severity.WARNING
    assert set(finding.objects) == {HPA_REF, "HorizontalPodAutoscaler/llm/vllm-llm-requests"}
    assert finding.patch is not None and finding.patch.target == ISVC_REF
    fixed = _kserve_reconcile(apply_patch(objects, finding))
    assert serious(_run(fixed)) == []


def test_hand_made_hpa_next_to_knative_kpa() -> None:
    objects = load_case(*SERVERLESS, "checks/HPA_CONFLICT/serverless_kpa_and_hpa.yaml")
    finding = only(_run(objects), "HPA_CONFLICT")
    assert "vllm-llm-predictor-00001-deployment" in finding.title
    assert "PodAutoscaler.autoscaling.internal.knative.dev/llm/vllm-llm-predictor-00001" in finding.objects
    # No merge patch removes an object: the remediation deletes the hand-made HPA and keeps a copy to restore.
    assert finding.patch is None
    assert "kubectl delete hpa vllm-llm-gpu -n llm" in finding.remediation
    removed = [obj for obj in objects if kube.name(obj) != "vllm-llm-gpu"]
    assert "HPA_CONFLICT" not in codes(_run(removed))


def test_keda_generated_hpa_is_not_a_second_autoscaler() -> None:
    objects = load_case(*RAW, "checks/healthy/scale_target_keda.yaml", drop=(HPA_REF,))
    assert "HPA_CONFLICT" not in codes(_run(objects))
    # ... while an extra hand-made HPA next to the ScaledObject is one.
    extra = copy.deepcopy(next(o for o in load_case(*RAW) if kube.ref(o) == HPA_REF))
    extra["metadata"]["name"] = "vllm-llm-extra"
    finding = only(_run([*objects, extra]), "HPA_CONFLICT")
    assert "ScaledObject.keda.sh/llm/vllm-llm-predictor" in finding.objects
    assert "HorizontalPodAutoscaler/llm/keda-hpa-vllm-llm-predictor" in finding.objects


# --- HPA_CPU_METRIC_ON_GPU --------------------------------------------------------------------------------

SPIKE = _spike(
    [10, 40, 64, 64, 64, 64], [0, 0, 12, 30, 55, 80], hpa_current_replicas=[1] * 6, hpa_desired_replicas=[1] * 6
)


def test_hand_made_cpu_hpa_on_a_gpu_pod_under_a_spike() -> None:
    objects = load_case(*RAW, "checks/HPA_CPU_METRIC_ON_GPU/raw_user_cpu_hpa.yaml")
    finding = only(_run(objects, metrics=SPIKE), "HPA_CPU_METRIC_ON_GPU")
    assert finding.level is Severity.WARNING
    assert finding.objects == (HPA_REF, f"Pod/llm/{POD}")
    assert "peak waiting requests (all pods) in the window: 80" in finding.evidence
    assert "measured capacity: 64 running requests per pod while requests queued" in finding.evidence
    # 80 % of the 64 requests a pod held while requests queued.
    assert finding.patch is not None and "averageValue: '51'" in finding.patch.body
    fixed = apply_patch(objects, finding)
    assert serious(_run(fixed, metrics=SPIKE)) == []


def test_kserve_default_cpu_hpa_is_replaced_through_the_external_class() -> None:
    objects = load_case(*KSERVE_CPU_RAW)
    finding = only(_run(objects, metrics=SPIKE), "HPA_CPU_METRIC_ON_GPU")
    assert finding.patch is not None and finding.patch.target == ISVC_REF
    assert "serving.kserve.io/autoscalerClass: external" in finding.patch.body
    # No flag: vLLM 0.10.1 on an L40S (under 70 GiB) runs 256 requests; the spike measured 64 while queueing.
    assert finding.fix.manifest["spec"]["metrics"][0]["pods"]["target"]["averageValue"] == "51"
    fixed = _with_manifest(_kserve_reconcile(apply_patch(objects, finding)), finding)
    assert serious(_run(fixed, metrics=SPIKE)) == []


def test_fixed_bounds_make_the_metric_moot() -> None:
    objects = load_case(*RAW, "checks/HPA_CPU_METRIC_ON_GPU/raw_user_cpu_hpa.yaml")
    hpa = next(o for o in objects if kube.ref(o) == HPA_REF)
    hpa["spec"]["maxReplicas"] = 1
    assert "HPA_CPU_METRIC_ON_GPU" not in codes(_run(objects))


# --- HPA_TARGET_ABOVE_POD_CAPACITY ------------------------------------------------------------------------


def test_running_request_target_at_max_num_seqs() -> None:
    objects = load_case(*RAW, "checks/HPA_TARGET_ABOVE_POD_CAPACITY/raw_running_target_at_ceiling.yaml")
    finding = only(_run(objects), "HPA_TARGET_ABOVE_POD_CAPACITY")
    assert finding.level is Severity.WARNING
    assert "target 64" in finding.title and "ceiling 64" in finding.title
    assert "at most 64 requests at once (--max-num-seqs=64)" in finding.summary
    fixed = apply_patch(objects, finding)
    assert serious(_run(fixed)) == []


def test_knative_default_target_above_a_small_max_num_seqs() -> None:
    objects = load_case(*SERVERLESS, "checks/HPA_TARGET_ABOVE_POD_CAPACITY/serverless_kpa_default_target.yaml")
    finding = only(_run(objects), "HPA_TARGET_ABOVE_POD_CAPACITY")
    assert "KPA target 70" in finding.title and "ceiling of 64" in finding.title
    assert "(Knative default)" in finding.summary
    assert finding.patch is not None and finding.patch.target == ISVC_REF
    fixed = _knative_rollout(apply_patch(objects, finding))
    assert serious(_run(fixed)) == []


def test_vllm_default_ceiling_depends_on_the_gpu() -> None:
    """No flag: vLLM 0.10.1 (V1) runs 256 requests on an L40S, so a KPA target of 200 per pod is fine there ..."""
    objects = load_case(*SERVERLESS)
    isvc = next(o for o in objects if o["kind"] == "InferenceService")
    isvc["metadata"]["annotations"]["autoscaling.knative.dev/target"] = "400"
    objects = _knative_rollout(objects)
    finding = only(_run(objects, logs=VERSION_LOG), "HPA_TARGET_ABOVE_POD_CAPACITY")
    assert "ceiling of 256" in finding.title and "GPUs under 70 GiB" in finding.summary
    assert "vLLM 0.10.1" in finding.summary
    isvc["metadata"]["annotations"]["autoscaling.knative.dev/target"] = "200"
    assert serious(_run(_knative_rollout(objects), logs=VERSION_LOG)) == []


def _on_node(objects: list[dict[str, Any]], labels: dict[str, str]) -> list[dict[str, Any]]:
    """The same objects with the GPU node's feature-discovery labels replaced."""
    result = copy.deepcopy(objects)
    for obj in result:
        if obj["kind"] == "Node":
            obj["metadata"]["labels"] = {**labels, "nvidia.com/gpu.count": "4"}
    return result


def _version_log(version: str) -> dict[tuple[str, str], str]:
    return {key: text.replace("0.10.1", version) for key, text in VERSION_LOG.items()}


A100_80GB = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
B200 = {"nvidia.com/gpu.product": "NVIDIA-B200", "nvidia.com/gpu.memory": "183359"}


def test_vllm_default_ceiling_follows_the_release_that_runs() -> None:
    """A KPA target of 400 per pod (Knative aims at 280) without --max-num-seqs, judged against vLLM's own default,
    which moved release by release (models.vllm_memory.V1_BATCH_DEFAULTS).

    vLLM 0.8.5 on an A100 80GB: PR #17073 gave every GPU of 70 GiB or more 1024 requests; before the fix the 0.9
    rule (A100 excluded, PR #17885) said 256 and raised a false HPA_TARGET_ABOVE_POD_CAPACITY.
    vLLM 0.8.4 on a B200: PR #16158 gave only H100/H200 (by name) 1024, so a B200 ran 256; before the fix the
    0.9 rule said 1024 and the finding was missed."""
    objects = load_case(*SERVERLESS)
    isvc = next(o for o in objects if o["kind"] == "InferenceService")
    isvc["metadata"]["annotations"]["autoscaling.knative.dev/target"] = "400"
    objects = _knative_rollout(objects)
    assert "HPA_TARGET_ABOVE_POD_CAPACITY" not in codes(_run(_on_node(objects, A100_80GB), logs=_version_log("0.8.5")))
    finding = only(_run(_on_node(objects, B200), logs=_version_log("0.8.4")), "HPA_TARGET_ABOVE_POD_CAPACITY")
    assert "ceiling of 256" in finding.title
    assert "in 0.8.4 (vllm PR #16158) on GPUs other than H100 and H200" in finding.summary
    # The same target is fine on an H100 in 0.8.4 (1024 by name), and on the A100 from 0.9.0 it is not (256).
    h100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert "HPA_TARGET_ABOVE_POD_CAPACITY" not in codes(_run(_on_node(objects, h100), logs=_version_log("0.8.4")))
    assert "HPA_TARGET_ABOVE_POD_CAPACITY" in codes(_run(_on_node(objects, A100_80GB), logs=_version_log("0.9.0")))


def _on_rps(objects: list[dict[str, Any]], target: str | None = None) -> list[dict[str, Any]]:
    """The predictor on KServe's ``scaleMetric: rps`` (KServe writes autoscaling.knative.dev/metric and, with a
    ``scaleTarget``, /target onto the revision, which Knative copies to the PodAutoscaler)."""
    result = copy.deepcopy(objects)
    isvc = next(o for o in result if o["kind"] == "InferenceService")
    isvc["spec"]["predictor"]["scaleMetric"] = "rps"
    wanted = {"autoscaling.knative.dev/metric": "rps"}
    if target is not None:
        isvc["spec"]["predictor"]["scaleTarget"] = int(target)
        wanted["autoscaling.knative.dev/target"] = target
    for obj in result:
        if obj["kind"] == "PodAutoscaler":
            obj["metadata"].setdefault("annotations", {}).update(wanted)
    return result


def _kserve_knative_rollout(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """KServe writes ``scaleMetric``/``scaleTarget`` as the revision's metric and target annotations
    (ksvc_reconciler.go), and Knative copies them to the PodAutoscaler."""
    result = copy.deepcopy(objects)
    predictor = next(o for o in result if o["kind"] == "InferenceService")["spec"]["predictor"]
    wanted = {}
    if "scaleMetric" in predictor:
        wanted["autoscaling.knative.dev/metric"] = str(predictor["scaleMetric"])
    if "scaleTarget" in predictor:
        wanted["autoscaling.knative.dev/target"] = str(predictor["scaleTarget"])
    for obj in result:
        if obj["kind"] == "PodAutoscaler":
            obj["metadata"].setdefault("annotations", {}).update(wanted)
    return result


def _sls_saturated(running: float, per_pod_rps: float, samples: int = 20) -> dict[str, dict[str, Any]]:
    """The one Serverless pod running ``running`` requests with a queue and completing ``per_pod_rps`` per second."""
    return {
        "vllm_running": _series("vllm_running", ({"pod": SLS_POD}, [running] * samples)),
        "vllm_waiting": _series("vllm_waiting", ({"pod": SLS_POD}, [12.0] * samples)),
        "vllm_request_rate": _series("vllm_request_rate", ({}, [per_pod_rps] * samples)),
    }


def test_kpa_on_rps_is_weighed_in_requests_per_second() -> None:
    """``scaleMetric: rps`` with no target: Knative aims at requests-per-second-target-default 200 x 0.7 = 140
    arrivals per second per pod (knative/serving ResolveMetricTarget, PR #5141), while a vLLM pod here completes
    2 requests/s with its batch of 64 full. Before: the check read Knative's concurrency default (100 x 0.7 = 70
    in-flight) and compared it with the 256 ceiling: no finding, although the pod saturates 70 times over."""
    objects = _on_rps(_knative_rollout(load_case(*SERVERLESS)))
    metrics = _sls_saturated(64.0, 2.0)
    finding = only(_run(objects, logs=VERSION_LOG, metrics=metrics), "HPA_TARGET_ABOVE_POD_CAPACITY")
    assert finding.title == "KPA target 140 requests/s per pod >= the 2.00 requests/s a pod completes"
    assert "requests-per-second-target-default 200 (Knative default) x 0.7 (Knative's rps utilization)" in (
        finding.summary
    )
    assert "would hold 4,480 requests (32.0 s each), more than the 64 it runs at once" in finding.summary
    assert "--max-num-seqs" not in finding.title
    # The fix moves the revision to concurrency at 80 % of the measured 64: 51 in flight, annotated 72 (x 0.7).
    assert finding.remediation.startswith("Scale on concurrency instead of rps")
    fixed = _kserve_knative_rollout(apply_patch(objects, finding))
    assert "HPA_TARGET_ABOVE_POD_CAPACITY" not in codes(_run(fixed, logs=VERSION_LOG, metrics=metrics))


def test_kpa_rps_target_is_never_compared_with_max_num_seqs() -> None:
    """--max-num-seqs 64 and Knative's rps default: 140 is a rate, not 70 in-flight requests. Before: 'KPA target 70
    requests per pod >= the pod's ceiling of 64' (the concurrency default, wrong unit). With no completions measured
    the rate cannot be judged, and a rate a pod does complete raises nothing."""
    objects = _on_rps(load_case(*SERVERLESS, "checks/HPA_TARGET_ABOVE_POD_CAPACITY/serverless_kpa_default_target.yaml"))
    assert "HPA_TARGET_ABOVE_POD_CAPACITY" not in codes(_run(objects))
    modest = _on_rps(objects, target="2")  # 1.4 arrivals/s per pod against 2 completed
    assert serious(_run(modest, metrics=_sls_saturated(64.0, 2.0))) == []


def test_no_default_ceiling_is_assumed_for_an_unknown_vllm_version() -> None:
    """The image tag (rhoai-2.20) and the logs do not tell the vLLM version: the default is not guessed."""
    objects = load_case(*SERVERLESS)
    isvc = next(o for o in objects if o["kind"] == "InferenceService")
    isvc["metadata"]["annotations"]["autoscaling.knative.dev/target"] = "400"
    assert "HPA_TARGET_ABOVE_POD_CAPACITY" not in codes(_run(_knative_rollout(objects)))


def _kv_bound(running: float, samples: int = 20) -> dict[str, dict[str, Any]]:
    """One pod holding ``running`` requests, a KV cache near full, 78 waiting (vllm-project/vllm issue #3561)."""
    return {
        "vllm_running": _series("vllm_running", ({"pod": POD}, [running] * samples)),
        "vllm_waiting": _series("vllm_waiting", ({"pod": POD}, [78.0] * samples)),
        "vllm_request_rate": _series("vllm_request_rate", ({}, [1.2] * samples)),
    }


def test_target_above_the_measured_plateau_below_the_flag() -> None:
    """The target 48 is below --max-num-seqs 64, but a pod held at most 36 requests while 78 waited: the per-pod
    average can never reach 48. Before: the check compared with the flag only and said nothing."""
    objects = load_case(*RAW, "checks/HPA_TARGET_ABOVE_POD_CAPACITY/raw_target_above_measured_plateau.yaml")
    metrics = _kv_bound(36.0)
    finding = only(_run(objects, metrics=metrics), "HPA_TARGET_ABOVE_POD_CAPACITY")
    assert finding.title == (
        "HorizontalPodAutoscaler vllm-llm-predictor target 48 in-flight requests per pod >= measured capacity 36"
    )
    assert (
        "runs at most 36 requests at once (measured in this window: the most requests a pod ran while every pod had "
        "requests waiting, below the ceiling 64 (--max-num-seqs=64))" in finding.summary
    )
    # 80 % of the measured 36: 28 running requests per pod.
    assert finding.patch is not None and "averageValue: '28'" in finding.patch.body
    assert "HPA_TARGET_ABOVE_POD_CAPACITY" not in codes(_run(apply_patch(objects, finding), metrics=metrics))


def test_a_plateau_at_the_flag_leaves_a_target_below_it_alone() -> None:
    objects = load_case(*RAW, "checks/HPA_TARGET_ABOVE_POD_CAPACITY/raw_target_above_measured_plateau.yaml")
    assert "HPA_TARGET_ABOVE_POD_CAPACITY" not in codes(_run(objects, metrics=_kv_bound(64.0)))


def test_two_saturated_scrapes_are_no_measured_plateau() -> None:
    objects = load_case(*RAW, "checks/HPA_TARGET_ABOVE_POD_CAPACITY/raw_target_above_measured_plateau.yaml")
    assert "HPA_TARGET_ABOVE_POD_CAPACITY" not in codes(_run(objects, metrics=_kv_bound(36.0, samples=2)))


# --- HPA_AT_MAX -------------------------------------------------------------------------------------------

PODS = (POD, *(f"vllm-llm-predictor-6d5f8b7c9-r{index}" for index in range(3)))


def _queue_at(
    replicas: int, samples: int = 20, *, running: float = 64.0, growth: float = 2.0, per_pod_rps: float = 2.0
) -> dict[str, dict[str, Any]]:
    """``replicas`` saturated pods for ``samples`` × 15 s: each runs ``running`` requests and completes
    ``per_pod_rps``, while the queue (all pods) grows by ``growth`` requests/s."""
    pods = PODS[:replicas]
    queue = [20.0 + growth * 15 * i for i in range(samples)]
    return {
        "vllm_running": _series("vllm_running", *(({"pod": pod}, [running] * samples) for pod in pods)),
        "vllm_waiting": _series(
            "vllm_waiting", *(({"pod": pod}, [value / replicas for value in queue]) for pod in pods)
        ),
        "vllm_request_rate": _series("vllm_request_rate", ({}, [per_pod_rps * replicas] * samples)),
        "hpa_current_replicas": _series("hpa_current_replicas", ({}, [float(replicas)] * samples)),
    }


def test_at_max_while_requests_queue_for_minutes() -> None:
    objects = load_case(*RAW, "checks/HPA_AT_MAX/raw_at_max_waiting.yaml")
    metrics = _queue_at(4)
    finding = only(_run(objects, metrics=metrics), "HPA_AT_MAX")
    assert finding.level is Severity.WARNING
    assert finding.title == "HorizontalPodAutoscaler vllm-llm-predictor at maxReplicas 4 while demand exceeds capacity"
    assert "requests waited for 4.8 min (11:30-11:34 UTC) with all 4 replicas running" in finding.summary
    assert "it has reported for 20.0 min that it wants more replicas than its maximum" in finding.summary
    evidence = " ".join(finding.evidence)
    assert "condition ScalingLimited=True (TooManyReplicas)" in evidence
    assert "at the maximum with requests waiting: 11:30-11:34 UTC (4.8 min, 20 samples" in evidence
    # Arrivals: 8 completions/s plus a queue growing by 2/s = 10 requests/s; a pod completes 2/s with every pod
    # saturated, 1.6/s at 80 %: 7 pods (the waiting requests at one moment are a backlog, not a rate).
    assert "the peak demand of 10.00 requests/s" in finding.remediation
    assert finding.patch is not None and "maxReplicas: 7" in finding.patch.body
    fixed = apply_patch(objects, finding)
    assert "HPA_AT_MAX" not in codes(_run(fixed, metrics=metrics))


def test_a_backlog_is_not_sized_as_a_rate() -> None:
    """Thousands of requests waiting (as in the hpa-at-max-spike scenario) do not ask for thousands of pods."""
    objects = load_case(*RAW, "checks/HPA_AT_MAX/raw_at_max_waiting.yaml")
    finding = only(_run(objects, metrics=_queue_at(4, samples=40, growth=3.0)), "HPA_AT_MAX")
    assert "peak running + waiting" not in finding.remediation
    assert finding.patch is not None and "maxReplicas: 7" in finding.patch.body  # 11/s over 1.6/s


def test_a_lasting_too_many_replicas_condition_is_enough_without_metrics() -> None:
    objects = load_case(*RAW, "checks/HPA_AT_MAX/raw_at_max_waiting.yaml")
    finding = only(_run(objects), "HPA_AT_MAX")
    assert "reported for 20.0 min that it wants more replicas than its maximum (ScalingLimited=True" in (
        finding.summary
    )
    assert "requests waited" not in finding.summary
    assert finding.patch is not None and "maxReplicas: 5" in finding.patch.body
    assert "vLLM's completion rate is not in the evidence" in finding.remediation


def test_one_scrape_at_max_is_no_finding() -> None:
    """Before: one sample with requests waiting at the maximum raised HPA_AT_MAX. A blip of 45 s, with the
    condition one minute old, is the HPA catching up, not a limit."""
    objects = load_case(*RAW, "checks/HPA_AT_MAX/raw_at_max_waiting.yaml")
    hpa = next(o for o in objects if kube.ref(o) == HPA_REF)
    limited = next(c for c in hpa["status"]["conditions"] if c["type"] == "ScalingLimited")
    limited["lastTransitionTime"] = "2026-01-15T11:59:00Z"
    blip = _spike([60, 64, 64, 64], [5, 20, 60, 110], hpa_current_replicas=[4] * 4)
    assert "HPA_AT_MAX" not in codes(_run(objects, metrics=blip))
    del limited["lastTransitionTime"]  # a condition of unknown age is no duration either
    assert "HPA_AT_MAX" not in codes(_run(objects, metrics=blip))


def test_at_max_without_unmet_demand_is_fine() -> None:
    objects = load_case(*RAW, "checks/HPA_AT_MAX/raw_at_max_waiting.yaml")
    hpa = next(o for o in objects if kube.ref(o) == HPA_REF)
    hpa["status"]["conditions"] = [c for c in hpa["status"]["conditions"] if c["type"] != "ScalingLimited"]
    quiet = _spike([30, 30], [0, 0], hpa_current_replicas=[4, 4])
    assert "HPA_AT_MAX" not in codes(_run(objects, metrics=quiet))


def test_at_max_and_content_there_is_no_finding() -> None:
    """ScalingLimited=False since before the queue: the HPA computed no more than its maximum (kubernetes-mixin
    issue #1293), so raising the maximum would change nothing."""
    objects = load_case(*RAW, "checks/healthy/scale_target_at_max_within_range.yaml")
    assert "HPA_AT_MAX" not in codes(_run(objects, metrics=_queue_at(4)))


def test_pinned_hpa_says_it_never_could_scale() -> None:
    objects = load_case(*RAW, "checks/HPA_AT_MAX/raw_pinned_min_equals_max.yaml")
    metrics = _queue_at(2)
    finding = only(_run(objects, metrics=metrics), "HPA_AT_MAX")
    assert finding.title == (
        "HorizontalPodAutoscaler vllm-llm-predictor pinned at 2 replicas (minReplicas = maxReplicas) while requests wait"
    )
    assert "minReplicas = maxReplicas = 2: it never could add a replica" in finding.summary
    assert "at its maximum" not in finding.summary
    assert "minReplicas 2 = maxReplicas 2: the replica count is pinned" in finding.evidence
    assert "above minReplicas 2" in finding.remediation
    # 4 completions/s + 2/s of queue growth = 6/s over 1.6/s per pod: 4 pods.
    assert finding.patch is not None and "maxReplicas: 4" in finding.patch.body
    assert "HPA_AT_MAX" not in codes(_run(apply_patch(objects, finding), metrics=metrics))


def test_pinned_hpa_without_waiting_requests_is_fine() -> None:
    objects = load_case(*RAW, "checks/HPA_AT_MAX/raw_pinned_min_equals_max.yaml")
    hpa = next(o for o in objects if kube.ref(o) == HPA_REF)
    hpa["status"]["conditions"] = [c for c in hpa["status"]["conditions"] if c["type"] != "ScalingLimited"]
    assert "HPA_AT_MAX" not in codes(_run(objects, metrics=_queue_at(2, growth=0.0, running=30.0) | _no_queue(2)))


def _no_queue(replicas: int, samples: int = 20) -> dict[str, dict[str, Any]]:
    return {"vllm_waiting": _series("vllm_waiting", *(({"pod": pod}, [0.0] * samples) for pod in PODS[:replicas]))}


# --- HPA_BEHAVIOR_SLOW ------------------------------------------------------------------------------------


def test_scale_down_window_shorter_than_the_cold_start() -> None:
    objects = load_case(*RAW, "checks/HPA_BEHAVIOR_SLOW/raw_cold_start_longer_than_stabilization.yaml")
    finding = only(_run(objects), "HPA_BEHAVIOR_SLOW")
    assert "300 s" in finding.summary and "600 s" in finding.summary
    assert f"Pod {POD}: created -> Ready in 600 s" in finding.evidence
    assert finding.patch is not None and "stabilizationWindowSeconds: 1200" in finding.patch.body
    fixed = apply_patch(objects, finding)
    assert serious(_run(fixed)) == []


def test_a_restart_after_days_does_not_make_the_scale_down_window_short() -> None:
    """Issue #14: the pod restarted once after three days of serving (a node reboot). Its cold start is that restart's
    80 s, not creation -> latest Ready (three days), so the default 300 s stabilization is enough."""
    objects = load_case(*RAW, "checks/healthy/scale_target_restarted_after_days.yaml")
    assert "HPA_BEHAVIOR_SLOW" not in codes(_run(objects))
    assert scaling.cold_starts(evidence_of(objects)) == [scaling.ColdStart(POD, 80.0, restart=True)]
    assert scaling.ColdStart(POD, 80.0, restart=True).describe() == f"Pod {POD}: restarted -> Ready in 80 s"


def test_scale_up_policy_slower_than_demand() -> None:
    objects = load_case(*RAW, "checks/HPA_BEHAVIOR_SLOW/raw_scale_up_one_pod_per_5min.yaml")
    metrics = _spike(
        [64] * 10,
        [20, 40, 60, 80, 90, 95, 99, 99, 99, 99],
        hpa_current_replicas=[1] * 5 + [2] * 5,
        hpa_desired_replicas=[4] * 10,
    )
    finding = only(_run(objects, metrics=metrics), "HPA_BEHAVIOR_SLOW")
    assert "stayed above current replicas for 135 s" in finding.summary
    assert "1 pods per 300 s" in finding.summary
    fixed = apply_patch(objects, finding)
    assert "HPA_BEHAVIOR_SLOW" not in codes(_run(fixed, metrics=metrics))
