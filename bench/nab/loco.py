"""Leave-one-category-out cross-validation of the generic (ensemble) detector on a NAB-layout corpus.

For each category and profile: choose, among ``CANDIDATES``, the settings and the threshold that
score best on the other categories, then score the held-out category with them. The held-out files
of all folds are scored together (NAB's normalisation over all files): that is ``loco_standard``
(and ``loco_reward_low_fp``, ``loco_reward_low_fn``). The full-split score is reported for the
settings most folds chose (ties: the best score on the training categories), threshold in-sample.

    .venv/bin/python bench/nab/run.py --data ../shared/data/nab --out bench/results/nab.json
    .venv/bin/python bench/nab/loco.py --data ../shared/data/nab --out bench/results/nab.json

(run.py first: it rewrites the file's scores and drops an earlier ``loco``.)

Scores per candidate are cached under ``--cache`` (a rerun only rescores). Results merge
into ``--out`` under ``loco`` and the top-level keys ``loco_standard`` and ``full_split_standard``.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import hashlib
import json
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from corpus import list_files, read_profiles, read_series, read_windows
from run import _score_one, _versions
from statictrain_operator.anomaly import nab
from statictrain_operator.anomaly.ensemble import EnsembleSettings

CENTRE = dataclasses.replace(EnsembleSettings(), history=1000)
CANDIDATES: dict[str, EnsembleSettings] = {
    "base": CENTRE,
    "tail_0": dataclasses.replace(CENTRE, tail=0),
    "alarm_4": dataclasses.replace(CENTRE, alarm_log10=4.0),
    "rest_100": dataclasses.replace(CENTRE, rest=100),
    "rest_300": dataclasses.replace(CENTRE, rest=300),
    "step_2": dataclasses.replace(CENTRE, step=2.0),
    "shape_m8": dataclasses.replace(CENTRE, shape_m=8),
    "history_2000": dataclasses.replace(CENTRE, history=2000),
}
"""A centre (history 1000) and one change each: no fitted tail (ranks only), the episode level, the
episode length, the growth that re-alarms within an episode, the shape length, the history length.
The detector's defaults are the candidate most folds chose (history_2000)."""
SHORT = {"standard": "standard", "reward_low_FP_rate": "reward_low_fp", "reward_low_FN_rate": "reward_low_fn"}


def scores_for(settings: EnsembleSettings, data: Path, cache: Path, workers: int) -> dict[str, list[float]]:
    """Scores of every file under ``settings`` (cached by the settings, so renamed candidates are reused)."""
    fields = {k: v for k, v in dataclasses.asdict(settings).items() if k != "flag_score"}  # no effect on scores
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]
    path = cache / f"{digest}.json"
    if path.exists():
        stored = json.loads(path.read_text())
        if stored.get("settings") == json.loads(json.dumps(fields)):
            return {k: [float(x) for x in v] for k, v in stored["scores"].items()}
    jobs = [(p, f"{p.parent.name}/{p.name}", settings, "ensemble") for p in list_files(data)]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(_score_one, jobs))
    scores = {key: s for key, s, _ in results}
    cache.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"settings": fields, "scores": scores}))
    return scores


def prepare(data: Path, scores: dict[str, list[float]]) -> list[nab.FileRecords]:
    windows = read_windows(data)
    files = []
    for p in list_files(data):
        key = f"{p.parent.name}/{p.name}"
        series = read_series(p, key)
        files.append(nab.prepare_file(key, scores[key], nab.window_indices(series.timestamps, windows.get(key, []))))
    return files


def loco(by_candidate: dict[str, list[nab.FileRecords]], profile: nab.Profile) -> tuple[float, list[dict[str, object]]]:
    """Leave-one-category-out score of one profile and its folds."""
    names = [f.name for f in next(iter(by_candidate.values()))]
    categories = sorted({n.split("/", 1)[0] for n in names})
    folds: list[dict[str, object]] = []
    held_out: list[nab.FileScore] = []
    for cat in categories:
        best = None
        for cand, files in by_candidate.items():
            train = [f for f in files if not f.name.startswith(cat + "/")]
            res = nab.score_corpus(train, profile)
            if best is None or res.score > best[1]:
                best = (cand, res.score, res.threshold)
        assert best is not None
        cand, train_score, threshold = best
        test = [f for f in by_candidate[cand] if f.name.startswith(cat + "/")]
        scored = [nab.score_file(f, profile, threshold) for f in test]
        held_out.extend(scored)
        windows = sum(f.n_windows for f in test)
        raw = sum(s.raw for s in scored)
        norm = nab.normalized(raw, -profile.fn_weight * windows, profile.tp_weight * windows)
        folds.append(
            {
                "held_out": cat,
                "chosen": cand,
                "threshold": threshold,
                "train_score": round(train_score, 2),
                "held_out_raw": round(raw, 3),
                "held_out_normalized": None if norm is None else round(norm, 2),
                "windows": windows,
                "detected_windows": sum(s.detected_windows for s in scored),
                "false_positives": sum(s.false_positives for s in scored),
            }
        )
    s_null, s_perfect = nab.null_and_perfect(next(iter(by_candidate.values())), profile)
    return nab.normalized(sum(s.raw for s in held_out), s_null, s_perfect) or 0.0, folds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/nab-loco-cache"))
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    profiles = read_profiles(args.data)
    t0 = time.perf_counter()
    by_candidate = {
        n: prepare(args.data, scores_for(s, args.data, args.cache, args.workers)) for n, s in CANDIDATES.items()
    }
    result: dict[str, object] = {}
    folds_by_profile = {}
    for profile in profiles:
        score, folds = loco(by_candidate, profile)
        result[f"loco_{SHORT[profile.name]}"] = round(score, 2)
        folds_by_profile[profile.name] = folds
    standard = next(p for p in profiles if p.name == "standard")
    std_folds = folds_by_profile["standard"]
    votes = collections.Counter(str(f["chosen"]) for f in std_folds)
    top = max(votes.values())
    chosen = max(
        (n for n, v in votes.items() if v == top),
        key=lambda n: max(float(f["train_score"]) for f in std_folds if f["chosen"] == n),  # type: ignore[arg-type]
    )
    full = {n: round(nab.score_corpus(files, standard).score, 2) for n, files in by_candidate.items()}
    result.update(
        {
            "full_split_standard": full[chosen],
            "full_split_settings": chosen,
            "full_split_by_candidate": full,
            "folds": std_folds,
            "folds_by_profile": folds_by_profile,
            "candidates": {n: dataclasses.asdict(s) for n, s in CANDIDATES.items()},
            "method": (
                "leave-one-category-out on the NAB development split: per fold and profile, the candidate settings "
                "and the detection threshold that maximise the NAB score on the other 3 categories are applied to "
                "the held-out category; held-out raw scores of all folds are normalised together (NAB's null and "
                "perfect detectors over all files). full_split_standard: the settings most standard folds chose, "
                "threshold optimised on all files (in-sample)."
            ),
            "wall_seconds": round(time.perf_counter() - t0, 1),
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "versions": _versions(),
            "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        }
    )
    print(json.dumps({k: v for k, v in result.items() if not isinstance(v, dict | list)}))
    print(json.dumps(full))
    for f in std_folds:
        print(f)
    if args.out:
        existing = json.loads(args.out.read_text()) if args.out.exists() else {}
        for key in ("loco_standard", "loco_reward_low_fp", "loco_reward_low_fn", "full_split_standard"):
            existing[key] = result[key]
        existing["loco"] = result
        args.out.write_text(json.dumps(existing, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
