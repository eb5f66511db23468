"""The FOCUS export: it passes a validator written from the FOCUS 1.2 specification (focus_spec.py), and its job
and idle rows add up to the nodes' cost; the validator itself catches each kind of violation."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from statictrain.cost import Sample
from statictrain_cli.report.focus import focus_rows, to_focus
from statictrain_cli.report.model import ReportWindow, build_report
from statictrain_cli.report.status import status_report
from statictrain_operator.prom import Series

from .focus_spec import validate

START = datetime(2026, 3, 1, tzinfo=UTC)
W = ReportWindow(START, datetime(2026, 3, 1, 4, tzinfo=UTC), buckets=4)


def counter(rate: float, labels: dict[str, str], since_h: float = 0.0, base: float = 0.0) -> Series:
    pts = [
        Sample(W.eval_start + i * W.step_s, base + rate * max(0.0, i - since_h))
        for i in range(W.buckets + 1)
        if i >= since_h
    ]
    return Series(labels, tuple(pts))


def job(name: str, ns: str, commit: str) -> dict[str, str]:
    return {"job_name": name, "namespace": ns, "commit": commit, "team": "nlp"}


def cluster() -> tuple[dict[str, list[Series]], dict[str, list[Series]]]:
    """Two nodes for 4 h: n1 10 $/h, n2 2.5 $/h. Job a on n1 at 4.1 $/h (0.4 of it idle GPUs, 1 kWh/h, 380 g/kWh);
    job b on n1 from 2 h at 3.3 $/h; job c on n2 at 1.25 $/h. Unallocated: n1 10 - 4.1 (- 3.3 from 2 h), n2 1.25."""
    a, b, c = job("a", "team-a", "c1"), job("b", "team-a", "c2"), job("c", "team-b", "c1")
    jobs = {
        "usd": [counter(4.1, a, base=40), counter(3.3, b, since_h=2), counter(1.25, c)],
        "gpu_usd": [counter(3.5, a, base=30), counter(3.0, b, since_h=2), counter(1.0, c)],
        "idle_usd": [counter(0.4, a)],
        "gpu_seconds": [counter(7200, a), counter(3600, b, since_h=2), counter(3600, c)],
        "tokens": [counter(2e6, a), counter(1e6, b, since_h=2)],
        "executed_steps": [counter(1000, a), counter(400, b, since_h=2)],
        "lost_steps": [counter(10, a)],
        "gpu_energy_j": [counter(3.6e6, a, base=7e9)],
        "carbon_g": [counter(380, a)],
    }
    n1, n2 = {"node": "n1"}, {"node": "n2"}
    nodes = {
        "node_usd": [counter(10, n1, base=500), counter(2.5, n2)],
        "node_idle_usd": [Series(n1, tuple(Sample(W.eval_start + i * W.step_s, v) for i, v in
                                           enumerate([0, 5.9, 11.8, 14.4, 17.0]))), counter(1.25, n2)],
        "node_allocated_usd": [counter(4.1, n1), counter(1.25, n2)],
    }  # fmt: skip
    return jobs, nodes


def rows_of(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_the_export_passes_the_spec_derived_validator() -> None:
    text = to_focus(build_report(W, "job", *cluster()))
    assert validate(text) == []


def test_job_and_idle_rows_add_up_to_the_node_cost_per_period_and_in_all() -> None:
    report = build_report(W, "job", *cluster())
    rows = rows_of(to_focus(report))
    total = sum(Decimal(r["BilledCost"]) for r in rows)
    assert abs(float(total) / report.node_usd - 1) <= 1e-6 and report.node_usd == pytest.approx(50.0)
    by_period: dict[str, Decimal] = {}
    for r in rows:
        by_period[r["ChargePeriodStart"]] = by_period.get(r["ChargePeriodStart"], Decimal(0)) + Decimal(r["BilledCost"])
    assert [round(float(v), 9) for v in by_period.values()] == [12.5, 12.5, 12.5, 12.5]


def test_rows_carry_the_job_the_charge_period_and_what_focus_has_no_column_for() -> None:
    rows = rows_of(to_focus(build_report(W, "job", *cluster())))
    a = [r for r in rows if r["ResourceId"] == "team-a/a"]
    assert [(r["ChargePeriodStart"], r["ChargePeriodEnd"]) for r in a][:2] == [
        ("2026-03-01T00:00:00Z", "2026-03-01T01:00:00Z"),
        ("2026-03-01T01:00:00Z", "2026-03-01T02:00:00Z"),
    ]
    first = a[0]
    assert json.loads(first["Tags"]) == {
        "statictrain.io/commit": "c1",
        "statictrain.io/job": "a",
        "statictrain.io/namespace": "team-a",
        "statictrain.io/team": "nlp",
    }
    assert (first["SubAccountId"], first["BilledCost"], first["x_IdleGpuCost"]) == (
        "team-a",
        "4.100000000000",
        "0.400000000000",
    )
    assert (first["x_GpuHours"], first["x_Tokens"], first["x_Steps"]) == (
        "2.000000000000",
        "2000000",
        "990.000000000000",
    )
    assert (first["x_GpuEnergyKWh"], first["x_CarbonKgCO2e"]) == ("1.000000000000", "0.380000000000")
    assert first["x_UsdPer1MTokens"] == "2.050000000000"
    idle = [r for r in rows if r["ResourceType"] == "Kubernetes Node"]
    assert {(r["ResourceId"], r["ChargePeriodStart"][11:13], r["BilledCost"]) for r in idle} >= {
        ("n1", "00", "5.900000000000"),
        ("n1", "03", "2.600000000000"),
        ("n2", "00", "1.250000000000"),
    }
    assert all(r["x_GpuHours"] == "" and r["SubAccountId"] == "" for r in idle)  # null, not 0


def test_a_report_from_statuses_exports_the_jobs_own_labels_as_tags() -> None:
    stj = {
        "metadata": {"name": "j1", "namespace": "ns", "creationTimestamp": "2026-03-01T00:00:00Z",
                     "labels": {"statictrain.io/commit": "abc", "cost-center": "4711"}},
        "status": {"cost": {"usd": "3.5", "gpuHours": "1", "tokens": "1000", "gpuEnergyKWh": "0.25"}},
    }  # fmt: skip
    report = status_report([stj], "job", datetime(2026, 3, 1, 2, tzinfo=UTC))
    text = to_focus(report)
    assert validate(text) == []
    (row,) = rows_of(text)
    assert json.loads(row["Tags"])["cost-center"] == "4711" and row["x_GpuEnergyKWh"] == "0.250000000000"


def test_a_filtered_export_has_the_selected_jobs_and_no_idle_rows() -> None:
    jobs, nodes = cluster()
    team_b = {f: [s for s in series if s.labels["namespace"] == "team-b"] for f, series in jobs.items()}  # as fetched
    rows = rows_of(to_focus(build_report(W, "job", team_b, nodes, filters={"namespace": ["team-b"]})))
    assert {r["ResourceId"] for r in rows} == {"team-b/c"}


def test_charge_periods_must_be_whole_seconds() -> None:
    odd = ReportWindow(START, datetime(2026, 3, 1, 0, 1, 55, tzinfo=UTC), buckets=24)
    jobs, nodes = cluster()
    with pytest.raises(ValueError, match="whole seconds"):
        focus_rows(build_report(odd, "job", jobs, nodes))


# ----------------------------------------------------------------------------- the validator catches violations


def good() -> list[dict[str, str]]:
    return rows_of(to_focus(build_report(W, "job", *cluster())))


def write(rows: list[dict[str, str]], header: list[str] | None = None) -> str:
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=header or list(rows[0]), lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
    return out.getvalue()


@pytest.mark.parametrize(
    ("column", "value", "problem"),
    [
        ("BilledCost", "", "BilledCost must not be null"),
        ("BilledCost", "1,000.50", "Numeric Format"),
        ("BilledCost", "$3", "Numeric Format"),
        ("BilledCost", "+3", "Numeric Format"),
        ("EffectiveCost", "35.2E+7", "Numeric Format"),
        ("ChargePeriodStart", "2026-03-01 00:00:00", "YYYY-MM-DDTHH:mm:ssZ"),
        ("ChargePeriodStart", "2026-03-01T00:00:00+00:00", "YYYY-MM-DDTHH:mm:ssZ"),
        ("ChargePeriodEnd", "2026-02-30T00:00:00Z", "not a real date"),
        ("BillingCurrency", "usd", "ISO 4217"),
        ("ChargeCategory", "Compute", "not an allowed value"),
        ("ChargeClass", "Refund", "not an allowed value"),
        ("ServiceCategory", "Machine Learning", "not an allowed value"),
        ("ServiceSubcategory", "Virtual Machines", "not a subcategory of ServiceCategory"),
        ("Tags", '{"a": {"nested": 1}}', "values are numbers"),
        ("Tags", '{"a": 1, "a": 2}', "unique keys"),
        ("Tags", "[1, 2]", "JSON object"),
        ("SubAccountName", "N/A", "stands for a null"),
        ("PricingQuantity", "", "PricingQuantity must not be null"),
        ("PricingUnit", "", "PricingUnit must be null exactly when PricingQuantity"),
        ("ResourceId", "", "ResourceType must be null exactly when ResourceId"),
        ("ChargePeriodEnd", "2026-03-01T00:00:00Z", "before ChargePeriodEnd"),
        ("ChargePeriodEnd", "2026-03-02T00:00:00Z", "inside the billing period"),
    ],
    ids=lambda v: v if len(v) < 30 else v[:30],
)
def test_the_validator_catches_each_rule(column: str, value: str, problem: str) -> None:
    rows = good()
    rows[0][column] = value
    problems = validate(write(rows))
    assert any(problem in p for p in problems), problems


def test_the_validator_catches_missing_and_foreign_columns_and_their_order() -> None:
    rows = good()
    header = [c for c in rows[0] if c != "ListCost"]
    assert any("Mandatory column ListCost is missing" in p for p in validate(write(rows, header)))
    for r in rows:
        r["GpuHours"] = r.pop("x_GpuHours")
    assert any("'GpuHours' is not a FOCUS 1.2 column" in p for p in validate(write(rows)))
    custom_first = ["x_Tokens", *[c for c in good()[0] if c != "x_Tokens"]]
    assert any("custom columns must come after" in p for p in validate(write(good(), custom_first)))


def test_the_validator_checks_unit_prices_and_purchases() -> None:
    rows = good()
    rows[0] |= {"ListUnitPrice": "2", "PricingQuantity": "3"}
    header = [*[c for c in rows[0] if not c.startswith("x_")], *[c for c in rows[0] if c.startswith("x_")]]
    assert any("ListUnitPrice x PricingQuantity" in p for p in validate(write(rows, header)))
    rows = good()
    rows[0]["ChargeCategory"] = "Purchase"
    assert any("Usage-Based for a Purchase" in p for p in validate(write(rows)))
