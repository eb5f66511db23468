"""Refresh failure handling: a closed port stands in for a Prometheus that is down."""

from __future__ import annotations

import asyncio

import aiohttp
from statictrain_extender.state import ClusterState
from statictrain_extender.stepstats import refresh_once


def test_prometheus_down_keeps_the_last_table_and_flags_it() -> None:
    state = ClusterState()
    state.set_step_seconds({("t", "j"): {"A100": 1.0, "H100": 0.5}})
    before = state.throughput_for(("t", "j"))

    async def refresh() -> bool:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            return await refresh_once(session, "http://127.0.0.1:9", 30, state)

    assert asyncio.run(refresh()) is False
    assert state.prometheus_ok is False
    assert state.throughput_for(("t", "j")) is before
