"""Money as Decimal in Python and as decimal strings in the Kubernetes API.

Floats never hold dollars here: prices are parsed from strings into Decimal,
arithmetic stays in Decimal, and values leave as plain decimal strings
(``"12.345678"``), the form the CRD's cost fields and node annotations use.
For people (``kubectl get stj``, text and HTML tables) :func:`readable_usd` rounds to
three significant digits with a ``$`` sign; machines read the full decimal strings.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation, localcontext

__all__ = ["MICRO", "ZERO", "format_usd", "parse_usd", "readable", "readable_usd", "to_decimal"]

ZERO = Decimal(0)
MICRO = Decimal("0.000001")
"""Default quantum of money strings: one micro-dollar."""


def parse_usd(text: str, *, what: str = "amount", allow_zero: bool = True) -> Decimal:
    """Parse a non-negative decimal string such as ``"1500"`` or ``"98.32"``.

    Raises ValueError naming ``what`` and saying how to write it on bad input.
    """
    if not isinstance(text, str):
        raise ValueError(f'{what} must be a decimal string such as "12.50", got {type(text).__name__}')
    stripped = text.strip()
    try:
        value = Decimal(stripped)
    except InvalidOperation:
        raise ValueError(f'{what} {text!r} is not a decimal number; write it like "12.50"') from None
    if not value.is_finite():
        raise ValueError(f'{what} {text!r} must be a finite decimal number such as "12.50"')
    if value < 0:
        raise ValueError(f"{what} {text!r} must not be negative")
    if not allow_zero and value == 0:
        raise ValueError(f"{what} must be greater than zero, got {text!r}")
    return value


def to_decimal(value: float | int | Decimal) -> Decimal:
    """Convert a measured quantity (seconds, ratios) to Decimal exactly as printed by repr."""
    if isinstance(value, Decimal):
        return value
    if isinstance(value, bool):
        raise TypeError("bool is not a quantity")
    return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)


def format_usd(value: Decimal, *, quantum: Decimal = MICRO) -> str:
    """A plain decimal string rounded half-even to ``quantum`` (no exponent, no sign for zero)."""
    with localcontext() as ctx:
        ctx.prec = max(40, value.adjusted() - int(quantum.as_tuple().exponent) + 2)  # every digit down to quantum
        q = value.quantize(quantum, rounding=ROUND_HALF_EVEN)
    if q == 0:
        q = abs(q)
    return f"{q:f}"


def readable(value: Decimal, digits: int = 3) -> str:
    """``value`` rounded half-even to ``digits`` significant digits, plain decimal notation: ``0.0394``, ``12.3``,
    ``1.50``; from ``10 ** digits`` up whole numbers with thousands separators (``1,235``)."""
    if not value.is_finite():
        return str(value)
    if value == 0:
        return "0"
    with localcontext() as ctx:
        ctx.prec = max(40, value.adjusted() + digits + 2)  # whole numbers keep every digit: $1e40 is 41
        q = value
        for _ in range(2):  # rounding can carry into one more digit (0.9996 -> 1.00): round again at that size
            exp = min(q.adjusted() - digits + 1, 0)
            q = value.quantize(Decimal(1).scaleb(exp), rounding=ROUND_HALF_EVEN)
    return f"{q:,f}" if q.adjusted() >= digits else f"{q:f}"


def readable_usd(value: Decimal) -> str:
    """Dollars for people: three significant digits and a ``$`` sign (``$0.0394``, ``$12.3``, ``-$1.50``,
    ``$1,235``); the API and machine formats keep the full decimal string (:func:`format_usd`)."""
    text = readable(abs(value))
    return f"-${text}" if value < 0 and text != "0" else f"${text}"
