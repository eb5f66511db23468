"""The operator's probe of the extender against the real extender app over plain HTTP, HTTPS and mutual TLS."""

from __future__ import annotations

import asyncio
import shutil
import ssl
from pathlib import Path

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry
from statictrain_extender.main import tls_context
from statictrain_extender.scoring import Weights
from statictrain_extender.server import build_app
from statictrain_extender.settings import ExtenderSettings
from statictrain_extender.state import ClusterState
from statictrain_operator.loops import probe_extender

from ..extender.test_tls import make_ca, signed


def probe_while_serving(server_ctx: ssl.SSLContext | None, path: str, tls_dir: str = "",
                        synced: bool = True, mutual: bool = False) -> tuple[bool, str]:
    async def main() -> tuple[bool, str]:
        state = ClusterState()
        if synced:
            state.replace_nodes([])
        app = build_app(state, frozenset({"s"}), Weights(), CollectorRegistry(), client_certificate_required=mutual)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_ctx).start()
        port = runner.addresses[0][1]
        scheme = "https" if server_ctx else "http"
        try:
            return await asyncio.to_thread(probe_extender, f"{scheme}://127.0.0.1:{port}{path}", 2.0, tls_dir)
        finally:
            await runner.cleanup()

    return asyncio.run(main())


def test_plain_http_up_and_an_unsynced_cache_or_a_closed_port_is_down() -> None:
    assert probe_while_serving(None, "/healthz") == (True, "HTTP 200")
    ok, detail = probe_while_serving(None, "/healthz", synced=False)
    assert not ok and detail.startswith("HTTP 503") and "nodesSynced" in detail
    ok, detail = probe_extender("http://127.0.0.1:1/healthz", 1.0)
    assert not ok and "ConnectionRefusedError" in detail


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_under_mutual_tls_the_ca_alone_reads_healthz_and_nothing_else(tmp_path: Path) -> None:
    """The operator holds no client certificate: /healthz answers it, the scheduling endpoints do not."""
    ca = make_ca(tmp_path, "ca")
    server = signed(tmp_path, "server", ca, "DNS:localhost,IP:127.0.0.1")
    server_ctx = tls_context(
        ExtenderSettings(tls_cert_file=str(server[0]), tls_key_file=str(server[1]), tls_client_ca_file=str(ca[0]))
    )
    ca_only = tmp_path / "ca-only"
    ca_only.mkdir()
    (ca_only / "ca.crt").write_bytes(ca[0].read_bytes())
    assert probe_while_serving(server_ctx, "/healthz", str(ca_only), mutual=True) == (True, "HTTP 200")
    ok, detail = probe_while_serving(server_ctx, "/metrics", str(ca_only), mutual=True)
    assert not ok and detail.startswith("HTTP 403")
    plain_https = tls_context(ExtenderSettings(tls_cert_file=str(server[0]), tls_key_file=str(server[1])))
    assert probe_while_serving(plain_https, "/healthz", str(ca_only)) == (True, "HTTP 200")
    ok, detail = probe_while_serving(plain_https, "/healthz")  # the system CAs do not know this CA
    assert not ok and "CERTIFICATE_VERIFY_FAILED" in detail
