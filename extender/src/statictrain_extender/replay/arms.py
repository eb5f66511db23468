"""The arms of a side-by-side replay and the one kube-scheduler configuration that serves them all (pure).

Each arm is one scheduler profile (its own ``schedulerName``) on its own copy of
the node inventory. Extenders apply to every profile, so each extender process
is told which scheduler names it judges and answers the others neutrally.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..scoring import Weights

__all__ = ["EXTENDER_WEIGHT", "Arm", "learning_arms", "scheduler_config", "standard_arms"]

EXTENDER_WEIGHT = 5
"""Extender weight in the scheduler configuration, as in deploy/scheduler/kube-scheduler-config.yaml."""


@dataclass(frozen=True, slots=True)
class Arm:
    """One way of scheduling."""

    key: str
    """Short name ("a".."e", "l", "o"); also names the scheduler profile, namespace and node copy."""
    tuned: bool
    """The tuned profile (MostAllocated, score every node) instead of the stock one."""
    weights: Weights | None = None
    """Extender weights; None: no extender."""
    uniform: bool = False
    """Pods say their run time does not depend on the GPU (annotation gpu-throughput: uniform)."""
    learn: bool = False
    """Its extender reads the pods' step times from Prometheus (learned speed per workload class)."""
    oracle: bool = False
    """Its extender scores with the scenario's true speed per workload class (replay/oracle.py)."""

    @property
    def scheduler_name(self) -> str:
        return f"finops-{self.key}"

    @property
    def extender_key(self) -> str | None:
        """Arms with equal weights share one extender process."""
        w = self.weights
        return (
            None
            if w is None
            else (
                f"cost{w.cost:g}-pack{w.pack:g}" + ("-learn" if self.learn else "") + ("-oracle" if self.oracle else "")
            )
        )


def standard_arms(weights: Weights) -> list[Arm]:
    """(a) stock; (b) tuned; (c) + extender packing only; (d) + cost, uniform speed; (e) + cost, per-model speed."""
    return [
        Arm("a", tuned=False),
        Arm("b", tuned=True),
        Arm("c", tuned=True, weights=Weights(cost=0.0, pack=1.0)),
        Arm("d", tuned=True, weights=weights, uniform=True),
        Arm("e", tuned=True, weights=weights),
    ]


def learning_arms(weights: Weights) -> list[Arm]:
    """(a) stock; (b) tuned; (e) + cost, per-model speed from the table; (l) e, learning from step times;
    (o) e with the scenario's true speeds in its table (the oracle: l minus o is l's regret)."""
    return [
        Arm("a", tuned=False),
        Arm("b", tuned=True),
        Arm("e", tuned=True, weights=weights),
        Arm("l", tuned=True, weights=weights, learn=True),
        Arm("o", tuned=True, weights=weights, oracle=True),
    ]


def scheduler_config(
    arms: Sequence[Arm], tuned_profile: Mapping[str, Any], extender_urls: Mapping[str, str], kubeconfig: str
) -> dict[str, Any]:
    """KubeSchedulerConfiguration: one profile per arm, one prioritize-only extender per extender key.

    ``tuned_profile`` is the statictrain profile of deploy/scheduler/kube-scheduler-config.yaml.
    """
    profiles = []
    for arm in arms:
        base = dict(tuned_profile) if arm.tuned else {}
        profiles.append({**base, "schedulerName": arm.scheduler_name})
    extenders = [
        {
            "urlPrefix": extender_urls[key],
            "prioritizeVerb": "prioritize",
            "weight": EXTENDER_WEIGHT,
            "nodeCacheCapable": True,
            "httpTimeout": "5s",
            "ignorable": True,
            # No managedResources: kube-scheduler allows each resource name in one extender only,
            # and every replay pod asks for GPUs anyway.
        }
        for key in sorted({a.extender_key for a in arms if a.extender_key})
    ]
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": kubeconfig, "qps": 1000, "burst": 2000},
        "profiles": profiles,
        "extenders": extenders,
    }
