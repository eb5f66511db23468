"""Anomaly assessment of one series: Prophet for long series, a robust baseline for short ones
(the per-commit baseline is in ``commits.py``). Pure (no clocks, no I/O): callers pass the series and settings.

For a series ``(t_i, y_i)`` the last ``recent_points`` records are judged
against a model fitted on the records before them:

- with at least ``prophet_min_points`` history records spanning ``prophet_min_span_s``, Prophet (daily
  seasonality once the history spans two days, weekly once it spans two weeks)
  gives the expected value and an uncertainty interval; the residual is
  expressed in units of the interval's implied standard deviation;
- otherwise the history's median and MAD give the expected value and spread.

The score is the log-scaled Gaussian tail probability of the median residual of
the recent records, times sqrt(k) (0: ordinary, 1: p <= 1e-10), so one noisy
record does not page anyone, but a shift held by most recent records does.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

__all__ = [
    "Assessment",
    "DetectorSettings",
    "Method",
    "Severity",
    "append_bounded",
    "as_status_item",
    "assess",
    "gaussian_tail",
    "prophet_expectation",
    "robust_baseline",
    "scale_likelihood",
    "severity_of",
]


class Method(StrEnum):
    """How a series was judged."""

    PROPHET = "prophet"
    ROBUST = "robust"
    INSUFFICIENT = "insufficient"


class Severity(StrEnum):
    """Severity levels of status.anomalies (CRD enum)."""

    INFO = "Info"
    WARNING = "Warning"
    CRITICAL = "Critical"


@dataclass(frozen=True)
class DetectorSettings:
    """How series are judged."""

    recent_points: int = 5
    """Records at the end of the series that are judged (the rest is history)."""
    min_points: int = 12
    """Fewest finite history records needed to judge anything (fewer: Method.INSUFFICIENT, no finding)."""
    prophet_min_points: int = 96
    """Fewest history records for Prophet; below it the robust median/MAD baseline is used."""
    prophet_min_span_s: float = 2 * 86400.0
    """Prophet only when the history spans this long (two days: a daily season can be learned). Shorter
    histories have no season to learn and Prophet's trend extrapolates noise there: the robust baseline
    judges them (Prophet stays the baseline for seasonal cost and utilisation series)."""
    interval_width: float = 0.95
    """Prophet uncertainty interval width."""
    prophet_max_iter: int = 250
    """Cap on Prophet's L-BFGS iterations: bounds a fit at 4k points to well under a second
    (uncapped fits of some series took 2-6 s on a busy 2-core machine; the cap moves yhat a little)."""
    info_score: float = 0.5
    """Score from which an anomaly is reported as Info."""
    warning_score: float = 0.7
    """Score from which an anomaly is Warning."""
    critical_score: float = 0.9
    """Score from which an anomaly is Critical."""
    relative_floor: float = 0.02
    """Smallest spread, as a fraction of |median| of the history
    (a perfectly steady series is not infinitely surprising)."""

    def __post_init__(self) -> None:
        if self.recent_points < 1 or self.min_points < 3:
            raise ValueError("DetectorSettings: recent_points must be >= 1 and min_points >= 3")
        if not self.info_score <= self.warning_score <= self.critical_score <= 1.0:
            raise ValueError("DetectorSettings: need info_score <= warning_score <= critical_score <= 1")
        if not 0.5 < self.interval_width < 1.0:
            raise ValueError(f"DetectorSettings.interval_width must lie in (0.5, 1), got {self.interval_width}")


@dataclass(frozen=True)
class Assessment:
    """The verdict on one series."""

    series: str
    """Series name (e.g. step_seconds)."""
    method: Method
    """How it was judged."""
    score: float
    """Anomaly score in [0, 1]."""
    severity: Severity | None
    """None when the score is below info_score."""
    observed: float
    """Mean of the recent records."""
    expected: float
    """Model's expectation for them."""
    z: float
    """Median residual of the recent records in standard deviations (signed: + above expected)."""
    since: datetime | None
    """First recent record of the current anomalous run (None when not anomalous)."""
    points: int
    """Finite records used."""

    @property
    def message(self) -> str:
        """Evidence in words."""
        if self.method is Method.INSUFFICIENT:
            return f"{self.series}: {self.points} finite points, too few to judge"
        ratio = f" ({self.observed / self.expected:.2f}x)" if self.expected else ""
        return (
            f"{self.series}: observed {self.observed:.4g} vs expected {self.expected:.4g}{ratio}, "
            f"z={self.z:+.1f}, score {self.score:.2f} ({self.method.value})"
        )


def gaussian_tail(z: float) -> float:
    """P(Z > z) for a standard normal Z."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def scale_likelihood(tail: float) -> float:
    """Map a tail probability to [0, 1] on a log scale (1e-10 or less -> 1)."""
    tail = min(max(tail, 1e-10), 1.0)
    return math.log(tail) / math.log(1e-10)


def severity_of(score: float, s: DetectorSettings) -> Severity | None:
    """Severity for a score."""
    if score >= s.critical_score:
        return Severity.CRITICAL
    if score >= s.warning_score:
        return Severity.WARNING
    if score >= s.info_score:
        return Severity.INFO
    return None


def _clean(ts: Sequence[datetime], ys: Sequence[float]) -> tuple[list[datetime], list[float]]:
    if len(ts) != len(ys):
        raise ValueError(f"series has {len(ts)} timestamps but {len(ys)} values")
    pairs = sorted((t, float(y)) for t, y in zip(ts, ys, strict=True) if math.isfinite(float(y)))
    return [p[0] for p in pairs], [p[1] for p in pairs]


def robust_baseline(history: Sequence[float], relative_floor: float) -> tuple[float, float]:
    """(median, robust standard deviation): the larger of 1.4826 MAD and IQR / 1.349, floored.

    The IQR term keeps a two-level (flapping) series from having zero spread.
    """
    med = statistics.median(history)
    mad = statistics.median(abs(v - med) for v in history)
    q1, _, q3 = statistics.quantiles(history, n=4) if len(history) >= 2 else (med, med, med)
    floor = max(relative_floor * abs(med), 1e-12)
    return med, max(1.4826 * mad, (q3 - q1) / 1.349, floor)


def prophet_expectation(
    hist_t: Sequence[datetime],
    hist_y: Sequence[float],
    recent_t: Sequence[datetime],
    interval_width: float,
    max_iter: int = 250,
) -> tuple[list[float], list[float]]:
    """Prophet's (yhat, implied standard deviation) at ``recent_t`` after fitting on the history."""
    # Local imports: pandas and prophet take seconds to import and only this function needs them.
    import pandas as pd  # noqa: PLC0415
    from prophet import Prophet  # noqa: PLC0415

    logging.getLogger("cmdstanpy").setLevel(logging.WARNING)
    span = hist_t[-1] - hist_t[0]
    model = Prophet(
        daily_seasonality=span >= timedelta(days=2),
        weekly_seasonality=span >= timedelta(days=14),
        yearly_seasonality=False,
        interval_width=interval_width,
        uncertainty_samples=200,
    )
    naive = [t.replace(tzinfo=None) for t in hist_t]
    model.fit(pd.DataFrame({"ds": naive, "y": list(hist_y)}), iter=max_iter)
    fc = model.predict(pd.DataFrame({"ds": [t.replace(tzinfo=None) for t in recent_t]}))
    q = statistics.NormalDist().inv_cdf(0.5 + interval_width / 2)
    yhat = [float(v) for v in fc["yhat"]]
    sd = [max(float(u - lo) / (2 * q), 1e-12) for u, lo in zip(fc["yhat_upper"], fc["yhat_lower"], strict=True)]
    return yhat, sd


def assess(name: str, ts: Sequence[datetime], ys: Sequence[float], settings: DetectorSettings) -> Assessment:
    """Judge the last ``recent_points`` records of a series; NaN/Inf records are dropped first."""
    t, y = _clean(ts, ys)
    k = settings.recent_points
    if len(y) < settings.min_points + k:
        return Assessment(name, Method.INSUFFICIENT, 0.0, None, math.nan, math.nan, 0.0, None, len(y))
    hist_t, hist_y, rec_t, rec_y = t[:-k], y[:-k], t[-k:], y[-k:]
    med, robust_sd = robust_baseline(hist_y, settings.relative_floor)
    span = (hist_t[-1] - hist_t[0]).total_seconds()
    if len(hist_y) >= settings.prophet_min_points and span >= settings.prophet_min_span_s:
        method = Method.PROPHET
        expected, sd = prophet_expectation(hist_t, hist_y, rec_t, settings.interval_width, settings.prophet_max_iter)
        sd = [max(s, settings.relative_floor * abs(med), 1e-12) for s in sd]
    else:
        method = Method.ROBUST
        expected, sd = [med] * k, [robust_sd] * k
    zs = [(v - e) / s for v, e, s in zip(rec_y, expected, sd, strict=True)]
    z = statistics.median(zs)
    # The median of k residuals: a sustained shift moves it, one outlier among k does not.
    score = scale_likelihood(2 * gaussian_tail(abs(z) * math.sqrt(k)))
    severity = severity_of(score, settings)
    since = _since(t, y, zs, med, robust_sd) if severity is not None else None
    return Assessment(name, method, score, severity, sum(rec_y) / k, sum(expected) / k, z, since, len(y))


def _since(t: Sequence[datetime], y: Sequence[float], zs: Sequence[float], med: float, sd: float) -> datetime:
    """Start of the episode the recent residuals ``zs`` (the last len(zs) points) belong to: the first recent
    point off by 2 sd in the shift's direction, and, when that is the first recent point, further back through
    the history while its points stay 2 robust sd off its median in that direction. An episode longer than the
    recent window so keeps its start from one evaluation to the next (an action id is derived from it)."""
    z = statistics.median(zs)
    k = len(zs)
    run = [i for i, zi in enumerate(zs) if zi * z > 0 and abs(zi) >= 2.0]
    first = len(t) - k + (run[0] if run else k - 1)
    if run and run[0] == 0:
        while first > 0 and (y[first - 1] - med) * z > 0 and abs(y[first - 1] - med) >= 2.0 * sd:
            first -= 1
    return t[first]


def as_status_item(a: Assessment, at: datetime, action: str = "") -> dict[str, Any]:
    """An entry of status.anomalies (score as a decimal string, per the API's no-floats rule)."""
    item: dict[str, Any] = {
        "time": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "metric": a.series,
        "severity": (a.severity or Severity.INFO).value,
        "score": f"{a.score:.3f}",
        "message": a.message[:1024],
    }
    if action:
        item["action"] = action[:253]
    return item


def append_bounded(
    items: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]], limit: int = 20
) -> list[dict[str, Any]]:
    """status.anomalies after adding ``new`` (newest last), keeping the last ``limit``.

    Entries are keyed by (metric, time) where time is the episode start: an
    episode already listed is updated in place, not repeated."""
    out = list(items)
    for item in new:
        key = (item.get("metric"), item.get("time"))
        idx = next((i for i, old in enumerate(out) if (old.get("metric"), old.get("time")) == key), None)
        if idx is None:
            out.append(item)
        else:
            out[idx] = item
    return out[-limit:]
