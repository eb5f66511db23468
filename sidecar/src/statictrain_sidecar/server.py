"""The sidecar's HTTP endpoints (stdlib server, one thread per request).

GET  /metrics                   Prometheus exposition (OpenMetrics when the scraper asks for it)
GET  /healthz                   200 "ok", or 503 with the reason
POST /profile?steps=N           ask the trainer for a torch.profiler capture of N steps (202 + JSON)
GET  /profiles                  JSON list of requested, captured and expired profiles
GET  /profiles/<id>/<file>      download one captured file

The three profile endpoints need ``Authorization: Bearer <token>`` with the job's
profile token; without a configured token they answer 403 (profiling is off).

Bounds: a connection silent for REQUEST_TIMEOUT_S (idle keep-alive, or within a
request) is closed; a request (line, headers and body) must arrive within
REQUEST_DEADLINE_S of its first byte, however it trickles in (slowloris); at most
MAX_CONNECTIONS are served at once, more are answered 503 and closed. A request
body must come with one Content-Length of ASCII digits, at most MAX_BODY_BYTES
(chunked bodies are refused); a bad one gets 400/411/413 and the connection is
closed. Bodies are read and dropped, never decoded (Content-Encoding is ignored);
answers are never compressed. A connection that breaks is logged at debug level,
never with a traceback.
"""

from __future__ import annotations

import hmac
import io
import json
import logging
import re
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from .profiles import ProfileError, ProfileRequests

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_CONNECTIONS",
    "REQUEST_DEADLINE_S",
    "REQUEST_TIMEOUT_S",
    "SidecarHTTPServer",
    "make_server",
]

_log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 10.0
"""Seconds a connection may stay silent (headers, body, or idle keep-alive) before it is closed."""
REQUEST_DEADLINE_S = 10.0
"""Seconds from a request's first byte by which its line, headers and body must all have arrived."""
MAX_BODY_BYTES = 1 << 16
"""Largest request body read (no endpoint needs one; POST /profile takes its input in the query)."""
MAX_CONNECTIONS = 32
"""Connections served at once (one thread each); more are answered 503 and closed."""
_CONTENT_LENGTH = re.compile(r"[0-9]{1,18}")
_VERSION = re.compile(r"[0-9]{1,4}(\.[0-9]{1,4}){0,3}")
_BUSY_BODY = f"more than {MAX_CONNECTIONS} connections at once: try again in a moment\n".encode()
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"
    + f"Content-Length: {len(_BUSY_BODY)}\r\n\r\n".encode()
    + _BUSY_BODY
)
PROFILING_OFF = (
    b"profiling over HTTP is off for this job: the operator enables it with a per-job token "
    b"(STATICTRAIN_PROFILE_TOKEN_FILE on the sidecar)\n"
)


class SidecarHTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer carrying what the handler serves."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        registry: CollectorRegistry,
        health: Callable[[], tuple[bool, str]],
        profiles: ProfileRequests | None,
        *,
        profile_token: str | None = None,
    ) -> None:
        self.registry = registry
        self.health = health
        self.profiles = profiles
        self.profile_token = profile_token
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__(address, _Handler)

    def process_request(self, request: socket.socket, client_address: tuple[str, int]) -> None:  # type: ignore[override]
        """A thread for the connection while fewer than MAX_CONNECTIONS are served; else 503 at once."""
        if not self._slots.acquire(blocking=False):
            try:
                request.settimeout(0)  # a fresh socket's buffer takes the few bytes; never wait on it
                request.send(_BUSY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: socket.socket, client_address: tuple[str, int]) -> None:  # type: ignore[override]
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: object, client_address: object) -> None:
        """One line, never a traceback: a broken connection at debug level, anything else as an error."""
        error = sys.exc_info()[1]
        peer = client_address[0] if isinstance(client_address, tuple) else client_address
        if isinstance(error, OSError):
            _log.debug("connection from %s ended: %s", peer, error)
        else:
            _log.error("request from %s failed: %s: %s", peer, type(error).__name__, error)


class _DeadlineReader(io.RawIOBase):
    """The connection's read side: each read waits at most the idle timeout, and, once ``deadline``
    (monotonic seconds) is set, no later than it."""

    def __init__(self, sock: socket.socket, idle_s: float) -> None:
        super().__init__()
        self._sock = sock
        self._idle_s = idle_s
        self.deadline: float | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        wait = self._idle_s
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"request not received within {REQUEST_DEADLINE_S:g} s")
            wait = min(wait, left)
        self._sock.settimeout(wait)
        try:
            return self._sock.recv_into(buffer)
        finally:
            self._sock.settimeout(self._idle_s)  # writes wait the idle timeout, whatever the deadline left


class _Handler(BaseHTTPRequestHandler):
    server: SidecarHTTPServer
    protocol_version = "HTTP/1.1"
    timeout = REQUEST_TIMEOUT_S  # StreamRequestHandler sets it on the connection's socket

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the buffered reader StreamRequestHandler made; the socket stays open
        self._reader = _DeadlineReader(self.connection, self.timeout)
        self._buffered = io.BufferedReader(self._reader)
        self.rfile = self._buffered

    def handle_one_request(self) -> None:
        """Wait (idle timeout) for a request's first byte, then give the whole request its deadline."""
        try:
            if not self._buffered.peek(1):
                self.close_connection = True
                return
        except OSError:  # TimeoutError: idle too long; a reset
            self.close_connection = True
            return
        self._reader.deadline = time.monotonic() + REQUEST_DEADLINE_S
        try:
            super().handle_one_request()
        finally:
            self._reader.deadline = None

    def log_message(self, format: str, *args: object) -> None:
        _log.debug("%s " + format, self.address_string(), *args)

    def _send(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _refuse(self, status: int, message: str) -> None:
        """Answer and close the connection (what follows on it cannot be trusted)."""
        self.close_connection = True
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(message) + 1))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(message.encode() + b"\n")

    def _body_ok(self) -> bool:
        """Read (and drop) the request body; False once a bad one was refused."""
        if self.headers.get("Transfer-Encoding"):
            self._refuse(411, "chunked request bodies are not accepted: send a Content-Length")
            return False
        raw = self.headers.get_all("Content-Length") or []
        if not raw:
            return True
        value = raw[0].strip(" \t")
        if len(raw) > 1 or not _CONTENT_LENGTH.fullmatch(value):
            shown = ", ".join(raw)[:40]
            self._refuse(400, f"Content-Length {shown!r}: give one whole number of bytes, in ASCII digits")
            return False
        length = int(value)
        if length > MAX_BODY_BYTES:
            self._refuse(413, f"Content-Length {length}: bodies of at most {MAX_BODY_BYTES} bytes")
            return False
        if length:
            try:
                got = len(self.rfile.read(length))
            except TimeoutError:
                got = -1
            if got != length:
                self.close_connection = True
                return False
        return True

    def _authorized(self) -> bool:
        """The profile endpoints: the job's token, compared in constant time; else 403/401 sent."""
        token = self.server.profile_token
        if token is None:
            self._send(403, PROFILING_OFF)
            return False
        given = self.headers.get("Authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), token.encode()):
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Bearer realm="statictrain-sidecar"')
            body = b"send the job's profile token as 'Authorization: Bearer <token>'\n"
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            return False
        return True

    def _json(self, status: int, data: object) -> None:
        self._send(status, (json.dumps(data, indent=1) + "\n").encode(), "application/json")

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        if not self._body_ok():
            return
        path = urlsplit(self.path).path
        if (path == "/profiles" or path.startswith("/profiles/")) and not self._authorized():
            return
        if path == "/metrics":
            encoder, content_type = choose_encoder(_readable_accept(self.headers.get("Accept", "")))
            self._send(200, encoder(self.server.registry), content_type)
        elif path == "/healthz":
            ok, reason = self.server.health()
            self._send(200 if ok else 503, (reason + "\n").encode())
        elif path == "/profiles":
            profiles = self._profiles()
            if profiles is not None:
                self._json(200, [asdict(p) for p in profiles.listing()])
        elif path.startswith("/profiles/"):
            self._profile_file(path)
        else:
            self._send(404, b"not found: try /metrics, /healthz, POST /profile?steps=N, /profiles\n")

    def do_POST(self) -> None:
        if not self._body_ok():
            return
        url = urlsplit(self.path)
        if url.path != "/profile":
            self._send(404, b"not found: POST /profile?steps=N\n")
            return
        if not self._authorized():
            return
        profiles = self._profiles()
        if profiles is None:
            return
        steps = parse_qs(url.query).get("steps", [None])[0]
        try:
            t = profiles.request(steps)
        except ProfileError as e:
            self._send(e.status, (str(e) + "\n").encode())
            return
        self._json(
            202,
            {
                "id": t.id,
                "steps": t.steps,
                "request": str(t.request),
                "output": str(t.output),
                "fetch": f"/profiles/{t.id}/",
            },
        )

    def _profiles(self) -> ProfileRequests | None:
        if self.server.profiles is None:
            self._send(503, b"no trainer channel: set STATICTRAIN_STATS_DIR on the sidecar\n")
        return self.server.profiles

    def _profile_file(self, path: str) -> None:
        profiles = self._profiles()
        if profiles is None:
            return
        parts = unquote(path[len("/profiles/") :]).split("/", 1)
        if len(parts) != 2 or not parts[1]:
            self._send(404, b"use /profiles/<id>/<file>; GET /profiles lists them\n")
            return
        try:
            src, size = profiles.open_file(parts[0], parts[1])
        except ProfileError as e:
            self._send(e.status, (str(e) + "\n").encode())
            return
        with src:
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            left = size  # exactly what Content-Length said, even if the file grows meanwhile
            while left > 0 and self.command != "HEAD":
                chunk = src.read(min(left, 1 << 16))
                if not chunk:
                    self.close_connection = True  # shrank meanwhile: the client sees a short body
                    break
                self.wfile.write(chunk)
                left -= len(chunk)


def _readable_accept(header: str) -> str:
    """The media ranges of an Accept header whose ``version`` parameter (if any) is digits and dots:
    prometheus_client's choose_encoder raises on other versions, and echoes the version it takes."""
    kept = []
    for media_range in header.split(","):
        params = (p.strip().split("=", 1) for p in media_range.split(";")[1:] if "=" in p)
        if all(_VERSION.fullmatch(value) for key, value in params if key == "version"):
            kept.append(media_range)
    return ",".join(kept)


def make_server(
    bind: str,
    port: int,
    registry: CollectorRegistry,
    health: Callable[[], tuple[bool, str]],
    profiles: ProfileRequests | None,
    *,
    profile_token: str | None = None,
) -> SidecarHTTPServer:
    """Bind now (port 0 picks a free port: read ``server.server_address``); serve with serve_forever().

    ``profile_token``: the bearer token of the profile endpoints; None turns them off (403)."""
    return SidecarHTTPServer((bind, port), registry, health, profiles, profile_token=profile_token)
