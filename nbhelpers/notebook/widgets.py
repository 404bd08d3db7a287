"""The interactive triage panel of runbooks/triage.ipynb (ipywidgets, JupyterLab).

The panel lets an on-call engineer run the whole triage without editing code:
pick the source (live cluster: kube context from the kubeconfig, namespace and
service listed from the cluster, InferenceServices and LLMInferenceServices, each
labelled by kind; a scenario from the bundled library;
or an evidence bundle), the Prometheus URL, the window (presets or a custom
range) and the symptom, then press "Run all", or run one step at a time.

Results land in Output areas: one for coverage, one per step (the notebook
shows each in its step's section) and one for the root causes. They are
rendered by the same helpers as a headless run (:mod:`nbhelpers.notebook.display`), with
interactive charts.

Findings come only from :mod:`nbhelpers.triage`: "Run all" calls ``run()``;
a single step goes through ``run_step()`` on evidence gathered once by
``collect()`` and re-used by the next step buttons while the choices stay the
same. Headless runs never get here (see :func:`nbhelpers.notebook.start_triage`).

The logic the widgets wire together lives in small functions without widgets
(kubeconfig contexts, service listing, window presets, choices to
``TriageParams``, :class:`TriageSession`), so it is tested without a browser.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import partial
from html import escape
from pathlib import Path
from typing import Any

from nbhelpers.checks import STEP_BY_ID, STEP_IDS, STEPS, check_for
from nbhelpers.errors import ReadFailed, RunbookError
from nbhelpers.evidence.listing import KindListed, list_targets, target_order
from nbhelpers.evidence.model import INFERENCE_SERVICE, LLM_INFERENCE_SERVICE, Evidence, Target
from nbhelpers.findings.model import rank_root_causes
from nbhelpers.render.symptoms import SYMPTOMS, Symptom, reading_order, step_anchor, step_heading, symptom_for
from nbhelpers.scenarios import DEFAULT_SCENARIO, ScenarioSpec, list_scenarios, scenario_bundle
from nbhelpers.sources.base import ClusterSource
from nbhelpers.triage import (
    Progress,
    StepResult,
    TriageParams,
    TriageResult,
    collect,
    ignored_codes,
    params_from_text,
    run,
    run_step,
)
from nbhelpers.util.times import Window, format_duration, parse_duration, parse_time

SOURCE_CLUSTER, SOURCE_SCENARIO, SOURCE_BUNDLE = "cluster", "scenario", "bundle"
SOURCES = (("Live cluster", SOURCE_CLUSTER), ("Scenario library", SOURCE_SCENARIO), ("Evidence bundle", SOURCE_BUNDLE))
CUSTOM_WINDOW = "custom"
# (label, --since value); "" keeps the default: the last hour live, the capture window of a bundle.
WINDOW_PRESETS: tuple[tuple[str, str], ...] = (
    ("default (last 1 h; a bundle's own window)", ""),
    ("last 15 minutes", "15m"),
    ("last 1 hour", "1h"),
    ("last 3 hours", "3h"),
    ("last 6 hours", "6h"),
    ("last 24 hours", "24h"),
    ("last 7 days", "7d"),
    ("custom range", CUSTOM_WINDOW),
)
# Listing for the pickers must not freeze the panel for the full request timeout of a triage.
LIST_TIMEOUT_SECONDS = 10.0
ROOT_CAUSES_ANCHOR = "#Root-causes-and-action-items"
_BOX = "font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:14px;line-height:1.45;color:#111827;"
LABELS = {"description_width": "9em"}  # one width for every field label, so the inputs line up
_LINK = "color:#1d4ed8;text-decoration:underline;"
_STATUS_COLOURS = {
    "ok": ("#166534", "#dcfce7"),
    "findings": ("#b91c1c", "#fee2e2"),
    "skipped": ("#4b5563", "#f3f4f6"),
    "error": ("#7c2d12", "#ffedd5"),
    "running": ("#1d4ed8", "#dbeafe"),
    "not run": ("#6b7280", "#ffffff"),
}


# --------------------------------------------------------------------------------- kubeconfig contexts


@dataclass(frozen=True)
class KubeContexts:
    """The contexts of the merged kubeconfig files, the current one, and each context's namespace."""

    names: tuple[str, ...]
    current: str
    namespaces: Mapping[str, str]

    def namespace_of(self, context: str) -> str:
        """The context's default namespace (kubectl's rule: ``default`` when the context sets none)."""
        return self.namespaces.get(context or self.current) or "default"


def kube_contexts(kubeconfig: str) -> KubeContexts:
    """Contexts from ``kubeconfig`` (or KUBECONFIG / ~/.kube/config); none when only in-cluster config exists.

    Reads files only, no network. A missing or malformed file is a :class:`RunbookError`.
    """
    from nbhelpers.sources.cluster_live import kubeconfig_files, read_kubeconfig

    names: list[str] = []
    namespaces: dict[str, str] = {}
    current = ""
    for path in kubeconfig_files(kubeconfig or None):
        document = read_kubeconfig(path)
        for entry in document.get("contexts") or []:
            if not isinstance(entry, dict) or not entry.get("name") or str(entry["name"]) in names:
                continue
            name = str(entry["name"])
            names.append(name)
            namespaces[name] = str((entry.get("context") or {}).get("namespace") or "")
        current = current or str(document.get("current-context") or "")
    return KubeContexts(tuple(names), current if current in names else "", namespaces)


# ------------------------------------------------------------------------------- services on the cluster

_KIND_SUFFIX = f" ({LLM_INFERENCE_SERVICE})"


def service_label(target: Target) -> str:
    """How the service picker shows a service: an InferenceService by its name (as always), an
    LLMInferenceService as ``name (LLMInferenceService)``. Kubernetes names hold no space or
    parenthesis, so the label reads back unambiguously (:func:`service_of_label`)."""
    return target.isvc + _KIND_SUFFIX if target.is_llmisvc else target.isvc


def service_of_label(label: str) -> tuple[str, str]:
    """(name, kind) of a picker label, or of a typed name (an InferenceService)."""
    text = label.strip()
    if text.endswith(_KIND_SUFFIX):
        return text.removesuffix(_KIND_SUFFIX).strip(), LLM_INFERENCE_SERVICE
    return text, INFERENCE_SERVICE


@dataclass(frozen=True)
class ServiceListing:
    """Picker labels of the services (both kinds) by namespace, and a note when the list could not cover
    every namespace."""

    services: Mapping[str, tuple[str, ...]]
    note: str = ""

    @property
    def namespaces(self) -> tuple[str, ...]:
        return tuple(sorted(self.services))


def services_by_namespace(targets: Iterable[Target]) -> dict[str, tuple[str, ...]]:
    grouped: dict[str, list[Target]] = {}
    for target in targets:
        if target.namespace:
            grouped.setdefault(target.namespace, []).append(target)
    return {
        namespace: tuple(service_label(target) for target in sorted(found, key=target_order))
        for namespace, found in grouped.items()
    }


def list_services(cluster: ClusterSource, namespace: str | None) -> dict[str, tuple[str, ...]]:
    """Both kinds in ``namespace`` (``None``: every namespace). A kind whose CRD is not installed is
    skipped; ``ReadFailed`` when no installed kind could be listed."""
    listing = list_targets(cluster, namespace)
    failed = [listed for listed in listing.kinds if listed.failed]
    if failed and not any(listed.status == "ok" for listed in listing.kinds):
        raise ReadFailed(f"{failed[0].kind}s", failed[0].status, failed[0].reason)
    return services_by_namespace(listing.targets)


def _kinds_text(listed: list[KindListed]) -> str:
    return " or ".join(f"{item.kind}s" for item in listed)


def discover_services(cluster: ClusterSource, fallback_namespace: str) -> ServiceListing:
    """Every namespace holding an InferenceService or an LLMInferenceService; for a kind that cannot be
    listed across namespaces, only ``fallback_namespace``.

    Listing the services across namespaces finds the namespaces worth offering
    without the right to list namespaces, which on-call accounts often lack. A kind whose CRD is not
    installed (KServe before 0.16 has no LLMInferenceService) is simply absent from the picker.
    """
    everywhere = list_targets(cluster, None)
    broken = [listed for listed in everywhere.kinds if listed.status in ("unreachable", "timeout")]
    if broken or not any(listed.installed for listed in everywhere.kinds):
        shown = broken[0] if broken else everywhere.kinds[0]
        return ServiceListing({}, f"cannot list {shown.kind}s: {shown.status}: {shown.reason}")
    refused = [listed for listed in everywhere.kinds if listed.failed]
    if not refused:
        return ServiceListing(services_by_namespace(everywhere.targets))
    wide = f"cannot list {_kinds_text(refused)} in all namespaces ({refused[0].status})"
    refused_kinds = {listed.kind for listed in refused}
    local = list_targets(cluster, fallback_namespace)
    still = [listed for listed in local.kinds if listed.kind in refused_kinds and listed.failed]
    found = [target for target in everywhere.targets if target.kind not in refused_kinds]
    found += [target for target in local.targets if target.kind in refused_kinds]
    if still:
        note = f"{wide}, nor in {fallback_namespace} ({still[0].status}): type the namespace"
        return ServiceListing(services_by_namespace(found), note)
    note = f"{wide}: showing {fallback_namespace}; type another"
    return ServiceListing(services_by_namespace(found) or {fallback_namespace: ()}, note)


def open_cluster(kubeconfig: str, context: str) -> ClusterSource:
    from nbhelpers.sources.cluster_live import LiveCluster

    return LiveCluster(kubeconfig or None, context or None, LIST_TIMEOUT_SECONDS)


# ---------------------------------------------------------------------------------- choices -> params


@dataclass(frozen=True)
class PanelChoices:
    """What the engineer picked in the panel, as plain values."""

    source: str = SOURCE_SCENARIO
    kubeconfig: str = ""
    context: str = ""
    namespace: str = ""
    isvc: str = ""  # the service picker's text: a name, or a label naming the kind (service_label)
    scenario: str = DEFAULT_SCENARIO
    bundle: str = ""
    prometheus: str = ""
    window: str = ""  # a duration back from now (or from a bundle's capture), "" for the default, or "custom"
    start: str = ""
    end: str = ""


def preset_for(since: timedelta | None) -> str:
    """The window choice for the notebook's ``since``: a preset of the same length, else its own text."""
    if since is None:
        return ""
    for _, value in WINDOW_PRESETS:
        if value not in ("", CUSTOM_WINDOW) and parse_duration(value) == since:
            return value
    return format_duration(since)


def window_options(since: timedelta | None) -> list[tuple[str, str]]:
    """The presets, plus the notebook's own ``since`` when it is none of them."""
    options = list(WINDOW_PRESETS)
    chosen = preset_for(since)
    if chosen and chosen not in {value for _, value in options}:
        options.insert(-1, (f"last {chosen} (from the parameters)", chosen))
    return options


def window_fields(choice: str, start: str, end: str) -> dict[str, str]:
    """``since`` / ``start`` / ``end`` of TriageParams for a window choice (``custom``: both ends, checked)."""
    if choice != CUSTOM_WINDOW:
        if choice:
            parse_duration(choice)
        return {"since": choice, "start": "", "end": ""}
    if not (start.strip() and end.strip()):
        raise RunbookError("custom range: give both start and end, e.g. 2026-01-15T11:00:00Z")
    if parse_time(start, "start") >= parse_time(end, "end"):
        raise RunbookError("custom range: start must be before end")
    return {"since": "", "start": start.strip(), "end": end.strip()}


def params_for(
    choices: PanelChoices, base: TriageParams, bundle_of: Callable[[str], Path] = scenario_bundle
) -> TriageParams:
    """The TriageParams of a run: ``base`` (the notebook's parameters) with the panel's choices applied.

    A scenario becomes its generated bundle (``bundle_of``) and keeps the bundle's own target.
    """
    window = window_fields(choices.window, choices.start, choices.end)
    chosen: dict[str, Any] = {"prometheus": choices.prometheus.strip(), **window}
    if choices.source == SOURCE_CLUSTER:
        name, kind = service_of_label(choices.isvc)
        if not (choices.namespace.strip() and name):
            raise RunbookError("pick a namespace and an InferenceService or LLMInferenceService (or another source)")
        llmisvc = kind == LLM_INFERENCE_SERVICE
        chosen |= {
            "kubeconfig": choices.kubeconfig.strip(),
            "context": choices.context,
            "namespace": choices.namespace.strip(),
            "isvc": "" if llmisvc else name,
            "llmisvc": name if llmisvc else "",
            "bundle": "",
        }
    elif choices.source == SOURCE_SCENARIO:
        chosen |= {"bundle": str(bundle_of(choices.scenario)), "namespace": "", "isvc": "", "llmisvc": ""}
    elif choices.source == SOURCE_BUNDLE:
        if not choices.bundle.strip():
            raise RunbookError("give the path of an evidence bundle (a folder or a .tar.gz)")
        chosen |= {"bundle": choices.bundle.strip(), "namespace": "", "isvc": "", "llmisvc": ""}
    else:
        raise RunbookError(f"unknown source {choices.source!r}")
    return params_from_text({**base.to_text(), **chosen})


def initial_choices(base: TriageParams, has_kubeconfig: bool) -> PanelChoices:
    """The panel's first state: the notebook's parameters; a live cluster when a kubeconfig exists."""
    if base.bundle:
        source = SOURCE_BUNDLE
    elif base.namespace or base.isvc or base.llmisvc or base.context or base.kubeconfig or has_kubeconfig:
        source = SOURCE_CLUSTER
    else:
        source = SOURCE_SCENARIO
    custom = bool(base.start or base.end)
    text = base.to_text()
    return PanelChoices(
        source=source,
        kubeconfig=base.kubeconfig,
        context=base.context,
        namespace=base.namespace,
        isvc=base_label(base),
        bundle=base.bundle,
        prometheus=base.prometheus,
        window=CUSTOM_WINDOW if custom else preset_for(base.since),
        start=str(text["start"]),
        end=str(text["end"]),
    )


def base_label(base: TriageParams) -> str:
    """The picker text of the service the notebook's parameters name (``isvc`` or ``llmisvc``)."""
    return service_label(base.target()) if base.isvc or base.llmisvc else ""


def scenario_label(spec: ScenarioSpec) -> str:
    """How the scenario picker names a scenario."""
    return f"{spec.name}: {spec.title} ({spec.symptom}, {spec.difficulty})"


def has_target(params: TriageParams) -> bool:
    return bool(params.bundle or (params.namespace and (params.isvc or params.llmisvc)))


# ------------------------------------------------------------------------------------------- session


class TriageSession:
    """The panel's runs: "Run all" through ``run()``; one step through ``run_step()`` on one gathered Evidence.

    The evidence is gathered again only when the parameters change, so stepping
    through the runbook reads the cluster once.
    """

    def __init__(self) -> None:
        self._params: TriageParams | None = None
        self._evidence: Evidence | None = None
        self._incident: Window | None = None
        self._steps: dict[str, StepResult] = {}

    def run_all(self, params: TriageParams, progress: Progress | None = None) -> TriageResult:
        result = run(params, progress)
        self._params, self._evidence, self._incident = params, result.evidence, result.incident
        self._steps = {step.id: step for step in result.steps}
        return result

    def run_one(self, params: TriageParams, step_id: str, progress: Progress | None = None) -> TriageResult:
        """Run one step and return the result of every step run on the current evidence (in runbook order)."""
        if params != self._params or self._evidence is None:
            incident = params.incident
            self._evidence, self._params, self._incident = collect(params, progress), params, incident
            self._steps = {}
        evidence = self._evidence
        self._steps[step_id] = run_step(
            STEP_BY_ID[step_id], check_for(step_id), evidence, progress, ignored_codes(params, evidence)
        )
        steps = tuple(self._steps[step.id] for step in STEPS if step.id in self._steps)
        findings = tuple(finding for step in steps for finding in step.findings)
        return TriageResult(
            evidence=evidence,
            steps=steps,
            findings=findings,
            root_causes=tuple(rank_root_causes(findings, STEP_IDS)),
            generated_at=datetime.now(timezone.utc),
            incident=self._incident,
        )


# ------------------------------------------------------------------------------------------- rendering

# Interactive charts without a CDN: the panel sends vega-embed (bundled by vl-convert) once, as a
# script in an output area; each chart is then a small HTML output that draws itself with it.
OFFLINE_RENDERER = "kserve_runbook_offline"
GLOBALS_SNIPPET = "window.vegaEmbed = vegaEmbed; window.vegaLite = vegaLite; window.vega = vega;"
EMBED_OPTIONS = {"actions": {"export": True, "source": False, "compiled": False, "editor": False}}


def _script_json(value: Any) -> str:
    """JSON safe inside a <script> element."""
    return json.dumps(value).replace("</", "<\\/")


def chart_html(spec: Mapping[str, Any], element_id: str) -> str:
    """A chart that waits for the panel's vega-embed, then draws ``spec`` into its own element, once.

    A re-rendered output leaves the old copy's timer running: it stops once its element left the page,
    and an element already drawn is never drawn again (two views in one element break vega's signals).
    """
    return (
        f'<div id="{element_id}"></div><script type="text/javascript">(function () {{'
        "var script = document.currentScript;"
        f"var element = (script && script.previousElementSibling) || document.getElementById('{element_id}');"
        "(function draw() {"
        "if (!element || !element.isConnected || element.dataset.drawn) { return; }"
        "if (!window.vegaEmbed) { setTimeout(draw, 100); return; }"
        "element.dataset.drawn = 'yes';"
        f"window.vegaEmbed(element, {_script_json(spec)}, {_script_json(EMBED_OPTIONS)}).catch(console.error);"
        "})();"
        "})();</script>"
    )


def chart_runtime_html() -> str:
    """vega, vega-lite and vega-embed for the Vega-Lite version altair writes, as one inline script."""
    import vl_convert
    from altair.vegalite import SCHEMA_VERSION

    version = "_".join(SCHEMA_VERSION.split(".")[:2])  # "v6.4.1" -> "v6_4", vl-convert's name for it
    bundle = vl_convert.javascript_bundle(GLOBALS_SNIPPET, vl_version=version).replace("</script", "<\\/script")
    return f'<script type="text/javascript">{bundle}</script>'


def _render_offline(spec: dict[str, Any], **_options: Any) -> dict[str, str]:
    return {"text/html": chart_html(spec, f"kserve-chart-{uuid.uuid4().hex}")}


@contextmanager
def interactive_charts() -> Iterator[None]:
    """Display helpers show interactive altair charts drawn by the panel's own vega-embed."""
    import altair as alt

    if OFFLINE_RENDERER not in alt.renderers.names():
        alt.renderers.register(OFFLINE_RENDERER, _render_offline)
    with alt.renderers.enable(OFFLINE_RENDERER):
        yield


def html_output(markup: str) -> dict[str, Any]:
    return {"output_type": "display_data", "data": {"text/html": markup}, "metadata": {}}


def captured(show: Callable[[], None]) -> tuple[dict[str, Any], ...]:
    """What ``show()`` displays, as Output-widget outputs (so the display helpers render into any area)."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    InteractiveShell.instance()  # in a kernel, the kernel's shell; capturing displays needs one
    with capture_output(stdout=False, stderr=False, display=True) as capture:
        show()
    return tuple(
        {"output_type": "display_data", "data": output.data, "metadata": output.metadata} for output in capture.outputs
    )


def status_badge(status: str) -> str:
    foreground, background = _STATUS_COLOURS.get(status, _STATUS_COLOURS["error"])
    return (
        f'<span style="display:inline-block;min-width:4.5em;text-align:center;padding:0 6px;border-radius:9px;'
        f"font-size:12px;font-weight:600;color:{foreground};background:{background};"
        f'border:1px solid {foreground};">{escape(status)}</span>'
    )


def step_row_html(step_id: str, status: str, lead: str) -> str:
    """One line of the panel's step list: link to the section, status, and why to read it first."""
    why = f' <span style="color:#4b5563;">read first: {escape(lead)}</span>' if lead else ""
    return (
        f'<div style="{_BOX}">{status_badge(status)} '
        f'<a href="{step_anchor(step_id)}" style="{_LINK}">{escape(step_heading(step_id))}</a>{why}</div>'
    )


def summary_html(result: TriageResult) -> str:
    """The panel's one-glance result: ranked root causes (codes and titles), steps that ran."""
    titles = {finding.code: finding.title for finding in result.findings}
    ran = f"{len(result.steps)} of {len(STEPS)} steps ran"
    if not result.root_causes:
        return f'<div style="{_BOX}"><strong>No critical or warning finding</strong> ({ran}).</div>'
    causes = "".join(
        f"<li><code>{escape(code)}</code>: {escape(titles.get(code, ''))}</li>" for code in result.root_causes
    )
    return (
        f'<div style="{_BOX}"><strong>Root causes, most likely first</strong> ({ran}; details in '
        f'<a href="{ROOT_CAUSES_ANCHOR}" style="{_LINK}">Root causes and action items</a>):'
        f'<ol style="margin:2px 0 2px 22px;padding:0;">{causes}</ol></div>'
    )


def message_html(text: str, colours: tuple[str, str] = _STATUS_COLOURS["error"]) -> str:
    foreground, background = colours
    return (
        f'<div style="{_BOX}border-left:4px solid {foreground};background:{background};padding:4px 10px;">'
        f"{escape(text)}</div>"
        if text
        else ""
    )


def progress_text(event: str, message: str) -> str:
    """The status line for one progress event of ``run()`` / ``collect()``."""
    if event == "gather":
        return f"gathering evidence: {message}"
    if event == "step-start":
        return f"running step {message}"
    return f"step {message}"


# -------------------------------------------------------------------------------------------- the panel


def _kubeconfig_exists(kubeconfig: str) -> bool:
    """Whether a kubeconfig is at hand (a broken one counts: the panel then says what is wrong with it)."""
    from nbhelpers.sources.cluster_live import kubeconfig_files

    try:
        return bool(kubeconfig_files(kubeconfig or None))
    except RunbookError:
        return True


class TriagePanel:
    """The widget panel. ``widget`` is the control box; the output areas are displayed by the notebook cells."""

    def __init__(
        self,
        base: TriageParams,
        symptom: Symptom | None = None,
        out_dir: str = "",
        session: TriageSession | None = None,
    ) -> None:
        import ipywidgets as widgets  # type: ignore[import-untyped]

        self.base, self.out_dir = base, out_dir
        self.session = session or TriageSession()
        self.listing = ServiceListing({})
        self.contexts: KubeContexts | None = None
        self._filling = False  # set while the panel itself fills the pickers: their observers stay quiet
        self.result: TriageResult | None = None
        self.statuses: dict[str, str] = {step.id: "not run" for step in STEPS}

        first = initial_choices(base, _kubeconfig_exists(base.kubeconfig))
        self._build_target_inputs(widgets, first)
        self._build_run_controls(widgets, first, symptom)
        self._build_output_areas(widgets)
        self.widget = widgets.VBox(
            [
                widgets.HTML(
                    f'<div style="{_BOX}"><strong>Triage panel</strong>: choose what to diagnose, then '
                    "press <em>Run all</em> (or run one step). Results appear in the sections below.</div>"
                ),
                self.source,
                self.cluster_box,
                self.scenario,
                self.bundle,
                self.prometheus,
                self.window,
                self.custom_box,
                self.symptom,
                widgets.HBox([self.run_all_button, self.progress]),
                self.status,
                self.message,
                self.summary,
                widgets.HTML(f'<div style="{_BOX}"><strong>Steps</strong>, in the order to read them:</div>'),
                self.steps_box,
                self.chart_runtime,
            ]
        )
        self.widget.add_class("kserve-triage-panel")
        self._wire()
        self._show_sections()
        self._order_steps()
        if self.source.value == SOURCE_CLUSTER:
            self._load_contexts()

    def _build_target_inputs(self, widgets: Any, first: PanelChoices) -> None:
        """Source switch; context, namespace and service (either kind); scenario; bundle path."""

        def wide() -> Any:  # a Layout per widget: hiding one section must not hide the others
            return widgets.Layout(width="36em")

        self.source = widgets.ToggleButtons(options=SOURCES, value=first.source, description="Source", style=LABELS)
        self.kubeconfig = widgets.Text(
            value=first.kubeconfig,
            description="Kubeconfig",
            style=LABELS,
            placeholder="KUBECONFIG or ~/.kube/config",
            layout=wide(),
        )
        self.context = widgets.Dropdown(options=[], description="Context", style=LABELS, layout=wide())
        self.reload = widgets.Button(description="Reload lists", icon="refresh")
        self.namespace = widgets.Combobox(
            value=first.namespace, options=[], description="Namespace", style=LABELS, ensure_option=False, layout=wide()
        )
        self.isvc = widgets.Combobox(
            value=first.isvc,
            options=[],
            description="Service",
            placeholder="an InferenceService, or an LLMInferenceService by its label",
            style=LABELS,
            ensure_option=False,
            layout=wide(),
        )
        self.cluster_box = widgets.VBox(
            [self.kubeconfig, widgets.HBox([self.context, self.reload]), self.namespace, self.isvc]
        )
        self.scenario = widgets.Dropdown(
            options=[(scenario_label(spec), spec.name) for spec in list_scenarios()],
            value=first.scenario,
            description="Scenario",
            style=LABELS,
            layout=widgets.Layout(width="64em", max_width="100%"),
        )
        self.bundle = widgets.Text(
            value=first.bundle, description="Bundle", style=LABELS, placeholder="folder or .tar.gz", layout=wide()
        )
        self.prometheus = widgets.Text(
            value=first.prometheus,
            description="Prometheus",
            style=LABELS,
            placeholder="https://prometheus:9090",
            layout=wide(),
        )

    def _build_run_controls(self, widgets: Any, first: PanelChoices, symptom: Symptom | None) -> None:
        """Window, symptom, Run all with its progress, messages, and one button per step."""
        self.window = widgets.Dropdown(
            options=window_options(self.base.since),
            value=first.window,
            description="Window",
            style=LABELS,
            layout=widgets.Layout(width="36em"),
        )
        self.start = widgets.Text(
            value=first.start, description="Start", style=LABELS, placeholder="2026-01-15T11:00:00Z"
        )
        self.end = widgets.Text(value=first.end, description="End", style=LABELS, placeholder="2026-01-15T12:00:00Z")
        self.custom_box = widgets.HBox([self.start, self.end])
        self.symptom = widgets.Dropdown(
            options=[("none: read every step", ""), *((item.label, item.key) for item in SYMPTOMS)],
            value=symptom.key if symptom else "",
            description="Symptom",
            style=LABELS,
            layout=widgets.Layout(width="36em"),
        )
        self.run_all_button = widgets.Button(description="Run all", button_style="primary", icon="play")
        self.progress = widgets.IntProgress(value=0, min=0, max=len(STEPS) + 1, description="Progress")
        self.status, self.message, self.summary = widgets.HTML(), widgets.HTML(), widgets.HTML()
        self.step_buttons = {
            step.id: widgets.Button(description=f"Run step {number}", layout=widgets.Layout(width="9em"))
            for number, step in enumerate(STEPS, 1)
        }
        self.step_rows_html = {step.id: widgets.HTML() for step in STEPS}
        self.step_rows = {
            step.id: widgets.HBox([self.step_buttons[step.id], self.step_rows_html[step.id]]) for step in STEPS
        }
        self.steps_box = widgets.VBox()

    def _build_output_areas(self, widgets: Any) -> None:
        """Where results go: the notebook displays each area in its section."""
        self.coverage_area = widgets.Output()
        self.step_areas = {step.id: widgets.Output() for step in STEPS}
        self.root_causes_area = widgets.Output()
        self.chart_runtime = widgets.Output()  # the charting library, sent once; the charts use it

    def _wire(self) -> None:
        self.source.observe(lambda _change: self._on_source(), names="value")
        self.context.observe(lambda _change: self._unless_filling(self._load_services), names="value")
        self.namespace.observe(lambda _change: self._unless_filling(self._fill_isvcs), names="value")
        self.window.observe(lambda _change: self._show_sections(), names="value")
        self.symptom.observe(lambda _change: self._order_steps(), names="value")
        self.reload.on_click(lambda _button: self._load_contexts())
        self.run_all_button.on_click(lambda _button: self.run_all())
        for step_id, button in self.step_buttons.items():
            button.on_click(lambda _button, chosen=step_id: self.run_step(chosen))

    # --- choices -----------------------------------------------------------------------------------

    def choices(self) -> PanelChoices:
        return PanelChoices(
            source=str(self.source.value),
            kubeconfig=str(self.kubeconfig.value),
            context=str(self.context.value or ""),
            namespace=str(self.namespace.value),
            isvc=str(self.isvc.value),
            scenario=str(self.scenario.value),
            bundle=str(self.bundle.value),
            prometheus=str(self.prometheus.value),
            window=str(self.window.value),
            start=str(self.start.value),
            end=str(self.end.value),
        )

    def chosen_symptom(self) -> Symptom | None:
        return symptom_for(str(self.symptom.value))

    def _show_sections(self) -> None:
        source = self.source.value
        for box, wanted in (
            (self.cluster_box, source == SOURCE_CLUSTER),
            (self.scenario, source == SOURCE_SCENARIO),
            (self.bundle, source == SOURCE_BUNDLE),
            (self.custom_box, self.window.value == CUSTOM_WINDOW),
        ):
            box.layout.display = "" if wanted else "none"

    def _on_source(self) -> None:
        self._show_sections()
        if self.source.value == SOURCE_CLUSTER and not self.context.options:
            self._load_contexts()

    def _order_steps(self) -> None:
        """The step list in reading order for the symptom: its steps first, each with why."""
        symptom = self.chosen_symptom()
        leads = {lead.step: lead.why for lead in symptom.leads} if symptom else {}
        order = reading_order(symptom)
        for step_id in order:
            self.step_rows_html[step_id].value = step_row_html(step_id, self.statuses[step_id], leads.get(step_id, ""))
        self.steps_box.children = [self.step_rows[step_id] for step_id in order]

    def _set_status(self, step_id: str, status: str) -> None:
        self.statuses[step_id] = status
        self._order_steps()

    # --- cluster lists -----------------------------------------------------------------------------

    def _unless_filling(self, action: Callable[[], None]) -> None:
        if not self._filling:
            action()

    def _fill(self, picker: Any, options: list[Any], value: Any) -> None:
        self._filling = True
        try:
            picker.options = options
            picker.value = value
        finally:
            self._filling = False

    def _load_contexts(self) -> None:
        self.message.value = ""
        try:
            contexts = kube_contexts(str(self.kubeconfig.value))
        except RunbookError as error:
            self.message.value = message_html(str(error))
            return
        self.contexts = contexts
        wanted = self.context.value or self.base.context or contexts.current
        options = [("in-cluster service account", "")] if not contexts.names else list(contexts.names)
        chosen = wanted if wanted in contexts.names else (contexts.current or (contexts.names or ("",))[0])
        self._fill(self.context, options, chosen)
        self._load_services()

    def _load_services(self) -> None:
        contexts = self.contexts
        fallback = contexts.namespace_of(str(self.context.value or "")) if contexts else "default"
        self.status.value = f'<div style="{_BOX}">listing InferenceServices and LLMInferenceServices…</div>'
        try:
            cluster = open_cluster(str(self.kubeconfig.value), str(self.context.value or ""))
        except RunbookError as error:
            self.status.value, self.message.value = "", message_html(str(error))
            return
        try:
            self.listing = discover_services(cluster, fallback)
        finally:
            cluster.close()
        self.status.value = ""
        self.message.value = message_html(self.listing.note, _STATUS_COLOURS["skipped"])
        namespace = str(self.namespace.value)
        if not namespace and self.listing.namespaces:
            namespace = fallback if fallback in self.listing.services else self.listing.namespaces[0]
        self._fill(self.namespace, list(self.listing.namespaces), namespace)
        self._fill_isvcs()

    def _fill_isvcs(self) -> None:
        namespace = str(self.namespace.value).strip()
        names = self.listing.services.get(namespace)
        if names is None and namespace:
            try:
                cluster = open_cluster(str(self.kubeconfig.value), str(self.context.value or ""))
            except RunbookError as error:
                self.message.value = message_html(str(error))
                return
            try:
                names = list_services(cluster, namespace).get(namespace, ())
            except ReadFailed as failed:
                self.message.value = message_html(f"cannot list {failed.what} in {namespace}: {failed.reason}")
                names = ()
            finally:
                cluster.close()
        current = str(self.isvc.value)
        given = (namespace, current) == (self.base.namespace, base_label(self.base))  # the parameters' target: kept
        keep = bool(current) and (current in (names or ()) or given)
        self._fill(self.isvc, list(names or ()), current if keep or not names else names[0])

    # --- running -----------------------------------------------------------------------------------

    def _progress(self, event: str, message: str) -> None:
        if event == "step-start":
            self.progress.value = max(self.progress.value, 1)
            self._set_status(message, "running")
        elif event == "step-end":
            self.progress.value = min(self.progress.max, self.progress.value + 1)
            step_id, status = [*message.split(), ""][:2]  # "<step> <status> <seconds>"
            if step_id in self.statuses:
                self._set_status(step_id, status)
        self.status.value = f'<div style="{_BOX}color:#374151;">{escape(progress_text(event, message))}</div>'

    def _params(self) -> TriageParams:
        if self.source.value == SOURCE_SCENARIO:
            self.status.value = f'<div style="{_BOX}">preparing scenario {escape(str(self.scenario.value))}…</div>'
        return params_for(self.choices(), self.base)

    def _busy(self, busy: bool) -> None:
        for button in (self.run_all_button, *self.step_buttons.values()):
            button.disabled = busy

    def run_all(self) -> TriageResult | None:
        """Run every step (one gather) and render everything; errors are shown in the panel."""
        self._busy(True)
        self.message.value, self.summary.value = "", ""
        self.progress.value, self.progress.bar_style = 0, ""
        try:
            result = self.session.run_all(self._params(), self._progress)
            if self.out_dir:
                from nbhelpers.render.findings_json import write_outputs

                write_outputs(result, self.out_dir)
        except (RunbookError, OSError) as error:  # bad input, or out_dir not writable
            self.status.value, self.message.value = "", message_html(str(error))
            self.progress.bar_style = "danger"
            return None
        finally:
            self._busy(False)
        self._render(result, [step.id for step in STEPS])
        self.progress.value, self.progress.bar_style = self.progress.max, "success"
        self.status.value = f'<div style="{_BOX}color:#166534;">done: {len(result.steps)} steps ran</div>'
        return result

    def run_step(self, step_id: str) -> TriageResult | None:
        """Run one step on the evidence already gathered (gathered now if the choices changed)."""
        self._busy(True)
        self.message.value = ""
        self.progress.value, self.progress.bar_style = 0, ""
        try:
            result = self.session.run_one(self._params(), step_id, self._progress)
        except RunbookError as error:
            self.status.value, self.message.value = "", message_html(str(error))
            self.progress.bar_style = "danger"
            return None
        finally:
            self._busy(False)
        self._render(result, [step_id])
        self.progress.value, self.progress.bar_style = self.progress.max, "success"
        self.status.value = f'<div style="{_BOX}color:#166534;">done: step {escape(step_id)}</div>'
        return result

    def _render(self, result: TriageResult, step_ids: list[str]) -> None:
        from nbhelpers.notebook import display

        self.result = result
        ran = {step.id: step for step in result.steps}
        if not self.chart_runtime.outputs:
            self.chart_runtime.outputs = (html_output(chart_runtime_html()),)
        with interactive_charts():
            self.coverage_area.outputs = captured(partial(display.show_coverage, result, static=False))
            for step_id in step_ids:
                self.step_areas[step_id].outputs = captured(partial(display.show_step, result, step_id, static=False))
            self.root_causes_area.outputs = captured(partial(display.show_root_causes, result))
        for step in STEPS:
            self.statuses[step.id] = ran[step.id].status if step.id in ran else "not run"
        self._order_steps()
        self.summary.value = summary_html(result)
