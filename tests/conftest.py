"""Shared pytest fixtures.

``cluster`` (session scope) is a real local control plane: kube-apiserver, etcd,
kube-controller-manager and kube-scheduler built from Go modules, kwok fake GPU
nodes (deploy/local-cluster/nodepool.yaml) and Debian's Prometheus. It is
started once per test session and torn down at the end. To attach to a cluster
that is already running instead (faster while developing), set
STATICTRAIN_TEST_CLUSTER=<name> (started with ``statictrain-cluster start --name
<name>``); it is then left running.

Tests using it are marked ``cluster``; give each test its own namespace
(fixture ``namespace``) so tests never see each other's objects.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator

import pytest
from statictrain_localcluster.cluster import LocalCluster, build_binaries


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    attach = os.environ.get("STATICTRAIN_TEST_CLUSTER")
    if attach:
        existing = LocalCluster(attach)
        if not existing.running():
            pytest.fail(f"STATICTRAIN_TEST_CLUSTER={attach} is set but that cluster is not running")
        yield existing
        return
    c = LocalCluster(f"st-test-{os.getpid()}")
    c.start(build_binaries(log=sys.stderr), log=sys.stderr)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def namespace(cluster: LocalCluster) -> Iterator[str]:
    """A fresh namespace, deleted (without waiting) after the test."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)
