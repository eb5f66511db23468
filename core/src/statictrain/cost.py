"""The cost model: allocated GPU-seconds x per-GPU price, split into useful work,
idle, compile and lost work, with node cost = job cost + idle cost.

Vocabulary follows OpenCost where it fits:

* a pod's allocated GPUs are ``max(requested, seen in use)``;
* a pod's runtime is the part of ``[started, finished)`` inside the half-open
  window ``[start, end)`` and inside its node's presence;
* cost is keyed by pod UID, so a pod recreated with the same name is a new pod;
* a node's cost is its hourly price x its seconds in the window; its idle cost
  is what no pod was allocated: ``node = sum(pods on it) + idle`` exactly, in
  Decimal arithmetic.

Inside a job's cost, ``idle_usd`` is the share of its allocated GPU time whose
sampled utilization was below a threshold, ``compile_usd`` the GPU time spent
compiling, ``lost_usd`` the cost of steps computed again after a restart
(the step gauge went backwards). Parts of a pod's runtime with no utilization
samples are counted as gaps (flagged), not as idle.

All functions are pure; times are Unix seconds (float), money is Decimal.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import NamedTuple

from statictrain.money import ZERO, to_decimal

__all__ = [
    "Allocation",
    "CounterDelta",
    "JobCost",
    "JobKey",
    "NodeCost",
    "NodeInfo",
    "PodCost",
    "PodInfo",
    "PodUsage",
    "Sample",
    "Window",
    "allocate",
    "counter_increase",
    "global_tokens",
    "overlap_seconds",
    "step_regressions",
]

HOUR = Decimal(3600)
QUANTUM = Decimal("1e-12")
"""Internal money precision: sums of values on this grid are exact, so node = jobs + idle holds exactly."""


@dataclass(frozen=True)
class Window:
    """A half-open time window ``[start, end)`` in Unix seconds."""

    start: float
    end: float

    def __post_init__(self) -> None:
        if not self.end > self.start:
            raise ValueError(f"window end ({self.end}) must be after its start ({self.start})")

    @property
    def seconds(self) -> float:
        return self.end - self.start


def overlap_seconds(window: Window, begin: float | None, finish: float | None) -> float:
    """Seconds of ``[begin, finish)`` inside the window.

    A None ``begin`` means never started (0 s); a None ``finish`` means still running.
    """
    if begin is None:
        return 0.0
    lo = max(window.start, begin)
    hi = min(window.end, finish if finish is not None else window.end)
    return max(0.0, hi - lo)


class Sample(NamedTuple):
    """One sample of a series: Unix time and value (a tuple: cheap to build by the hundred thousand)."""

    t: float
    v: float


@dataclass(frozen=True)
class CounterDelta:
    value: float
    """Increase over the samples, counting a drop as a counter reset (never negative)."""
    resets: int
    gaps: int
    """Intervals between consecutive samples longer than max_gap."""


def counter_increase(
    samples: Sequence[Sample], *, baseline: Sample | None = None, max_gap: float = float("inf")
) -> CounterDelta:
    """Increase of a counter: sum of rises; after a drop (reset) the new value counts from 0.

    ``baseline`` is the last sample before the window, if any, so that the rise
    between it and the first sample in the window is counted.
    """
    pts = sorted(samples, key=lambda s: s.t)
    if baseline is not None:
        pts = [baseline, *pts]
    total = 0.0
    resets = gaps = 0
    for prev, cur in itertools.pairwise(pts):
        if cur.t - prev.t > max_gap:
            gaps += 1
        if cur.v >= prev.v:
            total += cur.v - prev.v
        else:
            resets += 1
            total += max(cur.v, 0.0)
    return CounterDelta(total, resets, gaps)


def step_regressions(samples: Sequence[Sample], *, baseline: float | None = None) -> tuple[int, int]:
    """(steps lost to restarts, steps advanced) from a step gauge.

    A drop from a to b means the steps b..a are computed again: a - b lost.
    """
    lost = advanced = 0
    prev = baseline
    for s in sorted(samples, key=lambda s: s.t):
        v = int(s.v)
        if prev is not None:
            if v < prev:
                lost += int(prev) - v
            else:
                advanced += v - int(prev)
        prev = v
    return lost, advanced


@dataclass(frozen=True)
class NodeInfo:
    name: str
    hourly_usd: Decimal
    gpus: int
    present_from: float | None = None
    """Node creation time; None means present before the window."""
    present_to: float | None = None
    """Node deletion time; None means still present."""

    @property
    def gpu_hourly_usd(self) -> Decimal:
        return self.hourly_usd / max(self.gpus, 1)


@dataclass(frozen=True)
class PodInfo:
    uid: str
    name: str
    namespace: str
    job: str
    node: str | None
    gpus_requested: int
    started: float | None
    finished: float | None = None
    commit: str = ""
    team: str = ""


@dataclass(frozen=True)
class PodUsage:
    """What Prometheus saw of one pod UID inside (and just before) the window."""

    gpus_seen: int = 0
    utilization: Mapping[str, Sequence[Sample]] = field(default_factory=dict)
    """Per GPU of the pod (uuid or index): utilization ratio samples (0..1)."""
    compile_seconds: Sequence[Sample] = ()
    compile_baseline: Sample | None = None
    tokens: Sequence[Sample] = ()
    tokens_baseline: Sample | None = None
    steps: Sequence[Sample] = ()
    """The trainer's global step gauge."""


JobKey = tuple[str, str]
"""(namespace, job name)"""


@dataclass(frozen=True)
class PodCost:
    pod: PodInfo
    gpus: int
    runtime_seconds: float
    gpu_seconds: Decimal
    usd: Decimal
    idle_usd: Decimal
    compile_usd: Decimal
    gap_seconds: float
    tokens: float
    flags: tuple[str, ...] = ()


@dataclass
class JobCost:
    namespace: str
    job: str
    commit: str = ""
    team: str = ""
    usd: Decimal = ZERO
    gpu_seconds: Decimal = ZERO
    idle_usd: Decimal = ZERO
    compile_usd: Decimal = ZERO
    lost_usd: Decimal = ZERO
    tokens: float = 0.0
    steps: int = 0
    lost_steps: int = 0
    pods: set[str] = field(default_factory=set)
    flags: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class NodeCost:
    name: str
    usd: Decimal
    allocated_usd: Decimal
    idle_usd: Decimal
    overallocated: bool


@dataclass(frozen=True)
class Allocation:
    window: Window
    pods: tuple[PodCost, ...]
    jobs: Mapping[JobKey, JobCost]
    nodes: tuple[NodeCost, ...]
    unpriced_pods: tuple[str, ...]
    """UIDs of pods whose node is unknown (no price): not in any total."""

    @property
    def node_usd(self) -> Decimal:
        return sum((n.usd for n in self.nodes), ZERO)

    @property
    def idle_usd(self) -> Decimal:
        return sum((n.idle_usd for n in self.nodes), ZERO)

    @property
    def jobs_usd(self) -> Decimal:
        return sum((j.usd for j in self.jobs.values()), ZERO)


def global_tokens(runs: Iterable[tuple[float, float, float]]) -> float:
    """A job's tokens from its pods' (start, end, tokens) in the window.

    Every worker reports the job's global token count (summed over all ranks),
    so pods running at the same time report the same tokens: take the largest
    of each group of overlapping pods, and add up groups that follow each other
    (a restarted worker).
    """
    total = 0.0
    group_end = float("-inf")
    group_max = 0.0
    for lo, hi, tokens in sorted(runs):
        if lo < group_end:
            group_max = max(group_max, tokens)
            group_end = max(group_end, hi)
        else:
            total += group_max
            group_max, group_end = tokens, hi
    return total + group_max


def _idle_and_gaps(
    util: Sequence[Sample], lo: float, hi: float, threshold: float, max_gap: float
) -> tuple[float, float]:
    """(idle seconds, uncovered seconds) of [lo, hi) from utilization samples.

    Each sample stands for the time until the next one, at most max_gap.
    """
    pts = sorted((s for s in util if lo - max_gap < s.t < hi), key=lambda s: s.t)
    idle = covered = 0.0
    for i, s in enumerate(pts):
        nxt = pts[i + 1].t if i + 1 < len(pts) else hi
        a, b = max(lo, s.t), min(hi, nxt, s.t + max_gap)
        if b <= a:
            continue
        covered += b - a
        if s.v < threshold:
            idle += b - a
    return idle, max(0.0, (hi - lo) - covered)


def _gpu_idle_and_gaps(
    per_gpu: Mapping[str, Sequence[Sample]], gpus: int, *, lo: float, hi: float, threshold: float, max_gap: float
) -> tuple[float, float]:
    """Idle and uncovered seconds of [lo, hi), averaged over the pod's allocated GPUs.

    Each GPU is judged on its own (4 idle GPUs of 8 make half the time idle); an allocated
    GPU with no samples at all is uncovered time, not idle time.
    """
    if gpus <= 0:
        return 0.0, 0.0
    idle = gap = 0.0
    for samples in per_gpu.values():
        i, g = _idle_and_gaps(samples, lo, hi, threshold, max_gap)
        idle += i
        gap += g
    gap += max(gpus - len(per_gpu), 0) * (hi - lo)
    return idle / gpus, gap / gpus


def allocate(
    window: Window,
    nodes: Iterable[NodeInfo],
    pods: Iterable[PodInfo],
    usage: Mapping[str, PodUsage] | None = None,
    *,
    idle_threshold: float = 0.05,
    max_gap: float = 60.0,
    step_baselines: Mapping[JobKey, float] | None = None,
    job_steps: Mapping[JobKey, Sequence[Sample]] | None = None,
) -> Allocation:
    """Cost every pod, job and node for ``window``.

    ``job_steps`` are per-job step gauge samples (max over the job's pods per
    scrape), used for steps and lost work; ``step_baselines`` the last step
    known before the window.
    """
    usage = usage or {}
    node_map = {n.name: n for n in nodes}
    pod_costs: list[PodCost] = []
    unpriced: list[str] = []
    jobs: dict[JobKey, JobCost] = {}
    allocated: dict[str, Decimal] = {name: ZERO for name in node_map}
    seen: set[str] = set()
    job_tokens: dict[JobKey, list[tuple[float, float, float]]] = {}
    for pod in pods:
        if pod.uid in seen:
            continue  # the same UID listed twice (e.g. two sources): count once
        seen.add(pod.uid)
        node = node_map.get(pod.node or "")
        if node is None:
            if overlap_seconds(window, pod.started, pod.finished) > 0:
                unpriced.append(pod.uid)
            continue
        started = pod.started if pod.started is not None else window.end
        lo = max(window.start, started, node.present_from or window.start)
        hi = min(
            window.end,
            pod.finished if pod.finished is not None else window.end,
            node.present_to if node.present_to is not None else window.end,
        )
        if pod.started is None or hi <= lo:
            continue
        runtime = hi - lo
        u = usage.get(pod.uid, PodUsage())
        gpus = max(pod.gpus_requested, u.gpus_seen)
        flags: list[str] = []
        if u.gpus_seen > pod.gpus_requested:
            flags.append("usage-above-request")
        gpu_seconds = to_decimal(runtime) * gpus
        usd = (gpu_seconds * node.gpu_hourly_usd / HOUR).quantize(QUANTUM)
        idle_s, gap_s = _gpu_idle_and_gaps(u.utilization, gpus, lo=lo, hi=hi, threshold=idle_threshold, max_gap=max_gap)
        if gap_s > 0:
            flags.append("utilization-gaps")
        idle_usd = (usd * to_decimal(idle_s) / to_decimal(runtime)).quantize(QUANTUM)
        comp = counter_increase(u.compile_seconds, baseline=u.compile_baseline, max_gap=max_gap)
        compile_s = min(comp.value, runtime)
        compile_usd = (usd * to_decimal(compile_s) / to_decimal(runtime)).quantize(QUANTUM)
        tok = counter_increase(u.tokens, baseline=u.tokens_baseline, max_gap=max_gap)
        if tok.resets or comp.resets:
            flags.append("counter-reset")
        if tok.gaps:
            flags.append("scrape-gaps")
        pc = PodCost(pod, gpus, runtime, gpu_seconds, usd, idle_usd, compile_usd, gap_s, tok.value, tuple(flags))
        pod_costs.append(pc)
        allocated[node.name] += usd
        key = (pod.namespace, pod.job)
        job = jobs.setdefault(key, JobCost(pod.namespace, pod.job, pod.commit, pod.team))
        job.usd += usd
        job.gpu_seconds += gpu_seconds
        job.idle_usd += idle_usd
        job.compile_usd += compile_usd
        job_tokens.setdefault(key, []).append((lo, hi, tok.value))
        job.pods.add(pod.uid)
        job.flags.update(flags)

    for key, runs in job_tokens.items():
        jobs[key].tokens = global_tokens(runs)

    for key, samples in (job_steps or {}).items():
        found = jobs.get(key)
        if found is None:
            continue
        lost, advanced = step_regressions(samples, baseline=(step_baselines or {}).get(key))
        found.steps = advanced
        found.lost_steps = lost
        if lost:
            done = advanced + lost
            found.lost_usd = (found.usd * lost / done).quantize(QUANTUM) if done else ZERO
            found.flags.add("restarted")

    node_costs: list[NodeCost] = []
    for node in node_map.values():
        since = node.present_from if node.present_from is not None else window.start
        secs = overlap_seconds(window, since, node.present_to)
        usd = (to_decimal(secs) * node.hourly_usd / HOUR).quantize(QUANTUM)
        alloc = allocated[node.name]
        over = alloc > usd
        node_costs.append(NodeCost(node.name, usd, alloc, max(usd - alloc, ZERO), over))
    return Allocation(window, tuple(pod_costs), jobs, tuple(node_costs), tuple(unpriced))
