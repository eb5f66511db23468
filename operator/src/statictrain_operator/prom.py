"""Prometheus' HTTP API (instant and range queries) through prometheus-api-client, bounded; injectable.

:class:`HttpPrometheus` is the one reader of Prometheus, for the CLI and the
operator alike. Its requests are built and sent by prometheus-api-client's
``PrometheusConnect`` (the design card's client), handed a requests session of
ours (:class:`BoundedSession`) that holds every answer to the limits the client
has none for:

- time: ``timeout_s`` bounds each request whole (connect, TLS handshake,
  headers, body), not each socket read: at the deadline a watchdog shuts the
  request's socket down, so a server that trickles a byte a second ends then;
- size: at most :data:`MAX_RESPONSE_BYTES` of body, counted after
  decompression (a gzip bomb stops there too);
- no redirects (the URL to give is named), no retries, no cookies, one
  connection per request;
- an answer other than 200 with ``application/json`` is an error that quotes
  Prometheus' own message (first 300 characters, credentials redacted);
- ``data.result`` must have the shape of a vector, matrix or scalar; samples
  with a non-finite time or value are dropped.

Queries arrive already built by :func:`statictrain.promql.selector`. Errors
come out as :class:`PrometheusUnavailableError` (cannot reach it, or no
complete answer in time) or :class:`PrometheusQueryError` (it answered, with an
error or with something that is not a query result), with the URL and what to
check; a URL that is not http(s) with a host is a ValueError.
"""

from __future__ import annotations

import contextlib
import http.cookiejar
import json
import math
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import urlsplit

import requests
import urllib3
from prometheus_api_client.prometheus_connect import PrometheusConnect
from requests.adapters import HTTPAdapter
from statictrain.cost import Sample
from statictrain.redact import redact, safe_url

__all__ = [
    "MAX_RESPONSE_BYTES",
    "BoundedSession",
    "HttpPrometheus",
    "PromReader",
    "PrometheusQueryError",
    "PrometheusUnavailableError",
    "Series",
    "check_url",
    "parse_result",
]

MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""Largest answer read (after decompression); a report over 1,000 jobs gets ~1 MB per query."""
_DETAIL_CHARS = 300
_CHUNK = 64 * 1024


class PrometheusUnavailableError(RuntimeError):
    """Prometheus cannot be reached, or sent no complete answer in time."""


class PrometheusQueryError(RuntimeError):
    """Prometheus rejected a query, or answered with something that is not a query result."""


@dataclass(frozen=True)
class Series:
    labels: Mapping[str, str]
    samples: tuple[Sample, ...]


class PromReader(Protocol):
    def query(self, query: str, at: float) -> list[Series]: ...

    def query_range(self, query: str, start: float, end: float, step: float) -> list[Series]: ...


# ---------------------------------------------------------------------------------------------- the answer


def _is_point(p: object) -> bool:
    return (
        isinstance(p, list)
        and len(p) == 2
        and isinstance(p[0], int | float)
        and not isinstance(p[0], bool)
        and isinstance(p[1], str)
    )


def _samples(points: list[Any], where: str) -> tuple[Sample, ...]:
    out = []
    for t, v in points:
        try:
            value = float(v)
        except ValueError:
            raise PrometheusQueryError(f"{where}: sample value {v[:40]!r} is not a number") from None
        try:
            when = float(t)
        except OverflowError:  # an integer beyond any float
            continue
        if math.isfinite(when) and math.isfinite(value):
            out.append(Sample(when, value))
    return tuple(out)


def _labels(metric: object) -> dict[str, str] | None:
    if not isinstance(metric, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in metric.items()):
        return None
    return metric


def parse_result(result: object, where: str = "Prometheus") -> list[Series]:
    """``data.result`` of a query answer (vector, matrix or scalar) as Series; any other shape is a
    PrometheusQueryError. Samples with a non-finite time or value are dropped (NaN is Prometheus' staleness
    marker; an Inf would poison every sum)."""
    if _is_point(result):  # a scalar: [time, "value"]
        return [Series({}, _samples([result], where))]
    if not isinstance(result, list):
        raise PrometheusQueryError(f"{where}: data.result is a {type(result).__name__}, not a list of series")
    out = []
    for i, r in enumerate(result):
        labels = _labels(r.get("metric")) if isinstance(r, dict) else None
        points = (r.get("values") if "values" in r else [r.get("value")]) if isinstance(r, dict) else None
        if labels is None or not isinstance(points, list) or not all(_is_point(p) for p in points):
            raise PrometheusQueryError(
                f"{where}: series {i} of data.result is not {{metric: {{label: string}}, value(s): [time, string]}}"
            )
        out.append(Series(labels, _samples(points, where)))
    return out


# ---------------------------------------------------------------------------------------------- the session


class _Deadline:
    """Shuts down the sockets of one request when its time is up (a blocked read then returns at once)."""

    def __init__(self, seconds: float) -> None:
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self.expired = False
        self._done = False
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, sock: socket.socket) -> None:
        # a duplicate descriptor: TLS wrapping detaches the original, and the duplicate is ours to close,
        # so the descriptor shut down is never one that was closed and reused meanwhile
        dup = sock.dup()
        with self._lock:
            self._socks.append(dup)
            if self.expired:
                _shut(dup)

    def _expire(self) -> None:
        with self._lock:
            if not self._done:
                self.expired = True
                for s in self._socks:
                    _shut(s)

    def finish(self) -> None:
        self._timer.cancel()
        with self._lock:
            self._done = True
            for s in self._socks:
                s.close()


def _reason(e: OSError) -> str:
    """What went wrong, without the request's URL (it holds the query): requests wraps urllib3's error, whose
    text starts with the connection's repr, in its own."""
    inner: object = e.args[0] if e.args and isinstance(e.args[0], Exception) else e
    inner = getattr(inner, "reason", None) or inner
    return redact(str(inner).split("): ", 1)[-1][:_DETAIL_CHARS])


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


_CURRENT = threading.local()
"""The deadline of the request this thread is sending (connections are made in the sending thread)."""


def _watched(sock: socket.socket) -> socket.socket:
    deadline: _Deadline | None = getattr(_CURRENT, "deadline", None)
    if deadline is not None:
        deadline.watch(sock)
    return sock


class _HTTPConnection(urllib3.connection.HTTPConnection):
    def _new_conn(self) -> socket.socket:
        return _watched(super()._new_conn())


class _HTTPSConnection(urllib3.connection.HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        return _watched(super()._new_conn())  # before the TLS handshake: a trickled handshake is bounded too


class _HTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


_POOLS: dict[str, type[urllib3.HTTPConnectionPool]] = {"http": _HTTPPool, "https": _HTTPSPool}


class _Adapter(HTTPAdapter):
    """requests' adapter, no retries, whose connections (direct or through an HTTP proxy) are watched."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _POOLS

    def proxy_manager_for(self, proxy: str, **kwargs: Any) -> urllib3.PoolManager:
        manager: urllib3.PoolManager = super().proxy_manager_for(proxy, **kwargs)
        if isinstance(manager, urllib3.ProxyManager):
            manager.pool_classes_by_scheme = _POOLS
        return manager


class BoundedSession(requests.Session):
    """A requests session whose every request is bounded in time and size and checked (module docstring)."""

    def __init__(self, base_url: str, timeout_s: float, max_bytes: int = MAX_RESPONSE_BYTES) -> None:
        super().__init__()
        self.where = safe_url(base_url)
        self.timeout_s, self.max_bytes = timeout_s, max_bytes
        self.headers["Connection"] = "close"
        self.cookies.set_policy(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
        self._adapter = _Adapter(max_retries=0)

    def get_adapter(self, url: str) -> HTTPAdapter:
        return self._adapter  # the one adapter, whatever the client mounted

    def resolve_redirects(self, *args: Any, **kwargs: Any) -> Iterator[Any]:  # type: ignore[override]
        """None: a redirect is an error (``_body``). requests would first read the redirect's body whole, with
        no bound, and fail with a RuntimeError on one that does not decode."""
        return iter(())

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        kwargs.update(stream=True, allow_redirects=False, timeout=(self.timeout_s, self.timeout_s))
        deadline = _Deadline(self.timeout_s)
        _CURRENT.deadline = deadline
        try:
            resp = super().send(request, **kwargs)
            with resp:
                resp._content = self._body(resp)
            return resp
        except requests.exceptions.ContentDecodingError:
            raise PrometheusQueryError(
                f"Prometheus at {self.where} sent a body that does not decode as its Content-Encoding says"
            ) from None
        except OSError as e:  # requests' errors are OSErrors too
            if deadline.expired or isinstance(e, requests.exceptions.Timeout):  # the socket's timeout: the same
                raise PrometheusUnavailableError(
                    f"Prometheus at {self.where} sent no complete answer within {self.timeout_s:g} s "
                    "(the timeout bounds each request whole); check that it is not overloaded, or raise --timeout"
                ) from None
            raise PrometheusUnavailableError(
                f"cannot reach Prometheus at {self.where} ({_reason(e)}); check the URL "
                "(--prometheus-url or STATICTRAIN_PROMETHEUS_URL) and that Prometheus is running"
            ) from None
        finally:
            _CURRENT.deadline = None
            deadline.finish()

    def _read(self, resp: requests.Response, limit: int) -> bytes:
        chunks: list[bytes] = []
        size = 0
        for chunk in resp.iter_content(_CHUNK):
            size += len(chunk)
            if size > limit:
                raise PrometheusQueryError(
                    f"Prometheus at {self.where} answered with more than {limit // (1024 * 1024)} MiB; narrow the "
                    "query: fewer jobs (filters), a shorter window or fewer buckets"
                )
            chunks.append(chunk)
        return b"".join(chunks)

    def _body(self, resp: requests.Response) -> bytes:
        ctype = resp.headers.get("Content-Type", "")
        is_json = ctype.split(";")[0].strip().lower() == "application/json"
        if resp.is_redirect:
            to = safe_url(resp.headers.get("Location", "")[:_DETAIL_CHARS])
            raise PrometheusQueryError(
                f"Prometheus at {self.where} redirects ({resp.status_code}) to {to!r}; give the URL it redirects "
                "to as --prometheus-url"
            )
        if resp.status_code != 200:
            detail = ""
            if is_json:
                with contextlib.suppress(ValueError, RecursionError, AttributeError, PrometheusQueryError):
                    detail = str(json.loads(self._read(resp, 64 * 1024)).get("error", ""))
            raise PrometheusQueryError(
                f"Prometheus at {self.where} rejected the query ({resp.status_code}): "
                + (redact(detail[:_DETAIL_CHARS]) if detail else f"an answer of type {ctype[:60]!r}, not its API's")
            )
        if not is_json:
            raise PrometheusQueryError(
                f"Prometheus at {self.where} answered with {ctype[:60] or 'no Content-Type'!r}, not JSON: is the URL "
                "the Prometheus API itself (not a login page or a proxy)?"
            )
        return self._read(resp, self.max_bytes)


# ---------------------------------------------------------------------------------------------- the reader


def check_url(url: str) -> str:
    """``url`` when it is http(s) with a host (and a numeric port, if any); else a ValueError saying so."""
    try:
        parts = urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"Prometheus URL {safe_url(url)!r}: give http(s)://host[:port], e.g. http://127.0.0.1:9090")
    return url


_EPOCH = datetime.fromtimestamp(0, UTC)


class HttpPrometheus:
    """The real Prometheus (module docstring); safe to share between threads."""

    def __init__(self, base_url: str, timeout_s: float = 30.0, max_bytes: int = MAX_RESPONSE_BYTES) -> None:
        check_url(base_url)
        self.base_url, self.timeout_s = base_url, timeout_s
        self._session = BoundedSession(base_url, timeout_s, max_bytes)
        # no timeout here: the session bounds each request whole, whatever the client asks for
        self._client = PrometheusConnect(url=base_url.rstrip("/"), session=self._session, method="POST")

    def _result(self, call: Callable[[], object]) -> list[Series]:
        where = f"Prometheus at {self._session.where}"
        try:
            result = call()
        except (ValueError, KeyError, TypeError, RecursionError):  # the client's response.json()["data"]["result"]
            raise PrometheusQueryError(
                f"{where} answered with JSON that is not a query result (no data.result); is the URL Prometheus?"
            ) from None
        return parse_result(result, where)

    def query(self, query: str, at: float) -> list[Series]:
        return self._result(lambda: self._client.custom_query(query, params={"time": f"{at:.3f}"}))

    def query_range(self, query: str, start: float, end: float, step: float) -> list[Series]:
        # the client rounds start_time/end_time to whole seconds; the report's points lie on a millisecond
        # grid (report.fetch), so the exact times go in params, which the client lets override its own
        exact = {"start": f"{start:.3f}", "end": f"{end:.3f}"}
        return self._result(
            lambda: self._client.custom_query_range(
                query, start_time=_EPOCH, end_time=_EPOCH, step=f"{step:.3f}", params=exact
            )
        )
