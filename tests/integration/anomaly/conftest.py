"""Fixtures of the anomaly integration tests: the CRD, a stand-in for worker sidecars, the real operator."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Gauge, Histogram, start_http_server
from statictrain import labels, metrics
from statictrain_localcluster.waiting import crds_established
from statictrain_operator.anomaly.cluster import ClusterJobApi
from statictrain_operator.kube import endpoint
from statictrain_operator.kube.http import HttpKube

from .helpers import CRD, Trainer, free_port, worker_pod

KWOK_TOLERATION = {"key": "kwok.x-k8s.io/node", "operator": "Equal", "value": "fake", "effect": "NoSchedule"}


@pytest.fixture
def operator(cluster: Any, namespace: str, tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """start(log_name="first", **anomaly_env): the real operator (anomaly part on, short windows), watching the
    test's namespace; ``anomaly_env`` sets further STATICTRAIN_ANOMALY_<KEY> variables. Stopped after the test."""
    exe = shutil.which("statictrain-operator", path=os.path.dirname(sys.executable))
    assert exe, "statictrain-operator is not installed in this environment"
    env = dict(cluster.env)
    env.update(
        {
            "STATICTRAIN_OPERATOR_NAMESPACES": namespace,
            "STATICTRAIN_OPERATOR_PARTS": "anomaly",
            "STATICTRAIN_OPERATOR_TOLERATIONS": json.dumps([KWOK_TOLERATION]),
            "STATICTRAIN_OPERATOR_HEARTBEAT_NAMESPACE": namespace,
            "STATICTRAIN_PROMETHEUS_URL": cluster.prometheus_url,
            "STATICTRAIN_ANOMALY_INTERVAL_S": "2",
            "STATICTRAIN_ANOMALY_LOOKBACK_S": "600",
            "STATICTRAIN_ANOMALY_STEP_S": "1",
            "STATICTRAIN_ANOMALY_RATE_WINDOW_S": "3",
            "STATICTRAIN_ANOMALY_PROPHET_MIN_POINTS": "100000",
        }
    )
    procs: list[subprocess.Popen[bytes]] = []
    metrics_port = free_port()

    def start(log_name: str = "first", **anomaly_env: str) -> subprocess.Popen[bytes]:
        log = (tmp_path / f"operator-{log_name}.log").open("wb")
        run_env = {**env, **{f"STATICTRAIN_ANOMALY_{k.upper()}": v for k, v in anomaly_env.items()}}
        cmd = [
            exe,
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--liveness",
            f"http://127.0.0.1:{free_port()}/healthz",
            "--metrics-address",
            "127.0.0.1",
            "--metrics-port",
            str(metrics_port),
        ]
        p = subprocess.Popen(cmd, env=run_env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        procs.append(p)
        p.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"  # type: ignore[attr-defined]
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(30)
    for f in sorted(tmp_path.glob("operator-*.log")):
        sys.stderr.write(f"--- {f.name}\n{f.read_text(errors='replace')[-4000:]}\n")


@pytest.fixture(scope="module")
def job_api(cluster: Any) -> ClusterJobApi:
    """The anomaly part's JobApi over the Kube port on the real API server (tests await it with asyncio.run;
    each run's HTTP session closes with its loop)."""
    return ClusterJobApi(HttpKube(endpoint.load(str(cluster.kubeconfig))), lambda: datetime.now(UTC))


@pytest.fixture(scope="module")
def crd(cluster: Any) -> None:
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD))
    crds_established(cluster.kubectl, [f"{labels.PLURAL}.{labels.GROUP}"])


@pytest.fixture
def steps(cluster: Any, namespace: str) -> Iterator[Callable[..., Trainer]]:
    """start(job, step_s, gpu_util=None): step times (and GPU utilisation) of one worker, in Prometheus, labelled
    with the UID of a pod created as the job's worker (only its series count for the job)."""
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
        uid = worker_pod(cluster, namespace, job)
        t = Trainer(step_s, threading.Event(), gpu_util=gpu_util, uid=uid)
        ids = (job, namespace, "c1", "t", f"{job}-w0", uid)
        child = hist_metric.labels(*ids)

        def loop() -> None:
            while not t.stop.is_set():
                child.observe(t.step_s)
                if t.gpu_util is not None:
                    # The series exists only once a value is set: a labelled child made up front
                    # is exported as 0 (a busy-free GPU that test_bad_series saw as a finite point).
                    util.labels(*ids, "0").set(t.gpu_util)
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
