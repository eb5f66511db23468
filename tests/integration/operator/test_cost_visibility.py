"""Dashboards, the CI cost gate and estimates against the real local cluster and its real Prometheus.

Two StaticTrainingJobs of one entrypoint run at two commits on the same kind of
node (p5.48xlarge on-demand, 1 H100 each): the real operator (cost part) prices
the node and accounts both jobs; each worker pod has a real sidecar (in-process,
statictrain_sidecar.app) fed through the real trainer channel. The "slow" commit
is deliberately slower: each step carries half the tokens of the "fast" one at
the same step time, so its $/1M tokens is about twice as high (the scenario's
oracle, independent of the code under test). The machine has no GPU: the
sidecars read the fake NVML of the sidecar's unit tests (one "NVIDIA H100 80GB
HBM3" each), so GPU series exist with the real sidecar's names and labels.
Kwok pods run no processes; the channel records are written by the test.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from statictrain import channel, labels, metrics
from statictrain.promql import selector
from statictrain_operator.prom import HttpPrometheus
from statictrain_sidecar.app import Sidecar, build
from statictrain_sidecar.settings import Identity, Settings

from .conftest import Kube, Operator, stj, wait_for

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "statictrain"
RENDER = ("--namespace", "monitoring", "--kube-version", "1.34.0")
ENTRYPOINT = "statictrain_trainer.examples.tiny:build"
STEP_S = 0.25
TOKENS = {"fast": 4096, "slow": 2048}
NODE = {labels.INSTANCE_TYPE: "p5.48xlarge", labels.CAPACITY_TYPE: "on-demand"}


def _fake_nvml_module() -> Any:
    spec = importlib.util.spec_from_file_location("sidecar_fake_nvml", ROOT / "tests/unit/sidecar/conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


class Trainer:
    """Publishes its GPU, then writes one channel record per STEP_S seconds, as the trainer's local rank 0 would
    (the sidecar reports only the GPUs its pod's trainers publish)."""

    def __init__(self, stats: Path, tokens: int, mfu: float, gpu_uuid: str) -> None:
        (stats / channel.GPUS_DIR).mkdir(exist_ok=True)
        (stats / channel.GPUS_DIR / "0.json").write_text(channel.encode_gpu(gpu_uuid, 0))
        self.path = stats / channel.STEPS_FILE
        self.tokens, self.mfu = tokens, mfu
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        step = 0
        with self.path.open("a", encoding="utf-8") as f:
            while not self.stop.wait(STEP_S):
                step += 1
                rec = channel.StepRecord(
                    step=step,
                    step_seconds=STEP_S,
                    tokens=self.tokens,
                    samples=4,
                    loss=3.0 - step * 1e-4,
                    compile_seconds=2.0,
                    mfu=self.mfu,
                    time=time.time(),
                )
                f.write(channel.encode(rec))
                f.flush()


def running_worker(kube: Kube, job: str) -> dict[str, Any] | None:
    pods = kube.list("pods", f"{labels.JOB}={job}")
    return next((p for p in pods if p["status"].get("phase") == "Running"), None)


@dataclass
class Scenario:
    ns: str
    commits: dict[str, str]
    jobs: dict[str, str]
    prom: HttpPrometheus
    started: float


@pytest.fixture(scope="module")
def scenario(cluster: Any, crd: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    tag = uuid.uuid4().hex[:6]
    ns = f"vis-{tag}"
    cluster.kubectl("create", "namespace", ns)
    tmp = tmp_path_factory.mktemp("visibility")
    commits = {role: f"{role}{tag}" for role in TOKENS}
    jobs = {role: f"bench-{role}" for role in TOKENS}
    targets: list[str] = []
    sidecars: list[Sidecar] = []
    trainers: list[Trainer] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STATICTRAIN_PROMETHEUS_URL", cluster.prometheus_url)
        mp.setenv("STATICTRAIN_COST_INTERVAL_S", "1")
        mp.setenv("STATICTRAIN_COST_QUERY_STEP_S", "1")
        op = Operator(cluster, ns, tmp, parts="cost")
        op.start()
    try:
        cluster.add_scrape_target(f"op-{ns}", f"127.0.0.1:{op.metrics_port}", {})
        targets.append(f"op-{ns}")
        kube = Kube(cluster, ns)
        for role, name in jobs.items():
            doc = stj(
                name,
                resources={"gpusPerReplica": 1, "gpuModels": ["H100"]},
                placement={"nodeSelector": NODE},
                training={"maxSteps": 1_000_000},
                budget={"limitUSD": "1000"},
            )
            doc["metadata"]["labels"][labels.COMMIT] = commits[role]
            doc["spec"]["entrypoint"] = ENTRYPOINT
            kube.apply(doc)
        fake = _fake_nvml_module()
        for role, name in jobs.items():
            pod = wait_for(partial(running_worker, kube, name), f"a Running worker of {name}", timeout=120)
            meta = pod["metadata"]
            stats = tmp / meta["name"]
            stats.mkdir()
            ident = Identity(name, ns, commits[role], "nlp", meta["name"], meta["uid"])
            gpu = fake.FakeGpu(0, f"GPU-{meta['uid']}", name="NVIDIA H100 80GB HBM3", util_gpu=80)
            sc = build(
                Settings(identity=ident, stats_dir=stats, port=0, bind="127.0.0.1", sample_interval_s=0.2),
                fake.FakeNvml([gpu]),
            )
            sc.start()
            sidecars.append(sc)
            cluster.add_scrape_target(f"sc-{meta['name']}-{tag}", f"127.0.0.1:{sc.port}", {})
            targets.append(f"sc-{meta['name']}-{tag}")
            trainers.append(Trainer(stats, TOKENS[role], 0.4 if role == "fast" else 0.2, gpu.uuid))
        prom = HttpPrometheus(cluster.prometheus_url)
        started = time.time()

        def accounted() -> bool:
            q = f"sum by (commit) ({selector(metrics.JOB_TOKENS_TOTAL, {'namespace': ns})})"
            got = {s.labels.get("commit"): s.samples[-1].v for s in prom.query(q, time.time()) if s.samples}
            return len(got) == 2 and all(v > 0 for v in got.values())

        wait_for(accounted, "tokens accounted for both commits", timeout=180, interval=1)
        time.sleep(45)  # some history: a window of accounting runs and scrapes
        yield Scenario(ns, commits, jobs, prom, started)
    finally:
        for t in trainers:
            t.stop.set()
            t.thread.join(5)
        for target in targets:
            cluster.remove_scrape_target(target)
        for sc in sidecars:
            sc.stop()
        op.stop()
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def cli(cluster: Any, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "statictrain_cli.main", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=cluster.env,
        timeout=300,
        check=False,
    )


# ---- the CI cost gate


def test_gate_fails_the_slower_commit_and_passes_the_faster_one(
    cluster: Any, scenario: Scenario, tmp_path: Path
) -> None:
    c = scenario.commits
    common = ["--max-regression", "5%", "--last", "15m", "--prometheus-url", cluster.prometheus_url]
    slow = cli(cluster, "gate", "--commit", c["slow"], "--baseline", c["fast"], *common)
    (tmp_path / "gate-slow.txt").write_text(slow.stdout)  # kept with pytest's temporary files
    assert slow.returncode == 1, slow.stdout + slow.stderr
    line = next(ln for ln in slow.stdout.splitlines() if "$/1M tokens" in ln)
    assert line.split()[0] == "REGRESSION"
    base, cand = float(line.split(":")[1].split("->")[0]), float(line.split("->")[1].split()[0])
    # oracle: same price and time, half the tokens per step -> about twice the $/1M tokens
    assert 1.5 < cand / base < 2.7, slow.stdout
    assert "tokens/s per pod on NVIDIA H100 80GB HBM3" in slow.stdout
    fast = cli(cluster, "gate", "--commit", c["fast"], "--baseline", c["slow"], *common)
    assert fast.returncode == 0, fast.stdout + fast.stderr
    missing = cli(cluster, "gate", "--commit", "0000000", "--baseline", c["fast"], *common)
    assert missing.returncode == 1 and "no runs for commit '0000000'" in missing.stdout


def test_gate_from_an_exported_report_agrees(cluster: Any, scenario: Scenario, tmp_path: Path) -> None:
    end = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out = tmp_path / "report.json"
    rep = cli(
        cluster,
        "report",
        "--by",
        "commit",
        "--format",
        "json",
        "--last",
        "15m",
        "--to",
        end,
        "--namespace",
        scenario.ns,
        "--no-progress",
        "--prometheus-url",
        cluster.prometheus_url,
        "-o",
        str(out),
    )
    assert rep.returncode == 0, rep.stderr
    c = scenario.commits
    slow = cli(
        cluster, "gate", "--commit", c["slow"], "--baseline", c["fast"], "--max-regression", "5%", "--report", str(out)
    )
    assert slow.returncode == 1 and "REGRESSION" in slow.stdout and "not available" in slow.stdout, slow.stdout
    ok = cli(
        cluster, "gate", "--commit", c["fast"], "--baseline", c["slow"], "--max-regression", "5%", "--report", str(out)
    )
    assert ok.returncode == 0, ok.stdout


# ---- estimate


def test_estimate_uses_measured_history_and_says_which_figures_are_table_values(
    cluster: Any, scenario: Scenario, tmp_path: Path
) -> None:
    spec = stj("next-run", resources={"gpusPerReplica": 1, "gpuModels": ["H100", "A100"]}, training={"maxSteps": 3600})
    spec["spec"]["entrypoint"] = ENTRYPOINT
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(spec))
    r = cli(
        cluster,
        "estimate",
        "-f",
        str(path),
        "-n",
        scenario.ns,
        "--history",
        "15m",
        "--prometheus-url",
        cluster.prometheus_url,
        "--kubeconfig",
        str(cluster.kubeconfig),
    )
    (tmp_path / "estimate.txt").write_text(r.stdout)  # kept with pytest's temporary files
    assert r.returncode == 0, r.stdout + r.stderr
    assert "accepted by the API server" in r.stdout
    assert f"history: jobs bench-fast, bench-slow, next-run in {scenario.ns}" in r.stdout
    rows = {tuple(ln.split()[:2]): ln for ln in r.stdout.splitlines() if ln.startswith(("H100", "A100"))}
    assert ("H100", "on-demand") in rows and ("A100", "on-demand") in rows
    h100 = rows[("H100", "on-demand")].split()
    # oracle: every step took STEP_S -> 3600 steps = 0.25 h
    assert math.isclose(float(h100[3]), 3600 * STEP_S / 3600, rel_tol=0.02), r.stdout
    assert math.isclose(float(h100[4]), float(h100[2]) * float(h100[3]), rel_tol=0.05)
    assert "table value" in rows[("H100", "on-demand")] and "measured" in rows[("H100", "on-demand")]
    # A100 has no history: inferred by the throughput table's ratio (data/throughput.csv: H100 3.17, A100 1.0)
    a100 = rows[("A100", "on-demand")].split()
    assert math.isclose(float(a100[3]), 3600 * STEP_S * 3.17 / 3600, rel_tol=0.02), r.stdout
    assert "inferred: throughput table A100 1 vs measured H100 3.17" in rows[("A100", "on-demand")], r.stdout
    totals = [float(ln.split()[4]) for ln in rows.values() if ln.split()[4] != "?"]
    assert totals == sorted(totals)


def test_estimate_prints_the_api_servers_admission_message(cluster: Any, scenario: Scenario, tmp_path: Path) -> None:
    spec = stj("bad", replicas=0)
    r = cli(
        cluster,
        "estimate",
        "-f",
        "-",
        "-n",
        scenario.ns,
        "--no-history",
        "--kubeconfig",
        str(cluster.kubeconfig),
        stdin=yaml.safe_dump(spec),
    )
    assert r.returncode == 1
    assert "rejected" in r.stderr and "spec.replicas" in r.stderr, r.stderr


# ---- dashboards


def dashboards(cluster: Any) -> dict[str, dict[str, Any]]:
    rendered = cluster.helm("template", "st", str(CHART), *RENDER, "--set", "dashboards.enabled=true").stdout
    out = {}
    for doc in yaml.safe_load_all(rendered):
        if doc and doc["kind"] == "ConfigMap" and doc["metadata"]["labels"].get("grafana_dashboard") == "1":
            for key, text in doc["data"].items():
                out[key] = json.loads(text)
    return out


def expand(expr: str, scenario: Scenario) -> str:
    """Grafana's variables as Grafana would fill them for the fast job over the last 10 minutes."""
    return (
        expr.replace("$namespace", scenario.ns)
        .replace("$job", scenario.jobs["fast"])
        .replace("$__rate_interval", "1m")
        .replace("$__range", "10m")
    )


def test_dashboard_configmaps_render_only_when_enabled(cluster: Any) -> None:
    assert sorted(dashboards(cluster)) == [
        "statictrain-cluster-cost.json",
        "statictrain-gpu-efficiency.json",
        "statictrain-job.json",
    ]
    off = cluster.helm("template", "st", str(CHART), *RENDER).stdout
    assert "grafana_dashboard" not in off


def test_every_panel_query_parses_and_returns_data(cluster: Any, scenario: Scenario) -> None:
    boards = dashboards(cluster)
    panels = [
        (name, p["title"], expand(t["expr"], scenario))
        for name, board in boards.items()
        for p in board["panels"]
        for t in p["targets"]
    ]
    assert len(panels) >= 30

    def empty() -> list[str]:
        now = time.time()
        return [f"{n}: {title}: {q}" for n, title, q in panels if not scenario.prom.query(q, now)]

    left = wait_for(lambda: not empty() or None, "every panel to return data", timeout=120, interval=5)
    assert left
    # variables resolve to the scenario's values
    job = boards["statictrain-job.json"]
    for var in job["templating"]["list"]:
        if var["type"] == "query":
            q = var["query"]["query"].replace("$namespace", scenario.ns)
            metric, label = q.removeprefix("label_values(").removesuffix(")").rsplit(", ", 1)
            values = {s.labels.get(label) for s in scenario.prom.query(f"group by ({label}) ({metric})", time.time())}
            assert {scenario.ns, scenario.jobs["fast"]} & values, (q, values)
    # annotations: parse (no anomaly part runs here, so they may be empty)
    for a in job["annotations"]["list"]:
        scenario.prom.query(expand(a["expr"], scenario), time.time())
