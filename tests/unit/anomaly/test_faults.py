"""Training-fault detectors on synthetic 1 Hz series shaped like the sidecar's (pure logic)."""

from __future__ import annotations

import math

import pytest
from statictrain_operator.anomaly import faults as flt
from statictrain_operator.anomaly.remediation import FindingKind
from statictrain_operator.anomaly.settings import AnomalySettings

T0 = 1_800_000_000.0
S = flt.FaultSettings()


def job(seconds: int, fault_at: int | None = None, kind: str = "none") -> dict[str, flt.Series]:
    """A training job sampled every second: steps every 0.05 s until the fault, then the fault's shape."""
    ts = [T0 + i for i in range(seconds)]
    step, power, util, mem, loss, steps_s = [], [], [], [], [], []
    ranks: dict[str, list[float]] = {"0": [], "1": []}
    n = 0.0
    for i in range(seconds):
        faulty = fault_at is not None and i >= fault_at
        wobble = 0.002 * math.sin(i)
        if faulty and kind == "hang":
            power.append(130.0)
            util.append(1.0)
        elif faulty and kind == "idle":
            power.append(90.0)
            util.append(0.0)
        elif faulty and kind == "starve":
            n += 7
            power.append(300.0)
            util.append(0.4)
            steps_s.append(0.15 + wobble)
        else:
            n += 20
            power.append(600.0 + 5 * math.sin(i))
            util.append(0.97)
            steps_s.append(0.05 + wobble)
        step.append(n)
        mem.append(30e9 + (2 * 2**30 * (i - fault_at) if faulty and kind == "leak" else 0.0))
        loss.append(math.nan if faulty and kind == "diverge" else 5.0 - 0.001 * i)
        ranks["0"].append(0.015 + wobble)
        ranks["1"].append((0.06 if faulty and kind == "straggler" else 0.015) + wobble * 1.1)
    step_t = [t for t, _ in zip(ts, step, strict=True)][: len(steps_s)]
    if kind == "starve" and fault_at is not None:
        step_t = ts[: len(steps_s)]
    series: dict[str, flt.Series] = {
        flt.TRAIN_STEP: (ts, step),
        flt.GPU_POWER_WATTS: (ts, power),
        flt.GPU_UTILIZATION: (ts, util),
        flt.GPU_MEMORY_USED_BYTES: (ts, mem),
        flt.GPU_MEMORY_TOTAL_BYTES: (ts, [141e9] * seconds),
        flt.LOSS: (ts, loss),
        flt.STEP_SECONDS: (step_t, steps_s),
        "rank_step_seconds.0": (ts, ranks["0"]),
        "rank_step_seconds.1": (ts, ranks["1"]),
    }
    return series


def kinds(series: dict[str, flt.Series], now: float) -> set[FindingKind]:
    return {f.kind for f in flt.detect(series, now, S)}


def test_clean_run_has_no_finding_at_any_time() -> None:
    series = job(300)
    for t in range(20, 300, 10):
        assert kinds(series, T0 + t) == set(), t


@pytest.mark.parametrize(
    ("kind", "want", "by_s"),
    [
        ("hang", FindingKind.STALLED, 80),
        ("idle", FindingKind.IDLE_GPU, 45),
        ("leak", FindingKind.MEMORY_LEAK, 30),
        ("diverge", FindingKind.LOSS_DIVERGED, 5),
        ("straggler", FindingKind.STRAGGLER, 15),
        ("starve", FindingKind.DATA_STARVATION, 15),
    ],
)
def test_each_fault_is_found_in_time_and_not_before(kind: str, want: FindingKind, by_s: int) -> None:
    series = job(300, fault_at=100, kind=kind)
    assert want not in kinds(series, T0 + 99)
    found = flt.detect(series, T0 + 100 + by_s, S)
    assert want in {f.kind for f in found}
    since = next(f.since for f in found if f.kind is want).timestamp()
    assert T0 + 90 <= since <= T0 + 100 + by_s


def test_hang_is_flagged_while_utilization_reads_full() -> None:
    series = job(300, fault_at=100, kind="hang")
    assert series[flt.GPU_UTILIZATION][1][-1] == 1.0
    (finding,) = [f for f in flt.detect(series, T0 + 200, S) if f.kind is FindingKind.STALLED]
    assert "hung" in finding.message and finding.since.timestamp() < T0 + 100


def test_no_progress_at_full_power_is_not_a_hang() -> None:
    series = job(300, fault_at=100, kind="hang")
    ts, _ = series[flt.GPU_POWER_WATTS]
    series[flt.GPU_POWER_WATTS] = (ts, [600.0] * len(ts))  # a long step still computing
    assert FindingKind.STALLED not in kinds(series, T0 + 200)


def test_idle_gpu_is_not_a_hang() -> None:
    series = job(300, fault_at=100, kind="idle")
    assert kinds(series, T0 + 200) == {FindingKind.IDLE_GPU}


def test_nothing_before_the_first_step() -> None:
    series = job(120)
    ts, _ = series[flt.TRAIN_STEP]
    series[flt.TRAIN_STEP] = (ts, [0.0] * len(ts))
    series[flt.GPU_UTILIZATION] = (ts, [0.0] * len(ts))  # compiling: allocated, no kernels yet
    series[flt.STEP_SECONDS] = ([], [])
    assert kinds(series, T0 + 119) == set()


def test_straggler_names_the_slow_rank() -> None:
    series = job(200, fault_at=100, kind="straggler")
    (f,) = [f for f in flt.detect(series, T0 + 150, S) if f.kind is FindingKind.STRAGGLER]
    assert f.metric == "rank_step_seconds.1"


def test_single_rank_has_no_straggler() -> None:
    series = job(200, fault_at=100, kind="straggler")
    del series["rank_step_seconds.0"]
    assert FindingKind.STRAGGLER not in kinds(series, T0 + 150)


def test_step_time_alone_shows_progress_for_idle() -> None:
    series = job(300, fault_at=100, kind="idle")
    ts, util = series[flt.GPU_UTILIZATION]
    only = {flt.STEP_SECONDS: series[flt.STEP_SECONDS], flt.GPU_UTILIZATION: (ts, util)}
    assert kinds(only, T0 + 150) == {FindingKind.IDLE_GPU}


@pytest.mark.parametrize("step_s", [1.0, 60.0])
def test_idle_and_leak_are_seen_at_the_query_resolution_the_settings_give(step_s: float) -> None:
    """At the chart's default 60 s resolution the 30 s windows held one point: an idle GPU and a leak were never
    found. AnomalySettings.faults widens them to five query steps."""
    s = AnomalySettings(lookback_s=7200, step_s=step_s).faults()
    n = int(7200 / step_s)
    ts = [T0 + i * step_s for i in range(n)]
    steps = (ts, [0.1] * n)
    idle = {flt.GPU_UTILIZATION: (ts, [0.0] * n), flt.STEP_SECONDS: steps}
    gib = 2.0**30  # device of 80 GiB filling at 0.06 GiB/s for the last ~20 min: full in under 3 min
    used = [max(gib, 70 * gib - 0.06 * gib * (ts[-1] - t)) for t in ts]
    leak = {flt.GPU_MEMORY_USED_BYTES: (ts, used), flt.GPU_MEMORY_TOTAL_BYTES: (ts, [80 * gib] * n)}
    leak[flt.STEP_SECONDS] = steps
    assert [f.kind for f in flt.detect(idle, ts[-1], s)] == [FindingKind.IDLE_GPU]
    assert [f.kind for f in flt.detect(leak, ts[-1], s)] == [FindingKind.MEMORY_LEAK]
    blind = flt.FaultSettings()  # the fixed 30 s windows alone
    assert bool(flt.detect(idle, ts[-1], blind)) == bool(flt.detect(leak, ts[-1], blind)) == (step_s == 1.0)


def test_memory_that_grows_as_a_new_process_settles_in_is_not_a_leak_growth_that_goes_on_is() -> None:
    """A new commit (fp32) allocates more as it warms up: that growth is the change's, not a leak."""
    series = job(200)
    ts, _ = series[flt.GPU_MEMORY_USED_BYTES]
    change = T0 + 100  # the new process starts; its memory climbs 6 GiB over 30 s, then stays
    settle = [30e9 + min(max(t - change, 0.0), 30.0) * 0.2 * 2**30 for t in ts]
    series[flt.GPU_MEMORY_USED_BYTES] = (ts, settle)
    steps = series[flt.TRAIN_STEP][1]
    series[flt.TRAIN_STEP] = (ts, [v if t < change else v - steps[100] for t, v in zip(ts, steps, strict=True)])
    for t in range(110, 200, 5):  # the restart is read from the step counter; the commit change is passed in
        assert FindingKind.MEMORY_LEAK not in {f.kind for f in flt.detect(series, T0 + t, S, [change])}, t
    # the same climb without a change behind it (nothing restarted): a leak once it is steady enough
    plain = job(200)
    plain[flt.GPU_MEMORY_USED_BYTES] = (ts, settle)
    assert FindingKind.MEMORY_LEAK in {f.kind for f in flt.detect(plain, T0 + 125, S)}
    # growth that goes on after the change has settled is a leak again
    leaking = [30e9 + max(t - change, 0.0) * 0.5 * 2**30 for t in ts]
    series[flt.GPU_MEMORY_USED_BYTES] = (ts, leaking)
    assert FindingKind.MEMORY_LEAK in {f.kind for f in flt.detect(series, T0 + 190, S, [change])}


def test_warmups_count_from_the_running_process() -> None:
    p = flt.progress(job(100), T0 + 99, [T0 + 50.5])
    assert p.first_step == T0 + 1 and p.process_first_step == T0 + 51
    assert flt.progress(job(100), T0 + 99).process_first_step == T0 + 1


def test_a_slower_new_process_is_not_starvation_starvation_within_it_is() -> None:
    """After a change the new process is its own baseline: slower steps at lower utilization from its first
    step on are the change's (a regression, judged per commit); a slowdown inside the process is starvation."""
    change = 100
    series = job(220, fault_at=change, kind="starve")
    for t in range(change + 5, 220, 5):
        assert FindingKind.DATA_STARVATION not in kinds_after(series, T0 + t, [T0 + change]), t
    # the same job without the change: the slowdown is starvation
    assert FindingKind.DATA_STARVATION in {f.kind for f in flt.detect(series, T0 + change + 15, S)}
    # starvation that begins well after the change is seen against the new process's own steps
    late = job(220, fault_at=170, kind="starve")
    assert FindingKind.DATA_STARVATION in kinds_after(late, T0 + 190, [T0 + change])


def kinds_after(series: dict[str, flt.Series], now: float, changes: list[float]) -> set[FindingKind]:
    return {f.kind for f in flt.detect(series, now, S, changes)}
