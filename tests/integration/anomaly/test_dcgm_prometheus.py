"""The anomaly detector on NVIDIA dcgm-exporter's GPU series against a real Prometheus, next to the sidecar's.

One worker pod with 2 GPUs trains for 3 h, sampled as a 15 s scrape gives it: normal training, then 30 min in
which its GPUs sit idle with their memory held (steps go on: the work is elsewhere), normal again, and at 150 min
a hang: no step, utilization at 100 % (a spinning collective), power fallen to a quarter. Two real Prometheus
servers (Debian's binary, TSDB filled by promtool's backfill, the same instants) hold it:

* the sidecar's shape: the trainer's series and the sidecar's NVML GPU series (utilization ratio, power in W,
  memory used and total in bytes), keyed by pod_uid;
* a cluster with dcgm-exporter and no sidecar GPU sampling: the same trainer series, no statictrain GPU series,
  and dcgm-exporter's (DCGM_FI_DEV_GPU_UTIL in whole percent, _POWER_USAGE in W, _FB_USED in MiB) with the
  labels of its pod mapping, plus series naming the worker's pod that must not count: one without a GPU label
  (idle, 0 W: counted into the job it would hide the hang's corroboration and pull utilization toward idle),
  an earlier pod of the same name (idle), another scrape job's claim on the worker's GPU (idle, 0 W).

The operator's Evaluator (its Prometheus reads, detectors, findings and Recommend-mode decision) judges both at
one instant of each phase. Oracle, from the scenario: nothing in the normal phases, IdleGPU from the idle
stretch's start, Stalled (hang) from the last step; the dcgm-exporter store gives the same findings and the same
recommended action (same id: same episode start), its GPU series equal the sidecar's to within dcgm-exporter's
whole percent, and the unattributable series are counted. Read as the sidecar source (the default), the
dcgm-exporter cluster has no GPU series: neither fault is found.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from statictrain import dcgm, metrics
from statictrain_operator.anomaly import faults as flt
from statictrain_operator.anomaly.evaluate import Evaluator
from statictrain_operator.anomaly.exported import AnomalyMetrics
from statictrain_operator.anomaly.remediation import FindingKind, Mode
from statictrain_operator.anomaly.settings import AnomalySettings
from statictrain_operator.prom import HttpPrometheus
from statictrain_operator.workerpods import JobSeries, WorkerPod

from ..backfill import backfilled, openmetrics

HOURS = 3
SCRAPE_S = 15
IDLE = (3600, 5400)
"""Seconds after the pod's start during which its GPUs are idle."""
HANG_AT = 9000
"""The last step, seconds after the pod's start."""
JUDGED_AT = {"training": 3300, "idle": 4500, "training again": 7500, "hung": HANG_AT + 150}
"""One instant per phase (the hang judged before the 300 s uncorroborated-stall fallback could speak)."""
NS, JOB, POD, UID, NODE = "team-a", "llm", "llm-worker-0", "0c7e5a1e-uid-of-the-worker", "gpu-node-1"
UUIDS = tuple(f"GPU-5f1c0a9e-0000-4000-8000-00000000000{g}" for g in range(3))
"""GPUs 0 and 1: the worker's; 2: the earlier pod's of the worker's name."""
MODEL = "NVIDIA H100 80GB HBM3"
EXPORTER = "nvidia-dcgm-exporter"
MEMORY_MIB = 61440.0
GPU = (flt.GPU_UTILIZATION, flt.GPU_POWER_WATTS, flt.GPU_MEMORY_USED_BYTES)
"""The GPU series dcgm-exporter gives the detectors."""


def phase(s: int) -> str:
    if s >= HANG_AT:
        return "hung"
    return "idle" if IDLE[0] <= s < IDLE[1] else "training"


@pytest.fixture(scope="module")
def shaped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    seconds = HOURS * 3600
    t0 = float(int(time.time()) - seconds - 3 * 3600)  # well before the head block: backfilled blocks only
    rng = random.Random(31)
    level = {"training": ((0.85, 0.99), (550.0, 650.0)), "idle": ((0.0, 0.03), (80.0, 100.0)),
             "hung": ((1.0, 1.0), (140.0, 160.0))}  # fmt: skip
    scrapes = list(range(7, seconds, SCRAPE_S))  # the first scrape 7 s after the pod started
    util = [[rng.uniform(*level[phase(s)][0]) for s in scrapes] for _ in range(2)]
    power = [[rng.uniform(*level[phase(s)][1]) for s in scrapes] for _ in range(2)]
    steps: list[int] = []
    step_sum: list[float] = []
    total = 0.0
    for s in scrapes:
        ran = min(s, HANG_AT) * 2  # a step every 0.5 s until the hang
        total += sum(rng.uniform(0.49, 0.51) for _ in range(ran - (steps[-1] if steps else 0)))
        steps.append(ran)
        step_sum.append(total)

    def at(values: list[float]) -> list[tuple[float, float]]:
        return [(t0 + s, v) for s, v in zip(scrapes, values, strict=True)]

    pod = {"job_name": JOB, "namespace": NS, "commit": "c0ffee", "team": "research", "pod": POD, "pod_uid": UID}
    trainer = {
        metrics.TRAIN_STEP: [(pod, at([float(n) for n in steps]))],
        metrics.TRAIN_STEP_SECONDS + "_count": [(pod, at([float(n) for n in steps]))],
        metrics.TRAIN_STEP_SECONDS + "_sum": [(pod, at(step_sum))],
        metrics.TRAIN_SECONDS_SINCE_LAST_STEP: [(pod, at([max(0.25, s - HANG_AT) for s in scrapes]))],
        metrics.TRAIN_TOKENS_TOTAL: [(pod, at([4096.0 * n for n in steps]))],
        metrics.TRAIN_TOKENS_PER_SECOND: [(pod, at([0.0 if s >= HANG_AT else 8192.0 for s in scrapes]))],
        metrics.TRAIN_LOSS: [(pod, at([3.0 - 0.5 * min(s, HANG_AT) / seconds for s in scrapes]))],
    }

    def nvml(g: int) -> dict[str, str]:
        return {**pod, "gpu": str(g), "gpu_uuid": UUIDS[g], "gpu_model": MODEL}

    side = openmetrics({**trainer,
        metrics.GPU_UTILIZATION_RATIO: [(nvml(g), at(util[g])) for g in range(2)],
        metrics.GPU_POWER_WATTS: [(nvml(g), at(power[g])) for g in range(2)],
        metrics.GPU_MEMORY_USED_BYTES: [(nvml(g), at([MEMORY_MIB * 2**20] * len(scrapes))) for g in range(2)],
        metrics.GPU_MEMORY_TOTAL_BYTES: [(nvml(g), at([81559.0 * 2**20] * len(scrapes))) for g in range(2)],
    })  # fmt: skip

    def gpu(g: int, **extra: str) -> dict[str, str]:
        return {"gpu": str(g), "UUID": UUIDS[g], "device": f"nvidia{g}", "modelName": MODEL, "Hostname": NODE,
                "container": "trainer", "namespace": NS, "pod": POD, "job": EXPORTER, **extra}  # fmt: skip

    zero = at([0.0] * len(scrapes))
    earlier = [(t0 - 7200 + s, 0.0) for s in range(0, 3600, SCRAPE_S)]  # an earlier pod of the same name
    no_gpu = {k: v for k, v in gpu(0).items() if k not in ("gpu", "UUID")}
    claim = gpu(0, job="someone-else")
    dcgm_text = openmetrics({**trainer,
        "DCGM_FI_DEV_GPU_UTIL": [*((gpu(g), at([round(100 * v) for v in util[g]])) for g in range(2)),
                                 (no_gpu, zero), (gpu(2), earlier), (claim, zero)],
        "DCGM_FI_DEV_POWER_USAGE": [*((gpu(g), at(power[g])) for g in range(2)), (no_gpu, zero), (claim, zero)],
        "DCGM_FI_DEV_FB_USED": [(gpu(g), at([MEMORY_MIB] * len(scrapes))) for g in range(2)],
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": [(gpu(g), at(util[g])) for g in range(2)],
    })  # fmt: skip
    root = tmp_path_factory.mktemp("dcgm")
    side_prom, dcgm_prom = backfilled(root, "sidecar", side), backfilled(root, "dcgm", dcgm_text)
    out = {"t0": t0, "sidecar": next(side_prom), "dcgm": next(dcgm_prom)}
    yield out
    side_prom.close()
    dcgm_prom.close()


def judged(url: str, t0: float, source: str) -> tuple[dict[str, Any], CollectorRegistry]:
    """Per phase: the training-fault findings (kind, since), the decision (reason, recommended action and id) and
    the GPU series the detectors read, as the operator's Evaluator makes them from ``url``."""
    gpu = dcgm.DcgmSettings(source=source, scrape_job=EXPORTER if source != "sidecar" else "")
    s = AnomalySettings(prometheus_url=url, lookback_s=7200, step_s=SCRAPE_S, rate_window_s=60,
                        prophet_min_points=100_000, dcgm=gpu)  # fmt: skip
    registry = CollectorRegistry()
    pods = (WorkerPod(UID, POD, NS, t0, None),)
    job = {"metadata": {"name": JOB, "namespace": NS, "generation": 1, "annotations": {}},
           "spec": {"replicas": 2, "elastic": {"minReplicas": 1, "maxReplicas": 2},
                    "remediation": {"mode": "Recommend"}}, "status": {}}  # fmt: skip
    out: dict[str, Any] = {}
    ev = Evaluator(s, HttpPrometheus(url), None, AnomalyMetrics(registry), lambda: datetime.now(UTC))  # type: ignore[arg-type]
    for name, offset in JUDGED_AT.items():
        now = datetime.fromtimestamp(t0 + offset, tz=UTC)
        _, _, decision, problem = ev.judge(job, Mode.RECOMMEND, now, pods)
        assert problem is None, problem
        series = ev.fetch_faults(JobSeries.of(JOB, NS, pods), now)
        found = flt.detect(series, now.timestamp(), s.faults())
        rec = decision.recommend
        out[name] = {
            "findings": [(f.kind, f.since.timestamp()) for f in found],
            "decision": (decision.reason, rec.action if rec else None, rec.id if rec else None),
            "gpu": {k: series.get(k, ([], [])) for k in GPU},
        }
    return out, registry


def test_dcgm_exporter_series_give_the_sidecar_s_verdicts(shaped: dict[str, Any]) -> None:
    t0 = shaped["t0"]
    side, _ = judged(shaped["sidecar"], t0, "sidecar")
    from_dcgm, registry = judged(shaped["dcgm"], t0, "dcgm")
    # the oracle: the scenario's phases
    kinds = {name: [k for k, _ in side[name]["findings"]] for name in JUDGED_AT}
    assert kinds == {"training": [], "idle": [FindingKind.IDLE_GPU], "training again": [],
                     "hung": [FindingKind.STALLED]}, side  # fmt: skip
    # the first scrape after a change is at most a scrape later, the first query step seeing it one step later
    (idle_since,) = [t for _, t in side["idle"]["findings"]]
    assert t0 + IDLE[0] <= idle_since <= t0 + IDLE[0] + 2 * SCRAPE_S
    (hang_since,) = [t for _, t in side["hung"]["findings"]]  # the step that first saw the last step's count
    assert t0 + HANG_AT <= hang_since <= t0 + HANG_AT + 2 * SCRAPE_S
    assert side["idle"]["decision"][1] is not None and side["hung"]["decision"][1] is not None
    for name in JUDGED_AT:
        assert from_dcgm[name]["findings"] == side[name]["findings"], name
        assert from_dcgm[name]["decision"] == side[name]["decision"], name
        for figure, (ts, vs) in side[name]["gpu"].items():
            got_ts, got_vs = from_dcgm[name]["gpu"][figure]
            assert list(got_ts) == list(ts) and ts, (name, figure)
            tolerance = 0.005 if figure == flt.GPU_UTILIZATION else 1e-9  # whole percent
            assert max(abs(a - b) for a, b in zip(got_vs, vs, strict=True)) <= tolerance, (name, figure)
    ignored = {reason: registry.get_sample_value(metrics.ANOMALY_DCGM_SERIES_IGNORED_TOTAL,
                                                 {"job_name": JOB, "namespace": NS, "reason": reason})
               for reason in dcgm.IGNORED_REASONS}  # fmt: skip
    # no GPU label: its utilization and power series; the earlier pod's: read while in the lookback (phase 1)
    assert ignored == {dcgm.NO_POD_LABELS: None, dcgm.NOT_A_WORKER: None, dcgm.NO_GPU_LABEL: 2.0,
                       dcgm.OUTSIDE_POD_LIFETIME: 1.0}  # fmt: skip


def test_auto_reads_dcgm_exporter_where_no_sidecar_gpu_series_and_the_default_reads_none(
    shaped: dict[str, Any],
) -> None:
    t0 = shaped["t0"]
    from_dcgm, _ = judged(shaped["dcgm"], t0, "dcgm")
    auto, _ = judged(shaped["dcgm"], t0, "auto")
    assert auto == from_dcgm
    side_default, _ = judged(shaped["dcgm"], t0, "sidecar")  # dcgm-exporter's series there, not read
    assert all(not v["findings"] and not any(ts for ts, _ in v["gpu"].values()) for v in side_default.values())
    on_sidecar_store, _ = judged(shaped["sidecar"], t0, "auto")  # the sidecars' series win where they exist
    assert [v["findings"] for v in on_sidecar_store.values()] == [v["findings"] for v in from_dcgm.values()]


def test_graphics_engine_activity_as_the_utilization(shaped: dict[str, Any]) -> None:
    """DCGM_FI_PROF_GR_ENGINE_ACTIVE (a ratio, here the unrounded figure) in place of DCGM_FI_DEV_GPU_UTIL."""
    t0 = shaped["t0"]
    side, _ = judged(shaped["sidecar"], t0, "sidecar")
    url = shaped["dcgm"]
    gpu = replace(dcgm.DcgmSettings(source="dcgm", scrape_job=EXPORTER),
                  utilization_metric="DCGM_FI_PROF_GR_ENGINE_ACTIVE", utilization_unit="ratio")  # fmt: skip
    s = AnomalySettings(prometheus_url=url, lookback_s=7200, step_s=SCRAPE_S, rate_window_s=60, dcgm=gpu)
    pods = (WorkerPod(UID, POD, NS, t0, None),)
    now = datetime.fromtimestamp(t0 + JUDGED_AT["idle"], tz=UTC)
    ev = Evaluator(s, HttpPrometheus(url), None, AnomalyMetrics(CollectorRegistry()), lambda: now)  # type: ignore[arg-type]
    series = ev.fetch_faults(JobSeries.of(JOB, NS, pods), now)
    (ts, vs), (side_ts, side_vs) = series[flt.GPU_UTILIZATION], side["idle"]["gpu"][flt.GPU_UTILIZATION]
    assert list(ts) == list(side_ts) and list(vs) == pytest.approx(list(side_vs))
    assert [f.kind for f in flt.detect(series, now.timestamp(), s.faults())] == [FindingKind.IDLE_GPU]
