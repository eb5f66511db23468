"""Fixtures of the real-node tests: images from the Dockerfile loaded into the node's
containerd, the operator as a subprocess (the operator tests' fixtures), and helpers
that read what really happened: pod and container statuses, container logs, the
checkpoint folder on the node, processes of a container.

The real node is on by default (``make test`` installs its Debian packages); where
it could not start, these tests fail with the reason the cluster recorded.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from statictrain import labels
from statictrain_localcluster.cluster import ClusterError, LocalCluster
from statictrain_localcluster.nodeconfig import REAL_NODE_TOLERATION

from ..operator.conftest import Kube, crd, kube, make_operator, pytest_runtest_makereport, stj, wait_for

__all__ = ["crd", "kube", "make_operator", "pytest_runtest_makereport"]

RESTRICTED = "pod-security.kubernetes.io/enforce"


@pytest.fixture(scope="session")
def real_node(cluster: LocalCluster) -> str:
    """Name of the real node; fails (with the cluster's reason) when there is none."""
    try:
        cluster.node()
    except ClusterError as e:
        pytest.fail(str(e))
    return cluster.state.real_node


@pytest.fixture(scope="session")
def images(cluster: LocalCluster, real_node: str) -> dict[str, str]:
    """trainer and sidecar images built from the Dockerfile (cached by source hash), in the node."""
    return cluster.node_images()


@pytest.fixture
def restricted(kube: Kube) -> Kube:
    """The test's namespace enforcing Pod Security "restricted"."""
    kube.cluster.kubectl("label", "namespace", kube.ns, f"{RESTRICTED}=restricted", "--overwrite")
    return kube


@pytest.fixture
def node_operator(make_operator: Any, images: dict[str, str], real_node: str, cluster: LocalCluster,
                  monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The operator (with its cost part, on the cluster's Prometheus) placing workers on the
    real node, with the sidecar image from the Dockerfile."""
    monkeypatch.setenv("STATICTRAIN_COST_PROMETHEUS_URL", cluster.prometheus_url)
    monkeypatch.setenv("STATICTRAIN_COST_INTERVAL_S", "2")
    yield make_operator(parts="cost", **node_settings(images, real_node))


def node_settings(images: dict[str, str], real_node: str) -> dict[str, Any]:
    """Operator settings that place workers on the real node with the sidecar image from the Dockerfile."""
    return {
        "sidecar_image": images["sidecar"],
        "image_pull_policy": "Never",
        "tolerations": [REAL_NODE_TOLERATION],
        "node_selector": {"kubernetes.io/hostname": real_node},
        "scheduler_name": "default-scheduler",
        "checkpoint_volume_size": "1Gi",
    }


RESUMED = re.compile(r"resumed from \S+ \(step (\d+)\)")
TRAINING = re.compile(r"training \S+ from step \d+")
SLOW_BATCH = {"name": "STATICTRAIN_BATCH_SIZE", "value": "1024"}
"""A bigger batch of the tiny model: slow enough (tens of ms per step) to act mid-run."""
NEVER_DONE = 10**7
"""maxSteps of a job that must still be running when the test acts on it, however fast the machine
(300 steps of the tiny model took under 4 s on a quiet machine: the job had finished before the stop)."""


def tiny_job(name: str, image: str, **spec: Any) -> dict[str, Any]:
    """A tiny CPU job (eager, fp32) for the real node."""
    body: dict[str, Any] = {
        "image": image,
        "replicas": 1,
        "resources": {"gpusPerReplica": 0, "cpu": "100m", "memory": "1Gi"},
        "compile": {"mode": "none"},
        "precision": "fp32",
        "training": {"maxSteps": 60},
        "checkpoint": {"everySteps": 20},
        "runPolicy": {"backoffLimit": 2, "terminationGracePeriodSeconds": 30},
    }
    body.update(spec)
    return stj(name, **body)


def pods(kube: Kube, job: str) -> list[dict[str, Any]]:
    return kube.list("pods", f"{labels.JOB}={job},{labels.ROLE}=worker")


def phase(kube: Kube, job: str) -> str | None:
    return (((kube.get("stj", job) or {}).get("status")) or {}).get("phase")


def terminated(pod: dict[str, Any], container: str = "trainer") -> dict[str, Any] | None:
    """The container's terminated state as the kubelet reported it."""
    for st in [*pod.get("status", {}).get("containerStatuses", []),
               *pod.get("status", {}).get("initContainerStatuses", [])]:
        if st["name"] == container:
            return st.get("state", {}).get("terminated")  # type: ignore[no-any-return]
    return None


def logs(kube: Kube, pod: str, container: str = "trainer") -> str:
    """Container logs through the API server and the kubelet."""
    return kube.run("logs", pod, "-c", container, check=False).stdout


def checkpoint_dir(kube: Kube, job: str) -> Path:
    """The job's checkpoint folder on the node: the bound volume's host path."""
    return claim_dir(kube, f"{job}-checkpoint")


def claim_dir(kube: Kube, claim: str) -> Path:
    """The folder on the node of a claim of the namespace: the bound volume's host path."""
    pvc = wait_for(lambda: (kube.get("pvc", claim) or {}).get("spec", {}).get("volumeName"),
                   f"claim {claim} bound")
    pv = json.loads(kube.cluster.kubectl("get", "pv", pvc, "-o", "json").stdout)
    return Path(pv["spec"]["hostPath"]["path"])


def checkpoint_steps(folder: Path) -> list[int]:
    """Steps of the complete checkpoints in ``folder`` (the trainer's own naming), ascending."""
    return sorted(int(p.name[5:13]) for p in folder.glob("step-*.pt")) if folder.is_dir() else []


def trainer_pids(pod_uid: str) -> list[int]:
    """PIDs on this machine of the pod's training workers (``statictrain_trainer.main``, not the agent)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"statictrain_trainer.main" in cmd and b"statictrain-launch" not in b" ".join(cmd) and \
                f"STATICTRAIN_POD_UID={pod_uid}".encode() in env and b"LOCAL_RANK=0" in env:
            found.append(int(entry.name))
    return found


def process_uids(pid: int) -> tuple[int, int]:
    """(real uid, real gid) of a process, from /proc."""
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    uid = next(int(line.split()[1]) for line in status if line.startswith("Uid:"))
    gid = next(int(line.split()[1]) for line in status if line.startswith("Gid:"))
    return uid, gid


def kill(pid: int, sig: int) -> None:
    os.kill(pid, sig)
