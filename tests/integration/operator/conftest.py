"""Fixtures of the operator's integration tests: the CRD installed, and a real operator process.

Each test gets its own namespace and its own operator subprocess watching only
that namespace, so tests cannot see each other's jobs, and a test can kill
and restart its operator.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from statictrain_localcluster.waiting import crds_established, eventually

REPO = pathlib.Path(__file__).resolve().parents[3]
CRD_FILE = REPO / "crds" / "statictrain.io_statictrainingjobs.yaml"
KWOK_TOLERATION = {"key": "kwok.x-k8s.io/node", "operator": "Equal", "value": "fake", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def wait_for(check: Callable[[], Any], what: str, timeout: float = 60.0, interval: float = 0.25) -> Any:
    """Poll `check` until it returns something truthy; fail with `what` (never a timed assertion)."""
    return eventually(check, timeout, what, interval)


class Kube:
    """kubectl for one namespace, returning parsed JSON."""

    def __init__(self, cluster: Any, namespace: str) -> None:
        self.cluster = cluster
        self.ns = namespace

    def run(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return self.cluster.kubectl("-n", self.ns, *args, input=input, check=check)  # type: ignore[no-any-return]

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        proc = self.run("get", kind, name, "-o", "json", "--ignore-not-found", check=False)
        return json.loads(proc.stdout) if proc.stdout.strip() else None

    def list(self, kind: str, selector: str | None = None) -> list[dict[str, Any]]:
        args = ["get", kind, "-o", "json"] + (["-l", selector] if selector else [])
        return json.loads(self.run(*args).stdout)["items"]  # type: ignore[no-any-return]

    def apply(self, obj: dict[str, Any], check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run("apply", "-f", "-", input=yaml.safe_dump(obj), check=check)

    def create(self, obj: dict[str, Any], check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run("create", "-f", "-", input=yaml.safe_dump(obj), check=check)

    def patch(self, kind: str, name: str, patch: dict[str, Any], *extra: str) -> None:
        self.run("patch", kind, name, "--type=merge", "-p", json.dumps(patch), *extra)


def stj(name: str, **spec: Any) -> dict[str, Any]:
    """A StaticTrainingJob manifest with the smallest valid spec plus `spec`."""
    body: dict[str, Any] = {
        "image": "ghcr.io/statictrain/trainer:0.1.0",
        "entrypoint": "statictrain_trainer.examples.tiny:build",
    }
    body.update(spec)
    return {
        "apiVersion": "statictrain.io/v1alpha1",
        "kind": "StaticTrainingJob",
        "metadata": {
            "name": name,
            "labels": {"statictrain.io/commit": "abc1234", "statictrain.io/team": "nlp"},
        },
        "spec": body,
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Operator:
    """The real operator (statictrain-operator) as a subprocess watching one namespace."""

    def __init__(self, cluster: Any, namespace: str, log_dir: pathlib.Path, kubeconfig: pathlib.Path | None = None,
                 **settings: Any) -> None:
        self.cluster = cluster
        self.kubeconfig = kubeconfig or cluster.kubeconfig
        """The API server it talks to (the cluster's, or a fault proxy's)."""
        self.namespace = namespace
        self.log_dir = log_dir
        self.settings = settings
        self.name = ""
        """Tells the log files of several operators of one test apart."""
        self.health_port = free_port()
        self.metrics_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log: Any = None
        self.starts = 0

    def env(self) -> dict[str, str]:
        env = dict(self.cluster.env)
        values: dict[str, Any] = {
            "namespaces": self.namespace,
            "tolerations": [KWOK_TOLERATION, GPU_TOLERATION],
            "heartbeat_namespace": self.namespace,
            "heartbeat_s": 1.0,
            "requeue_s": 0.5,
            # the operator core alone; cost and anomaly have their own integration tests
            "parts": "",
            # kwok pods write no checkpoints: no per-job claims (tests/integration/realnode covers them)
            "checkpoint_volume_size": "",
            "own_metrics_port": str(self.metrics_port),
            **self.settings,
        }
        for key, value in values.items():
            env["STATICTRAIN_OPERATOR_" + key.upper()] = (
                value if isinstance(value, str) else json.dumps(value)
            )
        return env

    def start(self) -> None:
        exe = shutil.which("statictrain-operator", path=os.path.dirname(sys.executable))
        assert exe, "statictrain-operator is not installed in this environment"
        self.starts += 1
        self.log = log = (self.log_dir / f"operator-{self.name}{self.starts}.log").open("wb")
        self.proc = subprocess.Popen(
            [
                exe,
                "--kubeconfig",
                str(self.kubeconfig),
                "--liveness",
                f"http://127.0.0.1:{self.health_port}/healthz",
            ],
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def kill(self) -> None:
        """SIGKILL: no cleanup, exactly like a crashed pod."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self.proc = None
        self.log.close()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
            self.proc = None
            self.log.close()

    def logs(self) -> str:
        logs = sorted(self.log_dir.glob(f"operator-{self.name}[0-9]*.log"))
        return "\n".join(p.read_text(errors="replace") for p in logs)


@pytest.fixture(scope="session")
def crd(cluster: Any) -> str:
    """The StaticTrainingJob CRD, applied from crds/ and Established."""
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD_FILE))
    name = "statictrainingjobs.statictrain.io"
    crds_established(cluster.kubectl, [name])
    return name


@pytest.fixture
def kube(cluster: Any, namespace: str, crd: str) -> Kube:
    return Kube(cluster, namespace)


@pytest.fixture
def make_operator(
    cluster: Any, namespace: str, crd: str, tmp_path: pathlib.Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Operator]]:
    """Factory: make_operator(**settings) returns a started operator (stopped after the test)."""
    made: list[Operator] = []

    def make(start: bool = True, watch: str | None = None, kubeconfig: pathlib.Path | None = None,
             **settings: Any) -> Operator:
        op = Operator(cluster, watch or namespace, tmp_path, kubeconfig, **settings)
        made.append(op)
        if start:
            op.start()
        return op

    yield make
    for op in made:
        op.stop()
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        for op in made:
            sys.stderr.write(op.logs()[-20000:])


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    rep = yield
    if rep.when == "call":
        item.rep_call = rep  # type: ignore[attr-defined]
    return rep
