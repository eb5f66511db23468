"""Shared by the cost integration tests: a metrics registry served over HTTP and scraped by the cluster."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, start_http_server
from statictrain_localcluster.cluster import LocalCluster


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
