"""Invariants of one accounting window that can fail, checked in every run and exported.

* ``allocation-within-capacity``: at no instant do the pods on a node hold more
  of a resource (GPU, CPU, memory; max of request and usage) than it has;
* ``every-pod-priced``: every running worker pod sits on a priced node (else named);
* ``jobs-plus-idle-equals-node``: per node, the cost of the pods on it plus its idle
  cost, computed from capacity minus measured allocation, equals the node's cost.

Pure: an :class:`~statictrain.cost.Allocation` in, :class:`Check` results out.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from statictrain.cost import Allocation

__all__ = ["INVARIANTS", "Check", "check"]

INVARIANTS = ("allocation-within-capacity", "every-pod-priced", "jobs-plus-idle-equals-node")
TOLERANCE = Decimal("1e-9")
"""Relative tolerance of jobs + idle = node (sums of 1e-12-quantized terms)."""


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    failures: tuple[str, ...] = ()
    """What failed, by name (node, pod), for the report and the log."""


def check(alloc: Allocation) -> tuple[Check, ...]:
    """The three invariants of the window, in :data:`INVARIANTS` order."""
    over = tuple(
        f"{n.name}: {r} {n.peak_allocation[r]:g} > {n.capacity[r]:g}" for n in alloc.nodes for r in n.overallocated
    )
    unbalanced = []
    for n in alloc.nodes:
        diff = abs(n.allocated_usd + n.idle_usd - n.usd)
        if diff > TOLERANCE * max(n.usd, Decimal(1)):
            unbalanced.append(f"{n.name}: pods {n.allocated_usd:.6f} + idle {n.idle_usd:.6f} != node {n.usd:.6f}")
    return (
        Check("allocation-within-capacity", not over, over),
        Check("every-pod-priced", not alloc.unpriced_pods, tuple(f"unpriced pod {p}" for p in alloc.unpriced_pods)),
        Check("jobs-plus-idle-equals-node", not unbalanced, tuple(unbalanced)),
    )
