"""Report building (pure): counter series -> rows per group, totals, time buckets, invariant.

Each input series holds, per counter, its last value before the window stamped
at the first evaluation point ``start - 1 ms`` (absent when the counter did not
exist yet), then its last raw values inside the window, each stamped at the time
it stands for (see ``fetch``), the last one at ``end - 1 ms``. A value counts in
the bucket whose end is nearest its stamp (the first bucket at least). Increases
between them cover exactly ``[start, end)``. A series without a value at the
first evaluation point started inside the window and counts from zero. A drop is
a counter reset (operator restart).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Context, Decimal
from typing import Literal

from statictrain import metrics
from statictrain.cost import Sample
from statictrain_operator.prom import Series

__all__ = [
    "EPSILON_S",
    "FLAGS_METRIC",
    "GROUP_LABELS",
    "JOB_METRICS",
    "NODE_METRICS",
    "EmptyWindowError",
    "GroupBy",
    "Report",
    "ReportWindow",
    "Row",
    "build_report",
    "fmt_time",
    "money",
    "parse_utc",
]

GroupBy = Literal["job", "commit", "team", "namespace"]
GROUP_LABELS: Mapping[GroupBy, tuple[str, ...]] = {
    "job": ("namespace", "job_name"),
    "commit": ("commit",),
    "team": ("team",),
    "namespace": ("namespace",),
}
EPSILON_S = 0.001

JOB_METRICS = {
    "usd": metrics.JOB_COST_USD_TOTAL,
    "gpu_usd": metrics.JOB_GPU_COST_USD_TOTAL,
    "cpu_usd": metrics.JOB_CPU_COST_USD_TOTAL,
    "memory_usd": metrics.JOB_MEMORY_COST_USD_TOTAL,
    "lost_steps": metrics.JOB_LOST_STEPS_TOTAL,
    "idle_usd": metrics.JOB_IDLE_COST_USD_TOTAL,
    "compile_usd": metrics.JOB_COMPILE_COST_USD_TOTAL,
    "lost_usd": metrics.JOB_LOST_WORK_COST_USD_TOTAL,
    "gpu_seconds": metrics.JOB_GPU_SECONDS_TOTAL,
    "tokens": metrics.JOB_TOKENS_TOTAL,
    "executed_steps": metrics.JOB_STEPS_TOTAL,
    "gpu_energy_j": metrics.JOB_GPU_ENERGY_JOULES_TOTAL,
    "carbon_g": metrics.JOB_CARBON_GRAMS_TOTAL,
}
FLAGS_METRIC = metrics.JOB_COST_FLAGS_TOTAL
"""Accounting windows in which a job's cost data had a problem, per flag (label ``flag``)."""
NODE_METRICS = {
    "node_usd": metrics.NODE_COST_USD_TOTAL,
    "node_idle_usd": metrics.NODE_IDLE_COST_USD_TOTAL,
    "node_allocated_usd": metrics.NODE_ALLOCATED_COST_USD_TOTAL,
    "invariant_failures": metrics.COST_INVARIANT_FAILURES_TOTAL,
}
INVARIANT_TOLERANCE = 1e-6
"""Relative tolerance of (jobs + idle) / nodes = 1 in a report (float sums of exported counters)."""


class EmptyWindowError(ValueError):
    """No cost data in the window."""


@dataclass(frozen=True)
class ReportWindow:
    start: datetime
    end: datetime
    buckets: int = 24

    def __post_init__(self) -> None:
        for name, t in (("start", self.start), ("end", self.end)):
            if t.tzinfo is None or t.utcoffset() != timedelta(0):
                raise ValueError(f"window {name} {t.isoformat()} must be UTC, e.g. 2026-03-01T00:00:00Z")
        if self.end <= self.start:
            raise ValueError(f"window end {fmt_time(self.end)} must be after its start {fmt_time(self.start)}")
        if not 1 <= self.buckets <= 100_000:
            raise ValueError("buckets must be within 1..100000")
        if self.step_s < 0.001:
            raise ValueError(
                f"buckets of {self.step_s * 1000:g} ms are shorter than Prometheus' resolution (1 ms); "
                "use fewer buckets"
            )

    @property
    def step_s(self) -> float:
        return (self.end - self.start).total_seconds() / self.buckets

    @property
    def eval_start(self) -> float:
        """``start - 1 ms`` on Prometheus' millisecond grid."""
        return _ms(self.start) - EPSILON_S

    @property
    def eval_end(self) -> float:
        """``end - 1 ms`` on Prometheus' millisecond grid."""
        return _ms(self.end) - EPSILON_S

    def bucket_starts(self) -> list[datetime]:
        step = timedelta(seconds=self.step_s)
        return [self.start + i * step for i in range(self.buckets)]


def _ms(t: datetime) -> float:
    """``t`` as seconds, rounded to whole milliseconds (Prometheus' time resolution)."""
    return round(t.timestamp() * 1000) / 1000


def parse_utc(text: str) -> datetime:
    """Parse an RFC 3339 time with an explicit UTC offset (``Z`` or ``+00:00``)."""
    try:
        t = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is not an RFC 3339 time; write it like 2026-03-01T00:00:00Z") from None
    if t.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone; add Z for UTC, e.g. 2026-03-01T00:00:00Z")
    return t.astimezone(UTC)


def fmt_time(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _deltas(samples: Sequence[Sample], first_eval: float, step: float, buckets: int) -> list[float]:
    """Per-bucket increase of one counter series (reset-aware, never negative)."""
    out = [0.0] * buckets
    pts = sorted(samples, key=lambda s: s.t)
    if not pts:
        return out
    prev: float | None = 0.0 if pts[0].t > first_eval else None
    for s in pts:
        idx = max(round((s.t - first_eval) / step), 1) if s.t > first_eval else 0
        if prev is not None and 1 <= idx <= buckets:
            out[idx - 1] += s.v - prev if s.v >= prev else max(s.v, 0.0)
        prev = s.v
    return out


@dataclass
class Row:
    key: tuple[str, ...]
    usd: float = 0.0
    gpu_usd: float = 0.0
    cpu_usd: float = 0.0
    memory_usd: float = 0.0
    lost_steps: float = 0.0
    idle_usd: float = 0.0
    compile_usd: float = 0.0
    lost_usd: float = 0.0
    gpu_seconds: float = 0.0
    tokens: float = 0.0
    executed_steps: float = 0.0
    """Steps executed, recomputed ones included (mean over ranks)."""
    gpu_energy_j: float = 0.0
    """GPU energy, joules (the sidecars' energy counters; CPU and memory not counted)."""
    carbon_g: float = 0.0
    """Carbon of that energy (x PUE x grid intensity), gCO2e."""
    flags: dict[str, float] = field(default_factory=dict)
    """Flag (e.g. utilization-gaps, node-price-annotation-invalid) -> accounting windows that raised it."""

    @property
    def steps(self) -> float:
        """Useful steps: executed minus computed again after restarts."""
        return self.executed_steps - self.lost_steps

    @property
    def usd_per_1m_tokens(self) -> float | None:
        return self.usd / self.tokens * 1e6 if self.tokens > 0 else None

    @property
    def usd_per_step(self) -> float | None:
        return self.usd / self.steps if self.steps > 0 else None


@dataclass
class Report:
    window: ReportWindow
    group_by: GroupBy
    filters: Mapping[str, Sequence[str]]
    rows: list[Row]
    node_usd: float
    node_idle_usd: float
    namespace_buckets: dict[str, list[float]] = field(default_factory=dict)
    commit_tokens: dict[str, tuple[float, float]] = field(default_factory=dict)
    """commit -> (usd, tokens) for the $/1M tokens chart."""
    invariant_failures: dict[str, float] = field(default_factory=dict)
    """invariant -> accounting windows in the report window that failed it (operator's own checks)."""
    job_buckets: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    """(namespace, job_name) -> cost per bucket, whatever the report is grouped by."""
    job_commits: dict[tuple[str, str], str] = field(default_factory=dict)
    """(namespace, job_name) -> its commit label."""
    job_fields: dict[tuple[str, str], dict[str, list[float]]] = field(default_factory=dict)
    """(namespace, job_name) -> Row field -> its value per bucket (the FOCUS export's rows)."""
    job_labels: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    """(namespace, job_name) -> the job's labels: commit and team from its metrics, all of them from its
    object when the report comes from statuses."""
    nodes: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    """node -> node_usd / node_idle_usd / node_allocated_usd per bucket."""

    @property
    def jobs_usd(self) -> float:
        return sum(r.usd for r in self.rows)

    @property
    def invariant_ratio(self) -> float | None:
        """(jobs + idle) / node cost; None when there is no node cost or the report is filtered."""
        if self.node_usd <= 0 or any(self.filters.values()):
            return None
        return (self.jobs_usd + self.node_idle_usd) / self.node_usd

    def failed_invariants(self) -> list[str]:
        """Invariants that failed in the window: the operator's per-window checks, and (unfiltered
        reports) jobs + idle = nodes on the exported totals."""
        out = [f"{name} ({n:g} windows)" for name, n in sorted(self.invariant_failures.items()) if n > 0]
        ratio = self.invariant_ratio
        if ratio is not None and abs(ratio - 1) > INVARIANT_TOLERANCE:
            out.append(f"jobs-plus-idle-equals-node (report totals: {ratio:.6f})")
        return out

    @property
    def idle_share(self) -> float | None:
        if self.node_usd <= 0:
            return None
        return (self.node_idle_usd + sum(r.idle_usd for r in self.rows)) / self.node_usd


def build_report(
    window: ReportWindow,
    group_by: GroupBy,
    job_series: Mapping[str, Iterable[Series]],
    node_series: Mapping[str, Iterable[Series]],
    *,
    filters: Mapping[str, Sequence[str]] | None = None,
) -> Report:
    """Aggregate counter increases per group; raises EmptyWindowError when nothing was recorded."""
    step, first = window.step_s, window.eval_start
    rows: dict[tuple[str, ...], Row] = {}
    ns_buckets: dict[str, list[float]] = defaultdict(lambda: [0.0] * window.buckets)
    commit: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    job_buckets: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0] * window.buckets)
    job_commits: dict[tuple[str, str], str] = {}
    job_fields: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(dict)
    job_labels: dict[tuple[str, str], dict[str, str]] = {}
    seen_any = False
    for field_name in JOB_METRICS:
        for s in job_series.get(field_name, ()):
            seen_any = seen_any or bool(s.samples)
            d = _deltas(s.samples, first, step, window.buckets)
            total = math.fsum(d)
            key = tuple(s.labels.get(lbl, "") for lbl in GROUP_LABELS[group_by])
            row = rows.setdefault(key, Row(key))
            setattr(row, field_name, getattr(row, field_name) + total)
            jk = (s.labels.get("namespace", ""), s.labels.get("job_name", ""))
            per_bucket = job_fields[jk].setdefault(field_name, [0.0] * window.buckets)
            for i, v in enumerate(d):
                per_bucket[i] += v
            job_labels[jk] = {"commit": s.labels.get("commit", ""), "team": s.labels.get("team", "")}
            if field_name == "usd":
                ns = ns_buckets[s.labels.get("namespace", "")]
                for i, v in enumerate(d):
                    ns[i] += v
                commit[s.labels.get("commit", "")][0] += total
                job_buckets[jk] = [a + b for a, b in zip(job_buckets[jk], d, strict=True)]
                job_commits[jk] = s.labels.get("commit", "")
            elif field_name == "tokens":
                commit[s.labels.get("commit", "")][1] += total
    for s in job_series.get("flags", ()):
        n = math.fsum(_deltas(s.samples, first, step, window.buckets))
        key = tuple(s.labels.get(lbl, "") for lbl in GROUP_LABELS[group_by])
        if n > 0 and key in rows:
            flag = s.labels.get("flag", "")
            rows[key].flags[flag] = rows[key].flags.get(flag, 0.0) + n
    node_totals = {"node_usd": 0.0, "node_idle_usd": 0.0, "node_allocated_usd": 0.0}
    nodes: dict[str, dict[str, list[float]]] = defaultdict(dict)
    failures: dict[str, float] = {}
    for field_name in NODE_METRICS:
        for s in node_series.get(field_name, ()):
            d = _deltas(s.samples, first, step, window.buckets)
            total = math.fsum(d)
            if field_name == "invariant_failures":
                name = s.labels.get("invariant", "")
                failures[name] = failures.get(name, 0.0) + total
                continue
            seen_any = seen_any or bool(s.samples)
            node_totals[field_name] += total
            per_bucket = nodes[s.labels.get("node", "")].setdefault(field_name, [0.0] * window.buckets)
            for i, v in enumerate(d):
                per_bucket[i] += v
    if not seen_any:
        raise EmptyWindowError(
            f"no cost data in [{fmt_time(window.start)}, {fmt_time(window.end)}): Prometheus holds no "
            "statictrain cost series there; check the window and that the operator's metrics are scraped"
        )
    ordered = sorted(rows.values(), key=lambda r: (-round(r.usd, 9), r.key))
    return Report(
        window=window,
        group_by=group_by,
        filters=dict(filters or {}),
        rows=ordered,
        node_usd=node_totals["node_usd"],
        node_idle_usd=node_totals["node_idle_usd"],
        namespace_buckets=dict(sorted(ns_buckets.items())),
        commit_tokens={k: (v[0], v[1]) for k, v in sorted(commit.items())},
        invariant_failures=failures,
        job_buckets=dict(sorted(job_buckets.items())),
        job_commits=dict(sorted(job_commits.items())),
        job_fields=dict(sorted(job_fields.items())),
        job_labels=dict(sorted(job_labels.items())),
        nodes=dict(sorted(nodes.items())),
    )


def fixed(value: float, places: int) -> Decimal:
    """``value`` (finite) rounded to ``places`` decimals, with the precision its size needs: a derived
    figure of 1e200 (a dollar over 1e-194 tokens) does not fit the default 28 digits."""
    d = Decimal(repr(value))
    return d.quantize(Decimal(1).scaleb(-places), context=Context(prec=max(28, d.adjusted() + places + 2)))


def money(value: float, places: int = 6) -> str:
    """A float total rendered as a fixed decimal string (reports only; the API never holds floats)."""
    return f"{fixed(value, places):f}" if math.isfinite(value) else ""
