"""The declarative node-pool file -> kwok Node manifests (pure).

A pool file looks like deploy/local-cluster/nodepool.yaml. Every problem is
reported as a NodePoolError naming the pool, the field and what to write.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from statictrain import labels

KWOK_TAINT = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}
CAPACITY_TYPES = ("spot", "on-demand")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|Ki|Mi|Gi|Ti)?$")


class NodePoolError(ValueError):
    """The node-pool file is malformed; the message says where and how to fix it."""


@dataclass(frozen=True)
class GPU:
    product: str
    count: int
    memory_mib: str = ""


@dataclass(frozen=True)
class Pool:
    name: str
    instance_type: str
    count: int
    capacity_type: str
    region: str
    zone: str
    cpu: str
    memory: str
    gpu: GPU | None = None


def _field(raw: dict[str, Any], key: str, where: str, kind: type, default: Any = None) -> Any:
    if key not in raw:
        if default is not None:
            return default
        raise NodePoolError(f"{where}: missing field {key!r}")
    value = raw[key]
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise NodePoolError(f"{where}: {key!r} must be an integer, got {value!r}")
    if kind is str and not isinstance(value, str | int):
        raise NodePoolError(f"{where}: {key!r} must be a string, got {value!r}")
    return str(value) if kind is str else value


def parse(doc: Any) -> list[Pool]:
    """Validate a parsed YAML document and return its pools."""
    if not isinstance(doc, dict):
        raise NodePoolError("node pool file: expected a mapping with 'region' and 'pools'")
    if doc.get("kind", "LocalNodePool") != "LocalNodePool":
        raise NodePoolError(f"node pool file: kind must be LocalNodePool, got {doc.get('kind')!r}")
    region = _field(doc, "region", "node pool file", str)
    pools_raw = doc.get("pools")
    if not isinstance(pools_raw, list) or not pools_raw:
        raise NodePoolError("node pool file: 'pools' must be a non-empty list")
    pools: list[Pool] = []
    seen: set[str] = set()
    for i, raw in enumerate(pools_raw):
        where = f"pools[{i}]"
        if not isinstance(raw, dict):
            raise NodePoolError(f"{where}: expected a mapping")
        name = _field(raw, "name", where, str)
        where = f"pool {name!r}"
        if not _NAME.match(name):
            raise NodePoolError(f"{where}: name must be lowercase letters, digits and '-' (max 42)")
        if name in seen:
            raise NodePoolError(f"{where}: duplicate pool name")
        seen.add(name)
        count = _field(raw, "count", where, int)
        if not 0 <= count <= 10000:
            raise NodePoolError(f"{where}: count must be between 0 and 10000, got {count}")
        capacity = _field(raw, "capacityType", where, str, "on-demand")
        if capacity not in CAPACITY_TYPES:
            raise NodePoolError(f"{where}: capacityType must be one of {CAPACITY_TYPES}, got {capacity!r}")
        cpu, memory = _field(raw, "cpu", where, str), _field(raw, "memory", where, str)
        for key, q in (("cpu", cpu), ("memory", memory)):
            if not _QUANTITY.match(q):
                raise NodePoolError(f"{where}: {key} {q!r} is not a Kubernetes quantity (e.g. '8' or '32Gi')")
        gpu = None
        if "gpu" in raw:
            g = raw["gpu"]
            if not isinstance(g, dict):
                raise NodePoolError(f"{where}: gpu must be a mapping {{product, count}}")
            gcount = _field(g, "count", f"{where} gpu", int)
            if not 1 <= gcount <= 64:
                raise NodePoolError(f"{where}: gpu.count must be between 1 and 64, got {gcount}")
            gpu = GPU(_field(g, "product", f"{where} gpu", str), gcount, str(g.get("memory", "")))
        pools.append(
            Pool(name, _field(raw, "instanceType", where, str), count, capacity, region,
                 _field(raw, "zone", where, str, f"{region}a"), cpu, memory, gpu)
        )
    return pools


def node_manifests(pools: list[Pool]) -> list[dict[str, Any]]:
    """kwok Node objects for every node of every pool."""
    nodes = []
    for pool in pools:
        for i in range(pool.count):
            name = f"{pool.name}-{i}"
            node_labels = {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                labels.INSTANCE_TYPE: pool.instance_type,
                labels.REGION: pool.region,
                labels.ZONE: pool.zone,
                labels.CAPACITY_TYPE: pool.capacity_type,
                "statictrain.io/pool": pool.name,
            }
            resources = {"cpu": pool.cpu, "memory": pool.memory, "pods": "110"}
            if pool.gpu:
                node_labels[labels.GPU_PRODUCT] = pool.gpu.product
                node_labels[labels.GPU_COUNT] = str(pool.gpu.count)
                if pool.gpu.memory_mib:
                    node_labels["nvidia.com/gpu.memory"] = pool.gpu.memory_mib
                resources[labels.GPU_RESOURCE] = str(pool.gpu.count)
            nodes.append({
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": node_labels,
                    "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
                },
                "spec": {"taints": [dict(KWOK_TAINT)]},
                "status": {"capacity": dict(resources), "allocatable": dict(resources)},
            })
    return nodes
