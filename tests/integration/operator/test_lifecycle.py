"""apply -> children -> scheduled -> Running -> Succeeded/Failed; scale; suspend/resume; delete; TTL."""

from __future__ import annotations

import json
from typing import Any

import pytest
from statictrain import envvars, labels

from .conftest import Kube, stj, wait_for

pytestmark = pytest.mark.cluster

COMPLETE_AFTER = labels.KWOK_COMPLETE_AFTER
COMPLETE_PHASE = labels.KWOK_COMPLETE_PHASE


def phase(kube: Kube, name: str) -> str | None:
    obj = kube.get("stj", name)
    return ((obj or {}).get("status") or {}).get("phase")


def conditions(kube: Kube, name: str) -> dict[str, str]:
    obj = kube.get("stj", name) or {}
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}


def workers(kube: Kube, name: str) -> list[dict[str, Any]]:
    pods = kube.list("pods", f"{labels.JOB}={name},{labels.ROLE}=worker")
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def test_apply_creates_wired_children_scheduled_on_gpu_nodes(kube: Kube, make_operator: Any) -> None:
    make_operator()
    kube.apply(
        stj(
            "gpt",
            replicas=2,
            resources={"gpusPerReplica": 4, "gpuModels": ["H100"]},
            compile={"mode": "max-autotune"},
        )
    )
    owner = kube.get("stj", "gpt")
    assert owner is not None
    job = wait_for(lambda: kube.get("job", "gpt-worker"), "the worker Job")
    svc = wait_for(lambda: kube.get("service", "gpt-worker"), "the headless Service")
    want_labels = {labels.JOB: "gpt", labels.NAMESPACE: kube.ns, labels.COMMIT: "abc1234", labels.TEAM: "nlp"}
    for obj in (job, svc):
        assert want_labels.items() <= obj["metadata"]["labels"].items()
        (ref,) = obj["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (
            "StaticTrainingJob",
            "gpt",
            owner["metadata"]["uid"],
            True,
        )
    assert svc["spec"]["clusterIP"] == "None"
    assert (job["spec"]["completionMode"], job["spec"]["parallelism"]) == ("Indexed", 2)

    pods = wait_for(lambda: len(workers(kube, "gpt")) == 2 and workers(kube, "gpt"), "2 worker pods")
    for pod in pods:
        assert want_labels.items() <= pod["metadata"]["labels"].items()
        containers = {c["name"]: c for c in [*pod["spec"]["initContainers"], *pod["spec"]["containers"]]}
        env = {e["name"]: e.get("value") for e in containers["trainer"]["env"]}
        assert env[envvars.MASTER_ADDR] == "gpt-worker-0.gpt-worker"
        assert env[envvars.WORLD_SIZE] == "2"
        assert env[envvars.COMPILE_MODE] == "max-autotune"
        assert containers["trainer"]["resources"]["limits"]["nvidia.com/gpu"] == "4"
        assert containers["sidecar"]["command"] == ["statictrain-sidecar"]
        assert pod["spec"]["schedulerName"] == "statictrain-scheduler"

    def bound() -> list[str] | None:
        names = [p["spec"].get("nodeName") for p in workers(kube, "gpt")]
        return names if len(names) == 2 and all(names) else None

    nodes = wait_for(bound, "the scheduler to bind both workers")
    for node_name in nodes:
        node_obj = json.loads(kube.cluster.kubectl("get", "node", node_name, "-o", "json").stdout)
        assert int(node_obj["status"]["allocatable"]["nvidia.com/gpu"]) >= 4

    wait_for(lambda: phase(kube, "gpt") == "Running", "phase Running")
    status = (kube.get("stj", "gpt") or {})["status"]
    assert conditions(kube, "gpt") == {"Created": "True", "Running": "True"}
    assert status["replicas"] == 2
    assert status["selector"] == f"{labels.JOB}=gpt,{labels.ROLE}=worker"
    assert all(c["observedGeneration"] == owner["metadata"]["generation"] for c in status["conditions"])


def test_workers_that_finish_make_the_job_succeed(kube: Kube, make_operator: Any) -> None:
    make_operator(pod_annotations={COMPLETE_AFTER: "2"})
    kube.apply(stj("ok", replicas=2, resources={"gpusPerReplica": 1}))
    wait_for(lambda: phase(kube, "ok") == "Succeeded", "phase Succeeded", timeout=90)
    conds = conditions(kube, "ok")
    assert conds["Succeeded"] == "True"
    assert conds.get("Failed") is None
    assert (kube.get("stj", "ok") or {})["status"]["completionTime"]


def test_workers_that_fail_past_the_backoff_limit_fail_the_job(kube: Kube, make_operator: Any) -> None:
    make_operator(pod_annotations={COMPLETE_AFTER: "1", COMPLETE_PHASE: "Failed"})
    kube.apply(stj("bad", replicas=1, resources={"gpusPerReplica": 1}, runPolicy={"backoffLimit": 1}))
    wait_for(lambda: phase(kube, "bad") == "Failed", "phase Failed", timeout=120)
    obj = kube.get("stj", "bad") or {}
    failed = next(c for c in obj["status"]["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True"
    assert failed["reason"] == "BackoffLimitExceeded"
    assert obj["status"]["restarts"] >= 2


def test_scale_within_bounds_and_refused_outside(kube: Kube, make_operator: Any) -> None:
    make_operator()
    kube.apply(
        stj("el", replicas=2, elastic={"minReplicas": 1, "maxReplicas": 3}, resources={"gpusPerReplica": 1})
    )
    wait_for(lambda: len(workers(kube, "el")) == 2, "2 workers")
    kube.run("scale", "stj/el", "--replicas=3")
    wait_for(lambda: (kube.get("job", "el-worker") or {})["spec"]["parallelism"] == 3, "parallelism 3")
    wait_for(lambda: len(workers(kube, "el")) == 3, "3 workers")
    refused = kube.run("scale", "stj/el", "--replicas=5", check=False)
    assert refused.returncode != 0
    assert (
        "spec.replicas must lie within spec.elastic.minReplicas..spec.elastic.maxReplicas" in refused.stderr
    )
    assert (kube.get("stj", "el") or {})["spec"]["replicas"] == 3
    wait_for(
        lambda: (kube.get("stj", "el") or {}).get("status", {}).get("replicas") == 3, "status.replicas 3"
    )
    got = kube.run("get", "stj", "el", "--subresource=scale", "-o", "json")
    assert json.loads(got.stdout)["status"]["replicas"] == 3


def test_suspend_deletes_workers_and_resume_brings_them_back(kube: Kube, make_operator: Any) -> None:
    make_operator()
    kube.apply(stj("sus", replicas=2, resources={"gpusPerReplica": 1}))
    wait_for(lambda: phase(kube, "sus") == "Running", "phase Running")
    kube.patch("stj", "sus", {"spec": {"suspend": True}})
    wait_for(lambda: (kube.get("job", "sus-worker") or {})["spec"].get("suspend") is True, "Job suspended")
    wait_for(lambda: not workers(kube, "sus"), "worker pods deleted")
    wait_for(lambda: phase(kube, "sus") == "Suspended", "phase Suspended")
    assert conditions(kube, "sus")["Suspended"] == "True"
    kube.patch("stj", "sus", {"spec": {"suspend": False}})
    wait_for(lambda: phase(kube, "sus") == "Running", "phase Running again")
    conds = conditions(kube, "sus")
    assert (conds["Suspended"], conds["Running"]) == ("False", "True")
    assert len(workers(kube, "sus")) == 2


def test_created_suspended_makes_no_pods_until_resumed(kube: Kube, make_operator: Any) -> None:
    make_operator()
    kube.apply(stj("later", replicas=1, suspend=True, resources={"gpusPerReplica": 1}))
    wait_for(lambda: phase(kube, "later") == "Suspended", "phase Suspended")
    assert (kube.get("job", "later-worker") or {})["spec"]["suspend"] is True
    assert workers(kube, "later") == []
    kube.patch("stj", "later", {"spec": {"suspend": False}})
    wait_for(lambda: phase(kube, "later") == "Running", "phase Running")


def test_changed_worker_settings_rebuild_the_workers(kube: Kube, make_operator: Any) -> None:
    make_operator()
    kube.apply(stj("re", replicas=1, resources={"gpusPerReplica": 1}))
    first = wait_for(lambda: kube.get("job", "re-worker"), "the worker Job")
    kube.patch("stj", "re", {"spec": {"precision": "fp32"}})

    def rebuilt() -> dict[str, Any] | None:
        job = kube.get("job", "re-worker")
        return job if job and job["metadata"]["uid"] != first["metadata"]["uid"] else None

    job = wait_for(rebuilt, "a new worker Job")
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env[envvars.PRECISION] == "fp32"


def test_delete_leaves_nothing_behind(kube: Kube, make_operator: Any) -> None:
    make_operator()
    kube.apply(stj("gone", replicas=2, resources={"gpusPerReplica": 1}))
    wait_for(lambda: len(workers(kube, "gone")) == 2, "2 workers")
    assert not (kube.get("stj", "gone") or {})["metadata"].get("finalizers")
    kube.run("delete", "stj", "gone", "--wait=true")
    wait_for(lambda: kube.get("job", "gone-worker") is None, "the Job to be garbage-collected")
    wait_for(lambda: kube.get("service", "gone-worker") is None, "the Service to be garbage-collected")
    wait_for(lambda: not kube.list("pods", f"{labels.JOB}=gone"), "the pods to be deleted")


def test_finished_job_is_deleted_after_its_ttl(kube: Kube, make_operator: Any) -> None:
    make_operator(pod_annotations={COMPLETE_AFTER: "1"})
    kube.apply(
        stj("ttl", replicas=1, resources={"gpusPerReplica": 1}, runPolicy={"ttlSecondsAfterFinished": 2})
    )
    wait_for(lambda: phase(kube, "ttl") == "Succeeded", "phase Succeeded", timeout=90)
    wait_for(lambda: kube.get("stj", "ttl") is None, "the job to be deleted after its TTL", timeout=60)
    wait_for(lambda: kube.get("job", "ttl-worker") is None, "its worker Job to go")
