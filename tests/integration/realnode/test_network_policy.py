"""Case 27: the chart's worker NetworkPolicy enforced on the real node, checked with real traffic.

kube-network-policies (SIG Network's enforcer, built from its Go module) runs beside the
real node's kubelet and decides every new connection between the node's pods
(statictrain_localcluster.netpol; where the kernel takes no nftables queue rules, the
packets reach its queue through an iptables NFQUEUE rule instead: its verdicts either way).
The policy applied is the one the chart renders.
Real pods (busybox) open real TCP connections: a "worker" serves its sidecar port
(9400) and a torchrun-like port (29500); a "prom" pod (Prometheus' labels), a
second worker and a "tenant" pod try both ports. Before the policy everything
connects (so a refusal later is the policy, not the network); after it only what the
policy allows does.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from statictrain_localcluster.cluster import LocalCluster, build_binaries
from statictrain_localcluster.netpol import Enforcer, EnforcerError, kernel_queue_hooks
from statictrain_localcluster.nodeconfig import REAL_NODE_LABEL, REAL_NODE_TOLERATION

from ..operator.conftest import REPO, Kube, wait_for

pytestmark = pytest.mark.cluster

CHART = REPO / "charts" / "statictrain"
PROM = {"app.kubernetes.io/name": "prometheus"}
WORKER = {"app.kubernetes.io/managed-by": "statictrain", "statictrain.io/role": "worker"}
SERVE = "mkdir -p /tmp/w && echo ok > /tmp/w/index.html && httpd -p 9400 -h /tmp/w && httpd -f -p 29500 -h /tmp/w"


@pytest.fixture(scope="module")
def enforcer(cluster: LocalCluster, real_node: str) -> Iterator[Enforcer]:
    hooks = kernel_queue_hooks()
    if hooks["nft"] and hooks["iptables"]:
        pytest.fail(f"this kernel puts no packets on a netfilter queue: {hooks}")
    # built at cluster start (state.netpol_bin); a cluster started before that builds it now
    built = cluster.state.netpol_bin
    bin_dir = Path(built) if built else build_binaries(sys.stderr, "build-netpol.sh")
    e = Enforcer(cluster.root / "netpol", cluster.node().cfg, cluster.kubeconfig, bin_dir,  # type: ignore[arg-type]
                 cluster.kubectl)
    try:
        e.start()
    except EnforcerError as err:
        e.stop()
        pytest.fail(str(err))
    yield e
    e.stop()


def pod(name: str, labels: dict[str, str], command: str, image: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
        "spec": {
            "nodeSelector": {REAL_NODE_LABEL: "true"}, "tolerations": [REAL_NODE_TOLERATION],
            "terminationGracePeriodSeconds": 1, "automountServiceAccountToken": False,
            "containers": [{"name": "c", "image": image, "imagePullPolicy": "Never",
                            "command": ["sh", "-c", command]}],
        },
    }


def chart_worker_policy(cluster: LocalCluster, ns: str) -> dict[str, Any]:
    prom_ns = f"networkPolicy.prometheus.namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name={ns}"
    out = cluster.helm("template", "st", str(CHART), "--namespace", ns, "--kube-version", "1.34.0",
                       "--set", f"operator.watchNamespaces={{{ns}}}", "--set", prom_ns)
    (policy,) = [d for d in yaml.safe_load_all(out.stdout)
                 if d and d["kind"] == "NetworkPolicy" and d["metadata"]["name"].endswith("-workers")]
    return dict(policy)


def test_the_chart_s_worker_policy_is_enforced_with_real_traffic(
    cluster: LocalCluster, enforcer: Enforcer, namespace: str, tmp_path: Path
) -> None:
    ns = namespace
    kube = Kube(cluster, ns)
    busybox = cluster.node_images()["busybox"]
    kube.create(pod("worker", WORKER, SERVE, busybox))
    for name, labels in [("prom", PROM), ("peer", WORKER), ("tenant", {"app": "tenant"})]:
        kube.create(pod(name, labels, "sleep 3600", busybox))
    def running() -> bool:
        pods = kube.list("pods")
        return len(pods) == 4 and all(p["status"].get("phase") == "Running" for p in pods)

    wait_for(running, "the four pods to run", timeout=180)
    ip = kube.get("pod", "worker")["status"]["podIP"]  # type: ignore[index]

    def connects(client: str, port: int) -> bool:
        request = f"printf 'GET / HTTP/1.0\\r\\n\\r\\n' | busybox nc -w 3 {ip} {port}"
        proc = kube.run("exec", client, "--", "sh", "-c", request, check=False)
        return proc.returncode == 0 and proc.stdout.rstrip().endswith("\nok")

    # Without a policy every pod reaches both ports (a refusal later is the policy's doing).
    for client in ("prom", "peer", "tenant"):
        for port in (9400, 29500):
            assert wait_for(lambda c=client, p=port: connects(c, p), f"{client} -> worker:{port} before the policy")

    kube.apply(chart_worker_policy(cluster, ns))
    wait_for(lambda: not connects("tenant", 9400), "the policy to be enforced (tenant -> worker:9400 refused)")
    allowed = {(c, p): connects(c, p) for c in ("prom", "peer", "tenant") for p in (9400, 29500)}
    assert allowed == {
        ("prom", 9400): True,  # Prometheus scrapes the sidecar
        ("prom", 29500): False,  # and nothing else
        ("peer", 9400): False,  # another worker cannot read the sidecar
        ("peer", 29500): True,  # torchrun / NCCL between workers
        ("tenant", 9400): False,
        ("tenant", 29500): False,
    }
    log = enforcer.log.read_text(errors="replace")
    assert 'verdict="drop"' in log and 'verdict="accept"' in log  # the verdicts were kube-network-policies'
