"""statictrain-replay: replay a GPU cluster trace on a real cluster, default scheduler vs statictrain.

    statictrain-replay --trace ../shared/data/traces/alibaba-gpu-v2023 \\
        --start 10800000 --end 11232000 --speedup 1440 --out replay.json

The cluster must run kube-scheduler with both scheduler names (see
deploy/scheduler/kube-scheduler-config.yaml) and the statictrain extender.
Nodes of the trace are created as kwok nodes (labelled and tainted for the
replay only) and deleted at the end unless --keep-nodes.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kubernetes import client
from statictrain.pricing import parse_catalog, shipped_catalog_text

from ..kubewatch import api_client
from .accounting import summarize
from .manifests import REPLAY_LABEL, node_manifest, node_name, pod_manifest
from .plan import ReplayWindow, plan_actions, window_pods
from .prices import CATALOG_MODEL, price_nodes
from .report import compare, markdown
from .runner import delete_nodes, ensure_nodes, run_replay
from .trace import TraceError, parse_nodes, parse_pods

__all__ = ["ReplayConfig", "main", "replay"]

log = logging.getLogger("statictrain_extender.replay")

NODE_FILE = "openb_node_list_gpu_node.csv"
POD_FILE = "openb_pod_list_default.csv"


@dataclass(frozen=True)
class ReplayConfig:
    """One comparison: which trace, which window, which schedulers."""

    nodes_file: Path
    """Node list CSV (sn,cpu_milli,memory_mib,gpu,model)."""
    pods_file: Path
    """Pod list CSV (name,...,creation_time,deletion_time,...)."""
    window: ReplayWindow
    """Trace window and speedup."""
    max_pods: int | None = None
    """Replay only the first N pods of the window."""
    default_scheduler: str = "default-scheduler"
    """Scheduler name of the baseline run."""
    statictrain_scheduler: str = "statictrain-scheduler"
    """Scheduler name of the statictrain run."""
    replay_id: str = "trace"
    """Label value marking this replay's nodes and pods."""
    node_prefix: str = "rp"
    """Prefix of node names."""
    uniform_throughput: bool = True
    """Trace pods run for a fixed time on any GPU (true for a recorded trace)."""
    catalog_file: Path | None = None
    """Price catalog CSV; default: the one shipped with statictrain."""
    keep_nodes: bool = False
    """Leave the replay nodes in the cluster afterwards."""


def _wait_no_pods(core: client.CoreV1Api, selector: str, timeout_s: float, sleep: Callable[[float], None]) -> None:
    deadline = time.monotonic() + timeout_s
    while core.list_pod_for_all_namespaces(label_selector=selector, limit=1).items:
        if time.monotonic() > deadline:
            raise TimeoutError(f"pods with {selector} still exist after {timeout_s:.0f} s")
        sleep(1.0)


def replay(core: client.CoreV1Api, cfg: ReplayConfig, sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """Run both replays and return the report (JSON-ready)."""
    nodes = parse_nodes(cfg.nodes_file.read_text(), str(cfg.nodes_file))
    pods = parse_pods(cfg.pods_file.read_text(), str(cfg.pods_file))
    catalog_text = cfg.catalog_file.read_text() if cfg.catalog_file else shipped_catalog_text()
    prices = price_nodes(nodes, parse_catalog(catalog_text))
    node_manifests = [node_manifest(cfg.node_prefix, n, prices[n.name], cfg.replay_id) for n in nodes]
    hourly = {node_name(cfg.node_prefix, n): prices[n.name].hourly_usd for n in nodes}
    capacity = {node_name(cfg.node_prefix, n): n.gpus * 1000 for n in nodes}
    chosen = window_pods(pods, cfg.window, cfg.max_pods)
    if not chosen:
        raise TraceError(f"no pod of {cfg.pods_file} is alive in the window [{cfg.window.start_s}, {cfg.window.end_s})")
    actions = plan_actions(chosen, cfg.window)
    gpu_milli = {p.name: p.total_gpu_milli for p in chosen}
    selector = f"{REPLAY_LABEL}={cfg.replay_id}"
    log.info("creating %d nodes (%s)", len(node_manifests), selector)
    ensure_nodes(core, node_manifests, label_selector=selector)
    runs: dict[str, Any] = {}
    summaries = {}
    try:
        for label, scheduler in (
            ("default", cfg.default_scheduler),
            ("statictrain", cfg.statictrain_scheduler),
        ):
            _wait_no_pods(core, selector, 300, sleep)
            namespace = f"replay-{cfg.replay_id}-{label}-{int(time.time())}"
            manifests = {
                p.name: pod_manifest(
                    p,
                    namespace=namespace,
                    scheduler_name=scheduler,
                    replay_id=cfg.replay_id,
                    uniform_throughput=cfg.uniform_throughput,
                )
                for p in chosen
            }
            log.info(
                "run %s: %d pods, %.0f s wall, scheduler %s",
                label,
                len(chosen),
                cfg.window.wall_seconds,
                scheduler,
            )
            result = run_replay(core, namespace=namespace, actions=actions, manifests=manifests, gpu_milli=gpu_milli)
            summaries[label] = summarize(result.observed, hourly, capacity, cfg.window.speedup)
            runs[label] = {
                "scheduler": scheduler,
                "max_lateness_s": result.max_lateness_s,
                "errors": result.errors[:20],
                "error_count": len(result.errors),
            }
        _wait_no_pods(core, selector, 300, sleep)
    finally:
        if not cfg.keep_nodes:
            delete_nodes(core, selector)
    report = compare(summaries["default"], summaries["statictrain"])
    report["runs"] = runs
    report["trace"] = {
        "nodes_file": str(cfg.nodes_file),
        "pods_file": str(cfg.pods_file),
        "nodes": len(nodes),
    }
    report["pods"] = len(chosen)
    report["window"] = asdict(cfg.window)
    report["gpu_model_mapping"] = dict(CATALOG_MODEL)
    report["node_prices_per_gpu_hour"] = {
        m: str(p.gpu_hourly_usd) for m, p in {n.model: prices[n.name] for n in nodes if n.gpus}.items()
    }
    report["uniform_throughput"] = cfg.uniform_throughput
    return report


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="statictrain-replay", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--trace", type=Path, help=f"folder with {NODE_FILE} and {POD_FILE}")
    p.add_argument("--nodes", type=Path, help="node list CSV (overrides --trace)")
    p.add_argument("--pods", type=Path, help="pod list CSV (overrides --trace)")
    p.add_argument("--start", type=int, default=0, help="first trace second to replay")
    p.add_argument("--end", type=int, help="trace second to stop at (default: last deletion)")
    p.add_argument("--speedup", type=float, default=1000.0, help="trace seconds per wall second")
    p.add_argument("--max-pods", type=int, help="replay only the first N pods of the window")
    p.add_argument("--default-scheduler", default="default-scheduler")
    p.add_argument("--statictrain-scheduler", default="statictrain-scheduler")
    p.add_argument("--replay-id", default="trace", help="label value for this replay's nodes and pods")
    p.add_argument(
        "--throughput",
        choices=("uniform", "model"),
        default="uniform",
        help="uniform: trace pods take the same time on any GPU (default)",
    )
    p.add_argument("--catalog", type=Path, help="price catalog CSV (default: statictrain's shipped catalog)")
    p.add_argument("--keep-nodes", action="store_true")
    p.add_argument("--kubeconfig", help="default: $KUBECONFIG or ~/.kube/config")
    p.add_argument("--out", type=Path, required=True, help="report JSON (a .md table is written next to it)")
    return p


def config_from_args(args: argparse.Namespace) -> ReplayConfig:
    nodes_file = args.nodes or (args.trace / NODE_FILE if args.trace else None)
    pods_file = args.pods or (args.trace / POD_FILE if args.trace else None)
    if nodes_file is None or pods_file is None:
        raise TraceError("give --trace FOLDER, or both --nodes and --pods")
    for f in (nodes_file, pods_file):
        if not f.is_file():
            raise TraceError(f"{f} does not exist or is not a file")
    end = args.end
    if end is None:
        end = max(p.deletion_s for p in parse_pods(pods_file.read_text(), str(pods_file))) + 1
    return ReplayConfig(
        nodes_file=nodes_file,
        pods_file=pods_file,
        window=ReplayWindow(args.start, end, args.speedup),
        max_pods=args.max_pods,
        default_scheduler=args.default_scheduler,
        statictrain_scheduler=args.statictrain_scheduler,
        replay_id=args.replay_id,
        uniform_throughput=args.throughput == "uniform",
        catalog_file=args.catalog,
        keep_nodes=args.keep_nodes,
    )


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    args = _parser().parse_args(argv)
    try:
        cfg = config_from_args(args)
    except TraceError as err:
        print(f"statictrain-replay: {err}", file=sys.stderr)
        return 2
    api = api_client(args.kubeconfig or os.environ.get("KUBECONFIG", str(Path.home() / ".kube" / "config")))
    report = replay(client.CoreV1Api(api), cfg)
    args.out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    args.out.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
