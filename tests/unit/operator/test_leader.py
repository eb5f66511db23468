"""Leader election decisions (pure logic); the real Lease and two real replicas: integration/operator/test_leader.py."""

from __future__ import annotations

from typing import Any

import pytest
from statictrain_operator import leader
from statictrain_operator.settings import SettingsError, from_env


def lease(holder: str | None, renew: str = "t1", rv: str = "1") -> dict[str, Any]:
    return {"metadata": {"resourceVersion": rv}, "spec": {"holderIdentity": holder, "renewTime": renew}}


def test_no_lease_is_created_and_ours_is_renewed() -> None:
    assert leader.decide(None, "me", None, 0.0, 15)[0] == "create"
    assert leader.decide(lease("me"), "me", None, 0.0, 15)[0] == "renew"


def test_a_live_holder_is_waited_for_and_a_silent_one_replaced_after_the_lease_on_our_clock() -> None:
    action, seen = leader.decide(lease("other"), "me", None, 100.0, 15)
    assert action == "wait" and seen is not None and seen.since == 100.0
    # the holder renews: the record changes, the clock starts again
    action, seen = leader.decide(lease("other", renew="t2", rv="2"), "me", seen, 110.0, 15)
    assert action == "wait" and seen is not None and seen.since == 110.0
    assert leader.decide(lease("other", renew="t2", rv="2"), "me", seen, 124.9, 15)[0] == "wait"
    assert leader.decide(lease("other", renew="t2", rv="2"), "me", seen, 125.0, 15)[0] == "take"


def test_a_lease_handed_back_is_taken_at_once() -> None:
    assert leader.decide(lease(None), "me", None, 0.0, 15)[0] == "take"
    assert leader.decide(lease(""), "me", None, 0.0, 15)[0] == "take"


def test_identities_differ_per_process_even_with_one_pod_name() -> None:
    assert leader.identity("pod-a") != leader.identity("pod-a")
    assert leader.identity("pod-a").startswith("pod-a_")


def test_leader_election_needs_the_operators_namespace() -> None:
    with pytest.raises(SettingsError, match="LEADER_ELECTION needs STATICTRAIN_OPERATOR_HEARTBEAT_NAMESPACE"):
        from_env({"STATICTRAIN_OPERATOR_LEADER_ELECTION": "true"})
    with pytest.raises(SettingsError, match="LEADER_LEASE_S must be at least 3"):
        from_env({"STATICTRAIN_OPERATOR_LEADER_LEASE_S": "1"})
    s = from_env({"STATICTRAIN_OPERATOR_LEADER_ELECTION": "true", "STATICTRAIN_OPERATOR_HEARTBEAT_NAMESPACE": "ops"})
    assert s.leader_election and s.leader_lease_s == 15.0
