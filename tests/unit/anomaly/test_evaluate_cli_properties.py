"""Property test of ``statictrain anomalies evaluate`` on generated hostile corpora (#33, #26).

Real files on disk, the real reader, replay and report. What always holds: an exit code of the CLI's
table (0 judged, 2 nothing to judge or unreadable labels) and never an exception; every job of the corpus
is in the report (judged, or with the reason it was not); the report is valid JSON; the replay's work is
bounded by the data, not by the span of the timestamps.
"""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from statictrain_cli import replay as replay_cli
from statictrain_operator.anomaly import replay as rp

T0 = 1_800_000_000.0
NAMES = [*(n.replace(".<rank>", ".0") for n in rp.UNITS), "weird_metric", "NaN", "..", "a b"]
numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([0, 1, -1, 1e308, -1e308, 5e-324]),
)
times = st.one_of(
    st.floats(min_value=T0, max_value=T0 + 600, allow_nan=False).map(str),
    numbers.map(str),
    st.sampled_from(["2026-12-02T17:00:00Z", "9999-12-31T23:59:59", "0001-01-01", "nan", "inf", "-inf", "", "x"]),
    st.text(max_size=12),
)
cell = st.one_of(numbers.map(str), st.text(max_size=12), st.sampled_from(["nan", "inf", "1e999", "", '"']))
lines = st.one_of(
    st.tuples(times, cell).map(lambda r: f"{r[0]},{r[1]}"),
    st.text(max_size=30),
    st.tuples(times, cell, cell).map(",".join),
)
good = st.lists(st.floats(min_value=0, max_value=1), min_size=20, max_size=120).map(
    lambda vs: [f"{T0 + i},{v}" for i, v in enumerate(vs)]  # a plausible series, judged for real
)
rows = st.tuples(good, st.lists(lines, max_size=30), st.booleans()).map(lambda r: r[0] + r[1] if r[2] else r[1] + r[0])
files = st.dictionaries(st.sampled_from(NAMES), st.one_of(rows, st.lists(lines, max_size=30)), max_size=6)
jsons = st.recursive(
    st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


def _parser() -> replay_cli.argparse.ArgumentParser:
    parser = replay_cli.argparse.ArgumentParser()
    replay_cli.add_parser(parser.add_subparsers())
    return parser


@given(
    jobs=st.dictionaries(st.sampled_from(["a", "b", "c"]), files, min_size=1, max_size=3),
    meta=st.one_of(st.none(), jsons, st.builds(lambda c: {"commits": c, "gpus": 1}, jsons)),
    labels=st.one_of(st.none(), jsons, st.dictionaries(st.sampled_from(["a", "b", "zz"]), jsons, max_size=3)),
    interval=st.sampled_from(["10", "1", "0", "-5", "nan", "inf", "1e-9", "1e9"]),
)
def test_evaluate_never_raises_and_reports_every_job(
    jobs: dict[str, dict[str, list[str]]], meta: object, labels: object, interval: str
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus"
        for job, series in jobs.items():
            (corpus / job).mkdir(parents=True)
            for name, rows in series.items():
                (corpus / job / f"{name}.csv").write_text("\n".join(rows) + "\n")
            if meta is not None:
                (corpus / job / "meta.json").write_text(json.dumps(meta))
        argv = ["evaluate", "--series", str(corpus), "--format", "json", "--interval-s", interval]
        if labels is not None:
            (Path(tmp) / "labels.json").write_text(json.dumps(labels))
            argv += ["--labels", str(Path(tmp) / "labels.json")]
        out, err = io.StringIO(), io.StringIO()
        try:
            args = _parser().parse_args(argv)
        except SystemExit as exc:  # argparse refuses the interval: its usage error, exit 2
            assert exc.code == 2
            return
        code = replay_cli.run(args, stdout=out, stderr=err)
        assert code in (0, 2), err.getvalue()
        if code == 2:
            assert err.getvalue().startswith("error: ") and err.getvalue().count("\n") == 1
            return
        rep = json.loads(out.getvalue())
        with_csv = {j for j, series in jobs.items() if series}
        assert {j["name"] for j in rep["jobs"]} == with_csv
