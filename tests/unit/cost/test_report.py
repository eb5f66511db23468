"""Report building and rendering from counter series (pure)."""

from __future__ import annotations

import argparse
import io
import itertools
import json
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from statictrain.cost import Sample
from statictrain_cli.main import build_parser, run_report
from statictrain_cli.report.fetch import _chunks, fetch, job_filters
from statictrain_cli.report.html import to_html
from statictrain_cli.report.model import EmptyWindowError, ReportWindow, build_report, parse_utc
from statictrain_cli.report.status import status_report
from statictrain_cli.report.summary import commit_order, sentences, worst_regression
from statictrain_cli.report.svg import nice_ticks, num
from statictrain_cli.report.text import to_csv, to_json, to_table
from statictrain_localcluster.browser import check_page
from statictrain_operator.prom import Series

START = datetime(2026, 3, 1, tzinfo=UTC)
END = datetime(2026, 3, 1, 4, tzinfo=UTC)  # 4 h, 4 buckets of 1 h
W = ReportWindow(START, END, buckets=4)


def counter(value_at: Callable[[float], float | None], labels: dict[str, str]) -> Series:
    """A counter evaluated at the report's points; None = series absent at that point."""
    pts = []
    for i in range(W.buckets + 1):
        t = W.eval_start + i * W.step_s
        v = value_at((t - W.eval_start) / 3600)
        if v is not None:
            pts.append(Sample(t, v))
    return Series(labels, tuple(pts))


def jl(job: str, ns: str, commit: str, team: str = "t") -> dict[str, str]:
    return {"job_name": job, "namespace": ns, "commit": commit, "team": team}


def scenario() -> tuple[dict[str, list[Series]], dict[str, list[Series]]]:
    # node: 10 $/h all along (100 $ before the window); job a: 4 $/h; job b starts at 2 h, 3 $/h;
    # job c: 2 $/h with an operator restart (counter reset) at 3 h.
    a = counter(lambda h: 50 + 4 * h, jl("a", "ns1", "c1"))
    b = counter(lambda h: None if h < 2 else 3 * (h - 1), jl("b", "ns2", "c2"))  # first seen at 3 $ (1 h at 2 h)
    c = counter(lambda h: 7 + 2 * h if h < 3 else 2 * (h - 3) + 0.0, jl("c", "ns2", "c1"))
    tokens_a = counter(lambda h: 1e6 * h, jl("a", "ns1", "c1"))
    usd = [a, b, c]
    node_usd = counter(lambda h: 100 + 10 * h, {"node": "n1"})
    # unallocated node cost, an independent input here (the operator exports it)
    idle = counter(lambda h: [0, 4, 8, 9, 12][round(h)], {"node": "n1"})
    return {"usd": usd, "tokens": [tokens_a]}, {"node_usd": [node_usd], "node_idle_usd": [idle]}


def test_rows_by_job_with_baseline_new_series_and_reset() -> None:
    jobs, nodes = scenario()
    r = build_report(W, "job", jobs, nodes)
    got = {row.key: round(row.usd, 9) for row in r.rows}
    assert got == {("ns1", "a"): 16.0, ("ns2", "b"): 9.0, ("ns2", "c"): 6.0}
    assert r.node_usd == 40.0 and r.node_idle_usd == 12.0
    assert r.invariant_ratio is not None and abs(r.invariant_ratio - (31 + 12) / 40) < 1e-12
    assert [row.key for row in r.rows] == [("ns1", "a"), ("ns2", "b"), ("ns2", "c")]


@pytest.mark.parametrize(
    ("by", "want"),
    [
        ("commit", {("c1",): 22.0, ("c2",): 9.0}),
        ("namespace", {("ns1",): 16.0, ("ns2",): 15.0}),
        ("team", {("t",): 31.0}),
    ],
)
def test_group_by(by: str, want: dict[tuple[str, ...], float]) -> None:
    jobs, nodes = scenario()
    r = build_report(W, by, jobs, nodes)  # type: ignore[arg-type]
    assert {row.key: round(row.usd, 9) for row in r.rows} == want


def test_usd_per_1m_tokens_per_commit_and_buckets() -> None:
    jobs, nodes = scenario()
    r = build_report(W, "commit", jobs, nodes)
    assert r.commit_tokens["c1"] == pytest.approx((22.0, 4e6))
    row = next(x for x in r.rows if x.key == ("c1",))
    assert row.usd_per_1m_tokens == pytest.approx(5.5)
    assert r.namespace_buckets["ns1"] == pytest.approx([4, 4, 4, 4])
    # c: reset at 3 h loses that bucket's pre-reset part; b: first seen at 2 h with 3 $ already
    assert r.namespace_buckets["ns2"] == pytest.approx([2, 5, 3, 5])


def test_filtered_report_does_not_claim_the_invariant() -> None:
    jobs, nodes = scenario()
    r = build_report(W, "job", jobs, nodes, filters={"namespace": ["ns1"]})
    assert r.invariant_ratio is None


def test_empty_window_is_a_clear_error() -> None:
    with pytest.raises(EmptyWindowError, match=r"no cost data in \[2026-03-01T00:00:00Z, 2026-03-01T04:00:00Z\)"):
        build_report(W, "job", {}, {})


def test_renderers_are_deterministic_and_agree() -> None:
    jobs, nodes = scenario()
    outs = [
        (to_table(r), to_csv(r), to_json(r), to_html(r))
        for r in (build_report(W, "commit", jobs, nodes) for _ in range(2))
    ]
    assert outs[0] == outs[1]
    table, csv_text, json_text, _ = outs[0]
    doc = json.loads(json_text)
    assert doc["window"] == {
        "start": "2026-03-01T00:00:00Z",
        "end": "2026-03-01T04:00:00Z",
        "half_open": True,
        "buckets": 4,
    }
    assert [row["usd"] for row in doc["rows"]] == ["22.000000", "9.000000"]
    assert csv_text.splitlines()[1].startswith("c1,22.000000,")
    assert "c1" in table and "(jobs+idle)/nodes = 1.075000" in table


def test_html_is_self_contained_with_five_charts() -> None:
    jobs, nodes = split_scenario()
    jobs["usd"].append(counter(lambda h: 1.0, jl("<script>alert(1)</script>", "ns3", "x")))
    html = to_html(build_report(W, "job", jobs, nodes))
    assert html.count("<svg") == html.count('class="chart"') == 5
    assert "no data" not in html
    no_split = to_html(build_report(W, "job", *scenario()))  # series from before whole-pod pricing
    assert no_split.count('class="chart"') == 4 and "no data" in no_split
    assert "<script" not in html and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "&lt;script&gt;" in html


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"start": datetime(2026, 3, 1), "end": END}, "must be UTC"),
        ({"start": END, "end": START}, "must be after"),
        ({"start": START, "end": END, "buckets": 0}, "buckets"),
        ({"start": START, "end": datetime(2026, 3, 1, 0, 0, 1, tzinfo=UTC), "buckets": 2000}, "use fewer buckets"),
    ],
    ids=["naive-time", "inverted", "zero-buckets", "sub-millisecond-buckets"],
)
def test_window_validation(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ReportWindow(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "match"), [("2026-03-01", "no time zone"), ("yesterday", "RFC 3339")])
def test_parse_utc_errors(text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_utc(text)


def test_chunks_cover_every_bucket_end_once() -> None:
    w = ReportWindow(START, END, buckets=25_000)
    chunks, step = _chunks(w)
    assert len(chunks) == 3 and step == w.step_s
    assert chunks[0][0] == pytest.approx(w.eval_start + w.step_s) and chunks[-1][1] == pytest.approx(w.eval_end)
    assert all(abs(b[0] - a[1] - w.step_s) < 1e-6 for a, b in itertools.pairwise(chunks))


@pytest.mark.parametrize("seconds", [114, 115, 116, 3601])
def test_evaluation_points_are_on_the_millisecond_grid_and_end_at_the_window_end(seconds: int) -> None:
    # 115 s / 24 = 4.791667 s: Prometheus would be sent 4.792 s and evaluate 24 points only up to 115.008 s
    w = ReportWindow(START, datetime.fromtimestamp(START.timestamp() + seconds, UTC), buckets=24)
    chunks, step = _chunks(w)
    assert step * 1000 == round(step * 1000) and abs(step - w.step_s) <= 0.0005
    ((lo, hi),) = chunks
    assert hi == w.eval_end  # the last point is the window's end: always evaluated
    assert lo - step <= w.eval_start < lo  # the first point's range reaches back to the window's start
    assert round((hi - lo) * 1000) % round(step * 1000) == 0


class GridPrometheus:
    """Prometheus' evaluation rules over raw samples of one counter: times on a millisecond grid, a range
    query evaluated at ``start + k * step`` while not after ``end``, ``last_over_time`` over ``(t - r, t]``.
    (The real one is checked in tests/integration/cost/test_report_prometheus.py.)"""

    def __init__(self, samples: list[tuple[float, float]]) -> None:
        self.samples = [(round(t * 1000), v) for t, v in samples]

    def _last(self, query: str, t_ms: int) -> float | None:
        r_ms = int(query.rsplit("[", 1)[1].removesuffix("ms])"))
        vs = [v for t, v in self.samples if t_ms - r_ms < t <= t_ms]
        return vs[-1] if vs else None

    def query(self, query: str, at: float) -> list[Series]:
        if not query.startswith(f"last_over_time({NODE_COST}"):
            return []
        v = self._last(query, round(at * 1000))
        return [] if v is None else [Series({"node": "n1"}, (Sample(at, v),))]

    def query_range(self, query: str, start: float, end: float, step: float) -> list[Series]:
        if not query.startswith(f"last_over_time({NODE_COST}"):
            return []
        t, end_ms, step_ms = round(start * 1000), round(end * 1000), round(float(f"{step:.3f}") * 1000)
        pts = []
        while t <= end_ms:
            if (v := self._last(query, t)) is not None:
                pts.append(Sample(t / 1000, v))
            t += step_ms
        return [Series({"node": "n1"}, tuple(pts))] if pts else []


NODE_COST = "statictrain_node_cost_usd_total"


@pytest.mark.parametrize("seconds", range(100, 124))
def test_totals_reach_the_end_of_the_window_whatever_the_step_rounding(seconds: int) -> None:
    # a new node counter scraped every 100 ms, reaching 42 $ 2 ms before the window's end
    t0, n = START.timestamp(), 10 * seconds
    samples = [(t0 + 0.1 * (i + 1) - 0.002, 42.0 * (i + 1) / n) for i in range(n)]
    w = ReportWindow(START, datetime.fromtimestamp(t0 + seconds, UTC), buckets=24)
    r = build_report(w, "job", *fetch(GridPrometheus(samples), w))
    assert r.node_usd == pytest.approx(42.0, rel=1e-12)


def test_a_series_last_seen_before_the_window_is_not_counted_when_a_bucket_is_longer_than_an_hour() -> None:
    # 30 days in 24 buckets: the first point's 30 h range reaches 2 h before the window, where a node counter
    # last had 5 $; the baseline (looking back at least one bucket) holds it too, so nothing is new
    t0 = START.timestamp()
    w = ReportWindow(START, datetime.fromtimestamp(t0 + 30 * 86400, UTC), buckets=24)
    r = build_report(w, "job", *fetch(GridPrometheus([(t0 - 7200.0, 5.0)]), w))
    assert r.node_usd == 0.0


class RecordingReader:
    """Answers like Prometheus would for one counter that ends between two evaluation points."""

    def __init__(self) -> None:
        self.queries: list[tuple[str, float]] = []

    def query(self, query: str, at: float) -> list[Series]:
        self.queries.append((query, at))
        labels = {"job_name": "a", "namespace": "n", "commit": "c", "team": "t"}
        return [Series(labels, (Sample(at, 10.0 if at <= W.eval_start else 25.0),))]

    def query_range(self, query: str, start: float, end: float, step: float) -> list[Series]:
        self.queries.append((query, start))
        # last_over_time over one bucket: the series' last sample (value 25) lies in the second bucket
        return [
            Series(
                {"job_name": "a", "namespace": "n", "commit": "c", "team": "t"},
                (Sample(start, 20.0), Sample(start + step, 25.0)),
            )
        ]


def test_fetch_takes_a_baseline_and_the_last_sample_of_every_bucket() -> None:
    reader = RecordingReader()
    seen: list[tuple[int, int]] = []
    jobs, nodes = fetch(reader, W, {"namespace": ['x"}) or vector(1)']}, progress=lambda d, t, _: seen.append((d, t)))
    assert reader.queries[0] == (
        'last_over_time(statictrain_job_cost_usd_total{namespace=~"x\\"\\\\}\\\\) or vector\\\\(1\\\\)"}[3600000ms])',
        W.eval_start,
    )
    assert reader.queries[1][0].endswith(f"[{round(W.step_s * 1000)}ms])")
    assert seen[-1] == (len(reader.queries), len(reader.queries))
    r = build_report(W, "job", jobs, nodes)
    assert r.rows[0].usd == 15.0  # 10 before the window, 25 at its last sample


def test_unknown_filter() -> None:
    with pytest.raises(ValueError, match="unknown filter"):
        job_filters({"pod": ["x"]})


def test_cli_unreachable_prometheus_and_missing_window() -> None:
    err = io.StringIO()
    args = build_parser().parse_args(
        [
            "report",
            "--last",
            "1h",
            "--prometheus-url",
            "http://127.0.0.1:9",
            "--no-progress",
            "--timeout",
            "2",
        ]
    )
    assert run_report(args, stderr=err) == 3  # no report could be made (README, "Exit status")
    assert "cannot reach Prometheus at http://127.0.0.1:9" in err.getvalue()
    err2 = io.StringIO()
    assert run_report(argparse.Namespace(**{**vars(args), "last": None}), stderr=err2) == 2
    assert "give --from" in err2.getvalue()


def test_cli_rejects_bad_times() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["report", "--from", "2026-03-01"])


def _stj(ns: str, name: str, commit: str, cost: dict[str, str]) -> dict[str, object]:
    return {
        "metadata": {
            "namespace": ns,
            "name": name,
            "creationTimestamp": "2026-02-01T00:00:00Z",
            "labels": {"statictrain.io/commit": commit, "statictrain.io/team": "t"},
        },
        "status": {"cost": cost},
    }


def test_status_report_sums_lifetime_cost_and_recovers_tokens() -> None:
    jobs = [
        _stj("a", "j1", "c1", {"usd": "10", "usdPer1MTokens": "2", "idleUSD": "1", "gpuHours": "2"}),
        _stj("b", "j2", "c1", {"usd": "5", "usdPer1MTokens": "5"}),
        _stj("b", "j3", "c2", {}),
    ]
    r = status_report(jobs, "commit", END)
    rows = {row.key: row for row in r.rows}
    assert rows[("c1",)].usd == 15.0 and rows[("c1",)].tokens == pytest.approx(6e6)
    assert rows[("c1",)].usd_per_1m_tokens == pytest.approx(2.5)
    assert rows[("c2",)].usd == 0.0
    assert r.invariant_ratio is None and r.window.start == datetime(2026, 2, 1, tzinfo=UTC)
    only_b = status_report(jobs, "job", END, {"namespace": ["b"]})
    assert [row.key for row in only_b.rows] == [("b", "j2"), ("b", "j3")]
    with pytest.raises(EmptyWindowError, match="no StaticTrainingJob matches"):
        status_report(jobs, "job", END, {"team": ["nobody"]})


def test_a_series_replaced_by_another_is_counted_in_full_even_above_the_old_value() -> None:
    # one series reached 5 $ by 2 h and ended; another (other target labels) starts at 9 $ at 3 h: its
    # first value is above the old last value, so only distinct series (not reset detection) count it right
    old = counter(lambda h: None if h > 2 else 2.5 * h, jl("a", "ns1", "c1") | {"instance": "1"})
    new = counter(lambda h: None if h < 3 else 9.0 + (h - 3), jl("a", "ns1", "c1") | {"instance": "2"})
    r = build_report(W, "job", {"usd": [old, new]}, {})
    assert [round(row.usd, 9) for row in r.rows] == [5.0 + 10.0]


def test_cost_flags_raised_in_the_window_are_shown_by_name_per_row() -> None:
    jobs, nodes = scenario()
    lbl = jl("a", "ns1", "c1")
    jobs["flags"] = [
        counter(lambda h: 3 + (2 if h >= 2 else 0), lbl | {"flag": "utilization-gaps"}),  # 2 windows inside
        counter(lambda h: 4.0, lbl | {"flag": "counter-reset"}),  # only before the window
    ]
    r = build_report(W, "job", jobs, nodes)
    row = next(x for x in r.rows if x.key == ("ns1", "a"))
    assert row.flags == {"utilization-gaps": 2.0}
    assert json.loads(to_json(r))["rows"][0]["flags"] == "utilization-gaps (2 windows)"
    assert "utilization-gaps (2 windows)" in to_csv(r) and "utilization-gaps" in to_table(r)


def split_scenario() -> tuple[dict[str, list[Series]], dict[str, list[Series]]]:
    """Node 10 $/h for 4 h. nlp/train-a (commit c1): 4 $/h (GPU 3, CPU 0.5, memory 0.5), 0.5 $/h of it on idle
    GPUs, 1M tokens/h: 4 $/1M. nlp/train-b (commit c2) from 2 h: 3 $/h (GPU 2.4, CPU 0.3, memory 0.3),
    0.5M tokens/h: 6 $/1M, +50 %. Unallocated: 10 - 4 - 3 (from 2 h) = 18 $ in all."""
    a, b = jl("train-a", "nlp", "c1"), jl("train-b", "nlp", "c2")

    def job_a(rate: float) -> Series:
        return counter(lambda h: rate * h, a)

    def job_b(rate: float) -> Series:
        return counter(lambda h: None if h < 2 else rate * (h - 2), b)

    jobs = {
        "usd": [job_a(4), job_b(3)],
        "gpu_usd": [job_a(3), job_b(2.4)],
        "cpu_usd": [job_a(0.5), job_b(0.3)],
        "memory_usd": [job_a(0.5), job_b(0.3)],
        "idle_usd": [job_a(0.5)],
        "tokens": [job_a(1e6), job_b(5e5)],
    }
    nodes = {
        "node_usd": [counter(lambda h: 10 * h, {"node": "n1"})],
        "node_idle_usd": [counter(lambda h: 6 * h if h <= 2 else 12 + 3 * (h - 2), {"node": "n1"})],
    }
    return jobs, nodes


def test_summary_names_spender_idle_waste_and_regression() -> None:
    r = build_report(W, "job", *split_scenario())
    assert r.job_buckets[("nlp", "train-b")] == pytest.approx([0, 0, 3, 3])
    assert r.job_commits == {("nlp", "train-a"): "c1", ("nlp", "train-b"): "c2"}
    assert commit_order(r) == ["c1", "c2"]
    assert sentences(r) == [
        "Biggest spender: job nlp/train-a (commit c1), $16.0, 73% of all job cost in the window.",
        "Biggest idle waste: unallocated node capacity (nobody's pods), $18.0, 45% of node cost.",
        "Worst $/token regression: commit c2 at $6.00 per 1M tokens, +50% against commit c1 before it ($4.00).",
    ]


def test_summary_without_regression_or_comparison() -> None:
    jobs, nodes = split_scenario()
    jobs["tokens"][1] = counter(lambda h: None if h < 2 else 2e6 * (h - 2), jl("train-b", "nlp", "c2"))
    cheaper = build_report(W, "job", jobs, nodes)
    assert worst_regression(cheaper)[0] is None
    assert sentences(cheaper)[2] == (
        "Worst $/token regression: none, no commit costs more per token than the one before it."
    )
    one = build_report(W, "job", jobs, nodes, filters={"commit": ["c1"]})
    one.commit_tokens.pop("c2")
    assert sentences(one)[2].endswith("fewer than two commits trained tokens in the window.")


def test_idle_waste_can_be_a_job() -> None:
    jobs, nodes = split_scenario()
    jobs["idle_usd"] = [counter(lambda h: 5 * h, jl("train-a", "nlp", "c1"))]
    assert sentences(build_report(W, "job", jobs, nodes))[1] == (
        "Biggest idle waste: job nlp/train-a (allocated GPUs left idle), $20.0, 50% of node cost."
    )


@pytest.mark.parametrize(
    ("top", "want"),
    [
        (16.0, [0, 5, 10, 15, 20]),
        (9.0, [0, 2.5, 5, 7.5, 10]),
        (0.0123, [0, 0.005, 0.01, 0.015]),
        (1.0, [0, 0.25, 0.5, 0.75, 1.0]),
        (0.0, [0, 1]),
        (float("nan"), [0, 1]),
    ],
)
def test_nice_ticks_cover_the_top_in_round_steps(top: float, want: list[float]) -> None:
    assert nice_ticks(top) == pytest.approx(want)


def test_tick_labels_are_plain_decimals() -> None:
    assert [num(v) for v in (0, 0.005, 2.5, 10, 1234.5, 0.000012)] == ["0", "0.005", "2.5", "10", "1,234", "0.000012"]


def test_html_charts_have_units_and_marks() -> None:
    html = to_html(build_report(W, "job", *split_scenario()))
    for unit in ("USD (cumulative)", "USD per 1 h", "USD per 1M tokens", "time (UTC, 2026-03-01)", "%"):
        assert unit in html
    assert html.index('id="summary"') < html.index("<svg")  # the summary comes first
    assert html.count('class="mark"') >= 5


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium package (make system-deps)")
def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    """Real headless Chromium loads the report: no console errors, every chart drew data marks."""
    page = tmp_path / "report.html"
    page.write_text(to_html(build_report(W, "job", *split_scenario())))
    check = check_page(page, screenshot=tmp_path / "report.png")
    assert check.problems == []
    assert set(check.charts) == {
        "cost so far per job",
        "cost per namespace",
        "cost split per job",
        "USD per 1M tokens per commit",
        "idle share",
    }
    # 2 lines; 6 columns (a in 4 buckets, b in 2); 6 split parts; 2 commits; 3 idle parts
    assert check.charts == {
        "cost so far per job": 2,
        "cost per namespace": 4,
        "cost split per job": 6,
        "USD per 1M tokens per commit": 2,
        "idle share": 3,
    }
    assert (tmp_path / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium package (make system-deps)")
def test_the_browser_check_catches_errors_and_empty_charts(tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text(
        '<!DOCTYPE html><html><body><img src="missing.png"><script>console.error("boom"); nope();</script>'
        '<svg class="chart" data-chart="empty" width="100" height="100"><rect class="mark" width="0" height="9"/>'
        "</svg></body></html>"
    )
    problems = check_page(page).problems
    assert "chart 'empty' drew nothing" in problems
    assert any("boom" in p for p in problems)
    assert any("nope is not defined" in p for p in problems)
    assert any("missing.png" in p for p in problems)


def energy_scenario() -> tuple[dict[str, list[Series]], dict[str, list[Series]]]:
    """split_scenario plus GPU energy: job a draws 3.6 MJ (1 kWh) per hour, 400 g CO2e per kWh; b 0.5 kWh/h."""
    jobs, nodes = split_scenario()
    jobs["gpu_energy_j"] = [
        counter(lambda h: 3.6e6 * h, jl("train-a", "nlp", "c1")),
        counter(lambda h: None if h < 2 else 1.8e6 * (h - 2), jl("train-b", "nlp", "c2")),
    ]
    jobs["carbon_g"] = [counter(lambda h: 400 * h, jl("train-a", "nlp", "c1"))]
    return jobs, nodes


def test_energy_and_carbon_per_group_full_precision_in_json_readable_in_the_table() -> None:
    report = build_report(W, "job", *energy_scenario())
    doc = {r["job_name"]: r for r in json.loads(to_json(report))["rows"]}
    assert doc["train-a"]["gpu_energy_kwh"] == "4.000000000" and doc["train-a"]["carbon_kg"] == "1.600000000"
    assert doc["train-b"]["gpu_energy_kwh"] == "1.000000000" and doc["train-b"]["carbon_kg"] == "0.000000000"
    table = to_table(report)
    assert "$16.0" in table and "16.000000" not in table and "16.000000" in to_csv(report)
    html = to_html(report)
    assert "GPU energy 5.00 kWh, carbon 1.60 kg CO2e" in html
    assert html.count('class="chart"') == 7 and "kg CO2e" in html


def test_html_without_energy_says_so() -> None:
    assert "No GPU energy recorded in the window" in to_html(build_report(W, "job", *split_scenario()))


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium package (make system-deps)")
def test_energy_charts_render_in_headless_chromium(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(to_html(build_report(W, "job", *energy_scenario())))
    check = check_page(page)
    assert check.problems == []
    assert {k: v for k, v in check.charts.items() if "energy" in k or "carbon" in k} == {
        "GPU energy per job": 2,
        "carbon per job": 1,
    }
