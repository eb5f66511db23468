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
a throughput figure. A family the workload never ran on gets one inferred from
statictrain.throughput's table (relative training throughput per family), scaled
by the measured families (``with_table``); without a measured family the table
knows, nothing is inferred. It assumes a job admitted on a flavor lands on the
flavor's nodes in proportion to their GPUs (the scheduler, not Kueue, picks the
node). Flavors without any node with a figure keep their relative order after
the others. What this cannot know: the real throughput on a GPU family the
workload never ran on (the table's ratios are vendor peaks or other models'
measurements), how much of the flavor's quota is free when a job arrives,
interruptions of spot capacity (the work lost since the last checkpoint), and
workloads that differ from the observed mix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from statictrain import gpus, throughput

from statictrain_operator.estimate import Offer

__all__ = [
    "FlavorCost", "cost_per_mtoken", "flavor_costs", "order", "reorder_patch", "throughput_by_family", "with_table",
]

MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class FlavorCost:
    name: str
    usd_per_mtoken: Decimal | None
    """GPU-weighted mean over the flavor's nodes with a throughput figure; None: none has one."""
    gpus: int
    """GPUs on the nodes the flavor selects."""
    measured_gpus: int
    """Of which on a family with a throughput figure (measured or inferred)."""
    families: tuple[str, ...]
    """GPU families of its nodes; inferred ones end in '~', those without a figure in '?'."""


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


def with_table(measured: Mapping[str, float]) -> tuple[dict[str, float], frozenset[str]]:
    """Measured tokens/s per GPU by family plus, for the table's other families, figures inferred from
    statictrain.throughput (the table's ratios in the units of the measured families); and which are
    inferred. Nothing is inferred when no measured family is in the table."""
    if not measured:
        return {}, frozenset()
    job = throughput.job_throughput({f: 1.0 / tps for f, tps in measured.items()})
    ref = next(iter(measured))
    scale = measured[ref] / job.relative[ref]
    out = dict(measured)
    inferred = {f for f in job.relative if job.source(f) == throughput.INFERRED and f not in measured}
    out.update({f: job.relative[f] * scale for f in inferred})
    return out, frozenset(inferred)


def cost_per_mtoken(gpu_hourly_usd: Decimal, tokens_per_s_per_gpu: float) -> Decimal:
    return gpu_hourly_usd / (Decimal(repr(tokens_per_s_per_gpu)) * 3600) * MILLION


def _selects(flavor: Mapping[str, Any], node_labels: Mapping[str, str]) -> bool:
    wanted = (flavor.get("spec") or {}).get("nodeLabels") or {}
    return all(node_labels.get(k) == v for k, v in wanted.items())


def flavor_costs(
    flavors: Sequence[Mapping[str, Any]],
    offers: Sequence[tuple[Offer, Mapping[str, str]]],
    tokens_per_s: Mapping[str, float],
    inferred: frozenset[str] = frozenset(),
) -> list[FlavorCost]:
    """A figure per ResourceFlavor; ``offers``: each GPU node's offer with the node's labels;
    ``tokens_per_s``: per GPU by family, ``inferred`` naming the families whose figure is not measured."""
    out = []
    for flavor in flavors:
        weighted, measured, total = Decimal(0), 0, 0
        families: dict[str, bool] = {}
        for offer, node_labels in offers:
            if not _selects(flavor, node_labels):
                continue
            total += offer.gpus_per_node
            tps = tokens_per_s.get(offer.family)
            families[offer.family] = families.get(offer.family, False) or tps is not None
            if tps is not None:
                weighted += cost_per_mtoken(offer.gpu_hourly_usd, tps) * offer.gpus_per_node
                measured += offer.gpus_per_node
        figure = weighted / measured if measured else None
        names = tuple((f + "~" if f in inferred else f) if ok else f"{f}?" for f, ok in sorted(families.items()))
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
