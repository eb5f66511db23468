"""The demo's plan (pure): which commits its cost gate compares."""

from __future__ import annotations

from statictrain_localcluster.demo import DemoJob, demo_jobs, gate_commits


def test_gate_compares_the_demos_second_commit_with_its_first() -> None:
    assert gate_commits(demo_jobs(10)) == ("a1b2c3d", "e4f5a6b", "")


def test_one_commit_is_compared_with_itself_and_says_so() -> None:
    one = [DemoJob("tiny-cpu.yaml", "j", "ns", "c1", "t")]
    assert gate_commits(one) == ("c1", "c1", " (the demo ran one commit only: compared with itself)")
