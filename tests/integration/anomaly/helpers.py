"""Helpers of the anomaly integration tests (real API server, real Prometheus)."""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import CollectorRegistry
from statictrain import labels
from statictrain_operator.anomaly.evaluate import CONDITION_TYPE, Evaluator
from statictrain_operator.anomaly.exported import AnomalyMetrics
from statictrain_operator.anomaly.settings import AnomalySettings
from statictrain_operator.prom import HttpPrometheus

CRD = Path(__file__).resolve().parents[3] / "crds" / "statictrain.io_statictrainingjobs.yaml"




def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Trainer:
    """Stand-in for a worker's sidecar: observes one step time again and again in a thread."""

    step_s: float
    stop: threading.Event
    thread: threading.Thread | None = None
    gpu_util: float | None = None
    uid: str = ""
    """The UID of the worker pod whose series these are."""


def settings(cluster: Any, **over: Any) -> AnomalySettings:
    base = AnomalySettings(
        prometheus_url=cluster.prometheus_url,
        lookback_s=600,
        step_s=1,
        rate_window_s=3,
        recent_points=5,
        prophet_min_points=100_000,  # short test series: the robust baseline
        stabilization_s=300,
        cooldown_s=900,
        good_settle_s=8,
    )
    return replace(base, **over)


def evaluator(api: Any, s: AnomalySettings) -> Evaluator:
    """An Evaluator over ``api`` (the job_api fixture: the Kube port on the real API server, or a wrapper)."""
    return Evaluator(
        s,
        HttpPrometheus(s.prometheus_url, s.query_timeout_s),
        api,
        AnomalyMetrics(CollectorRegistry()),
        lambda: datetime.now(UTC),
    )


def create_job(cluster: Any, ns: str, name: str, mode: str, **spec: Any) -> None:
    body = {
        "apiVersion": labels.API_VERSION,
        "kind": labels.KIND,
        "metadata": {"name": name, "namespace": ns, "labels": {labels.COMMIT: "c1", labels.TEAM: "t"}},
        "spec": {
            "image": "registry.example.com/train:1",
            "entrypoint": "m:build",
            "replicas": 1,
            "resources": {"gpusPerReplica": 1},
            "compile": {"mode": "default"},
            "remediation": {"mode": mode},
            **spec,
        },
    }
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(body))


def worker_pod(cluster: Any, ns: str, job: str, pod: str | None = None) -> str:
    """Create a pod labelled as one of ``job``'s workers (as the worker Job's pods are) and return its UID:
    the API server's pod the anomaly and progress parts trust series of (statictrain_operator.workerpods)."""
    name = pod or f"{job}-w0"
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {labels.JOB: job, labels.ROLE: "worker"}},
        "spec": {"containers": [{"name": "trainer", "image": "registry.example.com/train:1"}]},
    }
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(body))
    uid: str = cluster.kubectl("get", "pod", name, "-n", ns, "-o", "jsonpath={.metadata.uid}").stdout.strip()
    assert uid, f"pod {ns}/{name} has no UID"
    return uid


def get_job(cluster: Any, ns: str, name: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(cluster.kubectl("get", labels.PLURAL, name, "-n", ns, "-o", "json").stdout)
    return out


def events(cluster: Any, ns: str, name: str) -> list[dict[str, Any]]:
    doc = json.loads(
        cluster.kubectl(
            "get", "events", "-n", ns, "--field-selector", f"involvedObject.name={name}", "-o", "json"
        ).stdout
    )
    return list(doc["items"])


def condition(job: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in job.get("status", {}).get("conditions", []) if c["type"] == CONDITION_TYPE), None)
