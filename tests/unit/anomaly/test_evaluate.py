"""The evaluation orchestration with fake Prometheus and API: order of writes, fail-closed, Recommend mode."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry
from statictrain.cost import Sample
from statictrain_operator.anomaly import history as hist
from statictrain_operator.anomaly.evaluate import CONDITION_TYPE, Evaluator
from statictrain_operator.anomaly.exported import AnomalyMetrics
from statictrain_operator.anomaly.remediation import History, Intent
from statictrain_operator.anomaly.settings import AnomalySettings
from statictrain_operator.prom import PrometheusUnavailableError, Series
from statictrain_operator.workerpods import WorkerPod

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
GOOD = {"compile": {"mode": "default"}}
SETTINGS = AnomalySettings(
    prometheus_url="http://prom", lookback_s=600, step_s=10, rate_window_s=20, prophet_min_points=10_000
)


OWN_POD = 'pod_uid=~"uid-1"'
"""The matcher of the job's one worker pod (FakeApi.uids): the fake answers only queries that carry it."""


class FakeProm:
    def __init__(self, step_values: list[float] | None, down: bool = False, claimants: tuple[str, ...] = ()) -> None:
        self.values, self.down, self.claimants = step_values, down, claimants
        self.asked: list[str] = []

    def query(self, query: str, at: float) -> list[Series]:
        self.asked.append(query)
        return [Series({"pod_uid": u}, (Sample(at, 1.0),)) for u in self.claimants]

    def query_range(self, query: str, start: float, end: float, step: float) -> list[Series]:
        self.asked.append(query)
        if self.down:
            raise PrometheusUnavailableError("cannot reach http://prom: connection refused")
        if self.values is None or "train_step_seconds_sum" not in query or "by (commit)" in query:
            return []
        if OWN_POD not in query:
            return []
        n = len(self.values)
        t0 = NOW.timestamp() - (n - 1) * step
        return [Series({}, tuple(Sample(t0 + i * step, v) for i, v in enumerate(self.values)))]


class FakeApi:
    def __init__(self, job: dict[str, Any], uids: frozenset[str] = frozenset({"uid-1"})) -> None:
        self.job, self.uids = job, uids
        self.calls: list[str] = []
        self.status: dict[str, Any] = {}

    async def read_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.job

    async def worker_pods(self, namespace: str, name: str) -> tuple[WorkerPod, ...]:
        return tuple(WorkerPod(u, f"pod-{u}", namespace, 0.0, None) for u in sorted(self.uids))

    async def set_history(self, namespace: str, name: str, value: str) -> None:
        rec = hist.loads(value)
        self.calls.append("history:" + ",".join(f"{i.action.value}={i.done}" for i in rec.history.intents))
        self.job["metadata"].setdefault("annotations", {})[hist.ANNOTATION] = value

    async def patch_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        self.calls.append("status:" + ",".join(sorted(status)))
        self.status.update(status)

    async def apply(self, namespace: str, name: str, intent: Intent) -> int | None:
        self.calls.append(f"apply:{intent.action.value}")
        self.job["spec"].update(intent.target)
        self.job["metadata"]["generation"] += 1
        return int(self.job["metadata"]["generation"])

    async def event(self, job: Mapping[str, Any], *, reason: str, message: str, warning: bool, now: datetime) -> None:
        self.calls.append(f"event:{reason}")


def job(mode: str, good: dict[str, Any] | None = None) -> dict[str, Any]:
    ann = {hist.ANNOTATION: hist.dumps(hist.Record(History((), good)))} if good else {}
    return {
        "metadata": {"name": "j", "namespace": "ns", "generation": 2, "annotations": ann},
        "spec": {"compile": {"mode": "max-autotune"}, "remediation": {"mode": mode}},
        "status": {},
    }


def run(
    j: dict[str, Any], prom: FakeProm, now: datetime = NOW, uids: frozenset[str] = frozenset({"uid-1"})
) -> tuple[FakeApi, Any]:
    api = FakeApi(j, uids)
    ev = Evaluator(SETTINGS, prom, api, AnomalyMetrics(CollectorRegistry()), lambda: now)
    return api, asyncio.run(ev.evaluate(j))


REGRESSED = [0.1] * 40 + [0.3] * 5


def test_regression_records_intent_then_applies_then_marks_done() -> None:
    api, out = run(job("Auto", GOOD), FakeProm(REGRESSED))
    assert out.applied == ["RevertSettings"]
    i = api.calls.index("apply:RevertSettings")
    assert api.calls[i - 1] == "history:RevertSettings=False"
    assert api.calls[i + 1] == "history:RevertSettings=True"
    assert "event:AnomalyDetected" in api.calls and "event:RemediationRevertSettings" in api.calls
    assert api.job["spec"]["compile"] == {"mode": "default"}
    assert api.status["remediation"]["lastAction"] == "RevertSettings"
    cond = next(c for c in api.status["conditions"] if c["type"] == CONDITION_TYPE)
    assert (cond["status"], cond["reason"]) == ("True", "ActionApplied")


def test_no_worker_pods_is_no_action_and_no_read_not_a_match_all() -> None:
    prom = FakeProm(REGRESSED)
    api, out = run(job("Auto", GOOD), prom, uids=frozenset())
    assert out.applied == [] and not any(c.startswith("apply") for c in api.calls)
    assert out.data_problem is not None and "no worker pods" in out.data_problem
    assert prom.asked == []  # nothing read: no query selects "every series named for the job"
    assert api.job["spec"]["compile"] == {"mode": "max-autotune"}


def test_only_the_listed_pods_series_are_read() -> None:
    """The regression is served only to queries selecting uid-1; a job whose listed pod is another one
    reads nothing (the same series, exported in its name, do not count)."""
    _api, out = run(job("Auto", GOOD), FakeProm(REGRESSED), uids=frozenset({"uid-2"}))
    assert out.applied == [] and out.data_problem is not None and "is the sidecar scraped" in out.data_problem
    prom = FakeProm(REGRESSED)
    run(job("Auto", GOOD), prom)
    per_pod = [q for q in prom.asked if "statictrain_train_" in q or "statictrain_gpu_" in q]
    assert per_pod and all(OWN_POD in q for q in per_pod if not q.startswith("group by (pod_uid)"))


def test_claimants_that_are_not_the_jobs_pods_are_counted_once() -> None:
    j = job("Auto", GOOD)
    api = FakeApi(j)
    registry = CollectorRegistry()
    prom = FakeProm(REGRESSED, claimants=("uid-1", "evil"))
    ev = Evaluator(SETTINGS, prom, api, AnomalyMetrics(registry), lambda: NOW)
    asyncio.run(ev.evaluate(j))
    asyncio.run(ev.evaluate(j))
    assert ev.ignored.count == 1
    assert registry.get_sample_value("statictrain_ignored_series_total", {"job_name": "j", "namespace": "ns"}) == 1


def test_recommend_mode_announces_once_and_changes_nothing() -> None:
    j = job("Recommend", GOOD)
    api, out = run(j, FakeProm(REGRESSED))
    assert out.applied == [] and "event:RemediationRecommendedRevertSettings" in api.calls
    assert j["spec"]["compile"] == {"mode": "max-autotune"}
    api2, _ = run(api.job, FakeProm(REGRESSED))
    assert "event:RemediationRecommendedRevertSettings" not in api2.calls


class GridProm(FakeProm):
    """Answers as Prometheus does: a point at start + k * step for every k with the point <= end, the value
    a function of the point's absolute time (step time 0.1 s, 0.3 s from REGRESSED_AT; no data before
    SERIES_FROM)."""

    def query_range(self, query: str, start: float, end: float, step: float) -> list[Series]:
        if super().query_range(query, start, end, step) == []:
            return []
        points = [start + k * step for k in range(int((end - start) // step) + 1)]
        live = [t for t in points if t >= SERIES_FROM]
        return [Series({}, tuple(Sample(t, 0.3 if t >= REGRESSED_AT else 0.1) for t in live))]


REGRESSED_AT = NOW.timestamp() - 45
SERIES_FROM = NOW.timestamp() - 450


def test_one_episode_is_recommended_once_whatever_the_evaluation_times() -> None:
    """Evaluations a few seconds apart, off the step grid, read the same instants: the episode keeps its start
    and its action id, so Recommend mode announces it once (anchored at each evaluation's time, the points
    moved with it and every evaluation proposed a new id)."""
    j = job("Recommend", GOOD)
    announced = []
    for offset in (0, 3, 7, 13):
        api, _ = run(j, GridProm([0.0]), now=NOW + timedelta(seconds=offset))
        announced += [c for c in api.calls if c == "event:RemediationRecommendedRevertSettings"]
        j = api.job
    assert announced == ["event:RemediationRecommendedRevertSettings"]


def test_prometheus_down_fails_closed_with_condition() -> None:
    api, out = run(job("Auto", GOOD), FakeProm(None, down=True))
    assert out.applied == [] and not any(c.startswith("apply") for c in api.calls)
    cond = next(c for c in api.status["conditions"] if c["type"] == CONDITION_TYPE)
    assert (cond["status"], cond["reason"]) == ("False", "MetricsUnavailable")
    assert "connection refused" in cond["message"]


def test_no_samples_fails_closed() -> None:
    api, out = run(job("Auto", GOOD), FakeProm(None))
    assert out.data_problem is not None and "is the sidecar scraped" in out.data_problem
    assert not any(c.startswith("apply") for c in api.calls)


def test_stale_samples_fail_closed() -> None:
    _api, out = run(job("Auto", GOOD), FakeProm(REGRESSED), now=NOW + timedelta(hours=1))
    assert out.data_problem is not None and "old" in out.data_problem


def test_off_mode_only_writes_its_condition() -> None:
    api, _out = run(job("Off", GOOD), FakeProm(REGRESSED))
    assert api.calls == ["status:conditions"]
    assert api.status["conditions"][0]["reason"] == "RemediationOff"


def test_unchanged_condition_is_not_rewritten() -> None:
    j = job("Off")
    api, _ = run(j, FakeProm(None))
    j2 = replace_status(j, api.status)
    api2, _ = run(j2, FakeProm(None))
    assert api2.calls == []


def replace_status(j: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    return {**j, "status": dict(status)}


def test_settings_from_env_name_the_bad_variable() -> None:
    assert AnomalySettings.from_env({"STATICTRAIN_ANOMALY_INTERVAL_S": "5"}).interval_s == 5.0
    try:
        AnomalySettings.from_env({"STATICTRAIN_ANOMALY_STEP_S": "fast"})
    except ValueError as exc:
        assert "STATICTRAIN_ANOMALY_STEP_S" in str(exc)
    else:
        raise AssertionError("bad value accepted")
    assert replace(SETTINGS, step_s=60).policy().cooldown_s == SETTINGS.cooldown_s
