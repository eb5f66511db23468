"""Leader election over a coordination.k8s.io Lease: of several operator replicas, one acts.

A replica started with ``leader_election`` waits in ``acquire`` (before kopf starts:
no watches, no handlers, no loops, so a standby cannot act) until it holds the Lease
``statictrain-operator-leader`` in its own namespace; it then runs the operator and
renews the Lease every third of ``leader_lease_s``. Whoever holds the Lease is
decided by the API server: every take-over or renewal is a merge patch carrying the
resourceVersion that was read, so of two replicas racing, one gets 409 Conflict.

As in client-go, a Lease counts as expired when its record has not changed for
``leader_lease_s`` *as observed by the waiting replica's own clock* (the holder's
clock and timestamps are never compared with ours). A leader that finds the Lease
held by someone else stops at once (the process exits; its pod restarts as a
standby); one that cannot reach the API server keeps going (nothing it writes
can land then) and learns on its next successful renewal. A leader that stops
cleanly hands the Lease back (an empty holder), so a standby takes over at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from .kube import port

__all__ = ["LEADER_LEASE", "Elector", "Observed", "decide", "identity", "standby_probe"]

LEADER_LEASE = "statictrain-operator-leader"

log = logging.getLogger("statictrain.operator.leader")


def identity(holder: str) -> str:
    """This process's name in the Lease: the pod name plus a per-process suffix (two processes never share it)."""
    return f"{holder}_{uuid.uuid4().hex[:8]}"


def _micro(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Observed:
    """The Lease record as last read, and when (this process's monotonic clock) it was first seen so."""

    record: tuple[str, str, str]
    """(holderIdentity, renewTime, resourceVersion): any change means its holder is alive."""
    since: float


def record_of(lease: Mapping[str, Any]) -> tuple[str, str, str]:
    spec = lease.get("spec") or {}
    return (str(spec.get("holderIdentity") or ""), str(spec.get("renewTime") or ""),
            str(lease["metadata"].get("resourceVersion", "")))


def decide(lease: Mapping[str, Any] | None, me: str, observed: Observed | None, now: float,
           lease_s: float) -> tuple[str, Observed | None]:
    """What to do with the Lease as read: ("create" | "renew" | "take" | "wait" | "lost", observation).

    "renew": it is ours; "take": free (no holder) or unchanged for ``lease_s`` seconds on our clock;
    "wait": someone else holds it and is alive; "lost" only matters to a leader (someone else holds it).
    """
    if lease is None:
        return "create", None
    record = record_of(lease)
    seen = observed if observed is not None and observed.record == record else Observed(record, now)
    holder = record[0]
    if holder == me:
        return "renew", seen
    if not holder or now - seen.since >= lease_s:
        return "take", seen
    return "wait", seen


class Elector:
    """Acquire, keep and hand back the leader Lease through the Kube port."""

    def __init__(self, kube: port.Kube, namespace: str, me: str, lease_s: float, *,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        if not namespace:
            raise ValueError("leader election needs the operator's own namespace (the heartbeat namespace)")
        self.kube, self.namespace, self.me, self.lease_s = kube, namespace, me, lease_s
        self.clock, self.wall = clock, wall
        self.observed: Observed | None = None

    def _spec(self, *, taking: bool, lease: Mapping[str, Any] | None) -> dict[str, Any]:
        now = _micro(self.wall())
        spec: dict[str, Any] = {"holderIdentity": self.me, "renewTime": now,
                                "leaseDurationSeconds": max(1, round(self.lease_s))}
        if taking:
            transitions = int(((lease or {}).get("spec") or {}).get("leaseTransitions") or 0)
            spec.update(acquireTime=now, leaseTransitions=transitions + (1 if lease else 0))
        return spec

    async def try_once(self) -> bool:
        """One round: read the Lease and create, renew or take it when that is due. True while we hold it."""
        lease = await self.kube.get(port.LEASES, self.namespace, LEADER_LEASE)
        action, self.observed = decide(lease, self.me, self.observed, self.clock(), self.lease_s)
        if action == "wait":
            return False
        if action == "create":
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": LEADER_LEASE, "namespace": self.namespace},
                    "spec": self._spec(taking=True, lease=None)}
            return await self.kube.create(port.LEASES, body) is not None  # None: another replica was first
        assert lease is not None
        patch = {"metadata": {"resourceVersion": lease["metadata"]["resourceVersion"]},
                 "spec": self._spec(taking=action == "take", lease=lease)}
        try:
            done = await self.kube.merge_patch(port.LEASES, self.namespace, LEADER_LEASE, patch)
        except port.ApiError as e:
            if e.status == 409:  # changed since we read it: another replica renewed or took it first
                return False
            raise
        if done is not None and action == "take":
            log.info(f"took the leader Lease {self.namespace}/{LEADER_LEASE} as {self.me}")
        return done is not None

    async def acquire(self) -> None:
        """Wait (as a standby) until this process holds the Lease; API errors only mean trying again."""
        log.info(f"standby: waiting for the leader Lease {self.namespace}/{LEADER_LEASE} as {self.me}")
        while True:
            try:
                if await self.try_once():
                    return
            except Exception as e:  # the API server away: a standby just keeps waiting
                log.warning(f"leader election: {type(e).__name__}: {e}")
            await asyncio.sleep(self.lease_s / 3)

    async def keep(self, lost: Callable[[], None]) -> None:
        """Renew every third of the lease; call ``lost`` and return once someone else holds it."""
        while True:
            await asyncio.sleep(self.lease_s / 3)
            try:
                if await self.try_once():
                    continue
            except Exception as e:  # unreachable: nothing we write can land either; find out on the next round
                log.warning(f"leader Lease renewal failed: {type(e).__name__}: {e}")
                continue
            log.error(f"the leader Lease is held by {self.observed.record[0] if self.observed else '?'} now; stopping")
            lost()
            return

    async def release(self) -> None:
        """Hand the Lease back (empty holder) if it is still ours, so a standby takes over at once."""
        lease = await self.kube.get(port.LEASES, self.namespace, LEADER_LEASE)
        if lease is None or record_of(lease)[0] != self.me:
            return
        patch = {"metadata": {"resourceVersion": lease["metadata"]["resourceVersion"]},
                 "spec": {"holderIdentity": None, "renewTime": None}}
        try:
            await self.kube.merge_patch(port.LEASES, self.namespace, LEADER_LEASE, patch)
        except port.ApiError as e:
            log.warning(f"could not hand the leader Lease back: {e}")


@contextlib.contextmanager
def standby_probe(liveness: str | None) -> Iterator[None]:
    """Answer the liveness endpoint (200, "standby") while this replica waits, before kopf serves it."""
    if not liveness:
        yield
        return
    url = urlsplit(liveness)
    body = json.dumps({"leader-election": "standby"}).encode()

    class Probe(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path.split("?", 1)[0] == (url.path or "/")
            self.send_response(200 if ok else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body) if ok else 0))
            self.end_headers()
            if ok:
                self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer((url.hostname or "0.0.0.0", url.port or 80), Probe)
    thread = threading.Thread(target=server.serve_forever, name="standby-probe", daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
