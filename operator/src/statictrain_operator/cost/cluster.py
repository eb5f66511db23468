"""The cost part's API calls, through the Kube port (implements cost.accounting.CostKube).

All I/O is async on kopf's loop; the accounting pass in between is synchronous
(pure allocation plus Prometheus reads) and runs in a worker thread without
touching the port: ``load()`` reads what a pass needs (nodes, worker pods, the
saved state; jobs come from kopf's index, no API list), the pass reads that
snapshot and queues its writes, and ``flush()`` sends them, in order per job,
jobs concurrently. A job found gone by one of its writes gets none of the
rest. Status is written with the cost part's own field manager (writer.COST:
cost and the BudgetExceeded condition); only the last state of a pass is saved.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any

from statictrain import labels

from statictrain_operator import writer
from statictrain_operator.kube import events, port

__all__ = ["COMPONENT", "STATE_KEY", "ClusterCost"]

log = logging.getLogger(__name__)

COMPONENT = "statictrain-cost"
STATE_KEY = "state.json"
"""Key of the cost state (cost.ledger.CostState) in its ConfigMap."""

Write = tuple[str, Callable[[], Awaitable[Any]]]
"""(what, send): ``send`` answers None (or False) when its object is gone."""


class ClusterCost:
    """CostKube over the port for one pass at a time: ``load``, the pass (any thread), ``flush``."""

    def __init__(
        self,
        kube: port.Kube,
        jobs: Callable[[], list[dict[str, Any]]],
        job: Callable[[str, str], dict[str, Any] | None],
        clock: Callable[[], datetime],
        *,
        state_configmap: str = "",
    ) -> None:
        """``state_configmap``: ``namespace/name`` of the ConfigMap holding the cost state; "" keeps none."""
        self.kube, self._jobs, self._job, self.clock = kube, jobs, job, clock
        ns, _, name = state_configmap.partition("/")
        self.state_ref: tuple[str, str] | None = (ns, name) if state_configmap else None
        self.writer = writer.StatusWriter(kube, writer.COST)
        self.jobs: dict[tuple[str, str], dict[str, Any]] = {}
        self.nodes: list[dict[str, Any]] = []
        self.pods: list[dict[str, Any]] = []
        self.state: str | None = None
        self._state_read = False
        self._new_state: str | None = None
        self._writes: dict[tuple[str, ...], list[Write]] = {}

    # ------------------------------------------------------------------ on the loop

    async def load(self) -> list[dict[str, Any]]:
        """Read the jobs (kopf's index), nodes, worker pods and (once per process) the saved state; returns
        the nodes."""
        self.jobs = {(j["metadata"]["namespace"], j["metadata"]["name"]): j for j in self._jobs()}
        self.writer.retain(j["metadata"].get("uid", "") for j in self.jobs.values())
        self.nodes, self.pods = await asyncio.gather(
            self.kube.list(port.NODES), self.kube.list(port.PODS, label_selector=labels.JOB)
        )
        if not self._state_read and self.state_ref is not None:
            cm = await self.kube.get(port.CONFIGMAPS, *self.state_ref)
            self.state = ((cm or {}).get("data") or {}).get(STATE_KEY)
        self._state_read = True
        return self.nodes

    async def flush(self) -> None:
        """Send what the pass queued: each job's writes in order (none after one finds it gone), jobs at once."""
        writes, self._writes = self._writes, {}
        state, self._new_state = self._new_state, None
        await asyncio.gather(*(self._send(key, queue) for key, queue in writes.items()))
        if state is not None:
            await self._save_state(state)

    async def _send(self, key: tuple[str, ...], queue: list[Write]) -> None:
        for what, send in queue:
            try:
                if await send() in (None, False):
                    log.info("%s: gone; %d write(s) not sent", "/".join(key), len(queue) - queue.index((what, send)))
                    return
            except Exception as e:  # one object's write must not stop the others (e.g. a terminating namespace)
                log.warning("%s: %s failed: %s", "/".join(key), what, e)

    async def read_configmap_key(self, namespace: str, name: str, key: str) -> str | None:
        """One key of a ConfigMap; None (logged) when the ConfigMap or the key is missing."""
        cm = await self.kube.get(port.CONFIGMAPS, namespace, name)
        if cm is None:
            log.warning("ConfigMap %s/%s not found", namespace, name)
            return None
        value: str | None = (cm.get("data") or {}).get(key)
        return value

    async def patch_node_annotations(self, name: str, annotations: Mapping[str, str | None]) -> None:
        """Merge-patch annotations on a node (None removes a key)."""
        await self.kube.merge_patch(port.NODES, None, name, {"metadata": {"annotations": dict(annotations)}})

    async def _save_state(self, text: str) -> bool:
        """Save the cost state in its ConfigMap (created when missing); False (logged) when it cannot."""
        if self.state_ref is None:
            return True
        ns, name = self.state_ref
        try:
            patch = {"data": {STATE_KEY: text}}
            if await self.kube.merge_patch(port.CONFIGMAPS, ns, name, patch) is not None:
                return True
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, **patch}
            if await self.kube.create(port.CONFIGMAPS, body) is not None:
                return True
            return await self.kube.merge_patch(port.CONFIGMAPS, ns, name, patch) is not None  # raced: exists
        except port.ApiError as e:
            log.warning("cost state ConfigMap %s/%s not written: %s", ns, name, e)
            return False

    # ------------------------------------------------------------------ CostKube, for the pass (any thread)

    def list_nodes(self) -> list[dict[str, Any]]:
        return self.nodes

    def list_worker_pods(self) -> list[dict[str, Any]]:
        return self.pods

    def list_jobs(self) -> list[dict[str, Any]]:
        return list(self.jobs.values())

    def _queue(self, namespace: str, name: str, what: str, send: Callable[[], Awaitable[Any]]) -> None:
        self._writes.setdefault((namespace, name), []).append((what, send))

    def patch_job_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> bool:
        """Queue status.cost and/or the BudgetExceeded condition (the only fields this part owns);
        False when the job was not listed."""
        if (namespace, name) not in self.jobs:
            return False
        fields = {k: v for k, v in status.items() if k != "conditions"}
        conds = [c for c in status.get("conditions") or [] if c.get("type") in writer.COST.conditions]
        now = self.clock()
        self._queue(namespace, name, "status", lambda: self._status(namespace, name, fields, conds, now))
        return True

    async def _status(
        self, namespace: str, name: str, fields: dict[str, Any], conds: list[Any], now: datetime
    ) -> bool:
        job = self._job(namespace, name)  # the latest view (uid, status), read on the loop
        return job is not None and await self.writer.write(job, fields, conds, now=now)

    def patch_job(self, namespace: str, name: str, patch: Mapping[str, Any]) -> bool:
        if (namespace, name) not in self.jobs:
            return False
        self._queue(namespace, name, "patch", lambda: self.kube.merge_patch(port.STJ, namespace, name, patch))
        return True

    def emit_event(self, job: Mapping[str, Any], reason: str, message: str, event_type: str) -> None:
        body = events.about_job(
            job, reason=reason, message=message, event_type=event_type, component=COMPONENT, now=self.clock()
        )
        meta = job.get("metadata") or {}
        self._queue(meta.get("namespace", ""), meta.get("name", ""), f"event {reason}", lambda: self._event(body))

    async def _event(self, body: Mapping[str, Any]) -> bool:
        await self.kube.create(port.EVENTS, body)
        return True  # an Event that exists already (409) does not mean its job is gone

    def read_state(self) -> str | None:
        """The saved cost state as loaded, None when there is none (or no ConfigMap is configured)."""
        return self.state

    def write_state(self, text: str) -> bool:
        """Queue the cost state (the pass's last one is saved by ``flush``)."""
        self._new_state = text
        return True
