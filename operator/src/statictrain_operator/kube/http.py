"""``HttpKube``: the ``Kube`` port over the API server's REST interface, with aiohttp.

Why our own ~150 lines instead of kubernetes_asyncio: aiohttp is already in the
operator (kopf's watches run on it), the operator needs seven verbs on a handful
of resources as plain dicts (no model classes to build and throw away, which
was most of the CPU of the synchronous client at scale), and server-side apply
is one content type. One session (one connection pool) serves every part of
the operator on kopf's event loop; nothing runs in threads.

A session belongs to the event loop it was opened on: each loop gets its own,
``close()`` closes the running loop's, and one not closed that way is closed
when its loop shuts down its async generators (``asyncio.run`` and
``LoopThread`` do), so no loop leaves an open session behind.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import aiohttp

from .endpoint import Endpoint
from .port import ApiError, Resource

__all__ = ["HttpKube"]

MERGE_PATCH = "application/merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"  # JSON is YAML
TOKEN_REREAD_S = 60.0
PAGE = 500
# An answer is read into memory whole: one bigger than this (a page of 500 huge objects, or a server
# that never stops sending) is an error, not the operator's memory. A list that is still paging after
# this many pages (5 million objects) is a server that loops, not a cluster.
MAX_BODY_BYTES = 256 * 2**20
MAX_LIST_PAGES = 10_000


async def _close_at_shutdown(session: aiohttp.ClientSession) -> AsyncGenerator[None, None]:
    """Suspended until its loop shuts down its async generators, then closes ``session``."""
    try:
        yield
    finally:
        if not session.closed:
            await session.close()


def _ssl_context(ep: Endpoint) -> ssl.SSLContext | bool:
    if not ep.server.startswith("https"):
        return False
    ctx = ssl.create_default_context(cafile=ep.ca_path) if ep.ca_path else ssl.create_default_context()
    if ep.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if ep.certificate_path:
        ctx.load_cert_chain(ep.certificate_path, ep.private_key_path)
    return ctx


class HttpKube:
    """The real API server. Build it anywhere; its session opens on first use inside the running loop."""

    def __init__(self, endpoint: Endpoint, *, connections: int = 64, timeout_s: float = 30.0) -> None:
        self.endpoint = endpoint
        self.connections = connections
        # No total: waiting for a free pooled connection (many jobs at once) is not a failure; a stuck
        # connect or a server that stops answering is.
        self.timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeout_s, sock_read=timeout_s)
        self._ssl = _ssl_context(endpoint)
        self._sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}
        self._closers: dict[asyncio.AbstractEventLoop, AsyncGenerator[None, None]] = {}
        self._token: tuple[float, str | None] = (0.0, endpoint.token)

    # ------------------------------------------------------------------ plumbing

    def _auth(self) -> dict[str, str]:
        ep = self.endpoint
        if ep.token_path and time.monotonic() - self._token[0] > TOKEN_REREAD_S:
            with open(ep.token_path, encoding="utf-8") as f:
                self._token = (time.monotonic(), f.read().strip())
        token = self._token[1]
        if token:
            return {"Authorization": f"{ep.scheme or 'Bearer'} {token}"}
        if ep.username and ep.password:
            return {"Authorization": aiohttp.BasicAuth(ep.username, ep.password).encode()}
        return {}

    async def _open(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None or session.closed:
            for old in [lp for lp in self._sessions if lp.is_closed()]:  # forget loops that are gone
                self._sessions.pop(old, None)
                self._closers.pop(old, None)
            connector = aiohttp.TCPConnector(ssl=self._ssl, limit=self.connections)
            session = aiohttp.ClientSession(connector=connector, timeout=self.timeout)
            self._sessions[loop] = session
            closer = _close_at_shutdown(session)
            await anext(closer)  # registered with this loop: its shutdown_asyncgens() closes the session
            self._closers[loop] = closer
        return session

    async def close(self) -> None:
        """Close the running loop's session (a later call opens a new one)."""
        loop = asyncio.get_running_loop()
        self._sessions.pop(loop, None)
        closer = self._closers.pop(loop, None)
        if closer is not None:
            await closer.aclose()  # closes the session

    async def _call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> tuple[int, dict[str, Any]]:
        headers = {"Accept": "application/json", **self._auth()}
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body)
        session = await self._open()
        async with session.request(
            method, self.endpoint.server + path, params=params, data=data, headers=headers
        ) as resp:
            if (resp.content_length or 0) > MAX_BODY_BYTES:
                raise ApiError(
                    502, "ResponseTooLarge", f"{method} {path}: {resp.content_length} bytes > {MAX_BODY_BYTES}"
                )
            raw = bytearray()
            async for chunk in resp.content.iter_chunked(1 << 16):  # read(n) may stop early: read to the end
                raw += chunk
                if len(raw) > MAX_BODY_BYTES:
                    raise ApiError(502, "ResponseTooLarge", f"{method} {path}: more than {MAX_BODY_BYTES} bytes")
            text = raw.decode("utf-8", errors="replace")
            try:
                payload = json.loads(text) if text else {}
            except ValueError:
                payload = None
            if not isinstance(payload, dict):  # not JSON, or JSON that is not an object
                if resp.status < 300:
                    raise ApiError(502, "BadResponse", f"{method} {path}: not a JSON object: {text[:200]!r}")
                payload = {"message": text[:500]}
            return resp.status, payload

    @staticmethod
    def _raise(status: int, payload: Mapping[str, Any]) -> None:
        raise ApiError(status, str(payload.get("reason", "")), str(payload.get("message", payload)))

    @staticmethod
    def _page(payload: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str]:
        """A list page's objects and its continue token ("" on the last page), or an ApiError."""
        items = payload.get("items") or []
        meta = payload.get("metadata") or {}
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise ApiError(502, "BadList", "items is not a list of objects")
        cont = meta.get("continue") if isinstance(meta, dict) else None
        if not isinstance(meta, dict) or not isinstance(cont, str | None):
            raise ApiError(502, "BadContinue", f"metadata.continue is not text: {cont!r:.80}")
        return items, cont or ""

    # ------------------------------------------------------------------ the port

    async def get(self, res: Resource, namespace: str | None, name: str) -> dict[str, Any] | None:
        status, payload = await self._call("GET", res.path(namespace, name))
        if status == 404:
            return None
        if status >= 300:
            self._raise(status, payload)
        return payload

    async def list(
        self, res: Resource, namespace: str | None = None, *, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        params: dict[str, str] = {"limit": str(PAGE)}
        if label_selector:
            params["labelSelector"] = label_selector
        seen: set[str] = set()
        for _ in range(MAX_LIST_PAGES):
            status, payload = await self._call("GET", res.path(namespace), params=params)
            if status >= 300:
                self._raise(status, payload)
            page, cont = self._page(payload)
            for item in page:
                item.setdefault("apiVersion", res.api_version)
                item.setdefault("kind", res.kind)
                items.append(item)
            if not cont:
                return items
            if cont in seen:
                raise ApiError(
                    502, "BadContinue", f"{res.plural}: the continue token repeats, the list would never end"
                )
            seen.add(cont)
            params["continue"] = cont
        raise ApiError(502, "TooManyPages", f"{res.plural}: still paging after {MAX_LIST_PAGES} pages")

    async def create(self, res: Resource, body: Mapping[str, Any]) -> dict[str, Any] | None:
        namespace = (body.get("metadata") or {}).get("namespace")
        status, payload = await self._call("POST", res.path(namespace), body=dict(body))
        if status == 409:
            return None
        if status >= 300:
            self._raise(status, payload)
        return payload

    async def merge_patch(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        patch: Mapping[str, Any],
        *,
        subresource: str | None = None,
    ) -> dict[str, Any] | None:
        path = res.path(namespace, name, subresource)
        status, payload = await self._call("PATCH", path, body=dict(patch), content_type=MERGE_PATCH)
        if status == 404:
            return None
        if status >= 300:
            self._raise(status, payload)
        return payload

    async def apply(
        self, res: Resource, body: Mapping[str, Any], *, manager: str, subresource: str | None = None
    ) -> dict[str, Any] | None:
        meta = body["metadata"]
        path = res.path(meta.get("namespace"), meta["name"], subresource)
        params = {"fieldManager": manager, "force": "true"}
        status, payload = await self._call("PATCH", path, params=params, body=dict(body), content_type=APPLY_PATCH)
        if status == 404:
            return None
        if status >= 300:
            self._raise(status, payload)
        return payload

    async def delete(self, res: Resource, namespace: str | None, name: str, *, uid: str | None = None) -> bool:
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        if uid:
            options["preconditions"] = {"uid": uid}
        status, payload = await self._call("DELETE", res.path(namespace, name), body=options)
        if status in (404, 409):
            return False
        if status >= 300:
            self._raise(status, payload)
        return True
