"""NAB scoring rules on hand-built files: probation, windows, sigmoid, sweep, normalisation."""

from __future__ import annotations

import math

import pytest
from statictrain_operator.anomaly import nab

STANDARD = nab.Profile("standard", 1.0, 1.0, 0.11)
LOW_FN = nab.Profile("reward_low_FN_rate", 1.0, 2.0, 0.11)


def _file(scores: list[float], windows: list[tuple[int, int]], name: str = "cat/f.csv") -> nab.FileRecords:
    return nab.prepare_file(name, scores, windows)


@pytest.mark.parametrize(
    ("n", "want"),
    [("4032", 604), ("1000", 150), ("10000", 750), ("10", 1)],
    ids=["nab-4032", "small", "capped-at-750", "tiny"],
)
def test_probationary_length(n: str, want: int) -> None:
    assert nab.probationary_length(int(n)) == want


@pytest.mark.parametrize(
    ("y", "want"),
    [(-1.0, 0.98661), (0.0, 0.0), (1.0, -0.98661), (3.5, -1.0)],
    ids=["window-start", "window-end", "one-width-after", "clamped"],
)
def test_scaled_sigmoid(y: float, want: float) -> None:
    assert nab.scaled_sigmoid(y) == pytest.approx(want, abs=1e-5)


def test_detection_at_window_start_is_worth_a_full_tp() -> None:
    scores = [0.0] * 100
    scores[40] = 1.0
    f = _file(scores, [(40, 49)])
    res = nab.score_file(f, STANDARD, 0.5)
    assert res.raw == pytest.approx(1.0)
    assert (res.detected_windows, res.false_positives) == (1, 0)


def test_later_detection_in_window_is_worth_less_and_only_first_counts() -> None:
    scores = [0.0] * 100
    scores[45] = scores[46] = scores[47] = 1.0
    res = nab.score_file(_file(scores, [(40, 49)]), STANDARD, 0.5)
    want = nab.scaled_sigmoid(-(49 - 45 + 1) / 10) / nab.scaled_sigmoid(-1.0)
    assert res.raw == pytest.approx(want)
    assert 0 < res.raw < 1


def test_missed_window_costs_fn_weight() -> None:
    res = nab.score_file(_file([0.0] * 100, [(40, 49), (70, 79)]), LOW_FN, 0.5)
    assert res.raw == pytest.approx(-4.0)


def test_false_positive_before_any_window_costs_full_weight() -> None:
    scores = [0.0] * 100
    scores[30] = 1.0
    res = nab.score_file(_file(scores, [(40, 49)]), STANDARD, 0.5)
    assert res.raw == pytest.approx(-1.0 - 0.11)


def test_false_positive_right_after_window_is_cheap_and_later_costs_more() -> None:
    near, far = [0.0] * 100, [0.0] * 100
    near[50] = 1.0
    far[80] = 1.0
    windows = [(40, 49)]
    near_fp = nab.score_file(_file(near, windows), STANDARD, 0.5).raw + 1.0
    far_fp = nab.score_file(_file(far, windows), STANDARD, 0.5).raw + 1.0
    assert near_fp == pytest.approx(0.11 * nab.scaled_sigmoid(1 / 9))
    assert far_fp == pytest.approx(-0.11)
    assert far_fp < near_fp < 0


def test_probationary_detections_are_ignored() -> None:
    scores = [0.0] * 100
    scores[5] = 1.0  # probation of a 100-record file is 15 records
    res = nab.score_file(_file(scores, []), STANDARD, 0.5)
    assert (res.raw, res.false_positives) == (0.0, 0)


def test_scores_outside_unit_interval_are_rejected() -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        _file([0.0, 1.5], [])


def test_window_indices_use_first_occurrence_and_ignore_fraction() -> None:
    ts = ["2014-01-01 00:00:00", "2014-01-01 00:05:00", "2014-01-01 00:05:00", "2014-01-01 00:10:00"]
    got = nab.window_indices(ts, [["2014-01-01 00:05:00.000000", "2014-01-01 00:10:00.000000"]])
    assert got == [(1, 3)]
    with pytest.raises(ValueError, match="not found"):
        nab.window_indices(ts, [["2015-01-01 00:00:00", "2015-01-01 00:10:00"]])


def test_threshold_sweep_finds_the_best_threshold_and_matches_score_file() -> None:
    # True detections score 0.9, a false alarm 0.95 before any window, noise 0.2.
    scores = [0.2] * 200
    scores[100] = 0.9
    scores[150] = 0.9
    scores[60] = 0.95
    f = _file(scores, [(100, 109), (150, 159)])
    threshold, total = nab.optimize_threshold([f], STANDARD)
    assert threshold == 0.9
    assert total == pytest.approx(2.0 - 0.11)
    assert nab.score_file(f, STANDARD, threshold).raw == pytest.approx(total)


def test_threshold_sweep_keeps_earliest_detection_when_later_record_scores_higher() -> None:
    scores = [0.0] * 200
    scores[105] = 0.99  # late in the window, high score
    scores[100] = 0.6  # window start, lower score
    f = _file(scores, [(100, 109)])
    _, total = nab.optimize_threshold([f], STANDARD)
    assert total == pytest.approx(1.0)


def test_normalisation_null_is_zero_and_perfect_is_hundred() -> None:
    windows = [(100, 109), (150, 159)]
    perfect = [0.0] * 200
    perfect[100] = perfect[150] = 1.0
    files_perfect = [_file(perfect, windows)]
    assert nab.score_corpus(files_perfect, STANDARD).score == pytest.approx(100.0)
    files_null = [_file([0.5] * 200, windows)]
    assert nab.score_corpus(files_null, STANDARD).score == pytest.approx(0.0)
    s_null, s_perfect = nab.null_and_perfect(files_null, LOW_FN)
    assert (s_null, s_perfect) == (-4.0, 2.0)


def test_category_scores_split_by_folder() -> None:
    a = [0.0] * 200
    a[100] = 1.0
    files = [_file(a, [(100, 109)], "good/a.csv"), _file([0.0] * 200, [(100, 109)], "bad/b.csv")]
    res = nab.score_corpus(files, STANDARD)
    cats = nab.category_scores(files, res, STANDARD)
    assert cats["good"]["normalized"] == pytest.approx(100.0)
    assert cats["bad"]["normalized"] == pytest.approx(0.0)
    assert math.isclose(res.score, 50.0)


def test_parse_profiles_names_missing_weight() -> None:
    with pytest.raises(ValueError, match="fpWeight"):
        nab.parse_profiles({"standard": {"CostMatrix": {"tpWeight": 1.0, "fnWeight": 1.0}}})
