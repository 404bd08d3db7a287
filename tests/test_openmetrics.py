"""The OpenMetrics writer: the exact text promtool backfills, and the input it refuses."""

from __future__ import annotations

import pytest

from nbhelpers.metrics.openmetrics import (
    HistogramFamily,
    HistogramPoint,
    HistogramSeries,
    SampleFamily,
    Series,
    render,
)


def test_families_render_as_openmetrics() -> None:
    families = [
        SampleFamily("vllm:num_requests_running", "gauge", (Series({"pod": "a"}, ((30, 2.5), (15, 1))),), "Running"),
        SampleFamily("vllm:num_preemptions", "counter", (Series({"pod": "a"}, ((15, 0), (30, 3))),)),
        SampleFamily("nginx_ingress_controller_requests", "unknown", (Series({"status": "504"}, ((15, 7),)),)),
        HistogramFamily(
            "vllm:e2e_request_latency_seconds",
            (HistogramSeries({"pod": "a"}, (HistogramPoint(15, ((0.5, 1), (1.0, 3)), 4.25, 4),)),),
        ),
    ]
    assert render(families) == (
        "# TYPE vllm:num_requests_running gauge\n"
        "# HELP vllm:num_requests_running Running\n"
        'vllm:num_requests_running{pod="a"} 1 15\n'
        'vllm:num_requests_running{pod="a"} 2.5 30\n'
        "# TYPE vllm:num_preemptions counter\n"
        'vllm:num_preemptions_total{pod="a"} 0 15\n'
        'vllm:num_preemptions_total{pod="a"} 3 30\n'
        "# TYPE nginx_ingress_controller_requests unknown\n"
        'nginx_ingress_controller_requests{status="504"} 7 15\n'
        "# TYPE vllm:e2e_request_latency_seconds histogram\n"
        'vllm:e2e_request_latency_seconds_bucket{le="0.5",pod="a"} 1 15\n'
        'vllm:e2e_request_latency_seconds_bucket{le="1",pod="a"} 3 15\n'
        'vllm:e2e_request_latency_seconds_bucket{le="+Inf",pod="a"} 4 15\n'
        'vllm:e2e_request_latency_seconds_sum{pod="a"} 4.25 15\n'
        'vllm:e2e_request_latency_seconds_count{pod="a"} 4 15\n'
        "# EOF\n"
    )


def test_label_values_are_escaped_and_special_numbers_spelled_out() -> None:
    series = Series({"reason": 'say "hi"\\\n'}, ((1, float("nan")), (2, float("inf"))))
    text = render([SampleFamily("m", "gauge", (series,))])
    assert 'm{reason="say \\"hi\\"\\\\\\n"} NaN 1\n' in text
    assert "} +Inf 2\n" in text


def _point(buckets: tuple[tuple[float, float], ...], count: float = 5) -> HistogramFamily:
    return HistogramFamily("h", (HistogramSeries({}, (HistogramPoint(1, buckets, 1.0, count),)),))


@pytest.mark.parametrize(
    ("families", "complaint"),
    [
        ([SampleFamily("x_total", "counter", ())], "without _total"),
        ([SampleFamily("x", "gauge", ()), SampleFamily("x", "gauge", ())], "given twice"),
        ([SampleFamily("bad-name", "gauge", ())], "invalid metric name"),
        ([SampleFamily("x", "gauge", (Series({"bad-label": "v"}, ((1, 1),)),))], "invalid label name"),
        ([SampleFamily("x", "gauge", (Series({}, ((1, 1), (1, 2))),))], "same timestamp"),
        ([_point(((1.0, 3), (0.5, 1)))], "ascending"),
        ([_point(((0.5, 3), (1.0, 1)))], "cumulative"),
        ([_point(((0.5, 1), (1.0, 6)))], "cumulative"),  # more below 1.0 than in total
        ([HistogramFamily("h", (HistogramSeries({"le": "1"}, ()),))], "reserved"),
    ],
)
def test_invalid_input_is_refused(families: list[SampleFamily | HistogramFamily], complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        render(families)
