"""Fluent builders of StaticTrainingJob bodies and observed worker Jobs for unit tests."""

from __future__ import annotations

import copy
from typing import Any

from statictrain import api, labels
from statictrain_operator import children


def spec(**overrides: Any) -> api.Spec:
    base: dict[str, Any] = {
        "image": "registry.example.com/nlp/train:3f2c1ab",
        "entrypoint": "mypkg.train:build",
        "replicas": 2,
    }
    base.update(overrides)
    return base  # type: ignore[return-value]


def owner(
    s: api.Spec | None = None, *, name: str = "gpt2", commit: str | None = "3f2c1ab", team: str | None = "nlp"
) -> children.Owner:
    lab = {}
    if commit is not None:
        lab[labels.COMMIT] = commit
    if team is not None:
        lab[labels.TEAM] = team
    return children.Owner(name, "team-nlp", "uid-1", lab, s if s is not None else spec())


def observed(
    obj: dict[str, Any],
    *,
    status: dict[str, Any] | None = None,
    uid: str | None = None,
    deleting: bool = False,
    **spec_overrides: Any,
) -> dict[str, Any]:
    """`obj` as the API server would hold it, with optional status and changes."""
    out = copy.deepcopy(obj)
    out["spec"].update(spec_overrides)
    if status is not None:
        out["status"] = status
    if uid is not None:
        out["metadata"]["ownerReferences"][0]["uid"] = uid
    if deleting:
        out["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return out


def job_status(
    *, active: int = 0, ready: int = 0, failed: int = 0, conditions: list[tuple[str, str]] | None = None
) -> dict[str, Any]:
    return {
        "active": active,
        "ready": ready,
        "failed": failed,
        "conditions": [{"type": t, "status": "True", "reason": r, "message": f"{t} {r}"} for t, r in conditions or []],
    }
