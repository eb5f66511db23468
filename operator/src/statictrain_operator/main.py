"""Entry point of the operator: ``statictrain-operator`` runs kopf with statictrain's handlers."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

try:
    import kopf
except ModuleNotFoundError as missing:  # the library modules install without it; the process cannot run so
    raise SystemExit("statictrain-operator: kopf is missing: pip install 'statictrain-operator[runtime]'") from missing
import prometheus_client
from statictrain import labels, redact

from . import backoff, children, essence, leader, memtrace, runtime, settings, watchtrim
from .anomaly.settings import AnomalySettings
from .cost.settings import CostSettings
from .kube import endpoint, heartbeat
from .kube.http import HttpKube
from .progress.settings import ProgressSettings

__all__ = ["PARTS", "configure_logging", "kopf_settings", "load_parts", "main", "parse_args", "part_settings"]

log = logging.getLogger("statictrain.operator")

PARTS: Mapping[str, tuple[str, Callable[[], Any]]] = {
    "progress": ("statictrain_operator.progress.handlers", ProgressSettings.from_env),
    "cost": ("statictrain_operator.cost.handlers", CostSettings.from_env),
    "anomaly": ("statictrain_operator.anomaly.handlers", AnomalySettings.from_env),
}
"""Optional parts: the module registering its kopf handlers, and its settings (read from the environment)."""


def part_settings(parts: Sequence[str]) -> dict[str, Any]:
    """Settings of each part switched on, read and checked now (before kopf starts).

    Raises SettingsError naming an unknown part or a bad variable; a part whose own
    settings say ``enabled=false`` is left out.
    """
    out: dict[str, Any] = {}
    for name in parts:
        if name not in PARTS:
            raise settings.SettingsError(
                f"{settings.ENV_PREFIX}PARTS names {name!r}; the parts are {', '.join(PARTS)}"
            )
        try:
            value = PARTS[name][1]()
        except ValueError as e:
            raise settings.SettingsError(str(e)) from None
        if getattr(value, "enabled", True):
            out[name] = value
    return out


def load_parts(parts: Mapping[str, Any]) -> list[str]:
    """Import the core handlers and those of the parts switched on; returns the modules imported."""
    loaded = ["statictrain_operator.handlers"]
    loaded += [PARTS[name][0] for name in parts]
    for module in loaded:
        importlib.import_module(module)
    return loaded


def kopf_settings(s: settings.Settings) -> kopf.OperatorSettings:
    """kopf's settings for statictrain: progress in annotations, server-side filtered watches."""
    ks = kopf.OperatorSettings()
    ks.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=labels.GROUP)
    ks.persistence.diffbase_storage = essence.TrimmedDiffBaseStorage(
        prefix=labels.GROUP, key="last-handled-configuration"
    )
    ks.posting.level = logging.WARNING
    ks.execution.max_workers = s.max_workers
    managed = f"{labels.MANAGED_BY}={labels.MANAGED_BY_VALUE}"
    ks.watching.label_selectors["batch", "v1", "jobs"] = managed
    ks.watching.label_selectors["v1", "services"] = managed
    ks.watching.label_selectors["v1", "pods"] = f"{managed},{labels.ROLE}={children.PREFLIGHT}"
    ks.watching.label_selectors["coordination.k8s.io", "v1", "leases"] = f"{heartbeat.HEARTBEAT_LABEL}=true"
    ks.watching.server_timeout = 300
    # API errors (an outage, 429, 5xx): retried without end, jittered, at most backoff_max_s apart.
    ks.networking.error_backoffs = backoff.Retries(base_s=1.0, max_s=s.backoff_max_s)
    return ks


def configure_logging(*, verbose: bool) -> None:
    """kopf's log handler on the root logger, redacting credentials and URL tokens from every line.

    (kopf posts no log lines as events: settings.posting.loggers stays false.)
    """
    kopf.configure(verbose=verbose)
    redact.install()
    if not verbose:
        # One "Handler ... succeeded" line per watch event is noise at scale (and costs CPU).
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="statictrain-operator",
        description="Run the statictrain operator (kopf). Settings: STATICTRAIN_OPERATOR_* variables.",
    )
    p.add_argument(
        "--kubeconfig",
        default=os.environ.get("KUBECONFIG"),
        help="kubeconfig file (default: $KUBECONFIG, else in-cluster config)",
    )
    p.add_argument(
        "--liveness",
        default="http://0.0.0.0:8080/healthz",
        help="liveness endpoint URL; empty disables it (default: %(default)s)",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="port of the operator's own /metrics (job cost, anomaly metrics); 0 disables it "
        "(default: $STATICTRAIN_OPERATOR_OWN_METRICS_PORT, else 9401)",
    )
    p.add_argument(
        "--metrics-address", default="0.0.0.0", help="address /metrics listens on (default: %(default)s)"
    )
    p.add_argument("--verbose", action="store_true", help="log every handler call")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    memtrace.install()  # only with STATICTRAIN_OPERATOR_TRACEMALLOC set (benchmarks)
    try:
        s = settings.from_os_environ()
        parts = part_settings(s.parts)
        ep = endpoint.load(args.kubeconfig)
    except (settings.SettingsError, OSError) as e:
        print(f"statictrain-operator: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # the kubeconfig cannot be read: say which and what to check
        print(f"statictrain-operator: no cluster to talk to ({type(e).__name__}: {e}); "
              "pass --kubeconfig or set KUBECONFIG", file=sys.stderr)
        return 2
    configure_logging(verbose=args.verbose)
    kube = HttpKube(ep, connections=s.max_workers)
    rt = runtime.Runtime(
        settings=s,
        kube=kube,
        endpoint=ep,
        holder=os.environ.get("HOSTNAME", socket.gethostname()),
        parts=parts,
    )
    load_parts(parts)
    watchtrim.install()  # watched objects without managedFields (memory)
    # An asyncio flag: kopf waits on a threading.Event in an executor thread that no one can cancel,
    # so on SIGTERM asyncio.run would wait for that thread for ever and the operator never exit.
    lost = asyncio.Event()  # set on kopf's loop (leader.keep); bound to that loop on first use
    if s.leader_election:
        rt.leader = leader.Elector(kube, s.heartbeat_namespace, leader.identity(rt.holder), s.leader_lease_s)
        with leader.standby_probe(args.liveness):
            asyncio.run(_lead(rt))
        rt.started = rt.clock()  # the heartbeat's age counts from here, not from the wait
        rt.leadership_lost = lost.set
    port = s.own_metrics_port if args.metrics_port is None else args.metrics_port
    if port:
        # The cost exporter and the anomaly metrics register into prometheus_client's default REGISTRY.
        server, _thread = prometheus_client.start_http_server(port, addr=args.metrics_address)
        log.info("serving /metrics on %s:%d", args.metrics_address, port)
    else:
        server = None
    try:
        kopf.run(
            registry=kopf.get_default_registry(),
            settings=kopf_settings(s),
            standalone=True,
            clusterwide=not s.namespaces,
            namespaces=s.namespaces,
            liveness_endpoint=args.liveness or None,
            memo=kopf.Memo(runtime=rt),
            stop_flag=lost,
        )
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
    if lost.is_set():
        print("statictrain-operator: another replica holds the leader Lease now; exiting", file=sys.stderr)
        return 1
    return 0


async def _lead(rt: runtime.Runtime) -> None:
    """Wait as a standby until this replica leads; the Kube session is reopened on kopf's loop."""
    try:
        await rt.leader.acquire()
    finally:
        close = getattr(rt.kube, "close", None)
        if close is not None:
            await close()


if __name__ == "__main__":
    sys.exit(main())
