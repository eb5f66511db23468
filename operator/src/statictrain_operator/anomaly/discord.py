"""An online discord detector: NAB's detector, and the streaming method for series of any length.

Pure (numpy, no I/O, no clock). For every record, in order, with no look-ahead:

1. Channels. Each channel looks at the latest subsequence of ``m`` records
   (of the values, or of their first differences) and measures its distance
   to the nearest earlier subsequence (a "left matrix profile": Euclidean
   distance / sqrt(m), trivial matches within ``m`` records excluded). A shape
   never seen before in the series is far from everything before it.
2. Calibration. A channel's distance is divided by a high quantile of that
   channel's earlier distances (``history`` records), so every series is judged
   against its own variability; ``ratio / (1 + ratio)`` maps it into [0, 1)
   (0.5: as far as the quantile).
3. Episodes. When a channel reaches ``alarm_level``, its scores are zero for
   ``rest`` records: one alarm per episode.

The record's score is the largest channel score. Scaling the series does not
change any score (distances and their quantiles scale together).
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Calibrator", "Channel", "DiscordDetector", "DiscordSettings", "score_series"]

_FLOOR = 1e-12


@dataclass(frozen=True)
class Channel:
    """One view of the series."""

    m: int
    """Subsequence length in records."""
    differences: bool = False
    """Use first differences of the values instead of the values."""

    def __post_init__(self) -> None:
        if self.m < 1:
            raise ValueError(f"Channel.m must be >= 1, got {self.m}")


@dataclass(frozen=True)
class DiscordSettings:
    """Parameters of the discord detector: one set for every series."""

    channels: tuple[Channel, ...] = (Channel(4), Channel(4, differences=True), Channel(16))
    """Views of the series whose scores are combined by max."""
    quantile: float = 0.99
    """Quantile of a channel's earlier distances that a distance is compared with."""
    history: int = 5000
    """Earlier distances kept per channel for the quantile."""
    alarm_level: float = 0.5
    """Channel score that starts an episode (0.5: the distance equals the quantile)."""
    rest: int = 100
    """Records after an alarm during which that channel scores 0."""
    warmup_per_m: int = 3
    """A channel scores 0 for its first ``warmup_per_m * m' + 10`` records, m' = m (16 for differences)."""

    def __post_init__(self) -> None:
        if not self.channels:
            raise ValueError("DiscordSettings.channels must not be empty")
        if not 0.0 < self.quantile <= 1.0:
            raise ValueError(f"DiscordSettings.quantile must lie in (0, 1], got {self.quantile}")
        if self.history < 1 or self.rest < 0:
            raise ValueError("DiscordSettings: history must be >= 1 and rest >= 0")


class _RollingQuantile:
    """Quantile (linear interpolation, as numpy/pandas) of the last ``size`` values."""

    def __init__(self, size: int, q: float) -> None:
        self._size, self._q = size, q
        self._order: deque[float] = deque()
        self._sorted: list[float] = []

    def push(self, x: float) -> None:
        self._order.append(x)
        bisect.insort(self._sorted, x)
        if len(self._order) > self._size:
            old = self._order.popleft()
            del self._sorted[bisect.bisect_left(self._sorted, old)]

    def value(self) -> float:
        n = len(self._sorted)
        if n == 0:
            return 0.0
        pos = self._q * (n - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, n - 1)
        return self._sorted[lo] + (self._sorted[hi] - self._sorted[lo]) * (pos - lo)


class Calibrator:
    """Turns a stream of raw surprises (distances, residuals) into episode scores in [0, 1).

    Each surprise is divided by the ``quantile`` of the earlier ones
    (``history`` kept), mapped by ``r / (1 + r)``; the first ``warm`` records
    score 0, and after a score reaches ``alarm_level`` the next ``rest``
    records score 0.
    """

    def __init__(self, *, quantile: float, history: int, alarm_level: float, rest: int, warm: int) -> None:
        self._quant = _RollingQuantile(history, quantile)
        self._alarm, self._rest, self._warm = alarm_level, rest, warm
        self._last_alarm = -(10**9)
        self._t = 0

    @property
    def warm(self) -> bool:
        """True while the next record is still in the warm-up."""
        return self._t < self._warm

    def score(self, surprise: float) -> float:
        """Score the next record's surprise (pass 0.0 during the warm-up)."""
        i = self._t
        self._t += 1
        ref = self._quant.value()
        self._quant.push(surprise)
        if i < self._warm or ref <= 0.0:
            return 0.0
        ratio = surprise / max(ref, 1e-9)
        score = ratio / (1.0 + ratio)
        if i - self._last_alarm <= self._rest:
            return 0.0
        if score >= self._alarm:
            self._last_alarm = i
        return score


class _ChannelState:
    def __init__(self, ch: Channel, s: DiscordSettings, capacity: int) -> None:
        self.ch = ch
        self.buf = np.zeros(max(capacity, 16))
        self.n = 0
        self.prev_value: float | None = None
        self.cal = Calibrator(
            quantile=s.quantile,
            history=s.history,
            alarm_level=s.alarm_level,
            rest=s.rest,
            warm=s.warmup_per_m * (16 if ch.differences else ch.m) + 10,
        )

    def _append(self, x: float) -> None:
        if self.n == len(self.buf):
            self.buf = np.concatenate([self.buf, np.zeros(len(self.buf))])
        self.buf[self.n] = x
        self.n += 1

    def distance(self) -> float:
        m = self.ch.m
        j = self.n - m  # start of the newest subsequence
        lim = j - m  # earlier subsequences start at 0..lim-1 (exclusion zone m)
        if j < 1 or lim <= 0:
            return 0.0
        x = self.buf[: self.n]
        subs = np.lib.stride_tricks.sliding_window_view(x[: lim + m - 1], m)
        d = subs - x[j:]
        return float(np.sqrt(np.min(np.einsum("ij,ij->i", d, d)) / m))

    def update(self, value: float) -> float:
        if self.ch.differences:
            x = 0.0 if self.prev_value is None else value - self.prev_value
            self.prev_value = value
        else:
            x = value
        self._append(x)
        return self.cal.score(0.0 if self.cal.warm else self.distance())


class DiscordDetector:
    """Scores one series record by record; create one per series.

    ``value_range`` (the series' min and max, which NAB lets a detector know)
    only rescales values for numerical comfort; scores do not depend on it.
    """

    def __init__(
        self,
        settings: DiscordSettings | None = None,
        *,
        value_range: tuple[float, float] | None = None,
        capacity: int = 1024,
    ) -> None:
        self._s = settings or DiscordSettings()
        lo, hi = value_range if value_range else (0.0, 1.0)
        self._lo, self._scale = lo, (hi - lo) if hi > lo else 1.0
        self._channels = [_ChannelState(ch, self._s, capacity) for ch in self._s.channels]
        self._last: float | None = None

    def update(self, value: float) -> float:
        """Score one value in [0, 1). NaN/Inf is treated as a repeat of the last finite value."""
        if not math.isfinite(value):
            if self._last is None:
                return 0.0
            value = self._last
        self._last = value
        x = (value - self._lo) / self._scale
        return max(ch.update(x) for ch in self._channels)


def score_series(
    values: Sequence[float] | Iterable[float],
    settings: DiscordSettings | None = None,
    value_range: tuple[float, float] | None = None,
) -> list[float]:
    """Scores of a whole series, in order, from a fresh detector."""
    vals = list(values)
    det = DiscordDetector(settings, value_range=value_range, capacity=len(vals) + 1)
    return [det.update(v) for v in vals]
