"""A fault-injecting proxy in front of the local cluster's real API server (tests of cases 4 and 5).

Clients talk plain HTTP/1.1 to ``127.0.0.1:<port>`` (``write_kubeconfig`` makes a
kubeconfig for that); the proxy forwards each request over TLS with the cluster's
admin client certificate, one request per upstream connection (``Connection: close``),
and streams the answer back, so watches work. Faults, decided per request:

- ``write_faults``: for writes (POST, PUT, PATCH, DELETE), a share of them answered
  with a status instead of being forwarded: 429 (with ``Retry-After: 1``), 503, 409
  (a Kubernetes ``Status`` body each); ``after_write`` answers 503 *after* forwarding
  the write (it happened, the client is told it failed: the duplicate-making case);
  ``reset`` closes the connection without an answer (the write not made).
- ``read_faults``: the same for reads (GET, including watches): 429, 503, ``reset``.
- ``latency_s``: every request waits that long before it is forwarded.
- ``outage()``: while in effect every connection, open ones (watches) included, is
  closed at once, as when the API server is down.

Decisions come from a seeded random generator; ``counts`` says what was done.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import ssl
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

__all__ = ["AFTER_WRITE", "RESET", "ApiServer", "FaultProxy", "api_server", "write_kubeconfig"]

WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
AFTER_WRITE = "after_write"
"""Fault key: forward the write, then answer 503 (the write happened)."""
RESET = "reset"
"""Fault key: close the connection without an answer (nothing forwarded)."""
_REASONS = {409: "Conflict", 429: "TooManyRequests", 503: "ServiceUnavailable"}
_MAX_HEAD = 64 * 1024


class FaultProxy:
    """Started with ``start()`` on a thread of its own (its own event loop); ``stop()`` ends it."""

    def __init__(self, kubeconfig: Path, *, write_faults: Mapping[int | str, float] | None = None,
                 read_faults: Mapping[int | str, float] | None = None, latency_s: float = 0.0,
                 seed: int = 0) -> None:
        self.write_faults = _checked("write_faults", write_faults, {409, 429, 503, AFTER_WRITE, RESET})
        self.read_faults = _checked("read_faults", read_faults, {429, 503, RESET})
        if latency_s < 0:
            raise ValueError(f"latency_s must be >= 0, got {latency_s}")
        self.latency_s = latency_s
        self._open: set[asyncio.Task[None]] = set()
        self.counts: Counter[str] = Counter()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._down = False
        api = api_server(kubeconfig)
        self._upstream = (api.host, api.port)
        self._ssl = ssl.create_default_context(cafile=api.ca_file)
        self._ssl.load_cert_chain(api.cert_file, api.key_file)
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # ---- control ------------------------------------------------------------------
    def start(self) -> FaultProxy:
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="faultproxy", daemon=True)
        self._thread.start()
        if not ready.wait(30):
            raise RuntimeError("the fault proxy did not start listening within 30 s")
        return self

    def stop(self) -> None:
        if self._thread is None:
            return

        async def close() -> None:
            if self._server is not None:
                self._server.close()
                await self._server.wait_closed()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await asyncio.sleep(0.1)  # the closed transports' callbacks run before the loop stops

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._loop.close()
        self._thread = None

    @contextlib.contextmanager
    def outage(self) -> Iterator[None]:
        """Every connection is closed at once while the block runs (the API server is unreachable)."""
        self._down = True
        if self._thread is not None:
            asyncio.run_coroutine_threadsafe(self._cut(), self._loop).result(30)
        try:
            yield
        finally:
            self._down = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _cut(self) -> None:
        """End every connection being served (open watches too)."""
        for task in list(self._open):
            task.cancel()
        await asyncio.gather(*self._open, return_exceptions=True)

    # ---- serving ------------------------------------------------------------------
    def _decide(self, method: str) -> str:
        faults = self.write_faults if method in WRITES else self.read_faults
        if not faults:
            return "forward"
        with self._lock:
            x = self._rng.random()
        for fault, share in faults.items():
            if x < share:
                return str(fault)
            x -= share
        return "forward"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._open.add(task)
        try:
            if self._down:
                self.counts["outage"] += 1
                return
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                return
            if len(head) > _MAX_HEAD:
                return
            lines = head.decode("latin-1").split("\r\n")
            method = lines[0].split(" ", 1)[0].upper()
            headers = [ln for ln in lines[1:] if ln]
            length = next((int(h.split(":", 1)[1]) for h in headers if h.lower().startswith("content-length:")), 0)
            body = await reader.readexactly(length) if length else b""
            fault = self._decide(method)
            self.counts[fault] += 1
            if fault == RESET:
                return
            if self.latency_s:
                await asyncio.sleep(self.latency_s)
            if fault in ("409", "429", "503"):
                writer.write(_status_response(int(fault)))
                await writer.drain()
                return
            kept = [h for h in headers if h.split(":", 1)[0].strip().lower() not in ("host", "connection")]
            request = "\r\n".join([lines[0], f"Host: {self._upstream[0]}:{self._upstream[1]}", *kept,
                                   "Connection: close", "", ""]).encode("latin-1") + body
            up_reader, up_writer = await asyncio.open_connection(*self._upstream, ssl=self._ssl)
            try:
                up_writer.write(request)
                await up_writer.drain()
                if fault == AFTER_WRITE:
                    await up_reader.read()  # the write is done; the client hears it failed
                    writer.write(_status_response(503))
                    await writer.drain()
                    return
                while chunk := await up_reader.read(65536):
                    writer.write(chunk)
                    await writer.drain()
            finally:
                up_writer.close()
                with contextlib.suppress(ConnectionError, OSError, ssl.SSLError):
                    await up_writer.wait_closed()
        except (ConnectionError, OSError, asyncio.IncompleteReadError, ValueError):
            self.counts["connection_error"] += 1
        except asyncio.CancelledError:
            self.counts["cut"] += 1  # an outage began (or the proxy stops)
        finally:
            if task is not None:
                self._open.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()


def _checked(what: str, faults: Mapping[int | str, float] | None, allowed: set[int | str]) -> dict[int | str, float]:
    out = dict(faults or {})
    if any(k not in allowed for k in out) or sum(out.values()) > 1 or any(v < 0 for v in out.values()):
        names = ", ".join(sorted(str(k) for k in allowed))
        raise ValueError(f"{what} {out}: shares (summing to at most 1) of {names}")
    return out


def _status_response(code: int) -> bytes:
    reason = _REASONS[code]
    body = json.dumps({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f"injected by the fault proxy: {reason}", "reason": reason, "code": code,
    }).encode()
    extra = "Retry-After: 1\r\n" if code == 429 else ""
    head = (f"HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"{extra}Connection: close\r\n\r\n")
    return head.encode() + body


@dataclass(frozen=True)
class ApiServer:
    """Where a kubeconfig's API server is, and the files of its CA and client certificate."""

    host: str
    port: int
    ca_file: str
    cert_file: str
    key_file: str


def api_server(kubeconfig: Path) -> ApiServer:
    """The first cluster and user of a kubeconfig that names its certificates by file (as kwokctl writes)."""
    cfg: dict[str, Any] = yaml.safe_load(kubeconfig.read_text())
    cluster = cfg["clusters"][0]["cluster"]
    user = cfg["users"][0]["user"]
    server = urlsplit(cluster["server"])
    try:
        return ApiServer(server.hostname or "", server.port or 443, cluster["certificate-authority"],
                         user["client-certificate"], user["client-key"])
    except KeyError as e:
        raise ValueError(f"{kubeconfig}: needs certificate-authority, client-certificate and client-key files "
                         f"(missing {e})") from None


def write_kubeconfig(proxy: FaultProxy, path: Path) -> Path:
    """A kubeconfig for clients of the proxy: plain HTTP, no credentials (the proxy adds them)."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "faultproxy",
        "clusters": [{"name": "faultproxy", "cluster": {"server": proxy.url}}],
        "users": [{"name": "faultproxy", "user": {}}],
        "contexts": [{"name": "faultproxy", "context": {"cluster": "faultproxy", "user": "faultproxy"}}],
    }))
    return path
