"""Every figure of the cost report against an independent oracle (bench/cost_oracle.py's scenario).

The scenario runs on the real local cluster with a real Prometheus, real worker processes, a
restart that loses 100 steps, a spot eviction, a Prometheus restart, a scrape gap and an operator
outage; the expected figures come from the scenario's own record, not from product code. The same run's
FOCUS export must pass the validator written from the FOCUS 1.2 specification (tests/unit/cost/focus_spec.py)
and add up to the node cost, and ``report --reconcile`` of a bill with 5 % planted on one node must name that
node alone.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from statictrain_localcluster.cluster import LocalCluster

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "bench" / "cost_oracle.py"
FOCUS_SPEC = ROOT / "tests" / "unit" / "cost" / "focus_spec.py"


def load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def bench() -> ModuleType:
    return load("cost_oracle", BENCH)


def test_report_matches_the_oracle(cluster: LocalCluster, tmp_path: Path) -> None:
    oracle = bench()
    result = oracle.run(cluster, tmp_path)
    cmp = oracle.compare(result)
    worst = sorted(cmp["per_figure"].items(), key=lambda kv: -kv[1])[:5]
    assert cmp["max_rel_error"] <= 0.005, (worst, result["assumptions"])
    assert cmp["lost_work_rel_error"] <= 0.01, worst
    rows = {(r["namespace"], r["job_name"]): r for r in result["reports"]["job"]["rows"]}
    demo_like = next(r for (ns, job), r in rows.items() if job == "job-e")
    assert demo_like["tokens"] == "76800" and demo_like["steps"] == "300"
    assert not result["reports"]["job"]["summary"]["failed_invariants"]
    assert all(result["assumptions"]["energy_baseline_before_start"].values()), result["assumptions"]
    assert cmp["energy_max_rel_error"] <= 0.01, sorted(cmp["per_figure"].items(), key=lambda kv: -kv[1])[:5]
    assert cmp["carbon_max_rel_error"] <= 0.01
    assert load("focus_spec", FOCUS_SPEC).validate(result["focus"]) == []
    assert abs(oracle.focus_sum(result["focus"]) / result["focus_node_usd"] - 1) <= 1e-6
    off = result["reconcile"][result["reconcile"].index("off by more than") :].split("bill rows")[0]
    assert off.count("billed 5.00 % more than allocated") == 1 and result["planted_node"] in off, off
    assert "1 other currency" in result["reconcile"] and "no resource: Tax: 1 rows" in result["reconcile"]
