"""A cheaper diff-base storage for kopf: the same essence, without deep-copying whole bodies.

kopf's AnnotationsDiffBaseStorage.build() deep-copies the entire object
(managedFields, status, every annotation) on each event, then throws most of it
away. Profiling 200 jobs showed that copy as the operator's largest CPU cost.
This subclass hands it only the parts that survive (everything but metadata and
status, plus the metadata it keeps), so the essence and the stored
last-handled-configuration are unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

import kopf

KEPT_METADATA = ("name", "namespace", "uid", "labels", "annotations")


class TrimmedDiffBaseStorage(kopf.AnnotationsDiffBaseStorage):
    def build(self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None) -> kopf.BodyEssence:
        if extra_fields:  # handlers on status fields need the full body
            return super().build(body=body, extra_fields=extra_fields)
        meta = body.get("metadata", {})
        trimmed: dict[str, Any] = {k: v for k, v in body.items() if k not in ("metadata", "status")}
        trimmed["metadata"] = {k: meta[k] for k in KEPT_METADATA if k in meta}
        return super().build(body=kopf.Body(cast(kopf.RawBody, trimmed)), extra_fields=extra_fields)
