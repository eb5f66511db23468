"""Background loops of the operator: the heartbeat, the TTL sweeper and the extender probe.

They run as asyncio tasks started by the startup handler, not as kopf daemons
or timers, because those put a finalizer on every object they serve (a Lease
or a job would then be stuck whenever the operator is not running).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from typing import Any

import prometheus_client
from statictrain import api, metrics, redact

from . import extender_health, runtime, status
from .kube import events, heartbeat, port

__all__ = [
    "EXTENDER_UP",
    "beat",
    "expired",
    "extender_probe_loop",
    "heartbeat_loop",
    "periodic",
    "probe_extender",
    "resync_loop",
    "start_periodic",
    "stop_periodic",
    "ttl_loop",
]


log = logging.getLogger("statictrain.operator")

EXTENDER_UP = prometheus_client.Gauge(
    metrics.EXTENDER_UP,
    "1 when the scheduler extender answers the operator's health probe, 0 when it is down (set once the first "
    "verdict is in; absent when no extender URL is set)",
)


def _tls_context(tls_dir: str) -> ssl.SSLContext | None:
    """Checks the extender's certificate against tls_dir/ca.crt; shows none of its own (under mutual TLS the
    extender answers /healthz without one, so the operator holds no client identity)."""
    if not tls_dir:
        return None
    return ssl.create_default_context(cafile=os.path.join(tls_dir, "ca.crt"))


def probe_extender(url: str, timeout_s: float, tls_dir: str = "") -> tuple[bool, str]:
    """(ok, what was seen): ok only for HTTP 200 within the timeout (blocking: run it in a thread)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s, context=_tls_context(tls_dir)) as resp:
            return resp.status == 200, f"HTTP {resp.status}"
    except urllib.error.HTTPError as e:
        body = e.read(200).decode("utf-8", "replace").strip()
        return False, f"HTTP {e.code} {body}".strip()
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", None) or e
        return False, redact.redact(f"{type(reason).__name__}: {reason}")


async def extender_probe_loop(
    rt: runtime.Runtime, probe: Callable[[str, float, str], tuple[bool, str]] = probe_extender
) -> None:
    """Probe the extender every settings.extender_probe_s; on each change of its state: the gauge, one log line
    and one Event on the heartbeat Lease (where the operator has one)."""
    s = rt.settings
    url = redact.safe_url(s.extender_health_url)
    health = extender_health.ExtenderHealth(s.extender_probe_failures)
    while True:
        ok, detail = await asyncio.to_thread(probe, s.extender_health_url, s.extender_probe_timeout_s,
                                             s.extender_tls_dir)
        change = health.observe(ok, detail, rt.clock())
        if health.up is not None:
            EXTENDER_UP.set(1 if health.up else 0)
        if change is not None:
            (log.info if change.up else log.warning)(change.message(url))
            if change.worth_an_event and s.heartbeat_namespace:
                await _post(rt, change, url)
        await asyncio.sleep(s.extender_probe_s)


async def _post(rt: runtime.Runtime, change: extender_health.Transition, url: str) -> None:
    body = events.about_lease(
        rt.settings.heartbeat_namespace, runtime.HEARTBEAT_LEASE, reason=change.reason, message=change.message(url),
        event_type="Normal" if change.up else "Warning", component="statictrain-operator", now=change.at,
    )
    try:
        await rt.kube.create(port.EVENTS, body)
    except Exception as e:  # the log line and the gauge already say it; an API hiccup must not end the loop
        log.warning(f"could not post the {change.reason} Event: {e}")


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
