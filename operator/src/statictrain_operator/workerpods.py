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

Whether the boundary holds is visible on the job's own series (:class:`ScrapeCheck`): a sidecar
always labels its series with its own pod UID, so where Prometheus sets ``pod_uid`` from discovery
that claim is kept as ``exported_pod_uid`` next to it. A worker pod's sidecar series with ``pod_uid``
and no ``exported_pod_uid`` were scraped with ``honor_labels: true`` or with no ``pod_uid`` target label
(``honor_labels: false`` renames only labels the target sets); with ``exported_pod_uid`` and no
``pod_uid`` the scrape config renames the claim but sets no ``pod_uid`` (then no series counts for the
job at all). The check looks at series of pods the API server lists, so no exporter can hide a wrong
config by publishing well-formed series of its own: the job's real sidecar still shows it.

Series that name a pod by namespace and name instead (NVIDIA dcgm-exporter's, from the kubelet's
pod-resources API) count for the pod of that name whose lifetime (:class:`WorkerPod`: from its
``status.startTime`` to when its containers finished) holds each sample (``statictrain.dcgm``):
a name is reused by a later pod, a UID never is.

No listed pod gives no selection at all (:class:`JobSeries` refuses an empty
set), never a match-all: the caller reports "no worker pods" and acts on
nothing. Series that claim a job without being its pods' are ignored and
logged once per pod UID (:class:`Ignored`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from statictrain import labels, metrics
from statictrain.promql import selector

__all__ = [
    "EXPORTED_POD_UID",
    "POD_UID",
    "SCRAPE_CHECK_QUERY",
    "TERMINAL",
    "VERDICTS",
    "Ignored",
    "JobKey",
    "JobSeries",
    "ScrapeCheck",
    "WorkerPod",
    "finished_at",
    "parse_time",
    "scrape_verdicts",
    "worker_pods",
    "worker_uids",
]

log = logging.getLogger(__name__)

POD_UID = "pod_uid"
"""The series label naming the pod (set from discovery where the sidecars are scraped as advised)."""

EXPORTED_POD_UID = "exported_pod_uid"
"""Where Prometheus keeps an exporter's own pod_uid when it sets pod_uid itself (honor_labels: false)."""

SCRAPE_CHECK_QUERY = f"count by ({POD_UID}, {EXPORTED_POD_UID}) ({selector(metrics.SIDECAR_INFO)})"
"""One series per sidecar (its info metric), with both UID labels as Prometheus stored them."""

VERDICTS = ("from_discovery", "from_exporter", "missing")
"""Where the pod_uid of a worker pod's sidecar series comes from: Prometheus (set from discovery, the sidecar's
own claim kept beside it as exported_pod_uid); the sidecar itself (honor_labels: true, or no pod_uid target
label to override it); nowhere (the claim renamed, no pod_uid set)."""

_ADVICE = {
    "from_exporter": (
        "they carry the sidecar's own pod_uid and no exported_pod_uid: Prometheus keeps what the exporter says "
        "(honor_labels: true, or no pod_uid target label), so any exporter can publish series as this job's pods "
        "and drive remediation and progress. Scrape the worker pods' sidecars with honor_labels: false and relabel "
        "__meta_kubernetes_pod_uid to pod_uid (and the pod's namespace and name to namespace and pod); "
        "README, 'Tenancy of metrics'"
    ),
    "missing": (
        "they carry exported_pod_uid but no pod_uid: the scrape config keeps honor_labels: false but sets no "
        "pod_uid from discovery, so no series counts for the job (no progress, no remediation). Add the "
        "relabeling __meta_kubernetes_pod_uid -> pod_uid (and namespace, pod) to the job that scrapes the worker "
        "pods; README, 'Tenancy of metrics'"
    ),
}

JobKey = tuple[str, str]
"""(namespace, job name)."""


TERMINAL = ("Succeeded", "Failed")


def parse_time(text: str | None) -> float | None:
    """An API server timestamp (RFC 3339) as Unix seconds; None when absent."""
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def finished_at(pod: Mapping[str, Any]) -> float | None:
    """When a pod finished (its containers' last termination, else its Ready condition's last change); None while
    it has not (phase not Succeeded or Failed)."""
    status = pod.get("status") or {}
    if status.get("phase") not in TERMINAL:
        return None
    ends = [
        parse_time(((cs.get("state") or {}).get("terminated") or {}).get("finishedAt"))
        for cs in status.get("containerStatuses") or []
    ]
    known = [e for e in ends if e is not None]
    if known:
        return max(known)
    conds = [
        parse_time(c.get("lastTransitionTime")) for c in status.get("conditions") or [] if c.get("type") == "Ready"
    ]
    known = [e for e in conds if e is not None]
    if known:
        return max(known)
    # finished, but no time says when: stop accruing (never charge a finished pod forever)
    return parse_time((pod.get("metadata") or {}).get("deletionTimestamp")) or parse_time(status.get("startTime"))


@dataclass(frozen=True)
class WorkerPod:
    """A listed worker pod as series that name pods by namespace and name need it (statictrain.dcgm.Pod)."""

    uid: str
    name: str
    namespace: str
    started: float | None
    """status.startTime (None while pending: no sample is its)."""
    finished: float | None
    """finished_at (None while it runs)."""


def worker_pods(pods: Iterable[Mapping[str, Any]]) -> dict[JobKey, tuple[WorkerPod, ...]]:
    """(namespace, job) -> the listed pods carrying that job's worker labels, by name (pods without a UID, a job
    label or the worker role are skipped)."""
    out: dict[JobKey, list[WorkerPod]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        lab = meta.get("labels") or {}
        job, uid, ns = lab.get(labels.JOB), meta.get("uid"), meta.get("namespace")
        if lab.get(labels.ROLE) != "worker" or not job or not uid or not ns:
            continue
        started = parse_time((pod.get("status") or {}).get("startTime"))
        out.setdefault((ns, job), []).append(WorkerPod(uid, meta.get("name", ""), ns, started, finished_at(pod)))
    return {k: tuple(sorted(v, key=lambda p: (p.name, p.uid))) for k, v in out.items()}


def worker_uids(pods: Iterable[Mapping[str, Any]]) -> dict[JobKey, frozenset[str]]:
    """(namespace, job) -> UIDs of the listed pods carrying that job's worker labels (as worker_pods)."""
    return {k: frozenset(p.uid for p in v) for k, v in worker_pods(pods).items()}


@dataclass(frozen=True)
class JobSeries:
    """The series of one job: its ``job_name`` and ``namespace`` labels and a ``pod_uid`` among ``uids``."""

    job: str
    namespace: str
    uids: frozenset[str]
    pods: tuple[WorkerPod, ...] = ()
    """The same pods by name and lifetime, for series that name a pod by namespace and name (dcgm-exporter's);
    empty: only ``pod_uid``-keyed series are read."""

    def __post_init__(self) -> None:
        if not self.uids:
            raise ValueError(
                f"job {self.namespace}/{self.job} has no worker pods listed: there are no series to select"
            )
        if any(not isinstance(u, str) or not u for u in self.uids):
            raise ValueError(f"pod UIDs of {self.namespace}/{self.job} must be non-empty strings")
        if any(p.uid not in self.uids or p.namespace != self.namespace or not p.name for p in self.pods):
            raise ValueError(f"the pods of {self.namespace}/{self.job} must be among its UIDs, named, in its namespace")

    @classmethod
    def of(cls, job: str, namespace: str, pods: Iterable[WorkerPod]) -> JobSeries:
        """The series of the listed worker pods ``pods`` (worker_pods)."""
        listed = tuple(pods)
        return cls(job, namespace, frozenset(p.uid for p in listed), listed)

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


def scrape_verdicts(series: Iterable[Mapping[str, str]], uids: Iterable[str]) -> dict[str, str]:
    """Pod UID (of ``uids``, the listed worker pods) -> how its sidecar series were scraped (a VERDICTS value).

    ``series``: label sets of SCRAPE_CHECK_QUERY's answer. The worst finding wins: one series of a pod with its
    own pod_uid kept is enough for from_exporter, whatever else claims that UID. Pods without sidecar series yet
    are left out (nothing to judge).
    """
    wanted = set(uids)
    found: dict[str, set[str]] = {}
    for lab in series:
        uid, claim = lab.get(POD_UID, ""), lab.get(EXPORTED_POD_UID, "")
        if uid in wanted:
            found.setdefault(uid, set()).add("from_discovery" if claim else "from_exporter")
        elif claim in wanted and not uid:
            found.setdefault(claim, set()).add("missing")
    return {uid: next(v for v in reversed(VERDICTS) if v in seen) for uid, seen in found.items()}


class ScrapeCheck:
    """Findings of scrape_verdicts: counts per verdict of the last pass; a warning once per kind of problem."""

    def __init__(self, part: str) -> None:
        self.part = part
        self.warned: set[str] = set()
        self.counts: dict[str, int] = dict.fromkeys(VERDICTS, 0)

    def note(self, verdicts: Mapping[JobKey, Mapping[str, str]]) -> dict[str, int]:
        """Record one pass: (namespace, job) -> {pod UID: verdict}; returns the pods per verdict."""
        counts = dict.fromkeys(VERDICTS, 0)
        for key in sorted(verdicts):
            for uid, verdict in sorted(verdicts[key].items()):
                counts[verdict] += 1
                if verdict != "from_discovery" and verdict not in self.warned:
                    self.warned.add(verdict)
                    log.warning(
                        "%s: the sidecar series of job %s/%s's worker pod %s are not scraped as the tenancy of "
                        "metrics needs: %s",
                        self.part, key[0], key[1], uid, _ADVICE[verdict],
                    )
        self.counts = counts
        return counts
