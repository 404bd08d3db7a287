"""Renderers: summary.md, findings.json and report.html (docs/contracts.md#output-folder, docs/contracts.md#findingsjson-v1), charts and display helpers."""

from __future__ import annotations

import json
import re
import stat
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from builders import CAPTURED_AT, WINDOW, bundle_files, evidence_from_objects
from scenario_cache import shipped_specs

from nbhelpers import __version__
from nbhelpers.checks import STEP_IDS, STEPS
from nbhelpers.errors import RunbookError
from nbhelpers.evidence.model import Evidence
from nbhelpers.findings.model import Finding, Fix, Patch, rank_root_causes
from nbhelpers.metrics import catalog
from nbhelpers.notebook import display
from nbhelpers.render import charts, findings_json, report_html
from nbhelpers.render.summary import coverage_line, summary_markdown, window_text
from nbhelpers.sources.bundle import write_bundle_files
from nbhelpers.triage import StepResult, TriageResult
from nbhelpers.util import files
from nbhelpers.util.times import Window

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
            code="ENDPOINTS_NONE_READY",
            title="no ready address behind vllm-llm-predictor",
            summary="Service llm/vllm-llm-predictor has 0 ready and 1 not-ready addresses.",
            objects=(f"Endpoints/{NS}/vllm-llm-predictor",),
            evidence=("endpoints: 0 ready, 1 not ready",),
            fix=Fix(what="Fix why the pods are not ready (see PORT_MISMATCH)."),
        ),
        Finding(
            code="PORT_MISMATCH",
            title="vLLM listens on 8000, the Service and probe use 8080",
            summary="vllm serve runs with --port 8000 while containerPort and the readiness probe use 8080.",
            objects=(f"Pod/{NS}/{POD}", f"Service/{NS}/vllm-llm-predictor"),
            evidence=("args: --port 8000", "readinessProbe.httpGet.port: 8080"),
            fix=Fix(
                what="kubectl patch inferenceservice vllm-llm -n llm --type merge -p ...; roll back with ...",
                patch=Patch(f"InferenceService.serving.kserve.io/{NS}/{ISVC}", PORT_PATCH),
            ),
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
        root_causes=tuple(rank_root_causes(findings, STEP_IDS)),
        generated_at=CAPTURED_AT + timedelta(minutes=5),
        incident=incident,
    )


@pytest.fixture(scope="module")
def result() -> TriageResult:
    return build_result(incident_evidence(), two_findings())


@pytest.fixture(scope="module")
def summary(result: TriageResult) -> str:
    return summary_markdown(result)


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
    line = coverage_line(build_result(evidence, []))
    assert "no Prometheus configured: no metrics were read" in line
    assert "the window spans 3.0 h but Kubernetes keeps events about an hour" in line
    assert "forbidden" not in line


def test_summary_and_ranked_root_causes(summary: str) -> None:
    assert "Most likely root cause: PORT_MISMATCH: vLLM listens on 8000" in _section(summary, "Summary")
    assert f"- Incident window: {window_text(INCIDENT)}" in summary
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
    assert f"Patch (merge) for InferenceService.serving.kserve.io/{NS}/{ISVC}:" in actions
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
    text = summary_markdown(build_result(evidence, [], incident=None))
    assert "No critical or warning finding." in _section(text, "Root causes (most likely first)")
    assert _section(text, "Action items").strip() == "None."
    assert "Incident window" not in text
    assert "event Warning Unhealthy" in _section(text, "Timeline (UTC)")


# ------------------------------------------------------------------------------------------ file writing


def test_write_outputs_writes_valid_files_atomically(result: TriageResult, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "findings.json").write_text("stale")
    written = findings_json.write_outputs(result, out)
    assert set(written) == {"findings.json", "summary.md"}
    assert sorted(path.name for path in out.iterdir()) == ["findings.json", "summary.md"]  # no temporary left
    assert json.loads((out / "findings.json").read_text()) == result.to_json()
    assert (out / "summary.md").read_text() == summary_markdown(result)
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
    findings_json.write_outputs(good, tmp_path)
    before = (tmp_path / "findings.json").read_bytes()
    with pytest.raises(findings_json.InvalidFindings, match="steps/0/status"):
        findings_json.write_outputs(broken, tmp_path)
    assert (tmp_path / "findings.json").read_bytes() == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["findings.json", "summary.md"]


def test_failed_atomic_write_leaves_no_temporary(tmp_path: Path) -> None:
    (tmp_path / "summary.md").mkdir()  # os.replace cannot put a file over a directory
    with pytest.raises(OSError):
        files.write_atomic(tmp_path / "summary.md", b"text")
    assert [path.name for path in tmp_path.iterdir()] == ["summary.md"]


# ---------------------------------------------------------------------------------------- charts, display


def test_charts_only_for_metrics_with_data(result: TriageResult) -> None:
    timeline = charts.incident_timeline(result.evidence, INCIDENT)
    assert timeline is not None
    spec = timeline.to_dict()
    assert [panel["title"]["text"] for panel in spec["vconcat"]] == [
        "5xx responses/s at the Istio proxies, by code",
        "vLLM requests waiting and running (all pods)",
        "Ready predictor pods",
        f"Container restarts since the window opened, per pod ({ISVC}-predictor-…)",
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
        code="PORT_MISMATCH",
        title="<script>alert(1)</script>",
        summary='summary with <img src=x onerror="boom">',
        objects=("Pod/llm/<b>pod</b>",),
        evidence=("log: <iframe>",),
        fix=Fix(
            what="kubectl ... && echo <done>",
            patch=Patch("InferenceService.serving.kserve.io/llm/vllm-llm", "metadata:\n  name: <x>\n"),
        ),
    )
    result = build_result(evidence, [hostile])
    markup = display.step_html(result, "ports") + display.root_causes_html(result) + display.verdict_html(result)
    for raw in ("<script>", "<img", "<b>pod", "<iframe>", "<done>", "<x>"):
        assert raw not in markup
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in markup
    assert "Do the listening port" in markup and "✖ CRITICAL" in markup  # the question; severity as text


# ----------------------------------------------------------------------------------- report as a document

INDIA = timezone(timedelta(hours=5, minutes=30), "IST")


def _contrast(foreground: str, background: str) -> float:
    """WCAG 2 contrast ratio of two #rrggbb colours."""

    def luminance(colour: str) -> float:
        channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
        linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    light, dark = sorted((luminance(foreground), luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_header_has_target_windows_in_utc_with_local_offset_and_tool_version(result: TriageResult) -> None:
    header = display.header_html(result, local=INDIA)
    assert f"Incident report: {NS}/{ISVC}" in header
    assert "2026-01-15 11:00:00 UTC to 2026-01-15 12:00:00 UTC (60 min)" in header  # analysis window
    assert "local: 2026-01-15 16:30:00 IST, UTC+05:30 to 2026-01-15 17:30:00 IST, UTC+05:30" in header
    assert "2026-01-15 11:15:00 UTC to 2026-01-15 11:45:00 UTC (30 min)" in header  # incident window
    assert "2026-01-15 12:05:00 UTC" in header and "(local: 2026-01-15 17:35:00 IST, UTC+05:30)" in header
    assert f"kserve-runbook {__version__}" in header
    assert "cluster: bundle, prometheus: bundle" in header and "kubernetes 1.31" in header
    assert "The host that wrote this report is on UTC+05:30 (IST)" in header
    in_utc = display.header_html(result, local=timezone.utc)
    assert "local:" not in in_utc and "is on UTC+00:00;" in in_utc  # nothing to convert


def test_severity_is_shown_by_text_glyph_and_colour_with_enough_contrast() -> None:
    words = {display.badge(look) for look in display.SEVERITY_LOOKS.values()}
    assert {re.sub("<[^>]+>", "", word) for word in words} == {"✖ CRITICAL", "▲ WARNING", "● INFO"}
    for look in [*display.SEVERITY_LOOKS.values(), *display.STATUS_LOOKS.values()]:
        assert _contrast(look.foreground, look.background) >= 4.5, look  # WCAG AA for normal text
        assert _contrast(look.foreground, "#ffffff") >= 4.5, look  # still readable when print drops the fill


def test_verdict_comes_with_ranked_causes_linked_to_their_findings_and_the_impact(result: TriageResult) -> None:
    verdict = display.verdict_html(result)
    assert re.sub("<[^>]+>", "", verdict).startswith(
        "VerdictMost likely root cause: ✖ CRITICAL PORT_MISMATCH: vLLM listens on 8000"
    )
    assert verdict.index('href="#finding-PORT_MISMATCH"') < verdict.index('href="#finding-ENDPOINTS_NONE_READY"')
    assert "about 2,400 in the window (11.8% of all requests)" in verdict
    steps = "".join(display.step_html(result, step.id) for step in STEPS)
    assert 'id="finding-PORT_MISMATCH"' in steps and 'id="finding-ENDPOINTS_NONE_READY"' in steps


def test_each_patch_is_shown_with_its_apply_and_roll_back_commands(result: TriageResult) -> None:
    with_commands = Finding(
        code="PORT_MISMATCH",
        title="t",
        summary="s",
        fix=Fix(
            what="Add --port=8080.",
            patch=Patch(f"InferenceService.serving.kserve.io/{NS}/{ISVC}", PORT_PATCH),
            apply_command="kubectl patch a b --type merge -p '{}'",
            rollback_command="kubectl patch a b -p 'x'",
        ),
    )
    remedy = display.split_remediation(with_commands.remediation)
    assert remedy == display.Remedy(
        "Add --port=8080.", "kubectl patch a b --type merge -p '{}'", "kubectl patch a b -p 'x'"
    )
    markup = display.commands_html(with_commands)
    assert markup.index(">Apply<") < markup.index("kubectl patch a b --type merge") < markup.index(">Roll back<")
    bare = Finding(
        code="PORT_MISMATCH", title="t", summary="s", fix=Fix(what="Add --port=8080.", patch=with_commands.patch)
    )
    fallback = display.commands_html(bare)
    assert f"kubectl patch inferenceservice.serving.kserve.io {ISVC} -n {NS} --type merge --patch-file patch.yaml" in (
        fallback
    )
    assert "kubectl replace -f before.yaml" in fallback
    closing = display.root_causes_html(result)
    assert closing.index("PORT_MISMATCH") < closing.index("ENDPOINTS_NONE_READY")


def _internal_links(page: str) -> tuple[set[str], set[str]]:
    """(targets of href="#..." links, ids on the page)."""
    return set(re.findall(r'href=["\']#([^"\']+)["\']', page)), set(re.findall(r'id=["\']([^"\']+)["\']', page))


@pytest.mark.parametrize("name", [spec.name for spec in shipped_specs()])
def test_every_scenario_renders_commands_for_its_patches_and_links_that_resolve(
    name: str, shipped_result: Callable[[str], TriageResult]
) -> None:
    result = shipped_result(name)
    page = (
        display.header_html(result)
        + display.coverage_html(result)
        + display.verdict_html(result)
        + "".join(display.step_html(result, step.id) for step in STEPS)
        + display.root_causes_html(result)
    )
    links, ids = _internal_links(page)
    assert links <= ids, links - ids
    for finding in result.findings:
        assert f"code-{finding.code}" in ids and f"code-{finding.code}" in links
        if finding.patch is not None:
            remedy = display.split_remediation(finding.remediation)
            assert remedy.apply.startswith("kubectl ") and remedy.rollback.startswith("kubectl "), finding.code


def _notebook_with_header() -> Any:
    import nbformat

    v4 = nbformat.v4
    header = v4.new_output(
        "display_data",
        data={"text/html": "<h1>Incident report</h1>"},
        metadata={report_html.ROLE_KEY: report_html.HEADER_ROLE},
    )
    verdict = v4.new_output("display_data", data={"text/html": "<h2>Verdict</h2>"})
    notebook = v4.new_notebook(
        cells=[
            v4.new_markdown_cell("# Triage: vLLM on KServe\n\nSet the parameters below."),
            v4.new_code_cell("namespace = ''", metadata={"tags": ["parameters"]}),
            v4.new_code_cell("bundle = 'x'", metadata={"tags": ["injected-parameters"]}),
            v4.new_markdown_cell("## Run the triage"),
            v4.new_code_cell(
                "triage = start_triage()",
                outputs=[v4.new_output("display_data", data={"text/html": "<p>read these steps first</p>"})],
            ),
            v4.new_markdown_cell("## Coverage and incident timeline"),
            v4.new_code_cell("show_coverage(triage)", outputs=[header, verdict]),
            v4.new_markdown_cell("## Step 1: Endpoints"),
            v4.new_code_cell("show_step(triage, 'endpoints')", outputs=[v4.new_output("stream", text="ok")]),
            v4.new_markdown_cell("## A section that shows nothing"),
            v4.new_code_cell("pass"),
        ],
        metadata={
            "papermill": {
                "parameters": {
                    "bundle": "/tmp/b",
                    "prometheus": "https://oncall:hunter2@prom.example:9090/api?token=abc",
                    "since": "",
                    "interactive": False,
                    "out_dir": "/tmp/out",
                    "incident_start": "2026-01-15T11:15:00Z",
                }
            }
        },
    )
    return notebook


def test_report_view_opens_with_the_header_and_drops_what_only_a_notebook_needs() -> None:
    view = report_html.report_view(_notebook_with_header())
    sources = [cell.source for cell in view.cells]
    assert sources == [
        "show_coverage(triage)",
        "triage = start_triage()",
        "## Step 1: Endpoints",
        "show_step(triage, 'endpoints')",
    ]
    outputs = view.cells[0].outputs
    assert [output.data["text/html"][:12] for output in outputs] == ["<h1>Incident", '<div class="', "<h2>Verdict<"]
    parameters = outputs[1].data["text/html"]
    assert "bundle=/tmp/b" in parameters and "incident_start=2026-01-15T11:15:00Z" in parameters
    assert "prometheus=https://prom.example:9090/api<" in parameters  # no credentials, no query string
    assert "hunter2" not in parameters and "token" not in parameters
    assert "out_dir" not in parameters and "interactive" not in parameters and "since" not in parameters


def test_external_reference_scanner_catches_cdn_assets() -> None:
    page = (
        '<html><head><script src="https://cdn.jsdelivr.net/npm/vega@5"></script>'
        '<link rel="stylesheet" href="//fonts.example.com/x.css"><script type="module">'
        'const m = (await import("https://cdnjs.cloudflare.com/m.mjs")).default;</script></head>'
        '<body><a href="https://example.com">a link is fine</a><img src="data:image/png;base64,AA"></body></html>'
    )
    found = report_html.external_references(page)
    assert len(found) == 3
    assert report_html.external_references('<script>var a = 1;</script><a href="https://x">x</a>') == []


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
    html_path = report_html.render_html(executed, tmp_path / "report.html")
    page = html_path.read_text()

    assert "start_triage(" not in page and 'show_step(triage, "' not in page  # no code cells
    assert 'class="jp-InputPrompt' not in page and "In&nbsp;[" not in page  # no input prompts
    assert 'class="jp-CodeMirrorEditor' not in page and 'class="jp-InputArea-editor' not in page
    for number, step in enumerate(STEPS, 1):
        assert f"Step {number}: {step.title}" in page
    assert page.count("<svg") >= 2  # incident timeline and step charts, inlined
    assert f"<title>Incident report: {NS}/{ISVC}</title>" in page
    # An incident report, not a notebook: header, coverage and verdict before the steps; no title cell,
    # no "Run the triage" section; the run parameters papermill recorded under the header.
    text = re.sub(r"<[^>]+>", " ", page)
    order = [
        f"Incident report: {NS}/{ISVC}",
        "Run parameters:",
        "Coverage: could not see everything.",
        "Verdict",
        "Most likely root cause:",
        "Incident timeline",
        "Step 1: Endpoints and routing",
        "Step 9: Timeouts",
        "Finding codes in this report",
    ]
    positions = [text.index(marker) for marker in order]
    assert positions == sorted(positions)
    assert "Run the triage" not in text and "This runbook diagnoses" not in text
    assert "incident_start=2026-01-15T11:15:00Z" in text and "kserve-runbook 0.1.0" in text
    assert "✖ CRITICAL" in page
    links, ids = _internal_links(page)
    assert links and links <= ids, links - ids  # every in-page link has its anchor: they work offline
    assert report_html.external_references(page) == []
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
        report_html.render_html(source, tmp_path / "report.html")
    assert not (tmp_path / "report.html").exists()


def test_cluster_text_cannot_inject_markup_into_summary_md() -> None:
    hostile = "x<img src=x onerror=alert(1)> [click](http://evil.example) ![t](http://track.example/p.gif) `c`\x1b[2J"
    finding = Finding(
        code="PORT_MISMATCH",
        title=f"title {hostile}",
        summary=f"summary {hostile}",
        objects=(f"Pod/llm/{hostile}",),
        evidence=(f"evidence {hostile}\nsecond line",),
        fix=Fix(
            what=f"change {hostile}",
            patch=Patch(target="InferenceService.serving.kserve.io/llm/x", body="spec:\n  a: '```'\n"),
            apply_command='kubectl patch x --type merge -p \'{"a":["b"]}\'',
            rollback_command="kubectl patch x --type merge -p '{\"a\":null}'",
        ),
    )
    markdown = summary_markdown(build_result(incident_evidence(), [finding]))
    assert "<img" not in markdown and "[click](" not in markdown and "![t](" not in markdown and "\x1b" not in markdown
    assert "&lt;img" in markdown and "\\[click\\]" in markdown
    assert 'kubectl patch x --type merge -p \'{"a":["b"]}\'' in markdown  # commands stay copyable
    assert "````yaml" in markdown  # a fence longer than the backticks in the patch body


def test_an_llminferenceservice_header_names_its_kind_and_no_deployment_mode(
    shipped_result: Callable[[str], TriageResult],
) -> None:
    """The header says which kind was triaged; a deployment mode is an InferenceService notion."""
    llmisvc = dict(display.header_facts(shipped_result("llmisvc-healthy-prefix-cache")))
    assert "LLMInferenceService" in llmisvc and "InferenceService" not in llmisvc
    assert "deployment mode" not in llmisvc
    isvc = dict(display.header_facts(shipped_result("agent-readiness-404")))
    assert "InferenceService" in isvc and isvc["deployment mode"] == "RawDeployment"
