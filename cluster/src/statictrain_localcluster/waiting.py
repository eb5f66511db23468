"""Waiting for the cluster to reach a state, for tests, benchmarks and the demo."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def eventually(check: Callable[[], Any], timeout: float = 90.0, what: str = "", interval: float = 0.5) -> Any:
    """Poll until ``check()`` returns something truthy and return it; after ``timeout``
    seconds fail with ``what`` and the last value. Waiting, not timing: callers assert
    on values only."""
    deadline = time.monotonic() + timeout
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}; last value {last!r}")
        time.sleep(interval)
