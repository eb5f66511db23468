"""A Prophet-based online detector for NAB, for comparison with the discord detector.

Record by record, no look-ahead: Prophet is fitted on the records seen so far
(at most ``max_history``) every ``refit`` records once ``min_history`` records
exist, and forecasts the next ``refit`` timestamps with its uncertainty
interval. A record's surprise is |value - yhat| in units of the interval's
implied standard deviation, turned into an episode score by the same
Calibrator as the discord detector's channels.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from statictrain_operator.anomaly.detector import DetectorSettings, prophet_expectation
from statictrain_operator.anomaly.discord import Calibrator, DiscordSettings


def score_prophet(
    timestamps: Sequence[str],
    values: Sequence[float],
    *,
    refit: int = 288,
    min_history: int = 288,
    max_history: int = 4000,
) -> list[float]:
    """Scores in [0, 1) for every record."""
    d, ds = DetectorSettings(), DiscordSettings()
    ts = [datetime.fromisoformat(t) for t in timestamps]
    cal = Calibrator(
        quantile=ds.quantile, history=ds.history, alarm_level=ds.alarm_level, rest=ds.rest, warm=min_history
    )
    out: list[float] = []
    yhat: list[float] = []
    sd: list[float] = []
    for i, v in enumerate(values):
        if i >= min_history and (i - min_history) % refit == 0:
            lo = max(0, i - max_history)
            yhat, sd = prophet_expectation(
                ts[lo:i], list(values[lo:i]), ts[i : i + refit], d.interval_width, d.prophet_max_iter
            )
        k = (i - min_history) % refit
        surprise = abs(v - yhat[k]) / sd[k] if i >= min_history else 0.0
        out.append(cal.score(surprise))
    return out
