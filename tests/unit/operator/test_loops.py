"""Which finished jobs the TTL sweeper deletes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from statictrain_operator import loops, runtime
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
    rt = runtime.Runtime(settings=Settings(), clients=cast(Any, None), holder="t", clock=lambda: NOW)
    assert sorted(loops.expired(index, rt)) == [("ns", "now", "u5"), ("ns", "old", "u1")]
