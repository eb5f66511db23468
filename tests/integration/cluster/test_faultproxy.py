"""The fault-injecting proxy in front of the real API server: transparent, then 429/503/409, after-write 503,
resets, read faults, outage.

This checks the harness itself (with kubectl, which shares no code with it); the
operator behind it (cases 4 and 5) is tests/integration/operator/test_outage.py.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from statictrain_localcluster.cluster import LocalCluster
from statictrain_localcluster.faultproxy import AFTER_WRITE, RESET, FaultProxy, write_kubeconfig
from statictrain_localcluster.waiting import eventually

pytestmark = pytest.mark.cluster


def via(proxy: FaultProxy, cluster: LocalCluster, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    kubeconfig = write_kubeconfig(proxy, tmp_path / f"proxy-{proxy.port}.kubeconfig")
    return subprocess.run([str(cluster.bin_dir / "kubectl"), "--kubeconfig", str(kubeconfig), "--request-timeout=20s",
                           *args], capture_output=True, text=True, timeout=60, check=False)


def configmaps(cluster: LocalCluster, namespace: str) -> set[str]:
    out = cluster.kubectl("get", "configmaps", "-n", namespace, "-o", "json").stdout
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return {c["metadata"]["name"] for c in items} - {"kube-root-ca.crt"}


def test_without_faults_the_proxy_is_transparent_for_reads_writes_and_watches(
    cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    proxy = FaultProxy(cluster.kubeconfig).start()
    try:
        assert via(proxy, cluster, tmp_path, "create", "configmap", "a", "-n", namespace).returncode == 0
        got = via(proxy, cluster, tmp_path, "get", "configmap", "a", "-n", namespace, "-o", "jsonpath={.metadata.name}")
        assert got.stdout == "a"
        watch = via(proxy, cluster, tmp_path, "get", "configmaps", "-n", namespace, "--watch", "--request-timeout=3s",
                    "-o", "name")
        assert "configmap/a" in watch.stdout  # the streamed watch came through
        assert configmaps(cluster, namespace) == {"a"}
        assert proxy.counts["forward"] >= 3
    finally:
        proxy.stop()


@pytest.mark.parametrize(("fault", "message"), [(429, "TooManyRequests"), (503, "ServiceUnavailable"),
                                                 (409, "Conflict")])
def test_injected_write_faults_are_real_kubernetes_errors_and_change_nothing(
    cluster: LocalCluster, namespace: str, tmp_path: Path, fault: int, message: str
) -> None:
    proxy = FaultProxy(cluster.kubeconfig, write_faults={fault: 1.0}).start()
    try:
        out = via(proxy, cluster, tmp_path, "create", "configmap", "b", "-n", namespace)
        assert out.returncode != 0 and "injected by the fault proxy" in out.stderr and message in out.stderr
        assert via(proxy, cluster, tmp_path, "get", "namespace", namespace).returncode == 0  # reads pass
        assert configmaps(cluster, namespace) == set()
        assert proxy.counts[str(fault)] >= 1
    finally:
        proxy.stop()


def test_after_write_fault_reports_failure_for_a_write_that_happened(
    cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    proxy = FaultProxy(cluster.kubeconfig, write_faults={AFTER_WRITE: 1.0}).start()
    try:
        out = via(proxy, cluster, tmp_path, "create", "configmap", "c", "-n", namespace)
        assert out.returncode != 0
        assert configmaps(cluster, namespace) == {"c"}  # it was created all the same
    finally:
        proxy.stop()


def test_a_share_of_writes_fails_reproducibly_for_a_seed(cluster: LocalCluster, namespace: str, tmp_path: Path) -> None:
    outcomes = []
    for _ in range(2):
        proxy = FaultProxy(cluster.kubeconfig, write_faults={503: 0.5}, seed=7).start()
        try:
            outcomes.append([proxy._decide("POST") for _ in range(20)])
        finally:
            proxy.stop()
    assert outcomes[0] == outcomes[1] and {"503", "forward"} == set(outcomes[0])


def test_an_outage_refuses_every_request_and_ends(cluster: LocalCluster, namespace: str, tmp_path: Path) -> None:
    proxy = FaultProxy(cluster.kubeconfig).start()
    try:
        with proxy.outage():
            down = via(proxy, cluster, tmp_path, "get", "namespace", namespace)
            assert down.returncode != 0
        assert via(proxy, cluster, tmp_path, "get", "namespace", namespace).returncode == 0
        assert proxy.counts["outage"] >= 1
    finally:
        proxy.stop()


def test_resets_read_faults_and_an_outage_that_cuts_open_watches(
    cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    proxy = FaultProxy(cluster.kubeconfig, write_faults={RESET: 1.0}).start()
    try:
        assert via(proxy, cluster, tmp_path, "create", "configmap", "r", "-n", namespace).returncode != 0
        assert configmaps(cluster, namespace) == set() and proxy.counts[RESET] >= 1  # closed, not forwarded
        proxy.write_faults, proxy.read_faults = {}, {503: 1.0}
        out = via(proxy, cluster, tmp_path, "get", "namespace", namespace)
        assert out.returncode != 0 and "ServiceUnavailable" in out.stderr  # kubectl's discovery read it first
        proxy.read_faults = {}
        kubeconfig = write_kubeconfig(proxy, tmp_path / "watch.kubeconfig")
        watch = subprocess.Popen([str(cluster.bin_dir / "kubectl"), "--kubeconfig", str(kubeconfig), "get",
                                  "configmaps", "-n", namespace, "--watch", "-o", "name", "--request-timeout=0"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            eventually(lambda: proxy._open, 30, "the watch to be open")
            with proxy.outage():
                watch.wait(60)  # the open watch ended with the outage
            assert proxy.counts["cut"] >= 1
        finally:
            watch.kill()
            watch.wait()
    finally:
        proxy.stop()


def test_bad_fault_settings_say_what_is_allowed(cluster: LocalCluster) -> None:
    for faults in ({500: 0.5}, {429: 0.7, 503: 0.7}, {429: -0.1}):
        with pytest.raises(ValueError, match="shares"):
            FaultProxy(cluster.kubeconfig, write_faults=faults)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"read_faults .* shares .* of 429, 503, reset"):
        FaultProxy(cluster.kubeconfig, read_faults={409: 0.1})
    with pytest.raises(ValueError, match="latency_s"):
        FaultProxy(cluster.kubeconfig, latency_s=-1)
