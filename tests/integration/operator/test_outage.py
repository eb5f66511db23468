"""RELIABILITY.md cases 4 and 5 against the real control plane.

Case 4: the real kube-apiserver stopped for a minute (its process ended and started
again, statictrain_localcluster.apiserver), and the operator cut off from the API
server for a minute by the fault proxy while jobs are created, edited and deleted.
Case 5: the operator behind the fault proxy answering a share of writes with 429,
503, 409, a 503 after the write happened, or a reset connection, reads with 503 and
resets, every request delayed.

What is checked is what users see: the operator process never exits or restarts,
its liveness probe does not fail while the API server is away, every job ends with
exactly the children its final spec asks for, and retries are spaced out (counted
from the operator's log: attempts per request, and the waits between a job's retries).
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from statictrain import labels
from statictrain_localcluster import apiserver
from statictrain_localcluster.faultproxy import AFTER_WRITE, RESET, FaultProxy, write_kubeconfig

from .conftest import Kube, Operator, stj, wait_for

pytestmark = pytest.mark.cluster

OUTAGE_S = 60.0
GPU = {"gpusPerReplica": 1}


def owned(kube: Kube, kind: str, name: str) -> list[dict[str, Any]]:
    return kube.list(kind, f"{labels.JOB}={name}")


def health(op: Operator) -> tuple[int, str]:
    """The liveness endpoint's HTTP status and body (0 when nothing answers)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{op.health_port}/healthz", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except OSError:
        return 0, ""


def ride_out(op: Operator, seconds: float) -> list[tuple[int, str]]:
    """Wait `seconds`, checking every 5 s that the operator still runs; the liveness answers seen."""
    seen = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert op.proc is not None and op.proc.poll() is None, f"the operator exited:\n{op.logs()[-4000:]}"
        seen.append(health(op))
        time.sleep(5)
    return seen


def parallelism(kube: Kube, name: str) -> int | None:
    job = kube.get("job", f"{name}-worker")
    return None if job is None else int(job["spec"]["parallelism"])


def exactly_one_of_each_child(kube: Kube, name: str) -> None:
    for kind in ("jobs", "services"):
        assert [o["metadata"]["name"] for o in owned(kube, kind, name)] == [f"{name}-worker"], (kind, name)


def test_case4_api_server_stopped_a_minute_the_operator_waits_it_out_and_acts_on_what_follows(
    cluster: Any, kube: Kube, make_operator: Any
) -> None:
    op = make_operator()
    kube.apply(stj("before", replicas=1, elastic={"minReplicas": 1, "maxReplicas": 3}, resources=GPU))
    wait_for(lambda: len(owned(kube, "pods", "before")) == 1, "the first job's worker")
    with apiserver.stopped(cluster):
        during = ride_out(op, OUTAGE_S)
    kube.patch("stj", "before", {"spec": {"replicas": 3}})
    kube.apply(stj("after", replicas=2, resources=GPU))
    wait_for(lambda: parallelism(kube, "before") == 3, "the edit made after the outage", timeout=180)
    wait_for(lambda: len(owned(kube, "pods", "after")) == 2, "the job created after the outage", timeout=180)

    assert op.proc is not None and op.proc.poll() is None and op.starts == 1  # never exited, never restarted
    assert during and all(code == 200 for code, _ in during), during  # the liveness probe never failed
    assert any("refused heartbeat renewals" in body for _, body in during), during
    for name in ("before", "after"):
        exactly_one_of_each_child(kube, name)
    logs = op.logs()
    # kopf's requests were retried, spaced out: a fixed short delay would count ~100 tries in a minute
    tries = [int(n) for n in re.findall(r"Request attempt #(\d+)(?:/\d+)? failed", logs)]
    assert tries and max(tries) <= 12, sorted(set(tries))
    assert "escalating" not in logs and "Traceback" not in logs


def test_case4_operator_cut_off_a_minute_while_jobs_change_acts_on_the_final_state(
    cluster: Any, kube: Kube, make_operator: Any, tmp_path: Path
) -> None:
    proxy = FaultProxy(cluster.kubeconfig).start()
    try:
        op = make_operator(kubeconfig=write_kubeconfig(proxy, tmp_path / "proxy.kubeconfig"))
        kube.apply(stj("keep", replicas=1, elastic={"minReplicas": 1, "maxReplicas": 3}, resources=GPU))
        kube.apply(stj("gone", replicas=1, resources=GPU))
        wait_for(lambda: owned(kube, "pods", "keep") and owned(kube, "pods", "gone"), "both jobs' workers")
        with proxy.outage():  # the operator's watches are cut too; kubectl talks to the API server directly
            start = time.monotonic()
            kube.patch("stj", "keep", {"spec": {"replicas": 2}})
            kube.patch("stj", "keep", {"spec": {"replicas": 3}})
            kube.apply(stj("new", replicas=2, resources=GPU))
            kube.run("delete", "stj", "gone")
            ride_out(op, OUTAGE_S - (time.monotonic() - start))
        wait_for(lambda: parallelism(kube, "keep") == 3, "the edits made while cut off", timeout=180)
        wait_for(lambda: len(owned(kube, "pods", "new")) == 2, "the job created while cut off", timeout=180)
        wait_for(lambda: not owned(kube, "jobs", "gone"), "the deleted job's children to go", timeout=120)
        assert op.proc is not None and op.proc.poll() is None and op.starts == 1
        assert proxy.counts["cut"] >= 1 and proxy.counts["outage"] >= 1, proxy.counts  # it really was cut off
        for name in ("keep", "new"):
            exactly_one_of_each_child(kube, name)
    finally:
        proxy.stop()


def running_with(kube: Kube, name: str, pods: int) -> bool:
    phase = ((kube.get("stj", name) or {}).get("status") or {}).get("phase")
    return phase == "Running" and len(owned(kube, "pods", name)) == pods


def waits_of(logs: str, name: str) -> list[float]:
    """The waits the operator announced before retrying job `name` ("<ns>/<name>: ...; retrying in 1.2s")."""
    return [float(w) for w in re.findall(rf"/{re.escape(name)}: .*?; retrying in ([0-9.]+)s", logs)]


def test_case5_writes_refused_then_faults_on_a_share_of_requests_everything_done_once(
    cluster: Any, kube: Kube, make_operator: Any, tmp_path: Path
) -> None:
    proxy = FaultProxy(cluster.kubeconfig, seed=5).start()
    try:
        op = make_operator(kubeconfig=write_kubeconfig(proxy, tmp_path / "proxy.kubeconfig"))
        wait_for(lambda: "watch-heartbeat" in health(op)[1], "the operator to be up")
        # 1. Every write refused: the operator sees the job and retries its creation, each wait longer.
        proxy.write_faults = {503: 1.0}
        kube.apply(stj("first", replicas=1, elastic={"minReplicas": 1, "maxReplicas": 3}, resources=GPU))
        def five_retries() -> list[float] | None:
            waits = waits_of(op.logs(), "first")
            return waits if len(waits) >= 5 else None

        waits = wait_for(five_retries, "5 retries", timeout=120)
        # each wait lies in the upper half of a doubling ceiling: two steps on it is always longer
        assert all(later > earlier for earlier, later in zip(waits[:6], waits[2:6], strict=False)), waits
        assert owned(kube, "jobs", "first") == []  # nothing got through
        # 2. A share of every kind of fault, reads too, every request delayed.
        proxy.latency_s = 0.05
        proxy.read_faults = {503: 0.05, RESET: 0.05}
        proxy.write_faults = {429: 0.15, 503: 0.1, 409: 0.1, AFTER_WRITE: 0.15, RESET: 0.1}
        kube.apply(stj("second", replicas=2, resources=GPU))
        kube.apply(stj("third", replicas=1, resources=GPU))
        wait_for(lambda: owned(kube, "jobs", "first"), "the first job's children", timeout=180)
        kube.patch("stj", "first", {"spec": {"replicas": 3}})
        for name, pods in (("first", 3), ("second", 2), ("third", 1)):
            wait_for(partial(running_with, kube, name, pods), f"{name} Running with {pods} workers", timeout=240)
        assert op.proc is not None and op.proc.poll() is None and op.starts == 1
        for name in ("first", "second", "third"):
            exactly_one_of_each_child(kube, name)
        for fault in ("429", "503", "409", AFTER_WRITE, RESET):
            assert proxy.counts[fault] >= 1, json.dumps(proxy.counts)  # each fault really happened
    finally:
        proxy.stop()
