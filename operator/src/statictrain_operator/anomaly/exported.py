"""The anomaly loop's own Prometheus metrics (names from statictrain.metrics)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge
from statictrain import metrics

__all__ = ["AnomalyMetrics"]


class AnomalyMetrics:
    """Score gauges and finding/action counters, registered in the given registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.score = Gauge(
            metrics.ANOMALY_SCORE,
            "Latest anomaly score (0..1) of a job's series",
            ["job_name", "namespace", "series", "method"],
            registry=registry,
        )
        self.anomalies = Counter(
            metrics.ANOMALIES_TOTAL,
            "Anomaly episodes found",
            ["job_name", "namespace", "series", "severity"],
            registry=registry,
        )
        self.remediations = Counter(
            metrics.REMEDIATIONS_TOTAL,
            "Remediation actions applied or recommended",
            ["job_name", "namespace", "action", "mode"],
            registry=registry,
        )
        self.ignored = Counter(
            metrics.IGNORED_SERIES_TOTAL,
            "Pods whose series claimed the job without being one of its worker pods (ignored; once per pod)",
            ["job_name", "namespace"],
            registry=registry,
        )
        self.dcgm_ignored = Counter(
            metrics.ANOMALY_DCGM_SERIES_IGNORED_TOTAL,
            "dcgm-exporter series naming a job's pods that could not be attributed (ignored; once per series)",
            ["job_name", "namespace", "reason"],
            registry=registry,
        )
