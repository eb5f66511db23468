"""Status of a StaticTrainingJob from what the API server holds: pure, no I/O.

``compute`` turns the observed worker Job (or its absence) and the current
status into the status the job should have: phase, conditions with
observedGeneration and lastTransitionTime, replica counts, selector. Fields
other parts own (progress, compile, cost, anomalies, remediation) are never
touched here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from statictrain import api
from statictrain.conditions import LIFECYCLE_TYPES, Reason, set_condition, timestamp

from . import children

__all__ = [
    "Verdict",
    "compute",
    "conditions_for",
    "parse_timestamp",
    "preflight_condition",
    "timestamp",
    "ttl_remaining",
    "verdict",
]


def parse_timestamp(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


@dataclass(frozen=True)
class Verdict:
    """Phase and the reason and message for it."""

    phase: api.Phase
    reason: str
    message: str


def _job_condition(job: Mapping[str, Any], *types: str) -> Mapping[str, Any] | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in types and cond.get("status") == "True":
            return cond  # type: ignore[no-any-return]
    return None


def verdict(
    spec: api.Spec,
    job: Mapping[str, Any] | None,
    current: api.Status,
    queue: api.QueueStatus | None = None,
    preflight: api.PreflightStatus | None = None,
) -> Verdict:
    """The phase a job is in, given its worker Job (None when it does not exist), for a job in a
    Kueue queue its queue status (queueing.py: a Job that Kueue holds suspended is Pending), and
    while no worker Job exists, its pre-flight check (preflight.py: a failed one fails the job)."""
    suspended = bool(spec.get("suspend", False))
    if job is None:
        pre_phase, pre_message = (preflight or {}).get("phase"), (preflight or {}).get("message", "")
        if pre_phase == "Failed":
            return Verdict("Failed", Reason.PREFLIGHT_FAILED, f"the pre-flight check failed: {pre_message}")
        if suspended:
            return Verdict("Suspended", Reason.SUSPENDED, "spec.suspend is true; no workers exist")
        if pre_phase == "Running":
            return Verdict("Pending", Reason.PREFLIGHT_RUNNING, f"the pre-flight check runs first: {pre_message}")
        return Verdict("Pending", Reason.WORKERS_MISSING, "the worker Job does not exist yet")
    done = _job_condition(job, "SuccessCriteriaMet", "Complete")
    if done is not None:
        return Verdict("Succeeded", Reason.COMPLETED, done.get("message") or "worker 0 finished")
    failed = _job_condition(job, "FailureTarget", "Failed")
    if failed is not None:
        reason = failed.get("reason") or Reason.WORKERS_FAILED
        return Verdict("Failed", reason, failed.get("message") or "the workers failed")
    if (job.get("spec") or {}).get("suspend"):
        if queue is not None and not suspended:
            why = queue.get("message") or "waiting for admission by Kueue"
            return Verdict("Pending", Reason.QUEUED, f"in Kueue queue {queue.get('name')}: {why}")
        return Verdict("Suspended", Reason.SUSPENDED, "spec.suspend is true; worker pods were deleted")
    js = job.get("status") or {}
    want = int((job.get("spec") or {}).get("parallelism") or 0)
    ready = int(js.get("ready") or 0)
    failures = int(js.get("failed") or 0)
    if want and ready >= want:
        compiling = (current.get("compile") or {}).get("seconds") and not (current.get("progress") or {}).get(
            "step"
        )
        if compiling:
            return Verdict("Compiling", Reason.COMPILING, f"{ready}/{want} workers ready, compiling")
        return Verdict("Running", Reason.WORKERS_READY, f"{ready}/{want} workers ready")
    if failures:
        return Verdict(
            "Restarting", Reason.WORKER_FAILED, f"{failures} worker pod failure(s); {ready}/{want} ready"
        )
    return Verdict("Created", Reason.WORKERS_STARTING, f"{ready}/{want} workers ready")


def preflight_condition(state: api.PreflightStatus) -> api.Condition:
    """The PreflightPassed condition: Unknown while the pod runs, then True or False."""
    phase, message = state.get("phase"), state.get("message", "")
    if phase == "Passed":
        return {"type": "PreflightPassed", "status": "True", "reason": Reason.PREFLIGHT_PASSED, "message": message}
    if phase == "Failed":
        return {"type": "PreflightPassed", "status": "False", "reason": Reason.PREFLIGHT_FAILED, "message": message}
    return {"type": "PreflightPassed", "status": "Unknown", "reason": Reason.PREFLIGHT_RUNNING, "message": message}


_CONDITION_OF_PHASE: Mapping[str, api.ConditionType] = {
    "Running": "Running",
    "Compiling": "Running",
    "Restarting": "Restarting",
    "Suspended": "Suspended",
    "Succeeded": "Succeeded",
    "Failed": "Failed",
}


def conditions_for(
    v: Verdict,
    job_exists: bool,
    generation: int,
    current: Sequence[api.Condition],
    now: datetime,
    *,
    given: Sequence[api.Condition] = (),
) -> list[api.Condition]:
    """The lifecycle conditions (the converger's): Created is always present; the others appear once
    true and turn False when the phase moves on; ``given`` as they are (Admitted for a job in a Kueue
    queue, PreflightPassed). Other parts' conditions in ``current`` are left out."""
    conds = [c for c in current if c.get("type") in LIFECYCLE_TYPES]
    for cond in given:
        conds = set_condition(conds, {**cond, "observedGeneration": generation}, now)
    created: api.Condition = (
        {
            "type": "Created",
            "status": "True",
            "reason": Reason.WORKERS_CREATED,
            "message": "worker Job and Service exist",
        }
        if job_exists
        else {"type": "Created", "status": "False", "reason": v.reason, "message": v.message}
    )
    conds = set_condition(conds, {**created, "observedGeneration": generation}, now)
    active = _CONDITION_OF_PHASE.get(v.phase)
    present = {c.get("type") for c in conds}
    for ctype in ("Running", "Restarting", "Suspended", "Succeeded", "Failed"):
        if ctype == active:
            new: api.Condition = {"type": ctype, "status": "True", "reason": v.reason, "message": v.message}
        elif ctype in present:
            new = {
                "type": ctype,
                "status": "False",
                "reason": Reason.PHASE_CHANGED,
                "message": f"phase is {v.phase}",
            }
        else:
            continue
        new["observedGeneration"] = generation
        conds = set_condition(conds, new, now)
    return conds


def compute(
    name: str,
    spec: api.Spec,
    *,
    generation: int,
    job: Mapping[str, Any] | None,
    current: api.Status,
    now: datetime,
    queue: api.QueueStatus | None = None,
    admitted: api.Condition | None = None,
    preflight: api.PreflightStatus | None = None,
) -> api.Status:
    """The operator-owned part of status; ``queue`` and ``admitted`` for a job in a Kueue queue,
    ``preflight`` while the pre-flight check decides about a job without workers.

    A job that already Succeeded or Failed keeps that phase even if its
    worker Job is gone (deleted by its TTL or by hand).
    """
    if current.get("phase") in api.FINISHED_PHASES and job is None:
        return {}
    v = verdict(spec, job, current, queue, preflight)
    given = [c for c in (admitted, preflight and preflight_condition(preflight)) if c]
    js = (job or {}).get("status") or {}
    out: api.Status = {
        "phase": v.phase,
        "observedGeneration": generation,
        "replicas": int(js.get("active") or 0),
        "readyReplicas": int(js.get("ready") or 0),
        "restarts": int(js.get("failed") or 0),
        "selector": children.selector(name),
        "workers": {"job": children.worker_name(name), "service": children.worker_name(name)},
        "conditions": conditions_for(v, job is not None, generation, current.get("conditions") or [], now, given=given),
    }
    if queue is not None:
        out["queue"] = queue
    if preflight is not None:
        out["preflight"] = preflight
    if "startTime" in current:
        out["startTime"] = current["startTime"]
    elif v.phase in ("Running", "Compiling"):
        out["startTime"] = js.get("startTime") or timestamp(now)
    if v.phase in api.FINISHED_PHASES:
        out["completionTime"] = current.get("completionTime") or js.get("completionTime") or timestamp(now)
    return out


def ttl_remaining(spec: api.Spec, current: api.Status, now: datetime) -> timedelta | None:
    """Time until a finished job is due for deletion; None if it never is (or is not finished)."""
    ttl = (spec.get("runPolicy") or {}).get("ttlSecondsAfterFinished")
    done = current.get("completionTime")
    if ttl is None or current.get("phase") not in api.FINISHED_PHASES or not done:
        return None
    return parse_timestamp(done) + timedelta(seconds=int(ttl)) - now
