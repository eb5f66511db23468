"""Fixtures of the anomaly integration tests: the CRD, and a stand-in for worker sidecars."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Gauge, Histogram, start_http_server
from statictrain import labels, metrics
from statictrain_operator.anomaly.cluster import ClusterJobApi
from statictrain_operator.kube import endpoint
from statictrain_operator.kube.http import HttpKube

from .helpers import CRD, Trainer, free_port


@pytest.fixture(scope="module")
def job_api(cluster: Any) -> ClusterJobApi:
    """The anomaly part's JobApi over the Kube port on the real API server (tests await it with asyncio.run;
    each run's HTTP session closes with its loop)."""
    return ClusterJobApi(HttpKube(endpoint.load(str(cluster.kubeconfig))), lambda: datetime.now(UTC))


@pytest.fixture(scope="module")
def crd(cluster: Any) -> None:
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{labels.PLURAL}.{labels.GROUP}")


@pytest.fixture
def steps(cluster: Any, namespace: str) -> Iterator[Callable[..., Trainer]]:
    """start(job, step_s, gpu_util=None): step times (and GPU utilisation) of one worker, in Prometheus."""
    reg = CollectorRegistry()
    util = Gauge(
        metrics.GPU_UTILIZATION_RATIO, "GPU utilisation", [*labels.METRIC_LABELS, "pod", "pod_uid", "gpu"], registry=reg
    )
    hist_metric = Histogram(
        metrics.TRAIN_STEP_SECONDS, "step time", [*labels.METRIC_LABELS, "pod", "pod_uid"], registry=reg
    )
    port = free_port()
    server, _ = start_http_server(port, addr="127.0.0.1", registry=reg)
    target = f"st-anomaly-sidecar-{uuid.uuid4().hex[:6]}"
    cluster.add_scrape_target(target, f"127.0.0.1:{port}", {})
    trainers: list[Trainer] = []

    def start(job: str, step_s: float, gpu_util: float | None = None) -> Trainer:
        t = Trainer(step_s, threading.Event(), gpu_util=gpu_util)
        child = hist_metric.labels(job, namespace, "c1", "t", f"{job}-0", f"uid-{job}")
        gpu_labels = (job, namespace, "c1", "t", f"{job}-0", f"uid-{job}", "0")

        def loop() -> None:
            while not t.stop.is_set():
                child.observe(t.step_s)
                if t.gpu_util is not None:
                    # The series exists only once a value is set: a labelled child made up front
                    # is exported as 0 (a busy-free GPU that test_bad_series saw as a finite point).
                    util.labels(*gpu_labels).set(t.gpu_util)
                t.stop.wait(0.05)

        t.thread = threading.Thread(target=loop, daemon=True)
        t.thread.start()
        trainers.append(t)
        return t

    try:
        yield start
    finally:
        for t in trainers:
            t.stop.set()
        cluster.remove_scrape_target(target)
        server.shutdown()
        server.server_close()
