"""Turn :class:`~nbhelpers.evidence.model.Evidence` into evidence bundle files (docs/contracts.md#evidence-bundle).

The evidence is already redacted by ``gather()``; this module only lays it out. Names that come
from the cluster (namespace, pod, container) become file names only through the bundle module's
``*_file_name`` helpers, which make each one a single safe path component; the writer refuses any
other name.
Output is deterministic for the same evidence and capture time, so generated
scenario bundles are reproducible byte for byte.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from nbhelpers import __version__
from nbhelpers.evidence.model import Evidence
from nbhelpers.metrics.series import MetricData
from nbhelpers.sources import kube
from nbhelpers.sources.bundle import (
    BUNDLE_VERSION,
    log_file_name,
    metrics_file_name,
    objects_file_name,
    write_bundle_files,
)
from nbhelpers.util.redaction import REDACTED
from nbhelpers.util.times import format_time

_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _PlainDumper(_DUMPER):  # type: ignore[misc]
    """Never writes anchors and aliases (a value shared by two objects is written twice), as kubectl does."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _yaml_documents(objects: list[dict[str, Any]]) -> bytes:
    # Keys keep the API server's order: patches copy lists from these objects, and a replay must match the live run.
    return yaml.dump_all(
        objects, Dumper=_PlainDumper, sort_keys=False, default_flow_style=False, allow_unicode=True
    ).encode()


def _json(document: Any) -> bytes:
    return (json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def manifest(evidence: Evidence, captured_at: datetime, tool_version: str = __version__) -> dict[str, Any]:
    return {
        "bundle_version": BUNDLE_VERSION,
        "tool_version": tool_version,
        "captured_at": format_time(captured_at),
        "target": {
            "namespace": evidence.target.namespace,
            "isvc": evidence.target.isvc,
            # optional: absent means InferenceService (bundles written before LLMInferenceService support)
            **({"kind": evidence.target.kind} if evidence.target.is_llmisvc else {}),
        },
        "deployment_mode": evidence.deployment_mode,
        "window": evidence.window.to_json(),
        "versions": dict(evidence.versions),
        "sources": dict(evidence.sources),
        "reads": [{"what": r.what, "status": r.status, "reason": r.reason} for r in evidence.reads],
        "redaction": {
            "placeholder": REDACTED,
            "applied_to": [
                "literal env values of secret-looking names",
                "secret-looking command-line flags",
                "secret-looking annotations and config map keys",
                "bearer tokens, authorization headers and known token shapes in any text",
                "kubectl last-applied-configuration annotations",
            ],
            "never_read": ["Secret objects", "secretKeyRef values"],
        },
    }


def bundle_files(evidence: Evidence, captured_at: datetime, tool_version: str = __version__) -> dict[str, bytes]:
    """Every file of the bundle, by relative path."""
    files: dict[str, bytes] = {"manifest.json": _json(manifest(evidence, captured_at, tool_version))}
    for key, objects in sorted(evidence.objects.items()):
        ordered = sorted(objects, key=kube.ref)
        files[objects_file_name(key)] = _yaml_documents([dict(obj) for obj in ordered])
    if evidence.events:
        files["objects/Event.yaml"] = _yaml_documents([dict(event) for event in evidence.events])
    for log in evidence.logs:
        files[log_file_name(log.namespace, log.pod, log.container, log.previous)] = log.text.encode()
    index: dict[str, Any] = {}
    for query_id, data in sorted(evidence.metrics.items()):
        index[query_id] = {
            "promql": data.promql,
            "template_index": data.template_index,
            "step": data.step,
            "start": format_time(evidence.window.start),
            "end": format_time(evidence.window.end),
            "status": data.status,
            "error": data.error,
        }
        if data.status in ("ok", "empty"):
            files[metrics_file_name(query_id)] = _json(_matrix(data))
    if index:
        files["metrics/index.json"] = _json(index)
    return files


def _matrix(data: MetricData) -> dict[str, Any]:
    """The query_range answer shape, rebuilt from the series (the window may have been narrowed)."""
    return {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {"metric": dict(series.labels), "values": [[t, repr(v)] for t, v in series.samples]}
                for series in data.series
            ],
        },
    }


def write_bundle(evidence: Evidence, destination: Path, captured_at: datetime) -> Path:
    """Write the bundle as a directory or .tar.gz (by the destination's name)."""
    return write_bundle_files(bundle_files(evidence, captured_at), destination)
