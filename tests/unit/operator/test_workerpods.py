"""Which series speak for a job: its worker pods' UIDs from the API server, and the queries built from them."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from statictrain import labels
from statictrain_operator import workerpods
from statictrain_operator.anomaly import queries
from statictrain_operator.workerpods import Ignored, JobSeries, worker_uids


def pod(ns: str, job: str | None, uid: str | None, role: str | None = "worker") -> dict[str, Any]:
    lab = {k: v for k, v in ((labels.JOB, job), (labels.ROLE, role)) if v is not None}
    meta: dict[str, Any] = {"namespace": ns, "name": f"{job}-x", "labels": lab}
    if uid is not None:
        meta["uid"] = uid
    return {"metadata": meta}


def test_worker_uids_group_the_listed_worker_pods_by_namespace_and_job() -> None:
    pods = [
        pod("a", "train", "u1"),
        pod("a", "train", "u2"),
        pod("b", "train", "u3"),  # same job name, another namespace: another job
        pod("a", "other", "u4"),  # another job of the same namespace
        pod("a", "train", "u5", role=None),  # not a worker (e.g. a hand-made pod with only the job label)
        pod("a", "train", None),  # no UID
        pod("a", None, "u6"),
        {"metadata": {}},
    ]
    assert worker_uids(pods) == {
        ("a", "train"): frozenset({"u1", "u2"}),
        ("b", "train"): frozenset({"u3"}),
        ("a", "other"): frozenset({"u4"}),
    }
    assert worker_uids([]) == {}


def test_an_empty_pod_set_selects_nothing_rather_than_everything() -> None:
    with pytest.raises(ValueError, match="no worker pods listed"):
        JobSeries("train", "a", frozenset())
    with pytest.raises(ValueError, match="non-empty strings"):
        JobSeries("train", "a", frozenset({""}))


HOSTILE = 'x"}|.*'
# By hand, not by the escaping code: RE2 escapes of } | . * then PromQL string escapes of " and \.
HOSTILE_MATCHER = r'pod_uid=~"u1|x\"\\}\\|\\.\\*"'


def test_every_worker_query_selects_the_pod_uids_escaped() -> None:
    who = JobSeries('j"}', "ns", frozenset({"u1", HOSTILE}))
    built = [
        *queries.job_queries(who, 60).items(),
        *queries.fault_queries(who).items(),
        ("commit", queries.commit_query(who, 60)),
    ]
    for name, q in built:
        if name in ("cost_usd_per_hour", "usd_per_1m_tokens"):  # the operator's own series: no pod exports them
            assert "pod_uid" not in q
            continue
        n_selectors = q.count("{")
        assert q.count(HOSTILE_MATCHER) == n_selectors, (name, q)
        assert q.count(r'job_name="j\"}"') == n_selectors and q.count('namespace="ns"') == n_selectors


def test_claimants_query_asks_for_every_pod_claiming_the_job() -> None:
    q = queries.claimants_query("j", "ns")
    assert q.startswith("group by (pod_uid) (")
    assert "pod_uid=" not in q
    for metric in queries.PER_POD_METRICS:
        assert f'{metric}{{job_name="j",namespace="ns"}}' in q


def test_ignored_logs_each_stranger_once(caplog: pytest.LogCaptureFixture) -> None:
    ig = Ignored("anomaly")
    with caplog.at_level(logging.WARNING):
        assert ig.note(("ns", "j"), ["u1", "evil", "evil2"], {"u1"}) == ["evil", "evil2"]
        assert ig.note(("ns", "j"), ["evil", "u1"], {"u1"}) == []
        assert ig.note(("ns", "k"), ["evil"], {"u9"}) == ["evil"]  # another job: its own count
    assert ig.count == 3
    assert sum("ignoring series" in r.getMessage() for r in caplog.records) == 3
    assert "'evil'" in caplog.records[0].getMessage()


@pytest.mark.parametrize(
    ("series", "want"),
    [
        pytest.param([{"pod_uid": "u1", "exported_pod_uid": "u1"}], {"u1": "from_discovery"}, id="discovery"),
        pytest.param([{"pod_uid": "u1"}], {"u1": "from_exporter"}, id="own-label-kept"),
        pytest.param([{"exported_pod_uid": "u1"}], {"u1": "missing"}, id="renamed-not-set"),
        # a well-formed series from elsewhere does not hide the job's own sidecar scraped with honor_labels
        pytest.param([{"pod_uid": "u1", "exported_pod_uid": "u1"}, {"pod_uid": "u1"}], {"u1": "from_exporter"},
                     id="worst-wins"),
        # discovery says u1; the sidecar claims another UID: pod_uid is still Prometheus' own
        pytest.param([{"pod_uid": "u1", "exported_pod_uid": "zz"}], {"u1": "from_discovery"}, id="odd-claim"),
        pytest.param([{"pod_uid": "zz"}, {"exported_pod_uid": "yy"}], {}, id="other-pods"),
        # another pod claims u1 under a pod_uid of its own: that says nothing about u1's scrape
        pytest.param([{"pod_uid": "zz", "exported_pod_uid": "u1"}], {}, id="claimant"),
        pytest.param([], {}, id="no-sidecar-yet"),
    ],
)
def test_scrape_verdicts(series: list[dict[str, str]], want: dict[str, str]) -> None:
    assert workerpods.scrape_verdicts(series, {"u1", "u2"}) == want


def test_scrape_check_query_reads_every_sidecar_with_both_uid_labels() -> None:
    assert workerpods.SCRAPE_CHECK_QUERY == "count by (pod_uid, exported_pod_uid) (statictrain_sidecar_info)"
