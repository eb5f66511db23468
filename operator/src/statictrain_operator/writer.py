"""One writer per status field: each part writes its own fields with server-side apply under its own manager.

| part (field manager)      | status fields                  | condition types            |
|---------------------------|--------------------------------|----------------------------|
| converger                 | phase, replicas, workers, ...  | Created, Running, ... (lifecycle) |
| progress                  | progress, compile              | -                          |
| cost                      | cost                           | BudgetExceeded, BudgetWarning |
| anomaly                   | anomalies, remediation         | Remediation                |

Server-side apply removes fields a manager applied before and leaves out, so a
writer always sends every field it owns: the new values over the ones the job
holds now (or, fresher, what this writer last wrote: kopf's index may lag
behind our own writes by a moment). The CRD keys status.conditions by type (a list-map), so the API
server merges each manager's conditions and no part can erase another's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from statictrain import api, labels
from statictrain.conditions import ANOMALY_TYPES, COST_TYPES, LIFECYCLE_TYPES, set_condition

from .kube import port

__all__ = ["ANOMALY", "CONVERGER", "COST", "PROGRESS", "Part", "StatusWriter"]


@dataclass(frozen=True)
class Part:
    """What one part owns in status."""

    manager: str
    fields: tuple[str, ...]
    conditions: tuple[str, ...] = ()


CONVERGER = Part(
    "statictrain-converger",
    (
        "phase",
        "observedGeneration",
        "replicas",
        "readyReplicas",
        "restarts",
        "selector",
        "workers",
        "startTime",
        "completionTime",
        "queue",
        "preflight",
    ),
    LIFECYCLE_TYPES,
)
PROGRESS = Part("statictrain-progress", ("progress", "compile"))
COST = Part("statictrain-cost", ("cost",), COST_TYPES)
ANOMALY = Part("statictrain-anomaly", ("anomalies", "remediation"), ANOMALY_TYPES)


class StatusWriter:
    """Writes one part's fields of a StaticTrainingJob's status."""

    def __init__(self, kube: port.Kube, part: Part) -> None:
        self.kube, self.part = kube, part
        self.last: dict[str, dict[str, Any]] = {}
        """metadata.uid -> the part's fields as last written."""

    def retain(self, uids: Iterable[str]) -> None:
        """Forget what was written to jobs other than ``uids`` (they are gone)."""
        keep = set(uids)
        for uid in [u for u in self.last if u not in keep]:
            del self.last[uid]

    def owned(self, status: Mapping[str, Any]) -> dict[str, Any]:
        """The part's fields and conditions as ``status`` holds them."""
        out = {f: status[f] for f in self.part.fields if f in status}
        conds = [c for c in status.get("conditions") or [] if c.get("type") in self.part.conditions]
        if conds:
            out["conditions"] = conds
        return out

    def desired(
        self,
        owned: Mapping[str, Any],
        fields: Mapping[str, Any],
        conditions: Sequence[api.Condition],
        now: datetime,
    ) -> dict[str, Any]:
        """The part's fields after the change: ``fields`` (None removes one) and ``conditions`` over ``owned``."""
        unknown = set(fields) - set(self.part.fields)
        strange = {c["type"] for c in conditions} - set(self.part.conditions)
        if unknown or strange:
            raise ValueError(f"{self.part.manager} does not own status {sorted(unknown | strange)}")
        out = dict(owned)
        for k, v in fields.items():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = v
        conds: list[api.Condition] = list(out.get("conditions") or [])
        for c in conditions:
            conds = set_condition(conds, c, now)
        if conds:
            out["conditions"] = conds
        return out

    async def write(
        self,
        job: Mapping[str, Any],
        fields: Mapping[str, Any],
        conditions: Sequence[api.Condition] = (),
        *,
        now: datetime,
    ) -> bool:
        """Apply the change to the job (metadata, status as last seen); False when the job is gone.

        Nothing is sent when the part's fields would not change.
        """
        meta = job["metadata"]
        uid = meta.get("uid") or ""
        before = self.last.get(uid)
        if before is None:
            before = self.owned(job.get("status") or {})
        new = self.desired(before, fields, conditions, now)
        if new == before:
            return True
        body = {
            "apiVersion": labels.API_VERSION,
            "kind": labels.KIND,
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
            "status": new,
        }
        out = await self.kube.apply(port.STJ, body, manager=self.part.manager, subresource="status")
        if out is None or (uid and out["metadata"].get("uid") != uid):
            self.last.pop(uid, None)
            return out is not None
        if uid:
            self.last[uid] = new
        return True
