"""Node and Pod manifests for a replay (pure).

Replay nodes are kwok fake nodes that carry the labels and price annotations
real GPU nodes carry, plus a replay label and taint so that only the replay's
pods land on them (and the replay's pods only on them). GPU demand is one
extended resource in milli-GPU (``statictrain.io/gpu-milli``) so that whole-GPU
and GPU-sharing pods draw from the same pool; which physical GPU a share sits
on is not modelled, for either scheduler.
"""

from __future__ import annotations

from typing import Any, Protocol

from statictrain import labels
from statictrain.money import format_usd

from ..nodes import GPU_MILLI_RESOURCE
from ..policy import THROUGHPUT_ANNOTATION
from .prices import NodePrice, gpu_product
from .trace import TraceNode

__all__ = ["NODE_HEALTH_TOLERATIONS", "REPLAY_LABEL", "node_manifest", "node_name", "pod_manifest"]

REPLAY_LABEL = f"{labels.GROUP}/replay"
KWOK_TAINT = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}
# kwok on a small machine can miss lease renewals of a thousand fake nodes; the
# node controller then taints them not-ready/unreachable. The replay measures
# placement, not node health, so its pods tolerate those taints for good.
NODE_HEALTH_TOLERATIONS = [
    {"key": f"node.kubernetes.io/{condition}", "operator": "Exists", "effect": effect}
    for condition in ("not-ready", "unreachable")
    for effect in ("NoSchedule", "NoExecute")
]


class PodShape(Protocol):
    """What a replayed pod asks for (a trace pod or a work-conserving task)."""

    @property
    def name(self) -> str: ...
    @property
    def cpu_milli(self) -> int: ...
    @property
    def memory_mib(self) -> int: ...
    @property
    def total_gpu_milli(self) -> int: ...


def node_name(prefix: str, node: TraceNode) -> str:
    return f"{prefix}-{node.name}".lower()


def node_manifest(prefix: str, node: TraceNode, price: NodePrice, replay_id: str) -> dict[str, Any]:
    """A kwok Node for one trace node, priced as the price annotator would."""
    name = node_name(prefix, node)
    capacity = {
        "cpu": f"{node.cpu_milli}m",
        "memory": f"{node.memory_mib}Mi",
        "pods": "256",
        labels.GPU_RESOURCE: str(node.gpus),
        GPU_MILLI_RESOURCE: str(node.gpus * 1000),
    }
    annotations = {
        "kwok.x-k8s.io/node": "fake",
        labels.HOURLY_COST: format_usd(price.hourly_usd),
        labels.PRICE_SOURCE: "catalog",
        labels.PRICE_CAPACITY_TYPE: "on-demand",
    }
    if price.gpu_hourly_usd is not None:
        annotations[labels.GPU_HOURLY_COST] = format_usd(price.gpu_hourly_usd)
    node_labels = {
        "kubernetes.io/hostname": name,
        "type": "kwok",
        labels.INSTANCE_TYPE: f"trace-{node.model or 'cpu'}x{node.gpus}".lower(),
        labels.REGION: "trace",
        labels.ZONE: "trace-a",
        labels.CAPACITY_TYPE: "on-demand",
        REPLAY_LABEL: replay_id,
    }
    if node.gpus:
        node_labels[labels.GPU_PRODUCT] = gpu_product(node.model)
        node_labels[labels.GPU_COUNT] = str(node.gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": node_labels, "annotations": annotations},
        "spec": {"taints": [KWOK_TAINT, {"key": REPLAY_LABEL, "value": replay_id, "effect": "NoSchedule"}]},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def pod_manifest(
    pod: PodShape, *, namespace: str, scheduler_name: str, replay_id: str, uniform_throughput: bool
) -> dict[str, Any]:
    """A Pod that asks for what the trace pod asked for, confined to the replay's nodes."""
    requests: dict[str, str] = {"cpu": f"{pod.cpu_milli}m", "memory": f"{pod.memory_mib}Mi"}
    limits: dict[str, str] = {}
    if pod.total_gpu_milli:
        requests[GPU_MILLI_RESOURCE] = str(pod.total_gpu_milli)
        limits[GPU_MILLI_RESOURCE] = str(pod.total_gpu_milli)
    annotations = {THROUGHPUT_ANNOTATION: "uniform" if uniform_throughput else "model"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod.name.lower(),
            "namespace": namespace,
            "labels": {REPLAY_LABEL: replay_id},
            "annotations": annotations,
        },
        "spec": {
            "schedulerName": scheduler_name,
            "nodeSelector": {REPLAY_LABEL: replay_id},
            "tolerations": [
                {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"},
                {"key": REPLAY_LABEL, "operator": "Equal", "value": replay_id, "effect": "NoSchedule"},
                *NODE_HEALTH_TOLERATIONS,
            ],
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "task",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": requests, "limits": limits},
                }
            ],
        },
    }
