"""Per-namespace detection: the summed cost rate of a namespace's jobs, judged like a job's series.

Findings are reported (an Event on the Namespace, the score metric), never acted
on: no single job owns a namespace's spending. An episode (consecutive anomalous
evaluations) is announced once per evaluator; after an operator restart an
ongoing episode is announced again, once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

from statictrain_operator.anomaly.detector import Assessment, Severity, assess
from statictrain_operator.anomaly.exported import AnomalyMetrics
from statictrain_operator.anomaly.queries import namespace_cost_query
from statictrain_operator.anomaly.settings import AnomalySettings
from statictrain_operator.prom import PrometheusQueryError, PrometheusUnavailableError, PromReader

__all__ = ["SERIES", "NamespaceEvaluator", "NamespaceEvents"]

SERIES = "namespace_cost_usd_per_hour"


class NamespaceEvents(Protocol):
    """Posting an Event about a Namespace."""

    async def namespace_event(self, namespace: str, *, reason: str, message: str, now: datetime) -> None: ...


class NamespaceEvaluator:
    """Judges namespaces' cost rates; remembers which episodes it announced."""

    def __init__(
        self,
        settings: AnomalySettings,
        prom: PromReader,
        events: NamespaceEvents,
        metrics: AnomalyMetrics,
        clock: Callable[[], datetime],
    ) -> None:
        self.s, self.prom, self.events, self.metrics, self.clock = settings, prom, events, metrics, clock
        self._in_episode: set[str] = set()
        self._last_run: dict[str, datetime] = {}

    async def maybe_evaluate(self, namespace: str) -> Assessment | str | None:
        """Evaluate the namespace unless it was evaluated less than ``interval_s`` ago (then None).

        Called from every job's timer, so a namespace is judged once per interval however many jobs it has.
        """
        now = self.clock()
        last = self._last_run.get(namespace)
        if last is not None and (now - last).total_seconds() < self.s.interval_s:
            return None
        self._last_run[namespace] = now
        return await self.evaluate(namespace)

    async def evaluate(self, namespace: str) -> Assessment | str:
        """The assessment of the namespace's cost rate, or why there is none (an Event when an episode starts)."""
        now = self.clock()
        a = await asyncio.to_thread(self.judge, namespace, now)
        if isinstance(a, str):
            return a
        anomalous = a.severity in (Severity.WARNING, Severity.CRITICAL) and a.z > 0
        if anomalous and namespace not in self._in_episode:
            self.metrics.anomalies.labels("", namespace, SERIES, a.severity.value if a.severity else "").inc()
            await self.events.namespace_event(namespace, reason="NamespaceCostAnomaly", message=a.message, now=now)
        if anomalous:
            self._in_episode.add(namespace)
        else:
            self._in_episode.discard(namespace)
        return a

    def judge(self, namespace: str, now: datetime) -> Assessment | str:
        """The assessment of the namespace's cost rate at ``now`` (Prometheus read and fit, no writes)."""
        start, end = self.s.query_window(now.timestamp())
        try:
            query = namespace_cost_query(namespace, self.s.rate_window_s)
            res = self.prom.query_range(query, start, end, self.s.step_s)
        except (PrometheusUnavailableError, PrometheusQueryError) as exc:
            return f"Prometheus query failed: {exc}"
        samples = res[0].samples if res else ()
        if not samples:
            return f"no cost samples for namespace {namespace!r}"
        a = assess(
            SERIES, [datetime.fromtimestamp(p.t, tz=UTC) for p in samples], [p.v for p in samples], self.s.detector()
        )
        self.metrics.score.labels("", namespace, SERIES, a.method.value).set(a.score)
        return a
