"""The HTTP(S) server: /scheduler/filter, /scheduler/prioritize, /healthz, /metrics.

Handlers parse with orjson, call the pure functions in :mod:`.decisions` on the
cached :class:`~statictrain_extender.state.ClusterState`, and answer; nothing
here waits on the API server or Prometheus.

Hostile input: a body is at most MAX_BODY_BYTES (parsing is then bounded: a few
milliseconds on the event loop) and must arrive within BODY_TIMEOUT_S; anything
that cannot be judged, down to a wrongly typed nested field, is answered with a
valid ExtenderFilterResult or an ``{"Error": ...}`` object, never HTTP 500.

Mutual TLS: a client certificate, when shown, is verified in the handshake; every path but
OPEN_PATHS then answers 403 to a client that showed none. So the kubelet and the operator's
probe read /healthz with the CA alone, and only holders of a client certificate (the scheduler)
reach the scheduling endpoints and /metrics.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator

import orjson
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from statictrain import metrics

from .decisions import BadRequestError, filter_result, prioritize_result
from .scoring import Weights
from .speeds import class_label
from .state import ClusterState

__all__ = ["BODY_TIMEOUT_S", "MAX_BODY_BYTES", "OPEN_PATHS", "ExtenderMetrics", "build_app"]

JSON = "application/json"
MAX_BODY_BYTES = 4 * 1024 * 1024
"""Largest request body; a 5,000-node ExtenderArgs with node names only is about 100 KB."""
BODY_TIMEOUT_S = 10.0
"""Seconds a request body may take to arrive (kube-scheduler's own httpTimeout defaults to 5 s)."""

_log = logging.getLogger(__name__)


class _RefusedError(Exception):
    """A body that was never read whole: the status and what to tell the caller."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _filter_error(message: str) -> dict[str, object]:
    return {"NodeNames": None, "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": message}


async def _read_body(request: web.Request, timeout_s: float) -> bytes:
    try:
        return await asyncio.wait_for(request.read(), timeout_s)
    except web.HTTPRequestEntityTooLarge:
        raise _RefusedError(413, f"body over {MAX_BODY_BYTES} bytes: send NodeNames (nodeCacheCapable)") from None
    except TimeoutError:
        raise _RefusedError(408, f"body not received within {timeout_s:.0f} s") from None


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
        rejected = CounterMetricFamily(
            metrics.EXTENDER_STEP_SAMPLES_REJECTED_TOTAL.removesuffix("_total"),
            "Step-time samples never learned from, by reason (outlier: far off its class's figure).",
            labels=["reason"],
        )
        for reason, count in sorted(speeds.rejected.items()):
            rejected.add_metric([reason], count)
        yield from (learned, table, samples, rejected)


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
    client_certificate_required: bool = False,
) -> web.Application:
    """The aiohttp application; background tasks are attached by the caller (see main.py). With
    ``client_certificate_required`` (mutual TLS), only OPEN_PATHS answer a client without a certificate."""
    stats = ExtenderMetrics(registry, state)

    def timed(verb: str, handler: Callable[[bytes], web.Response]) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def run(request: web.Request) -> web.Response:
            start = clock()
            try:
                body = await _read_body(request, body_timeout_s)
            except _RefusedError as err:
                out = _filter_error(str(err)) if verb == "filter" else {"Error": str(err)}
                resp = web.Response(status=err.status, body=orjson.dumps(out), content_type=JSON)
                resp.force_close()
            else:
                try:
                    resp = handler(body)
                except Exception as err:  # a shape decisions did not foresee: still a valid answer
                    _log.warning("%s: malformed ExtenderArgs (%s: %s)", verb, type(err).__name__, err)
                    message = f"malformed ExtenderArgs ({type(err).__name__}): {err}"[:500]
                    if verb == "filter":
                        resp = web.Response(body=orjson.dumps(_filter_error(message)), content_type=JSON)
                    else:
                        resp = web.Response(status=400, body=orjson.dumps({"Error": message}), content_type=JSON)
            stats.seconds.labels(verb).observe(clock() - start)
            stats.requests.labels(verb, "ok" if resp.status == 200 else "error").inc()
            return resp

        return run

    def decode(body: bytes) -> object:
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as err:
            raise BadRequestError(f"body is not JSON: {err}") from None

    def do_filter(body: bytes) -> web.Response:
        try:
            args = decode(body)
        except BadRequestError as err:
            return web.Response(body=orjson.dumps(_filter_error(str(err))), content_type=JSON)
        out = filter_result(state, args, scheduler_names)
        return web.Response(body=orjson.dumps(out), content_type=JSON)

    def do_prioritize(body: bytes) -> web.Response:
        try:
            out = prioritize_result(state, decode(body), scheduler_names, weights)
        except BadRequestError as err:
            return web.Response(status=400, body=orjson.dumps({"Error": str(err)}), content_type=JSON)
        return web.Response(body=orjson.dumps(out), content_type=JSON)

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

    middlewares = [_require_client_certificate] if client_certificate_required else []
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=middlewares)
    app.router.add_post("/scheduler/filter", timed("filter", do_filter))
    app.router.add_post("/scheduler/prioritize", timed("prioritize", do_prioritize))
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics_page)
    return app
