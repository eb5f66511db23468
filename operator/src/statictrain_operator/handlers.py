"""kopf handlers: thin translations of events into calls of the converger and the loops.

- Indexes hold the latest StaticTrainingJobs, worker Jobs, Services and pre-flight pods in memory.
- Every event about a job, its worker Job, its Service or its pre-flight pod converges that job
  (converger.py: reconcile.plan, the kube layer, status.compute) - level-based,
  so a missed or repeated event changes nothing; a resync loop re-converges all.
- Background loops (loops.py): finished jobs deleted after ttlSecondsAfterFinished;
  the heartbeat Lease renewed, observed through the watch, checked by the liveness probe.

Nothing here adds a finalizer (no deletion handlers, no per-object daemons or
timers) and nothing is written into the jobs' annotations: children carry owner
references, so the garbage collector removes them even while the operator is down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

import kopf
from statictrain import labels

from . import children, converger, loops, runtime, views
from .kube import endpoint, heartbeat

__all__ = [
    "heartbeat_seen",
    "login",
    "preflight_pod_event",
    "preflight_pods_index",
    "start_loops",
    "stop_loops",
    "trainingjob_event",
    "trainingjobs_index",
    "watch_heartbeat_age",
    "worker_job_event",
    "worker_jobs_index",
    "worker_service_event",
    "worker_services_index",
]

STJ = (labels.GROUP, labels.VERSION, labels.PLURAL)
JOBS = ("batch", "v1", "jobs")
SERVICES = ("v1", "services")
PODS = ("v1", "pods")
LEASES = ("coordination.k8s.io", "v1", "leases")
MANAGED = {labels.MANAGED_BY: labels.MANAGED_BY_VALUE}
PREFLIGHT = {**MANAGED, labels.ROLE: children.PREFLIGHT}


@kopf.on.login()
def login(memo: Any, **kwargs: Any) -> kopf.ConnectionInfo | None:
    """kopf's watches use the same cluster and credentials as our client (e.g. --kubeconfig)."""
    ep = runtime.of(memo).endpoint
    if ep is None or (ep.token_path and endpoint.in_cluster()):
        return kopf.login_with_service_account(**kwargs)  # re-reads the rotating token
    return kopf.ConnectionInfo(**ep.kopf_fields())  # type: ignore[arg-type]


@kopf.index(*STJ)
async def trainingjobs_index(namespace: str | None, name: str, body: kopf.Body, **_: Any) -> dict[Any, Any]:
    """Every job (metadata, spec, status), keyed by (namespace, name)."""
    return {(namespace, name): views.snapshot(body)}


def _owner_key(body: kopf.Body) -> tuple[str, str] | None:
    owner = body.metadata.labels.get(labels.JOB)
    return (body.metadata.namespace, owner) if owner and body.metadata.namespace else None


@kopf.index(*JOBS, labels=MANAGED)
async def worker_jobs_index(body: kopf.Body, **_: Any) -> dict[Any, Any]:
    """Worker Jobs (metadata, the spec fields of views.JOB_SPEC_READ, status), keyed by their owner's
    (namespace, name)."""
    key = _owner_key(body)
    return {key: views.snapshot(body, views.JOB_SPEC_READ)} if key else {}


@kopf.index(*SERVICES, labels=MANAGED)
async def worker_services_index(body: kopf.Body, **_: Any) -> dict[Any, Any]:
    """Worker Services (metadata and status; planning reads no part of their spec), keyed by their owner's
    (namespace, name)."""
    key = _owner_key(body)
    return {key: views.snapshot(body, views.SPEC_READ["Service"])} if key else {}


@kopf.index(*PODS, labels=PREFLIGHT)
async def preflight_pods_index(body: kopf.Body, **_: Any) -> dict[Any, Any]:
    """Pre-flight pods (metadata, spec, status), keyed by their owner's (namespace, name)."""
    key = _owner_key(body)
    return {key: views.snapshot(body)} if key else {}


def _first(index: kopf.Index[Any, Any]) -> converger.Lookup:
    def lookup(key: converger.Key) -> Mapping[str, Any] | None:
        store = index.get(key)
        return next(iter(store), None) if store else None

    return lookup


@kopf.on.event(*STJ)
async def trainingjob_event(name: str, namespace: str | None, memo: Any, **_: Any) -> None:
    if namespace:
        runtime.of(memo).converger.request((namespace, name))


@kopf.on.event(*JOBS, labels=MANAGED)
async def worker_job_event(body: kopf.Body, memo: Any, **_: Any) -> None:
    key = _owner_key(body)
    if key:
        runtime.of(memo).converger.request(key)


@kopf.on.event(*SERVICES, labels=MANAGED)
async def worker_service_event(body: kopf.Body, memo: Any, **_: Any) -> None:
    key = _owner_key(body)
    if key:
        runtime.of(memo).converger.request(key)


@kopf.on.event(*PODS, labels=PREFLIGHT)
async def preflight_pod_event(body: kopf.Body, memo: Any, **_: Any) -> None:
    key = _owner_key(body)
    if key:
        runtime.of(memo).converger.request(key)


# ----------------------------------------------------------------------------- liveness


def _is_own_lease(name: str, namespace: str | None, memo: Any, **_: Any) -> bool:
    rt = runtime.of(memo)
    return (
        bool(rt.settings.heartbeat_namespace)
        and name == runtime.HEARTBEAT_LEASE
        and namespace == rt.settings.heartbeat_namespace
    )


@kopf.on.startup()
async def start_loops(memo: Any, logger: kopf.Logger, **kwargs: Any) -> None:
    """Build the converger; start the resync, TTL, heartbeat and extender probe loops (tasks, not per-object
    daemons)."""
    rt = runtime.of(memo)
    index: kopf.Index[Any, Any] = kwargs["trainingjobs_index"]
    rt.index = index
    rt.converger = converger.Converger(
        rt,
        (
            _first(index),
            _first(kwargs["worker_jobs_index"]),
            _first(kwargs["worker_services_index"]),
            _first(kwargs["preflight_pods_index"]),
        ),
        logging.getLogger("statictrain.operator"),
    )
    rt.tasks.add(asyncio.create_task(loops.resync_loop(rt, index)))
    rt.tasks.add(asyncio.create_task(loops.ttl_loop(rt, index, logger)))
    if rt.leader is not None and rt.leadership_lost is not None:
        rt.tasks.add(asyncio.create_task(rt.leader.keep(rt.leadership_lost)))
    if rt.settings.heartbeat_namespace:
        await loops.beat(rt)  # exists before the Lease watch starts
        rt.tasks.add(asyncio.create_task(loops.heartbeat_loop(rt, logger)))
        logger.info(f"heartbeat Lease {rt.settings.heartbeat_namespace}/{runtime.HEARTBEAT_LEASE}")
    if rt.settings.extender_health_url:
        rt.tasks.add(asyncio.create_task(loops.extender_probe_loop(rt)))


@kopf.on.cleanup()
async def stop_loops(memo: Any, **_: Any) -> None:
    rt = runtime.of(memo)
    for task in list(rt.tasks):
        task.cancel()
    await asyncio.gather(*rt.tasks, return_exceptions=True)
    rt.tasks.clear()
    if rt.leader is not None:
        with contextlib.suppress(Exception):  # best effort: otherwise the Lease simply expires
            await rt.leader.release()
    close = getattr(rt.kube, "close", None)  # HttpKube's session, opened on this loop
    if close is not None:
        await close()


@kopf.on.event(*LEASES, labels={heartbeat.HEARTBEAT_LABEL: "true"}, when=_is_own_lease)
async def heartbeat_seen(memo: Any, **_: Any) -> None:
    rt = runtime.of(memo)
    rt.heartbeat_seen = rt.clock()


@kopf.on.probe(id="watch-heartbeat")
def watch_heartbeat_age(memo: Any, **_: Any) -> str:
    """Seconds since the watch last delivered the heartbeat; fails (HTTP 500) after 6 missed beats."""
    healthy, message = runtime.of(memo).heartbeat_verdict()
    if not healthy:
        raise kopf.PermanentError(message)
    return message
