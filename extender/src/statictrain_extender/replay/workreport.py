"""Figures of one arm in one segment of a work-conserving replay (pure).

Inputs are the tasks, what the runner saw (bind time and node per task, wall
seconds from the segment clock's start) and the nodes' prices and GPUs; results
are in trace hours (wall x speedup) and dollars.

* A bound task runs from max(bind, 0) until its work is done on its node's GPU
  or the segment ends (censored); its delivered work is GPU share x relative
  throughput x hours, in A100-equivalent GPU-hours.
* A node is paid while it holds at least one task (an autoscaler removes empty
  nodes); its cost in each stretch of time is split over the tasks on it by GPU
  share, so batch tasks and services (LS) can be reported apart.
* Pending: PodScheduled time - creation time (API server, whole seconds, so
  ``speedup`` trace seconds of resolution) of tasks that arrived during the
  segment and were bound; prefilled tasks are left out. ``pending_watch_*``: the
  runner's bind time - planned arrival, sub-second, as a cross-check.
* Unscheduled: tasks never bound before the segment ended.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise

from .workload import Task

__all__ = ["NodeFacts", "Outcome", "Placement", "arm_figures", "cost_split", "outcomes", "quantile", "reprice", "work"]

_HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What accounting needs to know about a node."""

    family: str
    """GPU family (``A100``, ``T4``, ...)."""
    gpus: int
    hourly_usd: float
    throughput: float
    """Relative throughput of its GPU, A100 = 1."""
    class_throughput: Mapping[str, float] = field(default_factory=dict)
    """Workload class -> relative throughput there, where a class's differs from ``throughput``."""

    def speed(self, task: Task) -> float:
        """How fast ``task`` really runs on this node's GPU."""
        return self.class_throughput.get(task.workload_class, self.throughput)


@dataclass(frozen=True, slots=True)
class Placement:
    """Where and when a task was bound (wall seconds from the segment clock's start, >= 0)."""

    node: str
    at_s: float
    scheduled_delay_s: float | None


@dataclass(frozen=True, slots=True)
class Outcome:
    """One task's run in trace seconds from the segment start."""

    task: Task
    node: str
    start_s: float
    end_s: float


def outcomes(
    tasks: Sequence[Task],
    placements: Mapping[str, Placement],
    nodes: Mapping[str, NodeFacts],
    speedup: float,
    length_s: float,
) -> list[Outcome]:
    """Run intervals of the bound tasks, ends censored at ``length_s``."""
    out: list[Outcome] = []
    for task in tasks:
        placed = placements.get(task.name)
        if placed is None:
            continue
        start = max(placed.at_s, 0.0) * speedup
        if start >= length_s:
            continue
        end = min(start + task.run_seconds(nodes[placed.node].speed(task)), length_s)
        out.append(Outcome(task, placed.node, start, end))
    return out


def cost_split(runs: Sequence[Outcome], nodes: Mapping[str, NodeFacts]) -> tuple[dict[str, float], dict[str, float]]:
    """Per node: paid hours; per task: its share of the node cost in dollars."""
    by_node: dict[str, list[Outcome]] = {}
    for run in runs:
        if run.end_s > run.start_s:
            by_node.setdefault(run.node, []).append(run)
    paid_hours: dict[str, float] = {}
    task_cost: dict[str, float] = {}
    for node, members in by_node.items():
        price = nodes[node].hourly_usd
        cuts = sorted({t for r in members for t in (r.start_s, r.end_s)})
        hours = 0.0
        for lo, hi in pairwise(cuts):
            present = [r for r in members if r.start_s < hi and r.end_s > lo]
            if not present:
                continue
            span = (hi - lo) / _HOUR
            hours += span
            total = sum(r.task.gpu_milli for r in present)
            for r in present:
                task_cost[r.task.name] = task_cost.get(r.task.name, 0.0) + price * span * r.task.gpu_milli / total
        paid_hours[node] = hours
    return paid_hours, task_cost


def work(run: Outcome, nodes: Mapping[str, NodeFacts]) -> float:
    """A100-equivalent GPU-hours the run delivered."""
    return run.task.gpu_milli / 1000 * nodes[run.node].speed(run.task) * (run.end_s - run.start_s) / _HOUR


def quantile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank quantile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(q * len(ordered) + 0.999999) - 1))]


def arm_figures(
    tasks: Sequence[Task],
    placements: Mapping[str, Placement],
    nodes: Mapping[str, NodeFacts],
    speedup: float,
    length_s: float,
) -> dict[str, object]:
    """Cost, work, $/work (batch and services apart), paid GPU-hours, pending, unscheduled, node-hours per family."""
    runs = outcomes(tasks, placements, nodes, speedup, length_s)
    paid_hours, task_cost = cost_split(runs, nodes)
    delivered = {"batch": 0.0, "service": 0.0}
    cost = {"batch": 0.0, "service": 0.0}
    for run in runs:
        kind = "service" if run.task.service else "batch"
        delivered[kind] += work(run, nodes)
        cost[kind] += task_cost.get(run.task.name, 0.0)
    node_hours: dict[str, float] = {}
    gpu_hours = 0.0
    for node, hours in paid_hours.items():
        facts = nodes[node]
        node_hours[facts.family] = node_hours.get(facts.family, 0.0) + hours
        gpu_hours += hours * facts.gpus
    capacity_milli = sum(f.gpus * 1000 for f in nodes.values())
    allocated = sum(r.task.gpu_milli * (r.end_s - r.start_s) for r in runs) / (capacity_milli * length_s)
    arrived = [t for t in tasks if not t.prefilled]
    delays = [
        p.scheduled_delay_s * speedup
        for t in arrived
        if (p := placements.get(t.name)) is not None and p.scheduled_delay_s is not None
    ]
    # The same from the runner's watch (sub-second, includes the client's creation lag): a cross-check.
    watched = [max(p.at_s * speedup - t.arrive_s, 0.0) for t in arrived if (p := placements.get(t.name)) is not None]
    total_cost = sum(cost.values())
    total_work = sum(delivered.values())
    return {
        "tasks": len(tasks),
        "prefilled": len(tasks) - len(arrived),
        "unscheduled": sum(1 for t in tasks if t.name not in placements),
        "unscheduled_batch": sum(1 for t in tasks if t.name not in placements and not t.service),
        "cost_usd": total_cost,
        "work_a100_gpu_hours": total_work,
        "cost_per_work": total_cost / total_work if total_work else None,
        "batch_cost_usd": cost["batch"],
        "batch_work_a100_gpu_hours": delivered["batch"],
        "batch_cost_per_work": cost["batch"] / delivered["batch"] if delivered["batch"] else None,
        "service_cost_usd": cost["service"],
        "service_a100_gpu_hours": delivered["service"],
        "service_cost_per_work": cost["service"] / delivered["service"] if delivered["service"] else None,
        "paid_gpu_hours": gpu_hours,
        "node_hours_by_family": node_hours,
        "gpu_allocation": allocated,
        "pending_p50_s": quantile(delays, 0.50),
        "pending_p99_s": quantile(delays, 0.99),
        "pending_samples": len(delays),
        "pending_watch_p50_s": quantile(watched, 0.50),
        "pending_watch_p99_s": quantile(watched, 0.99),
    }


def reprice(
    tasks: Sequence[Task],
    placements: Mapping[str, Placement],
    nodes: Mapping[str, NodeFacts],
    *,
    prices: Mapping[str, float],
    speedup: float,
    length_s: float,
) -> float | None:
    """$ per unit of work of the same placements with other node prices (node -> $/hour)."""
    repriced = {n: replace(f, hourly_usd=prices[n]) for n, f in nodes.items()}
    figures = arm_figures(tasks, placements, repriced, speedup, length_s)
    value = figures["cost_per_work"]
    return float(value) if isinstance(value, float) else None
