"""HTTPS: the real server with a certificate made by openssl, a client that verifies it."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
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


@contextlib.asynccontextmanager
async def serving(server_ctx: ssl.SSLContext, *, mutual: bool = False) -> AsyncIterator[int]:
    """The real extender app over HTTPS on a free local port (an empty, synced node cache); ``mutual`` as
    main.make_app sets it when a client CA is configured."""
    state = ClusterState()
    state.replace_nodes([])
    app = build_app(state, frozenset({"s"}), Weights(), CollectorRegistry(), client_certificate_required=mutual)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_ctx).start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()


def make_cert(tmp_path: Path) -> tuple[Path, Path]:
    return self_signed(tmp_path, "tls", "localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1")


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def self_signed(d: Path, name: str, cn: str, *extra: str) -> tuple[Path, Path]:
    cert, key = d / f"{name}.crt", d / f"{name}.key"
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={cn}", *extra,
            "-keyout", str(key), "-out", str(cert))
    return cert, key


def test_https_healthz(tmp_path: Path) -> None:
    cert, key = make_cert(tmp_path)
    server_ctx = tls_context(ExtenderSettings(tls_cert_file=str(cert), tls_key_file=str(key)))
    assert server_ctx is not None
    client_ctx = ssl.create_default_context(cafile=str(cert))
    seen: dict[str, int] = {}

    async def main() -> None:
        async with (
            serving(server_ctx) as port,
            aiohttp.ClientSession() as session,
            session.get(f"https://127.0.0.1:{port}/healthz", ssl=client_ctx) as resp,
        ):
            seen["status"] = resp.status

    asyncio.run(main())
    assert seen["status"] == 200


def test_plain_http_without_certificate() -> None:
    assert tls_context(ExtenderSettings()) is None


def test_unreadable_certificate_is_a_settings_error(tmp_path: Path) -> None:
    settings = ExtenderSettings(tls_cert_file=str(tmp_path / "missing.crt"), tls_key_file=str(tmp_path / "k"))
    with pytest.raises(SettingsError, match="cannot load TLS certificate"):
        tls_context(settings)


def make_ca(d: Path, name: str) -> tuple[Path, Path]:
    return self_signed(d, name, name)


def signed(d: Path, name: str, ca: tuple[Path, Path], san: str) -> tuple[Path, Path]:
    cert, key, csr, ext = d / f"{name}.crt", d / f"{name}.key", d / f"{name}.csr", d / f"{name}.ext"
    ext.write_text(f"subjectAltName={san}\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(csr))
    openssl(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(ca[0]),
        "-CAkey",
        str(ca[1]),
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        str(ext),
        "-out",
        str(cert),
    )
    return cert, key


def test_mutual_tls_admits_only_clients_with_a_certificate_from_the_client_ca(tmp_path: Path) -> None:
    """The scheduler (certificate from the client CA) is served; a stranger's certificate fails the handshake;
    a client with no certificate reads /healthz only (the kubelet's probe, the operator's): 403 elsewhere."""
    ca = make_ca(tmp_path, "ca")
    server = signed(tmp_path, "server", ca, "DNS:localhost,IP:127.0.0.1")
    scheduler = signed(tmp_path, "scheduler", ca, "DNS:statictrain-scheduler")
    stranger = make_ca(tmp_path, "stranger")  # self-signed: not from the client CA
    server_ctx = tls_context(
        ExtenderSettings(tls_cert_file=str(server[0]), tls_key_file=str(server[1]), tls_client_ca_file=str(ca[0]))
    )
    assert server_ctx is not None

    def client(cert: tuple[Path, Path] | None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(ca[0]))
        if cert is not None:
            ctx.load_cert_chain(str(cert[0]), str(cert[1]))
        return ctx

    seen: dict[str, object] = {}

    async def main() -> None:
        async with serving(server_ctx, mutual=True) as port:
            for who, cert in [("scheduler", scheduler), ("nobody", None), ("stranger", stranger)]:
                for method, path in [("POST", "/scheduler/filter"), ("GET", "/metrics"), ("GET", "/healthz")]:
                    url = f"https://127.0.0.1:{port}{path}"
                    try:
                        async with (
                            aiohttp.ClientSession() as session,
                            session.request(method, url, data=b"{}", ssl=client(cert)) as r,
                        ):
                            seen[f"{who} {path}"] = r.status
                    except (aiohttp.ClientError, ssl.SSLError, ConnectionError) as err:
                        seen[f"{who} {path}"] = type(err).__name__

    asyncio.run(main())
    assert [seen[f"scheduler {p}"] for p in ("/scheduler/filter", "/metrics", "/healthz")] == [200, 200, 200]
    assert [seen[f"nobody {p}"] for p in ("/scheduler/filter", "/metrics", "/healthz")] == [403, 403, 200]
    assert all(isinstance(seen[f"stranger {p}"], str) for p in ("/scheduler/filter", "/healthz")), seen


def test_a_client_ca_without_https_is_a_settings_error() -> None:
    with pytest.raises(SettingsError, match="needs HTTPS"):
        ExtenderSettings.from_env({"STATICTRAIN_EXTENDER_TLS_CLIENT_CA_FILE": "/ca.crt"})


def test_an_unreadable_client_ca_is_a_settings_error(tmp_path: Path) -> None:
    cert, key = make_cert(tmp_path)
    settings = ExtenderSettings(
        tls_cert_file=str(cert), tls_key_file=str(key), tls_client_ca_file=str(tmp_path / "missing.crt")
    )
    with pytest.raises(SettingsError, match="cannot load client CA"):
        tls_context(settings)
