"""core/v1 Event bodies about the operator's objects (pure: the parts create them through the Kube port)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from statictrain import labels

__all__ = ["about_job", "about_lease", "about_namespace"]


def _micro(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _event(
    namespace: str,
    involved: dict[str, Any],
    *,
    reason: str,
    message: str,
    event_type: str,
    component: str,
    now: datetime,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{involved['name']}.", "namespace": namespace},
        "involvedObject": involved,
        "reason": reason,
        "message": message[:1024],
        "type": event_type,
        "source": {"component": component},
        "firstTimestamp": _micro(now),
        "lastTimestamp": _micro(now),
        "count": 1,
    }


def about_job(
    job: Mapping[str, Any], *, reason: str, message: str, event_type: str, component: str, now: datetime
) -> dict[str, Any]:
    """An Event about a StaticTrainingJob (``job``: its metadata at least)."""
    meta = job["metadata"]
    involved = {
        "apiVersion": labels.API_VERSION,
        "kind": labels.KIND,
        "name": meta["name"],
        "namespace": meta["namespace"],
    }
    if meta.get("uid"):
        involved["uid"] = meta["uid"]
    return _event(
        meta["namespace"], involved, reason=reason, message=message, event_type=event_type, component=component, now=now
    )


def about_namespace(namespace: str, *, reason: str, message: str, component: str, now: datetime) -> dict[str, Any]:
    """A Warning Event about a Namespace (for findings no single job owns)."""
    involved = {"apiVersion": "v1", "kind": "Namespace", "name": namespace}
    return _event(
        namespace, involved, reason=reason, message=message, event_type="Warning", component=component, now=now
    )


def about_lease(
    namespace: str, name: str, *, reason: str, message: str, event_type: str, component: str, now: datetime
) -> dict[str, Any]:
    """An Event about a Lease (the operator's heartbeat Lease: findings about the operator's own surroundings)."""
    involved = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "name": name, "namespace": namespace}
    return _event(
        namespace, involved, reason=reason, message=message, event_type=event_type, component=component, now=now
    )
