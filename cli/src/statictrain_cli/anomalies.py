"""``statictrain anomalies``: anomalies and remediation actions recorded on StaticTrainingJobs."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from statictrain_cli import replay as replay_cli
from statictrain_operator.anomaly import history as hist
from statictrain_operator.anomaly.evaluate import CONDITION_TYPE

__all__ = ["add_parser", "render_table", "rows", "run"]


def rows(jobs: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """One row per recorded anomaly, newest last, plus one per job whose remediation is blocked or acting."""
    out: list[dict[str, str]] = []
    for job in jobs:
        meta, status = job.get("metadata", {}), job.get("status") or {}
        ident = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        for a in status.get("anomalies") or []:
            out.append(
                {
                    "job": ident,
                    "time": str(a.get("time", "")),
                    "kind": "anomaly",
                    "what": f"{a.get('severity', '')} {a.get('metric', '')} score={a.get('score', '')}",
                    "detail": str(a.get("message", "")) + (f" [{a['action']}]" if a.get("action") else ""),
                }
            )
        try:
            record = hist.loads((meta.get("annotations") or {}).get(hist.ANNOTATION))
        except ValueError as exc:
            out.append({"job": ident, "time": "", "kind": "error", "what": "history", "detail": str(exc)})
            continue
        for i in record.history.intents:
            out.append(
                {
                    "job": ident,
                    "time": i.at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "kind": "action",
                    "what": f"{i.action.value}{'' if i.done else ' (in flight)'}",
                    "detail": i.reason,
                }
            )
        cond = next((c for c in status.get("conditions") or [] if c.get("type") == CONDITION_TYPE), None)
        if cond is not None:
            out.append(
                {
                    "job": ident,
                    "time": str(cond.get("lastTransitionTime", "")),
                    "kind": "condition",
                    "what": f"{CONDITION_TYPE}={cond.get('status')} {cond.get('reason', '')}",
                    "detail": str(cond.get("message", "")),
                }
            )
    return sorted(out, key=lambda r: (r["job"], r["time"]))


def render_table(table: Sequence[Mapping[str, str]], width: int = 100) -> str:
    """A plain-text table (detail cut to ``width`` characters)."""
    if not table:
        return "no anomalies recorded\n"
    cols = ["job", "time", "kind", "what", "detail"]
    cells = [[r[c] if c != "detail" else r[c][:width] for c in cols] for r in table]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Read the jobs and print their anomalies."""
    from statictrain_operator.kube.oneshot import list_trainingjobs  # noqa: PLC0415 (only when the command runs)

    out, err = stdout or sys.stdout, stderr or sys.stderr
    try:
        jobs = list_trainingjobs(args.kubeconfig, None if args.all_namespaces else args.namespace)
    except Exception as exc:  # config or API errors: say what failed, exit non-zero
        print(f"error: cannot list StaticTrainingJobs: {exc}", file=err)
        return 1
    if args.job:
        jobs = [j for j in jobs if j.get("metadata", {}).get("name") in args.job]
    table = rows(jobs)
    out.write(json.dumps(table, indent=2) + "\n" if args.format == "json" else render_table(table))
    return 0


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``anomalies`` on the ``statictrain`` CLI."""
    p = subparsers.add_parser(
        "anomalies",
        help="anomalies and remediation actions of StaticTrainingJobs",
        description="Anomalies, remediation actions and blocked remediations, per job.",
    )
    p.add_argument("-n", "--namespace", default="default", help="namespace (default: %(default)s)")
    p.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    p.add_argument("--job", action="append", default=[], help="only this job (repeatable)")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"), help="kubeconfig (default $KUBECONFIG)")
    p.set_defaults(func=run)
    replay_cli.add_parser(p.add_subparsers(dest="anomalies_command", metavar="{evaluate}"))
