"""The anomaly loop against the real local cluster: real kube-apiserver, real Prometheus scraping.

The Evaluator runs in-process (as the kopf timer runs it) with the real API
clients; step times come from a stand-in for a worker's sidecar (fixture
``steps``): a prometheus_client Histogram named like the sidecar's, served over
HTTP and scraped by the cluster's Prometheus every second.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from statictrain import labels
from statictrain_localcluster.waiting import eventually
from statictrain_operator.anomaly import history as hist
from statictrain_operator.anomaly.cluster import ClusterJobApi
from statictrain_operator.anomaly.evaluate import CONDITION_TYPE
from statictrain_operator.anomaly.remediation import ActionKind, Intent
from statictrain_operator.anomaly.settings import AnomalySettings
from statictrain_operator.workerpods import JobSeries

from .helpers import (
    CRD,
    Trainer,
    condition,
    create_job,
    evaluator,
    events,
    free_port,
    get_job,
    settings,
    worker_pod,
)

pytestmark = pytest.mark.cluster


def test_3x_step_time_regression_gets_an_event_and_is_reverted_once(
    cluster: Any, namespace: str, crd: None, job_api: Any, steps: Callable[..., Trainer]
) -> None:
    name = "regress"
    create_job(cluster, namespace, name, "Auto")
    trainer = steps(name, 0.1)
    ev = evaluator(job_api, settings(cluster))

    def good_recorded() -> bool:
        asyncio.run(ev.evaluate(get_job(cluster, namespace, name)))
        ann = get_job(cluster, namespace, name)["metadata"].get("annotations", {}).get(hist.ANNOTATION)
        return bool(ann) and hist.loads(ann).history.last_good_settings is not None

    eventually(good_recorded, 120, "the first settings to be recorded as good")
    before = get_job(cluster, namespace, name)
    assert before["spec"]["compile"]["mode"] == "default"

    # A user changes the compile settings; the (stand-in) trainer gets 3x slower.
    cluster.kubectl(
        "patch",
        labels.PLURAL,
        name,
        "-n",
        namespace,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"compile": {"mode": "max-autotune"}}}),
    )
    trainer.step_s = 0.3

    def reverted() -> dict[str, Any] | None:
        asyncio.run(ev.evaluate(get_job(cluster, namespace, name)))
        job = get_job(cluster, namespace, name)
        return job if job["spec"]["compile"]["mode"] == "default" else None

    job = eventually(reverted, 90, "the compile settings to be reverted")
    reasons = [e["reason"] for e in events(cluster, namespace, name)]
    assert "AnomalyDetected" in reasons
    assert reasons.count("RemediationRevertSettings") == 1
    anomalies = job["status"]["anomalies"]
    assert any(a["metric"] == "step_seconds" and a["severity"] in ("Warning", "Critical") for a in anomalies)
    assert job["status"]["remediation"]["lastAction"] == "RevertSettings"
    record = hist.loads(job["metadata"]["annotations"][hist.ANNOTATION])
    assert [(i.action, i.done) for i in record.history.intents] == [(ActionKind.REVERT_SETTINGS, True)]

    # Still slow (the stand-in does not speed up): no second action within the window.
    for _ in range(3):
        asyncio.run(ev.evaluate(get_job(cluster, namespace, name)))
    reasons = [e["reason"] for e in events(cluster, namespace, name)]
    assert reasons.count("RemediationRevertSettings") == 1
    assert (
        len(hist.loads(get_job(cluster, namespace, name)["metadata"]["annotations"][hist.ANNOTATION]).history.intents)
        == 1
    )


def test_prometheus_down_means_no_action_and_a_condition_saying_why(
    cluster: Any, namespace: str, crd: None, job_api: Any
) -> None:
    name = "blind"
    create_job(cluster, namespace, name, "Auto", budget={"limitUSD": "1", "onExceeded": "Suspend"})
    worker_pod(cluster, namespace, name)  # a job with a pod: its series would be read, Prometheus is what fails
    cluster.kubectl(
        "patch",
        labels.PLURAL,
        name,
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"cost": {"usd": "5.00"}}}),
    )
    dead = f"http://127.0.0.1:{free_port()}"
    ev = evaluator(job_api, settings(cluster, prometheus_url=dead, query_timeout_s=2))
    out = asyncio.run(ev.evaluate(get_job(cluster, namespace, name)))
    assert out.applied == [] and out.data_problem and "Prometheus" in out.data_problem
    job = get_job(cluster, namespace, name)
    assert job["spec"].get("suspend", False) is False
    cond = condition(job)
    if cond is None and CONDITION_TYPE not in CRD.read_text():
        pytest.xfail(f"the CRD's condition type enum lacks {CONDITION_TYPE!r}: the API server rejects it")
    assert cond is not None, "no Remediation condition on the job"
    assert (cond["status"], cond["reason"]) == ("False", "MetricsUnavailable")
    assert dead.split("//")[1] in cond["message"]


class OperatorKilled(BaseException):
    """Stands for SIGKILL: nothing after it runs in that process."""


class CrashAfterIntent:
    """The real API, but the first action "kills the operator" right after its intent is recorded."""

    def __init__(self, real: ClusterJobApi) -> None:
        self.real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    async def apply(self, namespace: str, name: str, intent: Intent) -> int | None:
        raise OperatorKilled("operator killed mid-action")


def test_operator_restart_mid_action_completes_it_once(
    cluster: Any, namespace: str, crd: None, job_api: Any, steps: Callable[..., Trainer]
) -> None:
    name = "shrinker"
    create_job(cluster, namespace, name, "Auto", replicas=4, elastic={"minReplicas": 1, "maxReplicas": 4})
    steps(name, 0.1, gpu_util=0.01)
    s = settings(cluster)
    real = job_api
    eventually(lambda: ev_ok(job_api, s, namespace, name), 90, "step-time samples in Prometheus")
    crashing = evaluator(CrashAfterIntent(real), s)

    def killed_mid_action() -> bool:
        try:
            asyncio.run(crashing.evaluate(get_job(cluster, namespace, name)))
        except OperatorKilled:
            return True
        return False

    eventually(killed_mid_action, 90, "the first action (the operator dies right after recording it)")
    job = get_job(cluster, namespace, name)
    record = hist.loads(job["metadata"]["annotations"][hist.ANNOTATION])
    assert [(i.action, i.done) for i in record.history.intents] == [(ActionKind.SCALE_DOWN, False)]
    assert job["spec"]["replicas"] == 4

    fresh = ClusterJobApi(job_api.kube, job_api.clock)  # a new process: nothing in memory
    restarted = evaluator(fresh, s)  # only what the API server holds
    out = asyncio.run(restarted.evaluate(get_job(cluster, namespace, name)))
    assert out.applied == ["ScaleDown"]
    for _ in range(2):
        assert asyncio.run(restarted.evaluate(get_job(cluster, namespace, name))).applied == []
    job = get_job(cluster, namespace, name)
    assert job["spec"]["replicas"] == 2
    record = hist.loads(job["metadata"]["annotations"][hist.ANNOTATION])
    assert [(i.action, i.done) for i in record.history.intents] == [(ActionKind.SCALE_DOWN, True)]
    assert [e["reason"] for e in events(cluster, namespace, name)].count("RemediationScaleDown") == 1


def ev_ok(job_api: Any, s: AnomalySettings, ns: str, name: str) -> bool:
    """True once Prometheus holds enough step-time points for the detector to judge."""
    ev = evaluator(job_api, replace(s, stabilization_s=1e9))
    who = JobSeries.of(name, ns, asyncio.run(job_api.worker_pods(ns, name)))
    series, _, problem = ev.fetch(who, datetime.now(UTC))
    if problem is not None:
        return False
    return len(series["step_seconds"][1]) >= 20


def test_idle_gpus_shrink_an_elastic_job_toward_min_replicas_once(
    cluster: Any, namespace: str, crd: None, job_api: Any, steps: Callable[..., Trainer]
) -> None:
    name = "idler"
    create_job(cluster, namespace, name, "Auto", replicas=4, elastic={"minReplicas": 1, "maxReplicas": 4})
    steps(name, 0.1, gpu_util=0.01)
    ev = evaluator(job_api, settings(cluster))

    def shrunk() -> dict[str, Any] | None:
        asyncio.run(ev.evaluate(get_job(cluster, namespace, name)))
        job = get_job(cluster, namespace, name)
        return job if job["spec"]["replicas"] != 4 else None

    job = eventually(shrunk, 90, "the idle job to be scaled down")
    assert job["spec"]["replicas"] == 2  # halfway from 4 to minReplicas 1, rounded toward min
    for _ in range(3):  # still idle: the stabilization window allows no second step down
        asyncio.run(ev.evaluate(get_job(cluster, namespace, name)))
    assert get_job(cluster, namespace, name)["spec"]["replicas"] == 2
    assert [e["reason"] for e in events(cluster, namespace, name)].count("RemediationScaleDown") == 1
