"""What the replayed GPUs really deliver per workload class, when that is not what the table says (pure).

The extender scores with ``core/.../throughput.csv``; a scenario says how the world differs:

* ``reference``: the table is right for every class;
* ``old_2x_faster`` / ``old_2x_slower``: families below half an A100 in the table (T4, P100)
  really run twice as fast / half as fast, for every class;
* ``memory_bound``: the ``memory`` class (half the batch tasks) gains half of what the table
  says over the reference GPU, in log terms (``table ** 0.5``: T4 0.65 instead of 0.42,
  V100 0.99 instead of 0.98); the ``compute`` class runs as the table says.

Each batch task is of one class, fixed by its name (a stable hash, half each).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping

__all__ = ["CLASSES", "OLD_BELOW", "SCENARIOS", "truth", "workload_class_of"]

CLASSES = ("compute", "memory")
SCENARIOS = ("reference", "old_2x_faster", "old_2x_slower", "memory_bound")
OLD_BELOW = 0.5
"""Families the table puts below this share of an A100 are the "old" ones."""


def workload_class_of(task_name: str) -> str:
    return CLASSES[zlib.crc32(task_name.encode()) % len(CLASSES)]


def truth(scenario: str, table: Mapping[str, float]) -> dict[str, dict[str, float]]:
    """Workload class -> family -> relative throughput (reference GPU = 1)."""
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario {scenario!r}: choose one of {', '.join(SCENARIOS)}")
    old = {"old_2x_faster": 2.0, "old_2x_slower": 0.5}.get(scenario, 1.0)
    base = {f: v * old if v < OLD_BELOW else v for f, v in table.items()}
    memory = {f: v**0.5 for f, v in base.items()} if scenario == "memory_bound" else base
    return {"compute": base, "memory": memory}
