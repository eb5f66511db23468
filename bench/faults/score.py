"""Score the recorded training-fault corpus with the offline replay (``statictrain anomalies evaluate``).

    .venv/bin/python bench/faults/score.py --series bench/data/training_faults \
        --out bench/results/training_faults.json

Writes the replay's summary (``fault_classes``, ``fault_classes_caught``, ``clean_series``,
``clean_false_actions``, ``max_detection_delay_s``), ``device_calls`` and ``gpu`` (from the corpus's
``recording.json``: one entry per recording call, or one call), every job's episodes and window scores,
the settings, the command, versions and machine. Nothing here is tuned: the detectors run with
their defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from importlib import metadata
from pathlib import Path

from statictrain_cli import replay as replay_cli
from statictrain_operator.anomaly import replay as rp


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--series", type=Path, required=True)
    ap.add_argument("--labels", type=Path, help="default: <series>/labels.json")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    labels = replay_cli.read_labels(args.labels or args.series / "labels.json")
    recordings, notes = replay_cli.load(args.series)
    t0 = time.perf_counter()
    rep = replay_cli.report(recordings, notes, labels, rp.ReplaySettings())
    summary = rep.pop("summary")
    recording = args.series / "recording.json"
    recorded = json.loads(recording.read_text()) if recording.exists() else None
    calls = (recorded.get("calls") or [recorded]) if recorded else []
    result = {
        **summary,
        "device_calls": len(calls) if calls else None,
        "gpu": sorted({d for c in calls for d in c.get("devices", [])}) or None,
        "detection_limit": "max(300 s, 20 expected steps) from the labelled start, with the class's action",
        "replay_seconds": round(time.perf_counter() - t0, 2),
        **rep,
        "corpus": str(args.series),
        "recorded_on": recorded,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "versions": {
            "python": platform.python_version(),
            "statictrain-operator": metadata.version("statictrain-operator"),
        },
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
