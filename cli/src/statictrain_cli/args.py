"""Command-line arguments shared by the ``statictrain`` subcommands: the Prometheus URL, time limits,
durations and UTC times, each checked when parsed (a bad value is a one-line usage error, exit 2)."""

from __future__ import annotations

import argparse
import math
import os
from datetime import datetime, timedelta

from statictrain import envconfig
from statictrain_cli.report.model import parse_utc
from statictrain_operator.prom import check_url

__all__ = ["DEFAULT_PROMETHEUS_URL", "MAX_TIMEOUT_S", "add_prometheus_url", "add_timeout", "duration", "utc"]

DEFAULT_PROMETHEUS_URL = "http://127.0.0.1:9090"
MAX_TIMEOUT_S = 3600.0
MAX_DURATION = timedelta(days=3650)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def add_prometheus_url(p: argparse.ArgumentParser) -> None:
    """``--prometheus-url`` (default $STATICTRAIN_PROMETHEUS_URL, else a local Prometheus)."""
    p.add_argument(
        "--prometheus-url",
        type=_prometheus_url,  # argparse checks a string default too: the environment's URL is checked
        default=os.environ.get(envconfig.PROMETHEUS_URL_ENV, DEFAULT_PROMETHEUS_URL),
        help=f"Prometheus base URL (default ${envconfig.PROMETHEUS_URL_ENV} or {DEFAULT_PROMETHEUS_URL})",
    )


def _prometheus_url(text: str) -> str:
    try:
        return check_url(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and 0 < v <= MAX_TIMEOUT_S):
        raise argparse.ArgumentTypeError(f"{text!r}: give seconds, more than 0 and at most {MAX_TIMEOUT_S:g}")
    return v


def add_timeout(p: argparse.ArgumentParser, default_s: float) -> None:
    """``--timeout``: seconds that bound each Prometheus request whole (connect, headers and body)."""
    p.add_argument(
        "--timeout",
        type=_seconds,
        default=default_s,
        help=f"seconds for each Prometheus request, whole (default {default_s:g})",
    )


def duration(text: str) -> timedelta:
    """``30m``, ``6h``, ``7d``: a positive duration of whole seconds, minutes, hours or days (at most 10 years)."""
    n = text[:-1]
    if len(text) < 2 or text[-1] not in _UNITS or not (n.isascii() and n.isdigit()) or int(n) == 0 or len(n) > 9:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration; write it like 30m, 6h or 7d")
    d = timedelta(seconds=int(n) * _UNITS[text[-1]])
    if d > MAX_DURATION:
        raise argparse.ArgumentTypeError(f"{text!r} is longer than {MAX_DURATION.days}d")
    return d


def utc(text: str) -> datetime:
    """An RFC 3339 time with an explicit UTC offset (``2026-03-01T00:00:00Z``)."""
    try:
        return parse_utc(text)
    except (ValueError, OverflowError) as e:
        raise argparse.ArgumentTypeError(str(e) if isinstance(e, ValueError) else f"{text!r}: out of range") from None
