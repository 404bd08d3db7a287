"""Reading and writing evidence bundles (docs/contracts.md#evidence-bundle)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders import CAPTURED_AT, WINDOW, bundle_files, evidence_from_objects

from nbhelpers.errors import BundleError, ReadFailed
from nbhelpers.evidence.capture import bundle_files as capture_files
from nbhelpers.evidence.gather import gather
from nbhelpers.evidence.model import Target
from nbhelpers.sources import kinds
from nbhelpers.sources.bundle import open_bundle, write_bundle_files

KUBECTL_POD_LIST = """\
apiVersion: v1
items:
- apiVersion: v1
  kind: Pod
  metadata:
    name: vllm-llm-predictor-1
    namespace: llm
    labels: {serving.kserve.io/inferenceservice: vllm-llm, component: predictor}
- apiVersion: v1
  kind: Pod
  metadata:
    name: other-pod
    namespace: llm
    labels: {app: other}
kind: List
metadata:
  resourceVersion: ""
"""

MULTI_DOCUMENT = """\
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {name: vllm-llm, namespace: llm}
---
apiVersion: v1
kind: Service
metadata: {name: vllm-llm-predictor, namespace: llm}
spec: {selector: {app: x}}
"""


def _bundle_dir(tmp_path: Path, extra: dict[str, str]) -> Path:
    files = bundle_files([], "llm", "vllm-llm")
    files.pop("objects/fixture.yaml")
    files.update({name: text.encode() for name, text in extra.items()})
    root = tmp_path / "bundle"
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def test_reads_kubectl_list_dumps_and_multi_document_yaml(tmp_path: Path) -> None:
    root = _bundle_dir(tmp_path, {"objects/pods.yaml": KUBECTL_POD_LIST, "objects/more.yml": MULTI_DOCUMENT})
    cluster, _metrics, manifest = open_bundle(root)
    assert manifest.isvc == "vllm-llm"
    assert [p["metadata"]["name"] for p in cluster.list(kinds.POD, "llm")] == ["vllm-llm-predictor-1", "other-pod"]
    selected = cluster.list(kinds.POD, "llm", "serving.kserve.io/inferenceservice=vllm-llm,component in (predictor)")
    assert [p["metadata"]["name"] for p in selected] == ["vllm-llm-predictor-1"]
    assert cluster.get(kinds.INFERENCE_SERVICE, "llm", "vllm-llm") is not None
    assert cluster.get(kinds.SERVICE, "llm", "vllm-llm-predictor") is not None
    assert cluster.get(kinds.SERVICE, "other", "vllm-llm-predictor") is None


def test_tarball_round_trip_is_byte_reproducible(tmp_path: Path) -> None:
    files = bundle_files(
        [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "llm"}}], "llm", "x"
    )
    first = write_bundle_files(files, tmp_path / "a" / "b.tar.gz")
    second = write_bundle_files(files, tmp_path / "c" / "b.tar.gz")
    assert first.read_bytes() == second.read_bytes()
    cluster, _metrics, _manifest = open_bundle(first)
    assert cluster.get(kinds.POD, "llm", "p") is not None


def test_newer_bundle_version_is_refused(tmp_path: Path) -> None:
    root = _bundle_dir(tmp_path, {})
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["bundle_version"] = 2
    (root / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="bundle_version 2; this tool reads up to 1"):
        open_bundle(root)


def test_truncated_tarball_and_bad_yaml_give_one_line_errors(tmp_path: Path) -> None:
    tarball = write_bundle_files(bundle_files([], "llm", "x"), tmp_path / "t.tar.gz")
    truncated = tmp_path / "truncated.tar.gz"
    truncated.write_bytes(tarball.read_bytes()[:40])
    with pytest.raises(BundleError, match=r"not a readable \.tar\.gz"):
        open_bundle(truncated)
    with pytest.raises(BundleError, match="does not exist"):
        open_bundle(tmp_path / "nowhere")
    bad = _bundle_dir(tmp_path, {"objects/bad.yaml": "kind: Pod\n  metadata: [\n"})
    with pytest.raises(BundleError, match=r"bad\.yaml is not valid YAML"):
        open_bundle(bad)


def test_failed_reads_are_replayed_as_the_same_failure() -> None:
    files = bundle_files(
        [
            {
                "apiVersion": "serving.kserve.io/v1beta1",
                "kind": "InferenceService",
                "metadata": {"name": "x", "namespace": "llm"},
            }
        ],
        "llm",
        "x",
        reads=[{"what": "Event in llm", "status": "forbidden", "reason": "events is forbidden"}],
    )
    cluster, _metrics, _manifest = open_bundle(Path("<memory>"), files)
    with pytest.raises(ReadFailed) as failure:
        cluster.list(kinds.EVENT, "llm")
    assert failure.value.status == "forbidden"
    evidence = gather(cluster, None, Target("llm", "x"), WINDOW, CAPTURED_AT)
    record = evidence.failure("Event")
    assert record is not None and record.reason == "events is forbidden"


def test_capture_then_read_gives_the_same_evidence() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "x-predictor-1",
            "namespace": "llm",
            "labels": {"serving.kserve.io/inferenceservice": "x"},
        },
        "status": {"containerStatuses": [{"name": "kserve-container", "restartCount": 0}]},
    }
    isvc = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "x", "namespace": "llm"},
    }
    log = "2026-01-15T11:30:00Z INFO vLLM API server version 0.10.1\n"
    metrics = {
        "vllm_running": {
            "promql": 'sum by (pod) (vllm:num_requests_running{namespace="llm", pod=~"x-predictor-.+"})',
            "result": [{"metric": {"pod": "x-predictor-1"}, "values": [[WINDOW.start.timestamp() + 60, "3"]]}],
        }
    }
    first = evidence_from_objects(
        [isvc, pod], "llm", "x", logs={("x-predictor-1", "kserve-container"): log}, metrics=metrics
    )
    assert first.versions["vllm"] == "0.10.1"
    assert first.metrics["vllm_running"].series[0].samples[0][1] == 3.0
    cluster, bundle_metrics, manifest = open_bundle(Path("<memory>"), capture_files(first, CAPTURED_AT))
    second = gather(cluster, bundle_metrics, Target("llm", "x"), manifest.window, manifest.captured_at)
    assert second.objects == first.objects
    assert second.logs == first.logs
    assert second.events == first.events
    assert second.metrics == first.metrics
    assert second.reads == first.reads
