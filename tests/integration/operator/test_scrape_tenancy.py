"""Tenancy of metrics (#16): the operator checks how Prometheus scraped its jobs' sidecars, and says so.

Real API server, real Prometheus, real sidecar processes, the real operator (progress part only).
Job ``j`` has three worker pods in the API server; each pod's real sidecar runs as a local process with
that pod's identity and is scraped by the cluster's Prometheus in a different way:

* ``j-w0`` through the pod pool (honor_labels: false, namespace/pod/pod_uid set from the API server's
  pod, as Kubernetes discovery would): the boundary holds;
* ``j-w1`` through the other pool (honor_labels: true), as the demo's local workers are: the sidecar's own
  pod_uid is kept, so any exporter could speak for the job;
* ``j-w2`` through the pod pool but with no pod_uid target label (honor_labels: false alone): the
  sidecar's own pod_uid is kept here too.

Oracle from Prometheus itself (raw queries, not the product's): w0's series carry exported_pod_uid next to
pod_uid, w1's and w2's carry pod_uid only. Asserted on the running operator: statictrain_scrape_tenancy_pods
says 1 pod from_discovery and 2 from_exporter on its /metrics, and its log has exactly one warning saying
what to change in the scrape config (one per kind of problem, not one per pod or pass).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
from statictrain import envvars, labels

from .conftest import Operator, wait_for

pytestmark = pytest.mark.cluster


def worker_pod(cluster: Any, ns: str, job: str, name: str) -> str:
    """A pod labelled as one of ``job``'s workers; returns its UID."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {labels.JOB: job, labels.ROLE: "worker"}},
        "spec": {"containers": [{"name": "trainer", "image": "registry.example.com/train:1"}],
                 "nodeSelector": {"no-such-node": "x"}},
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(body))
    uid = str(cluster.kubectl("get", "pod", name, "-n", ns, "-o", "jsonpath={.metadata.uid}").stdout).strip()
    assert uid
    return uid


@contextmanager
def sidecar(tmp: Path, identity: dict[str, str]) -> Iterator[int]:
    """The real sidecar (statictrain_sidecar.main) with a pod's identity; yields its metrics port."""
    tmp.mkdir()
    env = {
        **os.environ,
        envvars.JOB_NAME: identity["job_name"],
        envvars.JOB_NAMESPACE: identity["namespace"],
        envvars.COMMIT: "c1",
        envvars.TEAM: "t",
        envvars.POD_NAME: identity["pod"],
        envvars.POD_UID: identity["pod_uid"],
        envvars.STATS_DIR: str(tmp),
    }
    port_file = tmp / "port"
    with (tmp / "sidecar.out").open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "statictrain_sidecar.main", "--port", "0", "--bind", "127.0.0.1",
             "--port-file", str(port_file)],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        yield int(wait_for(lambda: port_file.exists() and port_file.read_text().strip(), "the sidecar to bind"))
    finally:
        proc.terminate()
        proc.wait(30)


def raw(cluster: Any, query: str) -> list[dict[str, str]]:
    url = f"{cluster.prometheus_url}/api/v1/query?{urllib.parse.urlencode({'query': query})}"
    with urllib.request.urlopen(url, timeout=10) as resp:
        return [r["metric"] for r in json.loads(resp.read())["data"]["result"]]


def gauge(op: Operator) -> dict[str, float]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{op.metrics_port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return {}
    found = re.finditer(r'^statictrain_scrape_tenancy_pods\{verdict="(\w+)"\} (\S+)$', text, re.M)
    return {m[1]: float(m[2]) for m in found}


def test_the_operator_tells_sidecars_scraped_with_their_own_pod_uid_apart_and_says_what_to_change(
    cluster: Any, namespace: str, crd: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns, job = namespace, "j"
    cluster.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": labels.API_VERSION, "kind": labels.KIND,
        "metadata": {"name": job, "namespace": ns},
        "spec": {"image": "registry.example.com/train:1", "entrypoint": "m:build", "replicas": 1,
                 # suspended: the operator makes no worker Job; the three pods below stand for its workers
                 "resources": {"gpusPerReplica": 1}, "suspend": True},
    }))
    uids = [worker_pod(cluster, ns, job, f"{job}-w{i}") for i in range(3)]
    ids = [{"job_name": job, "namespace": ns, "pod": f"{job}-w{i}", "pod_uid": uid} for i, uid in enumerate(uids)]
    targets = [
        ({"namespace": ns, "pod": ids[0]["pod"], "pod_uid": uids[0]}, True),  # discovery's labels win
        ({}, False),  # honor_labels: true
        ({"namespace": ns, "pod": ids[2]["pod"]}, True),  # honor_labels: false, but no pod_uid target label
    ]
    with ExitStack() as stack:
        for i, (identity, (target_labels, pod)) in enumerate(zip(ids, targets, strict=True)):
            port = stack.enter_context(sidecar(tmp_path / f"w{i}", identity))
            name = f"scrape-{ns}-w{i}"
            cluster.add_scrape_target(name, f"127.0.0.1:{port}", target_labels, pod=pod)
            stack.callback(cluster.remove_scrape_target, name)

        # Oracle: Prometheus' own labels on the sidecars' info series.
        def scraped() -> dict[str, dict[str, str]] | None:
            got = {s.get("exported_pod", s.get("pod", "")): s for s in raw(cluster, "statictrain_sidecar_info")
                   if s.get("exported_namespace", s.get("namespace")) == ns}
            return got if len(got) == 3 else None

        seen = wait_for(scraped, "the three sidecars in Prometheus")
        assert (seen["j-w0"]["pod_uid"], seen["j-w0"].get("exported_pod_uid")) == (uids[0], uids[0])
        assert (seen["j-w1"]["pod_uid"], seen["j-w1"].get("exported_pod_uid")) == (uids[1], None)
        assert (seen["j-w2"]["pod_uid"], seen["j-w2"].get("exported_pod_uid")) == (uids[2], None)

        monkeypatch.setenv("STATICTRAIN_PROMETHEUS_URL", cluster.prometheus_url)
        monkeypatch.setenv("STATICTRAIN_PROGRESS_INTERVAL_S", "1")
        op = Operator(cluster, ns, tmp_path, parts="progress")
        op.start()
        try:
            want = {"from_discovery": 1.0, "from_exporter": 2.0, "missing": 0.0}
            wait_for(lambda: gauge(op) == want, "statictrain_scrape_tenancy_pods on the operator's /metrics")
            # w2's target goes (Prometheus marks its series stale): a later pass sees one pod fewer, and
            # still warns no second time
            cluster.remove_scrape_target(f"scrape-{ns}-w2")
            want = {"from_discovery": 1.0, "from_exporter": 1.0, "missing": 0.0}
            wait_for(lambda: gauge(op) == want, "a later pass without w2")
        finally:
            op.stop()
    log = op.logs()
    warnings = [line for line in log.splitlines() if "are not scraped as the tenancy of metrics needs" in line]
    assert len(warnings) == 1, log[-5000:]
    assert any(u in warnings[0] for u in uids[1:]) and uids[0] not in warnings[0]
    assert "honor_labels: false" in warnings[0] and "__meta_kubernetes_pod_uid to pod_uid" in warnings[0]
