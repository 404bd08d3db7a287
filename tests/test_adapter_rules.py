"""prometheus-adapter rules: naming (Go's regexp expansion), association labels, and configs found in ConfigMaps."""

from __future__ import annotations

import pytest

from nbhelpers.facts.adapter_rules import configs_in, parse_config

CONFIG = """
rules:
- seriesQuery: 'vllm:num_requests_waiting{namespace!="",pod!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      kubernetes_pod_name: {resource: pods}
  name: {matches: "^vllm:(.*)$", as: "vllm_${1}"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
- seriesQuery: '{__name__=~"^container_.*_seconds_total",container!="POD",namespace!=""}'
  seriesFilters: [{isNot: "^container_cpu_cfs_.*"}]
  resources: {template: "<<.Resource>>"}
  name: {matches: "^container_(.*)_seconds_total$"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)'
externalRules:
- seriesQuery: '{__name__="queue_depth"}'
  resources: {overrides: {namespace: {resource: namespace}}}
  name: {matches: "^(?P<base>.*)_depth$", as: "${base}_size$$"}
resourceRules:
  cpu: {containerQuery: 'x'}
"""


def test_rules_and_apis() -> None:
    config = parse_config(CONFIG, "ConfigMap/monitoring/adapter")
    assert config.apis() == frozenset({"custom.metrics.k8s.io", "external.metrics.k8s.io", "metrics.k8s.io"})
    vllm, containers = config.rules_for("custom.metrics.k8s.io")
    (external,) = config.rules_for("external.metrics.k8s.io")
    assert vllm.series_name == "vllm:num_requests_waiting"
    assert vllm.label_matchers == (("namespace", "!=", ""), ("pod", "!=", ""))
    assert vllm.exposes("vllm:num_requests_waiting") == "vllm_num_requests_waiting"
    assert vllm.exposes("vllm:num_requests_running") is None  # not the series it discovers
    assert vllm.label_for("pod") == "kubernetes_pod_name" and vllm.label_for("namespace") == "namespace"
    # A pattern rule, with no "as" and one group: $1; its filters and the name regex both apply.
    assert containers.series_name is None
    assert containers.exposes("container_cpu_usage_seconds_total") == "cpu_usage"
    assert containers.exposes("container_cpu_cfs_throttled_seconds_total") is None
    assert containers.exposes("node_cpu_seconds_total") is None
    assert containers.label_for("pod") == "pod"
    # Named groups and "$$" expand as Go's Regexp.ExpandString does.
    assert external.series_name == "queue_depth"
    assert external.exposes("queue_depth") == "queue_size$"
    assert external.label_for("pod") is None


def test_no_as_and_no_group_keeps_the_whole_name() -> None:
    (rule,) = parse_config("rules: [{seriesQuery: 'up{job=\"x\"}', name: {matches: 'up'}}]").rules
    assert rule.name_as == "$0" and rule.exposes("up") == "up"


def test_not_a_configuration() -> None:
    with pytest.raises(ValueError):
        parse_config("- just\n- a list\n")
    with pytest.raises(ValueError):
        parse_config("rules: [unclosed")


def test_configs_are_found_by_label_and_namespace() -> None:
    labelled = {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {
            "name": "adapter",
            "namespace": "monitoring",
            "labels": {"app.kubernetes.io/name": "prometheus-adapter"},
        },
        "data": {"config.yaml": CONFIG},
    }
    unlabelled = {**labelled, "metadata": {"name": "other", "namespace": "monitoring"}}
    broken = {**labelled, "data": {"config.yaml": "rules: [unclosed"}}
    assert [c.source for c in configs_in([labelled, unlabelled, broken], "monitoring")] == [
        "ConfigMap/monitoring/adapter"
    ]
    assert configs_in([labelled], "kube-system") == []
