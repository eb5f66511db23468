"""Nodes, pods and a real extender process for the extender's integration tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from statictrain import labels
from statictrain_localcluster.waiting import eventually as wait_for

VENV_BIN = Path(sys.executable).parent
TEST_LABEL = "statictrain.io/extender-test"


def gpu_node(name: str, group: str, product: str, gpus: int, *, capacity: str, hourly: str) -> dict[str, Any]:
    """A kwok GPU node as the price annotator leaves it, reserved for one test group by label and taint."""
    cap = {"cpu": "96", "memory": "1024Gi", "pods": "110", labels.GPU_RESOURCE: str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "type": "kwok",
                labels.GPU_PRODUCT: product,
                labels.CAPACITY_TYPE: capacity,
                TEST_LABEL: group,
            },
            "annotations": {
                "kwok.x-k8s.io/node": "fake",
                labels.HOURLY_COST: hourly,
                labels.PRICE_SOURCE: "catalog",
            },
        },
        "spec": {
            "taints": [
                {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"},
                {"key": TEST_LABEL, "value": group, "effect": "NoSchedule"},
            ]
        },
        "status": {"capacity": cap, "allocatable": cap},
    }


def gpu_pod(
    name: str,
    group: str,
    gpus: int,
    *,
    scheduler: str = "statictrain-scheduler",
    annotations: dict[str, str] | None = None,
    job: str = "job-a",
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {labels.JOB: job}, "annotations": annotations or {}},
        "spec": {
            "schedulerName": scheduler,
            "nodeSelector": {TEST_LABEL: group},
            "tolerations": [
                {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"},
                {"key": TEST_LABEL, "operator": "Exists", "effect": "NoSchedule"},
            ],
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "w",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {
                        "requests": {labels.GPU_RESOURCE: str(gpus)},
                        "limits": {labels.GPU_RESOURCE: str(gpus)},
                    },
                }
            ],
        },
    }


def post_json(url: str, body: Any, timeout_s: float = 10) -> tuple[int, Any]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


class ExtenderProcess:
    """``statictrain-extender`` as a subprocess on the port the cluster's kube-scheduler calls."""

    def __init__(self, kubeconfig: Path, port: int, prometheus_url: str, log_path: Path) -> None:
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.env = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig),
            "STATICTRAIN_EXTENDER_HOST": "127.0.0.1",
            "STATICTRAIN_EXTENDER_PORT": str(port),
            "STATICTRAIN_PROMETHEUS_URL": prometheus_url,
            "STATICTRAIN_EXTENDER_REFRESH_SECONDS": "2",
        }
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [str(VENV_BIN / "statictrain-extender")], env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        wait_for(self.healthy, 60, f"the extender on {self.base} to sync its node cache")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base}/healthz", timeout=2) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None
