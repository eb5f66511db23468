"""The real node's configuration files (pure): one cluster's parts never collide with another's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from statictrain_localcluster import nodeconfig, podtargets, realnode
from statictrain_localcluster.nodeconfig import NodeConfig


def cfg(cluster: str = "st-test-1", subnet: str = "10.99.7.0/24") -> NodeConfig:
    return NodeConfig(cluster=cluster, root=f"/cache/clusters/{cluster}/node", subnet=subnet, kubelet_port=41001,
                      kubelet_healthz_port=41002, sandbox_image="statictrain.local/busybox:1",
                      helper_image="statictrain.local/busybox:1")


def test_two_clusters_share_no_path_port_bridge_subnet_or_cgroup() -> None:
    a = cfg("st-a", nodeconfig.pick_subnet(set()))
    b = cfg("st-b", nodeconfig.pick_subnet({a.subnet}))
    assert a.subnet != b.subnet and a.bridge != b.bridge and a.cgroup_root != b.cgroup_root
    assert len(a.bridge) <= 15  # Linux interface names
    for c in (a, b):
        text = nodeconfig.containerd_config(c)
        assert f'root = "{c.root}/containerd/root"' in text
        assert f'address = "{c.root}/containerd/containerd.sock"' in text
        assert f'Root = "{c.root}/runc"' in text
        assert "restrict_oom_score_adj = true" in text and "SystemdCgroup = false" in text
        kubelet = nodeconfig.kubelet_config(c, Path("/pki/ca.crt"))
        assert kubelet["cgroupRoot"] == c.cgroup_root and kubelet["podLogsDir"].startswith(c.root)
        assert kubelet["clusterDNS"] == [c.gateway]
        assert kubelet["authentication"]["anonymous"] == {"enabled": False}


def test_pick_subnet_skips_taken_and_fails_when_full() -> None:
    first = nodeconfig.pick_subnet(set())
    assert first == "10.99.1.0/24"
    assert nodeconfig.pick_subnet({first}) == "10.99.2.0/24"
    every = {f"10.99.{i}.0/24" for i in range(256)}
    with pytest.raises(RuntimeError, match="in use"):
        nodeconfig.pick_subnet(every)


def test_pod_network_stays_on_the_machine() -> None:
    c = cfg()
    (bridge,) = nodeconfig.cni_conflist(c)["plugins"]
    assert bridge["ipMasq"] is False  # nothing is masqueraded to the outside
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.99.7.0/24", "gateway": "10.99.7.1"}]]
    assert bridge["ipam"]["dataDir"].startswith(c.root)
    corefile = nodeconfig.corefile(c, Path("/k/kubeconfig"))
    assert "forward" not in corefile  # cluster names only; nothing is asked of outside resolvers
    assert corefile.count("bind 10.99.7.1") == 2


def test_volume_helper_pods_are_pinned_to_the_real_node_and_the_class_is_default() -> None:
    c = cfg()
    helper = nodeconfig.localpath_helper_pod(c)
    assert helper["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "st-test-1-node"}
    assert helper["spec"]["automountServiceAccountToken"] is False
    kinds: dict[str, Any] = {m["kind"]: m for m in nodeconfig.storage_manifests(c)}
    sc = kinds["StorageClass"]
    assert sc["metadata"]["annotations"][nodeconfig.DEFAULT_CLASS_ANNOTATION] == "true"
    assert sc["volumeBindingMode"] == "Immediate"
    assert nodeconfig.localpath_config(c)["sharedFileSystemPath"] == f"{c.root}/volumes"


def test_config_round_trips_through_json() -> None:
    c = cfg()
    assert NodeConfig.from_json(c.to_json()) == c


def test_image_store_is_hard_linked_but_databases_are_copied(tmp_path: Path) -> None:
    src = tmp_path / "store"
    (src / "io.containerd.content.v1.content/blobs/sha256").mkdir(parents=True)
    blob = src / "io.containerd.content.v1.content/blobs/sha256/abc"
    blob.write_bytes(b"layer")
    (src / "io.containerd.metadata.v1.bolt").mkdir()
    db = src / "io.containerd.metadata.v1.bolt/meta.db"
    db.write_bytes(b"bolt")
    dst = tmp_path / "node/containerd/root"
    realnode._link_tree(src, dst)
    assert (dst / blob.relative_to(src)).stat().st_ino == blob.stat().st_ino  # shared, no copy
    copied = dst / db.relative_to(src)
    assert copied.read_bytes() == b"bolt" and copied.stat().st_ino != db.stat().st_ino  # written in place: own copy


def test_pod_targets_are_the_metrics_ports_of_running_pods() -> None:
    def pod(name: str, phase: str, ip: str | None, deleting: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
        if deleting:
            meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        return {"metadata": meta, "status": {"phase": phase, **({"podIP": ip} if ip else {})},
                "spec": {"initContainers": [{"name": "sidecar", "ports": [{"name": "metrics", "containerPort": 9400}]}],
                         "containers": [{"name": "trainer",
                                         "ports": [{"name": "rendezvous", "containerPort": 29500}]}]}}

    got = podtargets.targets([pod("a", "Running", "10.99.1.5"), pod("b", "Pending", None),
                              pod("c", "Succeeded", "10.99.1.6"), pod("d", "Running", "10.99.1.7", deleting=True)])
    assert got == {"pod_ns_a_sidecar": ("10.99.1.5:9400", {"namespace": "ns", "pod": "a", "pod_uid": "uid-a"}),
                   "pod_ns_d_sidecar": ("10.99.1.7:9400", {"namespace": "ns", "pod": "d", "pod_uid": "uid-d"})}


def test_missing_packages_are_named_with_the_command_that_installs_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(realnode, "_have", lambda thing: not thing.endswith(("runc", "buildah")))
    problems = realnode.missing_prerequisites()
    assert problems and "apt-get install -y buildah runc" in problems[0], problems
