"""The report's reading of cost counters against the cluster's real Prometheus.

A counter's last increase lies 2 ms before the report window's end; windows whose
bucket step is not a whole number of milliseconds (Prometheus' resolution) must
still count it. Before the fix, a step sent rounded up (115 s / 24 buckets:
4.791667 s -> 4.792 s) left the last bucket unevaluated, and a step rounded down
evaluated the last bucket up to 12 ms early: in both cases the report came out
short of what the counters (and the cost state) held.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry, Counter
from statictrain import metrics
from statictrain.promql import selector
from statictrain_cli.report.fetch import fetch
from statictrain_cli.report.model import ReportWindow, build_report
from statictrain_localcluster.cluster import LocalCluster
from statictrain_localcluster.waiting import eventually
from statictrain_operator.prom import HttpPrometheus, Series

from .helpers import scraped_registry

pytestmark = pytest.mark.cluster


@pytest.fixture
def job_counter(cluster: LocalCluster) -> Iterator[tuple[Counter, dict[str, str]]]:
    """A job cost counter of a namespace of its own, served over HTTP and scraped by the cluster's Prometheus."""
    registry = CollectorRegistry()
    job = {"job_name": "probe", "namespace": f"report-{uuid.uuid4().hex[:8]}", "commit": "c", "team": "t"}
    counter = Counter(metrics.JOB_COST_USD_TOTAL.removesuffix("_total"), "probe", list(job), registry=registry)
    with scraped_registry(cluster, registry, "st-report-probe"):
        yield counter, job


def test_report_counts_an_increase_just_before_the_window_end(
    cluster: LocalCluster, job_counter: tuple[Counter, dict[str, str]]
) -> None:
    counter, job = job_counter
    prom = HttpPrometheus(cluster.prometheus_url)
    raw = f"{selector(metrics.JOB_COST_USD_TOTAL, job)}[10m]"

    def samples() -> list[tuple[float, float]]:
        found: list[Series] = prom.query(raw, datetime.now(UTC).timestamp())
        return [(s.t, s.v) for s in found[0].samples] if found else []

    counter.labels(**job).inc(5.0)
    eventually(lambda: samples() or None, timeout=60, what="the probe counter at 5 in Prometheus")
    counter.labels(**job).inc(7.0)
    raised = eventually(
        lambda: next(((t, v) for t, v in samples() if v == 12.0), None), timeout=60, what="the counter at 12"
    )
    first = samples()[0][0]
    end_ms = round(raised[0] * 1000) + 2  # the raise is 2 ms before the window's end (1 ms before its last point)
    totals = {}
    for extra_ms in (0, 1, 7, 13, 20):  # 24 buckets: steps of whole, rounded-down and rounded-up milliseconds
        span_ms = 24 * (round((end_ms - first * 1000) / 24) + 100) + extra_ms  # starts before the first sample
        window = ReportWindow(
            datetime.fromtimestamp((end_ms - span_ms) / 1000, UTC), datetime.fromtimestamp(end_ms / 1000, UTC), 24
        )
        report = build_report(window, "job", *fetch(prom, window, {"namespace": [job["namespace"]]}))
        totals[extra_ms] = [row.usd for row in report.rows]
    assert totals == {extra_ms: [12.0] for extra_ms in totals}  # a new series counts from zero
