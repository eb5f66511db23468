"""The converger's decisions with the API replaced by an in-memory fake (the real API is in tests/integration)."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from statictrain_operator import children, converger, runtime
from statictrain_operator.kube import trainingjobs, workers
from statictrain_operator.settings import Settings

from . import builders as b

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


class FakeApi:
    """Objects by (kind, name); records every write."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.writes: list[str] = []

    def create(self, _c: Any, obj: dict[str, Any]) -> bool:
        key = (obj["kind"], obj["metadata"]["name"])
        self.writes.append(f"create {obj['kind']}")
        if key in self.objects:
            return False
        self.objects[key] = obj
        return True

    def read(self, kind: str) -> Any:
        return lambda _c, _ns, name: self.objects.get((kind, name))

    def patch_status(self, _c: Any, _ns: str, _name: str, diff: dict[str, Any]) -> bool:
        self.writes.append("status " + ",".join(sorted(diff)))
        return True


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    fake = FakeApi()
    monkeypatch.setattr(workers, "create", fake.create)
    monkeypatch.setattr(workers, "read_job", fake.read("Job"))
    monkeypatch.setattr(workers, "read_service", fake.read("Service"))
    monkeypatch.setattr(trainingjobs, "patch_status", fake.patch_status)
    return fake


def view(spec: Any = None, status: dict[str, Any] | None = None) -> dict[str, Any]:
    o = b.owner(spec)
    return {
        "metadata": {"name": o.name, "namespace": o.namespace, "uid": o.uid, "labels": dict(o.labels), "generation": 1},
        "spec": o.spec,
        "status": status or {},
    }


def make(views: dict[converger.Key, Any]) -> converger.Converger:
    rt = runtime.Runtime(settings=Settings(), clients=cast(Any, None), holder="t", clock=lambda: NOW)

    def nothing(_key: converger.Key) -> None:
        return None

    return converger.Converger(rt, views.get, nothing, nothing, logging.getLogger("test"))


KEY: converger.Key = ("team-nlp", "gpt2")


def test_first_converge_creates_both_children_and_sets_status(api: FakeApi) -> None:
    c = make({KEY: view()})
    asyncio.run(c.converge(KEY))
    assert sorted(api.writes[:3]) == ["create Job", "create PersistentVolumeClaim", "create Service"]
    assert api.writes[3].startswith("status ") and "phase" in api.writes[3]


def test_a_second_event_before_the_watch_catches_up_creates_nothing(api: FakeApi) -> None:
    c = make({KEY: view()})
    asyncio.run(c.converge(KEY))
    api.writes.clear()
    asyncio.run(c.converge(KEY))  # the indexes still lack the children: the converger remembers them
    assert [w for w in api.writes if w.startswith("create")] == []


def test_children_left_by_a_crash_are_found_not_duplicated(api: FakeApi) -> None:
    o = b.owner()
    api.objects[("Service", "gpt2-worker")] = children.service(o)  # created before the crash
    c = make({KEY: view()})
    asyncio.run(c.converge(KEY))
    assert sorted(k for k, _ in api.objects) == ["Job", "PersistentVolumeClaim", "Service"]
    assert api.writes.count("create Service") == 1  # the one 409, then a re-read


def test_finished_jobs_are_left_alone(api: FakeApi) -> None:
    c = make({KEY: view(status={"phase": "Succeeded"})})
    asyncio.run(c.converge(KEY))
    assert api.writes == []


def test_gone_jobs_are_forgotten(api: FakeApi) -> None:
    c = make({})
    asyncio.run(c.converge(KEY))
    assert api.writes == [] and KEY not in c.locks
