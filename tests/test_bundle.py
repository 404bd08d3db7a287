"""Reading and writing evidence bundles (docs/contracts.md#evidence-bundle)."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest
import yaml
from builders import CAPTURED_AT, WINDOW, bundle_files, evidence_from_objects

from nbhelpers.errors import BundleError, ReadFailed
from nbhelpers.evidence.capture import bundle_files as capture_files
from nbhelpers.evidence.gather import gather
from nbhelpers.evidence.model import Target
from nbhelpers.sources import kinds
from nbhelpers.sources.bundle import BundleFiles, log_file_name, open_bundle, write_bundle_files
from nbhelpers.util import limits
from nbhelpers.util.limits import LimitExceeded
from nbhelpers.util.safe_load import load_json, load_yaml_documents
from nbhelpers.util.safe_paths import UnsafePath

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


@pytest.mark.parametrize("mode", ["w:gz", "w:bz2", "w:xz", "w"])
def test_archives_are_read_whatever_their_compression(mode: str, tmp_path: Path) -> None:
    files = bundle_files(
        [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "llm"}}], "llm", "x"
    )
    archive = tmp_path / "bundle.tar"
    with tarfile.open(archive, mode) as bundle:  # type: ignore[call-overload]
        for name, data in files.items():
            info = tarfile.TarInfo(f"b/{name}")
            info.size = len(data)
            bundle.addfile(info, io.BytesIO(data))
    cluster, _metrics, _manifest = open_bundle(archive)
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


# --- hostile names and files (issue #19) -------------------------------------------------------------


def test_log_file_names_keep_kubernetes_names_and_confine_any_other() -> None:
    assert log_file_name("llm", "x-predictor-1", "kserve-container") == "logs/llm/x-predictor-1/kserve-container.log"
    assert log_file_name("llm", "p", "c", previous=True) == "logs/llm/p/c.previous.log"
    hostile = log_file_name("a/../../b", "..", "../../x").split("/")
    assert len(hostile) == 4 and not {".", ".."} & set(hostile)
    assert hostile[1].startswith("a_.._.._b_") and hostile[3].startswith("_.._x_") and hostile[3].endswith(".log")
    assert log_file_name("..", "p", "c") != log_file_name(".", "p", "c") != log_file_name("", "p", "c")


@pytest.mark.parametrize(
    "name", ["../x", "/etc/passwd", "logs/../../x.log", "logs//x", "logs/./x", "", "logs/\x00x", "logs/x/"]
)
@pytest.mark.parametrize("destination", ["b", "b.tar.gz"])
def test_the_writer_refuses_a_name_outside_its_folder_before_writing_anything(
    name: str, destination: str, tmp_path: Path
) -> None:
    files = {**bundle_files([], "llm", "x"), name: b"planted"}
    with pytest.raises(UnsafePath, match="refusing the path"):
        write_bundle_files(files, tmp_path / destination)
    assert list(tmp_path.iterdir()) == []  # no staging folder or temporary left behind


def test_archive_members_named_outside_the_bundle_are_left_out(tmp_path: Path) -> None:
    archive = tmp_path / "odd.tar.gz"
    members = {
        **{f"b/{name}": data for name, data in bundle_files([], "llm", "x").items()},
        "b/../evil.yaml": b"kind: Pod",
        "/abs/evil.yaml": b"kind: Pod",
        "b/objects/\x1b[2J.yaml": b"kind: Pod",
        "./b/objects/./kept.yaml": b"kind: Pod",
    }
    with tarfile.open(archive, "w:gz") as bundle:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            bundle.addfile(info, io.BytesIO(data))
    assert sorted(BundleFiles(archive).files) == ["manifest.json", "objects/fixture.yaml", "objects/kept.yaml"]


def test_directory_bundle_limits_are_checked_before_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _bundle_dir(tmp_path, {"logs/llm/p/c.log": "x" * 2000, "objects/a.yaml": "", "objects/b.yaml": ""})
    monkeypatch.setenv("KSERVE_RUNBOOK_MAX_BUNDLE_FILE_BYTES", "1000")
    with pytest.raises(BundleError, match=r"logs/llm/p/c\.log is 2,000 bytes: over the limit of 1,000 bytes"):
        BundleFiles(root)
    monkeypatch.delenv("KSERVE_RUNBOOK_MAX_BUNDLE_FILE_BYTES")
    monkeypatch.setenv("KSERVE_RUNBOOK_MAX_BUNDLE_FILES", "4")
    with pytest.raises(BundleError, match=r"more than 4 entries: .*KSERVE_RUNBOOK_MAX_BUNDLE_FILES=N"):
        BundleFiles(root)
    monkeypatch.delenv("KSERVE_RUNBOOK_MAX_BUNDLE_FILES")
    monkeypatch.setenv("KSERVE_RUNBOOK_MAX_BUNDLE_UNCOMPRESSED_BYTES", "2048")
    with pytest.raises(BundleError, match=r"add up to more than 2,048 bytes"):
        BundleFiles(root)


def test_a_pipe_in_a_directory_bundle_is_refused_without_blocking(tmp_path: Path) -> None:
    root = _bundle_dir(tmp_path, {})
    os.mkfifo(root / "pipe.yaml")
    with pytest.raises(BundleError, match=r"pipe\.yaml is not a regular file"):
        BundleFiles(root)


def test_bundle_yaml_gives_json_values_only() -> None:
    assert load_yaml_documents("t: 2026-01-15T11:00:00Z\nn: 7\n") == [{"t": "2026-01-15T11:00:00Z", "n": 7}]
    assert load_yaml_documents("a: &x {k: v}\nb: *x\n") == [{"a": {"k": "v"}, "b": {"k": "v"}}]  # a few aliases
    for tag in ("!!binary aGk=", "!!set {a: null}"):
        with pytest.raises(yaml.YAMLError, match="values are not JSON"):
            load_yaml_documents(f"v: {tag}\n")


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        ("a:\n" + "".join(f"{'  ' * level}- \n" for level in range(1, 120)), "KSERVE_RUNBOOK_MAX_NESTING_DEPTH"),
        ("n: " + "1" * 101, "KSERVE_RUNBOOK_MAX_INT_DIGITS"),
        ("n: 0x" + "f" * 101, "KSERVE_RUNBOOK_MAX_INT_DIGITS"),
    ],
    ids=["block-nesting", "decimal-digits", "hex-digits"],
)
def test_bundle_yaml_limits(text: str, limit: str) -> None:
    with pytest.raises(LimitExceeded, match=limit):
        load_yaml_documents(text)


def test_json_limits() -> None:
    assert load_json('{"a": [1, -2, 3.5]}') == {"a": [1, -2, 3.5]}
    with pytest.raises(LimitExceeded, match="nested more than 100 levels deep"):
        load_json("[" * 101 + "]" * 101)
    assert load_json("[" * 100 + "]" * 100) is not None
    with pytest.raises(LimitExceeded, match="an integer of 101 digits"):
        load_json("-" + "1" * 101)


def test_every_limit_is_documented_with_its_default_and_variable() -> None:
    contracts = (Path(__file__).parents[1] / "docs" / "contracts.md").read_text()
    for limit in limits.ALL_LIMITS:
        assert f"| {limit.shown(limit.default)} | `{limit.env}` |" in contracts, limit.env
