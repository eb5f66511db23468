"""Operator scale benchmark: N StaticTrainingJobs created at once on the real local cluster.

Measures, for each size (a fresh operator and namespace per size, one after the other):
- all_workers_s: from the first create request until every worker pod of every
  job exists (operator handler + Job controller), seen through a watch;
- handler latency per job: from the job's create response until its worker Job
  is visible through a watch (the operator's event -> handler -> API write),
  p50 and p99;
- the operator's CPU seconds over that time and its resident memory at the end
  (VmRSS) and at its peak (VmHWM), and again at rest, SETTLE_S after the last
  worker pod (with --tracemalloc: a snapshot at both moments, <ns>.busy.json and
  <ns>.rest.json).

The operator runs as a real subprocess (statictrain-operator --kubeconfig ...)
watching one fresh namespace. Writes bench/results/operator_scale.json: the
first size under the plain keys, every other size under keys suffixed _<size>.

    .venv/bin/python bench/operator_scale.py [--jobs 200,2000] [--cluster NAME] [--together-sizes 200]

--together-sizes runs this operator and the baseline (the one installed in the
venv) at the same time, each on half of the jobs created in turn: a
side-by-side ratio under the same machine load, which back-to-back runs on a
shared machine do not give.

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
import signal
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
from statictrain_localcluster.waiting import crds_established

REPO = pathlib.Path(__file__).resolve().parents[1]
RESULT = REPO / "bench" / "results" / "operator_scale.json"
SETTLE_S = 15.0
"""Seconds after the last worker pod before the settled memory reading (past kopf's 5 s idle timeout of
per-object workers)."""
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
                # Raw JSON, not the client's model classes: this harness shares the 2 cores with the operator
                # and the API server, and building a model per event would slow what it measures.
                resp = self.list_fn(self.namespace, label_selector=self.selector, _preload_content=False)
                initial = json.loads(resp.data)
                now = time.monotonic()
                for item in initial["items"]:  # seen while the watch was re-established: as of the re-list
                    self.seen.setdefault(item["metadata"]["name"], now)
                if first:
                    self.ready.set()
                    first = False
                for event in self.stop.stream(  # type: ignore[no-untyped-call]
                    self.list_fn,
                    self.namespace,
                    label_selector=self.selector,
                    resource_version=initial["metadata"]["resourceVersion"],
                    deserialize=False,
                ):
                    self.seen.setdefault(event["object"]["metadata"]["name"], time.monotonic())
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


TRACE: dict[str, pathlib.Path] = {}
"""dir (--tracemalloc): each operator traces its allocations, writes <dir>/<namespace>.json when asked."""
TRACED: set[str] = set()
"""Namespaces whose operator traces its allocations (not the floor controller's)."""


def snapshot_allocations(op: subprocess.Popen[bytes], ns: str, moment: str) -> None:
    """Ask a traced operator for its snapshot (SIGUSR2), wait until it is written, keep it as <ns>.<moment>.json."""
    if "dir" not in TRACE or ns not in TRACED:
        return
    path = TRACE["dir"] / f"{ns}.json"
    before = path.stat().st_mtime_ns if path.exists() else 0
    os.kill(op.pid, signal.SIGUSR2)
    deadline = time.monotonic() + 300
    while not path.exists() or path.stat().st_mtime_ns == before:
        if time.monotonic() > deadline:
            raise SystemExit(f"no tracemalloc snapshot in {path}")
        time.sleep(0.5)
    shutil.copyfile(path, path.with_suffix(f".{moment}.json"))


def start_operator(cluster: Any, ns: str, parts: str, port: int, pythonpath: str | None) -> subprocess.Popen[bytes]:
    """A fresh operator subprocess watching ``ns``, healthy (its liveness endpoint answers) when this returns.

    ``pythonpath`` replaces the operator's PYTHONPATH (e.g. "" runs the operator installed in the venv,
    the baseline, instead of a worktree's sources put first by env.sh)."""
    env = dict(cluster.env)
    if "dir" in TRACE:
        env["STATICTRAIN_OPERATOR_TRACEMALLOC"] = str(TRACE["dir"] / f"{ns}.json")
        TRACED.add(ns)
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
    liveness = f"http://127.0.0.1:{port}/healthz"
    op = subprocess.Popen(
        # no /metrics of its own: two operators at once (and other work on the machine) would want one port
        [exe, "--kubeconfig", str(cluster.kubeconfig), "--liveness", liveness, "--metrics-port", "0"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).read()
            return op
        except OSError:
            if time.monotonic() > deadline or op.poll() is not None:
                raise SystemExit(f"operator did not become healthy; log: {log.name}") from None
            time.sleep(0.2)


def start_floor(cluster: Any, ns: str) -> subprocess.Popen[bytes]:
    """bench/floor_controller.py watching ``ns``, its watch established when this returns."""
    script = pathlib.Path(__file__).with_name("floor_controller.py")
    cmd = [sys.executable, str(script), "--kubeconfig", str(cluster.kubeconfig), "--namespace", ns]
    floor = subprocess.Popen(cmd, env=cluster.env, stdout=subprocess.PIPE)
    assert floor.stdout is not None
    if floor.stdout.readline().strip() != b"watching":
        raise SystemExit("the floor controller did not start")
    return floor


Launch = Any
"""(namespace, port) -> the side's controller process, running and watching its namespace."""


def operator_side(cluster: Any, parts: str, pythonpath: str | None) -> Launch:
    return lambda ns, port: start_operator(cluster, ns, parts, port, pythonpath)


def run_size(
    cluster: Any, jobs: int, parts: str, timeout: float, *, wait_gone: bool, pythonpath: str | None = None
) -> dict[str, Any]:
    """One measurement: a fresh namespace and operator, ``jobs`` StaticTrainingJobs created at once."""
    sides = {"run": operator_side(cluster, parts, pythonpath)}
    return run_sides(cluster, jobs, timeout, sides, wait_gone=wait_gone)["run"]


def run_sides(
    cluster: Any, jobs: int, timeout: float, sides: dict[str, Launch], *, wait_gone: bool
) -> dict[str, dict[str, Any]]:
    """``jobs`` StaticTrainingJobs created at once, shared out in turn among ``sides`` (name -> how to start
    its controller): each side is a fresh namespace with its own controller, all running at the same time,
    so two controllers compared this way see the same machine load."""
    tag = uuid.uuid4().hex[:6]
    namespaces = {side: f"bench-{tag}-{i}" for i, side in enumerate(sides)}
    ops: dict[str, subprocess.Popen[bytes]] = {}
    try:
        cfg = client.Configuration()
        config.load_kube_config(config_file=str(cluster.kubeconfig), client_configuration=cfg)  # type: ignore[no-untyped-call]
        cfg.connection_pool_maxsize = 32
        api = client.ApiClient(cfg)
        custom, batch, core = client.CustomObjectsApi(api), client.BatchV1Api(api), client.CoreV1Api(api)
        for i, (side, ns) in enumerate(namespaces.items()):
            cluster.kubectl("create", "namespace", ns)
            ops[side] = sides[side](ns, 18080 + (os.getpid() + i) % 1000)

        selector = f"{labels.MANAGED_BY}={labels.MANAGED_BY_VALUE}"
        jobs_w = {side: Watcher(batch.list_namespaced_job, ns, selector) for side, ns in namespaces.items()}
        pods_w = {side: Watcher(core.list_namespaced_pod, ns, labels.JOB) for side, ns in namespaces.items()}

        def list_stjs(ns: str, **kw: Any) -> Any:
            return custom.list_namespaced_custom_object(labels.GROUP, labels.VERSION, ns, labels.PLURAL, **kw)

        stj_w = {side: Watcher(list_stjs, ns, "") for side, ns in namespaces.items()}
        watchers = [*jobs_w.values(), *pods_w.values(), *stj_w.values()]
        for w in watchers:
            w.start()
            w.ready.wait(30)

        order = list(sides)
        names = [(order[i % len(order)], f"job-{i:04d}") for i in range(jobs)]
        created: dict[str, float] = {}

        def create(side_name: tuple[str, str]) -> None:
            side, name = side_name
            custom.create_namespaced_custom_object(
                labels.GROUP, labels.VERSION, namespaces[side], labels.PLURAL, manifest(name), _preload_content=False
            )
            created[name] = time.monotonic()

        cpu0 = {side: cpu_seconds(op.pid) for side, op in ops.items()}
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(create, names))
        t_applied = time.monotonic() - t0
        deadline = time.monotonic() + timeout
        out: dict[str, dict[str, Any]] = {}
        for side in order:
            want_jobs = {f"{n}-worker" for s, n in names if s == side}
            seen = jobs_w[side].seen
            while not want_jobs <= set(seen):  # the operator's work: every worker Job exists
                if time.monotonic() > deadline:
                    raise SystemExit(f"timed out: {len(seen)} worker Jobs of {len(want_jobs)} ({side})")
                time.sleep(0.1)
            out[side] = {
                "all_worker_jobs_s": round(max(seen[j] for j in want_jobs) - t0, 3),
                "operator_cpu_s": round(cpu_seconds(ops[side].pid) - cpu0[side], 2),
                "memory": memory_mb(ops[side].pid),
            }
            snapshot_allocations(ops[side], namespaces[side], "busy")  # every worker Job exists
        for side in order:  # then the Job controller's
            want = sum(1 for s, _ in names if s == side)
            while len(pods_w[side].seen) < want and time.monotonic() < deadline:
                time.sleep(0.1)
        time.sleep(SETTLE_S)  # then the operator at rest: its idle per-object workers have exited
        settled = {side: memory_mb(ops[side].pid) for side in order}
        for side in order:
            snapshot_allocations(ops[side], namespaces[side], "rest")  # what stays
        for side in order:
            mine = [n for s, n in names if s == side]
            pods = pods_w[side].seen
            latencies = [jobs_w[side].seen[f"{n}-worker"] - created[n] for n in mine]
            # the API's part, which any controller waits for too: create response -> the job seen by a watch
            lags = [stj_w[side].seen.get(n, float("nan")) - created[n] for n in mine]
            mem = out[side].pop("memory")
            out[side] = {
                "jobs": len(mine),
                "all_workers_s": round(max(pods.values()) - t0, 3) if len(pods) >= len(mine) else None,
                "all_worker_jobs_s": out[side]["all_worker_jobs_s"],
                "worker_pods_seen": len(pods),
                "handler_latency_p50_s": round(percentile(latencies, 50), 4),
                "handler_latency_p99_s": round(percentile(latencies, 99), 4),
                "handler_latency_max_s": round(max(latencies), 4),
                "handler_latency_mean_s": round(statistics.fmean(latencies), 4),
                "job_watch_lag_p50_s": round(percentile(lags, 50), 4),
                "job_watch_lag_p99_s": round(percentile(lags, 99), 4),
                "create_requests_s": round(t_applied, 3),
                "operator_cpu_s": out[side]["operator_cpu_s"],
                "operator_rss_mb": mem.get("VmRSS"),
                "operator_peak_rss_mb": mem.get("VmHWM"),
                "operator_rss_settled_mb": settled[side].get("VmRSS"),
                "load_average_1m_at_end": round(os.getloadavg()[0], 2),
            }
        for w in watchers:
            w.close()
        return out
    finally:
        for op in ops.values():
            op.terminate()
        for op in ops.values():
            try:
                op.wait(60)
            except subprocess.TimeoutExpired:
                op.kill()
                op.wait(30)
        # Before another size: wait for the namespaces to go, so their garbage collection does not load that run.
        wait = ["--wait=true", "--timeout=1200s"] if wait_gone else ["--wait=false"]
        try:
            cluster.kubectl("delete", "namespace", *namespaces.values(), *wait, check=False, timeout=1260)
        except subprocess.TimeoutExpired:
            print(f"namespaces {list(namespaces.values())} still terminating; going on", file=sys.stderr)


RATIO_KEYS = ("handler_latency_p50_s", "handler_latency_p99_s", "all_worker_jobs_s", "operator_cpu_s")


def ratios(new: dict[str, Any], base: dict[str, Any]) -> dict[str, float]:
    return {k: round(new[k] / base[k], 3) for k in RATIO_KEYS if new.get(k) and base.get(k)}


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
    p.add_argument(
        "--together-sizes",
        default="",
        help="sizes also measured with this operator and the baseline running at the same time, each on half "
        "of the jobs (created in turn), so both see the same machine load: the side-by-side ratio of one run",
    )
    p.add_argument(
        "--floor-sizes",
        default="",
        help="sizes also measured with this operator and bench/floor_controller.py (one watch, one Job create "
        "per event: the least any controller does) at the same time, each on half of the jobs: how much of the "
        "latency the machine sets and how much the operator adds",
    )
    p.add_argument(
        "--tracemalloc",
        type=pathlib.Path,
        help="folder: each operator traces its allocations (tracemalloc, which slows it and adds memory: its RSS "
        "and latencies are not comparable) and writes <folder>/<namespace>.json once every worker Job exists",
    )
    args = p.parse_args(argv)
    if args.tracemalloc is not None and (str(args.baseline_sizes).strip(",") or str(args.together_sizes).strip(",")):
        p.error("--tracemalloc cannot run with --baseline-sizes or --together-sizes: the baseline (main's operator) "
                "has no SIGUSR2 handler, so asking it for a snapshot would kill it")  # fmt: skip
    if args.tracemalloc is not None:
        TRACE["dir"] = args.tracemalloc
        args.tracemalloc.mkdir(parents=True, exist_ok=True)
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
        crds_established(cluster.kubectl, ["statictrainingjobs.statictrain.io"])
        runs = []
        baseline: dict[int, dict[str, Any]] = {}
        base_sizes = {int(x) for x in str(args.baseline_sizes).split(",") if x.strip()}
        together_sizes = [int(x) for x in str(args.together_sizes).split(",") if x.strip()]
        together: dict[int, dict[str, Any]] = {}
        for n in together_sizes:
            pair = {
                "this": operator_side(cluster, args.parts, None),
                "baseline": operator_side(cluster, args.parts, ""),
            }
            both = run_sides(cluster, n, args.timeout, pair, wait_gone=True)
            together[n] = {**both, "ratio_this_over_baseline": ratios(both["this"], both["baseline"])}
            print(json.dumps({"together": together[n]}), file=sys.stderr)
        floor: dict[int, dict[str, Any]] = {}
        for n in [int(x) for x in str(args.floor_sizes).split(",") if x.strip()]:
            floor_side = {"floor": lambda ns, _: start_floor(cluster, ns)}
            pair = {"operator": operator_side(cluster, args.parts, None), **floor_side}
            both = run_sides(cluster, n, args.timeout, pair, wait_gone=True)
            alone = run_sides(cluster, n, args.timeout, floor_side, wait_gone=True)["floor"]
            floor[n] = {
                **both,
                "ratio_operator_over_floor": ratios(both["operator"], both["floor"]),
                "floor_alone": alone,
            }
            print(json.dumps({"floor": floor[n]}), file=sys.stderr)
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
            result[f"ratio_new_over_baseline_{n}"] = ratios(new, base)
        for n, both in together.items():
            result[f"together_{n}"] = both
        for n, both in floor.items():
            plain: dict[str, Any] | None = next((r for r in runs if r["jobs"] == n), None)
            if plain is not None:  # the operator alone (the plain run of that size) over the floor alone
                both["ratio_operator_alone_over_floor_alone"] = ratios(plain, both["floor_alone"])
            result[f"floor_{n}"] = both
        result.update(
            {
                "goals": {"all_workers_s": 10, "handler_latency_p50_s": 0.2, "handler_latency_p99_s": 1.0},
                "definitions": {
                    "operator_cpu_s": "CPU seconds of the operator process, first create -> every worker Job exists",
                    "operator_rss_mb": "resident memory of the operator when every worker Job exists (VmRSS, MiB)",
                    "operator_peak_rss_mb": "peak resident memory of the operator (VmHWM, MiB)",
                    "operator_rss_settled_mb": f"resident memory of the operator {SETTLE_S:.0f} s after every worker "
                    "pod was seen (VmRSS, MiB)",
                    "all_workers_s": "first create request -> last worker pod seen by a watch "
                    "(operator + Job controller); null when not every pod appeared within --timeout "
                    "(worker_pods_seen says how many did)",
                    "all_worker_jobs_s": "first create request -> last worker Job seen by a watch (the operator's "
                    "part: the Job controller makes the pods)",
                    "handler_latency": "create response of a StaticTrainingJob -> its worker Job seen by a watch "
                    "(kopf event delivery, handler, API write, watch delivery)",
                    "job_watch_lag": "create response of a StaticTrainingJob -> the job seen by this harness's "
                    "watch: the API server's part, which every controller's latency includes",
                    "floor_<n>": "this operator and bench/floor_controller.py (one watch, one Job create per event, "
                    "nothing else) at the same time, each on half of the jobs: the floor the machine sets; "
                    "floor_alone: the floor controller alone on all n jobs, right after (compare with the plain run "
                    "of size n: ratio_operator_alone_over_floor_alone)",
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
                "kwok, Prometheus and the operator share the machine with other work; together_<n>: this operator "
                "and the baseline (main's, the venv's install) at the same time, each on its own namespace and half "
                "of the jobs, created in turn",
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
