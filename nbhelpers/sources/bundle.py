"""Evidence bundles (docs/contracts.md#evidence-bundle): reading them as sources, and writing them.

Layout::

    manifest.json                      bundle_version, target, window, captured_at, reads, redaction
    objects/**/*.yaml                  any YAML: single objects, multi-document files, ``kind: List``
    logs/<namespace>/<pod>/<container>[.previous].log
    metrics/index.json                 {id: {promql, template_index, step, start, end, status, error}}
    metrics/<id>.json                  the raw query_range answer

A read that failed during capture is replayed as the same failure, so a triage
on the bundle sees exactly what the live run saw.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from nbhelpers.errors import BundleError, ReadFailed
from nbhelpers.sources import kinds, kube
from nbhelpers.sources.base import (
    LogRequest,
    RangeResult,
    SeriesData,
    describe_get,
    describe_list,
    describe_logs,
    series_from_matrix,
)
from nbhelpers.sources.kube import KubeObject
from nbhelpers.util.times import Window, parse_time

BUNDLE_VERSION = 1
# libyaml's parser is ~10x faster than the pure-Python one on large kubectl dumps.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class Manifest:
    raw: dict[str, Any]

    @property
    def namespace(self) -> str:
        return str((self.raw.get("target") or {}).get("namespace") or "")

    @property
    def isvc(self) -> str:
        return str((self.raw.get("target") or {}).get("isvc") or "")

    @property
    def captured_at(self) -> datetime:
        return parse_time(str(self.raw.get("captured_at")), "captured_at")

    @property
    def window(self) -> Window:
        window = self.raw.get("window") or {}
        return Window(
            parse_time(str(window.get("start")), "window start"), parse_time(str(window.get("end")), "window end")
        )

    def failed_read(self, what: str) -> ReadFailed | None:
        for record in self.raw.get("reads") or []:
            if record.get("what") == what and record.get("status") != "ok":
                return ReadFailed(what, str(record.get("status")), str(record.get("reason") or ""))
        return None


class BundleFiles:
    """The files of a bundle directory or .tar.gz, addressed by POSIX relative path."""

    def __init__(self, location: Path, files: dict[str, bytes] | None = None) -> None:
        self.location = location
        self.files: dict[str, bytes] = dict(files) if files is not None else self._load(location)
        if "manifest.json" not in self.files:
            raise BundleError(f"bundle {location} has no manifest.json: is it an evidence bundle?")

    def _load(self, location: Path) -> dict[str, bytes]:
        if location.is_dir():
            return {
                path.relative_to(location).as_posix(): path.read_bytes()
                for path in sorted(location.rglob("*"))
                if path.is_file()
            }
        if location.is_file():
            return self._read_tar(location)
        raise BundleError(f"bundle {location} does not exist")

    @staticmethod
    def _read_tar(location: Path) -> dict[str, bytes]:
        files: dict[str, bytes] = {}
        try:
            with tarfile.open(location, "r:*") as archive:
                members = [member for member in archive.getmembers() if member.isfile()]
                for member in members:
                    extracted = archive.extractfile(member)
                    if extracted is not None:
                        files[str(PurePosixPath(member.name))] = extracted.read()
        except (tarfile.TarError, EOFError, OSError) as error:
            reason = "not a tar archive, or cut short" if isinstance(error, tarfile.ReadError) else error
            raise BundleError(f"bundle {location} is not a readable .tar.gz ({reason})") from None
        # A tarball usually holds one top-level folder: address files relative to it.
        roots = {name.split("/", 1)[0] for name in files}
        if "manifest.json" not in files and len(roots) == 1:
            root = roots.pop() + "/"
            files = {name[len(root) :]: data for name, data in files.items() if name.startswith(root)}
        return files

    def under(self, prefix: str) -> Iterator[tuple[str, bytes]]:
        for name, data in self.files.items():
            if name.startswith(prefix):
                yield name, data

    def text(self, name: str) -> str | None:
        data = self.files.get(name)
        return None if data is None else data.decode("utf-8", errors="replace")


def read_manifest(files: BundleFiles) -> Manifest:
    try:
        raw = json.loads(files.files["manifest.json"])
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise BundleError(f"bundle {files.location}: manifest.json is not valid JSON ({error})") from None
    if not isinstance(raw, dict):
        raise BundleError(f"bundle {files.location}: manifest.json is not a JSON object")
    version = raw.get("bundle_version")
    if not isinstance(version, int) or version < 1:
        raise BundleError(f"bundle {files.location}: manifest.json has no valid bundle_version")
    if version > BUNDLE_VERSION:
        raise BundleError(
            f"bundle {files.location} has bundle_version {version}; this tool reads up to {BUNDLE_VERSION}: upgrade kserve-vllm-runbooks"
        )
    for name, shape in _MANIFEST_SHAPES.items():
        if name in raw and raw[name] is not None and not _has_shape(raw[name], shape):
            raise BundleError(f"bundle {files.location}: manifest.json field {name!r} is not {shape}")
    return Manifest(raw)


# The manifest fields the reader looks into, and what each must be when present.
_MANIFEST_SHAPES = {"target": "an object", "window": "an object", "versions": "an object", "reads": "a list of objects"}


def _has_shape(value: Any, shape: str) -> bool:
    if shape == "an object":
        return isinstance(value, dict)
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def _documents(name: str, data: bytes) -> Iterator[KubeObject]:
    try:
        documents = list(yaml.load_all(data.decode("utf-8", errors="replace"), Loader=_YAML_LOADER))
    except yaml.YAMLError as error:
        raise BundleError(f"bundle file {name} is not valid YAML ({str(error).splitlines()[0]})") from None
    for document in documents:
        if not isinstance(document, dict):
            continue
        if str(document.get("kind", "")).endswith("List") and isinstance(document.get("items"), list):
            item_kind = str(document["kind"])[: -len("List")]
            for item in document["items"]:
                if isinstance(item, dict):
                    if item_kind and "kind" not in item:
                        item["kind"] = item_kind
                    item.setdefault("apiVersion", document.get("apiVersion", "v1"))
                    yield _well_formed(name, item)
        elif "kind" in document:
            yield _well_formed(name, document)


# Fields every reader of an object relies on, and the type the API server guarantees for them.
_OBJECT_FIELDS = ("metadata", "spec", "status", "data", "involvedObject", "regarding")
_METADATA_MAPS = ("labels", "annotations")


def _well_formed(file_name: str, obj: KubeObject) -> KubeObject:
    """``obj``, or a ``BundleError`` when a hand-edited file broke a field the API server always types.

    Only kinds the tool reads are checked (others are ignored anyway: a ``kind: Status`` has a string status).
    """
    if kinds.kind_for(str(obj.get("apiVersion", "")), str(obj.get("kind", ""))) is None:
        return obj
    metadata = obj.get("metadata")
    shown = f"{obj.get('kind')} {metadata.get('name') if isinstance(metadata, dict) else ''}".strip()
    for field in _OBJECT_FIELDS:
        if obj.get(field) is not None and not isinstance(obj[field], dict):
            raise BundleError(f"bundle file {file_name}: {shown}: {field} is not an object")
    for field in _METADATA_MAPS:
        values = (metadata or {}).get(field)
        if values is not None and not (isinstance(values, dict) and all(isinstance(v, str) for v in values.values())):
            raise BundleError(f"bundle file {file_name}: {shown}: metadata.{field} is not a map of strings")
    return obj


class ObjectStore:
    """Objects held in memory, answered as the API server would: by kind, namespace, label selector, name.

    A later object with the same reference replaces an earlier one (the last file wins).
    Answers are deep copies, so callers may change them freely.
    """

    def __init__(self) -> None:
        self._by_kind: dict[str, dict[str, KubeObject]] = {}

    def add(self, obj: KubeObject) -> bool:
        """Keep ``obj``; False when its kind is not one the tool reads (it is then ignored)."""
        registered = kinds.kind_for(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        if registered is None:
            return False
        self._by_kind.setdefault(registered.key, {})[kube.ref(obj)] = obj
        return True

    def of_kind(self, key: str) -> list[KubeObject]:
        """Every object of one kind key, uncopied: for read-only inspection (the realism validator)."""
        return list(self._by_kind.get(key, {}).values())

    def kind_keys(self) -> list[str]:
        return list(self._by_kind)

    def list(self, kind: kinds.Kind, namespace: str | None, label_selector: str | None = None) -> list[KubeObject]:
        return [
            _copy(obj)
            for obj in self._by_kind.get(kind.key, {}).values()
            if (namespace is None or kube.namespace(obj) == namespace)
            and kube.label_selector_matches(label_selector, kube.labels(obj))
        ]

    def get(self, kind: kinds.Kind, namespace: str | None, name: str) -> KubeObject | None:
        for obj in self._by_kind.get(kind.key, {}).values():
            if kube.name(obj) == name and (namespace is None or kube.namespace(obj) == namespace):
                return _copy(obj)
        return None


def _copy(obj: KubeObject) -> KubeObject:
    copied: KubeObject = json.loads(json.dumps(obj))
    return copied


class BundleCluster:
    """A :class:`~nbhelpers.sources.base.ClusterSource` over a bundle's objects and logs."""

    mode = "bundle"

    def __init__(self, files: BundleFiles, manifest: Manifest) -> None:
        self.files = files
        self.manifest = manifest
        self.store = ObjectStore()
        for name, data in sorted(files.under("objects/")):
            if name.endswith((".yaml", ".yml", ".json")):
                for obj in _documents(name, data):
                    self.store.add(obj)

    def close(self) -> None:
        """Nothing to release: the files were read when the bundle was opened."""

    def server_version(self) -> str | None:
        version = (self.manifest.raw.get("versions") or {}).get("kubernetes")
        return str(version) if version else None

    def _replay_failure(self, what: str) -> None:
        failure = self.manifest.failed_read(what)
        if failure is not None:
            raise failure

    def list(self, kind: kinds.Kind, namespace: str | None, label_selector: str | None = None) -> list[KubeObject]:
        self._replay_failure(describe_list(kind, namespace, label_selector))
        return self.store.list(kind, namespace, label_selector)

    def get(self, kind: kinds.Kind, namespace: str | None, name: str) -> KubeObject | None:
        self._replay_failure(describe_get(kind, namespace, name))
        return self.store.get(kind, namespace, name)

    def logs(self, request: LogRequest) -> str:
        self._replay_failure(describe_logs(request))
        suffix = ".previous.log" if request.previous else ".log"
        text = self.files.text(f"logs/{request.namespace}/{request.pod}/{request.container}{suffix}")
        if text is None:
            raise ReadFailed(describe_logs(request), "missing", "no log in the bundle")
        # As the kubelet does: take the last tailLines lines, then at most limitBytes from their start.
        lines = text.splitlines(keepends=True)[-request.tail_lines :]
        return "".join(lines).encode()[: request.limit_bytes].decode(errors="ignore")


class BundleMetrics:
    """A :class:`~nbhelpers.sources.base.MetricsSource` over recorded query_range answers."""

    mode = "bundle"

    def __init__(self, files: BundleFiles) -> None:
        self.files = files
        index_text = files.text("metrics/index.json")
        try:
            self.index: dict[str, Any] = json.loads(index_text) if index_text else {}
        except json.JSONDecodeError as error:
            raise BundleError(f"bundle metrics/index.json is not valid JSON ({error})") from None
        if not isinstance(self.index, dict) or not all(isinstance(entry, dict) for entry in self.index.values()):
            raise BundleError("bundle metrics/index.json is not an object of query entries")

    def close(self) -> None:
        """Nothing to release: the files were read when the bundle was opened."""

    def query_range(self, query_id: str, promql: str, start: datetime, end: datetime, step_seconds: int) -> RangeResult:
        entry = self.index.get(query_id)
        if entry is None:
            raise ReadFailed(query_id, "missing", "not recorded in the bundle")
        if entry.get("status") not in ("ok", "empty"):
            raise ReadFailed(query_id, str(entry.get("status")), str(entry.get("error") or "failed at capture"))
        if entry.get("promql") != promql:
            # The capture fell back to a later template: earlier templates had no series.
            return RangeResult(promql=promql)
        text = self.files.text(f"metrics/{query_id}.json")
        if text is None:
            return RangeResult(promql=promql)
        try:
            recorded = series_from_matrix(json.loads(text), promql)
        except (TypeError, ValueError, AttributeError) as error:  # JSONDecodeError is a ValueError
            raise ReadFailed(query_id, "error", f"recorded answer is malformed ({error})") from None
        low, high = start.timestamp(), end.timestamp()
        series = tuple(
            SeriesData(item.labels, tuple(sample for sample in item.samples if low <= sample[0] <= high))
            for item in recorded.series
        )
        return RangeResult(promql=promql, series=tuple(item for item in series if item.samples))


def open_bundle(
    location: str | os.PathLike[str], in_memory: dict[str, bytes] | None = None
) -> tuple[BundleCluster, BundleMetrics, Manifest]:
    """Open a bundle directory or .tar.gz (or, with ``in_memory``, files already in memory)."""
    files = BundleFiles(Path(location), in_memory)
    manifest = read_manifest(files)
    return BundleCluster(files, manifest), BundleMetrics(files), manifest


def write_bundle_files(files: dict[str, bytes], destination: Path) -> Path:
    """Write ``files`` as a directory, or as a .tar.gz when ``destination`` ends with .tar.gz/.tgz.

    The result appears atomically: everything is written under a temporary name first.
    Tar members get fixed metadata so the same files give the same bytes.
    """
    destination.parent.mkdir(parents=True, exist_ok=True)
    if destination.name.endswith((".tar.gz", ".tgz")):
        buffer = io.BytesIO()
        root = destination.name.removesuffix(".tar.gz").removesuffix(".tgz")
        with (
            gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as compressed,
            tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as archive,
        ):
            for name in sorted(files):
                info = tarfile.TarInfo(f"{root}/{name}")
                info.size, info.mtime, info.mode = len(files[name]), 0, 0o644
                archive.addfile(info, io.BytesIO(files[name]))
        handle, temporary = tempfile.mkstemp(dir=destination.parent, prefix=".bundle-")
        with os.fdopen(handle, "wb") as out:
            out.write(buffer.getvalue())
        os.replace(temporary, destination)
        return destination
    staging = Path(tempfile.mkdtemp(dir=destination.parent, prefix=f".{destination.name}-"))
    for name, data in files.items():
        path = staging / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    if destination.exists():
        destination.rmdir()  # only an empty directory reaches here (the CLI refuses a non-empty one)
    os.replace(staging, destination)
    return destination
