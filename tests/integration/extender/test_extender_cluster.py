"""The extender with the real kube-scheduler (statictrain-scheduler profile) and kwok GPU nodes."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from .conftest import apply_nodes
from .helpers import ExtenderProcess, gpu_node, gpu_pod, post_json, wait_for

pytestmark = pytest.mark.cluster


def create_pod(cluster: Any, namespace: str, manifest: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(manifest))


def node_of(cluster: Any, namespace: str, pod: str) -> str:
    out = cluster.kubectl("get", "pod", pod, "-n", namespace, "-o", "jsonpath={.spec.nodeName}").stdout
    return str(out).strip()


def wait_bound(cluster: Any, namespace: str, pod: str) -> str:
    return str(wait_for(lambda: node_of(cluster, namespace, pod), 60, f"pod {pod} to be bound"))


def prices(group: str) -> list[dict[str, Any]]:
    # Per unit of work (default table: H100 2.5, A100 1.0): h100-spot 5.00/2.5 = 2.0 $/h,
    # a100-od 4.10/1.0 = 4.1, h100-od 12.29/2.5 = 4.9, l4-od 2.00/0.3 = 6.7 (per GPU-hour / throughput).
    return [
        gpu_node(f"{group}-h100-od", group, "NVIDIA-H100-80GB-HBM3", 8, capacity="on-demand", hourly="98.32"),
        gpu_node(f"{group}-h100-spot", group, "NVIDIA-H100-80GB-HBM3", 8, capacity="spot", hourly="40.00"),
        gpu_node(f"{group}-a100-od", group, "NVIDIA-A100-SXM4-40GB", 8, capacity="on-demand", hourly="32.77"),
        gpu_node(f"{group}-l4-od", group, "NVIDIA-L4", 8, capacity="on-demand", hourly="16.00"),
    ]


def test_job_pods_go_to_the_cheapest_node_per_unit_of_work(
    cluster: Any, extender: ExtenderProcess, namespace: str, node_group: tuple[str, list[dict[str, Any]]]
) -> None:
    group, _ = node_group
    apply_nodes(cluster, extender, prices(group))
    for i in range(2):
        create_pod(cluster, namespace, gpu_pod(f"w{i}", group, 4))
        assert wait_bound(cluster, namespace, f"w{i}") == f"{group}-h100-spot"


def test_default_scheduler_pods_are_not_steered(
    cluster: Any, extender: ExtenderProcess, namespace: str, node_group: tuple[str, list[dict[str, Any]]]
) -> None:
    group, _ = node_group
    apply_nodes(cluster, extender, prices(group))
    # The extender answers neutrally for other profiles: a default-scheduler pod is spread, not packed.
    for i in range(4):
        create_pod(cluster, namespace, gpu_pod(f"d{i}", group, 4, scheduler="default-scheduler"))
        wait_bound(cluster, namespace, f"d{i}")
    used = {node_of(cluster, namespace, f"d{i}") for i in range(4)}
    assert len(used) > 1


@pytest.mark.parametrize(
    ("annotations", "want_node"),
    [
        pytest.param({"statictrain.io/capacity-types": "on-demand"}, "a100-od", id="on-demand-only"),
        pytest.param({"statictrain.io/gpu-models": "L4"}, "l4-od", id="gpu-model"),
        pytest.param({"statictrain.io/max-hourly-usd": "35"}, "a100-od", id="max-hourly-price"),
    ],
)
def test_placement_policy_is_respected(
    cluster: Any,
    extender: ExtenderProcess,
    namespace: str,
    node_group: tuple[str, list[dict[str, Any]]],
    *,
    annotations: dict[str, str],
    want_node: str,
) -> None:
    group, _ = node_group
    apply_nodes(cluster, extender, prices(group))
    create_pod(cluster, namespace, gpu_pod("w", group, 1, annotations=annotations))
    assert wait_bound(cluster, namespace, "w") == f"{group}-{want_node}"


def test_no_eligible_node_leaves_the_pod_pending_with_the_reason(
    cluster: Any, extender: ExtenderProcess, namespace: str, node_group: tuple[str, list[dict[str, Any]]]
) -> None:
    group, _ = node_group
    apply_nodes(cluster, extender, prices(group))
    create_pod(cluster, namespace, gpu_pod("w", group, 1, annotations={"statictrain.io/max-hourly-usd": "5"}))

    def event_message() -> str:
        out = cluster.kubectl(
            "get",
            "events",
            "-n",
            namespace,
            "--field-selector",
            "involvedObject.name=w,reason=FailedScheduling",
            "-o",
            "jsonpath={.items[*].message}",
        ).stdout
        return out if "above max" in out else ""

    assert "above max" in wait_for(event_message, 60, "a FailedScheduling event naming the price cap")
    assert node_of(cluster, namespace, "w") == ""


def test_live_extender_answers_malformed_unknown_and_5000_node_requests(extender: ExtenderProcess) -> None:
    status, result = post_json(f"{extender.base}/scheduler/filter", {"Pod": "x"})
    assert status == 200 and "Pod" in result["Error"]
    status, result = post_json(f"{extender.base}/scheduler/prioritize", {"NodeNames": []})
    assert status == 400 and result["Error"]
    names = [f"no-such-node-{i}" for i in range(5000)]
    pod = gpu_pod("p", "g", 1)
    status, scores = post_json(f"{extender.base}/scheduler/prioritize", {"Pod": pod, "NodeNames": names})
    assert status == 200 and len(scores) == 5000 and {s["Score"] for s in scores} == {0}
    with urllib.request.urlopen(f"{extender.base}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    assert 'statictrain_extender_requests_total{outcome="error",verb="prioritize"}' in text


def prom_up(cluster: Any) -> float | None:
    url = f"{cluster.prometheus_url}/api/v1/query?query=up%7Bjob%3D%22statictrain-extender%22%7D"
    with urllib.request.urlopen(url, timeout=5) as resp:
        result = json.loads(resp.read())["data"]["result"]
    return float(result[0]["value"][1]) if result else None


def test_extender_down_pods_still_schedule_and_prometheus_shows_it(
    cluster: Any, extender: ExtenderProcess, namespace: str, node_group: tuple[str, list[dict[str, Any]]]
) -> None:
    group, _ = node_group
    apply_nodes(cluster, extender, prices(group))
    wait_for(lambda: prom_up(cluster) == 1.0, 60, "Prometheus to scrape the running extender")
    extender.stop()
    try:
        create_pod(cluster, namespace, gpu_pod("w", group, 1))
        assert wait_bound(cluster, namespace, "w").startswith(group)
        wait_for(lambda: prom_up(cluster) == 0.0, 60, "up{job=statictrain-extender} to drop to 0")
    finally:
        extender.start()
