"""The owning StaticTrainingJob and what every child carries from it: its name, labels, owner reference,
metadata, and the spec's values with the CRD's defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from statictrain import api, labels

__all__ = [
    "UNKNOWN",
    "WORKER_SUFFIX",
    "Owner",
    "child_labels",
    "commit_and_team",
    "metadata",
    "owner_reference",
    "selector",
    "spec_value",
    "worker_name",
]

WORKER_SUFFIX = "-worker"
UNKNOWN = "unknown"


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


def metadata(owner: Owner, extra_labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A child's metadata: named ``<job>-worker`` (callers rename the others), the child labels, the owner."""
    return {
        "name": worker_name(owner.name),
        "namespace": owner.namespace,
        "labels": {**child_labels(owner), **(extra_labels or {})},
        "ownerReferences": [owner_reference(owner)],
    }


def spec_value(spec: Mapping[str, Any], section: str, key: str) -> Any:
    """spec.section.key, falling back to the CRD default."""
    value = (spec.get(section) or {}).get(key)
    if value is None:
        defaults: Mapping[str, Any] = api.DEFAULTS
        value = (defaults.get(section) or {}).get(key)
    return value
