"""Case 17: NaN, Inf and too-short series through the real Prometheus to the anomaly loop.

A stand-in exporter serves a job's GPU utilization as NaN, its dollars per million tokens as +Inf and
its tokens per second for a few seconds only (one NaN among them); the step time is steady and long
enough. Prometheus stores and answers the NaN and Inf values as they are (checked on its raw HTTP
answer); the evaluator judges each series on its own: the step time by its baseline, the short series
as insufficient, the NaN and Inf ones not at all; no action, no data problem for the job as a whole.
The job is elastic, so a NaN utilization read as 0 would shrink it.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Gauge, start_http_server
from statictrain import labels, metrics
from statictrain.promql import selector
from statictrain_localcluster.waiting import eventually
from statictrain_operator.anomaly import findings as f
from statictrain_operator.anomaly.detector import Method
from statictrain_operator.anomaly.evaluate import Evaluator
from statictrain_operator.anomaly.exported import AnomalyMetrics
from statictrain_operator.prom import HttpPrometheus
from statictrain_operator.workerpods import JobSeries

from .helpers import Trainer, create_job, events, free_port, get_job, settings

pytestmark = pytest.mark.cluster

POD_LABELS = [*labels.METRIC_LABELS, "pod", "pod_uid"]


def raw_values(url: str, query: str) -> list[str]:
    """The values of an instant query as Prometheus writes them (NaN and Inf included)."""
    body = urllib.parse.urlencode({"query": query, "time": str(time.time())}).encode()
    with urllib.request.urlopen(f"{url}/api/v1/query", data=body, timeout=10) as r:
        doc = json.loads(r.read())
    return [str(x["value"][1]) for x in doc["data"]["result"]]


def scores(registry: CollectorRegistry) -> dict[str, str]:
    """Series -> method of the evaluator's score gauge."""
    out = {}
    for family in registry.collect():
        if family.name == metrics.ANOMALY_SCORE:
            for s in family.samples:
                out[s.labels["series"]] = s.labels["method"]
    return out


def test_nan_inf_and_short_series_are_judged_one_by_one_and_nothing_is_done(
    cluster: Any, namespace: str, crd: None, job_api: Any, steps: Callable[..., Trainer]
) -> None:
    name = "badseries"
    create_job(cluster, namespace, name, "Auto", replicas=2, elastic={"minReplicas": 1, "maxReplicas": 2})
    trainer = steps(name, 0.1)
    reg = CollectorRegistry()
    who = (name, namespace, "c1", "t", f"{name}-w0", trainer.uid)
    pods = JobSeries(name, namespace, frozenset({trainer.uid}))
    util = Gauge(metrics.GPU_UTILIZATION_RATIO, "u", [*POD_LABELS, "gpu"], registry=reg)
    usd = Gauge(metrics.JOB_USD_PER_1M_TOKENS, "c", list(labels.METRIC_LABELS), registry=reg)
    tps = Gauge(metrics.TRAIN_TOKENS_PER_SECOND, "t", POD_LABELS, registry=reg)
    util.labels(*who, "0").set(math.nan)
    usd.labels(*who[:4]).set(math.inf)
    port = free_port()
    server, _ = start_http_server(port, addr="127.0.0.1", registry=reg)
    target = f"st-bad-series-{uuid.uuid4().hex[:6]}"
    cluster.add_scrape_target(target, f"127.0.0.1:{port}", {})
    url = cluster.prometheus_url
    ours = {"job_name": name, "namespace": namespace, "job": target}  # "job": this exporter's scrape job
    try:
        tps.labels(*who).set(1000.0)
        eventually(
            lambda: (
                raw_values(url, selector(metrics.GPU_UTILIZATION_RATIO, ours)) == ["NaN"]
                and raw_values(url, selector(metrics.JOB_USD_PER_1M_TOKENS, ours)) == ["+Inf"]
                and raw_values(url, selector(metrics.TRAIN_TOKENS_PER_SECOND, ours)) == ["1000"]
            ),
            what="NaN and +Inf stored and answered by Prometheus",
        )
        for v in (1100.0, math.nan, 1050.0):  # a few seconds more, then gone: a short series
            tps.labels(*who).set(v)
            time.sleep(1.2)
        tps.remove(*who)
        s = settings(cluster)
        ev_registry = CollectorRegistry()
        prom = HttpPrometheus(s.prometheus_url, s.query_timeout_s)
        ev = Evaluator(s, prom, job_api, AnomalyMetrics(ev_registry), lambda: datetime.now(UTC))

        def enough_step_times() -> bool:
            series, _, problem = ev.fetch(pods, datetime.now(UTC))
            return problem is None and len(series[f.STEP_SECONDS][1]) >= 20

        eventually(enough_step_times, 120, "step-time samples in Prometheus")
        series, _, _ = ev.fetch(pods, datetime.now(UTC))
        short = series[f.TOKENS_PER_SECOND][1]
        assert 0 < len(short) < 12 and all(map(math.isfinite, short)), short
        before = get_job(cluster, namespace, name)
        for _ in range(3):
            out = asyncio.run(ev.evaluate(get_job(cluster, namespace, name)))
            assert out.applied == [] and out.new_anomalies == [] and out.data_problem is None, out
        judged = scores(ev_registry)
    finally:
        cluster.remove_scrape_target(target)
        server.shutdown()
        server.server_close()
    assert judged.get(f.STEP_SECONDS) in (Method.ROBUST, Method.PROPHET), judged
    assert judged.get(f.TOKENS_PER_SECOND) == Method.INSUFFICIENT, judged
    assert f.GPU_UTILIZATION not in judged and f.USD_PER_1M_TOKENS not in judged, judged
    after = get_job(cluster, namespace, name)
    assert after["spec"] == before["spec"] and after["metadata"]["generation"] == before["metadata"]["generation"]
    assert not [e for e in events(cluster, namespace, name) if e["reason"].startswith("Remediation")]
