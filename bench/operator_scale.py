"""Operator scale benchmark: N StaticTrainingJobs created at once on the real local cluster.

Measures, for each size (a fresh operator and namespace per size, one after the other):
- all_workers_s: from the first create request until every worker pod of every
  job exists (operator handler + Job controller), seen through a watch;
- handler latency per job: from the job's create response until its worker Job
  is visible through a watch (the operator's event -> handler -> API write),
  p50 and p99;
- the operator's CPU seconds over that time and its resident memory at the end
  (VmRSS) and at its peak (VmHWM).

The operator runs as a real subprocess (statictrain-operator --kubeconfig ...)
watching one fresh namespace. Writes bench/results/operator_scale.json: the
first size under the plain keys, every other size under keys suffixed _<size>.

    .venv/bin/python bench/operator_scale.py [--jobs 200,2000] [--cluster NAME]

--cluster attaches to a running `statictrain-cluster start --name NAME`;
without it a cluster is started for the run and stopped afterwards.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from importlib import metadata
from typing import Any

from kubernetes import client, config, watch
from statictrain import labels
from statictrain_localcluster.cluster import LocalCluster, build_binaries

REPO = pathlib.Path(__file__).resolve().parents[1]
RESULT = REPO / "bench" / "results" / "operator_scale.json"
TOLERATIONS = [
    {"key": "kwok.x-k8s.io/node", "operator": "Equal", "value": "fake", "effect": "NoSchedule"},
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
]


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def manifest(name: str) -> dict[str, Any]:
    return {
        "apiVersion": labels.API_VERSION,
        "kind": labels.KIND,
        "metadata": {"name": name, "labels": {labels.COMMIT: "bench", labels.TEAM: "bench"}},
        "spec": {
            "image": "ghcr.io/statictrain/trainer:0.1.0",
            "entrypoint": "statictrain_trainer.examples.tiny:build",
            "replicas": 1,
            "resources": {"gpusPerReplica": 1},
        },
    }


class Watcher(threading.Thread):
    """Records the first time each object of `kind` appears in the namespace."""

    def __init__(self, list_fn: Any, namespace: str, selector: str) -> None:
        super().__init__(daemon=True)
        self.list_fn, self.namespace, self.selector = list_fn, namespace, selector
        self.seen: dict[str, float] = {}
        self.ready = threading.Event()
        self.stop = watch.Watch()  # type: ignore[no-untyped-call]
        self.done = False

    def run(self) -> None:
        first = True
        while not self.done:
            try:
                initial = self.list_fn(self.namespace, label_selector=self.selector)
                now = time.monotonic()
                for item in initial.items:  # seen while the watch was re-established: as of the re-list
                    self.seen.setdefault(item.metadata.name, now)
                if first:
                    self.ready.set()
                    first = False
                for event in self.stop.stream(  # type: ignore[no-untyped-call]
                    self.list_fn,
                    self.namespace,
                    label_selector=self.selector,
                    resource_version=initial.metadata.resource_version,
                ):
                    self.seen.setdefault(event["object"].metadata.name, time.monotonic())
            except Exception as e:  # a watch the server ended early: list and watch again
                if not self.done:
                    print(f"watch of {self.selector} restarted: {type(e).__name__}", file=sys.stderr)

    def close(self) -> None:
        self.done = True
        self.stop.stop()  # type: ignore[no-untyped-call]


class KubeconfigCluster:
    """Any running cluster given by a kubeconfig (kubectl from PATH), for runs outside the local tooling."""

    def __init__(self, kubeconfig: pathlib.Path) -> None:
        self.kubeconfig = kubeconfig
        self.env = {**os.environ, "KUBECONFIG": str(kubeconfig)}

    def kubectl(self, *args: str, check: bool = True, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["kubectl", *args], env=self.env, capture_output=True, text=True, check=check, timeout=timeout
        )

    def stop(self) -> None:
        pass


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (from /proc)."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_mb(pid: int) -> dict[str, float]:
    """VmRSS (now) and VmHWM (peak) of a process, in MiB (from /proc)."""
    out: dict[str, float] = {}
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = round(int(value.split()[0]) / 1024, 1)
    return out


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(mem_gb, 1), "os": platform.platform()}


def run_size(
    cluster: Any, jobs: int, parts: str, timeout: float, *, wait_gone: bool, pythonpath: str | None = None
) -> dict[str, Any]:
    """One measurement: a fresh namespace and operator, ``jobs`` StaticTrainingJobs created at once.

    ``pythonpath`` replaces the operator's PYTHONPATH (e.g. "" runs the operator installed in the venv,
    the baseline, instead of a worktree's sources put first by env.sh)."""
    ns = f"bench-{uuid.uuid4().hex[:6]}"
    op: subprocess.Popen[bytes] | None = None
    try:
        cluster.kubectl("create", "namespace", ns)
        cfg = client.Configuration()
        config.load_kube_config(config_file=str(cluster.kubeconfig), client_configuration=cfg)  # type: ignore[no-untyped-call]
        cfg.connection_pool_maxsize = 32
        api = client.ApiClient(cfg)
        custom, batch, core = client.CustomObjectsApi(api), client.BatchV1Api(api), client.CoreV1Api(api)

        env = dict(cluster.env)
        env.update(
            {
                "STATICTRAIN_OPERATOR_NAMESPACES": ns,
                "STATICTRAIN_OPERATOR_TOLERATIONS": json.dumps(TOLERATIONS),
                "STATICTRAIN_OPERATOR_PARTS": parts,
                # kwok pods write no checkpoints: no per-job claims (as in the operator's integration tests)
                "STATICTRAIN_OPERATOR_CHECKPOINT_VOLUME_SIZE": "",
            }
        )
        if pythonpath is not None:
            env["PYTHONPATH"] = pythonpath
        exe = shutil.which("statictrain-operator", path=os.path.dirname(sys.executable))
        assert exe, "statictrain-operator is not installed next to this python"
        log = (pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / f"{ns}-operator.log").open("wb")
        port = 18080 + os.getpid() % 1000
        op = subprocess.Popen(
            [exe, "--kubeconfig", str(cluster.kubeconfig), "--liveness", f"http://127.0.0.1:{port}/healthz"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).read()
                break
            except OSError:
                if time.monotonic() > deadline or op.poll() is not None:
                    raise SystemExit(f"operator did not become healthy; log: {log.name}") from None
                time.sleep(0.2)

        selector = f"{labels.MANAGED_BY}={labels.MANAGED_BY_VALUE}"
        jobs_w = Watcher(batch.list_namespaced_job, ns, selector)
        pods_w = Watcher(core.list_namespaced_pod, ns, labels.JOB)
        for w in (jobs_w, pods_w):
            w.start()
            w.ready.wait(30)

        names = [f"job-{i:04d}" for i in range(jobs)]
        created: dict[str, float] = {}

        def create(name: str) -> None:
            custom.create_namespaced_custom_object(labels.GROUP, labels.VERSION, ns, labels.PLURAL, manifest(name))
            created[name] = time.monotonic()

        cpu0 = cpu_seconds(op.pid)
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(create, names))
        t_applied = time.monotonic() - t0
        deadline = time.monotonic() + timeout
        want_jobs = {f"{n}-worker" for n in names}
        while not want_jobs <= set(jobs_w.seen):  # the operator's work: every worker Job exists
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out: {len(jobs_w.seen)} worker Jobs of {jobs}")
            time.sleep(0.1)
        all_worker_jobs_s = max(jobs_w.seen[j] for j in want_jobs) - t0
        operator_cpu_s = cpu_seconds(op.pid) - cpu0
        mem = memory_mb(op.pid)
        while len(pods_w.seen) < jobs and time.monotonic() < deadline:  # then the Job controller's
            time.sleep(0.1)
        pods_seen = len(pods_w.seen)
        all_workers_s = max(pods_w.seen.values()) - t0 if pods_seen >= jobs else None
        latencies = [jobs_w.seen[f"{n}-worker"] - created[n] for n in names]
        for w in (jobs_w, pods_w):
            w.close()
        return {
            "jobs": jobs,
            "all_workers_s": None if all_workers_s is None else round(all_workers_s, 3),
            "all_worker_jobs_s": round(all_worker_jobs_s, 3),
            "worker_pods_seen": pods_seen,
            "handler_latency_p50_s": round(percentile(latencies, 50), 4),
            "handler_latency_p99_s": round(percentile(latencies, 99), 4),
            "handler_latency_max_s": round(max(latencies), 4),
            "handler_latency_mean_s": round(statistics.fmean(latencies), 4),
            "create_requests_s": round(t_applied, 3),
            "operator_cpu_s": round(operator_cpu_s, 2),
            "operator_rss_mb": mem.get("VmRSS"),
            "operator_peak_rss_mb": mem.get("VmHWM"),
            "load_average_1m_at_end": round(os.getloadavg()[0], 2),
        }
    finally:
        if op is not None:
            op.terminate()
            try:
                op.wait(60)
            except subprocess.TimeoutExpired:
                op.kill()
                op.wait(30)
        # Before another size: wait for the namespace to go, so its garbage collection does not load that run.
        wait = ["--wait=true", "--timeout=1200s"] if wait_gone else ["--wait=false"]
        try:
            cluster.kubectl("delete", "namespace", ns, *wait, check=False, timeout=1260)
        except subprocess.TimeoutExpired:
            print(f"namespace {ns} still terminating; going on", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", default="200,2000", help="comma-separated sizes, measured in this order")
    p.add_argument(
        "--cluster",
        default=os.environ.get("STATICTRAIN_TEST_CLUSTER"),
        help="name of a running local cluster to attach to",
    )
    p.add_argument("--kubeconfig", type=pathlib.Path, help="use this cluster instead of a local one")
    p.add_argument("--parts", default="", help="optional operator parts to run too (e.g. cost,anomaly)")
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--out", type=pathlib.Path, default=RESULT)
    p.add_argument(
        "--baseline-sizes",
        default="",
        help="sizes also measured, just before, with the baseline operator: the one installed in the venv "
        "(PYTHONPATH cleared), e.g. main's when this runs from a worktree with env.sh",
    )
    args = p.parse_args(argv)
    sizes = [int(x) for x in str(args.jobs).split(",") if x.strip()]

    own = args.cluster is None and args.kubeconfig is None
    cluster: Any = (
        KubeconfigCluster(args.kubeconfig)
        if args.kubeconfig
        else LocalCluster(args.cluster or f"st-bench-{os.getpid()}")
    )
    if own:
        cluster.start(build_binaries(log=sys.stderr), log=sys.stderr, real_node=False)
    try:
        cluster.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            str(REPO / "crds" / "statictrain.io_statictrainingjobs.yaml"),
        )
        cluster.kubectl("wait", "--for=condition=Established", "crd/statictrainingjobs.statictrain.io")
        runs = []
        baseline: dict[int, dict[str, Any]] = {}
        base_sizes = {int(x) for x in str(args.baseline_sizes).split(",") if x.strip()}
        for i, n in enumerate(sizes):
            if n in base_sizes:  # side by side: the baseline right before, on the same cluster and load
                baseline[n] = run_size(cluster, n, args.parts, args.timeout, wait_gone=True, pythonpath="")
                print(json.dumps({"baseline": baseline[n]}), file=sys.stderr)
            runs.append(run_size(cluster, n, args.parts, args.timeout, wait_gone=i + 1 < len(sizes)))
            print(json.dumps(runs[-1]), file=sys.stderr)  # each size as soon as it is measured
        nodes = json.loads(cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
        versions = {d: metadata.version(d) for d in ("kopf", "aiohttp", "statictrain-operator")}
        versions["python"] = platform.python_version()
        versions["kube-apiserver"] = json.loads(cluster.kubectl("version", "-o", "json").stdout)["serverVersion"][
            "gitVersion"
        ]
        first = runs[0]
        result: dict[str, Any] = {
            "jobs": first["jobs"],
            "replicas_per_job": 1,
            **{k: v for k, v in first.items() if k != "jobs"},
        }
        for run in runs[1:]:
            n = run["jobs"]
            result.update({f"{k}_{n}": v for k, v in run.items() if k != "jobs"})
        for n, base in baseline.items():
            new = next(r for r in runs if r["jobs"] == n)
            result[f"baseline_{n}"] = base
            result[f"ratio_new_over_baseline_{n}"] = {
                k: round(new[k] / base[k], 3)
                for k in ("handler_latency_p50_s", "handler_latency_p99_s", "all_worker_jobs_s", "operator_cpu_s")
                if new.get(k) and base.get(k)
            }
        result.update(
            {
                "goals": {"all_workers_s": 10, "handler_latency_p50_s": 0.2, "handler_latency_p99_s": 1.0},
                "definitions": {
                    "operator_cpu_s": "CPU seconds of the operator process, first create -> every worker Job exists",
                    "operator_rss_mb": "resident memory of the operator when every worker Job exists (VmRSS, MiB)",
                    "operator_peak_rss_mb": "peak resident memory of the operator (VmHWM, MiB)",
                    "all_workers_s": "first create request -> last worker pod seen by a watch "
                    "(operator + Job controller); null when not every pod appeared within --timeout "
                    "(worker_pods_seen says how many did)",
                    "all_worker_jobs_s": "first create request -> last worker Job seen by a watch (the operator's "
                    "part: the Job controller makes the pods)",
                    "handler_latency": "create response of a StaticTrainingJob -> its worker Job seen by a watch "
                    "(kopf event delivery, handler, API write, watch delivery)",
                },
                "operator_parts": args.parts or "core only (no progress, cost, anomaly)",
                "nodes": {
                    "kwok": sum(
                        1 for n in nodes if (n["metadata"].get("annotations") or {}).get("kwok.x-k8s.io/node") == "fake"
                    ),
                    "total": len(nodes),
                },
                "setup": "a fresh operator subprocess watching a fresh namespace per size, one size after the "
                "other; 16 client threads create the jobs; kwok nodes only (no real node); the control plane, "
                "kwok, Prometheus and the operator share the machine with other work",
                "command": " ".join([pathlib.Path(sys.executable).name, *sys.argv]),
                "machine": machine(),
                "versions": versions,
                "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
        )
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result, indent=2))
        return 0
    finally:
        if own:
            cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
