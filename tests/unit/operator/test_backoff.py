"""Backoff: waits double per failure in a row, jittered in their upper half, bounded, reset by a success."""

from __future__ import annotations

import itertools
import random

import pytest
from statictrain_operator.backoff import Backoff, Retries, wait_s


def test_waits_double_within_the_upper_half_and_stop_growing_at_the_bound() -> None:
    rng = random.Random(1)
    for n, ceiling in [(1, 2.0), (2, 4.0), (3, 8.0), (4, 16.0), (5, 30.0), (6, 30.0), (500, 30.0)]:
        for _ in range(50):
            assert ceiling / 2 <= wait_s(n, 2.0, 30.0, rng) <= ceiling


def test_jitter_spreads_the_waits_of_keys_that_failed_together() -> None:
    b = Backoff(base_s=1.0, max_s=60.0, rng=random.Random(3))
    waits = {b.failed(("ns", f"job-{i}")) for i in range(20)}
    assert len(waits) == 20 and min(waits) >= 0.5 and max(waits) <= 1.0


def test_a_success_resets_only_that_key() -> None:
    b = Backoff(base_s=1.0, max_s=60.0, rng=random.Random(0))
    for _ in range(5):
        b.failed("a")
        b.failed("b")
    assert b.failed("a") >= 16  # 6th failure in a row: ceiling 32
    b.succeeded("a")
    assert b.failed("a") <= 1.0
    assert b.failed("b") >= 16


def test_bad_bounds_and_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="0 < base"):
        Backoff(base_s=5.0, max_s=1.0)
    with pytest.raises(ValueError, match="counts from 1"):
        wait_s(0, 1.0, 2.0, random.Random())


def test_kopf_retries_never_end_and_each_request_starts_again() -> None:
    retries = Retries(base_s=1.0, max_s=30.0)
    first = list(itertools.islice(retries, 100))
    assert len(first) == 100 and all(15 <= w <= 30 for w in first[10:])
    again = next(iter(retries))
    assert 0.5 <= again <= 1.0  # a new request starts from the base, not where the last one stopped
    assert not hasattr(retries, "__len__")  # kopf counts tries only of sized series; this one has no end
