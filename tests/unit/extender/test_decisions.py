from __future__ import annotations

from typing import Any

import pytest
from statictrain.throughput import DEFAULT_RELATIVE_THROUGHPUT
from statictrain_extender.decisions import UNKNOWN_NODE, BadRequestError, filter_result, prioritize_result
from statictrain_extender.policy import (
    CAPACITY_TYPES_ANNOTATION,
    GPU_MODELS_ANNOTATION,
    MAX_HOURLY_ANNOTATION,
)
from statictrain_extender.scoring import Weights
from statictrain_extender.state import ClusterState

from .builders import node_obj, pod_obj

NAMES = frozenset({"statictrain-scheduler"})


def cluster() -> ClusterState:
    state = ClusterState()
    state.replace_nodes(
        [
            node_obj("h100-spot", "NVIDIA-H100-80GB-HBM3", 8, "spot", "40.00"),
            node_obj("h100-od", "NVIDIA-H100-80GB-HBM3", 8, "on-demand", "98.32"),
            node_obj("a100-od", "NVIDIA-A100-SXM4-40GB", 8, "on-demand", "32.77"),
            node_obj("t4-od", "Tesla-T4", 4, "on-demand", "3.91"),
        ]
    )
    return state


ALL = ["h100-spot", "h100-od", "a100-od", "t4-od"]


@pytest.mark.parametrize(
    ("annotations", "want_pass", "want_unresolvable"),
    [
        pytest.param({}, ALL, [], id="no-policy-all-pass"),
        pytest.param({CAPACITY_TYPES_ANNOTATION: "spot"}, ["h100-spot"], ["h100-od", "a100-od", "t4-od"], id="spot"),
        pytest.param({GPU_MODELS_ANNOTATION: "A100,T4"}, ["a100-od", "t4-od"], ["h100-spot", "h100-od"], id="models"),
        pytest.param({MAX_HOURLY_ANNOTATION: "40"}, ["h100-spot", "a100-od", "t4-od"], ["h100-od"], id="max-hourly"),
        pytest.param(
            {CAPACITY_TYPES_ANNOTATION: "on-demand", GPU_MODELS_ANNOTATION: "H100"},
            ["h100-od"],
            ["h100-spot", "a100-od", "t4-od"],
            id="combined",
        ),
    ],
)
def test_filter_policy(annotations: dict[str, str], want_pass: list[str], want_unresolvable: list[str]) -> None:
    got = filter_result(cluster(), {"Pod": pod_obj(annotations=annotations), "NodeNames": ALL}, NAMES)
    assert got["NodeNames"] == want_pass
    assert sorted(got["FailedAndUnresolvableNodes"]) == sorted(want_unresolvable)
    assert got["Error"] == ""


def test_filter_unknown_node_fails_resolvably_only_when_policy_needs_facts() -> None:
    body = {
        "Pod": pod_obj(annotations={CAPACITY_TYPES_ANNOTATION: "spot"}),
        "NodeNames": ["ghost", "h100-spot"],
    }
    got = filter_result(cluster(), body, NAMES)
    assert got["NodeNames"] == ["h100-spot"]
    assert got["FailedNodes"] == {"ghost": UNKNOWN_NODE}
    free = filter_result(cluster(), {"Pod": pod_obj(), "NodeNames": ["ghost"]}, NAMES)
    assert free["NodeNames"] == ["ghost"]


def test_filter_unmanaged_pod_is_neutral() -> None:
    body = {"Pod": pod_obj(scheduler="default-scheduler", annotations={CAPACITY_TYPES_ANNOTATION: "spot"})}
    got = filter_result(cluster(), {**body, "NodeNames": ALL}, NAMES)
    assert got["NodeNames"] == ALL


def test_filter_bad_policy_reports_fix_on_every_node() -> None:
    body = {"Pod": pod_obj(annotations={MAX_HOURLY_ANNOTATION: "lots"}), "NodeNames": ["a100-od", "t4-od"]}
    got = filter_result(cluster(), body, NAMES)
    assert got["NodeNames"] == []
    assert set(got["FailedAndUnresolvableNodes"]) == {"a100-od", "t4-od"}
    assert "positive decimal" in got["FailedAndUnresolvableNodes"]["t4-od"]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param([], id="list"),
        pytest.param("x", id="string"),
        pytest.param({}, id="empty-object"),
        pytest.param({"Pod": 3, "NodeNames": []}, id="pod-not-object"),
        pytest.param({"Pod": {}, "NodeNames": "n1"}, id="names-not-list"),
        pytest.param({"Pod": {}, "NodeNames": [1, 2]}, id="names-not-strings"),
        pytest.param({"Pod": {}, "Nodes": {"items": "x"}}, id="nodes-items-not-list"),
    ],
)
def test_malformed_requests(body: Any) -> None:
    got = filter_result(cluster(), body, NAMES)
    assert got["Error"]
    with pytest.raises(BadRequestError):
        prioritize_result(cluster(), body, NAMES, Weights())


def test_filter_accepts_inline_nodes_when_not_node_cache_capable() -> None:
    body = {
        "Pod": pod_obj(annotations={CAPACITY_TYPES_ANNOTATION: "spot"}),
        "Nodes": {"items": [node_obj("inline-spot", capacity="spot"), node_obj("inline-od")]},
        "NodeNames": None,
    }
    got = filter_result(ClusterState(), body, NAMES)
    assert got["NodeNames"] == ["inline-spot"]


def test_prioritize_ranks_cheapest_work_first_and_keeps_order() -> None:
    got = prioritize_result(cluster(), {"Pod": pod_obj(gpus=8), "NodeNames": ALL}, NAMES, Weights(cost=1, pack=0))
    assert [h["Host"] for h in got] == ALL
    scores = {h["Host"]: h["Score"] for h in got}
    # cost score = cheapest $/work over this node's; $/work = GPU-hour price / table figure
    state = cluster()
    per_work = {n: state.nodes[n].gpu_hourly_usd / DEFAULT_RELATIVE_THROUGHPUT[state.nodes[n].gpu_family] for n in ALL}
    cheapest = min(per_work.values())
    for name in ALL:
        assert scores[name] == round(10 * cheapest / per_work[name])


def test_prioritize_uses_measured_step_times() -> None:
    state = cluster()
    # this job runs only 1.1x faster on H100 than on A100
    state.set_step_seconds({("team", "gpt2"): {"A100": 1.1, "H100": 1.0}})
    body = {"Pod": pod_obj(gpus=8), "NodeNames": ["h100-od", "a100-od"]}
    scores = {h["Host"]: h["Score"] for h in prioritize_result(state, body, NAMES, Weights(cost=1, pack=0))}
    assert scores["a100-od"] > scores["h100-od"]
    other = {"Pod": pod_obj(gpus=8, job="other"), "NodeNames": ["h100-od", "a100-od"]}
    default = {h["Host"]: h["Score"] for h in prioritize_result(state, other, NAMES, Weights(cost=1, pack=0))}
    assert default["h100-od"] > scores["h100-od"]


def test_prioritize_unknown_nodes_and_unmanaged_pods_score_zero() -> None:
    got = prioritize_result(cluster(), {"Pod": pod_obj(), "NodeNames": ["ghost", "t4-od"]}, NAMES, Weights())
    assert got[0] == {"Host": "ghost", "Score": 0}
    neutral = prioritize_result(
        cluster(), {"Pod": pod_obj(scheduler="default-scheduler"), "NodeNames": ALL}, NAMES, Weights()
    )
    assert {h["Score"] for h in neutral} == {0}


def test_prioritize_5000_nodes_valid_answer() -> None:
    state = ClusterState()
    names = [f"n{i:04d}" for i in range(5000)]
    state.replace_nodes([node_obj(n, hourly=str(10 + i % 50)) for i, n in enumerate(names)])
    got = prioritize_result(state, {"Pod": pod_obj(), "NodeNames": names}, NAMES, Weights())
    assert len(got) == 5000
    assert all(0 <= h["Score"] <= 10 for h in got)
    assert {h["Host"] for h in got if h["Score"] == max(x["Score"] for x in got)} >= {"n0000", "n0050"}


def test_state_tracks_gpu_allocations_by_pod_uid() -> None:
    state = cluster()
    state.replace_pods([pod_obj(gpus=2, uid="a", node="a100-od", phase="Running")])
    state.upsert_pod(pod_obj(gpus=3, uid="b", node="a100-od", phase="Running"))
    state.upsert_pod(pod_obj(gpus=3, uid="b", node="a100-od", phase="Running"))  # same pod again: no double count
    assert state.used_gpu_milli == {"a100-od": 5000}
    state.upsert_pod(pod_obj(gpus=3, uid="b", node="a100-od", phase="Succeeded"))
    assert state.used_gpu_milli == {"a100-od": 2000}
    state.delete_pod("a")
    state.delete_pod("never-seen")
    assert state.used_gpu_milli == {}


def test_uniform_throughput_pods_pick_cheapest_gpu_hour() -> None:
    body = {"Pod": pod_obj(annotations={"statictrain.io/gpu-throughput": "uniform"}), "NodeNames": ALL}
    scores = {h["Host"]: h["Score"] for h in prioritize_result(cluster(), body, NAMES, Weights(cost=1, pack=0))}
    # per GPU-hour: t4 0.98, h100-spot 5.0, a100 4.10, h100-od 12.29
    assert scores["t4-od"] == 10
    assert scores["t4-od"] > scores["a100-od"] >= scores["h100-spot"] > scores["h100-od"]


def test_bad_throughput_mode_is_reported() -> None:
    body = {"Pod": pod_obj(annotations={"statictrain.io/gpu-throughput": "fast"}), "NodeNames": ["t4-od"]}
    got = filter_result(cluster(), body, NAMES)
    assert "model or uniform" in got["FailedAndUnresolvableNodes"]["t4-od"]
