"""``statictrain gate``: fail a CI job when a commit made training more expensive.

    statictrain gate --commit "$SHA" --baseline "$BASE_SHA" --max-regression 5%
    statictrain gate --commit c2 --baseline c1 --max-regression 5% --report report.json

Exit status (``statictrain.exitcodes.CliExit``): 0 pass; 1 regression, or no
runs for a commit; 2 bad input (an option, an unreadable report JSON); 3 no
verdict: Prometheus unreachable, timed out or answering garbage, or a figure
missing or not finite (NaN, Inf, an overflowing sum).
Figures come from Prometheus (the same counters and reset handling as
``statictrain report --by commit``, plus tokens/s per GPU model from the
sidecars) or from exported report JSON files (no tokens/s there).
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime, timedelta
from typing import TextIO

from statictrain.exitcodes import CliExit
from statictrain_cli.args import add_prometheus_url, add_timeout, duration, utc
from statictrain_cli.files import load_json
from statictrain_cli.report.fetch import fetch
from statictrain_cli.report.model import EmptyWindowError, ReportWindow, build_report
from statictrain_operator.gate import (
    CommitFigures,
    compare,
    figures_from_report_json,
    parse_max_regression,
)
from statictrain_operator.history import query_speed
from statictrain_operator.prom import HttpPrometheus, PrometheusQueryError, PrometheusUnavailableError, PromReader

DEFAULT_LOOKBACK = timedelta(days=7)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "gate",
        help="CI cost gate: fail when $/1M tokens or tokens/s got worse than a baseline commit",
        description="Compare runs at --commit with runs at --baseline; exit 1 on a regression or missing runs.",
    )
    p.add_argument("--commit", required=True, help="commit label of the runs under test")
    p.add_argument("--baseline", required=True, help="commit label of the baseline runs")
    p.add_argument("--max-regression", required=True, help="allowed worsening, as a percentage (e.g. 5%%)")
    p.add_argument(
        "--report",
        action="append",
        default=[],
        help="exported report JSON (statictrain report --by commit --format json); repeatable; instead of Prometheus",
    )
    p.add_argument("--last", type=duration, help="with Prometheus: window ending at --to (default 7d)")
    p.add_argument("--to", dest="end", type=utc, help="window end, RFC 3339 UTC; default now")
    add_prometheus_url(p)
    add_timeout(p, 60.0)
    p.set_defaults(func=run_gate)


def figures_from_prometheus(reader: PromReader, window: ReportWindow, commits: list[str]) -> dict[str, CommitFigures]:
    """Per-commit cost and tokens in the window (as the report counts them) and tokens/s per GPU model."""
    try:
        jobs, _ = fetch(reader, window, {"commit": commits})
        report = build_report(window, "commit", jobs, {}, filters={"commit": commits})
    except EmptyWindowError:
        return {}
    speed = query_speed(
        reader, {"commit": commits}, window.eval_end, (window.end - window.start).total_seconds(), "commit"
    )
    tps = {
        c: {m: sp.tokens_per_s for m, sp in models.items() if sp.tokens_per_s is not None}
        for c, models in speed.items()
    }
    return {row.key[0]: CommitFigures(row.key[0], row.usd, row.tokens, tps.get(row.key[0], {})) for row in report.rows}


def _read_reports(paths: list[str]) -> dict[str, CommitFigures]:
    return figures_from_report_json([load_json(path) for path in paths], ", ".join(paths))


def run_gate(
    args: argparse.Namespace,
    *,
    now: datetime | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    reader: PromReader | None = None,
) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    try:
        limit = parse_max_regression(args.max_regression)
        if args.report:
            figs = _read_reports(args.report)
            source = f"report JSON {', '.join(args.report)}"
        else:
            end = args.end or (now or datetime.now(UTC)).replace(microsecond=0)
            window = ReportWindow(end - (args.last or DEFAULT_LOOKBACK), end, buckets=24)
            prom = reader or HttpPrometheus(args.prometheus_url, args.timeout)
            figs = figures_from_prometheus(prom, window, sorted({args.commit, args.baseline}))
            source = f"Prometheus {args.prometheus_url}, {window.start:%Y-%m-%dT%H:%MZ} to {end:%Y-%m-%dT%H:%MZ}"
    except (PrometheusUnavailableError, PrometheusQueryError) as e:
        print(f"error: {e}", file=err)
        return CliExit.CANNOT_JUDGE
    except (ValueError, OverflowError) as e:
        print(f"error: {e}", file=err)
        return CliExit.USAGE
    verdict = compare(
        figs.get(args.commit), figs.get(args.baseline), limit, commit=args.commit, baseline_commit=args.baseline
    )
    out.write(verdict.explain(args.commit, args.baseline, limit))
    out.write(f"  source: {source}\n")
    if not verdict.judged:  # fail closed, with the reason on one line for the CI log
        print(f"error: {verdict.notes[0]}", file=err)
        return CliExit.CANNOT_JUDGE
    return CliExit.OK if verdict.passed else CliExit.FAILED
