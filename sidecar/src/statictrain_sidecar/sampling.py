"""The background loop: every interval, run the sampling tasks; a failing task is logged, never fatal."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

__all__ = ["SamplingLoop"]


class SamplingLoop:
    """Calls each task every ``interval_s`` on one daemon thread until ``stop()``."""

    def __init__(
        self,
        interval_s: float,
        tasks: Sequence[tuple[str, Callable[[], None]]],
        clock: Callable[[], float],
        logger: logging.Logger | None = None,
    ) -> None:
        """``clock``: monotonic seconds, recorded at each completed round (``last_round_at``)."""
        self._interval = interval_s
        self._tasks = tuple(tasks)
        self._clock = clock
        self._log = logger or logging.getLogger(__name__)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.rounds = 0
        self.failures: dict[str, int] = {}
        self.last_round_at: float | None = None

    def run_once(self) -> None:
        """One round of every task."""
        for name, task in self._tasks:
            try:
                task()
            except Exception:
                n = self.failures.get(name, 0) + 1
                self.failures[name] = n
                if n == 1 or n % 1000 == 0:
                    self._log.exception("sampling task %s failed (%d times so far)", name, n)
        self.rounds += 1
        self.last_round_at = self._clock()

    def _run(self) -> None:
        while True:
            self.run_once()
            if self._stop.wait(self._interval):
                return

    def start(self) -> None:
        """Start the thread (first round at once)."""
        self._thread = threading.Thread(target=self._run, name="statictrain-sampler", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Ask the thread to end and wait for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def alive(self) -> bool:
        """Whether the thread runs."""
        return self._thread is not None and self._thread.is_alive()
