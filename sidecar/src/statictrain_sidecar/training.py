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


class TrainingFeed:
    """A tailer feeding a TrainingState, safe to refresh from the scrape and the background loop."""

    def __init__(
        self,
        tailer: ChannelTailer | None,
        state: TrainingState,
        clock: Callable[[], float],
        on_malformed: Callable[[str], None] | None = None,
    ) -> None:
        """``tailer`` None: no channel configured (state stays empty). ``clock``: monotonic seconds."""
        self._tailer = tailer
        self._state = state
        self._clock = clock
        self._on_malformed = on_malformed
        self._lock = threading.Lock()
        self._read_errors = 0

    def refresh(self) -> None:
        """Read what the trainer appended since the last refresh."""
        if self._tailer is None:
            return
        with self._lock:
            try:
                result = self._tailer.poll()
            except OSError as e:  # unreadable channel: no new records this time, metrics still served
                self._read_errors += 1
                if self._read_errors == 1:
                    _log.warning(
                        "cannot read the trainer channel %s: %s (will keep trying)", self._tailer.path, e
                    )
                return
            now = self._clock()
            for record in result.records:
                self._state.add(record, now)
            if result.malformed:
                self._state.add_malformed(len(result.malformed))
                if self._on_malformed is not None:
                    for reason in result.malformed:
                        self._on_malformed(reason)

    def snapshot(self) -> TrainingSnapshot:
        """Refresh, then copy the state."""
        self.refresh()
        with self._lock:
            return self._state.snapshot(self._clock())

    @property
    def configured(self) -> bool:
        """Whether a channel is being tailed."""
        return self._tailer is not None
