"""Leader election with two real operator processes against the real API server.

Only the Lease holder acts (the standby has no watches and no loops: it answers its
liveness probe "standby"); when the leader is SIGKILLed the standby takes over once
the Lease has gone unrenewed for leader_lease_s on its own clock; a leader stopped
cleanly hands the Lease back, so the other takes over at once; a killed leader that
comes back is a standby.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from statictrain import labels

from .conftest import Kube, Operator, stj, wait_for
from .test_outage import health

pytestmark = pytest.mark.cluster

LEASE_S = 6
GPU = {"gpusPerReplica": 1}


def replica(make_operator: Any, name: str) -> Operator:
    op: Operator = make_operator(start=False, leader_election=True, leader_lease_s=LEASE_S)
    op.name = name
    op.start()
    return op


def leads(op: Operator) -> bool:
    return "watch-heartbeat" in health(op)[1]


def stands_by(op: Operator) -> bool:
    return "standby" in health(op)[1]


def identity(op: Operator) -> str:
    """The identity this replica waits under (its latest log's standby line)."""
    found = re.findall(r"standby: waiting for the leader Lease \S+ as (\S+)", op.logs())
    assert found, op.logs()[-2000:]
    return str(found[-1])


def holder(kube: Kube) -> dict[str, Any]:
    lease = kube.get("lease", "statictrain-operator-leader")
    assert lease is not None
    return dict(lease["spec"])


def children_of(kube: Kube, name: str) -> list[str]:
    out = []
    for kind in ("jobs", "services"):
        out += [f"{kind}/{o['metadata']['name']}" for o in kube.list(kind, f"{labels.JOB}={name}")]
    return sorted(out)


def test_two_replicas_one_acts_the_other_takes_over_when_it_dies_or_steps_down(
    kube: Kube, make_operator: Any
) -> None:
    a = replica(make_operator, "a")
    wait_for(lambda: leads(a), "a to lead")
    b = replica(make_operator, "b")
    wait_for(lambda: stands_by(b), "b to stand by")
    assert holder(kube)["holderIdentity"] == identity(a)

    kube.apply(stj("one", replicas=2, resources=GPU))
    wait_for(lambda: len(kube.list("pods", f"{labels.JOB}=one")) == 2, "one's 2 workers")
    time.sleep(3 * LEASE_S)  # several lease periods: the standby must stay out
    assert stands_by(b) and leads(a)
    assert "created Job one-worker" in a.logs()
    assert "created" not in b.logs() and "patched" not in b.logs(), b.logs()[-2000:]

    a.kill()  # SIGKILL: no hand-back, the Lease has to expire
    wait_for(lambda: leads(b), "b to take over", timeout=120)
    spec = holder(kube)
    assert spec["holderIdentity"] == identity(b) and spec["leaseTransitions"] >= 1, spec
    kube.apply(stj("two", replicas=1, resources=GPU))
    wait_for(lambda: len(kube.list("pods", f"{labels.JOB}=two")) == 1, "two's worker")
    assert "created Job two-worker" in b.logs()
    for name in ("one", "two"):
        assert children_of(kube, name) == [f"jobs/{name}-worker", f"services/{name}-worker"]

    a.start()  # the killed replica comes back (its pod restarted): a standby now
    wait_for(lambda: stands_by(a), "a to stand by")
    assert leads(b)

    b.stop()  # SIGTERM: b hands the Lease back, a takes it without waiting for it to expire
    wait_for(lambda: leads(a), "a to take over again", timeout=60)
    assert "took the leader Lease" in a.logs()
    kube.apply(stj("three", replicas=1, resources=GPU))
    wait_for(lambda: len(kube.list("pods", f"{labels.JOB}=three")) == 1, "three's worker")
    assert children_of(kube, "three") == ["jobs/three-worker", "services/three-worker"]
    assert json.dumps(holder(kube)).count(identity(a)) == 1


def test_a_leader_that_finds_another_holder_stops_at_once(kube: Kube, make_operator: Any) -> None:
    a = replica(make_operator, "a")
    wait_for(lambda: leads(a), "a to lead")
    # another replica took the Lease (as after a partition): a must stop acting and exit
    kube.patch("lease", "statictrain-operator-leader", {"spec": {"holderIdentity": "someone-else"}})
    assert a.proc is not None
    code = wait_for(lambda: a.proc.poll() if a.proc is not None else None, "a to exit", timeout=60)
    assert code == 1 and "another replica holds the leader Lease now; exiting" in a.logs(), a.logs()[-3000:]
    a.proc = None
    a.log.close()
