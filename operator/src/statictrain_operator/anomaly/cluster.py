"""The anomaly part's API calls, through the Kube port (implements evaluate.JobApi and NamespaceEvents).

Every call is awaited on kopf's loop (the evaluation's CPU-bound judging runs
in a worker thread in between, without the port). Status is written with the anomaly
part's own field manager (writer.ANOMALY: anomalies, remediation and the
Remediation condition); the remediation history is an annotation on the job.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from statictrain_operator import children, workerpods, writer
from statictrain_operator.anomaly import actions
from statictrain_operator.anomaly.history import ANNOTATION
from statictrain_operator.anomaly.remediation import Intent
from statictrain_operator.kube import events, port

__all__ = ["COMPONENT", "ClusterJobApi", "ClusterNamespaceEvents"]

COMPONENT = "statictrain-anomaly"


class ClusterJobApi:
    """evaluate.JobApi over the port."""

    def __init__(self, kube: port.Kube, clock: Callable[[], datetime]) -> None:
        self.kube, self.clock = kube, clock
        self.writer = writer.StatusWriter(kube, writer.ANOMALY)

    async def read_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self.kube.get(port.STJ, namespace, name)

    async def worker_pods(self, namespace: str, name: str) -> tuple[workerpods.WorkerPod, ...]:
        """The job's worker pods (the pods restart_workers acts on), listed from the API server."""
        pods = await self.kube.list(port.PODS, namespace, label_selector=children.selector(name))
        return workerpods.worker_pods(pods).get((namespace, name), ())

    async def set_history(self, namespace: str, name: str, value: str) -> None:
        """Merge-patch the history annotation (does not change metadata.generation)."""
        patch = {"metadata": {"annotations": {ANNOTATION: value}}}
        await self.kube.merge_patch(port.STJ, namespace, name, patch)

    async def patch_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        """Write anomalies, remediation and/or the Remediation condition (what this part owns)."""
        job = await self.read_job(namespace, name)  # its uid and status: the writer re-sends the fields it keeps
        if job is None:
            return
        fields = {k: v for k, v in status.items() if k != "conditions"}
        conds = [c for c in status.get("conditions") or [] if c.get("type") in writer.ANOMALY.conditions]
        await self.writer.write(job, fields, conds, now=self.clock())

    async def apply(self, namespace: str, name: str, intent: Intent) -> int | None:
        return await actions.apply(self.kube, namespace, name, intent)

    async def event(self, job: Mapping[str, Any], *, reason: str, message: str, warning: bool, now: datetime) -> None:
        body = events.about_job(
            job,
            reason=reason,
            message=message,
            event_type="Warning" if warning else "Normal",
            component=COMPONENT,
            now=now,
        )
        await self.kube.create(port.EVENTS, body)


class ClusterNamespaceEvents:
    """namespaces.NamespaceEvents over the port."""

    def __init__(self, kube: port.Kube) -> None:
        self.kube = kube

    async def namespace_event(self, namespace: str, *, reason: str, message: str, now: datetime) -> None:
        body = events.about_namespace(namespace, reason=reason, message=message, component=COMPONENT, now=now)
        await self.kube.create(port.EVENTS, body)
