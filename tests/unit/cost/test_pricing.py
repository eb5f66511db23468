"""Node pricing: catalog, custom, live quotes, flagged fallbacks (never zero)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from statictrain.pricing import (
    ON_DEMAND,
    SPOT,
    CapacityType,
    FallbackPolicy,
    LiveQuotes,
    NodeFacts,
    capacity_type,
    capacity_type_from_labels,
    node_gpu,
    parse_catalog,
    parse_custom_prices,
    price_node,
    shipped_catalog_text,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
CATALOG = parse_catalog(shipped_catalog_text())


def node(
    it: str | None,
    region: str | None = "us-east-1",
    cap: CapacityType = ON_DEMAND,
    product: str | None = None,
    gpus: int = 8,
) -> NodeFacts:
    return NodeFacts("n1", it, region, cap, product, gpus)


def test_shipped_catalog_covers_three_clouds_with_positive_prices() -> None:
    clouds = {e.cloud for e in CATALOG.entries}
    assert clouds == {"aws", "gcp", "azure"}
    assert len(CATALOG.entries) == 182
    for e in CATALOG.entries:
        assert e.on_demand is None or e.on_demand > 0
        assert e.spot is None or e.spot > 0


@pytest.mark.parametrize(
    ("facts", "want_hourly", "want_source"),
    [
        (node("p5.48xlarge"), Decimal("98.32"), "catalog"),
        (node("p4d.24xlarge", "us-west-2", SPOT), None, "catalog"),
        (node("a2-highgpu-1g", "us-central1", gpus=1), Decimal("3.67339"), "catalog"),
    ],
    ids=["aws-on-demand", "aws-spot", "gcp-host-plus-accelerator"],
)
def test_catalog_prices(facts: NodeFacts, want_hourly: Decimal | None, want_source: str) -> None:
    p = price_node(facts, CATALOG, now=NOW)
    entry = CATALOG.get(facts.instance_type or "", facts.region or "")
    assert entry is not None
    assert p.source == want_source
    assert p.hourly_usd == (want_hourly if want_hourly is not None else entry.spot)
    assert p.gpu_hourly_usd * facts.gpu_count == p.hourly_usd


def test_spot_cheaper_than_on_demand() -> None:
    od = price_node(node("p4d.24xlarge"), CATALOG, now=NOW)
    sp = price_node(node("p4d.24xlarge", cap=SPOT), CATALOG, now=NOW)
    assert sp.hourly_usd < od.hourly_usd and sp.capacity_type == SPOT


def test_missing_on_demand_falls_back_flagged() -> None:
    # p5e.48xlarge us-west-2 has no on-demand price in the source
    p = price_node(node("p5e.48xlarge", "us-west-2"), CATALOG, now=NOW)
    assert p.is_fallback and p.hourly_usd > 0
    assert any("no catalog price" in n and "H200-141GB" in n for n in p.notes)


@pytest.mark.parametrize(
    ("facts", "note_part"),
    [
        (node("p5.48xlarge", "ap-south-1"), "other regions"),
        (node("mystery.xlarge", product="NVIDIA-H100-80GB-HBM3"), "H100-80GB"),
        (node("mystery.xlarge", product="Some-Future-GPU"), "default per-GPU"),
        (node(None, None, product=None, gpus=0), "default per-GPU"),
    ],
    ids=["known-type-other-region", "unknown-type-known-gpu", "unknown-everything", "no-labels-no-gpus"],
)
def test_fallbacks_are_flagged_and_never_zero(facts: NodeFacts, note_part: str) -> None:
    p = price_node(facts, CATALOG, now=NOW, policy=FallbackPolicy(default_gpu_hourly_usd=Decimal("3")))
    assert p.source == "fallback"
    assert p.hourly_usd > 0 and p.gpu_hourly_usd > 0
    assert note_part in " ".join(p.notes)


def test_fallback_by_gpu_model_uses_median_of_catalog() -> None:
    p = price_node(node("mystery", product="NVIDIA-A10G", gpus=1), CATALOG, now=NOW)
    per_gpu = sorted(CATALOG.gpu_prices("A10G-24GB", ON_DEMAND))
    assert min(per_gpu) <= p.hourly_usd <= max(per_gpu)


def test_custom_prices_win_and_most_specific_row_matches() -> None:
    custom = parse_custom_prices(
        "# negotiated\ninstance_type,region,capacity_type,hourly_usd,gpu_count\n"
        "p5.48xlarge,*,*,50,\np5.48xlarge,us-east-1,spot,20,8\n"
    )
    od = price_node(node("p5.48xlarge"), CATALOG, now=NOW, custom=custom)
    sp = price_node(node("p5.48xlarge", cap=SPOT), CATALOG, now=NOW, custom=custom)
    assert (od.source, od.hourly_usd) == ("custom", Decimal(50))
    assert (sp.source, sp.hourly_usd, sp.gpu_hourly_usd) == ("custom", Decimal(20), Decimal("2.5"))


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("instance,price\nx,1\n", "lacks column"),
        ("instance_type,region,capacity_type,hourly_usd\n,*,*,1\n", "row 2: instance_type is empty"),
        ("instance_type,region,capacity_type,hourly_usd\nx,*,reserved,1\n", "must be spot, on-demand"),
        ("instance_type,region,capacity_type,hourly_usd\nx,*,*,0\n", "greater than zero"),
        ("instance_type,region,capacity_type,hourly_usd\nx,*,*,cheap\n", "not a decimal"),
        ("instance_type,region,capacity_type,hourly_usd,gpu_count\nx,*,*,1,-2\n", "positive integer"),
    ],
    ids=["bad-header", "empty-type", "bad-capacity", "zero-price", "text-price", "negative-gpus"],
)
def test_custom_prices_bad_input(text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_custom_prices(text)


def test_live_quotes_used_and_flagged_when_stale() -> None:
    key = ("p5.48xlarge", "us-east-1", ON_DEMAND)
    fresh = LiveQuotes("aws", NOW - timedelta(hours=1), {key: Decimal("55.04")})
    stale = LiveQuotes("aws", NOW - timedelta(days=3), {key: Decimal("55.04")})
    p1 = price_node(node("p5.48xlarge"), CATALOG, now=NOW, live=[fresh])
    p2 = price_node(node("p5.48xlarge"), CATALOG, now=NOW, live=[stale])
    assert (p1.source, p1.hourly_usd, p1.notes) == ("live:aws", Decimal("55.04"), ())
    assert p2.source == "live:aws" and p2.notes and "stale" in p2.notes[0]


@pytest.mark.parametrize(
    ("facts", "family", "model"),
    [
        (node(None, product="NVIDIA-H100-80GB-HBM3"), "H100", "H100-80GB"),
        (node(None, product="NVIDIA-H200"), "H200", "H200-141GB"),
        (node("g6e.xlarge", product=None), "L40S", "L40S-48GB"),
        (node("p5.48xlarge", product="Unknown-Chip"), "H100", "H100-80GB"),
        (node(None, product="Unknown-Chip"), "Unknown", None),
        (node("m5.large", product=None), "Unknown", None),
    ],
    ids=["product", "nvml-h200", "instance-type", "unknown-product-known-type", "unknown", "cpu-type"],
)
def test_node_gpu(facts: NodeFacts, family: str, model: str | None) -> None:
    got = node_gpu(facts)
    assert (got.family, got.model) == (family, model)


@pytest.mark.parametrize(
    ("product", "priced_as"),
    [("NVIDIA-L40S", "L40S-48GB"), ("NVIDIA-H100", "H100 (any memory size)")],
    ids=["l40s-by-model", "h100-family-when-memory-unknown"],
)
def test_unknown_type_priced_by_gpu_and_flagged(product: str, priced_as: str) -> None:
    p = price_node(node("x9.huge", product=product, gpus=2), CATALOG, now=NOW)
    assert p.source == "fallback" and p.hourly_usd > 0
    assert priced_as in p.notes[0]


@pytest.mark.parametrize("product", ["NVIDIA GH200 480GB", "NVIDIA-B200", "NVIDIA A10", "Unknown-Chip"])
def test_gpu_missing_from_catalog_gets_flagged_default(product: str) -> None:
    p = price_node(node(None, product=product, gpus=1), CATALOG, now=NOW)
    assert p.source == "fallback" and p.hourly_usd == FallbackPolicy().default_gpu_hourly_usd
    assert "default per-GPU price" in p.notes[0]


@pytest.mark.parametrize(
    ("label", "want"),
    [
        ("spot", SPOT),
        ("SPOT", SPOT),
        ("on-demand", ON_DEMAND),
        (None, ON_DEMAND),
        ("", ON_DEMAND),
        ("preemptible", SPOT),
    ],
)
def test_capacity_type(label: str | None, want: CapacityType) -> None:
    assert capacity_type(label) == want


def test_catalog_parse_error_names_the_line() -> None:
    text = shipped_catalog_text().splitlines()
    text[3] = text[3].replace(text[3].split(",")[5], "-4", 1)
    with pytest.raises(ValueError, match="line 4"):
        parse_catalog("\n".join(text))


KUBECOST_CSV = """EndTimeStamp,InstanceID,Region,AssetClass,InstanceIDField,InstanceType,MarketPriceHourly,Version
2026-01-01,,us-east-1,node,,p5.48xlarge,61.5,1
2026-01-01,gpu-node-7,,node,metadata.name,,12.25,1
2026-01-01,aws:///us-east-1a/i-0abc,,node,spec.providerID,,33,1
2026-01-01,,us-east-1,pv,,gp3,0.0001,1
"""


def test_kubecost_csv_rows_match_by_type_name_or_provider_id() -> None:
    custom = parse_custom_prices(KUBECOST_CSV)
    assert len(custom) == 3  # the pv row is not a node price
    by_type = price_node(node("p5.48xlarge"), CATALOG, now=NOW, custom=custom)
    assert (by_type.source, by_type.hourly_usd) == ("custom", Decimal("61.5"))
    named = NodeFacts("gpu-node-7", "p5.48xlarge", "us-east-1", ON_DEMAND, None, 8)
    assert price_node(named, CATALOG, now=NOW, custom=custom).hourly_usd == Decimal("12.25")
    by_id = NodeFacts("x", "g5.xlarge", "us-east-1", ON_DEMAND, None, 1, provider_id="aws:///us-east-1a/i-0abc")
    assert price_node(by_id, CATALOG, now=NOW, custom=custom).hourly_usd == Decimal(33)
    other = price_node(node("g5.xlarge", gpus=1), CATALOG, now=NOW, custom=custom)
    assert other.source == "catalog"


def test_kubecost_csv_row_without_type_or_id_is_an_error() -> None:
    bad = "InstanceID,Region,AssetClass,InstanceIDField,InstanceType,MarketPriceHourly\n,us-east-1,node,,,3\n"
    with pytest.raises(ValueError, match="row 2: give InstanceType"):
        parse_custom_prices(bad)


@pytest.mark.parametrize(
    ("node_labels", "want"),
    [
        pytest.param({"karpenter.sh/capacity-type": "spot"}, SPOT, id="karpenter"),
        pytest.param({"karpenter.sh/capacity-type": "on-demand"}, ON_DEMAND, id="karpenter-od"),
        pytest.param({"eks.amazonaws.com/capacityType": "SPOT"}, SPOT, id="eks-managed-node-group"),
        pytest.param({"eks.amazonaws.com/capacityType": "ON_DEMAND"}, ON_DEMAND, id="eks-od"),
        pytest.param({"cloud.google.com/gke-spot": "true"}, SPOT, id="gke-spot"),
        pytest.param({"cloud.google.com/gke-preemptible": "true"}, SPOT, id="gke-preemptible"),
        pytest.param({"cloud.google.com/gke-provisioning": "spot"}, SPOT, id="gke-provisioning"),
        pytest.param({"kubernetes.azure.com/scalesetpriority": "spot"}, SPOT, id="aks-spot"),
        pytest.param({"kubernetes.azure.com/scalesetpriority": "regular"}, ON_DEMAND, id="aks-regular"),
        pytest.param({}, ON_DEMAND, id="unlabelled"),
    ],
)
def test_spot_from_every_provisioners_labels(node_labels: dict[str, str], want: CapacityType) -> None:
    assert capacity_type_from_labels(node_labels) == want


def test_as_of_comes_from_the_catalog_rows() -> None:
    assert CATALOG.as_of == "2024 or earlier; 2025; 2025-H1"
    p = price_node(node("Standard_NC24ads_A100_v4", "eastus", gpus=1), CATALOG, now=NOW)
    assert "catalog snapshot 2024 or earlier" in p.notes


def test_other_region_fallback_skips_flagged_rows_and_says_so_when_only_flagged_remain() -> None:
    rows = [
        "cloud,instance_type,region,gpu_model,gpu_count,on_demand_usd_per_hour,spot_usd_per_hour,"
        "on_demand_gpu_usd_per_hour,spot_gpu_usd_per_hour,flagged,as_of,source",
        "aws,x.big,r1,H100-80GB,8,10,,,,0,2025,s",
        "aws,x.big,r2,H100-80GB,8,1000,,,,1,2025,s FLAG: suspect",
        "aws,y.big,r2,H100-80GB,8,1000,,,,1,2025,s FLAG: suspect",
    ]
    cat = parse_catalog("\n".join(rows))
    p = price_node(node("x.big", "r3"), cat, now=NOW)
    assert p.hourly_usd == Decimal(10) and p.source == "fallback"
    q = price_node(node("y.big", "r3"), cat, now=NOW)
    assert q.hourly_usd == Decimal(1000) and any("flagged" in n for n in q.notes)
