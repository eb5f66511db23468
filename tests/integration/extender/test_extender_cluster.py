"""The extender with the real kube-scheduler (statictrain-scheduler profile) and kwok GPU nodes."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from ..operator.conftest import Operator, crd
from .conftest import apply_nodes
from .helpers import ExtenderProcess, gpu_node, gpu_pod, post_json, wait_for

__all__ = ["crd"]

pytestmark = pytest.mark.cluster


def create_pod(cluster: Any, namespace: str, manifest: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(manifest))


def node_of(cluster: Any, namespace: str, pod: str) -> str:
    out = cluster.kubectl("get", "pod", pod, "-n", namespace, "-o", "jsonpath={.spec.nodeName}").stdout
    return str(out).strip()


def wait_bound(cluster: Any, namespace: str, pod: str) -> str:
    return str(wait_for(lambda: node_of(cluster, namespace, pod), 60, f"pod {pod} to be bound"))


def prices(group: str) -> list[dict[str, Any]]:
    # Per unit of work (core/src/statictrain/data/throughput.csv: H100 3.17, A100 1.0, L4 0.39):
    # h100-spot 5.00/3.17 = 1.6 $/h, h100-od 12.29/3.17 = 3.9, a100-od 4.10/1.0 = 4.1, l4-od 2.00/0.39 = 5.1
    # (per GPU-hour / throughput).
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
        pytest.param({"statictrain.io/capacity-types": "on-demand"}, "h100-od", id="on-demand-only"),
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


def operator_extender_up(op: Operator) -> float | None:
    """statictrain_extender_up on the operator's own /metrics (None while it is not set or not served)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{op.metrics_port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    found = re.search(r"^statictrain_extender_up (\S+)$", text, re.M)
    return float(found.group(1)) if found else None


def lease_events(cluster: Any, namespace: str) -> list[dict[str, Any]]:
    """Events about the operator's heartbeat Lease, oldest first."""
    out = cluster.kubectl(
        "get", "events", "-n", namespace, "--field-selector",
        "involvedObject.kind=Lease,involvedObject.name=statictrain-operator-heartbeat", "-o", "json",
    ).stdout
    return sorted(json.loads(out)["items"], key=lambda e: (e.get("firstTimestamp") or "", e["metadata"]["name"]))


def test_extender_down_pods_still_schedule_and_the_operator_reports_it(
    cluster: Any,
    extender: ExtenderProcess,
    namespace: str,
    node_group: tuple[str, list[dict[str, Any]]],
    *,
    crd: str,
    tmp_path: Path,
) -> None:
    """Case 13: the real extender process is stopped and started again; the real kube-scheduler still places
    pods (ignorable), Prometheus' up goes to 0, and the real operator, probing the extender's /healthz,
    turns statictrain_extender_up to 0, logs one line and posts one Warning Event on its heartbeat Lease;
    when the extender is back: 1, one line, one Normal Event."""
    group, _ = node_group
    apply_nodes(cluster, extender, prices(group))
    wait_for(lambda: prom_up(cluster) == 1.0, 60, "Prometheus to scrape the running extender")
    op = Operator(
        cluster, namespace, tmp_path, parts="", extender_health_url=f"{extender.base}/healthz",
        extender_probe_s=0.5, extender_probe_timeout_s=0.5, extender_probe_failures=2,
    )
    op.start()
    try:
        wait_for(lambda: operator_extender_up(op) == 1.0, 60, "the operator to see the extender up")
        assert lease_events(cluster, namespace) == []  # a first verdict of up is nothing to report
        extender.stop()
        try:
            create_pod(cluster, namespace, gpu_pod("w", group, 1))
            assert wait_bound(cluster, namespace, "w").startswith(group)
            wait_for(lambda: operator_extender_up(op) == 0.0, 60, "statictrain_extender_up to drop to 0")
            down = wait_for(lambda: lease_events(cluster, namespace), 60, "the operator's ExtenderDown Event")
            assert [(e["type"], e["reason"]) for e in down] == [("Warning", "ExtenderDown")]
            assert f"scheduler extender {extender.base}/healthz does not answer" in down[0]["message"]
            assert "without cost awareness" in down[0]["message"]
            wait_for(lambda: prom_up(cluster) == 0.0, 60, "up{job=statictrain-extender} to drop to 0")
        finally:
            extender.start()
        wait_for(lambda: operator_extender_up(op) == 1.0, 60, "statictrain_extender_up back to 1")

        def two_events() -> list[dict[str, Any]] | None:
            events = lease_events(cluster, namespace)
            return events if len(events) > 1 else None

        both = wait_for(two_events, 60, "the operator's ExtenderUp Event")
        assert [(e["type"], e["reason"], e.get("count")) for e in both] == [
            ("Warning", "ExtenderDown", 1), ("Normal", "ExtenderUp", 1)
        ]
        assert "answers its health check again after" in both[1]["message"]
    finally:
        op.stop()
    log = op.logs()
    # one line per change, not one per probe (the extender was down for many probes)
    assert log.count("does not answer its health check") == 1, log[-5000:]
    assert log.count("answers its health check again") == 1, log[-5000:]


def test_gang_stays_on_fast_gpus_and_pods_get_an_estimate_event(
    cluster: Any, extender: ExtenderProcess, namespace: str, node_group: tuple[str, list[dict[str, Any]]]
) -> None:
    group, _ = node_group
    # Alone, the T4 is the cheaper place per unit of work: 0.15/0.21 = 0.7 $/h vs A100 3.00/1.0.
    apply_nodes(
        cluster,
        extender,
        [
            gpu_node(f"{group}-a100", group, "NVIDIA-A100-SXM4-40GB", 8, capacity="on-demand", hourly="24.00"),
            gpu_node(f"{group}-t4", group, "Tesla-T4", 4, capacity="on-demand", hourly="0.60"),
        ],
    )

    def member(name: str, job: str, size: int, annotations: dict[str, str] | None = None) -> dict[str, Any]:
        pod = gpu_pod(name, group, 1, job=job, annotations=annotations)
        pod["spec"]["containers"][0]["env"] = [{"name": "WORLD_SIZE", "value": str(size)}]
        return pod

    # g0 first: its binding proves the scheduler's cache holds the A100 node, so "solo" is scheduled
    # with two feasible nodes (with one, kube-scheduler skips scoring and no extender scoring happens).
    create_pod(cluster, namespace, member("g0", "gang", 2, {"statictrain.io/gpu-models": "A100"}))
    assert wait_bound(cluster, namespace, "g0") == f"{group}-a100"
    create_pod(cluster, namespace, member("solo", "solo", 1))
    assert wait_bound(cluster, namespace, "solo") == f"{group}-t4"
    probe = member("probe", "gang", 2)
    probe["metadata"].update(namespace=namespace, uid="probe")
    names = [f"{group}-a100", f"{group}-t4"]

    def gang_prefers_a100() -> bool:  # the extender's pod watch has seen g0 bound
        _, scores = post_json(f"{extender.base}/scheduler/prioritize", {"Pod": probe, "NodeNames": names})
        by_host = {h["Host"]: h["Score"] for h in scores}
        return bool(by_host[names[0]] > by_host[names[1]])

    wait_for(gang_prefers_a100, 30, "the extender to score the gang's second pod onto the A100")
    create_pod(cluster, namespace, member("g1", "gang", 2))
    assert wait_bound(cluster, namespace, "g1") == f"{group}-a100"

    def estimate_event() -> str:
        out = cluster.kubectl(
            "get",
            "events",
            "-n",
            namespace,
            "--field-selector",
            "involvedObject.name=solo,reason=ThroughputEstimate",
            "-o",
            "jsonpath={.items[*].message}",
        ).stdout
        return str(out)

    message = wait_for(estimate_event, 30, "the ThroughputEstimate event of pod solo")
    assert "default throughput table" in message and "best: T4" in message
