"""What a work-conserving replay runs: tasks with work, arrivals compressed to a load, a stratified inventory (pure).

A trace pod that ran in the trace becomes a :class:`Task` whose work is its
trace run time (``deletion - scheduled``) at the throughput of a reference GPU
(:data:`REFERENCE_FAMILY`): on a GPU ``r`` times as fast it runs ``1/r`` as long.
Latency-sensitive services (qos ``LS``) keep their trace lifetime wherever they
land. Left out, and counted by reason: pods without GPUs, pods that never ran
in the trace. A pod deleted at the last second of the trace was still running
when the trace ended: its run time is censored, so its task never finishes.

Arrivals are compressed by a factor ``k`` around the segment start ``S``
(arrival = (creation - S) / k), which raises the load the way the FGD paper
scales this trace; :func:`compression_for` finds the ``k`` at which the
time-averaged GPU demand (at reference speed) is a target share of the capacity.
Tasks that arrived before ``S`` and still run at ``S`` are prefilled at time 0
with what is left of their work.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .trace import TraceNode, TracePod

__all__ = [
    "REFERENCE_FAMILY",
    "SERVICE_QOS",
    "Task",
    "compression_for",
    "demand_share",
    "eligible_pods",
    "stratified_nodes",
    "tasks_for",
]

REFERENCE_FAMILY = "A100"
"""Trace run times are taken as run times on this family (the trace's G2 nodes, 71 % of its GPUs, are
assumed A100-class; see prices.py)."""
SERVICE_QOS = "LS"


@dataclass(frozen=True, slots=True)
class Task:
    """One pod to replay, in trace seconds from the segment start."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpu_milli: int
    """Total GPU demand in milli-GPU."""
    arrive_s: float
    """0 for prefilled tasks."""
    ref_seconds: float
    """Run time on the reference GPU (what is left of it for prefilled tasks); inf when censored by the trace end."""
    service: bool
    """A latency-sensitive service: fixed lifetime, its speed does not shorten it."""
    prefilled: bool
    workload_class: str = ""
    """Which speed per GPU family it runs at (NodeFacts.class_throughput); "" the node's default."""

    @property
    def total_gpu_milli(self) -> int:
        return self.gpu_milli

    def run_seconds(self, relative_throughput: float) -> float:
        """Trace seconds it runs on a GPU of this relative throughput (reference = 1)."""
        if self.service or math.isinf(self.ref_seconds):
            return self.ref_seconds
        return self.ref_seconds / relative_throughput


def eligible_pods(pods: Iterable[TracePod], skipped: dict[str, int]) -> list[TracePod]:
    """GPU pods that ran in the trace; the others are counted in ``skipped`` by reason."""
    out: list[TracePod] = []
    for pod in pods:
        reason = None
        if pod.total_gpu_milli <= 0:
            reason = "no GPU requested"
        elif pod.scheduled_s is None or pod.phase == "Pending":
            reason = "never scheduled in the trace"
        if reason is None:
            out.append(pod)
        else:
            skipped[reason] = skipped.get(reason, 0) + 1
    return out


def tasks_for(pods: Sequence[TracePod], start_s: float, length_s: float, compression: float) -> list[Task]:
    """Tasks alive in ``[0, length_s)`` after compressing arrivals by ``compression`` around ``start_s``."""
    if not compression > 0:
        raise ValueError(f"compression must be > 0, got {compression}")
    trace_end = max((p.deletion_s for p in pods), default=0)
    tasks: list[Task] = []
    for pod in pods:
        assert pod.scheduled_s is not None  # eligible_pods
        arrive = (pod.creation_s - start_s) / compression
        if arrive >= length_s:
            continue
        run = math.inf if pod.deletion_s >= trace_end else float(pod.deletion_s - pod.scheduled_s)
        if arrive + run <= 0:
            continue
        prefilled = arrive < 0
        tasks.append(
            Task(
                name=pod.name,
                cpu_milli=pod.cpu_milli,
                memory_mib=pod.memory_mib,
                gpu_milli=pod.total_gpu_milli,
                arrive_s=0.0 if prefilled else arrive,
                ref_seconds=run + arrive if prefilled else run,
                service=pod.qos == SERVICE_QOS,
                prefilled=prefilled,
            )
        )
    tasks.sort(key=lambda t: (t.arrive_s, t.name))
    return tasks


def demand_share(tasks: Iterable[Task], length_s: float, capacity_milli: int) -> float:
    """Time-averaged GPU demand over ``[0, length_s)`` at reference speed, as a share of the capacity."""
    total = sum(t.gpu_milli * (min(t.arrive_s + t.ref_seconds, length_s) - t.arrive_s) for t in tasks)
    return total / (length_s * capacity_milli)


def compression_for(
    pods: Sequence[TracePod], start_s: float, length_s: float, capacity_milli: int, target: float
) -> float:
    """The arrival compression at which :func:`demand_share` is ``target`` (bisection in log space)."""
    lo, hi = 1e-2, 1e4

    def share(k: float) -> float:
        return demand_share(tasks_for(pods, start_s, length_s, k), length_s, capacity_milli)

    if share(hi) < target:
        raise ValueError(f"even {hi:g}x compressed, the trace's demand stays below {target:.0%} of the capacity")
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if share(mid) < target else (lo, mid)
    return hi


def stratified_nodes(nodes: Sequence[TraceNode], fraction: float) -> list[TraceNode]:
    """Every ``1/fraction``-th node of each (GPU model, GPUs per node) stratum, at least one per stratum.

    Nodes are taken evenly spaced in name order, so the choice is deterministic.
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    strata: dict[tuple[str, int], list[TraceNode]] = {}
    for node in sorted(nodes, key=lambda n: n.name):
        if node.gpus > 0:
            strata.setdefault((node.model, node.gpus), []).append(node)
    chosen: list[TraceNode] = []
    for members in strata.values():
        keep = max(1, round(len(members) * fraction))
        step = len(members) / keep
        chosen.extend(members[int(i * step)] for i in range(keep))
    return chosen
