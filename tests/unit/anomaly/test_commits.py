"""The per-commit baseline: the running commit against the last good one (commits.py)."""

from __future__ import annotations

import random

import pytest
from statictrain_operator.anomaly.commits import commit_regression, judged, runs


def _noisy(n: int, level: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [level + rng.gauss(0, 0.005) for _ in range(n)]


def _judge(plan: list[tuple[str, float, int]]) -> tuple[str, str, float] | None:
    """(commit, level of $ per unit of work, records) in time order -> (commit, previous, since) or None."""
    commits: list[str] = []
    ys: list[float] = []
    for i, (c, level, n) in enumerate(plan):
        commits += [c] * n
        ys += _noisy(n, level, seed=i)
    got = commit_regression([float(t) for t in range(len(ys))], commits, ys, higher_is_worse=True)
    return None if got is None else (got.commit, got.previous, got.since)


@pytest.mark.parametrize(
    ("plan", "want"),
    [
        ([("c1", 0.10, 30), ("c2", 0.30, 10)], ("c2", "c1", 30.0)),
        ([("c1", 0.10, 30), ("c2", 0.11, 10)], None),
        ([("c1", 0.10, 30), ("c2", 0.05, 10)], None),
        # the rollback: c1 runs again, nothing is wrong any more (was: "c2 is 3x worse than c1" forever)
        ([("c1", 0.10, 30), ("c2", 0.30, 10), ("c1", 0.10, 10)], None),
        # a bad commit never becomes the baseline: c3 is as bad as c2, and compared with c1
        ([("c1", 0.10, 30), ("c2", 0.30, 10), ("c3", 0.30, 10)], ("c3", "c1", 40.0)),
        # ... and a good one does: c3 is judged against c2, the faster one
        ([("c1", 0.10, 30), ("c2", 0.05, 10), ("c3", 0.10, 10)], ("c3", "c2", 40.0)),
        # back on the first commit after a bad one, then a regression of its own again
        ([("c1", 0.10, 20), ("c2", 0.30, 10), ("c1", 0.10, 10), ("c4", 0.40, 10)], ("c4", "c1", 40.0)),
        # too few records: an earlier short run is skipped, a short running one is not judged yet
        ([("c1", 0.10, 30), ("c2", 0.30, 2), ("c3", 0.10, 10)], None),
        ([("c1", 0.10, 30), ("c2", 0.30, 4)], None),
        ([("c1", 0.10, 30)], None),
    ],
    ids=[
        "3x-worse-flagged-from-its-first-record",
        "10pct-noise-not-flagged",
        "better-not-flagged",
        "rollback-to-the-good-commit-ends-the-finding",
        "bad-commit-is-not-the-next-baseline",
        "good-commit-is-the-next-baseline",
        "regression-after-a-rollback",
        "short-earlier-run-skipped",
        "short-running-commit-not-judged-yet",
        "one-commit",
    ],
)
def test_running_commit_against_the_last_good_one(
    plan: list[tuple[str, float, int]], want: tuple[str, str, float] | None
) -> None:
    assert _judge(plan) == want


def test_runs_are_in_time_order_and_skip_non_finite_records() -> None:
    got = runs([3.0, 1.0, 2.0, 4.0], ["b", "a", "a", "b"], [1.0, 2.0, float("nan"), 3.0])
    assert [(r.commit, r.start, r.values) for r in got] == [("a", 1.0, (2.0,)), ("b", 3.0, (1.0, 3.0))]
    with pytest.raises(ValueError, match="commit labels"):
        runs([1.0], ["a", "b"], [1.0])


@pytest.mark.parametrize(
    ("plan", "want"),
    [
        ([("c1", 0.10, 30)], True),
        ([("c1", 0.10, 30), ("c2", 0.30, 4)], False),  # c2 could not have been found bad yet
        ([("c1", 0.10, 30), ("c2", 0.30, 5)], True),
        ([], True),  # no per-commit records: nothing to judge by
    ],
)
def test_settings_are_judged_only_once_the_running_commit_has_enough_records(
    plan: list[tuple[str, float, int]], want: bool
) -> None:
    commits = [c for c, _, n in plan for _ in range(n)]
    ys = [y for i, (_, level, n) in enumerate(plan) for y in _noisy(n, level, seed=i)]
    assert judged([float(t) for t in range(len(ys))], commits, ys) is want
