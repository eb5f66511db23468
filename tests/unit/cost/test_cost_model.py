"""Cost math tables: UID keying, counter resets, scrape gaps, window clamping, invariant."""

from __future__ import annotations

import itertools
import random
from decimal import Decimal

import pytest
from statictrain.cost import (
    JobTotals,
    NodeInfo,
    PodInfo,
    PodUsage,
    Sample,
    Window,
    allocate,
    fold_job,
    overlap_seconds,
)
from statictrain.counters import Counter, increase
from statictrain.invariants import check

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
    a = allocate(W, [NODE], [pod("u1", gpus=1)], {"u1": PodUsage(utilization={"a": [], "b": []})})
    assert a.pods[0].gpus == 2 and "usage-above-request" in a.pods[0].flags
    b = allocate(W, [NODE], [pod("u1", gpus=4)], {"u1": PodUsage(utilization={"a": [], "b": []})})
    assert b.pods[0].gpus == 4


def test_idle_share_from_utilization_and_gaps_are_not_idle() -> None:
    util = flat(0.0, 1000.0, 1900.0) + flat(0.9, 1900.0, 3700.0)  # then nothing for the last 900 s
    a = allocate(W, [NODE], [pod("u1")], {"u1": PodUsage(utilization={"0": util})}, max_gap=30.0)
    pc = a.pods[0]
    assert pc.idle_usd == Decimal(1)  # 900 s of 3600 s at 0 utilization
    # the last sample (t=3690) stands for at most max_gap=30 s: 4600 - 3720 s are uncovered
    assert pc.gap_seconds == pytest.approx(880.0)
    assert "utilization-gaps" in pc.flags


def test_idle_is_judged_per_gpu_and_silent_gpus_are_gaps() -> None:
    busy, idle = flat(0.95, 1000.0, 4600.0), flat(0.0, 1000.0, 4600.0)
    two = PodUsage(utilization={"gpu-a": busy, "gpu-b": idle})
    a = allocate(W, [NODE], [pod("u1", gpus=2)], {"u1": two})
    assert a.pods[0].idle_usd == Decimal(4)  # half of 2 GPU-hours at 4 $/GPU-h
    assert a.pods[0].gap_seconds == 0
    one_of_four = PodUsage(utilization={"gpu-a": idle})
    b = allocate(W, [NODE], [pod("u1", gpus=4)], {"u1": one_of_four})
    assert b.pods[0].idle_usd == Decimal(4)  # 1 of 4 GPUs idle: a quarter of 16 $
    assert b.pods[0].gap_seconds == 3600 * 3 / 4


def test_idle_from_the_sidecars_counter_is_its_increase_whatever_the_samples_say() -> None:
    """The counter (GPU-seconds below the threshold, summed over the pod's GPUs) wins over utilization
    samples that placed a stall's end a scrape late; windows tile it: two half-hours give the hour's idle."""
    late = flat(0.0, 1000.0, 1960.0) + flat(0.9, 1960.0, 4600.0)  # samples: 960 s idle on each GPU
    counted = Counter(100.0, (Sample(1500.0, 1000.0), Sample(1900.0, 1900.0), Sample(4000.0, 1900.0)), 990.0)
    usage = {"u1": PodUsage(utilization={"a": late, "b": late}, idle_gpu_seconds=[counted])}
    a = allocate(W, [NODE], [pod("u1", gpus=2)], usage)
    assert a.pods[0].idle_usd == Decimal(2)  # 1800 GPU-s of 7200: a quarter of 2 GPUs x 4 $/GPU-h
    halves = [Window(1000.0, 2800.0), Window(2800.0, 4600.0)]
    split = [Counter(100.0, counted.samples[:2], 990.0), Counter(1900.0, counted.samples[2:], 1900.0)]
    parts = [allocate(w, [NODE], [pod("u1", gpus=2)], {"u1": PodUsage(idle_gpu_seconds=[c])}) for w, c in zip(
        halves, split, strict=True)]
    assert sum((p.pods[0].idle_usd for p in parts), Decimal(0)) == Decimal(2)


def test_idle_counted_during_a_scrape_gap_counts_in_full_in_the_window_its_next_sample_lands_in() -> None:
    """Prometheus misses 8 s of a stall (seen in the oracle: capping each window at its runtime lost 6 s of
    the 20 s): no sample in the first 2 s window, then one holding the whole 3.6 s; the two windows add up."""
    windows = [Window(1000.0, 1002.0), Window(1002.0, 1004.0)]
    counters = [Counter(0.0, (), 999.9), Counter(0.0, (Sample(1003.5, 3.6),), 999.9)]
    parts = [
        allocate(w, [NODE], [pod("u1", gpus=1)], {"u1": PodUsage(idle_gpu_seconds=[c])})
        for w, c in zip(windows, counters, strict=True)
    ]
    assert sum((p.pods[0].idle_usd for p in parts), Decimal(0)) == Decimal("0.004")  # 3.6 GPU-s at 4 $/GPU-h


def test_no_utilization_data_is_all_gap_not_idle() -> None:
    a = allocate(W, [NODE], [pod("u1")])
    assert a.pods[0].idle_usd == 0 and a.pods[0].gap_seconds == 3600.0


def test_pod_on_unknown_node_is_reported_not_priced() -> None:
    a = allocate(W, [NODE], [pod("u1", node="ghost"), pod("u2", node=None, start=None)])
    assert a.unpriced_pods == ("ns/w-0",) and not a.pods


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
    assert abs(a.jobs_usd + a.idle_usd - a.node_usd) < Decimal("1e-9")
    assert all(not n.overallocated for n in a.nodes)
    assert all(c.ok for c in check(a))


# ----------------------------------------------------------------------------- counting from raw samples


def counter_in(samples: list[Sample], window: Window) -> Counter:
    """What one window sees of a counter series (as inputs.py builds it from Prometheus)."""
    before = [s for s in samples if s.t < window.start]
    inside = tuple(s for s in samples if window.start <= s.t < window.end)
    return Counter(before[-1].v if before else None, inside)


@pytest.mark.parametrize("seed", range(5))
def test_counter_increases_over_windows_that_tile_sum_to_the_exact_total(seed: int) -> None:
    """Any cut of [0, 1000) into windows gives the series' true total, resets and a late start included."""
    rng = random.Random(seed)
    samples: list[Sample] = []
    v = total = 0.0
    for t in range(37, 1000, 7):  # the series starts at t=37 with a value already above 0
        if rng.random() < 0.03:
            v = 0.0  # process restart
        step = rng.choice([0.0, 1.0, 2.5, 10.0])
        v += step
        total += step
        samples.append(Sample(float(t), v))
    cuts = sorted({0.0, 1000.0, *(rng.uniform(0, 1000) for _ in range(rng.randint(1, 40)))})
    got = sum(increase(counter_in(samples, Window(a, b))).value for a, b in itertools.pairwise(cuts))
    assert got == pytest.approx(total)


def test_new_series_counts_from_zero_and_reset_counts_the_new_value() -> None:
    assert increase(Counter(None, (Sample(5, 30.0), Sample(6, 40.0)))).value == 40.0
    got = increase(Counter(100.0, (Sample(5, 110.0), Sample(6, 4.0), Sample(7, 9.0))))
    assert (got.value, got.resets) == (10.0 + 4.0 + 5.0, 1)


# ----------------------------------------------------------------------------- whole pod, OpenCost style

CPU_NODE = NodeInfo("cpu-a", Decimal("0.5"), 0, cpu=8.0, memory_gib=32.0)
GPU_NODE = NodeInfo("gpu-c", Decimal("10"), 1, cpu=8.0, memory_gib=32.0)


def test_node_price_split_adds_up_and_follows_the_weights() -> None:
    p = GPU_NODE.prices
    assert abs(p.gpu * 1 + p.cpu * 8 + p.memory * 32 - Decimal(10)) < Decimal("1e-20")
    assert abs(p.cpu / p.memory - Decimal("0.031611") / Decimal("0.004237")) < Decimal("1e-20")
    q = CPU_NODE.prices
    assert abs(q.cpu * 8 + q.memory * 32 - Decimal("0.5")) < Decimal("1e-20")


def test_whole_pod_is_priced_gpu_cpu_memory_with_max_of_request_and_usage() -> None:
    p = PodInfo("u1", "w-0", "ns", "j", "gpu-c", 1, 1000.0, cpu_requested=2.0, memory_requested_gib=8.0)
    # uses 4 cores on average (14400 CPU-seconds in the hour) and 4 GiB (below its request)
    cpu = Counter(1000.0, (Sample(2000.0, 5000.0), Sample(4590.0, 15400.0)))
    mem = [Sample(900.0, 4 * 1024**3)]
    a = allocate(W, [GPU_NODE], [p], {"u1": PodUsage(cpu_seconds=[cpu], memory_bytes=[mem])}, max_gap=1e9)
    (pc,) = a.pods
    prices = GPU_NODE.prices
    assert (pc.gpus, pc.cpu, pc.memory_gib) == (1, 4.0, 8.0)
    assert pc.cpu_usd == (4 * prices.cpu).quantize(Decimal("1e-12"))
    assert pc.memory_usd == (8 * prices.memory).quantize(Decimal("1e-12"))
    assert pc.usd == pc.gpu_usd + pc.cpu_usd + pc.memory_usd
    node = a.nodes[0]
    assert abs(node.allocated_usd + node.idle_usd - node.usd) < Decimal("1e-9")
    assert node.idle_by_resource["gpu"] == 0 and node.idle_by_resource["cpu"] > 0


def test_cpu_only_node_and_pod_are_priced() -> None:
    p = PodInfo("u1", "prep", "ns", "j", "cpu-a", 0, 1000.0, cpu_requested=4.0, memory_requested_gib=16.0)
    a = allocate(W, [CPU_NODE], [p])
    assert a.pods[0].usd == Decimal("0.25")  # half the node's CPU and memory for an hour
    assert a.node_usd == Decimal("0.5") and a.idle_usd == Decimal("0.25")
    assert all(c.ok for c in check(a))


def test_invariants_fail_on_overallocation_and_unpriced_pods() -> None:
    pods = [pod(f"u{i}", name=f"w-{i}", gpus=3) for i in range(3)] + [pod("x", name="lost", node="ghost")]
    checks = {c.name: c for c in check(allocate(W, [NODE], pods))}
    assert not checks["allocation-within-capacity"].ok
    assert checks["allocation-within-capacity"].failures == ("gpu-a: gpu 9 > 8",)
    assert not checks["every-pod-priced"].ok and "ns/lost" in checks["every-pod-priced"].failures[0]
    assert not checks["jobs-plus-idle-equals-node"].ok  # 9 GPUs billed on an 8-GPU node: idle cannot be negative
    sequential = [pod("a", gpus=8, end=2000.0), pod("b", name="w-1", gpus=8, start=2000.0)]
    assert all(c.ok for c in check(allocate(W, [NODE], sequential)))


# ----------------------------------------------------------------------------- jobs: DDP, progress, lost work


def ddp_usage(steps_a: list[float], steps_b: list[float], tokens_per_step: float) -> dict[str, PodUsage]:
    out = {}
    for uid, steps in (("r0", steps_a), ("r1", steps_b)):
        samples = tuple(Sample(1000.0 + 10 * i, v) for i, v in enumerate(steps))
        out[uid] = PodUsage(
            steps=[Counter(None, samples)],
            tokens=[Counter(None, tuple(Sample(s.t, s.v * tokens_per_step) for s in samples))],
            step=samples,
        )
    return out


def test_ddp_tokens_sum_over_ranks_steps_once() -> None:
    pods = [
        PodInfo("r0", "j-worker-0", "ns", "j", "gpu-a", 1, 1000.0, rank=0),
        PodInfo("r1", "j-worker-1", "ns", "j", "gpu-a", 1, 1000.0, rank=1),
    ]
    a = allocate(W, [NODE], pods, ddp_usage([10, 20, 300], [10, 20, 300], 256.0), step_marks={("ns", "j"): 0.0})
    job = a.jobs[("ns", "j")]
    assert job.tokens == 2 * 300 * 256  # each rank counts its own tokens
    assert (job.executed_steps, job.steps, job.step_mark) == (300.0, 300.0, 300.0)


def test_restart_loses_steps_priced_at_steady_cost_per_step_whatever_the_restart_took() -> None:
    key = ("ns", "j")
    totals = JobTotals()
    # window 1: steady, 100 steps for 4 $ (1 GPU-hour at 4 $/GPU-h)
    w1 = allocate(W, [NODE], [pod("old")], {"old": steady(0, 100, W)}, step_marks={key: 0.0})
    totals = fold_job(totals, w1.jobs[key])
    assert w1.jobs[key].steady and totals.usd_per_step == Decimal("0.04")
    # window 2: the pod runs to step 150, dies; a new pod resumes from the checkpoint at 120, reaches 130
    w2 = Window(4600.0, 8200.0)
    old = Counter(100.0, (Sample(5000.0, 150.0),))
    new = Counter(None, (Sample(8000.0, 10.0),))
    usage = {
        "old": PodUsage(steps=[old], step=[Sample(4590.0, 100.0), Sample(5000.0, 150.0)]),
        "new": PodUsage(steps=[new], step=[Sample(8000.0, 130.0)]),
    }
    pods = [pod("old", end=5100.0), pod("new", start=7000.0)]
    alloc = allocate(w2, [NODE], pods, usage, step_marks={key: w1.jobs[key].step_mark or 0.0})
    j = alloc.jobs[key]
    assert (j.executed_steps, j.steps) == (60.0, 30.0)
    totals = fold_job(totals, j)
    assert j.lost_steps == 30.0 and j.lost_usd == Decimal("1.2") and "restarted" in j.flags
    # window 3: steady again, nothing more is lost
    w3 = Window(8200.0, 11800.0)
    u3 = {"new": PodUsage(steps=[Counter(10.0, (Sample(9000.0, 40.0),))], step=[Sample(9000.0, 160.0)])}
    j3 = allocate(w3, [NODE], [pod("new", start=7000.0)], u3, step_marks={key: j.step_mark or 0.0}).jobs[key]
    fold_job(totals, j3)
    assert j3.lost_steps == 0 and j3.lost_usd == 0


def steady(s0: int, s1: int, w: Window) -> PodUsage:
    """Stepping all through ``w`` (every sample rises), GPU busy; the sample before ``w`` one interval back."""
    n = 10
    dt = w.seconds / n
    samples = tuple(Sample(w.start + k * dt, s0 + (s1 - s0) * (k + 1) / n) for k in range(n))
    before = Sample(w.start - dt, float(s0))
    return PodUsage(
        steps=[Counter(float(s0), samples, before.t)],
        step=[before, *samples],
        utilization={"0": flat(0.9, w.start - 10, w.end + 10)},
    )


def test_compile_is_priced_in_full_even_when_reported_later_than_it_ran() -> None:
    # 5,400 s of compiling reported inside a 3,600 s window: priced in full at the pod's rate
    u = {"u1": PodUsage(compile_seconds=[Counter(None, (Sample(2000.0, 5400.0),))])}
    a = allocate(W, [NODE], [pod("u1")], u)
    assert a.pods[0].compile_usd == Decimal(6)


def test_ddp_rank_whose_pod_ended_still_counts_in_the_mean() -> None:
    # rank 0 ended before this window; rank 1 makes its last 10 steps here: the job made 5 steps per rank
    w = Window(5000.0, 5100.0)
    r0 = (Sample(4990.0, 100.0),)
    r1 = (Sample(4990.0, 90.0), Sample(5050.0, 100.0))
    pods = [
        PodInfo("r0", "j-worker-0", "ns", "j", "gpu-a", 1, 1000.0, 4995.0, rank=0),
        PodInfo("r1", "j-worker-1", "ns", "j", "gpu-a", 1, 1000.0, rank=1),
    ]
    usage = {
        "r0": PodUsage(steps=[Counter(100.0, (), 4990.0)], step=r0),
        "r1": PodUsage(steps=[Counter(90.0, r1[1:], 4990.0)], step=r1),
    }
    job = allocate(w, [NODE], pods, usage, step_marks={("ns", "j"): 95.0}).jobs[("ns", "j")]
    assert (job.executed_steps, job.steps) == (5.0, 5.0)
