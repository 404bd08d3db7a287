"""``kserve-runbook fleet merge DIR...``: one index over the folders of ``fleet --shard I/N`` runs.

Each DIR is a fleet output folder (its ``fleet.json``). The merge writes ``fleet.json``, ``fleet.md``
and ``fleet.html`` into ``--out`` and nothing else: the services' own files stay where the shards
wrote them, and each link of the index is a relative path from ``--out`` to them.

A shard's ``fleet.json`` is read as untrusted input: an entry whose fields have the wrong type is
left out and counted, a ``path`` is linked only when it is a plain relative path that stays inside
its shard's folder, and every text is escaped where it is shown. What the merged index cannot
vouch for goes into its coverage line: folders missing or unreadable, shard indices absent (from
the shards' own ``shard.count``), services found in two folders (the most recently generated is
kept), and shards whose scope, window or listing disagree. A service is one kind and name in one
namespace: an InferenceService and an LLMInferenceService of the same name are two services (an
entry without ``kind``, written before fleet listed LLMInferenceServices, is an InferenceService).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from nbhelpers.cli.fleet import FLEET_SCHEMA_ID, MAX_LISTED, SEVERITIES, FleetResult, ServiceEntry, Shard, write_index
from nbhelpers.errors import RunbookError
from nbhelpers.evidence.listing import KindListed
from nbhelpers.evidence.model import INFERENCE_SERVICE, TARGET_KINDS
from nbhelpers.util.safe_paths import UnsafePath, inside
from nbhelpers.util.times import Window, parse_time

MAX_INDEX_BYTES = 64 << 20  # a fleet.json larger than this is not a shard's index
_STATUSES = ("complete", "partial", "error")
INDEX_FILES = ("fleet.json", "fleet.md", "fleet.html")


@dataclass(frozen=True)
class ShardRead:
    """One DIR that could be read: its folder, its shard (``None`` for an unsharded run) and entries."""

    folder: Path
    document: Mapping[str, Any]
    entries: tuple[ServiceEntry, ...]  # paths relative to ``folder``
    rejected: int  # entries left out because a field had the wrong type

    @property
    def shard(self) -> Shard | None:
        shard = self.document.get("shard")
        if not isinstance(shard, dict):
            return None
        index, count = shard.get("index"), shard.get("count")
        if isinstance(index, int) and isinstance(count, int) and 0 <= index < count:
            return Shard(index, count)
        return None

    @property
    def listed(self) -> int | None:
        shard = self.document.get("shard")
        listed = shard.get("listed") if isinstance(shard, dict) else None
        return listed if isinstance(listed, int) else None

    @property
    def generated_at(self) -> datetime:
        """When the shard ran (the oldest possible time when it does not say)."""
        text = self.document.get("generated_at")
        try:
            return parse_time(text) if isinstance(text, str) else _EPOCH
        except (RunbookError, ValueError):
            return _EPOCH


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class MergeRequest:
    folders: tuple[str, ...]
    out: str
    progress: Callable[[str], None] | None = None


# ------------------------------------------------------------------------------------------ read


def _entry(item: Any, folder: Path) -> ServiceEntry | None:
    """One service of a shard's index, or ``None`` when a field has the wrong type."""
    if not isinstance(item, dict):
        return None
    namespace, isvc, status = item.get("namespace"), item.get("isvc"), item.get("status")
    counts, causes = item.get("counts"), item.get("root_causes") or []
    if not (isinstance(namespace, str) and namespace and isinstance(isvc, str) and isvc and status in _STATUSES):
        return None
    if not isinstance(counts, dict) or not all(
        isinstance(counts.get(level), int) and counts[level] >= 0 for level in SEVERITIES
    ):
        return None
    if not isinstance(causes, list) or not all(isinstance(cause, str) for cause in causes):
        return None
    reason, mode = item.get("reason") or "", item.get("deployment_mode") or "unknown"
    if not isinstance(reason, str) or not isinstance(mode, str):
        return None
    kind = item.get("kind") or INFERENCE_SERVICE
    if kind not in TARGET_KINDS:
        return None
    return ServiceEntry(
        namespace=namespace,
        isvc=isvc,
        status=str(status),
        reason=reason,
        counts={level: int(counts[level]) for level in SEVERITIES},
        root_causes=tuple(causes),
        deployment_mode=mode,
        path=_checked_path(item.get("path"), folder),
        kind=str(kind),
    )


def _checked_path(path: Any, folder: Path) -> str | None:
    """``path`` when it is a plain relative path to a folder inside ``folder``; else no link."""
    if not isinstance(path, str):
        return None
    try:
        target = inside(folder, path)
    except UnsafePath:
        return None
    return path if target.is_dir() else None


def read_shard(folder: Path) -> ShardRead | str:
    """The shard's index, or why it cannot be read (one line)."""
    index = folder / "fleet.json"
    if not folder.is_dir():
        return "no such folder"
    if not index.is_file():
        return "no fleet.json (did that shard finish?)"
    if index.stat().st_size > MAX_INDEX_BYTES:
        return f"fleet.json larger than {MAX_INDEX_BYTES >> 20} MiB"
    try:
        document = json.loads(index.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        return f"fleet.json unreadable: {type(error).__name__}"
    if not isinstance(document, dict) or document.get("schema") != FLEET_SCHEMA_ID:
        return f"fleet.json is not a {FLEET_SCHEMA_ID} index"
    services = document.get("services")
    if not isinstance(services, list):
        return "fleet.json has no list of services"
    entries = [_entry(item, folder) for item in services]
    kept = tuple(entry for entry in entries if entry is not None)
    return ShardRead(folder, document, kept, rejected=len(entries) - len(kept))


# ----------------------------------------------------------------------------------------- merge


def _relative_to(path: Path, start: Path) -> str:
    return Path(os.path.relpath(path, start)).as_posix()


def _combined_window(shards: Sequence[ShardRead]) -> tuple[Window, bool]:
    """The span of the shards' windows, and whether they differ."""
    windows = []
    for shard in shards:
        window = shard.document.get("window")
        if not isinstance(window, dict):
            continue
        try:
            windows.append(Window(parse_time(window["start"]), parse_time(window["end"])))
        except (RunbookError, ValueError, TypeError, KeyError):
            continue
    if not windows:
        now = datetime.now(timezone.utc)
        return Window(now, now), True
    combined = Window(min(window.start for window in windows), max(window.end for window in windows))
    return combined, len(set(windows)) > 1 or len(windows) < len(shards)


def _sources(shards: Sequence[ShardRead]) -> dict[str, str]:
    merged: dict[str, set[str]] = {"cluster": set(), "prometheus": set()}
    for shard in shards:
        sources = shard.document.get("sources")
        for key, values in merged.items():
            value = sources.get(key) if isinstance(sources, dict) else None
            values.add(value if isinstance(value, str) else "unknown")
    return {key: "+".join(sorted(values)) for key, values in merged.items()}


def _scope(shards: Sequence[ShardRead]) -> tuple[bool, str, bool]:
    """(all namespaces, namespace, whether the shards agree) from the shards' ``scope``."""
    scopes = set()
    for shard in shards:
        scope = shard.document.get("scope")
        if isinstance(scope, dict):
            scopes.add((scope.get("all_namespaces") is True, str(scope.get("namespace") or "")))
    if len(scopes) == 1:
        all_namespaces, namespace = scopes.pop()
        return all_namespaces, namespace, True
    return True, "", False


def _shard_caveats(shards: Sequence[ShardRead], merged: int) -> list[str]:
    """What the shards' own ``shard`` records say about coverage: indices absent, counts that differ."""
    sharded = [shard.shard for shard in shards if shard.shard is not None]
    if not sharded:
        return []
    counts = {shard.count for shard in sharded}
    if len(counts) > 1:
        return [
            f"the shards were cut in different counts ({', '.join(map(str, sorted(counts)))}): some services may be missing or twice"
        ]
    count = counts.pop()
    present = {shard.index for shard in sharded}
    absent = [f"{index}/{count}" for index in range(count) if index not in present]
    notes = []
    if absent:
        named = ", ".join(absent[:MAX_LISTED]) + (
            f" and {len(absent) - MAX_LISTED} more" if len(absent) > MAX_LISTED else ""
        )
        notes.append(f"shard(s) {named} missing: their services are not in this index")
    listed = {shard.listed for shard in shards if shard.listed is not None}
    if len(listed) > 1:
        notes.append(
            f"the shards listed different numbers of services ({', '.join(map(str, sorted(listed)))}): "
            "the fleet changed while they ran"
        )
    elif listed and not absent and merged != (total := listed.pop()):
        notes.append(f"the shards listed {total} service(s) but {merged} are in this index")
    return notes


_LISTING_ORDER = ("ok", "not_installed")  # any other status (a failed LIST) outranks both


def merged_listing(shards: Sequence[ShardRead]) -> tuple[KindListed, ...]:
    """Per kind, the worst LIST answer among the shards (a failure, then not installed, then ok)."""
    worst: dict[str, KindListed] = {}
    for shard in shards:
        listing = shard.document.get("listing")
        for item in listing if isinstance(listing, list) else []:
            if not isinstance(item, dict) or item.get("kind") not in TARGET_KINDS:
                continue
            status, count, reason = item.get("status"), item.get("services"), item.get("reason") or ""
            if not (isinstance(status, str) and status and isinstance(count, int) and isinstance(reason, str)):
                continue
            listed = KindListed(str(item["kind"]), status, count, reason)
            known = worst.get(listed.kind)
            if known is None or _listing_rank(listed) > _listing_rank(known):
                worst[listed.kind] = listed
    return tuple(worst[kind] for kind in TARGET_KINDS if kind in worst)


def _listing_rank(listed: KindListed) -> int:
    return _LISTING_ORDER.index(listed.status) if listed.status in _LISTING_ORDER else len(_LISTING_ORDER)


def merge_shards(reads: Sequence[ShardRead], out_dir: Path) -> tuple[list[ServiceEntry], list[dict[str, Any]]]:
    """One entry per service with its path made relative to ``out_dir``; and the duplicates found.

    A service in two folders keeps the entry of the most recently generated shard (the first given
    among equals)."""
    chosen: dict[tuple[str, str, str], tuple[ShardRead, ServiceEntry]] = {}
    seen_in: dict[tuple[str, str, str], list[Path]] = {}
    for read in reads:
        for entry in read.entries:
            key = (entry.namespace, entry.isvc, entry.kind)
            seen_in.setdefault(key, []).append(read.folder)
            if key not in chosen or read.generated_at > chosen[key][0].generated_at:
                chosen[key] = (read, entry)
    entries = []
    for read, entry in chosen.values():
        path = None if entry.path is None else _relative_to(read.folder / entry.path, out_dir)
        entries.append(replace(entry, path=path))
    duplicates = [
        {
            "namespace": key[0],
            "isvc": key[1],
            "kind": key[2],
            "kept": _relative_to(chosen[key][0].folder, out_dir),
            "folders": [_relative_to(folder, out_dir) for folder in folders],
        }
        for key, folders in seen_in.items()
        if len(folders) > 1
    ]
    return entries, duplicates


def _unique_folders(folders: Sequence[str]) -> list[Path]:
    """The DIRs in the order given, each once (the same folder named twice is read once)."""
    unique: dict[Path, Path] = {}
    for folder in folders:
        path = Path(folder)
        unique.setdefault(path.resolve(), path)
    return list(unique.values())


def _out_dir(out: str, folders: Sequence[Path]) -> Path:
    out_dir = Path(out)
    if out_dir.exists() and not out_dir.is_dir():
        raise RunbookError(f"--out {out_dir} is a file: choose a folder")
    if any(out_dir.resolve() == folder.resolve() for folder in folders):
        raise RunbookError(f"--out {out_dir} is one of the shard folders: its index would be overwritten")
    return out_dir


def run_merge(request: MergeRequest, clock: Callable[[], datetime] | None = None) -> FleetResult:
    """Read every DIR, write the merged index into ``--out``; ``RunbookError`` when no DIR can be read."""
    if not request.folders:
        raise RunbookError("fleet merge needs at least one folder written by fleet (DIR...)")
    if not request.out:
        raise RunbookError("fleet merge needs --out DIR, where fleet.json, fleet.md and fleet.html go")
    notify = request.progress or (lambda _message: None)
    folders = _unique_folders(request.folders)
    out_dir = _out_dir(request.out, folders)
    reads: list[ShardRead] = []
    missing: list[dict[str, str]] = []
    problems: list[str] = []
    for folder in folders:
        read = read_shard(folder)
        if isinstance(read, str):
            missing.append({"folder": _relative_to(folder, out_dir), "reason": read})
            problems.append(f"{folder}: {read}")
            notify(f"fleet merge: {folder}: {read}")
        else:
            reads.append(read)
    if not reads:
        raise RunbookError(f"fleet merge: no folder could be read ({'; '.join(problems)})")
    out_dir.mkdir(parents=True, exist_ok=True)
    entries, duplicates = merge_shards(reads, out_dir)
    window, windows_differ = _combined_window(reads)
    all_namespaces, namespace, same_scope = _scope(reads)
    caveats = [f"{item['folder']} not merged ({item['reason']})" for item in missing]
    caveats += _shard_caveats(reads, len(entries))
    rejected = sum(read.rejected for read in reads)
    if rejected:
        caveats.append(f"{rejected} malformed service entr{'y' if rejected == 1 else 'ies'} left out")
    if duplicates:
        caveats.append(f"{len(duplicates)} service(s) found in more than one folder; the newest run of each is kept")
    if windows_differ:
        caveats.append("the shards' windows differ; the window shown spans them all")
    if not same_scope:
        caveats.append("the shards cover different scopes")
    scope = ("all namespaces" if all_namespaces else f"namespace {namespace}") + f", merged from {len(reads)} folder(s)"
    now = (clock or (lambda: datetime.now(timezone.utc)))()
    result = FleetResult(
        out_dir=out_dir,
        scope=scope,
        all_namespaces=all_namespaces,
        namespace=namespace,
        window=window,
        sources=_sources(reads),
        generated_at=now,
        entries=tuple(sorted(entries, key=ServiceEntry.sort_key)),
        notebooks=_every_report_written(out_dir, entries),
        caveats=tuple(caveats),
        listing=merged_listing(reads),
        extra={
            "merged_from": [
                {
                    "folder": _relative_to(read.folder, out_dir),
                    "shard": None if read.shard is None else read.shard.label,
                    "services": len(read.entries),
                }
                for read in reads
            ],
            "missing": missing,
            "duplicates": duplicates,
        },
    )
    write_index(result)
    notify(f"fleet merge: {len(entries)} service(s) from {len(reads)} folder(s) -> {out_dir}")
    return result


def _every_report_written(out_dir: Path, entries: Sequence[ServiceEntry]) -> bool:
    """Whether the index links each service's report.html (the shards ran with --notebooks)."""
    linked = [entry.path for entry in entries if entry.path is not None and entry.status != "error"]
    return bool(linked) and all((out_dir / path / "report.html").is_file() for path in linked)
