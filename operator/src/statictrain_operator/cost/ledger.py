"""Pods and nodes seen by earlier accounting runs, kept until their cost is accounted (pure).

Between two runs a pod can be deleted (a finished worker cleaned up, a spot
eviction) and a node can go away (a reclaimed spot node); the API server then no
longer lists them, but the window being accounted still holds part of their
lives. The ledger keeps the last thing seen of each, ends a vanished one at the
time it was last seen (its deletion, finish or removal time if the API server had
recorded one; else at most one run interval early, flagged by name), and drops it
once a run has accounted past that end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from statictrain.cost import NodeInfo, PodInfo

__all__ = ["Ledger"]


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
