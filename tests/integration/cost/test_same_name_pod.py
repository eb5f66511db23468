"""Case 20: a pod recreated with the same name is counted once per life, not twice (real operator, real Prometheus).

The real operator process (statictrain-operator, cost part on, accounting every second) and the cluster's real
Prometheus run while one worker pod name, ``recreated-worker-0``, lives three times on kwok GPU nodes: created,
run for a few seconds, ended by kwok (Succeeded), deleted, created again under the same name (a new UID). Each
life has its own stand-in sidecar scraped as that pod is (the pod pool: namespace, pod and pod_uid from the
pod), reporting its GPU under the GPU's own UUID (a recreated pod may land on another device), and going away
with its pod as a real sidecar does; kwok ends a life only once its series is in Prometheus, which keeps the
earlier lives' series inside the accounting's lookback. A life is deleted only once the job's
``status.cost.updated`` shows a run after it ended, so its whole life is on record (no "last seen" estimate,
the documented limit for pods deleted between two runs).

Oracle, from the scenario alone: each life's start and end as the API server recorded them (status.startTime,
the container's terminated.finishedAt), one GPU each, priced at the catalog's on-demand price of its node's
instance type and region (core/src/statictrain/data/prices.csv read here with csv) split the OpenCost way.
The job's status.cost (gpuHours, usd) must equal the sum over the three UIDs, give or take one second per
start and end (whole-second times; a run may list a pod just before kwok's status write lands). Checked by
hand: with pods and their series keyed by (namespace, name) instead of UID in cost/inputs.py, the later lives
are charged the earlier lives' GPUs too and this test fails (with 2-4 s lives: 25 GPU-seconds for 15, 34 for
19; with these: 59 for 33).
"""

from __future__ import annotations

import csv
import json
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import statictrain
import yaml
from prometheus_client import CollectorRegistry, Gauge, Histogram
from statictrain import labels, metrics
from statictrain.promql import selector
from statictrain_localcluster.cluster import LocalCluster
from statictrain_localcluster.waiting import eventually
from statictrain_operator.prom import HttpPrometheus

from ..anomaly.helpers import create_job
from ..operator.conftest import Operator, crd  # noqa: F401  (crd: the fixture, used by name)
from .helpers import gpu_share_of, scraped_registry

pytestmark = pytest.mark.cluster

CATALOG = Path(statictrain.__file__).parent / "data" / "prices.csv"
TOLERATION = {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}
ON_DEMAND_P5 = {labels.INSTANCE_TYPE: "p5.48xlarge", labels.CAPACITY_TYPE: "on-demand"}
LIVES = ("6s", "8s", "7s")
"""How long kwok keeps each life running once its sidecar's series is in Prometheus
(statictrain.io/kwok-complete-after, set then)."""
JOB, POD = "recreated", "recreated-worker-0"
SIDECAR = [*labels.METRIC_LABELS, "pod", "pod_uid"]


def kget(cluster: LocalCluster, *args: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)
    return out


def when(text: str) -> Decimal:
    """An API server time (RFC 3339, whole seconds) as Unix seconds, exactly."""
    return Decimal(int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()))


def catalog_on_demand(instance_type: str, region: str) -> Decimal:
    with CATALOG.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if (r["instance_type"], r["region"]) == (instance_type, region)]
    assert len(rows) == 1, f"the catalog has {len(rows)} rows for {instance_type} in {region}"
    return Decimal(rows[0]["on_demand_usd_per_hour"])


def worker(ns: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": POD,
                "namespace": ns,
                "labels": {labels.JOB: JOB, labels.COMMIT: "c1", labels.TEAM: "t", labels.ROLE: "worker"},
            },
            "spec": {
                "tolerations": [TOLERATION],
                "nodeSelector": ON_DEMAND_P5,
                "containers": [
                    {
                        "name": "train",
                        "image": "registry.example.com/train:1",
                        "resources": {"limits": {labels.GPU_RESOURCE: "1"}},
                    }
                ],
            },
        }
    )


@pytest.fixture
def cost_operator(
    cluster: LocalCluster,
    namespace: str,
    crd: str,  # noqa: F811  (the imported fixture, requested by name)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Operator]:
    for key, value in {"INTERVAL_S": "1", "QUERY_STEP_S": "1"}.items():
        monkeypatch.setenv(f"STATICTRAIN_COST_{key}", value)
    monkeypatch.setenv("STATICTRAIN_PROMETHEUS_URL", cluster.prometheus_url)
    op = Operator(cluster, namespace, tmp_path, parts="cost")
    op.start()
    try:
        yield op
    finally:
        op.stop()
        print(op.logs()[-4000:])


class Sidecar:
    """One life's stand-in sidecar: its GPU's utilization (under the GPU's UUID) and its step times, while
    its ``run`` thread lives."""

    def __init__(self, ns: str, uid: str) -> None:
        self.reg = CollectorRegistry()
        ids = (JOB, ns, "c1", "t", POD, uid)
        util = Gauge(metrics.GPU_UTILIZATION_RATIO, "u", [*SIDECAR, "gpu", "gpu_uuid"], registry=self.reg)
        util.labels(*ids, "0", f"GPU-{uuid.uuid4()}").set(0.9)
        self.step = Histogram(metrics.TRAIN_STEP_SECONDS, "s", SIDECAR, registry=self.reg).labels(*ids)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.wait(0.1):
            self.step.observe(0.1)


def scraped(cluster: LocalCluster, uid: str) -> bool:
    query = selector(metrics.GPU_UTILIZATION_RATIO, {"pod_uid": uid})
    return bool(HttpPrometheus(cluster.prometheus_url).query(query, time.time()))


def succeeded(cluster: LocalCluster, ns: str) -> dict[str, Any] | None:
    pod = kget(cluster, "pod", "-n", ns, POD)
    return pod if pod["status"].get("phase") == "Succeeded" else None


def cost_of(cluster: LocalCluster, ns: str) -> dict[str, Any]:
    return dict(kget(cluster, labels.PLURAL, JOB, "-n", ns).get("status", {}).get("cost") or {})


def accounted_past(cluster: LocalCluster, ns: str, t: Decimal) -> bool:
    """The job's cost is accounted past ``t`` (status.cost.updated: the end of the last run's window)."""
    return when(cost_of(cluster, ns)["updated"]) > t


def test_a_pod_recreated_under_the_same_name_is_charged_once_per_uid(
    cluster: LocalCluster, namespace: str, cost_operator: Operator
) -> None:
    # suspended: the operator's core makes no worker pods of its own; the test's pods are the job's only ones
    create_job(cluster, namespace, JOB, "Off", suspend=True)
    eventually(lambda: cost_of(cluster, namespace).get("updated"), 120, "the job's first accounting run")
    lives: list[tuple[str, Decimal, Decimal, dict[str, Any]]] = []  # uid, start, end, node
    for life in LIVES:
        cluster.kubectl("apply", "-f", "-", input=worker(namespace))
        pod = eventually(
            lambda: (p := kget(cluster, "pod", "-n", namespace, POD))["status"].get("startTime") and p,
            120,
            f"{POD} running",
        )
        uid = pod["metadata"]["uid"]
        assert uid not in [u for u, *_ in lives]
        sidecar = Sidecar(namespace, uid)
        sidecar.thread.start()
        as_pod = {"namespace": namespace, "pod": POD, "pod_uid": uid}
        try:
            with scraped_registry(cluster, sidecar.reg, "st-recreated", as_pod):
                # the life's GPU series is in Prometheus (what a grouping by name would also charge to the
                # later lives) before kwok is told to end it
                eventually(partial(scraped, cluster, uid), 120, f"the GPU series of {uid} in Prometheus")
                cluster.kubectl("annotate", "pod", POD, "-n", namespace, f"statictrain.io/kwok-complete-after={life}")
                ended = eventually(lambda: succeeded(cluster, namespace), 120, f"{POD} ({uid}) to end")
        finally:
            sidecar.stop.set()
            sidecar.thread.join(5)
        assert ended["metadata"]["uid"] == uid
        (state,) = [c["state"]["terminated"] for c in ended["status"]["containerStatuses"]]
        end = when(state["finishedAt"])
        lives.append((uid, when(ended["status"]["startTime"]), end, kget(cluster, "node", ended["spec"]["nodeName"])))
        # a run after its end has listed it as ended: its whole life is on record before it goes
        eventually(partial(accounted_past, cluster, namespace, end), 120, "a run past the pod's end")
        cluster.kubectl("delete", "pod", POD, "-n", namespace, "--wait=true", "--timeout=60s")

    cost = cost_of(cluster, namespace)
    seconds = [b - a for _, a, b, _ in lives]
    rates = []  # one GPU's hourly price on each life's node
    for _, _, _, node in lives:
        meta = node["metadata"]["labels"]
        rates.append(gpu_share_of(node, catalog_on_demand(meta[labels.INSTANCE_TYPE], meta[labels.REGION])))
    hours = sum(seconds, Decimal(0)) / 3600
    usd = sum((r * s / 3600 for r, s in zip(rates, seconds, strict=True)), Decimal(0))
    # Times are whole seconds, and a run may list a pod just before kwok's status write (its start, its end)
    # lands: each start and each end may be accounted up to one second off. A double count adds whole lives
    # (each at least 6 s). Every development run matched to the status' rounding (1e-9 h).
    slack_s = 2 * len(lives)
    assert all(s > 0 for s in seconds), lives
    assert abs(Decimal(cost["gpuHours"]) - hours) * 3600 <= slack_s, (cost, seconds)
    assert abs(Decimal(cost["usd"]) - usd) <= max(rates) * slack_s / 3600, (cost, usd, seconds)
