from __future__ import annotations

import pytest
from statictrain_extender.nodes import NodeInfo
from statictrain_extender.scoring import MAX_SCORE, Weights, cost_per_work, score_nodes

from .builders import info

TABLE = {"A100": 1.0, "H100": 2.5, "T4": 0.15}


@pytest.mark.parametrize(
    ("nodes", "gpu_pod", "used", "weights", "want"),
    [
        pytest.param(
            [info("a100", "A100", gpu_hourly=4.0), info("h100", "H100", gpu_hourly=8.0)],
            True,
            {},
            Weights(cost=1, pack=0),
            [8, 10],
            id="h100-cheaper-per-work-despite-higher-price",
        ),
        pytest.param(
            [info("t4", "T4", gpu_hourly=0.5), info("a100", "A100", gpu_hourly=4.0)],
            True,
            {},
            Weights(cost=1, pack=0),
            [10, 8],
            id="t4-per-work-3.33-vs-a100-4.0",
        ),
        pytest.param(
            [info("spot", gpu_hourly=1.0), info("od", gpu_hourly=5.0)],
            True,
            {},
            Weights(cost=1, pack=0),
            [10, 2],
            id="same-model-cheaper-capacity-wins",
        ),
        pytest.param(
            [info("empty", gpu_hourly=4.0), info("half", gpu_hourly=4.0)],
            True,
            {"half": 4000},
            Weights(cost=0, pack=1),
            [0, 10],
            id="packing-prefers-partly-used",
        ),
        pytest.param(
            [info("empty", gpu_hourly=4.0), info("half", gpu_hourly=4.0)],
            True,
            {"half": 6000},
            Weights(cost=1, pack=1),
            [6, 10],
            id="equal-price-packing-breaks-tie",
        ),
        pytest.param(
            [info("cheap-empty", gpu_hourly=2.0), info("dear-full", gpu_hourly=4.0)],
            True,
            {"dear-full": 7000},
            Weights(cost=4, pack=1),
            [10, 7],
            id="cost-weight-dominates",
        ),
        pytest.param(
            [info("priced", gpu_hourly=4.0), info("unpriced", gpu_hourly=None, hourly=None)],
            True,
            {},
            Weights(cost=1, pack=0),
            [10, 0],
            id="unknown-price-is-never-cheap",
        ),
        pytest.param(
            [info("priced", gpu_hourly=None, hourly=None)],
            True,
            {},
            Weights(cost=1, pack=0),
            [0],
            id="no-prices-at-all",
        ),
        pytest.param(
            [info("cpu-cheap", gpus=0, hourly=1.0, gpu_hourly=None), info("gpu", hourly=32.0)],
            False,
            {"gpu": 8000},
            Weights(cost=1, pack=1),
            [10, 0],
            id="cpu-pod-uses-node-price-no-packing",
        ),
        pytest.param(
            [info("mystery", "X9", gpu_hourly=0.5), info("a100", "A100", gpu_hourly=4.0)],
            True,
            {},
            Weights(cost=1, pack=0, unknown_throughput=0.1),
            [8, 10],
            id="unknown-gpu-model-pessimistic-throughput",
        ),
        pytest.param([], True, {}, Weights(), [], id="no-nodes"),
    ],
)
def test_score_nodes(
    nodes: list[NodeInfo], gpu_pod: bool, used: dict[str, int], weights: Weights, want: list[int]
) -> None:
    assert score_nodes(nodes, gpu_pod, TABLE, used, weights) == want


def test_scores_stay_in_range_with_overcommitted_node() -> None:
    got = score_nodes([info("n")], True, TABLE, {"n": 99_000}, Weights())
    assert got == [MAX_SCORE]


@pytest.mark.parametrize(
    ("cost", "pack", "unknown"),
    [(0, 0, 0.1), (-1, 1, 0.1), (1, 1, 0)],
)
def test_bad_weights_rejected(cost: float, pack: float, unknown: float) -> None:
    with pytest.raises(ValueError, match="must be"):
        Weights(cost=cost, pack=pack, unknown_throughput=unknown)


def test_cost_per_work() -> None:
    assert cost_per_work(info("n", "H100", gpu_hourly=10.0), True, TABLE, 0.1) == pytest.approx(4.0)
    assert cost_per_work(info("n", gpu_hourly=None), True, TABLE, 0.1) is None
