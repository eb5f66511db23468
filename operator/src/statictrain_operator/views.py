"""What the converger keeps of an observed object: the index entries and the children it just created.

A whole object stays alive for every job as long as it is kept, so only what planning and status read is:
the metadata they use, the spec (a worker Job's: the fields of JOB_SPEC_READ only; a Service's: none) and
the status.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["JOB_SPEC_READ", "SPEC_READ", "snapshot"]

JOB_SPEC_READ = ("suspend", "parallelism", "completions")
"""All of a worker Job's spec that planning and status read (reconcile.plan, status.compute): the pod template,
most of a Job's size, is not kept."""
SPEC_READ: dict[str, tuple[str, ...]] = {"Job": JOB_SPEC_READ, "Service": ()}
"""The spec fields kept per kind of child (the whole spec for other kinds: the pre-flight pod)."""


def snapshot(obj: Mapping[str, Any], spec_keys: tuple[str, ...] | None = None) -> dict[str, Any]:
    """What the converger reads of an object (a kopf Body or a plain dict); the whole spec unless ``spec_keys``
    names the keys to keep (pure)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    if spec_keys is not None:
        spec = {k: spec[k] for k in spec_keys if k in spec}
    return {
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "labels": dict(meta.get("labels") or {}),
            "annotations": dict(meta.get("annotations") or {}),
            "generation": meta.get("generation", 0),
            "deletionTimestamp": meta.get("deletionTimestamp"),
            "ownerReferences": list(meta.get("ownerReferences") or []),
        },
        "uid": meta.get("uid"),
        "spec": dict(spec),
        "status": dict(obj.get("status") or {}),
    }
