"""Renderers: summary.md, findings.json and report.html (DESIGN §4.2, §4.3), charts and display helpers."""

from __future__ import annotations

import json
import re
import stat
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from builders import CAPTURED_AT, WINDOW, bundle_files, evidence_from_objects

from nbhelpers import charts, display, report
from nbhelpers.checks import STEPS
from nbhelpers.errors import RunbookError
from nbhelpers.evidence import Evidence
from nbhelpers.findings import Finding, Patch, rank_root_causes
from nbhelpers.metrics import catalog
from nbhelpers.sources.bundle import write_bundle_files
from nbhelpers.timeutil import Window
from nbhelpers.triage import StepResult, TriageResult

NS, ISVC = "llm", "vllm-llm"
POD = "vllm-llm-predictor-7d9f8-abcde"
STEP_SECONDS = 15
SAMPLES = 240  # one hour at 15 s
INCIDENT = Window(WINDOW.start + timedelta(minutes=15), WINDOW.start + timedelta(minutes=45))
FAILED_READS = [
    {"what": "Node", "status": "forbidden", "reason": 'nodes is forbidden: User "oncall" cannot list nodes'},
    {
        "what": "VirtualService.networking.istio.io in llm",
        "status": "not_installed",
        "reason": "API group is not installed",
    },
]


def _series(labels: dict[str, str], value_at: Any, start: datetime = WINDOW.start) -> dict[str, Any]:
    t0 = start.timestamp()
    return {"metric": labels, "values": [[t0 + i * STEP_SECONDS, str(value_at(i))] for i in range(SAMPLES)]}


def _metric(query_id: str, *series: dict[str, Any]) -> dict[str, Any]:
    return {"promql": catalog.render(catalog.BY_ID[query_id], 0, NS, ISVC, STEP_SECONDS), "result": list(series)}


def incident_metrics() -> dict[str, dict[str, Any]]:
    """503s and no ready pod from 11:20 to 11:40, a restart every five minutes from 11:25."""
    return {
        "istio_requests_by_code": _metric(
            "istio_requests_by_code",
            _series({"response_code": "200", "response_flags": "-"}, lambda i: 5.0),
            _series({"response_code": "503", "response_flags": "UH"}, lambda i: 2.0 if 80 <= i < 160 else 0.0),
        ),
        "pod_ready": _metric("pod_ready", _series({}, lambda i: 0 if 80 <= i < 160 else 1)),
        "pod_restarts": _metric(
            "pod_restarts",
            _series({"pod": POD, "container": "kserve-container"}, lambda i: 1 + max(0, i - 80) // 20),
        ),
        "vllm_running": _metric("vllm_running", _series({"pod": POD}, lambda i: 8)),
        "vllm_waiting": _metric("vllm_waiting", _series({"pod": POD}, lambda i: 3 if i >= 60 else 0)),
        "vllm_kv_cache_usage": _metric("vllm_kv_cache_usage", _series({"pod": POD}, lambda i: min(0.99, i / 200))),
        "gpu_fb_used_mib": _metric("gpu_fb_used_mib", _series({"pod": POD}, lambda i: 71_000)),
    }


def incident_objects() -> list[dict[str, Any]]:
    labels = {"serving.kserve.io/inferenceservice": ISVC, "component": "predictor"}
    return [
        {
            "apiVersion": "serving.kserve.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {
                "name": ISVC,
                "namespace": NS,
                "annotations": {"serving.kserve.io/deploymentMode": "RawDeployment"},
            },
            "spec": {"predictor": {"model": {"modelFormat": {"name": "huggingface"}}}},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": POD, "namespace": NS, "labels": labels},
            "spec": {"containers": [{"name": "kserve-container", "image": "vllm/vllm-openai:v0.10.1"}]},
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "False"}],
                "containerStatuses": [{"name": "kserve-container", "restartCount": 4, "ready": False}],
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{POD}.unhealthy", "namespace": NS},
            "type": "Warning",
            "reason": "Unhealthy",
            "message": "Readiness probe failed: dial tcp 10.0.0.5:8080: connect: connection refused",
            "count": 12,
            "firstTimestamp": "2026-01-15T11:21:30Z",
            "lastTimestamp": "2026-01-15T11:39:00Z",
            "involvedObject": {"kind": "Pod", "name": POD, "namespace": NS},
        },
    ]


def incident_evidence(**options: Any) -> Evidence:
    options.setdefault("metrics", incident_metrics())
    options.setdefault("reads", FAILED_READS)
    return evidence_from_objects(incident_objects(), NS, ISVC, **options)


PORT_PATCH = "spec:\n  predictor:\n    model:\n      ports:\n        - containerPort: 8000\n          protocol: TCP\n"


def two_findings() -> list[Finding]:
    return [
        Finding(
            "ENDPOINTS_NONE_READY",
            "no ready address behind vllm-llm-predictor",
            "Service llm/vllm-llm-predictor has 0 ready and 1 not-ready addresses.",
            objects=(f"Endpoints/{NS}/vllm-llm-predictor",),
            evidence=("endpoints: 0 ready, 1 not ready",),
            remediation="Fix why the pods are not ready (see PORT_MISMATCH).",
        ),
        Finding(
            "PORT_MISMATCH",
            "vLLM listens on 8000, the Service and probe use 8080",
            "vllm serve runs with --port 8000 while containerPort and the readiness probe use 8080.",
            objects=(f"Pod/{NS}/{POD}", f"Service/{NS}/vllm-llm-predictor"),
            evidence=("args: --port 8000", "readinessProbe.httpGet.port: 8080"),
            remediation="kubectl patch inferenceservice vllm-llm -n llm --type merge -p ...; roll back with ...",
            patch=Patch(f"InferenceService.serving.kserve.io/{NS}/{ISVC}", PORT_PATCH),
        ),
    ]


def build_result(evidence: Evidence, findings: list[Finding], incident: Window | None = INCIDENT) -> TriageResult:
    steps = []
    for info in STEPS:
        mine = tuple(finding for finding in findings if finding.step == info.id)
        steps.append(StepResult(info.id, info.title, "findings" if mine else "ok", "", 0.01, mine))
    return TriageResult(
        evidence=evidence,
        steps=tuple(steps),
        findings=tuple(findings),
        root_causes=tuple(rank_root_causes(findings)),
        generated_at=CAPTURED_AT + timedelta(minutes=5),
        incident=incident,
    )


@pytest.fixture(scope="module")
def result() -> TriageResult:
    return build_result(incident_evidence(), two_findings())


@pytest.fixture(scope="module")
def summary(result: TriageResult) -> str:
    return report.summary_markdown(result)


def _section(markdown: str, heading: str) -> str:
    body = markdown.split(f"\n## {heading}\n", 1)[1]
    return body.split("\n## ", 1)[0]


# --------------------------------------------------------------------------------------------- summary.md


def test_summary_sections_in_postmortem_order(summary: str) -> None:
    headings = re.findall(r"^## (.+)$", summary, flags=re.MULTILINE)
    assert headings == [
        "Summary",
        "Impact",
        "Root causes (most likely first)",
        "Findings and evidence",
        "Action items",
        "Timeline (UTC)",
        "Steps",
    ]
    assert summary.startswith(f"# Incident draft: {NS}/{ISVC}\n")


def test_coverage_line_comes_first_and_says_why(summary: str) -> None:
    first_paragraph = summary.split("\n\n")[1]
    assert first_paragraph.startswith("_Coverage: could not see everything:")
    assert "forbidden (403): Node" in first_paragraph
    assert "not installed (CRD missing): VirtualService.networking.istio.io" in first_paragraph
    # The pod restarted but the bundle holds none of its logs: logs of pods gone.
    assert f"logs not available (the pod or its previous container is gone): {NS}/{POD}/kserve-container" in (
        first_paragraph
    )
    # A one-hour window loses no events to the event TTL.
    assert "events" not in first_paragraph


def test_coverage_without_prometheus_and_with_a_long_window() -> None:
    long_window = Window(CAPTURED_AT - timedelta(hours=3), CAPTURED_AT)
    evidence = incident_evidence(metrics=None, reads=(), window=long_window)
    line = report.coverage_line(build_result(evidence, []))
    assert "no Prometheus configured: no metrics were read" in line
    assert "the window spans 3.0 h but Kubernetes keeps events about an hour" in line
    assert "forbidden" not in line


def test_summary_and_ranked_root_causes(summary: str) -> None:
    assert "Most likely root cause: PORT_MISMATCH: vLLM listens on 8000" in _section(summary, "Summary")
    assert f"- Incident window: {report.window_text(INCIDENT)}" in summary
    causes = _section(summary, "Root causes (most likely first)").strip().splitlines()
    assert causes == [
        "1. **PORT_MISMATCH** (critical): vLLM listens on 8000, the Service and probe use 8080",
        "2. **ENDPOINTS_NONE_READY** (critical): no ready address behind vllm-llm-predictor",
    ]


def test_impact_has_numbers_from_metrics_and_pods(summary: str) -> None:
    impact = _section(summary, "Impact")
    # 80 samples x 2/s x 15 s of 503 out of 240 x 5/s x 15 s of 200 plus the 503s.
    assert "about 2,400 in the window (11.8% of all requests)" in impact
    assert "peak 2/s at 2026-01-15 11:20:00 UTC (codes 503)" in impact
    assert "7 container restarts in the window across 1 pod(s)" in impact
    assert "Ready predictor pods ranged from 0 to 1." in impact
    assert "Requests waiting in vLLM's queue peaked at 3." in impact
    assert "1 predictor pod(s), 0 ready, 4 restart(s)" in impact


def test_findings_evidence_and_action_items(summary: str) -> None:
    findings = _section(summary, "Findings and evidence")
    assert findings.index("### PORT_MISMATCH (critical, step ports)") < findings.index("### ENDPOINTS_NONE_READY")
    assert "- readinessProbe.httpGet.port: 8080" in findings
    actions = _section(summary, "Action items")
    assert actions.lstrip().startswith("1. **PORT_MISMATCH**: kubectl patch inferenceservice vllm-llm")
    assert f"Patch (merge) for `InferenceService.serving.kserve.io/{NS}/{ISVC}`" in actions
    block = actions.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert [line.strip() for line in block.rstrip().splitlines()] == [line.strip() for line in PORT_PATCH.splitlines()]


def test_timeline_has_events_metric_changes_and_incident_in_order(summary: str) -> None:
    lines = _section(summary, "Timeline (UTC)").strip().splitlines()
    times = [line[2:25] for line in lines]
    assert times == sorted(times)
    expected = [
        "- 2026-01-15 11:15:00 UTC: incident starts (as reported)",
        "- 2026-01-15 11:15:00 UTC: requests start waiting in vLLM's queue (3)",
        "- 2026-01-15 11:20:00 UTC: first 5xx at the Istio proxies (2/s)",
        "- 2026-01-15 11:20:00 UTC: ready predictor pods dropped to 0 (from 1)",
        "- 2026-01-15 11:21:30 UTC: event Warning Unhealthy on Pod/vllm-llm-predictor-7d9f8-abcde: Readiness probe "
        "failed: dial tcp 10.0.0.5:8080: connect: connection refused (x12, last 2026-01-15 11:39:00 UTC)",
        "- 2026-01-15 11:25:00 UTC: first container restart in the window (vllm-llm-predictor-7d9f8-abcde)",
        "- 2026-01-15 11:39:45 UTC: last 5xx at the Istio proxies (2/s)",
        "- 2026-01-15 11:40:00 UTC: ready predictor pods back to 1",
        "- 2026-01-15 11:45:00 UTC: incident ends (as reported)",
    ]
    for line in expected:
        assert line in lines
    assert lines.index(expected[3]) < lines.index(expected[4]) < lines.index(expected[7])


def test_summary_without_findings_or_metrics() -> None:
    evidence = incident_evidence(metrics=None, reads=())
    text = report.summary_markdown(build_result(evidence, [], incident=None))
    assert "No critical or warning finding." in _section(text, "Root causes (most likely first)")
    assert _section(text, "Action items").strip() == "None."
    assert "Incident window" not in text
    assert "event Warning Unhealthy" in _section(text, "Timeline (UTC)")


# ------------------------------------------------------------------------------------------ file writing


def test_write_outputs_writes_valid_files_atomically(result: TriageResult, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "findings.json").write_text("stale")
    written = report.write_outputs(result, out)
    assert set(written) == {"findings.json", "summary.md"}
    assert sorted(path.name for path in out.iterdir()) == ["findings.json", "summary.md"]  # no temporary left
    assert json.loads((out / "findings.json").read_text()) == result.to_json()
    assert (out / "summary.md").read_text() == report.summary_markdown(result)
    assert stat.S_IMODE((out / "summary.md").stat().st_mode) == 0o644


def test_invalid_findings_raise_and_write_nothing(tmp_path: Path) -> None:
    evidence = incident_evidence(metrics=None, reads=())
    good = build_result(evidence, [])
    broken = TriageResult(
        evidence=evidence,
        steps=(StepResult("endpoints", "Endpoints", "crashed", "", 0.1),),
        findings=(),
        root_causes=(),
        generated_at=good.generated_at,
    )
    report.write_outputs(good, tmp_path)
    before = (tmp_path / "findings.json").read_bytes()
    with pytest.raises(report.InvalidFindings, match="steps/0/status"):
        report.write_outputs(broken, tmp_path)
    assert (tmp_path / "findings.json").read_bytes() == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["findings.json", "summary.md"]


def test_failed_atomic_write_leaves_no_temporary(tmp_path: Path) -> None:
    (tmp_path / "summary.md").mkdir()  # os.replace cannot put a file over a directory
    with pytest.raises(OSError):
        report.write_atomic(tmp_path / "summary.md", b"text")
    assert [path.name for path in tmp_path.iterdir()] == ["summary.md"]


# ---------------------------------------------------------------------------------------- charts, display


def test_limit_rows_keeps_peaks_under_the_altair_limit() -> None:
    start = WINDOW.start.timestamp()
    rows = [
        (start + i * 15, f"pod-{pod:02d}", float(pod + (100 if i == 3333 else 0)))
        for pod in range(20)
        for i in range(8000)
    ]
    frame = charts._frame(rows)
    limited = charts.limit_rows(frame)
    assert len(limited) <= charts.MAX_ROWS
    assert limited["series"].nunique() == charts.MAX_SERIES
    assert set(limited["series"]) == {f"pod-{pod:02d}" for pod in range(20 - charts.MAX_SERIES, 20)}
    assert limited.groupby("series")["value"].max()["pod-19"] == 119.0  # the one-sample spike survives binning
    chart = charts._panel(frame, "t", "y", None, "test")
    datasets = chart.to_dict()["datasets"]  # no MaxRowsError: the limit is still on
    assert [len(rows) for rows in datasets.values()] == [len(limited)]


def test_charts_only_for_metrics_with_data(result: TriageResult) -> None:
    timeline = charts.incident_timeline(result.evidence, INCIDENT)
    assert timeline is not None
    spec = timeline.to_dict()
    assert [panel["title"] for panel in spec["vconcat"]] == [
        "5xx responses/s at the Istio proxies, by code",
        "vLLM requests running and waiting",
        "Ready predictor pods",
        "Container restarts since the window opened",
    ]
    shade = spec["vconcat"][0]["layer"][0]
    assert shade["mark"]["type"] == "rect"
    assert charts.kv_cache_chart(result.evidence) is not None
    assert charts.step_chart(result.evidence, "metric_pipeline") is None  # no HPA metrics in this evidence
    kv = charts.kv_cache_frame(result.evidence)
    assert kv["value"].max() == pytest.approx(99.0)  # fraction -> percent
    svg = charts.to_svg(timeline)
    assert svg.lstrip().startswith("<svg") and "Ready predictor pods" in svg


def test_display_escapes_cluster_text() -> None:
    evidence = incident_evidence(metrics=None, reads=())
    hostile = Finding(
        "PORT_MISMATCH",
        "<script>alert(1)</script>",
        'summary with <img src=x onerror="boom">',
        objects=("Pod/llm/<b>pod</b>",),
        evidence=("log: <iframe>",),
        remediation="kubectl ... && echo <done>",
        patch=Patch("InferenceService.serving.kserve.io/llm/vllm-llm", "metadata:\n  name: <x>\n"),
    )
    result = build_result(evidence, [hostile])
    markup = display.step_html(result, "ports") + display.root_causes_html(result)
    for raw in ("<script>", "<img", "<b>pod", "<iframe>", "<done>", "<x>"):
        assert raw not in markup
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in markup
    assert "Do the listening port" in markup and "#b91c1c" in markup  # the question; critical shown in red


def test_external_reference_scanner_catches_cdn_assets() -> None:
    page = (
        '<html><head><script src="https://cdn.jsdelivr.net/npm/vega@5"></script>'
        '<link rel="stylesheet" href="//fonts.example.com/x.css"><script type="module">'
        'const m = (await import("https://cdnjs.cloudflare.com/m.mjs")).default;</script></head>'
        '<body><a href="https://example.com">a link is fine</a><img src="data:image/png;base64,AA"></body></html>'
    )
    found = report.external_references(page)
    assert len(found) == 3
    assert report.external_references('<script>var a = 1;</script><a href="https://x">x</a>') == []


# ------------------------------------------------------------------------------------------------- HTML


@pytest.mark.notebook
def test_report_html_from_the_executed_runbook(tmp_path: Path) -> None:
    import papermill

    files = bundle_files(incident_objects(), NS, ISVC, metrics=incident_metrics(), reads=FAILED_READS)
    bundle = write_bundle_files(files, tmp_path / "bundle")
    executed = tmp_path / "triage.ipynb"
    papermill.execute_notebook(
        str(Path(__file__).parents[1] / "runbooks" / "triage.ipynb"),
        str(executed),
        parameters={
            "bundle": str(bundle),
            "incident_start": "2026-01-15T11:15:00Z",
            "incident_end": "2026-01-15T11:45:00Z",
        },
        kernel_name="python3",
        progress_bar=False,
    )
    html_path = report.render_html(executed, tmp_path / "report.html")
    page = html_path.read_text()

    assert "triage_from_parameters" not in page and 'show_step(result, "' not in page  # no code
    assert 'class="jp-InputPrompt' not in page and "In&nbsp;[" not in page  # no input prompts
    assert 'class="jp-CodeMirrorEditor' not in page and 'class="jp-InputArea-editor' not in page
    for number, step in enumerate(STEPS, 1):
        assert f"Step {number}: {step.title}" in page
    assert page.count("<svg") >= 2  # incident timeline and step charts, inlined
    assert report.external_references(page) == []
    assert not re.search(r"<(script|link)[^>]+(src|href)=[\"']?(https?:)?//", page)
    assert "forbidden (403): Node" in page
    assert not list(tmp_path.glob(".report.html.*"))


def test_render_html_refuses_remote_assets(tmp_path: Path) -> None:
    import nbformat

    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "chart",
                outputs=[
                    nbformat.v4.new_output(
                        "display_data",
                        data={"text/html": '<script src="https://cdn.jsdelivr.net/npm/vega@5"></script>'},
                    )
                ],
            )
        ]
    )
    source = tmp_path / "in.ipynb"
    nbformat.write(notebook, source)
    with pytest.raises(RunbookError, match="would load from the network"):
        report.render_html(source, tmp_path / "report.html")
    assert not (tmp_path / "report.html").exists()


def test_frame_is_long_format() -> None:
    frame = charts._frame([(WINDOW.start.timestamp(), "a", 1.0), (WINDOW.start.timestamp(), "b", float("nan"))])
    assert list(frame.columns) == charts.COLUMNS
    assert len(frame) == 1 and frame["utc"][0] == "2026-01-15 11:00:00 UTC"
    assert isinstance(frame["time"][0], pd.Timestamp) and frame["time"][0].tzinfo is not None
    assert frame["time"][0].to_pydatetime() == datetime(2026, 1, 15, 11, tzinfo=timezone.utc)
