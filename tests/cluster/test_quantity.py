"""Quantity parsing and printing, checked against upstream apimachinery pkg/api/resource/quantity_test.go."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.cluster.quantity import (
    Quantity,
    format_quantity,
    parse_quantity,
    quantity_milli_value,
    quantity_value,
)
from webhook.errors import InvalidInput, QuantityError

Ki, Mi, Gi, Ti, Pi, Ei = (2**e for e in (10, 20, 30, 40, 50, 60))


@pytest.mark.parametrize(
    ("text", "value", "fmt"),
    [
        # upstream TestQuantityParse
        ("0", 0, "DecimalSI"),
        ("0n", 0, "DecimalSI"),
        ("0Ki", 0, "BinarySI"),
        ("1", 1, "DecimalSI"),
        ("1Ki", Ki, "BinarySI"),
        ("8Ki", 8 * Ki, "BinarySI"),
        ("7Mi", 7 * Mi, "BinarySI"),
        ("6Gi", 6 * Gi, "BinarySI"),
        ("5Ti", 5 * Ti, "BinarySI"),
        ("4Pi", 4 * Pi, "BinarySI"),
        ("3Ei", 3 * Ei, "BinarySI"),
        ("5n", Fraction(5, 10**9), "DecimalSI"),
        ("4u", Fraction(4, 10**6), "DecimalSI"),
        ("3m", Fraction(3, 1000), "DecimalSI"),
        ("8k", 8000, "DecimalSI"),
        ("50k", 50000, "DecimalSI"),
        ("7M", 7 * 10**6, "DecimalSI"),
        ("6G", 6 * 10**9, "DecimalSI"),
        ("5T", 5 * 10**12, "DecimalSI"),
        ("2P", 2 * 10**15, "DecimalSI"),
        ("1E", 10**18, "DecimalSI"),
        ("1E-3", Fraction(1, 1000), "DecimalExponent"),
        ("1e3", 1000, "DecimalExponent"),
        ("1E6", 10**6, "DecimalExponent"),
        ("1.3E+6", 1_300_000, "DecimalExponent"),
        ("0.5e-1", Fraction(5, 100), "DecimalExponent"),
        ("100.035k", 100035, "DecimalSI"),
        ("0.0005k", Fraction(1, 2), "DecimalSI"),
        ("10.035M", 10_035_000, "DecimalSI"),
        ("1.01E", 101 * 10**16, "DecimalSI"),
        ("100.035Ki", Fraction(10243584, 100), "BinarySI"),
        ("0.5Mi", Mi // 2, "BinarySI"),
        (".001", Fraction(1, 1000), "DecimalSI"),
        ("1.", 1, "DecimalSI"),
        ("1.G", 10**9, "DecimalSI"),
        ("+1.5Gi", 3 * Gi // 2, "BinarySI"),
        ("-1.5Gi", -3 * Gi // 2, "BinarySI"),
        # Things that saturate/round: up to the next nano, away from zero.
        ("3.001n", Fraction(4, 10**9), "DecimalSI"),
        ("1.1E-9", Fraction(2, 10**9), "DecimalExponent"),
        ("0.0000000001", Fraction(1, 10**9), "DecimalSI"),
        ("0.00000012345", Fraction(124, 10**9), "DecimalSI"),
        ("-0.00000012345", Fraction(-124, 10**9), "DecimalSI"),
        ("0.000000000001Ki", Fraction(2, 10**9), "DecimalSI"),  # rounds up and changes format
        ("9Ei", 2**63 - 1, "BinarySI"),  # BinarySI is capped at MaxInt64 (maxAllowed)
        ("9223372036854775807Ki", 2**63 - 1, "BinarySI"),
        ("12E", 12 * 10**18, "DecimalSI"),
        # upstream parseQuantityString: missing digits mean zero
        (".", 0, "DecimalSI"),
        ("-.", 0, "DecimalSI"),
    ],
)
def test_parse_quantity_matches_upstream(text: str, value: int | Fraction, fmt: str) -> None:
    quantity = parse_quantity(text)
    assert quantity.value == value
    assert quantity.format == fmt


@pytest.mark.parametrize(
    "text",
    [
        "", "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-",
        " 1", "1 ", "1\n", "1K", "1e", "1ee3", "1Mi3", "1_000", "1,5", "0x10", "\uff11",
    ],
)
def test_invalid_quantities_raise_quantity_error(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_quantity_error_is_invalid_input_and_value_error() -> None:
    with pytest.raises(InvalidInput):
        parse_quantity("lots")
    with pytest.raises(ValueError):
        parse_quantity("lots")


@pytest.mark.parametrize("raw", [None, True, [], {}, float("nan"), float("inf")])
def test_non_quantity_types_raise(raw: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(raw)


@pytest.mark.parametrize("text", ["1e99999999", "1E-9999999", "1" * 5000, "0." + "1" * 5000])
def test_absurd_quantities_fail_fast_instead_of_hanging(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_json_numbers_are_quantities() -> None:
    assert parse_quantity(2).value == 2
    assert parse_quantity(0.5).value == Fraction(1, 2)
    assert quantity_milli_value(0.1) == 100


@pytest.mark.parametrize(
    ("text", "milli", "value"),
    [
        ("100m", 100, 1),  # Value() rounds 0.1 up to 1
        ("1", 1000, 1),
        ("1.5", 1500, 2),
        ("0.0001", 1, 1),  # MilliValue() rounds 0.1m up
        ("1n", 1, 1),
        ("2500u", 3, 1),
        ("1Gi", Gi * 1000, Gi),
        ("1.5Gi", 1500 * Gi, 3 * Gi // 2),
        ("2e3", 2_000_000, 2000),
        ("-9.01", -9010, -10),  # rounding is away from zero, like RoundUp
        ("-0.5m", -1, -1),
    ],
)
def test_value_and_milli_value_round_up_like_upstream(text: str, milli: int, value: int) -> None:
    assert quantity_milli_value(text) == milli
    assert quantity_value(text) == value


@pytest.mark.parametrize(
    ("quantity", "text"),
    [
        # upstream TestQuantityString
        (Quantity(Fraction(Gi), "BinarySI"), "1Gi"),
        (Quantity(Fraction(300 * Mi), "BinarySI"), "300Mi"),
        (Quantity(Fraction(6 * Ki), "BinarySI"), "6Ki"),
        (Quantity(Fraction(1001 * Gi), "BinarySI"), "1001Gi"),
        (Quantity(Fraction(Ti), "BinarySI"), "1Ti"),
        (Quantity(Fraction(5), "BinarySI"), "5"),
        (Quantity(Fraction(1, 2), "BinarySI"), "500m"),
        (Quantity(Fraction(10**9), "DecimalSI"), "1G"),
        (Quantity(Fraction(1, 1000), "DecimalSI"), "1m"),
        (Quantity(Fraction(80, 1000), "DecimalSI"), "80m"),
        (Quantity(Fraction(108, 100), "DecimalSI"), "1080m"),
        (Quantity(Fraction(300 * 10**6), "DecimalSI"), "300M"),
        (Quantity(Fraction(10**18), "DecimalSI"), "1E"),
        (Quantity(Fraction(10**21), "DecimalSI"), "1e21"),  # no SI suffix beyond E
        (Quantity(Fraction(5 * 10**21), "DecimalSI"), "5e21"),
        (Quantity(Fraction(10**24), "DecimalSI"), "1e24"),
        (Quantity(Fraction(1234567 * 10**6), "DecimalSI"), "1234567M"),
        (Quantity(Fraction(1234567, 1000), "BinarySI"), "1234567m"),
        (Quantity(Fraction(3000), "DecimalSI"), "3k"),
        (Quantity(Fraction(1025), "BinarySI"), "1025"),
        (Quantity(Fraction(0), "BinarySI"), "0"),
        (Quantity(Fraction(10**9), "DecimalExponent"), "1e9"),
        (Quantity(Fraction(1, 1000), "DecimalExponent"), "1e-3"),
        (Quantity(Fraction(1, 10**9), "DecimalExponent"), "1e-9"),
        (Quantity(Fraction(80, 1000), "DecimalExponent"), "80e-3"),
        (Quantity(Fraction(300 * 10**6), "DecimalExponent"), "300e6"),
        (Quantity(Fraction(0), "DecimalExponent"), "0"),
        (Quantity(Fraction(1, 10**9), "DecimalSI"), "1n"),
        (Quantity(Fraction(1080, 10**9), "DecimalSI"), "1080n"),
        (Quantity(Fraction(1, 10**6), "DecimalSI"), "1u"),
        (Quantity(Fraction(-901, 100), "DecimalSI"), "-9010m"),  # upstream TestQuantityNeg
    ],
)
def test_format_quantity_matches_upstream_string(quantity: Quantity, text: str) -> None:
    assert format_quantity(quantity) == text
    assert str(quantity) == text


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        # upstream TestQuantityParseEmit
        ("1Ki", "1Ki"), ("1Mi", "1Mi"), ("1Gi", "1Gi"), ("1024Mi", "1Gi"), ("1000M", "1G"),
        (".001Ki", "1024m"), (".000001Ki", "1024u"), (".000000001Ki", "1024n"), (".000000000001Ki", "2n"),
        # alternates from TestQuantityString
        ("1000M", "1G"), ("0.001T", "1G"), ("1000u", "1m"), ("1.08", "1080m"), ("1080000000n", "1080m"),
        ("307200Ki", "300Mi"), ("5000m", "5"), ("0.5", "500m"), ("1000E", "1e21"), (".001e12", "1e9"),
        ("0.001e0", "1e-3"), ("1000e-12", "1e-9"), ("00", "0"), ("1.3E+6", "1300e3"),
    ],
)
def test_parse_then_format_is_canonical(text: str, canonical: str) -> None:
    assert format_quantity(parse_quantity(text)) == canonical
    if not text.startswith("0"):
        assert format_quantity(parse_quantity("-" + text)) == "-" + canonical


def test_sum_keeps_the_left_format() -> None:
    total = parse_quantity("1Gi") + parse_quantity("512Mi")
    assert str(total) == "1536Mi"
    assert str(parse_quantity("1") - parse_quantity("250m")) == "750m"


_SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]


@given(
    st.integers(min_value=-(10**12), max_value=10**12),
    st.integers(min_value=0, max_value=6),
    st.sampled_from([*_SUFFIXES, "e3", "e-6", "E+2", "e0"]),
)
def test_format_then_parse_round_trips(mantissa: int, decimals: int, suffix: str) -> None:
    digits = str(abs(mantissa)).rjust(decimals + 1, "0")
    number = digits[: len(digits) - decimals] + ("." + digits[len(digits) - decimals:] if decimals else "")
    text = ("-" if mantissa < 0 else "") + number + suffix
    parsed = parse_quantity(text)
    printed = format_quantity(parsed)
    again = parse_quantity(printed)
    assert again.value == parsed.value
    # Canonical text is a fixed point.
    assert format_quantity(again) == printed


@given(st.integers(min_value=0, max_value=2**62), st.sampled_from(["m", "", "Ki", "Mi", "k", "M"]))
def test_milli_value_is_exact_ceiling(amount: int, suffix: str) -> None:
    text = f"{amount}{suffix}"
    exact = parse_quantity(text).value
    assert quantity_value(text) >= exact > quantity_value(text) - 1
    assert quantity_milli_value(text) >= exact * 1000 > quantity_milli_value(text) - 1
