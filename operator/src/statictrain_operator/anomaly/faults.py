"""Training-fault detectors on a job's series: what burns money, judged on the signal that shows it. Pure.

Series are ``(unix seconds, values)`` pairs keyed by the names below (``SERIES``), each up to ``now``.

- Stalled (hang): no step for ``max(hang_min_s, hang_steps x expected step)`` and GPU power fell
  below ``hang_power_drop`` of its level while steps ran; the GPUs are not idle. Utilization is
  never the evidence: a hung NCCL collective reads ~100 %.
- Straggler: the same rank's local step seconds exceed ``straggler_ratio`` x the median of the
  other ranks in most of the last ``recent`` distinct samples.
- IdleGPU: after training started, mean utilization below ``idle_utilization`` over the last
  ``idle_window_s`` while device memory stays allocated.
- MemoryLeak: device memory grew by ``leak_min_fraction`` of the card over ``leak_window_s``,
  steadily, and at that rate fills it within ``leak_horizon_s``. After a change (``changes``: a commit or
  settings change, a restart) the window starts ``leak_change_settle_s`` after the new process's first
  step: memory that grows while a new process or configuration settles in is that change's (a regression
  if it is slower, judged by the per-commit baseline), a leak is growth that goes on after it.
- LossDiverged: the last ``recent_nonfinite`` losses are NaN/Inf, or the recent median loss is
  ``loss_sigmas`` robust sd above the history's.
- DataStarvation: recent step time >= ``starve_step_ratio`` x the running process's history while
  utilization fell to <= ``starve_util_ratio`` x its history (after a change the new process is its own
  baseline: a slower commit is a regression, ``commits.py``, not starvation).

Warm-ups count from the running process's first step: the first step after the latest change.
Each finding carries the time its episode started (its ``since``), so one episode gets one action.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from statictrain_operator.anomaly.detector import robust_baseline
from statictrain_operator.anomaly.remediation import Finding, FindingKind

__all__ = [
    "DETECTORS",
    "GPU_MEMORY_TOTAL_BYTES",
    "GPU_MEMORY_USED_BYTES",
    "GPU_POWER_WATTS",
    "GPU_UTILIZATION",
    "LOSS",
    "RANK_STEP_SECONDS",
    "SECONDS_SINCE_LAST_STEP",
    "STEP_SECONDS",
    "TRAIN_STEP",
    "FaultSettings",
    "Progress",
    "Series",
    "detect",
    "hang",
    "idle",
    "loss_divergence",
    "memory_leak",
    "progress",
    "restarts",
    "starvation",
    "straggler",
]

Series = tuple[Sequence[float], Sequence[float]]
"""(unix seconds ascending, values)."""

TRAIN_STEP = "train_step"
STEP_SECONDS = "step_seconds"
SECONDS_SINCE_LAST_STEP = "seconds_since_last_step"
GPU_UTILIZATION = "gpu_utilization"
GPU_POWER_WATTS = "gpu_power_watts"
GPU_MEMORY_USED_BYTES = "gpu_memory_used_bytes"
GPU_MEMORY_TOTAL_BYTES = "gpu_memory_total_bytes"
LOSS = "loss"
RANK_STEP_SECONDS = "rank_step_seconds"
"""Prefix: one series per rank, named ``rank_step_seconds.<rank>``."""


@dataclass(frozen=True)
class FaultSettings:
    """Thresholds of the training-fault detectors (one place for their defaults)."""

    hang_min_s: float = 30.0
    """Shortest time without a step that can be a hang (with the power drop as corroboration: a hung collective
    spins at ~100 % utilization and low power; a checkpoint write or a recompile leaves the GPU idle instead)."""
    hang_steps: float = 20.0
    """... or this many expected step times, if longer."""
    hang_power_drop: float = 0.6
    """Hang: median power since the last step below this fraction of the training level (90th percentile
    of the power while steps ran: a slow phase before the hang does not lower it)."""
    straggler_ratio: float = 1.5
    """Straggler: slowest rank's local seconds over the median of the others."""
    straggler_min_s: float = 0.002
    """... and slower by at least this many seconds (timer noise on tiny steps)."""
    recent: int = 5
    """Distinct recent samples judged (straggler, starvation, loss)."""
    idle_utilization: float = 0.05
    """Mean GPU utilization (0..1) below which allocated GPUs are idle."""
    idle_window_s: float = 30.0
    """Idle: utilization averaged over this window."""
    idle_min_memory_bytes: float = 2**30
    """Idle: at least this much device memory still allocated (the GPU is held, not released)."""
    leak_window_s: float = 30.0
    """Memory leak: growth judged over this window."""
    leak_min_fraction: float = 0.02
    """... at least this fraction of the device's memory (or of the used memory when the total is unknown)."""
    leak_horizon_s: float = 3600.0
    """... and at that rate the device is full within this many seconds."""
    leak_steady: float = 0.6
    """... with at least this fraction of the window's changes being increases (a trend, not one jump)."""
    leak_change_settle_s: float = 60.0
    """Memory leak after a change: growth in this many seconds after the new process's first step is the
    change's (a new configuration's footprint: an fp32 run was seen to add 6 GiB over 30 s)."""
    warmup_s: float = 10.0
    """Memory, utilization and straggler samples in the first seconds after the first step are ignored."""
    recent_nonfinite: int = 2
    """Loss: this many latest samples NaN/Inf is a divergence."""
    loss_sigmas: float = 10.0
    """Loss: recent median this many robust sd above the history's median is a divergence."""
    starve_step_ratio: float = 1.3
    """Starvation: recent step time over the history's median."""
    starve_util_ratio: float = 0.75
    """Starvation: recent utilization at most this fraction of the history's."""
    min_history: int = 10
    """Fewest history samples for a baseline (starvation, loss, hang power)."""


def _utc(t: float) -> datetime:
    return datetime.fromtimestamp(t, tz=UTC)


def _finite(s: Series | None, start: float = -math.inf, end: float = math.inf) -> tuple[list[float], list[float]]:
    if s is None:
        return [], []
    pairs = [(t, v) for t, v in zip(s[0], s[1], strict=True) if start <= t <= end and math.isfinite(v)]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _distinct(ts: Sequence[float], vs: Sequence[float]) -> tuple[list[float], list[float]]:
    """Drop samples equal to the one before (a gauge repeated between steps is one observation)."""
    out_t: list[float] = []
    out_v: list[float] = []
    for t, v in zip(ts, vs, strict=True):
        if not out_v or v != out_v[-1]:
            out_t.append(t)
            out_v.append(v)
    return out_t, out_v


@dataclass(frozen=True)
class Progress:
    """When the job last made a step, since when it has stepped at all, and since when the running process has."""

    first_step: float | None
    last_step: float | None
    expected_step_s: float
    process_first_step: float | None = None
    """The first step after the latest change (``first_step`` when nothing changed)."""
    after_change: bool = False
    """Whether the running process started after a change (not at the job's start)."""


def restarts(series: Mapping[str, Series], now: float) -> list[float]:
    """Times the step counter went down: the trainer started again (a restart, new settings, a new commit)."""
    ts, vs = _finite(series.get(TRAIN_STEP), end=now)
    return [ts[i] for i in range(1, len(vs)) if vs[i] < vs[i - 1]]


def progress(series: Mapping[str, Series], now: float, changes: Sequence[float] = ()) -> Progress:
    """First and last step times from ``train_step`` (changes) or, failing that, ``seconds_since_last_step``
    (drops) or the finite samples of ``step_seconds``; ``changes``: when the commit, settings or process
    changed (the process's first step is the first one after the latest of them)."""
    ts, vs = _finite(series.get(TRAIN_STEP), end=now)
    steps_at = [ts[i] for i in range(1, len(vs)) if vs[i] != vs[i - 1]]
    if TRAIN_STEP not in series:
        st, sv = _finite(series.get(SECONDS_SINCE_LAST_STEP), end=now)
        steps_at = [st[i] - sv[i] for i in range(1, len(sv)) if sv[i] < sv[i - 1]]
        if steps_at:
            steps_at.append(st[-1] - sv[-1])
    step_t, steps = _finite(series.get(STEP_SECONDS), end=now)
    if not steps_at:  # only a step-time series (NaN where no step ran): its samples are progress
        steps_at = list(step_t)
    first, last = (steps_at[0], steps_at[-1]) if steps_at else (None, None)
    latest = max((c for c in changes if c <= now), default=None)
    process_first = first if latest is None else next((t for t in steps_at if t > latest), None)
    expected = statistics.median(steps) if steps else 0.0
    return Progress(first, last, expected, process_first, latest is not None)


def hang(series: Mapping[str, Series], now: float, p: Progress, s: FaultSettings) -> Finding | None:
    if p.last_step is None or p.first_step is None:
        return None
    silent = now - p.last_step
    limit = max(s.hang_min_s, s.hang_steps * p.expected_step_s)
    if silent < limit:
        return None
    _, busy = _finite(series.get(GPU_POWER_WATTS), p.first_step, p.last_step)
    _, quiet = _finite(series.get(GPU_POWER_WATTS), p.last_step + 0.5 * limit, now)
    if len(busy) < s.min_history or not quiet:
        return None
    _, util = _finite(series.get(GPU_UTILIZATION), p.last_step + 0.5 * limit, now)
    if util and statistics.fmean(util) < s.idle_utilization:
        return None  # nothing runs: idle, not hung
    before, after = statistics.quantiles(busy, n=10)[-1], statistics.median(quiet)  # training level: 90th pct
    if after >= s.hang_power_drop * before:
        return None
    util_text = f", utilization {statistics.fmean(util):.0%}" if util else ""
    return Finding(
        FindingKind.STALLED,
        TRAIN_STEP,
        _utc(p.last_step),
        f"no step for {silent:.0f} s (limit {limit:.0f} s); GPU power {after:.0f} W vs {before:.0f} W "
        f"while training{util_text}: hung",
    )


def straggler(series: Mapping[str, Series], now: float, p: Progress, s: FaultSettings) -> Finding | None:
    if p.first_step is None:
        return None
    ranks: dict[str, tuple[list[float], list[float]]] = {}
    for name, ser in series.items():
        if name.startswith(RANK_STEP_SECONDS + "."):
            ranks[name.split(".", 1)[1]] = _distinct(*_finite(ser, p.first_step + s.warmup_s, now))
    if len(ranks) < 2:
        return None
    # Align on the sample times of the rank with the fewest distinct samples (one sample per step record).
    times = sorted({t for ts, _ in ranks.values() for t in ts})[-4 * s.recent :]
    slow: list[tuple[float, str, float]] = []
    for t in times:
        latest = {}
        for r, (ts, vs) in ranks.items():
            idx = [i for i, ti in enumerate(ts) if ti <= t]
            if idx:
                latest[r] = vs[idx[-1]]
        if len(latest) < 2:
            continue
        worst = max(latest, key=lambda r: latest[r])
        others = statistics.median(v for r, v in latest.items() if r != worst)
        if latest[worst] >= s.straggler_ratio * others and latest[worst] - others >= s.straggler_min_s:
            slow.append((t, worst, latest[worst] / max(others, 1e-12)))
        else:
            slow.append((t, "", 1.0))
    recent = slow[-s.recent :]
    if len(recent) < s.recent:
        return None
    flagged = [x for x in recent if x[1]]
    if len(flagged) * 2 <= len(recent):
        return None
    rank = statistics.mode(x[1] for x in flagged)
    start, misses = slow[-1][0], 0
    for t, r, _ in reversed(slow):  # the episode: back to two samples in a row without this rank slow
        misses = 0 if r == rank else misses + 1
        if misses >= 2:
            break
        if r == rank:
            start = t
    ratio = statistics.median(x[2] for x in flagged if x[1] == rank)
    return Finding(
        FindingKind.STRAGGLER,
        f"{RANK_STEP_SECONDS}.{rank}",
        _utc(start),
        f"rank {rank} takes {ratio:.1f}x the other ranks' local step time (the others wait for it)",
    )


def idle(series: Mapping[str, Series], now: float, p: Progress, s: FaultSettings) -> Finding | None:
    if p.process_first_step is None or now - p.process_first_step < s.warmup_s + s.idle_window_s:
        return None
    ts, util = _finite(series.get(GPU_UTILIZATION), max(now - s.idle_window_s, p.process_first_step + s.warmup_s), now)
    if len(util) < 3 or statistics.fmean(util) >= s.idle_utilization:
        return None
    _, mem = _finite(series.get(GPU_MEMORY_USED_BYTES), now - s.idle_window_s, now)
    if mem and min(mem) < s.idle_min_memory_bytes:
        return None
    all_t, all_u = _finite(series.get(GPU_UTILIZATION), end=now)
    start = ts[0]
    for t, u in zip(reversed(all_t), reversed(all_u), strict=True):
        if u >= s.idle_utilization:
            break
        start = t
    held = f", {max(mem) / 2**30:.1f} GiB held" if mem else ""
    return Finding(
        FindingKind.IDLE_GPU,
        GPU_UTILIZATION,
        _utc(start),
        f"mean GPU utilisation {statistics.fmean(util):.1%} < {s.idle_utilization:.0%} "
        f"over {s.idle_window_s:.0f} s{held}",
    )


def memory_leak(series: Mapping[str, Series], now: float, p: Progress, s: FaultSettings) -> Finding | None:
    if p.process_first_step is None:
        return None
    settle = s.leak_change_settle_s if p.after_change else s.warmup_s
    start = max(now - s.leak_window_s, p.process_first_step + settle)
    ts, mem = _finite(series.get(GPU_MEMORY_USED_BYTES), start, now)
    if len(ts) < 5 or ts[-1] - ts[0] < 0.5 * s.leak_window_s:
        return None
    _, total_v = _finite(series.get(GPU_MEMORY_TOTAL_BYTES), end=now)
    total = total_v[-1] if total_v else None
    grew = mem[-1] - mem[0]
    scale = total if total else max(mem[0], 1.0)
    if grew < s.leak_min_fraction * scale:
        return None
    changes = [b - a for a, b in itertools.pairwise(mem) if b != a]
    if not changes or sum(1 for c in changes if c > 0) < s.leak_steady * len(changes):
        return None
    rate = grew / (ts[-1] - ts[0])
    eta = (total - mem[-1]) / rate if total else None
    if eta is not None and eta > s.leak_horizon_s:
        return None
    until = f"; full in {eta:.0f} s at this rate" if eta is not None else ""
    return Finding(
        FindingKind.MEMORY_LEAK,
        GPU_MEMORY_USED_BYTES,
        _utc(ts[0]),
        f"device memory grew {grew / 2**30:.1f} GiB in {ts[-1] - ts[0]:.0f} s ({rate / 2**20:.0f} MiB/s){until}",
    )


def loss_divergence(series: Mapping[str, Series], now: float, p: Progress, s: FaultSettings) -> Finding | None:
    raw = series.get(LOSS)
    if raw is None:
        return None
    pairs = [(t, v) for t, v in zip(raw[0], raw[1], strict=True) if t <= now]
    k = s.recent_nonfinite
    if len(pairs) >= k and all(not math.isfinite(v) for _, v in pairs[-k:]):
        start = pairs[-1][0]
        for t, v in reversed(pairs):
            if math.isfinite(v):
                break
            start = t
        return Finding(FindingKind.LOSS_DIVERGED, LOSS, _utc(start), "the loss is NaN/Inf: training diverged")
    ts, vs = _distinct(*_finite(raw, end=now))
    if len(vs) < s.min_history + s.recent:
        return None
    hist, recent = vs[: -s.recent], vs[-s.recent :]
    med, sd = robust_baseline(hist, relative_floor=1e-3)
    z = (statistics.median(recent) - med) / sd
    if z < s.loss_sigmas:
        return None
    return Finding(
        FindingKind.LOSS_DIVERGED,
        LOSS,
        _utc(ts[-s.recent]),
        f"loss {statistics.median(recent):.4g} vs {med:.4g} before ({z:+.0f} robust sd): diverging",
    )


def starvation(series: Mapping[str, Series], now: float, p: Progress, s: FaultSettings) -> Finding | None:
    if p.process_first_step is None:  # the running process against itself: another one's steps are no baseline
        return None
    begin = p.process_first_step + s.warmup_s
    st, sv = _finite(series.get(STEP_SECONDS), begin, now)
    if len(sv) < s.min_history + s.recent:
        return None
    hist, recent = sv[: -s.recent], sv[-s.recent :]
    base = statistics.median(hist)
    if statistics.median(recent) < s.starve_step_ratio * base:
        return None
    since = st[-s.recent]
    _, u_hist = _finite(series.get(GPU_UTILIZATION), begin, since)
    _, u_now = _finite(series.get(GPU_UTILIZATION), since, now)
    if len(u_hist) < s.min_history or not u_now:
        return None
    before, after = statistics.fmean(u_hist), statistics.fmean(u_now)
    if after > s.starve_util_ratio * before or after < s.idle_utilization:
        return None
    return Finding(
        FindingKind.DATA_STARVATION,
        STEP_SECONDS,
        _utc(since),
        f"step time {statistics.median(recent):.3g} s vs {base:.3g} s while GPU utilisation fell "
        f"{before:.0%} -> {after:.0%}: the GPUs wait for input",
    )


DETECTORS = (hang, straggler, idle, memory_leak, loss_divergence, starvation)


def detect(
    series: Mapping[str, Series], now: float, settings: FaultSettings, changes: Sequence[float] = ()
) -> list[Finding]:
    """Every training-fault finding at ``now``; ``changes``: times the commit or settings changed (restarts
    of the trainer are found in ``train_step`` and added)."""
    p = progress(series, now, [*changes, *restarts(series, now)])
    out = []
    for rule in DETECTORS:
        found = rule(series, now, p, settings)
        if found is not None:
            out.append(found)
    return out
