"""Cost before running (pure parts): spec shape, offers from nodes and catalog, options cheapest first."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from statictrain import labels
from statictrain.pricing import parse_catalog, shipped_catalog_text
from statictrain_operator.cli import build_parser
from statictrain_operator.estimate import (
    NO_THROUGHPUT_TABLE,
    JobShape,
    Offer,
    estimate,
    job_shape,
    offers_from_catalog,
    offers_from_nodes,
    speeds_by_family,
)
from statictrain_operator.estimate_cli import run_estimate
from statictrain_operator.history import Speed

NOW = datetime(2026, 3, 1, tzinfo=UTC)
CATALOG = parse_catalog(shipped_catalog_text())
EXAMPLES = Path(__file__).resolve().parents[3] / "deploy" / "examples"


def shape(**kw: Any) -> JobShape:
    base: dict[str, Any] = {
        "replicas": 2,
        "gpus_per_replica": 1,
        "gpu_models": (),
        "unknown_models": (),
        "capacity_types": (),
        "max_steps": 3600,
        "max_tokens": None,
    }
    return JobShape(**(base | kw))


def offer(fam: str, usd: str, cap: str = "on-demand", gpus: int = 8) -> Offer:
    return Offer(fam, Decimal(usd), gpus, cap, f"node-{fam}-{cap}", "catalog")


OFFERS = [offer("H100", "4"), offer("H100", "5"), offer("A100", "2"), offer("L4", "1", "spot", gpus=1)]
# H100 1.0 s/step, A100 2.5 s/step: 2 GPUs x 4 $ x 1 h = 8 $ on H100, 2 x 2 $ x 2.5 h = 10 $ on A100
SPEEDS = {"H100": Speed(1000.0, 1.0, 3), "A100": Speed(400.0, 2.5, 1)}

# (id, shape, offers, speeds, want [(family, capacity, $/h, hours, $)], want note fragment)
CASES: list[tuple[str, JobShape, list[Offer], dict[str, Speed], list[tuple[Any, ...]], str]] = [
    (
        "measured: cheapest total first, unmeasured last",
        shape(),
        OFFERS,
        SPEEDS,
        [("H100", "on-demand", "8", 1.0, "8"), ("A100", "on-demand", "4", 2.5, "10"), ("L4", "spot", "2", None, None)],
        "",
    ),
    (
        "gpuModels filter and order kept out of the ranking",
        shape(gpu_models=("A100", "L4")),
        OFFERS,
        SPEEDS,
        [("A100", "on-demand", "4", 2.5, "10"), ("L4", "spot", "2", None, None)],
        "",
    ),
    (
        "capacity type filter",
        shape(capacity_types=("spot",)),
        OFFERS,
        SPEEDS,
        [("L4", "spot", "2", None, None)],
        NO_THROUGHPUT_TABLE,
    ),
    (
        "node too small for one replica",
        shape(gpus_per_replica=2, gpu_models=("L4", "H100")),
        OFFERS,
        {},
        [("H100", "on-demand", "16", None, None)],
        "no offer fits for L4",
    ),
    (
        "maxTokens uses tokens/s per pod x replicas",
        shape(max_steps=None, max_tokens=7_200_000),
        [offer("H100", "4")],
        SPEEDS,
        [("H100", "on-demand", "8", 1.0, "8")],
        "",
    ),
    (
        "no end in the spec",
        shape(max_steps=None),
        [offer("H100", "4")],
        SPEEDS,
        [("H100", "on-demand", "8", None, None)],
        NO_THROUGHPUT_TABLE,
    ),
    ("model missing from the cluster", shape(gpu_models=("B200",)), OFFERS, SPEEDS, [], "no offer fits for B200"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_estimate(case: tuple[str, JobShape, list[Offer], dict[str, Speed], list[tuple[Any, ...]], str]) -> None:
    _, sh, offers, speeds, want, note = case
    options, notes = estimate(sh, offers, speeds)
    got = [
        (
            o.family,
            o.offer.capacity_type,
            f"{o.hourly_usd.normalize():f}",
            round(o.hours, 9) if o.hours is not None else None,
            f"{o.total_usd.quantize(Decimal('0.000001')).normalize():f}" if o.total_usd is not None else None,
        )
        for o in options
    ]
    assert got == want
    if note:
        assert any(note in n for n in notes), notes
    for o in options:
        assert "table value" in o.price_basis
        assert o.time_basis.startswith("measured") == (o.hours is not None)


def test_job_shape_reads_the_spec_and_names_unknown_models() -> None:
    doc = {
        "spec": {
            "replicas": 4,
            "resources": {"gpusPerReplica": 8, "gpuModels": ["H100", "NVIDIA A100-SXM4-40GB", "Z9000"]},
            "placement": {"capacityTypes": ["spot"]},
            "training": {"maxTokens": 10},
        }
    }
    s = job_shape(doc)
    assert (s.replicas, s.gpus_per_replica, s.gpu_models) == (4, 8, ("H100", "A100", "Z9000"))
    assert s.unknown_models == ("Z9000",) and s.capacity_types == ("spot",)
    assert (s.max_steps, s.max_tokens) == (None, 10)
    _, notes = estimate(s, [], {})
    assert any("unknown GPU model 'Z9000'" in n for n in notes)


def node(name: str, itype: str, product: str, gpus: int, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {
                labels.INSTANCE_TYPE: itype,
                labels.REGION: "us-east-1",
                labels.GPU_PRODUCT: product,
                labels.CAPACITY_TYPE: "on-demand",
            },
            "annotations": annotations or {},
        },
        "status": {"capacity": {labels.GPU_RESOURCE: str(gpus)}} if gpus else {"capacity": {}},
    }


def test_offers_from_nodes_prefer_the_annotators_price() -> None:
    nodes = [
        node("a", "p5.48xlarge", "NVIDIA-H100-80GB-HBM3", 8),
        node(
            "b",
            "p5.48xlarge",
            "NVIDIA-H100-80GB-HBM3",
            8,
            {labels.GPU_HOURLY_COST: "1.50", labels.PRICE_SOURCE: "custom"},
        ),
        node("cpu", "m6i.2xlarge", "", 0),
    ]
    a, b = offers_from_nodes(nodes, CATALOG, NOW)
    entry = CATALOG.get("p5.48xlarge", "us-east-1")
    assert entry is not None and entry.on_demand is not None
    assert (a.family, a.gpu_hourly_usd, a.price_source) == ("H100", entry.on_demand / 8, "catalog")
    assert (b.gpu_hourly_usd, b.price_source) == (Decimal("1.50"), "custom (node annotation)")


def test_offers_from_catalog_per_row_and_capacity() -> None:
    offers = offers_from_catalog(CATALOG, "us-east-1")
    assert offers and all("us-east-1" in o.where for o in offers)
    assert {o.capacity_type for o in offers} == {"on-demand", "spot"}


def test_speeds_by_family_merges_nvml_names_weighted_by_pods() -> None:
    got = speeds_by_family(
        {
            "NVIDIA H100 80GB HBM3": Speed(100.0, 1.0, 1),
            "NVIDIA H100 NVL": Speed(400.0, None, 3),
            "unknown": Speed(1, 1, 1),
        }
    )
    assert got["H100"] == Speed(325.0, 1.0, 4)
    assert "unknown" in got


def test_cli_offline_catalog_and_bad_input(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        ["estimate", "-f", str(EXAMPLES / "one-gpu.yaml"), "--offline", "--catalog", "--no-history"]
    )
    out = io.StringIO()
    assert run_estimate(args, now=NOW, stdout=out) == 0
    text = out.getvalue()
    assert "spec: not validated (--offline)" in text and NO_THROUGHPUT_TABLE in text
    lines = [ln for ln in text.splitlines() if ln.startswith(("H100", "A100", "L4"))]
    hourly = [float(ln.split()[2]) for ln in lines]
    assert lines and hourly == sorted(hourly)
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Pod\n")
    err = io.StringIO()
    args = build_parser().parse_args(["estimate", "-f", str(bad), "--offline", "--catalog"])
    assert run_estimate(args, stderr=err) == 2 and "expected StaticTrainingJob" in err.getvalue()
    args = build_parser().parse_args(["estimate", "-f", str(EXAMPLES / "one-gpu.yaml"), "--offline"])
    err = io.StringIO()
    assert run_estimate(args, stderr=err) == 2 and "--offline needs" in err.getvalue()
