"""Where each scoring's throughput figure came from: counts for /metrics and one Event per pod.

Prioritize answers record here (on the event loop, without waiting); a
background thread of :mod:`.kubewatch` turns the queued notes into Pod Events,
so that ``kubectl describe pod`` says whether the $ per unit of work it was
placed by rests on the job's measured step times, on figures inferred from
them, or on the default table.
"""

from __future__ import annotations

import queue
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from statictrain.throughput import INFERRED, MEASURED, SOURCES, TABLE, JobThroughput

__all__ = ["EVENT_REASON", "EstimateLog", "PodNote", "describe"]

EVENT_REASON = "ThroughputEstimate"


@dataclass(frozen=True, slots=True)
class PodNote:
    """One Event to write."""

    namespace: str
    name: str
    uid: str
    message: str


def describe(estimates: JobThroughput | None, families: Iterable[str], chosen: str) -> tuple[str, str]:
    """(source of the figure for the chosen node's family, a one-line message naming the sources)."""
    if estimates is None:
        return TABLE, f"$ per unit of work from the default throughput table (no step times measured); best: {chosen}"
    by_source: dict[str, list[str]] = {}
    for family in sorted(set(families)):
        by_source.setdefault(estimates.source(family), []).append(family)
    parts = [f"{s} for {', '.join(by_source[s])}" for s in (MEASURED, INFERRED, TABLE) if s in by_source]
    source = estimates.source(chosen)
    return source, f"$ per unit of work from {'; '.join(parts)}; best: {chosen} ({source})"


class EstimateLog:
    """Counts per source and a bounded queue of Pod Events, each pod noted once."""

    def __init__(self, max_queued: int = 1000, remember: int = 10_000) -> None:
        self.counts: dict[str, int] = dict.fromkeys(SOURCES, 0)
        self.notes: queue.Queue[PodNote] = queue.Queue(max_queued)
        self.dropped = 0
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._remember = remember

    def record(self, source: str, note: PodNote | None) -> None:
        """Count a scoring; queue its Event unless this pod already has one (or the queue is full)."""
        self.counts[source] = self.counts.get(source, 0) + 1
        if note is None or not note.uid or note.uid in self._seen:
            return
        self._seen[note.uid] = None
        if len(self._seen) > self._remember:
            self._seen.popitem(last=False)
        try:
            self.notes.put_nowait(note)
        except queue.Full:
            self.dropped += 1
