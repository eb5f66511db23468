"""The real aiohttp server on a local port, with a state filled by hand (no API server)."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson
from aiohttp import web
from prometheus_client import CollectorRegistry
from statictrain_extender.scoring import Weights
from statictrain_extender.server import MAX_BODY_BYTES, build_app
from statictrain_extender.state import ClusterState

from .builders import node_obj, pod_obj

NAMES = frozenset({"statictrain-scheduler"})


Body = Callable[[aiohttp.ClientSession, str], Awaitable[None]]


def serve(state: ClusterState, body: Body) -> CollectorRegistry:
    registry = CollectorRegistry()

    async def main() -> None:
        runner = web.AppRunner(build_app(state, NAMES, Weights(), registry))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        try:
            async with aiohttp.ClientSession() as session:
                await body(session, f"http://127.0.0.1:{port}")
        finally:
            await runner.cleanup()

    asyncio.run(main())
    return registry


def filled(n: int = 3) -> ClusterState:
    state = ClusterState()
    state.replace_nodes([node_obj(f"n{i}", hourly=str(10 + i)) for i in range(n)])
    return state


async def post(session: aiohttp.ClientSession, url: str, data: bytes) -> tuple[int, Any]:
    async with session.post(url, data=io.BytesIO(data), headers={"Content-Type": "application/json"}) as resp:
        return resp.status, orjson.loads(await resp.read())


def test_filter_and_prioritize_round_trip() -> None:
    seen: dict[str, Any] = {}

    async def body(session: aiohttp.ClientSession, base: str) -> None:
        args = orjson.dumps({"Pod": pod_obj(), "NodeNames": ["n0", "n1", "n2"]})
        seen["filter"] = await post(session, f"{base}/scheduler/filter", args)
        seen["prioritize"] = await post(session, f"{base}/scheduler/prioritize", args)

    registry = serve(filled(), body)
    status, result = seen["filter"]
    assert status == 200 and result["NodeNames"] == ["n0", "n1", "n2"] and result["Error"] == ""
    status, scores = seen["prioritize"]
    assert status == 200
    assert scores[:2] == [{"Host": "n0", "Score": 10}, {"Host": "n1", "Score": 9}]
    assert (
        registry.get_sample_value("statictrain_extender_requests_total", {"verb": "prioritize", "outcome": "ok"}) == 1.0
    )


def test_malformed_bodies_get_valid_answers() -> None:
    seen: dict[str, Any] = {}

    async def body(session: aiohttp.ClientSession, base: str) -> None:
        seen["filter"] = await post(session, f"{base}/scheduler/filter", b"{not json")
        seen["prioritize"] = await post(session, f"{base}/scheduler/prioritize", b"[1, 2]")
        seen["empty"] = await post(session, f"{base}/scheduler/filter", b"")

    registry = serve(filled(), body)
    status, result = seen["filter"]
    assert status == 200 and "not JSON" in result["Error"]
    status, result = seen["prioritize"]
    assert status == 400 and "ExtenderArgs" in result["Error"]
    assert seen["empty"][0] == 200 and seen["empty"][1]["Error"]
    assert (
        registry.get_sample_value("statictrain_extender_requests_total", {"verb": "prioritize", "outcome": "error"})
        == 1.0
    )


def test_5000_node_request() -> None:
    names = [f"n{i}" for i in range(5000)]
    seen: dict[str, Any] = {}

    async def body(session: aiohttp.ClientSession, base: str) -> None:
        args = orjson.dumps({"Pod": pod_obj(), "NodeNames": [*names, "ghost"]})
        seen["prioritize"] = await post(session, f"{base}/scheduler/prioritize", args)
        seen["filter"] = await post(session, f"{base}/scheduler/filter", args)

    serve(filled(5000), body)
    status, scores = seen["prioritize"]
    assert status == 200 and len(scores) == 5001
    assert scores[-1] == {"Host": "ghost", "Score": 0}
    assert len(seen["filter"][1]["NodeNames"]) == 5001


def test_healthz_and_metrics() -> None:
    seen: dict[str, Any] = {}
    state = ClusterState()

    async def body(session: aiohttp.ClientSession, base: str) -> None:
        async with session.get(f"{base}/healthz") as resp:
            seen["before"] = resp.status
        state.replace_nodes([node_obj("n0")])
        state.estimates.record("inferred", None)
        async with session.get(f"{base}/healthz") as resp:
            seen["after"] = (resp.status, orjson.loads(await resp.read()))
        async with session.get(f"{base}/metrics") as resp:
            seen["metrics"] = await resp.text()

    serve(state, body)
    assert seen["before"] == 503
    assert seen["after"] == (
        200,
        {"nodesSynced": True, "podsSynced": False, "nodesCached": 1, "prometheusOk": None},
    )
    assert "statictrain_extender_nodes_cached 1.0" in seen["metrics"]
    assert 'statictrain_extender_throughput_estimates_total{source="inferred"} 1.0' in seen["metrics"]


MALFORMED = [
    {"Pod": {"spec": [1]}, "NodeNames": ["n0"]},  # the reproduced HTTP 500
    {"Pod": {"spec": {"schedulerName": ["statictrain-scheduler"]}}, "NodeNames": ["n0"]},
    {"Pod": {"metadata": "x", "spec": {"schedulerName": "statictrain-scheduler"}}, "NodeNames": ["n0"]},
    {"Pod": {"metadata": {"labels": [1], "annotations": 7}, "spec": {}}, "NodeNames": ["n0"]},
    {"Pod": {"spec": {"schedulerName": "statictrain-scheduler", "containers": {"a": 1}}}, "NodeNames": ["n0"]},
    {"Pod": {"spec": {"schedulerName": "statictrain-scheduler", "containers": [None, 3, "x"]}}, "NodeNames": ["n0"]},
    {
        "Pod": {"spec": {"schedulerName": "statictrain-scheduler", "containers": [{"resources": [1]}]}},
        "NodeNames": ["n0"],
    },
    {
        "Pod": {
            "spec": {
                "schedulerName": "statictrain-scheduler",
                "containers": [{"resources": {"requests": {"nvidia.com/gpu": {"x": 1}}}}],
            }
        },
        "NodeNames": ["n0"],
    },
    {
        "Pod": {
            "spec": {
                "schedulerName": "statictrain-scheduler",
                "containers": [{"resources": {"requests": {"nvidia.com/gpu": "1e999999"}}}],
            }
        },
        "NodeNames": ["n0"],
    },
    {"Pod": {}, "Nodes": {"items": [{"metadata": [1]}, {"metadata": {"name": 5, "labels": "x"}}, 3]}},
    {"Pod": {}, "Nodes": {"items": [{"metadata": {"name": "a", "annotations": {"k": [1]}}, "status": 4}]}},
    {"Pod": {}, "NodeNames": [["nested"]]},
    {"Pod": [], "NodeNames": []},
    {"Pod": None},
    [[[[[]]]]],
    "just a string",
    12,
    None,
]


def test_malformed_nested_fields_get_valid_answers_never_500() -> None:
    """Every verb, every shape: HTTP 200/400 with a JSON answer the scheduler can read."""
    answers: list[tuple[str, int, Any]] = []
    pod = pod_obj()
    # every field of a real pod replaced by a wrong type, one at a time
    shapes: list[Any] = list(MALFORMED)
    for key in ("metadata", "spec"):
        for wrong in ([1], "x", 3, None, {"labels": [1]}):
            shapes.append({"Pod": {**pod, key: wrong}, "NodeNames": ["n0"]})
    for key in pod["spec"]:
        for wrong in ([1], "x", 3.5, {"a": [1]}):
            shapes.append({"Pod": {**pod, "spec": {**pod["spec"], key: wrong}}, "NodeNames": ["n0"]})

    async def body(session: aiohttp.ClientSession, base: str) -> None:
        for shape in shapes:
            for verb in ("filter", "prioritize"):
                status, out = await post(session, f"{base}/scheduler/{verb}", orjson.dumps(shape))
                answers.append((verb, status, out))

    serve(filled(), body)
    assert len(answers) == 2 * len(shapes)
    for verb, status, out in answers:
        if verb == "filter":
            assert status == 200 and set(out) == {"NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
        else:
            assert (status == 200 and isinstance(out, list)) or (status == 400 and out["Error"]), (status, out)
    errors = [out for verb, status, out in answers if verb == "filter" and out["Error"]]
    assert any("malformed" in e["Error"] or "ExtenderArgs" in e["Error"] for e in errors)


def test_a_body_over_the_limit_is_refused_with_an_error() -> None:
    seen: dict[str, Any] = {}
    big = orjson.dumps({"Pod": pod_obj(), "NodeNames": ["n" * 1000] * (MAX_BODY_BYTES // 1000)})
    assert len(big) > MAX_BODY_BYTES

    async def body(session: aiohttp.ClientSession, base: str) -> None:
        for verb in ("filter", "prioritize"):
            seen[verb] = await post(session, f"{base}/scheduler/{verb}", big)
        seen["after"] = await post(
            session, f"{base}/scheduler/filter", orjson.dumps({"Pod": pod_obj(), "NodeNames": ["n0"]})
        )

    serve(filled(), body)
    assert seen["filter"][0] == 413 and "NodeNames" in seen["filter"][1] and "bytes" in seen["filter"][1]["Error"]
    assert seen["prioritize"][0] == 413 and seen["prioritize"][1]["Error"]
    assert seen["after"] == (
        200,
        {"NodeNames": ["n0"], "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": ""},
    )


def test_a_body_that_never_arrives_is_answered_and_the_connection_closed() -> None:
    seen: dict[str, bytes] = {}

    async def main() -> None:
        app = build_app(filled(), NAMES, Weights(), CollectorRegistry(), body_timeout_s=0.2)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b'POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"Pod":')
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            seen["answer"] = head + await asyncio.wait_for(reader.readexactly(length), 30)
            writer.close()
        finally:
            await runner.cleanup()

    asyncio.run(main())
    head, _, payload = seen["answer"].partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408") and b"Connection: close" in head
    assert b"not received" in orjson.loads(payload)["Error"].encode()
