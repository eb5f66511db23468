"""The detector's GPU series from dcgm-exporter: queries, units, pod attribution, what is ignored (counted once)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from statictrain import dcgm, labels, metrics
from statictrain.cost import Sample
from statictrain_operator.anomaly import faults, queries
from statictrain_operator.anomaly.evaluate import Evaluator
from statictrain_operator.anomaly.exported import AnomalyMetrics
from statictrain_operator.anomaly.gpu import combine
from statictrain_operator.anomaly.settings import AnomalySettings
from statictrain_operator.prom import Series
from statictrain_operator.workerpods import JobSeries, WorkerPod, worker_pods

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
NEW = WorkerPod("uid-new", "w-0", "ns", 990.0, None)
OLD = WorkerPod("uid-old", "w-0", "ns", 900.0, 980.0)
OTHER = WorkerPod("uid-1", "w-1", "ns", 900.0, None)
WHO = JobSeries.of("j", "ns", [NEW, OTHER])
DCGM = dcgm.DcgmSettings(source="dcgm")


def dcgm_series(values: list[tuple[float, float]], **lab: str) -> Series:
    base = {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0", "UUID": "GPU-a", "namespace": "ns", "pod": "w-0"}
    return Series({k: v for k, v in {**base, **lab}.items() if v}, tuple(Sample(t, v) for t, v in values))


def test_the_sidecar_default_keeps_its_promql_and_reads_no_raw_series() -> None:
    assert queries.gpu_queries(WHO, queries.SIDECARS) == {}
    assert queries.fault_queries(WHO)[faults.GPU_POWER_WATTS].startswith(f"avg({metrics.GPU_POWER_WATTS}{{")
    assert queries.job_queries(WHO, 60)[faults.GPU_UTILIZATION].startswith(f"avg({metrics.GPU_UTILIZATION_RATIO}{{")


def test_dcgm_selects_the_job_s_pods_by_namespace_and_name_and_no_sidecar_gpu_series() -> None:
    gpu = replace(DCGM, scrape_job="nvidia-dcgm-exporter")
    assert not set(queries.GPU_FIGURES) & set(queries.fault_queries(WHO, gpu))
    assert faults.GPU_UTILIZATION not in queries.job_queries(WHO, 60, gpu)
    got = queries.gpu_queries(WHO, gpu)
    assert set(got) == {faults.GPU_UTILIZATION, faults.GPU_POWER_WATTS, faults.GPU_MEMORY_USED_BYTES}  # no total
    assert got[faults.GPU_UTILIZATION] == queries.GpuQuery(
        "avg", "", 'DCGM_FI_DEV_GPU_UTIL{job="nvidia-dcgm-exporter",namespace="ns",pod=~"w-0|w-1"}', 0.01
    )
    assert got[faults.GPU_POWER_WATTS].dcgm.startswith("DCGM_FI_DEV_POWER_USAGE{") and got[
        faults.GPU_POWER_WATTS].scale == 1.0  # fmt: skip
    assert (got[faults.GPU_MEMORY_USED_BYTES].aggregate, got[faults.GPU_MEMORY_USED_BYTES].scale) == ("max", 2.0**20)
    renamed = replace(DCGM, pod_label="exported_pod", namespace_label="exported_namespace",
                      utilization_metric="DCGM_FI_PROF_GR_ENGINE_ACTIVE", utilization_unit="ratio")  # fmt: skip
    util = queries.gpu_queries(WHO, renamed)[faults.GPU_UTILIZATION]
    assert util.dcgm == 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{exported_namespace="ns",exported_pod=~"w-0|w-1"}'
    assert util.scale == 1.0


def test_auto_reads_both_and_without_named_pods_no_dcgm_series() -> None:
    got = queries.gpu_queries(WHO, replace(DCGM, source="auto"))
    assert got[faults.GPU_MEMORY_TOTAL_BYTES] == queries.GpuQuery(
        "max", queries.fault_queries(WHO)[faults.GPU_MEMORY_TOTAL_BYTES][4:-1], ""
    )
    assert got[faults.GPU_UTILIZATION].sidecar.startswith(metrics.GPU_UTILIZATION_RATIO + "{")
    assert got[faults.GPU_UTILIZATION].dcgm
    assert queries.gpu_queries(JobSeries("j", "ns", frozenset({"uid-1"})), DCGM) == {}


def test_units_gpus_and_pod_lifetimes() -> None:
    q = queries.gpu_queries(WHO, DCGM)[faults.GPU_UTILIZATION]
    a = dcgm_series([(950.0, 40.0), (1000.0, 80.0), (1010.0, 60.0)])  # 950: the earlier pod of the name
    b = dcgm_series([(1000.0, 20.0), (1010.0, 0.0)], gpu="1", UUID="GPU-b")
    b_again = dcgm_series([(1010.0, 10.0)], gpu="1", UUID="GPU-b", instance="second-scrape")  # GPU-b twice
    c = dcgm_series([(1000.0, 30.0)], pod="w-1", UUID="GPU-c")
    got, ignored = combine(q, [], [a, b, b_again, c], [NEW, OTHER], DCGM)
    assert ignored == {}  # 950 s is before NEW started: dropped, not NEW's
    assert got[0] == [1000.0, 1010.0]
    assert got[1] == pytest.approx([(0.8 + 0.2 + 0.3) / 3, (0.6 + 0.05) / 2])  # percent -> ratio; GPU-b once
    listed, _ = combine(q, [], [a], [NEW, OLD], DCGM)  # the earlier pod still listed: 950 s is its own
    assert listed[0] == [950.0, 1000.0, 1010.0] and listed[1] == pytest.approx([0.4, 0.8, 0.6])
    q_mem = queries.gpu_queries(WHO, DCGM)[faults.GPU_MEMORY_USED_BYTES]
    mem, _ = combine(q_mem, [], [dcgm_series([(1000.0, 1024.0)]), dcgm_series([(1000.0, 512.0)], UUID="GPU-b")],
                     [NEW], DCGM)  # fmt: skip
    assert mem == ([1000.0], [1024.0 * 2**20])


def test_series_that_cannot_be_attributed_are_ignored_never_given_to_another_pod() -> None:
    q = queries.gpu_queries(WHO, DCGM)[faults.GPU_UTILIZATION]
    no_gpu = dcgm_series([(1000.0, 0.0)], gpu="", UUID="")
    earlier = dcgm_series([(920.0, 0.0), (970.0, 0.0)], UUID="GPU-z")  # only while a previous w-0 ran
    got, ignored = combine(q, [], [no_gpu, earlier, dcgm_series([(1000.0, 90.0)])], [NEW], DCGM)
    assert got == ([1000.0], [0.9])
    assert ignored == {dcgm.NO_GPU_LABEL: [no_gpu.labels], dcgm.OUTSIDE_POD_LIFETIME: [earlier.labels]}


def test_auto_keeps_a_pod_s_sidecar_series_and_fills_in_the_others() -> None:
    q = queries.gpu_queries(WHO, replace(DCGM, source="auto"))[faults.GPU_UTILIZATION]
    side = Series({"pod_uid": "uid-new", "gpu_uuid": "GPU-a"}, (Sample(1000.0, 0.9),))
    theirs = [dcgm_series([(1000.0, 10.0)]), dcgm_series([(1000.0, 50.0)], pod="w-1", UUID="GPU-c")]
    got, _ = combine(q, [side], theirs, [NEW, OTHER], DCGM)
    assert got[0] == [1000.0] and got[1] == pytest.approx([(0.9 + 0.5) / 2])


class DcgmProm:
    """Answers the raw dcgm-exporter reads with one good series and one without a GPU label."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def query(self, query: str, at: float) -> list[Series]:
        return []

    def query_range(self, query: str, start: float, end: float, step: float) -> list[Series]:
        self.asked.append(query)
        if not query.startswith("DCGM_FI_DEV_GPU_UTIL{"):
            return []
        t = NOW.timestamp()
        return [dcgm_series([(t, 3.0)], pod="w-1", UUID="GPU-c"), dcgm_series([(t, 0.0)], pod="w-1", gpu="", UUID="")]


def test_an_ignored_series_is_counted_once_however_often_it_is_read() -> None:
    registry = CollectorRegistry()
    prom = DcgmProm()
    ev = Evaluator(replace(AnomalySettings(prometheus_url="http://p"), dcgm=DCGM), prom, None,  # type: ignore[arg-type]
                   AnomalyMetrics(registry), lambda: NOW)  # fmt: skip
    for _ in range(2):
        got = ev.fetch_faults(WHO, NOW)
        ev.fetch(WHO, NOW)
    assert got[faults.GPU_UTILIZATION] == ([NOW.timestamp()], [0.03])
    assert not any(metrics.GPU_UTILIZATION_RATIO in q or metrics.GPU_POWER_WATTS in q for q in prom.asked)
    want = {"job_name": "j", "namespace": "ns", "reason": dcgm.NO_GPU_LABEL}
    assert registry.get_sample_value(metrics.ANOMALY_DCGM_SERIES_IGNORED_TOTAL, want) == 1


def test_the_source_is_the_shared_dcgm_setting() -> None:
    env = {"STATICTRAIN_DCGM_SOURCE": "dcgm", "STATICTRAIN_DCGM_POD_LABEL": "exported_pod"}
    got = AnomalySettings.from_env(env).dcgm
    assert (got.source, got.pod_label) == ("dcgm", "exported_pod")
    assert AnomalySettings.from_env({}).dcgm == dcgm.DcgmSettings()
    with pytest.raises(ValueError, match="STATICTRAIN_DCGM_SOURCE"):
        AnomalySettings.from_env({"STATICTRAIN_DCGM_SOURCE": "nvml"})


def pod(name: str, uid: str, **status: Any) -> dict[str, Any]:
    lab = {labels.JOB: "j", labels.ROLE: "worker"}
    return {"metadata": {"namespace": "ns", "name": name, "uid": uid, "labels": lab}, "status": status}


def test_worker_pods_carry_their_lifetimes() -> None:
    done = {"phase": "Failed", "startTime": "2026-03-01T11:00:00Z",
            "containerStatuses": [{"state": {"terminated": {"finishedAt": "2026-03-01T11:30:00Z"}}}]}  # fmt: skip
    got = worker_pods([pod("w-0", "u2", phase="Running", startTime="2026-03-01T11:40:00Z"), pod("w-0", "u1", **done),
                       pod("w-1", "u3", phase="Pending")])  # fmt: skip
    t = datetime(2026, 3, 1, 11, tzinfo=UTC).timestamp()
    assert got == {("ns", "j"): (WorkerPod("u1", "w-0", "ns", t, t + 1800),
                                 WorkerPod("u2", "w-0", "ns", t + 2400, None),
                                 WorkerPod("u3", "w-1", "ns", None, None))}  # fmt: skip
    with pytest.raises(ValueError, match="among its UIDs"):
        JobSeries("j", "ns", frozenset({"u1"}), (WorkerPod("u9", "w-9", "ns", None, None),))
