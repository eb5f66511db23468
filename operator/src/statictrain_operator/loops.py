"""Background loops of the operator: the heartbeat and the TTL sweeper.

They run as asyncio tasks started by the startup handler, not as kopf daemons
or timers, because those put a finalizer on every object they serve (a Lease
or a job would then be stuck whenever the operator is not running).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from typing import Any

from statictrain import api

from . import runtime, status
from .kube import heartbeat, port

__all__ = [
    "beat",
    "expired",
    "heartbeat_loop",
    "periodic",
    "resync_loop",
    "start_periodic",
    "stop_periodic",
    "ttl_loop",
]


async def beat(rt: runtime.Runtime) -> None:
    """Renew the heartbeat Lease once."""
    await heartbeat.renew(rt.kube, rt.settings.heartbeat_namespace, runtime.HEARTBEAT_LEASE, rt.holder, rt.clock())


async def heartbeat_loop(rt: runtime.Runtime, logger: Any) -> None:
    while True:
        try:
            await beat(rt)
            rt.renewed(True)
        except Exception as e:  # an API hiccup must not end the loop; the probe notices missing beats
            rt.renewed(False)
            logger.warning(f"heartbeat renewal failed: {e}")
        await asyncio.sleep(rt.settings.heartbeat_s)


def expired(index: Mapping[Any, Any], rt: runtime.Runtime) -> Iterator[tuple[str, str, str]]:
    """(namespace, name, uid) of finished jobs whose ttlSecondsAfterFinished has passed."""
    now = rt.clock()
    for (namespace, name), store in list(index.items()):
        for view in list(store):
            spec: api.Spec = view["spec"]
            current: api.Status = view["status"]
            left = status.ttl_remaining(spec, current, now)
            if left is not None and left.total_seconds() <= 0:
                yield namespace, name, view["uid"]


async def resync_loop(rt: runtime.Runtime, index: Mapping[Any, Any]) -> None:
    """Converge every job every settings.resync_s: whatever an event missed is caught here."""
    while True:
        await asyncio.sleep(rt.settings.resync_s)
        for key in list(index.keys()):
            await rt.converger.converge(key)


async def ttl_loop(rt: runtime.Runtime, index: Mapping[Any, Any], logger: Any) -> None:
    deleting: set[str] = set()
    while True:
        for namespace, name, uid in list(expired(index, rt)):
            if uid in deleting:
                continue
            try:
                # the uid guards against deleting a newer job of the same name
                await rt.kube.delete(port.STJ, namespace, name, uid=uid)
            except Exception as e:
                logger.warning(f"could not delete {namespace}/{name} after its TTL: {e}")
                continue
            deleting.add(uid)
            logger.info(f"{namespace}/{name}: ttlSecondsAfterFinished has passed; deleted")
        await asyncio.sleep(rt.settings.ttl_sweep_s)


async def periodic(
    work: Callable[[], Awaitable[None]], interval_s: float, stop: asyncio.Event, first_delay_s: float = 0.0
) -> None:
    """Await ``work`` every ``interval_s`` seconds until ``stop`` is set (the cost and anomaly parts' loops).

    ``work`` handles its own errors; the wait ends early when ``stop`` is set.
    """

    async def wait(seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=seconds)

    if first_delay_s > 0:
        await wait(first_delay_s)
    while not stop.is_set():
        await work()
        await wait(interval_s)


def start_periodic(memo: Any, name: str, loop: Coroutine[Any, Any, None], stop: asyncio.Event) -> None:
    """Keep a part's background task and its stop event in kopf's memo under ``name``."""
    memo[f"{name}_stop"] = stop
    memo[f"{name}_task"] = asyncio.create_task(loop)


async def stop_periodic(memo: Any, name: str) -> None:
    """Stop what start_periodic started (on @kopf.on.cleanup) and wait for its last run to end."""
    stop: asyncio.Event | None = memo.get(f"{name}_stop")
    task: asyncio.Task[None] | None = memo.get(f"{name}_task")
    if stop is not None:
        stop.set()
    if task is not None:
        await task
