"""nbhelpers.models.capacity: the fluid queue on cases small enough to work out by hand, and the recommendations."""

from __future__ import annotations

import math

import pytest

from nbhelpers.models.capacity import (
    PodCapacity,
    ScalerSetup,
    measure_capacity,
    pods_per_period,
    predict_queue,
    ready_timeline,
    recommend,
    steepest_burst,
)


def _pod(concurrency: float, throughput: float) -> PodCapacity:
    return PodCapacity(concurrency, "test", throughput, "test")


def test_constant_overload_grows_the_queue_by_the_excess() -> None:
    """One full pod (10 running, 1 completion/s) and 2 arrivals/s: the queue grows by exactly 1 request/s."""
    forecast = predict_queue(
        [(0.0, 2.0)], [(0.0, 1.0)], _pod(10, 1.0), timeout_seconds=1e9, end=100.0, step=1.0, initial_in_flight=10
    )
    by_time = {step.t: step for step in forecast.steps}
    # Waiting after the arrivals of step t: 2 per step in, 1 per step out before it.
    for moment in (0.0, 10.0, 50.0, 100.0):
        assert by_time[moment].waiting == pytest.approx(moment + 2.0)
        assert by_time[moment].running == 10
    assert forecast.timed_out == 0
    assert forecast.arrivals == pytest.approx(2.0 * 101)


def test_delay_follows_littles_law() -> None:
    """30 requests ahead, two pods completing 1.5/s each, arrivals balancing departures: a steady 10 s wait."""
    pod = _pod(4, 1.5)
    forecast = predict_queue(
        [(0.0, 3.0)], [(0.0, 2.0)], pod, timeout_seconds=1e9, end=60.0, step=1.0, initial_in_flight=2 * 4 + 30
    )
    # Every arrival finds 30 waiting ahead of it: 30 / (2 x 1.5) = 10 s, and the queue stays at 30 + 3 arrivals.
    assert all(step.delay == pytest.approx(10.0) for step in forecast.steps)
    assert all(step.waiting == pytest.approx(33.0) for step in forecast.steps)


def test_requests_arriving_before_the_first_pod_time_out() -> None:
    """No pod until t = 100, 0.1 arrivals/s, 60 s timeout, 1 s of service: who arrives before t = 41 waits more
    than 59 s and gives up; later arrivals are served when the pod comes (those who gave up take no capacity)."""
    forecast = predict_queue(
        [(0.0, 0.1)], [(0.0, 0.0), (100.0, 1.0)], _pod(1, 1.0), timeout_seconds=60.0, end=200.0, step=1.0
    )
    assert forecast.timed_out == pytest.approx(0.1 * 41)
    assert forecast.steps[0].delay == pytest.approx(100.0)
    assert all(step.timed_out == 0 for step in forecast.steps if step.t >= 41)
    # Those who give up still wait (and count, as Knative's activator counts them) until their 60 s are over.
    at_40 = forecast.steps[40]
    assert at_40.waiting == at_40.giving_up == pytest.approx(4.1)
    assert forecast.steps[101].giving_up == 0


def test_no_pod_ever_means_every_request_times_out() -> None:
    forecast = predict_queue([(0.0, 1.0)], [(0.0, 0.0)], _pod(4, 1.0), timeout_seconds=30.0, end=9.0, step=1.0)
    assert math.isinf(forecast.steps[0].delay)
    assert forecast.timed_out == forecast.arrivals == pytest.approx(10.0)


def test_burst_absorbed_by_min_replicas() -> None:
    """15 requests/s from t = 0, pods completing 5/s (S = 1 s), a 170 s cold start, 60 s timeout.

    With one pod the queue grows by 10/s; from t ≈ 30 on an arrival would wait more than 59 s, so 10/s give up
    (the one pod drains 5/s). An arrival at t > 111 knows the two extra pods (ready at t = 170) will help: it may
    find up to 5 (170 − t) + 15 (59 − (170 − t)) = 10 t − 815 requests ahead, a bound that grows by 10/s, as fast
    as the queue does: from then on nobody gives up. So ≈ 10 x (111 − 31) = 800 timeouts. Three pods from the
    start time out nothing."""
    demand = [(0.0, 15.0)]
    pod = _pod(5, 5.0)
    one = predict_queue(demand, [(0.0, 1.0), (170.0, 3.0)], pod, timeout_seconds=60.0, end=600.0, step=1.0)
    three = predict_queue(demand, [(0.0, 3.0)], pod, timeout_seconds=60.0, end=600.0, step=1.0)
    assert one.timed_out == pytest.approx(800, rel=0.03)
    assert three.timed_out == 0
    assert three.peak_waiting == pytest.approx(0.0, abs=1e-9)


def test_ready_timeline_waits_a_cold_start_and_removes_the_youngest_first() -> None:
    replicas = [(0.0, 1.0), (15.0, 3.0), (30.0, 2.0), (300.0, 1.0)]
    assert ready_timeline(replicas, 100.0) == [(0.0, 1.0), (115.0, 2.0), (300.0, 1.0)]
    # Pods of the first sample are ready at once unless told otherwise.
    assert ready_timeline([(0.0, 2.0)], 50.0, initial_ready=0) == [(0.0, 0.0), (50.0, 2.0)]


def test_measured_capacity_from_saturated_samples() -> None:
    """Two pods pinned at 64 running with requests waiting, 18 completions/s in total: 9/s per pod."""
    running = {"a": {0.0: 64.0, 15.0: 64.0, 30.0: 20.0}, "b": {0.0: 64.0, 15.0: 64.0, 30.0: 20.0}}
    waiting = {"a": {0.0: 5.0, 15.0: 9.0, 30.0: 0.0}, "b": {0.0: 3.0, 15.0: 2.0, 30.0: 0.0}}
    completions = {0.0: 18.0, 15.0: 18.0, 30.0: 5.0}
    tokens = {0.0: 3600.0, 15.0: 3600.0, 30.0: 1000.0}
    capacity = measure_capacity(running, waiting, completions, tokens, 64.0, "--max-num-seqs=64")
    assert capacity is not None and capacity.saturated
    assert (capacity.concurrency, capacity.throughput, capacity.tokens_per_second) == (64.0, 9.0, 1800.0)
    assert capacity.service_seconds == pytest.approx(64 / 9)


def test_capacity_estimated_with_littles_law_when_never_saturated() -> None:
    """4 running on average at 0.5 completions/s: requests take 8 s, so a batch of 16 finishes 2/s at best."""
    running = {"a": {0.0: 4.0, 15.0: 4.0}}
    waiting = {"a": {0.0: 0.0, 15.0: 0.0}}
    capacity = measure_capacity(running, waiting, {0.0: 0.5, 15.0: 0.5}, {}, 16.0, "KV cache")
    assert capacity is not None and not capacity.saturated
    assert capacity.throughput == pytest.approx(2.0)
    assert measure_capacity({}, {}, {}, {}, None, "") is None


def test_steepest_burst_within_one_cold_start() -> None:
    demand = [(0.0, 2.0), (60.0, 2.0), (120.0, 10.0), (400.0, 14.0)]
    burst = steepest_burst(demand, 170.0)
    assert burst is not None and (burst.start, burst.base, burst.peak) == (0.0, 2.0, 10.0)


def _hpa_setup(**changes: object) -> ScalerSetup:
    base = {
        "kind": "hpa",
        "isvc_ref": "InferenceService.serving.kserve.io/ns/svc",
        "min_replicas": 1,
        "max_replicas": 3,
        "target": 48.0,
        "target_metric": "vllm:num_requests_running",
        "hpa_ref": "HorizontalPodAutoscaler.autoscaling/ns/svc-predictor",
        "hpa_user_owned": True,
        "hpa_metrics": (
            {
                "type": "Pods",
                "pods": {
                    "metric": {"name": "vllm:num_requests_running"},
                    "target": {"type": "AverageValue", "averageValue": "48"},
                },
            },
        ),
    }
    base.update(changes)
    return ScalerSetup(**base)  # type: ignore[arg-type]


def test_recommendations_for_a_spike_beyond_max() -> None:
    """Peak 36/s at 9.33/s per pod (80 %: 7.47/s) needs 5 pods; the rise from 5 to 15/s within a 170 s cold start
    needs 2 pods ready beforehand; the running target 48 < 90 % of 64 stays; default scale-up adds 4 pods per 15 s,
    more than the 2 the burst needs."""
    demand = [(0.0, 0.0), (360.0, 4.0), (900.0, 5.0), (1000.0, 15.0), (1320.0, 30.0), (2400.0, 36.0)]
    pod = _pod(64, 28 / 3)
    found = {rec.setting: rec for rec in recommend(_hpa_setup(), demand, pod, 170.0)}
    assert set(found) == {"maxReplicas", "minReplicas"}
    assert found["maxReplicas"].value == 5
    assert found["maxReplicas"].patch == {"spec": {"maxReplicas": 5}}
    assert found["maxReplicas"].target.startswith("HorizontalPodAutoscaler")
    assert found["minReplicas"].value == 2
    assert found["minReplicas"].numbers["burst_to_rps"] == 15.0


def test_kserve_owned_hpa_gets_isvc_patches_and_an_honest_behavior_note() -> None:
    demand = [(0.0, 1.0), (100.0, 30.0)]
    setup = _hpa_setup(
        hpa_user_owned=False,
        target=64.0,
        max_replicas=10,
        scale_up={"stabilizationWindowSeconds": 120},
    )
    found = {rec.setting: rec for rec in recommend(setup, demand, _pod(64, 5.0), 200.0)}
    assert found["minReplicas"].patch == {"spec": {"predictor": {"minReplicas": 6}}}
    assert found["minReplicas"].target == setup.isvc_ref
    # KServe's autoScaling.metrics cannot hold an HPA Pods metric: the target goes on the HPA, with the caveat.
    target = found["target"]
    assert target.target == setup.hpa_ref and "reconcile it back" in target.reason
    assert target.patch["spec"]["metrics"][0]["pods"]["target"] == {"type": "AverageValue", "averageValue": "51"}
    behavior = found["scaleUp"]
    assert behavior.target == setup.hpa_ref and "no field for HPA behavior" in behavior.reason
    assert behavior.value["stabilizationWindowSeconds"] == 0
    assert behavior.value["policies"][0] == {"type": "Pods", "value": 6, "periodSeconds": 15}


def test_scale_to_zero_gets_one_warm_replica_and_a_knative_target() -> None:
    setup = ScalerSetup(
        kind="kpa", isvc_ref="InferenceService.serving.kserve.io/ns/svc", min_replicas=0, max_replicas=2
    )
    found = {rec.setting: rec for rec in recommend(setup, [(0.0, 0.0), (60.0, 0.25)], _pod(16, 1.2), 416.0)}
    assert found["minReplicas"].value == 1
    assert found["minReplicas"].patch == {"spec": {"predictor": {"minReplicas": 1}}}
    # Knative's default target 100 x 70 % aims far above the 16 a pod runs: 80 % of 16 = 12 -> 12 / 0.7 = 17.
    assert found["target"].patch == {
        "metadata": {
            "annotations": {"autoscaling.knative.dev/metric": "concurrency", "autoscaling.knative.dev/target": "17"}
        }
    }
    assert "maxReplicas" not in found


def test_healthy_load_asks_for_no_more_replicas() -> None:
    demand = [(0.0, 1.0), (600.0, 1.5), (1200.0, 1.2)]
    found = recommend(_hpa_setup(), demand, _pod(64, 9.0), 170.0)
    assert [rec.setting for rec in found] == []


def test_pods_per_period_compounds_percent_policies() -> None:
    policies = {"policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}], "selectPolicy": "Max"}
    assert pods_per_period(policies, 1, 60.0) == 15  # 1 -> 2 -> 4 -> 8 -> 16
    slow = {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}
    assert pods_per_period(slow, 3, 60.0) == 1
