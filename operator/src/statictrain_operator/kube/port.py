"""The operator's one port to the Kubernetes API: resources, the ``Kube`` Protocol, its errors.

Every part of the operator reads and writes the cluster through ``Kube`` (the
real one is ``kube.http.HttpKube``, the in-memory one tests/fakes/kube.py's ``FakeKube``;
tests/integration/operator/test_kube_contract.py runs the same cases against
both). Bodies are plain dicts in the API server's camelCase. What an answer of
"not there" means is decided here once, for every resource:

- ``get``/``merge_patch``/``apply`` return None when the object does not exist (404);
- ``create`` returns None when one of that name exists already (409);
- ``delete`` returns False when the object is gone (404) or is another object
  of the same name (409 on the uid precondition);
- anything else raises ``ApiError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from statictrain import labels

__all__ = [
    "CONFIGMAPS",
    "EVENTS",
    "JOBS",
    "LEASES",
    "LOCALQUEUES",
    "NODES",
    "PODS",
    "PVCS",
    "SECRETS",
    "SERVICES",
    "STJ",
    "WORKLOADS",
    "ApiError",
    "Kube",
    "Resource",
    "by_kind",
]


@dataclass(frozen=True)
class Resource:
    """One API resource: where it lives and how it is named."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """URL path of the collection (no name) or of one object, across namespaces when namespace is None."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base


STJ = Resource(labels.GROUP, labels.VERSION, labels.PLURAL, labels.KIND)
"""The StaticTrainingJob (never called "job" below: that is the batch Job)."""
JOBS = Resource("batch", "v1", "jobs", "Job")
SERVICES = Resource("", "v1", "services", "Service")
PODS = Resource("", "v1", "pods", "Pod")
PVCS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
SECRETS = Resource("", "v1", "secrets", "Secret")
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
EVENTS = Resource("", "v1", "events", "Event")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
# Kueue's (read only; absent where Kueue is not installed: a list answers 404).
LOCALQUEUES = Resource("kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue")
WORKLOADS = Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload")

_BY_KIND = {r.kind: r for r in (STJ, JOBS, SERVICES, PODS, PVCS, SECRETS, CONFIGMAPS, EVENTS, NODES, LEASES)}


def by_kind(kind: str) -> Resource:
    """The resource of a body's ``kind``; KeyError names kinds the operator does not handle."""
    try:
        return _BY_KIND[kind]
    except KeyError:
        raise KeyError(f"the operator does not handle objects of kind {kind!r}") from None


class ApiError(RuntimeError):
    """The API server answered with an error the port does not turn into None/False."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status, self.reason, self.message = status, reason, message


class Kube(Protocol):
    """The calls the operator makes, async. ``namespace`` is None for cluster-scoped objects (and for
    listing across all namespaces)."""

    async def get(self, res: Resource, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        ...

    async def list(
        self, res: Resource, namespace: str | None = None, *, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        """Every object (of one namespace, or of all), optionally filtered by a label selector."""
        ...

    async def create(self, res: Resource, body: Mapping[str, Any]) -> dict[str, Any] | None:
        """The created object, or None when one of that name exists already."""
        ...

    async def merge_patch(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        patch: Mapping[str, Any],
        *,
        subresource: str | None = None,
    ) -> dict[str, Any] | None:
        """JSON merge patch (RFC 7386: None deletes a key); the object after it, or None when it is gone."""
        ...

    async def apply(
        self, res: Resource, body: Mapping[str, Any], *, manager: str, subresource: str | None = None
    ) -> dict[str, Any] | None:
        """Server-side apply of ``body`` (apiVersion, kind, metadata.name/namespace and the fields
        ``manager`` owns) with force; fields ``manager`` applied before and leaves out now are removed.
        The object after it, or None when it is gone."""
        ...

    async def delete(self, res: Resource, namespace: str | None, name: str, *, uid: str | None = None) -> bool:
        """Delete (background propagation), only if its uid is ``uid`` when given; False when gone or replaced."""
        ...
