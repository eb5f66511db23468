"""Which Prometheus series belong to a job: those of its worker pods as the API server lists them (pure).

Remediation (anomaly/) and progress (progress/) read the workers' series; the
series are labelled by whoever exports them. Selecting by ``job_name`` and
``namespace`` alone lets any exporter that writes those labels speak for a job:
a tenant's pod in another namespace, or another job's pod in the same one,
could publish a step-time spike or a stalled utilization in a victim's name and
get it scaled down, restarted or its progress rewritten.

So a series counts for a job only when its ``pod_uid`` is the UID of one of
the job's worker pods, listed from the API server in the job's namespace with
the job's worker labels (``statictrain.io/job=<job>``, ``statictrain.io/role=worker``,
the same pods ``actions.restart_workers`` acts on), and it also carries the
job's ``job_name`` and ``namespace``. Why the UID and not the namespace:

* a namespace label, even one set by service discovery, separates namespaces
  only; another job's pod in the same namespace has the same one. The UID
  names one pod: the API server generates it, never reuses it, and a pod of
  another job (or a past pod) has another.
* the pod UID is only as good as who sets the label. With the sidecars
  scraped with ``honor_labels: false`` and ``pod_uid`` (with ``namespace``
  and ``pod``) set from discovery (``__meta_kubernetes_pod_uid``; the local
  cluster's pod targets do this, see statictrain_localcluster.prometheus),
  Prometheus writes the scraped pod's own UID over whatever the exporter
  claims (the claim becomes ``exported_pod_uid``), so no exporter can place
  a series under another pod's UID, even one it knows. Under
  ``honor_labels: true`` the exporter's own ``pod_uid`` wins: UIDs are
  random and not guessable, but readable by whoever may list the pods or
  query Prometheus, so there it is hardening, not a boundary.
* the worker labels are trusted as the API server holds them: whoever can
  create or relabel pods in a job's namespace is inside Kubernetes' own
  tenancy boundary (they can delete the job's pods outright).

No listed pod gives no selection at all (:class:`JobSeries` refuses an empty
set), never a match-all: the caller reports "no worker pods" and acts on
nothing. Series that claim a job without being its pods' are ignored and
logged once per pod UID (:class:`Ignored`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from statictrain import labels

__all__ = ["POD_UID", "Ignored", "JobKey", "JobSeries", "worker_uids"]

log = logging.getLogger(__name__)

POD_UID = "pod_uid"
"""The series label naming the pod (set from discovery where the sidecars are scraped as advised)."""

JobKey = tuple[str, str]
"""(namespace, job name)."""


def worker_uids(pods: Iterable[Mapping[str, Any]]) -> dict[JobKey, frozenset[str]]:
    """(namespace, job) -> UIDs of the listed pods carrying that job's worker labels (pods without a UID,
    a job label or the worker role are skipped)."""
    out: dict[JobKey, set[str]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        lab = meta.get("labels") or {}
        job, uid, ns = lab.get(labels.JOB), meta.get("uid"), meta.get("namespace")
        if lab.get(labels.ROLE) != "worker" or not job or not uid or not ns:
            continue
        out.setdefault((ns, job), set()).add(uid)
    return {k: frozenset(v) for k, v in out.items()}


@dataclass(frozen=True)
class JobSeries:
    """The series of one job: its ``job_name`` and ``namespace`` labels and a ``pod_uid`` among ``uids``."""

    job: str
    namespace: str
    uids: frozenset[str]

    def __post_init__(self) -> None:
        if not self.uids:
            raise ValueError(
                f"job {self.namespace}/{self.job} has no worker pods listed: there are no series to select"
            )
        if any(not isinstance(u, str) or not u for u in self.uids):
            raise ValueError(f"pod UIDs of {self.namespace}/{self.job} must be non-empty strings")

    @property
    def labels(self) -> dict[str, str]:
        """Exact matchers (for statictrain.promql.selector's ``labels``)."""
        return {"job_name": self.job, "namespace": self.namespace}

    @property
    def any_of(self) -> dict[str, list[str]]:
        """The pod UID set (for statictrain.promql.selector's ``any_of``: escaped, anchored literals)."""
        return {POD_UID: sorted(self.uids)}


class Ignored:
    """Series that claim a job but come from none of its worker pods: logged once per (job, pod UID), counted."""

    def __init__(self, part: str) -> None:
        self.part = part
        self.seen: set[tuple[str, str, str]] = set()

    @property
    def count(self) -> int:
        """How many distinct (namespace, job, pod UID) were ignored so far."""
        return len(self.seen)

    def note(self, key: JobKey, claimed: Iterable[str], uids: Iterable[str]) -> list[str]:
        """Log the pod UIDs in ``claimed`` that are not in ``uids`` (first time each); returns the new ones."""
        own = set(uids)
        new = []
        for uid in sorted(set(claimed) - own):
            if (key[0], key[1], uid) in self.seen:
                continue
            self.seen.add((key[0], key[1], uid))
            new.append(uid)
            log.warning(
                "%s: ignoring series labelled job %s/%s with pod_uid %r: not one of the job's worker pods "
                "(a past pod of it, or another exporter)",
                self.part, key[0], key[1], uid,
            )
        return new
