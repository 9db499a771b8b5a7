"""Kubernetes resource quantities (k8s.io/apimachinery/pkg/api/resource), parsed exactly.

A quantity is kept as an exact Fraction plus the format it was written in, so that sums can be
printed back the way upstream prints them (``20Gi``, ``1500m``, ``2k``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from webhook.errors import QuantityError

QuantityFormat = Literal["BinarySI", "DecimalSI", "DecimalExponent"]

_BINARY_SUFFIXES: dict[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SUFFIXES: dict[str, int] = {
    "n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18,
}
_DECIMAL_BY_EXPONENT = {exp: suffix for suffix, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_EXPONENT = {exp: suffix for suffix, exp in _BINARY_SUFFIXES.items()}

# Same grammar as upstream parseQuantityString: sign, digits, optional fraction, then a suffix made of
# "eEinumkKMGTP" letters, an optional sign and digits. Missing digits mean 0 (upstream parses "." and "m" as 0).
_QUANTITY_RE = re.compile(r"\A([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[+-]?[0-9]*)\Z", re.ASCII)
_EXPONENT_RE = re.compile(r"\A[eE]([+-]?[0-9]+)\Z", re.ASCII)
# Bounds that keep absurd input cheap (upstream accepts them but cannot use them as int64 either).
_MAX_DIGITS = 1000
_MAX_EXPONENT = 1000
# BinarySI amounts are capped at MaxInt64 like upstream ParseQuantity (``maxAllowed``).
_MAX_BINARY = 2**63 - 1
# Upstream keeps at most nano precision; anything finer is rounded up (away from zero).
_NANO = Fraction(1, 10**9)


@dataclass(frozen=True, slots=True)
class Quantity:
    value: Fraction
    format: QuantityFormat = "DecimalSI"

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self.value + other.value, self.format)

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity(self.value - other.value, self.format)

    def __str__(self) -> str:
        return format_quantity(self)


def _round_away_from_zero(value: Fraction, unit: Fraction) -> Fraction:
    scaled = value / unit
    if scaled.denominator == 1:
        return value
    rounded = math.ceil(scaled) if scaled > 0 else math.floor(scaled)
    return rounded * unit


def parse_quantity(raw: object) -> Quantity:
    """Parse a quantity such as ``100m``, ``1.5Gi``, ``2e3`` or a bare JSON number."""
    if isinstance(raw, bool):
        raise QuantityError(f"quantity must be a string or number, not {raw!r}")
    if isinstance(raw, int):
        return Quantity(Fraction(raw), "DecimalSI")
    if isinstance(raw, float):
        if not math.isfinite(raw):
            raise QuantityError(f"quantity must be finite, not {raw!r}")
        return Quantity(_round_away_from_zero(Fraction(repr(raw)), _NANO), "DecimalSI")
    if not isinstance(raw, str):
        raise QuantityError(f"quantity must be a string or number, not {type(raw).__name__}")
    text = raw
    match = _QUANTITY_RE.match(text)
    if not text or match is None:
        raise QuantityError(f"quantities must match the regular expression "
                            f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {raw!r}")
    sign_text, whole, fraction, suffix = match.groups()
    fraction = fraction or ""
    if len(whole) + len(fraction) > _MAX_DIGITS:
        raise QuantityError(f"quantity has too many digits: {raw[:40]!r}...")
    number = Fraction(int(whole + fraction or "0"), 10 ** len(fraction))
    if sign_text == "-":
        number = -number
    fmt: QuantityFormat
    if suffix in _BINARY_SUFFIXES:
        value = number * (2 ** _BINARY_SUFFIXES[suffix])
        fmt = "BinarySI"
    elif suffix in _DECIMAL_SUFFIXES:
        value = number * Fraction(10) ** _DECIMAL_SUFFIXES[suffix]
        fmt = "DecimalSI"
    else:
        exponent = _EXPONENT_RE.match(suffix)
        if exponent is None:
            raise QuantityError(f"unable to parse quantity's suffix {suffix!r} in {raw!r}")
        if len(exponent.group(1)) > 6 or abs(int(exponent.group(1))) > _MAX_EXPONENT:
            raise QuantityError(f"quantity exponent out of range in {raw!r}")
        value = number * Fraction(10) ** int(exponent.group(1))
        fmt = "DecimalExponent"
    value = _round_away_from_zero(value, _NANO)
    if fmt == "BinarySI":
        if abs(value) > _MAX_BINARY:
            value = _MAX_BINARY if value > 0 else -_MAX_BINARY
        elif 0 < abs(value) < 1:
            fmt = "DecimalSI"  # upstream: "This avoids rounding and hopefully confusion, too."
    return Quantity(value, fmt)


def int_value(quantity: Quantity) -> int:
    """``Quantity.Value()``: the integer value, rounded away from zero (bytes, counts)."""
    return _scaled_ceil_away(quantity.value, 1)


def milli_value(quantity: Quantity) -> int:
    """``Quantity.MilliValue()``: the value in thousandths, rounded away from zero (millicores)."""
    return _scaled_ceil_away(quantity.value, 1000)


def _scaled_ceil_away(value: Fraction, scale: int) -> int:
    # Integer arithmetic: the reader converts every pod's requests, and Fraction operators are slow.
    numerator, denominator = value.as_integer_ratio()
    numerator *= scale
    if numerator >= 0:
        return -(-numerator // denominator)
    return numerator // denominator


def quantity_value(raw: object) -> int:
    """Integer value rounded up like ``Quantity.Value()`` (bytes, counts)."""
    return int_value(parse_quantity(raw))


def quantity_milli_value(raw: object) -> int:
    """Milli value rounded up like ``Quantity.MilliValue()`` (millicores)."""
    return milli_value(parse_quantity(raw))


def _ceil_away(value: Fraction) -> int:
    return math.ceil(value) if value >= 0 else math.floor(value)


def format_quantity(quantity: Quantity) -> str:
    """Canonical text of a quantity, as ``Quantity.String()`` prints it."""
    value = quantity.value
    if value == 0:
        return "0"
    fmt = quantity.format
    if fmt == "BinarySI":
        if -1024 < value < 1024 or value.denominator != 1:
            fmt = "DecimalSI"
        else:
            return _format_binary(int(value))
    return _format_decimal(value, fmt)


def _format_binary(value: int) -> str:
    exponent = 0
    while exponent < 60 and value % 1024 == 0:
        value //= 1024
        exponent += 10
    return f"{value}{_BINARY_BY_EXPONENT.get(exponent, '')}"


def _format_decimal(value: Fraction, fmt: QuantityFormat) -> str:
    # Smallest exponent (multiple of 3, >= -9) giving an integer mantissa, then grow it while exact.
    exponent = -9
    mantissa = value * Fraction(10) ** 9
    mantissa = Fraction(_ceil_away(mantissa))
    while mantissa % 1000 == 0 and mantissa != 0:
        mantissa /= 1000
        exponent += 3
    number = int(mantissa)
    # DecimalSI has no suffix beyond E (10^18): upstream falls back to exponent notation ("1e21").
    if fmt == "DecimalExponent" or exponent > 18:
        return f"{number}e{exponent}" if exponent else str(number)
    return f"{number}{_DECIMAL_BY_EXPONENT[exponent]}"
