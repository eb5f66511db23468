"""Entry point: ``statictrain-extender`` (settings from environment variables, see settings.py)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import ssl
import sys
from collections.abc import AsyncIterator

import aiohttp
import uvloop
from aiohttp import web
from prometheus_client import CollectorRegistry
from statictrain import redact

from .kubewatch import api_client, start_event_writer, start_watches
from .server import build_app
from .settings import ENV, ExtenderSettings, SettingsError
from .speeds import SpeedEstimator
from .state import ClusterState
from .stepstats import refresh_forever

__all__ = ["main", "make_app", "tls_context"]

log = logging.getLogger("statictrain_extender")


def make_app(settings: ExtenderSettings, state: ClusterState | None = None) -> web.Application:
    """The application with its background work: watches, and the step-time refresher when configured.
    ``state``: the cluster state to serve (the replay's oracle seeds one); a fresh one by default."""
    state = state or ClusterState(speeds=SpeedEstimator(prior_samples=settings.prior_samples))
    app = build_app(
        state,
        settings.scheduler_names,
        settings.weights,
        CollectorRegistry(),
        client_certificate_required=bool(settings.tls_client_ca_file),
    )

    async def background(app: web.Application) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        api = api_client(settings.kubeconfig)
        stop = start_watches(api, state, loop, settings.watch_pods)
        start_event_writer(api, state, stop)
        refresher: asyncio.Task[None] | None = None
        session: aiohttp.ClientSession | None = None
        if settings.prometheus_url:
            session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))
            refresher = asyncio.create_task(
                refresh_forever(
                    session,
                    prometheus_url=settings.prometheus_url,
                    window_seconds=settings.step_window_seconds,
                    interval_seconds=settings.refresh_seconds,
                    state=state,
                )
            )
        yield
        stop.set()
        if refresher is not None:
            refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await refresher
        if session is not None:
            await session.close()

    app.cleanup_ctx.append(background)
    return app


def tls_context(settings: ExtenderSettings) -> ssl.SSLContext | None:
    """Server TLS context when a certificate is configured, else None (plain HTTP).

    With a client CA, mutual TLS: a certificate a client shows must be signed by it (else the
    handshake fails); a client that shows none connects, and the app then answers it only on
    /healthz (server.OPEN_PATHS)."""
    if not settings.tls_cert_file:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(settings.tls_cert_file, settings.tls_key_file)
    except (OSError, ssl.SSLError) as err:
        raise SettingsError(
            f"cannot load TLS certificate {settings.tls_cert_file} / key {settings.tls_key_file}: {err}"
        ) from None
    if settings.tls_client_ca_file:
        try:
            context.load_verify_locations(cafile=settings.tls_client_ca_file)
        except (OSError, ssl.SSLError) as err:
            raise SettingsError(f"cannot load client CA {settings.tls_client_ca_file}: {err}") from None
        context.verify_mode = ssl.CERT_OPTIONAL
    return context


def parse_args(argv: list[str] | None) -> None:
    """--help; every setting is an environment variable (the chart sets them)."""
    settings_help = "\n".join(f"  {var:42} {field}" for field, var in ENV.items())
    parser = argparse.ArgumentParser(
        prog="statictrain-extender",
        description="Cost-aware kube-scheduler extender: POST /scheduler/filter and /scheduler/prioritize.",
        epilog=f"Settings come from environment variables:\n{settings_help}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    redact.install()  # no credentials or URL tokens in any log line
    try:
        settings = ExtenderSettings.from_env()
        tls = tls_context(settings)
    except SettingsError as err:
        print(f"statictrain-extender: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    log.info(
        "listening on %s:%d (%s), judging pods of %s",
        settings.host,
        settings.port,
        ("https, client certificates required" if settings.tls_client_ca_file else "https") if tls else "http",
        sorted(settings.scheduler_names),
    )
    web.run_app(
        make_app(settings),
        host=settings.host,
        port=settings.port,
        ssl_context=tls,
        access_log=None,
        print=None,
        loop=uvloop.new_event_loop(),  # libuv's event loop: less CPU per request
    )


if __name__ == "__main__":
    main()
