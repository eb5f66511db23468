"""Case 26: hostile label values in job, team or commit are matched literally by a real Prometheus.

An exporter (prometheus_client, which escapes values in its text format as every exporter must) serves
one series per label value to the local cluster's real Prometheus; each series' value is a distinct power
of two, so the sum a query returns names exactly the set of series it selected. The queries are the
product's own: the anomaly loop's ``job_queries``/``fault_queries``/``commit_query`` and the report's
``selector(..., any_of=job_filters(...))``. Each value is the series' pod_uid too: the anomaly loop selects
a job's series by its pods' UIDs (server-generated, but treated as hostile input all the same).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Gauge
from statictrain import metrics
from statictrain.promql import selector
from statictrain_cli.report.fetch import job_filters
from statictrain_localcluster.cluster import LocalCluster
from statictrain_localcluster.waiting import eventually
from statictrain_operator.anomaly import faults
from statictrain_operator.anomaly import findings as f
from statictrain_operator.anomaly.queries import fault_queries, job_queries
from statictrain_operator.prom import HttpPrometheus
from statictrain_operator.workerpods import JobSeries

from .helpers import scraped_registry

pytestmark = pytest.mark.cluster

# Each hostile value next to the decoys a non-literal match would also pick up.
VALUES = [
    'x"}[5m]) or vector(1) #',
    "x",
    'x"',
    "back\\slash",
    "back\\\\slash",
    "backslash",
    "line1\nline2",
    "line1",
    "line2",
    "a.b",
    "aXb",
    "a|b",
    "a",
    "b",
    ".*",
    "(c)+",
    "c",
    "cc",
    "[d]",
    "d",
    "^e$",
    "e",
    '"}',
    "",  # an absent label: what a naive `=~".*"` would match
]
LABELS = ["job_name", "namespace", "commit", "team", "pod_uid"]


@pytest.fixture(scope="module")
def scraped(cluster: LocalCluster) -> Iterator[tuple[HttpPrometheus, str]]:
    """Every value of VALUES as job name, commit and team of one series (value 2**i), in one namespace."""
    ns = f"hostile-{uuid.uuid4().hex[:6]}"
    reg = CollectorRegistry()
    tps = Gauge(metrics.TRAIN_TOKENS_PER_SECOND, "t", LABELS, registry=reg)
    step = Gauge(metrics.TRAIN_STEP, "s", LABELS, registry=reg)
    for i, v in enumerate(VALUES):
        tps.labels(v, ns, v, v, v).set(2**i)
        step.labels(v, ns, v, v, v).set(2**i)
    prom = HttpPrometheus(cluster.prometheus_url)
    with scraped_registry(cluster, reg, "st-hostile"):
        eventually(
            lambda: (
                len(prom.query(selector(metrics.TRAIN_TOKENS_PER_SECOND, {"namespace": ns}), time.time()))
                == len(VALUES)
            ),
            what="every hostile series scraped",
        )
        yield prom, ns


def total(prom: HttpPrometheus, query: str) -> int:
    got = prom.query(query, time.time())
    assert len(got) <= 1, (query, got)
    return int(got[0].samples[-1].v) if got and got[0].samples else 0


def picked(prom: HttpPrometheus, query: str) -> list[str]:
    """The VALUES a query's sum stands for (bit i set: series i was selected)."""
    n = total(prom, query)
    return [v for i, v in enumerate(VALUES) if n >> i & 1]


def test_the_exporter_round_trips_every_value_through_prometheus(scraped: tuple[HttpPrometheus, str]) -> None:
    prom, ns = scraped
    got = prom.query(selector(metrics.TRAIN_TOKENS_PER_SECOND, {"namespace": ns}), time.time())
    by_value = {int(s.samples[-1].v): s.labels for s in got}
    for i, v in enumerate(VALUES):
        lbl = by_value[2**i]
        assert all(lbl.get(name, "") == v for name in ("job_name", "commit", "team", "pod_uid"))


@pytest.mark.parametrize("value", VALUES, ids=[f"v{i}" for i in range(len(VALUES))])
def test_the_anomaly_loops_queries_select_exactly_the_job(scraped: tuple[HttpPrometheus, str], value: str) -> None:
    prom, ns = scraped
    # a job's pods' UIDs are never empty (JobSeries refuses it); an absent pod_uid is matched by no UID
    who = JobSeries(value, ns, frozenset({value or "no-such-uid"}))
    want = [value] if value else []
    assert picked(prom, job_queries(who, 60)[f.TOKENS_PER_SECOND]) == want
    assert picked(prom, fault_queries(who)[faults.TRAIN_STEP]) == want  # max(): the one series' value
    assert picked(prom, f"sum({selector(metrics.TRAIN_STEP, {'commit': value, 'namespace': ns})})") == [value]
    # the job's name with another pod's UID: the series claims the job but is not its pod's
    other = VALUES[(VALUES.index(value) + 1) % (len(VALUES) - 1)]
    assert picked(prom, job_queries(JobSeries(value, ns, frozenset({other})), 60)[f.TOKENS_PER_SECOND]) == []


def test_all_pod_uids_at_once_select_exactly_the_jobs_series(scraped: tuple[HttpPrometheus, str]) -> None:
    prom, ns = scraped
    for value in ("a|b", ".*", 'x"}[5m]) or vector(1) #'):
        who = JobSeries(value, ns, frozenset(v for v in VALUES if v))  # every UID: still only that job's
        assert picked(prom, job_queries(who, 60)[f.TOKENS_PER_SECOND]) == [value]


@pytest.mark.parametrize("value", VALUES[:-1], ids=[f"v{i}" for i in range(len(VALUES) - 1)])
def test_the_reports_filters_select_exactly_the_named_values(scraped: tuple[HttpPrometheus, str], value: str) -> None:
    prom, ns = scraped
    for name in ("job", "commit", "team"):
        sel = selector(metrics.TRAIN_TOKENS_PER_SECOND, any_of=job_filters({name: [value], "namespace": [ns]}))
        assert picked(prom, f"sum({sel})") == [value], name


def test_several_hostile_values_at_once_select_those_and_nothing_else(scraped: tuple[HttpPrometheus, str]) -> None:
    prom, ns = scraped
    want = ['x"}[5m]) or vector(1) #', "a|b", "line1\nline2", ".*", "back\\slash"]
    sel = selector(metrics.TRAIN_TOKENS_PER_SECOND, any_of=job_filters({"job": want, "namespace": [ns]}))
    assert sorted(picked(prom, f"sum({sel})")) == sorted(want)
