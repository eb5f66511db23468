"""Watched objects without ``metadata.managedFields`` (controller-runtime's TransformStripManagedFields, for
kopf), and worker Jobs without their pod template (SPEC_KEPT).

managedFields is about half of every watched object's JSON here (a worker Job: 7.3 of 14.3 KB; a job: 1.7 of
3.3 KB) and nothing in the operator reads it, yet kopf keeps each decoded event alive while the object's
worker handles it: under a burst of new jobs those bodies are most of the operator's memory. kopf has no
transform hook, so ``install`` wraps the two module functions its watcher takes objects from, the listing
(``fetching.fetch_objs``) and the watch stream (``watching.watch_objs``), which ``watching`` looks up by name
at every (re)connect. A kopf without them keeps the fields (a warning says so; memory only, not correctness);
tests/unit/operator/test_watchtrim.py runs kopf's own ``continuous_watch`` to see that the wrap takes effect.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from . import views

log = logging.getLogger(__name__)

__all__ = ["SPEC_KEPT", "install", "strip"]

_MARK = "_statictrain_strips_managed_fields"


SPEC_KEPT: dict[tuple[str, str], tuple[str, ...]] = {("batch", "jobs"): views.JOB_SPEC_READ}
"""(API group, plural) -> the only spec fields kept of each watched object of that resource: a worker Job's
pod template is most of its size and no handler of Jobs reads it (the index keeps views.JOB_SPEC_READ). A
handler that needs more of a Job must change this first."""


def strip(obj: object, spec_kept: tuple[str, ...] | None = None) -> None:
    """Drop ``metadata.managedFields`` from one object, and every spec field not in ``spec_kept`` when given
    (in place; anything else is left as it is)."""
    if not isinstance(obj, dict):
        return
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    spec = obj.get("spec")
    if spec_kept is not None and isinstance(spec, dict):
        obj["spec"] = {k: spec[k] for k in spec_kept if k in spec}


def _kept(kwargs: dict[str, Any]) -> tuple[str, ...] | None:
    resource = kwargs.get("resource")
    return SPEC_KEPT.get((str(getattr(resource, "group", "")), str(getattr(resource, "plural", ""))))


def _listing(fetch: Callable[..., AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
    async def fetch_objs(**kwargs: Any) -> AsyncIterator[Any]:
        kept = _kept(kwargs)
        async for chunk, resource_version in fetch(**kwargs):
            for obj in chunk:
                strip(obj, kept)
            yield chunk, resource_version

    setattr(fetch_objs, _MARK, True)
    return fetch_objs


def _stream(watch: Callable[..., AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
    async def watch_objs(**kwargs: Any) -> AsyncIterator[Any]:
        kept = _kept(kwargs)
        async for event in watch(**kwargs):
            if isinstance(event, dict):
                strip(event.get("object"), kept)
            yield event

    setattr(watch_objs, _MARK, True)
    return watch_objs


def install() -> bool:
    """Wrap kopf's listing and watch stream (once); False, with a warning, when this kopf lacks them."""
    try:
        from kopf._cogs.clients import fetching, watching  # noqa: PLC0415 (kopf's internals, checked here)
    except ImportError as e:
        log.warning("managedFields are kept in memory: kopf's watch modules are not where expected (%s)", e)
        return False
    wraps = ((fetching, "fetch_objs", _listing), (watching, "watch_objs", _stream))
    if not all(callable(getattr(module, name, None)) for module, name, _ in wraps):
        log.warning("managedFields are kept in memory: this kopf lacks fetching.fetch_objs or watching.watch_objs")
        return False
    for module, name, wrap in wraps:
        current = getattr(module, name)
        if not getattr(current, _MARK, False):
            setattr(module, name, wrap(current))
    return True
