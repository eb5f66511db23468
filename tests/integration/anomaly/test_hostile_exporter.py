"""Tenancy (#16): exporters that claim another job's name are not believed, by remediation or by progress.

Real API server, real Prometheus. Job ``victim`` (namespace A, elastic, 4 replicas, remediation Auto)
has one worker pod (a Pod in the API server); its stand-in sidecar is scraped as a pod is (the local
cluster's pod pool: honor_labels false, namespace/pod/pod_uid from the pod) and reports a steady 0.1 s
step, a busy GPU (0.9), step 120 and 1,000 tokens/s. Two hostile exporters publish series labelled
job_name=victim, namespace=A and even pod_uid=<the victim pod's real UID>, with an idle GPU (0.01, which
scales an elastic job down; on 50 GPUs, so that an average over everything labelled with the job is idle),
3 s steps, step 999,999 and 10^9 tokens/s:

* one from a pod of job ``evil`` in another namespace B;
* one from a pod of another job, ``other``, in A itself.

Control: job ``control`` in A, whose own pod reports the same idle GPU, is scaled down by the same
evaluator, so the hostile values would be acted on were they the victim's; and Prometheus itself (raw
queries, not the product's) shows the hostile series claiming the victim and fooling a selection by
job_name and namespace. Asserted: the victim is not remediated (replicas 4, no Remediation event, its
own series judged without a data problem), and status.progress holds the victim's own figures. Scraped as
pods, `evil`'s series carry namespace B (discovery's), so they do not even claim the victim's namespace;
`other`'s do, and are logged and counted once.
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Gauge, Histogram
from statictrain import labels, metrics
from statictrain.promql import selector
from statictrain_localcluster.waiting import eventually
from statictrain_operator.progress.sync import ProgressSync
from statictrain_operator.prom import HttpPrometheus

from ..cost.helpers import scraped_registry
from .helpers import create_job, evaluator, events, get_job, settings, worker_pod

pytestmark = pytest.mark.cluster

POD_LABELS = [*labels.METRIC_LABELS, "pod", "pod_uid"]


class Exporter:
    """A stand-in sidecar: one registry, series for any (job, namespace, pod, pod_uid) claim it is told to make."""

    def __init__(self) -> None:
        self.reg = CollectorRegistry()
        self.util = Gauge(metrics.GPU_UTILIZATION_RATIO, "u", [*POD_LABELS, "gpu"], registry=self.reg)
        self.step = Gauge(metrics.TRAIN_STEP, "s", POD_LABELS, registry=self.reg)
        self.tps = Gauge(metrics.TRAIN_TOKENS_PER_SECOND, "t", POD_LABELS, registry=self.reg)
        self.hist = Histogram(metrics.TRAIN_STEP_SECONDS, "h", POD_LABELS, registry=self.reg)
        self.step_s: dict[tuple[str, ...], float] = {}

    def claim(
        self, ids: tuple[str, ...], *, util: float, step_s: float, step: float | None = None, tps: float | None = None,
        gpus: int = 1,
    ) -> None:
        for gpu in range(gpus):
            self.util.labels(*ids, str(gpu)).set(util)
        if step is not None:
            self.step.labels(*ids).set(step)
        if tps is not None:
            self.tps.labels(*ids).set(tps)
        self.step_s[ids] = step_s

    def observe(self) -> None:
        for ids, s in self.step_s.items():
            self.hist.labels(*ids).observe(s)


def raw(cluster: Any, query: str) -> list[Any]:
    return HttpPrometheus(cluster.prometheus_url).query(query, time.time())


def test_series_claiming_a_job_from_other_pods_drive_no_remediation_and_no_progress(
    cluster: Any, namespace: str, other_namespace: str, crd: None, job_api: Any
) -> None:
    a, b = namespace, other_namespace
    elastic = {"minReplicas": 1, "maxReplicas": 4}
    for job in ("victim", "control"):
        create_job(cluster, a, job, "Auto", replicas=4, elastic=elastic, training={"maxSteps": 1000})
    victim_uid = worker_pod(cluster, a, "victim")
    control_uid = worker_pod(cluster, a, "control")
    evil_uid = worker_pod(cluster, b, "evil")
    other_uid = worker_pod(cluster, a, "other")

    own, control, evil, other = Exporter(), Exporter(), Exporter(), Exporter()
    victim_ids = ("victim", a, "c1", "t", "victim-w0", victim_uid)
    own.claim(victim_ids, util=0.9, step=120, tps=1000, step_s=0.1)
    control.claim(("control", a, "c1", "t", "control-w0", control_uid), util=0.01, step_s=0.1)
    for hostile in (evil, other):  # the victim's very labels, its pod's UID included
        hostile.claim(victim_ids, util=0.01, step=999_999, tps=1e9, step_s=3.0, gpus=50)
    pods = {
        own: {"namespace": a, "pod": "victim-w0", "pod_uid": victim_uid},
        control: {"namespace": a, "pod": "control-w0", "pod_uid": control_uid},
        evil: {"namespace": b, "pod": "evil-w0", "pod_uid": evil_uid},
        other: {"namespace": a, "pod": "other-w0", "pod_uid": other_uid},
    }
    uids = {"victim": victim_uid, "evil": evil_uid, "other": other_uid}
    stop = threading.Event()

    def observe() -> None:  # every exporter's steps, as a trainer's would come
        while not stop.wait(0.05):
            for e in pods:
                e.observe()

    ticker = threading.Thread(target=observe, daemon=True)
    ticker.start()
    try:
        check(cluster, job_api, a, pods, uids)
    finally:
        stop.set()
        ticker.join(5)


def check(cluster: Any, job_api: Any, a: str, pods: dict[Exporter, dict[str, str]], uids: dict[str, str]) -> None:
    own, control, evil, other = pods
    b = pods[evil]["namespace"]
    victim_uid, evil_uid, other_uid = uids["victim"], uids["evil"], uids["other"]
    with (
        scraped_registry(cluster, own.reg, "st-victim", pods[own]),
        scraped_registry(cluster, control.reg, "st-control", pods[control]),
        scraped_registry(cluster, evil.reg, "st-evil", pods[evil]),
        scraped_registry(cluster, other.reg, "st-other", pods[other]),
    ):

        # Oracle, from Prometheus itself: the hostile series are there, claiming the victim (its pod's UID
        # kept as exported_pod_uid), and a selection by job_name and namespace alone would average them in.
        claim = {"job_name": "victim"}

        def hostile_scraped() -> bool:
            by_pod = f"count by (pod_uid, exported_pod_uid) ({selector(metrics.GPU_UTILIZATION_RATIO, claim)})"
            got = raw(cluster, by_pod)
            pairs = {(s.labels.get("pod_uid"), s.labels.get("exported_pod_uid")) for s in got}
            return {(evil_uid, victim_uid), (other_uid, victim_uid)} <= pairs

        eventually(hostile_scraped, 60, "the hostile series in Prometheus")
        by_ns = f"count by (namespace, exported_namespace) ({selector(metrics.GPU_UTILIZATION_RATIO, claim)})"
        assert {(x.labels.get("namespace"), x.labels.get("exported_namespace")) for x in raw(cluster, by_ns)} == {
            (a, a),  # the victim's own pod and `other`, both in A
            (b, a),  # `evil`: its claim of namespace A kept as exported_namespace only
        }

        s = settings(cluster)
        naive = raw(cluster, f"avg({selector(metrics.GPU_UTILIZATION_RATIO, {'job_name': 'victim', 'namespace': a})})")
        assert naive and naive[0].samples[-1].v < s.idle_utilization  # a selection by the labels: idle (`other`)

        ev = evaluator(job_api, s)
        outcomes: dict[str, Any] = {}

        def control_shrunk() -> bool:
            for job in ("victim", "control"):
                outcomes[job] = asyncio.run(ev.evaluate(get_job(cluster, a, job)))
            return bool(get_job(cluster, a, "control")["spec"]["replicas"] != 4)

        eventually(control_shrunk, 120, "the control job (its own pod idle) to be scaled down")
        for _ in range(3):
            outcomes["victim"] = asyncio.run(ev.evaluate(get_job(cluster, a, "victim")))
            time.sleep(1)
        assert get_job(cluster, a, "control")["spec"]["replicas"] == 2
        victim = get_job(cluster, a, "victim")
        assert victim["spec"]["replicas"] == 4 and victim["metadata"]["generation"] == 1
        assert outcomes["victim"].applied == [] and outcomes["victim"].data_problem is None, outcomes["victim"]
        assert not [e["reason"] for e in events(cluster, a, "victim") if e["reason"].startswith("Remediation")]
        # `evil`'s series carry namespace B (its pod's, from discovery): they do not even claim the victim's
        # namespace. `other`'s claim it and are ignored, logged and counted once.
        assert {(ns, j, u) for ns, j, u in ev.ignored.seen if j == "victim"} == {(a, "victim", other_uid)}
        counted = {
            (x.labels["job_name"], x.labels["namespace"]): x.value
            for family in ev.metrics.ignored.collect()
            for x in family.samples
            if x.name.endswith("_total")
        }
        assert counted == {("victim", a): 1}

        # Progress: the victim's own step and tokens, not the hostile ones.
        sync = ProgressSync(
            job_api.kube,
            HttpPrometheus(cluster.prometheus_url),
            60,
            lambda: [get_job(cluster, a, "victim")],
            lambda: datetime.now(UTC),
        )

        def progress() -> dict[str, Any] | None:
            asyncio.run(sync.run_once())
            got: dict[str, Any] | None = get_job(cluster, a, "victim").get("status", {}).get("progress")
            return got if got and got.get("stepSeconds") == "0.100" else None

        got = eventually(progress, 60, "status.progress of the victim")
        assert (got["step"], got["tokensPerSecond"], got["totalSteps"], got["etaSeconds"]) == (120, 1000, 1000, 88)
        assert {(ns, j, u) for ns, j, u in sync.ignored.seen if j == "victim"} == {(a, "victim", other_uid)}
