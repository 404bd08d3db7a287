"""The code catalog, the cause graph and root-cause ranking (docs/contracts.md#findingsjson-v1)."""

from __future__ import annotations

import pytest

from nbhelpers.checks import STEP_IDS
from nbhelpers.findings import catalog
from nbhelpers.findings.catalog import CATALOG, CAUSE_EDGES, Severity, reachable
from nbhelpers.findings.model import Finding, apply_ignores, rank_root_causes

DESIGN_CODES = {
    "ISVC_NOT_READY": ("endpoints", "critical"),
    "ENDPOINTS_NONE_READY": ("endpoints", "critical"),
    "ENDPOINTS_SELECTOR_MISMATCH": ("endpoints", "critical"),
    "ROUTING_REVISION_NOT_READY": ("endpoints", "critical"),
    "ROUTING_LAYER_MISMATCH": ("endpoints", "critical"),
    "ROUTING_HOST_MISMATCH": ("endpoints", "critical"),
    "PROBE_READINESS_MISSING": ("probes", "warning"),
    "PROBE_LIVENESS_KILLS_DURING_LOAD": ("probes", "critical"),
    "PROBE_STARTUP_BUDGET_SHORT": ("probes", "warning"),
    "PROBE_NOT_MODEL_AWARE": ("probes", "warning"),
    "PORT_MISMATCH": ("ports", "critical"),
    "RESOURCES_REQUESTS_MISSING": ("resources", "warning"),
    "RESOURCES_GPU_UNSCHEDULABLE": ("resources", "critical"),
    "RESOURCES_HOST_OOMKILLED": ("resources", "critical"),
    "RESOURCES_GPU_NOT_VISIBLE": ("resources", "critical"),
    "RESOURCES_SHM_MISSING": ("resources", "warning"),
    "COLDSTART_SCALE_TO_ZERO": ("cold_start", "warning"),
    "COLDSTART_EXCEEDS_TIMEOUT": ("cold_start", "critical"),
    "COLDSTART_CHURN": ("cold_start", "warning"),
    "HPA_METRICS_API_UNAVAILABLE": ("metric_pipeline", "critical"),
    "HPA_METRIC_FETCH_FAILED": ("metric_pipeline", "critical"),
    "HPA_METRIC_SERIES_MISSING": ("metric_pipeline", "warning"),
    "HPA_METRICS_API_CONFLICT": ("metric_pipeline", "warning"),
    "HPA_MISSING": ("scale_target", "warning"),
    "HPA_TARGET_NOT_FOUND": ("scale_target", "critical"),
    "HPA_TARGET_NOT_SERVING": ("scale_target", "critical"),
    "HPA_CONFLICT": ("scale_target", "warning"),
    "HPA_CPU_METRIC_ON_GPU": ("scale_target", "warning"),
    "HPA_TARGET_ABOVE_POD_CAPACITY": ("scale_target", "warning"),
    "HPA_AT_MAX": ("scale_target", "warning"),
    "HPA_BEHAVIOR_SLOW": ("scale_target", "warning"),
    "QUEUE_SATURATION": ("queue_vs_oom", "warning"),
    "KV_CACHE_PRESSURE": ("queue_vs_oom", "warning"),
    "GPU_OOM": ("queue_vs_oom", "critical"),
    "VLLM_KV_CAPACITY_EXCEEDED": ("queue_vs_oom", "critical"),
    "VLLM_MEMORY_UTILIZATION_RISKY": ("queue_vs_oom", "warning"),
    "ENGINE_START_FAILED": ("queue_vs_oom", "critical"),
    "CONTAINER_FAILING_UNKNOWN_CAUSE": ("queue_vs_oom", "critical"),
    "TIMEOUT_MISALIGNED": ("timeouts", "warning"),
    "TIMEOUT_LB_DEFAULT": ("timeouts", "warning"),
}

# Each initial edge of docs/contracts.md#findingsjson-v1, spelled out so a change to the graph is a visible change here.
DESIGN_EDGES = [
    ("ENGINE_START_FAILED", "PROBE_LIVENESS_KILLS_DURING_LOAD"),
    ("ENGINE_START_FAILED", "ENDPOINTS_NONE_READY"),
    ("ENGINE_START_FAILED", "ISVC_NOT_READY"),
    ("ENGINE_START_FAILED", "ROUTING_REVISION_NOT_READY"),
    ("CONTAINER_FAILING_UNKNOWN_CAUSE", "ENDPOINTS_NONE_READY"),
    ("CONTAINER_FAILING_UNKNOWN_CAUSE", "ISVC_NOT_READY"),
    ("GPU_OOM", "CONTAINER_FAILING_UNKNOWN_CAUSE"),
    ("PROBE_LIVENESS_KILLS_DURING_LOAD", "CONTAINER_FAILING_UNKNOWN_CAUSE"),
    ("GPU_OOM", "PROBE_LIVENESS_KILLS_DURING_LOAD"),
    ("PORT_MISMATCH", "PROBE_NOT_MODEL_AWARE"),
    ("RESOURCES_HOST_OOMKILLED", "PROBE_READINESS_MISSING"),
    ("PROBE_LIVENESS_KILLS_DURING_LOAD", "ENDPOINTS_NONE_READY"),
    ("PORT_MISMATCH", "ROUTING_REVISION_NOT_READY"),
    ("RESOURCES_SHM_MISSING", "ENDPOINTS_NONE_READY"),
    ("ENDPOINTS_SELECTOR_MISMATCH", "ENDPOINTS_NONE_READY"),
    ("COLDSTART_EXCEEDS_TIMEOUT", "ROUTING_REVISION_NOT_READY"),
    ("ENDPOINTS_NONE_READY", "ISVC_NOT_READY"),
    ("ROUTING_HOST_MISMATCH", "ISVC_NOT_READY"),
    ("COLDSTART_SCALE_TO_ZERO", "COLDSTART_EXCEEDS_TIMEOUT"),
    ("HPA_CONFLICT", "COLDSTART_CHURN"),
    ("RESOURCES_REQUESTS_MISSING", "HPA_METRIC_FETCH_FAILED"),
    ("HPA_METRIC_SERIES_MISSING", "HPA_METRIC_FETCH_FAILED"),
    ("HPA_TARGET_ABOVE_POD_CAPACITY", "QUEUE_SATURATION"),
    ("RESOURCES_GPU_UNSCHEDULABLE", "QUEUE_SATURATION"),
    ("VLLM_MEMORY_UTILIZATION_RISKY", "GPU_OOM"),
    ("KV_CACHE_PRESSURE", "QUEUE_SATURATION"),
    ("QUEUE_SATURATION", "TIMEOUT_LB_DEFAULT"),
    ("COLDSTART_EXCEEDS_TIMEOUT", "TIMEOUT_MISALIGNED"),
]


def test_catalog_holds_every_design_code_with_its_step_and_severity() -> None:
    assert set(DESIGN_CODES) <= set(CATALOG)
    for code, (step, severity) in DESIGN_CODES.items():
        assert CATALOG[code].step == step
        assert CATALOG[code].severity.value == severity


def test_every_code_has_reference_text_and_edges_entry() -> None:
    for code, info in CATALOG.items():
        assert info.step in STEP_IDS
        assert len(info.why) > 40, code
        assert code in CAUSE_EDGES


@pytest.mark.parametrize(("cause", "effect"), DESIGN_EDGES)
def test_design_edges_present(cause: str, effect: str) -> None:
    assert effect in CAUSE_EDGES[cause]


@pytest.mark.parametrize(
    "effect",
    [
        "COLDSTART_EXCEEDS_TIMEOUT",
        "PROBE_READINESS_MISSING",
        "ENDPOINTS_NONE_READY",
        "ROUTING_REVISION_NOT_READY",
        "HPA_TARGET_NOT_SERVING",
        "QUEUE_SATURATION",
    ],
)
@pytest.mark.parametrize(
    "cause",
    [
        "RESOURCES_INIT_CONTAINER_FAILED",
        "RESOURCES_IMAGE_PULL_FAILED",
        "RESOURCES_POD_CREATION_REJECTED",
        "RESOURCES_CONTAINER_CONFIG_ERROR",
    ],
)
def test_a_container_that_never_runs_explains_what_a_pod_that_never_starts_shows(cause: str, effect: str) -> None:
    assert effect in CAUSE_EDGES[cause]


@pytest.mark.parametrize("effect", ["HPA_BEHAVIOR_SLOW", "HPA_AT_MAX", "HPA_TARGET_NOT_SERVING", "COLDSTART_CHURN"])
def test_rejected_pods_explain_what_the_autoscaler_seems_to_do(effect: str) -> None:
    assert effect in CAUSE_EDGES["RESOURCES_POD_CREATION_REJECTED"]


@pytest.mark.parametrize("code", ["PROBE_SIDECAR_NOT_READY", "PROBE_FAILS_UNDER_LOAD"])
@pytest.mark.parametrize(
    "effect", ["ENDPOINTS_NONE_READY", "ROUTING_REVISION_NOT_READY", "CONTAINER_FAILING_UNKNOWN_CAUSE"]
)
def test_probe_codes_added_for_issue_14_explain_unready_pods(code: str, effect: str) -> None:
    assert effect in CAUSE_EDGES[code]
    assert "ISVC_NOT_READY" in reachable(code)


def test_probe_kills_under_load_have_no_edge_to_the_queue() -> None:
    """A kill under load leaves a queue behind, but an edge to QUEUE_SATURATION would let every cause of failing
    probes (a port mismatch, an OOM) explain every queue and timeout finding through it. The critical kill still
    ranks before the queue's warning by severity."""
    assert "QUEUE_SATURATION" not in reachable("PROBE_FAILS_UNDER_LOAD")
    assert "TIMEOUT_LB_DEFAULT" not in reachable("PORT_MISMATCH")
    assert rank_root_causes([_finding("QUEUE_SATURATION"), _finding("PROBE_FAILS_UNDER_LOAD")], STEP_IDS) == [
        "PROBE_FAILS_UNDER_LOAD",
        "QUEUE_SATURATION",
    ]


def test_paths_through_absent_codes_count() -> None:
    # GPU_OOM -> PROBE_* -> ENDPOINTS_NONE_READY -> ISVC_NOT_READY
    assert "ISVC_NOT_READY" in reachable("VLLM_MEMORY_UTILIZATION_RISKY")
    assert rank_root_causes([_finding("ISVC_NOT_READY"), _finding("VLLM_MEMORY_UTILIZATION_RISKY")], STEP_IDS) == [
        "VLLM_MEMORY_UTILIZATION_RISKY",
        "ISVC_NOT_READY",
    ]


def _finding(code: str, severity: Severity | None = None) -> Finding:
    return Finding(code=code, title=code, summary="s", severity=severity)


def test_ranking_cause_before_effect_then_severity_then_step_then_name() -> None:
    findings = [
        _finding("ISVC_NOT_READY"),
        _finding("ENDPOINTS_NONE_READY"),
        _finding("PORT_MISMATCH"),
        _finding("TIMEOUT_LB_DEFAULT"),  # warning; explained by HPA_TARGET_NOT_FOUND through QUEUE_SATURATION
        _finding("HPA_TARGET_NOT_FOUND"),  # critical, scale_target: after the critical endpoints codes
        _finding("PORT_MISMATCH"),  # duplicates collapse
    ]
    assert rank_root_causes(findings, STEP_IDS) == [
        "PORT_MISMATCH",
        "ENDPOINTS_NONE_READY",
        "ISVC_NOT_READY",
        "HPA_TARGET_NOT_FOUND",
        "TIMEOUT_LB_DEFAULT",
    ]


def test_warning_cause_still_precedes_its_critical_effect() -> None:
    findings = [_finding("GPU_OOM"), _finding("VLLM_MEMORY_UTILIZATION_RISKY")]
    assert rank_root_causes(findings, STEP_IDS) == ["VLLM_MEMORY_UTILIZATION_RISKY", "GPU_OOM"]


def test_info_findings_are_not_root_causes() -> None:
    assert rank_root_causes([_finding("PORT_MISMATCH", Severity.INFO)], STEP_IDS) == []


def test_ignores_turn_findings_into_info_and_say_who() -> None:
    ignored = apply_ignores([_finding("PORT_MISMATCH")], {"PORT_MISMATCH": "--ignore"})
    assert ignored[0].level is Severity.INFO
    assert "ignored by --ignore" in ignored[0].summary


def test_unknown_code_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown finding code"):
        _finding("NOT_A_CODE")


def test_info_codes_are_notes_outside_the_cause_graph() -> None:
    info_codes = [code for code, info in CATALOG.items() if info.severity is Severity.INFO]
    assert "PROBE_LOAD_TIME_UNKNOWN" in info_codes
    for code in info_codes:
        assert CAUSE_EDGES[code] == frozenset()
        assert all(code not in targets for targets in CAUSE_EDGES.values())


# --- the catalog data file and its loader ------------------------------------------------------------


def test_the_packaged_catalog_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    first = catalog.load()
    assert catalog.CATALOG is first.codes and catalog.CAUSE_EDGES is first.edges

    def no_second_read(package: str) -> None:
        raise AssertionError(f"the catalog was read again from {package}")

    monkeypatch.setattr(catalog, "files", no_second_read)
    assert catalog.load() is first


def _entry(code: str, severity: str = "warning") -> str:
    return (
        f"  - code: {code}\n    step: probes\n    severity: {severity}\n    title: a title\n"
        "    why: why it matters\n    fix: how to fix it\n    evidence: what it reads\n"
    )


def _document(*entries: str, edges: str = "[]") -> str:
    return "codes:\n" + "".join(entries) + f"edges: {edges}\n"


def test_loader_expands_patterns_and_leaves_info_codes_and_self_edges_out() -> None:
    text = _document(
        _entry("A_ONE"),
        _entry("A_TWO", "critical"),
        _entry("A_NOTE", "info"),
        _entry("B_EFFECT"),
        edges="[{causes: [A_*], effects: [A_*, B_EFFECT]}]",
    )
    parsed = catalog.parse_catalog(text)
    assert list(parsed.codes) == ["A_ONE", "A_TWO", "A_NOTE", "B_EFFECT"]
    assert parsed.codes["A_TWO"].severity is Severity.CRITICAL
    assert (parsed.codes["A_ONE"].title, parsed.codes["A_ONE"].fix) == ("a title", "how to fix it")
    assert parsed.edges == {
        "A_ONE": frozenset({"A_TWO", "B_EFFECT"}),
        "A_TWO": frozenset({"A_ONE", "B_EFFECT"}),
        "A_NOTE": frozenset(),
        "B_EFFECT": frozenset(),
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            _document(_entry("A_ONE", "fatal")),
            r"codes\[0\] \(A_ONE\): severity 'fatal' is not one of critical, warning, info",
        ),
        (_document(_entry("A_ONE"), _entry("A_ONE")), r"codes\[1\] \(A_ONE\): duplicate code 'A_ONE'"),
        (
            _document(_entry("A_ONE"), edges="[{causes: [A_ONE], effects: [PROBE_*]}]"),
            r"edges\[0\]\.effects: pattern 'PROBE_\*' matches no code",
        ),
        (
            _document(_entry("A_ONE"), edges="[{causes: [NOPE], effects: [A_ONE]}]"),
            r"edges\[0\]\.causes: pattern 'NOPE' matches no code",
        ),
        (
            _document(_entry("A_ONE"), _entry("A_NOTE", "info"), edges="[{causes: [A_ONE], effects: [A_NOTE]}]"),
            r"edges\[0\]\.effects: pattern 'A_NOTE' matches only info codes, which take no edges",
        ),
        (_document(_entry("A_ONE").replace("    fix: how to fix it\n", "")), r"codes\[0\] \(A_ONE\): expected exactly"),
        (_document(_entry("A_ONE").replace("a title", "''")), r"codes\[0\] \(A_ONE\): title must be non-empty text"),
        ("codes: [\n", "not valid YAML"),
        ("codes: []\n", "expected a mapping with exactly the keys 'codes' and 'edges'"),
    ],
)
def test_a_malformed_catalog_is_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(catalog.CatalogError, match=rf"^catalog\.yaml: .*{message}"):
        catalog.parse_catalog(text)


# The LLMInferenceService route chain (issue #18): a broken link explains the links behind it and the service's own
# not-ready condition; the first broken link leads.
LLMISVC_EDGES = [
    ("ROUTING_GATEWAY_NOT_PROGRAMMED", "ROUTING_HTTPROUTE_NOT_ACCEPTED"),
    ("ROUTING_GATEWAY_NOT_PROGRAMMED", "ROUTING_POOL_NOT_ACCEPTED"),
    ("ROUTING_POOL_NOT_ACCEPTED", "ROUTING_HTTPROUTE_NOT_ACCEPTED"),
    ("ENDPOINTS_POOL_SELECTS_NO_POD", "ENDPOINTS_PICKER_NOT_READY"),
    ("ENDPOINTS_PICKER_NOT_READY", "LLMISVC_NOT_READY"),
    ("ENDPOINTS_POOL_SELECTS_NO_POD", "LLMISVC_NOT_READY"),
    ("ENDPOINTS_NONE_READY", "LLMISVC_NOT_READY"),
    ("ROUTING_GATEWAY_NOT_PROGRAMMED", "LLMISVC_NOT_READY"),
    ("ROUTING_HTTPROUTE_NOT_ACCEPTED", "LLMISVC_NOT_READY"),
    ("ROUTING_POOL_NOT_ACCEPTED", "LLMISVC_NOT_READY"),
    # vLLM listening elsewhere than the pool's targetPort is reported by ports (the cause) and by endpoints (the pool).
    ("PORT_MISMATCH", "ENDPOINTS_POOL_SELECTS_NO_POD"),
]


@pytest.mark.parametrize(("cause", "effect"), LLMISVC_EDGES)
def test_llmisvc_route_chain_edges_present(cause: str, effect: str) -> None:
    assert effect in CAUSE_EDGES[cause]


def test_a_crashing_engine_explains_a_not_ready_llmisvc_through_its_endpoints() -> None:
    findings = [_finding("LLMISVC_NOT_READY"), _finding("ENDPOINTS_NONE_READY"), _finding("ENGINE_START_FAILED")]
    assert rank_root_causes(findings, STEP_IDS) == ["ENGINE_START_FAILED", "ENDPOINTS_NONE_READY", "LLMISVC_NOT_READY"]


@pytest.mark.parametrize("code", ["PROBE_READINESS_MISSING", "PROBE_NOT_MODEL_AWARE", "RESOURCES_REQUESTS_MISSING"])
def test_settings_that_end_no_containers_run_do_not_explain_the_fallback_quote(code: str) -> None:
    """A crashing container's own words outrank a missing readiness probe or missing requests (issue #14): neither
    makes a container exit with an error, so neither is its cause."""
    assert "CONTAINER_FAILING_UNKNOWN_CAUSE" not in CAUSE_EDGES[code]
