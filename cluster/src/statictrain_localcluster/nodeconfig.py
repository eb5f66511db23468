"""Configuration files of the real node (pure: values in, file contents out).

One cluster's node owns everything under its state folder: containerd's root,
state and socket, runc's state, the CNI config and IP allocations, the
kubelet's root, certificates, pod logs and cgroup root, CoreDNS's Corefile and
the local-path provisioner's volumes. Its bridge name and subnet are its own,
so several clusters run side by side without seeing each other's pods.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

CNI_BIN_DIR = "/usr/lib/cni"  # Debian's containernetworking-plugins
SUBNET_POOL = ipaddress.ip_network("10.99.0.0/16")  # one /24 per cluster, inside this machine only
REAL_NODE_LABEL = "statictrain.io/real-node"
REAL_NODE_TAINT = {"key": REAL_NODE_LABEL, "value": "true", "effect": "NoSchedule"}
"""Only pods that ask for the real node land there (tolerate it and select its label): pods of
other tests keep going to kwok nodes, and nothing tries to pull an image from the internet."""
REAL_NODE_TOLERATION = {"key": REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}
LOCAL_PATH_NAMESPACE = "local-path-storage"
LOCAL_PATH_PROVISIONER = "statictrain.local/local-path"
STORAGE_CLASS = "statictrain-local"
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"


@dataclass(frozen=True)
class NodeConfig:
    """Everything that names this cluster's node; saved as JSON so stop() works after a crash."""

    cluster: str
    root: str
    """The node's state folder (<cluster state>/node)."""
    subnet: str
    """The pods' /24, e.g. 10.99.7.0/24; the bridge holds its first address."""
    kubelet_port: int
    kubelet_healthz_port: int
    sandbox_image: str
    helper_image: str

    @property
    def node_name(self) -> str:
        return f"{self.cluster}-node"

    @property
    def gateway(self) -> str:
        return str(next(ipaddress.ip_network(self.subnet).hosts()))

    @property
    def bridge(self) -> str:
        """A bridge name of at most 15 characters, unique per subnet."""
        return "stbr" + self.subnet.split(".")[2]

    @property
    def cgroup_root(self) -> str:
        return f"/statictrain-{self.cluster}"

    def path(self, *parts: str) -> Path:
        return Path(self.root, *parts)

    @property
    def containerd_socket(self) -> Path:
        return self.path("containerd", "containerd.sock")

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> NodeConfig:
        return cls(**json.loads(text))


def pick_subnet(taken: set[str]) -> str:
    """The first /24 of SUBNET_POOL whose network address is not in ``taken``."""
    for net in SUBNET_POOL.subnets(new_prefix=24):
        if net.network_address.packed[2] == 0:
            continue  # 10.99.0.0/24 is left out: easy to mistake for a default
        if str(net) not in taken:
            return str(net)
    raise RuntimeError(f"every /24 of {SUBNET_POOL} is in use by another local cluster")


def containerd_config(cfg: NodeConfig) -> str:
    """containerd's config.toml (version 2): own root, state, socket, runc root and CNI folders."""
    p = cfg.path
    return f"""version = 2
root = "{p('containerd', 'root')}"
state = "{p('containerd', 'state')}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = "{cfg.containerd_socket}"

[ttrpc]
  address = "{cfg.containerd_socket}.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "{p('containerd', 'opt')}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{cfg.sandbox_image}"
  # This VM does not let root lower oom_score_adj; without this every sandbox fails.
  restrict_oom_score_adj = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{p('runc')}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{p('cni', 'net.d')}"
    max_conf_num = 1
"""


def cni_conflist(cfg: NodeConfig) -> dict[str, Any]:
    """A bridge network on this cluster's subnet; no masquerading: pod traffic stays on the machine."""
    return {
        "cniVersion": "0.4.0",
        "name": f"statictrain-{cfg.cluster}",
        "plugins": [
            {
                "type": "bridge",
                "bridge": cfg.bridge,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": cfg.subnet, "gateway": cfg.gateway}]],
                    "dataDir": str(cfg.path("cni", "ipam")),
                },
            }
        ],
    }


def kubelet_config(cfg: NodeConfig, client_ca: Path) -> dict[str, Any]:
    """KubeletConfiguration for cgroup v1 without systemd, on ports and folders of its own.
    Its API (logs, exec) answers only clients with a certificate of ``client_ca`` (the API server)."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": cfg.gateway,
        "port": cfg.kubelet_port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": cfg.kubelet_healthz_port,
        "containerRuntimeEndpoint": f"unix://{cfg.containerd_socket}",
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": cfg.cgroup_root,
        "failCgroupV1": False,
        "failSwapOn": False,
        "makeIPTablesUtilChains": False,
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(client_ca)}},
        "authorization": {"mode": "AlwaysAllow"},
        "clusterDNS": [cfg.gateway],
        "clusterDomain": "cluster.local",
        "resolvConf": str(cfg.path("resolv.conf")),
        "podLogsDir": str(cfg.path("pod-logs")),
        "volumePluginDir": str(cfg.path("kubelet", "volume-plugins")),
        "serializeImagePulls": False,
        # Images are imported, never pulled: never collect them.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                         "nodefs.inodesFree": "1%"},
        "shutdownGracePeriod": "0s",
        "nodeStatusUpdateFrequency": "5s",
        "syncFrequency": "10s",
    }


def corefile(cfg: NodeConfig, kubeconfig: Path) -> str:
    """CoreDNS on the bridge address: cluster.local from the API server; nothing forwarded outside."""
    return f"""cluster.local:53 in-addr.arpa:53 {{
    bind {cfg.gateway}
    errors
    kubernetes cluster.local in-addr.arpa {{
        kubeconfig {kubeconfig}
        pods insecure
        ttl 5
    }}
}}
.:53 {{
    bind {cfg.gateway}
    errors
}}
"""


def localpath_config(cfg: NodeConfig) -> dict[str, Any]:
    """One shared folder on the node (ReadWriteMany and ReadWriteOnce claims both work)."""
    return {"sharedFileSystemPath": str(cfg.path("volumes")), "storageClassConfigs": {}}


def localpath_helper_pod(cfg: NodeConfig) -> dict[str, Any]:
    """The pod the provisioner runs to create and delete a volume's folder, pinned to the real node."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "helper-pod"},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": cfg.node_name},
            "automountServiceAccountToken": False,
            "containers": [{"name": "helper-pod", "image": cfg.helper_image, "imagePullPolicy": "Never"}],
        },
    }


LOCALPATH_SCRIPTS = {
    "setup": '#!/bin/sh\nset -eu\nmkdir -m 0777 -p "$VOL_DIR"\n',
    "teardown": '#!/bin/sh\nset -eu\nrm -rf "$VOL_DIR"\n',
}


def storage_manifests(cfg: NodeConfig) -> list[dict[str, Any]]:
    """The provisioner's namespace and scripts, and the cluster's default StorageClass."""
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LOCAL_PATH_NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "local-path-config", "namespace": LOCAL_PATH_NAMESPACE},
            "data": {**LOCALPATH_SCRIPTS, "config.json": json.dumps(localpath_config(cfg))},
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": STORAGE_CLASS, "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}},
            "provisioner": LOCAL_PATH_PROVISIONER,
            # Immediate: the folder is made on the real node even for claims of pods on kwok nodes.
            "volumeBindingMode": "Immediate",
            "reclaimPolicy": "Delete",
        },
    ]
