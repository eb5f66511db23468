"""A cheaper diff-base storage for kopf: the same essence, without deep-copying whole bodies.

kopf's AnnotationsDiffBaseStorage.build() deep-copies the entire object
(managedFields, status, every annotation) on each event, then throws most of it
away. Profiling 200 jobs showed that copy as the operator's largest CPU cost.
This subclass hands it only the parts that survive (everything but metadata and
status, plus the metadata it keeps), so the essence and the stored
last-handled-configuration are unchanged; and it builds none for kinds that
have no change handlers (a Job's essence holds its whole pod template).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

import kopf

__all__ = ["KEPT_METADATA", "TrimmedDiffBaseStorage"]

KEPT_METADATA = ("name", "namespace", "uid", "labels", "annotations")


class TrimmedDiffBaseStorage(kopf.AnnotationsDiffBaseStorage):
    """kopf builds an essence for every event of every watched kind; only `kinds` get one here.

    The operator has change handlers (on.create/update/field, timers, daemons)
    for StaticTrainingJobs only; worker Jobs, Services, Nodes and Leases are
    handled by event handlers and indexes, which never look at the essence.
    A part that adds change handlers for another kind must add it to `kinds`.
    """

    def __init__(self, *args: Any, kinds: Iterable[str] = ("StaticTrainingJob",), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kinds = frozenset(kinds)

    def build(self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None) -> kopf.BodyEssence:
        if body.get("kind") not in self.kinds:
            return cast(kopf.BodyEssence, {})
        if extra_fields:  # handlers on status fields need the full body
            return super().build(body=body, extra_fields=extra_fields)
        meta = body.get("metadata", {})
        trimmed: dict[str, Any] = {k: v for k, v in body.items() if k not in ("metadata", "status")}
        trimmed["metadata"] = {k: meta[k] for k in KEPT_METADATA if k in meta}
        return super().build(body=kopf.Body(cast(kopf.RawBody, trimmed)), extra_fields=extra_fields)
