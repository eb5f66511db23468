"""Entry point of the operator: ``statictrain-operator`` runs kopf with statictrain's handlers."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import socket
import sys
from collections.abc import Sequence

import kopf
import prometheus_client
from statictrain import labels

from . import essence, runtime, settings
from .kube import clients, heartbeat


def part_modules(parts: Sequence[str]) -> list[str]:
    """Handler modules of the optional parts; each registers its kopf handlers on import."""
    return [f"statictrain_operator.{part}.handlers" for part in parts]


log = logging.getLogger("statictrain.operator")


def import_handlers(optional: Sequence[str]) -> list[str]:
    """Import our handlers and those of the optional modules that exist; returns what was imported."""
    importlib.import_module("statictrain_operator.handlers")
    loaded = ["statictrain_operator.handlers"]
    for name in optional:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name not in (name, name.rsplit(".", 1)[0]):
                raise  # the module exists but one of its own imports is missing: a real error
            log.warning("handler module %s is not installed; its handlers do not run", name)
            continue
        loaded.append(name)
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
    ks.watching.label_selectors["coordination.k8s.io", "v1", "leases"] = f"{heartbeat.HEARTBEAT_LABEL}=true"
    ks.watching.server_timeout = 300
    return ks


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
    try:
        s = settings.from_os_environ()
    except settings.SettingsError as e:
        print(f"statictrain-operator: {e}", file=sys.stderr)
        return 2
    if args.kubeconfig:
        # Other parts build their own clients from the default kubeconfig: point it at the same cluster.
        os.environ["KUBECONFIG"] = args.kubeconfig
    kopf.configure(verbose=args.verbose)
    if not args.verbose:
        # One "Handler ... succeeded" line per watch event is noise at scale (and costs CPU).
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    rt = runtime.Runtime(
        settings=s,
        clients=clients.build(args.kubeconfig, pool_size=s.max_workers),
        holder=os.environ.get("HOSTNAME", socket.gethostname()),
    )
    import_handlers(part_modules(s.parts))
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
        )
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
