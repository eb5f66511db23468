"""Exponential backoff with jitter, bounded: how long to wait before trying the API again.

While the API server is down or answers 429/5xx, every retry doubles the wait (from
``base_s`` up to ``max_s``); each wait is drawn from its upper half ("equal jitter"),
so replicas and jobs that failed together do not retry in lockstep. Nothing is ever
given up: the wait stops growing at ``max_s``.

- ``Backoff``: per key (a job), the wait after each failure; a success resets it.
- ``Retries``: kopf's ``networking.error_backoffs`` (its watches, listings and event
  posts): an endless, fresh jittered series per request, so kopf never escalates an
  outage into a failed watcher or a stopped operator.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field

__all__ = ["Backoff", "Retries", "wait_s"]


def wait_s(failures: int, base_s: float, max_s: float, rng: random.Random) -> float:
    """Seconds to wait after failure number ``failures`` in a row: in [d/2, d], d = min(max, base*2^(n-1))."""
    if failures < 1:
        raise ValueError(f"failures counts from 1, got {failures}")
    ceiling = min(max_s, base_s * 2.0 ** min(failures - 1, 63))
    return ceiling / 2 + rng.uniform(0, ceiling / 2)


@dataclass
class Backoff:
    """Failures in a row per key and the wait after the latest one."""

    base_s: float
    max_s: float
    rng: random.Random = field(default_factory=random.Random)
    failures: dict[Hashable, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0 < self.base_s <= self.max_s:
            raise ValueError(f"backoff needs 0 < base ({self.base_s}) <= max ({self.max_s})")

    def failed(self, key: Hashable) -> float:
        """Count a failure of ``key``; the seconds to wait before trying it again."""
        n = self.failures.get(key, 0) + 1
        self.failures[key] = n
        return wait_s(n, self.base_s, self.max_s, self.rng)

    def succeeded(self, key: Hashable) -> None:
        """``key`` worked: the next failure starts from ``base_s`` again."""
        self.failures.pop(key, None)


@dataclass(frozen=True)
class Retries:
    """An endless series of jittered, growing, bounded waits; each ``iter()`` starts a new one."""

    base_s: float = 1.0
    max_s: float = 30.0

    def __iter__(self) -> Iterator[float]:
        rng = random.Random()
        n = 0
        while True:
            n += 1
            yield wait_s(n, self.base_s, self.max_s, rng)
