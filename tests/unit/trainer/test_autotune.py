from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from statictrain_trainer.autotune import (
    Autotuner,
    Candidate,
    FailureRecord,
    Outcome,
    Report,
    choose,
    doubling,
    dropped_lever,
    error_from_stderr,
    skip_reason,
)
from statictrain_trainer.settings import COMPILE_MODES


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def fake_runner(
    clock: FakeClock, speed: Callable[[Candidate], float | str], seconds_each: float = 10.0
) -> tuple[Callable[[Candidate, float], Outcome], list[str]]:
    """speed(candidate) -> samples/s, or an error string for a failing candidate."""
    calls: list[str] = []

    def run(c: Candidate, timeout: float) -> Outcome:
        calls.append(c.label)
        clock.now += seconds_each
        s = speed(c)
        if isinstance(s, str):
            return Outcome(c, ok=False, seconds=seconds_each, error=s)
        return Outcome(c, ok=True, samples_per_s=s, tokens_per_s=s * 1024, seconds=seconds_each)

    return run, calls


def test_doubling() -> None:
    assert doubling(16, 128) == [16, 32, 64, 128]
    assert doubling(16, 8) == [16]


def test_crashing_candidate_is_skipped_and_reported() -> None:
    clock = FakeClock()

    def speed(c: Candidate) -> float | str:
        if c.compile_mode == "max-autotune-no-cudagraphs":
            return "crashed (exit 1): CUDA error: an illegal memory access was encountered"
        table: dict[int, float | str] = {16: 100.0, 32: 150.0, 64: 180.0, 128: "out of memory"}
        base = table[c.batch_size]
        if isinstance(base, str):
            return base
        return base * (1.1 if c.compile_mode == "max-autotune" else 1.0)

    runner, calls = fake_runner(clock, speed)
    report = Autotuner(
        Candidate("default", 16), max_batch=128, budget_s=1000, runner=runner, clock=clock, gpu=True
    ).tune()
    assert calls == [
        "default@16",
        "default@32",
        "default@64",
        "default@128",
        "max-autotune@64",
        "max-autotune-no-cudagraphs@64",
        "reduce-overhead@64",
    ]
    assert report.chosen == Candidate("max-autotune", 64)
    assert "max-autotune-no-cudagraphs@64: crashed" in report.reason
    assert "default@128: out of memory" in report.reason
    failed = [o.candidate.label for o in report.outcomes if not o.ok]
    assert failed == ["default@128", "max-autotune-no-cudagraphs@64"]


def test_stops_doubling_when_gain_is_small() -> None:
    clock = FakeClock()
    runner, calls = fake_runner(clock, lambda c: {16: 100.0, 32: 101.0, 64: 300.0}.get(c.batch_size, 1.0))
    report = Autotuner(
        Candidate("default", 16), max_batch=64, budget_s=1000, runner=runner, clock=clock, gpu=False
    ).tune()
    assert calls == ["default@16", "default@32"]
    assert report.chosen == Candidate("default", 32)


def test_budget_spent_skips_the_rest() -> None:
    clock = FakeClock()
    runner, calls = fake_runner(clock, lambda c: float(c.batch_size), seconds_each=30.0)
    report = Autotuner(Candidate("default", 8), max_batch=64, budget_s=50, runner=runner, clock=clock, gpu=True).tune()
    assert calls == ["default@8"]
    skipped = [o for o in report.outcomes if o.error.startswith("skipped: needs about")]
    assert [o.candidate.label for o in skipped] == [
        "default@16",
        "max-autotune@8",
        "max-autotune-no-cudagraphs@8",
        "reduce-overhead@8",
    ]
    assert report.chosen == Candidate("default", 8)
    clock.now = 60.0
    tuner = Autotuner(Candidate("default", 8), max_batch=8, budget_s=50, runner=runner, clock=clock, gpu=False)
    tuner._t0 = 0.0
    assert tuner._try(Candidate("default", 8)).error == "skipped: budget spent"


def test_nothing_finishes_keeps_the_job_settings() -> None:
    chosen, reason = choose([Outcome(Candidate("default", 8), ok=False, error="out of memory")], Candidate("none", 8))
    assert chosen == Candidate("none", 8)
    assert "no candidate finished" in reason and "out of memory" in reason


def test_choose_explains_margin() -> None:
    outcomes = [
        Outcome(Candidate("default", 8), ok=True, samples_per_s=100.0, tokens_per_s=math.nan),
        Outcome(Candidate("reduce-overhead", 8), ok=True, samples_per_s=125.0, tokens_per_s=math.nan),
    ]
    chosen, reason = choose(outcomes, Candidate("default", 8))
    assert chosen == Candidate("reduce-overhead", 8)
    assert "1.250x the runner-up default@8" in reason


@pytest.mark.parametrize("gpu", [True, False], ids=["gpu", "cpu"])
def test_mode_search_only_on_gpu(gpu: bool) -> None:
    clock = FakeClock()
    runner, calls = fake_runner(clock, lambda c: 10.0)
    Autotuner(Candidate("default", 8), max_batch=8, budget_s=1000, runner=runner, clock=clock, gpu=gpu).tune()
    assert len(calls) == (4 if gpu else 1)


@pytest.mark.parametrize(
    ("stderr", "want"),
    [
        pytest.param(
            "W0101 out of resource: shared memory, skipping config\n"
            "RuntimeError: CUDA error: an illegal memory access was encountered\n",
            "crashed (exit 1): RuntimeError: CUDA error: an illegal memory access",
            id="illegal-access-not-oom",
        ),
        pytest.param(
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n",
            "out of memory (exit 1): torch.OutOfMemoryError",
            id="oom",
        ),
        pytest.param("", "crashed (exit 1): no output", id="silent"),
    ],
)
def test_error_from_stderr(stderr: str, want: str) -> None:
    assert error_from_stderr(stderr, 1).startswith(want)


def test_expensive_candidate_that_cannot_fit_is_skipped_up_front() -> None:
    """The first trial sets the unit: max-autotune (5.5x) cannot fit in what is left, so it never starts."""
    clock = FakeClock()
    runner, calls = fake_runner(clock, lambda c: 100.0, seconds_each=40.0)
    report = Autotuner(
        Candidate("default", 16), max_batch=16, budget_s=150, runner=runner, clock=clock, gpu=True
    ).tune()
    assert calls == ["default@16", "reduce-overhead@16"]
    errors = {o.candidate.label: o.error for o in report.outcomes}
    assert errors["max-autotune@16"].startswith("skipped: needs about 220 s, 110 s of the budget left")
    limits = {o.candidate.label: o.limit_s for o in report.outcomes if o.limit_s}
    assert limits["default@16"] == 150  # no estimate yet: the whole budget
    assert limits["reduce-overhead@16"] == 2.0 * 1.1 * 40.0  # LIMIT_FACTOR x COST x unit


def test_failures_are_recorded_and_not_retried(tmp_path: Path) -> None:
    def speed(c: Candidate) -> float | str:
        return "crashed (exit 1): illegal memory access" if c.compile_mode == "max-autotune" else 100.0

    key = "gpt2|torch-2.11|cuda-sm90-H200"
    clock = FakeClock()
    runner, calls = fake_runner(clock, speed)
    record = FailureRecord(tmp_path, key)
    Autotuner(Candidate("default", 8), max_batch=8, budget_s=1000, runner=runner, clock=clock, gpu=True,
              record=record).tune()  # fmt: skip
    assert "max-autotune@8" in calls
    assert set(record.known()) == {"max-autotune@8"}
    assert FailureRecord(tmp_path, "other model").known() == {}
    clock2 = FakeClock()
    runner2, calls2 = fake_runner(clock2, speed)
    report = Autotuner(Candidate("default", 8), max_batch=8, budget_s=1000, runner=runner2, clock=clock2, gpu=True,
                       record=FailureRecord(tmp_path, key)).tune()  # fmt: skip
    assert "max-autotune@8" not in calls2
    skipped = next(o for o in report.outcomes if o.candidate.label == "max-autotune@8")
    assert skipped.error.startswith("skipped: failed before on this model, torch and GPU (crashed")


def test_timeout_retried_only_with_a_longer_limit() -> None:
    known = {"max-autotune@32": {"error": "timed out after 204 s", "limit_s": 204.0}}
    c = Candidate("max-autotune", 32)
    assert skip_reason(known, c, 250.0) is not None
    assert skip_reason(known, c, 310.0) is None
    assert skip_reason(known, Candidate("default", 32), 10.0) is None


def test_unreadable_record_is_ignored(tmp_path: Path) -> None:
    (tmp_path / FailureRecord.FILE).write_text("{not json")
    assert FailureRecord(tmp_path, "k").known() == {}


def test_levers_by_prior_gain_and_explained() -> None:
    clock = FakeClock()
    runner, calls = fake_runner(clock, lambda c: 100.0 + (10.0 if c.fp8 else 0.0))
    report = Autotuner(Candidate("default", 8), max_batch=8, budget_s=10_000, runner=runner, clock=clock, gpu=True,
                       fp8_available=True).tune()  # fmt: skip
    assert calls[1] == "default@8+fp8"  # the highest prior gain first
    assert calls[2] == "max-autotune@8+fp8"  # modes on top of the best so far
    assert report.chosen == Candidate("default", 8, fp8=True)
    assert "not tried: compile_optimizer: measured -0.3%" in report.reason
    assert "chunked_loss: measured -4.0%" in report.reason
    clock2 = FakeClock()
    runner2 = fake_runner(clock2, lambda c: 1.0)[0]
    report2 = Autotuner(Candidate("default", 8), max_batch=8, budget_s=10_000, runner=runner2, clock=clock2,
                        gpu=True).tune()  # fmt: skip
    assert "fp8: needs compute capability >= 8.9 and torchao" in report2.reason
    assert Candidate("default", 8, fp8=True).env()["STATICTRAIN_FP8"] == "true"


def test_fp8_is_kept_only_where_it_pays_and_rowwise_is_listed_as_not_tried() -> None:
    def tune(fp8_gain: float) -> tuple[Candidate, str, list[str]]:
        clock = FakeClock()
        runner, calls = fake_runner(clock, lambda c: 100.0 * (fp8_gain if c.fp8 else 1.0))
        report = Autotuner(Candidate("default", 8), max_batch=8, budget_s=10_000, runner=runner, clock=clock,
                           gpu=True, fp8_available=True).tune()  # fmt: skip
        return report.chosen, report.reason, calls

    chosen, reason, calls = tune(1.2)
    assert chosen == Candidate("default", 8, fp8=True) and "default@8+fp8" in calls
    assert "fp8_rowwise: measured -2.6%" in reason and "default@8+fp8_rowwise" not in calls
    chosen, reason, calls = tune(1.01)  # faster, but within MIN_GAIN: noise, not a gain
    assert "default@8+fp8" in calls
    assert not chosen.fp8 and "fp8: 1.010x" in reason and "not kept" in reason


def test_fp8_unavailable_reason_is_the_one_given() -> None:
    clock = FakeClock()
    runner, calls = fake_runner(clock, lambda c: 1.0)
    why = "fp8 skipped: torchao is not installed in this image"
    report = Autotuner(Candidate("default", 8), max_batch=8, budget_s=10_000, runner=runner, clock=clock, gpu=True,
                       fp8_reason=why).tune()  # fmt: skip
    assert why in report.reason and not any("fp8" in c for c in calls)
    rowwise = Candidate("default", 8, fp8=True, fp8_recipe="rowwise")
    assert rowwise.label == "default@8+fp8_rowwise" and rowwise.env()["STATICTRAIN_FP8_RECIPE"] == "rowwise"


def test_a_lever_the_trial_switched_off_is_a_skip_not_a_measurement() -> None:
    c = Candidate("default", 8, fp8=True)
    note = "fp8 skipped: needs a CUDA GPU of compute capability >= 8.9 (tensorwise scaling), have (0, 0)"
    assert dropped_lever(c, {"levers": {"fp8": False}, "notes": [note]}) == note
    assert dropped_lever(c, {"levers": {"fp8": True}, "notes": []}) is None
    assert dropped_lever(Candidate("default", 8), {"levers": {"fp8": False}}) is None
    assert "switched off" in str(dropped_lever(Candidate("default", 8, chunked_loss=True), {"levers": {}}))


def test_under_a_tight_budget_fp8_is_measured_before_the_modes_and_what_cannot_fit_never_starts() -> None:
    clock = FakeClock()
    runner, calls = fake_runner(clock, lambda c: 120.0 if c.fp8 else 100.0, seconds_each=40.0)
    report = Autotuner(Candidate("default", 16), max_batch=16, budget_s=150, runner=runner, clock=clock, gpu=True,
                       fp8_available=True).tune()  # fmt: skip
    assert calls == ["default@16", "default@16+fp8", "reduce-overhead@16+fp8"]
    errors = {o.candidate.label: o.error for o in report.outcomes}
    assert errors["max-autotune@16+fp8"].startswith("skipped: needs about 286 s, 70 s of the budget left")
    assert report.chosen.fp8


def test_a_unit_hint_predicts_but_never_limits_the_first_cold_trial() -> None:
    # H200, 2026-12-03: a hint of 23 s from an earlier call's cold run limited the first cold trial of
    # a fresh machine to 68 s; that trial needed ~66 s of compile and start-up and was killed, so the
    # tuner measured nothing. The hint sizes predictions only; the first trial here may use the budget.
    clock = FakeClock()
    runner, calls = fake_runner(clock, lambda c: 100.0, seconds_each=40.0)
    report = Autotuner(Candidate("default", 16), max_batch=16, budget_s=150, runner=runner, clock=clock, gpu=True,
                       unit_hint_s=10.0).tune()  # fmt: skip
    limits = {o.candidate.label: o.limit_s for o in report.outcomes if o.limit_s}
    assert limits["default@16"] == 150  # the whole budget, not 2 x the 10 s hint (which it outlasts)
    assert limits["reduce-overhead@16"] == 2.0 * 1.1 * 40.0  # the measured cold trial replaced it
    assert calls == ["default@16", "reduce-overhead@16"]


@pytest.mark.parametrize("limit", ["abc", float("nan"), float("inf"), 10**400, -5, True, None, [1]])
def test_a_recorded_limit_that_is_not_a_finite_positive_number_means_retry(limit: object) -> None:
    known = {"max-autotune@32": {"error": "timed out after 204 s", "limit_s": limit}}
    assert skip_reason(known, Candidate("max-autotune", 32), 10.0) is None


def test_a_hostile_record_file_is_ignored_and_never_written_through(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text('{"k": {"default@8": {"error": "crashed"}}}')
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / FailureRecord.FILE).symlink_to(target)
    record = FailureRecord(cache, "k")
    assert record.known() == {}  # a link is not read
    record.add(Outcome(Candidate("max-autotune", 8), ok=False, error="crashed (exit 1)"))
    assert target.read_text() == '{"k": {"default@8": {"error": "crashed"}}}'
    assert (cache / FailureRecord.FILE).is_symlink()  # its name is taken by a link: not written, left as it is
    (cache / FailureRecord.FILE).unlink()
    record.add(Outcome(Candidate("max-autotune", 8), ok=False, error="crashed (exit 1)"))
    assert set(FailureRecord(cache, "k").known()) == {"max-autotune@8"}
    (cache / FailureRecord.FILE).write_text('{"k": {"a": [1], "b": "x", "c": {"error": "crashed"}}}')
    assert set(FailureRecord(cache, "k").known()) == {"c"}
    (cache / FailureRecord.FILE).write_bytes(b"[" * 200_000)
    assert FailureRecord(cache, "k").known() == {}


def test_the_reports_speedup_is_the_pick_over_the_first_trial() -> None:
    first, pick = Candidate("default", 8), Candidate("reduce-overhead", 16, fp8=True)
    outcomes = (
        Outcome(first, ok=True, samples_per_s=40.0),
        Outcome(pick, ok=True, samples_per_s=50.0),
        Outcome(Candidate("default", 16, chunked_loss=True), ok=True, samples_per_s=60.0, kept=False),
    )
    assert Report(pick, "", outcomes).speedup == 1.25
    assert math.isnan(Report(first, "", (Outcome(first, ok=False, error="oom"),)).speedup)  # nothing measured
    assert math.isnan(Report(first, "", ()).speedup)
    assert pick.label == "reduce-overhead@16+fp8"


def test_a_timeout_that_finishes_on_retry_is_forgotten(tmp_path: Path) -> None:
    record = FailureRecord(tmp_path, "m|torch|gpu")
    slow = Candidate("default", 8)
    record.add(Outcome(slow, ok=False, error="timed out after 68 s", limit_s=68.0))
    record.add(Outcome(Candidate("max-autotune", 8), ok=False, error="crashed (exit 1)"))
    assert skip_reason(record.known(), slow, 60.0) is not None  # a later job with a small budget skips it
    record.add(Outcome(slow, ok=True, samples_per_s=46.9, limit_s=480.0))  # retried under a larger limit
    assert set(record.known()) == {"max-autotune@8"}  # the crash stays; the timeout is gone
    assert skip_reason(record.known(), slow, 60.0) is None
    record.add(Outcome(Candidate("default", 16), ok=True, samples_per_s=48.0))  # never failed: nothing written
    assert set(record.known()) == {"max-autotune@8"}


@given(
    mode=st.sampled_from(COMPILE_MODES),
    batch=st.integers(1, 4096),
    chunked=st.booleans(),
    compiled_opt=st.booleans(),
    fp8=st.sampled_from(["", "tensorwise", "rowwise"]),
)
def test_parse_is_the_inverse_of_label(mode, batch, chunked, compiled_opt, fp8) -> None:
    c = Candidate(mode, batch, chunked, compiled_opt, fp8=bool(fp8), fp8_recipe=fp8 or "tensorwise")
    assert Candidate.parse(c.label) == c


@pytest.mark.parametrize(
    "label", ["", "default", "default@", "default@0", "fast@8", "default@8+fp9", "default@8+fp8+fp8",
              "default@8+fp8+chunked_loss", "default@8+fp8+fp8_rowwise", "default@-1"],
)  # fmt: skip
def test_parse_refuses_what_label_never_writes(label) -> None:
    with pytest.raises(ValueError, match=r"mode@batch|levers must be"):
        Candidate.parse(label)
