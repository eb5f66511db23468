from __future__ import annotations

from decimal import Decimal

import pytest
from statictrain.money import format_usd, parse_usd, readable_usd, to_decimal


@pytest.mark.parametrize(("text", "want"), [("1500", Decimal(1500)), (" 12.50 ", Decimal("12.50")), ("0", Decimal(0))])
def test_parse_ok(text: str, want: Decimal) -> None:
    assert parse_usd(text) == want


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("abc", "not a decimal"),
        ("-1", "negative"),
        ("NaN", "finite"),
        ("Infinity", "finite"),
        ("", "not a decimal"),
    ],
)
def test_parse_bad(text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_usd(text, what="limitUSD")


def test_parse_rejects_zero_when_asked() -> None:
    with pytest.raises(ValueError, match="greater than zero"):
        parse_usd("0.0", allow_zero=False)


@pytest.mark.parametrize(
    ("value", "want"),
    [
        (Decimal("1.0000005"), "1.000000"),
        (Decimal("1.0000015"), "1.000002"),
        (Decimal("-0.0000001"), "0.000000"),
        (Decimal("1E+3"), "1000.000000"),
    ],
)
def test_format(value: Decimal, want: str) -> None:
    assert format_usd(value) == want


def test_to_decimal() -> None:
    assert to_decimal(0.1) == Decimal("0.1")
    assert to_decimal(3) == Decimal(3)
    with pytest.raises(TypeError):
        to_decimal(True)


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ("0.039417388156", "$0.0394"),
        ("12.345", "$12.3"),
        ("1.5", "$1.50"),
        ("123.45", "$123"),
        ("0.99996", "$1.00"),
        ("99.95", "$100"),
        ("999.6", "$1,000"),
        ("1234.5", "$1,234"),
        ("0.000012345", "$0.0000123"),
        ("0", "$0"),
        ("-1.5", "-$1.50"),
        ("-0.0000000001", "-$0.000000000100"),
    ],
    ids=lambda v: v,
)
def test_readable_usd_is_three_significant_digits_with_a_dollar_sign(value: str, want: str) -> None:
    assert readable_usd(Decimal(value)) == want
