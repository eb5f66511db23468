"""The replay's learning arm: scenario truths, tasks of a class at their class's speed, step times as exported."""

from __future__ import annotations

import dataclasses
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from statictrain.throughput import DEFAULT_RELATIVE_THROUGHPUT as D
from statictrain_extender.replay.arms import learning_arms, scheduler_config
from statictrain_extender.replay.steptimes import STEP_REFERENCE_S, StepExporter, job_factor
from statictrain_extender.replay.truth import CLASSES, truth, workload_class_of
from statictrain_extender.replay.workload import tasks_for
from statictrain_extender.replay.workreport import NodeFacts, Placement, arm_figures
from statictrain_extender.scoring import Weights
from statictrain_extender.stepstats import parse_step_seconds

from .test_replay_workload import pod


def test_scenarios_change_what_they_say_and_nothing_else() -> None:
    ref = truth("reference", D)
    assert ref["compute"] == ref["memory"] == dict(D)
    fast, slow = truth("old_2x_faster", D)["compute"], truth("old_2x_slower", D)["memory"]
    assert fast["T4"] == 2 * D["T4"] and fast["V100"] == 2 * D["V100"] and fast["A100"] == D["A100"]
    assert slow["T4"] == D["T4"] / 2 and slow["A100"] == D["A100"]
    mem = truth("memory_bound", D)
    assert mem["compute"] == dict(D)
    assert mem["memory"]["T4"] == pytest.approx(D["T4"] ** 0.5) and mem["memory"]["H100"] == pytest.approx(
        D["H100"] ** 0.5
    )
    with pytest.raises(ValueError, match="choose one of"):
        truth("optimistic", D)


def test_classes_split_the_tasks() -> None:
    classes = [workload_class_of(f"pod-{i}") for i in range(400)]
    assert set(classes) == set(CLASSES)
    assert 150 < classes.count("memory") < 250
    assert workload_class_of("pod-1") == workload_class_of("pod-1")


def test_a_task_runs_and_works_at_its_class_speed() -> None:
    # One 1-GPU batch task of 1 h on an A100; on a T4 the memory class runs at 0.65, not 0.42.
    task = tasks_for([pod("x", 0, 0, 3600), pod("end", 0, 0, 10**6)], start_s=0, length_s=100_000, compression=1)[-1]
    assert task.name == "x"
    memory = dataclasses.replace(task, workload_class="memory")
    nodes = {"t": NodeFacts("T4", 1, 1.0, 0.42, {"memory": 0.65})}
    placed = {"x": Placement("t", 0.0, 0.0)}
    compute_fig = arm_figures([task], placed, nodes, speedup=100, length_s=100_000)
    memory_fig = arm_figures([memory], placed, nodes, speedup=100, length_s=100_000)
    assert compute_fig["batch_cost_usd"] == pytest.approx(1.0 / 0.42)  # 1 A100-hour of work at $1/h
    assert memory_fig["batch_cost_usd"] == pytest.approx(1.0 / 0.65)
    assert memory_fig["batch_work_a100_gpu_hours"] == pytest.approx(1.0)


def test_the_learning_arm_has_its_own_extender() -> None:
    arms = learning_arms(Weights(cost=1, pack=3))
    keys = {a.key: a.extender_key for a in arms}
    assert keys["e"] != keys["l"] and keys["l"] is not None and keys["l"].endswith("-learn")
    assert len({keys["e"], keys["l"], keys["o"]}) == 3 and keys["o"] is not None and keys["o"].endswith("-oracle")
    urls = {keys["e"]: "ue", keys["l"]: "ul", keys["o"]: "uo"}
    cfg = scheduler_config(arms, {}, urls, "k")  # type: ignore[dict-item]
    assert sorted(e["urlPrefix"] for e in cfg["extenders"]) == ["ue", "ul", "uo"]


def test_exported_step_times_read_back_as_the_extender_parses_them() -> None:
    now = [100.0]
    (task,) = tasks_for([pod("job-a", 0, 0, 3600)], start_s=0, length_s=10_000, compression=1)
    (svc,) = tasks_for([pod("svc", 0, 0, 3600, qos="LS")], start_s=0, length_s=10_000, compression=1)
    exporter = StepExporter({"n1": "Tesla-T4"}, speedup=100, clock=lambda: now[0])
    try:
        exporter.started("ns", "job-a", "n1", task, speed=0.84)
        exporter.started("ns", "svc", "n1", svc, speed=1.0)  # services do not train
        exporter.started("ns", "nogpu", "cpu-node", task, speed=1.0)  # no GPU model: nothing to report
        now[0] = 160.0
        with urllib.request.urlopen(f"http://{exporter.address}/metrics", timeout=5) as resp:
            text = resp.read().decode()
        exporter.stopped("ns", "job-a")
        assert "job-a" not in exporter.text()
    finally:
        exporter.close()
    series = {s.name: s for fam in text_string_to_metric_families(text) for s in fam.samples}
    step = STEP_REFERENCE_S / 0.84 / 100 * job_factor("job-a")
    count = series["statictrain_train_step_seconds_count"].value
    assert count == int(60.0 / step)
    mean = series["statictrain_train_step_seconds_sum"].value / count
    # What the extender's query would return for it (rate(sum)/rate(count) joined on pod_uid), parsed as it parses.
    gpu = series["statictrain_gpu_utilization_ratio"].labels
    result = [
        {"metric": {"namespace": "ns", "job_name": "job-a", "gpu_model": gpu["gpu_model"]}, "value": [0, str(mean)]}
    ]
    assert parse_step_seconds(result) == {("ns", "job-a"): {"T4": pytest.approx(step)}}
    assert sum(1 for fam in text_string_to_metric_families(text) for s in fam.samples if s.name.endswith("_count")) == 1
