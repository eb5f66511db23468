"""What the operator writes, given desired and observed children."""

from __future__ import annotations

from typing import Any

from statictrain import api
from statictrain_operator import children, reconcile
from statictrain_operator.settings import Settings

from . import builders as b

S = Settings()


def existing(o: children.Owner, **job_kw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    return (b.observed(children.service(o)), b.observed(children.worker_job(o, S), **job_kw))


def test_creates_the_children_and_the_checkpoint_claim_when_nothing_exists() -> None:
    o = b.owner()
    p = reconcile.plan(o, S, None, None)
    assert [c["kind"] for c in p.create] == ["Job", "Service", "PersistentVolumeClaim"]
    assert p.wait is None and p.job_patch is None and not p.delete_job
    no_claim = reconcile.plan(o, Settings(checkpoint_volume_size=""), None, None)
    assert [c["kind"] for c in no_claim.create] == ["Job", "Service"]
    on = Settings(profile_token=True)
    token = reconcile.plan(o, on, None, None)
    assert [c["kind"] for c in token.create] == ["Job", "Service", "PersistentVolumeClaim", "Secret"]
    made = (b.observed(children.service(o)), b.observed(children.worker_job(o, on)))
    assert reconcile.plan(o, on, *made).empty  # made with the Job only


def test_creates_only_what_is_missing_after_a_crash_mid_create() -> None:
    o = b.owner()
    svc, _ = existing(o)
    p = reconcile.plan(o, S, svc, None)
    assert [c["kind"] for c in p.create] == ["Job", "PersistentVolumeClaim"]  # an existing claim answers 409


def test_nothing_to_do_when_children_match() -> None:
    o = b.owner()
    assert reconcile.plan(o, S, *existing(o)).empty


def test_elastic_scale_patches_parallelism_and_completions_in_place() -> None:
    s = b.spec(replicas=2, elastic={"minReplicas": 1, "maxReplicas": 8})
    svc, job = existing(b.owner(s))
    p = reconcile.plan(b.owner({**s, "replicas": 5}), S, svc, job)
    assert p.job_patch == {"spec": {"parallelism": 5, "completions": 5}}
    assert not p.delete_job and not p.create


def test_suspend_and_resume_patch_the_job() -> None:
    o = b.owner()
    svc, job = existing(o)
    p = reconcile.plan(b.owner(b.spec(suspend=True)), S, svc, job)
    assert p.job_patch == {"spec": {"suspend": True}}
    svc, job = existing(b.owner(b.spec(suspend=True)))
    assert reconcile.plan(o, S, svc, job).job_patch == {"spec": {"suspend": False}}


def test_changed_worker_settings_replace_the_job() -> None:
    svc, job = existing(b.owner())
    p = reconcile.plan(b.owner(b.spec(compile={"mode": "max-autotune"})), S, svc, job)
    assert p.delete_job and p.wait is not None and "restart" in p.wait


def test_a_finished_job_is_left_alone() -> None:
    o = b.owner()
    svc, job = existing(
        o,
    )
    job["status"] = b.job_status(conditions=[("Complete", "x")])
    assert reconcile.plan(b.owner(b.spec(precision="fp32")), S, svc, job).empty


def test_waits_for_a_job_being_deleted() -> None:
    o = b.owner()
    svc, job = existing(o)
    job["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    p = reconcile.plan(o, S, svc, job)
    assert p.empty and p.wait == "old worker Job is being deleted"


def test_never_adopts_children_of_another_owner() -> None:
    o = b.owner()
    svc, job = existing(o)
    job["metadata"]["ownerReferences"][0]["uid"] = "uid-of-a-deleted-job"
    p = reconcile.plan(o, S, svc, job)
    assert p.empty and p.wait is not None and "another owner" in p.wait


def test_hash_annotation_is_on_the_desired_job() -> None:
    job = children.worker_job(b.owner(), S)
    assert job["metadata"]["annotations"][api.TEMPLATE_HASH_ANNOTATION] == children.template_hash(b.owner(), S)


def test_a_finished_job_whose_children_are_gone_is_never_restarted() -> None:
    assert reconcile.plan(b.owner(), S, None, None, finished=True).empty


def test_the_planned_parts_plan_as_the_whole_desired_children_do_when_both_exist() -> None:
    elastic = b.spec(replicas=2, elastic={"minReplicas": 1, "maxReplicas": 8})
    was = b.owner(elastic)
    svc, job = existing(was)
    finished = b.observed(job, status=b.job_status(conditions=[("Complete", "x")]))
    cases = {  # (desired owner, observed Service, observed Job) -> what plan must say
        "matching": (was, svc, job),
        "scaled": (b.owner({**elastic, "replicas": 5}), svc, job),
        "suspended": (b.owner({**elastic, "suspend": True}), svc, job),
        "settings changed": (b.owner({**elastic, "compile": {"mode": "max-autotune"}}), svc, job),
        "another owner": (was, svc, b.observed(job, uid="uid-of-a-deleted-job")),
        "job being deleted": (was, svc, b.observed(job, deleting=True)),
        "job finished": (b.owner({**elastic, "precision": "fp32"}), svc, finished),
    }
    plans = set()
    for case, (o, s, j) in cases.items():
        whole = reconcile.desired_children(o, S)
        kept = reconcile.planned_parts(whole)
        assert reconcile.plan(o, S, s, j, desired=kept) == reconcile.plan(o, S, s, j, desired=whole), case
        plans.add(repr(reconcile.plan(o, S, s, j, desired=kept)))
    assert len(plans) == len(cases) - 1  # the cases plan differently (matching and finished: both nothing)
    assert len(repr(kept)) * 10 < len(repr(whole))  # the pod template is not kept
