"""HTTPS: the real server with a certificate made by openssl, a client that verifies it."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry
from statictrain_extender.main import tls_context
from statictrain_extender.scoring import Weights
from statictrain_extender.server import build_app
from statictrain_extender.settings import ExtenderSettings, SettingsError
from statictrain_extender.state import ClusterState

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")


def make_cert(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_https_healthz(tmp_path: Path) -> None:
    cert, key = make_cert(tmp_path)
    server_ctx = tls_context(ExtenderSettings(tls_cert_file=str(cert), tls_key_file=str(key)))
    assert server_ctx is not None
    client_ctx = ssl.create_default_context(cafile=str(cert))
    state = ClusterState()
    state.replace_nodes([])
    seen: dict[str, int] = {}

    async def main() -> None:
        runner = web.AppRunner(build_app(state, frozenset({"s"}), Weights(), CollectorRegistry()))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_ctx)
        await site.start()
        port = runner.addresses[0][1]
        try:
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"https://127.0.0.1:{port}/healthz", ssl=client_ctx) as resp,
            ):
                seen["status"] = resp.status
        finally:
            await runner.cleanup()

    asyncio.run(main())
    assert seen["status"] == 200


def test_plain_http_without_certificate() -> None:
    assert tls_context(ExtenderSettings()) is None


def test_unreadable_certificate_is_a_settings_error(tmp_path: Path) -> None:
    settings = ExtenderSettings(tls_cert_file=str(tmp_path / "missing.crt"), tls_key_file=str(tmp_path / "k"))
    with pytest.raises(SettingsError, match="cannot load TLS certificate"):
        tls_context(settings)
