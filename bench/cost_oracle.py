"""Cost oracle: a scripted scenario on the local cluster, every report figure checked against figures
computed from the scenario alone.

What is real: the local cluster's API server (kwok nodes, pods with real status times), Debian's
Prometheus (started here, scraping every 100 ms, restarted once mid-scenario), one small process per
worker pod exporting the sidecar's metric names (bench/oracle_worker.py: it steps on a schedule and
logs what it did), the product's accounting (``Accountant`` against the API server and Prometheus,
every 2 s, stopped for an outage and restarted as a new operator process) and report (``fetch`` +
``build_report`` + ``to_json``, as ``statictrain report`` runs them, from the operator's counters as
Prometheus scraped them).

The scenario (times in seconds after the start, step time 0.05 s, tokens 256 per rank and step,
4 s of compile at each process start):
  E  1 worker, 1 GPU, 300 steps, nothing happens (the demo's 76,800 tokens);
  A  1 worker, 2 GPUs: its process stops at step 1000 (checkpoint at 900), a new process in the
     same pod (a new series, counters from 0) resumes from 900 and runs 300 steps with a 20 s
     stall: 100 lost;
  B  DDP, 2 workers (ranks 0, 1), 1 GPU each, 1200 steps with a 20 s stall; rank 1's /metrics
     answers 503 for 4 s (a scrape gap);
  C  1 worker, 4 GPUs on a spot node: evicted at step 800 (pod Failed, node deleted), replaced
     on an on-demand node, resumes from checkpoint 700 and runs 300 steps: 100 lost;
  D  a CPU-only pod (4 cores, 8 GiB) on a CPU node for 40 s;
  Prometheus restarts 2 s into B's stall (down 5-9 s: SIGTERM, 3 s, start; recorded, and the run says
  whether it was back before the stall ended); the operator is down
  for 35 s from 46 s after B's start (its outage spans several catch-up windows: max_catchup_s =
  10 s) and comes back as a new process that reads the cost state its predecessor saved (a ConfigMap).
Every node in the cluster gets a scenario price and a grid carbon intensity (annotations), so node cost
and carbon are known too. Each worker's GPUs draw 650 W while compiling and stepping and 90 W in a stall
(nothing before the process starts or after it stops) and export NVML's energy counter (joules since the
driver loaded, from a baseline of 5e9 J); the operator's PUE is 1.2.

After the reports: the same counters as a FOCUS export (bench records its row count and the ratio of its
rows' sum to the node cost), and ``statictrain report --reconcile`` of a FOCUS bill written in the shape of
the FOCUS 1.2 examples (Usage rows per node and minute at the scenario's prices) with 5 % planted on one
node, one EBS-like resource, one tax row and one row in EUR.

Assumptions the bounds rest on: each worker is first scraped before it starts drawing power (its first
energy sample is the baseline; recorded per process as ``energy_baseline_before_start``); idle time comes
from each worker's idle counter (GPU-seconds below 5 %, as the sidecar counts them where it samples), so it
does not depend on when Prometheus scraped
(before the counter, idle came from 100 ms utilization samples: each transition placed to within a
scrape plus the worker's response delay, 1 run in 10 off by over 0.5 % on a loaded machine, and a
change while Prometheus was down could not be timed at all; whether Prometheus was down inside B's
stall is still recorded); lost work is priced per step at the cost measured in steady windows, which
for a constant step time is the oracle's rate x step time.

Expected figures use only: node prices and capacities (set here), pod start and end times (the API
server's records), the worker processes' logs, and OpenCost's default rates as the price split
(written out below, not imported). No product code computes them.

Run: python bench/cost_oracle.py --cluster NAME [--out bench/results/cost_oracle.json]
     (NAME: a running `statictrain-cluster start --name NAME`)
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import json
import math
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import CollectorRegistry, start_http_server
from statictrain import labels
from statictrain.pricing import parse_catalog, shipped_catalog_text
from statictrain_cli.main import build_parser, run_report
from statictrain_cli.report.fetch import fetch
from statictrain_cli.report.focus import to_focus
from statictrain_cli.report.model import GroupBy, ReportWindow, build_report
from statictrain_cli.report.text import to_json
from statictrain_localcluster.cluster import LocalCluster
from statictrain_localcluster.nodepool import GPU, Pool, node_manifests
from statictrain_localcluster.waiting import crds_established
from statictrain_operator.cost.accounting import Accountant
from statictrain_operator.cost.cluster import ClusterCost
from statictrain_operator.cost.exporter import CostMetrics
from statictrain_operator.cost.settings import CostSettings
from statictrain_operator.kube import endpoint
from statictrain_operator.kube.blocking import LoopThread
from statictrain_operator.kube.http import HttpKube
from statictrain_operator.kube.port import STJ
from statictrain_operator.prom import HttpPrometheus

ROOT = Path(__file__).resolve().parents[1]
CRD = ROOT / "crds" / "statictrain.io_statictrainingjobs.yaml"
WORKER = ROOT / "bench" / "oracle_worker.py"
KWOK_TOLERATION = {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}
HOLD = "statictrain.io/oracle-hold"
STEP_S = 0.05
TOKENS = 256
COMPILE_S = 4.0
# OpenCost's default hourly rates: GPU, vCPU, GiB of RAM (the price split's weights).
W_GPU, W_CPU, W_MEM = 0.95, 0.031611, 0.004237
GIB = 2.0**30
PUE = 1.2
PLANTED = 1.05
"""The bill's factor on one node (its reconcile must name that node alone)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _now() -> datetime:
    return datetime.now(UTC)


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_t(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def qty(text: str) -> float:
    """Kubernetes quantities of the kinds used here (plain, m, Ki, Mi, Gi)."""
    for suffix, mult in (("Ki", 2**10), ("Mi", 2**20), ("Gi", 2**30), ("Ti", 2**40), ("m", 1e-3), ("k", 1e3)):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * mult
    return float(text)


# ----------------------------------------------------------------------------- Prometheus


class Prometheus:
    """Debian's Prometheus with file-based targets, scraping every 100 ms; restartable on the same data."""

    def __init__(self, workdir: Path) -> None:
        self.dir = workdir / "prometheus"
        self.targets = self.dir / "targets"
        self.targets.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cfg = {
            "global": {"scrape_interval": "100ms", "scrape_timeout": "90ms", "evaluation_interval": "5s"},
            "scrape_configs": [
                {
                    "job_name": "oracle",
                    "honor_labels": True,
                    "file_sd_configs": [{"files": [str(self.targets / "*.json")], "refresh_interval": "1s"}],
                }
            ],
        }
        (self.dir / "prometheus.yml").write_text(yaml.safe_dump(cfg))
        self.proc: subprocess.Popen[bytes] | None = None

    def add(self, name: str, port: int) -> None:
        tmp = self.targets / f".{name}.tmp"
        tmp.write_text(json.dumps([{"targets": [f"127.0.0.1:{port}"], "labels": {"job": name}}]))
        tmp.replace(self.targets / f"{name}.json")

    def start(self) -> None:
        binary = shutil.which("prometheus") or "/usr/bin/prometheus"
        with (self.dir / "prometheus.log").open("ab") as out:  # the child keeps its own copy
            self.proc = subprocess.Popen(
                [
                    binary,
                    f"--config.file={self.dir / 'prometheus.yml'}",
                    f"--storage.tsdb.path={self.dir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib_open(f"{self.url}/-/ready") as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"Prometheus not ready; see {self.dir / 'prometheus.log'}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)


def urllib_open(url: str) -> Any:
    return urllib.request.urlopen(url, timeout=2)


# ----------------------------------------------------------------------------- the scenario


@dataclass
class Proc:
    """One worker process (a trainer+sidecar stand-in) of one pod."""

    pod: str
    popen: subprocess.Popen[bytes]
    stop: Path
    exit: Path
    log: Path
    port: int

    def result(self) -> dict[str, Any]:
        deadline = time.monotonic() + 600
        while not self.log.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.pod}: worker never finished")
            time.sleep(0.05)
        return dict(json.loads(self.log.read_text()))


@dataclass
class Scenario:
    cluster: LocalCluster
    workdir: Path
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    procs: list[Proc] = field(default_factory=list)
    logs: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    events: list[tuple[float, str]] = field(default_factory=list)

    def note(self, what: str) -> None:
        self.events.append((time.time(), what))
        print(f"[{time.strftime('%H:%M:%S')}] {what}", file=sys.stderr, flush=True)

    def kubectl(self, *args: str, input: str | None = None) -> str:
        return self.cluster.kubectl(*args, input=input).stdout

    def apply(self, obj: dict[str, Any]) -> None:
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump(obj))

    def get(self, *args: str) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.kubectl("get", *args, "-o", "json"))
        return out

    # -- objects

    def job(self, ns: str, name: str, commit: str, replicas: int, a0: float) -> None:
        self.apply(
            {
                "apiVersion": labels.API_VERSION,
                "kind": labels.KIND,
                "metadata": {"name": name, "namespace": ns, "labels": {labels.COMMIT: commit, labels.TEAM: "oracle"}},
                "spec": {
                    "image": "registry.example.com/train:1",
                    "entrypoint": "m:build",
                    "replicas": replicas,
                    "resources": {"gpusPerReplica": 1},
                    "suspend": True,
                },
            }
        )
        patch = {"status": {"cost": {"updated": iso(a0)}}}
        self.kubectl(
            "patch", labels.PLURAL, "-n", ns, name, "--subresource=status", "--type=merge", "-p", json.dumps(patch)
        )

    def pod(
        self, ns: str, name: str, job: str, commit: str, node: str, *, gpus: int, cpu: str, mem: str, rank: int = 0
    ) -> str:
        limits: dict[str, str] = {"cpu": cpu, "memory": mem}
        if gpus:
            limits[labels.GPU_RESOURCE] = str(gpus)
        self.apply(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "labels": {labels.JOB: job, labels.COMMIT: commit, labels.TEAM: "oracle", labels.ROLE: "worker"},
                    "annotations": {"batch.kubernetes.io/job-completion-index": str(rank)},
                },
                "spec": {
                    "nodeName": node,
                    "tolerations": [KWOK_TOLERATION],
                    "containers": [
                        {
                            "name": "train",
                            "image": "registry.example.com/train:1",
                            "resources": {"requests": dict(limits), "limits": dict(limits)},
                        }
                    ],
                },
            }
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            p = self.get("pod", "-n", ns, name)
            if p.get("status", {}).get("phase") == "Running" and p["status"].get("startTime"):
                return str(p["metadata"]["uid"])
            time.sleep(0.2)
        raise TimeoutError(f"pod {ns}/{name} not Running")

    def finish(self, ns: str, name: str, phase: str) -> None:
        end = iso(math.ceil(time.time()))
        terminated = {
            "exitCode": 0 if phase == "Succeeded" else 1,
            "reason": "Completed" if phase == "Succeeded" else "Error",
            "finishedAt": end,
            "startedAt": end,
        }
        patch = {
            "status": {
                "phase": phase,
                "containerStatuses": [
                    {
                        "name": "train",
                        "image": "registry.example.com/train:1",
                        "ready": False,
                        "restartCount": 0,
                        "started": False,
                        "state": {"terminated": terminated},
                    }
                ],
                "conditions": [
                    {"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": end}
                ],
            }
        }
        self.kubectl("patch", "pod", "-n", ns, name, "--subresource=status", "--type=merge", "-p", json.dumps(patch))
        self.note(f"{ns}/{name} -> {phase} at {end}")

    # -- worker processes

    def launch(
        self,
        prom: Prometheus,
        *,
        ns: str,
        pod: str,
        uid: str,
        job: str,
        commit: str,
        steps: int,
        start_step: int = 0,
        stall_after: int = -1,
        stall_s: float = 0.0,
        gap: tuple[float, float] = (0, 0),
        start_in: float = 6.5,
        gpus: int = 1,
    ) -> Proc:
        port = free_port()
        tag = f"{pod}-{len(self.procs)}"
        stop, exit_, log = (self.workdir / f"{tag}.{x}" for x in ("stop", "exit", "json"))
        metric_labels = {
            "job_name": job,
            "namespace": ns,
            "commit": commit,
            "team": "oracle",
            "pod": pod,
            "pod_uid": uid,
        }
        with (self.workdir / f"{tag}.err").open("wb") as err:
            popen = subprocess.Popen(
                [
                    sys.executable,
                    str(WORKER),
                    "--port",
                    str(port),
                    "--gpus",
                    str(gpus),
                    "--labels",
                    json.dumps(metric_labels),
                    "--start-at",
                    f"{time.time() + start_in:.3f}",
                    "--compile-s",
                    str(COMPILE_S),
                    "--step-s",
                    str(STEP_S),
                    "--steps",
                    str(steps),
                    "--start-step",
                    str(start_step),
                    "--tokens-per-step",
                    str(TOKENS),
                    "--stall-after",
                    str(stall_after),
                    "--stall-s",
                    str(stall_s),
                    "--gap-at",
                    f"{gap[0]:.3f}",
                    "--gap-s",
                    str(gap[1]),
                    "--stop-file",
                    str(stop),
                    "--exit-file",
                    str(exit_),
                    "--log",
                    str(log),
                ],
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )
        prom.add(f"worker-{tag}", port)
        proc = Proc(pod, popen, stop, exit_, log, port)
        self.procs.append(proc)
        return proc

    def done(self, proc: Proc, key: str, hold_s: float = 1.5) -> dict[str, Any]:
        """Wait for the process to finish its steps, keep its last values scraped for ``hold_s``."""
        r = proc.result()
        self.logs[key].append(r)
        time.sleep(hold_s)
        return r

    def stop_now(self, proc: Proc, key: str) -> dict[str, Any]:
        proc.stop.touch()
        return self.done(proc, key)


def cluster_cost(
    cluster: LocalCluster, state: str
) -> tuple[ClusterCost, Callable[[], None], Callable[[], None], Callable[[], None]]:
    """The cost part's API calls over the Kube port on a loop in a thread (the API's job list, read before each
    pass, stands in for kopf's index); the function that runs one pass's reads and the one that sends its
    writes (as the operator does around its pass), and the function that closes the session and stops the loop."""
    api = HttpKube(endpoint.load(str(cluster.kubeconfig)))
    loop = LoopThread()
    call = loop.__enter__()
    listed: list[dict[str, Any]] = []

    def job(namespace: str, name: str) -> dict[str, Any] | None:
        key = (namespace, name)
        return next((j for j in listed if (j["metadata"]["namespace"], j["metadata"]["name"]) == key), None)

    kube = ClusterCost(api, lambda: list(listed), job, _now, state_configmap=state)

    def load() -> None:
        listed[:] = call(api.list(STJ))
        call(kube.load())

    def close() -> None:
        call(api.close())
        loop.__exit__()

    return kube, load, lambda: call(kube.flush()), close


class OperatorProcess:
    """The cost part of the operator: an Accountant every 2 s and its metrics served over HTTP."""

    def __init__(self, cluster: LocalCluster, prom: Prometheus, port: int, state: str, *, loop: bool = True) -> None:
        """``state``: ``namespace/name`` of the ConfigMap keeping the cost state across operator processes."""
        self.registry = CollectorRegistry()
        self.metrics = CostMetrics(self.registry)
        self.server, _ = start_http_server(port, addr="127.0.0.1", registry=self.registry)
        settings = CostSettings(
            prometheus_url=prom.url, interval_s=2.0, max_catchup_s=10.0, counter_lookback_s=60.0, pue=PUE
        )
        self.clock_override: float | None = None
        kube, self._load, self._flush, self._close_kube = cluster_cost(cluster, state)
        self.acc = Accountant(
            kube=kube,
            prom=HttpPrometheus(prom.url),
            catalog=parse_catalog(shipped_catalog_text()),
            settings=settings,
            metrics=self.metrics,
            clock=self._clock,
        )
        self.stop_flag = threading.Event()
        self.runs: list[dict[str, Any]] = []
        self.thread = threading.Thread(target=self._loop, daemon=True)
        if loop:
            self.thread.start()

    def _clock(self) -> datetime:
        return datetime.fromtimestamp(self.clock_override, UTC) if self.clock_override else _now()

    def _loop(self) -> None:
        while not self.stop_flag.is_set():
            self.run_once()
            self.stop_flag.wait(2.0)

    def run_once(self) -> None:
        t = time.time()
        try:
            self._load()
            try:
                r = self.acc.run_once()
            finally:
                self._flush()
            self.runs.append(
                {
                    "at": t,
                    "windows": r.windows,
                    "failed": [c.name for c in r.checks if not c.ok],
                    "usage_error": r.usage_error,
                }
            )
            if os.environ.get("ORACLE_DEBUG"):
                self.runs[-1]["window"] = [r.window.start, r.window.end]
                self.runs[-1]["idle"] = {k[1]: str(v.idle_usd) for k, v in r.job_costs.items() if v.idle_usd}
        except Exception as e:  # the loop must go on, as in the operator; recorded
            self.runs.append({"at": t, "error": repr(e)})

    def shutdown(self) -> None:
        self.stop_flag.set()
        if self.thread.is_alive():
            self.thread.join()
        self.server.shutdown()
        self.server.server_close()
        self._close_kube()


def wait_for_no_worker_pods(sc: Scenario, timeout_s: float = 180.0) -> None:
    """The oracle must know every pod on the nodes (node idle = node - pods): wait while other worker pods are
    going away (deleted, or in a terminating namespace, e.g. an earlier test's); refuse any that stay."""
    deadline = time.monotonic() + timeout_s
    while True:
        pods = sc.get("pods", "-A", "-l", labels.JOB)["items"]
        if not pods:
            return
        namespaces = sc.get("namespaces")["items"]
        terminating = {n["metadata"]["name"] for n in namespaces if n["status"].get("phase") == "Terminating"}
        staying = [
            p
            for p in pods
            if not p["metadata"].get("deletionTimestamp") and p["metadata"]["namespace"] not in terminating
        ]
        if staying or time.monotonic() > deadline:
            names = ", ".join(f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in (staying or pods)[:5])
            raise SystemExit(f"{len(pods)} statictrain worker pods already in the cluster ({names}); use a fresh one")
        time.sleep(1.0)


def run(cluster: LocalCluster, workdir: Path) -> dict[str, Any]:
    sc = Scenario(cluster, workdir)
    rid = sc.run_id
    ns_a, ns_b = f"oracle-a-{rid}", f"oracle-b-{rid}"
    wait_for_no_worker_pods(sc)
    sc.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD))
    crds_established(cluster.kubectl, [f"{labels.PLURAL}.{labels.GROUP}"])
    for ns in (ns_a, ns_b):
        sc.kubectl("create", "namespace", ns)
    # nodes: a spot GPU node of our own (deleted mid-scenario), a CPU node; every node gets a price
    spot = f"oracle-spot-{rid}"
    cpu_node = f"oracle-cpu-{rid}"
    pools = [
        Pool(f"oracle-spot-{rid}", "p5.48xlarge", 1, "spot", "us-east-1", "us-east-1b", "192", "2048Gi", None),
        Pool(f"oracle-cpu-{rid}", "m6i.2xlarge", 1, "on-demand", "us-east-1", "us-east-1a", "8", "32Gi", None),
    ]
    manifests = node_manifests(pools)
    manifests[0] = node_manifests(
        [
            Pool(
                spot,
                "p5.48xlarge",
                1,
                "spot",
                "us-east-1",
                "us-east-1b",
                "192",
                "2048Gi",
                GPU("NVIDIA-H100-80GB-HBM3", 8, "81559"),
            )
        ]
    )[0]
    manifests[0]["metadata"]["name"] = spot
    manifests[1]["metadata"]["name"] = cpu_node
    manifests[0]["metadata"]["finalizers"] = [HOLD]
    for m in manifests:
        m["metadata"]["labels"]["kubernetes.io/hostname"] = m["metadata"]["name"]
        sc.apply(m)
    nodes = sc.get("nodes")["items"]
    on_demand_gpu = sorted(
        n["metadata"]["name"]
        for n in nodes
        if n["metadata"]["labels"].get(labels.CAPACITY_TYPE) == "on-demand"
        and int(n["status"]["capacity"].get(labels.GPU_RESOURCE, "0")) >= 8
    )
    gpu_od, gpu_od2 = on_demand_gpu[:2]  # E, A, B (5 GPUs) on the first; C's replacement (4) on the second
    prices: dict[str, float] = {}
    intensities: dict[str, float] = {}
    for i, n in enumerate(sorted(nodes, key=lambda n: n["metadata"]["name"])):
        name = n["metadata"]["name"]
        gpus = int(n["status"]["capacity"].get(labels.GPU_RESOURCE, "0"))
        prices[name] = {spot: 41.25, gpu_od: 98.32, gpu_od2: 32.77, cpu_node: 0.384}.get(
            name, round(1.5 + 2.75 * gpus + 0.1 * i, 4)
        )
        intensities[name] = {spot: 380.0, gpu_od: 420.0, gpu_od2: 310.0}.get(name, 400.0)
        sc.kubectl(
            "annotate", "node", name, "--overwrite", f"{labels.HOURLY_COST}={prices[name]}",
            f"{labels.GRID_INTENSITY}={intensities[name]}",
        )  # fmt: skip
    prom = Prometheus(workdir)
    prom.start()
    state = f"{ns_a}/cost-state"
    op_port = free_port()
    prom.add("operator", op_port)
    a0 = float(math.ceil(time.time()) + 2)
    jobs = {  # key -> (namespace, commit, ranks)
        "e": (ns_a, "c1", 1),
        "a": (ns_a, "c1", 1),
        "b": (ns_a, "c2", 2),
        "c": (ns_b, "c1", 1),
        "d": (ns_b, "c2", 1),
    }
    for key, (ns, commit, ranks) in jobs.items():
        sc.job(ns, f"job-{key}", commit, ranks, a0)
    while time.time() < a0 + 0.5:
        time.sleep(0.05)
    op = OperatorProcess(cluster, prom, op_port, state)
    sc.note(f"operator up; accounting from {iso(a0)}")
    t0 = time.time()
    uid: dict[str, str] = {}
    uid["e"] = sc.pod(ns_a, "job-e-worker-0", "job-e", "c1", gpu_od, gpus=1, cpu="8", mem="64Gi")
    uid["a"] = sc.pod(ns_a, "job-a-worker-0", "job-a", "c1", gpu_od, gpus=2, cpu="16", mem="128Gi")
    uid["b0"] = sc.pod(ns_a, "job-b-worker-0", "job-b", "c2", gpu_od, gpus=1, cpu="8", mem="64Gi", rank=0)
    uid["b1"] = sc.pod(ns_a, "job-b-worker-1", "job-b", "c2", gpu_od, gpus=1, cpu="8", mem="64Gi", rank=1)
    uid["c0"] = sc.pod(ns_b, "job-c-worker-0", "job-c", "c1", spot, gpus=4, cpu="48", mem="512Gi")
    uid["d"] = sc.pod(ns_b, "job-d-prep-0", "job-d", "c2", cpu_node, gpus=0, cpu="4", mem="8Gi")
    pe = sc.launch(prom, ns=ns_a, pod="job-e-worker-0", uid=uid["e"], job="job-e", commit="c1", steps=300)
    pa = sc.launch(prom, ns=ns_a, pod="job-a-worker-0", uid=uid["a"], job="job-a", commit="c1", steps=1000, gpus=2)
    start_b = 6.5  # a new target is scraped within ~5.2 s (Prometheus hands discovered targets on every 5 s)
    b0 = time.time() + start_b  # job B starts: its stall runs from b0 + 24 s to b0 + 44 s
    pb0 = sc.launch(
        prom,
        ns=ns_a,
        pod="job-b-worker-0",
        uid=uid["b0"],
        job="job-b",
        commit="c2",
        steps=1200,
        stall_after=400,
        stall_s=20.0,
        start_in=start_b,
    )
    pb1 = sc.launch(
        prom,
        ns=ns_a,
        pod="job-b-worker-1",
        uid=uid["b1"],
        job="job-b",
        commit="c2",
        steps=1200,
        stall_after=400,
        stall_s=20.0,
        gap=(b0 + 10, 4.0),  # while stepping at a constant utilization
        start_in=start_b - 0.1,
    )
    pc = sc.launch(prom, ns=ns_b, pod="job-c-worker-0", uid=uid["c0"], job="job-c", commit="c1", steps=800, gpus=4)

    def at(offset: float) -> None:
        while time.time() < t0 + offset:
            time.sleep(0.05)

    at(b0 + 26 - t0)  # inside B's stall: a utilization change while Prometheus is down cannot be timed
    sc.note("Prometheus restart")
    prom_down = time.time()
    prom.stop()
    time.sleep(3.0)
    prom.start()
    prom_up = time.time()
    sc.note(f"Prometheus ready again after {prom_up - prom_down:.1f} s")
    at(b0 + 46 - t0)
    op.shutdown()
    sc.note("operator down")
    # job C: spot eviction at step 800 (checkpoint 700): pod Failed, node deleted, replacement on on-demand
    sc.done(pc, "c", hold_s=0.8)
    pc.exit.touch()  # the evicted pod's sidecar goes with it
    sc.finish(ns_b, "job-c-worker-0", "Failed")
    time.sleep(max(0.0, math.ceil(time.time()) + 1.05 - time.time()))  # the node goes after the pod ended
    sc.kubectl("delete", "node", spot, "--wait=false")
    sc.note(f"spot node {spot} deleted (held by a finalizer until the end)")
    uid["c1"] = sc.pod(ns_b, "job-c-worker-1", "job-c", "c1", gpu_od2, gpus=4, cpu="48", mem="512Gi")
    pc2 = sc.launch(
        prom, ns=ns_b, pod="job-c-worker-1", uid=uid["c1"], job="job-c", commit="c1", steps=300, start_step=700, gpus=4
    )
    at(45)
    sc.finish(ns_b, "job-d-prep-0", "Succeeded")
    # job A: the process stops at step 1000 (last checkpoint 900); a new process in the same pod resumes
    sc.done(pa, "a")
    pa.exit.touch()  # the crashed process (and its metrics) is gone
    sc.note("job-a: process stopped at step 1000; restarting in the same pod from checkpoint 900")
    pa2 = sc.launch(
        prom,
        ns=ns_a,
        pod="job-a-worker-0",
        uid=uid["a"],
        job="job-a",
        commit="c1",
        steps=300,
        start_step=900,
        stall_after=100,
        stall_s=20.0,
        gpus=2,
    )
    at(b0 + 81 - t0)
    op = OperatorProcess(cluster, prom, op_port, state)
    sc.note("operator back (a new process: new counters)")
    for proc, key, ns, name in (
        (pe, "e", ns_a, "job-e-worker-0"),
        (pb0, "b", ns_a, "job-b-worker-0"),
        (pb1, "b", ns_a, "job-b-worker-1"),
        (pa2, "a", ns_a, "job-a-worker-0"),
        (pc2, "c", ns_b, "job-c-worker-1"),
    ):
        sc.done(proc, key)
        sc.finish(ns, name, "Succeeded")
    time.sleep(1.0)
    op.shutdown()
    a1 = float(math.ceil(time.time()) + 1)
    while time.time() < a1:
        time.sleep(0.05)
    runs = op.runs
    op = OperatorProcess(cluster, prom, op_port, state, loop=False)  # the last run ends exactly at a1
    op.runs = runs
    op.clock_override = a1
    op.run_once()
    time.sleep(2.0)  # scraped
    r_end = datetime.fromtimestamp(math.ceil(time.time()), UTC)
    window = ReportWindow(datetime.fromtimestamp(a0 - 2, UTC), r_end, buckets=24)
    reports = {}
    t_report = time.perf_counter()
    group_bys: tuple[GroupBy, ...] = ("job", "namespace", "commit")
    for group in group_bys:
        job_series, node_series = fetch(HttpPrometheus(prom.url), window)
        reports[group] = json.loads(to_json(build_report(window, group, job_series, node_series)))
        if os.environ.get("ORACLE_DEBUG"):
            raw = HttpPrometheus(prom.url).query(
                f"statictrain_node_cost_usd_total[{int(window.end.timestamp() - window.start.timestamp()) + 5}s]",
                window.end.timestamp(),
            )
            span = int(window.end.timestamp() - window.start.timestamp()) + 5
            util = HttpPrometheus(prom.url).query(
                f'statictrain_gpu_utilization_ratio{{job_name="job-b"}}[{span}s]', window.end.timestamp()
            )
            idle = HttpPrometheus(prom.url).query(
                f'statictrain_gpu_idle_seconds_total{{job_name="job-b"}}[{span}s]', window.end.timestamp()
            )
            debug = {
                "util_b": {s.labels.get("pod", ""): [list(p) for p in s.samples] for s in util},
                "idle_b": {s.labels.get("pod", ""): [list(p) for p in s.samples] for s in idle},
                "runs": op.runs,
                "logs_b": sc.logs.get("b"),
                "fetched": {s.labels.get("node", ""): [list(p) for p in s.samples] for s in node_series["node_usd"]},
                "raw": {s.labels.get("node", ""): [list(p) for p in s.samples] for s in raw},
            }
            (workdir.parent / "oracle-debug.json").write_text(json.dumps(debug))
    report_s = (time.perf_counter() - t_report) / 3
    # -- the scenario's own record: pods and nodes as the API server holds them, the workers' logs
    pods = {p["metadata"]["uid"]: p for ns in (ns_a, ns_b) for p in sc.get("pods", "-n", ns)["items"]}
    final_nodes = {n["metadata"]["name"]: n for n in sc.get("nodes")["items"]}
    saved_state = json.loads(sc.get("configmap", "-n", ns_a, "cost-state")["data"]["state.json"])
    seconds = int(window.end.timestamp() - window.start.timestamp())
    focus_window = ReportWindow(window.start, window.end, buckets=math.gcd(seconds, 24))  # whole-second periods
    focus_report = build_report(focus_window, "job", *fetch(HttpPrometheus(prom.url), focus_window))
    focus = to_focus(focus_report)
    bill = workdir / "bill.csv"
    bill.write_text(planted_bill(final_nodes, prices, a0, a1, gpu_od2))
    reconciliation = reconcile_cli(prom.url, bill, workdir / "reconcile.txt")
    expected = oracle(
        jobs=jobs,
        pods=pods,
        nodes=final_nodes,
        prices=prices,
        logs=sc.logs,
        a0=a0,
        a1=a1,
        lost_steps={"a": 100, "c": 100},
        intensities=intensities,
    )
    for proc in sc.procs:
        proc.exit.touch()
    for proc in sc.procs:
        proc.popen.wait(timeout=30)
    op.shutdown()
    prom.stop()
    sc.kubectl("patch", "node", spot, "--type=merge", "-p", json.dumps({"metadata": {"finalizers": None}}))
    sc.kubectl("delete", "node", cpu_node, "--wait=false")
    for ns in (ns_a, ns_b):
        sc.kubectl("delete", "namespace", ns, "--wait=false")
    stalls_b = [r["util_changes"] for r in sc.logs["b"]]  # [[t, 0.0], [t, 0.9]] per rank
    return {
        "assumptions": {
            # Prometheus down inside B's stall: no utilization change falls in the gap (needed when idle came
            # from utilization samples; with the idle counters, only a record of how the run went)
            "prometheus_down_inside_b_stall": max(c[0][0] for c in stalls_b) < prom_down
            and prom_up < min(c[1][0] for c in stalls_b),
            "prometheus_down_s": round(prom_up - prom_down, 2),
            # the product reads a series' first energy sample as its baseline: before it, nothing is measured
            "energy_baseline_before_start": {
                f"{key}:{i}": r["first_scrape_at"] is not None and r["first_scrape_at"] < r["start_at"]
                for key, runs in sc.logs.items()
                for i, r in enumerate(runs)
            },
        },
        "focus": focus,
        "focus_node_usd": focus_report.node_usd,
        "reconcile": reconciliation,
        "planted_node": gpu_od2,
        "expected": expected,
        "reports": reports,
        "report_seconds": report_s,
        "accounting_runs": op.runs,
        "events": [[round(t - t0, 2), what] for t, what in sc.events],
        "saved_state": saved_state,
        "a0": iso(a0),
        "a1": iso(a1),
    }


def planted_bill(nodes: dict[str, dict[str, Any]], prices: dict[str, float], a0: float, a1: float, planted: str) -> str:
    """A provider's FOCUS bill for [a0, a1) in the shape of the FOCUS 1.2 examples (one Usage row per resource and
    charge period, ConsumedQuantity in Hours): each node at its scenario price per minute while it existed, the
    ``planted`` node at PLANTED x its price; plus an EBS volume, a tax row and a row in EUR."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory",
                "ChargeFrequency", "PricingCategory", "ResourceId", "BilledCost", "EffectiveCost", "ConsumedQuantity",
                "ConsumedUnit", "BillingCurrency", "ServiceName"])  # fmt: skip
    period = (iso(a0 - a0 % 86400), iso(a0 - a0 % 86400 + 86400))

    def row(lo: float, hi: float, resource: str, usd: float, *, currency: str = "USD", category: str = "Usage") -> None:
        hours = (hi - lo) / 3600
        w.writerow([*period, iso(lo), iso(hi), category, "Usage-Based", "Standard", resource, f"{usd:.10f}",
                    f"{usd:.10f}", f"{hours:.10f}", "Hours", currency, "Amazon Elastic Compute Cloud"])  # fmt: skip

    for name, n in sorted(nodes.items()):
        lo = max(a0, parse_t(n["metadata"]["creationTimestamp"]))
        gone = n["metadata"].get("deletionTimestamp")
        hi = min(a1, parse_t(gone)) if gone else a1
        t = lo
        while t < hi:
            nxt = min(hi, t + 60.0)
            row(t, nxt, name, prices[name] * (PLANTED if name == planted else 1.0) * (nxt - t) / 3600)
            t = nxt
    row(a0, a1, "vol-0123456789abcdef0", 0.0042)
    row(a0, a1, "", 1.25, category="Tax")
    row(a0, a1, next(iter(sorted(nodes))), 0.5, currency="EUR")
    return out.getvalue()


def reconcile_cli(prom_url: str, bill: Path, out: Path) -> str:
    """``statictrain report --reconcile BILL`` as a user runs it; its output."""
    args = build_parser().parse_args(
        ["report", "--reconcile", str(bill), "--prometheus-url", prom_url, "--no-progress", "-o", str(out)]
    )
    err = io.StringIO()
    if run_report(args, stderr=err) != 0:
        raise RuntimeError(f"report --reconcile failed: {err.getvalue()}")
    return out.read_text()


# ----------------------------------------------------------------------------- the oracle (no product code)

FIGURES = ("usd", "gpu_usd", "cpu_usd", "memory_usd", "idle_usd", "compile_usd", "lost_usd", "gpu_hours", "tokens",
           "steps", "lost_steps")  # fmt: skip
"""The report's figures per row that the oracle predicts."""
ENERGY_FIGURES = ("gpu_energy_kwh", "carbon_kg")
BUSY_W, STALL_W = 650.0, 90.0
"""Per GPU, as the workers are started (bench/oracle_worker.py's defaults)."""


def split(node: dict[str, Any], price: float) -> tuple[float, float, float]:
    cap = node["status"].get("allocatable") or node["status"]["capacity"]
    g, c, m = float(cap.get(labels.GPU_RESOURCE, "0")), qty(cap.get("cpu", "0")), qty(cap.get("memory", "0")) / GIB
    f = price / (g * W_GPU + c * W_CPU + m * W_MEM)
    return W_GPU * f, W_CPU * f, W_MEM * f


def oracle(
    *,
    jobs: dict[str, tuple[str, str, int]],
    pods: dict[str, dict[str, Any]],
    nodes: dict[str, dict[str, Any]],
    prices: dict[str, float],
    logs: dict[str, list[dict[str, Any]]],
    a0: float,
    a1: float,
    lost_steps: dict[str, int],
    intensities: dict[str, float],
) -> dict[str, Any]:
    """Expected figures per job, namespace and commit, and node totals, from the scenario's record."""
    rows: dict[str, dict[str, float]] = {}
    pod_usd_on: dict[str, float] = defaultdict(float)
    pod_rate: dict[str, float] = {}
    for key, (ns, _, ranks) in jobs.items():
        row = dict.fromkeys(FIGURES + ENERGY_FIGURES, 0.0)
        mine = [p for p in pods.values() if p["metadata"]["labels"][labels.JOB] == f"job-{key}"]
        for p in sorted(mine, key=lambda p: p["status"]["startTime"]):
            node = p["spec"]["nodeName"]
            pg, pc, pm = split(nodes[node], prices[node])
            req = p["spec"]["containers"][0]["resources"]["requests"]
            g, c, m = float(req.get(labels.GPU_RESOURCE, "0")), qty(req["cpu"]), qty(req["memory"]) / GIB
            start = parse_t(p["status"]["startTime"])
            end = parse_t(p["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"])
            hours = (min(end, a1) - max(start, a0)) / 3600
            row["gpu_usd"] += g * pg * hours
            row["cpu_usd"] += c * pc * hours
            row["memory_usd"] += m * pm * hours
            row["gpu_hours"] += g * hours
            rate = g * pg + c * pc + m * pm
            pod_rate[p["metadata"]["name"]] = rate
            pod_usd_on[node] += rate * hours
        row["usd"] = row["gpu_usd"] + row["cpu_usd"] + row["memory_usd"]
        rows[f"{ns}/job-{key}"] = row | {"_ranks": float(ranks)}
    # per-process figures: which pod ran each logged process, in the order the scenario waited for them
    placement = {
        "e": ["job-e-worker-0"],
        "a": ["job-a-worker-0", "job-a-worker-0"],
        "b": ["job-b-worker-0", "job-b-worker-1"],
        "c": ["job-c-worker-0", "job-c-worker-1"],
        "d": [],
    }
    for key, (ns, _, ranks) in jobs.items():
        row = rows[f"{ns}/job-{key}"]
        executed = 0.0
        for r, pod_name in zip(logs.get(key, []), placement[key], strict=True):
            p = next(p for p in pods.values() if p["metadata"]["name"] == pod_name)
            node = p["spec"]["nodeName"]
            pg, _, _ = split(nodes[node], prices[node])
            g = float(p["spec"]["containers"][0]["resources"]["requests"].get(labels.GPU_RESOURCE, "0"))
            rate = pod_rate[pod_name]
            row["tokens"] += r["tokens"]
            executed += r["executed"]
            row["compile_usd"] += r["compile_s"] * rate / 3600
            changes = r["util_changes"]  # [t, 0.0] then [t, 0.9]: the stall
            idle_s = sum(b[0] - a[0] for a, b in zip(changes[::2], changes[1::2], strict=True))
            row["idle_usd"] += g * pg * idle_s / 3600
            # energy: each GPU's power between the changes the worker logged (busy, stall, busy, stopped)
            power = r["power_changes"]  # [t, watts]: BUSY_W at its start, STALL_W in its stall, 0 when stopped
            kwh = g * sum(w * (t1 - t0) for (t0, w), (t1, _) in itertools.pairwise(power)) / 3.6e6
            row["gpu_energy_kwh"] += kwh
            row["carbon_kg"] += kwh * PUE * intensities[node] / 1000
        executed /= ranks
        lost = float(lost_steps.get(key, 0))
        row["lost_steps"] = lost
        row["steps"] = executed - lost
        if lost:  # priced at the rate of the pod that computed the lost steps, per step of STEP_S seconds
            row["lost_usd"] = lost * STEP_S * pod_rate[placement[key][0]] / 3600
    node_usd = 0.0
    node_idle = 0.0
    per_node: dict[str, float] = {}
    for name, n in nodes.items():
        created = parse_t(n["metadata"]["creationTimestamp"])
        gone = parse_t(n["metadata"]["deletionTimestamp"]) if n["metadata"].get("deletionTimestamp") else a1
        hours = max(0.0, min(gone, a1) - max(created, a0)) / 3600
        node_usd += prices.get(name, 0.0) * hours
        per_node[name] = prices.get(name, 0.0) * hours
        node_idle += prices.get(name, 0.0) * hours - pod_usd_on.get(name, 0.0)
    groups: dict[str, dict[str, dict[str, float]]] = {
        "job": {},
        "namespace": defaultdict(dict),
        "commit": defaultdict(dict),
    }
    for key, (ns, commit, _) in jobs.items():
        row = {k: v for k, v in rows[f"{ns}/job-{key}"].items() if not k.startswith("_")}
        groups["job"][f"{ns}/job-{key}"] = row
        for grp, k in (("namespace", ns), ("commit", commit)):
            for f, v in row.items():
                groups[grp][k][f] = groups[grp][k].get(f, 0.0) + v
    return {
        "groups": {g: dict(v) for g, v in groups.items()},
        "node_usd": node_usd,
        "node_idle_usd": node_idle,
        "per_node_usd": per_node,
    }


def compare(result: dict[str, Any]) -> dict[str, Any]:
    """Per-figure relative errors of the report against the oracle (zero expectations: error relative to the
    row's cost figure, or its executed steps for step counts)."""
    errors: dict[str, float] = {}
    for group, rows in result["expected"]["groups"].items():
        rep = result["reports"][group]
        key_names = {"job": ("namespace", "job_name"), "namespace": ("namespace",), "commit": ("commit",)}[group]
        got_rows = {"/".join(r[k] for k in key_names): r for r in rep["rows"]}
        for key, want in rows.items():
            got = got_rows.get(key)
            for f in FIGURES:
                w = want[f]
                g = float(got[f]) if got is not None and got.get(f, "") != "" else 0.0
                scale = abs(w) if w else (want["usd"] if f.endswith("usd") or f == "gpu_hours" else want["steps"] or 1)
                errors[f"{group}:{key}:{f}"] = abs(g - w) / scale if scale else abs(g)
    s = result["reports"]["job"]["summary"]
    for f, name in (("node_usd", "node_usd"), ("node_idle_usd", "node_idle_usd")):
        w = result["expected"][f]
        errors[f"nodes:{name}"] = abs(float(s[name]) - w) / abs(w)
    lost = [v for k, v in errors.items() if k.endswith(":lost_usd")]
    rest = [v for k, v in errors.items() if not k.endswith(":lost_usd")]
    energy: dict[str, float] = {}
    for group, rows in result["expected"]["groups"].items():
        key_names = {"job": ("namespace", "job_name"), "namespace": ("namespace",), "commit": ("commit",)}[group]
        got_rows = {"/".join(r[k] for k in key_names): r for r in result["reports"][group]["rows"]}
        for f in ENERGY_FIGURES:
            scale = max(w[f] for w in rows.values())  # a row with none (the CPU-only job): against the largest
            for key, want in rows.items():
                got = float((got_rows.get(key) or {}).get(f) or 0.0)
                energy[f"{group}:{key}:{f}"] = abs(got - want[f]) / (abs(want[f]) or scale)
    return {
        "max_rel_error": max(rest),
        "lost_work_rel_error": max(lost),
        "energy_max_rel_error": max(v for k, v in energy.items() if k.endswith(":gpu_energy_kwh")),
        "carbon_max_rel_error": max(v for k, v in energy.items() if k.endswith(":carbon_kg")),
        "per_figure": errors | energy,
    }


def focus_sum(text: str) -> float:
    """Sum of BilledCost over the FOCUS rows (job and idle)."""
    return math.fsum(float(r["BilledCost"]) for r in csv.DictReader(io.StringIO(text)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cluster", required=True, help="name of a running local cluster")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "cost_oracle.json")
    ap.add_argument(
        "--report-bench",
        type=Path,
        default=ROOT / "bench" / "results" / "cost_accounting.json",
        help="result of bench/cost_accounting.py whose 1,000-job report time is carried over",
    )
    args = ap.parse_args(argv)
    cluster = LocalCluster(args.cluster)
    if not cluster.running():
        raise SystemExit(f"cluster {args.cluster} is not running: statictrain-cluster start --name {args.cluster}")
    with tempfile.TemporaryDirectory(prefix="cost-oracle-") as tmp:
        result = run(cluster, Path(tmp))
    cmp = compare(result)
    prom_v = subprocess.run(["prometheus", "--version"], capture_output=True, text=True, check=False).stdout
    bench_1000 = json.loads(args.report_bench.read_text())
    doc = {
        "max_rel_error": cmp["max_rel_error"],
        "lost_work_rel_error": cmp["lost_work_rel_error"],
        "energy_max_rel_error": cmp["energy_max_rel_error"],
        "carbon_max_rel_error": cmp["carbon_max_rel_error"],
        "focus_rows": len(result["focus"].splitlines()) - 1,
        "focus_rows_over_node_cost": focus_sum(result["focus"]) / result["focus_node_usd"],
        "reconcile": result["reconcile"].splitlines(),
        "report_1000_jobs_s": bench_1000["report_seconds_1000_jobs"],
        "report_1000_jobs_source": {
            "file": str(args.report_bench.relative_to(ROOT)) if args.report_bench.is_relative_to(ROOT) else "",
            "command": bench_1000.get("command"),
            "date": bench_1000.get("date"),
            "note": "measured by bench/cost_accounting.py (real Prometheus, 1,000 jobs), not by this scenario",
        },
        "per_figure_rel_error": cmp["per_figure"],
        "expected": result["expected"],
        "reports": result["reports"],
        "report_seconds_this_scenario": result["report_seconds"],
        "accounting_runs": result["accounting_runs"],
        "saved_state": result["saved_state"],
        "assumptions": result["assumptions"],
        "scenario": {"doc": __doc__, "events_s": result["events"], "accounted": [result["a0"], result["a1"]]},
        "command": f"python bench/cost_oracle.py --cluster {args.cluster}",
        "versions": {
            "python": platform.python_version(),
            "prometheus": prom_v.splitlines()[0] if prom_v else "",
            "prometheus_client": metadata.version("prometheus-client"),
            "git": subprocess.run(
                ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
            ).stdout.strip(),
        },
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "load_average": os.getloadavg()},
    }
    args.out.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    keys = ("max_rel_error", "lost_work_rel_error", "energy_max_rel_error", "carbon_max_rel_error")
    print(json.dumps({k: doc[k] for k in keys}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
