"""The pre-flight pod's result as its container's termination message: compact JSON, both ends.

The trainer's ``statictrain-preflight --termination-log PATH`` writes ``encode(result)``;
the operator reads the message the kubelet reports in the pod's container status with
``decode``. Kubernetes keeps at most 4096 bytes of it, so ``encode`` drops graph breaks
and shortens the message until the JSON fits; ``decode`` accepts only the documented
fields, with their types, clipped to the CRD's limits (status.preflight), and says what
is wrong with anything else (missing, truncated, not JSON, wrong types).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from .api import GraphBreak, PreflightResult

__all__ = ["MAX_BREAKS", "MAX_BYTES", "MAX_MESSAGE", "MAX_TEXT", "decode", "encode"]

MAX_BYTES: Final = 4096
"""Kubernetes' limit of one container's termination message."""
MAX_BREAKS: Final = 8
MAX_TEXT: Final = 256
"""Characters of a graph break's location or reason."""
MAX_MESSAGE: Final = 1024
_COUNTS: Final = ("graphBreaks", "recompiles", "peakMemoryBytes")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _dumps(obj: Mapping[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"))


def encode(result: PreflightResult) -> str:
    """``result`` as compact JSON of at most MAX_BYTES bytes (ASCII): the last breaks go first, then message text."""
    out: dict[str, Any] = {**result, "message": _clip(result.get("message", ""), MAX_MESSAGE)}
    out["breaks"] = [
        {"location": _clip(b.get("location", ""), MAX_TEXT), "reason": _clip(b.get("reason", ""), MAX_TEXT)}
        for b in result.get("breaks", [])[:MAX_BREAKS]
    ]
    text = _dumps(out)
    while len(text) > MAX_BYTES:
        if out["breaks"]:
            out["breaks"].pop()
        else:
            out["message"] = _clip(out["message"], max(len(out["message"]) // 2, 3))
        text = _dumps(out)
    return text


def _count(doc: Mapping[str, Any], key: str) -> int | None:
    value = doc.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{key} is {value!r}, not a non-negative integer")
    return value


def _break(item: object) -> GraphBreak:
    if not isinstance(item, dict) or not all(isinstance(item.get(k, ""), str) for k in ("location", "reason")):
        raise ValueError(f"a graph break is {item!r}, not an object with string location and reason")
    return {"location": _clip(item.get("location", ""), MAX_TEXT), "reason": _clip(item.get("reason", ""), MAX_TEXT)}


def decode(text: str | None) -> PreflightResult:
    """The result in a termination message; ValueError saying what is wrong (never anything else)."""
    if not text or not text.strip():
        raise ValueError("the pre-flight container left no termination message")
    size = len(text.encode("utf-8", "replace"))
    if size > MAX_BYTES:
        raise ValueError(f"the termination message is {size} bytes, more than the {MAX_BYTES} a result may have")
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise ValueError(f"the termination message is not JSON ({e}): {_clip(text, 80)!r}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"the termination message is JSON {type(doc).__name__}, not an object")
    passed, message, breaks = doc.get("passed"), doc.get("message", ""), doc.get("breaks", [])
    if not isinstance(passed, bool):
        raise ValueError(f"passed is {passed!r}, not true or false")
    if not isinstance(message, str):
        raise ValueError(f"message is {message!r}, not a string")
    if not isinstance(breaks, list):
        raise ValueError(f"breaks is {breaks!r}, not a list")
    out: PreflightResult = {
        "passed": passed,
        "message": _clip(message, MAX_MESSAGE),
        "breaks": [_break(b) for b in breaks[:MAX_BREAKS]],
    }
    for key in _COUNTS:
        value = _count(doc, key)
        if value is not None:
            out[key] = value  # type: ignore[literal-required]
    return out
