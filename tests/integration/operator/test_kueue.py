"""A StaticTrainingJob in a Kueue queue, against the real Kueue (built from sigs.k8s.io/kueue) and the
real operator: admitted when quota allows, waits when it does not, resumes when quota frees, preempted
by a higher-priority job and admitted again; a missing LocalQueue; Kueue absent.

Each test gets its own ClusterQueue (selecting only its namespace) over the local cluster's spot and
on-demand ResourceFlavors, and a LocalQueue "q". What Kueue decided is read from Kueue's own objects
(the Workload, the Job it unsuspends, the pods' nodes), not from the operator's code.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from statictrain import labels

from .conftest import Kube, stj, wait_for

pytestmark = pytest.mark.cluster

GPUS = 4  # per job: one replica of four GPUs


def kueue_served(cluster: Any) -> bool:
    out = cluster.kubectl("api-resources", "--api-group=kueue.x-k8s.io", "-o", "name", check=False).stdout
    return "workloads.kueue.x-k8s.io" in out


def queued(name: str, queue: str = "q", priority: str | None = None) -> dict[str, Any]:
    body = stj(name, replicas=1, resources={"gpusPerReplica": GPUS})
    body["metadata"]["labels"][labels.KUEUE_QUEUE] = queue
    if priority:
        body["metadata"]["labels"][labels.KUEUE_PRIORITY_CLASS] = priority
    return body


def status(kube: Kube, name: str) -> dict[str, Any]:
    return ((kube.get("stj", name) or {}).get("status")) or {}


def condition(kube: Kube, name: str, ctype: str) -> dict[str, Any]:
    return next((c for c in status(kube, name).get("conditions") or [] if c["type"] == ctype), {})


def live_pods(kube: Kube, name: str) -> list[dict[str, Any]]:
    pods = kube.list("pods", f"{labels.JOB}={name},{labels.ROLE}=worker")
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def workload_of(kube: Kube, name: str) -> dict[str, Any] | None:
    job = kube.get("job", f"{name}-worker")
    if job is None:
        return None
    found = kube.list("workloads.kueue.x-k8s.io", f"{labels.KUEUE_JOB_UID}={job['metadata']['uid']}")
    return found[0] if found else None


def kueue_admitted(kube: Kube, name: str) -> bool:
    wl = workload_of(kube, name) or {}
    return any(c["type"] == "Admitted" and c["status"] == "True" for c in (wl.get("status") or {}).get("conditions")
               or [])


def test_queue_label_without_kueue_is_ignored_with_a_warning(kube: Kube, make_operator: Any) -> None:
    """First in this file: the tests below install Kueue into the session's cluster."""
    if kueue_served(kube.cluster):
        pytest.skip("Kueue is already installed in this cluster")
    make_operator()
    kube.apply(queued("solo"))
    wait_for(lambda: len(live_pods(kube, "solo")) == 1, "the worker to start without a queue")
    job = kube.get("job", "solo-worker") or {}
    assert labels.KUEUE_QUEUE not in job["metadata"]["labels"] and job["spec"]["suspend"] is False

    def warning() -> list[dict[str, Any]]:
        return [e for e in kube.list("events") if e.get("reason") == "KueueAbsent"]

    (event,) = wait_for(warning, "the KueueAbsent warning event")
    assert event["type"] == "Warning" and event["involvedObject"]["name"] == "solo"
    assert "queue" not in status(kube, "solo")


@pytest.fixture(scope="module")
def kueue(cluster: Any) -> Any:
    cluster.start_kueue(log=sys.stderr)
    return cluster


@pytest.fixture
def queue(kueue: Any, kube: Kube) -> Iterator[Any]:
    """make(spot_gpus) creates this test's ClusterQueue (spot, then on-demand with no quota) and LocalQueue q."""
    made: list[str] = []

    def make(spot_gpus: int, on_demand_gpus: int = 0) -> str:
        name = f"cq-{kube.ns}"
        flavors = [
            {"name": flavor, "resources": [{"name": labels.GPU_RESOURCE, "nominalQuota": gpus},
                                           {"name": "cpu", "nominalQuota": 1000},
                                           {"name": "memory", "nominalQuota": "10000Gi"}]}
            for flavor, gpus in (("spot", spot_gpus), ("on-demand", on_demand_gpus))
        ]
        cq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
              "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": kube.ns}},
                       "preemption": {"withinClusterQueue": "LowerPriority"},
                       "resourceGroups": [{"coveredResources": [labels.GPU_RESOURCE, "cpu", "memory"],
                                           "flavors": flavors}]}}
        lq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "q"},
              "spec": {"clusterQueue": name}}
        kueue.kubectl("apply", "-f", "-", input=json.dumps(cq))
        made.append(name)
        kube.apply(lq)
        return name

    yield make
    for name in made:
        kueue.kubectl("delete", "clusterqueue", name, "--wait=false", check=False)


def test_admitted_when_quota_allows_waits_when_not_resumes_when_freed(
    kube: Kube, make_operator: Any, queue: Any
) -> None:
    cq = queue(spot_gpus=GPUS)
    make_operator()
    kube.apply(queued("first"))
    wait_for(lambda: status(kube, "first").get("queue", {}).get("admitted"), "the first job to be admitted")
    q = status(kube, "first")["queue"]
    assert (q["name"], q["clusterQueue"], q["flavors"][labels.GPU_RESOURCE]) == ("q", cq, "spot")
    assert kueue_admitted(kube, "first")  # Kueue's own Workload says so
    assert q["workload"] == (workload_of(kube, "first") or {})["metadata"]["name"]
    assert condition(kube, "first", "Admitted")["status"] == "True"
    # Kueue put the flavor's node label into the pods; the scheduler bound them to a spot node.
    (pod,) = wait_for(lambda: [p for p in live_pods(kube, "first") if p["spec"].get("nodeName")] or None,
                      "the first job's worker to be bound")
    assert pod["spec"]["nodeSelector"][labels.CAPACITY_TYPE] == "spot"
    node = json.loads(kube.cluster.kubectl("get", "node", pod["spec"]["nodeName"], "-o", "json").stdout)
    assert node["metadata"]["labels"][labels.CAPACITY_TYPE] == "spot"

    kube.apply(queued("second"))
    wait_for(lambda: condition(kube, "second", "Admitted").get("reason") == "Queued"
             and "insufficient" in status(kube, "second").get("queue", {}).get("message", ""),
             "the second job to wait for quota, saying why")
    assert status(kube, "second")["phase"] == "Pending"
    assert not kueue_admitted(kube, "second") and not live_pods(kube, "second")
    assert (kube.get("job", "second-worker") or {})["spec"]["suspend"] is True

    kube.run("delete", "stj", "first", "--wait=false")
    wait_for(lambda: status(kube, "second").get("queue", {}).get("admitted"), "the second job to be admitted")
    wait_for(lambda: len(live_pods(kube, "second")) == 1, "the second job's worker to start")
    assert kueue_admitted(kube, "second")


def test_suspend_of_an_admitted_job_deactivates_its_workload_and_resume_admits_it_again(
    kube: Kube, make_operator: Any, queue: Any
) -> None:
    queue(spot_gpus=GPUS)
    make_operator()
    kube.apply(queued("pause"))
    wait_for(lambda: len(live_pods(kube, "pause")) == 1 and kueue_admitted(kube, "pause"), "the job to run")
    kube.patch("stj", "pause", {"spec": {"suspend": True}})
    # Kueue's own objects: the Workload inactive (Kueue admits no inactive Workload), the Job suspended.
    wl = wait_for(lambda: (w := workload_of(kube, "pause")) and w["spec"].get("active") is False
                  and not kueue_admitted(kube, "pause") and w, "the Workload deactivated and no longer admitted")
    evicted = next(c for c in wl["status"]["conditions"] if c["type"] == "Evicted")
    assert evicted["status"] == "True" and evicted["reason"].startswith("Deactivated"), evicted  # Kueue's own test
    wait_for(lambda: not live_pods(kube, "pause"), "the workers to stop")
    wait_for(lambda: status(kube, "pause").get("phase") == "Suspended", "the job Suspended")
    assert (kube.get("job", "pause-worker") or {})["spec"]["suspend"] is True

    kube.patch("stj", "pause", {"spec": {"suspend": False}})
    wait_for(lambda: kueue_admitted(kube, "pause") and len(live_pods(kube, "pause")) == 1,
             "the job admitted again and its worker started")
    assert (workload_of(kube, "pause") or {})["spec"].get("active", True) is True


def test_missing_local_queue_waits_with_a_condition(kube: Kube, make_operator: Any, queue: Any) -> None:
    queue(spot_gpus=GPUS)
    make_operator()
    kube.apply(queued("lost", queue="no-such-queue"))
    cond = wait_for(lambda: condition(kube, "lost", "Admitted").get("reason") == "LocalQueueNotFound"
                    and condition(kube, "lost", "Admitted"), "the LocalQueueNotFound condition")
    assert cond["status"] == "False" and "'no-such-queue' does not exist" in cond["message"]
    assert status(kube, "lost")["phase"] == "Pending" and not live_pods(kube, "lost")


def test_preempted_by_a_higher_priority_job_then_admitted_again(
    kube: Kube, make_operator: Any, queue: Any
) -> None:
    queue(spot_gpus=GPUS)
    low, high = f"low-{kube.ns}", f"high-{kube.ns}"
    for name, value in ((low, 10), (high, 1000)):
        kube.cluster.kubectl("apply", "-f", "-", input=json.dumps({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": name},
            "value": value}))
    try:
        make_operator()
        kube.apply(queued("batch", priority=low))
        wait_for(lambda: len(live_pods(kube, "batch")) == 1 and status(kube, "batch").get("queue", {}).get("admitted"),
                 "the low-priority job to run")
        kube.apply(queued("urgent", priority=high))
        wait_for(lambda: condition(kube, "batch", "Admitted").get("reason") == "Evicted",
                 "the low-priority job to be preempted")
        wait_for(lambda: status(kube, "urgent").get("queue", {}).get("admitted"), "the urgent job to be admitted")
        wait_for(lambda: not live_pods(kube, "batch"), "the preempted job's workers to stop")
        st = status(kube, "batch")
        assert st["phase"] == "Pending" and st.get("restarts", 0) == 0  # a stop, not a failure
        assert "preempt" in st["queue"]["message"].lower()
        assert (kube.get("job", "batch-worker") or {})["spec"]["suspend"] is True

        kube.run("delete", "stj", "urgent", "--wait=false")
        wait_for(lambda: status(kube, "batch").get("queue", {}).get("admitted") and len(live_pods(kube, "batch")) == 1,
                 "the preempted job to be admitted again and its worker to start")
        assert status(kube, "batch").get("phase") != "Failed"
    finally:
        kube.cluster.kubectl("delete", "workloadpriorityclass", low, high, "--wait=false", check=False)


def test_flavor_advice_on_a_recorded_workload_reorders_the_cluster_queue(
    kube: Kube, queue: Any, tmp_path: Any
) -> None:
    """The recorded workload ran on L4 (spot only here) at 100 tokens/s per GPU and on A10G (on-demand only)
    at 1000 (--no-table: no figures inferred for the H100 and A100 nodes); recorded prices 0.36 $/GPU-hour
    for L4 and 1.8 for A10G. By hand: spot 0.36 / (100 x 3600)
    x 10^6 = 1.0 $/Mtoken, on-demand 1.8 / (1000 x 3600) x 10^6 = 0.5 $/Mtoken: on-demand goes first."""
    cq = queue(spot_gpus=GPUS, on_demand_gpus=GPUS)
    nodes = json.loads(kube.cluster.kubectl("get", "nodes", "-o", "json").stdout)
    prices = {"NVIDIA-L4": "0.36", "NVIDIA-A10G": "1.8", "NVIDIA-H100-80GB-HBM3": "5", "NVIDIA-A100-SXM4-40GB": "3"}
    for n in nodes["items"]:
        product = n["metadata"].get("labels", {}).get(labels.GPU_PRODUCT)
        if product:
            n["metadata"].setdefault("annotations", {})[labels.GPU_HOURLY_COST] = prices[product]
    (tmp_path / "nodes.json").write_text(json.dumps(nodes))
    (tmp_path / "tps.yaml").write_text("NVIDIA-L4: 100\nNVIDIA-A10G: 1000\n")
    exe = Path(sys.executable).parent / "statictrain"
    proc = subprocess.run(
        [str(exe), "advise", "flavors", "--cluster-queue", cq, "--kubeconfig", str(kube.cluster.kubeconfig),
         "--nodes", str(tmp_path / "nodes.json"), "--throughput", str(tmp_path / "tps.yaml"), "--no-table", "--apply"],
        capture_output=True, text=True, check=False, env=kube.cluster.env)
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line.split()[1] for line in proc.stdout.splitlines()
            if line.startswith(("spot ", "on-demand "))}
    assert rows == {"on-demand": "0.5000", "spot": "1.0000"}, proc.stdout
    assert "order advised:  on-demand, spot" in proc.stdout
    live = json.loads(kube.cluster.kubectl("get", "clusterqueue", cq, "-o", "json").stdout)
    assert [f["name"] for f in live["spec"]["resourceGroups"][0]["flavors"]] == ["on-demand", "spot"]
