"""Cost math tables: UID keying, counter resets, scrape gaps, window clamping, invariant."""

from __future__ import annotations

from decimal import Decimal

import pytest
from statictrain.cost import (
    NodeInfo,
    PodInfo,
    PodUsage,
    Sample,
    Window,
    allocate,
    counter_increase,
    global_tokens,
    overlap_seconds,
    step_regressions,
)

W = Window(1000.0, 4600.0)  # one hour
NODE = NodeInfo("gpu-a", Decimal("32"), 8)  # 4 $/GPU-h


def pod(
    uid: str,
    *,
    name: str = "w-0",
    job: str = "j",
    ns: str = "ns",
    gpus: int = 1,
    start: float | None = 1000.0,
    end: float | None = None,
    node: str | None = "gpu-a",
) -> PodInfo:
    return PodInfo(uid, name, ns, job, node, gpus, start, end, commit="c1", team="t")


def flat(v: float, t0: float, t1: float, every: float = 10.0) -> list[Sample]:
    n = int((t1 - t0) / every)
    return [Sample(t0 + i * every, v) for i in range(n)]


@pytest.mark.parametrize(
    ("begin", "finish", "want"),
    [
        (None, None, 0.0),
        (0.0, None, 3600.0),
        (2000.0, 3000.0, 1000.0),
        (0.0, 1000.0, 0.0),
        (4600.0, None, 0.0),
        (4000.0, 9000.0, 600.0),
        (3000.0, 2000.0, 0.0),
    ],
    ids=[
        "never-started",
        "before-and-running",
        "inside",
        "ended-at-start",
        "starts-at-end",
        "clamped-end",
        "inverted",
    ],
)
def test_overlap_clamps_to_half_open_window(begin: float | None, finish: float | None, want: float) -> None:
    assert overlap_seconds(W, begin, finish) == want


def test_window_must_be_forward() -> None:
    with pytest.raises(ValueError, match="after its start"):
        Window(5.0, 5.0)


@pytest.mark.parametrize(
    ("values", "baseline", "want", "resets"),
    [
        ([1, 2, 5], None, 4.0, 0),
        ([1, 2, 5], 0.0, 5.0, 0),
        ([10, 12, 3, 4], None, 2 + 3 + 1, 1),  # Prometheus or process restart: counter reset
        ([5, 0, 0, 2], None, 2.0, 1),
        ([7], None, 0.0, 0),
        ([], 3.0, 0.0, 0),
    ],
    ids=["rising", "with-baseline", "reset", "reset-to-zero", "single", "empty"],
)
def test_counter_increase(values: list[float], baseline: float | None, want: float, resets: int) -> None:
    samples = [Sample(1000.0 + 10 * i, v) for i, v in enumerate(values)]
    base = Sample(990.0, baseline) if baseline is not None else None
    d = counter_increase(samples, baseline=base)
    assert d.value == want and d.resets == resets and d.value >= 0


def test_counter_gaps_flagged() -> None:
    s = [Sample(0, 1), Sample(10, 2), Sample(200, 3)]
    assert counter_increase(s, max_gap=30).gaps == 1


def test_step_regressions() -> None:
    # steps 0..100, restart resumes from checkpoint 80, continues to 120
    s = [Sample(i, v) for i, v in enumerate([0, 50, 100, 80, 120])]
    assert step_regressions(s) == (20, 140)
    assert step_regressions(s, baseline=90) == (20 + 90, 140)


def test_full_hour_one_gpu_costs_per_gpu_price() -> None:
    a = allocate(W, [NODE], [pod("u1")])
    (pc,) = a.pods
    assert pc.usd == Decimal(4) and pc.gpu_seconds == Decimal(3600)
    assert a.node_usd == Decimal(32) and a.idle_usd == Decimal(28)


def test_same_name_recreated_pod_counts_each_uid_once() -> None:
    old = pod("uid-old", start=1000.0, end=2800.0)
    new = pod("uid-new", start=2800.0)
    a = allocate(W, [NODE], [old, new, old])  # old listed twice
    assert [p.pod.uid for p in a.pods] == ["uid-old", "uid-new"]
    assert a.jobs[("ns", "j")].usd == Decimal(4)  # exactly one GPU-hour, not 1.5


def test_allocated_is_max_of_request_and_usage() -> None:
    a = allocate(W, [NODE], [pod("u1", gpus=1)], {"u1": PodUsage(gpus_seen=2)})
    assert a.pods[0].gpus == 2 and "usage-above-request" in a.pods[0].flags
    b = allocate(W, [NODE], [pod("u1", gpus=4)], {"u1": PodUsage(gpus_seen=2)})
    assert b.pods[0].gpus == 4


def test_idle_share_from_utilization_and_gaps_are_not_idle() -> None:
    util = flat(0.0, 1000.0, 1900.0) + flat(0.9, 1900.0, 3700.0)  # then nothing for the last 900 s
    a = allocate(W, [NODE], [pod("u1")], {"u1": PodUsage(gpus_seen=1, utilization={"0": util})}, max_gap=30.0)
    pc = a.pods[0]
    assert pc.idle_usd == Decimal(1)  # 900 s of 3600 s at 0 utilization
    # the last sample (t=3690) stands for at most max_gap=30 s: 4600 - 3720 s are uncovered
    assert pc.gap_seconds == pytest.approx(880.0)
    assert "utilization-gaps" in pc.flags


def test_idle_is_judged_per_gpu_and_silent_gpus_are_gaps() -> None:
    busy, idle = flat(0.95, 1000.0, 4600.0), flat(0.0, 1000.0, 4600.0)
    two = PodUsage(gpus_seen=2, utilization={"gpu-a": busy, "gpu-b": idle})
    a = allocate(W, [NODE], [pod("u1", gpus=2)], {"u1": two})
    assert a.pods[0].idle_usd == Decimal(4)  # half of 2 GPU-hours at 4 $/GPU-h
    assert a.pods[0].gap_seconds == 0
    one_of_four = PodUsage(gpus_seen=1, utilization={"gpu-a": idle})
    b = allocate(W, [NODE], [pod("u1", gpus=4)], {"u1": one_of_four})
    assert b.pods[0].idle_usd == Decimal(4)  # 1 of 4 GPUs idle: a quarter of 16 $
    assert b.pods[0].gap_seconds == 3600 * 3 / 4


def test_no_utilization_data_is_all_gap_not_idle() -> None:
    a = allocate(W, [NODE], [pod("u1")])
    assert a.pods[0].idle_usd == 0 and a.pods[0].gap_seconds == 3600.0


def test_compile_cost_from_compile_seconds_with_reset() -> None:
    # 300 s of compiling, then the container restarts and compiles 60 s more
    comp = [Sample(1100, 100), Sample(1200, 300), Sample(2000, 10), Sample(2100, 60)]
    a = allocate(W, [NODE], [pod("u1")], {"u1": PodUsage(compile_seconds=comp)})
    assert a.pods[0].compile_usd == (Decimal(4) * Decimal(200 + 60) / Decimal(3600)).quantize(Decimal("1e-12"))
    assert "counter-reset" in a.pods[0].flags


def test_lost_work_priced_from_step_regressions() -> None:
    steps = [Sample(1000 + i * 100, v) for i, v in enumerate([0, 40, 80, 60, 100])]
    a = allocate(W, [NODE], [pod("u1")], job_steps={("ns", "j"): steps})
    job = a.jobs[("ns", "j")]
    assert (job.steps, job.lost_steps) == (120, 20)
    assert job.lost_usd == (Decimal(4) * 20 / 140).quantize(Decimal("1e-12"))


def test_tokens_with_baselines_concurrent_replicas_and_a_restart() -> None:
    u = {
        "a": PodUsage(tokens=[Sample(1500, 300), Sample(1600, 500)], tokens_baseline=Sample(1400, 100)),
        "b": PodUsage(tokens=[Sample(1500, 0), Sample(1600, 390)]),  # replica of a: same global count
        "c": PodUsage(tokens=[Sample(3000, 0), Sample(3100, 70)]),  # restarted worker after a and b
    }
    pods = [pod("a", end=2000.0), pod("b", name="w-1", end=2000.0), pod("c", start=2500.0)]
    a = allocate(W, [NODE], pods, u)
    assert a.jobs[("ns", "j")].tokens == 400.0 + 70.0


@pytest.mark.parametrize(
    ("runs", "want"),
    [
        ([], 0.0),
        ([(0, 10, 100.0)], 100.0),
        ([(0, 10, 100.0), (0, 10, 100.0), (2, 8, 90.0)], 100.0),  # 3 replicas report global tokens
        ([(0, 10, 100.0), (10, 20, 40.0)], 140.0),  # restarted worker
        ([(0, 10, 100.0), (5, 20, 120.0), (30, 40, 7.0)], 127.0),
    ],
    ids=["none", "one", "replicas-overlap", "sequential", "mixed"],
)
def test_global_tokens(runs: list[tuple[float, float, float]], want: float) -> None:
    assert global_tokens(runs) == want


def test_pod_on_unknown_node_is_reported_not_priced() -> None:
    a = allocate(W, [NODE], [pod("u1", node="ghost"), pod("u2", node=None, start=None)])
    assert a.unpriced_pods == ("u1",) and not a.pods


def test_node_created_mid_window_and_pod_clamped_to_node_presence() -> None:
    n = NodeInfo("late", Decimal("8"), 2, present_from=2800.0)
    a = allocate(W, [n], [pod("u1", node="late", start=2000.0)])
    assert a.node_usd == Decimal(4) and a.pods[0].usd == Decimal(2)


@pytest.mark.parametrize("n_pods", [0, 1, 5, 8], ids=["empty", "one", "five", "full"])
def test_invariant_jobs_plus_idle_equals_node_cost(n_pods: int) -> None:
    nodes = [NODE, NodeInfo("gpu-b", Decimal("98.32"), 8, present_to=3000.0)]
    pods = [
        pod(
            f"u{i}",
            job=f"j{i % 3}",
            node="gpu-a" if i % 2 else "gpu-b",
            start=1000.0 + 137 * i,
            end=None if i % 3 else 4000.0 - 11 * i,
        )
        for i in range(n_pods)
    ]
    a = allocate(W, nodes, pods)
    assert a.jobs_usd + a.idle_usd == a.node_usd
    assert all(not n.overallocated for n in a.nodes)
