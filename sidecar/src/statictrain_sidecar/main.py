"""``statictrain-sidecar``: the profiling sidecar's entry point.

Reads settings from the environment (names in ``statictrain.envvars``), lets
flags override them, loads pynvml if it can (a missing module or driver only
turns GPU metrics off), serves until SIGTERM or SIGINT.

In a worker pod it is a native sidecar: the kubelet sends SIGTERM once the
trainer has exited (or the pod is deleted). It then keeps serving for
``LINGER_S`` so the trainer's last records (already tailed) get one more
scrape, and exits 0; a second signal stops it at once.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from types import FrameType

from statictrain import envvars, redact

from .app import build
from .nvml import NvmlApi
from .settings import Settings, SettingsError

__all__ = ["LINGER_S", "main"]

LINGER_S = 2.0
"""Seconds /metrics stays up after SIGTERM: one more scrape at 1 s intervals (the local cluster's)."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="statictrain-sidecar",
        description="Profiling sidecar: GPU (NVML) and training-channel metrics on /metrics, /healthz, "
        "and on-demand torch.profiler captures via POST /profile?steps=N. Settings come from the "
        "environment; flags override them.",
    )
    p.add_argument(
        "--port", type=int, help=f"HTTP port (env {envvars.METRICS_PORT}, default 9400; 0: any free)"
    )
    p.add_argument("--bind", help=f"listen address (env {envvars.METRICS_BIND}, default 0.0.0.0)")
    p.add_argument("--stats-dir", type=Path, help=f"trainer channel directory (env {envvars.STATS_DIR})")
    p.add_argument(
        "--interval",
        type=float,
        help=f"background sample interval in seconds (env {envvars.SAMPLE_INTERVAL_S}, default 1)",
    )
    p.add_argument(
        "--gpus", help=f"comma-separated GPU indices or UUIDs to report (env {envvars.SIDECAR_GPUS})"
    )
    p.add_argument("--no-nvml", action="store_true", help="do not load NVML (training metrics only)")
    p.add_argument("--port-file", type=Path, help="write the bound port to this file once serving")
    p.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    return p


def _settings(args: argparse.Namespace) -> Settings:
    s = Settings.from_env(os.environ)
    overrides: dict[str, object] = {}
    if args.port is not None:
        overrides["port"] = args.port
    if args.bind:
        overrides["bind"] = args.bind
    if args.stats_dir is not None:
        overrides["stats_dir"] = args.stats_dir
    if args.interval is not None:
        overrides["sample_interval_s"] = args.interval
    if args.gpus is not None:
        overrides["gpus"] = tuple(g.strip() for g in args.gpus.split(",") if g.strip())
    if args.no_nvml:
        overrides["nvml"] = False
    return replace(s, **overrides)  # type: ignore[arg-type]


def load_nvml() -> NvmlApi | None:
    """The pynvml module, or None (logged by the sampler) when it is not installed."""
    try:
        module: NvmlApi = importlib.import_module("pynvml")  # type: ignore[assignment]
    except ImportError:
        return None
    return module


def main(argv: Sequence[str] | None = None) -> int:
    """Run until SIGTERM/SIGINT; exit 2 on bad settings with the reason."""
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    redact.install()  # no credentials or URL tokens in any log line
    try:
        settings = _settings(args)
    except SettingsError as e:
        print(f"statictrain-sidecar: {e}", file=sys.stderr)
        return 2
    try:
        sidecar = build(settings, load_nvml() if settings.nvml else None)
    except SettingsError as e:
        print(f"statictrain-sidecar: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"statictrain-sidecar: cannot listen on {settings.bind}:{settings.port}: {e}", file=sys.stderr)
        return 2
    stop = threading.Event()
    now = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            now.set()
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    sidecar.start()
    if args.port_file is not None:
        tmp = args.port_file.with_name(args.port_file.name + ".tmp")
        tmp.write_text(f"{sidecar.port}\n")
        os.replace(tmp, args.port_file)
    stop.wait()
    logging.getLogger("statictrain_sidecar").info("stopping in %.0f s (a second signal stops at once)", LINGER_S)
    now.wait(LINGER_S)
    sidecar.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
