"""A real local Kubernetes control plane with fake GPU nodes and Prometheus.

kube-apiserver, etcd, kube-controller-manager and kube-scheduler are the real
binaries (built by build-binaries.sh); kwok fakes only the nodes and the pod
lifecycle; Prometheus is Debian's. kwokctl's binary runtime runs the control
plane as local processes; this module adds the node pool, the statictrain
scheduler profile, Prometheus and (by default) a real node - kubelet,
containerd, runc, a CNI bridge, CoreDNS and a volume provisioner (realnode.py) -
and tears everything down on stop or on a failed start. When this machine
cannot run a real node (a package or kernel feature missing), the cluster says
which and how to get it, and starts with kwok nodes only.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from statictrain_localcluster import images, kueue, nodepool, procs, prometheus, realnode
from statictrain_localcluster.paths import REPO_FILES, cache_root

__all__ = ["REPO_FILES", "ClusterError", "LocalCluster", "State", "build_binaries", "cache_root", "state_dir"]


class ClusterError(RuntimeError):
    """The cluster could not be started or reached; the message says what to do."""


class ComponentDiedError(ClusterError):
    """A control-plane process exited: waiting longer cannot help."""


def state_dir(name: str) -> Path:
    return cache_root() / "clusters" / name


def build_binaries(log: Any = None, script: str = "build-binaries.sh") -> Path:
    """Build (or find cached) control-plane binaries (or the node's: build-node.sh); return the bin folder."""
    path = resources.files("statictrain_localcluster") / script
    if not shutil.which("bash"):
        raise ClusterError("bash is needed to build the local cluster's binaries")
    proc = subprocess.run(["bash", str(path)], stdout=subprocess.PIPE, stderr=log, text=True, check=False)
    if proc.returncode != 0:
        raise ClusterError(f"{script} failed (see the messages above); fix the cause and run "
                           "'make cluster-build' again")
    if not proc.stdout.strip():
        raise ClusterError(f"{script} built nothing here (it said why above)")
    return Path(proc.stdout.strip().splitlines()[-1])


@dataclass
class State:
    name: str
    bin_dir: str
    prometheus_port: int
    extender_port: int
    prometheus_pid: int = 0
    started: float = 0.0
    real_node: str = ""
    """Name of the real node when it runs."""
    real_node_problem: str = ""
    """Why there is no real node (asked for but not possible here)."""
    node_join_s: float = 0.0
    """Seconds from starting the node's parts to the node being Ready."""
    images: dict[str, str] = field(default_factory=dict)
    """Images in the real node's containerd, by Dockerfile target (and "busybox")."""
    netpol_bin: str = ""
    """Folder of the NetworkPolicy enforcer (kube-network-policies) built for the real node;
    empty when this machine cannot run it (netpol.Enforcer starts it on demand)."""
    kueue_bin: str = ""
    """Folder of the Kueue build when Kueue runs (start_kueue)."""
    kueue_webhook_port: int = 0
    kueue_health_port: int = 0


class LocalCluster:
    """One named local cluster. Construct, then start() or attach to a running one."""

    def __init__(self, name: str = "statictrain", nodepool_file: Path | None = None,
                 scheduler_config: Path | None = None) -> None:
        if not name.replace("-", "").isalnum() or name != name.lower():
            raise ClusterError(f"cluster name {name!r}: use lowercase letters, digits and '-'")
        self.name = name
        self.root = state_dir(name)
        self.nodepool_file = nodepool_file or REPO_FILES / "deploy/local-cluster/nodepool.yaml"
        self.scheduler_config = scheduler_config or REPO_FILES / "deploy/scheduler/kube-scheduler-config.yaml"
        self.kubeconfig = self.root / "kubeconfig"
        self._state: State | None = None
        self._children: list[subprocess.Popen[bytes]] = []  # reaped in stop()

    # ---- paths and environment -------------------------------------------------
    @property
    def state(self) -> State:
        if self._state is None:
            path = self.root / "state.json"
            if not path.exists():
                raise ClusterError(f"cluster {self.name!r} is not running: start it with "
                                   f"'statictrain-cluster start --name {self.name}'")
            self._state = State(**json.loads(path.read_text()))
        return self._state

    @property
    def bin_dir(self) -> Path:
        return Path(self.state.bin_dir)

    @property
    def pki_dir(self) -> Path:
        """kwokctl's certificates of this cluster (ca.crt, admin.crt, admin.key)."""
        return self.root / "kwok" / "clusters" / self.name / "pki"

    @property
    def prometheus_url(self) -> str:
        return f"http://127.0.0.1:{self.state.prometheus_port}"

    @property
    def extender_port(self) -> int:
        return self.state.extender_port

    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["KUBECONFIG"] = str(self.kubeconfig)
        env["PATH"] = f"{self.state.bin_dir}{os.pathsep}{env.get('PATH', '')}"
        env["KWOK_WORKDIR"] = str(self.root / "kwok")
        return env

    # ---- tools ---------------------------------------------------------------
    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return self._tool("kubectl", args, input, check, timeout)

    def helm(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return self._tool("helm", args, None, check, timeout)

    def _tool(self, tool: str, args: tuple[str, ...], input: str | None, check: bool,
              timeout: float) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([str(self.bin_dir / tool), *args], input=input, capture_output=True, text=True,
                              env=self.env, timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise ClusterError(f"{tool} {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc

    def nodes(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = json.loads(self.kubectl("get", "nodes", "-o", "json").stdout)["items"]
        return items

    # ---- Prometheus targets --------------------------------------------------
    def add_scrape_target(self, job: str, address: str, labels: dict[str, str] | None = None, *,
                          pod: bool = False) -> None:
        """Scrape ``address``; with ``pod`` as a pod is scraped: ``labels`` (namespace, pod, pod_uid) win over
        the exporter's own (prometheus.POD_TARGETS)."""
        targets = self.root / "prometheus" / "targets"
        prometheus.write_target(targets / prometheus.POD_TARGETS if pod else targets, job, address, labels or {})

    def remove_scrape_target(self, job: str) -> None:
        targets = self.root / "prometheus" / "targets"
        for folder in (targets, targets / prometheus.POD_TARGETS):
            prometheus.target_file(folder, job).unlink(missing_ok=True)

    # ---- lifecycle -----------------------------------------------------------
    def start(self, bin_dir: Path, prometheus_port: int | None = None, timeout_s: float = 180,
              log: Any = None, real_node: bool = True, *, with_kueue: bool = False) -> None:
        """Start everything or nothing: on any failure, what was started is stopped.

        With ``real_node`` a real node joins too when this machine can run one;
        otherwise the reason is logged and kept in the state (``real_node_problem``).
        With ``with_kueue`` Kueue and its queues are installed too (start_kueue)."""
        pools = self._read_nodepool()
        prom_bin = self._check_prerequisites(bin_dir, prometheus_port)
        if (self.root / "state.json").exists():
            if self.running():
                raise ClusterError(f"cluster {self.name!r} is already running; stop it with "
                                   f"'statictrain-cluster stop --name {self.name}' or pick another --name")
            self.stop()  # leftovers of a crashed run
        self.root.mkdir(parents=True, exist_ok=True)
        self._state = State(self.name, str(bin_dir), prometheus_port or procs.free_port(), procs.free_port(),
                            started=time.time())
        self._save()
        try:
            self._start_control_plane(timeout_s, log)
            self._create_nodes(pools, timeout_s)
            self._start_prometheus(prom_bin)
            if real_node:
                self._start_real_node(timeout_s, log)
            if with_kueue:
                self.start_kueue(timeout_s, log)
        except BaseException:
            self.stop()
            raise

    def _read_nodepool(self) -> list[nodepool.Pool]:
        try:
            doc = yaml.safe_load(self.nodepool_file.read_text())
        except OSError as e:
            raise ClusterError(f"cannot read node pool file {self.nodepool_file}: {e.strerror}") from None
        except yaml.YAMLError as e:
            raise ClusterError(f"node pool file {self.nodepool_file} is not valid YAML: {e}") from None
        try:
            return nodepool.parse(doc)
        except nodepool.NodePoolError as e:
            raise ClusterError(f"node pool file {self.nodepool_file}: {e}") from None

    def _check_prerequisites(self, bin_dir: Path, prometheus_port: int | None) -> Path:
        missing = [b for b in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd",
                               "kwok", "kwokctl", "helm") if not (bin_dir / b).exists()]
        if missing:
            raise ClusterError(f"missing binaries in {bin_dir}: {', '.join(missing)}; run 'make cluster-build'")
        if prometheus_port is not None and procs.port_in_use(prometheus_port):
            raise ClusterError(f"port {prometheus_port} for Prometheus is in use by another process: "
                               "free it or choose another port (or leave it out to pick a free one)")
        try:
            return prometheus.find_binary()
        except FileNotFoundError as e:
            raise ClusterError(str(e)) from None

    def _start_control_plane(self, timeout_s: float, log: Any) -> None:
        sched = self.scheduler_config.read_text().replace("EXTENDER_PORT", str(self.state.extender_port))
        (self.root / "kube-scheduler-config.yaml").write_text(sched)
        package = resources.files("statictrain_localcluster")
        (self.root / "kwok-config.yaml").write_text((package / "stages.yaml").read_text())
        kwokctl = yaml.safe_load((package / "kwokctl.yaml").read_text())
        # The API server reaches the real node's kubelet (logs, exec) by its address, with a
        # client certificate the kubelet trusts (kwokctl's CA, see realnode.py).
        pki = self.pki_dir
        kwokctl["componentsPatches"].append({"name": "kube-apiserver", "extraArgs": [
            {"key": "kubelet-preferred-address-types", "value": "InternalIP,Hostname"},
            {"key": "kubelet-client-certificate", "value": str(pki / "admin.crt")},
            {"key": "kubelet-client-key", "value": str(pki / "admin.key")},
        ]})
        (self.root / "kwokctl-config.yaml").write_text(yaml.safe_dump(kwokctl))
        b = self.bin_dir
        cmd = [
            str(b / "kwokctl"), "create", "cluster", "--name", self.name, "--runtime", "binary",
            "--kube-apiserver-binary", str(b / "kube-apiserver"),
            "--kube-controller-manager-binary", str(b / "kube-controller-manager"),
            "--kube-scheduler-binary", str(b / "kube-scheduler"),
            "--kwok-controller-binary", str(b / "kwok"),
            "--etcd-binary", str(b / "etcd"),
            "--kube-scheduler-config", str(self.root / "kube-scheduler-config.yaml"),
            "--config", str(self.root / "kwok-config.yaml"),
            "--config", str(self.root / "kwokctl-config.yaml"),
            "--kube-authorization=true",
            "--kubeconfig", str(self.kubeconfig),
            "--wait", f"{int(timeout_s)}s",
        ]
        proc = subprocess.run(cmd, env=self.env, stdout=log, stderr=log, timeout=timeout_s + 60, check=False)
        if proc.returncode != 0:
            raise ClusterError(f"kwokctl could not start the control plane (exit {proc.returncode}); "
                               f"its logs are under {self.root / 'kwok'}")
        self._wait(lambda: self.kubectl("get", "--raw", "/readyz", check=False).returncode == 0,
                   timeout_s, "the API server to become ready")
        self._wait(self._control_plane_working, timeout_s,
                   "the controller manager to create the default ServiceAccount")

    def _control_plane_working(self) -> bool:
        """Every process kwokctl started is alive and the controller manager works: it has made the
        default namespace's ServiceAccount. (kwokctl's --wait does not see a component that exits
        right after starting, e.g. on a port another process took.)"""
        kwok = self.root / "kwok" / "clusters" / self.name
        dead = procs.dead_pidfiles(kwok / "pids")
        if dead:
            raise ComponentDiedError(f"{', '.join(dead)} exited after starting; see {kwok / 'logs'}/<name>.log "
                                "(a port taken by another process is the usual cause: start again)")
        return self.kubectl("get", "serviceaccount", "default", "-n", "default", check=False).returncode == 0

    def _create_nodes(self, pools: list[nodepool.Pool], timeout_s: float) -> None:
        manifests = nodepool.node_manifests(pools)
        doc = yaml.safe_dump_all(manifests)
        self.kubectl("apply", "--server-side", "-f", "-", input=doc)
        names = {m["metadata"]["name"] for m in manifests}

        def all_ready() -> bool:
            ready = {n["metadata"]["name"] for n in self.nodes()
                     if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))}
            return names <= ready

        self._wait(all_ready, timeout_s, f"{len(names)} nodes to become Ready")

    def _start_prometheus(self, binary: Path) -> None:
        root = self.root / "prometheus"
        root.mkdir(parents=True, exist_ok=True)
        proc = prometheus.start(binary, root, self.state.prometheus_port, self.root / "prometheus.log")
        self._children.append(proc)
        self.state.prometheus_pid = proc.pid
        self._save()
        try:
            prometheus.wait_ready(self.prometheus_url, proc)
        except (RuntimeError, TimeoutError) as e:
            raise ClusterError(f"{e}; log: {self.root / 'prometheus.log'}") from None

    # ---- Kueue ------------------------------------------------------------------
    def start_kueue(self, timeout_s: float = 180, log: Any = None,
                    queues: Path | None = None) -> None:
        """Install Kueue (CRDs, webhooks), start its manager and apply the queues
        (default deploy/local-cluster/kueue-queues.yaml). A no-op when it runs already."""
        st = self.state
        if st.kueue_health_port and kueue.ready(st.kueue_health_port):
            return
        kueue_bin = build_binaries(log, "build-kueue.sh")
        root = self.root / "kueue"
        root.mkdir(parents=True, exist_ok=True)
        st.kueue_bin, st.kueue_webhook_port, st.kueue_health_port = str(kueue_bin), procs.free_port(), procs.free_port()
        self._save()
        try:
            kueue.install(self.kubectl, kueue_bin / "config", root, st.kueue_webhook_port)
            proc = kueue.start(kueue_bin, root, self.kubeconfig, webhook_port=st.kueue_webhook_port,
                               health_port=st.kueue_health_port, log=self.root / "kueue.log")
        except kueue.KueueError as e:
            raise ClusterError(str(e)) from None
        self._children.append(proc)
        try:
            kueue.wait_ready(proc, st.kueue_health_port, st.kueue_webhook_port, timeout_s, self.root / "kueue.log")
            queues = queues or REPO_FILES / "deploy/local-cluster/kueue-queues.yaml"
            # The webhooks answer once the manager has injected its CA: retry until the apply passes them.
            self._wait(lambda: self.kubectl("apply", "--server-side", "-f", str(queues), check=False).returncode == 0,
                       timeout_s, f"Kueue to accept {queues.name}")
        except (kueue.KueueError, ClusterError) as e:
            procs.stop_process(proc, grace_s=10)
            st.kueue_health_port = 0
            self._save()
            raise ClusterError(f"{e}; Kueue's log: {self.root / 'kueue.log'}") from None

    # ---- the real node ---------------------------------------------------------
    def _start_real_node(self, timeout_s: float, log: Any) -> None:
        """Join a real node, or say why not and go on with kwok nodes only (never half a node)."""
        problems = realnode.missing_prerequisites()
        if problems:
            self.state.real_node_problem = "; ".join(problems)
            print(f"statictrain-cluster: no real node: {self.state.real_node_problem}. "
                  "Starting with kwok nodes only.", file=log or sys.stderr, flush=True)
            self._save()
            return
        node = realnode.RealNode(self.root / "node")
        try:
            node_bin = build_binaries(log, "build-node.sh")
            with contextlib.suppress(ClusterError):  # where the kernel cannot enforce, none (the script says why)
                self.state.netpol_bin = str(build_binaries(log, "build-netpol.sh"))
            built = images.node_images(log)
            store = realnode.image_store(images.store_key(built), cache_root() / "containerd-images",
                                         lambda ctr: [images.load(ctr, i) for i in built.values()])
            t0 = time.monotonic()
            cfg = node.start(self.name, self.kubeconfig, node_bin, self.kubectl, busybox=built["busybox"],
                             images_root=store, client_ca=self.pki_dir / "ca.crt", timeout_s=timeout_s)
            self._children += node.procs  # reaped in stop()
            self.state.node_join_s = round(time.monotonic() - t0, 2)
            self.state.real_node = cfg.node_name
            self.state.images = built
            self._start_pod_targets(cfg.node_name)
        except (realnode.NodeError, images.ImageError, ClusterError, OSError) as e:
            self.state.real_node_problem = str(e)
            print(f"statictrain-cluster: the real node did not start: {e}. Going on with kwok nodes only.",
                  file=log or sys.stderr, flush=True)
        self._save()

    def _start_pod_targets(self, node: str) -> None:
        """Prometheus scrapes the node's pods (metrics ports) through file_sd targets kept by podtargets.py."""
        with (self.root / "podtargets.log").open("ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "statictrain_localcluster.podtargets", "--kubectl",
                 str(self.bin_dir / "kubectl"), "--kubeconfig", str(self.kubeconfig), "--node", node,
                 "--targets", str(self.root / "prometheus/targets" / prometheus.POD_TARGETS)],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self._children.append(proc)

    def node(self) -> realnode.RealNode:
        """The running real node; ClusterError with the reason when there is none."""
        if not self.state.real_node:
            why = self.state.real_node_problem or "the cluster was started without one (--no-real-node)"
            raise ClusterError(f"cluster {self.name!r} has no real node: {why}")
        return realnode.RealNode(self.root / "node")

    def node_images(self) -> dict[str, str]:
        """The images the real node started with: Dockerfile targets (trainer, sidecar) and busybox."""
        self.node()
        return dict(self.state.images)

    def running(self) -> bool:
        try:
            return self.kubectl("get", "--raw", "/readyz", check=False, timeout=10).returncode == 0
        except (ClusterError, subprocess.TimeoutExpired, OSError):
            return False

    def detach(self) -> None:
        """Leave what this object started (e.g. Kueue on an attached cluster) running for the cluster's
        owner, who stops it by the cluster's name. Marked as handed over, so that Python does not warn
        "subprocess is still running" when the handles are collected."""
        for child in self._children:
            if child.poll() is None:
                child.returncode = 0  # handed over, not exited: the owner's stop() ends it
        self._children.clear()

    def stop(self) -> None:
        """Stop every process of this cluster and remove its state; safe to call twice."""
        if not self.root.exists():
            return
        # The real node first: its pods' processes, mounts, namespaces and bridge.
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            realnode.RealNode(self.root / "node").stop()
        with contextlib.suppress(ClusterError, OSError, subprocess.TimeoutExpired, TypeError):
            bin_dir = self.bin_dir
            subprocess.run([str(bin_dir / "kwokctl"), "delete", "cluster", "--name", self.name],
                           env=self.env, capture_output=True, timeout=120, check=False)
        # Whatever is left (Prometheus, a half-started component): every process
        # whose command line names this cluster's state folder.
        # Until two scans in a row find nothing: a process caught mid-fork or mid-exec
        # (empty command line) by one scan shows up in the next.
        quiet = 0
        for _ in range(20):
            pids = procs.pids_mentioning(str(self.root))
            if pids:
                procs.terminate(pids)
                quiet = 0
                continue
            quiet += 1
            if quiet == 2:
                break
            time.sleep(0.2)
        for child in self._children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=10)
        self._children.clear()
        shutil.rmtree(self.root, ignore_errors=True)
        self._state = None

    def status(self) -> dict[str, Any]:
        if not (self.root / "state.json").exists():
            return {"name": self.name, "running": False}
        out: dict[str, Any] = {"name": self.name, "running": self.running(), **asdict(self.state),
                               "kubeconfig": str(self.kubeconfig), "prometheus_url": self.prometheus_url,
                               "processes": len(procs.pids_mentioning(str(self.root)))}
        return out

    # ---- helpers -------------------------------------------------------------
    def _save(self) -> None:
        assert self._state is not None
        (self.root / "state.json").write_text(json.dumps(asdict(self._state)))

    @staticmethod
    def _wait(check: Any, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if check():
                    return
            except ComponentDiedError:
                raise
            except (ClusterError, subprocess.TimeoutExpired):
                pass
            time.sleep(0.5)
        raise ClusterError(f"timed out after {timeout_s:.0f}s waiting for {what}")
