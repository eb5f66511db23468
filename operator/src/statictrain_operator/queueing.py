"""A StaticTrainingJob in a Kueue queue: pure, no I/O.

A job labelled ``kueue.x-k8s.io/queue-name`` is admitted through Kueue by way of
its worker Job: the operator copies the label (and ``kueue.x-k8s.io/priority-class``)
to the Job, creates it suspended, and from then on leaves ``spec.suspend`` of that
Job to Kueue, which unsuspends it on admission (putting the ResourceFlavor's node
labels into the pod template) and suspends it again on eviction or preemption.
Why the worker Job and not the StaticTrainingJob itself: batch/Job is one of
Kueue's built-in integrations, so nothing in Kueue has to be configured or
extended (external frameworks need Kueue's configuration changed and their own
workload controller), the Workload's pod set is exactly the worker pods that use
the quota, and a suspended Job already means "workers stopped, job not failed" to
the rest of the operator (Kueue's preemption reaches the trainers as the same
SIGTERM as a suspend, and pod deletions by suspension are not worker failures).

``spec.suspend`` of a queued job goes to the Workload's ``spec.active`` (``workload_patch``):
Kueue owns the Job's ``suspend`` and would start a suspended admitted Job again; an
inactive Workload it evicts and does not admit until it is active again. A job created
suspended can still be admitted in the moment before the operator sees its Workload.

``status`` turns what the converger read (the LocalQueue, Kueue's Workload of the
worker Job) into ``status.queue`` and the Admitted condition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from statictrain import api, labels

from .children import Owner

__all__ = ["Observed", "admitted_condition", "job_labels", "queue_name", "status", "workload_patch"]

QUEUED = "Queued"
ADMITTED = "Admitted"
QUEUE_MISSING = "LocalQueueNotFound"
EVICTED = "Evicted"


def queue_name(owner: Owner) -> str | None:
    """The LocalQueue the job asks for, or None."""
    return owner.labels.get(labels.KUEUE_QUEUE) or None


def job_labels(owner: Owner) -> dict[str, str]:
    """The Kueue labels to copy onto the worker Job."""
    keys = (labels.KUEUE_QUEUE, labels.KUEUE_PRIORITY_CLASS)
    return {k: owner.labels[k] for k in keys if owner.labels.get(k)}


@dataclass(frozen=True)
class Observed:
    """What the converger read about a queued job."""

    kueue: bool
    """Kueue's API is served in this cluster (False: the label is ignored, with a warning event)."""
    local_queue: Mapping[str, Any] | None = None
    workload: Mapping[str, Any] | None = None


def workload_patch(spec: api.Spec, workload: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The merge patch that makes the Workload active exactly when the job is not suspended; None: it is."""
    if workload is None:
        return None
    active = not spec.get("suspend", api.DEFAULTS["suspend"])
    if (workload.get("spec") or {}).get("active", True) == active:
        return None
    return {"spec": {"active": active}}


def _condition(obj: Mapping[str, Any], ctype: str) -> Mapping[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return cond  # type: ignore[no-any-return]
    return None


def _true(obj: Mapping[str, Any], ctype: str) -> bool:
    cond = _condition(obj, ctype)
    return cond is not None and cond.get("status") == "True"


def status(name: str, seen: Observed) -> api.QueueStatus:
    """status.queue of a job in LocalQueue ``name``."""
    out: api.QueueStatus = {"name": name, "admitted": False}
    lq = seen.local_queue
    if lq is None:
        out["message"] = f"LocalQueue {name!r} does not exist in this namespace; the job waits until it does"
        return out
    cq = (lq.get("spec") or {}).get("clusterQueue")
    if cq:
        out["clusterQueue"] = cq
    wl = seen.workload
    if wl is None:
        out["message"] = "waiting for Kueue to make a Workload for the worker Job"
        return out
    out["workload"] = wl["metadata"]["name"]
    admission = (wl.get("status") or {}).get("admission") or {}
    if admission.get("clusterQueue"):
        out["clusterQueue"] = admission["clusterQueue"]
    admitted = _true(wl, "Admitted")
    out["admitted"] = admitted
    if admitted:
        flavors: dict[str, str] = {}
        for assignment in admission.get("podSetAssignments") or []:
            flavors.update({str(k): str(v) for k, v in (assignment.get("flavors") or {}).items()})
        if flavors:
            out["flavors"] = flavors
        return out
    for ctype in ("Evicted", "Preempted", "QuotaReserved"):
        cond = _condition(wl, ctype)
        if cond is not None and cond.get("message") and (ctype == "QuotaReserved") != _true(wl, ctype):
            out["message"] = str(cond["message"])[:1024]
            break
    else:
        out["message"] = "waiting for admission by Kueue"
    return out


def admitted_condition(q: api.QueueStatus, seen: Observed) -> api.Condition:
    """The Admitted condition (without observedGeneration)."""
    if q.get("admitted"):
        flavors = ", ".join(f"{r}: {f}" for r, f in sorted((q.get("flavors") or {}).items()))
        return {"type": "Admitted", "status": "True", "reason": ADMITTED,
                "message": f"admitted by ClusterQueue {q.get('clusterQueue', '?')}" + (f" ({flavors})" if flavors
                                                                                       else "")}
    if seen.local_queue is None:
        reason = QUEUE_MISSING
    elif seen.workload is not None and _true(seen.workload, "Evicted"):
        reason = EVICTED
    else:
        reason = QUEUED
    return {"type": "Admitted", "status": "False", "reason": reason, "message": q.get("message", "")}
