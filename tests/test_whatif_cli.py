"""``kserve-runbook whatif hpa|kpa`` as a user meets it (docs/contracts.md#what-if-replay): files in, CSV out, one-line errors."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nbhelpers.cli.whatif import load_manifest, parse_series_csv
from nbhelpers.errors import RunbookError

HPA = {
    "apiVersion": "autoscaling/v2",
    "kind": "HorizontalPodAutoscaler",
    "metadata": {"name": "llm-predictor", "namespace": "llm"},
    "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm-predictor"},
        "minReplicas": 1,
        "maxReplicas": 10,
        "metrics": [
            {
                "type": "Pods",
                "pods": {
                    "metric": {"name": "vllm_num_requests_running"},
                    "target": {"type": "AverageValue", "averageValue": "100"},
                },
            }
        ],
    },
}

ISVC = {
    "apiVersion": "serving.kserve.io/v1beta1",
    "kind": "InferenceService",
    "metadata": {
        "name": "llm",
        "namespace": "llm",
        "annotations": {"serving.kserve.io/deploymentMode": "Serverless", "autoscaling.knative.dev/target": "10"},
    },
    "spec": {"predictor": {"minReplicas": 1, "maxReplicas": 20, "model": {"modelFormat": {"name": "huggingface"}}}},
}


def kserve_runbook(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nbhelpers", *arguments], capture_output=True, text=True, timeout=120, cwd=cwd
    )


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def rows_of(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_series_rows_are_grouped_by_metric_and_sorted() -> None:
    series = parse_series_csv("t,metric,value\n30,cpu,80\n0,cpu,50\n0,rps,3.5\n30,cpu,90\n")
    assert series == {"cpu": [(0.0, 50.0), (30.0, 90.0)], "rps": [(0.0, 3.5)]}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "the first line must be the header"),
        ("time,metric,value\n0,cpu,1\n", "the first line must be the header"),
        ("t,metric,value\n", "no data rows"),
        ("t,metric,value\n0,cpu\n", "line 2: expected 3 columns"),
        ("t,metric,value\nsoon,cpu,1\n", "line 2: time 'soon' is not a number"),
        ("t,metric,value\n0,cpu,nan\n", "line 2: value 'nan' is not a finite number"),
        ("t,metric,value\n-15,cpu,1\n", "line 2: time '-15' is negative"),
        ("t,metric,value\n0, ,1\n", "line 2: the metric name is empty"),
    ],
)
def test_bad_series_is_refused_with_the_line(text: str, expected: str) -> None:
    with pytest.raises(RunbookError, match=expected):
        parse_series_csv(text)


def test_manifest_is_found_inside_a_kubectl_list(tmp_path: Path) -> None:
    listing = {"apiVersion": "v1", "kind": "List", "items": [{"kind": "Service"}, HPA]}
    path = write(tmp_path / "hpa.yaml", yaml.safe_dump(listing))
    assert load_manifest(path, "--hpa", "HorizontalPodAutoscaler")["metadata"]["name"] == "llm-predictor"
    with pytest.raises(RunbookError, match="holds no InferenceService"):
        load_manifest(path, "--isvc", "InferenceService")


def test_hpa_replay_writes_one_row_per_sync(tmp_path: Path) -> None:
    """Open loop, as the contract says: the per-pod average stays at twice the target, so the legacy
    scale-up limit max(2 × current, 4) doubles the replicas at each sync until maxReplicas."""
    hpa = write(tmp_path / "hpa.yaml", yaml.safe_dump(HPA))
    series = write(tmp_path / "series.csv", "t,metric,value\n0,vllm_num_requests_running,200\n")
    out = tmp_path / "replay.csv"
    result = kserve_runbook(
        "whatif", "hpa", "--hpa", hpa, "--series", series, "--initial-replicas", "1", "--out", str(out), cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    rows = rows_of(out.read_text())
    assert list(rows[0]) == ["t", "current_replicas", "desired_replicas"]
    assert [row["t"] for row in rows] == ["0"], "the series ends at t = 0, so there is one sync"

    series = write(
        tmp_path / "series.csv", "t,metric,value\n0,vllm_num_requests_running,200\n60,vllm_num_requests_running,200\n"
    )
    result = kserve_runbook("whatif", "hpa", "--hpa", hpa, "--series", series, "--initial-replicas", "1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = rows_of(result.stdout)
    assert [(row["t"], row["current_replicas"], row["desired_replicas"]) for row in rows] == [
        ("0", "2", "2"),
        ("15", "4", "4"),
        ("30", "8", "8"),
        ("45", "10", "10"),
        ("60", "10", "10"),
    ]


def test_kpa_replay_reports_panic_and_ready_pods(tmp_path: Path) -> None:
    isvc = write(tmp_path / "isvc.yaml", yaml.safe_dump(ISVC))
    lines = ["t,metric,value"] + [f"{t},concurrency,{5 if t < 20 else 60}" for t in range(0, 61, 2)]
    series = write(tmp_path / "series.csv", "\n".join(lines) + "\n")
    result = kserve_runbook(
        "whatif", "kpa", "--isvc", isvc, "--series", series, "--initial-replicas", "1", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    rows = rows_of(result.stdout)
    assert list(rows[0]) == ["t", "ready_pods", "desired_pods", "panic"]
    assert rows[0]["t"] == "0"
    assert {row["panic"] for row in rows} <= {"true", "false"}
    assert any(row["panic"] == "true" for row in rows), "a 12× jump in concurrency must trigger panic mode"
    assert max(int(row["desired_pods"]) for row in rows) > 1


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["hpa", "--hpa", "missing.yaml", "--series", "series.csv", "--initial-replicas", "1"], "does not exist"),
        (["hpa", "--hpa", "hpa.yaml", "--series", "series.csv", "--initial-replicas", "-1"], "0 or more"),
        (
            ["hpa", "--hpa", "hpa.yaml", "--series", "series.csv", "--initial-replicas", "1", "--sync-period", "0s"],
            "longer than 0s",
        ),
        (
            ["hpa", "--hpa", "hpa.yaml", "--series", "series.csv", "--initial-replicas", "1", "--sync-period", "soon"],
            "bad duration",
        ),
        (
            ["hpa", "--hpa", "isvc.yaml", "--series", "series.csv", "--initial-replicas", "1"],
            "holds no HorizontalPodAutoscaler",
        ),
        (["kpa", "--isvc", "isvc.yaml", "--series", "series.csv", "--initial-replicas", "1"], "concurrency or rps"),
        (
            ["kpa", "--isvc", "isvc.yaml", "--series", "rps.csv", "--initial-replicas", "1"],
            "this revision scales on concurrency, but the series only has rps",
        ),
        (
            ["hpa", "--hpa", "hpa.yaml", "--series", "cpu.csv", "--initial-replicas", "1"],
            "the HPA reads vllm_num_requests_running, but the series only has cpu",
        ),
        (
            ["hpa", "--hpa", "hpa.yaml", "--series", "series.csv", "--initial-replicas", "1", "--out", "."],
            "is a directory",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(arguments: list[str], expected: str, tmp_path: Path) -> None:
    write(tmp_path / "hpa.yaml", yaml.safe_dump(HPA))
    write(tmp_path / "isvc.yaml", yaml.safe_dump(ISVC))
    write(tmp_path / "series.csv", "t,metric,value\n0,vllm_num_requests_running,50\n")
    write(tmp_path / "cpu.csv", "t,metric,value\n0,cpu,50\n")
    write(tmp_path / "rps.csv", "t,metric,value\n0,rps,5\n")
    result = kserve_runbook("whatif", *arguments, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert expected in lines[0]
