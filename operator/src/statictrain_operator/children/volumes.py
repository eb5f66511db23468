"""The worker pod's volumes and mounts, and the children behind them: the stats folder, the compile cache
(one claim or a folder per job with a read-only shared folder), the checkpoint claim, the profiling token's
Secret."""

from __future__ import annotations

import secrets
from typing import Any

from statictrain import api

from ..settings import Settings
from .owner import Owner, metadata, spec_value

__all__ = [
    "CACHE_VOLUME",
    "CHECKPOINT_CLAIM_SUFFIX",
    "CHECKPOINT_VOLUME",
    "COMPILE_CACHE_SHARED_FOLDER",
    "PROFILE_TOKEN_DIR",
    "PROFILE_TOKEN_KEY",
    "PROFILE_TOKEN_SUFFIX",
    "PROFILE_TOKEN_VOLUME",
    "STATS_VOLUME",
    "checkpoint_claim",
    "checkpoint_claim_name",
    "compile_cache_folder",
    "compile_cache_shared_dir",
    "profile_token_secret",
    "profile_token_secret_name",
    "sidecar_mounts",
    "volumes",
]

STATS_VOLUME = "stats"
CACHE_VOLUME = "compile-cache"
CHECKPOINT_VOLUME = "checkpoint"
CHECKPOINT_CLAIM_SUFFIX = "-checkpoint"
PROFILE_TOKEN_SUFFIX = "-profile-token"
PROFILE_TOKEN_VOLUME = "profile-token"
PROFILE_TOKEN_DIR = "/var/run/statictrain-profile"
PROFILE_TOKEN_KEY = "token"
COMPILE_CACHE_SHARED_FOLDER = "shared"
"""Folder of the compile-cache claim every job reads, read-only, when the cache is per job."""


def compile_cache_folder(job_name: str) -> str:
    """The job's own folder of the compile-cache claim when it is per job: under ``jobs/``, apart from the
    read-only ``shared/`` folder whatever the job's name."""
    return f"jobs/{job_name}"


def compile_cache_shared_dir(settings: Settings) -> str | None:
    """Mount path of the claim's read-only ``shared/`` folder in the trainer; None unless the cache is per job."""
    if not (settings.compile_cache_claim and settings.compile_cache_per_job):
        return None
    return settings.compile_cache_dir.rstrip("/") + "-shared"


def checkpoint_claim_name(job_name: str) -> str:
    """Name of the per-job checkpoint claim the operator makes."""
    return job_name + CHECKPOINT_CLAIM_SUFFIX


def checkpoint_claim(owner: Owner, settings: Settings) -> dict[str, Any] | None:
    """The per-job checkpoint PersistentVolumeClaim, or None when the spec names its own
    (``checkpoint.persistentVolumeClaim``) or the operator is set to make none.

    Every rank reads the checkpoint rank 0 wrote, so a job whose pods may run on
    several nodes asks for ReadWriteMany; a single-pod job for ReadWriteOnce. The
    claim belongs to the job (deleted with it) and is fixed once made.
    """
    spec = owner.spec
    if (spec.get("checkpoint") or {}).get("persistentVolumeClaim") or not settings.checkpoint_volume_size:
        return None
    several = int(spec.get("replicas", api.DEFAULTS["replicas"])) > 1 or bool(spec.get("elastic"))
    claim_spec: dict[str, Any] = {
        "accessModes": ["ReadWriteMany" if several else "ReadWriteOnce"],
        "resources": {"requests": {"storage": settings.checkpoint_volume_size}},
    }
    if settings.checkpoint_storage_class:
        claim_spec["storageClassName"] = settings.checkpoint_storage_class
    meta = metadata(owner)
    meta["name"] = checkpoint_claim_name(owner.name)
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": claim_spec}


def profile_token_secret_name(job_name: str) -> str:
    """Name of the per-job Secret holding the sidecar's profiling token."""
    return job_name + PROFILE_TOKEN_SUFFIX


def profile_token_secret(owner: Owner, settings: Settings) -> dict[str, Any] | None:
    """The per-job Secret with a new random token for the sidecar's /profile endpoints, or None when off.

    Made with the worker Job (a 409 keeps the one that exists), owned by the job (deleted with it),
    immutable; mounted only into the sidecar. Whoever may read Secrets in the job's namespace may profile.
    """
    if not settings.profile_token:
        return None
    meta = metadata(owner)
    meta["name"] = profile_token_secret_name(owner.name)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta,
        "type": "Opaque",
        "immutable": True,
        "stringData": {PROFILE_TOKEN_KEY: secrets.token_urlsafe(32)},
    }


def volumes(owner: Owner, settings: Settings) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(pod volumes, trainer mounts)."""
    spec = owner.spec
    cache: dict[str, Any] = (
        {"persistentVolumeClaim": {"claimName": settings.compile_cache_claim}}
        if settings.compile_cache_claim
        else {"emptyDir": {}}
    )
    ckpt_claim = (spec.get("checkpoint") or {}).get("persistentVolumeClaim") or (
        checkpoint_claim_name(owner.name) if settings.checkpoint_volume_size else None
    )
    ckpt: dict[str, Any] = {"persistentVolumeClaim": {"claimName": ckpt_claim}} if ckpt_claim else {"emptyDir": {}}
    pod_volumes = [
        {"name": STATS_VOLUME, "emptyDir": {}},
        {"name": CACHE_VOLUME, **cache},
        {"name": CHECKPOINT_VOLUME, **ckpt},
    ]
    if settings.profile_token:  # read by the sidecar only (group fsGroup; no mount in the trainer)
        pod_volumes.append(
            {
                "name": PROFILE_TOKEN_VOLUME,
                "secret": {"secretName": profile_token_secret_name(owner.name), "defaultMode": 0o440},
            }
        )
    mounts = [
        {"name": STATS_VOLUME, "mountPath": settings.stats_dir},
        {"name": CACHE_VOLUME, "mountPath": settings.compile_cache_dir},
        {"name": CHECKPOINT_VOLUME, "mountPath": spec_value(spec, "checkpoint", "path")},
    ]
    shared = compile_cache_shared_dir(settings)
    if shared is not None:  # per job: its own folder writable, shared/ read-only
        next(m for m in mounts if m["name"] == CACHE_VOLUME)["subPath"] = compile_cache_folder(owner.name)
        mounts.append(
            {"name": CACHE_VOLUME, "mountPath": shared, "subPath": COMPILE_CACHE_SHARED_FOLDER, "readOnly": True}
        )
    return pod_volumes, mounts


def sidecar_mounts(settings: Settings) -> list[dict[str, Any]]:
    """The sidecar's mounts: the stats folder, and the profiling token when it is on."""
    mounts: list[dict[str, Any]] = [{"name": STATS_VOLUME, "mountPath": settings.stats_dir, "readOnly": False}]
    if settings.profile_token:
        mounts.append({"name": PROFILE_TOKEN_VOLUME, "mountPath": PROFILE_TOKEN_DIR, "readOnly": True})
    return mounts
