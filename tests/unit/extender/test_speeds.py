"""Learned speed per workload class and GPU family: the table is the prior, step times take over."""

from __future__ import annotations

import math

import pytest
from prometheus_client.samples import Sample
from statictrain import labels
from statictrain.throughput import DEFAULT_RELATIVE_THROUGHPUT as D
from statictrain.throughput import INFERRED, MEASURED
from statictrain_extender.decisions import prioritize_result
from statictrain_extender.scoring import Weights
from statictrain_extender.server import _StateCollector
from statictrain_extender.speeds import SpeedEstimator, class_key
from statictrain_extender.state import ClusterState
from statictrain_extender.stepstats import parse_step_seconds

from .builders import node_obj, pod_obj

NAMES = frozenset({"statictrain-scheduler"})
CLS = class_key("ns", "any", "llama")


def steps(truth: dict[str, float], unit: float = 2.0) -> dict[str, float]:
    """Mean step seconds of a job whose true relative speed per family is ``truth``."""
    return {f: unit / r for f, r in truth.items()}


def learn(est: SpeedEstimator, jobs: int, truth: dict[str, float], rounds: int = 1) -> None:
    for _ in range(rounds):
        est.observe({("ns", f"j{i}"): steps(truth) for i in range(jobs)}, lambda job: CLS)


def ratio(est: SpeedEstimator, a: str, b: str) -> float:
    got = est.throughput(CLS)
    assert got is not None
    return got.relative[a] / got.relative[b]


def test_nothing_measured_is_none() -> None:
    assert SpeedEstimator().throughput(CLS) is None


def test_a_right_table_stays_right() -> None:
    est = SpeedEstimator()
    learn(est, 3, {"A100": D["A100"], "T4": D["T4"]})
    got = est.throughput(CLS)
    assert got is not None
    assert got.relative["A100"] == pytest.approx(D["A100"]) and got.relative["T4"] == pytest.approx(D["T4"])
    assert got.source("T4") == MEASURED and got.source("V100") == INFERRED and got.relative["V100"] == D["V100"]


def test_a_wrong_table_moves_towards_the_measurement_as_samples_accumulate() -> None:
    truth = {"A100": 1.0, "T4": 2 * D["T4"]}  # the old GPU really runs twice as fast as the table says
    est = SpeedEstimator(prior_samples=2)
    learn(est, 1, truth)
    first = ratio(est, "T4", "A100")
    assert D["T4"] < first < truth["T4"]
    learn(est, 8, truth, rounds=3)
    later = ratio(est, "T4", "A100")
    assert first < later and later == pytest.approx(truth["T4"], rel=0.1)


def test_prior_zero_trusts_the_first_measurement() -> None:
    est = SpeedEstimator(prior_samples=0)
    learn(est, 1, {"A100": 1.0, "T4": 0.9})
    assert ratio(est, "T4", "A100") == pytest.approx(0.9)


def test_classes_learn_apart() -> None:
    est = SpeedEstimator(prior_samples=0)
    memory = class_key("ns", "m", "memory-bound")
    est.observe({("ns", "c"): steps({"A100": 1.0, "T4": 0.42})}, lambda job: CLS)
    est.observe({("ns", "m"): steps({"A100": 1.0, "T4": 0.65})}, lambda job: memory)
    a, b = est.throughput(CLS), est.throughput(memory)
    assert a is not None and b is not None
    assert a.relative["T4"] / a.relative["A100"] == pytest.approx(0.42)
    assert b.relative["T4"] / b.relative["A100"] == pytest.approx(0.65)


def test_a_stalled_job_is_not_learned_from_and_is_counted() -> None:
    est = SpeedEstimator(prior_samples=0)
    learn(est, 3, {"A100": 1.0})
    before = est.throughput(CLS)
    est.observe({("ns", "stalled"): {"A100": 3600.0}, ("ns", "nan"): {"A100": math.nan}}, lambda job: CLS)
    assert est.rejected == {"outlier": 1, "not_a_number": 1}  # the NaN is counted too
    assert est.throughput(CLS) == before
    assert len(est.stats[CLS]["A100"].jobs) == 3


def test_memory_is_bounded() -> None:
    est = SpeedEstimator(max_jobs=2, max_classes=1)
    learn(est, 5, {"A100": 1.0})
    assert list(est.stats[CLS]["A100"].jobs) == [("ns", "j3"), ("ns", "j4")]
    est.observe({("ns", "x"): {"A100": 1.0}}, lambda job: class_key("ns", "x", None))
    assert list(est.stats) == [("job", "ns", "x")]


@pytest.mark.parametrize("bad", [{"prior_samples": -1}, {"max_jobs": 0}, {"outlier_factor": 1.0}])
def test_bad_settings_say_what_to_fix(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="SpeedEstimator needs"):
        SpeedEstimator(**bad)  # type: ignore[arg-type]


def prom_sample(job: str, model: str, seconds: float) -> dict[str, object]:
    return {"metric": {"namespace": "team", "job_name": job, "gpu_model": model}, "value": [0, str(seconds)]}


def test_jobs_of_one_class_teach_the_next_job_through_the_prometheus_result() -> None:
    """Two finished jobs of a class ran on T4 and A100; a new job of that class is placed by what they showed."""
    state = ClusterState(speeds=SpeedEstimator(prior_samples=0))
    state.replace_nodes([node_obj("a100"), node_obj("t4", "Tesla-T4", 4, hourly="3.91")])
    for job in ("old1", "old2", "new"):
        pod = pod_obj(job=job, uid=f"u-{job}", node="a100" if job != "new" else None, phase="Running")
        pod["metadata"]["labels"][labels.WORKLOAD_CLASS] = "memory-bound"
        state.upsert_pod(pod)
    new_pod = pod_obj(job="new", uid="u-new")
    new_pod["metadata"]["labels"][labels.WORKLOAD_CLASS] = "memory-bound"
    body = {"Pod": new_pod, "NodeNames": ["a100", "t4"]}
    by_table = {h["Host"]: h["Score"] for h in prioritize_result(state, body, NAMES, _weights())}
    # This class runs on a T4 at 0.9 of an A100, not the table's 0.42: the T4 becomes the cheaper place.
    result = [prom_sample("old1", "NVIDIA-A100-SXM4-80GB", 1.0), prom_sample("old2", "Tesla-T4", 1 / 0.9)]
    state.set_step_seconds(parse_step_seconds(result))
    learned = {h["Host"]: h["Score"] for h in prioritize_result(state, body, NAMES, _weights())}
    assert by_table["a100"] > by_table["t4"] and learned["t4"] > learned["a100"]
    other = {"Pod": pod_obj(job="unlabelled", uid="u-x"), "NodeNames": ["a100", "t4"]}
    assert {h["Host"]: h["Score"] for h in prioritize_result(state, other, NAMES, _weights())} == by_table
    # What the cluster's operator sees: learned beside the table, with the samples behind it.
    seen = {(s.name, s.labels.get("workload_class"), s.labels.get("gpu_family")): s.value for s in _samples(state)}
    learned_t4 = seen[("statictrain_extender_learned_throughput", "memory-bound", "T4")]
    learned_a100 = seen[("statictrain_extender_learned_throughput", "memory-bound", "A100")]
    assert learned_t4 / learned_a100 == pytest.approx(0.9)
    assert seen[("statictrain_extender_table_throughput", "memory-bound", "T4")] == D["T4"]
    assert seen[("statictrain_extender_learned_samples", "memory-bound", "T4")] == 1
    in_use = {
        (s.labels["gpu_family"], s.labels["source"])
        for s in _samples(state)
        if s.name == "statictrain_extender_throughput_source" and s.labels["workload_class"] == "memory-bound"
    }
    assert ("T4", "measured") in in_use and ("A100", "measured") in in_use and ("H100", "inferred") in in_use
    # The unlabelled job (a class never measured) has no series: the table scores it.
    assert not any(s.labels.get("workload_class", "").startswith("job:") for s in _samples(state))


def _samples(state: ClusterState) -> list[Sample]:
    return [s for family in _StateCollector(state).collect() for s in family.samples]


def _weights() -> Weights:
    return Weights(cost=1, pack=0)
