"""Kubernetes resource quantities ("16Gi", "500m", "1e3", "2G") as numbers, and back.

Parsing is delegated to the kubernetes client's ``parse_quantity`` (suffix arithmetic in
``Decimal``), after a check against the API server's own grammar: the client alone accepts
strings the API server refuses ("NaN", "1_000", " 1Gi", "1.2.3" fails but "Infinity" passes),
and a wrong number in a finding is worse than no number.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

from kubernetes.utils.quantity import parse_quantity as _client_parse_quantity

GIB = 1024**3
MIB = 1024**2

# <quantity> ::= <signedNumber><suffix>, suffix = binarySI | decimalSI | decimalExponent
# (k8s.io/apimachinery/pkg/api/resource/quantity.go).
_QUANTITY = re.compile(
    r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)"
    r"(?:[eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?$"
)


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
    if not _QUANTITY.match(text):
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    return Decimal(_client_parse_quantity(text))  # type: ignore[no-untyped-call]


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
