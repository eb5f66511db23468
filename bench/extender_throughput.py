"""Real kube-scheduler throughput with the statictrain extender vs without (imported by extender_latency.py).

One kube-scheduler process per variant, same binary, same profile settings
(the statictrain profile: MostAllocated, no BalancedAllocation), one with the
extender configured and one without. Pods are created first with the
variant's scheduler name while no scheduler serves it; then the scheduler is
started and pods/s is measured from the first to the last bind seen by a watch.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from statictrain import labels
from statictrain.pricing import ON_DEMAND, parse_catalog, shipped_catalog_text
from statictrain_extender.kubewatch import api_client
from statictrain_extender.replay.manifests import NODE_HEALTH_TOLERATIONS
from statictrain_extender.replay.runner import BindWatch, delete_nodes, ensure_nodes
from statictrain_localcluster.cluster import LocalCluster, build_binaries

BENCH_LABEL = "statictrain.io/bench"
BENCH_VALUE = "extender-throughput"
PRODUCTS = [
    ("NVIDIA-H100-80GB-HBM3", "H100-80GB"),
    ("NVIDIA-A100-SXM4-40GB", "A100-40GB"),
    ("NVIDIA-L4", "L4-24GB"),
    ("NVIDIA-A10G", "A10G-24GB"),
]


def node_manifests(n: int) -> list[dict[str, Any]]:
    catalog = parse_catalog(shipped_catalog_text())
    out = []
    for i in range(n):
        product, model = PRODUCTS[i % len(PRODUCTS)]
        per_gpu = statistics.median(catalog.gpu_prices(model, ON_DEMAND))
        spot = i % 3 == 0
        hourly = float(per_gpu) * 8 * (0.45 if spot else 1.0)
        cap = {"cpu": "96", "memory": "1024Gi", "pods": "110", labels.GPU_RESOURCE: "8"}
        name = f"bench-tp-{i:04d}"
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {
                        "kubernetes.io/hostname": name,
                        "type": "kwok",
                        labels.GPU_PRODUCT: product,
                        labels.CAPACITY_TYPE: "spot" if spot else "on-demand",
                        BENCH_LABEL: BENCH_VALUE,
                    },
                    "annotations": {"kwok.x-k8s.io/node": "fake", labels.HOURLY_COST: f"{float(hourly):.6f}"},
                },
                "spec": {
                    "taints": [
                        {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"},
                        {"key": BENCH_LABEL, "value": BENCH_VALUE, "effect": "NoSchedule"},
                    ]
                },
                "status": {"capacity": cap, "allocatable": cap},
            }
        )
    return out


def pod_manifest(name: str, scheduler: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {BENCH_LABEL: BENCH_VALUE, labels.JOB: "bench"}},
        "spec": {
            "schedulerName": scheduler,
            "nodeSelector": {BENCH_LABEL: BENCH_VALUE},
            "tolerations": [
                {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"},
                {"key": BENCH_LABEL, "operator": "Exists", "effect": "NoSchedule"},
                *NODE_HEALTH_TOLERATIONS,
            ],
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "w",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {
                        "requests": {labels.GPU_RESOURCE: "1"},
                        "limits": {labels.GPU_RESOURCE: "1"},
                    },
                }
            ],
        },
    }


def scheduler_config(kubeconfig: Path, profile: str, extender_url: str | None) -> dict[str, Any]:
    repo_cfg = yaml.safe_load(
        (Path(__file__).resolve().parents[1] / "deploy/scheduler/kube-scheduler-config.yaml").read_text()
    )
    statictrain_profile = next(p for p in repo_cfg["profiles"] if p["schedulerName"] == "statictrain-scheduler")
    cfg: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 5000, "burst": 5000},
        "profiles": [{**statictrain_profile, "schedulerName": profile}],
    }
    if extender_url:
        extender = dict(repo_cfg["extenders"][0])
        extender["urlPrefix"] = extender_url
        cfg["extenders"] = [extender]
    return cfg


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait(check: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.5)


def extender_metrics(base: str) -> dict[str, float]:
    with urllib.request.urlopen(f"{base}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("statictrain_extender_request_seconds") and 'verb="prioritize"' in line:
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def one_run(
    core: client.CoreV1Api,
    *,
    bin_dir: Path,
    kubeconfig: Path,
    workdir: Path,
    profile: str,
    url: str | None,
    pods: int,
) -> dict[str, Any]:
    namespace = f"bench-{profile}-{int(time.time())}"
    core.create_namespace({"metadata": {"name": namespace}})  # type: ignore[arg-type]

    def create(i: int) -> None:
        core.create_namespaced_pod(namespace, pod_manifest(f"p{i:05d}", profile))  # type: ignore[arg-type]

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(create, range(pods)))
    watch = BindWatch(core, namespace, time.monotonic, time.monotonic())
    watch.start()
    watch.started_ok.wait(30)
    cfg_path = workdir / f"{profile}.yaml"
    cfg_path.write_text(yaml.safe_dump(scheduler_config(kubeconfig, profile, url)))
    log = (workdir / f"{profile}.log").open("wb")
    sched = subprocess.Popen(
        [str(bin_dir / "kube-scheduler"), f"--config={cfg_path}", "--secure-port=0", "--v=1"],
        stdout=log,
        stderr=log,
    )
    try:
        wait(lambda: len(watch.bound) >= pods, 600, f"{pods} pods of {profile} to be bound")
    finally:
        sched.terminate()
        sched.wait(30)
        watch.stop()
        log.close()
    times = sorted(t for t, _ in watch.bound.values())
    nodes_used = len({n for _, n in watch.bound.values()})
    core.delete_namespace(namespace, grace_period_seconds=0)
    return {
        "pods": pods,
        "first_to_last_bind_s": times[-1] - times[0],
        "pods_per_s": (len(times) - 1) / (times[-1] - times[0]),
        "nodes_used": nodes_used,
    }


def start_extender(
    kubeconfig: Path,
    scheduler_names: str,
    log_path: Path,
    extra_env: dict[str, str] | None = None,
    command: list[str] | None = None,
) -> tuple[subprocess.Popen[bytes], str]:
    """statictrain-extender (or ``command``, an extender taking the same settings) as a subprocess on a
    free local port; returns it and its base URL."""
    port = free_port()
    env = {
        **os.environ,
        **(extra_env or {}),
        "KUBECONFIG": str(kubeconfig),
        "STATICTRAIN_EXTENDER_HOST": "127.0.0.1",
        "STATICTRAIN_EXTENDER_PORT": str(port),
        "STATICTRAIN_EXTENDER_SCHEDULER_NAMES": scheduler_names,
    }
    with log_path.open("wb") as log:
        argv = command or [str(Path(sys.executable).parent / "statictrain-extender")]
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=log)
    return proc, f"http://127.0.0.1:{port}"


def measure_throughput(nodes: int, pods: int) -> dict[str, Any]:
    attach = os.environ.get("STATICTRAIN_TEST_CLUSTER")
    cluster = LocalCluster(attach or f"st-bench-ext-{os.getpid()}")
    if not attach:
        cluster.start(build_binaries(log=sys.stderr), log=sys.stderr)
    api = api_client(str(cluster.kubeconfig))
    core = client.CoreV1Api(api)
    selector = f"{BENCH_LABEL}={BENCH_VALUE}"
    workdir = Path(tempfile.mkdtemp(prefix="st-bench-ext-"))
    extender, base = start_extender(cluster.kubeconfig, "bench-extender", workdir / "extender.log")
    try:
        ensure_nodes(core, node_manifests(nodes), label_selector=selector, timeout_s=600)

        def cached() -> bool:
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=2) as resp:
                    return int(json.loads(resp.read())["nodesCached"]) >= nodes
            except OSError:
                return False

        wait(cached, 120, "the extender to cache every bench node")
        common = {"bin_dir": cluster.bin_dir, "kubeconfig": cluster.kubeconfig, "workdir": workdir}
        without = one_run(core, profile="bench-plain", url=None, pods=pods, **common)
        wait(
            lambda: not core.list_pod_for_all_namespaces(label_selector=selector, limit=1).items,
            300,
            "pods gone",
        )
        with_ext = one_run(core, profile="bench-extender", url=f"{base}/scheduler", pods=pods, **common)
        server = extender_metrics(base)
        wait(
            lambda: not core.list_pod_for_all_namespaces(label_selector=selector, limit=1).items,
            300,
            "pods gone",
        )
    finally:
        extender.terminate()
        extender.wait(30)
        delete_nodes(core, selector)
        if not attach:
            cluster.stop()
    return {
        "nodes": nodes,
        "without_extender": without,
        "with_extender": with_ext,
        "without_extender_pods_per_s": without["pods_per_s"],
        "with_extender_pods_per_s": with_ext["pods_per_s"],
        "extender_prioritize_server_side": server,
        "kube_scheduler": str(cluster.bin_dir / "kube-scheduler"),
        "cluster_versions_dir": cluster.bin_dir.parent.name,
    }
