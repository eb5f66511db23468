"""The per-job compile cache (``workers.compileCachePerJob``) with a real kubelet mounting the subPaths of
real local-path claims on the real node, for compiled tiny jobs through the real operator.

Oracles that do not share the trainer's cache code: the claim's folder on the node read with pathlib,
the trainer's log through the kubelet, and the kernel's answer to a write from inside the container.
The boundary between namespaces is the claim: the operator mounts the claim of the setting's name in the
job's own namespace, so each namespace has its own volume (checked here with the same job name in both).
No timing: each step waits for the state it needs; the job stopped mid-run never ends by itself.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from ..operator.conftest import Kube, wait_for
from .conftest import NEVER_DONE, RESTRICTED, claim_dir, logs, node_settings, phase, pods, tiny_job

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

CLAIM = "compile-cache"
CACHE_DIR = "/var/cache/statictrain/compile"
SHARED_DIR = CACHE_DIR + "-shared"
"""Where the trainer sees the claim's read-only ``shared/`` folder (the README's layout)."""
MEMORY = {"gpusPerReplica": 0, "cpu": "100m", "memory": "2Gi"}
"""The tiny job's resources with room for inductor's compile workers."""
FEW = {"maxSteps": 5}
SAVED = re.compile(r"compile cache saved: \d+ bytes to (\S+)")
COMPILE_WAIT_S = 900.0
"""Upper bound of a wait for a compiled job's state (not a timing assertion: a busy 2-core machine)."""


@pytest.fixture
def cache_operator(make_operator: Any, images: dict[str, str], real_node: str, namespace: str,
                   other_namespace: str) -> Any:
    """One operator watching both namespaces, with a compile-cache claim per job."""
    return make_operator(watch=f"{namespace},{other_namespace}", heartbeat_namespace=namespace,
                         compile_cache_claim=CLAIM, compile_cache_per_job=True, compile_cache_dir=CACHE_DIR,
                         **node_settings(images, real_node))


def cache_claim(kube: Kube) -> Path:
    """The namespace's compile-cache claim (what an admin makes) and its folder on the node."""
    kube.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": CLAIM},
                 "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}}})
    return claim_dir(kube, CLAIM)


def files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (path relative to it) with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def compiled_job(name: str, image: str, **spec: Any) -> dict[str, Any]:
    """The tiny job compiled (mode default, fp32, the compile cache on by the API's default)."""
    return tiny_job(name, image, compile={"mode": "default"}, precision="fp32", resources=MEMORY, **spec)


def succeeded_log(kube: Kube, job: str) -> str:
    wait_for(lambda: phase(kube, job) == "Succeeded", f"{kube.ns}/{job} Succeeded", timeout=COMPILE_WAIT_S,
             interval=2)
    [pod] = [p for p in pods(kube, job) if p["status"].get("phase") == "Succeeded"]
    return logs(kube, pod["metadata"]["name"])


def test_each_job_writes_only_its_folder_reads_shared_read_only_and_another_namespace_sees_nothing(
    restricted: Kube, other_namespace: str, cache_operator: Any, images: dict[str, str]
) -> None:
    kube = restricted
    other = Kube(kube.cluster, other_namespace)
    kube.cluster.kubectl("label", "namespace", other.ns, f"{RESTRICTED}=restricted", "--overwrite")
    root, other_root = cache_claim(kube), cache_claim(other)
    assert root != other_root

    # (a) Job a compiles, finds nothing, and its artifacts land in jobs/a/ of the claim, nowhere else.
    kube.create(compiled_job("a", images["trainer"], training=FEW))
    log_a = succeeded_log(kube, "a")
    assert "compile cache miss" in log_a, log_a
    saved = SAVED.search(log_a)
    assert saved is not None, log_a
    written = files(root)
    assert written and all(k.startswith("jobs/a/") for k in written), sorted(written)
    [artifact] = [k for k in written if k.endswith(".bin")]
    assert Path(saved.group(1)).relative_to(CACHE_DIR) == Path(artifact).relative_to("jobs/a")

    # (b) An admin copies a's artifacts into shared/ (files and folders writable by anyone: only the
    # read-only mount can refuse a write there). Job b of the same workload loads them from there.
    shared = root / "shared"
    shutil.copytree(root / "jobs" / "a", shared, dirs_exist_ok=True)
    for p in [shared, *shared.rglob("*")]:
        p.chmod(0o777 if p.is_dir() else 0o666)
    seeded = files(shared)
    kube.create(compiled_job("b", images["trainer"], training={"maxSteps": NEVER_DONE}))
    # (c) Meanwhile a job of the same name as a in another namespace: its claim is another volume.
    other.create(compiled_job("a", images["trainer"], training=FEW))

    def running_b() -> tuple[str, str] | None:
        for pod in pods(kube, "b"):
            if pod["status"].get("phase") == "Running":
                text = logs(kube, pod["metadata"]["name"])
                if "checkpoint written" in text:  # past the first compiled step and the cache decision
                    return pod["metadata"]["name"], text
        return None

    pod_b, log_b = wait_for(running_b, "b running past its first checkpoint", timeout=COMPILE_WAIT_S, interval=2)
    hit = re.search(r"compile cache hit: loaded \d+ bytes from (\S+)", log_b)
    assert hit is not None, log_b
    assert Path(hit.group(1)).relative_to(SHARED_DIR) == Path(artifact).relative_to("jobs/a")
    assert "compile cache unused" not in log_b and SAVED.search(log_b) is None, log_b
    probe = kube.run("exec", pod_b, "-c", "trainer", "--", "touch", f"{SHARED_DIR}/probe", check=False)
    assert probe.returncode != 0 and "Read-only file system" in probe.stderr, (probe.returncode, probe.stderr)
    own = kube.run("exec", pod_b, "-c", "trainer", "--", "find", CACHE_DIR, "-mindepth", "1")
    assert own.stdout == "", own.stdout  # b's own mount is its empty jobs/b: nothing of a's, no jobs/ above

    log_other = succeeded_log(other, "a")
    assert "compile cache miss: nothing under" in log_other, log_other
    assert "compile cache hit" not in log_other, log_other
    other_written = files(other_root)
    assert other_written and all(k.startswith("jobs/a/") for k in other_written), sorted(other_written)
    assert any(k.endswith(".bin") for k in other_written)

    # b stopped (its pods gone): shared/ holds exactly what the admin put there, b wrote no artifact,
    # a's artifacts are as a left them.
    kube.run("delete", "stj", "b")
    wait_for(lambda: not pods(kube, "b"), "b's pods gone", timeout=180, interval=2)
    after = files(root)
    assert files(shared) == seeded
    assert {k: v for k, v in after.items() if k.startswith("jobs/a/")} == written
    assert not any(k.startswith("jobs/b/") and k.endswith(".bin") for k in after), sorted(after)
    assert all(k.startswith(("jobs/a/", "jobs/b/", "shared/")) for k in after), sorted(after)
