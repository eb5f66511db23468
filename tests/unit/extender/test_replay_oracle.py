"""The replay's oracle arm: e's extender scoring with the scenario's truth, never the table."""

from __future__ import annotations

import json

import pytest
from statictrain.throughput import DEFAULT_RELATIVE_THROUGHPUT as D
from statictrain_extender.nodes import NodeInfo
from statictrain_extender.replay.arms import learning_arms
from statictrain_extender.replay.oracle import oracle_state, oracle_throughput, parse_truth
from statictrain_extender.replay.truth import CLASSES, truth
from statictrain_extender.scoring import Weights
from statictrain_extender.speeds import class_key

# $/GPU-hour chosen so that the table prefers the A100 (2.0 / 1 < 0.6 / 0.21) and the
# truth of old_2x_faster the T4 (0.6 / 0.42 < 2.0).
NODES = {
    "a100": NodeInfo("a100", "A100", 8, "on-demand", 16.0, 2.0),
    "t4": NodeInfo("t4", "T4", 4, "on-demand", 2.4, 0.6),
}


def _costs(scenario: str, workload_class: str) -> dict[str, float | None]:
    state = oracle_state(truth(scenario, D))
    state.nodes = dict(NODES)
    key = class_key("ns", "job-1", workload_class)  # any job of the class: classes are cluster-wide
    return state.costs(state.cost_key(gpu_pod=True, uniform=False, key=key))


def test_the_oracle_scores_with_the_truth_not_the_table() -> None:
    costs = _costs("old_2x_faster", "compute")
    assert costs["t4"] == pytest.approx(0.6 / (2 * D["T4"]))  # the table would give 0.6 / 0.21
    assert costs["a100"] == pytest.approx(2.0 / D["A100"])
    assert min(costs, key=lambda n: costs[n] or 0) == "t4"  # where the table would send it to the A100
    slow = _costs("old_2x_slower", "compute")
    assert slow["t4"] == pytest.approx(0.6 / (D["T4"] / 2))


def test_each_class_gets_its_own_truth() -> None:
    compute, memory = _costs("memory_bound", "compute"), _costs("memory_bound", "memory")
    assert compute["t4"] == pytest.approx(0.6 / D["T4"])
    assert memory["t4"] == pytest.approx(0.6 / D["T4"] ** 0.5)
    assert memory["a100"] == pytest.approx(2.0)  # the reference GPU stays 1 in every class


def test_reference_oracle_equals_the_table() -> None:
    for c in CLASSES:
        assert _costs("reference", c)["t4"] == pytest.approx(0.6 / D["T4"])


def test_pods_outside_the_truth_still_use_the_table() -> None:
    state = oracle_state(truth("old_2x_faster", D))
    state.nodes = dict(NODES)
    unlabelled = class_key("ns", "job-1", None)
    assert state.cost_key(True, False, unlabelled) == "default"
    assert state.costs("default")["t4"] == pytest.approx(0.6 / D["T4"])
    assert state.cost_key(True, True, class_key("ns", "j", "compute")) == "uniform"  # services stay uniform


def test_truth_travels_as_json_and_bad_truth_is_refused() -> None:
    world = truth("memory_bound", D)
    assert parse_truth(json.dumps(world)) == world
    seeded = oracle_throughput(world)
    assert set(seeded) == {("class", "", c) for c in CLASSES}
    assert seeded[("class", "", "memory")].relative["T4"] == pytest.approx(D["T4"] ** 0.5)
    with pytest.raises(ValueError, match="must be > 0"):
        oracle_throughput({"compute": {"T4": 0.0}})
    with pytest.raises(ValueError, match="JSON object"):
        parse_truth("[1, 2]")


def test_the_oracle_arm_is_e_with_the_truth() -> None:
    arms = {a.key: a for a in learning_arms(Weights(cost=1, pack=3))}
    o, e = arms["o"], arms["e"]
    assert (o.tuned, o.weights, o.uniform, o.learn) == (e.tuned, e.weights, e.uniform, False)
    assert o.oracle and not e.oracle and not arms["l"].oracle
