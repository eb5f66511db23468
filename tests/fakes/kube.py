"""``FakeKube``: the ``Kube`` port (``statictrain_operator.kube.port``) in memory, for the unit tests.

It is checked against the real API server by tests/integration/operator/test_kube_contract.py
(the same cases run against both). What it models, and what it does not:

- 404/409 answers exactly as the port documents them; uid, resourceVersion,
  creationTimestamp, generateName;
- ``metadata.generation`` moves on a change outside metadata and status;
  a write to the status subresource changes only status, a write to the
  object never changes status (the CRD's status subresource);
- JSON merge patch (None deletes a key);
- server-side apply per field manager at the granularity the operator uses:
  top-level fields of the applied section, and entries of list-maps (status.conditions,
  keyed by type). Fields a manager applied before and leaves out are removed
  unless another manager applied them too. Field ownership of merge patches is not modelled;
- label selectors ``k=v``, ``k!=v``, ``k`` (comma = and);
- no garbage collector, no controllers: deleting an object deletes only it.
"""

from __future__ import annotations

import copy
import itertools
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from statictrain_operator.kube.port import ApiError, Resource

__all__ = ["LIST_MAP_KEYS", "FakeKube", "matches", "merge"]

LIST_MAP_KEYS: dict[str, str] = {"conditions": "type"}
"""List fields merged by key under server-side apply (the CRD's x-kubernetes-list-map-keys)."""

Key = tuple[str, str, str]  # (resource path, namespace, name)


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, Mapping) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge(out.get(k), v)
    return out


def matches(labels: Mapping[str, str], selector: str | None) -> bool:
    """Whether ``labels`` satisfy an equality-based label selector."""
    for raw in (selector or "").split(","):
        term = raw.strip()
        if not term:
            continue
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.split("=", 1)
            if labels.get(k) != v.lstrip("="):
                return False
        elif term not in labels:
            return False
    return True


def _owned_paths(section: Mapping[str, Any]) -> set[tuple[str, str]]:
    """(field, list-map key or "") of an applied section."""
    paths: set[tuple[str, str]] = set()
    for field, value in section.items():
        key = LIST_MAP_KEYS.get(field)
        if key and isinstance(value, list):
            paths |= {(field, str(item.get(key))) for item in value}
            paths.add((field, ""))
        else:
            paths.add((field, ""))
    return paths


class FakeKube:
    """In-memory API server. ``writes`` records every successful write as "verb Kind[/subresource]"."""

    def __init__(self, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.clock = clock
        self.objects: dict[Key, dict[str, Any]] = {}
        self.owners: dict[tuple[Key, str], dict[str, set[tuple[str, str]]]] = {}
        """(object, section) -> manager -> paths it applied."""
        self.writes: list[str] = []
        self._rv = itertools.count(1)

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _key(res: Resource, namespace: str | None, name: str) -> Key:
        return (res.path(), (namespace or "") if res.namespaced else "", name)

    def _bump(self, obj: dict[str, Any]) -> None:
        obj["metadata"]["resourceVersion"] = str(next(self._rv))

    def _out(self, obj: dict[str, Any] | None) -> dict[str, Any] | None:
        return copy.deepcopy(obj) if obj is not None else None

    def _record(self, verb: str, res: Resource, subresource: str | None) -> None:
        self.writes.append(f"{verb} {res.kind}" + (f"/{subresource}" if subresource else ""))

    @staticmethod
    def _spec_like(obj: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in obj.items() if k not in ("metadata", "status")}

    # ------------------------------------------------------------------ the port

    async def get(self, res: Resource, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self._out(self.objects.get(self._key(res, namespace, name)))

    async def list(
        self, res: Resource, namespace: str | None = None, *, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        out = []
        for (path, ns, _name), obj in sorted(self.objects.items()):
            if path != res.path() or (namespace and res.namespaced and ns != namespace):
                continue
            if matches((obj.get("metadata") or {}).get("labels") or {}, label_selector):
                out.append(copy.deepcopy(obj))
        return out

    async def create(self, res: Resource, body: Mapping[str, Any]) -> dict[str, Any] | None:
        obj = copy.deepcopy(dict(body))
        meta = obj.setdefault("metadata", {})
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise ApiError(422, "Invalid", "metadata.name or metadata.generateName is required")
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        key = self._key(res, meta.get("namespace"), meta["name"])
        if key in self.objects:
            return None
        obj.setdefault("apiVersion", res.api_version)
        obj.setdefault("kind", res.kind)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = self.clock().strftime("%Y-%m-%dT%H:%M:%SZ")
        meta["generation"] = 1
        obj.pop("status", None)  # status is written through the status subresource only
        self._bump(obj)
        self.objects[key] = obj
        self._record("create", res, None)
        return self._out(obj)

    async def merge_patch(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        patch: Mapping[str, Any],
        *,
        subresource: str | None = None,
    ) -> dict[str, Any] | None:
        key = self._key(res, namespace, name)
        obj = self.objects.get(key)
        if obj is None:
            return None
        if subresource == "status":
            new = {**obj, "status": merge(obj.get("status") or {}, patch.get("status") or {})}
        else:
            new = merge(obj, {k: v for k, v in patch.items() if k != "status"})
        self._store(key, obj, new)
        self._record("patch", res, subresource)
        return self._out(self.objects[key])

    async def apply(
        self, res: Resource, body: Mapping[str, Any], *, manager: str, subresource: str | None = None
    ) -> dict[str, Any] | None:
        meta = body["metadata"]
        key = self._key(res, meta.get("namespace"), meta["name"])
        obj = self.objects.get(key)
        if obj is None:
            if subresource:
                return None
            raise ApiError(422, "Invalid", "FakeKube applies only to existing objects")
        section_name = "status" if subresource == "status" else "spec"
        applied: Mapping[str, Any] = body.get(section_name) or {}
        owners = self.owners.setdefault((key, section_name), {})
        before = owners.get(manager, set())
        now = _owned_paths(applied)
        others = set().union(*(p for m, p in owners.items() if m != manager))
        section = copy.deepcopy(obj.get(section_name) or {})
        for field, item in before - now - others:
            list_key = LIST_MAP_KEYS.get(field)
            if item and list_key and isinstance(section.get(field), list):
                section[field] = [e for e in section[field] if str(e.get(list_key)) != item]
            elif not item and not (list_key and any(f == field and i for f, i in now | others)):
                section.pop(field, None)
        for field, value in applied.items():
            list_key = LIST_MAP_KEYS.get(field)
            if list_key and isinstance(value, list):
                merged = {str(e.get(list_key)): e for e in section.get(field) or []}
                merged.update({str(e.get(list_key)): copy.deepcopy(e) for e in value})
                section[field] = list(merged.values())
            else:
                section[field] = copy.deepcopy(value)
        for field in [f for f, v in section.items() if LIST_MAP_KEYS.get(f) and v == []]:
            section.pop(field)
        owners[manager] = now
        new = {**obj, section_name: section}
        self._store(key, obj, new)
        self._record("apply", res, subresource)
        return self._out(self.objects[key])

    async def delete(self, res: Resource, namespace: str | None, name: str, *, uid: str | None = None) -> bool:
        key = self._key(res, namespace, name)
        obj = self.objects.get(key)
        if obj is None or (uid and obj["metadata"].get("uid") != uid):
            return False
        del self.objects[key]
        for section in ("status", "spec"):
            self.owners.pop((key, section), None)
        self._record("delete", res, None)
        return True

    def _store(self, key: Key, old: dict[str, Any], new: dict[str, Any]) -> None:
        if new == old:
            return
        if self._spec_like(new) != self._spec_like(old):
            new["metadata"] = {**new["metadata"], "generation": int(old["metadata"].get("generation", 1)) + 1}
        self._bump(new)
        self.objects[key] = new
