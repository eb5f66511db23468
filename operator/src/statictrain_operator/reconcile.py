"""What to do about a StaticTrainingJob's children: pure, no I/O.

``plan`` compares the desired children (children/) with what the API server
holds and returns the writes that close the gap. It is safe to run any number
of times (kopf may re-run a handler after a crash): creating what exists is a
no-op, and objects that belong to another owner (a job deleted and re-created
under the same name, waiting for garbage collection) are waited for, never
adopted or duplicated.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from statictrain import api, labels

from . import children
from .settings import Settings

__all__ = ["JOB_SPEC_PLANNED", "Plan", "desired_children", "plan", "planned_parts"]

JOB_SPEC_PLANNED = ("suspend", "parallelism", "completions")
"""The desired Job's spec fields ``plan`` compares with the observed Job's (and patches)."""


@dataclass(frozen=True)
class Plan:
    """Writes to make, in order (the worker Job first); `wait` says why the job must be looked at again soon."""

    create: list[dict[str, Any]] = field(default_factory=list)
    job_patch: dict[str, Any] | None = None
    delete_job: bool = False
    wait: str | None = None

    @property
    def empty(self) -> bool:
        return not self.create and self.job_patch is None and not self.delete_job


def _owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in obj.get("metadata", {}).get("ownerReferences") or [])


def _finished(job: Mapping[str, Any]) -> bool:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if (
            cond.get("type") in ("Complete", "Failed", "SuccessCriteriaMet", "FailureTarget")
            and cond.get("status") == "True"
        ):
            return True
    return False


def desired_children(
    owner: children.Owner, settings: Settings, queue_labels: Mapping[str, str] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(headless Service, worker Job) as they should be; ``queue_labels`` put the Job in a Kueue queue."""
    return children.service(owner), children.worker_job(owner, settings, queue_labels)


def planned_parts(desired: tuple[dict[str, Any], dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """What ``plan`` reads of the desired (Service, Job) when both children exist: their names, the Job's
    template hash and its JOB_SPEC_PLANNED fields. A caller may keep this per job instead of the whole
    desired children (the pod template is most of their size); when a child is missing, ``plan`` creates it
    from what it is given, so it must be given the whole desired children then."""
    service, job = desired
    hashed = job["metadata"]["annotations"][api.TEMPLATE_HASH_ANNOTATION]
    return (
        {"metadata": {"name": service["metadata"]["name"]}},
        {
            "metadata": {"name": job["metadata"]["name"], "annotations": {api.TEMPLATE_HASH_ANNOTATION: hashed}},
            "spec": {k: job["spec"][k] for k in JOB_SPEC_PLANNED if k in job["spec"]},
        },
    )


def plan(
    owner: children.Owner,
    settings: Settings,
    observed_service: Mapping[str, Any] | None,
    observed_job: Mapping[str, Any] | None,
    *,
    finished: bool = False,
    desired: tuple[dict[str, Any], dict[str, Any]] | None = None,
) -> Plan:
    """The writes that bring the children of `owner` to the desired state.

    A job that already Succeeded or Failed (`finished`) gets nothing, even if
    its children are gone: it must never train again. `desired` is
    (Service, Job) from ``desired_children`` when the caller has it already.
    """
    if finished:
        return Plan()
    create: list[dict[str, Any]] = []
    desired_service, desired_job = desired or desired_children(owner, settings)
    for kind, observed, want in (  # the Job first: the API calls start in this order
        ("Job", observed_job, desired_job),
        ("Service", observed_service, desired_service),
    ):
        if observed is None:
            create.append(want)
        elif not _owned_by(observed, owner.uid):
            return Plan(
                wait=f"{kind} {want['metadata']['name']} belongs to another owner; "
                "waiting for the garbage collector to remove it"
            )
    if observed_job is None:
        # made with the Job (a 409 keeps the one that exists): the checkpoint claim, the profiling token
        made_with = [children.checkpoint_claim(owner, settings), children.profile_token_secret(owner, settings)]
        return Plan(create=[*create, *(obj for obj in made_with if obj)])
    if observed_job.get("metadata", {}).get("deletionTimestamp"):
        return Plan(create=create, wait="old worker Job is being deleted")
    if _finished(observed_job):
        return Plan(create=create)
    want_hash = desired_job["metadata"]["annotations"][api.TEMPLATE_HASH_ANNOTATION]
    have_hash = (observed_job["metadata"].get("annotations") or {}).get(api.TEMPLATE_HASH_ANNOTATION)
    if want_hash != have_hash:
        return Plan(
            create=create,
            delete_job=True,
            wait="worker settings changed; replacing the worker Job (all workers restart)",
        )
    have = observed_job.get("spec") or {}
    want = desired_job["spec"]
    patch: dict[str, Any] = {}
    # A Job in a Kueue queue is suspended and resumed by Kueue only (queueing.py).
    queued = labels.KUEUE_QUEUE in (observed_job["metadata"].get("labels") or {})
    if bool(have.get("suspend")) != want["suspend"] and not queued:
        patch["suspend"] = want["suspend"]
    if have.get("parallelism") != want["parallelism"]:
        patch["parallelism"] = want["parallelism"]
        patch["completions"] = want["completions"]
    return Plan(create=create, job_patch={"spec": patch} if patch else None)
