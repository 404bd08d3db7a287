"""Measure triage.run() on bundles of growing size (no cluster needed).

    .venv/bin/python benchmarks/bench_triage.py [--sizes 50,500,2000]

For each size N the bundle holds N predictor pods (each with 2 containers),
N Services/Endpoints, 10·N events, N nodes and a 1 MiB log per evidence pod.
Prints wall time of bundle read + gather + all steps, and peak traced Python memory.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import tracemalloc
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import yaml

from nbhelpers.sources.bundle import write_bundle_files
from nbhelpers.triage import TriageParams, run

CAPTURED = datetime(2026, 1, 15, 12, 0, tzinfo=timezone.utc)
NAMESPACE, ISVC = "llm", "bench"


def _stamp(minutes_before: float) -> str:
    return (CAPTURED - timedelta(minutes=minutes_before)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _objects(size: int) -> list[dict[str, Any]]:
    labels = {"serving.kserve.io/inferenceservice": ISVC, "component": "predictor"}
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "serving.kserve.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {
                "name": ISVC,
                "namespace": NAMESPACE,
                "annotations": {"serving.kserve.io/deploymentMode": "RawDeployment"},
            },
            "spec": {"predictor": {"model": {"modelFormat": {"name": "huggingface"}}}},
        }
    ]
    for index in range(size):
        pod = f"{ISVC}-predictor-{index:05d}"
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": pod, "namespace": NAMESPACE, "labels": labels},
                "spec": {
                    "containers": [
                        {"name": "kserve-container", "args": ["--port", "8080"], "ports": [{"containerPort": 8080}]},
                        {"name": "agent"},
                    ]
                },
                "status": {
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "containerStatuses": [
                        {"name": "kserve-container", "restartCount": index % 3},
                        {"name": "agent", "restartCount": 0},
                    ],
                },
            }
        )
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": f"svc-{index}", "namespace": NAMESPACE},
                "spec": {"selector": {"app": f"a{index}"}},
            }
        )
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"node-{index}"},
                "status": {"capacity": {"nvidia.com/gpu": "8"}},
            }
        )
        for event_index in range(10):
            objects.append(
                {
                    "apiVersion": "v1",
                    "kind": "Event",
                    "metadata": {"name": f"{pod}.{event_index}", "namespace": NAMESPACE},
                    "involvedObject": {"kind": "Pod", "name": pod, "namespace": NAMESPACE},
                    "reason": "Unhealthy",
                    "message": "Readiness probe failed",
                    "firstTimestamp": _stamp(50 - event_index),
                    "lastTimestamp": _stamp(40 - event_index),
                    "count": 3,
                }
            )
    return objects


def _bundle(size: int, root: Path) -> Path:
    manifest = {
        "bundle_version": 1,
        "tool_version": "bench",
        "captured_at": _stamp(0),
        "target": {"namespace": NAMESPACE, "isvc": ISVC},
        "window": {"start": _stamp(60), "end": _stamp(0)},
        "reads": [],
    }
    log_line = f"{_stamp(30)} INFO 01-15 11:30:00 [engine.py:1] Avg prompt throughput: 10.0 tokens/s\n"
    files = {
        "manifest.json": json.dumps(manifest).encode(),
        "objects/all.yaml": yaml.safe_dump_all(_objects(size)).encode(),
    }
    for index in range(3):
        files[f"logs/{NAMESPACE}/{ISVC}-predictor-{index:05d}/kserve-container.log"] = (
            log_line * ((1 << 20) // len(log_line))
        ).encode()
    return write_bundle_files(files, root / f"bundle-{size}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,500,2000")
    arguments = parser.parse_args()
    print(f"{'pods':>6} {'events':>7} {'bundle MB':>9} {'run s':>7} {'peak MiB':>9}")
    with tempfile.TemporaryDirectory() as scratch:
        sizes = [int(text) for text in arguments.sizes.split(",")]
        for size in sizes:
            bundle = _bundle(size, Path(scratch))
            megabytes = sum(path.stat().st_size for path in bundle.rglob("*") if path.is_file()) / 1e6
            if size == sizes[0]:  # warm-up: one-time imports (the kubernetes client pulls in much) are not timed
                run(TriageParams(bundle=str(bundle)))
            began = time.perf_counter()
            result = run(TriageParams(bundle=str(bundle)))
            seconds = time.perf_counter() - began
            tracemalloc.start()  # a second, traced run: tracing slows Python down, so it is not timed
            run(TriageParams(bundle=str(bundle)))
            peak = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
            assert len(result.steps) == 9
            print(f"{size:>6} {size * 10:>7} {megabytes:>9.1f} {seconds:>7.2f} {peak:>9.0f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
