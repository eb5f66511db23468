"""The containers' environment: the job's identity (both containers), torchrun's rendezvous, and the
trainer's compile, precision, distributed, stop and checkpoint settings (statictrain.envvars, which the
trainer reads)."""

from __future__ import annotations

from typing import Any

from statictrain import api, envvars, labels

from ..settings import Settings
from .owner import Owner, child_labels, spec_value, worker_name
from .volumes import compile_cache_shared_dir

__all__ = ["COMPLETION_INDEX_ANNOTATION", "SHUTDOWN_MARGIN_S", "identity_env", "torchrun_env", "trainer_env"]

COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
SHUTDOWN_MARGIN_S = 5
"""Seconds of the grace period kept back for statictrain-launch to exit after its workers."""


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def identity_env(owner: Owner) -> list[dict[str, Any]]:
    """Which job, commit, team, pod and node a container runs for (the trainer's and the sidecar's)."""
    lab = child_labels(owner)
    return [
        {"name": envvars.JOB_NAME, "value": owner.name},
        {"name": envvars.JOB_NAMESPACE, "value": owner.namespace},
        {"name": envvars.COMMIT, "value": lab[labels.COMMIT]},
        {"name": envvars.TEAM, "value": lab[labels.TEAM]},
        _field_env(envvars.POD_NAME, "metadata.name"),
        _field_env(envvars.POD_UID, "metadata.uid"),
        _field_env(envvars.NODE_NAME, "spec.nodeName"),
    ]


def torchrun_env(owner: Owner) -> list[dict[str, Any]]:
    """torchrun / torch.distributed environment (PET_* are torchrun's own flags).

    Static jobs use torchrun's static rendezvous at worker 0 with NODE_RANK from
    the completion index; elastic jobs use c10d rendezvous over min:max nodes
    (torchrun assigns ranks, so a scale change re-forms the group).
    """
    spec = owner.spec
    replicas = int(spec.get("replicas", api.DEFAULTS["replicas"]))
    port = str(spec_value(spec, "distributed", "masterPort"))
    svc = worker_name(owner.name)
    master = f"{svc}-0.{svc}"
    gpus = int(spec_value(spec, "resources", "gpusPerReplica"))
    env: list[dict[str, Any]] = [
        {"name": envvars.MASTER_ADDR, "value": master},
        {"name": envvars.MASTER_PORT, "value": port},
        {"name": envvars.WORLD_SIZE, "value": str(replicas)},
        _field_env(envvars.NODE_RANK, f"metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']"),
        {"name": "PET_NPROC_PER_NODE", "value": str(max(gpus, 1))},
    ]
    elastic = spec.get("elastic")
    if elastic:
        env += [
            {"name": "PET_NNODES", "value": f"{elastic['minReplicas']}:{elastic['maxReplicas']}"},
            {"name": "PET_RDZV_BACKEND", "value": "c10d"},
            {"name": "PET_RDZV_ENDPOINT", "value": f"{master}:{port}"},
            {"name": "PET_RDZV_ID", "value": owner.uid},
            {"name": "PET_MAX_RESTARTS", "value": str(elastic.get("maxRestarts", 3))},
        ]
    else:
        env += [
            {"name": "PET_NNODES", "value": str(replicas)},
            _field_env("PET_NODE_RANK", f"metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']"),
            {"name": "PET_MASTER_ADDR", "value": master},
            {"name": "PET_MASTER_PORT", "value": port},
        ]
    return env


def trainer_env(owner: Owner, settings: Settings) -> list[dict[str, Any]]:
    """Compile, precision, distributed, stop and checkpoint settings for the trainer."""
    spec = owner.spec
    grace = int(spec_value(spec, "runPolicy", "terminationGracePeriodSeconds"))
    env: list[dict[str, Any]] = [
        # torchrun's agent gives its workers this long after SIGTERM to checkpoint and exit
        {"name": "PET_SHUTDOWN_TIMEOUT", "value": str(max(grace - SHUTDOWN_MARGIN_S, 1))},
        {"name": envvars.ENTRYPOINT, "value": spec["entrypoint"]},
        {"name": envvars.COMPILE_MODE, "value": spec_value(spec, "compile", "mode")},
        {"name": envvars.COMPILE_FULLGRAPH, "value": _flag(spec_value(spec, "compile", "fullgraph"))},
        {"name": envvars.COMPILE_DYNAMIC, "value": _flag(spec_value(spec, "compile", "dynamic"))},
        {"name": envvars.COMPILE_CACHE, "value": _flag(spec_value(spec, "compile", "cache"))},
        {"name": envvars.COMPILE_CACHE_DIR, "value": settings.compile_cache_dir},
        {"name": envvars.AUTOTUNE, "value": str(spec_value(spec, "compile", "autotune")).lower()},
        {"name": envvars.AUTOTUNE_BUDGET_S, "value": str(spec_value(spec, "compile", "autotuneBudgetSeconds"))},
        {"name": envvars.PRECISION, "value": spec.get("precision", api.DEFAULTS["precision"])},
        {"name": envvars.BUCKET_CAP_MB, "value": str(spec_value(spec, "distributed", "bucketCapMB"))},
        {
            "name": envvars.GRAD_ACCUM_STEPS,
            "value": str(spec_value(spec, "distributed", "gradientAccumulationSteps")),
        },
        {"name": envvars.CHECKPOINT_DIR, "value": spec_value(spec, "checkpoint", "path")},
        {"name": envvars.CHECKPOINT_EVERY, "value": str(spec_value(spec, "checkpoint", "everySteps"))},
        {"name": envvars.CHECKPOINT_KEEP, "value": str(spec_value(spec, "checkpoint", "keep"))},
        {"name": envvars.STATS_DIR, "value": settings.stats_dir},
    ]
    training = spec.get("training") or {}
    if "maxSteps" in training:
        env.append({"name": envvars.MAX_STEPS, "value": str(training["maxSteps"])})
    if "maxTokens" in training:
        env.append({"name": envvars.MAX_TOKENS, "value": str(training["maxTokens"])})
    shared = compile_cache_shared_dir(settings)
    if shared is not None:
        env.append({"name": envvars.COMPILE_CACHE_SHARED_DIR, "value": shared})
    return env
