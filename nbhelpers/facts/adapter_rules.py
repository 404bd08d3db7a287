"""prometheus-adapter's discovery rules: which Prometheus series a custom or external metric comes from.

The adapter (kubernetes-sigs/prometheus-adapter, see its configuration walkthrough) reads a ``config.yaml`` of rules.
Each rule discovers series with ``seriesQuery`` (narrowed by ``seriesFilters``), associates them with
Kubernetes objects through labels (``resources.overrides`` label → resource, or a ``template``),
names them with ``name.matches`` / ``name.as`` (a regular expression and its expansion; with no
``as``, ``$0`` when the expression has no group and ``$1`` when it has one) and queries them with
``metricsQuery``. ``rules`` serve custom.metrics.k8s.io, ``externalRules`` external.metrics.k8s.io
and ``resourceRules`` metrics.k8s.io.

This module only reads the configuration: it maps a metric name an HPA asks for back to the
series a rule would read, so a check can look for that series in the evidence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from nbhelpers.sources import kube
from nbhelpers.util.limits import LimitExceeded
from nbhelpers.util.safe_load import load_yaml

CONFIG_KEY = "config.yaml"
ADAPTER_LABEL = "app.kubernetes.io/name=prometheus-adapter"
_RESOURCE_NAMES = {"pod": "pod", "pods": "pod", "namespace": "namespace", "namespaces": "namespace"}
_SERIES_NAME = re.compile(r"^\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*(\{.*\})?\s*$", re.DOTALL)
_NAME_MATCHER = re.compile(r"""__name__\s*(=~|=)\s*(["'`])(.*?)\2""")
_LABEL_MATCHER = re.compile(r"""([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*(["'`])(.*?)\3""")
_GO_EXPANSION = re.compile(r"\$\$|\$\{(\w+)\}|\$(\w+)")


@dataclass(frozen=True)
class AdapterRule:
    """One discovery rule. ``api`` is ``custom.metrics.k8s.io`` or ``external.metrics.k8s.io``."""

    api: str
    series_query: str
    series_name: str | None  # the literal metric name of the series query
    series_pattern: str | None  # a ``__name__=~`` regular expression
    label_matchers: tuple[tuple[str, str, str], ...]  # (label, operator, value) of the series query
    filters: tuple[tuple[bool, str], ...]  # (positive, regular expression) on the series name
    overrides: Mapping[str, str]  # label -> normalized resource (pod, namespace, or as written)
    template: str | None
    name_matches: str
    name_as: str
    metrics_query: str

    def exposes(self, series: str) -> str | None:
        """The API metric name this rule gives ``series``, ``None`` when the rule does not discover it."""
        if self.series_name is not None and series != self.series_name:
            return None
        if self.series_pattern is not None and not re.search(self.series_pattern, series):
            return None
        if self.series_name is None and self.series_pattern is None:
            return None
        for positive, pattern in self.filters:
            if bool(re.search(pattern, series)) != positive:
                return None
        match = re.search(self.name_matches, series)
        if match is None:
            return None
        return _expand(self.name_as, match)

    def label_for(self, resource: str) -> str | None:
        """The series label that associates ``resource`` (``pod`` or ``namespace``), ``None`` when none does."""
        for label, target in self.overrides.items():
            if target == resource:
                return label
        if self.template:
            return self.template.replace("<<.Group>>", "").replace("<<.Resource>>", resource)
        return None

    def describe(self) -> str:
        overrides = ", ".join(f"{label}→{resource}" for label, resource in self.overrides.items()) or "none"
        as_text = f" as {self.name_as!r}" if self.name_as else ""
        return (
            f"seriesQuery {self.series_query!r}, name.matches {self.name_matches!r}{as_text}, "
            f"resources.overrides {overrides}" + (f", template {self.template!r}" if self.template else "")
        )


@dataclass(frozen=True)
class AdapterConfig:
    """The rules of one adapter configuration, and whether it also serves resource metrics."""

    source: str  # the ConfigMap reference
    rules: tuple[AdapterRule, ...]
    serves_resource_metrics: bool

    def apis(self) -> frozenset[str]:
        """The metrics APIs this configuration would serve."""
        served = {rule.api for rule in self.rules}
        if self.serves_resource_metrics:
            served.add("metrics.k8s.io")
        return frozenset(served)

    def rules_for(self, api: str) -> tuple[AdapterRule, ...]:
        return tuple(rule for rule in self.rules if rule.api == api)


def parse_config(text: str, source: str = "") -> AdapterConfig:
    """Parse an adapter ``config.yaml``; raises ``ValueError`` on text that is not such a configuration."""
    try:
        document = load_yaml(text) or {}
    except yaml.YAMLError as error:
        raise ValueError(f"not YAML: {error}") from None
    except LimitExceeded as error:  # a config map is hostile input too: no alias bombs, no depth bombs
        raise ValueError(str(error)) from None
    if not isinstance(document, Mapping):
        raise ValueError("the configuration is not a mapping")
    rules = [
        _rule(api, entry)
        for key, api in (("rules", "custom.metrics.k8s.io"), ("externalRules", "external.metrics.k8s.io"))
        for entry in document.get(key) or []
        if isinstance(entry, Mapping)
    ]
    return AdapterConfig(source, tuple(rules), bool(document.get("resourceRules")))


def configs_in(config_maps: Iterable[Mapping[str, Any]], namespace: str) -> list[AdapterConfig]:
    """Adapter configurations among ``config_maps`` of ``namespace`` (labelled as prometheus-adapter's)."""
    found = []
    for config_map in config_maps:
        if kube.namespace(config_map) != namespace:
            continue
        if not kube.label_selector_matches(ADAPTER_LABEL, kube.labels(config_map)):
            continue
        text = (config_map.get("data") or {}).get(CONFIG_KEY)
        if not text:
            continue
        try:
            found.append(parse_config(str(text), kube.ref(config_map)))
        except ValueError:
            continue
    return found


def _rule(api: str, entry: Mapping[str, Any]) -> AdapterRule:
    series_query = str(entry.get("seriesQuery") or "")
    series_name, series_pattern, matchers = _parse_series_query(series_query)
    filters = tuple(
        (bool(item.get("is")), str(item.get("is") or item.get("isNot")))
        for item in entry.get("seriesFilters") or []
        if isinstance(item, Mapping) and (item.get("is") or item.get("isNot"))
    )
    resources = entry.get("resources") or {}
    overrides: dict[str, str] = {}
    for label, target in (resources.get("overrides") or {}).items():
        resource = str((target or {}).get("resource") or "")
        overrides[str(label)] = _RESOURCE_NAMES.get(resource, resource)
    name = entry.get("name") or {}
    name_matches = str(name.get("matches") or "")
    name_as = str(name.get("as") or "")
    pattern = name_matches or ".*"
    if not name_as:
        groups = re.compile(pattern).groups
        name_as = "$0" if groups == 0 else "$1"
    if name_matches:
        filters += ((True, name_matches),)
    return AdapterRule(
        api=api,
        series_query=series_query,
        series_name=series_name,
        series_pattern=series_pattern,
        label_matchers=matchers,
        filters=filters,
        overrides=overrides,
        template=str(resources["template"]) if resources.get("template") else None,
        name_matches=pattern,
        name_as=name_as,
        metrics_query=str(entry.get("metricsQuery") or ""),
    )


def _parse_series_query(query: str) -> tuple[str | None, str | None, tuple[tuple[str, str, str], ...]]:
    """(literal metric name, ``__name__`` regular expression, other label matchers) of a series selector."""
    literal = _SERIES_NAME.match(query)
    name = literal.group(1) if literal else None
    body = (literal.group(2) or "") if literal else query
    pattern = None
    named = _NAME_MATCHER.search(body)
    if named is not None:
        if named.group(1) == "=":
            name = named.group(3)
        else:
            # Prometheus anchors label regular expressions at both ends.
            pattern = f"^(?:{named.group(3)})$"
    matchers = tuple(
        (label, operator, value)
        for label, operator, _quote, value in _LABEL_MATCHER.findall(body)
        if label != "__name__"
    )
    return name, pattern, matchers


def _expand(template: str, match: re.Match[str]) -> str:
    """Go's ``Regexp.ExpandString``: ``$1``, ``${1}``, ``$name``, ``$$``; unknown groups expand to nothing."""

    def substitute(found: re.Match[str]) -> str:
        if found.group(0) == "$$":
            return "$"
        key = found.group(1) or found.group(2)
        try:
            value = match.group(int(key)) if key.isdigit() else match.group(key)
        except IndexError:  # an unknown group number or name
            return ""
        return value or ""

    return _GO_EXPANSION.sub(substitute, template)
