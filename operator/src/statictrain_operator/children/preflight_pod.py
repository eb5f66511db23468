"""The CPU-only pre-flight pod that runs statictrain-preflight on the job's spec before any worker exists."""

from __future__ import annotations

import json
from typing import Any

from statictrain import labels

from ..settings import Settings
from .owner import Owner, metadata, spec_value
from .placement import operator_placement
from .pod import CONTAINER_SECURITY, POD_SECURITY

__all__ = [
    "PREFLIGHT",
    "PREFLIGHT_START_MARGIN_S",
    "PREFLIGHT_SUFFIX",
    "TERMINATION_LOG",
    "preflight_name",
    "preflight_pod",
]

PREFLIGHT = "preflight"
"""Container name and role label of the pre-flight pod."""
PREFLIGHT_SUFFIX = "-preflight"
PREFLIGHT_START_MARGIN_S = 120
"""Seconds the pre-flight pod gets beyond spec.preflight.timeoutSeconds (image, imports) before it is stopped."""
TERMINATION_LOG = "/dev/termination-log"


def preflight_name(job_name: str) -> str:
    return job_name + PREFLIGHT_SUFFIX


def preflight_pod(owner: Owner, settings: Settings) -> dict[str, Any]:
    """The CPU-only pod that runs statictrain-preflight on the job's spec before any worker exists.

    The job's image and CPU/memory requests, no GPU; the workers' security settings (non-root, no
    ServiceAccount token, no privilege) and the operator's placement (scheduler, tolerations, node
    labels), not the job's GPU placement. Its verdict travels only in the container's termination
    message (statictrain.preflight_message) and its exit status.
    """
    spec = owner.spec
    timeout = int(spec_value(spec, "preflight", "timeoutSeconds"))
    res = spec.get("resources") or {}
    resources: dict[str, Any] = {"requests": {k: res[k] for k in ("cpu", "memory") if k in res}}
    if "memory" in res:
        resources["limits"] = {"memory": res["memory"]}
    container = {
        "name": PREFLIGHT,
        "image": spec["image"],
        "imagePullPolicy": settings.image_pull_policy,
        "command": [
            "statictrain-preflight",
            "--spec",
            json.dumps(spec, sort_keys=True),
            "--timeout",
            str(timeout),
            "--termination-log",
            TERMINATION_LOG,
        ],
        "resources": resources,
        "securityContext": CONTAINER_SECURITY,
        "terminationMessagePath": TERMINATION_LOG,
        "terminationMessagePolicy": "File",
    }
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": timeout + PREFLIGHT_START_MARGIN_S,
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "securityContext": POD_SECURITY,
        "containers": [container],
        **operator_placement(settings),
    }
    meta = metadata(owner, {labels.ROLE: PREFLIGHT})
    meta["name"] = preflight_name(owner.name)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}
