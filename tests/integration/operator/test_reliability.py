"""RELIABILITY.md operator cases 1, 2, 3 and 7 against the real control plane."""

from __future__ import annotations

import json
import urllib.request
import uuid
from typing import Any

import pytest
from statictrain import envvars, labels

from .conftest import Kube, stj, wait_for

pytestmark = pytest.mark.cluster


def owned(kube: Kube, kind: str, name: str) -> list[dict[str, Any]]:
    """Objects of `kind` labelled with job `name`."""
    return kube.list(kind, f"{labels.JOB}={name}")


def test_case1_operator_killed_mid_create_makes_no_duplicates(kube: Kube, make_operator: Any) -> None:
    op = make_operator()
    kube.apply(stj("kill", replicas=4, resources={"gpusPerReplica": 1}))
    # SIGKILL as soon as the first child exists (whatever else the handler had done by then).
    wait_for(
        lambda: owned(kube, "services", "kill") or owned(kube, "jobs", "kill"),
        "the first child",
        interval=0.02,
    )
    op.kill()
    op.start()
    wait_for(lambda: len(owned(kube, "pods", "kill")) == 4, "4 worker pods")
    uid = (kube.get("stj", "kill") or {})["metadata"]["uid"]
    for kind in ("jobs", "services"):
        objs = owned(kube, kind, "kill")
        assert [o["metadata"]["name"] for o in objs] == ["kill-worker"]
        assert objs[0]["metadata"]["ownerReferences"][0]["uid"] == uid
    assert (
        len(
            {
                p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
                for p in owned(kube, "pods", "kill")
            }
        )
        == 4
    )


def test_case1_restart_after_the_service_only_creates_the_job(kube: Kube, make_operator: Any) -> None:
    """The exact state of a crash between the two creates: Service there, Job not, handler unfinished."""
    op = make_operator()
    kube.apply(stj("half", replicas=2, resources={"gpusPerReplica": 1}))
    svc = wait_for(lambda: kube.get("service", "half-worker"), "the Service")
    wait_for(lambda: kube.get("job", "half-worker"), "the Job")
    op.kill()
    # Roll back to "only the Service was created" and forget the handler's success.
    kube.run("delete", "job", "half-worker", "--cascade=foreground", "--wait=true")
    annotations = (kube.get("stj", "half") or {})["metadata"].get("annotations") or {}
    kube.patch(
        "stj",
        "half",
        {"metadata": {"annotations": {k: None for k in annotations if k.startswith(labels.GROUP + "/")}}},
    )
    op.start()
    wait_for(lambda: kube.get("job", "half-worker"), "the Job, re-created")
    wait_for(lambda: len(owned(kube, "pods", "half")) == 2, "2 workers")
    services = owned(kube, "services", "half")
    assert [s["metadata"]["uid"] for s in services] == [svc["metadata"]["uid"]]


def test_case2_job_deleted_while_operator_is_down_is_cleaned_up(kube: Kube, make_operator: Any) -> None:
    op = make_operator()
    kube.apply(stj("down", replicas=2, resources={"gpusPerReplica": 1}))
    wait_for(lambda: len(owned(kube, "pods", "down")) == 2, "2 workers")
    op.kill()
    kube.run("delete", "stj", "down", "--wait=true", "--timeout=60s")  # no finalizer blocks it
    wait_for(
        lambda: not owned(kube, "jobs", "down") and not owned(kube, "services", "down"),
        "the garbage collector to remove the children",
    )
    op.start()
    wait_for(lambda: "watch-heartbeat" in _health(op), "the restarted operator to be healthy")
    assert owned(kube, "jobs", "down") == []
    assert owned(kube, "services", "down") == []


def _health(op: Any) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{op.health_port}/healthz", timeout=2) as r:
            return str(r.read().decode())
    except OSError:
        return ""


def test_case3_edits_while_down_only_the_final_state_is_acted_on(kube: Kube, make_operator: Any) -> None:
    op = make_operator(start=False)
    kube.apply(
        stj("edit", replicas=1, elastic={"minReplicas": 1, "maxReplicas": 4}, resources={"gpusPerReplica": 1})
    )
    kube.patch("stj", "edit", {"spec": {"replicas": 2}})
    kube.patch("stj", "edit", {"spec": {"replicas": 3}})
    kube.patch("stj", "edit", {"spec": {"precision": "fp16"}})
    kube.apply(stj("other", replicas=1, resources={"gpusPerReplica": 1}))
    kube.run("delete", "stj", "other")
    op.start()
    job = wait_for(lambda: kube.get("job", "edit-worker"), "the Job")
    assert job["spec"]["parallelism"] == 3
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env[envvars.PRECISION] == "fp16"
    wait_for(lambda: len(owned(kube, "pods", "edit")) == 3, "3 workers")
    assert len(owned(kube, "jobs", "edit")) == 1
    assert owned(kube, "jobs", "other") == [] and owned(kube, "services", "other") == []


def test_case7_deleting_the_namespace_terminates(cluster: Any, crd: str, make_operator: Any) -> None:
    ns = f"t-ns-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("create", "namespace", ns)
    kube = Kube(cluster, ns)
    kube.apply(stj("a", replicas=1, resources={"gpusPerReplica": 1}))
    kube.apply(stj("b", replicas=2, resources={"gpusPerReplica": 1}))
    make_operator(watch=ns)
    wait_for(lambda: len(kube.list("jobs", labels.JOB)) == 2, "both worker Jobs")
    cluster.kubectl("delete", "namespace", ns, "--wait=false")

    def gone() -> bool:
        proc = cluster.kubectl("get", "namespace", ns, "-o", "json", "--ignore-not-found", check=False)
        return not proc.stdout.strip()

    wait_for(gone, f"namespace {ns} to terminate", timeout=120)
    last = cluster.kubectl("get", "namespace", "-o", "json").stdout
    assert ns not in [n["metadata"]["name"] for n in json.loads(last)["items"]]
