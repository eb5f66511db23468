"""The learning arm against a wrong speed table: bench/finops_replay.py once per scenario, arms a, b, e, l side by side.

    .venv/bin/python bench/finops_replay_learning.py --trace ../shared/data/traces/alibaba-gpu-v2023

Arm e scores with core's throughput table; arm l is e whose extender learns each workload
class's speed per GPU family from the pods' step times (exported at the scenario's true
speed, scraped by the local cluster's Prometheus, read by the extender's own query).
Each scenario (replay/truth.py) runs in its own cluster, one after the other; the summary
of each goes under its name in bench/results/finops_replay_learning.json, with the figures
that matter side by side: l and e vs the better stock profile (a or b), l minus e.
``--reuse`` summarizes per-scenario outputs an earlier run left (``--work-dir``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from statictrain_extender.replay.truth import SCENARIOS

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "results" / "finops_replay_learning.json"
KEEP = ("command", "versions", "machine", "wall_seconds_total", "runs_per_arm", "complete", "eval_windows_start_s")


def scenario_summary(result: dict[str, Any], tag: str) -> dict[str, Any]:
    load = result["per_load"][tag]
    by_arm = load["by_arm_vs_better_stock"]
    return {
        "cost_per_work_ratio_learned": by_arm["l"]["cost_per_work_ratio"],
        "cost_per_work_ratio_learned_sd": by_arm["l"]["cost_per_work_ratio_sd"],
        "cost_per_work_ratio_table": by_arm["e"]["cost_per_work_ratio"],
        "cost_per_work_ratio_table_sd": by_arm["e"]["cost_per_work_ratio_sd"],
        "learned_minus_table": by_arm["l"].get("minus_e"),
        "learned_minus_table_sd": by_arm["l"].get("minus_e_sd"),
        "pending_p99_ratio_learned_vs_b": by_arm["l"]["pending_p99_ratio"],
        "unscheduled_delta_learned_vs_b": by_arm["l"]["unscheduled_delta"],
        "per_window": {
            "learned": by_arm["l"]["cost_per_work_ratio_runs"],
            "table": by_arm["e"]["cost_per_work_ratio_runs"],
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
    for scenario in scenarios:
        path = args.work_dir / f"h27-learning-{scenario}.json"
        if not args.reuse:
            cmd = [sys.executable, str(REPO / "bench" / "finops_replay.py"), "--trace", str(args.trace)]
            cmd += ["--length", args.length, "--loads", args.load, "--reps", args.reps, "--arms", "learning"]
            cmd += ["--weights", args.weights, "--scenario", scenario, "--out", str(path)]
            subprocess.run(cmd, check=False)
        if not path.exists():
            out["missing"].append(scenario)
            continue
        out["scenarios"][scenario] = scenario_summary(json.loads(path.read_text()), tag)
    out["command"] = "python " + " ".join(["bench/finops_replay_learning.py", *sys.argv[1:]])
    args.out.write_text(json.dumps(out, indent=1, default=str) + "\n")
    short = {
        s: {k: v for k, v in f.items() if k.startswith(("cost", "learned_minus", "pending", "unsched"))}
        for s, f in out["scenarios"].items()
    }
    print(json.dumps(short, indent=1))
    if out["missing"]:
        sys.exit(f"no result for {', '.join(out['missing'])}")


if __name__ == "__main__":
    main()
