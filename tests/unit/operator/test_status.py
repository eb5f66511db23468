"""Phase, conditions and counters from the observed worker Job."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from statictrain import api
from statictrain_operator import children, status
from statictrain_operator.settings import Settings

from . import builders as b

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
LATER = NOW + timedelta(seconds=30)


def job(**kw: Any) -> dict[str, Any]:
    o = b.owner()
    return b.observed(children.worker_job(o, Settings()), status=b.job_status(**kw))


@pytest.mark.parametrize(
    ("spec", "observed", "want_phase", "want_reason"),
    [
        pytest.param(b.spec(), None, "Pending", "WorkersMissing", id="no-job"),
        pytest.param(b.spec(suspend=True), None, "Suspended", "Suspended", id="suspended-before-create"),
        pytest.param(b.spec(), job(), "Created", "WorkersStarting", id="pods-pending"),
        pytest.param(b.spec(), job(active=2, ready=1), "Created", "WorkersStarting", id="half-ready"),
        pytest.param(b.spec(), job(active=2, ready=2), "Running", "WorkersReady", id="all-ready"),
        pytest.param(b.spec(), job(active=2, ready=1, failed=1), "Restarting", "WorkerFailed", id="one-failed"),
        pytest.param(b.spec(), job(active=2, ready=2, failed=1), "Running", "WorkersReady", id="recovered"),
        pytest.param(
            b.spec(),
            job(conditions=[("SuccessCriteriaMet", "SuccessPolicy"), ("Complete", "x")]),
            "Succeeded",
            "Completed",
            id="succeeded",
        ),
        pytest.param(
            b.spec(),
            job(failed=4, conditions=[("FailureTarget", "BackoffLimitExceeded")]),
            "Failed",
            "BackoffLimitExceeded",
            id="backoff",
        ),
        pytest.param(
            b.spec(),
            job(conditions=[("Failed", "DeadlineExceeded")]),
            "Failed",
            "DeadlineExceeded",
            id="deadline",
        ),
    ],
)
def test_verdict(spec: api.Spec, observed: dict[str, Any] | None, want_phase: str, want_reason: str) -> None:
    v = status.verdict(spec, observed, {})
    assert (v.phase, v.reason) == (want_phase, want_reason)


def test_suspended_job() -> None:
    o = b.owner(b.spec(suspend=True))
    observed = b.observed(children.worker_job(o, Settings()), status=b.job_status())
    assert status.verdict(o.spec, observed, {}).phase == "Suspended"


def test_compiling_until_the_first_step() -> None:
    current: api.Status = {"compile": {"seconds": "12.5"}}
    assert status.verdict(b.spec(), job(active=2, ready=2), current).phase == "Compiling"
    current["progress"] = {"step": 1}
    assert status.verdict(b.spec(), job(active=2, ready=2), current).phase == "Running"


def types_and_status(conds: list[api.Condition]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in conds}


def test_conditions_follow_the_lifecycle_and_keep_transition_times() -> None:
    s = status.compute("gpt2", b.spec(), generation=1, job=job(active=2), current={}, now=NOW)
    assert s["phase"] == "Created"
    assert types_and_status(s["conditions"]) == {"Created": "True"}
    s = status.compute("gpt2", b.spec(), generation=1, job=job(active=2, ready=2), current=s, now=LATER)
    assert types_and_status(s["conditions"]) == {"Created": "True", "Running": "True"}
    created = next(c for c in s["conditions"] if c["type"] == "Created")
    assert created["lastTransitionTime"] == "2026-01-02T03:04:05Z"  # unchanged status keeps its time
    assert s["startTime"] == "2026-01-02T03:04:35Z"
    done = job(conditions=[("SuccessCriteriaMet", "SuccessPolicy")])
    s = status.compute("gpt2", b.spec(), generation=2, job=done, current=s, now=LATER + timedelta(seconds=1))
    assert s["phase"] == "Succeeded"
    assert types_and_status(s["conditions"]) == {"Created": "True", "Running": "False", "Succeeded": "True"}
    assert all(c["observedGeneration"] == 2 for c in s["conditions"])
    assert s["completionTime"] == "2026-01-02T03:04:36Z"
    assert s["startTime"] == "2026-01-02T03:04:35Z"


def test_counts_selector_and_workers() -> None:
    s = status.compute("gpt2", b.spec(), generation=3, job=job(active=2, ready=1, failed=1), current={}, now=NOW)
    assert (s["replicas"], s["readyReplicas"], s["restarts"], s["observedGeneration"]) == (2, 1, 1, 3)
    assert s["selector"] == "statictrain.io/job=gpt2,statictrain.io/role=worker"
    assert s["workers"] == {"job": "gpt2-worker", "service": "gpt2-worker"}


def test_finished_job_keeps_its_phase_when_the_workers_are_gone() -> None:
    assert status.compute("gpt2", b.spec(), generation=1, job=None, current={"phase": "Succeeded"}, now=NOW) == {}


def test_other_parts_conditions_are_not_the_convergers() -> None:
    current: api.Status = {
        "conditions": [
            {"type": "Remediation", "status": "True", "reason": "Healthy"},
            {"type": "BudgetExceeded", "status": "False", "reason": "WithinBudget"},
        ]
    }
    s = status.compute("gpt2", b.spec(), generation=1, job=job(), current=current, now=NOW)
    assert [c["type"] for c in s["conditions"]] == ["Created"]


@pytest.mark.parametrize(
    ("run_policy", "current", "want"),
    [
        pytest.param({}, {"phase": "Succeeded", "completionTime": "2026-01-02T03:04:05Z"}, None, id="no-ttl"),
        pytest.param({"ttlSecondsAfterFinished": 60}, {"phase": "Running"}, None, id="not-finished"),
        pytest.param(
            {"ttlSecondsAfterFinished": 60},
            {"phase": "Failed", "completionTime": "2026-01-02T03:04:05Z"},
            timedelta(seconds=60),
            id="due-later",
        ),
        pytest.param(
            {"ttlSecondsAfterFinished": 0},
            {"phase": "Succeeded", "completionTime": "2026-01-02T03:03:05Z"},
            timedelta(seconds=-60),
            id="overdue",
        ),
    ],
)
def test_ttl_remaining(run_policy: api.RunPolicy, current: api.Status, want: timedelta | None) -> None:
    assert status.ttl_remaining(b.spec(runPolicy=run_policy), current, NOW) == want
