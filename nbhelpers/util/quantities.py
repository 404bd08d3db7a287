"""Kubernetes resource quantities ("16Gi", "500m", "1e3", "2G") as numbers, and back.

The text is checked against the API server's own grammar first (a wrong number in a finding is
worse than no number), then the suffix arithmetic is done in ``Decimal``, as the kubernetes
client's ``parse_quantity`` does; tests/test_quantities.py checks the two agree on every suffix.
The client is not imported for it: importing ``kubernetes`` costs about a second, and a triage of a
bundle needs nothing else from it.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

GIB = 1024**3
MIB = 1024**2

# <quantity> ::= <signedNumber><suffix>, suffix = binarySI | decimalSI | decimalExponent
# (k8s.io/apimachinery/pkg/api/resource/quantity.go).
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?:[eE](?P<exponent>[+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$"
)
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}  # powers of 1024
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}  # powers of 10


def parse_quantity(value: str | int | float | Decimal) -> Decimal:
    """The quantity's value in base units (bytes, cores, devices). Raises ``ValueError`` when invalid."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int | Decimal):
        return Decimal(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"not a quantity: {value!r}")
        return Decimal(str(value))
    text = str(value)
    match = _QUANTITY.match(text)
    if match is None:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    number = Decimal(match["number"])
    if match["exponent"] is not None:
        return number * Decimal(10) ** int(match["exponent"])
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * Decimal(1024) ** _BINARY[suffix]
    return number * Decimal(10) ** _DECIMAL.get(suffix, 0)


def try_parse(value: object) -> Decimal | None:
    """Like :func:`parse_quantity`, but None for a missing or invalid value."""
    if value is None or value == "":
        return None
    if not isinstance(value, str | int | float | Decimal):
        return None
    try:
        return parse_quantity(value)
    except ValueError:
        return None


def to_bytes(value: str | int | float | Decimal) -> int:
    """A memory quantity in whole bytes (rounded up, as the API server rounds)."""
    return math.ceil(parse_quantity(value))


def format_bytes(amount: int | Decimal) -> str:
    """``24 GiB``, ``1.5 GiB``, ``512 MiB``: how a finding quotes a memory size."""
    number = Decimal(amount)
    if number >= GIB:
        return f"{_trim(number / GIB)} GiB"
    if number >= MIB:
        return f"{_trim(number / MIB)} MiB"
    return f"{_trim(number)} B"


def gib_quantity(amount: int | Decimal) -> str:
    """The smallest whole-GiB quantity that holds ``amount`` bytes (``"24Gi"``), for patches."""
    return f"{max(1, math.ceil(Decimal(amount) / GIB))}Gi"


def _trim(number: Decimal) -> str:
    rounded = round(number, 2)
    text = f"{rounded:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text
