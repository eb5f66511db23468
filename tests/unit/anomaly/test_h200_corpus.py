"""The recorded H200 fault corpus through the offline replay: each class gets its own action (the
precedence of ``remediation.precedence`` on real series), clean runs get none."""

from __future__ import annotations

from pathlib import Path

from statictrain_cli import replay as replay_cli
from statictrain_operator.anomaly import replay as rp

CORPUS = Path(__file__).resolve().parents[3] / "bench" / "data" / "training_faults"


def test_every_recorded_fault_gets_its_class_action_and_clean_runs_none() -> None:
    labels = replay_cli.read_labels(CORPUS / "labels.json")
    recordings, notes = replay_cli.load(CORPUS)
    rep = replay_cli.report(recordings, notes, labels, rp.ReplaySettings())
    summary = rep["summary"]
    assert summary["windows"] == summary["windows_detected"] == 8
    assert set(summary["fault_classes_caught"]) == set(summary["fault_classes"])
    assert summary["clean_series"] == 3 and summary["clean_false_actions"] == 0
    assert summary["actions_outside_windows_on_fault_series"] == 0
    actions = {j["name"]: [e["action"] for e in j["episodes"] if e["action"]] for j in rep["jobs"]}
    # a regression under a new commit is reverted, never restarted, though its memory moved with it
    assert actions["regression-then-rollback"] == ["RevertSettings"]
    # a long idle is scaled down, not restarted
    assert actions["idle-long"] == ["ScaleDown"]
