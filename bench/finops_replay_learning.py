"""The learning arm against a wrong speed table: bench/finops_replay.py per scenario, arms a, b, e, l, o side by side.

    .venv/bin/python bench/finops_replay_learning.py --trace ../shared/data/traces/alibaba-gpu-v2023

Arm e scores with core's throughput table; arm l is e whose extender learns each workload
class's speed per GPU family from the pods' step times (exported at the scenario's true
speed, scraped by the local cluster's Prometheus, read by the extender's own query); arm o
(the oracle) is e with the scenario's true speed per class and family in its table.
Each scenario (replay/truth.py) runs in its own cluster (``--jobs`` of them at a time); the
summary of each goes under its name in bench/results/finops_replay_learning.json, with the
figures that matter side by side: l, e and o vs the better stock profile (a or b), l minus e,
and ``regret_70``: l minus o, window by window (same pods, same run).
``--reuse`` summarizes per-scenario outputs an earlier run left (``--work-dir``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from statictrain_extender.replay.curve import bucket_names
from statictrain_extender.replay.truth import SCENARIOS

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "results" / "finops_replay_learning.json"
SHORT = ("cost", "learned_minus", "oracle_minus", "regret", "pending", "unsched")
KEEP = ("command", "versions", "machine", "wall_seconds_total", "runs_per_arm", "complete", "eval_windows_start_s")


CURVE_DEFINITION = (
    "learning_curve_70: each held-out window at 70 % load cut into buckets: 'prefill' (the batch pods there when "
    "the clock starts, placed before any pod of the window ran) and equal stretches of the window by the time a "
    "batch pod started. cost_per_work_ratio[arm][bucket]: that bucket's batch $ per A100-equivalent GPU-hour "
    "(each pod's share of its node's cost, ends censored at the window's end) divided by the better stock "
    "profile's (a or b) on the same bucket, mean and sd over windows; regret = l - o bucket by bucket. "
    "share_of_scorings[source][bucket]: arm l's extender's prioritize calls for batch pods whose best node's "
    "figure was measured / inferred / table (growth of statictrain_extender_throughput_estimates_total{source}, "
    "sampled every 0.25 wall s), share of that bucket's calls, mean and sd over windows. With fresh_classes, arm "
    "l's workload classes are renamed per window, so each window starts with classes the extender has never "
    "seen (o and e unchanged)."
)


def _stats(values: list[float | None]) -> dict[str, Any]:
    known = [v for v in values if v is not None]
    return {
        "mean": statistics.fmean(known) if known else None,
        "sd": statistics.stdev(known) if len(known) > 1 else None,
        "per_window": values,
    }


def learning_curve(result: dict[str, Any], load: float) -> dict[str, Any]:
    """The learning arm's $/work and figure sources bucket by bucket, against o and e (see CURVE_DEFINITION)."""
    runs = [s for s in result["segments"] if s["load"] == load]
    names = bucket_names(result["setup"]["learning"]["curve_slices"])
    ratios: dict[str, dict[str, list[float | None]]] = {arm: {b: [] for b in names} for arm in ("l", "o", "e")}
    regret: dict[str, list[float | None]] = {b: [] for b in names}
    shares: dict[str, dict[str, list[float | None]]] = {}
    calls: dict[str, list[float | None]] = {b: [] for b in names}
    for run in runs:
        arms = run["arms"]
        stock = [
            min((x for x in pair if x is not None), default=None)
            for pair in zip(
                arms["a"]["batch_cost_per_work_by_slice"], arms["b"]["batch_cost_per_work_by_slice"], strict=True
            )
        ]
        for arm in ratios:
            for b, x, den in zip(names, arms[arm]["batch_cost_per_work_by_slice"], stock, strict=True):
                ratios[arm][b].append(x / den if x is not None and den else None)
        for b in names:
            learned, oracle = ratios["l"][b][-1], ratios["o"][b][-1]
            regret[b].append(learned - oracle if learned is not None and oracle is not None else None)
        counts = run.get("sources_by_slice", {}).get("l") or [{} for _ in names]
        for b, bucket in zip(names, counts, strict=True):
            total = sum(bucket.values())
            calls[b].append(total)
            for source in ("measured", "inferred", "table"):
                shares.setdefault(source, {n: [] for n in names})[b].append(
                    bucket.get(source, 0.0) / total if total else None
                )
    return {
        "buckets": names,
        "windows": len(runs),
        "fresh_classes": result["setup"]["learning"].get("fresh_classes"),
        "cost_per_work_ratio": {arm: {b: _stats(v) for b, v in by.items()} for arm, by in ratios.items()},
        "regret": {b: _stats(v) for b, v in regret.items()},
        "share_of_scorings": {s: {b: _stats(v) for b, v in by.items()} for s, by in shares.items()},
        "scorings": {b: _stats(v) for b, v in calls.items()},
    }


def scenario_summary(result: dict[str, Any], tag: str) -> dict[str, Any]:
    load = result["per_load"][tag]
    by_arm = load["by_arm_vs_better_stock"]
    return {
        "cost_per_work_ratio_learned": by_arm["l"]["cost_per_work_ratio"],
        "cost_per_work_ratio_learned_sd": by_arm["l"]["cost_per_work_ratio_sd"],
        "cost_per_work_ratio_table": by_arm["e"]["cost_per_work_ratio"],
        "cost_per_work_ratio_table_sd": by_arm["e"]["cost_per_work_ratio_sd"],
        "cost_per_work_ratio_oracle": (by_arm.get("o") or {}).get("cost_per_work_ratio"),
        "cost_per_work_ratio_oracle_sd": (by_arm.get("o") or {}).get("cost_per_work_ratio_sd"),
        "regret_70": {
            "mean": by_arm["l"].get("minus_o"),
            "sd": by_arm["l"].get("minus_o_sd"),
            "per_window": by_arm["l"].get("minus_o_runs"),
            "windows": sum(1 for v in by_arm["l"].get("minus_o_runs") or [] if v is not None),
        },
        "oracle_minus_table": (by_arm.get("o") or {}).get("minus_e"),
        "oracle_minus_table_sd": (by_arm.get("o") or {}).get("minus_e_sd"),
        "learned_minus_table": by_arm["l"].get("minus_e"),
        "learned_minus_table_sd": by_arm["l"].get("minus_e_sd"),
        "pending_p99_ratio_learned_vs_b": by_arm["l"]["pending_p99_ratio"],
        "unscheduled_delta_learned_vs_b": by_arm["l"]["unscheduled_delta"],
        "per_window": {
            "learned": by_arm["l"]["cost_per_work_ratio_runs"],
            "table": by_arm["e"]["cost_per_work_ratio_runs"],
            "oracle": (by_arm.get("o") or {}).get("cost_per_work_ratio_runs"),
        },
        "learned_at_end": result["segments"][-1].get("learned", {}).get("l") if result["segments"] else None,
        "truth_by_class": result["setup"]["truth_by_class"],
        "per_load": load,
        **{k: result.get(k) for k in KEEP},
    }


def write_curve(path: Path, run: dict[str, Any], tag: str) -> None:
    """Put a --curve run under learning_curve_{tag} of ``path``, keeping the rest of it."""
    whole = json.loads(path.read_text()) if path.exists() else {}
    curve_keys = ("cost_per_work_ratio_learned", "cost_per_work_ratio_oracle", "cost_per_work_ratio_table")
    whole[f"learning_curve_{tag}"] = {
        "definition": CURVE_DEFINITION,
        "command": "python " + " ".join(["bench/finops_replay_learning.py", *sys.argv[1:]]),
        "wall_seconds_all_scenarios": run.get("wall_seconds_all_scenarios"),
        "missing": run["missing"],
        "scenarios": {
            s: {
                **f["learning_curve"],
                "whole_window": {k: f[k] for k in curve_keys} | {"regret": f["regret_70"]},
                **{k: f.get(k) for k in KEEP},
            }
            for s, f in run["scenarios"].items()
        },
    }
    path.write_text(json.dumps(whole, indent=1, default=str) + "\n")
    for s, f in run["scenarios"].items():
        c = f["learning_curve"]
        row = {b: c["regret"][b]["mean"] for b in c["buckets"]}
        measured = {b: c["share_of_scorings"]["measured"][b]["mean"] for b in c["buckets"]}
        print(json.dumps({"scenario": s, "regret_by_bucket": row, "measured_share": measured}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", type=Path, help="folder of the Alibaba GPU trace (see finops_replay.py)")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--length", default="4000")
    ap.add_argument("--reps", default="3")
    ap.add_argument("--load", default="0.7")
    ap.add_argument("--weights", default="1:3", help="cost:pack of e and l (finops_replay.json's CV chose 1:3)")
    ap.add_argument("--work-dir", type=Path, default=Path("/tmp"))
    ap.add_argument("--jobs", type=int, default=1, help="scenarios replayed at a time (each in its own cluster)")
    ap.add_argument("--reuse", action="store_true", help="no replay: summarize the per-scenario outputs in --work-dir")
    ap.add_argument(
        "--curve",
        action="store_true",
        help="the learning curve: arm l meets new workload classes every window (finops_replay.py --fresh-classes); "
        "the result goes under learning_curve_70 in --out, the rest of it is kept",
    )
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    scenarios = [s for s in args.scenarios.split(",") if s]
    unknown = sorted(set(scenarios) - set(SCENARIOS))
    if unknown:
        ap.error(f"unknown scenarios {unknown}: choose from {', '.join(SCENARIOS)}")
    if not args.reuse and not args.trace:
        ap.error("give --trace FOLDER (or --reuse)")
    tag = f"{round(float(args.load) * 100)}"
    out: dict[str, Any] = {"scenarios": {}, "missing": []}
    stem = "h27-curve" if args.curve else "h27-learning"
    paths = {s: args.work_dir / f"{stem}-{s}.json" for s in scenarios}
    if not args.reuse:
        t0 = time.monotonic()
        todo = list(scenarios)
        running: list[subprocess.Popen[bytes]] = []
        while todo or running:
            while todo and len(running) < max(1, args.jobs):
                scenario = todo.pop(0)
                paths[scenario].unlink(missing_ok=True)  # no stale result from an earlier run
                cmd = [sys.executable, str(REPO / "bench" / "finops_replay.py"), "--trace", str(args.trace)]
                cmd += ["--length", args.length, "--loads", args.load, "--reps", args.reps, "--arms", "learning"]
                cmd += ["--weights", args.weights, "--scenario", scenario, "--out", str(paths[scenario])]
                cmd += ["--fresh-classes"] if args.curve else []
                running.append(subprocess.Popen(cmd))
            time.sleep(2)
            running = [p for p in running if p.poll() is None]
        out["wall_seconds_all_scenarios"] = time.monotonic() - t0
        out["jobs"] = args.jobs
    for scenario in scenarios:
        path = paths[scenario]
        if not path.exists():
            out["missing"].append(scenario)
            continue
        result = json.loads(path.read_text())
        out["scenarios"][scenario] = scenario_summary(result, tag)
        if args.curve:
            out["scenarios"][scenario]["learning_curve"] = learning_curve(result, float(args.load))
    if args.curve:
        write_curve(args.out, out, tag)
        if out["missing"]:
            sys.exit(f"no result for {', '.join(out['missing'])}")
        return
    fast = out["scenarios"].get("old_2x_faster")
    out["cost_per_work_ratio_70_wrong_table_fast_old"] = fast["cost_per_work_ratio_learned"] if fast else None
    out["cost_per_work_ratio_70_wrong_table_fast_old_sd"] = fast["cost_per_work_ratio_learned_sd"] if fast else None
    out["regret_70"] = {s: f["regret_70"]["mean"] for s, f in out["scenarios"].items()}
    out["regret"] = (
        "regret_70: arm l's batch $/work minus arm o's, each divided by the better stock profile's (a or b) "
        "in the same window, mean and sd over the held-out windows at 70 % load; o is e with the scenario's "
        "true speed per workload class and GPU family in its table"
    )
    out["windows_per_scenario"] = {s: f.get("runs_per_arm") for s, f in out["scenarios"].items()}
    out["command"] = "python " + " ".join(["bench/finops_replay_learning.py", *sys.argv[1:]])
    args.out.write_text(json.dumps(out, indent=1, default=str) + "\n")
    short = {s: {k: v for k, v in f.items() if k.startswith(SHORT)} for s, f in out["scenarios"].items()}
    print(json.dumps(short, indent=1))
    if out["missing"]:
        sys.exit(f"no result for {', '.join(out['missing'])}")


if __name__ == "__main__":
    main()
