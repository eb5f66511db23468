"""kopf's own watch loop (continuous_watch: listing, then the stream) yields objects without managedFields once
watchtrim is installed; everything else of each object, and every event, arrives as the API server sent it.
Only the HTTP calls are faked (kopf's api.get and api.stream), so a kopf that stops looking up the wrapped
functions by name fails here."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

import kopf
import pytest
from kopf._cogs.clients import api, fetching, watching
from kopf._cogs.structs import references
from statictrain_operator import watchtrim

FIELDS = [{"manager": "kube-controller-manager", "operation": "Update", "fieldsV1": {"f:status": {}}}]


def _job(name: str, rv: str) -> dict[str, Any]:
    meta = {"name": name, "namespace": "ns", "uid": f"u-{name}", "resourceVersion": rv, "managedFields": FIELDS}
    template = {"spec": {"containers": [{"name": "trainer", "image": "t"}]}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {"parallelism": 1, "template": template}}


LISTED = [_job("a", "1"), _job("b", "2")]
STREAMED = [
    {"type": "MODIFIED", "object": _job("a", "3")},
    {"type": "ADDED", "object": {**_job("d", "4"), "metadata": {"name": "d", "namespace": "ns", "uid": "u-d"}}},
    {"type": "ADDED", "object": _job("c", "5")},
]


async def _collect(count: int, group: str = "batch", plural: str = "jobs") -> list[Any]:
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()
    seen: list[Any] = []
    stream = watching.continuous_watch(
        settings=kopf.OperatorSettings(),
        resource=references.Resource(group, "v1", plural, namespaced=True),
        namespace="ns",
        operator_pause_waiter=waiter,
    )
    async for item in stream:
        seen.append(item)
        if len(seen) == count:
            break
    await stream.aclose()
    waiter.cancel()
    return seen


@pytest.fixture
def fake_api(monkeypatch: pytest.MonkeyPatch) -> None:
    async def get(url: str, **_: Any) -> Any:
        return {"kind": "JobList", "apiVersion": "batch/v1", "metadata": {"resourceVersion": "2"},
                "items": copy.deepcopy(LISTED)}  # fmt: skip

    async def stream(url: str, **_: Any) -> AsyncIterator[Any]:
        for event in copy.deepcopy(STREAMED):
            yield event

    monkeypatch.setattr(api, "get", get)
    monkeypatch.setattr(api, "stream", stream)
    # undo the wrap after the test
    monkeypatch.setattr(fetching, "fetch_objs", fetching.fetch_objs)
    monkeypatch.setattr(watching, "watch_objs", watching.watch_objs)


def _without_fields(obj: dict[str, Any], spec: bool = True) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"].pop("managedFields", None)
    if spec:
        out["spec"].pop("template", None)  # a Job's spec: only views.JOB_SPEC_READ
    return out


@pytest.mark.usefixtures("fake_api")
def test_listed_and_streamed_objects_come_without_managed_fields() -> None:
    assert watchtrim.install() is True
    assert watchtrim.install() is True  # twice: wrapped once
    seen = asyncio.run(_collect(2 + 1 + len(STREAMED)))  # two listed, the LISTED bookmark, the stream
    listed = [e["object"] for e in seen[:2]]
    assert listed == [_without_fields(o) for o in LISTED]
    assert seen[2] is watching.Bookmark.LISTED
    streamed = seen[3:]
    assert [e["type"] for e in streamed] == [e["type"] for e in STREAMED]
    assert streamed[0]["object"] == _without_fields(STREAMED[0]["object"])
    assert streamed[1]["object"] == _without_fields(STREAMED[1]["object"])  # no managedFields to drop
    assert streamed[2]["object"] == _without_fields(STREAMED[2]["object"])
    assert all("managedFields" not in str(e) for e in seen)


@pytest.mark.usefixtures("fake_api")
def test_without_install_kopf_keeps_them() -> None:
    """The fake does deliver managedFields and templates: the test above would fail if install did nothing."""
    seen = asyncio.run(_collect(2 + 1 + len(STREAMED)))
    assert seen[0]["object"]["metadata"]["managedFields"] == FIELDS
    assert seen[-1]["object"] == STREAMED[-1]["object"]


@pytest.mark.usefixtures("fake_api")
def test_other_resources_keep_their_spec() -> None:
    watchtrim.install()
    seen = asyncio.run(_collect(2 + 1 + len(STREAMED), group="", plural="services"))
    assert seen[-1]["object"] == _without_fields(STREAMED[-1]["object"], spec=False)


def test_strip_leaves_anything_else_alone() -> None:
    odds: list[object] = [None, 3, "x", [], {"metadata": None}, {"metadata": []}]
    for odd in odds:
        before = copy.deepcopy(odd)
        watchtrim.strip(odd)
        assert odd == before


def test_a_kopf_without_the_functions_keeps_the_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(watching, "watch_objs")
    assert watchtrim.install() is False
