"""Local cluster figures: cold build seconds (recorded by build-binaries.sh), warm
start to API ready and all nodes Ready, and the control plane's resident memory.

    .venv/bin/python bench/cluster.py [--runs 3]

Writes bench/results/cluster.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from statictrain_localcluster import procs
from statictrain_localcluster.cluster import LocalCluster, build_binaries

OUT = Path(__file__).resolve().parent / "results" / "cluster.json"


def rss_mb(pids: list[int]) -> float:
    total_kb = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
        except OSError:
            continue
    return total_kb / 1024


def versions(bin_dir: Path) -> dict[str, str]:
    key = bin_dir.parent.name  # k8s-..._etcd-..._kwok-..._helm-..._os-arch
    parts = dict(p.split("-", 1) for p in key.split("_") if "-" in p)
    return {
        "kubernetes": parts.get("k8s", ""),
        "etcd": parts.get("etcd", ""),
        "kwok": parts.get("kwok", ""),
        "helm": parts.get("helm", ""),
        "go": os.popen("go version").read().strip(),
        "prometheus": os.popen("prometheus --version 2>&1 | head -1").read().strip(),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    bin_dir = build_binaries(log=sys.stderr)
    build_record = bin_dir.parent / "build-time.json"
    record = json.loads(build_record.read_text()) if build_record.exists() else {}
    cold = record.get("build_seconds")
    starts, rss = [], []
    for i in range(args.runs):
        c = LocalCluster(f"bench-{os.getpid()}-{i}")
        t0 = time.monotonic()
        c.start(bin_dir, log=sys.stderr)
        starts.append(time.monotonic() - t0)
        time.sleep(5)  # let the components settle before reading memory
        rss.append(rss_mb(procs.pids_mentioning(str(c.root))))
        nodes = len(c.nodes())
        c.stop()
    result = {
        "cold_build_s": cold,
        "cold_build_note": record.get(
            "measured_by",
            "wall seconds of build-binaries.sh with empty Go module and "
            "build caches, recorded by the script in <cache>/<versions>/build-time.json",
        ),
        "warm_start_s": round(statistics.median(starts), 2),
        "warm_start_runs_s": [round(s, 2) for s in starts],
        "warm_start_measures": f"statictrain-cluster start with cached binaries until /readyz and all {nodes} "
        "nodes Ready (Prometheus ready included)",
        "control_plane_rss_mb": round(statistics.median(rss), 1),
        "control_plane_rss_measures": "sum of VmRSS of every process of the cluster (etcd, kube-apiserver, "
        "controller-manager, scheduler, kwok-controller, Prometheus) 5 s after start",
        "versions": versions(bin_dir),
        "command": "python bench/cluster.py --runs " + str(args.runs),
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cores, "
        f"{round(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30)} GiB",
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
