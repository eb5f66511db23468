"""Desired child objects of a StaticTrainingJob: pure functions, no I/O.

A job runs as an Indexed Job (one pod per torchrun node, the completion index
is the node rank) behind a headless Service that gives worker 0 a stable DNS
name for rendezvous, with a per-job checkpoint claim when the spec names none
(so a replaced pod resumes from the same checkpoints as its peers). All carry
the job/namespace/commit/team labels and an owner reference to the
StaticTrainingJob, so Kubernetes' garbage collector removes them with it.

A worker pod: the profiling sidecar is a native sidecar (an init container with
restartPolicy Always: it starts first and is stopped by the kubelet once the
trainer exits, so the pod completes); the trainer runs ``statictrain-launch``
(torchrun's agent, exiting with the failing worker's own code, which the Job's
podFailurePolicy reads); no ServiceAccount token is mounted.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from statictrain import api, envvars, labels
from statictrain.exitcodes import ExitCode

from .settings import Settings

__all__ = [
    "CACHE_VOLUME",
    "CHECKPOINT_CLAIM_SUFFIX",
    "CHECKPOINT_VOLUME",
    "COMPLETION_INDEX_ANNOTATION",
    "EXIT_INFRA_ERROR",
    "EXIT_PREEMPTED",
    "EXIT_USER_ERROR",
    "LAUNCH_COMMAND",
    "PREFLIGHT",
    "PREFLIGHT_START_MARGIN_S",
    "PREFLIGHT_SUFFIX",
    "PROFILE_TOKEN_DIR",
    "PROFILE_TOKEN_SUFFIX",
    "PROFILE_TOKEN_VOLUME",
    "SHUTDOWN_MARGIN_S",
    "SIDECAR",
    "STATS_VOLUME",
    "TRAINER",
    "UNKNOWN",
    "WORKER_SUFFIX",
    "Owner",
    "checkpoint_claim",
    "checkpoint_claim_name",
    "child_labels",
    "commit_and_team",
    "owner_reference",
    "pod_failure_policy",
    "pod_template",
    "preflight_name",
    "preflight_pod",
    "profile_token_secret",
    "profile_token_secret_name",
    "selector",
    "service",
    "template_hash",
    "torchrun_env",
    "trainer_env",
    "worker_job",
    "worker_name",
]

WORKER_SUFFIX = "-worker"
TRAINER = "trainer"
SIDECAR = "sidecar"
STATS_VOLUME = "stats"
CACHE_VOLUME = "compile-cache"
CHECKPOINT_VOLUME = "checkpoint"
CHECKPOINT_CLAIM_SUFFIX = "-checkpoint"
PROFILE_TOKEN_SUFFIX = "-profile-token"
PROFILE_TOKEN_VOLUME = "profile-token"
PROFILE_TOKEN_DIR = "/var/run/statictrain-profile"
PROFILE_TOKEN_KEY = "token"
LAUNCH_COMMAND = ("statictrain-launch", "--module", "statictrain_trainer.main")
"""The trainer container's command: torchrun's agent with the workers' exit codes (statictrain_trainer.launch)."""
PREFLIGHT = "preflight"
"""Container name and role label of the pre-flight pod."""
PREFLIGHT_SUFFIX = "-preflight"
PREFLIGHT_START_MARGIN_S = 120
"""Seconds the pre-flight pod gets beyond spec.preflight.timeoutSeconds (image, imports) before it is stopped."""
TERMINATION_LOG = "/dev/termination-log"
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
UNKNOWN = "unknown"
# Trainer exit codes (statictrain.exitcodes, shared with the trainer).
EXIT_USER_ERROR = int(ExitCode.USER_ERROR)
"""Retrying cannot help (bad entrypoint or settings): fail the job at once."""
EXIT_PREEMPTED = int(ExitCode.PREEMPTED)
"""SIGTERM honoured after a checkpoint (spot notice, drain): retry without counting it."""
EXIT_INFRA_ERROR = int(ExitCode.INFRA_ERROR)
"""The machine failed (CUDA, NCCL, I/O): retry without counting it against backoffLimit."""


@dataclass(frozen=True)
class Owner:
    """The StaticTrainingJob the children belong to."""

    name: str
    namespace: str
    uid: str
    labels: Mapping[str, str]
    spec: api.Spec


def worker_name(job_name: str) -> str:
    """Name of both the worker Job and the headless Service."""
    return job_name + WORKER_SUFFIX


def commit_and_team(job_labels: Mapping[str, str]) -> tuple[str, str]:
    """The commit and team of a job as its children and its cost metrics carry them: the job's own labels,
    'unknown' when absent (never taken from a pod, so they do not change when its pods come and go)."""
    return job_labels.get(labels.COMMIT, UNKNOWN), job_labels.get(labels.TEAM, UNKNOWN)


def child_labels(owner: Owner) -> dict[str, str]:
    """Labels every child carries (commit and team copied from the job, see ``commit_and_team``; the
    workload class too when the job has one)."""
    commit, team = commit_and_team(owner.labels)
    out = {
        labels.JOB: owner.name,
        labels.NAMESPACE: owner.namespace,
        labels.COMMIT: commit,
        labels.TEAM: team,
        labels.MANAGED_BY: labels.MANAGED_BY_VALUE,
    }
    workload_class = owner.labels.get(labels.WORKLOAD_CLASS)
    if workload_class:  # the extender learns this job's speed with its class's (extender/README.md)
        out[labels.WORKLOAD_CLASS] = workload_class
    return out


def selector(owner_name: str) -> str:
    """Label selector of the worker pods (status.selector, used by /scale)."""
    return f"{labels.JOB}={owner_name},{labels.ROLE}=worker"


def owner_reference(owner: Owner) -> dict[str, Any]:
    return {
        "apiVersion": labels.API_VERSION,
        "kind": labels.KIND,
        "name": owner.name,
        "uid": owner.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _metadata(owner: Owner, extra_labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {
        "name": worker_name(owner.name),
        "namespace": owner.namespace,
        "labels": {**child_labels(owner), **(extra_labels or {})},
        "ownerReferences": [owner_reference(owner)],
    }


def service(owner: Owner) -> dict[str, Any]:
    """Headless Service: DNS names <job>-worker-<index>.<job>-worker for the workers."""
    port = _get(owner.spec, "distributed", "masterPort")
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(owner),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {labels.JOB: owner.name, labels.ROLE: "worker"},
            "ports": [{"name": "rendezvous", "port": port, "targetPort": port, "protocol": "TCP"}],
        },
    }


def _get(spec: Mapping[str, Any], section: str, key: str) -> Any:
    """spec.section.key, falling back to the CRD default."""
    value = (spec.get(section) or {}).get(key)
    if value is None:
        defaults: Mapping[str, Any] = api.DEFAULTS
        value = (defaults.get(section) or {}).get(key)
    return value


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def _identity_env(owner: Owner) -> list[dict[str, Any]]:
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
    port = str(_get(spec, "distributed", "masterPort"))
    svc = worker_name(owner.name)
    master = f"{svc}-0.{svc}"
    gpus = int(_get(spec, "resources", "gpusPerReplica"))
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


SHUTDOWN_MARGIN_S = 5
"""Seconds of the grace period kept back for statictrain-launch to exit after its workers."""


def trainer_env(owner: Owner, settings: Settings) -> list[dict[str, Any]]:
    """Compile, precision, distributed, stop and checkpoint settings for the trainer."""
    spec = owner.spec
    grace = int(_get(spec, "runPolicy", "terminationGracePeriodSeconds"))
    env: list[dict[str, Any]] = [
        # torchrun's agent gives its workers this long after SIGTERM to checkpoint and exit
        {"name": "PET_SHUTDOWN_TIMEOUT", "value": str(max(grace - SHUTDOWN_MARGIN_S, 1))},
        {"name": envvars.ENTRYPOINT, "value": spec["entrypoint"]},
        {"name": envvars.COMPILE_MODE, "value": _get(spec, "compile", "mode")},
        {"name": envvars.COMPILE_FULLGRAPH, "value": _flag(_get(spec, "compile", "fullgraph"))},
        {"name": envvars.COMPILE_DYNAMIC, "value": _flag(_get(spec, "compile", "dynamic"))},
        {"name": envvars.COMPILE_CACHE, "value": _flag(_get(spec, "compile", "cache"))},
        {"name": envvars.COMPILE_CACHE_DIR, "value": settings.compile_cache_dir},
        {"name": envvars.AUTOTUNE, "value": str(_get(spec, "compile", "autotune")).lower()},
        {"name": envvars.AUTOTUNE_BUDGET_S, "value": str(_get(spec, "compile", "autotuneBudgetSeconds"))},
        {"name": envvars.PRECISION, "value": spec.get("precision", api.DEFAULTS["precision"])},
        {"name": envvars.BUCKET_CAP_MB, "value": str(_get(spec, "distributed", "bucketCapMB"))},
        {
            "name": envvars.GRAD_ACCUM_STEPS,
            "value": str(_get(spec, "distributed", "gradientAccumulationSteps")),
        },
        {"name": envvars.CHECKPOINT_DIR, "value": _get(spec, "checkpoint", "path")},
        {"name": envvars.CHECKPOINT_EVERY, "value": str(_get(spec, "checkpoint", "everySteps"))},
        {"name": envvars.CHECKPOINT_KEEP, "value": str(_get(spec, "checkpoint", "keep"))},
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


def _resources(spec: api.Spec) -> dict[str, Any]:
    res = spec.get("resources") or {}
    gpus = int(res.get("gpusPerReplica", 1))
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    if gpus:
        requests[labels.GPU_RESOURCE] = limits[labels.GPU_RESOURCE] = str(gpus)
    if "cpu" in res:
        requests["cpu"] = res["cpu"]
    if "memory" in res:
        requests["memory"] = limits["memory"] = res["memory"]
    out: dict[str, Any] = {}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = limits
    return out


def _affinity(spec: api.Spec) -> dict[str, Any] | None:
    capacity = (spec.get("placement") or {}).get("capacityTypes")
    if not capacity:
        return None
    term = {"matchExpressions": [{"key": labels.CAPACITY_TYPE, "operator": "In", "values": list(capacity)}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


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
    meta = _metadata(owner)
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
    meta = _metadata(owner)
    meta["name"] = profile_token_secret_name(owner.name)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta,
        "type": "Opaque",
        "immutable": True,
        "stringData": {PROFILE_TOKEN_KEY: secrets.token_urlsafe(32)},
    }


def _volumes(owner: Owner, settings: Settings) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
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
    volumes = [
        {"name": STATS_VOLUME, "emptyDir": {}},
        {"name": CACHE_VOLUME, **cache},
        {"name": CHECKPOINT_VOLUME, **ckpt},
    ]
    if settings.profile_token:  # read by the sidecar only (group fsGroup; no mount in the trainer)
        volumes.append(
            {
                "name": PROFILE_TOKEN_VOLUME,
                "secret": {"secretName": profile_token_secret_name(owner.name), "defaultMode": 0o440},
            }
        )
    mounts = [
        {"name": STATS_VOLUME, "mountPath": settings.stats_dir},
        {"name": CACHE_VOLUME, "mountPath": settings.compile_cache_dir},
        {"name": CHECKPOINT_VOLUME, "mountPath": _get(spec, "checkpoint", "path")},
    ]
    shared = compile_cache_shared_dir(settings)
    if shared is not None:  # per job: its own folder writable, shared/ read-only
        next(m for m in mounts if m["name"] == CACHE_VOLUME)["subPath"] = compile_cache_folder(owner.name)
        mounts.append(
            {"name": CACHE_VOLUME, "mountPath": shared, "subPath": COMPILE_CACHE_SHARED_FOLDER, "readOnly": True}
        )
    return volumes, mounts


_CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}


_POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": 10001,
    "fsGroup": 10001,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def pod_template(owner: Owner, settings: Settings) -> dict[str, Any]:
    """The worker pod template (everything but the Job-level knobs)."""
    spec = owner.spec
    volumes, mounts = _volumes(owner, settings)
    identity = _identity_env(owner)
    user_env = [{"name": e["name"], "value": e.get("value", "")} for e in spec.get("env") or []]
    trainer = {
        "name": TRAINER,
        "image": spec["image"],
        "imagePullPolicy": settings.image_pull_policy,
        "command": list(LAUNCH_COMMAND),
        "env": identity + torchrun_env(owner) + trainer_env(owner, settings) + user_env,
        "ports": [{"name": "rendezvous", "containerPort": _get(spec, "distributed", "masterPort")}],
        "resources": _resources(spec),
        "volumeMounts": mounts,
        "securityContext": _CONTAINER_SECURITY,
    }
    sidecar_env: list[dict[str, Any]] = [
        *identity,
        {"name": envvars.STATS_DIR, "value": settings.stats_dir},
        {"name": envvars.METRICS_PORT, "value": str(settings.sidecar_metrics_port)},
        {"name": envvars.SAMPLE_INTERVAL_S, "value": str(settings.sample_interval_s)},
    ]
    if settings.sidecar_dcgm:
        sidecar_env.append({"name": envvars.SIDECAR_DCGM, "value": "true"})
    sidecar_mounts: list[dict[str, Any]] = [{"name": STATS_VOLUME, "mountPath": settings.stats_dir, "readOnly": False}]
    if settings.profile_token:
        sidecar_env.append({"name": envvars.PROFILE_TOKEN_FILE, "value": f"{PROFILE_TOKEN_DIR}/{PROFILE_TOKEN_KEY}"})
        sidecar_mounts.append({"name": PROFILE_TOKEN_VOLUME, "mountPath": PROFILE_TOKEN_DIR, "readOnly": True})
    sidecar = {
        "name": SIDECAR,
        "restartPolicy": "Always",  # a native sidecar: stopped by the kubelet after the trainer exits
        "image": settings.sidecar_image,
        "imagePullPolicy": settings.image_pull_policy,
        "command": ["statictrain-sidecar"],
        "env": sidecar_env,
        "ports": [{"name": "metrics", "containerPort": settings.sidecar_metrics_port}],
        "resources": {
            "requests": {"cpu": settings.sidecar_cpu, "memory": settings.sidecar_memory},
            "limits": {"memory": settings.sidecar_memory},
        },
        "volumeMounts": sidecar_mounts,
        "securityContext": _CONTAINER_SECURITY,
    }
    placement = spec.get("placement") or {}
    annotations = dict(settings.pod_annotations)
    models = (spec.get("resources") or {}).get("gpuModels")
    if models:
        annotations[api.GPU_MODELS_ANNOTATION] = ",".join(models)
    if "maxHourlyUSD" in placement:
        annotations[api.MAX_HOURLY_USD_ANNOTATION] = placement["maxHourlyUSD"]
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "schedulerName": settings.scheduler_name,
        "subdomain": worker_name(owner.name),
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": int(_get(spec, "runPolicy", "terminationGracePeriodSeconds")),
        "securityContext": _POD_SECURITY,
        "initContainers": [sidecar],
        "containers": [trainer],
        "volumes": volumes,
        "tolerations": [*settings.tolerations, *placement.get("tolerations", [])],
    }
    # The admin's node labels win over the job's (a job cannot leave the nodes it is confined to).
    node_selector = {**placement.get("nodeSelector", {}), **settings.node_selector}
    if node_selector:
        pod_spec["nodeSelector"] = node_selector
    affinity = _affinity(spec)
    if affinity:
        pod_spec["affinity"] = affinity
    meta: dict[str, Any] = {"labels": {**child_labels(owner), labels.ROLE: "worker"}}
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": pod_spec}


def template_hash(owner: Owner, settings: Settings) -> str:
    """Stable hash of the pod template: a different hash means the workers must be rebuilt.

    Elastic jobs scale in place (parallelism and completions of an Indexed Job
    are mutable together; torchrun's c10d rendezvous re-forms the group), so
    the hash is taken at minReplicas: a replica change alone never rebuilds.
    WORLD_SIZE keeps the value the Job was created with.
    """
    elastic = owner.spec.get("elastic")
    if elastic:
        spec: api.Spec = {**owner.spec, "replicas": int(elastic["minReplicas"])}
        owner = Owner(owner.name, owner.namespace, owner.uid, owner.labels, spec)
    template = pod_template(owner, settings)
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:16]


def pod_failure_policy() -> dict[str, Any]:
    """Which worker failures count against backoffLimit: disruptions and preemptions do not,
    user errors fail the job without retries, anything else counts."""
    return {
        "rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
            {
                "action": "FailJob",
                "onExitCodes": {"containerName": TRAINER, "operator": "In", "values": [EXIT_USER_ERROR]},
            },
            {
                "action": "Ignore",
                "onExitCodes": {
                    "containerName": TRAINER,
                    "operator": "In",
                    "values": [EXIT_INFRA_ERROR, EXIT_PREEMPTED],  # ascending, as the Job API requires
                },
            },
        ]
    }


def worker_job(owner: Owner, settings: Settings, queue_labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The Indexed Job running the workers. With ``queue_labels`` (Kueue's, see queueing.py) it is
    created suspended: Kueue unsuspends it on admission."""
    spec = owner.spec
    replicas = int(spec.get("replicas", api.DEFAULTS["replicas"]))
    template = pod_template(owner, settings)
    run = spec.get("runPolicy") or {}
    meta = _metadata(owner, queue_labels)
    meta["annotations"] = {api.TEMPLATE_HASH_ANNOTATION: template_hash(owner, settings)}
    job_spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": replicas,
        "parallelism": replicas,
        "suspend": bool(spec.get("suspend", False)) or bool(queue_labels),
        "backoffLimit": int(run.get("backoffLimit", 3)),
        # Spot preemption and node drains set the DisruptionTarget condition: not the job's fault.
        "podFailurePolicy": pod_failure_policy(),
        "podReplacementPolicy": "Failed",
        # Worker 0 finishing ends the job (torchrun exits 0 on every node together).
        "successPolicy": {"rules": [{"succeededIndexes": "0"}]},
        "template": template,
    }
    if "activeDeadlineSeconds" in run:
        job_spec["activeDeadlineSeconds"] = int(run["activeDeadlineSeconds"])
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": job_spec}


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
    timeout = int(_get(spec, "preflight", "timeoutSeconds"))
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
        "securityContext": _CONTAINER_SECURITY,
        "terminationMessagePath": TERMINATION_LOG,
        "terminationMessagePolicy": "File",
    }
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": timeout + PREFLIGHT_START_MARGIN_S,
        "schedulerName": settings.scheduler_name,
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "securityContext": _POD_SECURITY,
        "containers": [container],
        "tolerations": list(settings.tolerations),
    }
    if settings.node_selector:
        pod_spec["nodeSelector"] = dict(settings.node_selector)
    meta = _metadata(owner, {labels.ROLE: PREFLIGHT})
    meta["name"] = preflight_name(owner.name)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}
