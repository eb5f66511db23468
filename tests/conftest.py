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

import http.server
import json
import os
import sys
import threading
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings
from statictrain_localcluster.cluster import LocalCluster, build_binaries

# Property tests (Hypothesis): one profile for every suite. Examples are bounded so a
# property test stays within seconds in CI; no deadline (this machine is shared and
# slow, and timed assertions are not allowed); the example database lives outside
# the repository. HYPOTHESIS_PROFILE=thorough runs many more examples by hand.
settings.register_profile(
    "ci", max_examples=60, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile("thorough", max_examples=2000, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    attach = os.environ.get("STATICTRAIN_TEST_CLUSTER")
    if attach:
        existing = LocalCluster(attach)
        if not existing.running():
            pytest.fail(f"STATICTRAIN_TEST_CLUSTER={attach} is set but that cluster is not running")
        yield existing
        existing.detach()  # e.g. Kueue started by a test keeps running with the attached cluster
        return
    c = LocalCluster(f"st-test-{os.getpid()}")
    c.start(build_binaries(log=sys.stderr), log=sys.stderr)
    try:
        yield c
    finally:
        c.stop()


def fresh_namespace(cluster: LocalCluster) -> Iterator[str]:
    """A fresh namespace, deleted (without waiting) after the test."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


namespace = pytest.fixture(fresh_namespace, name="namespace")
other_namespace = pytest.fixture(fresh_namespace, name="other_namespace")
"""A second fresh namespace (another tenant's), for tests that need two."""


@pytest.fixture
def echoing_prometheus() -> Iterator[int]:
    """A real HTTP server that rejects every query (400) with an error quoting the request path back,
    query string included, as a misbehaving Prometheus or proxy might; yields its port."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.dumps({"status": "error", "errorType": "bad_data", "error": f"at {self.path}"}).encode()
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()

