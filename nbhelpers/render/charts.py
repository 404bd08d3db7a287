"""Altair charts of the evidence: the incident timeline, per-step panels and cold-start phases per pod.

Each time chart is a column of small panels sharing the analysis window as
their UTC time axis, with the incident interval shaded and bounded by dashed
rules. A panel is built only when its metrics have data.

Readable at a glance and in grey print: series differ by colour (the
Okabe-Ito palette, safe for colour-blind readers) *and* by stroke dash, and
pod names lose the prefix they all share (``<isvc>-predictor-``, or ``<name>-kserve-`` for an LLMInferenceService).

Interactive charts (JupyterLab) carry tooltips and an x-axis zoom
(``selection_interval(bind="scales")``); static ones (the SVG embedded in
report.html) leave both out, since an SVG cannot use them.

Row limit: altair refuses more than 5000 rows per dataset, and that limit
stays on. Panels with many pods keep the pods with the highest peaks
(:data:`MAX_SERIES`) before any row is built, and long windows are binned,
keeping each bin's maximum so short spikes survive (:func:`limit_rows`).

The numbers come from the same helpers as summary.md (report.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

import altair as alt
import pandas as pd

from nbhelpers.evidence.model import Evidence, Target
from nbhelpers.facts.pod_phases import PodPhases
from nbhelpers.facts.traffic import counter_increases, finite, status_rates, sum_by_time, usable
from nbhelpers.sources import kinds, kube
from nbhelpers.sources.base import SeriesData
from nbhelpers.util.times import Window

MAX_ROWS = 4000
MAX_SERIES = 12
MAX_PHASE_PODS = 25
PANEL_WIDTH = 640
PANEL_HEIGHT = 110
Y_AXIS_EXTENT = 44  # every panel's y axis takes this width, so the panels' time axes line up
COLUMNS = ["time", "utc", "series", "value"]
# Okabe-Ito: distinguishable with the common colour-vision deficiencies; dashes tell series apart in grey.
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#999999"]
DASHES = [[1, 0], [6, 3], [2, 2], [8, 3, 2, 3], [12, 4], [1, 3], [4, 2, 1, 2, 1, 2], [10, 2]]
INCIDENT_FILL = "#E69F00"
# Static SVG text is laid out with vl-convert's font metrics and drawn with the reader's fonts: name wide
# fonts, so that a fallback draws narrower than measured (spare room) rather than wider (clipped labels).
STATIC_FONT = "DejaVu Sans, Verdana, sans-serif"
Row = tuple[float, str, float]


# ----------------------------------------------------------------------------------------------- frames


def _frame(rows: Iterable[Row]) -> pd.DataFrame:
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


def short_pod(name: str, target: Target) -> str:
    """A pod name without the prefix every serving pod of the target shares."""
    prefix = target.pod_prefix
    return name[len(prefix) :] if name.startswith(prefix) and len(name) > len(prefix) else name


def _pod_of(item: SeriesData) -> str:
    return item.labels.get("pod") or item.labels.get("exported_pod") or "all"


def _highest(items: Iterable[SeriesData], peak: Callable[[SeriesData], float]) -> list[SeriesData]:
    """The :data:`MAX_SERIES` series with the highest ``peak``, chosen before any row is built."""
    return sorted(items, key=lambda item: -peak(item))[:MAX_SERIES]


def _max_value(item: SeriesData) -> float:
    return max((v for _, v in finite(item.samples)), default=-math.inf)


def _by_pod(evidence: Evidence, items: Iterable[SeriesData], scale: float = 1.0) -> list[Row]:
    return [
        (t, short_pod(_pod_of(item), evidence.target), v * scale)
        for item in _highest(items, _max_value)
        for t, v in finite(item.samples)
    ]


def _named_sums(evidence: Evidence, names: Iterable[tuple[str, str]]) -> list[Row]:
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
    return _frame(_named_sums(evidence, (("vllm_waiting", "waiting"), ("vllm_running", "running"))))


def ready_frame(evidence: Evidence) -> pd.DataFrame:
    return _frame(_named_sums(evidence, (("pod_ready", "ready pods"),)))


def replicas_frame(evidence: Evidence) -> pd.DataFrame:
    return _frame(
        _named_sums(
            evidence,
            (
                ("hpa_desired_replicas", "HPA desired"),
                ("hpa_current_replicas", "HPA current"),
                ("deployment_available_replicas", "available"),
            ),
        )
    )


def restarts_frame(evidence: Evidence) -> pd.DataFrame:
    """Restarts since the window opened, per pod (counter increases, so resets and new pods count right)."""
    data = usable(evidence, "pod_restarts")
    if data is None:
        return _frame([])
    rises_by_series = [(item, dict(counter_increases(item.samples))) for item in data.series]
    restarted = [(item, rises) for item, rises in rises_by_series if rises]
    if not restarted:
        return _frame([])
    chosen = sorted(restarted, key=lambda pair: -sum(pair[1].values()))[:MAX_SERIES]
    cumulative: dict[tuple[str, float], float] = {}
    for item, rises in chosen:
        pod = short_pod(item.labels.get("pod", "?"), evidence.target)
        running = 0.0
        for t, _ in finite(item.samples):
            running += rises.get(t, 0.0)
            cumulative[(pod, t)] = cumulative.get((pod, t), 0.0) + running
    return _frame((t, pod, value) for (pod, t), value in sorted(cumulative.items()))


def latency_frame(evidence: Evidence) -> pd.DataFrame:
    return _frame(
        _named_sums(
            evidence,
            (("vllm_e2e_p99", "end-to-end p99"), ("vllm_e2e_p95", "end-to-end p95"), ("vllm_ttft_p95", "TTFT p95")),
        )
    )


def kv_cache_frame(evidence: Evidence) -> pd.DataFrame:
    data = usable(evidence, "vllm_kv_cache_usage")
    return _frame(_by_pod(evidence, data.series, scale=100.0) if data else [])


def gpu_memory_frame(evidence: Evidence) -> pd.DataFrame:
    data = usable(evidence, "gpu_fb_used_mib")
    return _frame(_by_pod(evidence, data.series) if data else [])


def gpu_card_mib(evidence: Evidence) -> float | None:
    """The largest used + free framebuffer seen at one moment: the card's size as DCGM reports it."""
    used, free = usable(evidence, "gpu_fb_used_mib"), usable(evidence, "gpu_fb_free_mib")
    if used is None or free is None:
        return None
    free_at = {(_pod_of(item), t): v for item in free.series for t, v in finite(item.samples)}
    totals = [
        v + free_at[(_pod_of(item), t)]
        for item in used.series
        for t, v in finite(item.samples)
        if (_pod_of(item), t) in free_at
    ]
    return max(totals) if totals else None


def hpa_max_replicas(evidence: Evidence) -> int | None:
    """maxReplicas of the HPAs the replica queries select (named ``<isvc>-predictor*``)."""
    prefix = f"{evidence.target.isvc}-predictor"
    values = [
        int(kube.spec(hpa).get("maxReplicas") or 0)
        for hpa in evidence.of(kinds.HPA)
        if kube.name(hpa).startswith(prefix) and kube.namespace(hpa) == evidence.target.namespace
    ]
    return max(values) if values and max(values) > 0 else None


# ----------------------------------------------------------------------------------------------- panels


@dataclass(frozen=True)
class Panel:
    """What one time panel shows: its data, titles, and the y range that keeps it honest."""

    frame: pd.DataFrame
    title: str
    y_title: str
    y_domain: tuple[float, float] | None = None  # fixed range (percentages)
    y_floor: float = 0.0  # the axis reaches at least this high (a flat 0 still shows the scale up to 1)
    rules: tuple[tuple[float, str], ...] = ()  # horizontal reference lines (value, label)
    quiet: str = ""  # said under the chart when the metric was read but shows nothing (no 5xx, no restart)
    counts: bool = False  # whole numbers (pods, replicas, restarts): no fractional ticks
    per_pod: bool = False  # series are pods: coloured in name order, so a pod keeps its colour across panels


def _time_axis(window: Window, show_title: bool) -> alt.X:
    return alt.X(
        "time:T",
        title="time (UTC)" if show_title else None,
        scale=alt.Scale(type="utc", domain=[window.start.isoformat(), window.end.isoformat()]),
        axis=alt.Axis(format="%H:%M", labelFlush=True),
    )


def _y_scale(panel: Panel, data: pd.DataFrame) -> alt.Scale:
    if panel.y_domain is not None:
        return alt.Scale(domain=list(panel.y_domain))
    highest = max([float(data["value"].max()), panel.y_floor, *(value for value, _ in panel.rules)])
    return alt.Scale(domain=[0, highest], nice=True, zero=True)


def _y_axis(panel: Panel, data: pd.DataFrame) -> alt.Axis:
    """Four ticks or so; whole-number ticks only for counts (a pod count has no 0.5)."""
    if not panel.counts:
        return alt.Axis(tickCount=4, minExtent=Y_AXIS_EXTENT)
    top = max(1, math.ceil(max(float(data["value"].max()), panel.y_floor, *(value for value, _ in panel.rules))))
    step = max(1, math.ceil(top / 4))
    return alt.Axis(values=list(range(0, top + step, step)), format="d", minExtent=Y_AXIS_EXTENT)


def _incident_layers(incident: Window) -> list[alt.Chart]:
    """The incident shaded, with dashed bounds and a label so it reads in grey print too."""
    bounds = pd.DataFrame({"start": [incident.start], "end": [incident.end], "label": ["incident"]})
    edges = pd.DataFrame({"time": [incident.start, incident.end]})
    x = alt.X("start:T", scale=alt.Scale(type="utc"))
    return [
        alt.Chart(bounds).mark_rect(color=INCIDENT_FILL, opacity=0.16).encode(x=x, x2="end:T"),
        alt.Chart(edges).mark_rule(color="#7a4a00", strokeDash=[4, 3], strokeWidth=1).encode(x="time:T"),
        alt.Chart(bounds)
        .mark_text(align="left", baseline="top", dx=3, dy=2, fontSize=10, color="#7a4a00")
        .encode(x="start:T", y=alt.value(0), text="label:N"),
    ]


def _rule_layers(panel: Panel, y: object) -> list[alt.Chart]:
    """Dotted horizontal reference lines with their labels at the right end (maxReplicas, the card size);
    ``y`` is the panel's own y encoding, so the layers share one axis."""
    if not panel.rules:
        return []
    rules = pd.DataFrame({"value": [value for value, _ in panel.rules], "label": [label for _, label in panel.rules]})
    return [
        alt.Chart(rules).mark_rule(color="#444444", strokeDash=[2, 2]).encode(y=y),
        alt.Chart(rules)
        .mark_text(align="right", baseline="bottom", dy=-2, fontSize=10, color="#444444")
        .encode(x=alt.value(PANEL_WIDTH), y=y, text="label:N"),
    ]


def _panel(
    panel: Panel,
    window: Window,
    incident: Window | None,
    key: str,
    interactive: bool = True,
    last: bool = True,
) -> alt.LayerChart:
    """One line panel over the window: colour and dash per series, the incident shaded; when interactive,
    a zoom on the time axis and a tooltip on every sample."""
    data = limit_rows(panel.frame)
    order = sorted(set(data["series"])) if panel.per_pod else list(dict.fromkeys(data["series"]))
    legend = alt.Legend(
        orient="right", title=None, labelLimit=320, symbolType="stroke", symbolStrokeWidth=2.5, symbolOpacity=1
    )
    encoding: dict[str, object] = {
        "x": _time_axis(window, last),
        "y": alt.Y("value:Q", title=panel.y_title, scale=_y_scale(panel, data), axis=_y_axis(panel, data)),
        "color": alt.Color("series:N", sort=order, scale=alt.Scale(domain=order, range=PALETTE), legend=legend),
        "strokeDash": alt.StrokeDash(
            "series:N", sort=order, scale=alt.Scale(domain=order, range=DASHES), legend=legend
        ),
    }
    if interactive:
        encoding["tooltip"] = [
            alt.Tooltip("utc:N", title="time"),
            alt.Tooltip("series:N"),
            alt.Tooltip("value:Q", format=",.3~f"),
        ]
    # Interactive: a point at every sample, nearly transparent, gives the tooltip a target (a line path
    # alone would show one sample for the whole line).
    hover = alt.OverlayMarkDef(size=40, opacity=0.01) if interactive else alt.Undefined
    lines = alt.Chart(data).mark_line(interpolate="step-after", strokeWidth=1.8, point=hover).encode(**encoding)
    if interactive:
        lines = lines.add_params(alt.selection_interval(bind="scales", encodings=["x"], name=f"zoom_{key}"))
    layers: list[alt.Chart] = _incident_layers(incident) if incident is not None else []
    layers.append(lines)
    layers += _rule_layers(panel, encoding["y"])
    return alt.LayerChart(
        layer=layers,
        title=alt.TitleParams(panel.title, anchor="start", fontSize=12),
        width=PANEL_WIDTH,
        height=PANEL_HEIGHT,
    )


PanelData = Callable[[Evidence], Panel | None]


def _errors(evidence: Evidence) -> Panel | None:
    rates = status_rates(evidence)
    if rates is None:
        return None
    frame, title = errors_frame(evidence)
    return Panel(frame, title, "responses/s", y_floor=1.0, quiet=f"no 5xx responses at {rates.where}")


def _requests(evidence: Evidence) -> Panel:
    return Panel(requests_frame(evidence), "vLLM requests waiting and running (all pods)", "requests", y_floor=1.0)


def _ready(evidence: Evidence) -> Panel:
    return Panel(ready_frame(evidence), f"Ready {evidence.target.pods_noun}", "pods", y_floor=1.0, counts=True)


def _restarts(evidence: Evidence) -> Panel:
    title = f"Container restarts since the window opened, per pod ({evidence.target.pod_prefix}…)"
    quiet = "no container restarts" if usable(evidence, "pod_restarts") else ""
    return Panel(restarts_frame(evidence), title, "restarts", y_floor=1.0, quiet=quiet, counts=True, per_pod=True)


def _replicas(evidence: Evidence) -> Panel | None:
    """HPA desired vs current (and available replicas); without HPA series it would repeat the ready pods."""
    frame = replicas_frame(evidence)
    if not frame["series"].str.startswith("HPA").any():
        return None
    maximum = hpa_max_replicas(evidence)
    rules = ((float(maximum), f"maxReplicas {maximum}"),) if maximum is not None else ()
    return Panel(frame, "Replicas: HPA desired vs current", "replicas", y_floor=1.0, rules=rules, counts=True)


def _latency(evidence: Evidence) -> Panel:
    return Panel(latency_frame(evidence), "vLLM latency", "seconds")


def _kv_cache(evidence: Evidence) -> Panel:
    title = f"KV cache usage per pod ({evidence.target.pod_prefix}…)"
    return Panel(kv_cache_frame(evidence), title, "% used", y_domain=(0.0, 100.0), per_pod=True)


def _gpu_memory(evidence: Evidence) -> Panel:
    card = gpu_card_mib(evidence)
    rules = ((card, f"card {card:,.0f} MiB"),) if card is not None else ()
    title = f"GPU memory used per pod, DCGM ({evidence.target.pod_prefix}…)"
    return Panel(gpu_memory_frame(evidence), title, "MiB", rules=rules, per_pod=True)


PANELS: dict[str, PanelData] = {
    "errors": _errors,
    "latency": _latency,
    "requests": _requests,
    "replicas": _replicas,
    "ready": _ready,
    "restarts": _restarts,
    "kv_cache": _kv_cache,
    "gpu_memory": _gpu_memory,
}

TIMELINE_PANELS = ("errors", "latency", "requests", "replicas", "ready", "restarts")

# Panels shown under each step: the metrics that confirm or rule out what the step looks for.
STEP_PANELS: dict[str, tuple[str, ...]] = {
    "endpoints": ("errors", "ready"),
    "probes": ("ready", "restarts"),
    "ports": (),
    "resources": ("restarts", "gpu_memory"),
    "cold_start": ("ready", "replicas"),
    "metric_pipeline": ("replicas",),
    "scale_target": ("replicas", "requests"),
    "queue_vs_oom": ("requests", "kv_cache", "gpu_memory"),
    "timeouts": ("latency", "errors"),
}

# Each panel keeps its own scales and its own zoom (one zoom shared across the column makes altair 6
# emit the parameter once per panel, which Vega rejects as a duplicate signal).
_RESOLVE = alt.Resolve(
    scale=alt.ScaleResolveMap(color="independent", strokeDash="independent", x="independent", y="independent")
)


@dataclass(frozen=True)
class TimePanels:
    charts: list[alt.LayerChart]
    quiet: list[str]  # metrics that were read and show nothing in the window


def _time_panels(
    evidence: Evidence, panel_names: Iterable[str], incident: Window | None, interactive: bool
) -> TimePanels:
    read = [(key, panel) for key in panel_names if (panel := PANELS[key](evidence)) is not None]
    built = [(key, panel) for key, panel in read if not panel.frame.empty]
    quiet = [panel.quiet for _, panel in read if panel.frame.empty and panel.quiet]
    charts = [
        _panel(panel, evidence.window, incident, key, interactive, last=index == len(built) - 1)
        for index, (key, panel) in enumerate(built)
    ]
    return TimePanels(charts, quiet)


def _column(panels: Sequence[alt.LayerChart], quiet: Sequence[str] = ()) -> alt.VConcatChart | None:
    """The charts one above the other; ``quiet`` becomes a closing line ("In the window: no 5xx ...")."""
    if not panels:
        return None
    column = alt.VConcatChart(vconcat=list(panels), resolve=_RESOLVE, spacing=14)
    if quiet:
        note = "In the window: " + "; ".join(quiet) + "."
        column = column.properties(
            title=alt.TitleParams(
                note, orient="bottom", anchor="start", fontSize=11, fontWeight="normal", color="#333333"
            )
        )
    return column


def stacked(
    evidence: Evidence, panel_names: Iterable[str], incident: Window | None, interactive: bool = True
) -> alt.VConcatChart | None:
    """The named panels that have data, one above the other; ``None`` when none has data."""
    panels = _time_panels(evidence, panel_names, incident, interactive)
    return _column(panels.charts, panels.quiet)


def incident_timeline(
    evidence: Evidence, incident: Window | None = None, interactive: bool = True
) -> alt.VConcatChart | None:
    """5xx by code, latency, waiting requests, replicas, ready pods and restarts over the window."""
    return stacked(evidence, TIMELINE_PANELS, incident, interactive)


def kv_cache_chart(
    evidence: Evidence, incident: Window | None = None, interactive: bool = True
) -> alt.VConcatChart | None:
    return stacked(evidence, ("kv_cache",), incident, interactive)


def gpu_memory_chart(
    evidence: Evidence, incident: Window | None = None, interactive: bool = True
) -> alt.VConcatChart | None:
    return stacked(evidence, ("gpu_memory",), incident, interactive)


def hpa_chart(evidence: Evidence, incident: Window | None = None, interactive: bool = True) -> alt.VConcatChart | None:
    """HPA desired vs current replicas (and available), with maxReplicas as a reference line."""
    return stacked(evidence, ("replicas",), incident, interactive)


# ------------------------------------------------------------------------------------- cold-start phases


def _cold_starts(evidence: Evidence) -> list[PodPhases]:
    from nbhelpers.facts.cold_starts import cold_starts

    return list(cold_starts(evidence).pods)


def _phase_rows(pod: PodPhases) -> list[tuple[str, float]]:
    """(phase, seconds) in order; a pod still starting ends with the time since its last milestone."""
    rows = list(pod.phases())
    if pod.starting_for is not None and pod.milestones:
        last_name, last_at = pod.milestones[-1]
        rows.append((f"{last_name} → not ready yet", max(0.0, (pod.observed_at - last_at).total_seconds())))
    return rows


def phases_frame(evidence: Evidence, pods: Sequence[PodPhases] | None = None) -> pd.DataFrame:
    """One row per (pod, phase): the :data:`MAX_PHASE_PODS` slowest cold starts, slowest first."""
    measured = [pod for pod in (pods if pods is not None else _cold_starts(evidence)) if _phase_rows(pod)]
    slowest = sorted(measured, key=lambda pod: -(pod.total or pod.starting_for or 0.0))[:MAX_PHASE_PODS]
    records = []
    for rank, pod in enumerate(slowest):
        start = 0.0
        for order, (phase, seconds) in enumerate(_phase_rows(pod)):
            label = short_pod(pod.pod, evidence.target)
            records.append((label, rank, phase, order, start, start + seconds, round(seconds, 1)))
            start += seconds
    return pd.DataFrame(records, columns=["pod", "rank", "phase", "order", "start", "end", "seconds"])


def cold_start_chart(
    evidence: Evidence, interactive: bool = True, pods: Sequence[PodPhases] | None = None
) -> alt.LayerChart | None:
    """Cold-start phases per pod as horizontal stacked bars (created → scheduled → image pulled → … → Ready), each pod's
    latest start: its creation, or its serving container's restart (:mod:`nbhelpers.facts.pod_phases`)."""
    everyone = pods if pods is not None else _cold_starts(evidence)
    frame = phases_frame(evidence, everyone)
    if frame.empty:
        return None
    shown = frame["pod"].nunique()
    measured = sum(1 for pod in everyone if _phase_rows(pod))
    title = "Cold start per pod, by phase (seconds from its latest start)"
    subtitle = f"{evidence.target.pod_prefix}… pods" + (
        f"; the {shown} slowest of {measured}" if measured > shown else ""
    )
    phases = list(dict.fromkeys(frame.sort_values("order")["phase"]))
    encoding: dict[str, object] = {
        "y": alt.Y(
            "pod:N", title=None, sort=alt.EncodingSortField("rank", order="ascending"), axis=alt.Axis(labelLimit=320)
        ),
        "x": alt.X("start:Q", title="seconds since the start (the pod's creation, or its container's restart)"),
        "x2": "end:Q",
        "color": alt.Color(
            "phase:N",
            sort=phases,
            scale=alt.Scale(domain=phases, range=PALETTE),
            legend=alt.Legend(orient="bottom", title=None, columns=2, labelLimit=320),
        ),
    }
    if interactive:
        encoding["tooltip"] = ["pod:N", "phase:N", alt.Tooltip("seconds:Q", title="seconds")]
    bars = alt.Chart(frame).mark_bar(stroke="#ffffff", strokeWidth=1, height={"band": 0.75}).encode(**encoding)
    labels = (
        alt.Chart(frame)
        .transform_filter(alt.datum.seconds >= 20)
        .mark_text(color="#ffffff", fontSize=9, align="center", baseline="middle")
        .encode(
            y=alt.Y("pod:N", sort=alt.EncodingSortField("rank", order="ascending")),
            x=alt.X("mid:Q"),
            text=alt.Text("seconds:Q", format=",.0f"),
        )
        .transform_calculate(mid="(datum.start + datum.end) / 2")
    )
    return alt.LayerChart(
        layer=[bars, labels],
        title=alt.TitleParams(title, subtitle=subtitle, anchor="start", fontSize=12),
        width=PANEL_WIDTH,
        height=alt.Step(18),
    )


def step_chart(
    evidence: Evidence,
    step_id: str,
    incident: Window | None = None,
    interactive: bool = True,
    skip: Iterable[str] = (),
) -> alt.VConcatChart | None:
    """The time panels that confirm or rule out what ``step_id`` looks for; ``skip`` names panels the
    reader has already seen (the incident timeline's, under a step that found nothing)."""
    skipped = set(skip)
    names = [name for name in STEP_PANELS.get(step_id, ()) if name not in skipped]
    panels = _time_panels(evidence, names, incident, interactive)
    return _column(panels.charts, panels.quiet)


# Charts beside a step's time panels, drawn apart: their axes are not time.
STEP_EXTRAS: dict[str, Callable[[Evidence, bool], alt.LayerChart | None]] = {
    "cold_start": lambda evidence, interactive: cold_start_chart(evidence, interactive),
}


def step_charts(
    evidence: Evidence,
    step_id: str,
    incident: Window | None = None,
    interactive: bool = True,
    skip: Iterable[str] = (),
) -> list[alt.TopLevelMixin]:
    """Everything drawn under a step: its time panels (:func:`step_chart`), then its other charts."""
    drawn: list[alt.TopLevelMixin] = []
    column = step_chart(evidence, step_id, incident, interactive, skip)
    if column is not None:
        drawn.append(column)
    extra = STEP_EXTRAS.get(step_id)
    chart = extra(evidence, interactive) if extra is not None else None
    if chart is not None:
        drawn.append(chart)
    return drawn


def to_svg(chart: alt.TopLevelMixin) -> str:
    """Render offline with vl-convert (no browser, no network)."""
    import vl_convert

    vl_version = "_".join(alt.SCHEMA_VERSION.split(".")[:2])
    svg: str = vl_convert.vegalite_to_svg(chart.to_dict(), vl_version=vl_version, config={"font": STATIC_FONT})
    return svg
