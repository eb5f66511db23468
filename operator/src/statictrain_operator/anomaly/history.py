"""The remediation history of a job, kept in one annotation as JSON. Pure (de)serialisation.

An annotation, not status: it survives status rewrites by other handlers and
needs no CRD field. The history is bounded (``MAX_INTENTS``) and carries:

- ``intents``: actions, each written *before* it is applied (``done: false``)
  and marked done after; an operator that restarts in between finds the
  unfinished intent and completes it instead of deciding again;
- ``recommended``: ids of actions already announced in Recommend mode;
- ``lastGood`` / ``candidate``: the compile/precision/distributed settings last
  seen healthy, and the settings being watched before they count as good.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from statictrain import labels

from statictrain_operator.anomaly.remediation import ActionKind, History, Intent

__all__ = [
    "ANNOTATION",
    "MAX_INTENTS",
    "MAX_RECOMMENDED",
    "Record",
    "dumps",
    "loads",
    "track_good_settings",
    "with_intent",
    "with_recommended",
]

ANNOTATION = labels.REMEDIATION_HISTORY
"""Annotation on the StaticTrainingJob holding the JSON below (ask to move it to labels.py)."""

MAX_INTENTS = 10
MAX_RECOMMENDED = 20


@dataclass(frozen=True)
class Record:
    """Everything the annotation holds."""

    history: History
    """Intents and the last good settings (what the policy reads)."""
    recommended: tuple[str, ...] = ()
    """Intent ids already announced as recommendations."""
    candidate: Mapping[str, Any] | None = None
    """Settings seen healthy since ``candidate_since`` but not yet for long enough."""
    candidate_since: datetime | None = None
    """When the candidate settings were first seen healthy."""


def _ts(t: datetime) -> str:
    return t.isoformat()


def _intent_to_json(i: Intent) -> dict[str, Any]:
    return {
        "id": i.id,
        "action": i.action.value,
        "at": _ts(i.at),
        "target": dict(i.target),
        "reason": i.reason,
        "generationBefore": i.generation_before,
        "done": i.done,
        "generationAfter": i.generation_after,
    }


def _intent_from_json(d: Mapping[str, Any]) -> Intent:
    return Intent(
        id=str(d["id"]),
        action=ActionKind(d["action"]),
        at=datetime.fromisoformat(d["at"]),
        target=dict(d.get("target") or {}),
        reason=str(d.get("reason", "")),
        generation_before=int(d.get("generationBefore", 0)),
        done=bool(d.get("done", False)),
        generation_after=None if d.get("generationAfter") is None else int(d["generationAfter"]),
    )


def dumps(r: Record) -> str:
    """The annotation value."""
    doc: dict[str, Any] = {
        "intents": [_intent_to_json(i) for i in r.history.intents[-MAX_INTENTS:]],
        "recommended": list(r.recommended[-MAX_RECOMMENDED:]),
    }
    if r.history.last_good_settings is not None:
        doc["lastGood"] = dict(r.history.last_good_settings)
    if r.candidate is not None and r.candidate_since is not None:
        doc["candidate"] = dict(r.candidate)
        doc["candidateSince"] = _ts(r.candidate_since)
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def loads(text: str | None) -> Record:
    """Parse the annotation; a missing or unreadable value is an empty history (and says so)."""
    if not text:
        return Record(History())
    try:
        doc = json.loads(text)
        intents = tuple(_intent_from_json(d) for d in doc.get("intents", []))
        since = doc.get("candidateSince")
        return Record(
            History(intents, doc.get("lastGood")),
            tuple(doc.get("recommended", [])),
            doc.get("candidate"),
            datetime.fromisoformat(since) if since else None,
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(
            f"annotation {ANNOTATION} is not valid remediation history JSON ({exc}); "
            "delete the annotation to reset the history"
        ) from exc


def with_intent(r: Record, intent: Intent) -> Record:
    """Record with ``intent`` added, or replacing the intent of the same id."""
    kept = tuple(i for i in r.history.intents if i.id != intent.id)
    return replace(r, history=replace(r.history, intents=(*kept, intent)[-MAX_INTENTS:]))


def with_recommended(r: Record, intent_id: str) -> Record:
    """Record noting that ``intent_id`` was announced."""
    if intent_id in r.recommended:
        return r
    return replace(r, recommended=(*r.recommended, intent_id)[-MAX_RECOMMENDED:])


def track_good_settings(
    r: Record, current: Mapping[str, Any], healthy: bool, now: datetime, settle: timedelta
) -> Record:
    """Promote ``current`` settings to last-good once they were healthy for ``settle``.

    Unhealthy or changed settings restart the wait; last-good itself changes
    only by promotion, so a regression never overwrites it.
    """
    cur = dict(current)
    if not healthy:
        return replace(r, candidate=None, candidate_since=None)
    if r.history.last_good_settings == cur:
        return replace(r, candidate=None, candidate_since=None)
    if r.candidate != cur or r.candidate_since is None:
        return replace(r, candidate=cur, candidate_since=now)
    if now - r.candidate_since >= settle:
        return replace(r, history=replace(r.history, last_good_settings=cur), candidate=None, candidate_since=None)
    return r
