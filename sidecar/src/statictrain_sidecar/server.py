"""The sidecar's HTTP endpoints (stdlib server, one thread per request).

GET  /metrics                   Prometheus exposition (OpenMetrics when the scraper asks for it)
GET  /healthz                   200 "ok", or 503 with the reason
POST /profile?steps=N           ask the trainer for a torch.profiler capture of N steps (202 + JSON)
GET  /profiles                  JSON list of requested, captured and expired profiles
GET  /profiles/<id>/<file>      download one captured file
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from .profiles import ProfileError, ProfileRequests

__all__ = ["SidecarHTTPServer", "make_server"]

_log = logging.getLogger(__name__)


class SidecarHTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer carrying what the handler serves."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        registry: CollectorRegistry,
        health: Callable[[], tuple[bool, str]],
        profiles: ProfileRequests | None,
    ) -> None:
        self.registry = registry
        self.health = health
        self.profiles = profiles
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: SidecarHTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        _log.debug("%s " + format, self.address_string(), *args)

    def _send(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, data: object) -> None:
        self._send(status, (json.dumps(data, indent=1) + "\n").encode(), "application/json")

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
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
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(min(length, 1 << 16))
        if url.path != "/profile":
            self._send(404, b"not found: POST /profile?steps=N\n")
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
            f = profiles.file(parts[0], parts[1])
        except ProfileError as e:
            self._send(e.status, (str(e) + "\n").encode())
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(f.stat().st_size))
        self.end_headers()
        if self.command != "HEAD":
            with open(f, "rb") as src:
                shutil.copyfileobj(src, self.wfile)


def make_server(
    bind: str,
    port: int,
    registry: CollectorRegistry,
    health: Callable[[], tuple[bool, str]],
    profiles: ProfileRequests | None,
) -> SidecarHTTPServer:
    """Bind now (port 0 picks a free port: read ``server.server_address``); serve with serve_forever()."""
    return SidecarHTTPServer((bind, port), registry, health, profiles)
