"""What every part needs at run time, built once by main and passed through kopf's memo.

Settings (validated before kopf starts), the one Kube port, the one clock, the
endpoint kopf's watches log in with, and the kopf index of every
StaticTrainingJob (the single source of the job list, set at startup).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from .kube.endpoint import Endpoint
from .kube.port import Kube
from .settings import Settings

__all__ = ["HEARTBEAT_LEASE", "JobIndex", "Runtime", "job_views", "of", "utc_now"]

HEARTBEAT_LEASE = "statictrain-operator-heartbeat"

JobIndex = Mapping[Any, Any]
"""kopf's trainingjobs_index: (namespace, name) -> store of views (metadata, spec, status)."""


def utc_now() -> datetime:
    return datetime.now(UTC)


def job_views(index: JobIndex) -> list[dict[str, Any]]:
    """Every StaticTrainingJob in the index (metadata, spec, status), in a stable order."""
    out = []
    for key in sorted(index.keys()):
        for view in list(index.get(key) or ()):
            out.append({"metadata": dict(view["metadata"]), "spec": dict(view["spec"]), "status": dict(view["status"])})
    return out


@dataclass
class Runtime:
    """Settings, the API port and the clock; plus the last heartbeat seen and the background tasks."""

    settings: Settings
    kube: Kube
    holder: str
    """Identity written into the heartbeat Lease (the pod name)."""
    endpoint: Endpoint | None = None
    """Server and credentials of kopf's own watches (the same cluster as ``kube``)."""
    clock: Callable[[], datetime] = utc_now
    started: datetime = field(default_factory=utc_now)
    """When the operator started (the heartbeat's age counts from here until the first one)."""
    parts: Mapping[str, Any] = field(default_factory=dict)
    """Settings of the optional parts that are switched on, by part name (validated by main)."""
    heartbeat_seen: datetime | None = None
    """When the watch last delivered a renewed heartbeat Lease."""
    renewals_failing_since: datetime | None = None
    """When renewing the heartbeat began to fail (the API server unreachable or refusing); None while it works."""
    renewals_resumed: datetime | None = None
    """When renewing worked again after failures (the watch gets as long to catch up as after a start)."""
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    """Background loops started at startup, cancelled at cleanup."""
    converger: Any = None
    """The converger.Converger, built at startup once kopf's indexes exist."""
    index: JobIndex = field(default_factory=dict)
    """kopf's index of every StaticTrainingJob, set at startup."""
    leader: Any = None
    """The leader.Elector holding the leader Lease (leader election on), else None."""
    leadership_lost: Callable[[], None] | None = None
    """Called when another replica holds the leader Lease: stops the operator."""

    def renewed(self, ok: bool) -> None:
        """Record whether a heartbeat renewal reached the API server."""
        now = self.clock()
        if not ok:
            self.renewals_failing_since = self.renewals_failing_since or now
        elif self.renewals_failing_since is not None:
            self.renewals_failing_since, self.renewals_resumed = None, now

    def heartbeat_verdict(self) -> tuple[bool, str]:
        """(healthy, message): unhealthy after 6 heartbeat periods without one arriving through the watch.

        Not while renewals themselves fail: with the API server unreachable a restart cannot help (and a
        restart loop is what an outage must not cause); the count starts again once they work.
        """
        if not self.settings.heartbeat_namespace:
            return True, "disabled"
        if self.renewals_failing_since is not None:
            down = (self.clock() - self.renewals_failing_since).total_seconds()
            return True, f"the API server has refused heartbeat renewals for {down:.0f}s; waiting for it"
        since = max(t for t in (self.heartbeat_seen, self.renewals_resumed, self.started) if t is not None)
        age = (self.clock() - since).total_seconds()
        if age > 6 * self.settings.heartbeat_s:
            return False, f"no heartbeat through the watch for {age:.0f}s: the watch looks dead"
        return True, f"{age:.1f}s"

    def job(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The StaticTrainingJob's latest view from the index, or None."""
        store = self.index.get((namespace, name))
        view = next(iter(store), None) if store else None
        return None if view is None else {"metadata": view["metadata"], "spec": view["spec"], "status": view["status"]}

    def jobs(self) -> list[dict[str, Any]]:
        """Every StaticTrainingJob from the index (no API call)."""
        return job_views(self.index)


def of(memo: Any) -> Runtime:
    """The Runtime stored in kopf's memo by main."""
    return cast(Runtime, memo.runtime)
