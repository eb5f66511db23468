"""Grid carbon intensity of a node (pure): its own annotation or label, a setting per region, else the shipped
table of public annual averages (``data/grid_intensity.csv``; sources in ``data/grid_intensity.README.md``).

A job's carbon is its GPU energy x PUE x its nodes' intensity (statictrain.cost); this module only finds the
intensity, in gCO2e per kWh.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from statictrain import labels

__all__ = ["GridIntensity", "parse_intensity", "parse_overrides", "shipped_table"]

MAX_G_PER_KWH = 2000.0
"""No grid emits more than this per kWh (coal alone is about 1,000): a larger value is taken for a typo."""


def parse_intensity(text: str, *, what: str) -> float:
    """A grid intensity in gCO2e/kWh (``"454.5"``); ValueError naming ``what`` and how to write it."""
    try:
        value = float(text.strip())
    except ValueError:
        raise ValueError(f"{what} {text!r} is not a number; write gCO2e per kWh like 454.5") from None
    if not math.isfinite(value) or not 0 <= value <= MAX_G_PER_KWH:
        raise ValueError(f"{what} {text!r} must be within 0..{MAX_G_PER_KWH:g} gCO2e per kWh")
    return value


def parse_overrides(text: str) -> dict[str, float]:
    """``"us-east-1=380,eu-west-1=290"`` -> {region: gCO2e/kWh}; ValueError saying which part is wrong."""
    out: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        region, sep, value = part.partition("=")
        if not sep or not region.strip():
            raise ValueError(f"STATICTRAIN_COST_GRID_INTENSITY part {part!r} must be written region=gCO2e-per-kWh")
        out[region.strip()] = parse_intensity(value, what=f"STATICTRAIN_COST_GRID_INTENSITY {region.strip()}")
    return out


@cache
def shipped_table() -> Mapping[str, float]:
    """Region -> gCO2e/kWh from the table shipped inside the package."""
    text = resources.files("statictrain").joinpath("data/grid_intensity.csv").read_text(encoding="utf-8")
    return {row["region"]: float(row["gco2e_per_kwh"]) for row in csv.DictReader(io.StringIO(text))}


@dataclass(frozen=True)
class GridIntensity:
    """Where a node's intensity comes from: its annotation or label, then ``regions``, then ``table``."""

    regions: Mapping[str, float] = field(default_factory=dict)
    """The setting per region (STATICTRAIN_COST_GRID_INTENSITY)."""
    table: Mapping[str, float] = field(default_factory=dict)
    """Public annual averages per region (:func:`shipped_table`)."""

    def of(self, node: Mapping[str, object]) -> tuple[float | None, str]:
        """(gCO2e/kWh or None, where it came from: ``annotation``, ``label``, ``setting``, ``table``, or why
        none: ``unknown`` or the bad annotation's error)."""
        meta = node.get("metadata") or {}
        assert isinstance(meta, Mapping)
        name = meta.get("name", "?")
        for kind in ("annotations", "labels"):
            raw = (meta.get(kind) or {}).get(labels.GRID_INTENSITY)
            if raw:
                try:
                    return parse_intensity(str(raw), what=f"node {name} {kind[:-1]} {labels.GRID_INTENSITY}"), kind[:-1]
                except ValueError as e:
                    return None, str(e)
        region = (meta.get("labels") or {}).get(labels.REGION, "")
        if region in self.regions:
            return self.regions[region], "setting"
        if region in self.table:
            return self.table[region], "table"
        return None, "unknown"
