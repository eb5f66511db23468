from __future__ import annotations

from decimal import Decimal

import pytest
from statictrain_extender.replay.accounting import Observed, summarize
from statictrain_extender.replay.report import compare, markdown

PRICES = {"a": Decimal("36"), "b": Decimal("3.6")}
CAPACITY = {"a": 8000, "b": 2000}


def obs(
    name: str, node: str | None, created: float, bound: float | None, deleted: float, *, milli: int = 1000
) -> Observed:
    return Observed(name=name, gpu_milli=milli, created_s=created, deleted_s=deleted, bound_s=bound, node=node)


def test_cost_counts_node_busy_time_once_for_overlapping_pods() -> None:
    pods = [obs("p1", "a", 0, 0, 100), obs("p2", "a", 50, 50, 150), obs("p3", "a", 300, 300, 400)]
    got = summarize(pods, PRICES, CAPACITY, speedup=36)
    # busy wall seconds on a: [0,150] + [300,400] = 250 -> x36 = 9000 trace s = 2.5 h -> 2.5 * 36 $
    assert got.node_hours == Decimal("2.5")
    assert got.cost_usd == Decimal("90.0")
    assert got.nodes_used == 1


def test_pending_and_unscheduled() -> None:
    pods = [obs("p1", "a", 0, 2, 10), obs("p2", None, 0, None, 4)]
    got = summarize(pods, PRICES, CAPACITY, speedup=10)
    assert got.unscheduled == 1
    assert got.pending_mean_wall_s == pytest.approx(3.0)  # (2 + 4) / 2
    assert got.pending_mean_s == pytest.approx(30.0)


def test_fragmentation_is_idle_share_of_busy_nodes() -> None:
    # a (8 GPUs) holds 2 GPUs for 10 s; b (2 GPUs) holds 2 GPUs for the same 10 s
    pods = [obs("p1", "a", 0, 0, 10, milli=2000), obs("p2", "b", 0, 0, 10, milli=2000)]
    got = summarize(pods, PRICES, CAPACITY, speedup=1)
    assert got.gpu_fragmentation == pytest.approx(6000 / 10000)
    packed = summarize([obs("p1", "b", 0, 0, 10, milli=2000)], PRICES, CAPACITY, speedup=1)
    assert packed.gpu_fragmentation == 0.0


def test_missing_price_is_an_error() -> None:
    with pytest.raises(KeyError, match="no price"):
        summarize([obs("p", "z", 0, 0, 1)], PRICES, CAPACITY, speedup=1)


def test_compare_ratios_and_markdown() -> None:
    default = summarize([obs("p", "a", 0, 1, 101)], PRICES, CAPACITY, speedup=36)
    ours = summarize([obs("p", "b", 0, 1, 101)], PRICES, CAPACITY, speedup=36)
    report = compare(default, ours)
    assert report["cost_ratio"] == pytest.approx(0.1)
    assert report["pending_ratio"] == pytest.approx(1.0)
    assert report["default"]["cost_usd"] == "36.000000"
    assert "| cost_ratio | | 0.100 |" in markdown(report)
    empty = compare(summarize([], PRICES, CAPACITY, 1), summarize([], PRICES, CAPACITY, 1))
    assert empty["cost_ratio"] is None
