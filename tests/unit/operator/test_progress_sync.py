"""The progress pass and the anomaly part's pod listing over FakeKube (the Kube port in memory, checked against
the real API server by test_kube_contract): only the listed worker pods' series reach status.progress."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

import pytest
from statictrain import labels
from statictrain.cost import Sample
from statictrain_operator import progress, workerpods
from statictrain_operator.anomaly.cluster import ClusterJobApi
from statictrain_operator.kube import port
from statictrain_operator.progress.sync import SCRAPE_TENANCY_PODS, ProgressSync
from statictrain_operator.prom import PrometheusUnavailableError, Series

from tests.fakes.kube import FakeKube

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def pod(kube: FakeKube, ns: str, name: str, job: str, role: str = "worker") -> str:
    body = {"metadata": {"name": name, "namespace": ns, "labels": {labels.JOB: job, labels.ROLE: role}}}
    made = asyncio.run(kube.create(port.PODS, body))
    assert made is not None
    return str(made["metadata"]["uid"])


class PerPodProm:
    """Answers each progress query with the given per-pod values (the queries group by pod_uid)."""

    def __init__(self, rows: list[tuple[str, str, str, dict[str, float]]],
                 sidecars: list[dict[str, str]] | None = None, settings: list[dict[str, str]] | None = None) -> None:
        self.rows = rows
        self.names = {q: n for n, q in progress.queries(60).items()}
        self.sidecars = sidecars or []
        """Label sets of the scrape check's answer (one per sidecar)."""
        self.settings = settings or []
        """Label sets of the settings query's answer (one per pod)."""

    def query(self, query: str, at: float) -> list[Series]:
        if query == workerpods.SCRAPE_CHECK_QUERY:
            return [Series(lab, (Sample(at, 1.0),)) for lab in self.sidecars]
        if query == progress.SETTINGS_QUERY:
            return [Series(lab, (Sample(at, 1.0),)) for lab in self.settings]
        name = self.names[query]
        return [
            Series({"namespace": ns, "job_name": job, "pod_uid": uid}, (Sample(at, values[name]),))
            for ns, job, uid, values in self.rows
            if name in values
        ]

    def query_range(self, query: str, start: float, end: float, step: float) -> list[Series]:
        raise AssertionError("progress reads instant values only")


def test_progress_comes_from_the_jobs_own_pods_only() -> None:
    kube = FakeKube(lambda: NOW)
    job = asyncio.run(kube.create(port.STJ, {"metadata": {"name": "victim", "namespace": "a"},
                                             "spec": {"training": {"maxSteps": 1000}}}))
    assert job is not None
    own = pod(kube, "a", "victim-0", "victim")
    other = pod(kube, "a", "other-0", "other")  # another job's pod in the same namespace
    evil = pod(kube, "b", "evil-0", "victim")  # a pod labelled with the victim's name, in another namespace
    mine = {"step": 120.0, "step_rate_sum": 1.0, "step_rate_count": 10.0, "tokens_per_second": 1000.0,
            "compile_seconds": 30.0, "autotune_speedup": 1.242}
    hostile = {"step": 999_999.0, "step_rate_sum": 300.0, "step_rate_count": 1.0, "tokens_per_second": 1e9,
               "compile_seconds": 1.0, "autotune_speedup": 0.001}
    said = [{"namespace": "a", "job_name": "victim", "pod_uid": own, "settings": "reduce-overhead@16+fp8",
             "chosen_by": "autotune"}]
    said += [{"namespace": "a", "job_name": "victim", "pod_uid": uid, "settings": "a-" + "x" * 200,
              "chosen_by": "me"} for uid in (other, evil)]
    prom = PerPodProm([("a", "victim", own, mine), ("a", "victim", other, hostile), ("a", "victim", evil, hostile)],
                      settings=said)
    sync = ProgressSync(kube, prom, 60, lambda: [job], lambda: NOW)  # kopf's index in the operator
    assert asyncio.run(sync.run_once()) == 1
    got: Any = asyncio.run(kube.get(port.STJ, "a", "victim"))
    figures = got["status"]["progress"]
    assert (figures["step"], figures["stepSeconds"], figures["tokensPerSecond"]) == (120, "0.100", 1000)
    assert got["status"]["compile"] == {
        "seconds": "30.000", "settings": "reduce-overhead@16+fp8", "chosenBy": "autotune", "autotuneSpeedup": "1.242"
    }
    assert sync.ignored.seen == {("a", "victim", other), ("a", "victim", evil)}


def test_the_anomaly_part_lists_the_jobs_worker_pods_in_its_namespace() -> None:
    kube = FakeKube(lambda: NOW)
    own = {pod(kube, "a", f"victim-{i}", "victim") for i in range(2)}
    pod(kube, "a", "victim-tool", "victim", role="tool")  # labelled with the job but not a worker
    pod(kube, "b", "victim-0", "victim")  # the same name in another namespace: another job
    pod(kube, "a", "other-0", "other")
    api = ClusterJobApi(kube, lambda: NOW)
    listed = asyncio.run(api.worker_pods("a", "victim"))
    assert {p.uid for p in listed} == own and {p.name for p in listed} == {"victim-0", "victim-1"}
    assert {p.namespace for p in listed} == {"a"}
    assert asyncio.run(api.worker_pods("a", "nobody")) == ()


def test_each_pass_checks_how_the_listed_pods_sidecars_were_scraped_and_warns_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kube = FakeKube(lambda: NOW)
    job = asyncio.run(kube.create(port.STJ, {"metadata": {"name": "victim", "namespace": "a"}, "spec": {}}))
    assert job is not None
    good, honored, unset = (pod(kube, "a", f"victim-{i}", "victim") for i in range(3))
    stranger = pod(kube, "b", "x-0", "x")  # not a job the operator knows: never judged
    sidecars = [
        {"pod_uid": good, "exported_pod_uid": good},  # pod_uid from discovery, the claim kept beside it
        {"pod_uid": honored},  # honor_labels: true
        {"exported_pod_uid": unset},  # renamed, no pod_uid set
        {"pod_uid": stranger},
    ]
    sync = ProgressSync(kube, PerPodProm([], sidecars), 60, lambda: [job], lambda: NOW)
    with caplog.at_level(logging.WARNING, logger="statictrain_operator.workerpods"):
        asyncio.run(sync.run_once())
        asyncio.run(sync.run_once())
    assert sync.scrape.counts == {"from_discovery": 1, "from_exporter": 1, "missing": 1}
    assert {v: SCRAPE_TENANCY_PODS.labels(verdict=v)._value.get() for v in workerpods.VERDICTS} == {
        "from_discovery": 1, "from_exporter": 1, "missing": 1
    }
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2, warnings  # one per kind of problem, not one per pass
    assert any(honored in w and "honor_labels: true" in w and "honor_labels: false" in w for w in warnings)
    assert any(unset in w and "__meta_kubernetes_pod_uid -> pod_uid" in w for w in warnings)


def test_prometheus_trouble_skips_the_scrape_check_and_never_ends_the_pass() -> None:
    class Down(PerPodProm):
        def query(self, query: str, at: float) -> list[Series]:
            if query == workerpods.SCRAPE_CHECK_QUERY:
                raise PrometheusUnavailableError("connection refused")
            return super().query(query, at)

    kube = FakeKube(lambda: NOW)
    job = asyncio.run(kube.create(port.STJ, {"metadata": {"name": "victim", "namespace": "a"},
                                             "spec": {"training": {"maxSteps": 1000}}}))
    assert job is not None
    own = pod(kube, "a", "victim-0", "victim")
    mine = {"step": 120.0, "step_rate_sum": 1.0, "step_rate_count": 10.0, "tokens_per_second": 1000.0}
    sync = ProgressSync(kube, Down([("a", "victim", own, mine)]), 60, lambda: [job], lambda: NOW)
    assert asyncio.run(sync.run_once()) == 1
    assert sync.scrape.counts == dict.fromkeys(workerpods.VERDICTS, 0)
