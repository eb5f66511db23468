"""The per-job profiling token on the real node: the operator mints the Secret, the kubelet mounts it
into the real sidecar only, and the sidecar's profile endpoints answer only requests bearing it.

Requests go from this process to the pod's IP on the node's bridge (as Prometheus scrapes it).
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from statictrain_localcluster.cluster import LocalCluster
from statictrain_localcluster.nodeconfig import REAL_NODE_TOLERATION

from ..operator.conftest import Kube, wait_for
from .conftest import NEVER_DONE, SLOW_BATCH, pods, tiny_job

pytestmark = [pytest.mark.cluster, pytest.mark.slow]



def status_of(url: str, token: str | None) -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def test_the_sidecar_answers_profile_requests_only_with_the_jobs_minted_token(
    cluster: LocalCluster, restricted: Kube, make_operator: Any, images: dict[str, str], real_node: str
) -> None:
    kube = restricted
    make_operator(
        sidecar_image=images["sidecar"], image_pull_policy="Never", tolerations=[REAL_NODE_TOLERATION],
        node_selector={"kubernetes.io/hostname": real_node}, scheduler_name="default-scheduler",
        profile_token=True,
    )
    kube.create(tiny_job("prof", images["trainer"], training={"maxSteps": NEVER_DONE}, env=[SLOW_BATCH]))
    pod = wait_for(lambda: next((p for p in pods(kube, "prof") if p["status"].get("phase") == "Running"
                                 and p["status"].get("podIP")), None), "the worker Running", timeout=180)
    secret = kube.get("secret", "prof-profile-token")
    assert secret is not None
    job_uid = (kube.get("stj", "prof") or {})["metadata"]["uid"]
    assert [o["uid"] for o in secret["metadata"]["ownerReferences"]] == [job_uid]
    token = base64.b64decode(secret["data"]["token"]).decode()
    trainer = next(c for c in pod["spec"]["containers"] if c["name"] == "trainer")
    assert "profile-token" not in json.dumps(trainer)  # the trainer container gets neither mount nor variable

    url = f"http://{pod['status']['podIP']}:9400/profiles"
    assert wait_for(lambda: status_of(url, token) == 200, "the sidecar to accept the job's token", timeout=120)
    assert status_of(url, None) == 401
    assert status_of(url, "x" * len(token)) == 401  # a wrong token of the same length

    kube.run("delete", "stj", "prof", "--wait=false")
    wait_for(lambda: kube.get("secret", "prof-profile-token") is None, "the Secret to go with the job", timeout=120)
