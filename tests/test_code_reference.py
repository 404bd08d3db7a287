"""The finding-code reference (nbhelpers/render/code_reference.py) is generated from the catalog and cannot drift."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from nbhelpers.cli.main import cli
from nbhelpers.errors import RunbookError
from nbhelpers.findings.catalog import CATALOG, CAUSE_EDGES
from nbhelpers.render import code_reference


def test_every_catalog_entry_has_title_why_fix_and_evidence() -> None:
    assert [entry.code for entry in code_reference.all_references()] == list(CATALOG)
    for code, info in CATALOG.items():
        for name in ("title", "why", "fix", "evidence"):
            assert getattr(info, name).strip(), (code, name)
        assert len(info.fix) > 40 and len(info.evidence) > 30, code
        assert info.fix != info.why, code


def test_each_reference_carries_the_catalog_text_and_both_directions_of_the_edges() -> None:
    for entry in code_reference.all_references():
        info = CATALOG[entry.code]
        assert (entry.meaning, entry.why, entry.fix, entry.evidence, entry.severity, entry.step) == (
            info.title,
            info.why,
            info.fix,
            info.evidence,
            info.severity,
            info.step,
        )
        assert set(entry.explains) == set(CAUSE_EDGES[entry.code])
        for source in entry.explained_by:
            assert entry.code in CAUSE_EDGES[source]
    port = code_reference.reference("PORT_MISMATCH")
    assert "ENDPOINTS_NONE_READY" in port.explains and port.explained_by == ()
    assert "PORT_MISMATCH" in code_reference.reference("ENDPOINTS_NONE_READY").explained_by


def test_unknown_code_is_a_runbook_error() -> None:
    with pytest.raises(RunbookError, match="unknown code 'NOPE'"):
        code_reference.reference("NOPE")


def test_text_reference_has_every_section() -> None:
    text = code_reference.reference_text("KV_CACHE_PRESSURE")
    assert text.startswith("KV_CACHE_PRESSURE  [warning, step queue_vs_oom]  KV cache near full with preemptions")
    for heading in ("What it means:", "Why it causes the symptom:", "How to fix:", "Evidence it reads:"):
        assert f"\n{heading}\n  " in text
    assert "explains: QUEUE_SATURATION, TIMEOUT_LB_DEFAULT, TIMEOUT_MISALIGNED" in text
    assert all(len(line) <= 100 for line in text.splitlines() if not line.startswith("explain"))


def test_html_reference_anchors_each_code_and_links_only_codes_on_the_page() -> None:
    markup = code_reference.reference_html(["PORT_MISMATCH", "ENDPOINTS_NONE_READY", "PORT_MISMATCH"])
    assert re.findall(r'id="(code-[A-Z_]+)"', markup) == ["code-PORT_MISMATCH", "code-ENDPOINTS_NONE_READY"]
    links = set(re.findall(r'href="#(code-[A-Z_]+)"', markup))
    assert links == {"code-PORT_MISMATCH", "code-ENDPOINTS_NONE_READY"}  # edges to absent codes stay plain text
    assert "<code>PROBE_READINESS_MISSING</code>" in markup  # PORT_MISMATCH explains it; not on the page
    assert "How to fix" in markup and "Evidence it reads" in markup


def test_cli_lists_every_code_and_prints_one_reference() -> None:
    runner = CliRunner()
    listing = runner.invoke(cli, ["codes"])
    assert listing.exit_code == 0
    assert [line.split()[0] for line in listing.output.splitlines()] == list(CATALOG)
    one = runner.invoke(cli, ["codes", "HPA_AT_MAX"])
    assert one.exit_code == 0
    assert one.output == code_reference.reference_text("HPA_AT_MAX") + "\n"
