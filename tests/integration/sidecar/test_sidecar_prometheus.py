"""The real Prometheus of the local cluster scrapes a running sidecar fed by a running CPU trainer.

Kwok pods run no processes, so, as DESIGN.md describes, the worker's two
containers run here as local processes with the identity of a real pod created
in the cluster (its name and UID from the API server). Everything on the metrics
path is real: the trainer (statictrain_trainer, GPT-2-shaped model at CPU size)
writes the channel, the sidecar tails it and serves /metrics, Prometheus scrapes
it, and PromQL must return every documented series with the pod's labels. The
machine has no GPU, so the GPU series must be absent and
``statictrain_gpu_available`` 0 with its reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from statictrain import envvars, metrics
from statictrain_localcluster import procs
from statictrain_localcluster.cluster import LocalCluster
from statictrain_localcluster.waiting import eventually
from statictrain_sidecar.collector import EXPORTED_METRICS

pytestmark = pytest.mark.cluster

PROFILE_TOKEN = "integration-test-profile-token-0123"
GPU_ONLY = {n for n in EXPORTED_METRICS if n.startswith("statictrain_gpu_")} - {metrics.GPU_AVAILABLE}
"""Series that exist only where NVML sees a GPU (checked with a fake NVML in tests/unit/sidecar)."""




def promql(url: str, query: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(
        f"{url}/api/v1/query?{urllib.parse.urlencode({'query': query})}", timeout=10
    ) as resp:
        body = json.load(resp)
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


@dataclass
class Worker:
    identity: dict[str, str]
    stats_dir: Path
    port: int


def stop(proc: subprocess.Popen[bytes]) -> None:
    procs.stop_process(proc, grace_s=30)


@pytest.fixture
def worker(cluster: LocalCluster, namespace: str, tmp_path: Path) -> Iterator[Worker]:
    name = "gpt2-cpu-worker-0"
    cluster.kubectl(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        input=yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "labels": {"statictrain.io/job": "gpt2-cpu"}},
                "spec": {
                    "tolerations": [
                        {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}
                    ],
                    "containers": [
                        {"name": "trainer", "image": "fake"},
                        {"name": "sidecar", "image": "fake"},
                    ],
                },
            }
        ),
    )
    uid = cluster.kubectl(
        "get", "pod", name, "-n", namespace, "-o", "jsonpath={.metadata.uid}"
    ).stdout.strip()
    identity = {
        "job_name": "gpt2-cpu",
        "namespace": namespace,
        "commit": "3f2c1ab",
        "team": "nlp",
        "pod": name,
        "pod_uid": uid,
    }
    stats = tmp_path / "stats"
    stats.mkdir()
    # a malformed line ahead of the trainer's records: counted and skipped, never fatal
    (stats / "steps.jsonl").write_text('{"v": 1, "step": "broken"}\nnot json at all\n')
    env = {
        **os.environ,
        envvars.JOB_NAME: identity["job_name"],
        envvars.JOB_NAMESPACE: namespace,
        envvars.COMMIT: identity["commit"],
        envvars.TEAM: identity["team"],
        envvars.POD_NAME: name,
        envvars.POD_UID: uid,
        envvars.STATS_DIR: str(stats),
        envvars.PROFILE_TOKEN_FILE: str(tmp_path / "profile-token"),
        "PYTHONUNBUFFERED": "1",
    }
    (tmp_path / "profile-token").write_text(PROFILE_TOKEN)
    port_file = tmp_path / "port"
    logs = tmp_path / "logs"
    logs.mkdir()
    sidecar_log = (logs / "sidecar.out").open("wb")
    trainer_log = (logs / "trainer.out").open("wb")
    sidecar = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "statictrain_sidecar.main",
            "--port",
            "0",
            "--bind",
            "127.0.0.1",
            "--interval",
            "0.2",
            "--port-file",
            str(port_file),
        ],
        env=env,
        stdout=sidecar_log,
        stderr=subprocess.STDOUT,
    )
    trainer = subprocess.Popen(
        [sys.executable, "-m", "statictrain_trainer.main"],
        env={
            **env,
            envvars.ENTRYPOINT: "statictrain_trainer.examples.gpt2:build_small",
            envvars.COMPILE_MODE: "none",
            envvars.PRECISION: "fp32",
            envvars.MAX_STEPS: "100000",
            envvars.CHECKPOINT_EVERY: "0",
            envvars.PEAK_TFLOPS: "1",
            "STATICTRAIN_TERMINATION_LOG": str(tmp_path / "termination-log"),
        },
        stdout=trainer_log,
        stderr=subprocess.STDOUT,
    )
    job = f"sidecar-{namespace}"
    try:
        port = int(
            eventually(
                lambda: port_file.exists() and port_file.read_text().strip(), 60, "the sidecar to bind"
            )
        )
        cluster.add_scrape_target(job, f"127.0.0.1:{port}", {})
        yield Worker(identity, stats, port)
    finally:
        cluster.remove_scrape_target(job)
        stop(trainer)
        stop(sidecar)
        sidecar_log.close()
        trainer_log.close()
        assert sidecar.returncode == 0, (logs / "sidecar.out").read_text()


def test_prometheus_returns_every_documented_series_with_the_pod_labels(
    cluster: LocalCluster, worker: Worker
) -> None:
    selector = ",".join(f'{k}="{v}"' for k, v in worker.identity.items())
    tuned_only = {metrics.TRAIN_AUTOTUNE_SPEEDUP}  # this trainer is not autotuned: absent, not NaN
    expected = set(EXPORTED_METRICS) - GPU_ONLY - tuned_only

    def series(name: str) -> list[dict[str, Any]]:
        suffix = "_bucket" if name == metrics.TRAIN_STEP_SECONDS else ""
        return promql(cluster.prometheus_url, f"{name}{suffix}{{{selector}}}")

    def missing() -> set[str]:
        return {n for n in expected if not series(n)}

    eventually(lambda: not missing() or None, 180, f"every series in Prometheus (missing: {missing()})")
    for name in expected:
        for s in series(name):
            assert {k: s["metric"].get(k) for k in worker.identity} == worker.identity, name

    assert float(series(metrics.TRAIN_STEP)[0]["value"][1]) >= 1
    assert float(series(metrics.TRAIN_TOKENS_TOTAL)[0]["value"][1]) > 0
    assert 0 < float(series(metrics.TRAIN_LOSS)[0]["value"][1]) < 20
    assert float(series(metrics.CHANNEL_MALFORMED_TOTAL)[0]["value"][1]) == 2
    # no GPU here: said plainly, and no GPU series at all
    avail = series(metrics.GPU_AVAILABLE)
    assert [(a["metric"]["reason"], a["value"][1]) for a in avail] in (
        [("nvml_init_failed", "0")],
        [("nvml_missing", "0")],
        [("no_devices", "0")],
    )
    for name in GPU_ONLY | tuned_only:
        assert series(name) == [], name
    assert [s["metric"]["chosen_by"] for s in series(metrics.TRAIN_SETTINGS_INFO)] == ["spec"]
    # PromQL over the histogram works as the extender and dashboards use it
    # (a window long enough to hold steps even when a loaded machine slows the trainer down)
    query = (f"rate({metrics.TRAIN_STEP_SECONDS}_sum{{{selector}}}[2m]) / "
             f"rate({metrics.TRAIN_STEP_SECONDS}_count{{{selector}}}[2m])")
    mean = eventually(lambda: promql(cluster.prometheus_url, query) or None, 60, "a mean step time")
    assert float(mean[0]["value"][1]) > 0


def test_profile_request_is_captured_by_the_running_trainer(worker: Worker) -> None:
    base = f"http://127.0.0.1:{worker.port}"
    auth = {"Authorization": f"Bearer {PROFILE_TOKEN}"}
    with pytest.raises(urllib.error.HTTPError) as refused:  # no token: nothing requested
        urllib.request.urlopen(urllib.request.Request(f"{base}/profile?steps=2", method="POST"), timeout=10)
    assert refused.value.code == 401
    with urllib.request.urlopen(
        urllib.request.Request(f"{base}/profile?steps=2", method="POST", headers=auth), timeout=10
    ) as resp:
        assert resp.status == 202
        ticket = json.load(resp)

    def captured() -> list[str] | None:
        with urllib.request.urlopen(urllib.request.Request(f"{base}/profiles", headers=auth), timeout=10) as resp:
            listing = json.load(resp)
        mine = [p for p in listing if p["id"] == ticket["id"] and "trace.json" in p["files"]]
        return mine[0]["files"] if mine else None

    files = eventually(captured, 180, "the trainer to capture the profile")
    assert "trace.json" in files
    with urllib.request.urlopen(
        urllib.request.Request(f"{base}{ticket['fetch']}trace.json", headers=auth), timeout=30
    ) as resp:
        trace = json.load(resp)
    assert trace.get("traceEvents"), "a torch.profiler chrome trace with events"
