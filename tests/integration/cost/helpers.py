"""Shared by the cost integration tests: a metrics registry served over HTTP and scraped by the cluster, and the
oracle's split of a node's price between its resources."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from statictrain import labels
from statictrain_localcluster.cluster import LocalCluster

OPENCOST_RATES = {"gpu": Decimal("0.95"), "cpu": Decimal("0.031611"), "memory": Decimal("0.004237")}
"""OpenCost's published default hourly rates per GPU, vCPU and GiB of memory: the ratio in which a node
price known only as a whole is split between its resources (written out here, not taken from the product)."""
BINARY_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


@contextlib.contextmanager
def scraped_registry(
    cluster: LocalCluster, registry: CollectorRegistry, prefix: str, pod: dict[str, str] | None = None
) -> Iterator[str]:
    """Serve ``registry`` on a free port as a scrape target of the cluster's Prometheus; yields its job name.

    With ``pod`` (namespace, pod, pod_uid of a pod in the API server) it is scraped as that pod is:
    those labels win over what the registry claims (LocalCluster.add_scrape_target's pod pool)."""
    server, _ = start_http_server(0, addr="127.0.0.1", registry=registry)
    job = f"{prefix}-{uuid.uuid4().hex[:6]}"
    cluster.add_scrape_target(job, f"127.0.0.1:{server.server_port}", pod or {}, pod=pod is not None)
    try:
        yield job
    finally:
        cluster.remove_scrape_target(job)
        server.shutdown()
        server.server_close()


def gib(quantity: str) -> Decimal:
    """A memory quantity as the API server reports node capacity (binary suffix or bytes), in GiB."""
    for suffix, factor in BINARY_SUFFIXES.items():
        if quantity.endswith(suffix):
            return Decimal(quantity[: -len(suffix)]) * factor / 2**30
    return Decimal(quantity) / 2**30


def gpu_share_of(node: dict[str, Any], node_hourly: Decimal) -> Decimal:
    """One GPU's share of a node's hourly price: price x GPU rate / sum(allocatable x rate)."""
    alloc = node["status"]["allocatable"]
    amounts = {"gpu": Decimal(alloc[labels.GPU_RESOURCE]), "cpu": Decimal(alloc["cpu"]), "memory": gib(alloc["memory"])}
    weighted = sum((amounts[r] * OPENCOST_RATES[r] for r in OPENCOST_RATES), Decimal(0))
    return node_hourly * OPENCOST_RATES["gpu"] / weighted
