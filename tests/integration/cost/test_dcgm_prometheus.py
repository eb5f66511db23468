"""Cost accounting from NVIDIA dcgm-exporter's series against a real Prometheus, next to the sidecar's.

One 2-GPU worker's utilization, sampled once a second as NVML gives it (busy stretches and idle ones:
data loading, checkpoints, a GPU waiting for the other), is written twice with the timestamps a 15 s scrape
gives, into two real Prometheus servers (Debian's binary, its TSDB filled by promtool's OpenMetrics
backfill, so both hold exactly the same instants):

* the sidecar's shape: statictrain_gpu_utilization_ratio per GPU and the idle counter the sidecar keeps
  from every NVML sample (statictrain_gpu_idle_seconds_total{below="0.05"}), keyed by pod_uid;
* dcgm-exporter's shape and no statictrain GPU series: DCGM_FI_DEV_GPU_UTIL in whole percent (and
  FB_USED, POWER_USAGE, GR_ENGINE_ACTIVE) with the labels its pod-resources mapping sets (pod, namespace,
  container, gpu, UUID, modelName, Hostname), plus series that must not reach the pod: a GPU of no pod, a
  GPU of a pod that is no worker, one without a GPU label, one of an earlier pod of the same name, and
  one claiming the worker's GPU from another scrape job, all idle (any of them attributed would raise the
  pod's idle cost or its GPU count).

The operator's accounting (Accountant's usage reading, then statictrain.cost.allocate) runs over both in
120 s windows. The cost is the same; idle cost and mean utilization agree within 1 %: the sidecar's idle
counter is exact to the second, the DCGM figure places each busy/idle change to within one scrape.
"""

from __future__ import annotations

import random
import time
from decimal import Decimal
from typing import Any

import pytest
from statictrain import dcgm, metrics
from statictrain.cost import IDLE_THRESHOLD, NodeInfo, PodInfo, Window, allocate, below_label
from statictrain.counters import held_mean
from statictrain_operator.cost.accounting import Accountant
from statictrain_operator.cost.exporter import CostMetrics
from statictrain_operator.cost.settings import CostSettings
from statictrain_operator.prom import HttpPrometheus

from ..backfill import backfilled, openmetrics

HOURS = 3
SCRAPE_S = 15
WINDOW_S = 120
NS, POD, UID, NODE = "team-a", "llm-worker-0", "0c7e5a1e-uid-of-the-worker", "gpu-node-1"
UUIDS = tuple(f"GPU-5f1c0a9e-0000-4000-8000-00000000000{g}" for g in range(5))
"""GPUs 0 and 1: the worker's; 2: no pod's; 3: a notebook's; 4: an earlier pod's of the worker's name."""
MODEL = "NVIDIA H100 80GB HBM3"
EXPORTER = "nvidia-dcgm-exporter"


def trace(seed: int, seconds: int) -> list[list[float]]:
    """Per GPU, one utilization ratio per second: busy (0.55-0.99) with idle stretches (0-0.03) of 1-12
    minutes starting at any second; GPU 1 also waits alone at times."""
    rng = random.Random(seed)
    out = [[rng.uniform(0.55, 0.99) for _ in range(seconds)] for _ in range(2)]
    for gpus in [(0, 1)] * 7 + [(1,)] * 3:
        start, length = rng.randrange(0, seconds - 720), rng.randrange(60, 720)
        for g in gpus:
            for t in range(start, start + length):
                out[g][t] = rng.uniform(0.0, 0.03)
    return out


@pytest.fixture(scope="module")
def shaped(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    seconds = HOURS * 3600
    t0 = float(int(time.time()) - seconds - 3 * 3600)  # well before the head block: backfilled blocks only
    util = trace(30, seconds)
    scrapes = range(7, seconds, SCRAPE_S)  # the first scrape 7 s after the pod started
    idle = [0.0]
    for t in range(seconds):
        idle.append(idle[-1] + sum(1.0 for g in range(2) if util[g][t] < IDLE_THRESHOLD))

    def at(g: int) -> list[tuple[float, float]]:
        return [(t0 + k, util[g][k]) for k in scrapes]

    sidecar = {"job_name": "llm", "namespace": NS, "commit": "c0ffee", "team": "research", "pod": POD, "pod_uid": UID}
    side = openmetrics({
        metrics.GPU_UTILIZATION_RATIO: [
            ({**sidecar, "gpu": str(g), "gpu_uuid": UUIDS[g], "gpu_model": MODEL}, at(g)) for g in range(2)],
        metrics.GPU_IDLE_SECONDS_TOTAL: [
            ({**sidecar, "below": below_label(IDLE_THRESHOLD)}, [(t0 + k, idle[k]) for k in scrapes])],
    })  # fmt: skip

    def gpu(g: int, **extra: str) -> dict[str, str]:
        return {"gpu": str(g), "UUID": UUIDS[g], "device": f"nvidia{g}", "modelName": MODEL, "Hostname": NODE,
                "job": EXPORTER, **extra}  # fmt: skip

    pod = {"container": "trainer", "namespace": NS, "pod": POD}
    zero = [(t0 + k, 0.0) for k in scrapes]
    before = [(t0 - 1800 + k, 0.0) for k in range(0, 1800, SCRAPE_S)]  # an earlier pod of the same name
    no_gpu = {k: v for k, v in gpu(0, **pod).items() if k not in ("gpu", "UUID")}
    dcgm_text = openmetrics({
        "DCGM_FI_DEV_GPU_UTIL": [
            *((gpu(g, **pod), [(t, round(100 * v)) for t, v in at(g)]) for g in range(2)),
            (gpu(2), zero),  # allocated to no pod: dcgm-exporter sets no pod labels
            (gpu(3, container="c", namespace=NS, pod="notebook-7f9c"), zero),  # a pod that is no worker
            (no_gpu, zero),  # the worker's labels but no GPU label
            (gpu(4, **pod), before),
            (gpu(0, **pod, job="someone-else"), zero),  # another exporter's claim: not dcgm-exporter's job
        ],
        "DCGM_FI_DEV_FB_USED": [(gpu(g, **pod), [(t, 61440.0) for t, _ in at(g)]) for g in range(2)],
        "DCGM_FI_DEV_POWER_USAGE": [(gpu(g, **pod), [(t, 100 + 500 * v) for t, v in at(g)]) for g in range(2)],
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": [(gpu(g, **pod), at(g)) for g in range(2)],
    })  # fmt: skip
    return {"t0": t0, "seconds": seconds, "sidecar": side, "dcgm": dcgm_text,
            "root": tmp_path_factory.mktemp("dcgm")}  # fmt: skip


def account(url: str, shaped: dict[str, Any], source: str) -> tuple[dict[str, Decimal | float], CostMetrics]:
    """The operator's usage reading and allocation over the whole trace, window by window."""
    t0, seconds = shaped["t0"], shaped["seconds"]
    gpu = dcgm.DcgmSettings(source=source, scrape_job=EXPORTER if source != "sidecar" else "")
    settings = CostSettings(prometheus_url=url, interval_s=WINDOW_S, dcgm=gpu)
    cost_metrics = CostMetrics()
    acct = Accountant(kube=None, prom=HttpPrometheus(url), catalog=None, settings=settings,  # type: ignore[arg-type]
                      metrics=cost_metrics)  # fmt: skip
    node = NodeInfo(NODE, Decimal("24.00"), 2, cpu=64, memory_gib=512)
    pods = [
        PodInfo(UID, POD, NS, "llm", NODE, 2, started=t0),
        PodInfo("uid-of-an-earlier-pod", POD, NS, "llm", NODE, 2, started=t0 - 7200, finished=t0 - 3600),
    ]
    totals: dict[str, Any] = {"usd": Decimal(0), "idle_usd": Decimal(0), "gpus": set(), "flags": set()}
    busy = [0.0, 0.0]
    for start in range(0, seconds, WINDOW_S):
        window = Window(t0 + start, t0 + min(start + WINDOW_S, seconds))
        usage, error = acct._usage(window, pods)
        assert not error, error
        u = usage[UID]
        for g, samples in enumerate(u.utilization[k] for k in UUIDS[:2]):
            busy[g] += (held_mean(samples, window.start, window.end, max_gap=settings.max_gap_s) or 0.0) * (
                window.end - window.start
            )
        (pod_cost,) = [c for c in allocate(window, [node], pods, usage, max_gap=settings.max_gap_s).pods
                       if c.pod.uid == UID]  # fmt: skip
        totals["usd"] += pod_cost.usd
        totals["idle_usd"] += pod_cost.idle_usd
        totals["gpus"].add(pod_cost.gpus)
        totals["flags"].update(f for f in pod_cost.flags if f != "utilization-gaps" or start > 0)
        assert set(usage) <= {UID}, usage.keys()  # nothing for the earlier pod (its time is before the trace)
    totals["mean_utilization"] = sum(busy) / (2 * seconds)
    return totals, cost_metrics


def ignored(cost_metrics: CostMetrics) -> dict[str, float]:
    fam = next(f for f in cost_metrics.collect() if f.name == metrics.DCGM_SERIES_IGNORED_TOTAL.removesuffix("_total"))
    return {s.labels["reason"]: s.value for s in fam.samples if s.name.endswith("_total")}


def test_dcgm_exporter_series_give_the_sidecar_s_cost_and_idle_figures(shaped: dict[str, Any]) -> None:
    side_prom = backfilled(shaped["root"], "sidecar", shaped["sidecar"])
    dcgm_prom = backfilled(shaped["root"], "dcgm", shaped["dcgm"])
    side_url, dcgm_url = next(side_prom), next(dcgm_prom)
    try:
        side, side_metrics = account(side_url, shaped, "sidecar")
        from_dcgm, dcgm_metrics = account(dcgm_url, shaped, "dcgm")
        auto, _ = account(dcgm_url, shaped, "auto")  # no sidecar GPU series there: dcgm-exporter's
    finally:
        side_prom.close()
        dcgm_prom.close()
    assert side["usd"] > 0 and side["idle_usd"] > 0
    assert from_dcgm["usd"] == side["usd"]
    assert abs(from_dcgm["idle_usd"] - side["idle_usd"]) <= Decimal("0.01") * side["idle_usd"], (from_dcgm, side)
    assert abs(from_dcgm["mean_utilization"] - side["mean_utilization"]) <= 0.01 * side["mean_utilization"]
    assert from_dcgm["gpus"] == side["gpus"] == {2}  # the unlabelled GPU stayed out
    # no energy counters in either store (energy is not what this compares): both say so, nothing else
    assert side["flags"] == from_dcgm["flags"] == {"gpu-energy-missing"}
    assert auto == from_dcgm
    counts = ignored(dcgm_metrics)
    assert set(counts) == set(dcgm.IGNORED_REASONS) and all(v > 0 for v in counts.values()), counts
    assert not ignored(side_metrics)
