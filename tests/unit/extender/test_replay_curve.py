"""The learning curve's buckets: $/work of the tasks that started in each, scorings per source in each."""

from __future__ import annotations

import pytest
from statictrain_extender.replay.curve import batch_cost_per_work_by_slice, bucket_names, source_counts_by_slice
from statictrain_extender.replay.workload import Task
from statictrain_extender.replay.workreport import NodeFacts, Placement


def task(name: str, arrive_s: float, ref_s: float, *, prefilled: bool = False, service: bool = False) -> Task:
    return Task(name, 1000, 1024, 1000, arrive_s, ref_s, service, prefilled)


def test_bucket_names() -> None:
    assert bucket_names(4) == ["prefill", "t0-25%", "t25-50%", "t50-75%", "t75-100%"]
    with pytest.raises(ValueError, match="slices must be >= 1"):
        batch_cost_per_work_by_slice([], {}, {}, speedup=1, length_s=1, slices=0)


def test_each_task_counts_in_the_bucket_it_started_in() -> None:
    # Window 1000 s, 2 slices. A prefilled task on a $2/h A100 node, one started at 100 s on a $1/h T4 (0.5),
    # one at 600 s on its own $3/h A100 node; a service is left out. Each node holds one task: its whole cost.
    nodes = {
        "a1": NodeFacts("A100", 1, 2.0, 1.0),
        "t4": NodeFacts("T4", 1, 1.0, 0.5),
        "a2": NodeFacts("A100", 1, 3.0, 1.0),
        "s": NodeFacts("A100", 1, 9.0, 1.0),
    }
    tasks = [
        task("p", 0, 360, prefilled=True),
        task("x", 100, 180),
        task("y", 600, 3600),
        task("svc", 0, 500, service=True),
    ]
    placed = {
        "p": Placement("a1", 0.0, None),
        "x": Placement("t4", 100.0, 0.0),
        "y": Placement("a2", 600.0, 0.0),
        "svc": Placement("s", 0.0, None),
    }
    got = batch_cost_per_work_by_slice(tasks, placed, nodes, speedup=1, length_s=1000, slices=2)
    # p: 360 s at $2/h for 0.1 GPU-h -> $2/work; x: 360 s on the T4 for 0.05 A100-GPU-h at $1/h -> $2/work;
    # y: censored at 1000 s, 400 s at $3/h -> $3/work.
    assert got == pytest.approx([2.0, 2.0, 3.0])
    assert batch_cost_per_work_by_slice(tasks[:1], placed, nodes, speedup=1, length_s=1000, slices=2)[1:] == [
        None,
        None,
    ]


def test_scorings_go_to_the_bucket_of_the_sample_that_saw_them() -> None:
    samples = [
        (-50.0, {"table": 7.0}),  # the baseline: earlier windows' scorings
        (-10.0, {"table": 10.0}),  # the prefill: 3 from the table
        (100.0, {"table": 12.0, "measured": 1.0}),
        (700.0, {"table": 12.0, "measured": 6.0, "inferred": 2.0}),
        (1200.0, {"table": 20.0, "measured": 9.0}),  # after the window's end: left out
    ]
    got = source_counts_by_slice(samples, length_s=1000, slices=2)
    assert got == [{"table": 3.0}, {"table": 2.0, "measured": 1.0}, {"measured": 5.0, "inferred": 2.0}]
