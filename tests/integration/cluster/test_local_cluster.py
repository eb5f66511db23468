"""The local control plane is real: API server, scheduler, kwok GPU nodes, Prometheus."""

from __future__ import annotations

import http.server
import json
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from statictrain import labels
from statictrain_localcluster.cluster import LocalCluster
from statictrain_localcluster.waiting import crds_established, eventually

pytestmark = pytest.mark.cluster

TOLERATION = {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}




def pod(name: str, gpus: int, annotations: dict[str, str] | None = None) -> str:
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "tolerations": [TOLERATION],
            "containers": [{"name": "train", "image": "registry.example.com/train:1",
                            "resources": {"limits": {labels.GPU_RESOURCE: str(gpus)}}}],
        },
    })


def get(cluster: LocalCluster, *args: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)
    return out


def test_api_server_reports_a_real_version(cluster: LocalCluster) -> None:
    version = json.loads(cluster.kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"].startswith("v1.34.")
    assert version["serverVersion"]["minor"].startswith("34")
    assert cluster.kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"


def test_gpu_nodes_carry_capacity_and_cloud_labels(cluster: LocalCluster) -> None:
    nodes = {n["metadata"]["name"]: n for n in cluster.nodes()}
    h100 = nodes["p5-spot-0"]
    assert h100["status"]["capacity"][labels.GPU_RESOURCE] == "8"
    assert h100["status"]["allocatable"][labels.GPU_RESOURCE] == "8"
    assert h100["metadata"]["labels"][labels.INSTANCE_TYPE] == "p5.48xlarge"
    assert h100["metadata"]["labels"][labels.GPU_PRODUCT] == "NVIDIA-H100-80GB-HBM3"
    assert h100["metadata"]["labels"][labels.CAPACITY_TYPE] == "spot"
    assert h100["metadata"]["labels"][labels.REGION] == "us-east-1"
    assert nodes["g6-spot-1"]["status"]["capacity"][labels.GPU_RESOURCE] == "1"
    assert labels.GPU_RESOURCE not in nodes["cpu-0"]["status"]["capacity"]
    for n in nodes.values():
        ready = [c for c in n["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True", n["metadata"]["name"]


def test_gpu_pod_is_scheduled_runs_and_succeeds(cluster: LocalCluster, namespace: str) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-",
                    input=pod("two-gpus", 2, {labels.KWOK_COMPLETE_AFTER: "3s"}))
    running = eventually(lambda: get(cluster, "pod", "-n", namespace, "two-gpus")["status"].get("phase") == "Running"
                         or None, what="Running")
    assert running
    p = get(cluster, "pod", "-n", namespace, "two-gpus")
    node = get(cluster, "node", p["spec"]["nodeName"])
    assert int(node["status"]["allocatable"][labels.GPU_RESOURCE]) >= 2
    eventually(lambda: get(cluster, "pod", "-n", namespace, "two-gpus")["status"].get("phase") == "Succeeded",
               what="Succeeded")


def test_failed_phase_from_annotation(cluster: LocalCluster, namespace: str) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=pod(
        "fails", 1, {labels.KWOK_COMPLETE_AFTER: "1s", labels.KWOK_COMPLETE_PHASE: "Failed"}))
    eventually(lambda: get(cluster, "pod", "-n", namespace, "fails")["status"].get("phase") == "Failed",
               what="Failed")
    status = get(cluster, "pod", "-n", namespace, "fails")["status"]
    assert status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 1


def test_pod_asking_for_too_many_gpus_stays_pending(cluster: LocalCluster, namespace: str) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=pod("greedy", 16))

    def unschedulable() -> str | None:
        conds = get(cluster, "pod", "-n", namespace, "greedy")["status"].get("conditions", [])
        for c in conds:
            if c["type"] == "PodScheduled" and c["status"] == "False":
                return str(c.get("message", ""))
        return None

    message = eventually(unschedulable, what="PodScheduled=False")
    assert "Insufficient nvidia.com/gpu" in message
    assert get(cluster, "pod", "-n", namespace, "greedy")["status"]["phase"] == "Pending"


def test_statictrain_scheduler_profile_binds_pods(cluster: LocalCluster, namespace: str) -> None:
    doc = yaml.safe_load(pod("via-profile", 1))
    doc["spec"]["schedulerName"] = "statictrain-scheduler"
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))
    eventually(lambda: get(cluster, "pod", "-n", namespace, "via-profile")["spec"].get("nodeName"),
               what="bound by the statictrain-scheduler profile")


def test_crd_applied_with_kubectl_is_served(cluster: LocalCluster, namespace: str) -> None:
    group = f"{namespace}.example.com"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {"spec": {"type": "object", "properties": {
                         "size": {"type": "integer", "minimum": 1}}}}}}}]},
    }
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(crd))
    try:
        crds_established(cluster.kubectl, [f"widgets.{group}"])
        ok = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 2}}
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(ok))
        assert get(cluster, f"widgets.{group}", "-n", namespace, "w")["spec"]["size"] == 2
        bad = {**ok, "metadata": {"name": "bad"}, "spec": {"size": 0}}
        rejected = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(bad), check=False)
        assert rejected.returncode != 0 and "should be greater than or equal to 1" in rejected.stderr
    finally:
        cluster.kubectl("delete", "crd", f"widgets.{group}", "--wait=false", check=False)


class _Metrics(http.server.BaseHTTPRequestHandler):
    body = b"# TYPE statictrain_probe_value gauge\nstatictrain_probe_value{probe=\"a\"} 42\n"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def exporter() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_prometheus_scrapes_a_target_the_test_starts(cluster: LocalCluster, exporter: str) -> None:
    job = f"probe-{exporter.replace(':', '-')}"
    cluster.add_scrape_target(job, exporter, {"team": "infra"})
    try:
        def query() -> list[dict[str, Any]]:
            q = urllib.parse.urlencode({"query": f'statictrain_probe_value{{job="{job}"}}'})
            with urllib.request.urlopen(f"{cluster.prometheus_url}/api/v1/query?{q}", timeout=5) as r:
                result: list[dict[str, Any]] = json.load(r)["data"]["result"]
                return result

        result = eventually(query, timeout=60, what="the probe series in Prometheus")
        assert result[0]["value"][1] == "42"
        assert result[0]["metric"]["team"] == "infra"
        assert result[0]["metric"]["probe"] == "a"
    finally:
        cluster.remove_scrape_target(job)
