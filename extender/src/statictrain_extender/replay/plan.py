"""Which pods to replay and when, time-compressed (pure).

A window ``[start_s, end_s)`` of trace time is replayed at ``speedup`` trace
seconds per wall second. Pods alive at ``start_s`` are created at wall time 0;
pods still alive at ``end_s`` are deleted at the end of the window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .trace import TraceError, TracePod

__all__ = ["Action", "ReplayWindow", "plan_actions", "window_pods"]


@dataclass(frozen=True, slots=True)
class ReplayWindow:
    """The part of the trace to replay and how fast."""

    start_s: int
    """First trace second replayed."""
    end_s: int
    """Trace second where the replay stops (exclusive)."""
    speedup: float
    """Trace seconds per wall-clock second."""

    def __post_init__(self) -> None:
        if self.end_s <= self.start_s:
            raise TraceError(f"replay window end {self.end_s} must be after start {self.start_s}")
        if not self.speedup > 0:
            raise TraceError(f"speedup must be > 0, got {self.speedup}")

    @property
    def wall_seconds(self) -> float:
        return (self.end_s - self.start_s) / self.speedup

    def to_wall(self, trace_s: float) -> float:
        return (min(max(trace_s, self.start_s), self.end_s) - self.start_s) / self.speedup


@dataclass(frozen=True, slots=True, order=True)
class Action:
    """Create or delete one pod at a wall-clock offset from the replay's start."""

    at_s: float
    kind: str  # "create" | "delete"; "create" sorts before "delete" at equal times
    pod: str


def window_pods(pods: Sequence[TracePod], window: ReplayWindow, max_pods: int | None = None) -> list[TracePod]:
    """Pods that exist at some time inside the window (the first ``max_pods`` by creation)."""
    chosen = [p for p in pods if p.creation_s < window.end_s and p.deletion_s > window.start_s]
    return chosen[:max_pods] if max_pods is not None else chosen


def plan_actions(pods: Sequence[TracePod], window: ReplayWindow) -> list[Action]:
    """Create and delete actions in wall-clock order."""
    actions: list[Action] = []
    for pod in pods:
        actions.append(Action(window.to_wall(pod.creation_s), "create", pod.name))
        actions.append(Action(window.to_wall(pod.deletion_s), "delete", pod.name))
    actions.sort()
    return actions
