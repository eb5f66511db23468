"""Kueue's preemption on the real node: a higher-priority job takes the quota, the running job's
trainer checkpoints in its grace period (Kueue suspends the worker Job: the same SIGTERM as a
suspend), the stop counts as no failure (backoffLimit 0), and once the quota frees the job is
admitted again and resumes from that checkpoint. Kueue is the real one (built from sigs.k8s.io/kueue)."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import pytest
from statictrain import labels
from statictrain_localcluster.cluster import LocalCluster

from ..operator.conftest import Kube, wait_for
from .conftest import (
    NEVER_DONE,
    RESUMED,
    SLOW_BATCH,
    TRAINING,
    checkpoint_dir,
    checkpoint_steps,
    logs,
    phase,
    pods,
    tiny_job,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]



def in_queue(body: dict[str, Any], priority: str) -> dict[str, Any]:
    body["metadata"]["labels"].update({labels.KUEUE_QUEUE: "q", labels.KUEUE_PRIORITY_CLASS: priority})
    return body


def condition(kube: Kube, name: str, ctype: str) -> dict[str, Any]:
    st = ((kube.get("stj", name) or {}).get("status")) or {}
    return next((c for c in st.get("conditions") or [] if c["type"] == ctype), {})


def test_kueue_preemption_checkpoints_and_the_job_resumes_from_it(
    restricted: Kube, node_operator: Any, images: dict[str, str], cluster: LocalCluster
) -> None:
    kube = restricted
    cluster.start_kueue(log=sys.stderr)
    ns = kube.ns
    # One tiny worker pod asks 200m CPU (trainer 100m + sidecar 100m): a quota of 300m admits one job.
    objs = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": f"rf-{ns}"},
         "spec": {}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": f"cq-{ns}"},
         "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                  "preemption": {"withinClusterQueue": "LowerPriority"},
                  "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [
                      {"name": f"rf-{ns}", "resources": [{"name": "cpu", "nominalQuota": "300m"},
                                                         {"name": "memory", "nominalQuota": "100Gi"}]}]}]}},
        *({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": f"{p}-{ns}"},
           "value": v} for p, v in (("low", 10), ("high", 1000))),
    ]
    cluster.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(o) for o in objs))
    try:
        kube.apply({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "q"},
                    "spec": {"clusterQueue": f"cq-{ns}"}})
        kube.create(in_queue(tiny_job("batch", images["trainer"], training={"maxSteps": NEVER_DONE},
                                      checkpoint={"everySteps": 1000}, env=[SLOW_BATCH],
                                      runPolicy={"backoffLimit": 0, "terminationGracePeriodSeconds": 60}),
                             f"low-{ns}"))
        folder = checkpoint_dir(kube, "batch")
        first = wait_for(lambda: next((p for p in pods(kube, "batch")
                                       if TRAINING.search(logs(kube, p["metadata"]["name"]))), None),
                         "the low-priority job training", timeout=300)
        time.sleep(3)  # a few steps in; no periodic checkpoint before step 1000
        assert checkpoint_steps(folder) == [], "a checkpoint before the preemption: the job must still be running"

        kube.create(in_queue(tiny_job("urgent", images["trainer"], training={"maxSteps": 20}), f"high-{ns}"))
        saved = wait_for(lambda: checkpoint_steps(folder), "the checkpoint written when Kueue preempted", timeout=120)
        cond = wait_for(lambda: condition(kube, "batch", "Admitted").get("reason") == "Evicted"
                        and condition(kube, "batch", "Admitted"), "the preempted job's Admitted=False/Evicted")
        assert cond["status"] == "False"
        wait_for(lambda: phase(kube, "urgent") == "Succeeded", "the urgent job to finish", timeout=600)

        # The quota is free again: Kueue admits the preempted job, which resumes from its checkpoint.
        def resumed() -> int | None:
            for p in pods(kube, "batch"):
                if p["metadata"]["uid"] != first["metadata"]["uid"]:
                    m = RESUMED.search(logs(kube, p["metadata"]["name"]))
                    if m:
                        return int(m.group(1))
            return None

        step = wait_for(resumed, "the preempted job to resume from a checkpoint", timeout=300)
        assert step == saved[0]
        # backoffLimit 0: had the preemption counted as a failure, the job would have failed, not resumed.
        job = (kube.get("job", "batch-worker") or {}).get("status") or {}
        assert not job.get("failed") and phase(kube, "batch") != "Failed", job
    finally:
        kube.run("delete", "stj", "--all", "--wait=false", check=False)
        cluster.kubectl("delete", "clusterqueue", f"cq-{ns}", "--wait=false", check=False)
        cluster.kubectl("delete", f"resourceflavor/rf-{ns}", f"workloadpriorityclass/low-{ns}",
                        f"workloadpriorityclass/high-{ns}", "--wait=false", check=False)
