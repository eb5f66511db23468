"""Prometheus scrape targets for the pods of the real node (Debian's Prometheus has no
Kubernetes service discovery): every container port named ``metrics`` of a Running pod
on the node becomes a file_sd target, removed when the pod stops running. Its labels
(namespace, pod, pod_uid) come from the API server, and the folder is the pod pool
(prometheus.POD_TARGETS), where they win over what the pod's exporter claims.

    python -m statictrain_localcluster.podtargets --kubectl BIN --kubeconfig FILE --node NAME --targets DIR

Runs until killed (``statictrain-cluster stop`` does); polls the API server every second.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path
from typing import Any

from statictrain_localcluster import prometheus

__all__ = ["PREFIX", "targets"]

PREFIX = "pod_"
"""File names of the targets this process owns (others belong to tests and local workers)."""


def targets(pods: list[dict[str, Any]]) -> dict[str, tuple[str, dict[str, str]]]:
    """Scrape job name -> (address, labels) for the metrics ports of running pods (pure)."""
    out = {}
    for pod in pods:
        meta, status = pod["metadata"], pod.get("status", {})
        if status.get("phase") != "Running" or not status.get("podIP"):  # terminating pods still report
            continue
        for c in [*pod["spec"].get("initContainers", []), *pod["spec"].get("containers", [])]:
            for port in c.get("ports", []):
                if port.get("name") == "metrics":
                    job = f"{PREFIX}{meta['namespace']}_{meta['name']}_{c['name']}"
                    out[job] = (f"{status['podIP']}:{port['containerPort']}",
                                {"namespace": meta["namespace"], "pod": meta["name"], "pod_uid": meta.get("uid", "")})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="podtargets", description=__doc__)
    ap.add_argument("--kubectl", required=True)
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--node", required=True)
    ap.add_argument("--targets", type=Path, required=True)
    ap.add_argument("--interval", type=float, default=1.0)
    args = ap.parse_args(argv)
    while True:
        got = subprocess.run([args.kubectl, "--kubeconfig", args.kubeconfig, "get", "pods", "-A", "-o", "json",
                              "--field-selector", f"spec.nodeName={args.node}"],
                             capture_output=True, text=True, check=False)
        if got.returncode == 0:
            want = targets(json.loads(got.stdout)["items"])
            for job, (address, labels) in want.items():
                path = prometheus.target_file(args.targets, job)
                if not path.exists():
                    prometheus.write_target(args.targets, job, address, labels)
            for path in args.targets.glob(f"{PREFIX}*.json"):
                if path.stem not in {prometheus.target_file(args.targets, j).stem for j in want}:
                    path.unlink(missing_ok=True)
        time.sleep(args.interval)


if __name__ == "__main__":
    raise SystemExit(main())
