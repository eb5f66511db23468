"""A small Prometheus HTTP API reader (instant and range queries), injectable and cached by nobody.

Queries arrive already built by :func:`statictrain.promql.selector`. Errors
come out as :class:`PrometheusUnavailableError` (cannot reach it) or
:class:`PrometheusQueryError` (it answered with an error), with the URL and
what to check.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from statictrain.cost import Sample
from statictrain.redact import redact, safe_url

__all__ = [
    "HttpPrometheus",
    "PromReader",
    "PrometheusQueryError",
    "PrometheusUnavailableError",
    "Series",
    "parse_result",
]


class PrometheusUnavailableError(RuntimeError):
    """Prometheus cannot be reached."""


class PrometheusQueryError(RuntimeError):
    """Prometheus rejected a query."""


@dataclass(frozen=True)
class Series:
    labels: Mapping[str, str]
    samples: tuple[Sample, ...]


class PromReader(Protocol):
    def query(self, query: str, at: float) -> list[Series]: ...

    def query_range(self, query: str, start: float, end: float, step: float) -> list[Series]: ...


def _samples(values: Any) -> tuple[Sample, ...]:
    pts = [Sample(float(t), float(v)) for t, v in values]
    return tuple(p for p in pts if math.isfinite(p.v))


def parse_result(data: Mapping[str, Any]) -> list[Series]:
    """Turn a Prometheus ``data`` object (vector or matrix) into Series; NaN/Inf samples are dropped."""
    rtype = data.get("resultType")
    result = data.get("result") or []
    if rtype == "vector":
        return [Series(dict(r["metric"]), _samples([r["value"]])) for r in result]
    if rtype == "matrix":
        return [Series(dict(r["metric"]), _samples(r["values"])) for r in result]
    if rtype == "scalar":
        return [Series({}, _samples([result]))]
    raise PrometheusQueryError(f"unexpected result type {rtype!r}")


@dataclass(frozen=True)
class HttpPrometheus:
    base_url: str
    timeout_s: float = 30.0

    def _get(self, path: str, params: Mapping[str, str]) -> list[Series]:
        url = f"{self.base_url.rstrip('/')}{path}"
        body = urllib.parse.urlencode(params).encode()
        req = urllib.request.Request(
            url, data=body, method="POST", headers={"Content-Type": "application/x-www-form-urlencoded"}
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                payload = json.load(resp)
        except urllib.error.HTTPError as e:
            try:
                detail = json.load(e).get("error", "")
            except (ValueError, AttributeError):
                detail = ""
            raise PrometheusQueryError(
                f"Prometheus at {safe_url(self.base_url)} rejected the query ({e.code}): {redact(str(detail))}"
            ) from None
        except (urllib.error.URLError, OSError, TimeoutError) as e:
            reason = getattr(e, "reason", e)
            raise PrometheusUnavailableError(
                f"cannot reach Prometheus at {safe_url(self.base_url)} ({redact(str(reason))}); check the URL "
                "(--prometheus-url or "
                "STATICTRAIN_PROMETHEUS_URL) "
                "and that Prometheus is running"
            ) from None
        if payload.get("status") != "success":
            raise PrometheusQueryError(
                f"Prometheus at {safe_url(self.base_url)}: {redact(str(payload.get('error', payload)))}"
            )
        return parse_result(payload["data"])

    def query(self, query: str, at: float) -> list[Series]:
        return self._get("/api/v1/query", {"query": query, "time": f"{at:.3f}"})

    def query_range(self, query: str, start: float, end: float, step: float) -> list[Series]:
        return self._get(
            "/api/v1/query_range",
            {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:.3f}"},
        )
