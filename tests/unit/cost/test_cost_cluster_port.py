"""ClusterCost: what a pass reads is loaded on the loop; what it writes is queued and sent by flush.

Against FakeKube (checked against the real API server by test_kube_contract); the real API server
runs the whole cost pass in tests/integration/cost/test_cost_cluster.py.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from statictrain import labels
from statictrain_operator.cost.cluster import STATE_KEY, ClusterCost
from statictrain_operator.kube import port

from tests.fakes.kube import FakeKube

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def stj(name: str) -> dict[str, Any]:
    return {
        "apiVersion": labels.API_VERSION,
        "kind": labels.KIND,
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"image": "i", "entrypoint": "m:f"},
    }


def setup() -> tuple[FakeKube, ClusterCost]:
    api = FakeKube(clock=lambda: NOW)

    async def fill() -> None:
        for name in ("a", "b"):
            await api.create(port.STJ, stj(name))
        await api.create(port.NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a-0", "namespace": "ns"}}
        await api.create(port.PODS, {**pod, "metadata": {**pod["metadata"], "labels": {labels.JOB: "a"}}})
        await api.create(port.PODS, {**pod, "metadata": {"name": "other", "namespace": "ns"}})

    asyncio.run(fill())
    api.writes.clear()

    def jobs() -> list[dict[str, Any]]:
        return [v for (path, _, _), v in sorted(api.objects.items()) if path == port.STJ.path()]

    def job(namespace: str, name: str) -> dict[str, Any] | None:
        return api.objects.get((port.STJ.path(), namespace, name))

    return api, ClusterCost(api, jobs, job, lambda: NOW, state_configmap="ns/cost-state")


def test_a_pass_reads_the_snapshot_and_its_writes_wait_for_flush() -> None:
    api, cc = setup()

    async def go() -> None:
        nodes = await cc.load()
        assert [n["metadata"]["name"] for n in nodes] == ["n1"]
        assert [p["metadata"]["name"] for p in cc.list_worker_pods()] == ["a-0"]  # worker pods only
        assert [j["metadata"]["name"] for j in cc.list_jobs()] == ["a", "b"]
        assert cc.read_state() is None
        assert cc.patch_job_status("ns", "a", {"cost": {"usd": "1.000000000"}})
        assert cc.patch_job("ns", "b", {"spec": {"suspend": True}})
        cc.emit_event(api.objects[(port.STJ.path(), "ns", "b")], "BudgetExceededSuspended", "over", "Warning")
        assert cc.write_state('{"v": 1}') and cc.write_state('{"v": 2}')
        assert not cc.patch_job_status("ns", "gone", {"cost": {}})  # not listed
        assert api.writes == []  # nothing is sent during the pass
        await cc.flush()

    asyncio.run(go())
    assert sorted(api.writes) == sorted(
        ["apply StaticTrainingJob/status", "patch StaticTrainingJob", "create Event", "create ConfigMap"]
    )
    a = api.objects[(port.STJ.path(), "ns", "a")]
    assert a["status"]["cost"] == {"usd": "1.000000000"}
    assert api.objects[(port.STJ.path(), "ns", "b")]["spec"]["suspend"] is True
    assert api.objects[(port.CONFIGMAPS.path(), "ns", "cost-state")]["data"] == {STATE_KEY: '{"v": 2}'}  # the last


def test_a_job_gone_before_flush_gets_none_of_its_writes_and_others_still_do() -> None:
    api, cc = setup()

    async def go() -> None:
        await cc.load()
        cc.patch_job("ns", "a", {"spec": {"suspend": True}})
        cc.emit_event(api.objects[(port.STJ.path(), "ns", "a")], "BudgetExceededSuspended", "over", "Warning")
        cc.patch_job_status("ns", "b", {"cost": {"usd": "2.000000000"}})
        await api.delete(port.STJ, "ns", "a")
        api.writes.clear()
        await cc.flush()

    asyncio.run(go())
    assert api.writes == ["apply StaticTrainingJob/status"]  # b's; a's patch found it gone, its Event not sent


def test_the_saved_state_is_read_once() -> None:
    api, cc = setup()

    async def go() -> tuple[str | None, str | None]:
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cost-state", "namespace": "ns"}}
        await api.create(port.CONFIGMAPS, {**body, "data": {STATE_KEY: "saved"}})
        await cc.load()
        first = cc.read_state()
        await api.merge_patch(port.CONFIGMAPS, "ns", "cost-state", {"data": {STATE_KEY: "changed"}})
        await cc.load()
        return first, cc.read_state()

    assert asyncio.run(go()) == ("saved", "saved")
