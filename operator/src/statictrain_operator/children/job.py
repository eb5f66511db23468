"""The Indexed Job that runs the workers (one pod per torchrun node, the completion index is the node
rank), and which trainer exits count against its backoffLimit (statictrain.exitcodes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from statictrain import api
from statictrain.exitcodes import ExitCode

from ..settings import Settings
from .owner import Owner, metadata
from .pod import TRAINER, pod_template, template_hash

__all__ = ["EXIT_INFRA_ERROR", "EXIT_PREEMPTED", "EXIT_USER_ERROR", "pod_failure_policy", "worker_job"]

# Trainer exit codes (statictrain.exitcodes, shared with the trainer).
EXIT_USER_ERROR = int(ExitCode.USER_ERROR)
"""Retrying cannot help (bad entrypoint or settings): fail the job at once."""
EXIT_PREEMPTED = int(ExitCode.PREEMPTED)
"""SIGTERM honoured after a checkpoint (spot notice, drain): retry without counting it."""
EXIT_INFRA_ERROR = int(ExitCode.INFRA_ERROR)
"""The machine failed (CUDA, NCCL, I/O): retry without counting it against backoffLimit."""


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
    meta = metadata(owner, queue_labels)
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
