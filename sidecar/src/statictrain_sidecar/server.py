"""The sidecar's HTTP endpoints (stdlib server, one thread per request).

GET  /metrics                   Prometheus exposition (OpenMetrics when the scraper asks for it)
GET  /healthz                   200 "ok", or 503 with the reason
POST /profile?steps=N           ask the trainer for a torch.profiler capture of N steps (202 + JSON)
GET  /profiles                  JSON list of requested, captured and expired profiles
GET  /profiles/<id>/<file>      download one captured file

The three profile endpoints need ``Authorization: Bearer <token>`` with the job's
profile token; without a configured token they answer 403 (profiling is off).
Every connection has a socket timeout; a request body must come with a valid
Content-Length of at most MAX_BODY_BYTES (chunked bodies are refused); a bad one
gets 400/411/413 and the connection is closed.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Callable
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from .profiles import ProfileError, ProfileRequests

__all__ = ["MAX_BODY_BYTES", "REQUEST_TIMEOUT_S", "SidecarHTTPServer", "make_server"]

_log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 10.0
"""Seconds a connection may stay silent (headers, body, or idle keep-alive) before it is closed."""
MAX_BODY_BYTES = 1 << 16
"""Largest request body read (no endpoint needs one; POST /profile takes its input in the query)."""
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
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: SidecarHTTPServer
    protocol_version = "HTTP/1.1"
    timeout = REQUEST_TIMEOUT_S  # StreamRequestHandler sets it on the connection's socket

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
        if len(raw) > 1 or not raw[0].strip().isdigit():
            self._refuse(400, f"Content-Length {', '.join(raw)!r}: give one whole number of bytes")
            return False
        length = int(raw[0])
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
            encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
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
