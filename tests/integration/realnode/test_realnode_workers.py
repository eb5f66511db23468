"""Worker pods in real containers on the real node: the images built from the Dockerfile,
the operator's pod spec as the kubelet runs it.

Each test's namespace enforces Pod Security "restricted", so every worker pod here is
admitted under it. Tiny CPU models and short runs: the machine has 2 cores.
"""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest
from statictrain import metrics
from statictrain.exitcodes import ExitCode
from statictrain_localcluster.cluster import LocalCluster
from statictrain_operator.prom import HttpPrometheus

from ..operator.conftest import Kube, wait_for
from .conftest import (
    NEVER_DONE,
    RESUMED,
    SLOW_BATCH,
    TRAINING,
    checkpoint_dir,
    checkpoint_steps,
    kill,
    logs,
    phase,
    pods,
    process_uids,
    terminated,
    tiny_job,
    trainer_pids,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]



def test_tiny_job_succeeds_by_itself_as_non_root_and_is_scraped(
    cluster: LocalCluster, restricted: Kube, node_operator: Any, images: dict[str, str], real_node: str
) -> None:
    kube = restricted
    kube.create(tiny_job("tiny", images["trainer"]))
    pod = wait_for(lambda: next((p for p in pods(kube, "tiny") if p["status"].get("phase") == "Running"), None),
                   "the worker pod Running on the real node", timeout=180)
    assert pod["spec"]["nodeName"] == real_node
    assert not any(v.get("projected") for v in pod["spec"]["volumes"]), "a ServiceAccount token was mounted"
    # Pod Security "restricted" admitted it, and the kubelet really runs the trainer as 10001.
    pids = wait_for(lambda: trainer_pids(pod["metadata"]["uid"]), "the trainer process", timeout=120)
    assert process_uids(pids[0]) == (10001, 10001)

    # Prometheus found the native sidecar through the API server and scrapes it.
    def scraped() -> Any:
        return HttpPrometheus(cluster.prometheus_url).query(
            f'{metrics.TRAIN_STEPS_TOTAL}{{namespace="{kube.ns}",job_name="tiny"}}', time.time())

    wait_for(scraped, "the sidecar's step counter in Prometheus", timeout=120)

    # The trainer exits 0, the kubelet stops the sidecar, the pod completes, the job succeeds.
    wait_for(lambda: phase(kube, "tiny") == "Succeeded", "the job Succeeded by itself", timeout=300)
    (done,) = pods(kube, "tiny")
    assert done["status"]["phase"] == "Succeeded"
    assert (terminated(done) or {}).get("exitCode") == 0
    assert (terminated(done, "sidecar") or {}).get("reason") in ("Completed", "Error"), done["status"]
    status = kube.get("stj", "tiny")["status"]  # type: ignore[index]
    assert status.get("completionTime")
    # The cost part read the sidecar's counters from Prometheus into status (a CPU job costs no GPU time).
    cost = wait_for(lambda: ((kube.get("stj", "tiny") or {}).get("status") or {}).get("cost", {}).get("steps"),
                    "status.cost filled from Prometheus", timeout=120)
    assert int(cost) > 0
    # What the trainer ran with, and who chose it (the spec: compile mode none), scraped with the steps.
    said = HttpPrometheus(cluster.prometheus_url).query(
        f'last_over_time({metrics.TRAIN_SETTINGS_INFO}{{namespace="{kube.ns}",job_name="tiny"}}[10m])', time.time())
    assert [(s.labels["settings"].split("@")[0], s.labels["chosen_by"]) for s in said] == [("none", "spec")], said


def test_bad_entrypoint_fails_the_job_at_once_with_exit_42(
    restricted: Kube, node_operator: Any, images: dict[str, str]
) -> None:
    kube = restricted
    kube.create(tiny_job("bad", images["trainer"], entrypoint="no_such_module:build",
                         runPolicy={"backoffLimit": 3, "terminationGracePeriodSeconds": 30}))
    wait_for(lambda: phase(kube, "bad") == "Failed", "the job Failed", timeout=240)
    (pod,) = pods(kube, "bad")  # one pod: the podFailurePolicy failed the job without retries
    assert (terminated(pod) or {}).get("exitCode") == ExitCode.USER_ERROR
    job = kube.get("job", "bad-worker") or {}
    reasons = {c["reason"] for c in job["status"]["conditions"] if c["status"] == "True"}
    assert "PodFailurePolicy" in reasons, job["status"]


def test_two_pod_ddp_rendezvous_and_a_killed_trainer_resumes_every_rank_from_the_checkpoint(
    restricted: Kube, node_operator: Any, images: dict[str, str]
) -> None:
    kube = restricted
    kube.create(tiny_job("ddp", images["trainer"], replicas=2, training={"maxSteps": 200},
                         checkpoint={"everySteps": 40}, env=[SLOW_BATCH],
                         runPolicy={"backoffLimit": 3, "terminationGracePeriodSeconds": 30}))
    folder = checkpoint_dir(kube, "ddp")
    # Both pods rendezvoused through the headless Service's DNS name: rank 0 checkpoints.
    before = wait_for(lambda: checkpoint_steps(folder), "a first checkpoint", timeout=300)[-1]
    rank1 = next(p for p in pods(kube, "ddp")
                 if p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "1")
    (pid,) = wait_for(lambda: trainer_pids(rank1["metadata"]["uid"]), "rank 1's trainer process")
    kill(pid, signal.SIGKILL)
    last = checkpoint_steps(folder)[-1]
    assert last >= before

    # The job retries: new pods for both indexes, every rank resumes from the same checkpoint.
    def resumed() -> list[int] | None:
        fresh = [p for p in pods(kube, "ddp") if p["metadata"]["uid"] != rank1["metadata"]["uid"]
                 and p["status"].get("phase") in ("Running", "Succeeded") and
                 p["metadata"]["creationTimestamp"] >= rank1["metadata"]["creationTimestamp"]]
        steps = [int(m.group(1)) for p in fresh for m in [RESUMED.search(logs(kube, p["metadata"]["name"]))] if m]
        return steps if len(steps) == 2 else None

    steps = wait_for(resumed, "both ranks resumed from a checkpoint", timeout=300)
    assert steps[0] == steps[1] >= last, (steps, last)
    wait_for(lambda: phase(kube, "ddp") == "Succeeded", "the job Succeeded", timeout=600)
    assert checkpoint_steps(folder)[-1] == 200
    job = kube.get("job", "ddp-worker") or {}
    assert job["status"].get("failed", 0) >= 1  # the killed pod (137) counted; its peer's 75 did not


def test_deleted_worker_checkpoints_in_its_grace_period_and_is_not_counted(
    restricted: Kube, node_operator: Any, images: dict[str, str]
) -> None:
    kube = restricted
    kube.create(tiny_job("evict", images["trainer"], training={"maxSteps": NEVER_DONE},
                         checkpoint={"everySteps": 1000}, env=[SLOW_BATCH],
                         runPolicy={"backoffLimit": 0, "terminationGracePeriodSeconds": 60}))
    folder = checkpoint_dir(kube, "evict")
    pod = wait_for(lambda: next((p for p in pods(kube, "evict") if TRAINING.search(logs(kube, p["metadata"]["name"]))),
                                None), "the trainer training (torch imported, its SIGTERM handler set)", timeout=300)
    time.sleep(3)  # a few steps in; no periodic checkpoint before step 1000
    assert checkpoint_steps(folder) == [], "a checkpoint before the stop: the job must still be running here"
    kube.run("delete", "pod", pod["metadata"]["name"], "--wait=false")  # SIGTERM, then the grace period

    saved = wait_for(lambda: checkpoint_steps(folder), "the checkpoint written on SIGTERM", timeout=90)
    gone = wait_for(lambda: next((p for p in kube.list("pods") if p["metadata"]["uid"] == pod["metadata"]["uid"]
                                  and terminated(p)), None) or
                    not any(p["metadata"]["uid"] == pod["metadata"]["uid"] for p in kube.list("pods")),
                    "the deleted pod terminated", timeout=90)
    if isinstance(gone, dict):
        assert terminated(gone)["exitCode"] == ExitCode.PREEMPTED  # type: ignore[index]
    # backoffLimit is 0: had the preemption counted, the job would have failed instead of starting a new pod.
    def resumed() -> tuple[dict[str, Any], int] | None:
        for p in pods(kube, "evict"):
            if p["metadata"]["uid"] != pod["metadata"]["uid"]:
                m = RESUMED.search(logs(kube, p["metadata"]["name"]))
                if m:
                    return p, int(m.group(1))
        return None

    new, step = wait_for(resumed, "a new pod resumed from the checkpoint", timeout=300)
    assert step == saved[0], logs(kube, new["metadata"]["name"])[-2000:]
    job = (kube.get("job", "evict-worker") or {}).get("status") or {}
    assert not job.get("failed") and phase(kube, "evict") != "Failed", job
