"""Time Prophet fit + predict per series, as the operator's detector runs it.

    .venv/bin/python bench/nab/prophet_timing.py --data ../shared/data/nab --out bench/results/nab.json

For every NAB file, the first ``--points`` records (default 4000) are the
series: Prophet is fitted on all but the last ``recent_points`` and predicts
those (``detector.prophet_expectation``, the call ``detector.assess`` makes).
One process, files in turn, so the figure is not inflated by a shared pool.
Adds ``fit_predict_s_per_series`` (mean) and ``prophet_timing`` to the JSON file.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import resource
import statistics
import sys
import time
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from corpus import list_files, read_series
from statictrain_operator.anomaly.detector import DetectorSettings, prophet_expectation


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:  # copied onto a machine without its metadata
        return str(getattr(importlib.import_module(dist), "__version__", "unknown"))


def _cpu() -> float:
    """CPU seconds of this process and its finished children (Stan runs as a child process)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--points", type=int, default=4000)
    parser.add_argument("--machine-note", default="", help="what else ran on the machine while measuring")
    parser.add_argument("--key", default="prophet_timing", help="JSON key for the details")
    args = parser.parse_args(argv)
    settings = DetectorSettings()
    k = settings.recent_points
    # One fit first, untimed in the per-series figures: imports, the Stan model load and
    # the first cmdstan start are a once-per-process cost (recorded as first_fit_s).
    files = list_files(args.data)
    first = read_series(files[0])
    wt = [datetime.fromisoformat(t) for t in first.timestamps[:500]]
    start = time.perf_counter()
    prophet_expectation(
        wt[:-k],
        list(first.values[: len(wt) - k]),
        wt[-k:],
        settings.interval_width,
        settings.prophet_max_iter,
    )
    first_fit_s = round(time.perf_counter() - start, 4)
    rows: list[dict[str, Any]] = []
    points: list[int] = []
    secs: list[float] = []
    cpu: list[float] = []
    for path in files:
        s = read_series(path)
        ts = [datetime.fromisoformat(t) for t in s.timestamps[: args.points]]
        ys = list(s.values[: args.points])
        cpu0 = _cpu()
        start = time.perf_counter()
        prophet_expectation(ts[:-k], ys[:-k], ts[-k:], settings.interval_width, settings.prophet_max_iter)
        wall = time.perf_counter() - start
        rows.append(
            {
                "file": f"{path.parent.name}/{path.name}",
                "points": len(ys),
                "seconds": round(wall, 4),
                "cpu_seconds": round(_cpu() - cpu0, 4),
            }
        )
        points.append(len(ys))
        secs.append(float(rows[-1]["seconds"]))
        cpu.append(float(rows[-1]["cpu_seconds"]))
        print(rows[-1], flush=True)
    timing = {
        "series": len(rows),
        "first_fit_s": first_fit_s,
        "prophet_max_iter": settings.prophet_max_iter,
        "max_points": max(points),
        "mean_s": round(statistics.mean(secs), 4),
        "median_s": round(statistics.median(secs), 4),
        "max_s": round(max(secs), 4),
        "mean_cpu_s": round(statistics.mean(cpu), 4),
        "max_cpu_s": round(max(cpu), 4),
        "per_file": rows,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "versions": {d: _version(d) for d in ("prophet", "cmdstanpy", "pandas", "numpy")},
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor(),
            "cpus": os.cpu_count(),
            "note": args.machine_note,
        },
    }
    print(json.dumps({k2: v for k2, v in timing.items() if k2 != "per_file"}))
    if args.out:
        doc = json.loads(args.out.read_text()) if args.out.exists() else {}
        if args.key == "prophet_timing":
            doc["fit_predict_s_per_series"] = timing["mean_s"]
        doc[args.key] = timing
        args.out.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
