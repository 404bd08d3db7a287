"""The query catalog (docs/contracts.md#metric-catalog): stable ids, templates that render to valid PromQL for one predictor."""

from __future__ import annotations

import re
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml
from promharness import require_prometheus_binaries

from nbhelpers.metrics import catalog
from nbhelpers.util.times import Window, query_step_seconds

NAMESPACE = "llm"
ISVC = "vllm-llm"
SELECTOR = 'namespace="llm", pod=~"vllm-llm-predictor-.+"'
DCGM_SELECTOR = 'exported_namespace="llm", exported_pod=~"vllm-llm-predictor-.+"'
ALL_TEMPLATES = [(spec, index) for spec in catalog.CATALOG for index in range(len(spec.templates))]

# Every metric name docs/contracts.md#metric-catalog lists must be asked for by some template.
DESIGN_METRIC_NAMES = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "vllm:num_preemptions_total",
    "vllm:time_to_first_token_seconds_bucket",
    "vllm:e2e_request_latency_seconds_bucket",
    "vllm:request_queue_time_seconds_bucket",
    "vllm:inter_token_latency_seconds_bucket",
    "vllm:time_per_output_token_seconds_bucket",
    "vllm:request_success_total",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:cache_config_info",
    "kube_pod_container_status_restarts_total",
    "kube_pod_container_status_last_terminated_reason",
    "kube_pod_status_ready",
    "kube_horizontalpodautoscaler_status_current_replicas",
    "kube_horizontalpodautoscaler_status_desired_replicas",
    "kube_deployment_status_replicas_available",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_GPU_UTIL",
    "istio_requests_total",
    "nginx_ingress_controller_requests",
    "revision_app_request_count",
    "revision_request_count",
    "activator_request_count",
)


def template_id(item: tuple[catalog.QuerySpec, int]) -> str:
    spec, index = item
    return f"{spec.id}[{index}]"


def test_ids_are_unique_snake_case_and_indexed() -> None:
    ids = [spec.id for spec in catalog.CATALOG]
    assert len(ids) == len(set(ids))
    assert all(re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", query_id) for query_id in ids)
    assert list(catalog.BY_ID) == ids
    assert all(spec.templates and spec.unit and spec.aggregation for spec in catalog.CATALOG)


def test_every_metric_of_the_design_is_queried() -> None:
    templates = "\n".join(template for spec in catalog.CATALOG for template in spec.templates)
    missing = [name for name in DESIGN_METRIC_NAMES if not re.search(rf"\b{re.escape(name)}\{{", templates)]
    assert missing == []


@pytest.mark.parametrize("item", ALL_TEMPLATES, ids=template_id)
def test_templates_render_for_the_predictor(item: tuple[catalog.QuerySpec, int]) -> None:
    spec, index = item
    template = spec.templates[index]
    promql = catalog.render(spec, index, NAMESPACE, ISVC, 15)
    assert not re.search(r"\{(sel|dcgm_sel|rate|namespace|isvc)\}|\{\{|\}\}", promql), promql
    for opening, closing in ("()", "{}", "[]"):
        assert promql.count(opening) == promql.count(closing), promql
    if "{sel}" in template:
        assert "{" + SELECTOR in promql
    elif "{dcgm_sel}" in template:
        assert "{" + DCGM_SELECTOR + "}" in promql
    elif "knative-local-gateway" in promql:  # the outer gateway's view names only the shared local gateway
        assert 'destination_service_name="knative-local-gateway"' in promql, promql
    else:  # autoscaler, deployment and edge series are selected by the service's own names
        assert '="llm"' in promql and re.search(r'=~?"vllm-llm(-predictor)?(\.\*)?"', promql), promql
    if "histogram_quantile" in promql:
        assert "sum by (le) (rate(" in promql


def test_every_rendered_query_parses_in_prometheus(tmp_path: Path) -> None:
    """promtool checks each query with Prometheus' own parser (as recording rules)."""
    _prometheus, promtool = require_prometheus_binaries()
    rules = [
        {"record": f"catalog:{spec.id}:{index}", "expr": catalog.render(spec, index, NAMESPACE, ISVC, 15)}
        for spec, index in ALL_TEMPLATES
    ]
    rules_file = tmp_path / "catalog-rules.yml"
    rules_file.write_text(yaml.safe_dump({"groups": [{"name": "catalog", "rules": rules}]}))
    checked = subprocess.run(
        [promtool, "check", "rules", str(rules_file)], capture_output=True, text=True, timeout=30, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules)} rules found" in checked.stdout + checked.stderr


def test_fallbacks_put_the_newest_metric_name_first() -> None:
    order = {
        "vllm_kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        "vllm_itl_p95": ("vllm:inter_token_latency_seconds_bucket", "vllm:time_per_output_token_seconds_bucket"),
        "vllm_preemptions_rate": ("vllm:num_preemptions_total", "vllm:num_preemptions{"),
        "gpu_fb_used_mib": ("by (pod)", "by (exported_pod)"),
    }
    for query_id, (first, second) in order.items():
        templates = catalog.BY_ID[query_id].templates
        assert first in templates[0] and second in templates[1], query_id


@pytest.mark.parametrize(("step", "rate_range"), [(15, "[60s]"), (16, "[64s]"), (55, "[220s]")])
def test_rate_range_covers_four_steps_and_at_least_a_minute(step: int, rate_range: str) -> None:
    promql = catalog.render(catalog.BY_ID["vllm_request_rate"], 0, NAMESPACE, ISVC, step)
    assert promql.endswith(f"{rate_range}))")


@pytest.mark.parametrize(
    ("namespace", "isvc"),
    [
        ('llm"}', ISVC),
        (NAMESPACE, 'vllm-llm"} or vector(1) or x{a="'),
        (NAMESPACE, "vllm llm"),
        (NAMESPACE, "vllm-llm|other"),
        (NAMESPACE, "vllm-.*"),
        ("", ISVC),
        (NAMESPACE, "vllm-llm\n"),
    ],
)
def test_names_that_could_change_the_query_are_refused(namespace: str, isvc: str) -> None:
    with pytest.raises(ValueError, match="invalid Kubernetes name"):
        catalog.render(catalog.BY_ID["vllm_running"], 0, namespace, isvc, 15)


START = datetime(2026, 1, 15, 11, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("length", "step"),
    [
        (timedelta(hours=1), 15),
        (timedelta(seconds=165_000), 15),  # 11,000 points of 15 s
        (timedelta(seconds=165_001), 16),
        (timedelta(hours=48), 16),
        (timedelta(days=7), 55),
    ],
)
def test_step_keeps_every_series_under_11000_points(length: timedelta, step: int) -> None:
    window = Window(START, START + length)
    assert query_step_seconds(window) == step
    assert window.seconds / step <= 11_000


def test_hpa_series_also_match_hpas_named_by_hand(tmp_path: Path) -> None:
    """An HPA the user named "llm-scaler" scales the predictor: Prometheus' own engine (promtool test rules)
    finds its kube-state-metrics series; KServe-named HPAs keep the PromQL a bundle recorded."""
    _prometheus, promtool = require_prometheus_binaries()
    spec = catalog.BY_ID["hpa_current_replicas"]
    plain = catalog.render(spec, 0, NAMESPACE, ISVC, 15)
    assert catalog.render(spec, 0, NAMESPACE, ISVC, 15, ("vllm-llm-predictor",)) == plain
    promql = catalog.render(spec, 0, NAMESPACE, ISVC, 15, ("llm-scaler", "vllm-llm-predictor", "team.hpa"))
    assert 'horizontalpodautoscaler=~"vllm-llm-predictor.*|llm-scaler|team[.]hpa"' in promql
    with pytest.raises(ValueError, match="invalid Kubernetes name"):
        catalog.render(spec, 0, NAMESPACE, ISVC, 15, ('x"}) or vector(1) #',))

    series = 'kube_horizontalpodautoscaler_status_current_replicas{{namespace="llm", horizontalpodautoscaler="{}"}}'
    tests = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": series.format("llm-scaler"), "values": "3 3 3"},
                    {"series": series.format("other-service"), "values": "9 9 9"},
                ],
                "promql_expr_test": [
                    {"expr": promql, "eval_time": "2m", "exp_samples": [{"labels": "{}", "value": 3}]},
                    {"expr": plain, "eval_time": "2m", "exp_samples": []},
                ],
            }
        ],
    }
    test_file = tmp_path / "hpa-test.yml"
    test_file.write_text(yaml.safe_dump(tests))
    checked = subprocess.run(
        [promtool, "test", "rules", str(test_file)], capture_output=True, text=True, timeout=30, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_predictor_hpa_names_are_the_hpas_scaling_the_predictor() -> None:
    from nbhelpers.evidence.gather import predictor_hpa_names
    from nbhelpers.evidence.model import Target
    from nbhelpers.sources import kinds

    def hpa(name: str, deployment: str) -> dict[str, object]:
        return {"metadata": {"name": name}, "spec": {"scaleTargetRef": {"kind": "Deployment", "name": deployment}}}

    buckets = {
        kinds.DEPLOYMENT.key: {
            "d1": {"metadata": {"name": "custom-deploy", "labels": {"serving.kserve.io/inferenceservice": ISVC}}},
            "d2": {"metadata": {"name": "unrelated", "labels": {}}},
        },
        kinds.HPA.key: {
            "h1": hpa("llm-scaler", "custom-deploy"),
            "h2": hpa("kserve-made", f"{ISVC}-predictor"),
            "h3": hpa("someone-else", "unrelated"),
        },
    }
    assert predictor_hpa_names(buckets, Target(NAMESPACE, ISVC)) == ("kserve-made", "llm-scaler")
