"""The step-time query against the real Prometheus, scraping sidecar-shaped metrics served by this test."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Gauge, Histogram, start_http_server
from statictrain import metrics
from statictrain.throughput import DEFAULT_RELATIVE_THROUGHPUT
from statictrain_extender.speeds import class_key
from statictrain_extender.state import ClusterState
from statictrain_extender.stepstats import refresh_once

from .helpers import wait_for

pytestmark = pytest.mark.cluster

POD_LABELS = ["job_name", "namespace", "commit", "team", "pod", "pod_uid"]


@pytest.fixture
def sidecars(cluster: Any) -> Iterator[None]:
    """Two worker pods of one job, one on H100 (0.25 s steps) and one on A100 (0.5 s steps)."""
    registry = CollectorRegistry()
    steps = Histogram(metrics.TRAIN_STEP_SECONDS, "step time", POD_LABELS, registry=registry)
    util = Gauge(
        metrics.GPU_UTILIZATION_RATIO,
        "gpu util",
        [*POD_LABELS, "gpu", "gpu_uuid", "gpu_model"],
        registry=registry,
    )
    workers = [
        ("w-0", "uid-0", "NVIDIA-H100-80GB-HBM3", 0.25),
        ("w-1", "uid-1", "NVIDIA-A100-SXM4-40GB", 0.5),
    ]
    for pod, uid, model, _ in workers:
        util.labels("gpt2", "team-nlp", "abc", "nlp", pod, uid, "0", f"GPU-{uid}", model).set(0.9)
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    stop = threading.Event()

    def train() -> None:
        while not stop.wait(0.05):
            for pod, uid, _, seconds in workers:
                steps.labels("gpt2", "team-nlp", "abc", "nlp", pod, uid).observe(seconds)

    trainer = threading.Thread(target=train, daemon=True)
    trainer.start()
    cluster.add_scrape_target("extender-test-sidecars", f"127.0.0.1:{server.server_port}", {})
    yield
    cluster.remove_scrape_target("extender-test-sidecars")
    stop.set()
    server.shutdown()
    server.server_close()
    thread.join(5)


def test_measured_step_times_reach_the_state(cluster: Any, sidecars: None) -> None:
    state = ClusterState()
    key = class_key("team-nlp", "gpt2", None)  # a job without a workload class learns on its own

    async def refresh() -> bool:
        async with aiohttp.ClientSession() as session:
            ok = await refresh_once(session, cluster.prometheus_url, 30, state)
        return ok and state.throughput_for(key) is not state.throughput_for(None)

    wait_for(lambda: asyncio.run(refresh()), 90, "Prometheus to return the job's step times")
    for _ in range(9):  # ten refreshes that saw the job in all
        assert asyncio.run(refresh())
    learned = state.throughput_for(key)
    # measured H100/A100 = 0.5 s / 0.25 s = 2; the table's 3.17 weighs as one refresh of ten (geometric)
    table = DEFAULT_RELATIVE_THROUGHPUT["H100"] / DEFAULT_RELATIVE_THROUGHPUT["A100"]
    assert learned["H100"] / learned["A100"] == pytest.approx(2.0 ** (10 / 11) * table ** (1 / 11), rel=0.05)
    assert state.prometheus_ok is True
