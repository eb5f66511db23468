"""Extender figures: prioritize p99 latency at 1,000 and 5,000 nodes, and real
kube-scheduler throughput with the extender vs without at 1,000 kwok nodes.

    .venv/bin/python bench/extender_latency.py                 # both parts
    .venv/bin/python bench/extender_latency.py --skip-throughput

Latency: the real server (statictrain_extender.server, on uvloop as in main.py) in a child process, its
cache filled from Node objects shaped like the API server's (the watch is not
on the request path), GPU models and prices from the shipped catalog and a
random share of GPUs allocated; the parent sends sequential keep-alive
prioritize calls for all N nodes (kube-scheduler sends at most the feasible
ones) and times each round trip.

Throughput: a running local cluster (STATICTRAIN_TEST_CLUSTER=<name>, or a new
one is started), 1,000 kwok GPU nodes created for the bench, the extender as a
subprocess watching that cluster, and the cluster's own kube-scheduler binary
started twice with one bench profile each: without extender and with it.
The pods (1 GPU each) exist before the scheduler starts; pods/s is measured
from the first bind to the last bind seen by a watch.

Writes bench/results/extender.json.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import platform
import random
import signal
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import uvloop
from aiohttp import web
from prometheus_client import CollectorRegistry
from statictrain import labels
from statictrain.pricing import ON_DEMAND, parse_catalog, shipped_catalog_text
from statictrain_extender.scoring import Weights
from statictrain_extender.server import build_app
from statictrain_extender.state import ClusterState

OUT = Path(__file__).resolve().parent / "results" / "extender.json"
PRODUCTS = [
    ("NVIDIA-H100-80GB-HBM3", "H100-80GB", 8),
    ("NVIDIA-A100-SXM4-40GB", "A100-40GB", 8),
    ("NVIDIA-A10G", "A10G-24GB", 4),
    ("NVIDIA-L4", "L4-24GB", 4),
    ("Tesla-T4", "T4-16GB", 4),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def synthetic_nodes(n: int, seed: int) -> list[dict[str, Any]]:
    """Node objects priced from the shipped catalog (median per-GPU price per model, spot at 40%)."""

    catalog = parse_catalog(shipped_catalog_text())
    rng = random.Random(seed)
    nodes = []
    for i in range(n):
        product, model, gpus = PRODUCTS[i % len(PRODUCTS)]
        per_gpu = float(statistics.median(catalog.gpu_prices(model, ON_DEMAND)))
        spot = rng.random() < 0.5
        hourly = per_gpu * gpus * (rng.choice([4, 5, 6]) / 10 if spot else 1)
        cap = {labels.GPU_RESOURCE: str(gpus), "cpu": "96"}
        nodes.append(
            {
                "metadata": {
                    "name": f"bench-node-{i:05d}",
                    "labels": {
                        labels.GPU_PRODUCT: product,
                        labels.CAPACITY_TYPE: "spot" if spot else "on-demand",
                    },
                    "annotations": {labels.HOURLY_COST: f"{hourly:.6f}"},
                },
                "status": {"capacity": cap, "allocatable": cap},
            }
        )
    return nodes


def serve(port: int, n: int, seed: int) -> None:
    """Child process: the real aiohttp app over a filled cache."""

    state = ClusterState()
    nodes = synthetic_nodes(n, seed)
    state.replace_nodes(nodes)
    rng = random.Random(seed + 1)
    pods = []
    for i, node in enumerate(nodes):
        if rng.random() < 0.3:
            pods.append(
                {
                    "metadata": {"uid": f"u{i}"},
                    "spec": {
                        "nodeName": node["metadata"]["name"],
                        "containers": [{"resources": {"requests": {"nvidia.com/gpu": "1"}}}],
                    },
                    "status": {"phase": "Running"},
                }
            )
    state.replace_pods(pods)
    app = build_app(state, frozenset({"statictrain-scheduler"}), Weights(), CollectorRegistry())
    # Same event loop as statictrain-extender (main.py).
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, loop=uvloop.new_event_loop())


def pod() -> dict[str, Any]:
    return {
        "metadata": {
            "name": "w-0",
            "namespace": "team",
            "labels": {"statictrain.io/job": "gpt2"},
            "annotations": {},
        },
        "spec": {
            "schedulerName": "statictrain-scheduler",
            "containers": [{"name": "w", "resources": {"requests": {"nvidia.com/gpu": "1"}}}],
        },
    }


def measure_latency(n: int, calls: int, seed: int) -> dict[str, float]:
    port = free_port()
    ctx = multiprocessing.get_context("spawn")
    child = ctx.Process(target=serve, args=(port, n, seed), daemon=True)
    child.start()
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or not child.is_alive():
                    raise RuntimeError(f"the extender child process did not start (exit {child.exitcode})") from None
                time.sleep(0.2)
        body = orjson.dumps({"Pod": pod(), "NodeNames": [f"bench-node-{i:05d}" for i in range(n)]})
        conn = http.client.HTTPConnection("127.0.0.1", port)
        headers = {"Content-Type": "application/json"}
        samples = []
        for i in range(calls + 50):
            t0 = time.perf_counter()
            conn.request("POST", "/scheduler/prioritize", body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            dt = time.perf_counter() - t0
            if resp.status != 200 or len(orjson.loads(data)) != n:
                raise RuntimeError(f"bad answer: {resp.status} {data[:200]!r}")
            if i >= 50:  # warm-up calls are not counted
                samples.append(dt * 1000)
        conn.close()
    finally:
        child.terminate()
        child.join(10)
    samples.sort()
    return {
        "calls": calls,
        "p50_ms": samples[len(samples) // 2],
        "p99_ms": samples[min(len(samples) - 1, int(0.99 * len(samples)))],
        "max_ms": samples[-1],
        "request_bytes": len(body),
    }


def _exit_on_sigterm(signum: int, frame: object) -> None:
    # Turn SIGTERM into SystemExit so that `finally` blocks stop the schedulers and the extender we started.
    raise SystemExit(128 + signum)


def main() -> None:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--pods", type=int, default=1000, help="pods per throughput run")
    ap.add_argument("--nodes", type=int, default=1000, help="kwok nodes of the throughput run")
    args = ap.parse_args()
    result: dict[str, Any] = {}
    previous = json.loads(OUT.read_text()) if OUT.exists() else {}
    lat = {n: measure_latency(n, args.calls, args.seed) for n in (1000, 5000)}
    result["latency"] = {str(n): v for n, v in lat.items()}
    result["p99_ms_1000"] = round(lat[1000]["p99_ms"], 3)
    result["p99_ms_5000"] = round(lat[5000]["p99_ms"], 3)
    if args.skip_throughput:
        for key in ("throughput_ratio_1000", "throughput"):
            if key in previous:
                result[key] = previous[key]
    else:
        # Imported here: the latency part must run where only the extender's dependencies are installed.
        from extender_throughput import measure_throughput  # noqa: PLC0415 - bench/ sibling module

        tp = measure_throughput(nodes=args.nodes, pods=args.pods)
        result["throughput"] = tp
        result["throughput_ratio_1000"] = round(tp["with_extender_pods_per_s"] / tp["without_extender_pods_per_s"], 3)
    result["goals"] = {"p99_ms_1000": "<= 10", "p99_ms_5000": "<= 50", "throughput_ratio_1000": ">= 0.5"}
    result["command"] = "python " + " ".join(["bench/extender_latency.py", *sys.argv[1:]])

    result["versions"] = {
        "python": platform.python_version(),
        "aiohttp": aiohttp.__version__,
        "orjson": orjson.__version__,
    }
    result["machine"] = {
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
