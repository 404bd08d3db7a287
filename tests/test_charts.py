"""Charts (nbhelpers/charts.py): what each panel shows, interactive vs static, and altair's row limit.

The row-limit test builds evidence the size of a large incident (2,000 predictor pods, a 7-day window at
the catalog's finest step) and renders every chart with altair's default 5000-row limit still on.
"""

from __future__ import annotations

import dataclasses
import math
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import altair as alt
import pandas as pd
import pytest
from builders import WINDOW, evidence_from_objects

from nbhelpers.checks import STEPS
from nbhelpers.evidence.model import LLM_INFERENCE_SERVICE, Evidence, Target
from nbhelpers.facts.pod_phases import CREATED, READY, SCHEDULED, STARTED, PodPhases
from nbhelpers.metrics.series import MetricData
from nbhelpers.render import charts
from nbhelpers.sources.base import SeriesData
from nbhelpers.util.times import Window

NS, ISVC = "llm", "big"
CAPTURED = datetime(2026, 1, 15, 12, 0, tzinfo=timezone.utc)
WEEK = Window(CAPTURED - timedelta(days=7), CAPTURED)
FINEST_STEP = max(
    15, math.ceil(WEEK.seconds / 11_000)
)  # docs/contracts.md#metric-catalog: Prometheus' 11,000-point ceiling
ALTAIR_ROW_LIMIT = 5000
PODS = 2000
POD_SAMPLES = 600  # per-pod series: 2,000 x 600 = 1.2 million samples per metric
LABELS = {"serving.kserve.io/inferenceservice": ISVC, "component": "predictor"}


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod(index: int) -> dict[str, Any]:
    """A predictor pod whose cold start grows with its index (the slowest are the last ones)."""
    created = CAPTURED - timedelta(hours=3, seconds=index)
    scheduled = created + timedelta(seconds=2 + index % 7)
    started = scheduled + timedelta(seconds=30 + index % 40)
    ready = started + timedelta(seconds=60 + index // 10)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{ISVC}-predictor-{index:05d}",
            "namespace": NS,
            "labels": LABELS,
            "creationTimestamp": _stamp(created),
        },
        "spec": {"containers": [{"name": "kserve-container", "image": "vllm/vllm-openai:v0.10.1"}]},
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": _stamp(scheduled)},
                {"type": "Ready", "status": "True", "lastTransitionTime": _stamp(ready)},
            ],
            "containerStatuses": [
                {"name": "kserve-container", "restartCount": 0, "state": {"running": {"startedAt": _stamp(started)}}}
            ],
        },
    }


def _objects(pods: int) -> list[dict[str, Any]]:
    isvc = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {
            "name": ISVC,
            "namespace": NS,
            "annotations": {"serving.kserve.io/deploymentMode": "RawDeployment"},
        },
        "spec": {"predictor": {"model": {"modelFormat": {"name": "huggingface"}}}},
    }
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": f"{ISVC}-predictor", "namespace": NS},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": f"{ISVC}-predictor"},
            "minReplicas": 1,
            "maxReplicas": 2400,
        },
    }
    return [isvc, hpa, *(_pod(index) for index in range(pods))]


def _series(labels: dict[str, str], samples: int, step: float, value: Any) -> SeriesData:
    start = WEEK.start.timestamp()
    return SeriesData(labels, tuple((start + i * step, float(value(i))) for i in range(samples)))


def _metric(query_id: str, step: int, *series: SeriesData) -> MetricData:
    return MetricData(query_id, "(test)", 0, step, "ok", tuple(series))


def _week_metrics(pods: int) -> dict[str, MetricData]:
    """Aggregated series at the finest step over the week; per-pod series coarser, for 2,000 pods."""
    samples = math.ceil(WEEK.seconds / FINEST_STEP)
    pod_step = WEEK.seconds / POD_SAMPLES

    def total(value: Any) -> SeriesData:
        return _series({}, samples, FINEST_STEP, value)

    def per_pod(index: int, value: Any) -> SeriesData:
        return _series({"pod": f"{ISVC}-predictor-{index:05d}"}, POD_SAMPLES, pod_step, value)

    return {
        "istio_requests_by_code": _metric(
            "istio_requests_by_code",
            FINEST_STEP,
            *(
                _series(
                    {"response_code": code},
                    samples,
                    FINEST_STEP,
                    lambda i, c=code: (i % 97) / (10 if c == "503" else 30),
                )
                for code in ("200", "503", "504")
            ),
        ),
        "vllm_e2e_p99": _metric("vllm_e2e_p99", FINEST_STEP, total(lambda i: 20 + i % 50)),
        "vllm_waiting": _metric("vllm_waiting", FINEST_STEP, total(lambda i: i % 300)),
        "vllm_running": _metric("vllm_running", FINEST_STEP, total(lambda i: 256)),
        "hpa_current_replicas": _metric("hpa_current_replicas", FINEST_STEP, total(lambda i: min(2000, 1 + i // 5))),
        "hpa_desired_replicas": _metric("hpa_desired_replicas", FINEST_STEP, total(lambda i: min(2400, 1 + i // 4))),
        "pod_ready": _metric("pod_ready", FINEST_STEP, total(lambda i: min(2000, i // 5))),
        "pod_restarts": _metric(
            "pod_restarts", int(pod_step), *(per_pod(n, lambda i, n=n: (i * n) // 5000) for n in range(pods))
        ),
        "vllm_kv_cache_usage": _metric(
            "vllm_kv_cache_usage",
            int(pod_step),
            *(per_pod(n, lambda i, n=n: ((i + n) % 100) / 100) for n in range(pods)),
        ),
        "gpu_fb_used_mib": _metric(
            "gpu_fb_used_mib", int(pod_step), *(per_pod(n, lambda i, n=n: 70_000 + (i + n) % 900) for n in range(pods))
        ),
    }


@pytest.fixture(scope="module")
def large() -> Evidence:
    evidence = evidence_from_objects(_objects(PODS), NS, ISVC, window=WEEK, captured_at=CAPTURED)
    return dataclasses.replace(evidence, metrics=_week_metrics(PODS))


@pytest.fixture(scope="module")
def small() -> Evidence:
    evidence = evidence_from_objects(_objects(3), NS, ISVC, window=WEEK, captured_at=CAPTURED)
    return dataclasses.replace(evidence, metrics=_week_metrics(3))


def _datasets(chart: alt.TopLevelMixin) -> dict[str, list[Any]]:
    datasets: dict[str, list[Any]] = chart.to_dict()["datasets"]  # raises MaxRowsError above the limit
    return datasets


def _units(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Every single-view spec inside a (nested) concat or layer."""
    found: list[dict[str, Any]] = []
    for key in ("vconcat", "layer"):
        for child in spec.get(key, ()):
            found += _units(child)
    return found if found else [spec]


# ------------------------------------------------------------------------------------------- row limit


def test_every_chart_stays_under_the_row_limit_for_2000_pods_over_a_week(large: Evidence) -> None:
    assert alt.data_transformers.active == "default"
    assert alt.data_transformers.options.get("max_rows", ALTAIR_ROW_LIMIT) == ALTAIR_ROW_LIMIT  # the limit is on
    incident = Window(WEEK.start + timedelta(days=2), WEEK.start + timedelta(days=3))
    built = {
        "timeline": charts.incident_timeline(large, incident),
        "kv": charts.kv_cache_chart(large, incident),
        "gpu": charts.gpu_memory_chart(large, incident),
        "hpa": charts.hpa_chart(large, incident),
        "cold_start": charts.cold_start_chart(large),
        **{
            f"{step.id}-{index}": chart
            for step in STEPS
            for index, chart in enumerate(charts.step_charts(large, step.id, incident))
        },
    }
    assert "ports-0" not in built  # the ports step has no metric to draw
    assert "cold_start-1" in built  # the cold start's phases per pod, beside its time panels
    for name, chart in built.items():
        assert chart is not None, name
        for rows in _datasets(chart).values():
            assert len(rows) <= charts.MAX_ROWS < ALTAIR_ROW_LIMIT, name
    timeline = built["timeline"]
    assert timeline is not None
    titles = [unit.get("title", {}).get("text") for unit in timeline.to_dict()["vconcat"]]
    assert titles[0] == "5xx responses/s at the Istio proxies, by code"
    kv = charts.kv_cache_frame(large)
    assert kv["series"].nunique() == charts.MAX_SERIES  # the pods with the highest peaks, not 2,000 lines


def test_cold_start_chart_shows_the_slowest_pods_of_many(large: Evidence) -> None:
    chart = charts.cold_start_chart(large)
    assert chart is not None
    spec = chart.to_dict()
    assert spec["title"]["subtitle"] == f"{ISVC}-predictor-… pods; the {charts.MAX_PHASE_PODS} slowest of {PODS}"
    frame = charts.phases_frame(large)
    assert frame["pod"].nunique() == charts.MAX_PHASE_PODS
    slowest = frame.groupby("pod")["end"].max().sort_values(ascending=False)
    assert slowest.index[0] == "01999"  # the index-driven cold start is longest for the last pod


# ---------------------------------------------------------------------------------------------- panels


def test_panels_share_the_window_and_tell_series_apart_without_colour(small: Evidence) -> None:
    incident = Window(WEEK.start + timedelta(days=1), WEEK.start + timedelta(days=2))
    chart = charts.incident_timeline(small, incident, interactive=False)
    assert chart is not None
    for panel in chart.to_dict()["vconcat"]:
        layers = panel["layer"]
        rect, rule, label = layers[0], layers[1], layers[2]
        assert rect["mark"]["type"] == "rect" and rule["mark"]["type"] == "rule" and label["mark"]["type"] == "text"
        line = next(layer for layer in layers if layer["mark"]["type"] == "line")
        domain = line["encoding"]["x"]["scale"]["domain"]
        assert domain == [WEEK.start.isoformat(), WEEK.end.isoformat()]  # every panel spans the window
        assert line["encoding"]["strokeDash"]["field"] == "series"  # dashes as well as colours
        assert line["encoding"]["color"]["field"] == "series"


def test_replicas_panel_compares_desired_and_current_under_max_replicas(small: Evidence) -> None:
    chart = charts.hpa_chart(small)
    assert chart is not None
    panel = chart.to_dict()["vconcat"][0]
    assert panel["title"]["text"] == "Replicas: HPA desired vs current"
    series = set(charts.replicas_frame(small)["series"])
    assert series == {"HPA desired", "HPA current"}
    rule_labels = [
        row["label"] for rows in _datasets(chart).values() for row in rows if "label" in row and "value" in row
    ]
    assert rule_labels == ["maxReplicas 2400"]


def test_interactive_charts_zoom_on_time_and_carry_tooltips(small: Evidence) -> None:
    interactive = charts.incident_timeline(small)
    static = charts.incident_timeline(small, interactive=False)
    assert interactive is not None and static is not None
    spec = interactive.to_dict()
    zooms = {param["name"]: param for param in spec["params"]}  # altair lifts each panel's zoom to the top
    assert set(zooms) == {"zoom_errors", "zoom_latency", "zoom_requests", "zoom_replicas", "zoom_ready"}
    for zoom in zooms.values():
        assert zoom["select"] == {"type": "interval", "encodings": ["x"]} and zoom["bind"] == "scales"
    for panel in spec["vconcat"]:
        line = next(layer for layer in panel["layer"] if layer["mark"]["type"] == "line")
        assert [item["field"] for item in line["encoding"]["tooltip"]] == ["utc", "series", "value"]
    still = static.to_dict()
    assert "params" not in still
    for panel in still["vconcat"]:
        line = next(layer for layer in panel["layer"] if layer["mark"]["type"] == "line")
        assert "tooltip" not in line["encoding"] and "point" not in line["mark"]


def test_quiet_metrics_become_a_note_instead_of_a_flat_panel() -> None:
    evidence = evidence_from_objects(_objects(1), NS, ISVC, window=WEEK, captured_at=CAPTURED)
    flat = {
        "pod_restarts": _metric("pod_restarts", 600, _series({"pod": f"{ISVC}-predictor-00000"}, 10, 600, lambda i: 2)),
        "pod_ready": _metric("pod_ready", 600, _series({}, 10, 600, lambda i: 1)),
    }
    chart = charts.incident_timeline(dataclasses.replace(evidence, metrics=flat))
    assert chart is not None
    spec = chart.to_dict()
    assert [panel["title"]["text"] for panel in spec["vconcat"]] == ["Ready predictor pods"]
    assert spec["title"]["text"] == "In the window: no container restarts."
    axis = spec["vconcat"][0]["layer"][-1]["encoding"]["y"]["axis"]
    assert axis["values"] == [0, 1] and axis["format"] == "d"  # a pod count has no half pods


def test_phase_rows_of_a_pod_still_starting() -> None:
    created = CAPTURED - timedelta(minutes=10)
    milestones = (
        (CREATED, created),
        (SCHEDULED, created + timedelta(seconds=5)),
        (STARTED, created + timedelta(seconds=65)),
    )
    starting = PodPhases(f"{ISVC}-predictor-abc", milestones, False, "", 0, CAPTURED)
    done = PodPhases(
        f"{ISVC}-predictor-def", (*milestones, (READY, created + timedelta(seconds=200))), True, "", 0, CAPTURED
    )
    evidence = evidence_from_objects(_objects(0), NS, ISVC, window=WEEK, captured_at=CAPTURED)
    frame = charts.phases_frame(evidence, [done, starting])
    rows = {(row.pod, row.phase): row.seconds for row in frame.itertuples()}
    assert rows[("abc", "container started → not ready yet")] == 535.0  # 600 s since creation, 65 s before
    assert rows[("def", "container started → Ready")] == 135.0
    assert list(frame.drop_duplicates("pod")["pod"]) == ["abc", "def"]  # slowest (still starting) first


def test_static_svg_is_laid_out_with_a_wide_font(small: Evidence) -> None:
    chart = charts.step_chart(small, "queue_vs_oom", interactive=False)
    assert chart is not None
    svg = charts.to_svg(chart)
    assert svg.lstrip().startswith("<svg") and "KV cache usage per pod" in svg
    assert 'font-family="DejaVu Sans, Verdana, sans-serif"' in svg


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
    chart = charts._panel(charts.Panel(frame, "t", "y"), WINDOW, None, "test")
    datasets = chart.to_dict()["datasets"]  # no MaxRowsError: the limit is still on
    assert [len(rows) for rows in datasets.values()] == [len(limited)]


def test_frame_is_long_format() -> None:
    frame = charts._frame([(WINDOW.start.timestamp(), "a", 1.0), (WINDOW.start.timestamp(), "b", float("nan"))])
    assert list(frame.columns) == charts.COLUMNS
    assert len(frame) == 1 and frame["utc"][0] == "2026-01-15 11:00:00 UTC"
    assert isinstance(frame["time"][0], pd.Timestamp) and frame["time"][0].tzinfo is not None
    assert frame["time"][0].to_pydatetime() == datetime(2026, 1, 15, 11, tzinfo=timezone.utc)


def test_short_pod_names() -> None:
    big = Target("llm", "big")
    assert charts.short_pod("big-predictor-7d9f8-abcde", big) == "7d9f8-abcde"
    assert charts.short_pod("other-pod", big) == "other-pod"
    assert charts.short_pod("big-predictor-", big) == "big-predictor-"
    llmd = Target("llm", "big", LLM_INFERENCE_SERVICE)
    assert charts.short_pod("big-kserve-prefill-7d9f8-abcde", llmd) == "prefill-7d9f8-abcde"
    assert charts.short_pod("big-predictor-7d9f8-abcde", llmd) == "big-predictor-7d9f8-abcde"


# ------------------------------------------------------------------------------------------ in a browser

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking"]


@pytest.mark.timeout(120)
def test_interactive_chart_shows_tooltips_and_zooms_on_time_in_chromium(small: Evidence, tmp_path: Path) -> None:
    """The chart as JupyterLab shows it (Vega in a browser), saved with Vega's JavaScript inlined so the page
    needs no network: hovering a sample shows its tooltip; the mouse wheel narrows the time axis, not y."""
    if not CHROMIUM.exists():
        if os.environ.get("CI") == "true":
            pytest.fail("Chromium is not installed: apt-get install --no-install-recommends chromium")
        pytest.skip("Chromium is not installed")
    from playwright.sync_api import sync_playwright

    chart = charts.stacked(small, ("ready",), None)
    assert chart is not None
    page_file = tmp_path / "chart.html"
    chart.save(str(page_file), inline=True)
    axes = "Array.from(document.querySelectorAll('[aria-roledescription=axis]')).map(e => e.getAttribute('aria-label'))"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 900, "height": 400})
        page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort())
        page.goto(page_file.as_uri())
        plot = page.locator(".vega-embed svg.marks")
        plot.wait_for(timeout=20_000)
        box = plot.bounding_box()
        assert box is not None
        tooltip = ""
        for y in range(int(box["y"]) + 20, int(box["y"] + box["height"]) - 30, 2):  # sweep down to the line
            page.mouse.move(box["x"] + 300, y)
            element = page.locator("#vg-tooltip-element")
            if element.count() and element.is_visible():
                tooltip = element.inner_text()
                break
        before = page.evaluate(axes)
        page.mouse.move(box["x"] + 300, box["y"] + 60)
        page.mouse.wheel(0, -600)
        page.wait_for_timeout(500)
        after = page.evaluate(axes)
        browser.close()
    assert "ready pods" in tooltip and " UTC" in tooltip
    x_before, y_before = before
    x_after, y_after = after
    assert x_before.startswith("X-axis") and "utc scale" in x_before and y_before.startswith("Y-axis")
    assert x_after != x_before and y_after == y_before  # only the time axis zoomed
