"""``report --reconcile``: a provider's FOCUS bill against statictrain's allocation per node (pure parts and CLI).

The bills are written in the shape of the FOCUS 1.2 specification's examples
(specification/data/commitment_discount_scenarios/*.csv: one Usage row per resource and hour, ConsumedQuantity 1
Hour), for the nodes of the report, with a 5 % discrepancy planted on one node and one row of every other kind.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from statictrain.cost import Sample
from statictrain_cli.main import build_parser, run_report
from statictrain_cli.report.model import Report, ReportWindow, build_report
from statictrain_cli.report.reconcile import read_bill, reconcile, to_text
from statictrain_operator.prom import Series

START = datetime(2026, 3, 1, tzinfo=UTC)
W = ReportWindow(START, START + timedelta(hours=3), buckets=1)
PRICES = {"ip-10-0-1-7.ec2.internal": Decimal("98.32"), "gpu-l4-0": Decimal("0.8048")}
IDS = {"ip-10-0-1-7.ec2.internal": "aws:///us-east-1a/i-0abc123"}
"""The first node's spec.providerID, as the operator's node price gauge carries it."""
HEADER = ["BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory",
          "ChargeFrequency", "PricingCategory", "ResourceId", "BilledCost", "EffectiveCost", "ConsumedQuantity",
          "ConsumedUnit", "BillingCurrency", "ServiceName"]  # fmt: skip


def z(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def hourly(
    resource: str, usd: Decimal, hours: int = 3, currency: str = "USD", category: str = "Usage"
) -> list[list[str]]:
    return [
        [z(START), z(START + timedelta(days=31)), z(START + timedelta(hours=h)), z(START + timedelta(hours=h + 1)),
         category, "Usage-Based", "Standard", resource, f"{usd}", f"{usd}", "1", "Hour", currency, "Amazon EC2"]
        for h in range(hours)
    ]  # fmt: skip


def bill_text(rows: list[list[str]], header: list[str] = HEADER) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([header, *rows])
    return out.getvalue()


def report() -> Report:
    """statictrain's view of the 3 h: both nodes priced as PRICES; on the first, jobs 60 %, idle 40 %."""

    def c(total: float, labels: dict[str, str]) -> Series:
        return Series(labels, (Sample(W.eval_start, 0.0), Sample(W.eval_end, total)))

    nodes: dict[str, list[Series]] = {"node_usd": [], "node_idle_usd": [], "node_allocated_usd": []}
    for name, price in PRICES.items():
        total = float(price) * 3
        nodes["node_usd"].append(c(total, {"node": name}))
        nodes["node_allocated_usd"].append(c(total * 0.6, {"node": name}))
        nodes["node_idle_usd"].append(c(total * 0.4, {"node": name}))
    return build_report(W, "job", {}, nodes)


def planted() -> str:
    big, small = PRICES
    rows = hourly("arn:aws:ec2:us-east-1:123456789012:instance/i-0abc123", PRICES[big])  # the node's instance
    rows += hourly(small, PRICES[small] * Decimal("1.05"))  # 5 % more than statictrain priced it
    rows += hourly("vol-0abc", Decimal("0.01"), hours=2)  # an EBS volume: no node of statictrain's
    rows += hourly("", Decimal("12.5"), hours=1, category="Tax")
    rows += hourly(small, Decimal("0.7"), hours=1, currency="EUR")
    rows.append([z(START), z(START), "yesterday", z(START), "Usage", "", "", small, "1", "1", "1", "Hour", "USD", ""])
    return bill_text(rows)


def test_a_planted_5_percent_discrepancy_is_explained_to_the_node() -> None:
    rec = reconcile(read_bill(planted()), report(), IDS)
    lines = {n.node: n for n in rec.nodes}
    big, small = PRICES
    assert lines[big].billed == PRICES[big] * 3 and abs(lines[big].relative or Decimal(1)) < Decimal("1e-12")
    assert abs((lines[small].relative or Decimal(0)) - Decimal("0.05")) < Decimal("1e-9")
    text = to_text(rec)
    off = text[text.index("off by more than") :]
    assert f"{small}: billed 5.00 % more than allocated" in off and big not in off.split("bill rows")[0]
    assert "cover 3.00 h at $0.845/h; statictrain's allocation over the same hours is $0.805/h" in off


def test_every_row_is_counted_in_one_kind_and_every_kind_is_listed() -> None:
    rec = reconcile(read_bill(planted()), report(), IDS)
    assert rec.counts == {"matched": 6, "unknown resource": 2, "no resource": 1, "other currency": 1, "malformed": 1}
    assert sum(rec.counts.values()) == len(planted().splitlines()) - 1
    text = to_text(rec)
    assert "bill rows: 11 read = 6 matched, 2 unknown resource, 1 no resource, 1 other currency, 1 malformed" in text
    assert "unknown resource: vol-0abc: 2 rows, billed 0.02 USD" in text
    assert "no resource: Tax: 1 rows, billed 12.5 USD" in text
    assert "other currency: EUR: 1 rows, billed 0.7 EUR (not compared" in text
    assert "malformed: line 12: ChargePeriodStart/End" in text


def test_unknown_columns_are_named_and_the_rows_still_read() -> None:
    rows = [[*r, "x"] for r in hourly(next(iter(PRICES)), Decimal(1))]
    rec = reconcile(read_bill(bill_text(rows, [*HEADER, "lineItem/UsageType"])), report())
    assert rec.counts["matched"] == 3
    assert "columns that are not FOCUS columns (not read): lineItem/UsageType" in to_text(rec)


def test_a_node_that_is_not_on_the_bill_is_said_so() -> None:
    big = next(iter(PRICES))
    rec = reconcile(read_bill(bill_text(hourly(big, PRICES[big]))), report())
    assert "gpu-l4-0: allocated $2.41 but not on the bill" in to_text(rec)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "lacks the FOCUS column"),
        ("BilledCost,ChargePeriodStart\n1,2026-03-01T00:00:00Z\n", "ResourceId"),
        (bill_text([["x"] * len(HEADER)]), "no readable row"),
    ],
    ids=["empty", "not-focus", "nothing-readable"],
)
def test_bad_bills_are_refused_with_what_to_fix(text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        read_bill(text)


def test_cli_reads_the_bill_and_says_what_is_wrong_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bill.csv"
    bad.write_text("BilledCost\n1\n")
    err = io.StringIO()
    args = build_parser().parse_args(["report", "--reconcile", str(bad), "--prometheus-url", "http://127.0.0.1:9"])
    assert run_report(args, stderr=err) == 2
    assert err.getvalue().startswith(f"error: {bad}: the bill lacks the FOCUS column(s)")
    err = io.StringIO()
    args = build_parser().parse_args(["report", "--reconcile", str(tmp_path / "none.csv")])
    assert run_report(args, stderr=err) == 2 and "No such file" in err.getvalue()
    good = tmp_path / "good.csv"
    good.write_text(planted())
    err = io.StringIO()
    argv = ["report", "--reconcile", str(good), "--prometheus-url", "http://127.0.0.1:9", "--no-progress"]
    args = build_parser().parse_args([*argv, "--timeout", "2"])
    assert run_report(args, stderr=err) == 3 and err.getvalue().count("\n") <= 2 and "error:" in err.getvalue()


FIELD = st.one_of(
    st.sampled_from(["", "USD", "EUR", "Usage", "Tax", "1.5", "-0.25", "1e3", "NaN", "2026-03-01T01:00:00Z",
                     "2026-03-01T00:00:00Z", "2026-13-01T00:00:00Z", "gpu-l4-0", "arn:x/gpu-l4-0", "\x00", "\""]),
    st.text(max_size=12),
)  # fmt: skip


@given(st.lists(st.lists(FIELD, min_size=0, max_size=len(HEADER) + 2), max_size=30))
def test_hostile_bills_are_read_or_refused_with_a_message_and_every_row_is_counted(rows: list[list[str]]) -> None:
    text = bill_text(rows)
    try:
        bill = read_bill(text)
    except ValueError as e:
        assert str(e) and "\n" not in str(e)
        return
    rec = reconcile(bill, report())
    assert sum(rec.counts.values()) == len(list(csv.reader(io.StringIO(text, newline="")))) - 1
    assert to_text(rec).endswith("\n")


def test_without_the_provider_id_the_instance_rows_are_an_unknown_resource_not_a_node() -> None:
    rec = reconcile(read_bill(planted()), report())
    assert rec.counts["unknown resource"] == 5
    assert "arn:aws:ec2:us-east-1:123456789012:instance/i-0abc123: 3 rows" in to_text(rec)
