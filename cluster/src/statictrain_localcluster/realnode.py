"""A real node in the local cluster: containerd, runc, a CNI bridge, the kubelet,
CoreDNS and a local-path volume provisioner, all as processes of this machine.

Every part belongs to one cluster: its own containerd (root, state, socket), its
own bridge and /24, its own kubelet folders, ports and cgroup root. ``stop``
removes all of it - pods' processes (by cgroup), mounts, network namespaces,
the bridge, processes and folders - also after a crash or a failed start, from
the config saved in ``<node>/node.json``. Configuration files come from
nodeconfig.py (pure); images from images.py.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from statictrain_localcluster import nodeconfig, procs
from statictrain_localcluster.nodeconfig import NodeConfig

__all__ = ["NodeError", "RealNode", "image_store", "missing_prerequisites"]

# Debian package of each thing the node needs (binaries on PATH or files).
REQUIRED: dict[str, str] = {
    "containerd": "containerd",
    "containerd-shim-runc-v2": "containerd",
    "ctr": "containerd",
    "runc": "runc",
    f"{nodeconfig.CNI_BIN_DIR}/bridge": "containernetworking-plugins",
    f"{nodeconfig.CNI_BIN_DIR}/host-local": "containernetworking-plugins",
    f"{nodeconfig.CNI_BIN_DIR}/loopback": "containernetworking-plugins",
    "buildah": "buildah",
    "debootstrap": "debootstrap",
    "/bin/busybox": "busybox-static",
    "ip": "iproute2",
}
CGROUP_V1 = Path("/sys/fs/cgroup")
NETNS_DIR = Path("/var/run/netns")


class NodeError(RuntimeError):
    """The real node could not start; the message says why and what to do."""


def _have(thing: str) -> bool:
    return Path(thing).exists() if thing.startswith("/") else shutil.which(thing) is not None


def missing_prerequisites() -> list[str]:
    """What this machine lacks for a real node, each with how to fix it (empty: all there)."""
    problems: list[str] = []
    packages = sorted({pkg for thing, pkg in REQUIRED.items() if not _have(thing)})
    if packages:
        problems.append(f"missing Debian packages: {', '.join(packages)} "
                        f"(install them with 'apt-get install -y {' '.join(packages)}', or run 'make system-deps')")
    if os.geteuid() != 0:
        problems.append("the kubelet, containerd and the CNI bridge need root: run as root")
    try:
        if "overlay" not in Path("/proc/filesystems").read_text():
            problems.append("the kernel has no overlayfs ('modprobe overlay' as root)")
    except OSError:
        problems.append("cannot read /proc/filesystems")
    if not (CGROUP_V1 / "memory").is_dir() and not (CGROUP_V1 / "cgroup.controllers").exists():
        problems.append(f"no cgroup hierarchy under {CGROUP_V1}")
    if os.geteuid() == 0 and shutil.which("unshare"):
        probe = subprocess.run(["unshare", "--net", "--pid", "--fork", "--mount", "true"],
                               capture_output=True, text=True, check=False)
        if probe.returncode != 0:
            problems.append(f"the kernel refuses new namespaces (unshare: {probe.stderr.strip()})")
    return problems


def _cgroup_dirs(cgroup_root: str) -> list[Path]:
    """This node's cgroup folder in every mounted hierarchy (v1: one per controller; v2: one)."""
    rel = cgroup_root.lstrip("/")
    if (CGROUP_V1 / "cgroup.controllers").exists():
        return [CGROUP_V1 / rel]
    return [h / rel for h in sorted(CGROUP_V1.iterdir()) if h.is_dir() and not h.is_symlink()]


def _mounts_under(root: Path) -> list[str]:
    """Mount points at or under ``root``, deepest first."""
    out = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4].replace("\\040", " ")
            if point == str(root) or point.startswith(str(root) + "/"):
                out.append(point)
    return sorted(set(out), key=lambda p: -p.count("/"))


def _run(*cmd: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise NodeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def _link_tree(src: Path, dst: Path) -> None:
    """``dst`` as a copy of ``src`` whose files are hard links, except containerd's bolt
    databases (written in place), which are real copies. Image blobs and unpacked layers
    are never written after they are committed, so every node can share them."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    _run("cp", "-al", str(src), str(dst), timeout=600)
    for db in dst.rglob("*.db"):
        db.unlink()
        shutil.copy2(src / db.relative_to(dst), db)


def image_store(key: str, store_root: Path, load: Callable[[Callable[..., Any]], object], timeout_s: float = 120,
                keep: int = 2) -> Path:
    """A containerd root with the node's images imported, made once per ``key`` under
    ``store_root`` (a temporary containerd imports them; the folder is renamed into place,
    so concurrent callers are safe). It starts as a hard-linked copy of the newest store,
    so a new trainer image adds only its project layer (torch's layer is found, not
    unpacked again). Nodes hard-link it too (``_link_tree``): a cluster start imports
    nothing, and the ~6 GB trainer image takes no disk per cluster. The newest ``keep``
    stores are kept."""
    final = store_root / key
    if (final / "root").is_dir():
        return final / "root"
    store_root.mkdir(parents=True, exist_ok=True)
    previous = _stores(store_root)
    tmp = Path(tempfile.mkdtemp(dir=store_root, prefix=".new-"))
    if previous:
        _link_tree(previous[-1] / "root", tmp / "containerd" / "root")
    node = RealNode(tmp)
    node.cfg = NodeConfig(cluster="image-store", root=str(tmp), subnet="10.99.255.0/24", kubelet_port=0,
                          kubelet_healthz_port=0, sandbox_image="", helper_image="")
    try:
        node._start_containerd(node.cfg, timeout_s)
        load(node.ctr)
        pids = procs.pids_mentioning(str(tmp))
        procs.terminate(pids, grace_s=30)
        node._reap()
        for point in _mounts_under(tmp):
            _run("umount", "-l", point, check=False)
        keep_root = tmp / "containerd" / "root"
        try:
            keep_root.rename(tmp / "root")
            tmp.rename(final)
        except OSError:
            if not (final / "root").is_dir():
                raise
    finally:
        if tmp.exists():
            procs.terminate(procs.pids_mentioning(str(tmp)), grace_s=10)
            node._reap()
            shutil.rmtree(tmp, ignore_errors=True)
    for old in _stores(store_root)[:-keep]:
        if old != final:
            shutil.rmtree(old, ignore_errors=True)
    return final / "root"


def _stores(store_root: Path) -> list[Path]:
    """Finished image stores, oldest first."""
    done = [p for p in store_root.iterdir() if not p.name.startswith(".") and (p / "root").is_dir()]
    return sorted(done, key=lambda p: p.stat().st_mtime)


def subnets_in_use() -> set[str]:
    """/24s of SUBNET_POOL that an interface of this machine already holds."""
    taken = set()
    for line in _run("ip", "-4", "-o", "addr", "show", check=False).stdout.splitlines():
        fields = line.split()
        if "inet" in fields:
            iface = ipaddress.ip_interface(fields[fields.index("inet") + 1])
            if iface.ip in nodeconfig.SUBNET_POOL:
                taken.add(str(ipaddress.ip_network(f"{iface.ip}/24", strict=False)))
    return taken


class RealNode:
    """The real node of one local cluster; ``root`` is <cluster state>/node."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cfg: NodeConfig | None = None
        self.procs: list[subprocess.Popen[bytes]] = []
        """Processes this object started (the owner reaps them; ``stop`` does too)."""
        path = root / "node.json"
        if path.exists():
            self.cfg = NodeConfig.from_json(path.read_text())

    # ---- start ------------------------------------------------------------------
    def start(self, cluster: str, kubeconfig: Path, bin_dir: Path, kubectl: Callable[..., Any], *,
              busybox: str, images_root: Path, client_ca: Path, timeout_s: float) -> NodeConfig:
        """Start every part; on any failure stop what was started and raise NodeError.

        ``busybox`` is the sandbox and helper image; ``images_root`` a containerd root
        holding the node's images (``image_store``), hard-linked into this node's own;
        ``client_ca`` the CA whose client certificates the kubelet accepts (the API server's)."""
        self.root.mkdir(parents=True, exist_ok=True)
        cfg = NodeConfig(cluster=cluster, root=str(self.root), subnet=nodeconfig.pick_subnet(subnets_in_use()),
                         kubelet_port=procs.free_port(), kubelet_healthz_port=procs.free_port(),
                         sandbox_image=busybox, helper_image=busybox)
        self.cfg = cfg
        (self.root / "node.json").write_text(cfg.to_json())
        try:
            self._bridge(cfg)
            _link_tree(images_root, cfg.path("containerd", "root"))
            self._start_containerd(cfg, timeout_s)
            self._start_kubelet(cfg, kubeconfig, bin_dir, client_ca=client_ca, timeout_s=timeout_s, kubectl=kubectl)
            self._start_coredns(cfg, kubeconfig, bin_dir)
            self._start_localpath(cfg, kubeconfig, bin_dir, kubectl)
        except BaseException:
            self.stop()
            raise
        return cfg

    def _spawn(self, name: str, cmd: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        with (self.root / f"{name}.log").open("ab") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                    env={**os.environ, **(env or {})})
        self.procs.append(proc)
        return proc

    def _bridge(self, cfg: NodeConfig) -> None:
        """The bridge with the gateway address exists before anything binds to it."""
        prefix = ipaddress.ip_network(cfg.subnet).prefixlen
        _run("ip", "link", "add", cfg.bridge, "type", "bridge")
        _run("ip", "addr", "add", f"{cfg.gateway}/{prefix}", "dev", cfg.bridge)
        _run("ip", "link", "set", cfg.bridge, "up")

    def _start_containerd(self, cfg: NodeConfig, timeout_s: float) -> None:
        for sub in ("containerd/root", "cni/net.d", "cni/ipam", "runc", "pod-logs", "volumes", "kubelet"):
            cfg.path(sub).mkdir(parents=True, exist_ok=True)
        cfg.path("containerd", "config.toml").write_text(nodeconfig.containerd_config(cfg))
        cfg.path("cni", "net.d", "10-statictrain.conflist").write_text(json.dumps(nodeconfig.cni_conflist(cfg)))
        proc = self._spawn("containerd", ["containerd", "--config", str(cfg.path("containerd", "config.toml"))])
        self._wait(lambda: proc.poll() is None and self.ctr("version", check=False).returncode == 0,
                   timeout_s, "containerd to answer", lambda: proc.poll() is not None)

    def ctr(self, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """``ctr`` against this node's containerd, in the Kubernetes namespace."""
        assert self.cfg is not None
        return _run("ctr", "--address", str(self.cfg.containerd_socket), "-n", "k8s.io", *args,
                    check=check, timeout=timeout)

    def _start_kubelet(self, cfg: NodeConfig, kubeconfig: Path, bin_dir: Path, *, client_ca: Path,
                       timeout_s: float, kubectl: Callable[..., Any]) -> None:
        for d in _cgroup_dirs(cfg.cgroup_root):
            d.mkdir(parents=True, exist_ok=True)
            for name in ("cpuset.cpus", "cpuset.mems"):  # v1 cpusets start empty: inherit the root's
                if (d / name).exists() and not (d / name).read_text().strip():
                    (d / name).write_text((d.parent / name).read_text())
        cfg.path("resolv.conf").write_text(f"nameserver {cfg.gateway}\n")
        cfg.path("kubelet-config.yaml").write_text(yaml.safe_dump(nodeconfig.kubelet_config(cfg, client_ca)))
        proc = self._spawn("kubelet", [
            str(bin_dir / "kubelet"),
            f"--config={cfg.path('kubelet-config.yaml')}",
            f"--kubeconfig={kubeconfig}",
            f"--root-dir={cfg.path('kubelet')}",
            f"--cert-dir={cfg.path('kubelet', 'pki')}",
            f"--hostname-override={cfg.node_name}",
            f"--node-ip={cfg.gateway}",
            f"--node-labels={nodeconfig.REAL_NODE_LABEL}=true",
            "--register-with-taints={key}={value}:{effect}".format(**nodeconfig.REAL_NODE_TAINT),
            "--v=1",
        ])

        def ready() -> bool:
            out = kubectl("get", "node", cfg.node_name, "-o", "json", check=False)
            if out.returncode != 0:
                return False
            conds = json.loads(out.stdout).get("status", {}).get("conditions", [])
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)

        self._wait(ready, timeout_s, f"node {cfg.node_name} to become Ready", lambda: proc.poll() is not None)

    def _start_coredns(self, cfg: NodeConfig, kubeconfig: Path, bin_dir: Path) -> None:
        cfg.path("Corefile").write_text(nodeconfig.corefile(cfg, kubeconfig))
        proc = self._spawn("coredns", [str(bin_dir / "coredns"), "-conf", str(cfg.path("Corefile"))])
        time.sleep(0.5)
        if proc.poll() is not None:
            raise NodeError(f"CoreDNS exited at start (code {proc.returncode}); log: {self.root / 'coredns.log'}")

    def _start_localpath(self, cfg: NodeConfig, kubeconfig: Path, bin_dir: Path,
                         kubectl: Callable[..., Any]) -> None:
        kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(nodeconfig.storage_manifests(cfg)))
        cfg.path("localpath-config.json").write_text(json.dumps(nodeconfig.localpath_config(cfg)))
        cfg.path("localpath-helper-pod.yaml").write_text(yaml.safe_dump(nodeconfig.localpath_helper_pod(cfg)))
        proc = self._spawn("local-path-provisioner", [
            str(bin_dir / "local-path-provisioner"), "start",
            "--config", str(cfg.path("localpath-config.json")),
            "--kubeconfig", str(kubeconfig),
            "--namespace", nodeconfig.LOCAL_PATH_NAMESPACE,
            "--provisioner-name", nodeconfig.LOCAL_PATH_PROVISIONER,
            "--helper-image", cfg.helper_image,
            "--helper-pod-file", str(cfg.path("localpath-helper-pod.yaml")),
            "--service-account-name", "default",
        ])
        time.sleep(0.5)
        if proc.poll() is not None:
            raise NodeError(f"local-path-provisioner exited at start (code {proc.returncode}); "
                            f"log: {self.root / 'local-path-provisioner.log'}")

    # ---- stop -------------------------------------------------------------------
    def stop(self) -> None:
        """Remove everything of this node; safe to call twice and after a crash."""
        cfg = self.cfg
        if cfg is None:
            shutil.rmtree(self.root, ignore_errors=True)
            return
        netns = self._our_netns(cfg)
        # 1. Every process of the node: our daemons and shims name the folder; pods' by cgroup.
        for _ in range(20):
            pids = sorted(set(procs.pids_mentioning(str(self.root))) | set(self._cgroup_pids(cfg)))
            if not pids:
                break
            procs.terminate(pids, grace_s=5)
        # 2. Mounts (container rootfs, shm, volumes, netns bind mounts), deepest first.
        for point in _mounts_under(self.root):
            _run("umount", "-l", point, check=False)
        for ns in netns:
            _run("umount", "-l", str(ns), check=False)
            with contextlib.suppress(OSError):
                ns.unlink()
        # 3. cgroups (deepest first, in every hierarchy), the bridge, the folder.
        for top in _cgroup_dirs(cfg.cgroup_root):
            if top.is_dir():
                for d in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                    with contextlib.suppress(OSError):
                        d.rmdir()
                with contextlib.suppress(OSError):
                    top.rmdir()
        _run("ip", "link", "del", cfg.bridge, check=False)
        shutil.rmtree(self.root, ignore_errors=True)
        self._reap()
        self.cfg = None

    def _reap(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        self.procs.clear()

    @staticmethod
    def _cgroup_pids(cfg: NodeConfig) -> list[int]:
        pids: set[int] = set()
        for top in _cgroup_dirs(cfg.cgroup_root):
            for procs_file in top.rglob("cgroup.procs") if top.is_dir() else []:
                with contextlib.suppress(OSError, ValueError):
                    pids.update(int(x) for x in procs_file.read_text().split())
        return sorted(pids)

    @staticmethod
    def _our_netns(cfg: NodeConfig) -> list[Path]:
        """Network namespaces (containerd 1.6 keeps them in /var/run/netns) holding an address of our subnet."""
        found = []
        net = ipaddress.ip_network(cfg.subnet)
        for ns in sorted(NETNS_DIR.glob("cni-*")) if NETNS_DIR.is_dir() else []:
            out = _run("ip", "netns", "exec", ns.name, "ip", "-4", "-o", "addr", "show", check=False).stdout
            addrs = [f.split()[f.split().index("inet") + 1] for f in out.splitlines() if "inet" in f.split()]
            if any(ipaddress.ip_interface(a).ip in net for a in addrs):
                found.append(ns)
        return found

    def running(self) -> bool:
        return self.cfg is not None and bool(procs.pids_mentioning(str(self.root / "kubelet-config.yaml")))

    # ---- helpers ------------------------------------------------------------------
    def _wait(self, check: Callable[[], bool], timeout_s: float, what: str, dead: Callable[[], bool]) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if dead():
                raise NodeError(f"gave up waiting for {what}: the process exited; logs under {self.root}")
            with contextlib.suppress(subprocess.TimeoutExpired, OSError):
                if check():
                    return
            time.sleep(0.5)
        raise NodeError(f"timed out after {timeout_s:.0f}s waiting for {what}; logs under {self.root}")

