"""The operator's optional pre-flight pod (spec.preflight) in a real container on the real node.

The namespace enforces Pod Security "restricted", so the pre-flight pod is admitted under it
like the workers. The verdicts come from what the kubelet reports (the pod's phase, its exit
code, its termination message) and are checked against the example's source, not against the
operator's code. No timing: each step waits for the state it needs.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from statictrain import labels

from ..operator.conftest import Kube, wait_for
from .conftest import phase, pods, terminated, tiny_job

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

PREFLIGHT = {"enabled": True, "timeoutSeconds": 600}
MEMORY = {"gpusPerReplica": 0, "cpu": "100m", "memory": "2Gi"}
"""The tiny job's resources with room for torch and dynamo in the pre-flight's child process."""


def preflight_pod(kube: Kube, job: str) -> dict[str, Any] | None:
    found = kube.list("pods", f"{labels.JOB}={job},{labels.ROLE}=preflight")
    assert len(found) <= 1, found
    return found[0] if found else None


def status(kube: Kube, job: str) -> dict[str, Any]:
    return ((kube.get("stj", job) or {}).get("status")) or {}


def test_the_preflight_pod_runs_first_then_the_workers(
    restricted: Kube, node_operator: Any, images: dict[str, str], real_node: str
) -> None:
    kube = restricted
    kube.create(tiny_job("pre", images["trainer"], preflight=PREFLIGHT, resources=MEMORY))
    pre = wait_for(lambda: status(kube, "pre").get("preflight", {}).get("phase") == "Passed" and status(kube, "pre"),
                   "status.preflight Passed", timeout=600)
    pod = preflight_pod(kube, "pre")
    assert pod is not None and pod["spec"]["nodeName"] == real_node
    assert pod["status"]["phase"] == "Succeeded"
    ended = terminated(pod, "preflight") or {}
    assert ended.get("exitCode") == 0
    assert not any(v.get("projected") for v in pod["spec"].get("volumes") or []), "a ServiceAccount token was mounted"
    assert "nvidia.com/gpu" not in str(pod["spec"]["containers"][0]["resources"])
    result = pre["preflight"]
    assert result["pod"] == "pre-preflight" and result["passed"] is True
    assert result["graphBreaks"] == 0 and result["breaks"] == []
    assert result["peakMemoryBytes"] > 0
    conds = {c["type"]: c for c in pre["conditions"]}
    assert conds["PreflightPassed"]["status"] == "True"

    # The workers came after the pre-flight pod ended (API timestamps, second precision), and they run.
    job = wait_for(lambda: kube.get("job", "pre-worker"), "the worker Job")
    assert job["metadata"]["creationTimestamp"] >= ended["finishedAt"], (job["metadata"], ended)
    wait_for(lambda: pods(kube, "pre"), "a worker pod", timeout=120)
    wait_for(lambda: phase(kube, "pre") == "Succeeded", "the job Succeeded", timeout=600)


def test_a_graph_break_under_fullgraph_fails_the_job_with_its_location_and_no_workers(
    restricted: Kube, node_operator: Any, images: dict[str, str]
) -> None:
    kube = restricted
    kube.create(tiny_job("brk", images["trainer"], preflight=PREFLIGHT, resources=MEMORY,
                         entrypoint="statictrain_trainer.examples.graph_break:build",
                         compile={"mode": "default", "fullgraph": True}))
    wait_for(lambda: phase(kube, "brk") == "Failed", "the job Failed", timeout=600)
    st = status(kube, "brk")
    conds = {c["type"]: c for c in st["conditions"]}
    assert conds["Failed"]["reason"] == "PreflightFailed", conds
    assert conds["PreflightPassed"]["status"] == "False"
    assert "fullgraph" in conds["Failed"]["message"]
    # The break's place: the example's own data-dependent branch, file and line from its source.
    spec = importlib.util.find_spec("statictrain_trainer.examples.graph_break")  # not imported: no torch here
    assert spec is not None and spec.origin is not None
    source = Path(spec.origin)
    line = next(i for i, t in enumerate(source.read_text().splitlines(), 1) if ".item()" in t and "if " in t)
    assert st["preflight"]["phase"] == "Failed" and st["preflight"]["graphBreaks"] == 1
    assert st["preflight"]["breaks"][0]["location"].endswith(f"statictrain_trainer/examples/graph_break.py:{line}")
    pod = preflight_pod(kube, "brk")
    assert pod is not None and (terminated(pod, "preflight") or {}).get("exitCode") == 1
    # Failed is final: no worker Job, no worker pod, now or later.
    assert kube.get("job", "brk-worker") is None
    assert pods(kube, "brk") == []
