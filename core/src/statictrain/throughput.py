"""Relative training throughput per GPU family, and a job's estimates with their source (pure).

Used by the extender (scoring) and by ``statictrain estimate`` (time on GPU models without history).

The default table is ``data/throughput.csv`` (sources in ``data/throughput.README.md``),
A100 = 1.0. A job's own measured step times override it:

* ``measured``: the job has step times on this family;
* ``inferred``: the job has step times on other families; the table's figure is
  scaled by the job's own measured/expected ratio there (geometric mean over
  the measured families the table knows);
* ``table``: the job has no step times at all (or is not a job): the table's figure.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType

__all__ = [
    "DEFAULT_RELATIVE_THROUGHPUT",
    "INFERRED",
    "MEASURED",
    "SOURCES",
    "TABLE",
    "JobThroughput",
    "job_throughput",
    "parse_table",
]

MEASURED = "measured"
INFERRED = "inferred"
TABLE = "table"
SOURCES = (MEASURED, INFERRED, TABLE)


def parse_table(text: str, source: str = "throughput table") -> dict[str, float]:
    """``family,relative_to_a100,...`` CSV to {family: ratio}; bad rows are an error naming the line."""
    reader = csv.DictReader(io.StringIO(text))
    if not {"family", "relative_to_a100"} <= set(reader.fieldnames or []):
        raise ValueError(f"{source}: needs columns family,relative_to_a100; header is {reader.fieldnames}")
    table: dict[str, float] = {}
    for line, row in enumerate(reader, start=2):
        family = (row["family"] or "").strip().upper()
        try:
            value = float(row["relative_to_a100"])
        except (TypeError, ValueError):
            value = float("nan")
        if not family or not math.isfinite(value) or value <= 0 or family in table:
            raise ValueError(f"{source} line {line}: need a new family and a ratio > 0, got {row}")
        table[family] = value
    return table


DEFAULT_RELATIVE_THROUGHPUT: Mapping[str, float] = MappingProxyType(
    parse_table((resources.files(__package__) / "data" / "throughput.csv").read_text(), "data/throughput.csv")
)


@dataclass(frozen=True, slots=True)
class JobThroughput:
    """One job's relative throughput per family and where each figure comes from."""

    relative: Mapping[str, float]
    """Family -> relative throughput (families missing here use the caller's unknown figure)."""
    sources: Mapping[str, str]
    """Family -> MEASURED, INFERRED or TABLE."""

    def source(self, family: str) -> str:
        return self.sources.get(family, TABLE)


def job_throughput(
    step_seconds: Mapping[str, float], defaults: Mapping[str, float] = DEFAULT_RELATIVE_THROUGHPUT
) -> JobThroughput:
    """Relative throughput per family for one job from its mean step seconds per family.

    Measured families get ``unit / step seconds``, where ``unit`` makes the job's
    measured figures match the table on average (geometric mean) over the measured
    families the table knows: the job's own measured/expected ratio is 1 on
    average there, and every other family is inferred as the table's figure in
    the same units. Only ratios between families matter to scoring. Without a
    measured family the table knows, measured families keep their ratios among
    themselves (unit 1) and the others stay at the table's figure.
    """
    measured = {f: s for f, s in step_seconds.items() if math.isfinite(s) and s > 0}
    relative = dict(defaults)
    if not measured:
        return JobThroughput(relative, dict.fromkeys(defaults, TABLE))
    anchors = [f for f in measured if f in defaults]
    unit = math.exp(sum(math.log(defaults[f] * measured[f]) for f in anchors) / len(anchors)) if anchors else 1.0
    sources = dict.fromkeys(defaults, INFERRED if anchors else TABLE)
    for family, seconds in measured.items():
        relative[family] = unit / seconds
        sources[family] = MEASURED
    return JobThroughput(relative, sources)
