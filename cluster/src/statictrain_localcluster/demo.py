"""The demo: a local control plane, the chart installed with Helm, the operator,
real (CPU) training, metrics in Prometheus, cost in ``kubectl get stj``, and a
cost report. One job runs in real containers (the images built from the
Dockerfile) on the cluster's real node; the GPU-shaped jobs run on kwok nodes,
whose pods the local-worker harness runs as local processes. ``make demo`` runs it; the e2e test runs
the same flow with smaller numbers.

    python -m statictrain_localcluster.demo [--keep] [--steps N] [--out DIR]

Everything it starts is stopped at the end or on Ctrl-C (unless --keep).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from statictrain import labels

from statictrain_localcluster import browser, procs
from statictrain_localcluster.cluster import REPO_FILES, ClusterError, LocalCluster, build_binaries
from statictrain_localcluster.nodeconfig import REAL_NODE_LABEL, REAL_NODE_TOLERATION
from statictrain_localcluster.workers import LocalWorkers

RELEASE, SYSTEM_NS = "statictrain", "statictrain-system"
KWOK_TOLERATION = {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}
TERMINAL = ("Succeeded", "Failed")


@dataclass(frozen=True)
class DemoJob:
    """One StaticTrainingJob of the demo: an example file applied in a namespace at a commit."""

    example: str
    name: str
    namespace: str
    commit: str
    team: str
    overrides: dict[str, Any] = field(default_factory=dict)


REAL_NODE_JOB = "tiny-real-node"


def demo_jobs(steps: int, trainer_image: str | None = None) -> list[DemoJob]:
    """Two namespaces, two commits, three GPU models; a GPT-2-shaped model small
    enough that a 2-core machine trains all jobs (one with 2-worker DDP) in minutes.
    With ``trainer_image``, one more CPU job in that image on the real node."""
    real = [] if trainer_image is None else [
        DemoJob("tiny-cpu.yaml", REAL_NODE_JOB, "team-nlp", "a1b2c3d", "nlp",
                {"image": trainer_image, "replicas": 1, "training": {"maxSteps": steps},
                 "checkpoint": {"everySteps": max(steps // 2, 1)},
                 "resources": {"gpusPerReplica": 0, "cpu": "500m", "memory": "2Gi"},
                 "placement": {"nodeSelector": {REAL_NODE_LABEL: "true"}, "tolerations": [REAL_NODE_TOLERATION]}})]
    small = {"entrypoint": "statictrain_trainer.examples.gpt2:build_small", "replicas": 1,
             "training": {"maxSteps": steps}, "checkpoint": {"everySteps": max(steps // 2, 1)},
             "compile": {"mode": "default", "cache": True}}
    return [
        DemoJob("tiny-cpu.yaml", "gpt2-h100", "team-nlp", "a1b2c3d", "nlp",
                {**small, "resources": {"gpusPerReplica": 1, "gpuModels": ["H100"]}}),
        DemoJob("tiny-cpu.yaml", "gpt2-l4", "team-nlp", "e4f5a6b", "nlp",
                {**small, "resources": {"gpusPerReplica": 1, "gpuModels": ["L4"]}}),
        DemoJob("tiny-cpu.yaml", "gpt2-a10g-ddp", "team-vision", "a1b2c3d", "vision",
                {**small, "replicas": 2, "resources": {"gpusPerReplica": 1, "gpuModels": ["A10G"]}}),
        *real,
    ]


def manifest(job: DemoJob) -> dict[str, Any]:
    """The example file with the demo's name, namespace, commit and overrides (pure)."""
    doc: dict[str, Any] = yaml.safe_load((REPO_FILES / "deploy/examples" / job.example).read_text())
    doc["metadata"].update(name=job.name, namespace=job.namespace)
    doc["metadata"].setdefault("labels", {}).update({labels.COMMIT: job.commit, labels.TEAM: job.team})
    for key, value in job.overrides.items():
        doc["spec"][key] = value
    return doc


def say(msg: str) -> None:
    print(f"\033[1m==> {msg}\033[0m", flush=True)


class Demo:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.cluster = LocalCluster(args.name)
        self.out = Path(args.out).resolve()
        self.procs: list[subprocess.Popen[bytes]] = []
        self.workers: LocalWorkers | None = None
        self.images: dict[str, str] = {}
        self.started_at = datetime.now(UTC)

    # -- steps -----------------------------------------------------------------
    def start_cluster(self) -> None:
        say("building or finding the control plane binaries")
        bin_dir = build_binaries(log=sys.stderr)
        if self.cluster.running():
            say(f"stopping the previous demo cluster {self.args.name!r}")
        self.cluster.stop()
        say("starting the local cluster (kube-apiserver, etcd, controller-manager, scheduler, kwok, Prometheus)")
        t0 = time.monotonic()
        self.cluster.start(bin_dir, log=subprocess.DEVNULL)
        say(f"cluster ready in {time.monotonic() - t0:.1f}s")
        if self.cluster.state.real_node:
            self.images = self.cluster.node_images()
            say(f"real node {self.cluster.state.real_node} joined with the images built from the Dockerfile: "
                + ", ".join(self.images.values()))
        else:
            say(f"no real node ({self.cluster.state.real_node_problem}): every job runs in local workers")
        print(self.cluster.kubectl("get", "nodes", "-L", labels.INSTANCE_TYPE, "-L", labels.GPU_PRODUCT,
                                   "-L", labels.CAPACITY_TYPE).stdout)

    def install_chart(self) -> None:
        say("helm install statictrain (CRD, RBAC, ServiceAccount, operator config)")
        values = {
            # The operator runs as a local process below, with this release's
            # ServiceAccount token and env: kwok nodes run no containers.
            "operator": {"replicas": 0},
            "cost": {"intervalSeconds": 10},  # short jobs: account (and refresh progress) every 10 s
            "prometheus": {"url": self.cluster.prometheus_url},
            "workers": {"tolerations": [KWOK_TOLERATION],
                        **({"sidecar": {"image": dict(zip(("repository", "tag"),
                                                          self.images["sidecar"].rsplit(":", 1), strict=True))}}
                           if self.images else {})},
            "extender": {"enabled": False},
            "dashboards": {"enabled": True},  # the Grafana dashboards as ConfigMaps, listed at the end
        }
        vfile = self.out / "demo-values.yaml"
        vfile.write_text(yaml.safe_dump(values))
        self.cluster.helm("upgrade", "--install", RELEASE, str(REPO_FILES / "charts/statictrain"), "-n", SYSTEM_NS,
                          "--create-namespace", "-f", str(vfile), "--wait", "--timeout", "120s")
        print(self.cluster.helm("list", "-n", SYSTEM_NS).stdout)

    def operator_env(self) -> dict[str, str]:
        """The env of the chart's operator container, plus a kubeconfig with its ServiceAccount token."""
        deploys = json.loads(self.cluster.kubectl("get", "deploy", "-n", SYSTEM_NS, "-o", "json").stdout)["items"]
        deploy = next(d for d in deploys if "operator" in d["metadata"]["name"])
        pod = deploy["spec"]["template"]["spec"]
        container = pod["containers"][0]
        env = {e["name"]: str(e["value"]) for e in container.get("env", []) if "value" in e}
        sa = pod.get("serviceAccountName", "default")
        token = self.cluster.kubectl("create", "token", sa, "-n", SYSTEM_NS, "--duration=2h").stdout.strip()
        admin = yaml.safe_load(self.cluster.kubeconfig.read_text())
        ctx = admin["contexts"][0]["context"]
        kubeconfig = {
            "apiVersion": "v1", "kind": "Config", "clusters": admin["clusters"],
            "users": [{"name": sa, "user": {"token": token}}],
            "contexts": [{"name": "operator", "context": {"cluster": ctx["cluster"], "user": sa}}],
            "current-context": "operator",
        }
        path = self.out / "operator.kubeconfig"
        path.write_text(yaml.safe_dump(kubeconfig))
        path.chmod(0o600)
        return {**env, "KUBECONFIG": str(path)}

    def spawn(self, name: str, cmd: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        with (self.out / f"{name}.log").open("ab") as log:  # the child keeps its own descriptor
            p = subprocess.Popen(cmd, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        self.procs.append(p)
        return p

    def start_operator(self) -> None:
        say("starting the operator (local process, the chart's ServiceAccount and settings)")
        bin_dir = Path(sys.executable).parent
        port = procs.free_port()
        self.spawn("operator", [str(bin_dir / "statictrain-operator"), "--liveness", "",
                                "--metrics-address", "127.0.0.1", "--metrics-port", str(port)], self.operator_env())
        self.cluster.add_scrape_target("statictrain-operator", f"127.0.0.1:{port}")
        extender = bin_dir / "statictrain-extender"
        if extender.exists():
            say(f"starting the scheduler extender on 127.0.0.1:{self.cluster.extender_port}")
            self.spawn("extender", [str(extender)],
                       {"KUBECONFIG": str(self.cluster.kubeconfig),
                        "STATICTRAIN_EXTENDER_HOST": "127.0.0.1",
                        "STATICTRAIN_EXTENDER_PORT": str(self.cluster.extender_port),
                        "STATICTRAIN_PROMETHEUS_URL": self.cluster.prometheus_url})
        self.workers_log = (self.out / "workers.log").open("a")  # closed in stop()
        self.workers = LocalWorkers(self.cluster, self.out / "workers", log=self.workers_log)
        self.workers.start()

    def apply_jobs(self, jobs: list[DemoJob]) -> None:
        for ns in sorted({j.namespace for j in jobs}):
            self.cluster.kubectl("create", "namespace", ns, check=False)
        say("kubectl apply: " + ", ".join(f"{j.namespace}/{j.name}@{j.commit}" for j in jobs))
        docs = yaml.safe_dump_all([manifest(j) for j in jobs])
        print(self.cluster.kubectl("apply", "-f", "-", input=docs).stdout)

    def watch(self, jobs: list[DemoJob], timeout_s: float) -> list[dict[str, Any]]:
        say("training (live: kubectl get stj -A)")
        deadline = time.monotonic() + timeout_s
        items: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            items = json.loads(self.cluster.kubectl("get", "stj", "-A", "-o", "json").stdout)["items"]
            print(self.cluster.kubectl("get", "stj", "-A").stdout, flush=True)
            if len(items) == len(jobs) and all(i.get("status", {}).get("phase") in TERMINAL for i in items):
                return items
            time.sleep(self.args.poll)
        raise ClusterError(f"jobs did not finish within {timeout_s:.0f}s; logs in {self.out}")

    def report(self) -> dict[str, Any]:
        """Print the cost report by namespace and by commit, write it as HTML and JSON; return the JSON."""
        say("cost report (statictrain report)")
        time.sleep(max(self.args.settle, 0))  # let the accounting timer and Prometheus see the last samples
        print(self.cluster.kubectl("get", "stj", "-A").stdout, flush=True)
        bin_dir = Path(sys.executable).parent
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig),
               "STATICTRAIN_PROMETHEUS_URL": self.cluster.prometheus_url}
        base = [str(bin_dir / "statictrain"), "report", "--from", self.started_at.strftime("%Y-%m-%dT%H:%M:%SZ")]

        def run(*extra: str) -> str:
            proc = subprocess.run([*base, *extra], env=env, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise ClusterError(f"statictrain report {' '.join(extra)} failed: {proc.stderr.strip()[-2000:]}")
            return proc.stdout

        for by in ("namespace", "commit"):
            print(run("--by", by, "--no-progress"), flush=True)
        anomalies = subprocess.run([str(bin_dir / "statictrain"), "anomalies", "-A"], env=env, capture_output=True,
                                   text=True, check=False)
        say("anomaly detector findings (statictrain anomalies -A)")
        print(anomalies.stdout or anomalies.stderr, flush=True)
        html, js = self.out / "cost-report.html", self.out / "cost-report.json"
        run("--by", "job", "--format", "html", "-o", str(html), "--no-progress")
        run("--by", "job", "--format", "json", "-o", str(js), "--no-progress")
        say(f"reports: {html} and {js}")
        doc: dict[str, Any] = json.loads(js.read_text())
        return doc

    def finish(self, jobs: list[DemoJob]) -> list[str]:
        """Screenshot the HTML report in headless Chromium, run the cost gate between the demo's commits, list
        the dashboards; print and return where everything is."""
        html = self.out / "cost-report.html"
        lines = [f"report:      {html} (and {html.with_suffix('.json')})"]
        png = html.with_suffix(".png")
        try:
            check = browser.check_page(html, screenshot=png)
            drawn = ", ".join(f"{name} {n}" for name, n in check.charts.items())
            state = "; ".join(check.problems) or "no console errors"
            lines.append(f"screenshot:  {png} (headless Chromium: {state}; data marks per chart: {drawn})")
        except browser.BrowserError as e:
            lines.append(f"screenshot:  none: {e}")
        cms = json.loads(self.cluster.kubectl("get", "configmap", "-n", SYSTEM_NS, "-l",
                                              "app.kubernetes.io/component=dashboards", "-o", "json").stdout)["items"]
        names = ", ".join(sorted(c["metadata"]["name"] for c in cms)) or "none"
        files = REPO_FILES / "charts/statictrain/dashboards"
        lines.append(f"dashboards:  ConfigMaps in {SYSTEM_NS}: {names} (label grafana_dashboard=1, for Grafana's "
                     f"dashboard sidecar; no Grafana runs here); JSON files in {files}")
        baseline, commit, note = gate_commits(jobs)
        elapsed = int((datetime.now(UTC) - self.started_at).total_seconds()) + 60
        env = {**os.environ, "STATICTRAIN_PROMETHEUS_URL": self.cluster.prometheus_url}
        gate = subprocess.run([str(Path(sys.executable).parent / "statictrain"), "gate", "--commit", commit,
                               "--baseline", baseline, "--max-regression", "5%", "--last", f"{elapsed}s"],
                              env=env, capture_output=True, text=True, check=False)
        verdict = {0: "PASS", 1: "FAIL"}.get(gate.returncode, f"not evaluated (exit {gate.returncode})")
        lines.append(f"cost gate:   statictrain gate --commit {commit} --baseline {baseline} --max-regression 5%: "
                     f"{verdict}{note}")
        lines += ["    " + x for x in (gate.stdout + gate.stderr).strip().splitlines()]
        say("where everything is")
        print("\n".join(lines), flush=True)
        return lines

    def stop(self) -> None:
        if self.workers:
            self.workers.stop()
            self.workers_log.close()
        for p in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, 15)
        for p in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=15)
        if not self.args.keep:
            self.cluster.stop()


def gate_commits(jobs: list[DemoJob]) -> tuple[str, str, str]:
    """(baseline, commit under test, note) for the cost gate: the demo's first two commits in the order applied;
    with one commit it is compared with itself, and the note says so (pure)."""
    commits = list(dict.fromkeys(j.commit for j in jobs))
    if len(commits) < 2:
        return commits[0], commits[0], " (the demo ran one commit only: compared with itself)"
    return commits[0], commits[1], ""


@contextlib.contextmanager
def running(demo: Demo) -> Iterator[Demo]:
    try:
        yield demo
    finally:
        say("tearing down" if not demo.args.keep else f"leaving cluster {demo.args.name!r} running (--keep)")
        demo.stop()


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="statictrain-demo", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--name", default="statictrain-demo", help="cluster name")
    ap.add_argument("--steps", type=int, default=300, help="training steps per job")
    ap.add_argument("--timeout", type=float, default=900, help="seconds to wait for the jobs")
    ap.add_argument("--poll", type=float, default=5, help="seconds between progress tables")
    ap.add_argument("--settle", type=float, default=20, help="seconds to wait before the report")
    ap.add_argument("--out", default="out/demo", help="folder for logs and the HTML report")
    ap.add_argument("--keep", action="store_true", help="leave the cluster running at the end")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    demo = Demo(args)
    if demo.out.exists():
        shutil.rmtree(demo.out)
    demo.out.mkdir(parents=True)
    try:
        with running(demo):
            demo.start_cluster()
            jobs = demo_jobs(args.steps, demo.images.get("trainer"))
            demo.install_chart()
            demo.start_operator()
            demo.apply_jobs(jobs)
            demo.watch(jobs, args.timeout)
            demo.report()
            demo.finish(jobs)
    except ClusterError as e:
        print(f"demo: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
