"""``statictrain anomalies evaluate --series DIR [--labels FILE]``: replay recorded series offline.

DIR holds either one folder per job (``<metric>.csv`` files, optional ``meta.json`` with
``commits`` [{since, commit, settings}] and ``gpus``), or ``timestamp,value`` CSV files, each
its own job named for the file (a file named for a known metric is judged as that metric;
any other name by the generic detector, reported only). Timestamps: unix seconds or ISO 8601
(no zone: UTC). Labels (JSON): job name (or file name, or NAB's ``category/file.csv``) ->
windows ``[[start, end], ...]`` (optionally ``[start, end, class]``) or
``{"class": c, "windows": [...]}``; a job labelled with no windows is clean.

A series whose values cannot be in its unit (below) is refused with a message saying what was
expected; the rest of the job and the corpus are still judged.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from statictrain_operator.anomaly import replay as rp

__all__ = [
    "add_parser",
    "episodes",
    "load",
    "parse_time",
    "read_csv",
    "read_labels",
    "read_meta",
    "render",
    "report",
    "run",
    "summary",
]


LATEST_TIME = datetime(9999, 12, 30, tzinfo=UTC).timestamp()
"""Timestamps are unix seconds from 1970 to the year 9999 (what a datetime can hold)."""


def parse_time(text: str) -> float:
    """Unix seconds from unix seconds or ISO 8601 (naive times are UTC); ValueError otherwise."""
    text = text.strip()
    try:
        t = float(text)
    except ValueError:
        d = datetime.fromisoformat(text.replace("Z", "+00:00"))
        t = (d if d.tzinfo else d.replace(tzinfo=UTC)).timestamp()
    if not 0 <= t <= LATEST_TIME:  # NaN too
        raise ValueError(f"{text[:40]!r} is not a time from 1970 to 9999")
    return t


def read_csv(path: Path) -> tuple[rp.Series, list[str]]:
    """A ``timestamp,value`` file: its points and what was wrong with its lines."""
    ts: list[float] = []
    vs: list[float] = []
    notes: list[str] = []
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        rows = csv.reader(f)
        header = next(rows, None)
        if header is None:
            return ([], []), ["empty file"]
        start = 1
        try:
            ts.append(parse_time(header[0]))
            vs.append(float(header[1]))
        except (ValueError, IndexError):
            start = 2  # a header line
        for n, row in enumerate(rows, start=start):
            if not row:
                continue
            try:
                t = parse_time(row[0])
            except (ValueError, IndexError):
                notes.append(f"line {n}: cannot read a timestamp from {row[:1]!r}: line skipped")
                continue
            try:
                v = float(row[1])
            except (ValueError, IndexError):
                notes.append(f"line {n}: cannot read a value from {row[1:2]!r}: line skipped")
                continue
            ts.append(t)
            vs.append(v)
    return (ts, vs), notes[:5] + ([f"... {len(notes) - 5} more bad lines"] if len(notes) > 5 else [])


def read_meta(path: Path) -> tuple[list[rp.Commit], int, list[str]]:
    if not path.exists():
        return [], 1, []
    try:
        meta = json.loads(path.read_text())
        commits = [
            rp.Commit(
                parse_time(str(c["since"])),
                str(c["commit"]),
                {str(k): str(v) for k, v in c.get("settings", {}).items()},
            )
            for c in meta.get("commits", [])
        ]
        return sorted(commits, key=lambda c: c.since), int(meta.get("gpus", 1)), []
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return [], 1, [f"{path.name}: unreadable ({exc}); commits and GPU count unknown"]


def load(directory: Path) -> tuple[list[rp.Recording], dict[str, list[str]]]:
    """Recordings under ``directory`` and, per recording, the messages reading it gave."""
    recordings: list[rp.Recording] = []
    notes: dict[str, list[str]] = {}
    folders = sorted(p for p in directory.iterdir() if p.is_dir() and any(p.glob("*.csv")))
    for folder in folders:
        series: dict[str, rp.Series] = {}
        msgs: list[str] = []
        for f in sorted(folder.glob("*.csv")):
            pts, bad = read_csv(f)
            series[f.stem] = pts
            msgs += [f"{f.stem}: {b}" for b in bad]
        commits, gpus, bad_meta = read_meta(folder / "meta.json")
        recordings.append(rp.Recording(folder.name, series, commits, gpus))
        notes[folder.name] = msgs + bad_meta
    for f in sorted(directory.glob("*.csv")):
        pts, bad = read_csv(f)
        recordings.append(rp.Recording(f.stem, {f.stem: pts}))
        notes[f.stem] = [f"{f.stem}: {b}" for b in bad]
    return recordings, notes


def read_labels(path: Path) -> dict[str, list[rp.Window]]:
    """Labels by job name (file suffix and NAB category prefix removed)."""
    raw = json.loads(path.read_text())
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: labels must be a JSON object of job -> windows")
    out: dict[str, list[rp.Window]] = {}
    for key, value in raw.items():
        name = Path(str(key)).name.removesuffix(".csv")
        default_class = "anomaly"
        items = value
        if isinstance(value, dict):
            default_class = str(value.get("class", default_class))
            items = value.get("windows", [])
        if not isinstance(items, list):
            raise ValueError(f"{path}: {key}: windows must be a list of [start, end], got {str(items)[:60]}")
        windows = []
        for w in items:
            if not isinstance(w, list) or len(w) < 2:
                raise ValueError(f"{path}: {key}: a window must be [start, end] or [start, end, class], got {w!r}")
            cls = str(w[2]) if len(w) > 2 else default_class
            try:
                windows.append(rp.Window(parse_time(str(w[0])), parse_time(str(w[1])), cls))
            except ValueError as exc:
                raise ValueError(f"{path}: {key}: window {str(w)[:60]}: {exc}") from None
        out[name] = windows
    return out


def _iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def episodes(r: rp.Replay) -> list[dict[str, Any]]:
    """Consecutive ticks with the same action (or the same findings without one), first tick each."""
    out: list[dict[str, Any]] = []
    last: tuple[str | None, tuple[str, ...]] | None = None
    for k in r.ticks:
        kinds = tuple(sorted({f.kind.value for f in k.findings}))
        key = (k.action.value if k.action else None, kinds if k.action is None else ())
        if key == last:
            continue
        last = key
        if key == (None, ()):
            continue
        out.append(
            {
                "at": _iso(k.t),
                "findings": list(kinds),
                "action": k.action.value if k.action else None,
                "message": k.message,
            }
        )
    return out


def report(
    recordings: Sequence[rp.Recording],
    notes: Mapping[str, list[str]],
    labels: Mapping[str, list[rp.Window]] | None,
    settings: rp.ReplaySettings,
) -> dict[str, Any]:
    """The replay of every recording, scored where labelled, with a summary."""
    jobs: list[dict[str, Any]] = []
    scored: list[tuple[rp.SeriesScore, list[rp.Window]]] = []
    for rec in recordings:
        try:
            r = rp.replay(rec, settings)
        except Exception as exc:  # one bad recording never stops the others
            jobs.append({"name": rec.name, "error": f"{type(exc).__name__}: {exc}"})
            continue
        entry: dict[str, Any] = {
            "name": rec.name,
            "messages": list(notes.get(rec.name, [])) + [f"{p.series}: {p.message}" for p in r.problems],
            "episodes": episodes(r),
            "generic_flags": {k: [_iso(t) for t in v] for k, v in r.generic.items()},
        }
        if labels is not None and rec.name in labels:
            sc = rp.score(r, labels[rec.name])
            scored.append((sc, labels[rec.name]))
            entry["score"] = {
                "windows": [
                    {
                        "class": w.fault_class,
                        "start": _iso(w.start),
                        "expected_action": w.expected,
                        "detected_after_s": None if w.detected_at is None else round(w.detected_at - w.start, 1),
                        "first_action": w.first_action,
                        "right_action_after_s": None if w.delay_s is None else round(w.delay_s, 1),
                        "limit_s": w.limit_s,
                        "caught": w.caught,
                    }
                    for w in sc.windows
                ],
                "actions_outside_windows": [{"at": _iso(t), "action": a} for t, a in sc.actions_outside],
            }
        jobs.append(entry)
    out: dict[str, Any] = {"settings": dataclasses.asdict(settings), "jobs": jobs}
    if labels is not None:
        out["summary"] = summary(scored)
        missing = sorted(set(labels) - {rec.name for rec in recordings})
        if missing:
            out["labels_without_series"] = missing
    return out


def summary(scored: Sequence[tuple[rp.SeriesScore, list[rp.Window]]]) -> dict[str, Any]:
    """Per fault class: caught (right action in time) in every window of that class."""
    classes: dict[str, list[rp.WindowScore]] = {}
    for sc, _ in scored:
        for w in sc.windows:
            classes.setdefault(w.fault_class, []).append(w)
    caught = sorted(c for c, ws in classes.items() if all(w.caught for w in ws))
    delays = [w.delay_s for ws in classes.values() for w in ws if w.delay_s is not None and w.caught]
    clean = [sc for sc, windows in scored if not windows]
    return {
        "fault_classes": sorted(classes),
        "fault_classes_caught": caught,
        "windows": sum(len(ws) for ws in classes.values()),
        "windows_detected": sum(1 for ws in classes.values() for w in ws if w.detected_at is not None),
        "clean_series": len(clean),
        "clean_false_actions": sum(len(sc.actions_outside) for sc in clean),
        "actions_outside_windows_on_fault_series": sum(len(sc.actions_outside) for sc, w in scored if w),
        "max_detection_delay_s": round(max(delays), 1) if delays else None,
    }


def render(rep: Mapping[str, Any]) -> str:
    lines: list[str] = []
    for job in rep["jobs"]:
        lines.append(f"== {job['name']}")
        if "error" in job:
            lines.append(f"   error: {job['error']}")
            continue
        lines += [f"   data: {m}" for m in job["messages"]]
        for e in job["episodes"]:
            what = f"-> {e['action']}" if e["action"] else "(no action)"
            lines.append(f"   {e['at']} {','.join(e['findings']) or '-'} {what}: {e['message'][:160]}")
        for name, flags in job["generic_flags"].items():
            lines.append(f"   {name}: generic detector flagged {len(flags)} points (reported only)")
        for w in job.get("score", {}).get("windows", []):
            lines.append(
                f"   label {w['class']} at {w['start']}: expected {w['expected_action']}, first action "
                f"{w['first_action']}, right action after {w['right_action_after_s']} s -> "
                f"{'caught' if w['caught'] else 'MISSED'}"
            )
        for a in job.get("score", {}).get("actions_outside_windows", []):
            lines.append(f"   action outside labelled windows: {a['action']} at {a['at']}")
    if "summary" in rep:
        lines.append("summary: " + json.dumps(rep["summary"]))
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    if not args.series.is_dir():
        print(f"error: --series {args.series}: not a directory of CSV files", file=err)
        return 2
    labels = None
    if args.labels is not None:
        try:
            labels = read_labels(args.labels)
        except (OSError, ValueError) as exc:
            print(f"error: --labels: {exc}", file=err)
            return 2
    settings = rp.ReplaySettings(interval_s=args.interval_s)
    recordings, notes = load(args.series)
    if not recordings:
        print(f"error: --series {args.series}: no CSV files (one folder per job, or timestamp,value files)", file=err)
        return 2
    rep = report(recordings, notes, labels, settings)
    if args.out is not None:
        args.out.write_text(json.dumps(rep, indent=1, default=_json_default) + "\n")
    out.write(json.dumps(rep, indent=1, default=_json_default) + "\n" if args.format == "json" else render(rep))
    return 0


def _json_default(o: object) -> object:
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return str(o)


def _interval(text: str) -> float:
    """--interval-s: seconds between evaluations, 1 to the replay's lookback."""
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not 1 <= v <= rp.ReplaySettings.lookback_s:  # NaN too
        raise argparse.ArgumentTypeError(f"{text!r}: give seconds from 1 to {rp.ReplaySettings.lookback_s:g}")
    return v


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``evaluate`` under ``statictrain anomalies``."""
    units = "\n".join(f"  {name + '.csv':<34} {unit}" for name, unit in rp.UNITS.items())
    units += "\n  any other name: judged by the generic detector, reported only"
    p = subparsers.add_parser(
        "evaluate",
        help="replay recorded series through the detectors and remediation policy (offline)",
        description=__doc__,
        epilog=f"metric files and their units:\n{units}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--series", type=Path, required=True, help="folder of recorded series")
    p.add_argument("--labels", type=Path, help="labels JSON (fault windows per job; no windows: clean)")
    p.add_argument(
        "--interval-s",
        type=_interval,
        default=rp.ReplaySettings.interval_s,
        help="simulated seconds between evaluations (default: %(default)s)",
    )
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--out", type=Path, help="also write the JSON report here")
    p.set_defaults(func=run)
