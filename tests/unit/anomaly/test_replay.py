"""Offline replay: the loop over recorded series, bad input, scoring, and the CLI's file handling."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
from statictrain_cli import replay as replay_cli
from statictrain_operator.anomaly import replay as rp
from statictrain_operator.anomaly.remediation import ActionKind

from tests.unit.anomaly.test_faults import T0, job

S = rp.ReplaySettings()


def recording(kind: str = "none", fault_at: int | None = None, seconds: int = 300) -> rp.Recording:
    series = job(seconds, fault_at=fault_at, kind=kind)
    return rp.Recording(kind, {k: (list(t), list(v)) for k, (t, v) in series.items()})


def test_a_hang_gets_a_restart_in_time_and_a_clean_run_no_action() -> None:
    hang = rp.replay(recording("hang", 100), S)
    (w,) = rp.score(hang, [rp.Window(T0 + 100, T0 + 299, "hang")]).windows
    assert w.caught and w.expected == ActionKind.RESTART_FROM_CHECKPOINT.value
    # no sooner than the shortest hang, within one evaluation interval after it
    hang_min = S.faults.hang_min_s
    assert w.delay_s is not None and hang_min <= w.delay_s <= hang_min + S.interval_s + 1
    clean = rp.replay(recording(), S)
    assert rp.score(clean, []).actions_outside == []
    assert all(k.action is None for k in clean.ticks)


def test_a_straggler_is_recommended_not_a_settings_revert() -> None:
    r = rp.replay(recording("straggler", 100), S)
    (w,) = rp.score(r, [rp.Window(T0 + 100, T0 + 299, "straggler")]).windows
    assert w.caught and w.first_action == ActionKind.REPLACE_STRAGGLER.value


def test_missed_fault_is_reported_as_missed() -> None:
    r = rp.replay(recording(), S)  # nothing happens, but the label says a leak
    (w,) = rp.score(r, [rp.Window(T0 + 100, T0 + 200, "memory_leak")]).windows
    assert not w.caught and w.detected_at is None


def test_bad_series_get_messages_and_block_the_action_resting_on_them() -> None:
    rec = recording("hang", 100)
    ts, vs = rec.series["train_step"]
    rec.series["train_step"] = (ts[:150] + ts[190:], vs[:150] + vs[190:])  # a 40 s gap inside the hang
    vs2 = list(rec.series["gpu_power_watts"][1])
    vs2[5] = math.nan
    rec.series["gpu_power_watts"] = (rec.series["gpu_power_watts"][0], vs2)
    rec.series["weird_metric"] = ([T0, T0 + 1], [1.0, 2.0])
    rec.series["gpu_memory_used_bytes"] = ([T0], [2.0**30])
    r = rp.replay(rec, S)
    messages = " | ".join(f"{p.series}: {p.message}" for p in r.problems)
    assert "train_step: gap of 41 s" in messages
    assert "gpu_power_watts: 1 NaN/Inf values ignored" in messages
    assert "unknown metric 'weird_metric'" in messages
    assert "gpu_memory_used_bytes: 1 usable points, too few" in messages
    blocked = [k for k in r.ticks if "Stalled not acted on: train_step: gap" in k.message]
    assert blocked and all(k.action is None for k in blocked)


def test_a_counter_reset_is_reported() -> None:
    rec = recording()
    ts, vs = rec.series["train_step"]
    rec.series["train_step"] = (ts, vs[:200] + [v - vs[199] for v in vs[200:]])
    r = rp.replay(rec, S)
    assert any("reset from" in p.message for p in r.problems)


def test_unknown_metric_alone_is_judged_generically_never_acted_on() -> None:
    ts = [T0 + 60 * i for i in range(600)]
    vs = [10.0 + math.sin(i / 10) for i in range(600)]
    vs[500] = 80.0
    r = rp.replay(rp.Recording("nyc_taxi", {"nyc_taxi": (ts, vs)}), S)
    assert r.ticks == [] and r.generic["nyc_taxi"]
    assert any(T0 + 60 * 499 <= t <= T0 + 60 * 510 for t in r.generic["nyc_taxi"])


def test_regression_under_a_new_commit_reverts_to_the_old_settings() -> None:
    rec = recording(seconds=240)
    ts = rec.series["train_step"][0]
    # a measured rate varies from step to step (a gauge that never changes counts as one record)
    rate = [(160_000.0 if t < T0 + 150 else 50_000.0) * (1 + 0.01 * math.sin(i)) for i, t in enumerate(ts)]
    rec.series["tokens_per_second"] = (ts, rate)
    rec.commits = [
        rp.Commit(T0, "c1", {"STATICTRAIN_PRECISION": "bf16"}),
        rp.Commit(T0 + 150, "c2", {"STATICTRAIN_PRECISION": "fp32"}),
    ]
    r = rp.replay(rec, S)
    (w,) = rp.score(r, [rp.Window(T0 + 150, T0 + 239, "regression")]).windows
    assert w.caught and w.delay_s is not None and w.delay_s <= 30


def test_cli_reads_folders_and_plain_files_and_scores(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    (corpus / "hang").mkdir(parents=True)
    for name, (ts, vs) in recording("hang", 100).series.items():
        lines = ["timestamp,value"] + [f"{rp._iso(t)},{v}" for t, v in zip(ts, vs, strict=True)]
        (corpus / "hang" / f"{name}.csv").write_text("\n".join(lines) + "\n")
    (corpus / "other.csv").write_text("timestamp,value\n2020-01-01 00:00:00,1\nnot-a-time,2\n1577836860,oops\n")
    labels = tmp_path / "labels.json"
    labels.write_text(
        json.dumps(
            {
                "hang": {"class": "hang", "windows": [[rp._iso(T0 + 100), rp._iso(T0 + 299)]]},
                "data/other.csv": [],
            }
        )
    )
    out, err = io.StringIO(), io.StringIO()
    parser = replay_cli.argparse.ArgumentParser()
    replay_cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(["evaluate", "--series", str(corpus), "--labels", str(labels), "--format", "json"])
    assert replay_cli.run(args, stdout=out, stderr=err) == 0, err.getvalue()
    rep = json.loads(out.getvalue())
    assert rep["summary"]["fault_classes_caught"] == ["hang"]
    assert rep["summary"]["clean_series"] == 1 and rep["summary"]["clean_false_actions"] == 0
    other = next(j for j in rep["jobs"] if j["name"] == "other")
    text = " ".join(other["messages"])
    assert "line 3: cannot read a timestamp" in text and "line 4: cannot read a value" in text
    assert "too few to judge" in text


def test_cli_says_what_to_fix_for_a_bad_folder_or_labels(tmp_path: Path) -> None:
    parser = replay_cli.argparse.ArgumentParser()
    replay_cli.add_parser(parser.add_subparsers())
    err = io.StringIO()
    args = parser.parse_args(["evaluate", "--series", str(tmp_path / "nope")])
    assert replay_cli.run(args, stdout=io.StringIO(), stderr=err) == 2
    assert "not a directory" in err.getvalue()
    (tmp_path / "x.csv").write_text("timestamp,value\n1,2\n")
    bad = tmp_path / "labels.json"
    bad.write_text('{"x": [[1]]}')
    args = parser.parse_args(["evaluate", "--series", str(tmp_path), "--labels", str(bad)])
    err = io.StringIO()
    assert replay_cli.run(args, stdout=io.StringIO(), stderr=err) == 2
    assert "a window must be [start, end]" in err.getvalue()


@pytest.mark.parametrize(
    ("text", "want"),
    [("1577836800", 1577836800.0), ("2020-01-01 00:00:00", 1577836800.0), ("2020-01-01T00:00:00Z", 1577836800.0)],
)
def test_timestamps_unix_or_iso(text: str, want: float) -> None:
    assert replay_cli.parse_time(text) == want


def test_the_readme_lists_every_metric_file_of_the_replay_with_its_unit() -> None:
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    rows = {line.split("|")[1].strip().strip("`") for line in readme.splitlines() if line.startswith("| `")}
    assert set(rp.UNITS) <= rows
