"""The extender learns: measured step times reach scoring, sources are visible, gangs are scored whole."""

from __future__ import annotations

from typing import Any

import pytest
from statictrain import envvars
from statictrain.throughput import DEFAULT_RELATIVE_THROUGHPUT as D
from statictrain_extender.decisions import prioritize_result
from statictrain_extender.estimates import EstimateLog, PodNote
from statictrain_extender.kubewatch import event_body
from statictrain_extender.policy import pod_view
from statictrain_extender.scoring import Weights, cost_per_work, gang_cost_per_work
from statictrain_extender.state import ClusterState

from .builders import info, node_obj, pod_obj

NAMES = frozenset({"statictrain-scheduler"})


def gang_pod(uid: str, size: int, node: str | None = None) -> dict[str, Any]:
    pod = pod_obj(gpus=1, uid=uid, node=node, phase="Running" if node else "Pending")
    pod["spec"]["containers"][0]["env"] = [{"name": envvars.WORLD_SIZE, "value": str(size)}]
    return pod


def test_gang_cost_equals_single_pod_cost_when_nothing_is_bound() -> None:
    t4 = info("t4", "T4", gpu_hourly=1.0)
    assert gang_cost_per_work(t4, [], 4, D, 0.1) == pytest.approx(cost_per_work(t4, True, D, 0.1))


def test_gang_pays_for_every_member_at_the_slowest_pace() -> None:
    a100, t4 = info("a", "A100", gpu_hourly=3.0), info("t", "T4", gpu_hourly=1.0)
    # 3 of 4 members on A100s: a T4 would slow all four to T4 pace.
    on_t4 = gang_cost_per_work(t4, [a100] * 3, 4, D, 0.1)
    on_a100 = gang_cost_per_work(a100, [a100] * 3, 4, D, 0.1)
    assert on_t4 == pytest.approx((3 * 3.0 + 1.0) / (4 * D["T4"]))
    assert on_a100 == pytest.approx(3.0 / 1.0)
    assert on_a100 < on_t4
    assert gang_cost_per_work(a100, [info("x", "A100", gpu_hourly=None)], 2, D, 0.1) is None


def test_prioritize_keeps_a_gang_off_slow_cheap_nodes() -> None:
    state = ClusterState()
    # T4 priced so that alone it is the cheapest per unit of work (0.15 $/h / 0.21 < 3.0 $/h / 1.0).
    state.replace_nodes(
        [
            node_obj("a100", "NVIDIA-A100-SXM4-40GB", 8, hourly="24.00"),
            node_obj("t4", "Tesla-T4", 4, hourly="0.60"),
        ]
    )
    body = {"Pod": gang_pod("new", 4), "NodeNames": ["a100", "t4"]}
    alone = {h["Host"]: h["Score"] for h in prioritize_result(state, body, NAMES, Weights(cost=1, pack=0))}
    assert alone["t4"] > alone["a100"]
    for i in range(3):
        state.upsert_pod(gang_pod(f"m{i}", 4, node="a100"))
    joined = {h["Host"]: h["Score"] for h in prioritize_result(state, body, NAMES, Weights(cost=1, pack=0))}
    assert joined["a100"] > joined["t4"]
    for i in range(3):
        state.delete_pod(f"m{i}")
    assert state.gang_nodes(("team", "gpt2"), "new") == []


def test_pod_view_reads_the_gang_size() -> None:
    assert pod_view(gang_pod("u", 8), NAMES).gang_size == 8
    assert pod_view(pod_obj(), NAMES).gang_size == 1


def test_scoring_records_the_source_and_one_event_per_pod() -> None:
    state = ClusterState()
    state.replace_nodes([node_obj("a100"), node_obj("t4", "Tesla-T4", 4, hourly="3.91")])
    body = {"Pod": pod_obj(gpus=1, uid="u1"), "NodeNames": ["a100", "t4"]}
    prioritize_result(state, body, NAMES, Weights())
    assert state.estimates.counts["table"] == 1
    note = state.estimates.notes.get_nowait()
    assert note.uid == "u1" and "default throughput table" in note.message
    state.set_step_seconds({("team", "gpt2"): {"A100": 0.5}})
    prioritize_result(state, body, NAMES, Weights())  # same pod again: counted, no second Event
    assert state.estimates.notes.empty()
    body2 = {"Pod": pod_obj(gpus=1, uid="u2"), "NodeNames": ["a100", "t4"]}
    prioritize_result(state, body2, NAMES, Weights())
    note = state.estimates.notes.get_nowait()
    assert "measured for A100" in note.message and "inferred for T4" in note.message
    assert state.estimates.counts["measured"] + state.estimates.counts["inferred"] == 2
    # Pods that are not a job's are counted but get no Event.
    prioritize_result(state, {"Pod": pod_obj(job=None, uid="u3"), "NodeNames": ["a100"]}, NAMES, Weights())
    assert state.estimates.notes.empty()


def test_estimate_log_is_bounded() -> None:
    log = EstimateLog(max_queued=1, remember=2)
    for i in range(3):
        log.record("table", PodNote("ns", f"p{i}", f"u{i}", "m"))
    assert log.notes.qsize() == 1 and log.dropped == 2


def test_event_body_names_the_pod() -> None:
    body = event_body(PodNote("ns", "p", "u", "x" * 2000), "2026-01-01T00:00:00Z")
    assert body["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": "ns", "uid": "u"}
    assert body["reason"] == "ThroughputEstimate" and len(body["message"]) == 1024
