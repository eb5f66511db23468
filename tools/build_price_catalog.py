"""Build the shipped price catalog from the transcribed price snapshots.

Input:  ../shared/data/prices/gpu_instances.csv (see that folder's README.md for
        where every number comes from: SkyPilot catalog snapshots of AWS, GCP and
        Azure list and spot prices, commits named per row in its ``source`` column).
Output: core/src/statictrain/data/prices.csv, one row per (cloud, instance type,
        region) with instance and per-GPU on-demand and spot prices as decimal
        strings, a ``flagged`` column (1 when the source marks the row ``FLAG:``
        as a suspected data error), and the source note carried over verbatim.

Per-GPU prices are instance price / GPU count, rounded half-even to 1e-6 USD.
Run:  .venv/bin/python tools/build_price_catalog.py [--src DIR] [--out FILE]
The output is deterministic: re-running on the same input gives the same bytes.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import sys
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SRC = ROOT.parent / "shared" / "data" / "prices"
DEFAULT_OUT = ROOT / "core" / "src" / "statictrain" / "data" / "prices.csv"
COLUMNS = [
    "cloud", "instance_type", "region", "gpu_model", "gpu_count",
    "on_demand_usd_per_hour", "spot_usd_per_hour",
    "on_demand_gpu_usd_per_hour", "spot_gpu_usd_per_hour", "flagged", "as_of", "source",
]
# When each source snapshot's prices were current, judged from its content (../shared/data/prices/README.md,
# "Sources"): the snapshots carry no date of their own. A row whose source is not listed fails the build.
AS_OF = {
    "catalogs/v7/aws/vms.csv@001367d2": "2025-H1",
    "catalogs/v7/gcp/vms.csv@017e2502": "2025",
    "catalogs/v6/azure/vms.csv@098741e7": "2024 or earlier",
}


def as_of(source: str) -> str:
    found = [when for snapshot, when in AS_OF.items() if snapshot in source]
    if len(found) != 1:
        raise SystemExit(f"source {source[:80]!r} names no known snapshot; add it to AS_OF in {__file__}")
    return found[0]


def per_gpu(price: str, count: int) -> str:
    if not price:
        return ""
    value = (Decimal(price) / count).quantize(Decimal("0.000001"), rounding=ROUND_HALF_EVEN)
    return f"{value:f}"


def build(src_csv: Path) -> str:
    raw = src_csv.read_bytes()
    rows = list(csv.DictReader(io.StringIO(raw.decode("utf-8"))))
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in sorted(rows, key=lambda r: (r["cloud"], r["instance_type"], r["region"])):
        count = int(row["gpu_count"])
        if count <= 0:
            raise SystemExit(f"{src_csv}: {row['instance_type']} has gpu_count {count}")
        for col in ("on_demand_usd_per_hour", "spot_usd_per_hour"):
            if row[col] and Decimal(row[col]) <= 0:
                raise SystemExit(f"{src_csv}: {row['instance_type']} {row['region']} {col} is not positive")
        spot_eq = row["spot_usd_per_hour"] and row["spot_usd_per_hour"] == row["on_demand_usd_per_hour"]
        source = row["source"]
        if spot_eq and row["cloud"] == "azure":
            source += "; FLAG: spot equals on-demand (probably no spot quote)"
        writer.writerow({
            "cloud": row["cloud"],
            "instance_type": row["instance_type"],
            "region": row["region"],
            "gpu_model": row["gpu_model"],
            "gpu_count": count,
            "on_demand_usd_per_hour": row["on_demand_usd_per_hour"],
            "spot_usd_per_hour": row["spot_usd_per_hour"],
            "on_demand_gpu_usd_per_hour": per_gpu(row["on_demand_usd_per_hour"], count),
            "spot_gpu_usd_per_hour": per_gpu(row["spot_usd_per_hour"], count),
            "flagged": "1" if "FLAG:" in source else "0",
            "as_of": as_of(source),
            "source": f"{source}; input sha256 {hashlib.sha256(raw).hexdigest()[:12]}",
        })
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=DEFAULT_SRC, help="folder holding gpu_instances.csv")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    text = build(args.src / "gpu_instances.csv")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out} ({text.count(chr(10)) - 1} rows)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
