"""The operator's heartbeat Lease: written on a timer, read back through a watch.

If the watch machinery stops delivering events, the observed renew time goes
stale and the liveness probe fails, so Kubernetes restarts the operator.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from kubernetes import client

from .clients import Clients

HEARTBEAT_LABEL = "statictrain.io/heartbeat"


def _micro(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def renew(c: Clients, namespace: str, name: str, holder: str, now: datetime) -> None:
    """Set the Lease's renewTime to `now`, creating the Lease if it does not exist."""
    body = {"spec": {"holderIdentity": holder, "renewTime": _micro(now)}}
    try:
        c.coordination.patch_namespaced_lease(name, namespace, body, _preload_content=False)
    except client.ApiException as e:
        if e.status != 404:
            raise
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace, "labels": {HEARTBEAT_LABEL: "true"}},
            "spec": {"holderIdentity": holder, "acquireTime": _micro(now), "renewTime": _micro(now)},
        }
        c.coordination.create_namespaced_lease(namespace, cast(Any, lease), _preload_content=False)
