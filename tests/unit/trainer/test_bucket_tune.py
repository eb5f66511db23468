from __future__ import annotations

import math

from statictrain_trainer.bucket_tune import SIZES_MB, BucketOutcome, candidates, pick


def test_candidates_start_with_the_job_size() -> None:
    assert candidates(25) == [25, 50, 100, 200]
    assert candidates(64) == [64, *SIZES_MB]


def test_pick_fastest_and_explain() -> None:
    outcomes = [BucketOutcome(25, 0.120), BucketOutcome(50, 0.110), BucketOutcome(100, math.nan)]
    chosen, reason = pick(outcomes, 25)
    assert chosen == 50
    assert "bucket_cap_mb 50 is fastest" in reason and "25 MB: 120.0 ms" in reason


def test_pick_keeps_job_size_when_nothing_measured() -> None:
    chosen, reason = pick([BucketOutcome(25, math.nan)], 25)
    assert chosen == 25 and "kept" in reason
