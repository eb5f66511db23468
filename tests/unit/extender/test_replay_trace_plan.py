from __future__ import annotations

from decimal import Decimal

import pytest
from statictrain.pricing import parse_catalog, shipped_catalog_text
from statictrain_extender.nodes import GPU_MILLI_RESOURCE
from statictrain_extender.replay.manifests import node_manifest, pod_manifest
from statictrain_extender.replay.plan import Action, ReplayWindow, plan_actions, window_pods
from statictrain_extender.replay.prices import CATALOG_MODEL, price_nodes
from statictrain_extender.replay.trace import TraceError, TraceNode, TracePod, parse_nodes, parse_pods

NODES_CSV = "sn,cpu_milli,memory_mib,gpu,model\nopenb-node-0001,64000,262144,2,T4\nOpenb-Node-0002,96000,786432,8,G2\n"
PODS_HEADER = (
    ",".join(
        [
            "name",
            "cpu_milli",
            "memory_mib",
            "num_gpu",
            "gpu_milli",
            "gpu_spec",
            "qos",
            "pod_phase",
            "creation_time",
            "deletion_time",
            "scheduled_time",
        ]
    )
    + "\n"
)


def test_parse_nodes() -> None:
    got = parse_nodes(NODES_CSV)
    assert got == [
        TraceNode("openb-node-0001", 64000, 262144, 2, "T4"),
        TraceNode("openb-node-0002", 96000, 786432, 8, "G2"),
    ]


def test_parse_pods_sorted_and_gpu_demand() -> None:
    text = PODS_HEADER + "p-b,6000,12288,1,460,,LS,Running,20,30,20\np-a,1000,1024,8,1000,,BE,Failed,10,50,11\n"
    got = parse_pods(text)
    assert [p.name for p in got] == ["p-a", "p-b"]
    assert [p.total_gpu_milli for p in got] == [8000, 460]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param("sn,cpu_milli\nx,1\n", "missing column", id="missing-columns"),
        pytest.param("sn,cpu_milli,memory_mib,gpu,model\nn1,1000,10,2,\n", "no model", id="gpu-without-model"),
        pytest.param("sn,cpu_milli,memory_mib,gpu,model\nn1,x,10,0,\n", "line 2: cpu_milli", id="not-a-number"),
        pytest.param("sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,0,\nn1,1,1,0,\n", "listed twice", id="duplicate"),
        pytest.param("sn,cpu_milli,memory_mib,gpu,model\nnode_1,1,1,0,\n", "DNS label", id="bad-name"),
        pytest.param("sn,cpu_milli,memory_mib,gpu,model\n", "no nodes", id="empty"),
    ],
)
def test_node_list_errors(text: str, want: str) -> None:
    with pytest.raises(TraceError, match=want):
        parse_nodes(text)


@pytest.mark.parametrize(
    ("row", "want"),
    [
        pytest.param("p,1,1,1,0,,LS,Running,0,1,0", "gpu_milli=0", id="gpu-pod-without-share"),
        pytest.param("p,1,1,1,1500,,LS,Running,0,1,0", "gpu_milli=1500", id="share-above-one-gpu"),
        pytest.param("p,1,1,0,0,,LS,Running,5,1,0", "before creation", id="deleted-before-created"),
        pytest.param("p,-1,1,0,0,,LS,Running,0,1,0", "must be >= 0", id="negative"),
    ],
)
def test_pod_list_errors(row: str, want: str) -> None:
    with pytest.raises(TraceError, match=want):
        parse_pods(PODS_HEADER + row + "\n")


def test_shipped_trace_model_mapping_prices_every_model() -> None:
    catalog = parse_catalog(shipped_catalog_text())
    nodes = [TraceNode(f"n{i}", 64000, 1024, 2, model) for i, model in enumerate(sorted(CATALOG_MODEL))]
    prices = price_nodes(nodes, catalog)
    for node in nodes:
        price = prices[node.name]
        assert price.gpu_hourly_usd is not None and price.gpu_hourly_usd > 0
        assert price.hourly_usd == price.gpu_hourly_usd * 2
    by_model = {n.model: prices[n.name].gpu_hourly_usd for n in nodes}
    assert by_model["P100"] == by_model["T4"]  # documented: P100 priced as T4


def test_unknown_trace_model_is_an_error_naming_the_fix() -> None:
    catalog = parse_catalog(shipped_catalog_text())
    with pytest.raises(TraceError, match="no catalog mapping"):
        price_nodes([TraceNode("n", 1000, 1, 1, "X1")], catalog)


def test_cpu_node_priced_per_core() -> None:
    catalog = parse_catalog(shipped_catalog_text())
    got = price_nodes([TraceNode("n", 32000, 1, 0, "")], catalog, cpu_usd_per_core_hour=Decimal("0.05"))
    assert got["n"].hourly_usd == Decimal("1.6") and got["n"].gpu_hourly_usd is None


def pod(name: str, start: int, end: int) -> TracePod:
    return TracePod(name, 1000, 1024, 1, 500, start, end)


def test_window_and_plan() -> None:
    pods = [pod("before", 0, 50), pod("spans", 50, 500), pod("inside", 120, 180), pod("after", 300, 400)]
    window = ReplayWindow(100, 300, speedup=10)
    chosen = window_pods(pods, window)
    assert [p.name for p in chosen] == ["spans", "inside"]
    assert plan_actions(chosen, window) == [
        Action(0.0, "create", "spans"),
        Action(2.0, "create", "inside"),
        Action(8.0, "delete", "inside"),
        Action(20.0, "delete", "spans"),
    ]
    assert window_pods(pods, window, max_pods=1)[0].name == "spans"
    assert window.wall_seconds == 20.0


@pytest.mark.parametrize(("start", "end", "speedup"), [(10, 10, 1.0), (0, 10, 0.0), (0, 10, float("nan"))])
def test_bad_window(start: int, end: int, speedup: float) -> None:
    with pytest.raises(TraceError):
        ReplayWindow(start, end, speedup)


def test_manifests_confine_replay_pods_to_replay_nodes() -> None:
    catalog = parse_catalog(shipped_catalog_text())
    node = TraceNode("openb-node-0001", 64000, 262144, 2, "T4")
    price = price_nodes([node], catalog)[node.name]
    manifest = node_manifest("rp", node, price, "r1")
    assert manifest["metadata"]["name"] == "rp-openb-node-0001"
    assert manifest["status"]["capacity"][GPU_MILLI_RESOURCE] == "2000"
    assert manifest["metadata"]["annotations"]["statictrain.io/hourly-cost-usd"] == str(
        (price.hourly_usd).quantize(Decimal("0.000001"))
    )
    assert {"key": "statictrain.io/replay", "value": "r1", "effect": "NoSchedule"} in manifest["spec"]["taints"]
    p = pod_manifest(pod("p1", 0, 1), namespace="ns", scheduler_name="s", replay_id="r1", uniform_throughput=True)
    assert p["spec"]["nodeSelector"] == {"statictrain.io/replay": "r1"}
    assert p["spec"]["schedulerName"] == "s"
    resources = p["spec"]["containers"][0]["resources"]
    assert resources["requests"][GPU_MILLI_RESOURCE] == resources["limits"][GPU_MILLI_RESOURCE] == "500"
    assert p["metadata"]["annotations"]["statictrain.io/gpu-throughput"] == "uniform"
