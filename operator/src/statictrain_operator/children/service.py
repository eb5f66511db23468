"""The headless Service that gives the workers stable DNS names for torchrun's rendezvous."""

from __future__ import annotations

from typing import Any

from statictrain import labels

from .owner import Owner, metadata, spec_value

__all__ = ["service"]


def service(owner: Owner) -> dict[str, Any]:
    """Headless Service: DNS names <job>-worker-<index>.<job>-worker for the workers."""
    port = spec_value(owner.spec, "distributed", "masterPort")
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(owner),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {labels.JOB: owner.name, labels.ROLE: "worker"},
            "ports": [{"name": "rendezvous", "port": port, "targetPort": port, "protocol": "TCP"}],
        },
    }
