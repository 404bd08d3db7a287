"""``nbhelpers.facts.autoscalers.resolve``: which HPAs, ScaledObjects and PodAutoscalers act on the predictor."""

from __future__ import annotations

from typing import Any

from builders import evidence_from_objects, load_yaml

from nbhelpers.facts import autoscalers
from nbhelpers.facts.autoscalers import Metric, hpa_metric, keda_metric

RAW = ("checks/healthy/raw.yaml",)
KEDA = ("checks/healthy/raw.yaml", "checks/healthy/metric_pipeline_keda.yaml")


def _hpa(name: str, target: str, metrics: list[dict[str, Any]] | None = None, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": "llm", **metadata},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
            "maxReplicas": 3,
            "metrics": metrics or [],
        },
    }


def _resolve(files: tuple[str, ...], *extra: dict[str, Any]) -> dict[str, autoscalers.Autoscaler]:
    evidence = evidence_from_objects([*load_yaml(*files), *extra], "llm", "vllm-llm")
    return {a.ref: a for a in autoscalers.resolve(evidence)}


def test_hpa_on_the_predictor_deployment_with_every_metric_source() -> None:
    metrics = [
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}},
        {
            "type": "ContainerResource",
            "containerResource": {
                "name": "memory",
                "container": "kserve-container",
                "target": {"type": "AverageValue", "averageValue": "20Gi"},
            },
        },
        {
            "type": "Pods",
            "pods": {
                "metric": {"name": "vllm_num_requests_waiting", "selector": {"matchLabels": {"model": "llama"}}},
                "target": {"type": "AverageValue", "averageValue": "5"},
            },
        },
        {
            "type": "Object",
            "object": {
                "describedObject": {"apiVersion": "v1", "kind": "Service", "name": "vllm-llm-predictor"},
                "metric": {"name": "requests_per_second"},
                "target": {"type": "Value", "value": "100"},
            },
        },
        {
            "type": "External",
            "external": {"metric": {"name": "queue_depth"}, "target": {"type": "Value", "value": "20"}},
        },
    ]
    found = _resolve(RAW, _hpa("vllm-llm-scaler", "vllm-llm-predictor", metrics))
    hpa = found["HorizontalPodAutoscaler/llm/vllm-llm-scaler"]
    assert hpa.targets_predictor and hpa.klass == "hpa" and hpa.owner is None
    assert hpa.scale_target.found is not None and hpa.scale_target.describe() == "Deployment/vllm-llm-predictor"
    assert hpa.why == ("its scaleTargetRef names a predictor workload",)
    assert hpa.min_replicas == 1 and hpa.max_replicas == 3  # the API default for minReplicas
    assert hpa.metrics == (
        Metric("Resource", "cpu", "metrics.k8s.io", "Utilization", "80"),
        Metric("ContainerResource", "memory", "metrics.k8s.io", "AverageValue", "20Gi", container="kserve-container"),
        Metric(
            "Pods",
            "vllm_num_requests_waiting",
            "custom.metrics.k8s.io",
            "AverageValue",
            "5",
            selector={"matchLabels": {"model": "llama"}},
        ),
        Metric(
            "Object",
            "requests_per_second",
            "custom.metrics.k8s.io",
            "Value",
            "100",
            described_object={"apiVersion": "v1", "kind": "Service", "name": "vllm-llm-predictor"},
        ),
        Metric("External", "queue_depth", "external.metrics.k8s.io", "Value", "20"),
    )
    assert hpa.apis() == ("metrics.k8s.io", "custom.metrics.k8s.io", "external.metrics.k8s.io")
    assert hpa.metrics[2].describe() == "Pods metric vllm_num_requests_waiting selector model=llama (AverageValue 5)"


def test_hpas_tied_by_name_or_label_but_scaling_something_else_are_kept_and_marked() -> None:
    found = _resolve(
        RAW,
        _hpa("vllm-llm-predictor", "vllm-llm-predictor-old"),
        _hpa("tuned", "llama-server", labels={"serving.kserve.io/inferenceservice": "vllm-llm"}),
        _hpa("unrelated", "other-app"),
    )
    assert set(found) == {"HorizontalPodAutoscaler/llm/vllm-llm-predictor", "HorizontalPodAutoscaler/llm/tuned"}
    # Named like KServe's HPA, but aimed at a Deployment KServe would never create (and that does not exist).
    renamed = found["HorizontalPodAutoscaler/llm/vllm-llm-predictor"]
    assert not renamed.targets_predictor and renamed.scale_target.found is None
    assert renamed.why == ("named after vllm-llm-predictor",)
    labelled = found["HorizontalPodAutoscaler/llm/tuned"]
    assert not labelled.targets_predictor
    assert labelled.why == ("labelled serving.kserve.io/inferenceservice=vllm-llm",)


def test_kserve_names_count_as_the_predictor_even_when_the_deployment_is_gone() -> None:
    found = _resolve(RAW, _hpa("a", "vllm-llm-predictor-00002-deployment"), _hpa("b", "vllm-llm-predictor-canary"))
    assert list(found) == ["HorizontalPodAutoscaler/llm/a"]
    assert found["HorizontalPodAutoscaler/llm/a"].scale_target.found is None


def test_keda_scaled_object_and_its_hpa() -> None:
    found = _resolve(KEDA)
    scaled_object = found["ScaledObject.keda.sh/llm/vllm-llm-predictor"]
    assert scaled_object.klass == "keda" and scaled_object.targets_predictor
    assert scaled_object.owner == "InferenceService/vllm-llm"
    assert scaled_object.hpa_name == "keda-hpa-vllm-llm-predictor"
    assert (scaled_object.min_replicas, scaled_object.max_replicas) == (1, 4)
    (trigger,) = scaled_object.metrics
    assert (trigger.source, trigger.name, trigger.api, trigger.target_value) == (
        "External",
        "s0-prometheus",
        "external.metrics.k8s.io",
        "5",
    )
    assert trigger.trigger_metadata["serverAddress"] == "http://prometheus-operated.monitoring.svc:9090"
    generated = found["HorizontalPodAutoscaler/llm/keda-hpa-vllm-llm-predictor"]
    assert generated.klass == "keda" and generated.owner == "ScaledObject/vllm-llm-predictor"
    assert "owned by ScaledObject.keda.sh/llm/vllm-llm-predictor" in generated.why
    assert generated.condition("ScalingLimited") == {
        "type": "ScalingLimited",
        "status": "True",
        "reason": "TooFewReplicas",
        "message": "the desired replica count is less than the minimum replica count",
    }
    assert list(found) == [
        "HorizontalPodAutoscaler/llm/keda-hpa-vllm-llm-predictor",
        "ScaledObject.keda.sh/llm/vllm-llm-predictor",
    ]


def test_keda_resource_triggers_read_the_resource_metrics_api() -> None:
    cpu = keda_metric(1, {"type": "cpu", "metricType": "Utilization", "metadata": {"value": "60"}})
    assert (cpu.source, cpu.name, cpu.api, cpu.target_type, cpu.target_value) == (
        "Resource",
        "cpu",
        "metrics.k8s.io",
        "Utilization",
        "60",
    )
    named = keda_metric(2, {"type": "prometheus", "name": "queue", "metadata": {"threshold": "3"}})
    assert (named.name, named.target_type) == ("queue", "AverageValue")


def test_knative_pod_autoscalers_by_class() -> None:
    files = ("checks/healthy/serverless.yaml", "checks/healthy/metric_pipeline_kpa.yaml")
    (kpa,) = _resolve(files).values()
    assert kpa.klass == "kpa" and kpa.targets_predictor and kpa.apis() == ()
    assert kpa.metrics == (Metric("Knative", "concurrency", None, "AverageValue", "4"),)
    assert (kpa.min_replicas, kpa.current_replicas, kpa.desired_replicas) == (1, 1, 1)
    hpa_class = load_yaml("checks/healthy/metric_pipeline_kpa.yaml")[0]
    hpa_class["metadata"]["annotations"] = {"autoscaling.knative.dev/class": "hpa.autoscaling.knative.dev"}
    (delegating,) = _resolve(("checks/healthy/serverless.yaml",), hpa_class).values()
    assert delegating.klass == "knative-hpa" and delegating.hpa_name == "vllm-llm-predictor-00001"
    assert delegating.metrics[0].name == "cpu"


def test_knative_legacy_camel_case_scale_bounds_are_read() -> None:
    """Knative still honours minScale/maxScale; the kebab-case key wins when both are set."""
    pod_autoscaler = load_yaml("checks/healthy/metric_pipeline_kpa.yaml")[0]
    annotations = pod_autoscaler["metadata"].setdefault("annotations", {})
    for key in list(annotations):
        if key.endswith(("min-scale", "max-scale")):
            del annotations[key]
    annotations.update({"autoscaling.knative.dev/minScale": "2", "autoscaling.knative.dev/maxScale": "6"})
    (legacy,) = _resolve(("checks/healthy/serverless.yaml",), pod_autoscaler).values()
    assert (legacy.min_replicas, legacy.max_replicas) == (2, 6)
    annotations["autoscaling.knative.dev/min-scale"] = "3"
    (both,) = _resolve(("checks/healthy/serverless.yaml",), pod_autoscaler).values()
    assert both.min_replicas == 3


def test_hpa_metric_without_target_fields() -> None:
    metric = hpa_metric({"type": "Pods", "pods": {"metric": {"name": "x"}, "target": {"type": "AverageValue"}}})
    assert metric.target_value is None and metric.describe() == "Pods metric x (AverageValue)"
    assert autoscalers.autoscaler_class(
        {"metadata": {"annotations": {"serving.kserve.io/autoscalerClass": "KEDA"}}}
    ) == ("keda")
