"""Training metrics from the channel, read through the collector with a fake clock."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from statictrain import metrics
from statictrain.channel import StepRecord, encode
from statictrain_sidecar.training import STEP_SECONDS_BUCKETS, TrainingState


def write(path: Any, *records: StepRecord, extra: str = "") -> None:
    with path.open("a") as f:
        for r in records:
            f.write(encode(r))
        f.write(extra)


def test_every_training_metric_from_records(rig: Any, tmp_path: Path, clock: Any) -> None:
    r = rig(None, stats_dir=tmp_path)
    steps = tmp_path / "steps.jsonl"
    write(
        steps,
        StepRecord(step=1, step_seconds=30.0, tokens=1000, samples=4, loss=5.0, compile_seconds=28.0),
        StepRecord(
            step=2,
            step_seconds=0.5,
            tokens=1000,
            samples=4,
            loss=4.0,
            compile_seconds=28.0,
            cache_hit=True,
            cache_status="hit",
            graph_breaks=2,
            recompiles=1,
            mfu=0.42,
        ),
    )
    clock.advance(3.0)
    assert r.value(metrics.TRAIN_STEP) == 2
    assert r.value(metrics.TRAIN_STEPS_TOTAL) == 2
    assert r.value(metrics.TRAIN_TOKENS_TOTAL) == 2000
    assert r.value(metrics.TRAIN_SAMPLES_TOTAL) == 8
    assert r.value(metrics.TRAIN_TOKENS_PER_SECOND) == pytest.approx(2000 / 30.5)
    assert r.value(metrics.TRAIN_LOSS) == 4.0
    assert r.value(metrics.TRAIN_COMPILE_SECONDS) == 28.0
    assert r.value(metrics.TRAIN_COMPILE_CACHE_HIT) == 1
    assert r.value(metrics.TRAIN_COMPILE_CACHE_STATUS, status="hit") == 1
    assert r.value(metrics.TRAIN_GRAPH_BREAKS) == 2
    assert r.value(metrics.TRAIN_RECOMPILES) == 1
    assert r.value(metrics.TRAIN_MFU_RATIO) == 0.42
    assert r.value(f"{metrics.TRAIN_STEP_SECONDS}_count") == 2
    assert r.value(f"{metrics.TRAIN_STEP_SECONDS}_sum") == 30.5
    assert r.value(f"{metrics.TRAIN_STEP_SECONDS}_bucket", le="0.5") == 1
    assert r.value(f"{metrics.TRAIN_STEP_SECONDS}_bucket", le="10.0") == 1
    assert r.value(f"{metrics.TRAIN_STEP_SECONDS}_bucket", le="30.0") == 2
    assert r.value(f"{metrics.TRAIN_STEP_SECONDS}_bucket", le="+Inf") == 2
    assert r.value(metrics.TRAIN_SECONDS_SINCE_LAST_STEP) == 0.0  # read at this scrape
    clock.advance(42.0)
    assert r.value(metrics.TRAIN_SECONDS_SINCE_LAST_STEP) == 42.0
    assert r.value(metrics.CHANNEL_MALFORMED_TOTAL) == 0


def test_stall_counts_from_start_before_a_first_step(rig: Any, tmp_path: Path, clock: Any) -> None:
    r = rig(None, stats_dir=tmp_path)
    clock.advance(90.0)
    assert r.value(metrics.TRAIN_SECONDS_SINCE_LAST_STEP) == 90.0
    assert r.value(metrics.TRAIN_STEPS_TOTAL) == 0
    assert r.value(metrics.TRAIN_STEP) is None
    assert r.value(metrics.TRAIN_LOSS) is None


def test_malformed_records_are_counted_never_fatal(rig: Any, tmp_path: Path) -> None:
    r = rig(None, stats_dir=tmp_path)
    write(
        tmp_path / "steps.jsonl",
        StepRecord(step=1, step_seconds=1.0),
        extra='{"v": 1, "step": 2\nnull\n{"v": 2000, "step": 3, "step_seconds": 1}\n',
    )
    write(tmp_path / "steps.jsonl", StepRecord(step=4, step_seconds=1.0))
    assert r.value(metrics.CHANNEL_MALFORMED_TOTAL) == 3
    assert r.value(metrics.TRAIN_STEP) == 4
    assert r.value(metrics.TRAIN_STEPS_TOTAL) == 2


def test_unknown_loss_and_mfu_are_absent_but_a_diverged_loss_is_nan(rig: Any, tmp_path: Path) -> None:
    r = rig(None, stats_dir=tmp_path)
    write(tmp_path / "steps.jsonl", StepRecord(step=1, step_seconds=1.0))
    assert r.value(metrics.TRAIN_LOSS) is None
    assert r.value(metrics.TRAIN_MFU_RATIO) is None
    write(
        tmp_path / "steps.jsonl",
        StepRecord(step=2, step_seconds=1.0, loss=3.0),
        StepRecord(step=3, step_seconds=1.0, loss=math.nan),
    )
    loss = r.value(metrics.TRAIN_LOSS)
    assert loss is not None and math.isnan(loss)


def test_without_a_channel_only_the_malformed_counter_is_exported(rig: Any) -> None:
    r = rig(None)
    training = {n for n in r.names() if n.startswith("statictrain_train_")}
    assert training == set()
    assert r.value(metrics.CHANNEL_MALFORMED_TOTAL) == 0


@pytest.mark.parametrize(
    ("seconds", "first_bucket"),
    [(0.0, 0.005), (0.005, 0.005), (0.0051, 0.01), (1.0, 1.0), (299.0, 300.0), (301.0, math.inf)],
    ids=["zero", "on-a-bound", "just-above", "one-second", "below-last", "beyond-last"],
)
def test_histogram_bucket_bounds_are_inclusive(seconds: Any, first_bucket: Any) -> None:
    s = TrainingState(started_at=0.0)
    s.add(StepRecord(step=1, step_seconds=seconds), now=1.0)
    snap = s.snapshot(now=1.0)
    bounds = [*STEP_SECONDS_BUCKETS, math.inf]
    got = next(b for b, c in zip(bounds, snap.bucket_counts, strict=True) if c == 1)
    assert got == first_bucket
    assert snap.bucket_counts[-1] == 1


def test_tokens_per_second_uses_the_recent_window() -> None:
    s = TrainingState(started_at=0.0, rate_window=2)
    s.add(StepRecord(step=1, step_seconds=10.0, tokens=100), now=1.0)
    s.add(StepRecord(step=2, step_seconds=1.0, tokens=1000), now=2.0)
    s.add(StepRecord(step=3, step_seconds=1.0, tokens=3000), now=3.0)
    assert s.snapshot(now=3.0).tokens_per_second == pytest.approx(2000.0)


def test_an_unreadable_channel_costs_no_scrape(rig: Any, tmp_path: Path) -> None:
    (tmp_path / "steps.jsonl").mkdir()  # reading a directory raises an OSError
    r = rig(None, stats_dir=tmp_path)
    assert r.value(metrics.TRAIN_STEPS_TOTAL) == 0
    assert r.value(metrics.GPU_AVAILABLE, reason="nvml_missing") == 0


def test_per_rank_local_step_seconds_are_exported_by_rank(rig: Any, tmp_path: Path) -> None:
    r = rig(None, stats_dir=tmp_path)
    write(tmp_path / "steps.jsonl", StepRecord(step=1, step_seconds=1.0))
    assert r.value(metrics.TRAIN_RANK_STEP_SECONDS, rank="0") is None  # an older trainer: absent
    write(
        tmp_path / "steps.jsonl",
        StepRecord(step=2, step_seconds=0.2, world_size=2, rank_seconds=(0.05, 0.15)),
    )
    assert r.value(metrics.TRAIN_RANK_STEP_SECONDS, rank="0") == 0.05
    assert r.value(metrics.TRAIN_RANK_STEP_SECONDS, rank="1") == 0.15


def test_rank_seconds_round_trip_the_channel_and_bad_ones_are_malformed() -> None:
    from statictrain.channel import MalformedRecord, decode  # noqa: PLC0415

    rec = StepRecord(step=3, step_seconds=0.2, rank_seconds=(0.05, math.nan))
    back = decode(encode(rec))
    assert back.rank_seconds[0] == 0.05 and math.isnan(back.rank_seconds[1])
    with pytest.raises(MalformedRecord, match="rank_seconds"):
        decode('{"v": 1, "step": 1, "step_seconds": 1, "rank_seconds": "fast"}')


def test_what_the_trainer_runs_and_who_chose_it_are_exported(rig: Any, tmp_path: Path) -> None:
    r = rig(None, stats_dir=tmp_path)
    write(tmp_path / "steps.jsonl", StepRecord(step=1, step_seconds=1.0))
    assert r.value(metrics.TRAIN_SETTINGS_INFO, settings="", chosen_by="other") is None  # older trainer: absent
    assert r.value(metrics.TRAIN_AUTOTUNE_SPEEDUP) is None
    tuned = StepRecord(
        step=2, step_seconds=0.5, settings="reduce-overhead@16+fp8", settings_by="autotune", autotune_speedup=1.242
    )
    write(tmp_path / "steps.jsonl", tuned)
    assert r.value(metrics.TRAIN_SETTINGS_INFO, settings="reduce-overhead@16+fp8", chosen_by="autotune") == 1
    assert r.value(metrics.TRAIN_AUTOTUNE_SPEEDUP) == 1.242
    write(tmp_path / "steps.jsonl", StepRecord(step=3, step_seconds=0.5, settings="default@8", settings_by="me"))
    assert r.value(metrics.TRAIN_SETTINGS_INFO, settings="default@8", chosen_by="other") == 1
    assert r.value(metrics.TRAIN_AUTOTUNE_SPEEDUP) is None  # NaN: not tuned
