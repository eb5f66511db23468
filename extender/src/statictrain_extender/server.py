"""The HTTP(S) server: /scheduler/filter, /scheduler/prioritize, /healthz, /metrics.

Handlers parse with orjson, call the pure functions in :mod:`.decisions` on the
cached :class:`~statictrain_extender.state.ClusterState`, and answer; nothing
here waits on the API server or Prometheus.

Hostile input: a request head must be whole within HEADER_TIMEOUT_S and its body
within BODY_TIMEOUT_S; a body is at most MAX_BODY_BYTES and MAX_JSON_VALUES, never
content-encoded. Bodies over INLINE_BODY_BYTES are parsed, scored and serialized in
one worker thread, LARGE_BODIES at a time, so that no request holds the event loop
for long (the state is read on the loop only; see decisions.py). Anything that
cannot be judged, down to a wrongly typed nested field, is answered with a valid
ExtenderFilterResult or an ``{"Error": ...}`` object, never HTTP 500.

Mutual TLS: a client certificate, when shown, is verified in the handshake; every path but
OPEN_PATHS then answers 403 to a client that showed none. So the kubelet and the operator's
probe read /healthz with the CA alone, and only holders of a client certificate (the scheduler)
reach the scheduling endpoints and /metrics.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import orjson
from aiohttp import hdrs, web
from aiohttp.web_protocol import RequestPayloadError
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from statictrain import metrics

from .decisions import (
    Args,
    BadRequestError,
    Estimate,
    Reads,
    filter_answer,
    filter_error,
    parse,
    prioritize_answer,
    reads,
    record,
)
from .nodes import NodeInfo
from .scoring import Weights
from .speeds import class_label
from .state import ClusterState

__all__ = [
    "BODY_TIMEOUT_S",
    "HEADER_TIMEOUT_S",
    "INLINE_BODY_BYTES",
    "LARGE_BODIES",
    "MAX_BODY_BYTES",
    "MAX_JSON_VALUES",
    "OPEN_PATHS",
    "ExtenderMetrics",
    "build_app",
]

JSON = "application/json"
MAX_BODY_BYTES = 4 * 1024 * 1024
"""Largest request body; a 5,000-node ExtenderArgs with node names only is about 100 KB."""
MAX_JSON_VALUES = 100_000
"""Most JSON values (counted as the body's ``, : [ {`` bytes) in one body: parsing holds the event loop's
interpreter lock throughout, about 0.3 us per value at worst (nested empty arrays), so 30 ms at most."""
INLINE_BODY_BYTES = 128 * 1024
"""Bodies up to this size are answered on the event loop (a few ms); larger ones in the worker thread."""
LARGE_BODIES = 2
"""Larger bodies read and answered at once (their memory: a few times MAX_BODY_BYTES each); others wait."""
BODY_TIMEOUT_S = 10.0
"""Seconds a request body may take to arrive (kube-scheduler's own httpTimeout defaults to 5 s), and
seconds a large one may wait for its turn."""
HEADER_TIMEOUT_S = 30.0
"""Seconds a connection may take to send a whole request head, from its start or from the last answer;
also how long an idle keep-alive connection stays open."""

_log = logging.getLogger(__name__)
_T = TypeVar("_T")


class _RefusedError(Exception):
    """A body that was never read whole or not parsed: the status and what to tell the caller."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def _read_body(request: web.Request, timeout_s: float) -> bytes:
    encoding = request.headers.get(hdrs.CONTENT_ENCODING, "identity").strip().lower()
    if encoding != "identity":
        raise _RefusedError(415, f"Content-Encoding {encoding[:40]!r} is not accepted: send the body uncompressed")
    try:
        return await asyncio.wait_for(request.read(), timeout_s)
    except web.HTTPRequestEntityTooLarge:
        raise _RefusedError(413, f"body over {MAX_BODY_BYTES} bytes: send NodeNames (nodeCacheCapable)") from None
    except TimeoutError:
        raise _RefusedError(408, f"body not received within {timeout_s:.0f} s") from None
    except (RequestPayloadError, ConnectionResetError) as err:
        raise _RefusedError(400, f"body could not be read: {err}") from None


def _decode(body: bytes) -> object:
    values = body.count(b",") + body.count(b":") + body.count(b"[") + body.count(b"{")
    if values > MAX_JSON_VALUES:
        raise _RefusedError(413, f"body has more than {MAX_JSON_VALUES} JSON values: send NodeNames (nodeCacheCapable)")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as err:
        raise BadRequestError(f"body is not JSON: {err}") from None


class _OneLineLogger(logging.LoggerAdapter[logging.Logger]):
    """aiohttp's server logger, with each exception it logs (a malformed request line or header,
    a client gone) as one line instead of a traceback, and at warning level instead of error."""

    def log(self, level: int, msg: object, *args: object, exc_info: object = None, **kwargs: Any) -> None:
        error = exc_info if isinstance(exc_info, BaseException) else sys.exc_info()[1] if exc_info else None
        if error is not None:
            msg, args = f"{msg}: %s", (*args, " ".join(f"{type(error).__name__}: {error}".split())[:300])
        self.logger.log(level, msg, *args, **kwargs)

    def exception(self, msg: object, *args: object, exc_info: object = True, **kwargs: Any) -> None:
        self.log(logging.WARNING, msg, *args, exc_info=exc_info, **kwargs)


class _StateCollector(Collector):
    """Reads the cache size fresh at each scrape."""

    def __init__(self, state: ClusterState) -> None:
        self._state = state

    def collect(self):  # type: ignore[no-untyped-def]
        gauge = GaugeMetricFamily(metrics.EXTENDER_NODES_CACHED, "Nodes in the extender's watch cache.")
        gauge.add_metric([], len(self._state.nodes))
        yield gauge
        estimates = CounterMetricFamily(
            metrics.EXTENDER_THROUGHPUT_ESTIMATES_TOTAL.removesuffix("_total"),
            "GPU pods scored, by where the best node's throughput figure came from (measured, inferred, table).",
            labels=["source"],
        )
        for source, count in self._state.estimates.counts.items():
            estimates.add_metric([source], count)
        yield estimates
        yield from self._learned()

    def _learned(self) -> Iterator[Metric]:
        speeds = self._state.speeds
        names = ["workload_class", "gpu_family"]
        learned = GaugeMetricFamily(
            metrics.EXTENDER_LEARNED_THROUGHPUT,
            "Relative throughput (A100 = 1) learned from step times per workload class and GPU family.",
            labels=names,
        )
        table = GaugeMetricFamily(
            metrics.EXTENDER_TABLE_THROUGHPUT, "The throughput table's figure for the same series.", labels=names
        )
        samples = GaugeMetricFamily(
            metrics.EXTENDER_LEARNED_SAMPLES,
            "Step-time samples (refreshes that saw a job) behind the learned figure.",
            labels=names,
        )
        for fig in speeds.figures():
            labels = [class_label(fig.key), fig.family]
            learned.add_metric(labels, fig.estimate)
            if fig.table is not None:
                table.add_metric(labels, fig.table)
            samples.add_metric(labels, fig.samples)
        in_use = GaugeMetricFamily(
            metrics.EXTENDER_THROUGHPUT_SOURCE,
            "1 per learned workload class and GPU family: where the figure in use comes from "
            "(measured: its step times there; inferred: the table in the class's units; a class without "
            "a series here is scored by the table).",
            labels=[*names, "source"],
        )
        for key in sorted(speeds.stats):
            estimates = speeds.throughput(key)
            if estimates is not None:
                for family in sorted(estimates.relative):
                    in_use.add_metric([class_label(key), family, estimates.source(family)], 1.0)
        rejected = CounterMetricFamily(
            metrics.EXTENDER_STEP_SAMPLES_REJECTED_TOTAL.removesuffix("_total"),
            "Step-time samples never learned from, by reason (outlier: far off its class's figure; unlabelled: no job, "
            "namespace or GPU model; not_a_number; not_positive).",
            labels=["reason"],
        )
        for reason, count in sorted(speeds.rejected.items()):
            rejected.add_metric([reason], count)
        yield from (learned, table, samples, in_use, rejected)


class ExtenderMetrics:
    """Request counters and latency histograms, registered on an injected registry."""

    def __init__(self, registry: CollectorRegistry, state: ClusterState) -> None:
        self.registry = registry
        self.requests = Counter(
            metrics.EXTENDER_REQUESTS_TOTAL.removesuffix("_total"),
            "Extender calls by verb and outcome.",
            ["verb", "outcome"],
            registry=registry,
        )
        self.seconds = Histogram(
            metrics.EXTENDER_REQUEST_SECONDS,
            "Time to answer one extender call.",
            ["verb"],
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
            registry=registry,
        )
        registry.register(_StateCollector(state))


OPEN_PATHS = frozenset({"/healthz"})
"""Paths that answer without a client certificate under mutual TLS."""


@web.middleware
async def _require_client_certificate(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    transport = request.transport
    if request.path not in OPEN_PATHS and not (transport and transport.get_extra_info("peercert")):
        return web.Response(
            status=403,
            text=f"{request.path} needs a client certificate signed by the extender's client CA (mutual TLS); "
            f"only {', '.join(sorted(OPEN_PATHS))} answers without one\n",
        )
    return await handler(request)


def build_app(
    state: ClusterState,
    scheduler_names: frozenset[str],
    weights: Weights,
    registry: CollectorRegistry,
    clock: Callable[[], float] = time.perf_counter,
    *,
    body_timeout_s: float = BODY_TIMEOUT_S,
    header_timeout_s: float = HEADER_TIMEOUT_S,
    client_certificate_required: bool = False,
) -> web.Application:
    """The aiohttp application; background tasks are attached by the caller (see main.py). With
    ``client_certificate_required`` (mutual TLS), only OPEN_PATHS answer a client without a certificate."""
    stats = ExtenderMetrics(registry, state)
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="extender-large")
    large_slots = asyncio.Semaphore(LARGE_BODIES)

    def answer_filter(body: bytes, nodes: Mapping[str, NodeInfo]) -> web.Response:
        try:
            out = filter_answer(nodes, parse(_decode(body), scheduler_names))
        except BadRequestError as err:
            out = filter_error(str(err))
        return web.Response(body=orjson.dumps(out), content_type=JSON)

    def parse_prioritize(body: bytes) -> Args | web.Response:
        try:
            return parse(_decode(body), scheduler_names)
        except BadRequestError as err:
            return web.Response(status=400, body=orjson.dumps({"Error": str(err)}), content_type=JSON)

    def dumped(args: Args, got: Reads) -> tuple[bytes, Estimate | None]:
        answer, estimate = prioritize_answer(args, got, weights)
        return orjson.dumps(answer), estimate

    async def here(fn: Callable[..., _T], *args: Any) -> _T:
        return fn(*args)

    async def in_worker(fn: Callable[..., _T], *args: Any) -> _T:
        return await asyncio.get_running_loop().run_in_executor(worker, fn, *args)

    async def respond(verb: str, body: bytes, call: Callable[..., Awaitable[Any]]) -> web.Response:
        """The answer, the costly steps (parse, score, serialize) run by ``call`` (here or in the worker
        thread); the state is read and written here, on the loop, only (decisions.reads, decisions.record)."""
        if verb == "filter":
            resp: web.Response = await call(answer_filter, body, state.nodes)
            return resp
        args = await call(parse_prioritize, body)
        if isinstance(args, web.Response):
            return args
        out, estimate = await call(dumped, args, reads(state, args))
        record(state, estimate)
        return web.Response(body=out, content_type=JSON)

    async def answer(verb: str, request: web.Request) -> web.Response:
        length = request.content_length
        if length is not None and length <= INLINE_BODY_BYTES:
            return await respond(verb, await _read_body(request, body_timeout_s), here)
        try:
            await asyncio.wait_for(large_slots.acquire(), body_timeout_s)
        except TimeoutError:
            raise _RefusedError(503, f"{LARGE_BODIES} large requests in progress; retry") from None
        try:
            return await respond(verb, await _read_body(request, body_timeout_s), in_worker)
        finally:
            large_slots.release()

    def timed(verb: str) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def run(request: web.Request) -> web.Response:
            start = clock()
            try:
                resp = await answer(verb, request)
            except _RefusedError as err:
                out = filter_error(str(err)) if verb == "filter" else {"Error": str(err)}
                resp = web.Response(status=err.status, body=orjson.dumps(out), content_type=JSON)
                resp.force_close()
            except Exception as err:  # a shape decisions did not foresee: still a valid answer
                text = " ".join(str(err).split())[:300]  # one line, whatever the error's text holds
                _log.warning("%s: malformed ExtenderArgs (%s: %s)", verb, type(err).__name__, text)
                message = f"malformed ExtenderArgs ({type(err).__name__}): {text}"
                if verb == "filter":
                    resp = web.Response(body=orjson.dumps(filter_error(message)), content_type=JSON)
                else:
                    resp = web.Response(status=400, body=orjson.dumps({"Error": message}), content_type=JSON)
            stats.seconds.labels(verb).observe(clock() - start)
            stats.requests.labels(verb, "ok" if resp.status == 200 else "error").inc()
            return resp

        return run

    async def healthz(_: web.Request) -> web.Response:
        body = {
            "nodesSynced": state.nodes_synced,
            "podsSynced": state.pods_synced,
            "nodesCached": len(state.nodes),
            "prometheusOk": state.prometheus_ok,
        }
        return web.Response(status=200 if state.nodes_synced else 503, body=orjson.dumps(body), content_type=JSON)

    async def metrics_page(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(registry), content_type="text/plain", charset="utf-8")

    async def stop_worker(_: web.Application) -> None:
        worker.shutdown(wait=False, cancel_futures=True)

    middlewares = [_require_client_certificate] if client_certificate_required else []
    handler_args = {
        # aiohttp closes a connection whose request head is not complete this long after it opened or
        # after the last answer (slow clients), and idle keep-alive connections.
        "keepalive_timeout": header_timeout_s,
        "auto_decompress": False,  # never inflate a body on the loop; an encoded one is refused (415)
        "logger": _OneLineLogger(logging.getLogger("aiohttp.server")),
    }
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=middlewares, handler_args=handler_args)
    app.router.add_post("/scheduler/filter", timed("filter"))
    app.router.add_post("/scheduler/prioritize", timed("prioritize"))
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics_page)
    app.on_cleanup.append(stop_worker)
    return app
