"""NetworkPolicy enforcement on the real node: kube-network-policies decides every new connection.

kube-network-policies (SIG Network, built by build-netpol.sh) watches pods,
namespaces and NetworkPolicies and gives a verdict for each packet the kernel puts on
its netfilter queue. It runs as a host process of the real node, "in cluster" through
a mount namespace of its own in which a folder holding a ServiceAccount token and the
cluster's CA is bind-mounted where client-go looks for them.

It installs its own nftables rules sending new connections to the queue. Where the
kernel refuses nftables ``queue`` expressions (CONFIG_NFT_QUEUE unset, as on this
project's machines), those rules fail and the enforcer keeps running; then this module
installs the equivalent hook itself: an iptables (nft_compat) NFQUEUE rule for new
connections between the node's pods (bridged frames pass iptables: br_netfilter). The
verdicts are kube-network-policies' either way.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from statictrain_localcluster.faultproxy import api_server
from statictrain_localcluster.nodeconfig import NodeConfig

__all__ = ["QUEUE", "Enforcer", "EnforcerError", "kernel_queue_hooks"]

QUEUE = 100
"""The netfilter queue kube-network-policies reads (its default)."""
NAME = "kube-network-policies"
NAMESPACE = "kube-system"
SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where client-go's in-cluster configuration reads the token and CA."""
_PROBE_NFT = """table inet statictrain_probe {
  chain c { type filter hook postrouting priority 0; ip daddr 192.0.2.1 queue num 100 bypass; }
}
"""


class EnforcerError(RuntimeError):
    """The enforcer cannot run here or did not start; the message says why."""


def kernel_queue_hooks() -> dict[str, str]:
    """Which ways to put packets on a netfilter queue this kernel takes, probed in a throwaway
    network namespace: ``{"nft": "" or why not, "iptables": "" or why not}``."""
    out = {}
    for kind, cmd, stdin in [
        ("nft", ["unshare", "--net", "nft", "-f", "-"], _PROBE_NFT),
        ("iptables", ["unshare", "--net", "iptables", "-A", "FORWARD", "-d", "192.0.2.1", "-j", "NFQUEUE",
                      "--queue-num", str(QUEUE), "--queue-bypass"], None),
    ]:
        if not shutil.which(cmd[2]) or not shutil.which("unshare"):
            out[kind] = f"no {cmd[2]} command"
            continue
        proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=30, check=False)
        out[kind] = "" if proc.returncode == 0 else " ".join(proc.stderr.split())[:300]
    return out


def rbac_manifests() -> list[dict[str, Any]]:
    """What kube-network-policies reads (and nothing else)."""
    meta = {"name": NAME, "labels": {"app.kubernetes.io/part-of": "statictrain-localcluster"}}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {**meta, "namespace": NAMESPACE}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta, "rules": [
            {"apiGroups": [""], "resources": ["pods", "namespaces", "nodes"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["get", "list", "watch"]},
        ]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
         "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]},
    ]


class Enforcer:
    """kube-network-policies for one real node; ``start()`` then ``stop()`` (safe to call twice)."""

    def __init__(self, root: Path, node: NodeConfig, kubeconfig: Path, bin_dir: Path,
                 kubectl: Callable[..., subprocess.CompletedProcess[str]]) -> None:
        self.root = root
        self.node = node
        self.kubeconfig = kubeconfig
        self.binary = bin_dir / NAME
        self.kubectl = kubectl
        self.proc: subprocess.Popen[bytes] | None = None
        self.shim = ""
        """The iptables chain this object added (when the kernel takes no nftables queue rules)."""

    @property
    def log(self) -> Path:
        return self.root / f"{NAME}.log"

    def start(self, timeout_s: float = 120) -> None:
        hooks = kernel_queue_hooks()
        if hooks["nft"] and hooks["iptables"]:
            raise EnforcerError(f"this kernel puts no packets on a netfilter queue: nftables: {hooks['nft']}; "
                                f"iptables: {hooks['iptables']}")
        if not self.binary.exists():
            raise EnforcerError(f"{self.binary} is missing: run build-netpol.sh (make cluster-build)")
        self.root.mkdir(parents=True, exist_ok=True)
        self.kubectl("apply", "--server-side", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                            "items": rbac_manifests()}))
        api = api_server(self.kubeconfig)
        sa = self.root / "serviceaccount"
        sa.mkdir(exist_ok=True)
        token = self.kubectl("create", "token", NAME, "-n", NAMESPACE, "--duration=2h").stdout.strip()
        (sa / "token").write_text(token)
        shutil.copyfile(api.ca_file, sa / "ca.crt")
        (sa / "namespace").write_text(NAMESPACE)
        SA_DIR.mkdir(parents=True, exist_ok=True)  # the mount point; the host's stays empty
        cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
               f'mount --bind "$0" {SA_DIR} && exec "$@"', str(sa), str(self.binary),
               f"--hostname-override={self.node.node_name}", "--disable-nri", f"--nfqueue-id={QUEUE}",
               "--metrics-bind-address=127.0.0.1:0", "--v=2"]
        env = {**os.environ, "KUBERNETES_SERVICE_HOST": api.host, "KUBERNETES_SERVICE_PORT": str(api.port)}
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        if hooks["nft"]:
            self._add_shim()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:  # caches synced: it syncs its nftables rules next
            if self.proc.poll() is not None:
                raise EnforcerError(f"{NAME} exited (code {self.proc.returncode}); log: {self.log}")
            if "Syncing nftables rules" in self.log.read_text(errors="replace"):
                return
            time.sleep(0.5)
        raise EnforcerError(f"{NAME} did not sync its caches within {timeout_s:.0f} s; log: {self.log}")

    def _add_shim(self) -> None:
        chain = "STNP-" + hashlib.sha256(self.node.subnet.encode()).hexdigest()[:10]
        subnet = self.node.subnet
        _ipt("-N", chain)
        self.shim = chain
        for side in ("-s", "-d"):  # the node's own address (kubelet probes, host processes) is not queued
            _ipt("-A", chain, side, self.node.gateway, "-j", "RETURN")
        _ipt("-A", chain, "-s", subnet, "-d", subnet, "-m", "conntrack", "--ctstate", "NEW",
             "-j", "NFQUEUE", "--queue-num", str(QUEUE))
        _ipt("-I", "FORWARD", "-j", chain)

    def stop(self) -> None:
        if self.shim:
            _ipt("-D", "FORWARD", "-j", self.shim, check=False)
            _ipt("-F", self.shim, check=False)
            _ipt("-X", self.shim, check=False)
            self.shim = ""
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(20)
            self.proc = None
        with contextlib.suppress(Exception):
            self.kubectl("delete", "clusterrolebinding,clusterrole", NAME, "--ignore-not-found", check=False)
            self.kubectl("delete", "serviceaccount", NAME, "-n", NAMESPACE, "--ignore-not-found", check=False)


def _ipt(*args: str, check: bool = True) -> None:
    proc = subprocess.run(["iptables", "-w", *args], capture_output=True, text=True, timeout=30, check=False)
    if check and proc.returncode != 0:
        raise EnforcerError(f"iptables {' '.join(args)}: {proc.stderr.strip()}")
