"""Per-namespace cost-rate detection: one Event per episode, once per interval, fail closed on errors."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry
from statictrain.cost import Sample
from statictrain_operator.anomaly.exported import AnomalyMetrics
from statictrain_operator.anomaly.namespaces import NamespaceEvaluator
from statictrain_operator.anomaly.settings import AnomalySettings
from statictrain_operator.prom import PrometheusUnavailableError, Series

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class Prom:
    def __init__(self, values: list[float] | None) -> None:
        self.values = values
        self.queries: list[str] = []

    def query(self, query: str, at: float) -> list[Series]:
        return []

    def query_range(self, query: str, start: float, end: float, step: float) -> list[Series]:
        self.queries.append(query)
        if self.values is None:
            raise PrometheusUnavailableError("down")
        t0 = end - (len(self.values) - 1) * step
        return [Series({}, tuple(Sample(t0 + i * step, v) for i, v in enumerate(self.values)))]


class Events:
    def __init__(self) -> None:
        self.posted: list[tuple[str, str]] = []

    async def namespace_event(self, namespace: str, *, reason: str, message: str, now: datetime) -> None:
        self.posted.append((namespace, reason))


def make(values: list[float] | None, clock: list[datetime]) -> tuple[NamespaceEvaluator, Prom, Events]:
    prom, events = Prom(values), Events()
    s = AnomalySettings(prometheus_url="http://p", interval_s=60, lookback_s=3600, step_s=60, prophet_min_points=10_000)
    return NamespaceEvaluator(s, prom, events, AnomalyMetrics(CollectorRegistry()), lambda: clock[0]), prom, events


def test_cost_spike_posts_one_event_per_episode() -> None:
    clock = [NOW]
    ev, prom, events = make([10.0] * 40 + [40.0] * 5, clock)
    asyncio.run(ev.maybe_evaluate("team-a"))
    clock[0] = NOW + timedelta(minutes=2)
    asyncio.run(ev.maybe_evaluate("team-a"))
    assert events.posted == [("team-a", "NamespaceCostAnomaly")]
    assert 'namespace="team-a"' in prom.queries[0]


def test_once_per_interval_and_quiet_when_normal_or_down() -> None:
    clock = [NOW]
    ev, prom, events = make([10.0] * 45, clock)
    assert asyncio.run(ev.maybe_evaluate("b")) is not None
    assert asyncio.run(ev.maybe_evaluate("b")) is None  # same interval
    assert events.posted == [] and len(prom.queries) == 1
    down, _, down_events = make(None, clock)
    assert "Prometheus" in str(asyncio.run(down.evaluate("c"))) and down_events.posted == []
