"""Hostile JSON for the extender's property tests: values a careless client or an attacker sends."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

__all__ = ["HOSTILE_NUMBERS", "HOSTILE_TEXT", "json_values", "put"]

# JSON number literals that orjson refuses or turns into floats
HOSTILE_NUMBERS = [b"1e999999", b"-1e400", b"123456789012345678901234567890", b"-0", b"1E-400", b"NaN", b"Infinity"]
HOSTILE_TEXT = [
    "1e999999", "-1e400", "1e-400", "NaN", "-inf", "Infinity", "\u0661\u0662", "\u00b2", "9" * 5000, "+4", " 8 ",
    "1_2", "0x10", "8Ki", "1k", "-1", "0", "", "\x00", "\ud7ff\U0010ffff", "A100," * 200, "spot,on-demand,cheap",
]  # fmt: skip

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | st.sampled_from(HOSTILE_TEXT)
    | st.just("__NUMBER__")
)
"""A scalar; the text "__NUMBER__" stands for a place where a HOSTILE_NUMBERS literal goes in the bytes."""
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


def put(obj: Any, path: tuple[Any, ...], value: Any) -> None:
    """Set ``obj[path...] = value``; the last key may be missing."""
    for key in path[:-1]:
        obj = obj[key]
    obj[path[-1]] = value
