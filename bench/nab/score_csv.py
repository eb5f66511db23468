"""Score any ``timestamp,value`` CSV with the NAB detector; write ``timestamp,value,anomaly_score``.

    .venv/bin/python bench/nab/score_csv.py IN.csv OUT.csv

The generic detector (``statictrain_operator.anomaly.ensemble``) runs online (record by record, no
look-ahead) with its defaults, the settings chosen by ``bench/nab/loco.py``, so any labelled data can
be evaluated the way NAB's files are.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from corpus import read_series
from statictrain_operator.anomaly.ensemble import score_series


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("input", type=Path, help="CSV with a header timestamp,value")
    parser.add_argument("output", type=Path, help="CSV to write: timestamp,value,anomaly_score")
    args = parser.parse_args(argv)
    try:
        series = read_series(args.input)
    except (OSError, ValueError) as exc:
        print(f"score_csv: {exc}", file=sys.stderr)
        return 2
    scores = score_series(series.values)
    with args.output.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["timestamp", "value", "anomaly_score"])
        for ts, v, s in zip(series.timestamps, series.values, scores, strict=True):
            w.writerow([ts, repr(v), f"{s:.6f}"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
