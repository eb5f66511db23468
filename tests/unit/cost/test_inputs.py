"""API objects and Prometheus series -> cost model inputs."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from statictrain import labels
from statictrain.cost import PodInfo, Sample, Window, allocate
from statictrain.counters import Counter
from statictrain_operator.cost.inputs import (
    INVALID_PRICE,
    build_usage,
    counters_missing_prev,
    node_info,
    parse_quantity,
    pod_info,
    prev_query,
    usage_queries,
)
from statictrain_operator.prom import Series, parse_result


def pod(uid: str, phase: str = "Running", finished: str | None = None, gpus: str = "2") -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "startTime": "2026-03-01T00:00:00Z"}
    if finished:
        status["containerStatuses"] = [{"state": {"terminated": {"finishedAt": finished}}}]
    return {
        "metadata": {
            "uid": uid,
            "name": "j-worker-0",
            "namespace": "ns",
            "labels": {labels.JOB: "j", labels.COMMIT: "abc", labels.TEAM: "nlp"},
        },
        "spec": {
            "nodeName": "n1",
            "containers": [{"resources": {"limits": {labels.GPU_RESOURCE: gpus}}}, {"resources": {}}],
        },
        "status": status,
    }


def test_pod_info_running_and_finished() -> None:
    p = pod_info(pod("u1"))
    assert p is not None
    assert (p.uid, p.job, p.commit, p.team, p.node, p.gpus_requested) == ("u1", "j", "abc", "nlp", "n1", 2)
    assert p.started == 1772323200.0 and p.finished is None
    q = pod_info(pod("u2", "Succeeded", "2026-03-01T01:00:00Z"))
    assert q is not None and q.finished == 1772326800.0


def test_finished_pod_without_any_end_time_stops_accruing() -> None:
    p = pod_info(pod("u3", "Failed"))
    assert p is not None and p.finished == p.started


def test_pod_without_job_label_is_ignored() -> None:
    body = pod("u1")
    body["metadata"]["labels"] = {}
    assert pod_info(body) is None


def test_node_info_prefers_annotation_and_prices_unannotated() -> None:
    n: dict[str, Any] = {
        "metadata": {"name": "n1", "annotations": {labels.HOURLY_COST: "16.5"}, "labels": {}},
        "status": {"capacity": {labels.GPU_RESOURCE: "8", "cpu": "96", "memory": "1024Gi"}},
    }
    info = node_info(n, lambda facts: Decimal(999))
    assert info is not None and info.hourly_usd == Decimal("16.5") and info.gpus == 8
    assert (info.cpu, info.memory_gib) == (96.0, 1024.0)
    del n["metadata"]["annotations"][labels.HOURLY_COST]
    info2 = node_info(n, lambda facts: Decimal(7))
    assert info2 is not None and info2.hourly_usd == Decimal(7)


def test_build_usage_groups_by_uid_and_splits_at_the_window_start() -> None:
    w = Window(100.0, 200.0)
    util = [
        Series({"pod_uid": "u1", "gpu": "0"}, (Sample(90, 0.1), Sample(100, 0.2), Sample(150, 0.4))),
        Series({"pod_uid": "u1", "gpu": "1"}, (Sample(100, 0.4), Sample(150, 0.0))),
        Series({"pod": "no-uid"}, (Sample(100, 1.0),)),
    ]
    tokens = [Series({"pod_uid": "u1"}, (Sample(95, 10), Sample(100, 20), Sample(150, 50), Sample(200, 99)))]
    cpu = [Series({"namespace": "ns", "pod": "w-0", "container": "c"}, (Sample(99.999, 5), Sample(150, 55)))]
    u = build_usage(w, {"util": util, "tokens": tokens, "cpu": cpu}, {("ns", "w-0"): "u1"})
    assert set(u) == {"u1"}
    assert u["u1"].gpus_seen == 2
    # the sample before the window stays: it holds into the window
    assert {g: [s.v for s in v] for g, v in u["u1"].utilization.items()} == {"0": [0.1, 0.2, 0.4], "1": [0.4, 0.0]}
    assert u["u1"].tokens == [Counter(10, (Sample(100, 20), Sample(150, 50)), 95)]  # 200 is outside [100, 200)
    assert u["u1"].cpu_seconds == [Counter(5, (Sample(150, 55),), 99.999)]


def test_a_counter_without_a_sample_in_the_lookback_is_looked_up_when_its_pod_ran_before() -> None:
    w = Window(1000.0, 1030.0)
    tokens = [Series({"pod_uid": "old"}, (Sample(1010, 50),)), Series({"pod_uid": "new"}, (Sample(1010, 5),))]
    started = {"old": 100.0, "new": 1005.0, "gone": 50.0}
    missing = counters_missing_prev(w, {"tokens": tokens}, started, 600.0)
    assert missing["tokens"] == ["gone", "old"]  # "new" started inside: it counts from 0


@pytest.mark.parametrize(
    ("text", "want"),
    [("500m", 0.5), ("8", 8.0), ("16Gi", 16 * 2**30), ("1e3", 1000.0), ("32817852Ki", 32817852 * 1024.0)],
)
def test_parse_quantity(text: str, want: float) -> None:
    assert parse_quantity(text, what="x") == want


def test_bad_quantity_names_the_field() -> None:
    with pytest.raises(ValueError, match="container c cpu"):
        parse_quantity("lots", what="container c cpu")


def test_usage_queries_read_raw_samples_of_the_half_open_window() -> None:
    q = usage_queries(Window(1000.0, 1030.0), 600.0)
    assert q["util"] == ("statictrain_gpu_utilization_ratio[630000ms]", 1029.999)
    assert q["tokens"][0] == "statictrain_train_tokens_total[630000ms]"
    assert q["idle"][0] == 'statictrain_gpu_idle_seconds_total{below="0.05"}[630000ms]'  # the default threshold


def test_the_idle_counter_is_read_at_the_accounting_threshold_only() -> None:
    w = Window(1000.0, 1030.0)
    assert usage_queries(w, 600.0, 0.1)["idle"][0] == 'statictrain_gpu_idle_seconds_total{below="0.1"}[630000ms]'
    q, _ = prev_query("idle", ["u2", "u1"], w, 900.0, 0.1)
    assert q == 'last_over_time(statictrain_gpu_idle_seconds_total{below="0.1",pod_uid=~"u1|u2"}[900000ms])'
    idle = [Series({"pod_uid": "u1", "below": "0.1"}, (Sample(990, 4.0), Sample(1010, 6.0)))]
    assert build_usage(w, {"idle": idle})["u1"].idle_gpu_seconds == [Counter(4.0, (Sample(1010, 6.0),), 990)]


def test_parse_result_drops_nan() -> None:
    s = parse_result([{"metric": {"a": "b"}, "values": [[1, "1"], [2, "NaN"], [3, "+Inf"]]}])
    assert s == [Series({"a": "b"}, (Sample(1.0, 1.0),))]


def test_a_sidecar_restarted_as_a_new_series_adds_a_counter_and_merges_utilization() -> None:
    w = Window(100.0, 200.0)
    old = {"pod_uid": "u1", "job": "worker-a", "gpu_uuid": "GPU-0"}
    new = {"pod_uid": "u1", "job": "worker-b", "gpu_uuid": "GPU-0"}
    tokens = [Series(old, (Sample(90, 10), Sample(120, 30))), Series(new, (Sample(150, 5),))]
    util = [Series(old, (Sample(90, 0.9), Sample(120, 0.9))), Series(new, (Sample(150, 0.0),))]
    u = build_usage(w, {"tokens": tokens, "util": util})["u1"]
    assert u.tokens == [Counter(10, (Sample(120, 30),), 90), Counter(None, (Sample(150, 5),))]
    assert [s.t for s in u.utilization["GPU-0"]] == [90, 120, 150]


@pytest.mark.parametrize("raw", ["abc", "-3", "NaN", "0", "1e400"])
def test_a_malformed_node_price_is_priced_from_the_catalog_and_flags_the_jobs(raw: str) -> None:
    n: dict[str, Any] = {
        "metadata": {"name": "n1", "annotations": {labels.HOURLY_COST: raw}, "labels": {}},
        "status": {"capacity": {labels.GPU_RESOURCE: "8", "cpu": "96", "memory": "1024Gi"}},
    }
    info = node_info(n, lambda facts: Decimal(7))
    assert (info.hourly_usd, info.price_flag) == (Decimal(7), INVALID_PRICE)
    w = Window(0.0, 3600.0)
    p = PodInfo("u1", "p", "ns", "job", "n1", 1, 0.0)
    alloc = allocate(w, [info], [p], {})
    assert INVALID_PRICE in alloc.jobs[("ns", "job")].flags
    assert alloc.jobs[("ns", "job")].usd > 0
