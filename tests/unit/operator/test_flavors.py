"""Cost-ordered Kueue flavors (pure parts and the CLI with a recorded cluster): figures by hand."""

from __future__ import annotations

import io
import json
import subprocess
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from statictrain import labels
from statictrain_cli.flavors import run_flavors
from statictrain_cli.main import build_parser
from statictrain_operator import flavors
from statictrain_operator.estimate import Offer
from statictrain_operator.history import per_gpu


def flavor(name: str, **node_labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"nodeLabels": node_labels}}


SPOT = flavor("spot", cap="spot")
OD = flavor("on-demand", cap="on-demand")


def node_offer(family: str, usd: str, gpus: int, cap: str) -> tuple[Offer, dict[str, str]]:
    return Offer(family, Decimal(usd), gpus, cap, f"n-{family}-{cap}", "test"), {"cap": cap}


def test_figure_is_the_gpu_weighted_mean_of_measured_nodes() -> None:
    offers = [
        node_offer("H100", "3.6", 8, "spot"),
        node_offer("L4", "0.36", 2, "spot"),
        node_offer("A10G", "1", 4, "spot"),
        node_offer("H100", "7.2", 8, "on-demand"),
    ]
    # H100: 1000 tokens/s/GPU -> 3.6 $/h / 3.6 Mtoken/h = 1 $/Mtoken on spot, 2 on demand;
    # L4: 100 tokens/s/GPU -> 0.36 / 0.36 = 1 $/Mtoken. A10G unmeasured.
    costs = flavors.flavor_costs([OD, SPOT], offers, {"H100": 1000.0, "L4": 100.0})
    od, spot = costs
    assert (spot.usd_per_mtoken, spot.gpus, spot.measured_gpus) == (Decimal(1), 14, 10)
    assert spot.families == ("A10G?", "H100", "L4")
    assert (od.usd_per_mtoken, od.gpus) == (Decimal(2), 8)
    assert flavors.order(costs) == ["spot", "on-demand"]


def test_unmeasured_flavors_keep_their_order_last() -> None:
    costs = [
        flavors.FlavorCost("a", None, 8, 0, ()),
        flavors.FlavorCost("b", Decimal(3), 8, 8, ()),
        flavors.FlavorCost("c", None, 8, 0, ()),
        flavors.FlavorCost("d", Decimal(1), 8, 8, ()),
    ]
    assert flavors.order(costs) == ["d", "b", "a", "c"]


def test_patch_reorders_each_group_and_is_empty_when_in_order() -> None:
    cq = {
        "spec": {
            "resourceGroups": [
                {"flavors": [{"name": "on-demand", "resources": [1]}, {"name": "spot", "resources": [2]}]},
                {"flavors": [{"name": "other"}]},
            ]
        }
    }
    ops = flavors.reorder_patch(cq, ["spot", "on-demand"])
    assert ops == [
        {
            "op": "replace",
            "path": "/spec/resourceGroups/0/flavors",
            "value": [{"name": "spot", "resources": [2]}, {"name": "on-demand", "resources": [1]}],
        }
    ]
    assert flavors.reorder_patch(cq, ["on-demand", "spot"]) == []


@pytest.mark.parametrize(
    ("table", "error"),
    [
        ({"TPU-v9": 10}, "not a known GPU model"),
        ({"H100": "fast"}, "not a number"),
        ({"H100": 0}, "must be > 0"),
    ],
)
def test_bad_throughput_tables_say_what_to_fix(table: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        flavors.throughput_by_family(table)


def test_per_gpu_divides_each_pod_by_its_gpus() -> None:
    tps = [({"pod_uid": "a"}, 8000.0), ({"pod_uid": "b"}, 2000.0), ({"pod_uid": "c"}, 50.0)]
    counts = [({"pod_uid": "a", "gpu_model": "H100"}, 8.0), ({"pod_uid": "b", "gpu_model": "H100"}, 4.0)]
    assert per_gpu(tps, counts) == {"H100": 750.0}  # (1000 + 500) / 2; pod c has no GPU metric


NODES = {
    "items": [
        {
            "metadata": {
                "name": n,
                "labels": {
                    labels.CAPACITY_TYPE: cap,
                    labels.INSTANCE_TYPE: "p5.48xlarge",
                    labels.GPU_PRODUCT: "NVIDIA-H100-80GB-HBM3",
                    labels.GPU_COUNT: "8",
                },
                "annotations": {labels.GPU_HOURLY_COST: usd, labels.PRICE_CAPACITY_TYPE: cap},
            },
            "status": {"capacity": {labels.GPU_RESOURCE: "8"}, "allocatable": {labels.GPU_RESOURCE: "8"}},
        }
        for n, cap, usd in (("od", "on-demand", "7.2"), ("sp", "spot", "3.6"))
    ]
}
CQ = {
    "metadata": {"name": "gpu"},
    "spec": {
        "resourceGroups": [
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [
                    {"name": "on-demand", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]},
                    {"name": "spot", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]},
                ],
            }
        ]
    },
}


def recorded_kubectl(calls: list[Sequence[str]]) -> Any:
    objs = {
        ("clusterqueue", "gpu"): CQ,
        ("nodes",): NODES,
        ("resourceflavor", "spot"): flavor("spot", **{labels.CAPACITY_TYPE: "spot"}),
        ("resourceflavor", "on-demand"): flavor("on-demand", **{labels.CAPACITY_TYPE: "on-demand"}),
    }

    def run(args: Sequence[str], stdin: str | None) -> subprocess.CompletedProcess[str]:
        calls.append(list(args))
        if args[0] == "get":
            key = tuple(a for a in args[1:] if a not in ("-o", "json"))
            return subprocess.CompletedProcess(args, 0, json.dumps(objs[key]), "")
        return subprocess.CompletedProcess(args, 0, "clusterqueue.kueue.x-k8s.io/gpu patched", "")

    return run


def test_cli_prints_figures_and_patch_and_applies(tmp_path: Path) -> None:
    table = tmp_path / "tps.yaml"
    table.write_text("NVIDIA-H100-80GB-HBM3: 1000\n")
    args = build_parser().parse_args(
        ["advise", "flavors", "--cluster-queue", "gpu", "--throughput", str(table), "--apply"]
    )
    out, calls = io.StringIO(), list[Sequence[str]]()
    assert run_flavors(args, stdout=out, stderr=io.StringIO(), kubectl=recorded_kubectl(calls)) == 0
    text = out.getvalue()
    assert "order advised:  spot, on-demand" in text
    rows = {line.split()[0]: line.split()[1] for line in text.splitlines() if line.startswith(("spot ", "on-demand "))}
    assert rows == {"spot": "1.0000", "on-demand": "2.0000"}
    (patch_call,) = [c for c in calls if c[0] == "patch"]
    ops = json.loads(patch_call[-1])
    assert [f["name"] for f in ops[0]["value"]] == ["spot", "on-demand"]


def test_cli_bad_table_exits_2(tmp_path: Path) -> None:
    table = tmp_path / "tps.yaml"
    table.write_text("- not a map\n")
    args = build_parser().parse_args(["advise", "flavors", "--cluster-queue", "gpu", "--throughput", str(table)])
    err = io.StringIO()
    assert run_flavors(args, stdout=io.StringIO(), stderr=err, kubectl=recorded_kubectl([])) == 2
    assert "expected a map" in err.getvalue()


def test_unmeasured_families_are_inferred_from_the_table_in_measured_units() -> None:
    # data/throughput.csv: H100 3.17, A100 1.0, L4 0.39 (relative to A100). Measured: H100 at 1000 tokens/s/GPU.
    tps, inferred = flavors.with_table({"H100": 1000.0})
    assert tps["H100"] == 1000.0 and "H100" not in inferred
    assert tps["A100"] == pytest.approx(1000.0 / 3.17) and tps["L4"] == pytest.approx(1000.0 * 0.39 / 3.17)
    assert {"A100", "L4"} <= inferred
    costs = flavors.flavor_costs([SPOT], [node_offer("L4", "0.36", 2, "spot")], tps, inferred)
    assert costs[0].families == ("L4~",) and costs[0].measured_gpus == 2
    # a measured family the table does not know: nothing to scale by, nothing inferred
    assert flavors.with_table({"Unknown-X": 5.0}) == ({"Unknown-X": 5.0}, frozenset())
