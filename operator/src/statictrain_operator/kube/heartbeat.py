"""The operator's heartbeat Lease: renewed on a timer, read back through a watch.

If the watch machinery stops delivering events, the observed renew time goes
stale and the liveness probe fails, so Kubernetes restarts the operator.
"""

from __future__ import annotations

from datetime import datetime

from . import port

__all__ = ["HEARTBEAT_LABEL", "renew"]

HEARTBEAT_LABEL = "statictrain.io/heartbeat"


def _micro(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def renew(kube: port.Kube, namespace: str, name: str, holder: str, now: datetime) -> None:
    """Set the Lease's renewTime to ``now``, creating the Lease if it does not exist."""
    body = {"spec": {"holderIdentity": holder, "renewTime": _micro(now)}}
    if await kube.merge_patch(port.LEASES, namespace, name, body) is not None:
        return
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace, "labels": {HEARTBEAT_LABEL: "true"}},
        "spec": {"holderIdentity": holder, "acquireTime": _micro(now), "renewTime": _micro(now)},
    }
    await kube.create(port.LEASES, lease)
