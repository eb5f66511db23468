"""Bad input to the cluster tooling: clear errors, nothing left running."""

from __future__ import annotations

import os
import socket
import subprocess
from importlib import resources
from pathlib import Path

import pytest
from statictrain_localcluster import procs
from statictrain_localcluster.cluster import ClusterError, LocalCluster


@pytest.fixture
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STATICTRAIN_CACHE", str(tmp_path / "cache"))
    return tmp_path


def fake_bin(tmp_path: Path) -> Path:
    b = tmp_path / "bin"
    b.mkdir()
    for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd", "kwok",
                 "kwokctl", "helm"):
        (b / name).write_text("#!/bin/sh\nexit 1\n")
        (b / name).chmod(0o755)
    return b


def test_missing_go_toolchain_says_what_to_install(isolated_cache: Path) -> None:
    script = resources.files("statictrain_localcluster") / "build-binaries.sh"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(isolated_cache), "STATICTRAIN_CACHE": str(isolated_cache / "c")}
    proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, check=False)
    assert proc.returncode != 0
    assert "no Go toolchain" in proc.stderr and "install Go" in proc.stderr


def test_malformed_nodepool_fails_before_anything_starts(isolated_cache: Path) -> None:
    pool = isolated_cache / "pool.yaml"
    pool.write_text("region: r\npools:\n- {name: a, instanceType: x, count: -3, cpu: '1', memory: 1Gi}\n")
    c = LocalCluster("bad-pool", nodepool_file=pool)
    with pytest.raises(ClusterError, match="count must be between 0 and 10000"):
        c.start(fake_bin(isolated_cache))
    assert not c.root.exists()


def test_unparsable_nodepool(isolated_cache: Path) -> None:
    pool = isolated_cache / "pool.yaml"
    pool.write_text("pools: [unclosed\n")
    with pytest.raises(ClusterError, match="not valid YAML"):
        LocalCluster("bad-yaml", nodepool_file=pool).start(fake_bin(isolated_cache))


def test_port_in_use_is_named(isolated_cache: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        c = LocalCluster("port-taken")
        with pytest.raises(ClusterError, match=f"port {port} for Prometheus is in use"):
            c.start(fake_bin(isolated_cache), prometheus_port=port)
    assert not c.root.exists()


def test_missing_binaries_say_how_to_build(isolated_cache: Path) -> None:
    with pytest.raises(ClusterError, match="make cluster-build"):
        LocalCluster("no-bins").start(isolated_cache)


def test_failed_start_leaves_no_process_and_no_state(isolated_cache: Path) -> None:
    # kwokctl that starts a long-lived child naming the cluster folder, then fails:
    # the teardown must find and stop that child.
    b = fake_bin(isolated_cache)
    (b / "kwokctl").write_text('#!/bin/sh\n[ "$1" = create ] || exit 0\n'
                               'python3 -c "import time; time.sleep(300)" "$KWOK_WORKDIR" &\nexit 1\n')
    c = LocalCluster("fails-midway")
    with pytest.raises(ClusterError, match="kwokctl could not start the control plane"):
        c.start(b, log=subprocess.DEVNULL)
    assert not c.root.exists()
    assert procs.pids_mentioning(str(c.root)) == []


def test_cluster_name_is_validated() -> None:
    with pytest.raises(ClusterError, match="lowercase"):
        LocalCluster("Bad Name")


def test_status_of_a_cluster_that_never_started(isolated_cache: Path) -> None:
    assert LocalCluster("nothing").status() == {"name": "nothing", "running": False}
    assert os.environ["STATICTRAIN_CACHE"].startswith(str(isolated_cache))
