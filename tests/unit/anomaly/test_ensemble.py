"""The generic (ensemble) detector: calibrated evidence, bounded scores, no look-ahead, one alarm per
episode, invariance to the series' scale and sign."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from statictrain_operator.anomaly.ensemble import (
    Channel,
    EnsembleDetector,
    EnsembleSettings,
    gamma_tail_log10,
    rank_p,
    score_series,
)


def _noise(n: int, seed: int = 7) -> list[float]:
    rng = random.Random(seed)
    return [10 + math.sin(i / 10) + rng.gauss(0, 0.1) for i in range(n)]


def test_a_fitted_tail_tells_far_beyond_from_just_beyond() -> None:
    hist = sorted(float(i) for i in range(200))
    near, far = (rank_p(hist, x, two_sided=False, tail=20) for x in (200.0, 400.0))
    assert far < near <= 1 / 201
    assert rank_p(hist, 400.0, two_sided=False) == pytest.approx(1 / 201)  # ranks alone saturate
    assert rank_p(hist, -201.0, two_sided=True, tail=20) == pytest.approx(2 * far)  # 400 mirrored
    assert rank_p(hist, 1e9, two_sided=False, tail=20) > 0.0


def test_rank_p_counts_ties_and_both_tails() -> None:
    hist = [1.0, 2.0, 2.0, 3.0]
    assert rank_p(hist, 9.0, two_sided=False) == pytest.approx(1 / 5)
    assert rank_p(hist, 2.0, two_sided=False) == pytest.approx(4 / 5)
    assert rank_p(hist, 0.0, two_sided=True) == pytest.approx(2 / 5)
    assert rank_p(hist, 2.0, two_sided=True) == 1.0


@pytest.mark.parametrize("s", [0.5, 3.0, 12.0, 40.0])
def test_gamma_tail_matches_the_closed_forms(s: float) -> None:
    assert gamma_tail_log10(s, 1) == pytest.approx(s / math.log(10))
    assert gamma_tail_log10(s, 2) == pytest.approx(-math.log10(math.exp(-s) * (1 + s)))
    assert gamma_tail_log10(s, 3) == pytest.approx(-math.log10(math.exp(-s) * (1 + s + s * s / 2)))


@given(st.floats(0.0, 500.0), st.integers(1, 32))
def test_gamma_tail_is_nonnegative_and_falls_with_k(s: float, k: int) -> None:
    a, b = gamma_tail_log10(s, k), gamma_tail_log10(s, k + 1)
    assert a >= 0.0 and math.isfinite(a)
    assert b <= a + 1e-9


def test_evidence_is_calibrated_on_noise_that_behaves_as_its_past() -> None:
    rng = random.Random(3)
    det = EnsembleDetector(EnsembleSettings(channels=(Channel("value", 4),), history=500))
    ev = [det.evidence(rng.random()) for _ in range(4000)][600:]
    # L >= 1 means P <= 0.1: about one record in ten, whatever the distribution.
    assert 0.06 <= sum(e >= 1.0 for e in ev) / len(ev) <= 0.14


def test_scores_are_in_unit_interval_and_zero_during_warmup() -> None:
    s = score_series(_noise(600))
    assert all(0.0 <= v < 1.0 for v in s)
    assert max(s[: EnsembleSettings().warmup]) == 0.0


@pytest.mark.parametrize("kind", ["spike", "level-shift", "idle-stretch"])
def test_injected_anomaly_raises_the_first_alarm_near_its_onset(kind: str) -> None:
    x = _noise(1200)
    if kind == "spike":
        x[900:903] = [v + 5 for v in x[900:903]]
    elif kind == "level-shift":
        x[900:] = [v + 3 for v in x[900:]]
    else:
        x[900:1000] = [0.0] * 100
    flag = EnsembleSettings().flag_score
    first = next(i for i, v in enumerate(score_series(x)) if v >= flag)
    assert 900 <= first <= 930


def test_an_episode_alarms_once_then_only_on_growing_evidence() -> None:
    x = _noise(1200)
    x[900:] = [v + 3 for v in x[900:]]
    s = EnsembleSettings()
    scores = score_series(x, s)
    alarms = [i for i, v in enumerate(scores) if v >= 0.5 and i >= 900]
    assert alarms and alarms[0] <= 905
    episode = [scores[i] for i in alarms if i - alarms[0] <= s.rest]
    # each later alarm in the episode carries at least `step` times the evidence of the one before
    evidence = [s.alarm_log10 * v / (1 - v) for v in episode]
    assert all(b > s.step * a * 0.999 for a, b in itertools.pairwise(evidence))
    assert len(episode) <= 4
    # without the episode rule the shift alarms at most records
    free = [v for v in score_series(x, EnsembleSettings(rest=0)) if v >= 0.5]
    assert len(free) > 10 * len(episode)


def test_no_look_ahead() -> None:
    x = _noise(800)
    y = x[:600] + [v + 50 for v in x[600:]]
    assert score_series(x)[:600] == score_series(y)[:600]


@pytest.mark.parametrize("factor", [1024.0, -8.0])
def test_scale_and_sign_do_not_change_scores(factor: float) -> None:
    x = _noise(700)
    x[500] += 2
    assert score_series([factor * v for v in x]) == score_series(x)


def test_nan_repeats_last_value() -> None:
    x = _noise(300)
    y, x2 = list(x), list(x)
    y[200], x2[200] = math.nan, x2[199]
    assert score_series(y) == score_series(x2)
    assert score_series([math.inf, *x])[0] == 0.0


def test_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="feature"):
        Channel("level")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="k must be"):
        Channel("value", 0)
    with pytest.raises(ValueError, match="alarm_log10"):
        EnsembleSettings(alarm_log10=0.0)
    with pytest.raises(ValueError, match="history"):
        EnsembleSettings(history=0)
    with pytest.raises(ValueError, match="step"):
        EnsembleSettings(step=0.5)
    with pytest.raises(ValueError, match="channels"):
        EnsembleSettings(channels=())
