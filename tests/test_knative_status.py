"""The Knative conditions the scenario generator writes for a Serverless predictor whose pods are not available:
Knative 1.15's Revision reconciler over the pods (docs/upstream-facts.md, "Knative Revision conditions from the
pods"; nbhelpers/scenarios/knative_status.py), the Configuration's RevisionFailed and KServe's copy of them."""

from __future__ import annotations

from typing import Any

import pytest

from nbhelpers.scenarios import blocked, load_spec, scenarios_dir
from nbhelpers.scenarios.generator import build_objects
from nbhelpers.scenarios.knative_status import exit_message
from nbhelpers.scenarios.spec import ScenarioSpec, parse_spec
from nbhelpers.scenarios.state import plan


def _variant(name: str, *changes: tuple[str, str]) -> ScenarioSpec:
    text = (scenarios_dir() / f"{name}.yaml").read_text()
    for old, new in changes:
        assert old in text, old
        text = text.replace(old, new)
    return parse_spec(text, name)


def _conditions(spec: ScenarioSpec, kind: str, api: str = "") -> dict[str, tuple[str, str, str]]:
    objects = build_objects(blocked.apply(plan(spec)))
    found = [obj for obj in objects if obj["kind"] == kind and obj["apiVersion"].startswith(api)]
    assert len(found) == 1, kind
    return {
        entry["type"]: (entry["status"], entry.get("reason", ""), entry.get("message", ""))
        for entry in found[0]["status"]["conditions"]
    }


def _revision(spec: ScenarioSpec) -> dict[str, tuple[str, str, str]]:
    return _conditions(spec, "Revision")


PAST_DEADLINE = ("ResourcesAvailable", "False", "ProgressDeadlineExceeded")


def test_a_crash_loop_past_the_deadline_is_exit_code_over_the_deadline() -> None:
    revision = _revision(load_spec("engine-bf16-on-t4"))
    assert revision["ContainerHealthy"] == ("False", "ExitCode1", "Container failed with: ")
    assert revision["Ready"] == ("False", "ExitCode1", "Container failed with: ")
    assert ("ResourcesAvailable", *revision["ResourcesAvailable"][:2]) == PAST_DEADLINE
    assert revision["ResourcesAvailable"][2].endswith("has timed out progressing.")


def test_the_failed_revision_is_propagated_to_the_knative_service_and_the_inference_service() -> None:
    spec = load_spec("engine-bf16-on-t4")
    failed = 'Revision "faq-assistant-predictor-00001" failed with message: Container failed with: .'
    ksvc = _conditions(spec, "Service", "serving.knative.dev")
    assert ksvc["ConfigurationsReady"] == ("False", "RevisionFailed", failed)
    assert ksvc["RoutesReady"][:2] == ("False", "RevisionMissing")
    assert ksvc["Ready"] == ksvc["RoutesReady"]  # the Route propagates last (knative/serving#11337's status)
    isvc = _conditions(spec, "InferenceService")
    assert isvc["PredictorConfigurationReady"] == ("False", "RevisionFailed", failed)
    assert isvc["PredictorReady"][:2] == ("False", "RevisionMissing")


def test_a_crash_loop_before_the_deadline_only_fails_container_healthy() -> None:
    early = _variant("engine-bf16-on-t4", ("captured_at: 2026-04-21T16:00:00Z", "captured_at: 2026-04-21T15:14:00Z"))
    revision = _revision(early)
    assert revision["ContainerHealthy"][:2] == ("False", "ExitCode1")
    assert revision["Ready"][:2] == ("False", "ExitCode1")
    assert revision["ResourcesAvailable"][0] == "True"


def test_pods_that_never_turn_ready_without_a_crash_fail_at_the_deadline() -> None:
    revision = _revision(load_spec("queue-proxy-probe-port-unserved"))
    assert ("ResourcesAvailable", *revision["ResourcesAvailable"][:2]) == PAST_DEADLINE
    assert revision["Ready"][:2] == ("False", "ProgressDeadlineExceeded")
    assert revision["ContainerHealthy"][:2] == ("Unknown", "Deploying")
    autoscaler = _conditions(load_spec("queue-proxy-probe-port-unserved"), "PodAutoscaler")
    assert autoscaler["Active"][:2] == ("Unknown", "Queued")
    assert autoscaler["ScaleTargetInitialized"][0] == "Unknown"


def test_before_the_deadline_a_revision_without_a_failure_is_still_deploying() -> None:
    early = _variant(
        "queue-proxy-probe-port-unserved",
        ("captured_at: 2026-05-29T16:00:00Z", "captured_at: 2026-05-29T15:27:00Z"),
        ("incident_end: 2026-05-29T16:00:00Z", "incident_end: 2026-05-29T15:27:00Z"),
    )
    revision = _revision(early)
    assert revision["Ready"][:2] == ("Unknown", "Deploying")
    assert revision["ContainerHealthy"][:2] == ("Unknown", "Deploying")
    ksvc = _conditions(early, "Service", "serving.knative.dev")
    assert "RevisionFailed" not in {reason for _, reason, _ in ksvc.values()}


def test_unschedulable_pods_fail_resources_available_with_the_schedulers_words() -> None:
    serverless = _variant(
        "gpu-capacity",
        ("deployment_mode: RawDeployment", "deployment_mode: Serverless"),
        ("autoscaler_class: none", "autoscaler_class: kpa"),
        ('knative: ""', 'knative: "1.15.2"'),
    )
    revision = _revision(serverless)
    status, reason, message = revision["ResourcesAvailable"]
    assert (status, reason) == ("False", "Unschedulable")
    assert "Insufficient nvidia.com/gpu" in message
    assert revision["Ready"] == revision["ResourcesAvailable"]
    assert revision["ContainerHealthy"][:2] == ("Unknown", "Deploying")


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("rejected-quota-sidecar", "FailedCreate"),
        ("hf-token-secret-misnamed-serverless", "CreateContainerConfigError"),
        ("init-storage-oomkilled", "PodInitializing"),
        ("image-digest-unresolved", "ContainerMissing"),
    ],
)
def test_pods_never_created_or_started_name_their_reason(name: str, reason: str) -> None:
    assert _revision(load_spec(name))["Ready"][:2] == ("False", reason)


@pytest.mark.parametrize("name", ["healthy-serverless", "healthy-readiness-blip"])
def test_a_healthy_revision_stays_ready(name: str) -> None:
    revision = _revision(load_spec(name))
    assert {kind: status for kind, (status, _, _) in revision.items()} == {
        "Active": "True",
        "ContainerHealthy": "True",
        "Ready": "True",
        "ResourcesAvailable": "True",
    }


def test_exit_message_follows_knative() -> None:
    terminated: dict[str, Any] = {"exitCode": 0}
    assert exit_message(terminated) == "Container failed with: container exited with no error"
    assert exit_message({"exitCode": 1, "message": "boom"}) == "Container failed with: boom"


def _single_pod_crash(knative: str = "1.15.2") -> ScenarioSpec:
    """runtime-illegal-memory-access-log-cut-serverless with one pod: its engine dies while serving and no other pod
    is available when it does; it restarts and serves again."""
    return _variant(
        "runtime-illegal-memory-access-log-cut-serverless",
        ("min_replicas: 2", "min_replicas: 1"),
        ("{pod: 1, at", "{pod: 0, at"),
        ('knative: "1.15.2"', f'knative: "{knative}"'),
    )


def test_knative_1_15_keeps_container_healthy_false_after_the_pod_recovered() -> None:
    # knative/serving#15487: 1.14 to 1.16 never set ContainerHealthy back to True; the Route and KServe copy it.
    spec = _single_pod_crash()
    revision = _revision(spec)
    assert revision["ContainerHealthy"] == ("False", "ExitCode1", "Container failed with: ")
    assert revision["Ready"] == ("False", "ExitCode1", "Container failed with: ")
    assert revision["Active"][0] == revision["ResourcesAvailable"][0] == "True"
    ksvc = _conditions(spec, "Service", "serving.knative.dev")
    assert ksvc["RoutesReady"][1:] == (
        "RevisionMissing",
        'Revision "contract-review-predictor-00001" failed to become ready.',
    )
    isvc = _conditions(spec, "InferenceService")
    assert isvc["PredictorReady"] == ksvc["Ready"] == ksvc["RoutesReady"]
    assert isvc["IngressReady"][:2] == ("False", "Predictor ingress not created")


def test_knative_1_17_sets_container_healthy_back_to_true() -> None:
    assert _revision(_single_pod_crash("1.17.0"))["Ready"][0] == "True"


def test_a_crash_while_another_pod_serves_is_not_seen_by_knative() -> None:
    # The Revision reconciler reads the pods only while the Deployment has no available replica.
    assert _revision(load_spec("runtime-illegal-memory-access-log-cut-serverless"))["Ready"][0] == "True"
