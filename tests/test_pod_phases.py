"""The cold-start arithmetic of :mod:`nbhelpers.facts.pod_phases`: pod milestones from status and events,
distributions, and valleys in the pod-count timeline."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from nbhelpers.facts import pod_phases
from nbhelpers.facts.pod_phases import Distribution, Valley

OBSERVED = datetime(2026, 1, 15, 12, 0, tzinfo=timezone.utc)
POD = "vllm-llm-predictor-00001-deployment-abc"


def _pod(
    *,
    created: str = "2026-01-15T11:00:00Z",
    scheduled: str | None = "2026-01-15T11:00:02Z",
    started: str | None = "2026-01-15T11:02:00Z",
    ready: str | None = "2026-01-15T11:05:00Z",
    ready_false_since: str | None = None,
    restarts: int = 0,
    waiting: str | None = None,
    phase: str = "Running",
) -> dict[str, Any]:
    conditions: list[dict[str, Any]] = []
    if scheduled:
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled})
    else:
        conditions.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable"})
    if ready:
        conditions.append({"type": "Ready", "status": "True", "lastTransitionTime": ready})
    else:
        conditions.append({"type": "Ready", "status": "False", "lastTransitionTime": ready_false_since or created})
    state: dict[str, Any] = {"running": {"startedAt": started}} if started else {"waiting": {"reason": waiting or ""}}
    if waiting and started:
        state = {"waiting": {"reason": waiting}}
    status: dict[str, Any] = {
        "name": "kserve-container",
        "ready": bool(ready),
        "restartCount": restarts,
        "state": state,
    }
    if waiting and started:
        status["lastState"] = {"terminated": {"startedAt": started, "finishedAt": "2026-01-15T11:03:00Z"}}
    return {
        "metadata": {"name": POD, "creationTimestamp": created},
        "spec": {"containers": [{"name": "kserve-container", "image": "vllm/vllm-openai:v0.10.1"}]},
        "status": {"phase": phase, "conditions": conditions, "containerStatuses": [status]},
    }


def _event(reason: str, message: str, at: str, *, field: str | None = None, count: int = 1) -> dict[str, Any]:
    involved: dict[str, Any] = {"kind": "Pod", "name": POD}
    if field:
        involved["fieldPath"] = field
    return {
        "reason": reason,
        "message": message,
        "count": count,
        "firstTimestamp": at,
        "lastTimestamp": at,
        "involvedObject": involved,
    }


def test_phases_from_conditions_events_and_container_start() -> None:
    events = [
        _event(
            "Pulled",
            'Container image "kserve/storage-initializer:v0.14.1" already present on machine',
            "2026-01-15T11:00:03Z",
            field="spec.initContainers{storage-initializer}",
        ),
        _event(
            "Pulled",
            'Successfully pulled image "vllm/vllm-openai:v0.10.1" in 1m2.5s (1m2.5s including waiting)',
            "2026-01-15T11:01:05Z",
            field="spec.containers{kserve-container}",
        ),
    ]
    phases = pod_phases.measure_pod(_pod(), events, "kserve-container", OBSERVED)
    assert phases.total == 300
    assert phases.pull_seconds == 62.5
    assert phases.phases() == [
        ("created → scheduled", 2.0),
        ("scheduled → image pulled", 63.0),  # the init container's pull is not the serving image's
        ("image pulled → container started", 55.0),
        ("container started → Ready", 180.0),
    ]
    assert "Ready after 300 s = created → scheduled 2 s + scheduled → image pulled 63 s" in phases.describe()
    assert "kubelet: image pulled in 62.5 s" in phases.describe()


def test_a_missing_milestone_merges_its_neighbours() -> None:
    phases = pod_phases.measure_pod(_pod(), [], "kserve-container", OBSERVED)
    assert [name for name, _ in phases.phases()] == [
        "created → scheduled",
        "scheduled → container started",
        "container started → Ready",
    ]


def test_pull_event_without_field_path_is_matched_by_image() -> None:
    other = _event("Pulled", 'Container image "gcr.io/queue:1" already present on machine', "2026-01-15T11:00:04Z")
    serving = _event(
        "Pulled", 'Container image "vllm/vllm-openai:v0.10.1" already present on machine', "2026-01-15T11:00:05Z"
    )
    phases = pod_phases.measure_pod(_pod(), [other, serving], "kserve-container", OBSERVED)
    assert phases.at(pod_phases.PULLED) == datetime(2026, 1, 15, 11, 0, 5, tzinfo=timezone.utc)
    assert phases.image_cached and phases.pull_seconds is None


def test_node_wait_counts_in_the_scheduling_phase() -> None:
    events = [
        _event(
            "FailedScheduling",
            "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
            "2026-01-15T11:00:00Z",
            count=5,
        ),
        _event("TriggeredScaleUp", "pod triggered scale-up: [{gpu-pool 2->3 (max: 6)}]", "2026-01-15T11:00:10Z"),
        _event("Scheduled", f"Successfully assigned llm/{POD} to gpu-node-c", "2026-01-15T11:04:00Z"),
    ]
    pod = _pod(scheduled=None, started="2026-01-15T11:06:00Z", ready="2026-01-15T11:09:00Z")
    pod["status"]["conditions"][0] = {"type": "PodScheduled", "status": "True"}  # no transition time recorded
    phases = pod_phases.measure_pod(pod, events, "kserve-container", OBSERVED)
    assert phases.waited_for_node
    assert phases.phases()[0] == ("created → scheduled", 240.0)
    assert "waited for a node: 5× FailedScheduling, then 'pod triggered scale-up" in phases.describe()


def test_still_starting_is_a_lower_bound() -> None:
    pod = _pod(
        started="2026-01-15T11:50:00Z",
        ready=None,
        created="2026-01-15T11:45:00Z",
        ready_false_since="2026-01-15T11:45:01Z",
    )
    phases = pod_phases.measure_pod(pod, [], "kserve-container", OBSERVED)
    assert phases.total is None
    assert phases.starting_for == 900
    assert "not ready after 900 s (still starting: a lower bound)" in phases.describe()


def test_an_unready_pod_whose_server_is_up_is_not_still_starting() -> None:
    """knative/serving#14021: vLLM logged its start, a sidecar keeps the pod unready: no cold start runs on."""
    pod = _pod(
        started="2026-01-15T11:50:00Z",
        ready=None,
        created="2026-01-15T11:45:00Z",
        ready_false_since="2026-01-15T11:45:01Z",
    )
    up = pod_phases.ServingSignals(up_at=datetime(2026, 1, 15, 11, 52, tzinfo=timezone.utc))
    phases = pod_phases.measure_pod(pod, [], "kserve-container", OBSERVED, up)
    assert phases.starting_for is None
    assert "server has been up since 2026-01-15T11:52:00Z" in phases.stuck
    earlier = pod_phases.ServingSignals(up_at=datetime(2026, 1, 15, 11, 40, tzinfo=timezone.utc))  # a previous run's
    assert pod_phases.measure_pod(pod, [], "kserve-container", OBSERVED, earlier).starting_for == 900


@pytest.mark.parametrize(
    ("pod", "reason"),
    [
        (_pod(scheduled=None, started=None, ready=None, phase="Pending"), "not scheduled"),
        (_pod(ready=None, started=None, waiting="ImagePullBackOff"), "waiting: ImagePullBackOff"),
        (_pod(ready=None, restarts=3, waiting="CrashLoopBackOff"), "waiting: CrashLoopBackOff"),
        (_pod(ready=None, restarts=2), "restarted 2×"),
        (_pod(ready=None, ready_false_since="2026-01-15T11:40:00Z"), "was ready before"),
    ],
)
def test_pods_stuck_for_other_reasons_give_no_lower_bound(pod: dict[str, Any], reason: str) -> None:
    phases = pod_phases.measure_pod(pod, [], "kserve-container", OBSERVED)
    assert phases.starting_for is None
    assert reason in phases.stuck


def test_distribution_uses_nearest_rank() -> None:
    distribution = Distribution.of([float(v) for v in range(1, 21)])
    assert distribution == Distribution(20, 10.0, 19.0, 20.0)
    assert Distribution.of([]) is None


def test_phase_distributions_are_in_milestone_order() -> None:
    fast = pod_phases.measure_pod(_pod(), [], "kserve-container", OBSERVED)
    slow = pod_phases.measure_pod(_pod(ready="2026-01-15T11:12:00Z"), [], "kserve-container", OBSERVED)
    result = dict(pod_phases.phase_distributions([fast, slow]))
    assert list(result) == ["created → scheduled", "scheduled → container started", "container started → Ready"]
    assert result["container started → Ready"] == Distribution(2, 180.0, 600.0, 600.0)


def test_gaps_in_a_summed_series_are_zero_pods() -> None:
    samples = [(0.0, 1.0), (15.0, 1.0), (60.0, 1.0)]
    assert pod_phases.fill_gaps(samples, 15) == [(0.0, 1.0), (15.0, 1.0), (30.0, 0.0), (45.0, 0.0), (60.0, 1.0)]


def test_valleys_count_falls_followed_by_rises() -> None:
    samples = [(float(t), v) for t, v in enumerate([1, 1, 0, 0, 1, 1, 0, 1, 1])]
    assert pod_phases.valleys(samples) == [Valley(2, 4, 1, 0, 1), Valley(6, 7, 1, 0, 1)]
    assert pod_phases.valleys(samples)[0].seconds == 2


def test_a_staircase_down_and_up_is_one_valley_and_a_peak_is_none() -> None:
    staircase = [(float(t), v) for t, v in enumerate([3, 2, 1, 2, 3])]
    assert pod_phases.valleys(staircase) == [Valley(1, 3, 3, 1, 2)]
    peak = [(float(t), v) for t, v in enumerate([1, 2, 2, 1])]
    assert pod_phases.valleys(peak) == []


def test_counter_increases() -> None:
    assert pod_phases.increases([(0.0, 0.0), (15.0, 0.0), (30.0, 1.0), (45.0, 1.0), (60.0, 3.0)]) == [30.0, 60.0]


# --- one cold start per start (issue #14) -------------------------------------------------------------------

CREATED_DAYS_AGO = "2026-01-12T09:00:00Z"  # three days before OBSERVED


def _served_for_days(
    *,
    ready: str = "2026-01-15T08:51:50Z",
    restarts: int = 1,
    started: str | None = "2026-01-15T08:50:30Z",
    finished: str | None = "2026-01-15T08:47:00Z",
    sidecar_restarts: int = 0,
) -> dict[str, Any]:
    """A pod created three days ago whose serving container restarted this morning (a node reboot: the runtime
    reports the last run as Terminated, reason Unknown, exit code 255)."""
    pod = _pod(created=CREATED_DAYS_AGO, scheduled="2026-01-12T09:00:02Z", started=started, ready=ready)
    status = pod["status"]["containerStatuses"][0]
    status["restartCount"] = restarts
    if started is None:
        status["state"] = {}
    if restarts:
        terminated: dict[str, Any] = {"exitCode": 255, "reason": "Unknown", "startedAt": "2026-01-12T09:01:00Z"}
        if finished is not None:
            terminated["finishedAt"] = finished
        status["lastState"] = {"terminated": terminated}
    pod["status"]["containerStatuses"].append(
        {"name": "queue-proxy", "ready": True, "restartCount": sidecar_restarts, "state": {"running": {}}}
    )
    return pod


def test_a_new_pod_is_measured_from_its_creation() -> None:
    phases = pod_phases.measure_pod(_pod(), [], "kserve-container", OBSERVED)
    assert phases.start == pod_phases.FIRST_START and not phases.unknown
    assert phases.began == datetime(2026, 1, 15, 11, 0, tzinfo=timezone.utc)
    assert phases.total == 300


def test_a_restart_after_days_is_measured_from_the_container_start() -> None:
    phases = pod_phases.measure_pod(_served_for_days(), [], "kserve-container", OBSERVED)
    # Not 2026-01-12T09:00 -> 2026-01-15T08:51:50 (more than three days): the restart's own 80 s.
    assert phases.start == pod_phases.RESTART
    assert phases.total == 80
    assert phases.phases() == [("container started → Ready", 80.0)]
    text = phases.describe()
    assert "restarted at 2026-01-15T08:50:30Z, Ready after 80 s = container started → Ready 80 s" in text
    assert (
        "restart 1 of the serving container; the previous run ended 2026-01-15T08:47:00Z: Unknown, exit code 255"
        in text
    )


def test_a_restart_without_start_time_is_measured_from_the_previous_run_end() -> None:
    phases = pod_phases.measure_pod(_served_for_days(started=None), [], "kserve-container", OBSERVED)
    assert phases.milestones[0][0] == pod_phases.STOPPED
    assert phases.total == 290  # 08:47:00 -> 08:51:50: the back-off and the load
    assert "no state.running.startedAt: measured from that end" in phases.describe()


def test_a_restart_the_status_cannot_place_is_unknown_not_measured_from_creation() -> None:
    phases = pod_phases.measure_pod(_served_for_days(started=None, finished=None), [], "kserve-container", OBSERVED)
    assert phases.total is None and phases.starting_for is None
    assert phases.milestones == ()
    assert "neither state.running.startedAt nor lastState.terminated.finishedAt" in phases.unknown
    assert "cold start unknown" in phases.describe()


def test_a_sidecar_restart_is_no_model_load() -> None:
    pod = _served_for_days(restarts=0, started="2026-01-12T09:01:00Z", finished=None, sidecar_restarts=1)
    phases = pod_phases.measure_pod(pod, [], "kserve-container", OBSERVED)
    assert phases.total is None
    assert "container queue-proxy restarted" in phases.unknown


def test_a_run_long_after_creation_without_a_restart_record_is_a_later_start() -> None:
    # restartCount is counted from dead containers, which garbage collection removes: a container that began its
    # run three days after its pod was scheduled started again, whatever its count says.
    pod = _served_for_days(restarts=0, finished=None)
    phases = pod_phases.measure_pod(pod, [], "kserve-container", OBSERVED)
    assert phases.start == pod_phases.RESTART
    assert phases.total == 80
    assert "no restart recorded, but the container started 3.0 days after the pod was scheduled" in phases.describe()
    still_loading = _served_for_days(restarts=0, finished=None, ready=None)
    still_loading["status"]["conditions"][1]["lastTransitionTime"] = "2026-01-15T08:50:31Z"
    loading = pod_phases.measure_pod(still_loading, [], "kserve-container", OBSERVED)
    assert loading.starting_for == 11370  # since 08:50:30, not since the pod's creation


def test_a_readiness_blip_seen_in_the_metrics_is_no_start() -> None:
    pod = _served_for_days(restarts=0, started="2026-01-12T09:01:00Z", finished=None, ready="2026-01-15T11:41:47Z")
    busy = pod_phases.ServingSignals(busy_at=(datetime(2026, 1, 15, 11, 0, 15, tzinfo=timezone.utc),))
    phases = pod_phases.measure_pod(pod, [], "kserve-container", OBSERVED, busy)
    assert phases.total is None and phases.starting_for is None
    assert phases.unknown.startswith("its Ready transition at 2026-01-15T11:41:47Z ends a readiness blip, not a start")
    assert "its engine was running requests at 2026-01-15T11:00:15Z" in phases.unknown
    # Without the metrics the transition still cannot end the load: it came three days after the container started.
    unseen = pod_phases.measure_pod(pod, [], "kserve-container", OBSERVED)
    assert unseen.total is None
    assert (
        "came 3.1 days after the container started at 2026-01-12T09:01:00Z, longer than a model load" in unseen.unknown
    )


def test_a_load_longer_than_an_hour_counts_when_the_log_places_ready_after_it() -> None:
    # A very large model downloaded by the engine itself: the server comes up 89 minutes after the container starts.
    pod = _pod(created="2026-01-15T09:00:00Z", scheduled="2026-01-15T09:00:02Z", started="2026-01-15T09:01:00Z")
    pod["status"]["conditions"][1]["lastTransitionTime"] = "2026-01-15T10:30:05Z"
    up = pod_phases.ServingSignals(up_at=datetime(2026, 1, 15, 10, 30, tzinfo=timezone.utc))
    assert pod_phases.measure_pod(pod, [], "kserve-container", OBSERVED, up).total == 5405
    assert pod_phases.measure_pod(pod, [], "kserve-container", OBSERVED).total is None


def test_a_readiness_blip_seen_in_the_log_is_no_start() -> None:
    pod = _pod(started="2026-01-15T11:02:00Z", ready="2026-01-15T11:40:00Z")
    pod["spec"]["containers"][0]["readinessProbe"] = {"httpGet": {"path": "/health", "port": 8080}, "periodSeconds": 5}
    up = pod_phases.ServingSignals(up_at=datetime(2026, 1, 15, 11, 5, tzinfo=timezone.utc))
    phases = pod_phases.measure_pod(pod, [], "kserve-container", OBSERVED, up)
    assert "its log has the server up at 2026-01-15T11:05:00Z, 2100 s before it" in phases.unknown
    assert "a readiness check follows within 15 s" in phases.unknown


def test_ready_soon_after_the_server_is_up_is_the_start() -> None:
    pod = _pod(started="2026-01-15T11:02:00Z", ready="2026-01-15T11:05:04Z")
    up = pod_phases.ServingSignals(up_at=datetime(2026, 1, 15, 11, 5, tzinfo=timezone.utc))
    assert pod_phases.measure_pod(pod, [], "kserve-container", OBSERVED, up).total == 304
    # A readiness probe that starts late (initialDelaySeconds 600) turns the pod Ready long after the server is up.
    pod["spec"]["containers"][0]["readinessProbe"] = {"httpGet": {"path": "/health"}, "initialDelaySeconds": 600}
    pod["status"]["conditions"][1]["lastTransitionTime"] = "2026-01-15T11:12:05Z"
    assert pod_phases.measure_pod(pod, [], "kserve-container", OBSERVED, up).total == 725


def test_requests_before_a_restart_do_not_make_its_ready_a_blip() -> None:
    # A sample right after the restart can still be the previous run's (Prometheus' lookback): not evidence.
    early = pod_phases.ServingSignals(busy_at=(datetime(2026, 1, 15, 8, 51, tzinfo=timezone.utc),))
    phases = pod_phases.measure_pod(_served_for_days(), [], "kserve-container", OBSERVED, early)
    assert phases.total == 80
