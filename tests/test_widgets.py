"""The triage panel's logic without a browser: contexts, cluster lists, windows, params, one gather, symptoms.

Cluster lists come from the fixture API server through the real kubernetes client
(tests/fakeapi.py); runs use the bundled scenarios. The browser test
(tests/test_browser.py) drives the same panel in JupyterLab.
"""

from __future__ import annotations

import html
from datetime import timedelta
from pathlib import Path

import nbformat
import pytest
from builders import load_yaml
from fakeapi import FakeApiServer, crds_for_every_kind_read, write_kubeconfig

from nbhelpers.checks import STEPS
from nbhelpers.errors import RunbookError
from nbhelpers.evidence.model import Target
from nbhelpers.notebook import SESSION_ENV, display, wants_panel
from nbhelpers.notebook.widgets import (
    CUSTOM_WINDOW,
    SOURCE_BUNDLE,
    SOURCE_CLUSTER,
    SOURCE_SCENARIO,
    WINDOW_PRESETS,
    PanelChoices,
    TriagePanel,
    TriageSession,
    captured,
    chart_html,
    discover_services,
    initial_choices,
    kube_contexts,
    open_cluster,
    params_for,
    service_label,
    service_of_label,
    window_fields,
    window_options,
)
from nbhelpers.render.symptoms import (
    SYMPTOMS,
    reading_order,
    reading_order_html,
    step_anchor,
    step_heading,
    symptom_for,
)
from nbhelpers.scenarios import load_spec, scenario_bundle
from nbhelpers.triage import Progress, TriageParams, params_from_text

CLUSTER_FIXTURES = Path(__file__).parent / "fixtures" / "cluster"
RUNBOOK = Path(__file__).parents[1] / "runbooks" / "triage.ipynb"


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No kubeconfig of the machine, scenario bundles in a private cache."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.fixture
def both_clusters(fake_api: FakeApiServer) -> FakeApiServer:
    """InferenceServices in two namespaces: llm (vllm-llm, qwen-chat) and raw (vllm-raw)."""
    return fake_api.load(CLUSTER_FIXTURES / "common", CLUSTER_FIXTURES / "serverless", CLUSTER_FIXTURES / "raw")


def _recorder(events: list[str]) -> Progress:
    def record(event: str, message: str) -> None:
        events.append(f"{event}: {message}")

    return record


def _gather_count(events: list[str]) -> int:
    """Each gather reports "reading the InferenceService" once."""
    return events.count("gather: reading the InferenceService")


# ------------------------------------------------------------------------------------- kube contexts


def test_contexts_come_from_the_kubeconfig(tmp_path: Path) -> None:
    config = write_kubeconfig(
        tmp_path / "config",
        "https://127.0.0.1:1",
        context="prod",
        namespace="llm",
        extra_contexts={"staging": "https://127.0.0.1:2"},
    )
    contexts = kube_contexts(str(config))
    assert contexts.names == ("prod", "staging") and contexts.current == "prod"
    assert contexts.namespace_of("prod") == "llm" and contexts.namespace_of("") == "llm"
    assert contexts.namespace_of("unknown") == "default"


def test_no_kubeconfig_means_no_contexts_and_a_missing_file_is_one_line() -> None:
    assert kube_contexts("").names == ()
    with pytest.raises(RunbookError, match="kubeconfig /nowhere/config not found"):
        kube_contexts("/nowhere/config")


# ------------------------------------------------------------------------------- cluster listings


def test_namespaces_and_services_are_listed_from_the_cluster(both_clusters: FakeApiServer, kubeconfig: Path) -> None:
    cluster = open_cluster(str(kubeconfig), "")
    try:
        listing = discover_services(cluster, "default")
    finally:
        cluster.close()
    assert listing.namespaces == ("llm", "raw") and listing.note == ""
    assert listing.services == {"llm": ("qwen-chat", "vllm-llm"), "raw": ("vllm-raw",)}
    paths = [request.path for request in both_clusters.requests]
    assert "/apis/serving.kserve.io/v1beta1/inferenceservices" in paths  # one list across namespaces


def test_forbidden_across_namespaces_falls_back_to_the_contexts_namespace(
    both_clusters: FakeApiServer, kubeconfig: Path
) -> None:
    both_clusters.inject("/apis/serving.kserve.io/v1beta1/inferenceservices", status=403)
    cluster = open_cluster(str(kubeconfig), "")
    try:
        listing = discover_services(cluster, "raw")
    finally:
        cluster.close()
    assert listing.services == {"raw": ("vllm-raw",)}
    assert "cannot list InferenceServices in all namespaces (forbidden)" in listing.note
    assert "type another" in listing.note


def test_missing_kserve_is_said_not_raised(fake_api: FakeApiServer, kubeconfig: Path) -> None:
    cluster = open_cluster(str(kubeconfig), "")
    try:
        listing = discover_services(cluster, "default")
    finally:
        cluster.close()
    assert listing.services == {} and "not_installed" in listing.note


def test_panel_fills_context_namespace_and_service_pickers(both_clusters: FakeApiServer, tmp_path: Path) -> None:
    config = write_kubeconfig(
        tmp_path / "config",
        both_clusters.url,
        token=both_clusters.token,
        context="fixture",
        namespace="raw",
        extra_contexts={"other": "https://127.0.0.1:9"},
    )
    panel = TriagePanel(TriageParams(kubeconfig=str(config)))
    assert panel.source.value == SOURCE_CLUSTER
    assert list(panel.context.options) == ["fixture", "other"] and panel.context.value == "fixture"
    assert list(panel.namespace.options) == ["llm", "raw"]
    assert panel.namespace.value == "raw"  # the context's namespace
    assert list(panel.isvc.options) == ["vllm-raw"] and panel.isvc.value == "vllm-raw"
    panel.namespace.value = "llm"
    assert list(panel.isvc.options) == ["qwen-chat", "vllm-llm"] and panel.isvc.value == "qwen-chat"
    assert panel.choices().namespace == "llm" and panel.choices().isvc == "qwen-chat"


def test_panel_runs_the_triage_on_the_live_cluster(both_clusters: FakeApiServer, kubeconfig: Path) -> None:
    panel = TriagePanel(TriageParams(kubeconfig=str(kubeconfig)))
    panel.namespace.value = "llm"
    panel.isvc.value = "vllm-llm"
    result = panel.run_all()
    assert result is not None and panel.message.value == ""
    assert (result.evidence.target.namespace, result.evidence.target.isvc) == ("llm", "vllm-llm")
    assert result.evidence.sources["cluster"] == "live"
    assert "llm/vllm-llm" in _html_of(panel.coverage_area.outputs)
    assert all(request.method == "GET" for request in both_clusters.requests)


def test_a_service_named_in_the_parameters_is_kept_and_a_wrong_one_explained(
    both_clusters: FakeApiServer, kubeconfig: Path
) -> None:
    panel = TriagePanel(TriageParams(kubeconfig=str(kubeconfig), namespace="llm", isvc="missing-model"))
    assert panel.isvc.value == "missing-model"
    assert panel.run_all() is None
    shown = html.unescape(panel.message.value)
    assert "'missing-model' not found" in shown and "vllm-llm" in shown


# ------------------------------------------------------------------------- LLMInferenceServices (issue #18)

LLMISVC_LABEL = "llama-llmd (LLMInferenceService)"


@pytest.fixture
def with_llmisvc(both_clusters: FakeApiServer) -> FakeApiServer:
    """The two clusters with the LLMInferenceService CRD (and its stack's) installed and llm/llama-llmd healthy."""
    installed = both_clusters.cluster.objects[("apiextensions.k8s.io", "customresourcedefinitions")]
    both_clusters.cluster.add_all(
        [crd for crd in crds_for_every_kind_read() if ("", crd["metadata"]["name"]) not in installed]
    )
    both_clusters.cluster.add_all(load_yaml("checks/healthy/llmisvc.yaml"))
    return both_clusters


def test_labels_name_the_kind_and_read_back() -> None:
    llmisvc = Target("llm", "llama-llmd", "LLMInferenceService")
    assert service_label(llmisvc) == LLMISVC_LABEL and service_label(Target("llm", "chat")) == "chat"
    assert service_of_label(f" {LLMISVC_LABEL} ") == ("llama-llmd", "LLMInferenceService")
    assert service_of_label("chat") == ("chat", "InferenceService")  # a typed name is an InferenceService


def test_llminferenceservices_are_listed_beside_inferenceservices(
    with_llmisvc: FakeApiServer, kubeconfig: Path
) -> None:
    cluster = open_cluster(str(kubeconfig), "")
    try:
        listing = discover_services(cluster, "default")
    finally:
        cluster.close()
    assert listing.note == ""
    assert listing.services == {"llm": (LLMISVC_LABEL, "qwen-chat", "vllm-llm"), "raw": ("vllm-raw",)}


def test_a_forbidden_llminferenceservice_list_falls_back_for_that_kind_only(
    with_llmisvc: FakeApiServer, kubeconfig: Path
) -> None:
    with_llmisvc.inject("/apis/serving.kserve.io/v1alpha2/llminferenceservices", status=403)
    cluster = open_cluster(str(kubeconfig), "")
    try:
        listing = discover_services(cluster, "llm")
    finally:
        cluster.close()
    assert listing.services == {"llm": (LLMISVC_LABEL, "qwen-chat", "vllm-llm"), "raw": ("vllm-raw",)}
    assert listing.note.startswith("cannot list LLMInferenceServices in all namespaces (forbidden): showing llm")


def test_panel_picks_an_llminferenceservice_and_triages_it_as_one(
    with_llmisvc: FakeApiServer, kubeconfig: Path
) -> None:
    panel = TriagePanel(TriageParams(kubeconfig=str(kubeconfig)))
    panel.namespace.value = "llm"
    assert list(panel.isvc.options) == [LLMISVC_LABEL, "qwen-chat", "vllm-llm"]
    panel.isvc.value = LLMISVC_LABEL
    result = panel.run_all()
    assert result is not None and panel.message.value == ""
    target = result.evidence.target
    assert (target.namespace, target.isvc, target.kind) == ("llm", "llama-llmd", "LLMInferenceService")


def test_an_llminferenceservice_in_the_parameters_is_its_label_and_back() -> None:
    base = TriageParams(namespace="llm", llmisvc="llama-llmd")
    first = initial_choices(base, has_kubeconfig=False)
    assert (first.source, first.isvc) == (SOURCE_CLUSTER, LLMISVC_LABEL)
    live = params_for(first, base)
    assert (live.isvc, live.llmisvc) == ("", "llama-llmd")
    picked_isvc = params_for(PanelChoices(source=SOURCE_CLUSTER, namespace="llm", isvc="chat"), base)
    assert (picked_isvc.isvc, picked_isvc.llmisvc) == ("chat", "")
    bundle = params_for(PanelChoices(source=SOURCE_BUNDLE, bundle="b.tar.gz"), base)
    assert (bundle.isvc, bundle.llmisvc, bundle.namespace) == ("", "", "")  # the bundle's own target


# ----------------------------------------------------------------------------------- choices -> params


@pytest.mark.parametrize(("label", "since"), WINDOW_PRESETS[:-1])
def test_window_presets_become_since(label: str, since: str) -> None:
    assert window_fields(since, "ignored", "ignored") == {"since": since, "start": "", "end": ""}, label


def test_custom_window_needs_both_ends_in_order() -> None:
    start, end = "2026-01-15T11:00:00Z", "2026-01-15T12:00:00+00:00"
    assert window_fields(CUSTOM_WINDOW, f" {start} ", end) == {"since": "", "start": start, "end": end}
    with pytest.raises(RunbookError, match="give both start and end"):
        window_fields(CUSTOM_WINDOW, start, "")
    with pytest.raises(RunbookError, match="start must be before end"):
        window_fields(CUSTOM_WINDOW, end, start)
    with pytest.raises(RunbookError, match="no UTC offset"):
        window_fields(CUSTOM_WINDOW, "2026-01-15T11:00:00", end)
    with pytest.raises(RunbookError, match="bad duration"):
        window_fields("an hour", "", "")


def test_a_since_from_the_parameters_stays_selectable() -> None:
    assert ("last 1h30m (from the parameters)", "1h30m") in window_options(timedelta(minutes=90))
    assert window_options(timedelta(hours=1)) == list(WINDOW_PRESETS)
    assert window_options(timedelta(days=1)) == list(WINDOW_PRESETS)  # the 24h preset, however it is written
    assert initial_choices(params_from_text({"since": "90m"}), has_kubeconfig=False).window == "1h30m"
    assert initial_choices(params_from_text({"since": "60m"}), has_kubeconfig=False).window == "1h"
    assert (
        initial_choices(
            params_from_text({"start": "2026-01-15T11:00:00Z", "end": "2026-01-15T12:00:00Z"}), has_kubeconfig=False
        ).window
        == CUSTOM_WINDOW
    )


def test_choices_become_triage_params_and_keep_the_notebooks_other_settings(tmp_path: Path) -> None:
    base = params_from_text(
        {"request_timeout": "5s", "ignore": ("GPU_OOM",), "namespace": "old", "isvc": "old", "since": "2h"}
    )
    bundles: list[str] = []

    def bundle_of(name: str) -> Path:
        bundles.append(name)
        return tmp_path / name

    scenario = params_for(PanelChoices(source=SOURCE_SCENARIO, scenario="host-oom", window="3h"), base, bundle_of)
    assert bundles == ["host-oom"]
    assert (scenario.bundle, scenario.namespace, scenario.isvc) == (str(tmp_path / "host-oom"), "", "")
    assert (scenario.since, scenario.request_timeout, scenario.ignore) == (
        timedelta(hours=3),
        timedelta(seconds=5),
        ("GPU_OOM",),
    )

    live = params_for(
        PanelChoices(source=SOURCE_CLUSTER, context="prod", namespace=" llm ", isvc="chat", prometheus=" http://p "),
        base,
    )
    assert (live.context, live.namespace, live.isvc, live.bundle, live.prometheus) == (
        "prod",
        "llm",
        "chat",
        "",
        "http://p",
    )
    assert live.since is None  # the default window

    with pytest.raises(RunbookError, match="pick a namespace and an InferenceService"):
        params_for(PanelChoices(source=SOURCE_CLUSTER, namespace="llm"), base)
    with pytest.raises(RunbookError, match="path of an evidence bundle"):
        params_for(PanelChoices(source=SOURCE_BUNDLE), base)
    assert params_for(PanelChoices(source=SOURCE_BUNDLE, bundle="b.tar.gz"), base).bundle == "b.tar.gz"


def test_first_source_follows_the_parameters() -> None:
    assert initial_choices(TriageParams(bundle="b"), has_kubeconfig=True).source == SOURCE_BUNDLE
    assert initial_choices(TriageParams(namespace="llm"), has_kubeconfig=False).source == SOURCE_CLUSTER
    assert initial_choices(TriageParams(), has_kubeconfig=True).source == SOURCE_CLUSTER
    assert initial_choices(TriageParams(), has_kubeconfig=False).source == SOURCE_SCENARIO


# -------------------------------------------------------------------------------------- one gather


def test_steps_run_one_by_one_share_one_gather() -> None:
    gathers: list[str] = []
    params = TriageParams(bundle=str(scenario_bundle("port-mismatch")))
    session = TriageSession()
    first = session.run_one(params, "ports", _recorder(gathers))
    second = session.run_one(params, "endpoints", _recorder(gathers))
    assert _gather_count(gathers) == 1
    assert [step.id for step in first.steps] == ["ports"] and first.root_causes[0] == "PORT_MISMATCH"
    assert [step.id for step in second.steps] == ["endpoints", "ports"]  # runbook order, both kept
    assert second.root_causes == ("PORT_MISMATCH", "ENDPOINTS_NONE_READY", "ISVC_NOT_READY")

    session.run_one(TriageParams(bundle=params.bundle, ignore=("PORT_MISMATCH",)), "ports", _recorder(gathers))
    assert _gather_count(gathers) == 2  # other parameters: gathered again


def test_run_all_gathers_once_and_later_steps_reuse_it() -> None:
    gathers: list[str] = []
    params = TriageParams(bundle=str(scenario_bundle("port-mismatch")))
    session = TriageSession()
    everything = session.run_all(params, _recorder(gathers))
    again = session.run_one(params, "probes", _recorder(gathers))
    assert _gather_count(gathers) == 1
    assert [step.id for step in again.steps] == [step.id for step in STEPS]
    assert again.root_causes == everything.root_causes


# ------------------------------------------------------------------------------------------- the panel


def _html_of(outputs: tuple[dict[str, object], ...]) -> str:
    return html.unescape("".join(str(output["data"].get("text/html", "")) for output in outputs))  # type: ignore[attr-defined]


def test_panel_runs_a_scenario_and_renders_every_area() -> None:
    panel = TriagePanel(TriageParams())
    assert panel.source.value == SOURCE_SCENARIO and panel.cluster_box.layout.display == "none"
    panel.scenario.value = "host-oom"
    result = panel.run_all()
    assert result is not None
    expected = load_spec("host-oom").expected_root_causes
    assert result.root_causes == expected
    assert all(code in html.unescape(panel.summary.value) for code in expected)
    assert "RESOURCES_HOST_OOMKILLED" in _html_of(panel.step_areas["resources"].outputs)
    assert expected[0] in _html_of(panel.root_causes_area.outputs)
    assert "llm/support-bot" in _html_of(panel.coverage_area.outputs)
    assert panel.progress.value == panel.progress.max and panel.progress.bar_style == "success"
    assert panel.statuses["resources"] == "findings" and panel.statuses["metric_pipeline"] == "skipped"
    assert not panel.run_all_button.disabled
    outside = captured(lambda: display.show_step(result, "resources"))  # interactive charts only inside the panel
    assert "vegaEmbed" not in _html_of(outside) and any("image/svg+xml" in o["data"] for o in outside)

    charts = _html_of(panel.step_areas["resources"].outputs)
    assert "window.vegaEmbed(" in charts and "src=" not in charts and "cdn." not in charts
    runtime = _html_of(panel.chart_runtime.outputs)
    assert "window.vegaEmbed=" in runtime and "cdn.jsdelivr" not in runtime


def test_panel_step_button_fills_only_that_area() -> None:
    panel = TriagePanel(TriageParams())
    panel.step_buttons["ports"].click()
    assert "PORT_MISMATCH" in _html_of(panel.step_areas["ports"].outputs)
    assert panel.step_areas["probes"].outputs == ()
    assert panel.statuses["ports"] == "findings" and panel.statuses["probes"] == "not run"
    assert "1 of 9 steps ran" in panel.summary.value


def test_panel_shows_bad_input_instead_of_raising() -> None:
    panel = TriagePanel(TriageParams())
    panel.source.value = SOURCE_BUNDLE
    assert panel.bundle.layout.display == "" and panel.scenario.layout.display == "none"
    assert panel.run_all() is None
    assert "path of an evidence bundle" in panel.message.value and panel.progress.bar_style == "danger"
    panel.window.value = CUSTOM_WINDOW
    assert panel.custom_box.layout.display == ""


def test_chart_html_cannot_close_its_script() -> None:
    markup = chart_html({"title": "</script><b>x</b>"}, "chart-1")
    assert markup.count("</script>") == 1 and "<\\/script>" in markup


# ------------------------------------------------------------------------------------------- symptoms


def test_symptom_map_names_every_scenario_symptom() -> None:
    """Every symptom a scenario spec may report (but "none") has a reading order, so quiz and runbook agree."""
    from nbhelpers.scenarios.spec import SYMPTOMS as SCENARIO_SYMPTOMS

    assert {symptom.scenario_symptom for symptom in SYMPTOMS} == set(SCENARIO_SYMPTOMS) - {"none"}


def test_symptom_parameter_values() -> None:
    assert symptom_for("") is None
    assert symptom_for(" OOM ") is symptom_for("oom")
    with pytest.raises(RunbookError, match="unknown symptom 'slow': use one of 503, 504, oom, hpa"):
        symptom_for("slow")


def test_reading_order_puts_the_symptoms_steps_first() -> None:
    order = reading_order(symptom_for("504"))
    assert order[:4] == ("timeouts", "queue_vs_oom", "cold_start", "scale_target")
    assert sorted(order) == sorted(step.id for step in STEPS)
    assert reading_order(None) == tuple(step.id for step in STEPS)


def test_map_links_point_at_the_notebooks_step_headings() -> None:
    headings = {
        cell.source.splitlines()[0].removeprefix("## ")
        for cell in nbformat.read(RUNBOOK, as_version=4).cells
        if cell.cell_type == "markdown" and cell.source.startswith("## Step ")
    }
    assert {step_heading(step.id) for step in STEPS} == headings
    assert step_anchor("cold_start") == "#Step-5:-Cold-start"
    rendered = reading_order_html(symptom_for("hpa"))
    assert rendered.index("#Step-6:-Metric-pipeline") < rendered.index("#Step-7:-Scale-target")
    assert "read these steps first" in rendered
    every = reading_order_html(None)
    assert all(html.escape(symptom.label) in every for symptom in SYMPTOMS)
    assert every.count("<a href=") == sum(len(symptom.steps) for symptom in SYMPTOMS)


def test_panel_orders_its_steps_by_the_chosen_symptom() -> None:
    panel = TriagePanel(TriageParams(), symptom_for("oom"))
    shown = [row.children[1].value for row in panel.steps_box.children]
    assert "Step 8: Queue vs OOM" in shown[0] and "read first" in shown[0]
    assert "Step 4: Resources" in shown[1] and "read first" not in shown[2]
    panel.symptom.value = ""
    assert "Step 1: Endpoints and routing" in panel.steps_box.children[0].children[1].value


# ---------------------------------------------------------------------------------- when the panel shows


def test_panel_rule() -> None:
    session = {SESSION_ENV: "/work/triage.ipynb"}
    assert wants_panel(interactive=True, target_given=True, environ={})
    assert wants_panel(interactive=False, target_given=False, environ=session)  # JupyterLab, nothing set
    assert not wants_panel(interactive=False, target_given=True, environ=session)  # a target: headless run
    assert not wants_panel(interactive=False, target_given=False, environ={})  # papermill: never a widget
