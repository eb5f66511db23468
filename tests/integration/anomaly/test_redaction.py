"""Case 27 (second half): a Prometheus URL carrying credentials and a token never reaches status, events or logs.

The real evaluator runs against the real API server with a Prometheus URL whose
userinfo and query string hold secrets, once with Prometheus unreachable and once
with a real HTTP server that rejects the query quoting the request back. The job's
status, its events and every captured log line are then grepped for the secrets;
the condition must still say which Prometheus failed (host and port).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from statictrain import labels

from .helpers import condition, create_job, evaluator, events, free_port, get_job, settings, worker_pod

pytestmark = pytest.mark.cluster

SECRETS = ("s3cr3t-pass", "s3cr3t-token", "alice")


@pytest.fixture(params=["down", "rejecting"])
def prometheus_port(request: pytest.FixtureRequest, echoing_prometheus: int) -> int:
    return free_port() if request.param == "down" else echoing_prometheus


@pytest.mark.usefixtures("crd")
def test_credentials_in_the_prometheus_url_reach_no_status_event_or_log(
    cluster: Any, namespace: str, job_api: Any, prometheus_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    port = prometheus_port
    url = f"http://alice:s3cr3t-pass@127.0.0.1:{port}/prom?token=s3cr3t-token"
    name = "leaky"
    create_job(cluster, namespace, name, "Auto", budget={"limitUSD": "1", "onExceeded": "Suspend"})
    worker_pod(cluster, namespace, name)  # a job with a pod: its series would be read, Prometheus is what fails
    cluster.kubectl("patch", labels.PLURAL, name, "-n", namespace, "--subresource=status", "--type=merge",
                    "-p", json.dumps({"status": {"cost": {"usd": "5.00"}}}))
    caplog.set_level("DEBUG")
    ev = evaluator(job_api, settings(cluster, prometheus_url=url, query_timeout_s=2))
    out = asyncio.run(ev.evaluate(get_job(cluster, namespace, name)))
    job = get_job(cluster, namespace, name)
    cond = condition(job)
    assert cond is not None and out.data_problem
    assert f"127.0.0.1:{port}" in cond["message"]  # still says which Prometheus failed
    seen = {
        "data_problem": out.data_problem,
        "status": json.dumps(job.get("status", {})),
        "events": json.dumps(events(cluster, namespace, name)),
        "logs": caplog.text,
    }
    leaks = {where: s for where, text in seen.items() for s in SECRETS if s in text}
    assert leaks == {}, leaks
