"""Prioritize scores: expected dollars per unit of work, plus packing (pure).

For each candidate node::

    cost_per_work = price per GPU-hour / relative throughput of its GPU for this job
    cost_score    = cheapest cost_per_work among candidates / this node's   (1 = cheapest)
    pack_score    = fraction of the node's GPUs already allocated           (1 = full)
    value         = w_cost * cost_score + w_pack * pack_score
    score         = round(MAX_SCORE * value / best value among candidates)   (best = MAX_SCORE)

Scaling by the best candidate spends the whole 0-10 range kube-scheduler
allows on the nodes actually in play, so a 10% price difference is not lost
to rounding.

Pods without GPUs use the whole-node price instead of the per-GPU one. A node
without a price gets cost_score 0: unknown is never cheap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .nodes import NodeInfo

__all__ = [
    "MAX_SCORE",
    "Weights",
    "cost_per_work",
    "gang_cost_per_work",
    "pack_fraction",
    "score_nodes",
    "score_values",
]

MAX_SCORE = 10  # k8s.io/kube-scheduler/extender/v1 MaxExtenderPriority


@dataclass(frozen=True, slots=True)
class Weights:
    """Relative weights of the two terms; both ≥ 0, not both 0."""

    cost: float = 1.0
    """Weight of dollars per unit of work."""
    pack: float = 1.0
    """Weight of preferring partly used nodes (so empty ones can be removed)."""
    unknown_throughput: float = 0.1
    """Relative throughput assumed for a GPU family missing from every table."""

    def __post_init__(self) -> None:
        if self.cost < 0 or self.pack < 0 or self.cost + self.pack <= 0:
            raise ValueError(f"weights must be >= 0 and not both 0, got cost={self.cost} pack={self.pack}")
        if self.unknown_throughput <= 0:
            raise ValueError(f"unknown_throughput must be > 0, got {self.unknown_throughput}")


def cost_per_work(
    node: NodeInfo, gpu_pod: bool, throughput: Mapping[str, float] | None, unknown_throughput: float
) -> float | None:
    """Dollars per hour per unit of relative throughput; None when the node has no price.

    ``throughput=None`` means the pod's run time does not depend on the GPU
    model (a fixed-duration service or batch task): cost is the GPU-hour price.
    """
    if not gpu_pod:
        return node.hourly_usd
    if node.gpu_hourly_usd is None:
        return None
    if throughput is None:
        return node.gpu_hourly_usd
    return node.gpu_hourly_usd / throughput.get(node.gpu_family, unknown_throughput)


def gang_cost_per_work(
    node: NodeInfo,
    members: Sequence[NodeInfo],
    gang_size: int,
    throughput: Mapping[str, float],
    unknown_throughput: float,
) -> float | None:
    """$ per unit of work of a whole gang if this pod lands on ``node``.

    ``members`` are the nodes of the gang's pods already bound (one entry per
    pod); the pods still to come are assumed to land on nodes like this one.
    The gang steps at the pace of its slowest GPU, so it pays for every
    member's GPUs and delivers ``gang_size x slowest throughput``. With no
    member bound this equals :func:`cost_per_work`. None when a price is unknown.
    """
    bound = list(members)[: max(gang_size - 1, 0)]
    prices = [m.gpu_hourly_usd for m in bound]
    if node.gpu_hourly_usd is None or any(p is None for p in prices):
        return None
    speeds = [throughput.get(m.gpu_family, unknown_throughput) for m in bound]
    slowest = min([throughput.get(node.gpu_family, unknown_throughput), *speeds])
    size = max(gang_size, len(bound) + 1)
    hourly = sum(p for p in prices if p is not None) + (size - len(bound)) * node.gpu_hourly_usd
    return hourly / (size * slowest)


def pack_fraction(node: NodeInfo, used_gpu_milli: int) -> float:
    """Share of the node's GPUs already allocated, in [0, 1]."""
    if node.gpus <= 0:
        return 0.0
    return min(max(used_gpu_milli / (node.gpus * 1000), 0.0), 1.0)


def score_values(costs: Sequence[float | None], packs: Sequence[float], weights: Weights) -> list[int]:
    """Scores from per-node cost per work (None = unknown) and pack fractions, same order."""
    known = [c for c in costs if c]
    if known:
        cheapest = min(known)
        cost_scores = [cheapest / c if c else 0.0 for c in costs]
    else:
        cost_scores = [0.0] * len(costs)
    w_cost, w_pack = weights.cost, weights.pack
    values = [w_cost * c + w_pack * p for c, p in zip(cost_scores, packs, strict=True)]
    best = max(values, default=0.0)
    if best <= 0:
        return [0] * len(values)
    scale = MAX_SCORE / best
    # 0 <= v <= best, so every score is already within [0, MAX_SCORE].
    return [round(v * scale) for v in values]


def score_nodes(
    nodes: Sequence[NodeInfo],
    gpu_pod: bool,
    throughput: Mapping[str, float] | None,
    used_gpu_milli: Mapping[str, int],
    weights: Weights,
) -> list[int]:
    """One score in [0, MAX_SCORE] per node, same order as ``nodes``."""
    costs = [cost_per_work(n, gpu_pod, throughput, weights.unknown_throughput) for n in nodes]
    packs = [pack_fraction(n, used_gpu_milli.get(n.name, 0)) if gpu_pod else 0.0 for n in nodes]
    return score_values(costs, packs, weights)
