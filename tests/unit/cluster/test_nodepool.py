"""Node pool file -> kwok nodes, and the errors a malformed file gets."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml
from statictrain import labels
from statictrain_localcluster import nodepool, prometheus

REPO = Path(__file__).resolve().parents[3]


def doc(**pool: Any) -> dict[str, Any]:
    base = {"name": "gpu", "instanceType": "g6.xlarge", "count": 1, "cpu": "4", "memory": "16Gi",
            "gpu": {"product": "NVIDIA-L4", "count": 1}}
    base.update(pool)
    return {"region": "us-east-1", "pools": [base]}


def test_shipped_pool_has_the_instance_types_of_the_issue() -> None:
    pools = nodepool.parse(yaml.safe_load((REPO / "deploy/local-cluster/nodepool.yaml").read_text()))
    types = {p.instance_type for p in pools}
    assert {"p5.48xlarge", "p4d.24xlarge", "g5.12xlarge", "g6.xlarge"} <= types
    assert {p.capacity_type for p in pools} == {"spot", "on-demand"}
    assert any(p.gpu is None for p in pools), "a few CPU nodes"


def test_gpu_node_manifest() -> None:
    [node] = nodepool.node_manifests(nodepool.parse(doc(capacityType="spot", zone="us-east-1b")))
    meta = node["metadata"]
    assert meta["name"] == "gpu-0"
    assert meta["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert meta["labels"][labels.GPU_PRODUCT] == "NVIDIA-L4"
    assert meta["labels"][labels.CAPACITY_TYPE] == "spot"
    assert meta["labels"][labels.ZONE] == "us-east-1b"
    assert meta["labels"][labels.INSTANCE_TYPE] == "g6.xlarge"
    assert node["status"]["capacity"][labels.GPU_RESOURCE] == "1"
    assert node["spec"]["taints"] == [nodepool.KWOK_TAINT]


def test_cpu_node_has_no_gpu_resource() -> None:
    d = doc(name="cpu", count=3)
    del d["pools"][0]["gpu"]
    nodes = nodepool.node_manifests(nodepool.parse(d))
    assert [n["metadata"]["name"] for n in nodes] == ["cpu-0", "cpu-1", "cpu-2"]
    assert all(labels.GPU_RESOURCE not in n["status"]["capacity"] for n in nodes)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        pytest.param("just a string", "expected a mapping", id="not-a-mapping"),
        pytest.param({"region": "r", "pools": []}, "non-empty list", id="no-pools"),
        pytest.param({"pools": [{}]}, "missing field 'region'", id="no-region"),
        pytest.param(doc(count=-1), "count must be between 0 and 10000", id="negative-count"),
        pytest.param(doc(count="two"), "'count' must be an integer", id="count-not-int"),
        pytest.param(doc(capacityType="reserved"), "capacityType must be one of", id="bad-capacity"),
        pytest.param(doc(memory="lots"), "is not a Kubernetes quantity", id="bad-memory"),
        pytest.param(doc(name="GPU_Pool"), "lowercase letters", id="bad-name"),
        pytest.param(doc(gpu={"product": "NVIDIA-L4", "count": 0}), "gpu.count must be between", id="zero-gpus"),
        pytest.param({"region": "r", "pools": [doc()["pools"][0], doc()["pools"][0]]}, "duplicate", id="dup"),
        pytest.param({**doc(), "kind": "Something"}, "kind must be LocalNodePool", id="bad-kind"),
    ],
)
def test_malformed_pool_files_name_the_problem(bad: Any, message: str) -> None:
    with pytest.raises(nodepool.NodePoolError, match=message):
        nodepool.parse(bad)


def test_stages_cover_nodes_and_the_pod_lifecycle() -> None:
    stages = list(yaml.safe_load_all((resources.files("statictrain_localcluster") / "stages.yaml").read_text()))
    names = {s["metadata"]["name"] for s in stages}
    assert names == {"node-initialize", "node-heartbeat-with-lease", "pod-ready",
                     "pod-complete-after-annotation", "pod-delete"}
    complete = next(s for s in stages if s["metadata"]["name"] == "pod-complete-after-annotation")
    assert labels.KWOK_COMPLETE_AFTER in complete["spec"]["delay"]["durationFrom"]["expressionFrom"]
    assert labels.KWOK_COMPLETE_PHASE in complete["spec"]["next"]["statusTemplate"]


def test_prometheus_config_discovers_targets_from_files(tmp_path: Path) -> None:
    cfg: Any = prometheus.config(tmp_path / "targets")
    [job, pods] = cfg["scrape_configs"]
    assert job["file_sd_configs"][0]["files"] == [str(tmp_path / "targets" / "*.json")]
    assert job["honor_labels"] is True  # the operator's job metrics name other namespaces
    # pods: the target's namespace/pod/pod_uid (the API server's) win over what the exporter claims
    assert pods["file_sd_configs"][0]["files"] == [str(tmp_path / "targets" / "pods" / "*.json")]
    assert pods["honor_labels"] is False
    prometheus.write_target(tmp_path / "targets", "my job/1", "127.0.0.1:9", {"team": "a"})
    written = yaml.safe_load((tmp_path / "targets" / "my_job_1.json").read_text())
    assert written == [{"targets": ["127.0.0.1:9"], "labels": {"job": "my job/1", "team": "a"}}]
