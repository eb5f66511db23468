"""One accounting run end to end over in-memory API objects and Prometheus series."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from statictrain import labels
from statictrain.cost import Sample
from statictrain.pricing import parse_catalog, shipped_catalog_text
from statictrain_operator.cost.accounting import Accountant
from statictrain_operator.cost.budgets import BUDGET_ACTED
from statictrain_operator.cost.exporter import CostMetrics
from statictrain_operator.cost.settings import CostSettings
from statictrain_operator.prom import PrometheusUnavailableError, Series

T0 = datetime(2026, 3, 1, 0, 0, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


class MemoryKube:
    """API server state in memory: applies merge patches the way the server would for these fields."""

    def __init__(self) -> None:
        self.nodes = [
            {
                "metadata": {
                    "name": "n1",
                    "annotations": {labels.HOURLY_COST: "36"},
                    "labels": {},
                    "creationTimestamp": "2026-01-01T00:00:00Z",
                },
                "status": {"capacity": {labels.GPU_RESOURCE: "8"}},
            },
        ]
        self.pods = [self._pod("u1", "a", "c1"), self._pod("u2", "b", "c2")]
        self.jobs = {("ns", "a"): self._job("a", "c1", "1"), ("ns", "b"): self._job("b", "c2", None)}
        self.events: list[tuple[str, str]] = []

    @staticmethod
    def _pod(uid: str, job: str, commit: str) -> dict[str, Any]:
        return {
            "metadata": {
                "uid": uid,
                "name": f"{job}-w-0",
                "namespace": "ns",
                "labels": {labels.JOB: job, labels.COMMIT: commit, labels.TEAM: "t"},
            },
            "spec": {"nodeName": "n1", "containers": [{"resources": {"limits": {labels.GPU_RESOURCE: "2"}}}]},
            "status": {"phase": "Running", "startTime": "2026-02-28T23:00:00Z"},
        }

    @staticmethod
    def _job(name: str, commit: str, limit: str | None) -> dict[str, Any]:
        spec: dict[str, Any] = {"replicas": 1}
        if limit:
            spec["budget"] = {"limitUSD": limit, "onExceeded": "Suspend"}
        return {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "generation": 1,
                "annotations": {},
                "labels": {labels.COMMIT: commit},
                "creationTimestamp": "2026-02-28T23:00:00Z",
            },
            "spec": spec,
            "status": {"cost": {"updated": "2026-02-28T23:59:00Z"}},
        }

    def list_nodes(self) -> list[dict[str, Any]]:
        return self.nodes

    def list_worker_pods(self) -> list[dict[str, Any]]:
        return self.pods

    def list_jobs(self) -> list[dict[str, Any]]:
        return list(self.jobs.values())

    def patch_job_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> bool:
        if (namespace, name) not in self.jobs:
            return False
        self.jobs[(namespace, name)]["status"].update(status)
        return True

    def patch_job(self, namespace: str, name: str, patch: Mapping[str, Any]) -> bool:
        j = self.jobs[(namespace, name)]
        j["spec"].update(patch.get("spec", {}))
        j["metadata"]["annotations"].update(patch.get("metadata", {}).get("annotations", {}))
        return True

    def emit_event(self, job: Mapping[str, Any], reason: str, message: str, event_type: str) -> None:
        self.events.append((job["metadata"]["name"], reason))


class SeriesProm:
    def __init__(self, down: bool = False) -> None:
        self.down = down

    def query(self, query: str, at: float) -> list[Series]:
        return []

    def query_range(self, query: str, start: float, end: float, step: float) -> list[Series]:
        if self.down:
            raise PrometheusUnavailableError("cannot reach Prometheus at http://x")
        t = [start + i * step for i in range(int((end - start) / step))]
        if "utilization" in query:  # job a busy, job b idle
            return [Series({"pod_uid": "u1", "gpu": g}, tuple(Sample(x, 0.9) for x in t)) for g in "01"] + [
                Series({"pod_uid": "u2", "gpu": g}, tuple(Sample(x, 0.0) for x in t)) for g in "01"
            ]
        if "tokens" in query:
            return [Series({"pod_uid": "u1"}, tuple(Sample(x, 1000.0 * (x - start)) for x in t))]
        return []


def make(prom: SeriesProm) -> tuple[Accountant, MemoryKube, Clock, CollectorRegistry]:
    reg = CollectorRegistry()
    kube, clock = MemoryKube(), Clock()
    acc = Accountant(
        kube=kube,
        prom=prom,
        catalog=parse_catalog(shipped_catalog_text()),
        settings=CostSettings(interval_s=60, query_step_s=5),
        metrics=CostMetrics(reg),
        clock=clock,
    )
    return acc, kube, clock, reg


def test_two_runs_accumulate_status_metrics_and_budget_once() -> None:
    acc, kube, clock, reg = make(SeriesProm())
    clock.now = T0
    first = acc.run_once()  # window [T0-60s, T0): 2 GPUs x 60 s x 4.5 $/GPU-h = 0.15 $ per job
    assert first.job_costs[("ns", "a")].usd == Decimal("0.15")
    a = kube.jobs[("ns", "a")]["status"]["cost"]
    b = kube.jobs[("ns", "b")]["status"]["cost"]
    assert a["usd"] == "0.150000000" and b["usd"] == "0.150000000"
    assert b["idleUSD"] == "0.150000000" and a["idleUSD"] == "0.000000000"
    assert a["usdPer1MTokens"] != "" and b["usdPer1MTokens"] == ""
    assert first.allocation.jobs_usd + first.allocation.idle_usd == first.allocation.node_usd
    for _ in range(8):  # 8 more minutes: job a passes its 1 USD budget once
        clock.now += timedelta(seconds=60)
        acc.run_once()
    assert kube.jobs[("ns", "a")]["status"]["cost"]["usd"] == "1.350000000"
    assert kube.jobs[("ns", "a")]["spec"].get("suspend") is True
    assert kube.jobs[("ns", "a")]["metadata"]["annotations"][BUDGET_ACTED] == "1.000000"
    assert kube.events.count(("a", "BudgetExceededSuspended")) == 1
    assert "suspend" not in kube.jobs[("ns", "b")]["spec"]
    job_total = sum(
        reg.get_sample_value(
            "statictrain_job_cost_usd_total", {"job_name": j, "namespace": "ns", "commit": c, "team": "t"}
        )
        or 0
        for j, c in (("a", "c1"), ("b", "c2"))
    )
    node_total = reg.get_sample_value("statictrain_node_cost_usd_total", {"node": "n1"}) or 0
    idle_total = reg.get_sample_value("statictrain_node_idle_cost_usd_total", {"node": "n1"}) or 0
    assert abs((job_total + idle_total) / node_total - 1) < 1e-9


def test_prometheus_down_still_accounts_allocated_time() -> None:
    acc, kube, _, reg = make(SeriesProm(down=True))
    r = acc.run_once()
    gaps = reg.get_sample_value(
        "statictrain_job_cost_flags_total",
        {"job_name": "a", "namespace": "ns", "commit": "c1", "team": "t", "flag": "utilization-gaps"},
    )
    assert gaps == 1.0
    assert "cannot reach Prometheus" in r.usage_error
    assert kube.jobs[("ns", "a")]["status"]["cost"]["usd"] == "0.150000000"
    assert kube.jobs[("ns", "a")]["status"]["cost"]["idleUSD"] == "0.000000000"  # unknown is not idle


def test_new_job_is_accounted_from_the_run_start_like_the_nodes() -> None:
    acc, kube, _, _ = make(SeriesProm())
    kube.jobs[("ns", "b")]["status"]["cost"] = {}  # never accounted; its pod ran for an hour already
    r = acc.run_once()
    assert kube.jobs[("ns", "b")]["status"]["cost"]["usd"] == "0.150000000"
    assert r.allocation.jobs_usd + r.allocation.idle_usd == r.allocation.node_usd


@pytest.mark.parametrize(
    ("b_updated", "want_b"),
    [("2026-02-28T23:00:00Z", "9.000000000"), ("2026-02-28T23:59:50Z", "0.025000000")],
    ids=["lagging-one-hour", "ahead-by-50s"],
)
def test_job_with_another_watermark_gets_exactly_its_missing_time(b_updated: str, want_b: str) -> None:
    acc, kube, _, _ = make(SeriesProm())
    kube.jobs[("ns", "a")]["status"]["cost"]["updated"] = "2026-02-28T23:59:00Z"
    kube.jobs[("ns", "b")]["status"]["cost"]["updated"] = b_updated
    acc.run_once()
    assert kube.jobs[("ns", "b")]["status"]["cost"]["usd"] == want_b


def test_after_restart_the_run_starts_at_the_newest_watermark() -> None:
    acc, kube, _, _ = make(SeriesProm())
    for j in kube.jobs.values():
        j["status"]["cost"]["updated"] = "2026-02-28T23:58:00Z"  # operator was down for 2 minutes
    r = acc.run_once()
    assert r.window.start == T0.timestamp() - 120
    assert r.allocation.node_usd == Decimal("1.2")  # 36 $/h x 120 s
    assert kube.jobs[("ns", "a")]["status"]["cost"]["usd"] == "0.300000000"


def test_pods_of_a_deleted_job_still_count_in_metrics() -> None:
    acc, kube, _, reg = make(SeriesProm())
    del kube.jobs[("ns", "b")]
    r = acc.run_once()
    assert set(r.orphans) == {("ns", "b")}
    b = (
        reg.get_sample_value(
            "statictrain_job_cost_usd_total",
            {"job_name": "b", "namespace": "ns", "commit": "c2", "team": "t"},
        )
        or 0
    )
    assert b == pytest.approx(0.15)
    node = reg.get_sample_value("statictrain_node_cost_usd_total", {"node": "n1"}) or 0
    idle = reg.get_sample_value("statictrain_node_idle_cost_usd_total", {"node": "n1"}) or 0
    a = (
        reg.get_sample_value(
            "statictrain_job_cost_usd_total",
            {"job_name": "a", "namespace": "ns", "commit": "c1", "team": "t"},
        )
        or 0
    )
    assert a + b + idle == pytest.approx(node)


def test_job_deleted_between_list_and_patch_does_not_stop_the_run() -> None:
    acc, kube, _, reg = make(SeriesProm())
    listed = kube.list_jobs()
    kube.list_jobs = lambda: listed  # type: ignore[method-assign]
    del kube.jobs[("ns", "a")]  # gone after the list
    r = acc.run_once()
    assert kube.jobs[("ns", "b")]["status"]["cost"]["usd"] == "0.150000000"
    a = reg.get_sample_value(
        "statictrain_job_cost_usd_total", {"job_name": "a", "namespace": "ns", "commit": "c1", "team": "t"}
    )
    assert a == pytest.approx(0.15) and r.job_costs[("ns", "a")].usd == Decimal("0.15")
