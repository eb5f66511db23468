"""The cost part's API calls, through the Kube port (implements cost.accounting.CostKube).

The accounting pass runs in a worker thread; each call goes back to kopf's loop
(kube.blocking). The job list is kopf's index (no API list), and the nodes are
listed once per tick and shared by the price annotator and the accounting pass.
Status is written with the cost part's own field manager (writer.COST: cost and
the BudgetExceeded condition).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from statictrain import labels

from statictrain_operator import writer
from statictrain_operator.kube import events, port
from statictrain_operator.kube.blocking import Blocking

__all__ = ["COMPONENT", "STATE_KEY", "ClusterCost"]

log = logging.getLogger(__name__)

COMPONENT = "statictrain-cost"
STATE_KEY = "state.json"
"""Key of the cost state (cost.ledger.CostState) in its ConfigMap."""


class ClusterCost:
    """CostKube over the port. ``jobs`` and ``job`` read kopf's index."""

    def __init__(
        self,
        kube: port.Kube,
        call: Blocking,
        jobs: Callable[[], list[dict[str, Any]]],
        job: Callable[[str, str], dict[str, Any] | None],
        clock: Callable[[], datetime],
        *,
        state_configmap: str = "",
    ) -> None:
        """``state_configmap``: ``namespace/name`` of the ConfigMap holding the cost state; "" keeps none."""
        self.kube, self.call, self._jobs, self._job, self.clock = kube, call, jobs, job, clock
        ns, _, name = state_configmap.partition("/")
        self.state_ref: tuple[str, str] | None = (ns, name) if state_configmap else None
        self.writer = writer.StatusWriter(kube, writer.COST)
        self.nodes: list[dict[str, Any]] | None = None
        """The nodes listed at the start of this tick (None: list them when asked)."""

    def list_nodes(self) -> list[dict[str, Any]]:
        if self.nodes is None:
            return self.call(self.kube.list(port.NODES))
        return self.nodes

    def list_worker_pods(self) -> list[dict[str, Any]]:
        return self.call(self.kube.list(port.PODS, label_selector=labels.JOB))

    def list_jobs(self) -> list[dict[str, Any]]:
        jobs = self._jobs()
        self.writer.retain(j["metadata"].get("uid", "") for j in jobs)
        return jobs

    def patch_job_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> bool:
        """Write status.cost and/or the BudgetExceeded condition (the only fields this part owns)."""
        job = self._job(namespace, name)
        if job is None:
            return False
        fields = {k: v for k, v in status.items() if k != "conditions"}
        conds = [c for c in status.get("conditions") or [] if c.get("type") in writer.COST.conditions]
        return self.call(self.writer.write(job, fields, conds, now=self.clock()))

    def patch_job(self, namespace: str, name: str, patch: Mapping[str, Any]) -> bool:
        return self.call(self.kube.merge_patch(port.STJ, namespace, name, patch)) is not None

    def emit_event(self, job: Mapping[str, Any], reason: str, message: str, event_type: str) -> None:
        body = events.about_job(
            job, reason=reason, message=message, event_type=event_type, component=COMPONENT, now=self.clock()
        )
        self.call(self.kube.create(port.EVENTS, body))

    def read_configmap_key(self, namespace: str, name: str, key: str) -> str | None:
        """One key of a ConfigMap; None (logged) when the ConfigMap or the key is missing."""
        cm = self.call(self.kube.get(port.CONFIGMAPS, namespace, name))
        if cm is None:
            log.warning("ConfigMap %s/%s not found", namespace, name)
            return None
        value: str | None = (cm.get("data") or {}).get(key)
        return value

    def patch_node_annotations(self, name: str, annotations: Mapping[str, str | None]) -> None:
        """Merge-patch annotations on a node (None removes a key)."""
        self.call(self.kube.merge_patch(port.NODES, None, name, {"metadata": {"annotations": dict(annotations)}}))

    def read_state(self) -> str | None:
        """The saved cost state, None when there is none (or no ConfigMap is configured)."""
        if self.state_ref is None:
            return None
        cm = self.call(self.kube.get(port.CONFIGMAPS, *self.state_ref))
        text: str | None = ((cm or {}).get("data") or {}).get(STATE_KEY)
        return text

    def write_state(self, text: str) -> bool:
        """Save the cost state in its ConfigMap (created when missing); False (logged) when it cannot."""
        if self.state_ref is None:
            return True
        ns, name = self.state_ref
        try:
            patch = {"data": {STATE_KEY: text}}
            if self.call(self.kube.merge_patch(port.CONFIGMAPS, ns, name, patch)) is not None:
                return True
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, **patch}
            if self.call(self.kube.create(port.CONFIGMAPS, body)) is not None:
                return True
            return self.call(self.kube.merge_patch(port.CONFIGMAPS, ns, name, patch)) is not None  # raced: exists
        except port.ApiError as e:
            log.warning("cost state ConfigMap %s/%s not written: %s", ns, name, e)
            return False
