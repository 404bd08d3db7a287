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

import bz2
import contextlib
import gzip
import io
import json
import lzma
import os
import shutil
import stat
import tarfile
import tempfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

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
from nbhelpers.util import limits
from nbhelpers.util.safe_load import load_json, load_yaml_documents
from nbhelpers.util.safe_paths import inside, safe_component, safe_relative
from nbhelpers.util.times import Window, parse_time

BUNDLE_VERSION = 1


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
    def kind(self) -> str:
        """The target's kind: ``InferenceService`` unless the manifest names another."""
        return str((self.raw.get("target") or {}).get("kind") or "InferenceService")

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
    """The files of a bundle directory or .tar.gz, addressed by POSIX relative path.

    A bundle is hostile input: entries, sizes and the archive's own size are checked against
    :mod:`nbhelpers.util.limits` before anything is read, links are never followed, sparse
    members and special files are refused, and archive members with names no bundle holds
    (absolute, ``..``, control characters) are left out.
    """

    def __init__(self, location: Path, files: dict[str, bytes] | None = None) -> None:
        self.location = location
        self.files: dict[str, bytes] = dict(files) if files is not None else self._load(location)
        if "manifest.json" not in self.files:
            raise BundleError(f"bundle {location} has no manifest.json: is it an evidence bundle?")

    def _load(self, location: Path) -> dict[str, bytes]:
        if location.is_dir():
            return _read_directory(location)
        if location.is_file():
            return _read_archive(location)
        raise BundleError(f"bundle {location} does not exist")

    def under(self, prefix: str) -> Iterator[tuple[str, bytes]]:
        for name, data in self.files.items():
            if name.startswith(prefix):
                yield name, data

    def text(self, name: str) -> str | None:
        data = self.files.get(name)
        return None if data is None else data.decode("utf-8", errors="replace")


class _Budget:
    """What a bundle being read may still hold: entries, bytes per file, bytes in all."""

    def __init__(self, location: Path) -> None:
        self.location = location
        self.entries = 0
        self.total = 0
        self.max_entries = limits.MAX_BUNDLE_FILES.value
        self.max_file = limits.MAX_BUNDLE_FILE_BYTES.value
        self.max_total = limits.MAX_BUNDLE_UNCOMPRESSED_BYTES.value

    def refuse(self, reason: object) -> BundleError:
        return BundleError(f"bundle {self.location}: {reason}")

    def entry(self) -> None:
        self.entries += 1
        if self.entries > self.max_entries:
            raise self.refuse(limits.MAX_BUNDLE_FILES.exceeded(f"it holds more than {self.max_entries:,} entries"))

    def file(self, name: str, size: int) -> None:
        """Account for ``size`` bytes of ``name``, before they are read."""
        if size > self.max_file:
            raise self.refuse(limits.MAX_BUNDLE_FILE_BYTES.exceeded(f"{_shown(name)} is {limits.format_bytes(size)}"))
        self.total += size
        if self.total > self.max_total:
            finding = f"its files add up to more than {limits.format_bytes(self.max_total)}"
            raise self.refuse(limits.MAX_BUNDLE_UNCOMPRESSED_BYTES.exceeded(finding))


def _shown(name: str) -> str:
    """A name from a bundle as it may appear in a one-line message."""
    return repr(name) if not name.isprintable() or len(name) > 200 else name


def _read_directory(location: Path) -> dict[str, bytes]:
    """Every regular file under ``location``; a link or a special file is refused, never followed."""
    budget = _Budget(location)
    found: list[tuple[str, Path]] = []
    for folder, subfolders, names in os.walk(location, followlinks=False):
        subfolders.sort()
        for name in sorted([*subfolders, *names]):
            path = Path(folder) / name
            relative = path.relative_to(location).as_posix()
            budget.entry()
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                raise budget.refuse(
                    f"{_shown(relative)} is a symbolic link, and links in a bundle are not followed: "
                    "replace it with the file it points to, or remove it"
                )
            if stat.S_ISDIR(mode):
                continue
            if not stat.S_ISREG(mode):
                raise budget.refuse(f"{_shown(relative)} is not a regular file (a pipe, socket or device)")
            budget.file(relative, path.lstat().st_size)
            found.append((relative, path))
    return {relative: _read_regular(path, budget) for relative, path in found}


def _read_regular(path: Path, budget: _Budget) -> bytes:
    """A regular file's bytes, read without following a link put in its place since it was listed."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError as error:
        raise budget.refuse(
            f"{path.relative_to(budget.location).as_posix()} cannot be read ({error.strerror})"
        ) from None
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise budget.refuse(f"{path.relative_to(budget.location).as_posix()} is not a regular file")
        data = handle.read(budget.max_file + 1)
    if len(data) > budget.max_file:  # it grew after it was listed
        budget.file(path.relative_to(budget.location).as_posix(), len(data))
    return data


# Compressed archives by their first bytes; anything else is read as a plain tar.
_DECOMPRESSORS: tuple[tuple[bytes, Callable[[BinaryIO], Any]], ...] = (
    (b"\x1f\x8b", lambda raw: gzip.GzipFile(fileobj=raw, mode="rb")),
    (b"BZh", lambda raw: bz2.BZ2File(raw, mode="rb")),
    (b"\xfd7zXZ\x00", lambda raw: lzma.LZMAFile(raw, mode="rb")),  # noqa: SIM115 - closed by the caller
)
# Tar headers (names, PAX records) of a bundle take a few hundred bytes per member: more is a bomb.
HEADER_ALLOWANCE = 16 * limits.MIB


class _Expansion:
    """The decompressed archive as tarfile reads it, refused once it outgrows what was accounted for:
    the members' declared sizes (each checked before its data is read) plus :data:`HEADER_ALLOWANCE`."""

    def __init__(self, stream: Any, budget: _Budget) -> None:
        self.stream = stream
        self.budget = budget
        self.consumed = 0

    def read(self, size: int = -1) -> bytes:
        allowed = self.budget.total + HEADER_ALLOWANCE - self.consumed + 1
        data: bytes = self.stream.read(allowed if size < 0 else min(size, allowed))
        self.consumed += len(data)
        if self.consumed > self.budget.total + HEADER_ALLOWANCE:
            raise self.budget.refuse(
                f"its tar headers expand to more than {limits.format_bytes(HEADER_ALLOWANCE)} (no bundle has such headers)"
            )
        return data


def _read_archive(location: Path) -> dict[str, bytes]:
    """The regular files of a (compressed) tar archive. A first pass reads the headers only and checks
    every limit, so no member's data is held before the archive as a whole is known to fit."""
    size = location.stat().st_size
    if size > limits.MAX_BUNDLE_BYTES.value:
        finding = f"bundle {location}: the archive is {limits.format_bytes(size)}"
        raise BundleError(str(limits.MAX_BUNDLE_BYTES.exceeded(finding)))
    files: dict[str, bytes] = {}
    try:
        with open(location, "rb") as raw:
            for _archive, _member in _checked_members(raw, _Budget(location)):
                pass  # headers and limits only: the data is skipped
            raw.seek(0)
            for archive, member in _checked_members(raw, _Budget(location)):
                name = _member_name(member.name)
                extracted = archive.extractfile(member)
                if name is not None and extracted is not None:
                    files[name] = extracted.read()
    except BundleError:
        raise
    except (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError) as error:
        reason = "not a tar archive, or cut short" if isinstance(error, tarfile.ReadError) else error
        raise BundleError(f"bundle {location} is not a readable .tar.gz ({reason})") from None
    # A tarball usually holds one top-level folder: address files relative to it.
    roots = {name.split("/", 1)[0] for name in files}
    if "manifest.json" not in files and len(roots) == 1:
        root = roots.pop() + "/"
        files = {name[len(root) :]: data for name, data in files.items() if name.startswith(root)}
    return files


def _checked_members(raw: BinaryIO, budget: _Budget) -> Iterator[tuple[tarfile.TarFile, tarfile.TarInfo]]:
    """The archive's regular members, each counted and checked against the limits before it is yielded
    (directories, links and devices are counted, never followed or read; a sparse member is refused)."""
    magic = raw.read(6)
    raw.seek(0)
    opener = next((opener for prefix, opener in _DECOMPRESSORS if magic.startswith(prefix)), None)
    with (
        opener(raw) if opener is not None else contextlib.nullcontext(raw) as stream,
        tarfile.open(fileobj=_Expansion(stream, budget), mode="r|") as archive,  # type: ignore[call-overload]
    ):
        for member in archive:
            budget.entry()
            if member.issparse():
                raise budget.refuse(
                    f"{_shown(member.name)} is a sparse file, which expands beyond its size in the archive: "
                    "bundles never hold one"
                )
            if member.isfile():
                budget.file(member.name, member.size)
                yield archive, member


def _member_name(raw: str) -> str | None:
    """An archive member's name as a bundle path; None for a name no bundle writes (absolute, ``..``,
    control characters)."""
    parts = [part for part in raw.split("/") if part not in ("", ".")]
    if raw.startswith("/") or not parts or any(part == ".." or not part.isprintable() for part in parts):
        return None
    return "/".join(parts)


def read_manifest(files: BundleFiles) -> Manifest:
    try:
        raw = load_json(files.files["manifest.json"])
    except limits.LimitExceeded as error:
        raise BundleError(f"bundle {files.location}: manifest.json: {error}") from None
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
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
        documents = load_yaml_documents(data.decode("utf-8", errors="replace"))
    except limits.LimitExceeded as error:
        raise BundleError(f"bundle file {name}: {error}") from None
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


def _well_formed(file_name: str, obj: KubeObject) -> KubeObject:
    """``obj``, or a ``BundleError`` when a hand-edited file broke a field the API server always types
    (:func:`~nbhelpers.sources.kube.shape_problem`).

    Only kinds the tool reads are checked (others are ignored anyway: a ``kind: Status`` has a string status).
    """
    if kinds.kind_for(str(obj.get("apiVersion", "")), str(obj.get("kind", ""))) is None:
        return obj
    problem = kube.shape_problem(obj)
    if problem is not None:
        raise BundleError(f"bundle file {file_name}: {problem}")
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
    parallel_reads = 1  # read from files: nothing to wait for

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
        text = self.files.text(log_file_name(request.namespace, request.pod, request.container, request.previous))
        if text is None:
            raise ReadFailed(describe_logs(request), "missing", "no log in the bundle")
        # As the kubelet does: take the last tailLines lines, then at most limitBytes from their start.
        lines = text.splitlines(keepends=True)[-request.tail_lines :]
        return "".join(lines).encode()[: request.limit_bytes].decode(errors="ignore")


class BundleMetrics:
    """A :class:`~nbhelpers.sources.base.MetricsSource` over recorded query_range answers."""

    mode = "bundle"
    parallel_queries = 1  # answers are read from files: nothing to wait for

    def __init__(self, files: BundleFiles) -> None:
        self.files = files
        index_text = files.text("metrics/index.json")
        try:
            self.index: dict[str, Any] = load_json(index_text) if index_text else {}
        except limits.LimitExceeded as error:
            raise BundleError(f"bundle file metrics/index.json: {error}") from None
        except ValueError as error:
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
        file_name = metrics_file_name(query_id)
        text = self.files.text(file_name)
        if text is None:
            return RangeResult(promql=promql)
        try:
            recorded = series_from_matrix(load_json(text), promql)
        except limits.LimitExceeded as error:
            raise BundleError(f"bundle file {file_name}: {error}") from None
        except (TypeError, ValueError, AttributeError, OverflowError) as error:  # JSONDecodeError is a ValueError
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


def log_file_name(namespace: str, pod: str, container: str, previous: bool = False) -> str:
    """Where a container's log lives in a bundle: ``logs/<namespace>/<pod>/<container>[.previous].log``.

    Each name is made one safe path component (:func:`~nbhelpers.util.safe_paths.safe_component`): the
    writer and the reader both name files through here, so a container called ``../../x`` is written,
    and found again, as ``logs/<ns>/<pod>/_.._x_<hash>.log``, inside the bundle.
    """
    suffix = ".previous.log" if previous else ".log"
    return f"logs/{safe_component(namespace)}/{safe_component(pod)}/{safe_component(container)}{suffix}"


def objects_file_name(kind_key: str) -> str:
    return f"objects/{safe_component(kind_key)}.yaml"


def metrics_file_name(query_id: str) -> str:
    return f"metrics/{safe_component(query_id)}.json"


def write_bundle_files(files: dict[str, bytes], destination: Path) -> Path:
    """Write ``files`` as a directory, or as a .tar.gz when ``destination`` ends with .tar.gz/.tgz.

    Every name must be a relative path of plain names (:func:`~nbhelpers.util.safe_paths.safe_relative`),
    so nothing is written outside ``destination`` and no archive member names another place; a
    name that is not is refused before anything is written. The result appears atomically:
    everything is written under a temporary name first. Tar members get fixed metadata so the same
    files give the same bytes.
    """
    for name in files:
        safe_relative(name)
    destination.parent.mkdir(parents=True, exist_ok=True)
    if destination.name.endswith((".tar.gz", ".tgz")):
        buffer = io.BytesIO()
        root = safe_component(destination.name.removesuffix(".tar.gz").removesuffix(".tgz") or "bundle")
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
    try:
        for name, data in files.items():
            path = inside(staging, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
            with os.fdopen(os.open(path, flags, 0o644), "wb") as out:
                out.write(data)
        if destination.exists():
            destination.rmdir()  # only an empty directory reaches here (the CLI refuses a non-empty one)
        os.replace(staging, destination)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return destination
