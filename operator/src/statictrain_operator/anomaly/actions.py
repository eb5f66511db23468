"""Remediation actions as writes through the Kube port (the anomaly part's own domain -> patch translation).

Every action sets an absolute end state (replicas = n, suspend = true,
settings = last good, pods created before T deleted), so applying it again
after an operator restart changes nothing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from statictrain_operator import children
from statictrain_operator.anomaly.remediation import RECOMMEND_ONLY, ActionKind, Intent
from statictrain_operator.kube import port

__all__ = ["apply", "restart_workers"]


def _created(pod: dict[str, Any]) -> datetime | None:
    stamp = (pod.get("metadata") or {}).get("creationTimestamp")
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")) if stamp else None


async def restart_workers(kube: port.Kube, namespace: str, job: str, created_before: datetime) -> int:
    """Delete the job's worker pods created before ``created_before``; returns how many were deleted.

    Pods created after it (the replacements) are kept, so a repeated call is harmless.
    """
    deleted = 0
    for pod in await kube.list(port.PODS, namespace, label_selector=children.selector(job)):
        meta = pod.get("metadata") or {}
        created = _created(pod)
        if created is None or created >= created_before or meta.get("deletionTimestamp"):
            continue
        if await kube.delete(port.PODS, namespace, meta["name"], uid=meta.get("uid")):
            deleted += 1
    return deleted


async def apply(kube: port.Kube, namespace: str, name: str, intent: Intent) -> int | None:
    """Apply an intent's target; the StaticTrainingJob's generation after a spec change (None otherwise,
    or when the job is gone)."""
    target = dict(intent.target)
    if intent.action in RECOMMEND_ONLY:
        raise ValueError(f"{intent.action.value} is recommended only; the operator never applies it")
    if intent.action is ActionKind.RESTART_FROM_CHECKPOINT:
        await restart_workers(kube, namespace, name, datetime.fromisoformat(str(target["podsCreatedBefore"])))
        return None
    if intent.action is ActionKind.SCALE_DOWN:
        spec: dict[str, Any] = {"replicas": int(target["replicas"])}
    elif intent.action is ActionKind.SUSPEND:
        spec = {"suspend": True}
    else:
        spec = target
    out = await kube.merge_patch(port.STJ, namespace, name, {"spec": spec})
    return None if out is None else int(out["metadata"].get("generation", 0))
