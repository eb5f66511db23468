"""status.progress and status.compile from the sidecars' metrics, through the real Prometheus.

A stand-in sidecar exports the training metrics of one job; the cluster's
Prometheus scrapes it; ProgressSync (what the cost loop runs before each
accounting pass) writes the job's status, and ``kubectl get stj`` shows the step.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, Gauge, Histogram, start_http_server
from statictrain import labels, metrics
from statictrain_localcluster.procs import free_port
from statictrain_operator.cost.progress_sync import ProgressSync
from statictrain_operator.cost.prom import HttpPrometheus
from statictrain_operator.kube.clients import build
from statictrain_operator.kube.costs import KubeCostClient

pytestmark = pytest.mark.cluster

CRD = Path(__file__).resolve().parents[3] / "crds" / "statictrain.io_statictrainingjobs.yaml"
POD_LABELS = [*labels.METRIC_LABELS, "pod", "pod_uid"]


def _eventually(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(1)
    raise AssertionError(f"timed out waiting for {what}")


def test_progress_and_compile_reach_the_job_status(cluster: Any, namespace: str) -> None:
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{labels.PLURAL}.{labels.GROUP}")
    name = "progress"
    body = {
        "apiVersion": labels.API_VERSION,
        "kind": labels.KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "image": "registry.example.com/train:1",
            "entrypoint": "m:build",
            "replicas": 2,
            "resources": {"gpusPerReplica": 1},
            "training": {"maxSteps": 1000},
        },
    }
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(body))

    reg = CollectorRegistry()
    step = Gauge(metrics.TRAIN_STEP, "step", POD_LABELS, registry=reg)
    tps = Gauge(metrics.TRAIN_TOKENS_PER_SECOND, "tokens/s", POD_LABELS, registry=reg)
    step_s = Histogram(metrics.TRAIN_STEP_SECONDS, "step time", POD_LABELS, registry=reg)
    comp = Gauge(metrics.TRAIN_COMPILE_SECONDS, "compile", POD_LABELS, registry=reg)
    hit = Gauge(metrics.TRAIN_COMPILE_CACHE_HIT, "cache hit", POD_LABELS, registry=reg)
    for pod in ("0", "1"):  # two workers, each reporting its own share of the tokens
        ids = (name, namespace, "c1", "t", f"{name}-{pod}", f"uid-{pod}")
        step.labels(*ids).set(120)
        tps.labels(*ids).set(1000)
        comp.labels(*ids).set(30.5)
        hit.labels(*ids).set(1)
        for _ in range(10):
            step_s.labels(*ids).observe(0.5)
    port = free_port()
    server, _ = start_http_server(port, addr="127.0.0.1", registry=reg)
    target = f"st-progress-{uuid.uuid4().hex[:6]}"
    cluster.add_scrape_target(target, f"127.0.0.1:{port}", {})
    try:
        clients = build(str(cluster.kubeconfig))
        sync = ProgressSync(
            KubeCostClient(clients, lambda: datetime.now(UTC)),
            HttpPrometheus(cluster.prometheus_url),
            60,
            lambda: datetime.now(UTC),
        )

        def status() -> dict[str, Any]:
            sync.run_once()
            out = json.loads(cluster.kubectl("get", labels.PLURAL, name, "-n", namespace, "-o", "json").stdout)
            return dict(out.get("status") or {})

        got = _eventually(lambda: (s := status()).get("progress") and s.get("compile") and s, 90, "the status")
        assert got["progress"]["step"] == 120
        assert got["progress"]["totalSteps"] == 1000
        assert got["progress"]["tokensPerSecond"] == 2000
        assert got["progress"]["stepSeconds"] == "0.500"
        assert got["progress"]["etaSeconds"] == 440
        assert got["compile"] == {"seconds": "30.500", "cacheHit": True}
        table = cluster.kubectl("get", labels.PLURAL, name, "-n", namespace).stdout
        assert "120" in table.splitlines()[1]
    finally:
        cluster.remove_scrape_target(target)
        server.shutdown()
        server.server_close()
