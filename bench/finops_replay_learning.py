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
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from statictrain_extender.replay.truth import SCENARIOS

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "results" / "finops_replay_learning.json"
SHORT = ("cost", "learned_minus", "oracle_minus", "regret", "pending", "unsched")
KEEP = ("command", "versions", "machine", "wall_seconds_total", "runs_per_arm", "complete", "eval_windows_start_s")


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
    paths = {s: args.work_dir / f"h27-learning-{s}.json" for s in scenarios}
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
        out["scenarios"][scenario] = scenario_summary(json.loads(path.read_text()), tag)
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
