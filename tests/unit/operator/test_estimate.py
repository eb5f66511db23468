"""Cost before running (pure parts): spec shape, offers from nodes and catalog, options cheapest first."""

from __future__ import annotations

import io
import math
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from statictrain import labels
from statictrain.pricing import parse_catalog, shipped_catalog_text
from statictrain_cli.estimate import run_estimate
from statictrain_cli.main import build_parser
from statictrain_operator.estimate import (
    NO_HISTORY,
    JobShape,
    Offer,
    estimate,
    infer_speeds,
    job_shape,
    offers_from_catalog,
    offers_from_nodes,
    speeds_by_family,
)
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
# Oracle from data/throughput.csv's rows (H100 3.17, A100 1.0, L4 0.39), worked by hand: the job's
# A100-equivalent step time is the geometric mean of 1.0 s x 3.17 and 2.5 s x 1.0; on L4 it is that / 0.39.
L4_STEP_S = math.sqrt(3.17 * 1.0 * 2.5 * 1.0) / 0.39

# (id, shape, offers, speeds, want [(family, capacity, $/h, hours, $)], want note fragment)
CASES: list[tuple[str, JobShape, list[Offer], dict[str, Speed], list[tuple[Any, ...]], str]] = [
    (
        "measured, and L4 inferred from them by the table: cheapest total first",
        shape(),
        OFFERS,
        SPEEDS,
        [
            ("H100", "on-demand", "8", 1.0, 8.0),
            ("A100", "on-demand", "4", 2.5, 10.0),
            ("L4", "spot", "2", L4_STEP_S, 2 * L4_STEP_S),
        ],
        "",
    ),
    (
        "gpuModels filter and order kept out of the ranking; inferred from a model the spec excludes",
        shape(gpu_models=("A100", "L4")),
        OFFERS,
        SPEEDS,
        [("A100", "on-demand", "4", 2.5, 10.0), ("L4", "spot", "2", L4_STEP_S, 2 * L4_STEP_S)],
        "",
    ),
    (
        "capacity type filter",
        shape(capacity_types=("spot",)),
        OFFERS,
        SPEEDS,
        [("L4", "spot", "2", L4_STEP_S, 2 * L4_STEP_S)],
        "",
    ),
    (
        "no history: time unknown, ordered by $ per unit of work (H100 8/3.17, A100 4/1.0, L4 2/0.39)",
        shape(),
        OFFERS,
        {},
        [
            ("H100", "on-demand", "8", None, None),
            ("A100", "on-demand", "4", None, None),
            ("L4", "spot", "2", None, None),
        ],
        NO_HISTORY,
    ),
    (
        "history only on a model the table does not know: nothing inferred",
        shape(),
        [offer("H100", "4"), offer("Z9000", "1")],
        {"Z9000": Speed(None, 1.0, 1)},
        [("Z9000", "on-demand", "2", 1.0, 2.0), ("H100", "on-demand", "8", None, None)],
        "",
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
        [("H100", "on-demand", "8", 1.0, 8.0)],
        "",
    ),
    (
        "maxTokens inferred: 1000 tokens/s per pod on H100 -> 1000 / 3.17 on A100, x 2 replicas",
        shape(max_steps=None, max_tokens=7_200_000),
        [offer("A100", "2")],
        {"H100": Speed(1000.0, None, 1)},
        [("A100", "on-demand", "4", 3.17, 4 * 3.17)],
        "",
    ),
    (
        "no end in the spec",
        shape(max_steps=None),
        [offer("H100", "4")],
        SPEEDS,
        [("H100", "on-demand", "8", None, None)],
        "",
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
            o.hours,
            float(o.total_usd) if o.total_usd is not None else None,
        )
        for o in options
    ]
    assert [g[:3] for g in got] == [w[:3] for w in want]
    for g, w in zip(got, want, strict=True):
        assert (g[3] is None, g[4] is None) == (w[3] is None, w[4] is None), (g, w)
        if w[3] is not None:
            assert g[3:] == pytest.approx(w[3:], rel=1e-9), (g, w)
    if note:
        assert any(note in n for n in notes), notes
    assert (NO_HISTORY in notes) == (not speeds)
    for o in options:
        assert "table value" in o.price_basis
        assert o.time_basis.startswith(("measured", "inferred")) == (o.hours is not None)
        assert o.time_basis.startswith("measured") == (o.hours is not None and o.family in speeds)


def test_inferred_rows_name_the_table_figures_and_the_measured_models() -> None:
    options, _ = estimate(shape(), OFFERS, SPEEDS)
    l4 = next(o for o in options if o.family == "L4")
    assert l4.time_basis.startswith("inferred: throughput table L4 0.39 vs measured A100 1, H100 3.17"), l4.time_basis
    assert l4.work_usd == pytest.approx(Decimal(2) / Decimal("0.39"))
    got = infer_speeds({"H100": Speed(317.0, 1.0, 2)}, {"H100": 3.17, "A100": 1.0, "T4": 0.5})
    assert set(got) == {"A100", "T4"}
    assert got["A100"].speed.step_s == pytest.approx(3.17) and got["A100"].speed.tokens_per_s == pytest.approx(100.0)
    assert got["T4"].speed.step_s == pytest.approx(6.34) and got["A100"].anchors == ("H100",)
    assert infer_speeds({"Z9000": Speed(1.0, 1.0, 1)}, {"A100": 1.0}) == {}
    assert infer_speeds({}) == {}


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
    assert "spec: not validated (--offline)" in text and NO_HISTORY in text
    lines = [ln for ln in text.splitlines() if ln.startswith(("H100", "A100", "L4"))]
    work = [float(ln.split()[5]) for ln in lines]
    assert lines and work == sorted(work)
    assert all(ln.split()[3:5] == ["?", "?"] for ln in lines)
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Pod\n")
    err = io.StringIO()
    args = build_parser().parse_args(["estimate", "-f", str(bad), "--offline", "--catalog"])
    assert run_estimate(args, stderr=err) == 2 and "expected StaticTrainingJob" in err.getvalue()
    args = build_parser().parse_args(["estimate", "-f", str(EXAMPLES / "one-gpu.yaml"), "--offline"])
    err = io.StringIO()
    assert run_estimate(args, stderr=err) == 2 and "--offline needs" in err.getvalue()
