"""What a replay cost, how long pods waited, and how fragmented the GPUs were (pure).

Inputs are what the runner observed, in wall-clock seconds from the replay's
start; results are in trace seconds (wall x speedup) and dollars.

* cost: for each node, the union of intervals during which it holds at least
  one pod, times its hourly price (an autoscaler removes empty nodes);
* pending: bind time - creation time per pod; a pod never bound waits until
  it was deleted (and is counted as unscheduled);
* GPU fragmentation: idle share of the GPU capacity of nodes that hold at
  least one pod, time-averaged over the replay: GPUs that are paid for but
  stranded on partly used nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from statictrain.money import to_decimal

__all__ = ["Observed", "RunSummary", "summarize"]

_SECONDS_PER_HOUR = Decimal(3600)


@dataclass(frozen=True, slots=True)
class Observed:
    """One replayed pod as the runner saw it (wall seconds from the replay start)."""

    name: str
    gpu_milli: int
    created_s: float
    deleted_s: float
    bound_s: float | None
    node: str | None


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One replay run's figures."""

    pods: int
    unscheduled: int
    cost_usd: Decimal
    node_hours: Decimal
    nodes_used: int
    pending_mean_s: float
    """Mean pending time per pod, trace seconds."""
    pending_p99_s: float
    pending_mean_wall_s: float
    """Mean pending time per pod, measured wall seconds."""
    gpu_fragmentation: float


def _union_seconds(intervals: list[tuple[float, float]]) -> float:
    total = 0.0
    end = float("-inf")
    for lo, hi in sorted(intervals):
        if hi <= end:
            continue
        total += hi - max(lo, end)
        end = hi
    return total


def _quantile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _fragmentation(pods: Sequence[Observed], gpu_capacity_milli: Mapping[str, int]) -> float:
    events: list[tuple[float, int, str, int]] = []
    for p in pods:
        if p.node is not None and p.bound_s is not None and p.deleted_s > p.bound_s:
            events.append((p.bound_s, 1, p.node, p.gpu_milli))
            events.append((p.deleted_s, -1, p.node, p.gpu_milli))
    events.sort(key=lambda e: (e[0], e[1]))
    used: dict[str, int] = {}
    pods_on: dict[str, int] = {}
    weighted = 0.0
    covered = 0.0
    last_t: float | None = None
    for t, sign, node, milli in events:
        if last_t is not None and t > last_t:
            cap = sum(gpu_capacity_milli.get(n, 0) for n in pods_on)
            if cap > 0:
                idle = sum(gpu_capacity_milli.get(n, 0) - used.get(n, 0) for n in pods_on)
                weighted += (t - last_t) * max(idle, 0) / cap
                covered += t - last_t
        used[node] = used.get(node, 0) + sign * milli
        pods_on[node] = pods_on.get(node, 0) + sign
        if pods_on[node] == 0:
            del pods_on[node]
            used.pop(node, None)
        last_t = t
    return weighted / covered if covered > 0 else 0.0


def summarize(
    pods: Sequence[Observed],
    hourly_usd: Mapping[str, Decimal],
    gpu_capacity_milli: Mapping[str, int],
    speedup: float,
) -> RunSummary:
    """Figures of one run; nodes missing from ``hourly_usd`` are an error (a cost would be lost)."""
    busy: dict[str, list[tuple[float, float]]] = {}
    pending_wall: list[float] = []
    unscheduled = 0
    for p in pods:
        if p.bound_s is None or p.node is None:
            unscheduled += 1
            pending_wall.append(max(p.deleted_s - p.created_s, 0.0))
            continue
        pending_wall.append(max(p.bound_s - p.created_s, 0.0))
        if p.deleted_s > p.bound_s:
            busy.setdefault(p.node, []).append((p.bound_s, p.deleted_s))
    missing = sorted(set(busy) - set(hourly_usd))
    if missing:
        raise KeyError(f"no price for node(s) {missing[:5]}: every node a pod ran on needs a price")
    cost = Decimal(0)
    node_hours = Decimal(0)
    scale = to_decimal(speedup)
    for node, intervals in busy.items():
        hours = to_decimal(_union_seconds(intervals)) * scale / _SECONDS_PER_HOUR
        node_hours += hours
        cost += hours * hourly_usd[node]
    mean_wall = sum(pending_wall) / len(pending_wall) if pending_wall else 0.0
    return RunSummary(
        pods=len(pods),
        unscheduled=unscheduled,
        cost_usd=cost,
        node_hours=node_hours,
        nodes_used=len(busy),
        pending_mean_s=mean_wall * speedup,
        pending_p99_s=_quantile(pending_wall, 0.99) * speedup,
        pending_mean_wall_s=mean_wall,
        gpu_fragmentation=_fragmentation(pods, gpu_capacity_milli),
    )
