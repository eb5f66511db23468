"""Case 18: a flapping metric gets at most one action per stabilization window (real operator, real Prometheus).

The real operator process (statictrain-operator, anomaly part on) judges an elastic job (16 replicas,
minReplicas 1, remediation Auto) every 2 s with a stabilization window of ``WINDOW_S`` seconds and a
same-kind cooldown far below it (1 s), so that the window alone paces the actions. The job's stand-in
sidecar, scraped by the cluster's real Prometheus as the job's worker pod is (the pod pool: namespace, pod
and pod_uid from the pod), reports steady 0.1 s steps and a GPU utilization that flaps across the idle
threshold (5 %): 0 % except for a blip to 10 % in one second out of every ``PERIOD_S``, decided from the
clock at each scrape. The mean over the idle detector's 30 s stays idle, but every blip ends the idle episode
and the next sample starts a new one: a new finding with a new action id at least every ``PERIOD_S`` seconds,
far faster than the window. (The episode start is also read off each evaluation's own range-query grid,
which is anchored at the evaluation's time, so in fact it moves at every evaluation.) Checked by hand: with
the window check removed from remediation.decide this test fails, a ScaleDown at every evaluation, 2 s apart.

Asserted from the API server only (not the operator's intent history): the Remediation events of the job,
their times, the job's replicas and metadata.generation. The job is halved once per window down to
minReplicas (16 -> 8 -> 4 -> 2 -> 1: four actions spanning at least three windows), each action is one
spec write (generation) and one event, and no two actions fall within one window: windows are counted from
the events' timestamps, never from how long the test slept.
"""

from __future__ import annotations

import itertools
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from statictrain import labels, metrics
from statictrain_localcluster.waiting import eventually

from ..cost.helpers import scraped_registry
from .helpers import create_job, events, get_job, worker_pod

pytestmark = pytest.mark.cluster

WINDOW_S = 20
"""STATICTRAIN_ANOMALY_STABILIZATION_S of the operator under test."""
PERIOD_S = 5
"""One utilization blip every this many seconds (a quarter of the window)."""
BLIP = 0.1
"""The blip's utilization: above the idle threshold (5 %); even two blips sampled in one period keep the
30 s mean below it (0.04), so the job stays idle while its episodes restart."""
POD_LABELS = [*labels.METRIC_LABELS, "pod", "pod_uid"]


class FlappingUtilization(Collector):
    """GPU utilization decided from the clock at each scrape: BLIP in one whole second out of PERIOD_S."""

    def __init__(self, ids: tuple[str, ...]) -> None:
        self.ids = ids

    def collect(self) -> Iterator[GaugeMetricFamily]:
        g = GaugeMetricFamily(metrics.GPU_UTILIZATION_RATIO, "GPU utilisation", labels=[*POD_LABELS, "gpu"])
        g.add_metric([*self.ids, "0"], BLIP if int(time.time()) % PERIOD_S == 0 else 0.0)
        yield g


def stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_flapping_utilization_gets_at_most_one_scale_down_per_stabilization_window(
    cluster: Any, namespace: str, crd: None, operator: Callable[..., subprocess.Popen[bytes]]
) -> None:
    name = "flapper"
    create_job(cluster, namespace, name, "Auto", replicas=16, elastic={"minReplicas": 1, "maxReplicas": 16})
    uid = worker_pod(cluster, namespace, name)
    ids = (name, namespace, "c1", "t", f"{name}-w0", uid)
    reg = CollectorRegistry()
    reg.register(FlappingUtilization(ids))
    step = Histogram(metrics.TRAIN_STEP_SECONDS, "step time", POD_LABELS, registry=reg).labels(*ids)
    stop = threading.Event()

    def trainer() -> None:
        while not stop.wait(0.05):
            step.observe(0.1)

    thread = threading.Thread(target=trainer, daemon=True)
    thread.start()
    pod = {"namespace": namespace, "pod": f"{name}-w0", "pod_uid": uid}
    try:
        with scraped_registry(cluster, reg, "st-flapper", pod):
            operator(stabilization_s=str(WINDOW_S), cooldown_s="1")
            job = eventually(
                lambda: (j := get_job(cluster, namespace, name))["spec"]["replicas"] == 1 and j,
                600,
                "the flapping job to be scaled down to minReplicas",
            )
            actions = sorted(
                (e for e in events(cluster, namespace, name) if e["reason"].startswith("Remediation")),
                key=lambda e: stamp(e["firstTimestamp"]),
            )
    finally:
        stop.set()
        thread.join(5)

    assert [e["reason"] for e in actions] == ["RemediationScaleDown"] * 4, [e["reason"] for e in actions]
    assert job["metadata"]["generation"] == 1 + len(actions)  # one spec write per action, nothing else
    # When each action was decided: the event's firstTimestamp (the evaluation's time, whole seconds), which
    # the API server's own creationTimestamp of the event can only follow.
    decided = [stamp(e["firstTimestamp"]) for e in actions]
    for e, t in zip(actions, decided, strict=True):
        assert stamp(e["metadata"]["creationTimestamp"]) >= t, e
    gaps = [b - a for a, b in itertools.pairwise(decided)]
    # whole seconds on both ends: a gap of WINDOW_S can read as WINDOW_S - 1
    assert all(g >= WINDOW_S - 1 for g in gaps), f"two actions within one {WINDOW_S} s window: gaps {gaps}"
    assert decided[-1] - decided[0] >= 3 * (WINDOW_S - 1)  # the flapping went on over several windows
