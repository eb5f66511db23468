"""`statictrain anomalies`: rows from job bodies and the table renderer (no cluster needed)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from statictrain_cli.anomalies import add_parser, render_table, rows
from statictrain_operator.anomaly import history as hist
from statictrain_operator.anomaly.remediation import ActionKind, History, Intent

AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _job(annotation: str | None) -> dict[str, object]:
    return {
        "metadata": {
            "name": "gpt",
            "namespace": "nlp",
            "annotations": {hist.ANNOTATION: annotation} if annotation else {},
        },
        "status": {
            "anomalies": [
                {
                    "time": "2026-03-01T11:58:00Z",
                    "metric": "step_seconds",
                    "severity": "Critical",
                    "score": "1.000",
                    "message": "observed 0.3 vs expected 0.1",
                    "action": "RevertSettings",
                }
            ],
            "conditions": [
                {
                    "type": "Remediation",
                    "status": "True",
                    "reason": "ActionApplied",
                    "message": "RevertSettings: ...",
                    "lastTransitionTime": "2026-03-01T12:00:00Z",
                }
            ],
        },
    }


def test_rows_list_anomalies_actions_and_condition_in_time_order() -> None:
    intent = Intent("i", ActionKind.REVERT_SETTINGS, AT, {}, "ThroughputRegression on step_seconds", 2, done=True)
    got = rows([_job(hist.dumps(hist.Record(History((intent,)))))])
    assert [r["kind"] for r in got] == ["anomaly", "action", "condition"]
    assert got[0]["job"] == "nlp/gpt" and "[RevertSettings]" in got[0]["detail"]
    assert got[1]["what"] == "RevertSettings"


def test_in_flight_and_unreadable_history_are_shown() -> None:
    intent = Intent("i", ActionKind.SUSPEND, AT, {}, "OverBudget", 2)
    assert any(r["what"] == "Suspend (in flight)" for r in rows([_job(hist.dumps(hist.Record(History((intent,)))))]))
    bad = rows([_job("{oops")])
    assert any(r["kind"] == "error" and "delete the annotation" in r["detail"] for r in bad)


def test_render_table_has_header_and_empty_message() -> None:
    assert render_table([]) == "no anomalies recorded\n"
    text = render_table(rows([_job(None)]))
    assert text.splitlines()[0].split() == ["JOB", "TIME", "KIND", "WHAT", "DETAIL"]


def test_add_parser_registers_the_subcommand() -> None:
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["anomalies", "-A", "--format", "json"])
    assert args.all_namespaces and args.format == "json" and callable(args.func)
