"""Relative throughput per workload class and GPU family, learned from measured step times (pure).

A workload class is a set of jobs that do the same work per step (same model, same per-GPU
batch), so their step seconds compare across jobs: pods say which with the label
``statictrain.io/workload-class``; a job without one is a class of its own. Classes are
cluster-wide. Each refresh brings the mean step seconds of the jobs running now, per GPU
family; :class:`SpeedEstimator` keeps per (class, family) the latest figure of each job
(the last ``max_jobs`` jobs) and how many refreshes saw it, so what a class has shown
accumulates as its jobs come and go.

For a class, with ``n_f`` samples (refreshes that saw a job there, at most ``max_rounds``
per job) and ``s_f`` their weighted geometric mean step seconds on family ``f``::

    unit     = geometric mean of table_f * s_f over the measured families the table knows,
               weighted by n_f  (measured figures match the table on average where the class ran)
    measured = unit / s_f
    estimate = exp((k log table_f + n_f log measured_f) / (k + n_f))     k = prior_samples

so the table is the prior and measurements take over as samples accumulate. A family the
class never ran on keeps the table's figure (source ``inferred``: in the class's units).

Never learned from: seconds that are not finite and > 0 (the parser drops them), and a
job's figure more than ``outlier_factor`` off its (class, family)'s figure once that has
``min_jobs_for_outliers`` jobs (a stalled job reporting one step per hour). Rejections are
counted by reason for the extender's metrics.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from statictrain.throughput import DEFAULT_RELATIVE_THROUGHPUT, INFERRED, MEASURED, TABLE, JobThroughput

__all__ = ["ClassKey", "FamilyStats", "LearnedFigure", "SpeedEstimator", "class_key", "class_label"]

ClassKey = tuple[str, str, str]
"""("class", "", name) for a labelled workload class; ("job", namespace, job) otherwise."""

REJECT_OUTLIER = "outlier"
REJECT_UNLABELLED = "unlabelled"
REJECT_NOT_A_NUMBER = "not_a_number"
REJECT_NOT_POSITIVE = "not_positive"


def class_key(namespace: str, job: str, workload_class: str | None) -> ClassKey:
    """The learning key of a job's pods."""
    return ("class", "", workload_class) if workload_class else ("job", namespace, job)


def class_label(key: ClassKey) -> str:
    """How a class is named in metrics and reports: its name, or ``job:<namespace>/<job>``."""
    kind, namespace, name = key
    return name if kind == "class" else f"job:{namespace}/{name}"


@dataclass(slots=True)
class FamilyStats:
    """One (class, family): the latest step seconds and the rounds seen, per job (oldest first)."""

    jobs: OrderedDict[tuple[str, str], tuple[float, int]] = field(default_factory=OrderedDict)

    def samples(self, max_rounds: int) -> float:
        return float(sum(min(rounds, max_rounds) for _, rounds in self.jobs.values()))

    def mean_seconds(self, max_rounds: int) -> float:
        """Sample-weighted geometric mean of the jobs' step seconds."""
        weights = [(s, min(r, max_rounds)) for s, r in self.jobs.values()]
        total = sum(w for _, w in weights)
        return math.exp(sum(w * math.log(s) for s, w in weights) / total)


@dataclass(frozen=True, slots=True)
class LearnedFigure:
    """What the operator of the cluster sees per (class, family)."""

    key: ClassKey
    family: str
    estimate: float
    table: float | None
    samples: float
    jobs: int


@dataclass
class SpeedEstimator:
    """Accumulates step times per (class, family); gives each class's relative throughput."""

    table: Mapping[str, float] = field(default_factory=lambda: DEFAULT_RELATIVE_THROUGHPUT)
    prior_samples: float = 1.0
    max_rounds: int = 10
    max_jobs: int = 200
    max_classes: int = 1000
    outlier_factor: float = 10.0
    min_jobs_for_outliers: int = 3
    stats: OrderedDict[ClassKey, dict[str, FamilyStats]] = field(default_factory=OrderedDict)
    rejected: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not (self.prior_samples >= 0 and min(self.max_rounds, self.max_jobs, self.max_classes) >= 1):
            raise ValueError("SpeedEstimator needs prior_samples >= 0 and max_rounds, max_jobs, max_classes >= 1")
        if not self.outlier_factor > 1:
            raise ValueError(f"SpeedEstimator needs outlier_factor > 1, got {self.outlier_factor}")

    def observe(
        self,
        step_seconds: Mapping[tuple[str, str], Mapping[str, float]],
        class_of: Callable[[tuple[str, str]], ClassKey],
        skipped: Mapping[str, int] | None = None,
    ) -> set[ClassKey]:
        """One refresh: {(namespace, job): {family: mean step seconds}}, and the samples its parser skipped by
        reason (counted in ``rejected``); returns the classes that changed."""
        for reason, count in (skipped or {}).items():
            self._reject(reason, count)
        changed: set[ClassKey] = set()
        for job, families in step_seconds.items():
            key = class_of(job)
            if key in self.stats:
                self.stats.move_to_end(key)
            for family, seconds in families.items():
                if not (math.isfinite(seconds) and seconds > 0):
                    self._reject(REJECT_NOT_A_NUMBER if not math.isfinite(seconds) else REJECT_NOT_POSITIVE)
                    continue
                stats = self.stats.setdefault(key, {}).setdefault(family, FamilyStats())
                if self._outlier(stats, job, seconds):
                    self._reject(REJECT_OUTLIER)
                    continue
                _, rounds = stats.jobs.pop(job, (seconds, 0))
                stats.jobs[job] = (seconds, rounds + 1)
                while len(stats.jobs) > self.max_jobs:
                    stats.jobs.popitem(last=False)
                changed.add(key)
        while len(self.stats) > self.max_classes:  # the class measured longest ago is forgotten
            self.stats.popitem(last=False)
        return changed

    def _outlier(self, stats: FamilyStats, job: tuple[str, str], seconds: float) -> bool:
        others = {j: v for j, v in stats.jobs.items() if j != job}
        if len(others) < self.min_jobs_for_outliers:
            return False
        typical = FamilyStats(OrderedDict(others)).mean_seconds(self.max_rounds)
        return not typical / self.outlier_factor <= seconds <= typical * self.outlier_factor

    def _reject(self, reason: str, count: int = 1) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + count

    def throughput(self, key: ClassKey) -> JobThroughput | None:
        """The class's relative throughput per family with sources; None before any measurement."""
        families = self.stats.get(key)
        if not families:
            return None
        n = {f: s.samples(self.max_rounds) for f, s in families.items()}
        secs = {f: s.mean_seconds(self.max_rounds) for f, s in families.items()}
        anchors = [f for f in families if f in self.table]
        if anchors:
            total = sum(n[f] for f in anchors)
            log_unit = sum(n[f] * math.log(self.table[f] * secs[f]) for f in anchors) / total
        else:
            log_unit = 0.0
        relative = dict(self.table)
        sources = dict.fromkeys(self.table, INFERRED if anchors else TABLE)
        k = self.prior_samples
        for family in families:
            measured = log_unit - math.log(secs[family])
            prior = self.table.get(family)
            if prior is None:
                relative[family] = math.exp(measured)
            else:
                relative[family] = math.exp((k * math.log(prior) + n[family] * measured) / (k + n[family]))
            sources[family] = MEASURED
        return JobThroughput(relative, sources)

    def figures(self, keys: Iterable[ClassKey] | None = None) -> list[LearnedFigure]:
        """Per (class, family) measured so far: estimate, table figure, samples and jobs."""
        out = []
        for key in sorted(self.stats if keys is None else keys):
            estimates = self.throughput(key)
            if estimates is None:
                continue
            for family, stats in sorted(self.stats[key].items()):
                out.append(
                    LearnedFigure(
                        key,
                        family,
                        estimates.relative[family],
                        self.table.get(family),
                        stats.samples(self.max_rounds),
                        len(stats.jobs),
                    )
                )
        return out
