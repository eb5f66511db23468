"""The anomaly timer inside the real operator process (statictrain-operator, parts=anomaly).

An elastic job whose GPUs sit idle (remediation Auto) with step times in
Prometheus is scaled down by the anomaly loop exactly once, and a SIGKILLed and
restarted operator does not act again. (Budgets are the cost part's: not here.)
"""

from __future__ import annotations

import json
import signal
import subprocess
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from statictrain import labels, metrics
from statictrain_localcluster.waiting import eventually
from statictrain_operator.anomaly import history as hist
from statictrain_operator.anomaly.remediation import Intent

from .helpers import Trainer, create_job, events, get_job

pytestmark = pytest.mark.cluster


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
