"""Trace replay figures: cost and pending time with statictrain's scheduling vs the default kube-scheduler.

    .venv/bin/python bench/trace_replay.py --trace ../shared/data/traces/alibaba-gpu-v2023 \\
        --start 12000000 --days 3 --speedup 1000

Uses a running local cluster (STATICTRAIN_TEST_CLUSTER=<name>) or starts one.
Starts, against that cluster, the statictrain extender and two kube-scheduler
processes (the cluster's own binary): `replay-default` with the stock profile
and no extender, and `replay-statictrain` with the statictrain profile of
deploy/scheduler/kube-scheduler-config.yaml and the extender. Then runs
statictrain-replay's library (the same code as the CLI) once per scheduler.

Writes bench/results/trace_replay.json (and a .md table next to it).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from extender_throughput import start_extender, wait  # bench/ sibling module
from kubernetes import client
from statictrain_extender.kubewatch import api_client
from statictrain_extender.replay.cli import NODE_FILE, POD_FILE, ReplayConfig, replay
from statictrain_extender.replay.plan import ReplayWindow
from statictrain_extender.replay.report import markdown
from statictrain_localcluster.cluster import LocalCluster, build_binaries

OUT = Path(__file__).resolve().parent / "results" / "trace_replay.json"
REPO = Path(__file__).resolve().parents[1]


def scheduler_configs(kubeconfig: Path, extender_url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    repo_cfg = yaml.safe_load((REPO / "deploy/scheduler/kube-scheduler-config.yaml").read_text())
    profile = next(p for p in repo_cfg["profiles"] if p["schedulerName"] == "statictrain-scheduler")
    base = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 500, "burst": 1000},
    }
    default = {**base, "profiles": [{"schedulerName": "replay-default"}]}
    extender = {**repo_cfg["extenders"][0], "urlPrefix": extender_url}
    ours = {**base, "profiles": [{**profile, "schedulerName": "replay-statictrain"}], "extenders": [extender]}
    return default, ours


def _exit_on_sigterm(signum: int, frame: object) -> None:
    # Turn SIGTERM into SystemExit so that `finally` blocks stop the schedulers and the extender we started.
    raise SystemExit(128 + signum)


def main() -> None:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace", type=Path, required=True, help=f"folder with {NODE_FILE} and {POD_FILE}")
    ap.add_argument("--start", type=int, default=12_000_000)
    ap.add_argument("--days", type=float, default=3)
    ap.add_argument("--speedup", type=float, default=1000)
    ap.add_argument("--max-pods", type=int)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    attach = os.environ.get("STATICTRAIN_TEST_CLUSTER")
    cluster = LocalCluster(attach or f"st-bench-replay-{os.getpid()}")
    if not attach:
        cluster.start(build_binaries(log=sys.stderr), log=sys.stderr)
    workdir = Path(tempfile.mkdtemp(prefix="st-bench-replay-"))
    procs: list[subprocess.Popen[bytes]] = []
    logs = []
    try:
        extender, base = start_extender(cluster.kubeconfig, "replay-statictrain", workdir / "extender.log")
        procs.append(extender)

        def healthy() -> bool:
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=2) as resp:
                    return bool(resp.status == 200)
            except OSError:
                return False

        wait(healthy, 60, "the extender")
        configs = scheduler_configs(cluster.kubeconfig, f"{base}/scheduler")
        for name, sched_cfg in zip(("default", "statictrain"), configs, strict=True):
            path = workdir / f"{name}.yaml"
            path.write_text(yaml.safe_dump(sched_cfg))
            log = (workdir / f"scheduler-{name}.log").open("wb")
            logs.append(log)
            procs.append(
                subprocess.Popen(
                    [str(cluster.bin_dir / "kube-scheduler"), f"--config={path}", "--secure-port=0", "--v=1"],
                    stdout=log,
                    stderr=log,
                )
            )
        api = api_client(str(cluster.kubeconfig))
        cfg = ReplayConfig(
            nodes_file=args.trace / NODE_FILE,
            pods_file=args.trace / POD_FILE,
            window=ReplayWindow(args.start, args.start + int(args.days * 86400), args.speedup),
            max_pods=args.max_pods,
            default_scheduler="replay-default",
            statictrain_scheduler="replay-statictrain",
            replay_id=f"bench{os.getpid()}",
        )
        t0 = time.monotonic()
        report = replay(client.CoreV1Api(api), cfg)
        report["wall_seconds_total"] = time.monotonic() - t0
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(30)
        for log in logs:
            log.close()
        if not attach:
            cluster.stop()
    result = {
        "trace": "alibaba/clusterdata cluster-trace-gpu-v2023 (openb): "
        f"{NODE_FILE} + {POD_FILE} at commit 7a6c496e4f4b6ce6150be8f881cb051bf2abff42",
        "pods": report["pods"],
        "cost_ratio": report["cost_ratio"],
        "pending_ratio": report["pending_ratio"],
        "goals": {"cost_ratio": "<= 0.80", "pending_ratio": "<= 1.05"},
        "command": "python " + " ".join(["bench/trace_replay.py", *sys.argv[1:]]),
        "report": report,
        "versions": {"python": platform.python_version(), "cluster": cluster.bin_dir.parent.name},
        "machine": {
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "load_avg": os.getloadavg(),
        },
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2, default=str) + "\n")
    OUT.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
