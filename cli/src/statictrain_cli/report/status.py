"""Reports from StaticTrainingJob statuses (pure): lifetime cost per job, commit, team or namespace.

Where the Prometheus report covers a window, this one sums what each job's
``status.cost`` holds now (its whole life so far), so it works without
Prometheus and includes jobs whose metrics have aged out. Tokens and steps
are recovered from ``usd`` / ``usdPer1MTokens`` and ``usd`` / ``usdPerStep``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from statictrain import labels
from statictrain_cli.report.model import (
    GROUP_LABELS,
    JOB_METRICS,
    EmptyWindowError,
    GroupBy,
    Report,
    ReportWindow,
    Row,
    parse_utc,
)

__all__ = ["matches", "status_report"]


def _f(value: object) -> float:
    try:
        d = Decimal(str(value)) if value not in (None, "") else Decimal(0)
    except InvalidOperation:
        return 0.0
    return float(d) if d.is_finite() and d >= 0 else 0.0


def _mapping(value: object) -> Mapping[str, Any]:
    """``value`` if it is an object, else empty: a status or label set of another shape holds nothing."""
    return value if isinstance(value, Mapping) else {}


def _text(value: object) -> str:
    """A name or label value as text a terminal shows as it is: other types are empty, control characters '?'."""
    return "".join(c if c.isprintable() else "?" for c in value) if isinstance(value, str) else ""


def _labels(job: Mapping[str, Any]) -> dict[str, str]:
    lab = _mapping(_mapping(job.get("metadata")).get("labels"))
    return {_text(k): _text(v) for k, v in lab.items() if isinstance(k, str) and isinstance(v, str)}


def _identity(job: Mapping[str, Any]) -> dict[str, str]:
    meta, lab = _mapping(job.get("metadata")), _labels(job)
    return {
        "namespace": _text(meta.get("namespace")),
        "job_name": _text(meta.get("name")),
        "commit": lab.get(labels.COMMIT, ""),
        "team": lab.get(labels.TEAM, ""),
    }


def _created(job: Mapping[str, Any]) -> datetime | None:
    try:
        return parse_utc(_text(_mapping(job.get("metadata")).get("creationTimestamp")))
    except (ValueError, OverflowError):  # missing or not a time: the window starts at the other jobs
        return None


def matches(job: Mapping[str, Any], filters: Mapping[str, Sequence[str]]) -> bool:
    ident = _identity(job)
    names = {"namespace": "namespace", "team": "team", "commit": "commit", "job": "job_name"}
    return all(not values or ident[names[k]] in values for k, values in filters.items())


def status_report(
    jobs: Iterable[Mapping[str, Any]],
    group_by: GroupBy,
    now: datetime,
    filters: Mapping[str, Sequence[str]] | None = None,
) -> Report:
    """Lifetime cost from status.cost, over [earliest job creation, now)."""
    filters = filters or {}
    rows: dict[tuple[str, ...], Row] = {}
    per_job: dict[tuple[str, str], Row] = {}
    job_labels: dict[tuple[str, str], dict[str, str]] = {}
    starts: list[datetime] = []
    for job in jobs:
        if not isinstance(job, Mapping) or not matches(job, filters):
            continue
        cost = _mapping(_mapping(job.get("status")).get("cost"))
        created = _created(job)
        if created is not None:
            starts.append(created)
        ident = _identity(job)
        key = tuple(ident[k] for k in GROUP_LABELS[group_by])
        jk = (ident["namespace"], ident["job_name"])
        job_labels[jk] = {"commit": ident["commit"], "team": ident["team"], **_labels(job)}
        for row in (rows.setdefault(key, Row(key)), per_job.setdefault(jk, Row(jk))):
            _add_status(row, cost)
    if not rows:
        raise EmptyWindowError("no StaticTrainingJob matches; check the filters and the kubeconfig's cluster")
    start = min(starts, default=now)
    window = ReportWindow(min(start, now - timedelta(seconds=1)), now, buckets=1)
    ordered = sorted(rows.values(), key=lambda r: (-round(r.usd, 9), r.key))
    return Report(
        window=window,
        group_by=group_by,
        filters=dict(filters),
        rows=ordered,
        node_usd=0.0,
        node_idle_usd=0.0,
        job_fields={k: {f: [getattr(r, f)] for f in JOB_METRICS} for k, r in sorted(per_job.items())},
        job_labels=dict(sorted(job_labels.items())),
    )


def _add_status(row: Row, cost: Mapping[str, Any]) -> None:
    """Add one job's status.cost to ``row``."""
    usd = _f(cost.get("usd"))
    row.usd += usd
    row.idle_usd += _f(cost.get("idleUSD"))
    row.compile_usd += _f(cost.get("compileUSD"))
    row.lost_usd += _f(cost.get("lostWorkUSD"))
    row.gpu_seconds += _f(cost.get("gpuHours")) * 3600
    row.gpu_usd += _f(cost.get("gpuUSD"))
    row.cpu_usd += _f(cost.get("cpuUSD"))
    row.memory_usd += _f(cost.get("memoryUSD"))
    row.lost_steps += _f(cost.get("lostSteps"))
    row.gpu_energy_j += _f(cost.get("gpuEnergyKWh")) * 3.6e6
    row.carbon_g += _f(cost.get("carbonKgCO2e")) * 1000
    per_1m, per_step = _f(cost.get("usdPer1MTokens")), _f(cost.get("usdPerStep"))
    row.tokens += _f(cost["tokens"]) if _f(cost.get("tokens")) else (usd / per_1m * 1e6 if per_1m > 0 else 0.0)
    useful = _f(cost["steps"]) if _f(cost.get("steps")) else (usd / per_step if per_step > 0 else 0.0)
    row.executed_steps += useful + _f(cost.get("lostSteps"))
