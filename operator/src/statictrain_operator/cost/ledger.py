"""What earlier accounting runs leave for later ones (pure): the pods and nodes they saw, and the
cost state that survives operator restarts.

:class:`CostState` is kept in a ConfigMap (``STATICTRAIN_COST_STATE_CONFIGMAP``): how far nodes are
accounted and each node's cost, idle and allocated (its pods')
totals. A restarted operator resumes node accounting where
it says and exports the same totals, so node counters neither reset nor lose a window.

:class:`Ledger` (in memory) holds pods and nodes seen by earlier runs until their cost is accounted.

Between two runs a pod can be deleted (a finished worker cleaned up, a spot
eviction) and a node can go away (a reclaimed spot node); the API server then no
longer lists them, but the window being accounted still holds part of their
lives. The ledger keeps the last thing seen of each, ends a vanished one at the
time it was last seen (its deletion, finish or removal time if the API server had
recorded one; else at most one run interval early, flagged by name), and drops it
once a run has accounted past that end.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation

from statictrain.cost import NodeCost, NodeInfo, PodInfo
from statictrain.money import ZERO

__all__ = ["CostState", "Ledger"]


@dataclass
class CostState:
    """Node accounting that outlives the operator process."""

    accounted_to: float | None = None
    """End of the last accounted window (Unix seconds); None: never."""
    nodes: dict[str, tuple[Decimal, Decimal, Decimal]] = field(default_factory=dict)
    """node -> (cost, idle cost, allocated cost) totals in USD."""

    def add(self, end: float, nodes: Sequence[NodeCost]) -> None:
        for n in nodes:
            usd, idle, allocated = self.nodes.get(n.name, (ZERO, ZERO, ZERO))
            self.nodes[n.name] = (usd + n.usd, idle + n.idle_usd, allocated + n.allocated_usd)
        self.accounted_to = end

    def floats(self) -> dict[str, tuple[float, float, float]]:
        return {name: (float(u), float(i), float(a)) for name, (u, i, a) in self.nodes.items()}

    def to_json(self) -> str:
        nodes = {k: [f"{u:f}", f"{i:f}", f"{a:f}"] for k, (u, i, a) in self.nodes.items()}
        return json.dumps({"accountedTo": self.accounted_to, "nodes": nodes}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> CostState:
        """Parse what :meth:`to_json` wrote; ValueError saying what is wrong otherwise."""
        try:
            doc = json.loads(text)
            end = doc.get("accountedTo")
            nodes = {str(k): _totals(v) for k, v in (doc.get("nodes") or {}).items()}
            return cls(float(end) if end is not None else None, nodes)
        except (ValueError, TypeError, KeyError, IndexError, InvalidOperation, AttributeError) as e:
            raise ValueError(
                f"cost state is not what the operator writes ({e}); delete the ConfigMap to start over"
            ) from None


def _totals(v: Sequence[str]) -> tuple[Decimal, Decimal, Decimal]:
    """A node's saved totals; a state saved before allocated totals were kept: allocated = cost - idle."""
    usd, idle = Decimal(v[0]), Decimal(v[1])
    return usd, idle, Decimal(v[2]) if len(v) > 2 else usd - idle


@dataclass
class Ledger:
    pods: dict[str, tuple[PodInfo, float]] = field(default_factory=dict)
    """uid -> (last PodInfo seen, when it was last listed)."""
    nodes: dict[str, tuple[NodeInfo, float]] = field(default_factory=dict)
    """name -> (last NodeInfo seen, when it was last listed)."""

    def merge(
        self, pods: Sequence[PodInfo], nodes: Sequence[NodeInfo], now: float
    ) -> tuple[list[PodInfo], list[NodeInfo], list[str]]:
        """Listed pods and nodes plus the vanished ones (ended when last seen), and the vanished ones' names."""
        listed_pods = {p.uid for p in pods}
        listed_nodes = {n.name for n in nodes}
        out_pods = list(pods)
        out_nodes = list(nodes)
        vanished: list[str] = []
        for uid, (p, seen) in self.pods.items():
            if uid not in listed_pods:
                out_pods.append(p if p.finished is not None else replace(p, finished=seen))
                vanished.append(f"pod {p.namespace}/{p.name}")
        for name, (n, seen) in self.nodes.items():
            if name not in listed_nodes:
                out_nodes.append(n if n.present_to is not None else replace(n, present_to=seen))
                vanished.append(f"node {name}")
        for p in pods:
            self.pods[p.uid] = (p, now)
        for n in nodes:
            self.nodes[n.name] = (n, now)
        return out_pods, out_nodes, vanished

    def prune(self, accounted_to: float, listed_pods: set[str], listed_nodes: set[str]) -> None:
        """Forget what vanished and is accounted up to its end (after a successful run)."""
        for uid, (p, seen) in list(self.pods.items()):
            end = p.finished if p.finished is not None else seen
            if uid not in listed_pods and end <= accounted_to:
                del self.pods[uid]
        for name, (n, seen) in list(self.nodes.items()):
            end = n.present_to if n.present_to is not None else seen
            if name not in listed_nodes and end <= accounted_to:
                del self.nodes[name]
