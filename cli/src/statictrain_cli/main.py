"""``statictrain`` and the kubectl plugin ``kubectl stj``: cost reports (and anomaly commands).

    kubectl stj report --from 2026-03-01T00:00:00Z --to 2026-03-02T00:00:00Z --by commit \\
        --namespace team-a --namespace team-b --format html -o report.html

Each subcommand registers itself with ``add_parser(subparsers)`` and sets
``func``; anomaly commands come from ``statictrain_cli.anomalies`` when
that module is installed.

Every command exits with a status of ``statictrain.exitcodes.CliExit`` (README,
"Exit status") and reports an error on one line of stderr: bad arguments
included (no usage dump), and an unexpected exception too (exit 70, a bug).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import math
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import NoReturn, TextIO, cast

from statictrain.exitcodes import CliExit
from statictrain_cli import estimate as estimate_cli
from statictrain_cli import flavors as flavors_cli
from statictrain_cli import gate as gate_cli
from statictrain_cli import preflight as preflight_cli
from statictrain_cli.args import add_prometheus_url, add_timeout, duration, utc
from statictrain_cli.files import InputError, read_input, write_output
from statictrain_cli.report.fetch import fetch
from statictrain_cli.report.focus import to_focus
from statictrain_cli.report.html import to_html
from statictrain_cli.report.model import EmptyWindowError, Report, ReportWindow, build_report
from statictrain_cli.report.progress import ProgressBar
from statictrain_cli.report.reconcile import SETTLE_S, provider_ids_query, read_bill, reconcile
from statictrain_cli.report.reconcile import to_text as reconciliation_text
from statictrain_cli.report.status import status_report
from statictrain_cli.report.text import to_csv, to_json, to_table
from statictrain_operator.kube.oneshot import ClusterUnavailableError, list_trainingjobs
from statictrain_operator.prom import HttpPrometheus, PrometheusQueryError, PrometheusUnavailableError

__all__ = [
    "RENDERERS",
    "OneLineParser",
    "add_report_parser",
    "build_parser",
    "main",
    "non_finite_figures",
    "run_report",
    "run_status_report",
]

RENDERERS = {"table": to_table, "csv": to_csv, "json": to_json, "html": to_html, "focus": to_focus}


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line on stderr (exit 2), naming the command and where help is."""

    def error(self, message: str) -> NoReturn:
        self.exit(CliExit.USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def add_report_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "report",
        help="cost by job, commit, team or namespace over a UTC window",
        description="Cost report over the half-open UTC window [--from, --to).",
    )
    p.add_argument("--from", dest="start", type=utc, help="window start, RFC 3339 UTC (2026-03-01T00:00:00Z)")
    p.add_argument("--to", dest="end", type=utc, help="window end (exclusive); default now")
    p.add_argument("--last", type=duration, help="instead of --from: the window ending at --to (e.g. 24h)")
    p.add_argument("--by", choices=["job", "commit", "team", "namespace"], default="job")
    p.add_argument("--namespace", action="append", default=[], help="only these namespaces (repeatable)")
    p.add_argument("--team", action="append", default=[])
    p.add_argument("--commit", action="append", default=[])
    p.add_argument("--job", action="append", default=[])
    p.add_argument("--format", choices=sorted(RENDERERS), default="table", help="focus: a FOCUS 1.2 cost and usage CSV")
    p.add_argument(
        "--reconcile",
        metavar="BILL.csv",
        help="a cloud provider's FOCUS bill: billed vs allocated (jobs + idle) per node over the bill's period",
    )
    p.add_argument("-o", "--output", help="write to this file instead of stdout (atomically: all or nothing)")
    p.add_argument("--buckets", type=int, default=24, help="time buckets for cost over time (default 24)")
    add_prometheus_url(p)
    add_timeout(p, 60.0)
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument(
        "--source",
        choices=["prometheus", "status"],
        default="prometheus",
        help="prometheus: cost in the window; status: lifetime cost from StaticTrainingJob statuses",
    )
    p.add_argument("--kubeconfig", help="with --source status: kubeconfig file (default KUBECONFIG)")
    p.set_defaults(func=run_report)


def non_finite_figures(report: Report) -> list[str]:
    """The figures of ``report`` that are not finite (a sum that overflowed on absurd counter values)."""
    bad = [
        f"{name} of {'/'.join(row.key) or '(no label)'}"
        for row in report.rows
        for name, v in dataclasses.asdict(row).items()
        if isinstance(v, float) and not math.isfinite(v)
    ]
    bad += [name for name in ("node_usd", "node_idle_usd") if not math.isfinite(getattr(report, name))]
    buckets = [*report.namespace_buckets.values(), *report.job_buckets.values()]
    if any(not math.isfinite(v) for b in buckets for v in b):
        bad.append("cost over time")
    return bad


def _write(args: argparse.Namespace, report: Report, err: TextIO) -> int:
    bad = non_finite_figures(report)
    if bad:
        print(
            f"error: cannot report: {', '.join(bad[:5])}{' ...' if len(bad) > 5 else ''} not finite (the "
            "source holds values too large to add up); check the cost counters",
            file=err,
        )
        return CliExit.CANNOT_JUDGE
    try:
        text = RENDERERS[args.format](report)
    except ValueError as e:  # a FOCUS export of buckets that are not whole seconds
        print(f"error: {e}", file=err)
        return CliExit.USAGE
    return _output(args, text, err)


def _output(args: argparse.Namespace, text: str, err: TextIO) -> int:
    if args.output:
        try:
            write_output(args.output, text)
        except InputError as e:
            print(f"error: {e}", file=err)
            return CliExit.USAGE
    else:
        sys.stdout.write(text)
    return CliExit.OK


def run_status_report(args: argparse.Namespace, now: datetime, err: TextIO) -> int:
    filters = {"namespace": args.namespace, "team": args.team, "commit": args.commit, "job": args.job}
    try:
        report = status_report(list_trainingjobs(args.kubeconfig), args.by, now, filters)
    except (ClusterUnavailableError, EmptyWindowError) as e:
        print(f"error: {e}", file=err)
        return CliExit.CANNOT_JUDGE
    return _write(args, report, err)


def run_report(args: argparse.Namespace, *, now: datetime | None = None, stderr: TextIO | None = None) -> int:
    err = stderr or sys.stderr
    if args.reconcile:
        return run_reconcile(args, err)
    if args.source == "status":
        return run_status_report(args, (now or datetime.now(UTC)).replace(microsecond=0), err)
    end: datetime = args.end or (now or datetime.now(UTC)).replace(microsecond=0)
    if args.start is None and args.last is None:
        print("error: give --from (RFC 3339 UTC) or --last (e.g. 24h)", file=err)
        return CliExit.USAGE
    filters = {"namespace": args.namespace, "team": args.team, "commit": args.commit, "job": args.job}
    try:
        window = ReportWindow(args.start or end - args.last, end, buckets=args.buckets)
        prom = HttpPrometheus(args.prometheus_url, args.timeout)
    except (ValueError, OverflowError) as e:
        print(f"error: {e}", file=err)
        return CliExit.USAGE
    bar = ProgressBar(err, enabled=not args.no_progress)
    try:
        job_series, node_series = fetch(prom, window, filters, bar)
        report = build_report(window, args.by, job_series, node_series, filters=filters)
    except (PrometheusUnavailableError, PrometheusQueryError, EmptyWindowError) as e:
        print(f"{chr(10) if bar.enabled else ''}error: {e}", file=err)  # after the bar's line
        return CliExit.CANNOT_JUDGE
    return _write(args, report, err)


def run_reconcile(args: argparse.Namespace, err: TextIO) -> int:
    """``report --reconcile BILL.csv``: the bill's period, statictrain's node figures from Prometheus."""
    try:
        bill = read_bill(read_input(args.reconcile).removeprefix("\ufeff"))
    except InputError as e:  # unreadable, too large, not UTF-8: the message names the file
        print(f"error: {e}", file=err)
        return CliExit.USAGE
    except ValueError as e:
        print(f"error: {args.reconcile}: {e}", file=err)
        return CliExit.USAGE
    start, end = bill.period
    bar = ProgressBar(err, enabled=not args.no_progress)
    try:
        window = ReportWindow(start, end + timedelta(seconds=SETTLE_S), buckets=1)
        prom = HttpPrometheus(args.prometheus_url, args.timeout)
        job_series, node_series = fetch(prom, window, None, bar)
        report = build_report(window, "job", job_series, node_series)
        gauges = prom.query(provider_ids_query((window.end - start).total_seconds()), window.eval_end)
    except (ValueError, OverflowError) as e:
        print(f"error: {e}", file=err)
        return CliExit.USAGE
    except (PrometheusUnavailableError, PrometheusQueryError) as e:
        print(f"{chr(10) if bar.enabled else ''}error: {e}", file=err)
        return CliExit.CANNOT_JUDGE
    ids = {s.labels.get("node", ""): s.labels.get("provider_id", "") for s in gauges}
    return _output(args, reconciliation_text(reconcile(bill, report, ids)), err)


def build_parser(prog: str = "statictrain") -> argparse.ArgumentParser:
    parser = OneLineParser(prog=prog, description="statictrain: cost reports and anomalies")
    # every subcommand's parser is a OneLineParser too (argparse makes them of the parent's class)
    sub = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]", parser.add_subparsers(dest="command", required=True)
    )
    add_report_parser(sub)
    gate_cli.add_parser(sub)
    estimate_cli.add_parser(sub)
    preflight_cli.add_parser(sub)
    flavors_cli.add_parser(sub)
    try:
        anomaly_cli = importlib.import_module("statictrain_cli.anomalies")
    except ModuleNotFoundError as e:
        if e.name != "statictrain_cli.anomalies":
            raise
    else:
        anomaly_cli.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    invoked = os.path.basename(sys.argv[0])
    prog = "kubectl stj" if invoked.startswith("kubectl-") else "statictrain"
    try:
        args = build_parser(prog).parse_args(argv)
        rc: int = args.func(args)
        sys.stdout.flush()
    except SystemExit as e:  # argparse: --help (0) and usage errors (2, one line)
        return e.code if isinstance(e.code, int) else CliExit.USAGE
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return CliExit.INTERRUPTED
    except BrokenPipeError:  # e.g. `statictrain report | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
        return CliExit.PIPE_CLOSED
    except Exception as e:  # a bug: one line that says so, never a traceback
        print(
            f"{prog}: internal error ({type(e).__name__}: {str(e)[:300]}); this is a bug in statictrain, "
            "please report it with the command line",
            file=sys.stderr,
        )
        return CliExit.INTERNAL
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
