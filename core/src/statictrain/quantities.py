"""Kubernetes resource quantities ("500m", "16Gi", "8") as floats (pure)."""

from __future__ import annotations

import re

__all__ = ["parse_quantity"]

_SUFFIX = {
    "n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60,
}  # fmt: skip
_QUANTITY = re.compile(r"^([0-9.]+(?:[eE][-+]?[0-9]+)?)([a-zA-Z]*)$")


def parse_quantity(value: object, *, what: str) -> float:
    """A Kubernetes quantity ("500m", "16Gi", "8", 8) as a float; ValueError naming ``what`` otherwise."""
    text = str(value).strip()
    m = _QUANTITY.match(text)
    if not m or m.group(2) not in _SUFFIX:
        raise ValueError(f"{what}: {text!r} is not a Kubernetes quantity (e.g. 500m, 16Gi, 8)")
    return float(m.group(1)) * _SUFFIX[m.group(2)]
