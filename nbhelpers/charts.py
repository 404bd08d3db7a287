"""Altair charts of the evidence's metrics, with the incident window shaded.

Each chart is a column of small panels sharing a UTC time axis. A panel is
built only when its metrics have data, and every panel's data is aggregated
to stay under altair's 5000-row limit (the limit stays on): long windows are
binned, keeping each bin's maximum so short spikes survive, and panels with
many pods keep the pods with the highest peaks.

The numbers come from the same helpers as summary.md (report.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from datetime import datetime, timezone

import altair as alt
import pandas as pd

from nbhelpers.evidence import Evidence
from nbhelpers.report import counter_increases, finite, status_rates, sum_by_time, usable
from nbhelpers.sources.base import SeriesData
from nbhelpers.timeutil import Window

MAX_ROWS = 4000
MAX_SERIES = 12
PANEL_WIDTH = 640
PANEL_HEIGHT = 130
COLUMNS = ["time", "utc", "series", "value"]


def _frame(rows: Iterable[tuple[float, str, float]]) -> pd.DataFrame:
    """Long format: one row per (time, series) sample; ``utc`` is the tooltip text."""
    records = [
        (datetime.fromtimestamp(t, tz=timezone.utc), series, value) for t, series, value in rows if math.isfinite(value)
    ]
    frame = pd.DataFrame(records, columns=["time", "series", "value"])
    frame["utc"] = frame["time"].dt.strftime("%Y-%m-%d %H:%M:%S UTC") if len(frame) else []
    return frame[COLUMNS]


def limit_rows(frame: pd.DataFrame, max_rows: int = MAX_ROWS, max_series: int = MAX_SERIES) -> pd.DataFrame:
    """Keep the ``max_series`` series with the highest peaks, then bin time so the frame fits ``max_rows``."""
    if frame.empty:
        return frame
    peaks = frame.groupby("series")["value"].max().sort_values(ascending=False)
    if len(peaks) > max_series:
        keep: pd.Series[bool] = frame["series"].isin(list(peaks.index[:max_series]))
        frame = pd.DataFrame(frame.loc[keep])
    if len(frame) <= max_rows:
        return frame.reset_index(drop=True)
    per_series = max(1, max_rows // frame["series"].nunique())
    span = (frame["time"].max() - frame["time"].min()).total_seconds()
    # floor() to a bin grid can add one bin at each end: leave room for both.
    bin_seconds = max(1, math.ceil(span / max(1, per_series - 2)))
    binned = frame.assign(time=frame["time"].dt.floor(f"{bin_seconds}s"))
    binned = binned.groupby(["series", "time"])["value"].max().reset_index()
    binned["utc"] = binned["time"].dt.strftime("%Y-%m-%d %H:%M:%S UTC")
    return binned[COLUMNS].reset_index(drop=True)


def _by_pod(items: Iterable[SeriesData], scale: float = 1.0, suffix: str = "") -> list[tuple[float, str, float]]:
    return [
        (t, (item.labels.get("pod") or item.labels.get("exported_pod") or "all") + suffix, v * scale)
        for item in items
        for t, v in finite(item.samples)
    ]


def _named_sums(evidence: Evidence, names: Iterable[tuple[str, str]]) -> list[tuple[float, str, float]]:
    rows = []
    for query_id, name in names:
        data = usable(evidence, query_id)
        if data is not None:
            rows += [(t, name, v) for t, v in sum_by_time(data.series)]
    return rows


def errors_frame(evidence: Evidence) -> tuple[pd.DataFrame, str]:
    rates = status_rates(evidence)
    if rates is None:
        return _frame([]), ""
    rows = [(t, code, v) for code, samples in rates.by_code.items() if code.startswith("5") for t, v in samples]
    return _frame(rows), f"5xx responses/s at {rates.where}, by code"


def requests_frame(evidence: Evidence) -> pd.DataFrame:
    return _frame(_named_sums(evidence, (("vllm_running", "running"), ("vllm_waiting", "waiting"))))


def ready_frame(evidence: Evidence) -> pd.DataFrame:
    return _frame(_named_sums(evidence, (("pod_ready", "ready pods"),)))


def replicas_frame(evidence: Evidence) -> pd.DataFrame:
    return _frame(
        _named_sums(
            evidence,
            (
                ("hpa_current_replicas", "HPA current"),
                ("hpa_desired_replicas", "HPA desired"),
                ("deployment_available_replicas", "available"),
            ),
        )
    )


def restarts_frame(evidence: Evidence) -> pd.DataFrame:
    """Restarts since the window opened, per pod (counter increases, so resets and new pods count right)."""
    data = usable(evidence, "pod_restarts")
    if data is None:
        return _frame([])
    cumulative: dict[tuple[str, float], float] = {}
    for item in data.series:
        pod = item.labels.get("pod", "?")
        rises = dict(counter_increases(item.samples))
        running = 0.0
        for t, _ in finite(item.samples):
            running += rises.get(t, 0.0)
            cumulative[(pod, t)] = cumulative.get((pod, t), 0.0) + running
    return _frame((t, pod, value) for (pod, t), value in sorted(cumulative.items()))


def latency_frame(evidence: Evidence) -> pd.DataFrame:
    return _frame(
        _named_sums(
            evidence,
            (("vllm_e2e_p95", "end-to-end p95"), ("vllm_e2e_p99", "end-to-end p99"), ("vllm_ttft_p95", "TTFT p95")),
        )
    )


def kv_cache_frame(evidence: Evidence) -> pd.DataFrame:
    data = usable(evidence, "vllm_kv_cache_usage")
    return _frame(_by_pod(data.series, scale=100.0) if data else [])


def gpu_memory_frame(evidence: Evidence) -> pd.DataFrame:
    rows = []
    for query_id, suffix in (("gpu_fb_used_mib", " used"), ("gpu_fb_free_mib", " free")):
        data = usable(evidence, query_id)
        if data is not None:
            rows += _by_pod(data.series, suffix=suffix)
    return _frame(rows)


def _panel(frame: pd.DataFrame, title: str, y_title: str, incident: Window | None, key: str) -> alt.LayerChart:
    """One line panel: tooltips, zoom and pan on x (a parameter named after the panel), the incident shaded."""
    data = limit_rows(frame)
    zoom = alt.selection_interval(bind="scales", encodings=["x"], name=f"zoom_{key}")
    x = alt.X("time:T", title="time (UTC)", scale=alt.Scale(type="utc"), axis=alt.Axis(format="%H:%M"))
    lines = (
        alt.Chart(data)
        .mark_line(point=alt.OverlayMarkDef(size=12), interpolate="step-after")
        .encode(
            x=x,
            y=alt.Y("value:Q", title=y_title),
            color=alt.Color("series:N", title=None, legend=alt.Legend(orient="right", labelLimit=260)),
            tooltip=[
                alt.Tooltip("utc:N", title="time"),
                alt.Tooltip("series:N"),
                alt.Tooltip("value:Q", format=",.3~f"),
            ],
        )
        .add_params(zoom)
    )
    layers: list[alt.Chart] = []
    if incident is not None:
        shade = pd.DataFrame({"start": [incident.start], "end": [incident.end], "label": ["incident"]})
        layers.append(
            alt.Chart(shade)
            .mark_rect(color="#f59e0b", opacity=0.18)
            .encode(x=alt.X("start:T", scale=alt.Scale(type="utc")), x2="end:T", tooltip=["label:N"])
        )
    layers.append(lines)
    return alt.LayerChart(layer=layers, title=title, width=PANEL_WIDTH, height=PANEL_HEIGHT)


PanelData = Callable[[Evidence], tuple[pd.DataFrame, str, str]]  # (frame, title, y axis title)


def _titled(build: Callable[[Evidence], pd.DataFrame], title: str, y_title: str) -> PanelData:
    return lambda evidence: (build(evidence), title, y_title)


def _errors(evidence: Evidence) -> tuple[pd.DataFrame, str, str]:
    frame, title = errors_frame(evidence)
    return frame, title, "responses/s"


PANELS: dict[str, PanelData] = {
    "errors": _errors,
    "requests": _titled(requests_frame, "vLLM requests running and waiting", "requests"),
    "ready": _titled(ready_frame, "Ready predictor pods", "pods"),
    "restarts": _titled(restarts_frame, "Container restarts since the window opened", "restarts"),
    "replicas": _titled(replicas_frame, "Replicas", "replicas"),
    "latency": _titled(latency_frame, "vLLM latency", "seconds"),
    "kv_cache": _titled(kv_cache_frame, "KV cache usage", "% used"),
    "gpu_memory": _titled(gpu_memory_frame, "GPU memory (DCGM)", "MiB"),
}

TIMELINE_PANELS = ("errors", "requests", "ready", "restarts")

# Panels shown under each step: the metrics that confirm or rule out what the step looks for.
STEP_PANELS: dict[str, tuple[str, ...]] = {
    "endpoints": ("errors", "ready"),
    "probes": ("ready", "restarts"),
    "ports": (),
    "resources": ("restarts", "gpu_memory"),
    "cold_start": ("ready", "errors"),
    "metric_pipeline": ("replicas",),
    "scale_target": ("replicas", "requests"),
    "queue_vs_oom": ("requests", "kv_cache", "gpu_memory"),
    "timeouts": ("latency", "errors"),
}


def stacked(evidence: Evidence, panel_names: Iterable[str], incident: Window | None) -> alt.VConcatChart | None:
    """The named panels that have data, one above the other; ``None`` when none has data."""
    panels = []
    for key in panel_names:
        frame, title, y_title = PANELS[key](evidence)
        if not frame.empty:
            panels.append(_panel(frame, title, y_title, incident, key))
    if not panels:
        return None
    return alt.VConcatChart(vconcat=panels, resolve=alt.Resolve(scale=alt.ScaleResolveMap(color="independent")))


def incident_timeline(evidence: Evidence, incident: Window | None = None) -> alt.VConcatChart | None:
    """5xx by code, running/waiting requests, ready pods and restarts."""
    return stacked(evidence, TIMELINE_PANELS, incident)


def kv_cache_chart(evidence: Evidence, incident: Window | None = None) -> alt.VConcatChart | None:
    return stacked(evidence, ("kv_cache",), incident)


def gpu_memory_chart(evidence: Evidence, incident: Window | None = None) -> alt.VConcatChart | None:
    return stacked(evidence, ("gpu_memory",), incident)


def step_chart(evidence: Evidence, step_id: str, incident: Window | None = None) -> alt.VConcatChart | None:
    return stacked(evidence, STEP_PANELS.get(step_id, ()), incident)


def to_svg(chart: alt.TopLevelMixin) -> str:
    """Render offline with vl-convert (no browser, no network)."""
    import vl_convert

    vl_version = "_".join(alt.SCHEMA_VERSION.split(".")[:2])
    svg: str = vl_convert.vegalite_to_svg(chart.to_dict(), vl_version=vl_version)
    return svg
