"""API calls on StaticTrainingJobs themselves: status patches and deletion."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from kubernetes import client
from statictrain import labels

from .clients import Clients


def patch_status(c: Clients, namespace: str, name: str, status: Mapping[str, Any]) -> bool:
    """Merge-patch status fields (progress, phase, ...); False when the job no longer exists."""
    try:
        c.custom.patch_namespaced_custom_object_status(
            labels.GROUP,
            labels.VERSION,
            namespace,
            labels.PLURAL,
            name,
            {"status": dict(status)},
            _preload_content=False,
        )
    except client.ApiException as e:
        if e.status == 404:
            return False
        raise
    return True


def delete(c: Clients, namespace: str, name: str, uid: str) -> None:
    """Delete a job (its children go with it through owner references); the uid guards against
    deleting a newer job of the same name."""
    try:
        c.custom.delete_namespaced_custom_object(
            labels.GROUP,
            labels.VERSION,
            namespace,
            labels.PLURAL,
            name,
            body=cast(Any, {"preconditions": {"uid": uid}, "propagationPolicy": "Background"}),
            _preload_content=False,
        )
    except client.ApiException as e:
        if e.status not in (404, 409):
            raise
