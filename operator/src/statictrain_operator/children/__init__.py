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

One module per reason to change (their layers: pyproject.toml, "Children layers"); this package's
names are the ones the rest of the operator imports:

- ``job``: the worker Job and its pod failure policy (the trainer's exit codes);
- ``service``: the headless Service; ``preflight_pod``: the pre-flight pod;
- ``pod``: the worker pod template (containers, security) and its hash;
- ``env``: the containers' environment (identity, torchrun, the trainer's settings);
- ``volumes``: volumes and mounts, the checkpoint claim, the profiling token's Secret, the compile cache's folders;
- ``placement``: resources, scheduler, tolerations, node labels, affinity, the extender's annotations;
- ``owner``: the owning job, the labels, owner reference and metadata every child carries.
"""

from __future__ import annotations

from .env import COMPLETION_INDEX_ANNOTATION, SHUTDOWN_MARGIN_S, torchrun_env, trainer_env
from .job import EXIT_INFRA_ERROR, EXIT_PREEMPTED, EXIT_USER_ERROR, pod_failure_policy, worker_job
from .owner import UNKNOWN, WORKER_SUFFIX, Owner, child_labels, commit_and_team, owner_reference, selector, worker_name
from .pod import LAUNCH_COMMAND, SIDECAR, TRAINER, pod_template, template_hash
from .preflight_pod import PREFLIGHT, PREFLIGHT_START_MARGIN_S, PREFLIGHT_SUFFIX, preflight_name, preflight_pod
from .service import service
from .volumes import (
    CACHE_VOLUME,
    CHECKPOINT_CLAIM_SUFFIX,
    CHECKPOINT_VOLUME,
    PROFILE_TOKEN_DIR,
    PROFILE_TOKEN_SUFFIX,
    PROFILE_TOKEN_VOLUME,
    STATS_VOLUME,
    checkpoint_claim,
    checkpoint_claim_name,
    profile_token_secret,
    profile_token_secret_name,
)

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
