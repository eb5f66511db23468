"""API calls on a StaticTrainingJob's children: the worker Job and the headless Service."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client

from .clients import Clients, raw


def _read(call: Any, name: str, namespace: str) -> dict[str, Any] | None:
    try:
        return raw(call(name, namespace, _preload_content=False))
    except client.ApiException as e:
        if e.status == 404:
            return None
        raise


def read_job(c: Clients, namespace: str, name: str) -> dict[str, Any] | None:
    """The Job, or None when it does not exist."""
    return _read(c.batch.read_namespaced_job, name, namespace)


def read_service(c: Clients, namespace: str, name: str) -> dict[str, Any] | None:
    """The Service, or None when it does not exist."""
    return _read(c.core.read_namespaced_service, name, namespace)


def create(c: Clients, body: Mapping[str, Any]) -> bool:
    """Create a Job, Service or PersistentVolumeClaim; False when one of that name exists (409)."""
    namespace = body["metadata"]["namespace"]
    calls: dict[str, Callable[..., Any]] = {
        "Job": c.batch.create_namespaced_job,
        "Service": c.core.create_namespaced_service,
        "PersistentVolumeClaim": c.core.create_namespaced_persistent_volume_claim,
    }
    call = calls[body["kind"]]
    try:
        call(namespace, dict(body), _preload_content=False)
    except client.ApiException as e:
        if e.status == 409:
            return False
        raise
    return True


def patch_job(c: Clients, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
    """Merge-patch the worker Job (parallelism, completions, suspend)."""
    c.batch.patch_namespaced_job(name, namespace, dict(patch), _preload_content=False)


def delete_job(c: Clients, namespace: str, name: str) -> None:
    """Delete the worker Job and its pods (background propagation); absent is fine."""
    try:
        c.batch.delete_namespaced_job(
            name, namespace, propagation_policy="Background", _preload_content=False
        )
    except client.ApiException as e:
        if e.status != 404:
            raise
