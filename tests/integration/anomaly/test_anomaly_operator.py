"""The anomaly timer inside the real operator process (statictrain-operator, parts=anomaly).

An elastic job whose GPUs sit idle (remediation Auto) with step times in
Prometheus is scaled down by the anomaly loop exactly once, and a SIGKILLed and
restarted operator does not act again. (Budgets are the cost part's: not here.)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from statictrain import labels, metrics
from statictrain_localcluster.waiting import eventually
from statictrain_operator.anomaly import history as hist
from statictrain_operator.anomaly.remediation import Intent

from .helpers import Trainer, create_job, events, free_port, get_job

pytestmark = pytest.mark.cluster

KWOK_TOLERATION = {"key": "kwok.x-k8s.io/node", "operator": "Equal", "value": "fake", "effect": "NoSchedule"}


@pytest.fixture
def operator(cluster: Any, namespace: str, tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    exe = shutil.which("statictrain-operator", path=os.path.dirname(sys.executable))
    assert exe, "statictrain-operator is not installed in this environment"
    env = dict(cluster.env)
    env.update(
        {
            "STATICTRAIN_OPERATOR_NAMESPACES": namespace,
            "STATICTRAIN_OPERATOR_PARTS": "anomaly",
            "STATICTRAIN_OPERATOR_TOLERATIONS": json.dumps([KWOK_TOLERATION]),
            "STATICTRAIN_OPERATOR_HEARTBEAT_NAMESPACE": namespace,
            "STATICTRAIN_PROMETHEUS_URL": cluster.prometheus_url,
            "STATICTRAIN_ANOMALY_INTERVAL_S": "2",
            "STATICTRAIN_ANOMALY_LOOKBACK_S": "600",
            "STATICTRAIN_ANOMALY_STEP_S": "1",
            "STATICTRAIN_ANOMALY_RATE_WINDOW_S": "3",
            "STATICTRAIN_ANOMALY_PROPHET_MIN_POINTS": "100000",
        }
    )
    procs: list[subprocess.Popen[bytes]] = []
    metrics_port = free_port()

    def start(log_name: str = "first") -> subprocess.Popen[bytes]:
        log = (tmp_path / f"operator-{log_name}.log").open("wb")
        cmd = [
            exe,
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--liveness",
            f"http://127.0.0.1:{free_port()}/healthz",
            "--metrics-address",
            "127.0.0.1",
            "--metrics-port",
            str(metrics_port),
        ]
        p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        procs.append(p)
        p.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"  # type: ignore[attr-defined]
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(30)
    for f in sorted(tmp_path.glob("operator-*.log")):
        sys.stderr.write(f"--- {f.name}\n{f.read_text(errors='replace')[-4000:]}\n")


def intents(cluster: Any, namespace: str, name: str) -> list[Intent]:
    ann = get_job(cluster, namespace, name)["metadata"]["annotations"][hist.ANNOTATION]
    return list(hist.loads(ann).history.intents)


def test_loop_scales_down_an_idle_job_once_across_a_restart(
    cluster: Any,
    namespace: str,
    crd: None,
    steps: Callable[..., Trainer],
    operator: Callable[..., subprocess.Popen[bytes]],
    *,
    tmp_path: Path,
) -> None:
    name = "idler"
    create_job(cluster, namespace, name, "Auto", replicas=4, elastic={"minReplicas": 1, "maxReplicas": 4})
    steps(name, 0.1, gpu_util=0.01)
    first = operator()
    eventually(
        lambda: get_job(cluster, namespace, name)["spec"].get("replicas") == 2,
        120,
        "the job to be scaled down to 2 replicas",
    )
    eventually(
        lambda: [i.done for i in intents(cluster, namespace, name)] == [True],
        30,
        "the intent to be marked done",
    )
    # The operator serves its own metrics (the anomaly part's counters among them).
    with urllib.request.urlopen(first.metrics_url, timeout=10) as r:  # type: ignore[attr-defined]
        assert metrics.REMEDIATIONS_TOTAL in r.read().decode()
    first.send_signal(signal.SIGKILL)
    first.wait(30)

    # A user scales the job back up by hand; the restarted operator must respect that edit (user wins)
    # and must not repeat the action it already took.
    resume = json.dumps({"spec": {"replicas": 4}})
    cluster.kubectl("patch", labels.PLURAL, name, "-n", namespace, "--type=merge", "-p", resume)
    second = operator(log_name="second")
    log = tmp_path / "operator-second.log"
    try:
        eventually(
            lambda: f"{namespace}/{name}: UserEditWins" in log.read_text(errors="replace"),
            90,
            "the restarted operator to evaluate the job and defer to the user's edit",
        )
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(60)
    assert get_job(cluster, namespace, name)["spec"]["replicas"] == 4
    assert [i.action.value for i in intents(cluster, namespace, name)] == ["ScaleDown"]
    assert [e["reason"] for e in events(cluster, namespace, name)].count("RemediationScaleDown") == 1
