"""The generic online detector: rank surprises calibrated to a probability by each series' own history.

Pure (numpy, no I/O, no clock). For every record, in order, with no look-ahead:

1. Features. ``value`` is the record's value; ``diff`` the absolute change from the previous
   record; ``shape`` the distance (Euclidean / sqrt(m)) from the last ``shape_m`` records to the
   nearest earlier subsequence of the last ``history`` records (a left discord, KNN-CAD's
   nonconformity with one neighbour), overlapping subsequences excluded.
2. Rank surprise (a conformal p-value). A feature is ranked among its own last ``history``
   values, not counting itself: ``value`` two-sided, ``p = min(1, 2 (min(#<=x, #>=x) + 1) / (n + 1))``;
   ``diff`` and ``shape`` upper tail, ``p = (#>=x + 1) / (n + 1)``. The surprise ``-ln p`` is about
   Exp(1) on a series that behaves as its past did, whatever its scale, units or distribution.
   A value beyond every earlier one gets an exponential tail fitted to the ``tail`` most extreme
   earlier values instead (see ``rank_p``), so how far beyond counts.
3. Evidence over a span. A channel ``(feature, k)`` sums the last ``k`` surprises; under that same
   assumption the sum is Gamma(k, 1), whose tail probability ``P`` has a closed form, so every
   channel speaks the same unit, ``L = -log10 P``, on every series.
4. Score. ``L`` of the most surprised channel, mapped to ``L / (L + alarm_log10)`` (0.5 at
   ``P = 10**-alarm_log10``). The first ``warmup`` records score 0. A record reaching 0.5 starts an
   episode of ``rest`` records, in which a record scores only when its evidence exceeds the
   episode's peak so far ``step`` times (else 0): whatever threshold is applied later, an episode
   alarms once, or a few times if it keeps growing. The histories keep learning throughout.

Every score is invariant to scaling (either sign) and offset of the series (units, baselines).
Settings were chosen by leave-one-category-out on NAB's development split (``bench/nab/loco.py``;
``warmup`` was not varied).
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["Channel", "EnsembleDetector", "EnsembleSettings", "gamma_tail_log10", "rank_p", "score_series"]

_TINY = 1e-300
"""Smallest p-value (a surprise of at most ~690 nats per record)."""
Feature = Literal["value", "diff", "shape"]
FEATURES: tuple[Feature, ...] = ("value", "diff", "shape")


@dataclass(frozen=True)
class Channel:
    """One feature and the number of recent records whose surprises it sums."""

    feature: Feature
    """``value`` (two-sided rank of the value), ``diff`` (upper rank of the absolute change) or
    ``shape`` (upper rank of the distance from the last ``shape_m`` records to their nearest earlier match)."""
    k: int = 1
    """Records whose surprises are summed."""

    def __post_init__(self) -> None:
        if self.feature not in FEATURES:
            raise ValueError(f"Channel.feature must be one of {', '.join(FEATURES)}, got {self.feature!r}")
        if self.k < 1:
            raise ValueError(f"Channel.k must be >= 1, got {self.k}")


@dataclass(frozen=True)
class EnsembleSettings:
    """Parameters of the generic detector: one set for every series."""

    channels: tuple[Channel, ...] = (
        *(Channel("value", k) for k in (1, 4, 16)),
        *(Channel("diff", k) for k in (1, 4, 16)),
        *(Channel("shape", k) for k in (1, 4)),
    )
    """Channels whose evidence is combined by max."""
    shape_m: int = 16
    """Records in the ``shape`` feature's subsequence."""
    history: int = 2000
    """Earlier feature values each record is ranked against."""
    tail: int = 50
    """Extreme earlier values a tail is fitted to for values beyond the history (0: ranks only)."""
    alarm_log10: float = 3.0
    """Evidence ``-log10 P`` that scores 0.5 and starts an episode."""
    warmup: int = 100
    """Records scored 0 at the start of a series (their features still enter the history)."""
    rest: int = 200
    """Records an episode lasts from its start."""
    step: float = 1.5
    """Within an episode a record scores (otherwise 0) only when its evidence exceeds the episode's
    peak so far times ``step``: one alarm per episode at any threshold, a few more if it keeps growing."""
    flag_score: float = 0.62
    """Score at which a record is reported as anomalous (online use; NAB sweeps its own threshold):
    NAB's standard-profile threshold for these settings on the development split (0.617; the
    leave-one-category-out folds chose 0.61-0.65)."""

    def __post_init__(self) -> None:
        if not self.channels:
            raise ValueError("EnsembleSettings.channels must not be empty")
        if not 0.0 < self.flag_score < 1.0:
            raise ValueError(f"EnsembleSettings.flag_score must lie in (0, 1), got {self.flag_score}")
        if self.shape_m < 1 or self.history < 1 or min(self.warmup, self.rest, self.tail) < 0:
            raise ValueError("EnsembleSettings: shape_m and history must be >= 1, warmup, rest and tail >= 0")
        if not self.step >= 1.0:
            raise ValueError(f"EnsembleSettings.step must be >= 1, got {self.step}")
        if not self.alarm_log10 > 0.0:
            raise ValueError(f"EnsembleSettings.alarm_log10 must be > 0, got {self.alarm_log10}")


def rank_p(sorted_history: Sequence[float], x: float, *, two_sided: bool, tail: int = 0) -> float:
    """Rank p-value of ``x`` among ``sorted_history`` (ascending), in ``(0, 1]``.

    With ``tail`` > 0, a value beyond every earlier one gets an exponential tail fitted to the
    ``tail`` most extreme earlier values (peaks over threshold): ``p = tail / (n + 1) * exp(-(x - u) / b)``,
    ``u`` the tail's inner edge and ``b`` its mean excess, never above the rank p-value. So how far
    beyond the history a value lies counts, in the series' own units of spread.
    """
    n = len(sorted_history)
    at_least = n - bisect.bisect_left(sorted_history, x)
    p_hi = _beyond(sorted_history, x, tail, upper=True) if at_least == 0 else (at_least + 1) / (n + 1)
    if not two_sided:
        return p_hi
    at_most = bisect.bisect_right(sorted_history, x)
    p_lo = _beyond(sorted_history, x, tail, upper=False) if at_most == 0 else (at_most + 1) / (n + 1)
    return min(1.0, 2.0 * min(p_hi, p_lo))


def _beyond(h: Sequence[float], x: float, tail: int, *, upper: bool) -> float:
    n = len(h)
    p = 1.0 / (n + 1)
    if tail <= 0 or n < 2 * tail:
        return p
    edge = h[n - tail] if upper else h[tail - 1]
    part = h[n - tail :] if upper else h[:tail]
    b = abs(sum(part) / tail - edge)
    if b <= 0.0:
        return p
    return max(_TINY, min(p, tail / (n + 1) * math.exp(max(-abs(x - edge) / b, -700.0))))


def gamma_tail_log10(s: float, k: int) -> float:
    """``-log10 P(Gamma(k, 1) >= s)`` for integer ``k`` (0 for ``s <= 0``)."""
    if s <= 0.0:
        return 0.0
    # P = e^-s * sum_{j<k} s^j / j!, summed in log space from the largest term down.
    terms = [j * math.log(s) - math.lgamma(j + 1) for j in range(k)]
    top = max(terms)
    log_sum = top + math.log(sum(math.exp(t - top) for t in terms))
    return max(0.0, (s - log_sum) / math.log(10.0))


class _Feature:
    """Sliding sorted history of one feature."""

    def __init__(self, size: int, two_sided: bool, tail: int) -> None:
        self._size, self._two_sided, self._tail = size, two_sided, tail
        self._order: deque[float] = deque()
        self._sorted: list[float] = []

    def surprise(self, x: float) -> float:
        """``-ln p`` of ``x`` against the history, then ``x`` joins the history."""
        s = -math.log(rank_p(self._sorted, x, two_sided=self._two_sided, tail=self._tail)) if self._sorted else 0.0
        self._order.append(x)
        bisect.insort(self._sorted, x)
        if len(self._order) > self._size:
            old = self._order.popleft()
            del self._sorted[bisect.bisect_left(self._sorted, old)]
        return s


class _Shapes:
    """Distance from the newest ``m`` records to the nearest earlier subsequence within ``history``.

    Euclidean distance / sqrt(m); subsequences overlapping the newest one are excluded.
    """

    def __init__(self, m: int, history: int) -> None:
        self._m, self._history = m, history
        self._buf: deque[float] = deque(maxlen=history + 2 * m)

    def distance(self, x: float) -> float | None:
        self._buf.append(x)
        m = self._m
        n = len(self._buf)
        if n < 3 * m:
            return None
        a = np.fromiter(self._buf, dtype=float, count=n)
        newest = a[n - m :]
        earlier = np.lib.stride_tricks.sliding_window_view(a[: n - m], m)
        d = earlier - newest
        return float(np.sqrt(np.min(np.einsum("ij,ij->i", d, d)) / m))


class EnsembleDetector:
    """Scores one series record by record; create one per series."""

    def __init__(self, settings: EnsembleSettings | None = None) -> None:
        self._s = settings or EnsembleSettings()
        self._features = {
            "value": _Feature(self._s.history, two_sided=True, tail=self._s.tail),
            "diff": _Feature(self._s.history, two_sided=False, tail=self._s.tail),
            "shape": _Feature(self._s.history, two_sided=False, tail=self._s.tail),
        }
        self._shapes = (
            _Shapes(self._s.shape_m, self._s.history) if any(ch.feature == "shape" for ch in self._s.channels) else None
        )
        longest = max(ch.k for ch in self._s.channels)
        self._recent: dict[str, deque[float]] = {f: deque(maxlen=longest) for f in self._features}
        self._last: float | None = None
        self._t = 0
        self._episode_start = -(10**9)
        self._peak = 0.0

    def evidence(self, value: float) -> float:
        """``-log10 P`` of the most surprised channel for the next value (updates the state)."""
        if not math.isfinite(value):
            if self._last is None:
                return 0.0
            value = self._last
        x = {"value": value}
        if self._last is not None:
            x["diff"] = abs(value - self._last)
        if self._shapes is not None and (d := self._shapes.distance(value)) is not None:
            x["shape"] = d
        self._last = value
        for name, v in x.items():
            self._recent[name].append(self._features[name].surprise(v))
        best = 0.0
        for ch in self._s.channels:
            recent = self._recent[ch.feature]
            if len(recent) >= ch.k:
                best = max(best, gamma_tail_log10(sum(list(recent)[-ch.k :]), ch.k))
        return best

    def update(self, value: float) -> float:
        """Score one value in [0, 1). NaN/Inf is treated as a repeat of the last finite value."""
        i = self._t
        self._t += 1
        ev = self.evidence(value)
        if i < self._s.warmup:
            return 0.0
        if i - self._episode_start <= self._s.rest:
            if ev <= self._peak * self._s.step:
                return 0.0
            self._peak = ev
        elif ev >= self._s.alarm_log10:
            self._episode_start, self._peak = i, ev
        return ev / (ev + self._s.alarm_log10)


def score_series(values: Sequence[float] | Iterable[float], settings: EnsembleSettings | None = None) -> list[float]:
    """Scores of a whole series, in order, from a fresh detector."""
    det = EnsembleDetector(settings)
    return [det.update(v) for v in values]
