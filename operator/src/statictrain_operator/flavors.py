"""Order a Kueue ClusterQueue's ResourceFlavors by measured $ per unit of work (pure).

Kueue tries a ClusterQueue's flavors in the order they are listed (per resource
group) and admits a workload on the first that has quota: that order is its only
cost lever. Here each flavor gets a figure, $ per million training tokens, from

- the GPU nodes the flavor selects (its ``spec.nodeLabels`` are a subset of the
  node's labels) and each node's $ per GPU-hour (estimate.Offer: the node's price
  annotations, else the shipped catalog), and
- measured tokens per second per GPU for the node's GPU family (the observed
  workload's throughput, from Prometheus or a recorded table):

  $/Mtoken of a node = GPU $/hour / (tokens/s per GPU x 3600) x 10^6,

and the flavor's figure is the GPU-weighted mean over its nodes whose family has
a measured throughput: it assumes a job admitted on a flavor lands on the
flavor's nodes in proportion to their GPUs (the scheduler, not Kueue, picks the
node). Flavors without any measured node keep their relative order after the
measured ones. What this cannot know: throughput on a GPU family the workload
never ran on, how much of the flavor's quota is free when a job arrives,
interruptions of spot capacity (the work lost since the last checkpoint), and
workloads that differ from the observed mix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from statictrain import gpus

from statictrain_operator.estimate import Offer

__all__ = ["FlavorCost", "cost_per_mtoken", "flavor_costs", "order", "reorder_patch", "throughput_by_family"]

MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class FlavorCost:
    name: str
    usd_per_mtoken: Decimal | None
    """GPU-weighted mean over the flavor's nodes with measured throughput; None: none measured."""
    gpus: int
    """GPUs on the nodes the flavor selects."""
    measured_gpus: int
    families: tuple[str, ...]
    """GPU families of its nodes; unmeasured ones end in '?'."""


def throughput_by_family(table: Mapping[str, Any]) -> dict[str, float]:
    """A recorded table (GPU name -> tokens/s per GPU) keyed by GPU family; ValueError on bad rows."""
    out: dict[str, float] = {}
    for name, value in table.items():
        family = gpus.from_name(str(name)).family
        if family == gpus.UNKNOWN:
            raise ValueError(f"throughput table: {name!r} is not a known GPU model")
        try:
            tps = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"throughput table: {name}: {value!r} is not a number of tokens/s per GPU") from None
        if not tps > 0:
            raise ValueError(f"throughput table: {name}: tokens/s per GPU must be > 0, got {value!r}")
        out[family] = tps
    return out


def cost_per_mtoken(gpu_hourly_usd: Decimal, tokens_per_s_per_gpu: float) -> Decimal:
    return gpu_hourly_usd / (Decimal(repr(tokens_per_s_per_gpu)) * 3600) * MILLION


def _selects(flavor: Mapping[str, Any], node_labels: Mapping[str, str]) -> bool:
    wanted = (flavor.get("spec") or {}).get("nodeLabels") or {}
    return all(node_labels.get(k) == v for k, v in wanted.items())


def flavor_costs(
    flavors: Sequence[Mapping[str, Any]],
    offers: Sequence[tuple[Offer, Mapping[str, str]]],
    throughput: Mapping[str, float],
) -> list[FlavorCost]:
    """A figure per ResourceFlavor; ``offers``: each GPU node's offer with the node's labels."""
    out = []
    for flavor in flavors:
        weighted, measured, total = Decimal(0), 0, 0
        families: dict[str, bool] = {}
        for offer, node_labels in offers:
            if not _selects(flavor, node_labels):
                continue
            total += offer.gpus_per_node
            tps = throughput.get(offer.family)
            families[offer.family] = families.get(offer.family, False) or tps is not None
            if tps is not None:
                weighted += cost_per_mtoken(offer.gpu_hourly_usd, tps) * offer.gpus_per_node
                measured += offer.gpus_per_node
        figure = weighted / measured if measured else None
        names = tuple(f if ok else f"{f}?" for f, ok in sorted(families.items()))
        out.append(FlavorCost(flavor["metadata"]["name"], figure, total, measured, names))
    return out


def order(costs: Sequence[FlavorCost]) -> list[str]:
    """Flavor names, cheapest measured first; unmeasured after, in their given order."""
    measured = sorted((c for c in costs if c.usd_per_mtoken is not None), key=lambda c: c.usd_per_mtoken or 0)
    return [c.name for c in measured] + [c.name for c in costs if c.usd_per_mtoken is None]


def reorder_patch(cluster_queue: Mapping[str, Any], ranking: Sequence[str]) -> list[dict[str, Any]]:
    """JSON patch ops reordering each resource group's flavors by ``ranking`` (flavors not ranked keep
    their place after the ranked ones); empty when the order is already that."""
    rank = {name: i for i, name in enumerate(ranking)}
    ops = []
    for i, group in enumerate((cluster_queue.get("spec") or {}).get("resourceGroups") or []):
        flavors = list(group.get("flavors") or [])
        # sorted() is stable: unranked flavors keep their relative order
        new = sorted(flavors, key=lambda f: rank.get(f["name"], len(rank)))
        if [f["name"] for f in new] != [f["name"] for f in flavors]:
            ops.append({"op": "replace", "path": f"/spec/resourceGroups/{i}/flavors", "value": new})
    return ops
