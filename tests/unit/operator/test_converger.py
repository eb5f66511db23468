"""The converger's decisions against FakeKube (checked against the real API server by test_kube_contract)."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

import pytest
from statictrain import labels
from statictrain_operator import children, converger, runtime
from statictrain_operator.kube import port
from statictrain_operator.settings import Settings

from tests.fakes.kube import FakeKube

from . import builders as b

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
KEY: converger.Key = ("team-nlp", "gpt2")


@pytest.fixture
def api() -> FakeKube:
    """The API server with the StaticTrainingJob of KEY in it."""
    fake = FakeKube(clock=lambda: NOW)
    o = b.owner()
    body = {
        "apiVersion": labels.API_VERSION,
        "kind": labels.KIND,
        "metadata": {"name": o.name, "namespace": o.namespace, "labels": dict(o.labels)},
        "spec": o.spec,
    }
    asyncio.run(fake.create(port.STJ, body))
    fake.writes.clear()
    return fake


def view(api: FakeKube, status: dict[str, Any] | None = None) -> dict[str, Any]:
    """The job as kopf's index holds it (the fake's uid; status as given)."""
    o = b.owner()
    obj = api.objects[(port.STJ.path(), o.namespace, o.name)]
    meta = obj["metadata"]
    return {
        "metadata": {
            "name": o.name,
            "namespace": o.namespace,
            "uid": meta["uid"],
            "labels": dict(o.labels),
            "generation": 1,
            "resourceVersion": meta["resourceVersion"],
        },
        "spec": o.spec,
        "status": status or {},
    }


def make(api: FakeKube, views: dict[converger.Key, Any]) -> converger.Converger:
    rt = runtime.Runtime(settings=Settings(), kube=api, holder="t", clock=lambda: NOW)

    def nothing(_key: converger.Key) -> None:
        return None

    return converger.Converger(rt, (views.get, nothing, nothing, nothing), logging.getLogger("test"))


def test_first_converge_creates_both_children_and_sets_status(api: FakeKube) -> None:
    c = make(api, {KEY: view(api)})
    asyncio.run(c.converge(KEY))
    assert sorted(api.writes[:3]) == ["create Job", "create PersistentVolumeClaim", "create Service"]
    assert api.writes[3:] == ["apply StaticTrainingJob/status"]
    job = asyncio.run(api.get(port.STJ, *KEY))
    assert job is not None and job["status"]["phase"] == "Created"
    assert [x["type"] for x in job["status"]["conditions"]] == ["Created"]


def test_a_second_event_before_the_watch_catches_up_writes_nothing(api: FakeKube) -> None:
    c = make(api, {KEY: view(api)})
    asyncio.run(c.converge(KEY))
    api.writes.clear()
    asyncio.run(c.converge(KEY))  # the indexes still lack the children and the status: the converger remembers
    assert api.writes == []


def test_children_left_by_a_crash_are_found_not_duplicated(api: FakeKube) -> None:
    o = b.owner()
    asyncio.run(api.create(port.SERVICES, children.service(o)))  # created before the crash
    api.writes.clear()
    c = make(api, {KEY: view(api)})
    asyncio.run(c.converge(KEY))
    kinds = sorted(k for (path, _, _), _ in api.objects.items() if path != port.STJ.path() for k in [path])
    assert kinds == sorted([port.JOBS.path(), port.PVCS.path(), port.SERVICES.path()])
    assert api.writes.count("create Service") == 0  # the 409 is not a write; then a re-read finds it


def test_finished_jobs_are_left_alone(api: FakeKube) -> None:
    c = make(api, {KEY: view(api, status={"phase": "Succeeded"})})
    asyncio.run(c.converge(KEY))
    assert api.writes == []


def test_gone_jobs_are_forgotten(api: FakeKube) -> None:
    c = make(api, {})
    asyncio.run(c.converge(KEY))
    assert api.writes == [] and KEY not in c.locks


class SlowCreates(FakeKube):
    """Creates of the Job named ``held`` wait until ``release`` is set."""

    def __init__(self, held: str) -> None:
        super().__init__(clock=lambda: NOW)
        self.held, self.entered, self.release = held, asyncio.Event(), asyncio.Event()

    async def create(self, res: port.Resource, body: Any) -> dict[str, Any] | None:
        if res == port.JOBS and body["metadata"]["name"] == self.held:
            self.entered.set()
            await self.release.wait()
        return await super().create(res, body)


def test_status_writes_wait_while_another_jobs_children_are_being_created() -> None:
    async def go() -> None:
        api = SlowCreates(held=children.worker_name("bert"))
        views: dict[converger.Key, Any] = {}
        for name in ("gpt2", "bert"):
            o = b.owner(name=name)
            body = {
                "apiVersion": labels.API_VERSION,
                "kind": labels.KIND,
                "spec": o.spec,
                "metadata": {"name": name, "namespace": o.namespace, "labels": dict(o.labels)},
            }
            made = await api.create(port.STJ, body)
            assert made is not None
            views[(o.namespace, name)] = {**made, "status": {}}
        api.writes.clear()
        c = make(api, views)
        bert = asyncio.create_task(c.converge(("team-nlp", "bert")))
        await api.entered.wait()
        gpt2 = asyncio.create_task(c.converge(KEY))
        for _ in range(50):  # everything but bert's held create runs to where it waits
            await asyncio.sleep(0)
        assert api.writes.count("create Job") == 1  # gpt2's worker Job is created at once...
        assert "apply StaticTrainingJob/status" not in api.writes and not gpt2.done()  # ...its status waits
        api.release.set()
        await asyncio.gather(bert, gpt2)
        assert api.writes.count("create Job") == 2
        assert api.writes.count("apply StaticTrainingJob/status") == 2

    asyncio.run(go())


class Down(FakeKube):
    """The API server unreachable: every call fails, as aiohttp's connection errors do."""

    def __init__(self, up: FakeKube) -> None:
        super().__init__(clock=lambda: NOW)
        self.objects, self.writes = up.objects, up.writes
        self.calls = 0
        self.down = True

    async def create(self, res: port.Resource, body: Any) -> dict[str, Any] | None:
        self.calls += 1
        if self.down:
            raise ConnectionRefusedError("connection refused")
        return await super().create(res, body)


def test_api_errors_are_retried_after_growing_jittered_waits_and_converge_once_it_is_back(api: FakeKube) -> None:
    down = Down(api)
    c = make(down, {KEY: view(api)})
    waits: list[float] = []

    async def scenario() -> None:
        c.later = lambda key, delay=None: waits.append(delay)  # type: ignore[method-assign]
        for _ in range(8):
            await c.converge(KEY)
        down.down = False
        await c.converge(KEY)

    asyncio.run(scenario())
    assert len(waits) == 8 and all(w is not None for w in waits)
    ceilings = [min(c.rt.settings.backoff_max_s, c.rt.settings.requeue_s * 2**i) for i in range(8)]
    assert all(ceil / 2 <= w <= ceil for w, ceil in zip(waits, ceilings, strict=True)), waits
    assert waits[-1] >= c.rt.settings.backoff_max_s / 2  # bounded: it stopped growing at the bound
    assert KEY not in c.backoff.failures  # the success reset it
    assert sorted(api.writes[:3]) == ["create Job", "create PersistentVolumeClaim", "create Service"]


def test_a_child_deleted_after_the_job_settled_is_made_again_whole(api: FakeKube) -> None:
    """The converger keeps only what planning reads of a settled job's desired children; what it creates
    again is the whole child, as the first create made it."""
    rt = runtime.Runtime(settings=Settings(), kube=api, holder="t", clock=lambda: NOW)
    name = children.worker_name(KEY[1])

    def indexed(kind: port.Resource) -> converger.Lookup:
        return lambda key: api.objects.get((kind.path(), key[0], name))

    c = converger.Converger(
        rt, ({KEY: view(api)}.get, indexed(port.JOBS), indexed(port.SERVICES), lambda _: None), logging.getLogger("t")
    )
    asyncio.run(c.converge(KEY))
    first = api.objects[(port.SERVICES.path(), KEY[0], name)]
    asyncio.run(c.converge(KEY))  # both children indexed: the job is settled
    assert api.writes.count("create Service") == 1
    del api.objects[(port.SERVICES.path(), KEY[0], name)]
    asyncio.run(c.converge(KEY))
    again = api.objects[(port.SERVICES.path(), KEY[0], name)]
    assert api.writes.count("create Service") == 2
    assert again["spec"] == first["spec"] and again["metadata"]["labels"] == first["metadata"]["labels"]


def test_what_the_converger_keeps_of_a_child_it_created_is_no_pod_template(api: FakeKube) -> None:
    """Until the watch brings them, created children are remembered as the index would hold them (memory)."""
    c = make(api, {KEY: view(api)})
    asyncio.run(c.converge(KEY))
    kept = c.recent[KEY]
    assert {"Job", "Service"} <= set(kept)
    assert "template" not in kept["Job"]["spec"] and kept["Job"]["spec"]["parallelism"] == b.owner().spec["replicas"]
    assert kept["Service"]["spec"] == {}


def _counting(c: converger.Converger, during_first: int = 0) -> list[converger.Key]:
    """Count the converger's runs; the first run asks ``during_first`` more times while it runs."""
    runs: list[converger.Key] = []
    run = c._converge

    async def counted(key: converger.Key) -> str | None:
        runs.append(key)
        if len(runs) == 1:
            for _ in range(during_first):
                c.request(key)
        return await run(key)

    c._converge = counted  # type: ignore[method-assign]
    return runs


async def _settle(c: converger.Converger) -> None:
    while c.rt.tasks:
        await asyncio.gather(*list(c.rt.tasks))


def test_requests_before_a_run_takes_the_lock_make_one_run(api: FakeKube) -> None:
    c = make(api, {KEY: view(api)})
    runs = _counting(c)

    async def events() -> None:
        for _ in range(5):
            c.request(KEY)
        await _settle(c)

    asyncio.run(events())
    assert runs == [KEY]


def test_requests_during_a_run_make_one_more_run_after_it(api: FakeKube) -> None:
    c = make(api, {KEY: view(api)})
    runs = _counting(c, during_first=3)

    async def events() -> None:
        c.request(KEY)
        await _settle(c)

    asyncio.run(events())
    assert runs == [KEY, KEY]
    assert not c.pending
