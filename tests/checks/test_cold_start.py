"""The ``cold_start`` step: failing fixtures per code, healthy fixtures that stay quiet, and patches that fix.

Objects come from YAML fixtures; the pod-count and request metrics are written here as the catalog's exact
PromQL with one sample per 15 s step over the window 11:00–12:00, as a capture records them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest
import yaml
from builders import WINDOW
from check_cases import apply_patch, codes, evidence_of, load_case, only, serious

from nbhelpers.checks import cold_start
from nbhelpers.errors import EvidenceMissing, StepSkipped
from nbhelpers.facts import cold_starts, pod_phases
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding
from nbhelpers.metrics import catalog
from nbhelpers.sources import kube

ISVC_REF = "InferenceService.serving.kserve.io/llm/vllm-llm"
REVISION_1 = "Revision.serving.knative.dev/llm/vllm-llm-predictor-00001"
REVISION_2 = "Revision.serving.knative.dev/llm/vllm-llm-predictor-00002"
BASE_POD = "Pod/llm/vllm-llm-predictor-00001-deployment-7f9c6d-x2k4p"
SERVERLESS = "checks/healthy/serverless.yaml"
RAW = "checks/healthy/raw.yaml"
STEP = 15
START = WINDOW.start.timestamp()
SAMPLES = 240  # 11:00:00 … 11:59:45


def _at(minute: float) -> int:
    """The sample index of a clock time 11:MM (minute may be fractional)."""
    return int(minute * 60 // STEP)


def _series(values: Mapping[int, float], **labels: str) -> dict[str, Any]:
    """A matrix entry with samples only at the given indices (a gap is a missing sample, as PromQL leaves it)."""
    return {"metric": labels, "values": [[START + STEP * i, str(v)] for i, v in sorted(values.items())]}


def _spans(*spans: tuple[float, float, float]) -> dict[int, float]:
    """Samples from (start minute, end minute, value) spans; minutes outside every span have no sample."""
    values: dict[int, float] = {}
    for start, end, value in spans:
        for index in range(_at(start), min(_at(end), SAMPLES)):
            values[index] = value
    return values


def _metrics(**results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        query_id: {"promql": catalog.render(catalog.BY_ID[query_id], 0, "llm", "vllm-llm", STEP), "result": result}
        for query_id, result in results.items()
    }


def _run(objects: list[dict[str, Any]], metrics: Mapping[str, Any] | None = None) -> list[Finding]:
    return cold_start.run(evidence_of(objects, metrics=dict(metrics) if metrics else None))


def _serious_codes(objects: list[dict[str, Any]], metrics: Mapping[str, Any] | None = None) -> set[str]:
    return codes(serious(_run(objects, metrics)))


def _patch_body(finding: Finding) -> dict[str, Any]:
    assert finding.patch is not None
    body = yaml.safe_load(finding.patch.body)
    assert isinstance(body, dict)
    return body


# --- the rollout stand-in for autoscaling fields (this step's addition to check_cases.rollout) -----------

_NOT_COPIED = {
    "autoscaling.knative.dev/min-scale",
    "autoscaling.knative.dev/max-scale",
    "kubectl.kubernetes.io/last-applied-configuration",
}


def kserve_rolls_out_autoscaling(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What KServe's Knative reconciler does with an InferenceService change that matters here: minReplicas and
    maxReplicas become the revision template's min-scale and max-scale, and the InferenceService's other
    annotations are copied onto it (all but KServe's ServiceAnnotationDisallowedList). The predictor's
    revisions stand for the new revision the change creates."""
    isvc = next(obj for obj in objects if obj["kind"] == "InferenceService")
    predictor = isvc["spec"]["predictor"]
    copied = {k: v for k, v in (isvc["metadata"].get("annotations") or {}).items() if k not in _NOT_COPIED}
    result = []
    for obj in copy.deepcopy(objects):
        if obj["kind"] == "Revision" and kube.is_predictor(obj):
            annotations = obj["metadata"].setdefault("annotations", {})
            annotations.update(copied)
            annotations["autoscaling.knative.dev/min-scale"] = str(predictor.get("minReplicas", 1))
            if predictor.get("maxReplicas"):
                annotations["autoscaling.knative.dev/max-scale"] = str(predictor["maxReplicas"])
        result.append(obj)
    return result


# --- COLDSTART_SCALE_TO_ZERO -------------------------------------------------------------------------------


def _six_minute_case() -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    objects = load_case(
        SERVERLESS, "checks/COLDSTART_SCALE_TO_ZERO/serverless_six_minute_cold_start.yaml", drop=[BASE_POD]
    )
    # One pod until 11:10, none (no series) until the new pod is Ready at 11:46; requests queued since 11:40 are
    # cut by the 300 s revision timeout at 11:45 (0.2/s of 504s for a minute: ≈12).
    metrics = _metrics(
        pod_ready=[_series(_spans((0, 10, 1), (46, 60, 1)))],
        knative_requests_by_code=[
            _series(_spans((0, 10, 1.0), (46, 60, 1.0)), response_code="200"),
            _series(_spans((45, 46, 0.2)), response_code="504"),
        ],
    )
    return objects, metrics


def test_scale_to_zero_with_a_six_minute_cold_start_and_504s_is_critical() -> None:
    objects, metrics = _six_minute_case()
    finding = only(_run(objects, metrics), "COLDSTART_SCALE_TO_ZERO")
    assert finding.level is Severity.CRITICAL
    assert finding.objects == (ISVC_REF, REVISION_1)
    assert finding.title == "Scale-to-zero on an LLM whose cold start takes 360 s (measured)"
    assert "the threshold for a long cold start is 30 s" in finding.summary
    assert (
        "Raised to critical: ≈12 5xx answers in the window fell into the periods with no ready pod" in finding.summary
    )
    assert "Knative (activator / queue-proxy): 504 ≈12" in finding.summary
    assert "min replicas: 0 (autoscaling.knative.dev/min-scale on " + REVISION_1 + ")" in finding.evidence
    assert "no ready pod: 2026-01-15T11:10:00Z … 2026-01-15T11:46:00Z" in finding.evidence
    pod_line = next(
        line for line in finding.evidence if line.startswith("Pod vllm-llm-predictor-00001-deployment-7f9c6d-m4t8z")
    )
    # 11:40:00 created, 11:40:01 scheduled, 11:41:30 serving image pulled, 11:42:40 started, 11:46:00 Ready.
    assert (
        "Ready after 360 s = created → scheduled 1 s + scheduled → image pulled 89 s + "
        "image pulled → container started 70 s + container started → Ready 200 s"
    ) in pod_line
    assert "kubelet: image pulled in 88 s" in pod_line
    assert _patch_body(finding) == {"spec": {"predictor": {"minReplicas": 1}}}
    assert "2× nvidia.com/gpu around the clock (≈1460 GPU-hours a month)" in finding.remediation
    assert '--type merge -p \'{"spec":{"predictor":{"minReplicas":0}}}\'' in finding.remediation  # rollback
    fixed = kserve_rolls_out_autoscaling(apply_patch(objects, finding))
    assert _serious_codes(fixed, metrics) == set()


def test_scale_to_zero_without_5xx_metrics_stays_a_warning() -> None:
    objects, _ = _six_minute_case()
    finding = only(_run(objects), "COLDSTART_SCALE_TO_ZERO")
    assert finding.level is Severity.WARNING
    assert "Raised to critical" not in finding.summary


def test_scaled_to_zero_with_no_pod_uses_a_labelled_estimate() -> None:
    objects = load_case(SERVERLESS, "checks/healthy/serverless_scaled_to_zero.yaml", drop=[BASE_POD])
    findings = _run(objects)
    finding = only(findings, "COLDSTART_SCALE_TO_ZERO")
    assert finding.level is Severity.WARNING
    # 8B parameters × 2 bytes = 14.9 GiB at 0.5 GiB/s = 30 s, plus 20 s process start and 60 s engine start.
    assert finding.title == "Scale-to-zero on an LLM whose cold start takes 110 s (estimated)"
    assert "estimate, not a measurement" in finding.summary
    assert "scheduling and image pull not included" in finding.summary
    assert "COLDSTART_EXCEEDS_TIMEOUT" not in codes(findings)  # an estimate never makes that claim


def test_scale_to_zero_disabled_cluster_wide_is_not_flagged() -> None:
    objects = load_case(SERVERLESS, "checks/healthy/serverless_scaled_to_zero.yaml", drop=[BASE_POD])
    objects.append(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "config-autoscaler", "namespace": "knative-serving"},
            "data": {"enable-scale-to-zero": "false"},
        }
    )
    assert _serious_codes(objects) == set()


# --- COLDSTART_EXCEEDS_TIMEOUT -----------------------------------------------------------------------------


def test_cold_start_longer_than_the_revision_timeout() -> None:
    objects = load_case(
        SERVERLESS, "checks/COLDSTART_EXCEEDS_TIMEOUT/serverless_revision_timeout.yaml", drop=[BASE_POD]
    )
    findings = _run(objects)
    finding = only(findings, "COLDSTART_EXCEEDS_TIMEOUT")
    assert finding.level is Severity.CRITICAL
    assert finding.objects == (ISVC_REF, REVISION_1)
    assert finding.title == "Cold start (570 s) is longer than the Knative revision timeoutSeconds (300 s)"
    assert "waits in the activator and is answered 504 when it fires" in finding.summary
    assert "Scale-to-zero is on" in finding.summary
    assert "Knative progress deadline: 600 s (Knative's default)" in finding.evidence
    assert "completed cold starts (created → Ready) p50 570 s, p95 570 s, max 570 s over 1 pod(s); " in " ".join(
        finding.evidence
    )
    starting = next(line for line in finding.evidence if "h9w5q" in line)
    assert "not ready after 120 s (still starting: a lower bound)" in starting
    assert _patch_body(finding) == {"spec": {"predictor": {"minReplicas": 1}}}
    assert codes(findings) == {"COLDSTART_EXCEEDS_TIMEOUT", "COLDSTART_SCALE_TO_ZERO"}
    fixed = kserve_rolls_out_autoscaling(apply_patch(objects, finding))
    assert _serious_codes(fixed) == set()


def test_a_client_timeout_shorter_than_the_revision_timeout_is_the_limit() -> None:
    objects, metrics = _six_minute_case()
    isvc = next(obj for obj in objects if obj["kind"] == "InferenceService")
    isvc["metadata"]["annotations"]["kserve-runbook/client-timeout"] = "2m"
    finding = only(_run(objects, metrics), "COLDSTART_EXCEEDS_TIMEOUT")
    assert finding.title == "Cold start (360 s) is longer than the client (120 s)"
    assert "is given up at this layer while it still waits" in finding.summary


def test_a_revision_older_than_the_isvc_gets_no_patch() -> None:
    objects, _ = _six_minute_case()
    isvc = next(obj for obj in objects if obj["kind"] == "InferenceService")
    isvc["spec"]["predictor"]["minReplicas"] = 1  # asked for, but the revision in effect still has min-scale 0
    finding = only(_run(objects), "COLDSTART_SCALE_TO_ZERO")
    assert finding.patch is None
    assert "the InferenceService now asks for minReplicas 1 (next revision)" in " ".join(finding.evidence)
    assert "takes effect with the next revision KServe rolls out" in finding.remediation


def test_revision_that_failed_its_progress_deadline_while_loading() -> None:
    objects = load_case(SERVERLESS, "checks/COLDSTART_EXCEEDS_TIMEOUT/serverless_progress_deadline.yaml")
    findings = _run(objects)
    assert codes(findings) == {"COLDSTART_EXCEEDS_TIMEOUT"}  # min-scale 1: no scale-to-zero
    finding = findings[0]
    assert finding.objects == (ISVC_REF, REVISION_2)
    # The pod of 00002 was created at 11:49:30 and is still loading at 12:00: at least 630 s.
    assert finding.title == "Cold start (630 s) is longer than the Knative progress deadline (600 s)"
    assert (
        f"{REVISION_2}: Ready=False (ProgressDeadlineExceeded): 'Initial scale was never achieved'" in finding.evidence
    )
    pod_line = next(line for line in finding.evidence if "k2v7x" in line)
    assert "not ready after 630 s" in pod_line and "kubelet: image pulled in 368.2 s" in pod_line
    # 630 s × 1.5 = 945 s, rounded up to whole minutes.
    assert _patch_body(finding) == {"metadata": {"annotations": {"serving.knative.dev/progress-deadline": "960s"}}}
    fixed = kserve_rolls_out_autoscaling(apply_patch(objects, finding))
    assert _serious_codes(fixed) == set()


# --- COLDSTART_CHURN ---------------------------------------------------------------------------------------


def _flapping() -> dict[str, dict[str, Any]]:
    # 1 → 0 at 11:10, back at 11:20; 1 → 0 at 11:30, back at 11:46 (the current pod).
    return _metrics(pod_ready=[_series(_spans((0, 10, 1), (20, 30, 1), (46, 60, 1)))])


def test_scale_to_zero_churn_with_the_pod_count_timeline_as_evidence() -> None:
    objects = load_case(SERVERLESS, "checks/COLDSTART_CHURN/serverless_scale_to_zero_flapping.yaml", drop=[BASE_POD])
    finding = only(_run(objects, _flapping()), "COLDSTART_CHURN")
    assert finding.level is Severity.WARNING
    assert finding.objects == (ISVC_REF, REVISION_1)
    assert finding.title == "Ready pods fell and came back 2 times in the window"
    assert "the longest dip lasted 960 s" in finding.summary
    assert "every new pod paid the cold start (180 s, measured)" in finding.summary
    assert (
        "scale-down then up: 1 → 0 at 2026-01-15T11:10:00Z, back to 1 at 2026-01-15T11:20:00Z (600 s down)"
        in finding.evidence
    )
    assert (
        "scale-down then up: 1 → 0 at 2026-01-15T11:30:00Z, back to 1 at 2026-01-15T11:46:00Z (960 s down)"
        in finding.evidence
    )
    assert (
        "ready pods over time (pod_ready, step 15 s): 1 at 2026-01-15T11:00:00Z, 0 at 2026-01-15T11:10:00Z, "
        "1 at 2026-01-15T11:20:00Z, 0 at 2026-01-15T11:30:00Z, 1 at 2026-01-15T11:46:00Z" in finding.evidence
    )
    # 960 s × 1.5 = 1440 s.
    assert _patch_body(finding) == {"metadata": {"annotations": {"autoscaling.knative.dev/scale-down-delay": "1440s"}}}
    fixed = kserve_rolls_out_autoscaling(apply_patch(objects, finding))
    held = only(_run(fixed, _flapping()), "COLDSTART_CHURN")
    assert held.level is Severity.INFO
    assert "the churn predates that setting" in held.summary


def test_raw_hpa_churn_has_no_patch_on_a_kserve_owned_hpa() -> None:
    objects = load_case(RAW)
    metrics = _metrics(pod_ready=[_series(_spans((0, 10, 2), (10, 15, 1), (15, 30, 2), (30, 38, 1), (38, 60, 2)))])
    finding = only(_run(objects, metrics), "COLDSTART_CHURN")
    assert finding.level is Severity.WARNING
    assert finding.patch is None
    assert finding.objects == (ISVC_REF,)
    assert "stabilizationWindowSeconds) beyond 480 s" in finding.remediation


def _two_dips() -> dict[str, dict[str, Any]]:
    return _metrics(pod_ready=[_series(_spans((0, 10, 2), (10, 15, 1), (15, 30, 2), (30, 38, 1), (38, 60, 2)))])


def test_dips_of_a_rollout_are_not_churn() -> None:
    """Issue #15 item 14: a new ReplicaSet replacing the old one takes pods away; the HPA did not."""
    objects = load_case(RAW, "checks/COLDSTART_CHURN/raw_rollout_new_replicaset.yaml")
    finding = only(_run(objects, _two_dips()), "COLDSTART_CHURN")
    assert finding.level is Severity.INFO
    assert finding.title == "Ready pods dipped 2 times, from rollouts, not from scaling down"
    assert any(
        "rollout: ReplicaSet vllm-llm-predictor-5c4b3a2d1 created at 2026-01-15T11:09:45Z, replacing "
        "vllm-llm-predictor-6d5f8b7c9" in line
        for line in finding.evidence
    )
    assert "maxUnavailable 0" in finding.remediation


def test_dips_from_preemption_and_a_lost_spot_node_are_not_churn() -> None:
    objects = load_case(RAW, "checks/COLDSTART_CHURN/raw_preempted_and_spot_node_lost.yaml")
    finding = only(_run(objects, _two_dips()), "COLDSTART_CHURN")
    assert finding.level is Severity.INFO
    assert finding.title == "Ready pods dipped 2 times, from evictions and lost nodes, not from scaling down"
    lines = "\n".join(finding.evidence)
    assert "Preempted on Pod vllm-llm-predictor-6d5f8b7c9-a1b2c" in lines
    assert "Node gpu-node-b Ready=Unknown (NodeStatusUnknown)" in lines
    assert "PodDisruptionBudget" in finding.remediation


def test_a_new_revision_explains_the_dip_it_overlaps() -> None:
    """Serverless: a Revision created at 11:09:50 replaced the pods of the first dip; the second dip alone is not
    churn, so the step only names the rollout, as information."""
    objects = load_case(SERVERLESS, "checks/COLDSTART_CHURN/serverless_scale_to_zero_flapping.yaml", drop=[BASE_POD])
    revision = copy.deepcopy(next(obj for obj in objects if kube.ref(obj) == REVISION_1))
    revision["metadata"].update(name="vllm-llm-predictor-00002", creationTimestamp="2026-01-15T11:09:50Z")
    finding = only(_run([*objects, revision], _flapping()), "COLDSTART_CHURN")
    assert finding.level is Severity.INFO
    assert finding.title == "Ready pods dipped once, from rollouts, not from scaling down"
    assert any("Revision vllm-llm-predictor-00002 created at 2026-01-15T11:09:50Z" in e for e in finding.evidence)


def test_a_rollout_explains_only_the_dips_it_overlaps() -> None:
    """The rollout ended at 11:20 (its last scale-down, or ten minutes): the later dips are the HPA's."""
    objects = load_case(RAW, "checks/COLDSTART_CHURN/raw_rollout_new_replicaset.yaml")
    down = next(obj for obj in objects if kube.name(obj) == "vllm-llm-predictor.down")
    down["lastTimestamp"] = "2026-01-15T11:10:00Z"
    metrics = _metrics(
        pod_ready=[
            _series(_spans((0, 10, 2), (10, 15, 1), (15, 30, 2), (30, 38, 1), (38, 45, 2), (45, 50, 1), (50, 60, 2)))
        ]
    )
    finding = only(_run(objects, metrics), "COLDSTART_CHURN")
    assert finding.level is Severity.WARNING
    assert finding.title == "Ready pods fell and came back 2 times in the window"
    assert any(line.startswith("not counted: dip 2 → 1 at 2026-01-15T11:10:00Z") for line in finding.evidence)


def test_dips_with_a_container_restart_are_crashes_not_churn() -> None:
    objects = load_case(RAW)
    metrics = _metrics(
        pod_ready=[_series(_spans((0, 10, 2), (10, 15, 1), (15, 30, 2), (30, 38, 1), (38, 60, 2)))],
        pod_restarts=[
            _series(
                _spans((0, 10.25, 0), (10.25, 30.25, 1), (30.25, 60, 2)),
                pod="vllm-llm-predictor-6d5f8b7c9-q8w2e",
                container="kserve-container",
            )
        ],
    )
    assert _serious_codes(objects, metrics) == set()


# --- healthy -----------------------------------------------------------------------------------------------


def test_warm_replica_with_a_fast_cold_start_is_healthy() -> None:
    objects = load_case(SERVERLESS, "checks/healthy/cold_start_warm_replica.yaml")
    metrics = _metrics(pod_ready=[_series(_spans((0, 31.67, 1), (31.67, 60, 2)))])
    assert _run(objects, metrics) == []
    measured = cold_starts.cold_starts(evidence_of(objects))
    assert measured.totals is not None and measured.totals.maximum == 100


def test_raw_deployment_never_scales_to_zero() -> None:
    objects = load_case(RAW, "checks/healthy/cold_start_raw_min_zero.yaml")
    assert _run(objects) == []
    settings = cold_starts.ScaleSettings(evidence_of(objects))
    assert settings.zero_allowed() == (
        False,
        "RawDeployment without a KEDA ScaledObject: the HPA never scales the predictor to zero",
    )


# --- RawDeployment with KEDA (issue #15 item 4) -------------------------------------------------------------

KEDA_AT_ZERO = "checks/COLDSTART_SCALE_TO_ZERO/raw_keda_scaled_object_at_zero.yaml"
RAW_POD = "Pod/llm/vllm-llm-predictor-6d5f8b7c9-q8w2e"
SCALED_OBJECT_REF = "ScaledObject.keda.sh/llm/vllm-llm-scaler"
WAITING_QUERY = 'sum(vllm:num_requests_waiting{namespace="llm", pod=~"vllm-llm-predictor-.+"})'


def _keda_metrics(trigger_result: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The ready pods fell to zero at 11:20; the trigger's own query answered ``trigger_result`` (gather runs it)."""
    metrics = _metrics(pod_ready=[_series(_spans((0, 20, 1), (20, 60, 0)))])
    metrics["keda-trigger.vllm-llm-scaler.0"] = {"promql": WAITING_QUERY, "result": trigger_result}
    return metrics


def _scaled_object(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return next(obj for obj in objects if kube.ref(obj) == SCALED_OBJECT_REF)


def test_keda_scales_a_raw_deployment_to_zero_on_a_metric_only_its_pods_export() -> None:
    objects = load_case(RAW, KEDA_AT_ZERO, drop=(RAW_POD,))
    finding = only(_run(objects, _keda_metrics([])), "COLDSTART_SCALE_TO_ZERO")
    assert finding.level is Severity.CRITICAL
    assert f"{SCALED_OBJECT_REF} minReplicaCount 0 (not set: KEDA's default is 0)" in finding.summary
    assert "can wake it: prometheus query on vllm:num_requests_waiting" in finding.summary
    assert "the predictor has no ready pod now" in finding.summary
    # The ScaledObject is the user's: the patch keeps one replica there, not on the InferenceService.
    assert finding.patch is not None and finding.patch.target == SCALED_OBJECT_REF
    assert _patch_body(finding) == {"spec": {"minReplicaCount": 1}}
    assert "COLDSTART_SCALE_TO_ZERO" not in codes(_run(apply_patch(objects, finding), _keda_metrics([])))


def test_kserve_keda_class_passes_min_replicas_zero_to_keda() -> None:
    """KServe 0.15's keda reconciler writes spec.predictor.minReplicas (0 allowed) as minReplicaCount."""
    objects = load_case(RAW, KEDA_AT_ZERO, drop=(RAW_POD,))
    isvc = next(obj for obj in objects if obj["kind"] == "InferenceService")
    isvc["metadata"]["annotations"]["serving.kserve.io/autoscalerClass"] = "keda"
    isvc["spec"]["predictor"]["minReplicas"] = 0
    scaled = _scaled_object(objects)
    scaled["spec"]["minReplicaCount"] = 0
    scaled["metadata"]["ownerReferences"] = [
        {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "name": "vllm-llm", "controller": True}
    ]
    finding = only(_run(objects, _keda_metrics([])), "COLDSTART_SCALE_TO_ZERO")
    assert "written by KServe from spec.predictor.minReplicas" in finding.summary
    assert finding.patch is not None and finding.patch.target == ISVC_REF
    assert _patch_body(finding) == {"spec": {"predictor": {"minReplicas": 1}}}


def test_keda_with_a_warm_replica_or_a_trigger_that_exists_at_zero() -> None:
    objects = load_case(RAW, KEDA_AT_ZERO, drop=(RAW_POD,))
    _scaled_object(objects)["spec"]["minReplicaCount"] = 1
    assert "COLDSTART_SCALE_TO_ZERO" not in codes(_run(objects, _keda_metrics([])))
    # Scaling to zero on the ingress' request rate can wake up: a long cold start, not a trap.
    objects = load_case(RAW, KEDA_AT_ZERO, drop=(RAW_POD,))
    _scaled_object(objects)["spec"]["triggers"][0]["metadata"]["query"] = (
        'sum(rate(nginx_ingress_controller_requests{exported_namespace="llm", exported_service="vllm-llm-predictor"}[1m]))'
    )
    finding = only(_run(objects, _keda_metrics([])), "COLDSTART_SCALE_TO_ZERO")
    assert finding.level is Severity.WARNING
    assert "can wake it" not in finding.summary


def test_pod_that_waited_for_a_node_within_the_deadline_is_healthy() -> None:
    objects = load_case(SERVERLESS, "checks/healthy/cold_start_node_wait.yaml")
    evidence = evidence_of(objects)
    assert cold_start.run(evidence) == []
    waited = next(pod for pod in cold_starts.cold_starts(evidence).pods if pod.pod.endswith("w8d2l"))
    assert waited.waited_for_node and waited.total == 510
    assert waited.phases()[0] == ("created → scheduled", 230.0)


def test_scale_down_held_by_stabilization_is_not_churn() -> None:
    objects = load_case(RAW, "checks/healthy/cold_start_stabilization.yaml")
    metrics = _metrics(
        pod_ready=[_series(_spans((0, 20, 1), (20, 55, 2), (55, 60, 1)))],
        hpa_desired_replicas=[_series(_spans((0, 20, 1), (20, 30, 2), (30, 60, 1)))],
    )
    assert _run(objects, metrics) == []


def test_pods_that_cannot_be_listed_are_missing_evidence() -> None:
    reads = [
        {"what": "Pod in llm (serving.kserve.io/inferenceservice=vllm-llm)", "status": "forbidden", "reason": "RBAC"}
    ]
    with pytest.raises(EvidenceMissing, match="forbidden"):
        cold_start.run(evidence_of(load_case(SERVERLESS), reads=reads))


def test_modelmesh_is_skipped() -> None:
    objects = load_case(RAW)
    isvc = next(obj for obj in objects if obj["kind"] == "InferenceService")
    isvc["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] = "ModelMesh"
    with pytest.raises(StepSkipped):
        cold_start.run(evidence_of(objects))


# --- one cold start per start (issue #14) --------------------------------------------------------------------


def test_a_restart_after_days_of_serving_is_not_a_three_day_cold_start() -> None:
    objects = load_case(SERVERLESS, "checks/healthy/cold_start_restarted_after_days.yaml")
    evidence = evidence_of(objects)
    assert cold_start.run(evidence) == []
    (pod,) = cold_starts.cold_starts(evidence).pods
    assert pod.start == pod_phases.RESTART and pod.total == 80
    ready, created = pod.at(pod_phases.READY), pod.created_at
    assert ready is not None and created is not None
    # What creation -> latest Ready claimed: almost three days, far past Knative's 600 s progress deadline.
    assert (ready - created).total_seconds() == 258705
    assert "restarted at 2026-01-15T08:50:30Z, Ready after 80 s" in pod.describe()


def test_a_readiness_blip_is_no_cold_start() -> None:
    objects = load_case(SERVERLESS, "checks/healthy/cold_start_readiness_blip.yaml")
    # The engine ran requests all hour; it left the endpoints for 20 s at 11:41 and came back at 11:41:47.
    busy = _metrics(vllm_running=[_series(_spans((0, 41.5, 12), (41.75, 60, 12)), pod=BASE_POD.rsplit("/", 1)[1])])
    assert _run(objects, busy) == []
    (pod,) = cold_starts.cold_starts(evidence_of(objects, metrics=busy)).pods
    assert pod.total is None and pod.starting_for is None
    assert "ends a readiness blip, not a start: its engine was running requests at 2026-01-15T11:00:00Z" in pod.unknown
    # Without the engine's metrics the transition still cannot end a start: three days after the container started.
    assert _run(objects) == []
    (unseen,) = cold_starts.cold_starts(evidence_of(objects)).pods
    assert "longer than a model load takes" in unseen.unknown


def test_an_unknown_start_is_said_and_never_measured_from_creation() -> None:
    objects = load_case(SERVERLESS, "checks/healthy/cold_start_restarted_after_days.yaml")
    pod = next(obj for obj in objects if obj["kind"] == "Pod")
    serving = pod["status"]["containerStatuses"][0]
    serving["state"] = {"running": {}}
    del serving["lastState"]["terminated"]["finishedAt"]
    measured = cold_starts.cold_starts(evidence_of(objects))
    assert measured.measured is None and measured.totals is None
    (phases,) = measured.unknown
    assert "where its latest start began is not known" in phases.unknown
    assert any("cold start unknown" in line for line in measured.lines())
    assert _run(objects) == []
