"""The Knative Serving release read from the labels of its ConfigMaps (nbhelpers.facts.knative_version)."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import evidence_from_objects

from nbhelpers.evidence.gather import gather
from nbhelpers.evidence.model import Target
from nbhelpers.facts import knative_version
from nbhelpers.scenarios import generate, load_spec
from nbhelpers.sources.bundle import open_bundle


def _evidence(labels: dict[str, str] | None) -> knative_version.KnativeVersion:
    objects = [
        {
            "apiVersion": "serving.kserve.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {"name": "vllm-llm", "namespace": "llm"},
            "spec": {"predictor": {}},
        }
    ]
    if labels is not None:
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "config-autoscaler", "namespace": "knative-serving", "labels": labels},
                "data": {},
            }
        )
    return knative_version.serving_version(evidence_from_objects(objects, "llm", "vllm-llm"))


@pytest.mark.parametrize(
    ("labels", "release", "startup"),
    [
        ({"app.kubernetes.io/version": "1.15.2"}, (1, 15, 2), True),
        ({"app.kubernetes.io/version": "1.14.1"}, (1, 14, 1), False),
        ({"serving.knative.dev/release": "v1.0.0"}, (1, 0, 0), False),
        ({"app.kubernetes.io/version": "1.16"}, (1, 16, 0), True),
        ({"app.kubernetes.io/version": "devel"}, None, None),
        ({}, None, None),
    ],
)
def test_release_from_the_labels(
    labels: dict[str, str], release: tuple[int, int, int] | None, startup: bool | None
) -> None:
    version = _evidence(labels)
    assert version.release == release
    assert version.allows_startup_probe is startup


def test_no_config_map_read_is_unknown_and_says_why() -> None:
    version = _evidence(None)
    assert version.release is None
    assert version.describe() == "Knative Serving version unknown (no ConfigMap of knative-serving was read)"


def test_a_generated_serverless_scenario_carries_its_knative_release() -> None:
    cluster, metrics, manifest = open_bundle(Path("<scenario>"), generate(load_spec("healthy-serverless")))
    evidence = gather(
        cluster, metrics, Target(manifest.namespace, manifest.isvc), manifest.window, manifest.captured_at
    )
    version = knative_version.serving_version(evidence)
    assert version.release == (1, 15, 2)
    assert version.allows_startup_probe is True
