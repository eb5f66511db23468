"""How fast a learning arm learns within a replay window: figures slice by slice (pure).

A window's batch tasks fall into buckets: ``prefill`` (the tasks there when the clock
starts, placed before any of the window's pods ran), then ``slices`` equal stretches of
the window by the time the task started running. Per bucket:

* ``batch_cost_per_work_by_slice``: the batch tasks' $ over their A100-equivalent
  GPU-hours (each task's share of its node's cost, as in :mod:`.workreport`, ends
  censored at the window's end), so arms compare bucket by bucket on the same tasks;
* ``source_counts_by_slice``: how many of the extender's scorings rested on a measured,
  inferred or table figure (growth of its ``throughput_estimates_total{source}`` counter
  between samples, each growth put in the bucket of the sample that saw it).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from .workload import Task
from .workreport import NodeFacts, Placement, cost_split, outcomes, work

__all__ = ["PREFILL", "batch_cost_per_work_by_slice", "bucket_names", "source_counts_by_slice"]

PREFILL = "prefill"


def bucket_names(slices: int) -> list[str]:
    """``prefill`` then ``t0-20%``, ``t20-40%``, ... (share of the window by start time)."""
    edges = [round(100 * i / slices) for i in range(slices + 1)]
    return [PREFILL, *(f"t{lo}-{hi}%" for lo, hi in itertools.pairwise(edges))]


def _slice(t_s: float, length_s: float, slices: int) -> int:
    return 1 + min(max(int(t_s / length_s * slices), 0), slices - 1)


def batch_cost_per_work_by_slice(
    tasks: Sequence[Task],
    placements: Mapping[str, Placement],
    nodes: Mapping[str, NodeFacts],
    *,
    speedup: float,
    length_s: float,
    slices: int,
) -> list[float | None]:
    """Batch $ per A100-equivalent GPU-hour per bucket (prefill first); None where no work was delivered."""
    if slices < 1:
        raise ValueError(f"slices must be >= 1, got {slices}")
    runs = outcomes(tasks, placements, nodes, speedup, length_s)
    _, task_cost = cost_split(runs, nodes)
    cost = [0.0] * (slices + 1)
    done = [0.0] * (slices + 1)
    for run in runs:
        if run.task.service:
            continue
        i = 0 if run.task.prefilled else _slice(run.start_s, length_s, slices)
        cost[i] += task_cost.get(run.task.name, 0.0)
        done[i] += work(run, nodes)
    return [c / w if w > 0 else None for c, w in zip(cost, done, strict=True)]


def source_counts_by_slice(
    samples: Sequence[tuple[float, Mapping[str, float]]], *, length_s: float, slices: int
) -> list[dict[str, float]]:
    """Scorings per source per bucket from samples of a cumulative counter.

    ``samples``: (trace seconds from the window clock's start, negative before it; counts by
    source), in time order, the first taken before the window's first pod. Growth seen at
    t < 0 is the prefill's; growth seen after the window's end is left out.
    """
    if slices < 1:
        raise ValueError(f"slices must be >= 1, got {slices}")
    out: list[dict[str, float]] = [{} for _ in range(slices + 1)]
    for (_, before), (t, after) in itertools.pairwise(samples):
        if t > length_s:
            break
        i = 0 if t < 0 else _slice(t, length_s, slices)
        for source, count in after.items():
            grown = count - before.get(source, 0.0)
            if grown > 0:
                out[i][source] = out[i].get(source, 0.0) + grown
    return out
