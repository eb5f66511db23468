"""The cost model: whole pods priced per resource, jobs counted from raw samples, idle from capacity.

Vocabulary follows OpenCost:

* a node's price is split into a price per GPU, per CPU core and per GiB of
  memory (:func:`split_node_price`: in proportion to capacity x per-unit weights,
  by default OpenCost's default rates), so the parts add up to the node price;
* a pod's allocation of each resource is ``max(request, usage)``; its cost is
  allocation x the node's price of that resource x its runtime, where the
  runtime is the part of ``[started, finished)`` inside the half-open window
  ``[start, end)`` and inside its node's presence;
* cost is keyed by pod UID, so a pod recreated with the same name is a new pod;
* a node's idle cost is, per resource, ``(capacity x node seconds - allocated
  resource-seconds) x price``, computed from capacity, not as a remainder;
  :func:`statictrain.invariants.check` then tests that jobs + idle = node cost.

Counters come from raw samples (:mod:`statictrain.counters`), so windows tile
time exactly. Per job: tokens are summed over its pods (every rank counts its
own tokens); executed steps are the mean over ranks of each rank's executed
steps; progress is the change of the job's step between the window's ends;
lost steps = executed - progress, priced by :func:`fold_job` at the job's cost
per step measured in steady windows before. Compile time is priced at the pod's
full rate, whatever window it is reported in. Inside a job's cost, ``idle_usd``
is the share of its GPU cost whose utilization was below a threshold: the increase
of the sidecar's idle counter (GPU-seconds below the threshold, counted where the
utilization is sampled) when the pod exports one at the accounting threshold, else
the utilization samples Prometheus holds (each transition placed to within a scrape);
time with no utilization samples counts as a gap (flagged), not as idle.

Energy: a pod's GPU energy in a window is the increase of its sidecar's NVML energy
counters (one series per GPU, joules since the driver loaded: a series' first sample is
its baseline, drops are resets, a scrape gap's energy arrives with the sample after it),
attributed to the window like the other counters. CPU and memory energy are not
estimated (no counter measures them here): the figures are the GPUs' energy alone. A pod
whose sidecar reports utilization but no energy is flagged ``gpu-energy-missing``.
Carbon is energy x PUE x its node's grid intensity (gCO2e/kWh); a node without a known
intensity flags ``carbon-intensity-unknown`` and adds no carbon.

All functions are pure; times are Unix seconds (float), money is Decimal.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from statictrain.counters import Counter, Increase, Sample, held_mean, held_seconds, increase, latest_value
from statictrain.money import ZERO, to_decimal

__all__ = [
    "DEFAULT_WEIGHTS",
    "IDLE_THRESHOLD",
    "JOULES_PER_KWH",
    "QUANTUM",
    "RESOURCES",
    "Allocation",
    "JobCost",
    "JobKey",
    "JobTotals",
    "NodeCost",
    "NodeInfo",
    "PodCost",
    "PodInfo",
    "PodUsage",
    "ResourcePrices",
    "Sample",
    "Window",
    "allocate",
    "below_label",
    "fold_job",
    "overlap_seconds",
    "split_node_price",
]

HOUR = Decimal(3600)
GIB = 1024**3
JOULES_PER_KWH = 3.6e6
IDLE_THRESHOLD = 0.05
"""GPU utilization ratio below which allocated GPU time is idle: the cost part's default and the threshold
of the sidecar's idle counter (metrics.GPU_IDLE_SECONDS_TOTAL, label ``below`` = :func:`below_label`)."""
QUANTUM = Decimal("1e-12")
"""Internal money precision."""
RESOURCES = ("gpu", "cpu", "memory")


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


def below_label(threshold: float) -> str:
    """The ``below`` label value of the idle counter counted at ``threshold`` (``0.05`` -> ``"0.05"``)."""
    return f"{threshold:g}"


def overlap_seconds(window: Window, begin: float | None, finish: float | None) -> float:
    """Seconds of ``[begin, finish)`` inside the window.

    A None ``begin`` means never started (0 s); a None ``finish`` means still running.
    """
    if begin is None:
        return 0.0
    lo = max(window.start, begin)
    hi = min(window.end, finish if finish is not None else window.end)
    return max(0.0, hi - lo)


@dataclass(frozen=True)
class ResourcePrices:
    """USD per hour of one GPU, one CPU core and one GiB of memory."""

    gpu: Decimal
    cpu: Decimal
    memory: Decimal

    def of(self, resource: str) -> Decimal:
        return {"gpu": self.gpu, "cpu": self.cpu, "memory": self.memory}[resource]


DEFAULT_WEIGHTS = ResourcePrices(gpu=Decimal("0.95"), cpu=Decimal("0.031611"), memory=Decimal("0.004237"))
"""OpenCost's default per-unit hourly rates (GPU, vCPU, GiB RAM), used as the ratio that splits a node price."""


def split_node_price(
    hourly: Decimal, *, gpus: int, cpu: float, memory_gib: float, weights: ResourcePrices = DEFAULT_WEIGHTS
) -> ResourcePrices:
    """Per-resource prices whose capacity-weighted sum is exactly the node price.

    Each resource gets ``weight x factor`` with ``factor = hourly / sum(capacity x weight)``,
    the way OpenCost divides a node price it knows only as a whole. A node that
    reports no capacity at all puts the whole price on one GPU.
    """
    caps = {"gpu": Decimal(max(gpus, 0)), "cpu": to_decimal(max(cpu, 0.0)), "memory": to_decimal(max(memory_gib, 0.0))}
    total = sum((caps[r] * weights.of(r) for r in RESOURCES), ZERO)
    if total <= 0:
        return ResourcePrices(gpu=hourly, cpu=ZERO, memory=ZERO)
    f = hourly / total
    return ResourcePrices(gpu=weights.gpu * f, cpu=weights.cpu * f, memory=weights.memory * f)


@dataclass(frozen=True)
class NodeInfo:
    name: str
    hourly_usd: Decimal
    gpus: int
    cpu: float = 0.0
    """Allocatable CPU cores."""
    memory_gib: float = 0.0
    """Allocatable memory, GiB."""
    present_from: float | None = None
    """Node creation time; None means present before the window."""
    present_to: float | None = None
    """Node deletion time; None means still present."""
    weights: ResourcePrices = DEFAULT_WEIGHTS
    price_flag: str = ""
    """Why the price is not the node's own (e.g. its price annotation is malformed); flags its pods' jobs."""
    grid_intensity: float | None = None
    """Carbon intensity of the node's electricity, gCO2e per kWh (None: unknown)."""

    @property
    def prices(self) -> ResourcePrices:
        return split_node_price(
            self.hourly_usd, gpus=self.gpus, cpu=self.cpu, memory_gib=self.memory_gib, weights=self.weights
        )

    def capacity(self, resource: str) -> float:
        return {"gpu": float(self.gpus), "cpu": self.cpu, "memory": self.memory_gib}[resource]


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
    cpu_requested: float = 0.0
    """CPU cores requested (sum over containers)."""
    memory_requested_gib: float = 0.0
    rank: int = 0
    """Node rank of the worker (its completion index)."""


@dataclass(frozen=True)
class PodUsage:
    """What Prometheus holds of one pod UID for one window (raw samples, see statictrain.counters)."""

    utilization: Mapping[str, Sequence[Sample]] = field(default_factory=dict)
    """Per GPU of the pod (uuid or index): utilization ratio samples, in time order, from before the window."""
    tokens: Sequence[Counter] = ()
    """One counter per series of the pod (a sidecar restarted elsewhere starts a new series)."""
    steps: Sequence[Counter] = ()
    """Steps this pod's trainers executed (the sidecar's steps counter), one per series."""
    compile_seconds: Sequence[Counter] = ()
    step: Sequence[Sample] = ()
    """The job's global step as this pod reports it, in time order (from before the window)."""
    cpu_seconds: Sequence[Counter] = ()
    """CPU seconds used, one counter per container of the pod (cAdvisor)."""
    memory_bytes: Sequence[Sequence[Sample]] = ()
    """Working-set bytes, one series per container, in time order (from before the window)."""
    idle_gpu_seconds: Sequence[Counter] = ()
    """The sidecar's idle counter at the accounting threshold (GPU-seconds below it, summed over the pod's
    GPUs), one per series; when present, a window's idle time is its increase, not sampled utilization."""
    gpu_energy: Sequence[Counter] = ()
    """The sidecar's GPU energy counters (joules since the driver loaded), one per GPU series: a series'
    first sample is its baseline (see statictrain.counters)."""

    @property
    def gpus_seen(self) -> int:
        return len(self.utilization)


JobKey = tuple[str, str]
"""(namespace, job name)"""


@dataclass(frozen=True)
class PodCost:
    pod: PodInfo
    gpus: int
    cpu: float
    memory_gib: float
    runtime_seconds: float
    gpu_seconds: Decimal
    gpu_usd: Decimal
    cpu_usd: Decimal
    memory_usd: Decimal
    idle_usd: Decimal
    compile_usd: Decimal
    gap_seconds: float
    tokens: float
    flags: tuple[str, ...] = ()
    energy_j: float = 0.0
    """GPU energy in the window, joules."""
    carbon_g: float = 0.0
    """energy x PUE x the node's grid intensity, gCO2e."""

    @property
    def usd(self) -> Decimal:
        return self.gpu_usd + self.cpu_usd + self.memory_usd


@dataclass
class JobCost:
    """One job's cost in one window (or, summed, over several)."""

    namespace: str
    job: str
    commit: str = ""
    team: str = ""
    usd: Decimal = ZERO
    gpu_usd: Decimal = ZERO
    cpu_usd: Decimal = ZERO
    memory_usd: Decimal = ZERO
    gpu_seconds: Decimal = ZERO
    idle_usd: Decimal = ZERO
    compile_usd: Decimal = ZERO
    lost_usd: Decimal = ZERO
    """Set by :func:`fold_job` (it needs the job's history)."""
    tokens: float = 0.0
    steps: float = 0.0
    """Progress: the job's step at the window's end minus at its start."""
    executed_steps: float = 0.0
    """Steps executed (mean over ranks), recomputed ones included."""
    lost_steps: float = 0.0
    """Set by :func:`fold_job`."""
    energy_j: float = 0.0
    """GPU energy of the job's pods, joules."""
    carbon_g: float = 0.0
    """Carbon of that energy (with PUE), gCO2e."""
    step_mark: float | None = None
    """The job's step at the window's end (None: unknown)."""
    steady: bool = False
    """Every pod ran the whole window and its step counter rose at every sample (no stall, restart, compile
    or loss): the window measures the job's cost per step."""
    steady_usd: Decimal = ZERO
    """In a steady window: the job's cost over the time its step counters' samples span (rate x span)."""
    pods: set[str] = field(default_factory=set)
    flags: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class NodeCost:
    name: str
    usd: Decimal
    allocated_usd: Decimal
    """Cost of the pods on the node (their allocations at the node's prices)."""
    idle_usd: Decimal
    """Per resource: (capacity x node seconds - allocated resource-seconds) x price, at least 0."""
    idle_by_resource: Mapping[str, Decimal]
    peak_allocation: Mapping[str, float]
    """Most of each resource allocated at any instant of the window."""
    capacity: Mapping[str, float]

    @property
    def overallocated(self) -> tuple[str, ...]:
        return tuple(r for r in RESOURCES if self.peak_allocation[r] > self.capacity[r] + 1e-9)


@dataclass(frozen=True)
class Allocation:
    window: Window
    pods: tuple[PodCost, ...]
    jobs: Mapping[JobKey, JobCost]
    nodes: tuple[NodeCost, ...]
    unpriced_pods: tuple[str, ...]
    """``namespace/name`` of running pods whose node has no price: in no total, flagged by name."""

    @property
    def node_usd(self) -> Decimal:
        return sum((n.usd for n in self.nodes), ZERO)

    @property
    def idle_usd(self) -> Decimal:
        return sum((n.idle_usd for n in self.nodes), ZERO)

    @property
    def jobs_usd(self) -> Decimal:
        return sum((j.usd for j in self.jobs.values()), ZERO)


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
        covered, low = held_seconds(samples, lo, hi, max_gap=max_gap, below=threshold)
        idle += low
        gap += (hi - lo) - covered
    gap += max(gpus - len(per_gpu), 0) * (hi - lo)
    return idle / gpus, gap / gpus


def _peak(intervals: Iterable[tuple[float, float, float]]) -> float:
    """Largest sum of amounts of overlapping half-open intervals (lo, hi, amount)."""
    events = sorted((t, d) for lo, hi, a in intervals if hi > lo for t, d in ((lo, a), (hi, -a)))
    peak = cur = 0.0
    i = 0
    while i < len(events):
        t = events[i][0]
        while i < len(events) and events[i][0] == t:
            cur += events[i][1]
            i += 1
        peak = max(peak, cur)
    return peak


@dataclass
class _JobSteps:
    executed_by_rank: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    step_series: dict[int, list[Sequence[Sample]]] = field(default_factory=lambda: defaultdict(list))
    full_window: bool = True
    restarted: bool = False
    compiled: bool = False
    stepping: bool = True
    steady_usd: Decimal = ZERO


def _job_step(by_rank: Mapping[int, Sequence[Sequence[Sample]]], before: float) -> float | None:
    """The job's step just before ``before``: per rank its latest sample (over the rank's pods), then the
    mean over the ranks that have one, the same definition as the executed steps (mean over ranks)."""
    latest = [v for series in by_rank.values() if (v := latest_value(series, before)) is not None]
    return sum(latest) / len(latest) if latest else None


def _stepping_span(counters: Sequence[Counter]) -> float | None:
    """Seconds from the sample before the window to the window's last sample when the (single) step counter
    rose at every sample in between; None otherwise (a stall, a stop, a restart, no sample before)."""
    if len(counters) != 1:
        return None
    c = counters[0]
    if c.prev is None or c.prev_t is None or not c.samples:
        return None
    prev = c.prev
    for s in c.samples:
        if s.v <= prev:
            return None
        prev = s.v
    return c.samples[-1].t - c.prev_t


def _sum_increase(counters: Sequence[Counter]) -> Increase:
    parts = [increase(c) for c in counters]
    return Increase(sum(p.value for p in parts), sum(p.resets for p in parts))


def _usd(seconds: float, amount: float, price: Decimal) -> Decimal:
    return (to_decimal(seconds) * to_decimal(amount) * price / HOUR).quantize(QUANTUM)


def allocate(
    window: Window,
    nodes: Iterable[NodeInfo],
    pods: Iterable[PodInfo],
    usage: Mapping[str, PodUsage] | None = None,
    *,
    idle_threshold: float = IDLE_THRESHOLD,
    max_gap: float = 60.0,
    step_marks: Mapping[JobKey, float] | None = None,
    pue: float = 1.0,
) -> Allocation:
    """Cost every pod, job and node for ``window`` (and measure its GPU energy and carbon, with ``pue``).

    ``step_marks`` holds each job's step at the window's start (the previous
    window's ``step_mark``); a job without one starts from its latest step sample
    before the window, else 0.
    """
    usage = usage or {}
    node_map = {n.name: n for n in nodes}
    pod_costs: list[PodCost] = []
    unpriced: list[str] = []
    jobs: dict[JobKey, JobCost] = {}
    job_steps: dict[JobKey, _JobSteps] = {}
    ranks_of: dict[JobKey, dict[int, list[Sequence[Sample]]]] = defaultdict(lambda: defaultdict(list))
    alloc_seconds: dict[str, dict[str, float]] = {n: dict.fromkeys(RESOURCES, 0.0) for n in node_map}
    intervals: dict[str, dict[str, list[tuple[float, float, float]]]] = {
        n: {r: [] for r in RESOURCES} for n in node_map
    }
    allocated_usd: dict[str, Decimal] = dict.fromkeys(node_map, ZERO)
    seen: set[str] = set()
    for pod in pods:
        if pod.uid in seen:
            continue  # the same UID listed twice (e.g. two sources): count once
        seen.add(pod.uid)
        node = node_map.get(pod.node or "")
        if node is None:
            if overlap_seconds(window, pod.started, pod.finished) > 0:
                unpriced.append(f"{pod.namespace}/{pod.name}")
            continue
        if pod.started is None:
            continue
        # every pod of the job counts for its rank set and its step, running in this window or not:
        # a DDP rank whose pod ended (or has not started) still divides the executed steps
        ranks_of[(pod.namespace, pod.job)][pod.rank].append(usage.get(pod.uid, PodUsage()).step)
        lo = max(window.start, pod.started, node.present_from or window.start)
        hi = min(
            window.end,
            pod.finished if pod.finished is not None else window.end,
            node.present_to if node.present_to is not None else window.end,
        )
        if hi <= lo:
            continue
        runtime = hi - lo
        u = usage.get(pod.uid, PodUsage())
        flags: list[str] = [node.price_flag] if node.price_flag else []
        gpus = max(pod.gpus_requested, u.gpus_seen)
        if u.gpus_seen > pod.gpus_requested:
            flags.append("usage-above-request")
        cpu_used = sum(increase(c).value for c in u.cpu_seconds) / runtime
        cpu = max(pod.cpu_requested, cpu_used)
        mem_used = sum(held_mean(m, lo, hi, max_gap=max_gap) or 0.0 for m in u.memory_bytes)
        mem = max(pod.memory_requested_gib, mem_used / GIB)
        prices = node.prices
        gpu_usd = _usd(runtime, gpus, prices.gpu)
        cpu_usd = _usd(runtime, cpu, prices.cpu)
        mem_usd = _usd(runtime, mem, prices.memory)
        usd = gpu_usd + cpu_usd + mem_usd
        idle_s, gap_s = _gpu_idle_and_gaps(u.utilization, gpus, lo=lo, hi=hi, threshold=idle_threshold, max_gap=max_gap)
        if gap_s > 0:
            flags.append("utilization-gaps")
        counted_idle = _sum_increase(u.idle_gpu_seconds)
        if u.idle_gpu_seconds and gpus > 0:
            # measured where the utilization is sampled: exact whatever the scrapes. Not capped at this window's
            # runtime: after a scrape gap the idle time of the gap arrives with the first sample after it, and
            # the windows tile the counter, so the job's total is exact (a window can show more idle than time).
            idle_s = counted_idle.value / gpus
            idle_usd = _usd(counted_idle.value, 1.0, prices.gpu)
        else:
            idle_usd = (gpu_usd * to_decimal(idle_s) / to_decimal(runtime)).quantize(QUANTUM)
        comp, tok, executed = (_sum_increase(c) for c in (u.compile_seconds, u.tokens, u.steps))
        compile_usd = (usd * to_decimal(comp.value) / to_decimal(runtime)).quantize(QUANTUM)
        energy = [increase(c, starts_at_zero=False) for c in u.gpu_energy]
        energy_j = sum(e.value for e in energy)
        if u.utilization and not u.gpu_energy:
            flags.append("gpu-energy-missing")
        if energy_j > 0 and node.grid_intensity is None:
            flags.append("carbon-intensity-unknown")
        carbon_g = energy_j / JOULES_PER_KWH * pue * (node.grid_intensity or 0.0)
        if comp.resets or tok.resets or executed.resets or counted_idle.resets or any(e.resets for e in energy):
            flags.append("counter-reset")
        pc = PodCost(
            pod, gpus, cpu, mem, runtime, to_decimal(runtime) * gpus, gpu_usd, cpu_usd, mem_usd, idle_usd,
            compile_usd, gap_s, tok.value, tuple(flags), energy_j, carbon_g,
        )  # fmt: skip
        pod_costs.append(pc)
        for r, amount in (("gpu", gpus), ("cpu", cpu), ("memory", mem)):
            alloc_seconds[node.name][r] += amount * runtime
            intervals[node.name][r].append((lo, hi, float(amount)))
        allocated_usd[node.name] += usd
        key = (pod.namespace, pod.job)
        job = jobs.setdefault(key, JobCost(pod.namespace, pod.job, pod.commit, pod.team))
        job.usd += usd
        job.gpu_usd += gpu_usd
        job.cpu_usd += cpu_usd
        job.memory_usd += mem_usd
        job.gpu_seconds += pc.gpu_seconds
        job.idle_usd += idle_usd
        job.compile_usd += compile_usd
        job.tokens += pc.tokens
        job.energy_j += energy_j
        job.carbon_g += carbon_g
        job.pods.add(pod.uid)
        job.flags.update(flags)
        js = job_steps.setdefault(key, _JobSteps())
        js.executed_by_rank[pod.rank] += executed.value
        js.full_window = js.full_window and runtime >= window.seconds
        js.restarted = js.restarted or executed.resets > 0 or len(u.steps) > 1
        js.compiled = js.compiled or comp.value > 0
        span = _stepping_span(u.steps) if idle_s == 0 and gap_s == 0 else None
        if span is None:
            js.stepping = False
        else:
            js.steady_usd += (usd * to_decimal(span) / to_decimal(runtime)).quantize(QUANTUM)

    for key, js in job_steps.items():
        job = jobs[key]
        js.step_series = ranks_of[key]
        job.executed_steps = sum(js.executed_by_rank.values()) / max(len(ranks_of[key]), 1)
        start = (step_marks or {}).get(key)
        if start is None:
            start = _job_step(js.step_series, window.start) or 0.0
        end = _job_step(js.step_series, window.end)
        job.step_mark = end if end is not None else start
        job.steps = job.step_mark - start
        job.steady = (
            js.full_window
            and js.stepping
            and not js.restarted
            and not js.compiled
            and job.executed_steps > 0
            and abs(job.executed_steps - job.steps) < 1.0
        )
        job.steady_usd = js.steady_usd if job.steady else ZERO

    node_costs = [
        _node_cost(window, node, alloc_seconds[node.name], intervals[node.name], allocated_usd[node.name])
        for node in node_map.values()
    ]
    return Allocation(window, tuple(pod_costs), jobs, tuple(node_costs), tuple(unpriced))


def _node_cost(
    window: Window,
    node: NodeInfo,
    alloc_seconds: Mapping[str, float],
    intervals: Mapping[str, Sequence[tuple[float, float, float]]],
    allocated_usd: Decimal,
) -> NodeCost:
    since = node.present_from if node.present_from is not None else window.start
    secs = overlap_seconds(window, since, node.present_to)
    prices = node.prices
    usd = (to_decimal(secs) * node.hourly_usd / HOUR).quantize(QUANTUM)
    idle: dict[str, Decimal] = {}
    for r in RESOURCES:
        free = node.capacity(r) * secs - alloc_seconds[r]
        idle[r] = max((to_decimal(free) * prices.of(r) / HOUR).quantize(QUANTUM), ZERO)
    if node.gpus == 0 and node.cpu == 0 and node.memory_gib == 0:
        # no capacity reported: the whole price sits on one notional GPU (see split_node_price)
        idle["gpu"] = max(((to_decimal(secs) - to_decimal(alloc_seconds["gpu"])) * prices.gpu / HOUR), ZERO)
    return NodeCost(
        node.name,
        usd,
        allocated_usd,
        sum(idle.values(), ZERO),
        idle,
        {r: _peak(intervals[r]) for r in RESOURCES},
        {r: node.capacity(r) if (node.gpus or node.cpu or node.memory_gib) else 1.0 for r in RESOURCES},
    )


@dataclass(frozen=True)
class JobTotals:
    """What a job's history holds for pricing lost work (kept in its status.cost)."""

    executed_steps: float = 0.0
    steps: float = 0.0
    """Progress so far."""
    lost_steps: float = 0.0
    steady_usd: Decimal = ZERO
    steady_steps: float = 0.0

    @property
    def usd_per_step(self) -> Decimal | None:
        """The job's cost per step in steady windows; None before its first steady window."""
        return self.steady_usd / to_decimal(self.steady_steps) if self.steady_steps > 0 else None


def fold_job(prev: JobTotals, inc: JobCost) -> JobTotals:
    """Add one window to a job's totals and set ``inc.lost_steps`` / ``inc.lost_usd``.

    Lost steps are ``executed - progress`` over the job's whole history (never
    less than before), so a loss is counted once, in full, whatever the restart
    took, and sampling noise between windows cancels out. Each lost step is
    priced at the job's cost per step in steady windows before this one (else in
    this window, flagged), never at zero without a flag.
    """
    executed = prev.executed_steps + inc.executed_steps
    steps = prev.steps + inc.steps
    lost = max(prev.lost_steps, executed - steps)
    steady_usd = prev.steady_usd + (inc.steady_usd if inc.steady else ZERO)
    steady_steps = prev.steady_steps + (inc.executed_steps if inc.steady else 0.0)
    inc.lost_steps = lost - prev.lost_steps
    if inc.lost_steps >= 1.0:
        inc.flags.add("restarted")
    if inc.lost_steps > 0:
        per_step = prev.usd_per_step
        if per_step is None and inc.executed_steps > 0:
            per_step = inc.usd / to_decimal(inc.executed_steps)
            inc.flags.add("lost-work-priced-from-window")
        if per_step is None:
            inc.flags.add("lost-work-unpriced")
            per_step = ZERO
        inc.lost_usd = (per_step * to_decimal(inc.lost_steps)).quantize(QUANTUM)
    return JobTotals(executed, steps, lost, steady_usd, steady_steps)
