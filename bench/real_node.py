"""Real-node figures: node join, image builds cold and warm, image sizes, pod create ->
Running, and a tiny StaticTrainingJob apply -> Succeeded in real containers.

    .venv/bin/python bench/real_node.py [--skip-cold] [--runs 3]

- cold build: the base image (debootstrap), the sidecar and the trainer (torch layer
  included) into an empty buildah store (a temporary folder; the machine's pip and
  apt downloads are not cached, so this includes fetching torch from PyPI);
- warm build: trainer and sidecar after a one-line change to each one's sources, with
  the warm store (only the project layers are rebuilt);
- image store update: a new containerd image store for changed trainer and sidecar
  images, seeded by hard links from the current one (once per source change; every
  cluster's containerd hard-links the store, so a cluster imports nothing);
- node join: starting the node's parts (bridge, hard-linked image store, containerd,
  kubelet) until the Node is Ready, read from the cluster's state;
- pod create -> Running: a pod of each image on the real node, from ``kubectl create``
  until the API server says Running (median of --runs);
- tiny job: the operator as a subprocess, a 60-step CPU job, apply -> phase Succeeded.

Writes bench/results/real_node.json. ``ci_fresh_clone_minutes`` is an estimate from
the measured parts unless a measured fresh-clone CI time is passed with --ci-minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from statictrain_localcluster import images, realnode
from statictrain_localcluster.cluster import LocalCluster, build_binaries
from statictrain_localcluster.nodeconfig import REAL_NODE_TOLERATION
from statictrain_localcluster.paths import REPO_FILES, cache_root
from statictrain_localcluster.waiting import crds_established

OUT = Path(__file__).resolve().parent / "results" / "real_node.json"
CRD = REPO_FILES / "crds" / "statictrain.io_statictrainingjobs.yaml"


def cold_builds() -> dict[str, Any]:
    """Base, sidecar and trainer into an empty buildah store."""
    store = Path(tempfile.mkdtemp(dir=cache_root(), prefix="bench-buildah-"))
    os.environ["STATICTRAIN_BUILDAH_ROOT"] = str(store)
    try:
        t0 = time.monotonic()
        base = images.ensure_base(sys.stderr)
        side = images.build_target("sidecar", base.image, sys.stderr)
        trainer = images.build_target("trainer", base.image, sys.stderr)
        total = time.monotonic() - t0
    finally:
        del os.environ["STATICTRAIN_BUILDAH_ROOT"]
        subprocess.run(
            ["buildah", "--root", str(store / "storage"), "--runroot", str(store / "run"), "rm", "--all"],
            capture_output=True,
            check=False,
        )
        subprocess.run(["umount", "-R", str(store)], capture_output=True, check=False)
        shutil.rmtree(store, ignore_errors=True)
    return {
        "image_build_cold_s": round(total, 1),
        "image_build_cold_parts_s": {
            "base_debootstrap": round(base.seconds, 1),
            "sidecar": round(side.seconds, 1),
            "trainer": round(trainer.seconds, 1),
        },
    }


def warm_builds(base: str) -> dict[str, Any]:
    """trainer and sidecar after a one-line source change each, on the warm store."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp)
        for name in ("Dockerfile", ".dockerignore"):
            shutil.copy2(REPO_FILES / name, repo / name)
        for folder in ("core", "trainer", "sidecar"):
            shutil.copytree(
                REPO_FILES / folder, repo / folder, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
            )
        stamp = f"\n# bench {time.time()}\n"
        for init in ("trainer/src/statictrain_trainer/__init__.py", "sidecar/src/statictrain_sidecar/__init__.py"):
            with (repo / init).open("a") as f:
                f.write(stamp)
        t0 = time.monotonic()
        side = images.build_target("sidecar", base, sys.stderr, repo)
        trainer = images.build_target("trainer", base, sys.stderr, repo)
        total = time.monotonic() - t0
        store_s = store_update_seconds(
            {"busybox": images.ensure_busybox().image, "trainer": trainer.image, "sidecar": side.image}
        )
        for b in (side, trainer):
            subprocess.run(["buildah", *images._storage(), "rmi", b.image], capture_output=True, check=False)
    return {
        "image_build_warm_s": round(total, 1),
        "image_build_warm_parts_s": {"sidecar": round(side.seconds, 1), "trainer": round(trainer.seconds, 1)},
        "image_store_update_s": round(store_s, 1),
    }


def store_update_seconds(built: dict[str, str]) -> float:
    """A new containerd image store for changed images, seeded (hard links) from the current one:
    what a source change costs once, before any cluster starts."""
    current = realnode.image_store(
        images.store_key(images.node_images()),
        cache_root() / "containerd-images",
        lambda ctr: [images.load(ctr, i) for i in images.node_images().values()],
    )
    with tempfile.TemporaryDirectory(dir=cache_root()) as tmp:
        realnode._link_tree(current, Path(tmp, "current", "root"))
        t0 = time.monotonic()
        realnode.image_store("bench", Path(tmp), lambda ctr: [images.load(ctr, i) for i in built.values()])
        return time.monotonic() - t0


def wait(check: Any, timeout: float, poll: float = 0.1) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if check():
            return time.monotonic() - t0
        time.sleep(poll)
    raise TimeoutError


def pod_phase(c: LocalCluster, ns: str, name: str) -> str:
    out = c.kubectl("get", "pod", "-n", ns, name, "-o", "jsonpath={.status.phase}", check=False)
    return out.stdout.strip()


def pod_to_running(c: LocalCluster, ns: str, image: str, i: int) -> float:
    name = f"p{i}"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "nodeName": c.state.real_node,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": image, "imagePullPolicy": "Never", "command": ["sleep", "3600"]}],
        },
    }
    t0 = time.monotonic()
    c.kubectl("create", "-f", "-", input=yaml.safe_dump(pod))
    wait(lambda: pod_phase(c, ns, name) == "Running", 300)
    seconds = time.monotonic() - t0
    c.kubectl("delete", "pod", "-n", ns, name, "--wait=true", "--timeout=120s", check=False)
    return seconds


def tiny_job_seconds(c: LocalCluster, ns: str, imgs: dict[str, str], runs: int) -> list[float]:
    c.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD))
    crds_established(c.kubectl, ["statictrainingjobs.statictrain.io"])
    env = {
        **c.env,
        "STATICTRAIN_OPERATOR_NAMESPACES": ns,
        "STATICTRAIN_OPERATOR_PARTS": "",
        "STATICTRAIN_OPERATOR_SIDECAR_IMAGE": imgs["sidecar"],
        "STATICTRAIN_OPERATOR_IMAGE_PULL_POLICY": "Never",
        "STATICTRAIN_OPERATOR_TOLERATIONS": json.dumps([REAL_NODE_TOLERATION]),
        "STATICTRAIN_OPERATOR_SCHEDULER_NAME": "default-scheduler",
        "STATICTRAIN_OPERATOR_NODE_SELECTOR": json.dumps({"kubernetes.io/hostname": c.state.real_node}),
        "STATICTRAIN_OPERATOR_OWN_METRICS_PORT": "0",
        "STATICTRAIN_OPERATOR_REQUEUE_S": "0.5",
    }
    exe = Path(sys.executable).parent / "statictrain-operator"
    with (cache_root() / "bench-real-node-operator.log").open("wb") as log:
        op = subprocess.Popen(
            [str(exe), "--kubeconfig", str(c.kubeconfig), "--liveness", ""],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    out = []
    try:
        for i in range(runs):
            name = f"tiny-{i}"
            job = {
                "apiVersion": "statictrain.io/v1alpha1",
                "kind": "StaticTrainingJob",
                "metadata": {"name": name, "namespace": ns},
                "spec": {
                    "image": imgs["trainer"],
                    "entrypoint": "statictrain_trainer.examples.tiny:build",
                    "replicas": 1,
                    "resources": {"gpusPerReplica": 0, "cpu": "100m", "memory": "1Gi"},
                    "compile": {"mode": "none"},
                    "precision": "fp32",
                    "training": {"maxSteps": 60},
                    "checkpoint": {"everySteps": 20},
                },
            }
            t0 = time.monotonic()
            c.kubectl("create", "-f", "-", input=yaml.safe_dump(job))

            def done(name: str = name) -> bool:
                got = c.kubectl("get", "stj", "-n", ns, name, "-o", "jsonpath={.status.phase}", check=False)
                if got.stdout.strip() == "Failed":
                    raise RuntimeError(f"{name} failed; see {log.name}")
                return got.stdout.strip() == "Succeeded"

            wait(done, 600, poll=0.25)
            out.append(time.monotonic() - t0)
    finally:
        op.terminate()
        op.wait(30)
    return out


def first_line(*cmd: str) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.split("\n")[0].strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--skip-cold", action="store_true", help="leave the cold image build out (it refetches torch)")
    ap.add_argument("--ci-minutes", type=float, help="a measured fresh-clone .ci/run time, if one was made")
    args = ap.parse_args()
    load_before = os.getloadavg()
    bin_dir = build_binaries(log=sys.stderr)
    node_bin = build_binaries(log=sys.stderr, script="build-node.sh")
    node_build = json.loads((node_bin / "build-time.json").read_text())
    result: dict[str, Any] = {}
    if not args.skip_cold:
        result.update(cold_builds())
    base = images.ensure_base(sys.stderr).image
    built = {t: images.build_target(t, base, sys.stderr).image for t in ("sidecar", "trainer")}
    result.update(warm_builds(base))
    result["image_mb"] = {t: images.image_mb(img) for t, img in built.items()}
    result["image_mb"]["busybox (sandbox, volume helper)"] = images.image_mb(images.ensure_busybox().image)

    c = LocalCluster(f"bench-node-{os.getpid()}")
    t0 = time.monotonic()
    c.start(bin_dir, log=sys.stderr)
    start_s = time.monotonic() - t0
    try:
        if not c.state.real_node:
            raise SystemExit(f"no real node: {c.state.real_node_problem}")
        result["node_join_s"] = c.state.node_join_s
        result["cluster_start_with_node_s"] = round(start_s, 1)
        imgs = c.node_images()
        ns = "bench"
        c.kubectl("create", "namespace", ns)
        pods = {t: [pod_to_running(c, ns, img, i) for i in range(args.runs)] for t, img in imgs.items()}
        result["pod_create_to_running_s"] = {t: round(statistics.median(v), 2) for t, v in pods.items()}
        result["pod_create_to_running_runs_s"] = {t: [round(x, 2) for x in v] for t, v in pods.items()}
        tiny = tiny_job_seconds(c, ns, imgs, max(args.runs - 1, 1))
        result["tiny_job_apply_to_succeeded_s"] = round(statistics.median(tiny), 1)
        result["tiny_job_runs_s"] = [round(x, 1) for x in tiny]
    finally:
        c.stop()
    cold = result.get("image_build_cold_s")
    if args.ci_minutes is not None:
        result["ci_fresh_clone_minutes"] = args.ci_minutes
        result["ci_fresh_clone_note"] = "measured: .ci/run from a fresh clone with an empty STATICTRAIN_CACHE"
    elif cold is not None:
        added = node_build["build_seconds"] + cold + result["image_store_update_s"]
        result["ci_fresh_clone_minutes"] = round(35 + added / 60, 1)
        result["ci_fresh_clone_note"] = (
            "ESTIMATE, not a measured fresh-clone run: the ~35 min of .ci/run before the real node "
            f"plus the parts measured here: node binaries cold build {node_build['build_seconds']} s (kubelet, "
            f"CoreDNS, local-path-provisioner; on a Go build cache warmed by the control plane), cold image "
            f"builds {cold} s, and one update of the containerd image store that every cluster hard-links "
            f"({result['image_store_update_s']} s); the real-node tests' own run time is not included"
        )
    result.update(
        {
            "node_binaries_cold_build_s": node_build["build_seconds"],
            "versions": {
                "kubernetes (kubelet)": node_build["key"].split("_")[0].removeprefix("node-k8s-"),
                "node binaries key": node_build["key"],
                "containerd": first_line("containerd", "--version"),
                "runc": first_line("runc", "--version"),
                "buildah": first_line("buildah", "--version"),
                "images": built,
            },
            "command": "python bench/real_node.py " + " ".join(sys.argv[1:]),
            "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cores, "
            f"{round(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30)} GiB",
            "load_avg_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        }
    )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
