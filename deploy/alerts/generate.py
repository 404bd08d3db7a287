"""Generate the alert rules from their one source, ``alerts.src.yaml`` (in this folder).

Writes three files:

- ``kserve-vllm.rules.yaml``: a plain Prometheus rule file (``rule_files:`` in prometheus.yml);
- ``prometheusrule.yaml``: the same groups as a ``monitoring.coreos.com/v1`` PrometheusRule
  (Prometheus Operator, kube-prometheus-stack);
- ``docs/alerts.md``: the table of alerts, thresholds and runbook steps.

Usage: ``python deploy/alerts/generate.py`` writes them; ``--check`` writes nothing and exits 1 when
a committed file differs from what the source gives (tests/test_alerts.py runs the same comparison).
Only PyYAML is needed, so the script runs without the package installed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SOURCE = HERE / "alerts.src.yaml"
DOC_ONLY_KEYS = ("threshold", "why")  # per-alert keys for docs/alerts.md; not part of a Prometheus rule
HEADER = "# Generated from deploy/alerts/alerts.src.yaml by deploy/alerts/generate.py: do not edit.\n"


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (the PromQL) as ``|`` blocks, so the generated files read like the source."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _represent_str)


def _dump(document: Any) -> str:
    return yaml.dump(document, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True, width=200)


def load_source(path: Path = SOURCE) -> dict[str, Any]:
    source: dict[str, Any] = yaml.safe_load(path.read_text())
    return source


def rule_groups(source: dict[str, Any]) -> list[dict[str, Any]]:
    """The groups as Prometheus reads them: the documentation-only keys removed."""
    return [
        {
            **{key: value for key, value in group.items() if key != "rules"},
            "rules": [
                {key: value for key, value in rule.items() if key not in DOC_ONLY_KEYS} for rule in group["rules"]
            ],
        }
        for group in source["groups"]
    ]


def plain_rule_file(source: dict[str, Any]) -> str:
    return HEADER + _dump({"groups": rule_groups(source)})


def prometheus_rule(source: dict[str, Any]) -> str:
    meta = source["prometheusrule"]
    document = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": meta["name"], "labels": dict(meta.get("labels") or {})},
        "spec": {"groups": rule_groups(source)},
    }
    return HEADER + _dump(document)


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def alerts_markdown(source: dict[str, Any]) -> str:
    lines = [
        "# Alert rules",
        "",
        "<!-- Generated from deploy/alerts/alerts.src.yaml by deploy/alerts/generate.py: do not edit. -->",
        "",
        "The rules in `deploy/alerts/` (a plain rule file and a PrometheusRule, from one source). Every",
        "alert carries `namespace` and `inferenceservice` labels, which `kserve-runbook webhook` reads to",
        "pick the service to triage, and a `runbook_step` annotation naming the step of the report to",
        "read first. To change a threshold, edit `deploy/alerts/alerts.src.yaml` and run",
        "`python deploy/alerts/generate.py`.",
        "",
        "| alert | severity | fires when | why it matters | runbook step |",
        "|---|---|---|---|---|",
    ]
    for group in source["groups"]:
        for rule in group["rules"]:
            cells = [
                f"`{rule['alert']}`",
                rule["labels"]["severity"],
                _cell(rule["threshold"]),
                _cell(rule["why"]),
                f"`{rule['annotations']['runbook_step']}`",
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def outputs(source: dict[str, Any]) -> dict[Path, str]:
    """Each generated file and its content."""
    return {
        HERE / "kserve-vllm.rules.yaml": plain_rule_file(source),
        HERE / "prometheusrule.yaml": prometheus_rule(source),
        ROOT / "docs" / "alerts.md": alerts_markdown(source),
    }


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for path, content in outputs(load_source()).items():
        if path.is_file() and path.read_text() == content:
            continue
        if check:
            stale.append(str(path.relative_to(ROOT)))
        else:
            path.write_text(content)
            print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print("out of date (run python deploy/alerts/generate.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
