"""statictrain-cluster: build, start, stop and inspect the local development cluster."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from statictrain_localcluster.cluster import ClusterError, LocalCluster, build_binaries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="statictrain-cluster", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build (or find cached) control-plane binaries; prints the bin folder")
    for name in ("start", "stop", "status", "kubeconfig", "env"):
        p = sub.add_parser(name)
        p.add_argument("--name", default="statictrain", help="cluster name (several can run at once)")
        if name == "start":
            p.add_argument("--nodepool", type=Path, help="node pool file (default deploy/local-cluster/nodepool.yaml)")
            p.add_argument("--scheduler-config", type=Path, help="KubeSchedulerConfiguration with EXTENDER_PORT")
            p.add_argument("--prometheus-port", type=int, help="default: a free port")
            p.add_argument("--timeout", type=float, default=180)
            p.add_argument("--no-real-node", action="store_true",
                           help="kwok nodes only (default: a real node joins too when this machine can run one)")
            p.add_argument("--kueue", action="store_true",
                           help="also run Kueue with spot and on-demand flavors and a LocalQueue 'gpu' per team "
                                "namespace (deploy/local-cluster/kueue-queues.yaml)")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            print(build_binaries(log=sys.stderr))
            return 0
        cluster = LocalCluster(args.name, getattr(args, "nodepool", None), getattr(args, "scheduler_config", None))
        if args.command == "start":
            t0 = time.monotonic()
            bin_dir = build_binaries(log=sys.stderr)
            cluster.start(bin_dir, args.prometheus_port, args.timeout, log=sys.stderr, real_node=not args.no_real_node,
                          with_kueue=args.kueue)
            print(f"cluster {args.name!r} ready in {time.monotonic() - t0:.1f}s", file=sys.stderr)
            if cluster.state.real_node:
                print(f"# real node: {cluster.state.real_node} (pods in real containers)")
            print(f"export KUBECONFIG={cluster.kubeconfig} PATH={bin_dir}:$PATH")
            print(f"# Prometheus: {cluster.prometheus_url}   extender port: {cluster.extender_port}")
            if args.kueue:
                print("# Kueue: ClusterQueue gpu, LocalQueue gpu in team-a and team-b; "
                      f"log: {cluster.root / 'kueue.log'}")
        elif args.command == "stop":
            cluster.stop()
        elif args.command == "status":
            st = cluster.status()
            print(json.dumps(st, indent=2))
            return 0 if st["running"] else 3
        elif args.command == "kubeconfig":
            print(cluster.kubeconfig)
        elif args.command == "env":
            print(f"export KUBECONFIG={cluster.kubeconfig} PATH={cluster.bin_dir}:$PATH")
    except ClusterError as e:
        print(f"statictrain-cluster: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        cluster.stop()
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
