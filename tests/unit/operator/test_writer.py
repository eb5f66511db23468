"""One writer per status field: what each part sends, and that parts never erase each other (FakeKube,
checked against the real API server in tests/integration/operator/test_kube_contract.py)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from statictrain import api, labels
from statictrain_operator import writer
from statictrain_operator.kube import port

from tests.fakes.kube import FakeKube

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
NS, NAME = "ns", "j"


def cond(ctype: str, status: str = "True", reason: str = "R") -> api.Condition:
    return {"type": ctype, "status": status, "reason": reason, "message": "m"}  # type: ignore[typeddict-item]


def make() -> tuple[FakeKube, dict[str, Any]]:
    kube = FakeKube()
    body = {
        "apiVersion": labels.API_VERSION,
        "kind": labels.KIND,
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {},
    }
    asyncio.run(kube.create(port.STJ, body))
    return kube, body


def status_of(kube: FakeKube) -> dict[str, Any]:
    obj = asyncio.run(kube.get(port.STJ, NS, NAME))
    assert obj is not None
    return obj.get("status") or {}


def test_a_part_cannot_write_what_it_does_not_own() -> None:
    kube, _ = make()
    w = writer.StatusWriter(kube, writer.PROGRESS)
    with pytest.raises(ValueError, match="does not own status"):
        w.desired({}, {"phase": "Running"}, [], NOW)
    with pytest.raises(ValueError, match="Remediation"):
        w.desired({}, {}, [cond("Remediation")], NOW)


def test_unchanged_fields_send_nothing_and_others_are_kept() -> None:
    kube, body = make()
    w = writer.StatusWriter(kube, writer.COST)
    asyncio.run(w.write(body, {"cost": {"usd": "1"}}, [cond("BudgetExceeded", "False")], now=NOW))
    job = asyncio.run(kube.get(port.STJ, NS, NAME))
    assert job is not None
    kube.writes.clear()
    asyncio.run(w.write(job, {"cost": {"usd": "1"}}, [cond("BudgetExceeded", "False")], now=NOW + timedelta(1)))
    assert kube.writes == []
    asyncio.run(w.write(job, {"cost": {"usd": "2"}}, now=NOW))  # the condition is re-sent, not dropped
    st = status_of(kube)
    assert st["cost"] == {"usd": "2"} and [c["type"] for c in st["conditions"]] == ["BudgetExceeded"]


def test_every_part_writing_from_a_stale_view_keeps_the_others_conditions() -> None:
    kube, body = make()
    stale = dict(body)  # every part read the job before any of them wrote
    writes: list[tuple[writer.Part, dict[str, Any], list[api.Condition]]] = [
        (writer.CONVERGER, {"phase": "Running"}, [cond("Created"), cond("Running")]),
        (writer.PROGRESS, {"progress": {"step": 3}}, []),
        (writer.COST, {"cost": {"usd": "1"}}, [cond("BudgetExceeded", "False")]),
        (writer.ANOMALY, {"remediation": {"lastAction": "Suspend"}}, [cond("Remediation")]),
    ]

    async def all_parts() -> None:
        await asyncio.gather(*(writer.StatusWriter(kube, part).write(stale, f, c, now=NOW) for part, f, c in writes))

    asyncio.run(all_parts())
    st = status_of(kube)
    assert sorted(c["type"] for c in st["conditions"]) == ["BudgetExceeded", "Created", "Remediation", "Running"]
    assert (st["phase"], st["progress"], st["cost"], st["remediation"]) == (
        "Running",
        {"step": 3},
        {"usd": "1"},
        {"lastAction": "Suspend"},
    )


def test_last_transition_time_moves_only_on_a_status_change() -> None:
    kube, body = make()
    w = writer.StatusWriter(kube, writer.ANOMALY)
    asyncio.run(w.write(body, {}, [cond("Remediation", reason="A")], now=NOW))
    job = asyncio.run(kube.get(port.STJ, NS, NAME))
    assert job is not None
    asyncio.run(w.write(job, {}, [cond("Remediation", reason="B")], now=NOW + timedelta(hours=1)))
    (c,) = status_of(kube)["conditions"]
    assert (c["reason"], c["lastTransitionTime"]) == ("B", "2026-01-02T03:04:05Z")
