"""Command-line arguments shared by the ``statictrain`` subcommands that read Prometheus."""

from __future__ import annotations

import argparse
import os

from statictrain import envconfig

DEFAULT_PROMETHEUS_URL = "http://127.0.0.1:9090"


def add_prometheus_url(p: argparse.ArgumentParser) -> None:
    """``--prometheus-url`` (default $STATICTRAIN_PROMETHEUS_URL, else a local Prometheus)."""
    p.add_argument(
        "--prometheus-url",
        default=os.environ.get(envconfig.PROMETHEUS_URL_ENV, DEFAULT_PROMETHEUS_URL),
        help=f"Prometheus base URL (default ${envconfig.PROMETHEUS_URL_ENV} or {DEFAULT_PROMETHEUS_URL})",
    )
