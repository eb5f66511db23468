"""The worker pod template: the trainer (``statictrain-launch``) and the profiling sidecar as a native
sidecar (an init container with restartPolicy Always: it starts first and is stopped by the kubelet once
the trainer exits, so the pod completes), the security settings, and the template's hash (a new hash
rebuilds the workers)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from statictrain import api, envvars, labels

from ..settings import Settings
from .env import identity_env, torchrun_env, trainer_env
from .owner import Owner, child_labels, spec_value, worker_name
from .placement import resources, worker_annotations, worker_placement
from .volumes import PROFILE_TOKEN_DIR, PROFILE_TOKEN_KEY, sidecar_mounts, volumes

__all__ = [
    "CONTAINER_SECURITY",
    "LAUNCH_COMMAND",
    "POD_SECURITY",
    "SIDECAR",
    "TRAINER",
    "pod_template",
    "template_hash",
]

TRAINER = "trainer"
SIDECAR = "sidecar"
LAUNCH_COMMAND = ("statictrain-launch", "--module", "statictrain_trainer.main")
"""The trainer container's command: torchrun's agent with the workers' exit codes (statictrain_trainer.launch)."""

CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""Every container the operator makes: no privilege, no capability, not root."""

POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": 10001,
    "fsGroup": 10001,
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""Every pod the operator makes."""


def pod_template(owner: Owner, settings: Settings) -> dict[str, Any]:
    """The worker pod template (everything but the Job-level knobs)."""
    spec = owner.spec
    pod_volumes, mounts = volumes(owner, settings)
    identity = identity_env(owner)
    user_env = [{"name": e["name"], "value": e.get("value", "")} for e in spec.get("env") or []]
    trainer = {
        "name": TRAINER,
        "image": spec["image"],
        "imagePullPolicy": settings.image_pull_policy,
        "command": list(LAUNCH_COMMAND),
        "env": identity + torchrun_env(owner) + trainer_env(owner, settings) + user_env,
        "ports": [{"name": "rendezvous", "containerPort": spec_value(spec, "distributed", "masterPort")}],
        "resources": resources(spec),
        "volumeMounts": mounts,
        "securityContext": CONTAINER_SECURITY,
    }
    sidecar_env: list[dict[str, Any]] = [
        *identity,
        {"name": envvars.STATS_DIR, "value": settings.stats_dir},
        {"name": envvars.METRICS_PORT, "value": str(settings.sidecar_metrics_port)},
        {"name": envvars.SAMPLE_INTERVAL_S, "value": str(settings.sample_interval_s)},
    ]
    if settings.sidecar_dcgm:
        sidecar_env.append({"name": envvars.SIDECAR_DCGM, "value": "true"})
    if settings.profile_token:
        sidecar_env.append({"name": envvars.PROFILE_TOKEN_FILE, "value": f"{PROFILE_TOKEN_DIR}/{PROFILE_TOKEN_KEY}"})
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
        "volumeMounts": sidecar_mounts(settings),
        "securityContext": CONTAINER_SECURITY,
    }
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "subdomain": worker_name(owner.name),
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": int(spec_value(spec, "runPolicy", "terminationGracePeriodSeconds")),
        "securityContext": POD_SECURITY,
        "initContainers": [sidecar],
        "containers": [trainer],
        "volumes": pod_volumes,
        **worker_placement(spec, settings),
    }
    meta: dict[str, Any] = {"labels": {**child_labels(owner), labels.ROLE: "worker"}}
    pod_annotations = worker_annotations(spec, settings)
    if pod_annotations:
        meta["annotations"] = pod_annotations
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
