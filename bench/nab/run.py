"""Run a detector over a NAB-layout corpus and score it with NAB's rules.

    .venv/bin/python bench/nab/run.py --data ../shared/data/nab --out bench/results/nab.json

Detectors run in a process pool (``--workers``, default 2: the machine is shared).
Writes the three normalised profile scores, per-category scores, per-file
results, the fit+predict time of Prophet per series, the command, versions and
machine. Bad input (an unknown or ill-typed ``--set``, a selection without any labelled window)
exits with status 1 and a one-line message.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from importlib import metadata
from pathlib import Path

from corpus import Series, list_files, read_profiles, read_series, read_windows
from prophet_online import score_prophet
from statictrain_operator.anomaly import discord, ensemble, nab

SETTINGS: dict[str, type] = {"ensemble": ensemble.EnsembleSettings, "discord": discord.DiscordSettings}
"""Detectors with settings (``--set`` overrides their fields); ``prophet`` has none."""
NAMES = {
    "ensemble": "ensemble (statictrain_operator.anomaly.ensemble)",
    "discord": "discord (statictrain_operator.anomaly.discord)",
    "prophet": "prophet residuals (bench/nab/prophet_online.py)",
}


def _score_one(args: tuple[Path, str, object, str]) -> tuple[str, list[float], float]:
    path, key, settings, detector = args
    series = read_series(path, key)
    start = time.perf_counter()
    if detector == "prophet":
        return key, score_prophet(series.timestamps, series.values), time.perf_counter() - start
    if detector == "ensemble":
        assert isinstance(settings, ensemble.EnsembleSettings)
        return key, ensemble.score_series(series.values, settings), time.perf_counter() - start
    assert isinstance(settings, discord.DiscordSettings)
    finite = [v for v in series.values if math.isfinite(v)]
    scores = discord.score_series(series.values, settings, (min(finite), max(finite)) if finite else None)
    return key, scores, time.perf_counter() - start


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("prophet", "numpy", "pandas", "cmdstanpy", "statictrain-operator"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def _parse_set(detector: str, pairs: list[str]) -> object:
    """The detector's settings with ``--set NAME=JSON`` overrides; exits with a one-line message on bad input."""
    if detector not in SETTINGS:
        if pairs:
            raise SystemExit(f"--set: the {detector} detector has no settings")
        return None
    cls = SETTINGS[detector]
    defaults = cls()
    fields = {f.name for f in dataclasses.fields(cls)}
    out: dict[str, object] = {}
    try:
        for pair in pairs:
            name, _, raw = pair.partition("=")
            if name not in fields:
                raise ValueError(f"--set {pair}: unknown setting {name!r}; known: {sorted(fields)}")
            try:
                value = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ValueError(f"--set {pair}: the value must be JSON ({exc})") from exc
            if name == "channels":
                channel = ensemble.Channel if detector == "ensemble" else discord.Channel
                value = tuple(channel(*c) if isinstance(c, list) else channel(**c) for c in value)
            elif value is not None and not isinstance(value, type(getattr(defaults, name)) | int):
                raise ValueError(f"--set {pair}: expected {type(getattr(defaults, name)).__name__}")
            out[name] = value
        return cls(**out)
    except (TypeError, ValueError) as exc:
        raise SystemExit(f"run.py: {exc}") from exc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, required=True, help="NAB-layout folder (data/, labels/, config/)")
    parser.add_argument("--out", type=Path, help="write the JSON result here")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=JSON",
        help="override a field of the detector settings (channels: JSON list of [feature, k] or [m, differences])",
    )
    parser.add_argument(
        "--detector",
        choices=sorted(NAMES),
        default="ensemble",
        help="ensemble (the generic detector), discord (the previous one) or prophet (Prophet residuals)",
    )
    parser.add_argument("--only", default="", help="substring filter on file keys (for quick looks; not a NAB score)")
    args = parser.parse_args(argv)

    settings = _parse_set(args.detector, args.set)
    windows = read_windows(args.data)
    profiles = read_profiles(args.data)
    paths = [p for p in list_files(args.data) if args.only in f"{p.parent.name}/{p.name}"]
    jobs = [(p, f"{p.parent.name}/{p.name}", settings, args.detector) for p in paths]

    wall = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        results = list(pool.map(_score_one, jobs))
    wall = time.perf_counter() - wall

    files = []
    for (path, key, _, _), (_, scores, _) in zip(jobs, results, strict=True):
        series: Series = read_series(path, key)
        idx = nab.window_indices(series.timestamps, windows.get(key, []))
        files.append(nab.prepare_file(key, scores, idx))

    report: dict[str, object] = {}
    per_category: dict[str, object] = {}
    for profile in profiles:
        try:
            res = nab.score_corpus(files, profile)
        except ValueError as exc:
            raise SystemExit(f"run.py: {exc} (does --only select a file with a window?)") from exc
        short = {
            "standard": "standard",
            "reward_low_FP_rate": "reward_low_fp",
            "reward_low_FN_rate": "reward_low_fn",
        }
        report[short.get(profile.name, profile.name)] = round(res.score, 2)
        per_category[profile.name] = {
            "threshold": res.threshold,
            "raw": res.raw,
            "categories": nab.category_scores(files, res, profile),
            "files": [dataclasses.asdict(f) for f in res.files],
        }
    std = per_category["standard"]["categories"]  # type: ignore[index]
    report["standard_by_category"] = {
        cat: {k: (round(v, 2) if isinstance(v, float) else v) for k, v in vals.items()} for cat, vals in std.items()
    }
    secs = [r[2] for r in results]
    report.update(
        {
            "files": len(files),
            "windows": sum(f.n_windows for f in files),
            "detector": {
                "name": NAMES[args.detector],
                **({"settings": dataclasses.asdict(settings)} if dataclasses.is_dataclass(settings) else {}),  # type: ignore[arg-type]
            },
            "detector_seconds_per_series": round(sum(secs) / len(secs), 4),
            "wall_seconds": round(wall, 1),
            "profiles": per_category,
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "versions": _versions(),
            "machine": {
                "platform": platform.platform(),
                "cpus": os.cpu_count(),
                "processor": platform.processor(),
            },
            "note": (
                "development split of NAB (4 of 7 categories); not directly comparable with the full-corpus scoreboard"
            ),
        }
    )
    if args.only:
        report["note"] = f"--only {args.only!r}: a subset, not a NAB score"
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        existing = json.loads(args.out.read_text()) if args.out.exists() else {}
        for key in (
            "fit_predict_s_per_series",
            "fit_predict_source",
            "prophet_timing",
            "prophet_timing_idle_machine",
            "tuning",
            "comparison",
            "previous_detector",
            "assumes",
        ):
            if key in existing:
                report[key] = existing[key]
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    summary = {k: report[k] for k in ("standard", "reward_low_fp", "reward_low_fn", "wall_seconds")}
    print(json.dumps(summary))
    for prof in ("standard",):
        cats = per_category[prof]["categories"]  # type: ignore[index]
        for cat, v in cats.items():
            print(cat, {k: (round(x, 2) if isinstance(x, float) else x) for k, x in v.items()})
    del text
    return 0


if __name__ == "__main__":
    sys.exit(main())
