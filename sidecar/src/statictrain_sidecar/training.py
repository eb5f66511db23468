"""Training metrics folded from channel records: pure state, no I/O, no clock of its own.

``TrainingState.add`` takes each StepRecord with the monotonic time it was read;
the collector reads the totals, the step-time histogram, the latest record's
gauges and the seconds since the last step (stall detection).
"""

from __future__ import annotations

import logging
import math
import threading
from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from statictrain.channel import StepRecord

from .tailer import ChannelTailer

__all__ = ["STEP_SECONDS_BUCKETS", "TrainingFeed", "TrainingSnapshot", "TrainingState"]

_log = logging.getLogger(__name__)

STEP_SECONDS_BUCKETS: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
)
"""Upper bounds of the step-time histogram (seconds), before +Inf: from tiny CPU models to big steps."""


@dataclass(frozen=True)
class TrainingSnapshot:
    """A consistent copy of the state for one scrape."""

    steps_total: int
    tokens_total: int
    samples_total: int
    malformed_total: int
    bucket_counts: tuple[int, ...]
    """Cumulative counts per STEP_SECONDS_BUCKETS bound, then +Inf."""
    step_seconds_sum: float
    last: StepRecord | None
    tokens_per_second: float | None
    seconds_since_last_step: float
    loss_reported: bool


class TrainingState:
    """Aggregates of every record read since the sidecar started."""

    def __init__(self, started_at: float, *, rate_window: int = 20) -> None:
        """``started_at``: monotonic time of start; stall time counts from it until a first step."""
        self._started_at = started_at
        self._steps = 0
        self._tokens = 0
        self._samples = 0
        self._malformed = 0
        self._buckets = [0] * (len(STEP_SECONDS_BUCKETS) + 1)
        self._sum = 0.0
        self._last: StepRecord | None = None
        self._last_at: float | None = None
        self._loss_reported = False
        self._recent: deque[tuple[int, float]] = deque(maxlen=rate_window)

    def add(self, record: StepRecord, now: float) -> None:
        """Fold one record read at monotonic time ``now``."""
        self._steps += 1
        self._tokens += record.tokens
        self._samples += record.samples
        self._buckets[bisect_left(STEP_SECONDS_BUCKETS, record.step_seconds)] += 1
        self._sum += record.step_seconds
        self._last, self._last_at = record, now
        self._loss_reported = self._loss_reported or not math.isnan(record.loss)
        self._recent.append((record.tokens, record.step_seconds))

    def add_malformed(self, count: int = 1) -> None:
        """Count skipped channel lines."""
        self._malformed += count

    def snapshot(self, now: float) -> TrainingSnapshot:
        """The state as seen at monotonic time ``now``."""
        cumulative, running = [], 0
        for c in self._buckets:
            running += c
            cumulative.append(running)
        tokens = sum(t for t, _ in self._recent)
        seconds = sum(s for _, s in self._recent)
        since = now - (self._last_at if self._last_at is not None else self._started_at)
        return TrainingSnapshot(
            steps_total=self._steps,
            tokens_total=self._tokens,
            samples_total=self._samples,
            malformed_total=self._malformed,
            bucket_counts=tuple(cumulative),
            step_seconds_sum=self._sum,
            last=self._last,
            tokens_per_second=tokens / seconds if tokens and seconds > 0 else None,
            seconds_since_last_step=max(0.0, since),
            loss_reported=self._loss_reported,
        )


MALFORMED_LOGGED_FIRST = 10
"""Malformed channel lines logged one line each; after them, one summary line per MALFORMED_LOG_EVERY_S."""
MALFORMED_LOG_EVERY_S = 60.0
_BROKEN = ("not_a_file", "unreadable")


class TrainingFeed:
    """A tailer feeding a TrainingState, safe to refresh from the scrape and the background loop.

    Malformed lines are counted in the state and logged: the first MALFORMED_LOGGED_FIRST one line
    each, then at most one line per MALFORMED_LOG_EVERY_S with how many were skipped meanwhile. A
    change of the channel's status (``ChannelTailer.status``) is logged once."""

    def __init__(self, tailer: ChannelTailer | None, state: TrainingState, clock: Callable[[], float]) -> None:
        """``tailer`` None: no channel configured (state stays empty). ``clock``: monotonic seconds."""
        self._tailer = tailer
        self._state = state
        self._clock = clock
        self._lock = threading.Lock()
        self._status = "ok"
        self._malformed_seen = 0
        self._unlogged = 0
        self._logged_at = -math.inf

    def refresh(self) -> None:
        """Read what the trainer appended since the last refresh."""
        if self._tailer is None:
            return
        with self._lock:
            result = self._tailer.poll()
            now = self._clock()
            for record in result.records:
                self._state.add(record, now)
            if result.malformed:
                self._state.add_malformed(len(result.malformed))
                self._log_malformed(result.malformed, now)
            self._log_status(self._tailer)

    def _log_malformed(self, reasons: list[str], now: float) -> None:
        for reason in reasons:
            self._malformed_seen += 1
            if self._malformed_seen <= MALFORMED_LOGGED_FIRST:
                _log.warning("skipped malformed channel line #%d: %s", self._malformed_seen, reason)
                self._logged_at = now
            else:
                self._unlogged += 1
        if self._unlogged and now - self._logged_at >= MALFORMED_LOG_EVERY_S:
            _log.warning(
                "skipped %d more malformed channel lines (%d in all; the latest: %s)",
                self._unlogged,
                self._malformed_seen,
                reasons[-1],
            )
            self._unlogged, self._logged_at = 0, now

    def _log_status(self, tailer: ChannelTailer) -> None:
        status = tailer.status
        if status in _BROKEN and status != self._status:
            _log.warning("trainer channel %s: %s (will keep trying)", status, tailer.detail)
        elif status not in _BROKEN and self._status in _BROKEN:
            _log.info("reading the trainer channel %s again", tailer.path)
        self._status = status

    def snapshot(self) -> TrainingSnapshot:
        """Refresh, then copy the state."""
        self.refresh()
        with self._lock:
            return self._state.snapshot(self._clock())

    @property
    def status(self) -> str:
        """The channel's status (``tailer.STATUSES``); "ok" when no channel is configured."""
        return self._tailer.status if self._tailer is not None else "ok"

    @property
    def configured(self) -> bool:
        """Whether a channel is being tailed."""
        return self._tailer is not None

    def close(self) -> None:
        """Release the channel file."""
        if self._tailer is not None:
            with self._lock:
                self._tailer.close()
