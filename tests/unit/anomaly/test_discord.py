"""The online discord detector: bounded scores, no look-ahead, one alarm per episode, scale invariance."""

from __future__ import annotations

import math
import random

import pytest
from statictrain_operator.anomaly.discord import Channel, DiscordSettings, score_series


def _noise(n: int, seed: int = 7) -> list[float]:
    rng = random.Random(seed)
    return [10 + math.sin(i / 10) + rng.gauss(0, 0.1) for i in range(n)]


def test_scores_are_in_unit_interval_and_zero_during_warmup() -> None:
    s = score_series(_noise(600))
    assert all(0.0 <= v < 1.0 for v in s)
    assert max(s[:22]) == 0.0  # the shortest channel (m=4) warms up for 3*4+10 records


@pytest.mark.parametrize("kind", ["spike", "level-shift", "idle-stretch"])
def test_injected_anomaly_gets_the_top_score_near_its_onset(kind: str) -> None:
    x = _noise(1200)
    if kind == "spike":
        x[900] += 5
    elif kind == "level-shift":
        x[900:] = [v + 3 for v in x[900:]]
    else:
        x[900:1000] = [0.0] * 100
    s = score_series(x)
    top = max(range(len(s)), key=s.__getitem__)
    assert 900 <= top <= 920
    assert s[top] >= DiscordSettings().alarm_level


def test_one_alarm_per_episode() -> None:
    x = _noise(1200)
    x[900:] = [v + 3 for v in x[900:]]
    s = score_series(x, DiscordSettings(channels=(Channel(4),)))
    alarms = [i for i, v in enumerate(s) if i >= 900 and v >= 0.5]
    assert len(alarms) == 1


def test_no_look_ahead() -> None:
    x = _noise(800)
    y = x[:600] + [v + 50 for v in x[600:]]
    assert score_series(x)[:600] == score_series(y)[:600]


def test_scale_invariant() -> None:
    x = _noise(700)
    a = score_series(x)
    b = score_series([1000 * v for v in x], value_range=(0, 20000))
    assert a == pytest.approx(b, abs=1e-6)


def test_nan_repeats_last_value() -> None:
    x = _noise(300)
    y = list(x)
    y[200] = math.nan
    x2 = list(x)
    x2[200] = x2[199]
    assert score_series(y) == score_series(x2)


def test_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="quantile"):
        DiscordSettings(quantile=0.0)
    with pytest.raises(ValueError, match="channels"):
        DiscordSettings(channels=())
