"""The CI cost gate: comparison table, report JSON input, CLI exit codes (pure; no Prometheus)."""

from __future__ import annotations

import io
import json
import math
import shlex
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from statictrain.cost import Sample
from statictrain_cli.gate import run_gate
from statictrain_cli.main import build_parser
from statictrain_cli.report.model import ReportWindow, build_report
from statictrain_cli.report.text import to_json
from statictrain_operator.gate import (
    CommitFigures,
    compare,
    figures_from_report_json,
    parse_max_regression,
)
from statictrain_operator.history import UNKNOWN_MODEL, Speed, per_model
from statictrain_operator.prom import Series

CANNOT_JUDGE = 3
"""The gate's exit status with no verdict: Prometheus unusable, or a figure missing or not finite (README)."""


def figs(commit: str, usd: float, tokens: float, **tps: float) -> CommitFigures:
    return CommitFigures(commit, usd, tokens, {k.replace("_", " "): v for k, v in tps.items()})


Case = tuple[str, CommitFigures | None, CommitFigures | None, float, bool, list[str], str]
# (id, candidate, baseline, max regression, want passed, want failed checks, want note fragment)
CASES: list[Case] = [
    ("same cost", figs("c", 10, 1e6), figs("b", 10, 1e6), 0.05, True, [], "not available"),
    ("cheaper", figs("c", 9, 1e6), figs("b", 10, 1e6), 0.05, True, [], ""),
    ("4.9% dearer passes 5%", figs("c", 10.49, 1e6), figs("b", 10, 1e6), 0.05, True, [], ""),
    ("5.1% dearer fails 5%", figs("c", 10.51, 1e6), figs("b", 10, 1e6), 0.05, False, ["$/1M tokens"], ""),
    ("fewer tokens same usd", figs("c", 10, 0.9e6), figs("b", 10, 1e6), 0.05, False, ["$/1M tokens"], ""),
    ("0% allows no worsening", figs("c", 10.01, 1e6), figs("b", 10, 1e6), 0.0, False, ["$/1M tokens"], ""),
    (
        "slower on one model",
        figs("c", 10, 1e6, H100=900, A100=500),
        figs("b", 10, 1e6, H100=1000, A100=500),
        0.05,
        False,
        ["tokens/s per pod on H100"],
        "",
    ),
    (
        "model measured for one commit only",
        figs("c", 10, 1e6, H100=1000, L4=80),
        figs("b", 10, 1e6, H100=1000),
        0.05,
        True,
        [],
        "not compared on L4",
    ),
    ("free baseline, paid commit", figs("c", 1, 1e6), figs("b", 0, 1e6), 0.05, False, ["$/1M tokens"], ""),
    ("no runs for the commit", None, figs("b", 10, 1e6), 0.05, False, [], "no runs for commit 'C'"),
    ("no runs for the baseline", figs("c", 10, 1e6), None, 0.05, False, [], "no runs for baseline 'B'"),
    ("no tokens for the commit", figs("c", 10, 0), figs("b", 10, 1e6), 0.05, False, [], "no tokens recorded"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_compare(case: Case) -> None:
    _, cand, base, limit, want_pass, want_failed, note = case
    v = compare(cand, base, limit, commit="C", baseline_commit="B")
    assert v.passed is want_pass
    assert [c.what for c in v.checks if c.failed] == want_failed
    if note:
        assert any(note in n for n in v.notes), v.notes
    text = v.explain("C", "B", limit)
    assert text.startswith("cost gate PASS" if want_pass else "cost gate FAIL")


def test_worse_by_is_the_relative_change() -> None:
    v = compare(figs("c", 11, 1e6, H100=800), figs("b", 10, 1e6, H100=1000), 0.5, commit="c", baseline_commit="b")
    got = {c.what: c.worse_by for c in v.checks}
    assert math.isclose(got["$/1M tokens"], 0.1)
    assert math.isclose(got["tokens/s per pod on H100"], 0.2)
    assert v.passed


@pytest.mark.parametrize(("text", "want"), [("5%", 0.05), ("0%", 0.0), (" 12.5% ", 0.125)])
def test_parse_max_regression(text: str, want: float) -> None:
    assert parse_max_regression(text) == want


@pytest.mark.parametrize("text", ["5", "0.05", "x%", "-1%", "2000%"])
def test_parse_max_regression_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="max regression"):
        parse_max_regression(text)


def test_speed_joins_pods_to_gpu_models() -> None:
    tps = [
        ({"commit": "c1", "pod_uid": "p1"}, 100.0),
        ({"commit": "c1", "pod_uid": "p2"}, 300.0),
        ({"commit": "c1", "pod_uid": "p3"}, 50.0),
        ({"commit": "c2", "pod_uid": "p4"}, 7.0),
        ({"commit": "c2", "pod_uid": "p5"}, float("nan")),
    ]
    steps = [({"commit": "c1", "pod_uid": "p1"}, 0.5), ({"commit": "c1", "pod_uid": "p2"}, 0.7)]
    models = [({"pod_uid": "p1"}, "H100"), ({"pod_uid": "p2"}, "H100"), ({"pod_uid": "p3"}, "L4")]
    assert per_model(tps, steps, models, "commit") == {
        "c1": {"H100": Speed(200.0, 0.6, 2), "L4": Speed(50.0, None, 1)},
        "c2": {UNKNOWN_MODEL: Speed(7.0, None, 1)},
    }


# ---- report JSON as `statictrain report --by commit --format json` writes it


def _report_json(usd: dict[str, float], tokens: dict[str, float], by: str = "commit") -> dict[str, Any]:
    w = ReportWindow(datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 1, 1, tzinfo=UTC), buckets=1)

    def series(commit: str, v: float) -> Series:
        labels = {"job_name": f"j-{commit}", "namespace": "n", "commit": commit, "team": "t"}
        return Series(labels, (Sample(w.eval_start, 0.0), Sample(w.eval_end, v)))

    jobs = {"usd": [series(c, v) for c, v in usd.items()], "tokens": [series(c, v) for c, v in tokens.items()]}
    doc: dict[str, Any] = json.loads(to_json(build_report(w, by, jobs, {})))  # type: ignore[arg-type]
    return doc


def test_figures_from_exported_report() -> None:
    doc = _report_json({"c1": 2.0, "c2": 3.0}, {"c1": 1e6, "c2": 1e6})
    got = figures_from_report_json([doc, doc])
    assert got["c1"].usd == 4.0 and got["c1"].tokens == 2e6
    assert got["c2"].usd_per_1m_tokens == 3.0


def test_report_grouped_by_job_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match="--by commit"):
        figures_from_report_json([_report_json({"c1": 1.0}, {"c1": 1.0}, by="job")])
    with pytest.raises(ValueError, match="not a statictrain report"):
        figures_from_report_json([[1, 2]])  # type: ignore[list-item]


def _run(tmp_path: Path, doc: object, *argv: str) -> tuple[int, str, str]:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc, encoding="utf-8")
    args = build_parser().parse_args(["gate", "--report", str(path), *argv])
    out, err = io.StringIO(), io.StringIO()
    return run_gate(args, stdout=out, stderr=err), out.getvalue(), err.getvalue()


def test_cli_exit_codes_from_report_json(tmp_path: Path) -> None:
    doc = _report_json({"base": 10.0, "slow": 12.0, "same": 10.0}, {"base": 1e6, "slow": 1e6, "same": 1e6})
    rc, out, _ = _run(tmp_path, doc, "--commit", "same", "--baseline", "base", "--max-regression", "5%")
    assert rc == 0 and "PASS" in out
    rc, out, _ = _run(tmp_path, doc, "--commit", "slow", "--baseline", "base", "--max-regression", "5%")
    assert rc == 1 and "REGRESSION" in out and "(20.0% worse)" in out
    rc, out, _ = _run(tmp_path, doc, "--commit", "deadbeef", "--baseline", "base", "--max-regression", "5%")
    assert rc == 1 and "no runs for commit 'deadbeef'" in out


def test_cli_bad_input_is_exit_2(tmp_path: Path) -> None:
    rc, _, err = _run(tmp_path, "{not json", "--commit", "a", "--baseline", "b", "--max-regression", "5%")
    assert rc == 2 and "not JSON" in err
    doc = _report_json({"a": 1.0}, {"a": 1.0})
    rc, _, err = _run(tmp_path, doc, "--commit", "a", "--baseline", "b", "--max-regression", "5")
    assert rc == 2 and "like 5%" in err


def test_cli_unreachable_prometheus_is_cannot_judge() -> None:
    args = build_parser().parse_args(
        [
            "gate",
            "--commit",
            "a",
            "--baseline",
            "b",
            "--max-regression",
            "5%",
            "--prometheus-url",
            "http://127.0.0.1:9",
            "--timeout",
            "2",
        ]
    )
    err = io.StringIO()
    assert run_gate(args, stdout=io.StringIO(), stderr=err) == CANNOT_JUDGE
    assert "cannot reach Prometheus" in err.getvalue()


CI_DIR = Path(__file__).resolve().parents[3] / "deploy" / "ci"


@pytest.mark.parametrize("name", ["github-actions.yml", "gitlab-ci.yml"])
def test_ci_examples_parse_and_call_the_gate_with_valid_arguments(name: str) -> None:
    text = (CI_DIR / name).read_text(encoding="utf-8")
    yaml.safe_load(text)
    calls = [line.split("statictrain gate", 1)[1] for line in text.splitlines() if "statictrain gate" in line]
    assert calls, f"{name} never calls statictrain gate"
    for call in calls:
        argv = ["gate", *(a if not a.startswith("$") else "x" for a in shlex.split(call))]
        args = build_parser().parse_args(argv)
        assert parse_max_regression(args.max_regression) == 0.05


def test_explain_says_better_or_worse_in_words() -> None:
    better = compare(figs("c", 5, 1e6), figs("b", 10, 1e6), 0.05, commit="c", baseline_commit="b")
    assert "(50.0% better)" in better.explain("c", "b", 0.05)
    worse = compare(figs("c", 11, 1e6), figs("b", 10, 1e6), 0.05, commit="c", baseline_commit="b")
    assert "(10.0% worse)" in worse.explain("c", "b", 0.05)


@pytest.mark.parametrize("usd", ["NaN", "Infinity", "-Infinity", "1e999", '"nan"', '"inf"', "null", '"x"'])
def test_a_non_finite_or_missing_cost_of_the_commit_never_passes(tmp_path: Path, usd: str) -> None:
    """#33: a report whose cost for the commit was NaN or inf passed with exit 0 ("nan% better")."""
    doc = _report_json({"base": 10.0, "cand": 10.0}, {"base": 1e6, "cand": 1e6})
    text = json.dumps(doc).replace('"usd": "10.000000"', '"usd": @', 2)
    text = text.replace("@", '"10.000000"', 1).replace("@", usd, 1)  # the baseline's row first: cand is hostile
    assert '"commit": "cand"' in text
    rc, out, err = _run(tmp_path, text, "--commit", "cand", "--baseline", "base", "--max-regression", "5%")
    assert rc == CANNOT_JUDGE and "PASS" not in out and "CANNOT JUDGE" in out, out
    assert err.count("\n") == 1 and "cannot judge commit 'cand'" in err, err


@pytest.mark.parametrize(
    ("candidate", "baseline"),
    [
        (figs("c", math.nan, 1e6), figs("b", 10, 1e6)),
        (figs("c", math.inf, 1e6), figs("b", 10, 1e6)),
        (figs("c", 10, 1e6), figs("b", math.nan, 1e6)),
        (figs("c", 10, math.inf), figs("b", 10, 1e6)),
        (figs("c", -1, 1e6), figs("b", 10, 1e6)),
        (figs("c", 1e300, 1e-300), figs("b", 10, 1e6)),  # $/1M tokens overflows
        (figs("c", 10, 1e6, H100=math.nan), figs("b", 10, 1e6, H100=1000)),
    ],
)
def test_compare_cannot_judge_non_finite_figures(candidate: CommitFigures, baseline: CommitFigures) -> None:
    verdict = compare(candidate, baseline, 0.05, commit="c", baseline_commit="b")
    assert not verdict.passed and not verdict.judged
    assert "CANNOT JUDGE" in verdict.explain("c", "b", 0.05) and "nan%" not in verdict.explain("c", "b", 0.05)
