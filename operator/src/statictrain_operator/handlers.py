"""kopf handlers of StaticTrainingJobs: thin translations of events into pure decisions and API calls.

- create / resume / spec update: reconcile the children (reconcile.plan) and the status.
- worker Job events: recompute status (phase, conditions, counts) from the Job.
- background loops (loops.py): finished jobs deleted after runPolicy.ttlSecondsAfterFinished;
  the heartbeat Lease renewed, observed through the watch, checked by the liveness probe.

Nothing here adds a finalizer (no deletion handlers, no per-object daemons or
timers): children carry owner references, so the garbage collector removes
them even while the operator is down.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import kopf
from statictrain import api, labels

from . import children, loops, progress, reconcile, runtime, status
from .kube import clients, heartbeat, trainingjobs, workers

STJ = (labels.GROUP, labels.VERSION, labels.PLURAL)
LEASES = ("coordination.k8s.io", "v1", "leases")
MANAGED = {labels.MANAGED_BY: labels.MANAGED_BY_VALUE}


@kopf.on.login()
def login(memo: Any, **kwargs: Any) -> kopf.ConnectionInfo | None:
    """kopf's watches use the same cluster and credentials as our client (e.g. --kubeconfig)."""
    if clients.in_cluster():
        return kopf.login_with_service_account(**kwargs)  # re-reads the rotating token
    return kopf.ConnectionInfo(**clients.connection(runtime.of(memo).clients))


@kopf.index(*STJ)
def trainingjobs_index(namespace: str | None, name: str, body: kopf.Body, **_: Any) -> dict[Any, Any]:
    """Latest uid, spec, status and generation of every job, keyed by (namespace, name)."""
    return {
        (namespace, name): {
            "uid": body.metadata.uid,
            "generation": body.metadata.get("generation", 0),
            "spec": dict(body.spec),
            "status": dict(body.status),
        }
    }


def _job_after(plan: reconcile.Plan, observed: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The worker Job as it will be once `plan` is applied (for the status computed right after)."""
    if plan.delete_job:
        return None
    created = [obj for obj in plan.create if obj["kind"] == "Job"]
    if created:
        return created[0]
    if observed is not None and plan.job_patch:
        return {**observed, "spec": {**observed.get("spec", {}), **plan.job_patch["spec"]}}
    return observed


@kopf.on.resume(*STJ, id="reconcile")
@kopf.on.create(*STJ, id="reconcile")
@kopf.on.update(*STJ, id="reconcile", field="spec")
def reconcile_children(
    *, body: kopf.Body, patch: kopf.Patch, reason: str, memo: Any, logger: kopf.Logger, **_: Any
) -> None:
    """Bring the worker Job and Service to the spec; raise TemporaryError to look again while waiting.

    On creation the children are created without reading first (two API calls
    fewer per job); if either exists already (a retry after a crash), it reads
    and plans again, so nothing is ever duplicated or adopted.
    """
    rt = runtime.of(memo)
    owner = children.owner_from_body(body)
    name = children.worker_name(owner.name)
    finished = body.status.get("phase") in api.FINISHED_PHASES
    optimistic = reason == kopf.Reason.CREATE and not finished
    observed_svc = None if optimistic else workers.read_service(rt.clients, owner.namespace, name)
    observed_job = None if optimistic else workers.read_job(rt.clients, owner.namespace, name)
    plan = reconcile.plan(owner, rt.settings, observed_svc, observed_job, finished=finished)
    existed = [obj for obj in plan.create if not workers.create(rt.clients, obj)]
    for obj in plan.create:
        if obj not in existed:
            logger.info(f"created {obj['kind']} {name}")
    if existed:  # only possible when optimistic: look at what is there and plan again
        observed_svc = workers.read_service(rt.clients, owner.namespace, name)
        observed_job = workers.read_job(rt.clients, owner.namespace, name)
        plan = reconcile.plan(owner, rt.settings, observed_svc, observed_job, finished=finished)
        for obj in plan.create:
            workers.create(rt.clients, obj)
    if plan.job_patch:
        workers.patch_job(rt.clients, owner.namespace, name, plan.job_patch)
        logger.info(f"patched Job {name}: {plan.job_patch['spec']}")
    if plan.delete_job:
        workers.delete_job(rt.clients, owner.namespace, name)
        logger.info(f"deleted Job {name} to rebuild its workers")
    current: api.Status = dict(body.status)  # type: ignore[assignment]
    new = status.compute(
        owner.name,
        owner.spec,
        generation=body.metadata.get("generation", 0),
        job=_job_after(plan, observed_job),
        current=current,
        now=rt.clock(),
    )
    patch.status.update(status.changed_fields(current, new))
    if plan.wait:
        raise kopf.TemporaryError(plan.wait, delay=rt.settings.requeue_s)


@kopf.on.event("batch", "v1", "jobs", labels=MANAGED)
def worker_job_changed(*, event: kopf.RawEvent, body: kopf.Body, memo: Any, **kwargs: Any) -> None:
    """Recompute the owner's status from its worker Job."""
    index: kopf.Index[Any, Any] = kwargs["trainingjobs_index"]
    owner_name = body.metadata.labels.get(labels.JOB)
    namespace = body.metadata.namespace
    if not owner_name or namespace is None:
        return
    store = index.get((namespace, owner_name))
    if not store:
        return
    job_view = next(iter(store))
    refs = body.metadata.get("ownerReferences") or []
    if not any(ref.get("uid") == job_view["uid"] for ref in refs):
        return  # a leftover of a deleted job with the same name
    rt = runtime.of(memo)
    job = None if event["type"] == "DELETED" else dict(body)
    current: api.Status = job_view["status"]
    new = status.compute(
        owner_name,
        job_view["spec"],
        generation=job_view["generation"],
        job=job,
        current=current,
        now=rt.clock(),
    )
    diff = status.changed_fields(current, new)
    if diff:
        trainingjobs.patch_status(rt.clients, namespace, owner_name, diff)


def record_progress(rt: runtime.Runtime, namespace: str, name: str, report: progress.Report) -> bool:
    """Write what the workers report into status.progress; False if the job is gone."""
    return trainingjobs.patch_status(
        rt.clients, namespace, name, {"progress": progress.progress_status(report, rt.clock())}
    )


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
    """Start the heartbeat and the TTL sweeper (background tasks, so no object gets a finalizer)."""
    rt = runtime.of(memo)
    index: kopf.Index[Any, Any] = kwargs["trainingjobs_index"]
    rt.tasks.append(asyncio.create_task(loops.ttl_loop(rt, index, logger)))
    if rt.settings.heartbeat_namespace:
        await asyncio.to_thread(loops.beat, rt)  # exists before the Lease watch starts
        rt.tasks.append(asyncio.create_task(loops.heartbeat_loop(rt, logger)))
        logger.info(f"heartbeat Lease {rt.settings.heartbeat_namespace}/{runtime.HEARTBEAT_LEASE}")


@kopf.on.cleanup()
async def stop_loops(memo: Any, **_: Any) -> None:
    rt = runtime.of(memo)
    for task in rt.tasks:
        task.cancel()
    await asyncio.gather(*rt.tasks, return_exceptions=True)
    rt.tasks.clear()


@kopf.on.event(*LEASES, labels={heartbeat.HEARTBEAT_LABEL: "true"}, when=_is_own_lease)
def heartbeat_seen(memo: Any, **_: Any) -> None:
    rt = runtime.of(memo)
    rt.heartbeat_seen = rt.clock()


@kopf.on.probe(id="watch-heartbeat")
def watch_heartbeat_age(memo: Any, **_: Any) -> str:
    """Seconds since the watch last delivered the heartbeat; fails (HTTP 500) after 6 missed beats."""
    healthy, message = runtime.of(memo).heartbeat_verdict()
    if not healthy:
        raise kopf.PermanentError(message)
    return message
