"""API objects and Prometheus series -> cost model inputs."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from statictrain import labels
from statictrain.cost import Sample, Window
from statictrain_operator.cost.inputs import build_job_steps, build_usage, node_info, pod_info, usage_queries
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
        "status": {"capacity": {labels.GPU_RESOURCE: "8"}},
    }
    info = node_info(n, lambda facts: Decimal(999))
    assert info is not None and info.hourly_usd == Decimal("16.5") and info.gpus == 8
    del n["metadata"]["annotations"][labels.HOURLY_COST]
    info2 = node_info(n, lambda facts: Decimal(7))
    assert info2 is not None and info2.hourly_usd == Decimal(7)


def test_build_usage_groups_by_uid_and_splits_baseline() -> None:
    w = Window(100.0, 200.0)
    util = [
        Series({"pod_uid": "u1", "gpu": "0"}, (Sample(100, 0.2), Sample(150, 0.4))),
        Series({"pod_uid": "u1", "gpu": "1"}, (Sample(100, 0.4), Sample(150, 0.0))),
        Series({"pod": "no-uid"}, (Sample(100, 1.0),)),
    ]
    tokens = [Series({"pod_uid": "u1"}, (Sample(95, 10), Sample(100, 20), Sample(150, 50), Sample(200, 99)))]
    u = build_usage(w, {"util": util, "tokens": tokens})
    assert set(u) == {"u1"}
    assert u["u1"].gpus_seen == 2
    assert {g: [s.v for s in v] for g, v in u["u1"].utilization.items()} == {"0": [0.2, 0.4], "1": [0.4, 0.0]}
    assert u["u1"].tokens_baseline == Sample(95, 10)
    assert [s.t for s in u["u1"].tokens] == [100, 150]  # 200 is outside the half-open window


def test_build_job_steps() -> None:
    w = Window(100.0, 200.0)
    steps, base = build_job_steps(
        w, [Series({"namespace": "ns", "job_name": "j"}, (Sample(95, 7), Sample(100, 8), Sample(150, 9)))]
    )
    assert base == {("ns", "j"): 7} and [s.v for s in steps[("ns", "j")]] == [8, 9]


def test_usage_queries_use_the_selector_builder() -> None:
    q = usage_queries()
    assert q["util"] == "statictrain_gpu_utilization_ratio"
    assert q["steps"] == "max by (namespace, job_name) (statictrain_train_step)"


def test_parse_result_drops_nan() -> None:
    s = parse_result({"resultType": "matrix", "result": [{"metric": {"a": "b"}, "values": [[1, "1"], [2, "NaN"]]}]})
    assert s == [Series({"a": "b"}, (Sample(1.0, 1.0),))]
