"""The per-commit baseline: is the commit running now worse, per unit of work, than the last good one? Pure.

Records come in time order, each labelled with the commit that produced it. They form runs: maximal
stretches of one commit (c1 c1 c2 c2 c1 is three runs). Runs are judged in order against the last good
run before them: the first run is good; a later run is good unless it is a regression against the good
run before it. Only the newest run (the commit running now) can be reported, so a finding ends when its
commit stops running (a rollback, a fix), and a bad commit never becomes the baseline of the next one.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from statictrain_operator.anomaly.detector import robust_baseline

__all__ = ["MIN_POINTS", "CommitRegression", "Run", "commit_regression", "judged", "runs"]

MIN_POINTS = 5
"""Fewest records of a run to judge it (shorter runs are too short to say)."""


@dataclass(frozen=True)
class CommitRegression:
    """The commit running now is worse than the last good one."""

    commit: str
    """The running commit."""
    previous: str
    """The last good commit it is compared with."""
    ratio: float
    """How many times worse (current median over the good one's for 'higher is worse' series; inverted otherwise)."""
    z: float
    """Shift in robust standard deviations of the good run's records."""
    since: float
    """When the running commit's run started (its first record's time): the episode start."""

    @property
    def message(self) -> str:
        """Evidence in words."""
        return (
            f"commit {self.commit} is {self.ratio:.2f}x worse per unit of work than {self.previous}, "
            f"the last good commit ({self.z:+.1f} robust sd)"
        )


@dataclass(frozen=True)
class Run:
    """A maximal stretch of records of one commit."""

    commit: str
    start: float
    values: tuple[float, ...]


def runs(times: Sequence[float], commits: Sequence[str], ys: Sequence[float]) -> list[Run]:
    """The runs of finite records, in time order (records with equal times keep their given order)."""
    if not len(times) == len(commits) == len(ys):
        raise ValueError(f"{len(times)} times, {len(commits)} commit labels and {len(ys)} values")
    out: list[Run] = []
    for t, c, v in sorted(zip(times, commits, ys, strict=True), key=lambda r: r[0]):
        if not math.isfinite(v):
            continue
        if out and out[-1].commit == c:
            out[-1] = Run(c, out[-1].start, (*out[-1].values, v))
        else:
            out.append(Run(c, t, (v,)))
    return out


def _worse(run: Run, good: Run, *, higher_is_worse: bool, min_ratio: float, min_z: float) -> tuple[float, float] | None:
    """(ratio, z) when ``run`` is a regression against ``good``; None when it is not or cannot be judged."""
    good_med, good_sd = robust_baseline(good.values, 0.01)
    cur = statistics.median(run.values)
    if good_med <= 0 or cur <= 0:
        return None
    ratio = cur / good_med if higher_is_worse else good_med / cur
    z = (cur - good_med) / good_sd * (1 if higher_is_worse else -1)
    return (ratio, z) if ratio >= min_ratio and z >= min_z else None


def commit_regression(
    times: Sequence[float],
    commits: Sequence[str],
    ys: Sequence[float],
    *,
    higher_is_worse: bool,
    min_points: int = MIN_POINTS,
    min_ratio: float = 1.2,
    min_z: float = 4.0,
) -> CommitRegression | None:
    """The running commit's regression against the last good commit, or None.

    A regression is a median worse by ``min_ratio`` and by ``min_z`` robust standard deviations of the
    good run's records. Runs with fewer than ``min_points`` records are too short to say: an earlier one is
    skipped, a short running one is not judged yet."""
    judge = partial(_worse, higher_is_worse=higher_is_worse, min_ratio=min_ratio, min_z=min_z)
    every = runs(times, commits, ys)
    current = every[-1] if every else None
    earlier = [r for r in every[:-1] if len(r.values) >= min_points]
    if current is None or len(current.values) < min_points or not earlier:
        return None
    good = earlier[0]
    for run in earlier[1:]:
        if judge(run, good) is None:
            good = run
    if current.commit == good.commit:
        return None
    found = judge(current, good)
    if found is None:
        return None
    return CommitRegression(current.commit, good.commit, found[0], found[1], current.start)


def judged(
    times: Sequence[float], commits: Sequence[str], ys: Sequence[float], *, min_points: int = MIN_POINTS
) -> bool:
    """Whether the running commit could have been found a regression yet: its run holds ``min_points``
    records, or no records carry a commit (nothing to judge by). Settings count as good only once judged:
    a regression that takes longer to show than the settle time must not become the revert target."""
    every = runs(times, commits, ys)
    return not every or len(every[-1].values) >= min_points
