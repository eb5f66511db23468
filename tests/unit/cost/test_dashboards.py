"""The Grafana dashboards of the chart (pure checks; their PromQL runs against the real Prometheus in
tests/integration/cost/test_dashboards_gate.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from statictrain import metrics

DASHBOARDS = Path(__file__).resolve().parents[3] / "charts" / "statictrain" / "dashboards"
FILES = sorted(DASHBOARDS.glob("*.json"))
KNOWN = {v for k, v in vars(metrics).items() if k.isupper() and isinstance(v, str) and v.startswith("statictrain_")}
METRIC = re.compile(r"\bstatictrain_[a-z0-9_]+")


def queries(board: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in board["panels"] for t in p["targets"]] + [
        a["expr"] for a in board["annotations"]["list"]
    ]


def test_three_dashboards() -> None:
    assert [f.stem for f in FILES] == ["cluster-cost", "gpu-efficiency", "job"]
    uids = [json.loads(f.read_text())["uid"] for f in FILES]
    assert len(set(uids)) == 3


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_every_panel_queries_known_metrics(path: Path) -> None:
    board = json.loads(path.read_text())
    for p in board["panels"]:
        assert p["targets"], p["title"]
        assert p["datasource"]["uid"] == "${datasource}", p["title"]
        assert {"x", "y", "w", "h"} <= set(p["gridPos"]), p["title"]
    for q in queries(board):
        for name in METRIC.findall(q):
            base = re.sub(r"_(sum|count|bucket)$", "", name)
            assert name in KNOWN or base in KNOWN, f"{path.name}: {name} is not in statictrain.metrics"


def test_panels_do_not_overlap() -> None:
    for path in FILES:
        cells: set[tuple[int, int]] = set()
        for p in json.loads(path.read_text())["panels"]:
            g = p["gridPos"]
            mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
            assert not mine & cells, f"{path.name}: {p['title']} overlaps"
            assert g["x"] + g["w"] <= 24
            cells |= mine


def test_the_job_dashboard_shows_energy_and_carbon_in_their_units() -> None:
    board = json.loads((DASHBOARDS / "job.json").read_text())
    by_metric = {m: p for p in board["panels"] for t in p["targets"] for m in METRIC.findall(t["expr"])}
    assert by_metric[metrics.JOB_GPU_ENERGY_JOULES_TOTAL]["fieldConfig"]["defaults"]["unit"] == "kwatth"
    carbon = [p for p in board["panels"] if any(metrics.JOB_CARBON_GRAMS_TOTAL in t["expr"] for t in p["targets"])]
    assert {p["fieldConfig"]["defaults"]["unit"] for p in carbon if p["type"] == "stat"} == {"masskg"}
