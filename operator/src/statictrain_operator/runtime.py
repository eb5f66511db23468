"""What handlers need at run time, built once by main and passed through kopf's memo."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from .kube.clients import Clients
from .settings import Settings

HEARTBEAT_LEASE = "statictrain-operator-heartbeat"


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Runtime:
    """Settings, API clients and the clock; plus the last heartbeat seen and the background tasks."""

    settings: Settings
    clients: Clients
    holder: str
    """Identity written into the heartbeat Lease (the pod name)."""
    clock: Callable[[], datetime] = utc_now
    started: datetime = field(default_factory=utc_now)
    """When the operator started (the heartbeat's age counts from here until the first one)."""
    heartbeat_seen: datetime | None = None
    """When the watch last delivered a renewed heartbeat Lease."""
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    """Background loops started at startup, cancelled at cleanup."""
    converger: Any = None
    """The converger.Converger, built at startup once kopf's indexes exist."""

    def heartbeat_verdict(self) -> tuple[bool, str]:
        """(healthy, message): unhealthy after 6 heartbeat periods without one arriving through the watch."""
        if not self.settings.heartbeat_namespace:
            return True, "disabled"
        age = (self.clock() - (self.heartbeat_seen or self.started)).total_seconds()
        if age > 6 * self.settings.heartbeat_s:
            return False, f"no heartbeat through the watch for {age:.0f}s: the watch looks dead"
        return True, f"{age:.1f}s"


def of(memo: Any) -> Runtime:
    """The Runtime stored in kopf's memo by main."""
    return cast(Runtime, memo.runtime)
