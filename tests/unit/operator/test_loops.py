"""Which finished jobs the TTL sweeper deletes."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any, cast

from statictrain_operator import loops, runtime
from statictrain_operator.anomaly import handlers as anomaly_handlers
from statictrain_operator.settings import Settings

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def view(uid: str, ttl: int | None, phase: str, done: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"runPolicy": {} if ttl is None else {"ttlSecondsAfterFinished": ttl}}
    st: dict[str, Any] = {"phase": phase}
    if done:
        st["completionTime"] = done
    return {"uid": uid, "spec": spec, "status": st, "generation": 1}


def test_only_finished_jobs_past_their_ttl_are_expired() -> None:
    index = {
        ("ns", "old"): [view("u1", 60, "Succeeded", "2026-01-02T03:02:05Z")],
        ("ns", "young"): [view("u2", 600, "Failed", "2026-01-02T03:02:05Z")],
        ("ns", "running"): [view("u3", 0, "Running", None)],
        ("ns", "kept"): [view("u4", None, "Succeeded", "2026-01-01T00:00:00Z")],
        ("ns", "now"): [view("u5", 0, "Failed", "2026-01-02T03:04:05Z")],
    }
    rt = runtime.Runtime(settings=Settings(), kube=cast(Any, None), holder="t", clock=lambda: NOW)
    assert sorted(loops.expired(index, rt)) == [("ns", "now", "u5"), ("ns", "old", "u1")]


def test_periodic_runs_until_stopped_and_cleanup_waits_for_it() -> None:
    runs: list[int] = []

    async def scenario() -> None:
        stop = asyncio.Event()
        memo: dict[str, Any] = {}

        async def work() -> None:
            runs.append(len(runs))
            if len(runs) == 3:
                stop.set()

        loops.start_periodic(memo, "part", loops.periodic(work, 0.001, stop), stop)
        await asyncio.wait_for(memo["part_task"], 5)
        await loops.stop_periodic(memo, "part")  # already stopped: returns at once

    asyncio.run(scenario())
    assert runs == [0, 1, 2]


def test_running_jobs_skip_finished_ones() -> None:
    index = {
        ("ns", "a"): [{"metadata": {"name": "a"}, "spec": {}, "status": {"phase": "Running"}}],
        ("ns", "b"): [{"metadata": {"name": "b"}, "spec": {}, "status": {"phase": "Succeeded"}}],
    }
    assert [j["metadata"]["name"] for j in anomaly_handlers.running_jobs(index)] == ["a"]
