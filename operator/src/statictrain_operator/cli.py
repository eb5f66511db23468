"""``statictrain`` and the kubectl plugin ``kubectl stj``: cost reports (and anomaly commands).

    kubectl stj report --from 2026-03-01T00:00:00Z --to 2026-03-02T00:00:00Z --by commit \\
        --namespace team-a --namespace team-b --format html -o report.html

Each subcommand registers itself with ``add_parser(subparsers)`` and sets
``func``; anomaly commands come from ``statictrain_operator.anomaly.cli`` when
that module is installed.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TextIO

from statictrain_operator import estimate_cli, flavors_cli, gate_cli, preflight_cli
from statictrain_operator.cli_args import add_prometheus_url
from statictrain_operator.kube.oneshot import ClusterUnavailableError, list_trainingjobs
from statictrain_operator.prom import HttpPrometheus, PrometheusQueryError, PrometheusUnavailableError
from statictrain_operator.report.fetch import fetch
from statictrain_operator.report.focus import to_focus
from statictrain_operator.report.html import to_html
from statictrain_operator.report.model import EmptyWindowError, Report, ReportWindow, build_report, parse_utc
from statictrain_operator.report.progress import ProgressBar
from statictrain_operator.report.reconcile import SETTLE_S, provider_ids_query, read_bill, reconcile
from statictrain_operator.report.reconcile import to_text as reconciliation_text
from statictrain_operator.report.status import status_report
from statictrain_operator.report.text import to_csv, to_json, to_table

__all__ = [
    "RENDERERS",
    "add_report_parser",
    "build_parser",
    "main",
    "run_report",
    "run_status_report",
]

RENDERERS = {"table": to_table, "csv": to_csv, "json": to_json, "html": to_html, "focus": to_focus}


def _duration(text: str) -> timedelta:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if len(text) < 2 or text[-1] not in units or not text[:-1].isdigit() or int(text[:-1]) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration; write it like 30m, 6h or 7d")
    return timedelta(seconds=int(text[:-1]) * units[text[-1]])


def _utc(text: str) -> datetime:
    try:
        return parse_utc(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_report_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "report",
        help="cost by job, commit, team or namespace over a UTC window",
        description="Cost report over the half-open UTC window [--from, --to).",
    )
    p.add_argument(
        "--from", dest="start", type=_utc, help="window start, RFC 3339 UTC (2026-03-01T00:00:00Z)"
    )
    p.add_argument("--to", dest="end", type=_utc, help="window end (exclusive); default now")
    p.add_argument("--last", type=_duration, help="instead of --from: the window ending at --to (e.g. 24h)")
    p.add_argument("--by", choices=["job", "commit", "team", "namespace"], default="job")
    p.add_argument("--namespace", action="append", default=[], help="only these namespaces (repeatable)")
    p.add_argument("--team", action="append", default=[])
    p.add_argument("--commit", action="append", default=[])
    p.add_argument("--job", action="append", default=[])
    p.add_argument(
        "--format", choices=sorted(RENDERERS), default="table", help="focus: a FOCUS 1.2 cost and usage CSV"
    )
    p.add_argument(
        "--reconcile",
        metavar="BILL.csv",
        help="a cloud provider's FOCUS bill: billed vs allocated (jobs + idle) per node over the bill's period",
    )
    p.add_argument("-o", "--output", help="write to this file instead of stdout")
    p.add_argument("--buckets", type=int, default=24, help="time buckets for cost over time (default 24)")
    add_prometheus_url(p)
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per Prometheus query")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument(
        "--source",
        choices=["prometheus", "status"],
        default="prometheus",
        help="prometheus: cost in the window; status: lifetime cost from StaticTrainingJob statuses",
    )
    p.add_argument("--kubeconfig", help="with --source status: kubeconfig file (default KUBECONFIG)")
    p.set_defaults(func=run_report)


def _write(args: argparse.Namespace, report: Report, err: TextIO) -> int:
    try:
        text = RENDERERS[args.format](report)
    except ValueError as e:  # a FOCUS export of buckets that are not whole seconds
        print(f"error: {e}", file=err)
        return 2
    return _output(args, text)


def _output(args: argparse.Namespace, text: str) -> int:
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


def run_status_report(args: argparse.Namespace, now: datetime, err: TextIO) -> int:
    filters = {"namespace": args.namespace, "team": args.team, "commit": args.commit, "job": args.job}
    try:
        report = status_report(list_trainingjobs(args.kubeconfig), args.by, now, filters)
    except (ClusterUnavailableError, EmptyWindowError) as e:
        print(f"error: {e}", file=err)
        return 1
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
        return 2
    start: datetime = args.start or end - args.last
    try:
        window = ReportWindow(start, end, buckets=args.buckets)
    except ValueError as e:
        print(f"error: {e}", file=err)
        return 2
    filters = {"namespace": args.namespace, "team": args.team, "commit": args.commit, "job": args.job}
    bar = ProgressBar(err, enabled=not args.no_progress)
    try:
        job_series, node_series = fetch(
            HttpPrometheus(args.prometheus_url, args.timeout), window, filters, bar
        )
        report = build_report(window, args.by, job_series, node_series, filters=filters)
    except (PrometheusUnavailableError, PrometheusQueryError, EmptyWindowError) as e:
        print(f"\nerror: {e}", file=err)
        return 1
    return _write(args, report, err)


def run_reconcile(args: argparse.Namespace, err: TextIO) -> int:
    """``report --reconcile BILL.csv``: the bill's period, statictrain's node figures from Prometheus."""
    try:
        with open(args.reconcile, encoding="utf-8-sig") as f:
            bill = read_bill(f.read())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        print(f"error: {args.reconcile}: {e}", file=err)
        return 2
    start, end = bill.period
    bar = ProgressBar(err, enabled=not args.no_progress)
    try:
        window = ReportWindow(start, end + timedelta(seconds=SETTLE_S), buckets=1)
        prom = HttpPrometheus(args.prometheus_url, args.timeout)
        job_series, node_series = fetch(prom, window, None, bar)
        report = build_report(window, "job", job_series, node_series)
        gauges = prom.query(provider_ids_query((window.end - start).total_seconds()), window.eval_end)
    except (ValueError, PrometheusUnavailableError, PrometheusQueryError) as e:
        print(f"\nerror: {e}", file=err)
        return 1
    ids = {s.labels.get("node", ""): s.labels.get("provider_id", "") for s in gauges}
    return _output(args, reconciliation_text(reconcile(bill, report, ids)))


def build_parser(prog: str = "statictrain") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="statictrain: cost reports and anomalies")
    sub = parser.add_subparsers(dest="command", required=True)
    add_report_parser(sub)
    gate_cli.add_parser(sub)
    estimate_cli.add_parser(sub)
    preflight_cli.add_parser(sub)
    flavors_cli.add_parser(sub)
    try:
        anomaly_cli = importlib.import_module("statictrain_operator.anomaly.cli")
    except ModuleNotFoundError as e:
        if e.name != "statictrain_operator.anomaly.cli":
            raise
    else:
        anomaly_cli.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    invoked = os.path.basename(sys.argv[0])
    args = build_parser("kubectl stj" if invoked.startswith("kubectl-") else "statictrain").parse_args(argv)
    rc: int = args.func(args)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
