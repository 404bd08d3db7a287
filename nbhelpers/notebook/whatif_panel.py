"""Showing a what-if: the current-vs-proposed chart, the totals table, the patches, and the sliders.

Display only: every number comes from :class:`nbhelpers.whatif.WhatIfResult`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import yaml

from nbhelpers.errors import RunbookError
from nbhelpers.findings import patches
from nbhelpers.sources import kube
from nbhelpers.whatif import CURRENT, PROPOSED, Overrides, WhatIfResult, patch_yaml, project

COLOURS = {CURRENT: "#b91c1c", PROPOSED: "#1d4ed8", "demand": "#4b5563"}
DASHES = {CURRENT: [6, 3], PROPOSED: [1, 0], "demand": [2, 2]}
PANELS = (
    ("demand", "Demand (arrivals per second)", "requests/s"),
    ("ready", "Ready pods", "pods"),
    ("queue", "Waiting requests", "requests"),
    ("timed_out_total", "Predicted timeouts (cumulative)", "requests"),
)


def chart_frame(result: WhatIfResult) -> Any:
    """Long format for the chart: time, utc, series (current / proposed / demand), value, panel."""
    import pandas as pd

    from nbhelpers.render.charts import limit_rows

    wide = result.frame()
    parts = []
    for key, _, _ in PANELS:
        names = ["demand"] if key == "demand" else [CURRENT, PROPOSED]
        for name in names:
            column = "demand_rps" if key == "demand" else f"{key}_{name}"
            part = pd.DataFrame({"time": wide["time"], "series": name, "value": wide[column].astype(float)})
            part["utc"] = part["time"].dt.strftime("%Y-%m-%d %H:%M:%S UTC")
            part = part[part["value"].map(math.isfinite)]
            limited = limit_rows(part[["time", "utc", "series", "value"]], max_rows=1400)
            limited["panel"] = key
            parts.append(limited)
    return pd.concat(parts, ignore_index=True)


def whatif_chart(result: WhatIfResult) -> Any:
    """Demand, ready pods, waiting requests and cumulative predicted timeouts, current (red, dashed) against
    proposed (blue, solid), the incident shaded; every panel kept under altair's row limit."""
    import altair as alt
    import pandas as pd

    data = chart_frame(result)
    incident = result.inputs.incident
    x = alt.X("time:T", title="time (UTC)", scale=alt.Scale(type="utc"), axis=alt.Axis(format="%H:%M"))
    names = list(COLOURS)
    colour = alt.Color(
        "series:N",
        title=None,
        scale=alt.Scale(domain=names, range=[COLOURS[n] for n in names]),
        legend=alt.Legend(orient="right"),
    )
    dash = alt.StrokeDash("series:N", scale=alt.Scale(domain=names, range=[DASHES[n] for n in names]), legend=None)
    panels = []
    for key, title, y_title in PANELS:
        lines = (
            alt.Chart(data[data["panel"] == key])
            .mark_line(interpolate="step-after", strokeWidth=2)
            .encode(
                x=x,
                y=alt.Y("value:Q", title=y_title),
                color=colour,
                strokeDash=dash,
                tooltip=[alt.Tooltip("utc:N", title="time"), "series:N", alt.Tooltip("value:Q", format=",.2f")],
            )
        )
        layers: list[Any] = []
        if incident is not None:
            shade = pd.DataFrame({"start": [incident.start], "end": [incident.end], "label": ["incident"]})
            layers.append(
                alt.Chart(shade)
                .mark_rect(color="#f59e0b", opacity=0.18)
                .encode(x=alt.X("start:T", scale=alt.Scale(type="utc")), x2="end:T", tooltip=["label:N"])
            )
        layers.append(lines)
        panels.append(alt.LayerChart(layer=layers, title=title, width=640, height=120))
    return alt.VConcatChart(vconcat=panels)


def _object_for(result: WhatIfResult, ref: str) -> Mapping[str, Any] | None:
    inputs = result.inputs
    if ref == kube.ref(inputs.evidence.isvc):
        return inputs.evidence.isvc
    if ref == inputs.autoscaler.ref:
        return inputs.autoscaler.obj
    return None


def _number_text(value: float) -> str:
    if math.isinf(value):
        return "never served"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}".rstrip("0").rstrip(".")


def totals_html(result: WhatIfResult) -> str:
    from html import escape

    from nbhelpers.notebook.display import CELL_STYLE

    totals = result.totals()
    labels = (
        ("arrivals", "requests that arrived"),
        ("timed_out", "predicted timeouts"),
        ("timed_out_share", "share timed out"),
        ("peak_queue", "most requests waiting"),
        ("peak_delay_s", "longest queueing delay (s)"),
        ("max_replicas", "most replicas"),
        ("pod_hours", "pod-hours (GPU cost)"),
    )
    head = "".join(
        f'<th style="{CELL_STYLE}background:#f9fafb;">{escape(text)}</th>'
        for text in (
            "",
            f"current ({result.current.settings.describe()})",
            f"proposed ({result.proposed.settings.describe()})",
        )
    )
    rows = []
    for key, label in labels:
        cells = []
        for name in (CURRENT, PROPOSED):
            value = totals[name][key]
            text = f"{value:.1%}" if key == "timed_out_share" else _number_text(value)
            cells.append(f'<td style="{CELL_STYLE}text-align:right;">{escape(text)}</td>')
        rows.append(f'<tr><th style="{CELL_STYLE}background:#f9fafb;">{escape(label)}</th>{"".join(cells)}</tr>')
    inputs = result.inputs
    if inputs.observed_5xx is not None:
        text = (
            f"{_number_text(inputs.observed_5xx)} 5xx counted at {inputs.observed_where} (observed; a client's or a "
            "cloud load balancer's own timeouts never reach that count)"
        )
        rows.append(
            f'<tr><th style="{CELL_STYLE}background:#f9fafb;">{escape("the incident itself")}</th>'
            f'<td style="{CELL_STYLE}" colspan="2">{escape(text)}</td></tr>'
        )
    return f'<table style="border-collapse:collapse;margin:6px 0;"><tr>{head}</tr>{"".join(rows)}</table>'


def facts_html(result: WhatIfResult) -> str:
    from html import escape

    from nbhelpers.notebook.display import html_list

    inputs = result.inputs
    facts = [
        f"autoscaler replayed: {inputs.autoscaler.ref} ({inputs.kind.upper()})",
        f"capacity: {inputs.capacity.describe()}",
        f"cold start (pod_ready_delay): {inputs.cold_start:.0f} s ({inputs.cold_start_origin})",
        f"timeout: {inputs.timeout:g} s ({inputs.timeout_origin})",
        *result.notes,
    ]
    return f"<div><strong>What the replay rests on</strong></div>{html_list(facts)}" + (
        "" if result.patches else f"<p>{escape('No change to propose: the current settings carry this demand.')}</p>"
    )


def patches_html(result: WhatIfResult) -> str:
    from html import escape

    from nbhelpers.notebook.display import pre_block

    parts = []
    for change in result.patches:
        obj = _object_for(result, change.target)
        command = patches.kubectl_patch(obj, change.patch) if obj is not None else ""
        parts.append(
            f'<div style="margin:8px 0;"><strong>{escape(change.setting)} → {escape(_value_text(change.value))}</strong> '
            f"on <code>{escape(change.target)}</code>: {escape(change.reason)}.{pre_block(patch_yaml(change))}"
            + (pre_block(command) if command else "")
            + "</div>"
        )
    return "".join(parts)


def _value_text(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True).strip() if isinstance(value, Mapping) else str(value)


def show_whatif(result: WhatIfResult, static: bool = True) -> None:
    """Totals, the chart (static SVG, or interactive in a live notebook), and the patches of the proposal as
    YAML with their kubectl commands."""
    from nbhelpers.notebook.display import show_chart, show_html

    show_html(totals_html(result) + facts_html(result))
    show_chart(whatif_chart(result), static)
    if result.patches:
        show_html("<h3 style='margin:6px 0;'>Patches of the proposal</h3>" + patches_html(result))


def whatif_controls(result: WhatIfResult) -> Any:
    """Sliders for the proposed settings that re-run the replay and redraw (interactive sessions only)."""
    import ipywidgets as widgets  # type: ignore[import-untyped]

    inputs = result.inputs
    proposed = result.proposed.settings
    ceiling = max(2, int(inputs.capacity.concurrency * 2))
    top = max(8, 2 * (proposed.max_replicas or inputs.initial_replicas or 1))
    sliders = {
        "min_replicas": widgets.IntSlider(value=proposed.min_replicas, min=0, max=top, description="min replicas"),
        "max_replicas": widgets.IntSlider(
            value=proposed.max_replicas or top, min=1, max=top, description="max replicas"
        ),
        "scale_target": widgets.IntSlider(
            value=int(proposed.target or 0), min=0, max=ceiling, description="target (0: keep)"
        ),
        "stabilization": widgets.IntSlider(
            value=int(proposed.stabilization_seconds or 0), min=0, max=600, step=15, description="stabilization s"
        ),
        "pod_ready_delay": widgets.IntSlider(
            value=int(inputs.cold_start),
            min=0,
            max=max(900, int(inputs.cold_start * 2)),
            step=5,
            description="cold start s",
        ),
        "client_timeout": widgets.IntSlider(
            value=int(inputs.timeout), min=5, max=max(900, int(inputs.timeout * 2)), step=5, description="timeout s"
        ),
    }
    for slider in sliders.values():
        slider.continuous_update = False
        slider.style = {"description_width": "120px"}
    output = widgets.Output()

    def redraw(_change: Any = None) -> None:
        overrides = Overrides(
            min_replicas=sliders["min_replicas"].value,
            max_replicas=sliders["max_replicas"].value,
            scale_target=float(sliders["scale_target"].value) or None,
            stabilization_seconds=float(sliders["stabilization"].value),
            pod_ready_delay=float(sliders["pod_ready_delay"].value),
            client_timeout=float(sliders["client_timeout"].value),
        )
        with output:
            output.clear_output(wait=True)
            try:
                show_whatif(project(inputs, overrides), static=False)
            except RunbookError as error:
                print(f"cannot replay these settings: {error}")

    for slider in sliders.values():
        slider.observe(redraw, names="value")
    redraw()
    return widgets.VBox([*sliders.values(), output])
