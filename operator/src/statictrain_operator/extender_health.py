"""Is the scheduler extender up, as the operator's probes of its /healthz see it (pure: no I/O).

The statictrain-scheduler profile calls the extender as ``ignorable``: when it is
down, kube-scheduler places pods without it (no cost awareness) and says nothing
a user would see. The operator probes the extender's health endpoint every
``extender_probe_s`` (loops.extender_probe_loop) and feeds each result here.
:class:`ExtenderHealth` turns probe results into transitions: the first verdict,
then one per change (down after ``failures`` failed probes in a row, up after one
good answer), never one per probe, so the log line and the Event it leads to
come once per change.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

__all__ = ["ExtenderHealth", "Transition"]


@dataclass(frozen=True)
class Transition:
    """The extender went up or down (or got its first verdict: ``previous`` None)."""

    up: bool
    previous: bool | None
    at: datetime
    detail: str
    """What the probe that decided it saw (an HTTP status and body, or the connection error)."""
    down_s: float | None = None
    """When coming back up: seconds since the extender was first seen down."""

    @property
    def reason(self) -> str:
        """The Event reason: ExtenderDown or ExtenderUp."""
        return "ExtenderUp" if self.up else "ExtenderDown"

    @property
    def worth_an_event(self) -> bool:
        """Every change, and a first verdict of down; a first verdict of up is nothing to report."""
        return self.previous is not None or not self.up

    def message(self, url: str) -> str:
        """One line for the log and the Event (``url`` already free of credentials)."""
        if self.up and self.previous is None:
            return f"scheduler extender {url} answers its health check"
        if self.up:
            after = f" after {self.down_s:.0f}s down" if self.down_s is not None else ""
            return f"scheduler extender {url} answers its health check again{after}: cost-aware placement is back"
        return (
            f"scheduler extender {url} does not answer its health check ({self.detail}): pods of the statictrain "
            "scheduler profile are placed without cost awareness until it is back (the extender is ignorable)"
        )


class ExtenderHealth:
    """The extender's state from a stream of probe results; one writer: the probe loop."""

    def __init__(self, failures: int = 2) -> None:
        if failures < 1:
            raise ValueError(f"failures must be at least 1, got {failures}")
        self.failures = failures
        self.up: bool | None = None
        """None until the first verdict."""
        self.failed_in_a_row = 0
        self.down_since: datetime | None = None

    def observe(self, ok: bool, detail: str, now: datetime) -> Transition | None:
        """Record one probe; returns the transition it completes, else None."""
        if ok:
            self.failed_in_a_row = 0
            if self.up is True:
                return None
            previous, since = self.up, self.down_since
            self.up, self.down_since = True, None
            down_s = (now - since).total_seconds() if since is not None else None
            return Transition(True, previous, now, detail, down_s)
        self.failed_in_a_row += 1
        if self.failed_in_a_row == 1 and self.up is not False:
            self.down_since = now
        if self.up is False or self.failed_in_a_row < self.failures:
            return None
        was: bool | None = self.up
        self.up = False
        return Transition(False, was, now, detail)
