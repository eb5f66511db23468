"""A job in a Kueue queue: labels and suspension of the worker Job, status.queue, Admitted, phase.

The Workload bodies here have the shape Kueue v1beta2 writes; tests/integration/operator/test_kueue.py
checks the same fields against the real Kueue."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from statictrain import labels
from statictrain_operator import children, queueing, reconcile, status
from statictrain_operator.settings import Settings

from .builders import job_status, observed, owner, spec

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def queued_owner(**extra: str) -> children.Owner:
    o = owner()
    return children.Owner(o.name, o.namespace, o.uid, {**o.labels, labels.KUEUE_QUEUE: "gpu", **extra}, o.spec)


def workload(*conds: tuple[str, str, str], flavors: dict[str, str] | None = None) -> dict[str, Any]:
    st: dict[str, Any] = {"conditions": [{"type": t, "status": s, "reason": "R", "message": m} for t, s, m in conds]}
    if flavors is not None:
        st["admission"] = {"clusterQueue": "gpu-cq", "podSetAssignments": [{"name": "main", "flavors": flavors}]}
    return {"metadata": {"name": "job-gpt2-worker-abcde"}, "status": st}


LQ = {"metadata": {"name": "gpu"}, "spec": {"clusterQueue": "gpu-cq"}}


def test_queue_labels_are_copied_and_the_job_is_created_suspended() -> None:
    o = queued_owner(**{labels.KUEUE_PRIORITY_CLASS: "high"})
    job = children.worker_job(o, Settings(), queueing.job_labels(o))
    assert job["metadata"]["labels"][labels.KUEUE_QUEUE] == "gpu"
    assert job["metadata"]["labels"][labels.KUEUE_PRIORITY_CLASS] == "high"
    assert job["spec"]["suspend"] is True
    plain = children.worker_job(owner(), Settings())
    assert labels.KUEUE_QUEUE not in plain["metadata"]["labels"] and plain["spec"]["suspend"] is False
    # the pod template (and so its hash) is the same in or out of a queue: joining never rebuilds workers
    assert job["spec"]["template"] == plain["spec"]["template"]


def test_kueue_owns_suspend_of_a_queued_job() -> None:
    o = queued_owner()
    desired = reconcile.desired_children(o, Settings(), queueing.job_labels(o))
    svc, job = desired
    admitted = observed(job, suspend=False)  # Kueue unsuspended it
    p = reconcile.plan(o, Settings(), observed(svc), admitted, desired=desired)
    assert p.job_patch is None and p.empty
    # without the label on the Job the operator keeps spec.suspend as before
    plain = reconcile.desired_children(owner(spec(suspend=True)), Settings())
    p = reconcile.plan(owner(spec(suspend=True)), Settings(), observed(plain[0]), observed(plain[1], suspend=False),
                       desired=plain)
    assert p.job_patch == {"spec": {"suspend": True}}


def test_status_of_a_missing_local_queue() -> None:
    seen = queueing.Observed(kueue=True, local_queue=None)
    q = queueing.status("gpu", seen)
    assert q["admitted"] is False and "'gpu' does not exist" in q["message"]
    cond = queueing.admitted_condition(q, seen)
    assert (cond["status"], cond["reason"]) == ("False", "LocalQueueNotFound")


def test_status_while_waiting_for_quota() -> None:
    msg = "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor spot"
    seen = queueing.Observed(True, LQ, workload(("QuotaReserved", "False", msg)))
    q = queueing.status("gpu", seen)
    assert q == {"name": "gpu", "admitted": False, "clusterQueue": "gpu-cq", "workload": "job-gpt2-worker-abcde",
                 "message": msg}
    assert queueing.admitted_condition(q, seen)["reason"] == "Queued"


def test_status_once_admitted_names_the_flavors() -> None:
    seen = queueing.Observed(True, LQ, workload(("QuotaReserved", "True", "ok"), ("Admitted", "True", "ok"),
                                                flavors={"nvidia.com/gpu": "spot", "cpu": "spot"}))
    q = queueing.status("gpu", seen)
    assert q["admitted"] is True and q["flavors"] == {"nvidia.com/gpu": "spot", "cpu": "spot"}
    cond = queueing.admitted_condition(q, seen)
    assert cond["status"] == "True" and "nvidia.com/gpu: spot" in cond["message"]


def test_status_after_preemption_says_why() -> None:
    seen = queueing.Observed(True, LQ, workload(("QuotaReserved", "False", "x"), ("Admitted", "False", "x"),
                                                ("Evicted", "True", "Preempted to accommodate a workload")))
    q = queueing.status("gpu", seen)
    assert q["message"] == "Preempted to accommodate a workload"
    assert queueing.admitted_condition(q, seen)["reason"] == "Evicted"


def test_a_job_kueue_holds_is_pending_not_suspended() -> None:
    o = queued_owner()
    job = observed(children.worker_job(o, Settings(), queueing.job_labels(o)), status=job_status())
    seen = queueing.Observed(True, LQ, None)
    q = queueing.status("gpu", seen)
    out = status.compute(o.name, o.spec, generation=1, job=job, current={}, now=NOW, queue=q,
                         admitted=queueing.admitted_condition(q, seen))
    assert out["phase"] == "Pending" and out["queue"]["name"] == "gpu"
    conds = {c["type"]: c for c in out["conditions"]}
    assert conds["Admitted"]["status"] == "False" and "Suspended" not in conds
    # spec.suspend wins over the queue: the job is Suspended
    v = status.verdict(spec(suspend=True), job, {}, q)
    assert v.phase == "Suspended"


def test_spec_suspend_goes_to_the_workloads_active() -> None:
    wl = workload()
    assert queueing.workload_patch(spec(), wl) is None  # active by default, as Kueue makes it
    assert queueing.workload_patch(spec(suspend=True), wl) == {"spec": {"active": False}}
    inactive = {**wl, "spec": {"active": False}}
    assert queueing.workload_patch(spec(suspend=True), inactive) is None
    assert queueing.workload_patch(spec(suspend=False), inactive) == {"spec": {"active": True}}
    assert queueing.workload_patch(spec(suspend=True), None) is None  # no Workload yet
