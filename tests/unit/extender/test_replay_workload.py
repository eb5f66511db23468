import math

import pytest
from statictrain_extender.replay.arms import Arm, scheduler_config, standard_arms
from statictrain_extender.replay.trace import TraceNode, TracePod, parse_pods
from statictrain_extender.replay.workload import (
    compression_for,
    demand_share,
    eligible_pods,
    stratified_nodes,
    tasks_for,
)
from statictrain_extender.replay.workreport import NodeFacts, Placement, arm_figures, quantile
from statictrain_extender.scoring import Weights


def pod(
    name: str,
    created: int,
    scheduled: int | None,
    deleted: int,
    *,
    milli: int = 1000,
    qos: str = "BE",
    phase: str = "Succeeded",
    gpus: int = 1,
) -> TracePod:
    return TracePod(name, 1000, 1024, gpus, milli, created, deleted, scheduled, qos, phase)


def test_eligible_pods_counts_what_it_leaves_out() -> None:
    skipped: dict[str, int] = {}
    got = eligible_pods(
        [pod("a", 0, 5, 10), pod("cpu", 0, 5, 10, gpus=0, milli=0), pod("p", 0, None, 10, phase="Pending")], skipped
    )
    assert [p.name for p in got] == ["a"]
    assert skipped == {"no GPU requested": 1, "never scheduled in the trace": 1}


def test_bad_rows_are_skipped_and_counted_by_reason() -> None:
    header = (
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
    )
    rows = [
        "openb-pod-1,1000,100,1,500,,BE,Succeeded,10,20,12",
        "openb-pod-2,1000,100,1,500,,BE,Succeeded,10,5,",  # deleted before created
        "openb-pod-3,1000,100,1,0,,BE,Succeeded,10,20,12",  # GPU pod without a share
        "openb-pod-4,1000,100,1,500,,BE,Succeeded,10,20,30",  # scheduled after deletion
        "openb-pod-1,1000,100,1,500,,BE,Succeeded,10,20,12",  # twice
    ]
    skipped: dict[str, int] = {}
    got = parse_pods(header + "\n".join(rows) + "\n", "p.csv", skipped=skipped)
    assert [p.name for p in got] == ["openb-pod-1"]
    assert sum(skipped.values()) == 4
    assert len(skipped) == 4


def test_tasks_compress_arrivals_prefill_and_censor_the_trace_end() -> None:
    pods = [
        pod("early", 0, 0, 1000),  # arrives at -100/k... still running at the start when k=10
        pod("gone", 0, 0, 50),  # done before the segment starts
        pod("late", 2000, 2000, 2100),
        pod("svc", 1500, 1500, 1600, qos="LS"),
        pod("end", 1200, 1200, 5000),  # deleted at the last trace second: censored
    ]
    tasks = {t.name: t for t in tasks_for(pods, start_s=1000, length_s=200, compression=10)}
    assert set(tasks) == {"early", "late", "svc", "end"}
    early = tasks["early"]
    assert early.prefilled and early.arrive_s == 0 and early.ref_seconds == pytest.approx(1000 - 100)
    assert tasks["late"].arrive_s == pytest.approx(100)
    assert math.isinf(tasks["end"].ref_seconds) and math.isinf(tasks["end"].run_seconds(2.0))
    # work-conserving: twice as fast, half as long; services keep their lifetime
    assert tasks["late"].run_seconds(2.0) == pytest.approx(50)
    assert tasks["svc"].run_seconds(2.0) == pytest.approx(100)


def test_compression_reaches_the_target_demand() -> None:
    pods = [pod(f"p{i}", i * 100, i * 100, i * 100 + 50) for i in range(2000)]
    k = compression_for(pods, 0, 1000, 4000, 0.5)
    assert demand_share(tasks_for(pods, 0, 1000, k), 1000, 4000) == pytest.approx(0.5, rel=0.05)


def test_stratified_nodes_keeps_every_stratum() -> None:
    nodes = [TraceNode(f"n{i:03}", 1000, 1000, 8, "G2") for i in range(100)] + [TraceNode("t", 1000, 1000, 2, "T4")]
    got = stratified_nodes(nodes, 0.1)
    assert sum(n.model == "G2" for n in got) == 10
    assert sum(n.model == "T4" for n in got) == 1


def test_scheduler_config_has_one_profile_per_arm_and_one_extender_per_weight_set() -> None:
    arms = standard_arms(Weights(cost=1, pack=1))
    cfg = scheduler_config(arms, {"percentageOfNodesToScore": 100}, {"cost0-pack1": "u1", "cost1-pack1": "u2"}, "k")
    assert [p["schedulerName"] for p in cfg["profiles"]] == [f"finops-{k}" for k in "abcde"]
    assert "percentageOfNodesToScore" not in cfg["profiles"][0]
    assert cfg["profiles"][1]["percentageOfNodesToScore"] == 100
    assert sorted(e["urlPrefix"] for e in cfg["extenders"]) == ["u1", "u2"]
    assert Arm("x", tuned=True).extender_key is None


def test_arm_figures_work_cost_and_pending_by_hand() -> None:
    # Two tasks on one 2-GPU node at $4/h for one trace hour: node paid 1 h, both tasks share it.
    tasks = tasks_for([pod("x", 0, 0, 7200), pod("y", 0, 0, 7200, qos="LS")], start_s=0, length_s=3600, compression=1)
    nodes = {"n": NodeFacts("T4", 2, 4.0, 0.5), "m": NodeFacts("A100", 8, 20.0, 1.0)}
    placed = {"x": Placement("n", 0.0, 2.0), "y": Placement("n", 0.0, 0.0)}
    fig = arm_figures(tasks, placed, nodes, speedup=100, length_s=3600)
    assert fig["cost_usd"] == pytest.approx(4.0)
    assert fig["batch_cost_usd"] == pytest.approx(2.0)
    assert fig["batch_work_a100_gpu_hours"] == pytest.approx(0.5)  # 1 GPU x 0.5 x 1 h
    assert fig["batch_cost_per_work"] == pytest.approx(4.0)
    assert fig["paid_gpu_hours"] == pytest.approx(2.0)
    assert fig["node_hours_by_family"] == {"T4": pytest.approx(1.0)}
    assert fig["pending_p99_s"] == pytest.approx(200.0)  # 2 s at 100x
    assert fig["unscheduled"] == 0


def test_quantile() -> None:
    assert quantile([], 0.99) is None
    assert quantile([float(i) for i in range(1, 101)], 0.99) == 99.0
    assert quantile([1.0, 2.0], 0.5) == 1.0
