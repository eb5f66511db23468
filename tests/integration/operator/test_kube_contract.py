"""The Kube port's contract: the same cases against FakeKube and the real API server.

A case that passes on the real server and fails on the fake is a bug of the fake
(and the other way round a bug of HttpKube). Cases: what "missing" answers,
merge-patch deletes, generation moves, server-side apply by several field
managers (condition merge by type, removal of what a manager leaves out),
restart-from-checkpoint (the anomaly part's action), uid-guarded deletes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from statictrain import labels
from statictrain_operator import writer
from statictrain_operator.anomaly import actions
from statictrain_operator.anomaly.remediation import ActionKind, Intent
from statictrain_operator.kube import endpoint, port
from statictrain_operator.kube.http import HttpKube

from tests.fakes.kube import FakeKube

from .conftest import stj

Case = Callable[[port.Kube, str], Awaitable[None]]


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.cluster)])
def kube(request: pytest.FixtureRequest) -> Iterator[tuple[Any, str]]:
    if request.param == "fake":
        yield FakeKube(), "contract"
        return
    cluster = request.getfixturevalue("cluster")
    request.getfixturevalue("crd")
    ns = request.getfixturevalue("namespace")
    yield HttpKube(endpoint.load(str(cluster.kubeconfig))), ns


def run(kube: tuple[Any, str], case: Case) -> None:
    api, ns = kube

    async def go() -> None:
        try:
            await case(api, ns)
        finally:
            if isinstance(api, HttpKube):
                await api.close()

    asyncio.run(go())


def job(ns: str, name: str = "c", **spec: Any) -> dict[str, Any]:
    body = stj(name, **spec)
    body["metadata"]["namespace"] = ns
    return body


def ssa(ns: str, name: str, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": labels.API_VERSION,
        "kind": labels.KIND,
        "metadata": {"name": name, "namespace": ns},
        "status": status,
    }


def cond(ctype: str, status: str = "True", reason: str = "Because") -> dict[str, Any]:
    return {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": "m",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


def test_missing_objects(kube: tuple[Any, str]) -> None:
    async def case(api: port.Kube, ns: str) -> None:
        assert await api.get(port.STJ, ns, "nope") is None
        assert await api.merge_patch(port.STJ, ns, "nope", {"spec": {"suspend": True}}) is None
        assert (
            await api.merge_patch(port.STJ, ns, "nope", {"status": {"phase": "Running"}}, subresource="status") is None
        )
        assert await api.apply(port.STJ, ssa(ns, "nope", phase="Running"), manager="t", subresource="status") is None
        assert await api.delete(port.STJ, ns, "nope") is False
        assert await api.list(port.STJ, ns) == []

    run(kube, case)


def test_create_twice_and_delete_with_a_stale_uid(kube: tuple[Any, str]) -> None:
    async def case(api: port.Kube, ns: str) -> None:
        made = await api.create(port.STJ, job(ns))
        assert made is not None and made["metadata"]["uid"] and made["metadata"]["generation"] == 1
        assert await api.create(port.STJ, job(ns)) is None
        listed = await api.list(port.STJ, ns, label_selector=f"{labels.TEAM}=nlp")
        assert [o["metadata"]["name"] for o in listed] == ["c"]
        assert await api.list(port.STJ, ns, label_selector=f"{labels.TEAM}=other") == []
        assert await api.delete(port.STJ, ns, "c", uid="00000000-0000-0000-0000-000000000000") is False
        assert await api.delete(port.STJ, ns, "c", uid=made["metadata"]["uid"]) is True

    run(kube, case)


def test_merge_patch_deletes_keys_and_moves_generation_only_for_spec(kube: tuple[Any, str]) -> None:
    async def case(api: port.Kube, ns: str) -> None:
        await api.create(port.STJ, job(ns))
        out = await api.merge_patch(port.STJ, ns, "c", {"metadata": {"annotations": {"a": "1", "b": "2"}}})
        assert out is not None and out["metadata"]["generation"] == 1
        out = await api.merge_patch(port.STJ, ns, "c", {"metadata": {"annotations": {"a": None}}})
        assert out is not None and out["metadata"]["annotations"] == {"b": "2"}
        out = await api.merge_patch(port.STJ, ns, "c", {"spec": {"suspend": True}})
        assert out is not None and out["metadata"]["generation"] == 2 and out["spec"]["suspend"] is True
        st = {"status": {"phase": "Running", "progress": {"step": 3}}}
        out = await api.merge_patch(port.STJ, ns, "c", st, subresource="status")
        assert out is not None and out["metadata"]["generation"] == 2
        out = await api.merge_patch(port.STJ, ns, "c", {"status": {"progress": None}}, subresource="status")
        assert out is not None and out["status"] == {"phase": "Running"}
        out = await api.merge_patch(port.STJ, ns, "c", {"status": {"phase": "Failed"}})  # not the subresource
        assert out is not None and out["status"] == {"phase": "Running"}

    run(kube, case)


def test_apply_merges_conditions_by_type_and_keeps_other_managers_fields(kube: tuple[Any, str]) -> None:
    async def case(api: port.Kube, ns: str) -> None:
        await api.create(port.STJ, job(ns))
        a = ssa(ns, "c", phase="Running", conditions=[cond("Created"), cond("Running")])
        b = ssa(ns, "c", anomalies=[{"metric": "m", "time": "2026-01-01T00:00:00Z"}], conditions=[cond("Remediation")])
        c = ssa(ns, "c", cost={"usd": "1.5"}, conditions=[cond("BudgetExceeded", "False")])
        for manager, body in (("conv", a), ("anom", b), ("cost", c)):
            assert await api.apply(port.STJ, body, manager=manager, subresource="status") is not None
        out = await api.get(port.STJ, ns, "c")
        assert out is not None
        types = sorted(x["type"] for x in out["status"]["conditions"])
        assert types == ["BudgetExceeded", "Created", "Remediation", "Running"]
        # the converger moves on: Running goes, Succeeded comes; the others' conditions stay
        a2 = ssa(ns, "c", phase="Succeeded", conditions=[cond("Created"), cond("Succeeded")])
        out = await api.apply(port.STJ, a2, manager="conv", subresource="status")
        assert out is not None
        st = out["status"]
        assert sorted(x["type"] for x in st["conditions"]) == ["BudgetExceeded", "Created", "Remediation", "Succeeded"]
        assert (st["phase"], st["cost"], st["anomalies"][0]["metric"]) == ("Succeeded", {"usd": "1.5"}, "m")
        # the anomaly part leaves anomalies out: they go, its condition stays, nobody else's changes
        out = await api.apply(
            port.STJ, ssa(ns, "c", conditions=[cond("Remediation", "False")]), manager="anom", subresource="status"
        )
        assert out is not None
        st = out["status"]
        assert "anomalies" not in st and st["cost"] == {"usd": "1.5"}
        assert {x["type"]: x["status"] for x in st["conditions"]} == {
            "Created": "True",
            "Succeeded": "True",
            "Remediation": "False",
            "BudgetExceeded": "False",
        }
        assert out["metadata"]["generation"] == 1

    run(kube, case)


def test_restart_from_checkpoint_deletes_only_older_worker_pods(kube: tuple[Any, str]) -> None:
    def pod(name: str, ns: str, job_name: str = "c") -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {labels.JOB: job_name, labels.ROLE: "worker"}},
            "spec": {
                "containers": [{"name": "x", "image": "registry.example.com/x:1"}],
                "nodeSelector": {"nowhere": "true"},
            },  # never scheduled: deleted at once
        }

    async def case(api: port.Kube, ns: str) -> None:
        old = await api.create(port.PODS, pod("old", ns))
        await api.create(port.PODS, pod("other", ns, job_name="d"))
        assert old is not None
        created = datetime.fromisoformat(old["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
        cut = created + timedelta(seconds=1)
        while datetime.now(cut.tzinfo) < cut + timedelta(milliseconds=50):  # the next second on the server's clock
            time.sleep(0.05)
        await api.create(port.PODS, pod("new", ns))
        intent = Intent("i", ActionKind.RESTART_FROM_CHECKPOINT, cut, {"podsCreatedBefore": cut.isoformat()}, "r", 1)
        assert await actions.apply(api, ns, "c", intent) is None
        names = sorted(
            p["metadata"]["name"] for p in await api.list(port.PODS, ns) if not p["metadata"].get("deletionTimestamp")
        )
        assert names == ["new", "other"]
        assert await actions.apply(api, ns, "c", intent) is None  # again: nothing more goes
        names = sorted(
            p["metadata"]["name"] for p in await api.list(port.PODS, ns) if not p["metadata"].get("deletionTimestamp")
        )
        assert names == ["new", "other"]

    run(kube, case)


def test_spec_actions_return_the_new_generation(kube: tuple[Any, str]) -> None:
    async def case(api: port.Kube, ns: str) -> None:
        await api.create(port.STJ, job(ns, replicas=4, elastic={"minReplicas": 1, "maxReplicas": 4}))
        t = datetime(2026, 1, 1).astimezone()
        scale = Intent("s", ActionKind.SCALE_DOWN, t, {"replicas": 2}, "r", 1)
        assert await actions.apply(api, ns, "c", scale) == 2
        out = await api.get(port.STJ, ns, "c")
        assert out is not None and out["spec"]["replicas"] == 2
        assert await actions.apply(api, ns, "c", scale) == 2  # the same end state: no new generation
        assert await actions.apply(api, ns, "gone", scale) is None

    run(kube, case)


def test_all_parts_write_at_once_and_every_condition_survives(kube: tuple[Any, str]) -> None:
    """The converger, progress, cost and anomaly writers, concurrently, each from the view it read
    before any of them wrote (as kopf's index may lag): no part's fields or condition go missing."""
    rounds = 8
    now = datetime(2026, 1, 2, tzinfo=UTC)

    def change(part: writer.Part, i: int) -> tuple[dict[str, Any], list[Any]]:
        flip = "True" if i % 2 else "False"
        if part is writer.CONVERGER:
            return {"phase": "Running", "replicas": i}, [
                {"type": "Created", "status": "True", "reason": "WorkersCreated", "message": "m"},
                {"type": "Running", "status": flip, "reason": "WorkersReady", "message": f"round {i}"},
            ]
        if part is writer.PROGRESS:
            return {"progress": {"step": i}, "compile": {"seconds": "1.000"}}, []
        if part is writer.COST:
            return {"cost": {"usd": f"{i}.00"}}, [
                {"type": "BudgetExceeded", "status": flip, "reason": "WithinBudget", "message": f"round {i}"}
            ]
        return {"remediation": {"lastAction": f"a{i}"}}, [
            {"type": "Remediation", "status": flip, "reason": "Healthy", "message": f"round {i}"}
        ]

    async def case(api: port.Kube, ns: str) -> None:
        made = await api.create(port.STJ, job(ns))
        assert made is not None
        parts = (writer.CONVERGER, writer.PROGRESS, writer.COST, writer.ANOMALY)

        async def part_loop(part: writer.Part) -> None:
            w = writer.StatusWriter(api, part)
            for i in range(1, rounds + 1):
                fields, conds = change(part, i)
                assert await w.write(made, fields, conds, now=now)  # always the stale view
                await asyncio.sleep(0)

        await asyncio.gather(*(part_loop(p) for p in parts))
        out = await api.get(port.STJ, ns, "c")
        assert out is not None
        st = out["status"]
        conds = {c["type"]: (c["status"], c["message"]) for c in st["conditions"]}
        last = f"round {rounds}"
        assert conds == {
            "Created": ("True", "m"),
            "Running": ("False", last),
            "BudgetExceeded": ("False", last),
            "Remediation": ("False", last),
        }
        assert (st["phase"], st["replicas"], st["progress"], st["compile"], st["cost"], st["remediation"]) == (
            "Running",
            rounds,
            {"step": rounds},
            {"seconds": "1.000"},
            {"usd": f"{rounds}.00"},
            {"lastAction": f"a{rounds}"},
        )

    run(kube, case)
