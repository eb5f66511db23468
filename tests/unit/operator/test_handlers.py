"""The liveness verdict and the Job-after-plan view (the logic the handlers hold)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, cast

import kopf
import pytest
from statictrain_operator import children, converger, reconcile, runtime, status, views
from statictrain_operator.settings import Settings

from . import builders as b

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def memo(now: datetime, seen: datetime | None, heartbeat_namespace: str = "ops") -> Any:
    rt = runtime.Runtime(
        settings=Settings(heartbeat_namespace=heartbeat_namespace, heartbeat_s=10),
        kube=cast(Any, None),  # the verdict makes no API call
        holder="test",
        clock=lambda: now,
        started=T0,
    )
    rt.heartbeat_seen = seen
    return SimpleNamespace(runtime=rt)


def verdict(m: Any) -> str:
    healthy, message = runtime.of(m).heartbeat_verdict()
    if not healthy:
        raise kopf.PermanentError(message)
    return message


def test_probe_reports_the_heartbeat_age() -> None:
    assert verdict(memo(T0 + timedelta(seconds=12), T0 + timedelta(seconds=9))) == "3.0s"


def test_probe_fails_when_the_watch_stops_delivering() -> None:
    with pytest.raises(kopf.PermanentError, match="watch looks dead"):
        verdict(memo(T0 + timedelta(seconds=200), T0 + timedelta(seconds=100)))


def test_probe_counts_from_start_until_the_first_heartbeat() -> None:
    assert verdict(memo(T0 + timedelta(seconds=30), None)) == "30.0s"
    with pytest.raises(kopf.PermanentError):
        verdict(memo(T0 + timedelta(seconds=61), None))


def test_probe_stays_healthy_while_the_api_server_refuses_renewals_then_counts_again() -> None:
    """A restart cannot bring the API server back: an outage must not become a restart loop."""
    now = [T0 + timedelta(seconds=5)]
    m = memo(T0, T0 + timedelta(seconds=5))
    rt = runtime.of(m)
    rt.clock = lambda: now[0]
    rt.renewed(False)  # at 5 s the API server stops answering
    now[0] = T0 + timedelta(seconds=600)
    assert "refused heartbeat renewals for 595s" in verdict(m)
    rt.renewed(True)  # back at 600 s: the watch gets 6 periods to deliver a heartbeat again
    now[0] = T0 + timedelta(seconds=650)
    assert verdict(m) == "50.0s"
    now[0] = T0 + timedelta(seconds=661)
    with pytest.raises(kopf.PermanentError, match="watch looks dead"):
        verdict(m)


def test_probe_is_disabled_without_a_heartbeat_namespace() -> None:
    assert verdict(memo(T0 + timedelta(days=1), None, heartbeat_namespace="")) == "disabled"


def test_job_after_plan() -> None:
    o = b.owner()
    job = b.observed(children.worker_job(o, Settings()))
    assert converger.job_after(reconcile.Plan(delete_job=True), job) is None
    created = children.worker_job(o, Settings())
    assert converger.job_after(reconcile.Plan(create=[created]), None) is created
    patched = converger.job_after(reconcile.Plan(job_patch={"spec": {"suspend": True}}), job)
    assert patched is not None and patched["spec"]["suspend"] is True
    assert converger.job_after(reconcile.Plan(), job) is job


def test_index_snapshots_keep_what_planning_reads() -> None:
    """The template hash lives in an annotation: a snapshot without it would rebuild workers forever."""
    raw = {
        "metadata": {
            "name": "a-worker",
            "namespace": "n",
            "uid": "u",
            "labels": {"x": "y"},
            "annotations": {"statictrain.io/template-hash": "abc"},
            "ownerReferences": [{"uid": "o"}],
            "generation": 2,
        },
        "spec": {"parallelism": 2},
        "status": {"ready": 1},
    }
    snap = views.snapshot(kopf.Body(cast(kopf.RawBody, raw)))
    assert snap["metadata"]["annotations"] == {"statictrain.io/template-hash": "abc"}
    assert snap["metadata"]["ownerReferences"] == [{"uid": "o"}]
    assert (snap["spec"], snap["status"], snap["uid"]) == ({"parallelism": 2}, {"ready": 1}, "u")


def test_a_worker_jobs_snapshot_keeps_what_planning_reads_of_its_spec_and_no_template() -> None:
    """Planning and status on the trimmed snapshot decide as on the whole Job; the pod template is not kept."""
    o, settings = b.owner(), Settings()
    job = b.observed(children.worker_job(o, settings), status=b.job_status(active=1, ready=1), suspend=True)
    snap = views.snapshot(kopf.Body(cast(kopf.RawBody, job)), views.JOB_SPEC_READ)
    assert "template" not in snap["spec"] and snap["spec"]["suspend"] is True
    service = b.observed(children.service(o))
    assert reconcile.plan(o, settings, service, snap) == reconcile.plan(o, settings, service, job)
    assert reconcile.plan(o, settings, service, snap).job_patch == {"spec": {"suspend": False}}
    now = datetime(2026, 1, 1, tzinfo=UTC)
    trimmed, whole = (status.compute(o.name, o.spec, generation=1, job=j, current={}, now=now) for j in (snap, job))
    assert trimmed == whole
