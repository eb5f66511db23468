"""Moved to statictrain_operator.prom (shared by the progress, cost and anomaly parts); kept for old imports."""

from statictrain_operator.prom import (
    HttpPrometheus,
    PrometheusQueryError,
    PrometheusUnavailableError,
    PromReader,
    Series,
    parse_result,
)

__all__ = [
    "HttpPrometheus",
    "PromReader",
    "PrometheusQueryError",
    "PrometheusUnavailableError",
    "Series",
    "parse_result",
]
