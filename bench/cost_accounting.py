"""Benchmark: cost accounting and reports with 1,000 jobs, through a real Prometheus.

What is real: Debian's Prometheus (scraping every second), the operator's cost
metrics collector served over HTTP, the accounting code (``Accountant``), the
report code (``fetch`` + ``build_report`` + JSON rendering, as ``statictrain
report`` runs them). What is synthetic: the API server state (1,000
StaticTrainingJobs with one worker pod each on catalog-priced GPU nodes, held
in memory, pods starting and finishing at seeded random times) — a local API
server with 1,000 jobs does not fit this 2-core machine next to the others.

Measured:
* ``jobs_plus_idle_over_node_cost``: (sum of job cost + unallocated node cost) /
  node cost, as the report computes it from Prometheus over a closed window;
* ``report_seconds_1000_jobs``: wall seconds of one report (all queries,
  building, JSON rendering) over that window, median of the runs;
* ``accounting_run_seconds_1000_jobs``: wall seconds of one accounting run;
* ``identical_rerun``: whether re-running the report gives identical bytes;
* ``scrapes``: scrapes of the exporter attempted and successful, and the longest. On a loaded machine the
  1,000-job exposition (served by this process, next to the accounting loop) can take longer than the
  scrape timeout; the bench then says so instead of reporting on missing data (``--scrape-interval``).

The synthetic jobs carry commit and team labels and their pods copies of them, as the operator makes them.

Run: .venv/bin/python bench/cost_accounting.py [--seconds 90] [--jobs 1000] [--scrape-interval 1]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from statictrain import labels, metrics
from statictrain.pricing import NodeFacts, parse_catalog, price_node, shipped_catalog_text
from statictrain.promql import range_duration
from statictrain_cli.report.fetch import fetch
from statictrain_cli.report.model import EmptyWindowError, ReportWindow, build_report
from statictrain_cli.report.text import to_json
from statictrain_operator.cost.accounting import Accountant
from statictrain_operator.cost.exporter import CostMetrics
from statictrain_operator.cost.settings import CostSettings
from statictrain_operator.prom import HttpPrometheus, Series

ROOT = Path(__file__).resolve().parents[1]
NODE_TYPES = [
    ("p5.48xlarge", 8, "NVIDIA-H100-80GB-HBM3"),
    ("p4d.24xlarge", 8, "NVIDIA-A100-SXM4-40GB"),
    ("g5.48xlarge", 8, "NVIDIA-A10G"),
    ("g6.48xlarge", 8, "NVIDIA-L4"),
]


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class SyntheticApi:
    """In-memory API server state for the benchmark (see module docstring)."""

    def __init__(self, jobs: int, t0: float, seconds: float, seed: int = 7) -> None:
        rng = random.Random(seed)
        catalog = parse_catalog(shipped_catalog_text())
        self.nodes: list[dict[str, Any]] = []
        self.pods: list[dict[str, Any]] = []
        self.jobs: dict[tuple[str, str], dict[str, Any]] = {}
        free: list[tuple[str, int]] = []
        n_nodes = jobs * 3 // 8 + 8  # ~1.5 GPUs per job on 8-GPU nodes, plus spare
        for i in range(n_nodes):
            it, gpus, product = NODE_TYPES[i % len(NODE_TYPES)]
            cap = "spot" if i % 3 == 0 else "on-demand"
            facts = NodeFacts(f"node-{i:04d}", it, "us-east-1", "spot" if cap == "spot" else "on-demand", product, gpus)
            price = price_node(facts, catalog, now=datetime.now(UTC))
            self.nodes.append(
                {
                    "metadata": {
                        "name": facts.name,
                        "creationTimestamp": iso(t0 - 3600),
                        "annotations": {labels.HOURLY_COST: f"{price.hourly_usd:f}"},
                    },
                    "status": {"capacity": {labels.GPU_RESOURCE: str(gpus)}},
                }
            )
            free.append((facts.name, gpus))
        namespaces = ["team-nlp", "team-vision", "team-speech", "research"]
        for j in range(jobs):
            ns, name = namespaces[j % 4], f"job-{j:04d}"
            commit, team = (
                f"{rng.getrandbits(28):07x}" if j % 20 == 0 else f"c{j % 50:02d}",
                ns.split("-")[-1],
            )
            gpus = rng.choice([1, 1, 2])
            k = next(i for i, (_, left) in enumerate(free) if left >= gpus)
            node, left = free[k]
            free[k] = (node, left - gpus)
            start = t0 + rng.uniform(-30, seconds * 0.5)
            end = start + rng.uniform(seconds * 0.2, seconds * 1.5)
            status: dict[str, Any] = {"phase": "Running", "startTime": iso(start)}
            if end < t0 + seconds:
                status = {
                    "phase": "Succeeded",
                    "startTime": iso(start),
                    "containerStatuses": [{"state": {"terminated": {"finishedAt": iso(end)}}}],
                }
            self.pods.append(
                {
                    "metadata": {
                        "uid": f"uid-{j}",
                        "name": f"{name}-worker-0",
                        "namespace": ns,
                        "labels": {labels.JOB: name, labels.COMMIT: commit, labels.TEAM: team},
                    },
                    "spec": {
                        "nodeName": node,
                        "containers": [{"resources": {"limits": {labels.GPU_RESOURCE: str(gpus)}}}],
                    },
                    "status": status,
                    "_visible_from": start,
                }
            )
            self.jobs[(ns, name)] = {
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "labels": {labels.COMMIT: commit, labels.TEAM: team},  # the pods' are copies (children)
                    "annotations": {},
                    "creationTimestamp": iso(t0 - 60),
                },
                "spec": {"replicas": 1},
                "status": {},
            }
        self.clock = time.time

    def list_nodes(self) -> list[dict[str, Any]]:
        return self.nodes

    def list_worker_pods(self) -> list[dict[str, Any]]:
        # a pod's status reads like the API server's at this moment: not started yet, running, or finished
        now = self.clock()
        out = []
        for p in self.pods:
            if p["_visible_from"] > now:
                continue
            st = p["status"]
            fin = (st.get("containerStatuses") or [{}])[0].get("state", {}).get("terminated", {}).get("finishedAt")
            if fin and datetime.fromisoformat(fin.replace("Z", "+00:00")).timestamp() > now:
                out.append({**p, "status": {"phase": "Running", "startTime": st["startTime"]}})
            else:
                out.append(p)
        return out

    def list_jobs(self) -> list[dict[str, Any]]:
        return list(self.jobs.values())

    def patch_job_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> bool:
        if (namespace, name) not in self.jobs:
            return False
        self.jobs[(namespace, name)]["status"].update(status)
        return True

    def patch_job(self, namespace: str, name: str, patch: Mapping[str, Any]) -> bool:
        self.jobs[(namespace, name)]["spec"].update(patch.get("spec", {}))
        return True

    def emit_event(self, job: Mapping[str, Any], reason: str, message: str, event_type: str) -> None:
        return None

    def read_state(self) -> str | None:
        return None  # a fresh start

    def write_state(self, text: str) -> bool:
        return True  # kept in memory by the Accountant


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_prometheus(
    binary: str, target_port: int, workdir: Path, interval_s: float
) -> tuple[subprocess.Popen[bytes], str]:
    """Prometheus scraping the exporter every ``interval_s`` (its timeout is the interval too)."""
    port = free_port()
    cfg = workdir / "prometheus.yml"
    every = f"{round(interval_s * 1000)}ms"
    cfg.write_text(
        f"global: {{scrape_interval: {every}, scrape_timeout: {every}, evaluation_interval: {every}}}\n"
        "scrape_configs:\n"
        f"- job_name: statictrain-operator\n  static_configs: [{{targets: ['127.0.0.1:{target_port}']}}]\n"
    )
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={cfg}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(workdir / "prometheus.log").open("wb"),
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"Prometheus did not become ready; see {workdir / 'prometheus.log'}")


class TimedReader:
    """Wall time spent in Prometheus queries (HTTP, Prometheus' evaluation, JSON decoding, parsing)."""

    def __init__(self, inner: HttpPrometheus) -> None:
        self.inner = inner
        self.seconds = 0.0

    def query(self, query: str, at: float) -> list[Series]:
        a = time.perf_counter()
        try:
            return self.inner.query(query, at)
        finally:
            self.seconds += time.perf_counter() - a

    def query_range(self, query: str, start: float, end: float, step: float) -> list[Series]:
        a = time.perf_counter()
        try:
            return self.inner.query_range(query, start, end, step)
        finally:
            self.seconds += time.perf_counter() - a


def wait_scraped_after(url: str, t: float, timeout_s: float) -> bool:
    """Wait until Prometheus holds a sample of the exporter scraped after ``t``; False when none within the
    timeout (every scrape failed: e.g. the exposition of 1,000 jobs took longer than the scrape timeout)."""
    reader = HttpPrometheus(url)
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        got = reader.query(f"timestamp({metrics.COST_ACCOUNTING_RUNS_TOTAL})", time.time())
        if any(s.samples and s.samples[-1].v >= t for s in got):
            return True
        time.sleep(0.2)
    return False


def scrape_health(url: str, start: float, end: float) -> dict[str, float]:
    """Scrapes of the exporter in ``[start, end]``: attempted, successful, longest (s)."""
    reader = HttpPrometheus(url)
    rng = range_duration(max(end - start, 0.001))

    def one(q: str) -> float:
        got = reader.query(q, end)
        return got[0].samples[-1].v if got and got[0].samples else 0.0

    return {
        "attempted": one(f"count_over_time(up[{rng}])"),
        "ok": one(f"sum_over_time(up[{rng}])"),
        "max_seconds": round(one(f"max_over_time(scrape_duration_seconds[{rng}])"), 3),
    }


def wait_first_scrape(url: str) -> None:
    reader = HttpPrometheus(url)
    for _ in range(300):
        if any(s.samples and s.samples[0].v == 1 for s in reader.query("up", time.time())):
            return
        time.sleep(0.1)
    raise SystemExit("Prometheus did not scrape the exporter within 30 s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=90.0, help="accounting runs for this long, one per second")
    ap.add_argument("--report-runs", type=int, default=3)
    ap.add_argument(
        "--scrape-interval",
        type=float,
        default=1.0,
        help="Prometheus scrapes the exporter this often, with this timeout (s); on a loaded machine the "
        "1,000-job exposition can take longer than 1 s",
    )
    ap.add_argument("--prometheus", default=shutil.which("prometheus") or "/usr/bin/prometheus")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "cost_accounting.json")
    args = ap.parse_args(argv)

    load_before = os.getloadavg()
    registry = CollectorRegistry()
    cost_metrics = CostMetrics(registry)
    exporter_port = free_port()
    server, _ = start_http_server(exporter_port, addr="127.0.0.1", registry=registry)
    workdir = Path(tempfile.mkdtemp(prefix="st-bench-"))
    prom, prom_url = start_prometheus(args.prometheus, exporter_port, workdir, args.scrape_interval)
    try:
        wait_first_scrape(prom_url)
        t0 = time.time()
        api = SyntheticApi(args.jobs, t0, args.seconds)
        acc = Accountant(
            kube=api,
            prom=HttpPrometheus(prom_url),
            catalog=parse_catalog(shipped_catalog_text()),
            settings=CostSettings(interval_s=1.0, query_step_s=1.0),
            metrics=cost_metrics,
            clock=lambda: datetime.now(UTC),
            last_end=t0,
        )
        run_s: list[float] = []
        deadline = t0 + args.seconds
        while time.time() < deadline:
            time.sleep(max(0.0, 1.0 - (time.time() - t0) % 1.0))
            a = time.perf_counter()
            acc.run_once()
            run_s.append(time.perf_counter() - a)
        last_run = time.time()
        wait = 10 * args.scrape_interval + 30
        scraped = wait_scraped_after(prom_url, last_run, wait)
        health = scrape_health(prom_url, t0, time.time())
        if not scraped:
            raise SystemExit(
                f"no scrape of the exporter succeeded within {wait:g} s after the last accounting run "
                f"({health['ok']:g} of {health['attempted']:g} scrapes since the start succeeded, the longest "
                f"took {health['max_seconds']} s against a {args.scrape_interval:g} s timeout; load "
                f"{os.getloadavg()[0]:.1f}): try --scrape-interval 5, or a quieter machine"
            )
        start = datetime.fromtimestamp(t0, UTC).replace(microsecond=0) + timedelta(seconds=10)
        end = datetime.fromtimestamp(acc.last_end or t0, UTC).replace(microsecond=0) + timedelta(seconds=2)
        window = ReportWindow(start, end, buckets=60)
        reader = TimedReader(HttpPrometheus(prom_url, timeout_s=120))
        report_s: list[float] = []
        query_s: list[float] = []
        outputs: list[str] = []
        ratio = None
        for _ in range(args.report_runs):
            a = time.perf_counter()
            reader.seconds = 0.0
            jobs, nodes = fetch(reader, window)
            query_s.append(reader.seconds)
            try:
                rep = build_report(window, "job", jobs, nodes)
            except EmptyWindowError as e:
                raise SystemExit(
                    f"{e}\n({health['ok']:g} of {health['attempted']:g} scrapes succeeded, the longest took "
                    f"{health['max_seconds']} s against a {args.scrape_interval:g} s timeout): try "
                    "--scrape-interval 5, or a quieter machine"
                ) from None
            text = to_json(rep)
            report_s.append(time.perf_counter() - a)
            outputs.append(text)
            ratio = rep.invariant_ratio
        rows = len(rep.rows)
    finally:
        prom.terminate()
        prom.wait(timeout=30)
        server.shutdown()
        server.server_close()
        shutil.rmtree(workdir, ignore_errors=True)

    prom_version = subprocess.run([args.prometheus, "--version"], capture_output=True, text=True, check=False)
    result = {
        "jobs_plus_idle_over_node_cost": round(ratio, 12) if ratio is not None else None,
        "report_seconds_1000_jobs": round(statistics.median(report_s), 3),
        "report_seconds_all_runs": [round(x, 3) for x in report_s],
        "report_seconds_in_prometheus_queries": [round(x, 3) for x in query_s],
        "accounting_run_seconds_1000_jobs": {
            "median": round(statistics.median(run_s), 4),
            "max": round(max(run_s), 4),
            "runs": len(run_s),
        },
        "identical_rerun": len(set(outputs)) == 1,
        "scrapes": {**health, "interval_and_timeout_s": args.scrape_interval},
        "report_rows": rows,
        "report_window": {"start": window.start.isoformat(), "end": window.end.isoformat(), "buckets": 60},
        "jobs": args.jobs,
        "nodes": len(api.nodes),
        "command": " ".join([".venv/bin/python", "bench/cost_accounting.py", *(argv or sys.argv[1:])]),
        "setup": f"real Prometheus scraping the operator's cost collector every {args.scrape_interval:g} s; "
        "accounting every 1 s "
        "over "
        "a synthetic in-memory API state (1 pod per job, seeded random start/finish); no sidecar "
        "usage data (idle/compile/tokens are zero here)",
        "versions": {
            "python": platform.python_version(),
            "prometheus": prom_version.stdout.splitlines()[0] if prom_version.stdout else "",
            "prometheus_client": metadata.version("prometheus-client"),
            "statictrain-operator": metadata.version("statictrain-operator"),
        },
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
            "load_average_1m_before_and_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
            "note": "shared 2-core machine; other builds and tests ran at the same time",
        },
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
