"""Kubernetes quantities: the API server's grammar, suffix arithmetic, and the sizes findings quote."""

from __future__ import annotations

from decimal import Decimal

import pytest

from nbhelpers.util import quantities

GI = 1024**3


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("16Gi", Decimal(16 * GI)),
        ("500m", Decimal("0.5")),
        ("1e3", Decimal(1000)),
        ("1E3", Decimal(1000)),  # an exponent, not the exa suffix
        ("2E", Decimal(2 * 10**18)),  # the exa suffix
        ("2G", Decimal(2 * 10**9)),
        ("1.5Gi", Decimal(3 * GI // 2)),
        ("515889448Ki", Decimal(515889448 * 1024)),
        ("100k", Decimal(100_000)),
        ("250u", Decimal("0.00025")),
        ("+4", Decimal(4)),
        ("-1", Decimal(-1)),
        (".5", Decimal("0.5")),
        ("8", Decimal(8)),
        ("0", Decimal(0)),
    ],
)
def test_valid_quantities(text: str, value: Decimal) -> None:
    assert quantities.parse_quantity(text) == value


@pytest.mark.parametrize(
    "text", ["", "Gi", "1.2.3", "NaN", "Infinity", "1_000", " 1Gi", "1Gi ", "1ki", "1KB", "1gi", "0x10", "1e", "--1"]
)
def test_invalid_quantities_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="quantity"):
        quantities.parse_quantity(text)


def test_numbers_pass_through_and_non_finite_floats_are_refused() -> None:
    assert quantities.parse_quantity(2) == Decimal(2)
    assert quantities.parse_quantity(0.25) == Decimal("0.25")
    with pytest.raises(ValueError):
        quantities.parse_quantity(float("inf"))
    with pytest.raises(ValueError):
        quantities.parse_quantity(True)


def test_try_parse_gives_none_for_missing_or_bad_values() -> None:
    assert quantities.try_parse(None) is None
    assert quantities.try_parse("") is None
    assert quantities.try_parse("lots") is None
    assert quantities.try_parse({"memory": "1Gi"}) is None
    assert quantities.try_parse("2Gi") == Decimal(2 * GI)


def test_bytes_round_up_and_read_well() -> None:
    assert quantities.to_bytes("1.5k") == 1500
    assert quantities.to_bytes("1001m") == 2  # a fractional byte rounds up
    assert quantities.format_bytes(quantities.to_bytes("8Gi")) == "8 GiB"
    assert quantities.format_bytes(quantities.to_bytes("1.5Gi")) == "1.5 GiB"
    assert quantities.format_bytes(quantities.to_bytes("512Mi")) == "512 MiB"
    assert quantities.format_bytes(16 * 10**9) == "14.9 GiB"


def test_whole_gib_quantities_for_patches() -> None:
    assert quantities.gib_quantity(16 * GI) == "16Gi"
    assert quantities.gib_quantity(16 * GI + 1) == "17Gi"
    assert quantities.gib_quantity(Decimal(24 * 10**9)) == "23Gi"
    assert quantities.gib_quantity(1) == "1Gi"


@pytest.mark.parametrize(
    "text",
    ["16Gi", "500m", "1e3", "1E3", "2E", "2G", "1.5Gi", "515889448Ki", "100k", "250u", "+4", "-1", ".5", "8",
     "3n", "1Ti", "2Pi", "1Ei", "7M", "1T", "1P", "0.001", "12e-3", "1.5e2"],
)  # fmt: skip
def test_the_arithmetic_agrees_with_the_kubernetes_client(text: str) -> None:
    from kubernetes.utils.quantity import parse_quantity as client_parse_quantity

    assert quantities.parse_quantity(text) == Decimal(client_parse_quantity(text))


def test_a_triage_of_a_bundle_does_not_import_the_kubernetes_client() -> None:
    """Importing ``kubernetes`` costs about a second: only live mode pays it."""
    import subprocess
    import sys

    code = (
        "import sys, nbhelpers.cli.main, nbhelpers.triage, nbhelpers.checks, nbhelpers.render.summary; "
        "print('kubernetes' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"
