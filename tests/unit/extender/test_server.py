"""The real aiohttp server on a local port, with a state filled by hand (no API server)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson
from aiohttp import web
from prometheus_client import CollectorRegistry
from statictrain_extender.scoring import Weights
from statictrain_extender.server import build_app
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
    async with session.post(url, data=data, headers={"Content-Type": "application/json"}) as resp:
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
