"""Build Evidence from small YAML fixtures through the real bundle reader and gather().

Check tests describe a cluster as YAML (one file per case, named after the
finding code), and get the Evidence a triage would see, without any I/O
beyond reading the fixture.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import yaml

from nbhelpers.evidence.gather import gather
from nbhelpers.evidence.model import Evidence, Target
from nbhelpers.sources.bundle import open_bundle
from nbhelpers.util.times import Window, format_time

FIXTURES = Path(__file__).parent / "fixtures"
CAPTURED_AT = datetime(2026, 1, 15, 12, 0, 0, tzinfo=timezone.utc)
WINDOW = Window(CAPTURED_AT - timedelta(hours=1), CAPTURED_AT)


def bundle_files(
    objects: Iterable[Mapping[str, Any]],
    namespace: str,
    isvc: str,
    logs: Mapping[tuple[str, str], str] | None = None,
    metrics: Mapping[str, Mapping[str, Any]] | None = None,
    reads: Iterable[Mapping[str, str]] = (),
    window: Window = WINDOW,
    captured_at: datetime = CAPTURED_AT,
) -> dict[str, bytes]:
    """In-memory bundle files. ``logs`` maps (pod, container or container.previous) to text;
    ``metrics`` maps a catalog id to {"promql": ..., "result": [...]} (the matrix result list)."""
    manifest = {
        "bundle_version": 1,
        "tool_version": "test",
        "captured_at": format_time(captured_at),
        "target": {"namespace": namespace, "isvc": isvc},
        "window": window.to_json(),
        "versions": {"kubernetes": "1.31"},
        "reads": list(reads),
    }
    files = {
        "manifest.json": json.dumps(manifest).encode(),
        "objects/fixture.yaml": yaml.safe_dump_all([dict(obj) for obj in objects], sort_keys=False).encode(),
    }
    for (pod, container), text in (logs or {}).items():
        files[f"logs/{namespace}/{pod}/{container}.log"] = text.encode()
    if metrics:
        index = {}
        for query_id, entry in metrics.items():
            index[query_id] = {"promql": entry["promql"], "template_index": 0, "status": "ok", "error": ""}
            answer = {"status": "success", "data": {"resultType": "matrix", "result": entry["result"]}}
            files[f"metrics/{query_id}.json"] = json.dumps(answer).encode()
        files["metrics/index.json"] = json.dumps(index).encode()
    return files


def load_yaml(*names: str) -> list[dict[str, Any]]:
    """All documents of fixture files under tests/fixtures (``kind: List`` kept as is)."""
    documents: list[dict[str, Any]] = []
    for name in names:
        documents.extend(doc for doc in yaml.safe_load_all((FIXTURES / name).read_text()) if doc)
    return documents


def evidence_from_objects(
    objects: Iterable[Mapping[str, Any]],
    namespace: str,
    isvc: str,
    target_kind: str = "InferenceService",
    **bundle_options: Any,
) -> Evidence:
    """The Evidence gather() builds for these objects (and optional logs/metrics); ``target_kind``
    ``LLMInferenceService`` names an LLMInferenceService by ``isvc``."""
    files = bundle_files(objects, namespace, isvc, **bundle_options)
    cluster, metrics, manifest = open_bundle(Path("<fixture>"), files)
    return gather(
        cluster,
        metrics if metrics.index else None,
        Target(namespace, isvc, target_kind),
        manifest.window,
        manifest.captured_at,
    )


def evidence_from_fixture(name: str, namespace: str = "llm", isvc: str = "vllm-llm", **options: Any) -> Evidence:
    return evidence_from_objects(load_yaml(name), namespace, isvc, **options)


def comparable(findings_document: Mapping[str, Any]) -> dict[str, Any]:
    """A findings.json document without what differs between two runs of the same evidence:
    ``generated_at`` and the steps' timings."""
    document = json.loads(json.dumps(findings_document))
    document.pop("generated_at")
    for step in document["steps"]:
        step.pop("seconds")
    return dict(document)
