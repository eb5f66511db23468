"""Offline replay of recorded job series through the operator's detectors, findings and policy. Pure.

A recorded job is a set of ``timestamp,value`` series named for what they measure (``KNOWN``;
``rank_step_seconds.<rank>`` per rank), optionally with the commits it ran (time, commit,
settings) and its GPU count. ``replay`` walks a simulated clock over the recording every
``interval_s`` and, at each tick, runs what ``evaluate.Evaluator`` runs on the data up to then:
``detector.assess`` and ``commits.commit_regression`` (the running commit's $ per unit of work
against the last good commit's),
``faults.detect``, ``findings.classify``, ``history.track_good_settings`` and
``remediation.decide`` in Recommend mode against a job that permits every action (elastic,
suspendable, its earlier settings known when they were good), so the action shown is the one
the finding calls for. Series it cannot trust get a message and never lead to an action:
unknown names (judged by the generic ``ensemble`` detector, reported only), NaN/Inf, too few
points, gaps, counter resets and values that cannot be in the series' unit (``UNITS``).

``score`` compares the outcome with labelled fault windows: detected, delay of the first
right action, wrong actions, and actions on series labelled clean.
"""

from __future__ import annotations

import bisect
import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from statictrain_operator.anomaly import faults as flt
from statictrain_operator.anomaly import findings as fnd
from statictrain_operator.anomaly import history as hist
from statictrain_operator.anomaly.commits import commit_regression, judged
from statictrain_operator.anomaly.detector import Assessment, DetectorSettings, Method, assess
from statictrain_operator.anomaly.ensemble import EnsembleSettings, score_series
from statictrain_operator.anomaly.remediation import (
    SETTINGS_FIELDS,
    ActionKind,
    Finding,
    FindingKind,
    History,
    JobView,
    Mode,
    PolicySettings,
    decide,
)

__all__ = [
    "COUNTERS",
    "EVENT_SERIES",
    "EVIDENCE",
    "EXPECTED_ACTION",
    "KNOWN",
    "NONFINITE_IS_SIGNAL",
    "UNITS",
    "Commit",
    "Problem",
    "Recording",
    "Replay",
    "ReplaySettings",
    "Series",
    "SeriesScore",
    "Tick",
    "Window",
    "WindowScore",
    "check",
    "known",
    "replay",
    "s_interval",
    "score",
    "spec_for",
    "unit_problem",
]

KNOWN = (
    flt.TRAIN_STEP,
    flt.STEP_SECONDS,
    flt.SECONDS_SINCE_LAST_STEP,
    flt.GPU_UTILIZATION,
    flt.GPU_POWER_WATTS,
    flt.GPU_MEMORY_USED_BYTES,
    flt.GPU_MEMORY_TOTAL_BYTES,
    flt.LOSS,
    fnd.TOKENS_PER_SECOND,
    fnd.COST_USD_PER_HOUR,
    fnd.USD_PER_1M_TOKENS,
)
"""Series names the replay understands (plus ``rank_step_seconds.<rank>``)."""

UNITS: Mapping[str, str] = {
    flt.TRAIN_STEP: "steps: the trainer's step number (a counter; a decrease is a restart)",
    flt.STEP_SECONDS: "seconds: wall time per step",
    flt.SECONDS_SINCE_LAST_STEP: "seconds since the last step ended",
    flt.GPU_UTILIZATION: "ratio 0..1, the mean over the job's GPUs (NVML's percent / 100)",
    flt.GPU_POWER_WATTS: "watts, the mean over the job's GPUs (NVML's milliwatts / 1000)",
    flt.GPU_MEMORY_USED_BYTES: "bytes of device memory in use, the largest of the job's GPUs",
    flt.GPU_MEMORY_TOTAL_BYTES: "bytes of device memory of one GPU",
    flt.LOSS: "the training loss (any value; NaN/Inf are divergence, not bad data)",
    fnd.TOKENS_PER_SECOND: "tokens per second, the whole job",
    fnd.COST_USD_PER_HOUR: "US dollars per hour, the whole job",
    fnd.USD_PER_1M_TOKENS: "US dollars per million tokens",
    flt.RANK_STEP_SECONDS + ".<rank>": "seconds: one rank's local step time (compute before it waits for the others)",
}
"""File name (without .csv) -> unit: the contract of ``statictrain anomalies evaluate`` (its --help prints it)."""

MIB = 2**20
MAX_GPU_WATTS = 5000.0
"""No GPU draws more (an H200 is rated 700 W): larger values are milliwatts."""

EVENT_SERIES = (flt.STEP_SECONDS, fnd.TOKENS_PER_SECOND)
"""Series with a sample per step interval only: no samples while no step runs is not a gap."""
COUNTERS = (flt.TRAIN_STEP,)
"""Series that only grow: a decrease is a reset."""
NONFINITE_IS_SIGNAL = (flt.LOSS,)
"""Series whose NaN/Inf values are what a detector looks for, not bad data."""

EVIDENCE: Mapping[FindingKind, tuple[str, ...]] = {
    FindingKind.STALLED: (flt.TRAIN_STEP, flt.GPU_POWER_WATTS, flt.GPU_UTILIZATION),
    FindingKind.STRAGGLER: (flt.RANK_STEP_SECONDS,),
    FindingKind.IDLE_GPU: (flt.GPU_UTILIZATION,),
    FindingKind.MEMORY_LEAK: (flt.GPU_MEMORY_USED_BYTES,),
    FindingKind.LOSS_DIVERGED: (flt.LOSS,),
    FindingKind.DATA_STARVATION: (flt.STEP_SECONDS, flt.GPU_UTILIZATION),
    FindingKind.THROUGHPUT_REGRESSION: (flt.STEP_SECONDS, fnd.TOKENS_PER_SECOND),
}
"""The series a finding rests on: a data problem on one of them in the window blocks its action."""

EXPECTED_ACTION: Mapping[str, ActionKind] = {
    "hang": ActionKind.RESTART_FROM_CHECKPOINT,
    "straggler": ActionKind.REPLACE_STRAGGLER,
    "starvation": ActionKind.TUNE_INPUT_PIPELINE,
    "memory_leak": ActionKind.RESTART_FROM_CHECKPOINT,
    "regression": ActionKind.REVERT_SETTINGS,
    "idle": ActionKind.SCALE_DOWN,
    "loss_divergence": ActionKind.SUSPEND,
}
"""Fault class (labels) -> the action (or recommendation) that is right for it."""

Series = tuple[list[float], list[float]]


@dataclass(frozen=True)
class ReplaySettings:
    """The simulated loop (the recording's own resolution is used as is)."""

    interval_s: float = 10.0
    """Simulated seconds between evaluations (the operator's STATICTRAIN_ANOMALY_INTERVAL_S)."""
    lookback_s: float = 3600.0
    """History each evaluation sees."""
    min_points: int = 5
    """Fewer finite points: the series is not judged."""
    gap_factor: float = 5.0
    """A gap: samples further apart than this many times the series' median spacing..."""
    gap_min_s: float = 30.0
    """... and than this many seconds."""
    gap_window_s: float = 120.0
    """A gap or reset this recent blocks actions resting on the series."""
    good_settle_s: float = 15.0
    """Healthy seconds after which the running settings count as good (RevertSettings' target; the
    operator waits 600 s, recordings of a few minutes need less)."""
    price_usd_per_gpu_hour: float = 3.5
    """GPU price used for $ per 1M tokens when the recording has no cost series (one price per job:
    the per-commit comparison does not depend on its value)."""
    detector: DetectorSettings = field(default_factory=DetectorSettings)
    faults: flt.FaultSettings = field(default_factory=flt.FaultSettings)
    findings: fnd.FindingSettings = field(default_factory=fnd.FindingSettings)
    policy: PolicySettings = field(default_factory=PolicySettings)
    generic: EnsembleSettings = field(default_factory=EnsembleSettings)


@dataclass(frozen=True)
class Commit:
    since: float
    commit: str
    settings: Mapping[str, str]


@dataclass
class Recording:
    """One job's series as read from files (raw: any values, any order)."""

    name: str
    series: dict[str, Series]
    commits: list[Commit] = field(default_factory=list)
    gpus: int = 1


@dataclass(frozen=True)
class Problem:
    """Why (part of) a series cannot be trusted."""

    series: str
    message: str
    start: float = -math.inf
    """Where it applies (the whole series: -inf..inf)."""
    end: float = math.inf
    blocking: bool = True
    """False: reported only (e.g. NaN values that were dropped)."""


@dataclass(frozen=True)
class Tick:
    """One simulated evaluation."""

    t: float
    findings: tuple[Finding, ...]
    action: ActionKind | None
    """The action the policy picks (Recommend mode: recommended; recommend-only kinds included)."""
    finding: FindingKind | None
    """The finding the action is for."""
    message: str


@dataclass
class Replay:
    """What the replay of one recording found."""

    name: str
    problems: list[Problem]
    ticks: list[Tick]
    generic: dict[str, list[float]] = field(default_factory=dict)
    """Unknown-metric series -> times the generic detector flagged (reported, never acted on)."""
    expected_step_s: float = 0.0


def _key(name: str) -> str:
    return flt.RANK_STEP_SECONDS if name.startswith(flt.RANK_STEP_SECONDS + ".") else name


def known(name: str) -> bool:
    """Whether the replay understands a series name."""
    if name.startswith(flt.RANK_STEP_SECONDS + "."):
        return name.split(".", 1)[1].isdigit()
    return name in KNOWN


def unit_problem(name: str, vs: Sequence[float]) -> str | None:
    """Why finite values ``vs`` cannot be in the unit ``UNITS`` gives the series (None: they can be)."""
    key = _key(name)
    if not vs or key == flt.LOSS:
        return None
    low, high = min(vs), max(vs)
    unit = UNITS.get(key) or UNITS[flt.RANK_STEP_SECONDS + ".<rank>"]
    if low < 0:
        return f"negative values (down to {low:g}): expected {unit}"
    if key == flt.GPU_UTILIZATION and high > 1.0 + 1e-9:
        return f"values up to {high:g}: expected a ratio 0..1, not percent (divide by 100)"
    if key in (flt.GPU_MEMORY_USED_BYTES, flt.GPU_MEMORY_TOTAL_BYTES) and 0 < high < MIB:
        return f"at most {high:g}: below 1 MiB on a GPU that has memory; expected bytes, not MiB or GiB"
    if key == flt.GPU_POWER_WATTS and high > MAX_GPU_WATTS:
        return f"values up to {high:g}: no GPU draws that many watts; expected watts, not milliwatts (divide by 1000)"
    return None


def check(name: str, ts: Sequence[float], vs: Sequence[float], s: ReplaySettings) -> tuple[Series, list[Problem]]:
    """The series sorted (NaN/Inf dropped unless they are the signal) and what is wrong with it."""
    problems: list[Problem] = []
    if len(ts) != len(vs):
        return ([], []), [Problem(name, f"{len(ts)} timestamps but {len(vs)} values: not judged")]
    pairs = sorted(zip(ts, vs, strict=True))
    if any(a[0] == b[0] for a, b in itertools.pairwise(pairs)):
        problems.append(Problem(name, "repeated timestamps: later values kept", blocking=False))
        pairs = list({t: (t, v) for t, v in pairs}.values())
    bad = [t for t, v in pairs if not math.isfinite(v)]
    if bad and _key(name) not in NONFINITE_IS_SIGNAL:
        problems.append(Problem(name, f"{len(bad)} NaN/Inf values ignored (first at {_iso(bad[0])})", blocking=False))
        pairs = [(t, v) for t, v in pairs if math.isfinite(v)]
    wrong_unit = unit_problem(name, [v for _, v in pairs if math.isfinite(v)])
    if wrong_unit is not None:
        problems.append(Problem(name, f"series refused: {wrong_unit}"))
        return ([], []), problems
    if len(pairs) < s.min_points:
        problems.append(Problem(name, f"{len(pairs)} usable points, too few to judge (need {s.min_points})"))
        return ([], []), problems
    t_sorted = [p[0] for p in pairs]
    v_sorted = [p[1] for p in pairs]
    if _key(name) not in EVENT_SERIES and _key(name) != flt.RANK_STEP_SECONDS:
        spacing = statistics.median(b - a for a, b in itertools.pairwise(t_sorted))
        limit = max(s.gap_factor * spacing, s.gap_min_s)
        for a, b in itertools.pairwise(t_sorted):
            if b - a > limit:
                problems.append(Problem(name, f"gap of {b - a:.0f} s from {_iso(a)} to {_iso(b)}", a, b))
    if _key(name) in COUNTERS:
        for (a, va), (b, vb) in itertools.pairwise(pairs):
            if vb < va:
                problems.append(Problem(name, f"reset from {va:g} to {vb:g} at {_iso(b)}", a, b))
    return (t_sorted, v_sorted), problems


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _window(s: Series, start: float, end: float) -> Series:
    ts, vs = s
    idx = [i for i, t in enumerate(ts) if start <= t <= end]
    return [ts[i] for i in idx], [vs[i] for i in idx]


def _commit_at(commits: Sequence[Commit], t: float) -> Commit | None:
    current = None
    for c in commits:
        if c.since <= t:
            current = c
    return current


def spec_for(commit: Commit | None) -> dict[str, object]:
    """A job spec that permits every action, with the commit's settings where the recording has them."""
    spec: dict[str, object] = {
        "replicas": 2,
        "elastic": {"minReplicas": 1},
        "budget": {"onExceeded": "Suspend"},
        "remediation": {"mode": "Recommend"},
    }
    if commit is not None:
        raw = commit.settings
        if "STATICTRAIN_PRECISION" in raw:
            spec["precision"] = raw["STATICTRAIN_PRECISION"]
        if "STATICTRAIN_COMPILE_MODE" in raw:
            spec["compile"] = {"mode": raw["STATICTRAIN_COMPILE_MODE"]}
        other = {k: v for k, v in raw.items() if k not in ("STATICTRAIN_PRECISION", "STATICTRAIN_COMPILE_MODE")}
        if other:
            spec["distributed"] = {"env": dict(sorted(other.items()))}
    return spec


def _usd_per_1m(rec: Recording, series: Mapping[str, Series], s: ReplaySettings) -> Series:
    if fnd.USD_PER_1M_TOKENS in series:
        return series[fnd.USD_PER_1M_TOKENS]
    ts, tps = series.get(fnd.TOKENS_PER_SECOND, ([], []))
    price = s.price_usd_per_gpu_hour * rec.gpus / 3600.0
    pairs = [(t, price / v * 1e6) for t, v in zip(ts, tps, strict=True) if v > 0]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _distinct(ts: list[float], vs: list[float]) -> Series:
    keep = [i for i in range(len(vs)) if i == 0 or vs[i] != vs[i - 1]]
    return [ts[i] for i in keep], [vs[i] for i in keep]


def _utc(t: float) -> datetime:
    return datetime.fromtimestamp(t, tz=UTC)


def _blocked(kind: FindingKind, problems: Sequence[Problem], t: float, s: ReplaySettings) -> Problem | None:
    for p in problems:
        if p.blocking and _key(p.series) in EVIDENCE.get(kind, ()) and p.start <= t and p.end >= t - s.gap_window_s:
            return p
    return None


def replay(rec: Recording, s: ReplaySettings) -> Replay:
    """Evaluate the recording every ``interval_s`` of simulated time."""
    series: dict[str, Series] = {}
    problems: list[Problem] = []
    out = Replay(rec.name, problems, [])
    for name, (ts, vs) in sorted(rec.series.items()):
        clean, probs = check(name, ts, vs, s)
        if not known(name):
            problems.append(
                Problem(
                    name,
                    f"unknown metric {name!r} (known: {', '.join(KNOWN)}, rank_step_seconds.<rank>): "
                    "judged by the generic detector only, no action",
                    blocking=False,
                )
            )
            problems.extend(probs)
            if clean[1]:
                finite = clean[1]
                scores = score_series(finite, s.generic)
                out.generic[name] = [t for t, sc in zip(clean[0], scores, strict=True) if sc >= s.generic.flag_score]
            continue
        problems.extend(probs)
        if clean[0]:
            series[name] = clean
    if not series:
        return out
    t0 = min(ts[0] for ts, _ in series.values())
    t_end = max(ts[-1] for ts, _ in series.values())
    steps = series.get(flt.STEP_SECONDS, ([], []))[1]
    out.expected_step_s = statistics.median(steps) if steps else 0.0
    record = hist.Record(History())
    usd = _usd_per_1m(rec, series, s)
    if not (math.isfinite(s.interval_s) and s.interval_s > 0):
        raise ValueError(f"interval_s must be a positive number of seconds, got {s.interval_s}")
    samples = sorted({t for ts, _ in series.values() for t in ts})
    t = t0 + s.interval_s
    while t <= t_end + s.interval_s:
        i = bisect.bisect_right(samples, t - s.lookback_s)
        if i == len(samples) or samples[i] > t:  # nothing in the lookback window: skip to the next sample
            t += math.ceil((samples[min(i, len(samples) - 1)] - t) / s.interval_s) * s.interval_s
            if i == len(samples) or t > t_end + s.interval_s:
                break
            continue
        tick, record = _tick(rec, series, usd, problems, t, s, record)
        out.ticks.append(tick)
        t += s.interval_s
    return out


def _tick(  # noqa: PLR0917 (one evaluation's inputs, called from one place)
    rec: Recording,
    series: Mapping[str, Series],
    usd: Series,
    problems: Sequence[Problem],
    t: float,
    s: ReplaySettings,
    record: hist.Record,
) -> tuple[Tick, hist.Record]:
    start = t - s.lookback_s
    now = _utc(t)
    window = {name: _window(ser, start, t) for name, ser in series.items()}
    assessments: dict[str, Assessment] = {}
    for name in (fnd.STEP_SECONDS, fnd.TOKENS_PER_SECOND):
        ts, vs = window.get(name, ([], []))
        if vs:
            assessments[name] = assess(name, [_utc(x) for x in ts], vs, s.detector)
    ut, uv = _distinct(*_window(usd, start, t))  # a gauge held between processes is one observation
    commits = [(_commit_at(rec.commits, x) or Commit(0, "", {})).commit for x in ut]
    regression = commit_regression(ut, commits, uv, higher_is_worse=True)
    since = window.get(flt.SECONDS_SINCE_LAST_STEP, ([], []))[1]
    changes = [c.since for c in rec.commits[1:] if c.since <= t] + flt.restarts(window, t)
    training = flt.detect(window, t, s.faults, changes)
    found = fnd.classify(
        assessments,
        now=now,
        commit=regression,
        seconds_since_last_step=since[-1] if since else None,
        cost_usd=None,
        budget_usd=None,
        settings=s.findings,
        training=training,
    )
    notes: list[str] = []
    usable = []
    for f in found:
        p = _blocked(f.kind, problems, t, s)
        if p is None:
            usable.append(f)
        else:
            notes.append(f"{f.kind.value} not acted on: {p.series}: {p.message}")
    commit = _commit_at(rec.commits, t)
    spec = spec_for(commit)
    step = assessments.get(fnd.STEP_SECONDS)
    healthy = (
        step is not None
        and step.method is not Method.INSUFFICIENT
        and not any(f.kind is FindingKind.THROUGHPUT_REGRESSION for f in usable)
        and judged(ut, commits, uv)  # a new commit's settings are not good before its own records are judged
    )
    current = {k: spec[k] for k in SETTINGS_FIELDS if k in spec}
    record = hist.track_good_settings(record, current, healthy, now, timedelta(seconds=s.good_settle_s))
    decision = decide(
        mode=Mode.RECOMMEND,
        now=now,
        findings=usable,
        data_problem=None,
        job=JobView(1, spec),
        history=record.history,
        settings=s.policy,
        changes=[_utc(c) for c in changes],
    )
    intent = decision.recommend
    finding = None
    if intent is not None:
        finding = next((f.kind for f in usable if intent.reason.startswith(f.kind.value + " ")), None)
    message = "; ".join([decision.message, *notes])
    return Tick(t, tuple(found), intent.action if intent else None, finding, message), record


# ------------------------------------------------------------------------------------------ scoring


@dataclass(frozen=True)
class Window:
    start: float
    end: float
    fault_class: str


@dataclass(frozen=True)
class WindowScore:
    fault_class: str
    start: float
    end: float
    expected: str | None
    detected_at: float | None
    """First tick in the window with any finding (known series) or generic flag."""
    action_at: float | None
    """First tick in the window whose action is the expected one."""
    first_action: str | None
    """The first action taken in the window."""
    limit_s: float
    """max(300 s, 20 expected steps): the time allowed."""

    @property
    def caught(self) -> bool:
        """Detected with the right action in time."""
        return self.action_at is not None and self.action_at - self.start <= self.limit_s

    @property
    def delay_s(self) -> float | None:
        return None if self.action_at is None else self.action_at - self.start


@dataclass(frozen=True)
class SeriesScore:
    name: str
    windows: list[WindowScore]
    actions_outside: list[tuple[float, str]]
    """Action episodes (first tick, action) outside every labelled window (plus ``grace_s``)."""


def score(r: Replay, windows: Sequence[Window], *, grace_s: float = 60.0, min_limit_s: float = 300.0) -> SeriesScore:
    """Score a replay against its labelled windows (none: the series is clean)."""
    limit = max(min_limit_s, 20 * r.expected_step_s)
    out = []
    for w in windows:
        inside = [k for k in r.ticks if w.start <= k.t <= w.end + s_interval(r)]
        expected = EXPECTED_ACTION.get(w.fault_class)
        detected = next((k.t for k in inside if k.findings), None)
        generic = [t for ts in r.generic.values() for t in ts if w.start <= t <= w.end]
        if generic and (detected is None or min(generic) < detected):
            detected = min(generic)
        action_at = next((k.t for k in inside if expected is not None and k.action is expected), None)
        first = next((k.action.value for k in inside if k.action is not None), None)
        want = expected.value if expected else None
        out.append(WindowScore(w.fault_class, w.start, w.end, want, detected, action_at, first, limit))
    outside: list[tuple[float, str]] = []
    last: str | None = None
    for k in r.ticks:
        in_window = any(w.start <= k.t <= w.end + grace_s for w in windows)
        name = k.action.value if k.action is not None else None
        if name is not None and not in_window and name != last:
            outside.append((k.t, name))
        last = name if not in_window else None
    return SeriesScore(r.name, out, outside)


def s_interval(r: Replay) -> float:
    """The replay's tick spacing (0 with fewer than two ticks)."""
    return r.ticks[1].t - r.ticks[0].t if len(r.ticks) > 1 else 0.0
