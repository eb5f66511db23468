"""The real aiohttp server on a local port, with a state filled by hand (no API server)."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import io
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry
from statictrain_extender.decisions import filter_result, prioritize_result
from statictrain_extender.policy import GPU_MODELS_ANNOTATION
from statictrain_extender.scoring import Weights
from statictrain_extender.server import MAX_BODY_BYTES, build_app
from statictrain_extender.state import ClusterState

from .builders import node_obj, pod_obj

NAMES = frozenset({"statictrain-scheduler"})


Body = Callable[[aiohttp.ClientSession, str], Awaitable[None]]


def serve(state: ClusterState, body: Body) -> CollectorRegistry:
    registry = CollectorRegistry()

    async def main() -> None:
        runner = web.AppRunner(build_app(state, NAMES, Weights(), registry))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        try:
            async with aiohttp.ClientSession() as session:
                await body(session, f"http://127.0.0.1:{port}")
        finally:
            await runner.cleanup()

    asyncio.run(main())
    return registry


def filled(n: int = 3) -> ClusterState:
    state = ClusterState()
    state.replace_nodes([node_obj(f"n{i}", hourly=str(10 + i)) for i in range(n)])
    return state


async def post(session: aiohttp.ClientSession, url: str, data: bytes) -> tuple[int, Any]:
    async with session.post(url, data=io.BytesIO(data), headers={"Content-Type": "application/json"}) as resp:
        return resp.status, orjson.loads(await resp.read())


def test_filter_and_prioritize_round_trip() -> None:
    seen: dict[str, Any] = {}

    async def body(session: aiohttp.ClientSession, base: str) -> None:
        args = orjson.dumps({"Pod": pod_obj(), "NodeNames": ["n0", "n1", "n2"]})
        seen["filter"] = await post(session, f"{base}/scheduler/filter", args)
        seen["prioritize"] = await post(session, f"{base}/scheduler/prioritize", args)

    registry = serve(filled(), body)
    status, result = seen["filter"]
    assert status == 200 and result["NodeNames"] == ["n0", "n1", "n2"] and result["Error"] == ""
    status, scores = seen["prioritize"]
    assert status == 200
    assert scores[:2] == [{"Host": "n0", "Score": 10}, {"Host": "n1", "Score": 9}]
    assert (
        registry.get_sample_value("statictrain_extender_requests_total", {"verb": "prioritize", "outcome": "ok"}) == 1.0
    )


def test_malformed_bodies_get_valid_answers() -> None:
    seen: dict[str, Any] = {}

    async def body(session: aiohttp.ClientSession, base: str) -> None:
        seen["filter"] = await post(session, f"{base}/scheduler/filter", b"{not json")
        seen["prioritize"] = await post(session, f"{base}/scheduler/prioritize", b"[1, 2]")
        seen["empty"] = await post(session, f"{base}/scheduler/filter", b"")

    registry = serve(filled(), body)
    status, result = seen["filter"]
    assert status == 200 and "not JSON" in result["Error"]
    status, result = seen["prioritize"]
    assert status == 400 and "ExtenderArgs" in result["Error"]
    assert seen["empty"][0] == 200 and seen["empty"][1]["Error"]
    assert (
        registry.get_sample_value("statictrain_extender_requests_total", {"verb": "prioritize", "outcome": "error"})
        == 1.0
    )


def test_5000_node_request() -> None:
    names = [f"n{i}" for i in range(5000)]
    seen: dict[str, Any] = {}

    async def body(session: aiohttp.ClientSession, base: str) -> None:
        args = orjson.dumps({"Pod": pod_obj(), "NodeNames": [*names, "ghost"]})
        seen["prioritize"] = await post(session, f"{base}/scheduler/prioritize", args)
        seen["filter"] = await post(session, f"{base}/scheduler/filter", args)

    serve(filled(5000), body)
    status, scores = seen["prioritize"]
    assert status == 200 and len(scores) == 5001
    assert scores[-1] == {"Host": "ghost", "Score": 0}
    assert len(seen["filter"][1]["NodeNames"]) == 5001


def test_healthz_and_metrics() -> None:
    seen: dict[str, Any] = {}
    state = ClusterState()

    async def body(session: aiohttp.ClientSession, base: str) -> None:
        async with session.get(f"{base}/healthz") as resp:
            seen["before"] = resp.status
        state.replace_nodes([node_obj("n0")])
        state.estimates.record("inferred", None)
        async with session.get(f"{base}/healthz") as resp:
            seen["after"] = (resp.status, orjson.loads(await resp.read()))
        async with session.get(f"{base}/metrics") as resp:
            seen["metrics"] = await resp.text()

    serve(state, body)
    assert seen["before"] == 503
    assert seen["after"] == (
        200,
        {"nodesSynced": True, "podsSynced": False, "nodesCached": 1, "prometheusOk": None},
    )
    assert "statictrain_extender_nodes_cached 1.0" in seen["metrics"]
    assert 'statictrain_extender_throughput_estimates_total{source="inferred"} 1.0' in seen["metrics"]


MALFORMED = [
    {"Pod": {"spec": [1]}, "NodeNames": ["n0"]},  # the reproduced HTTP 500
    {"Pod": {"spec": {"schedulerName": ["statictrain-scheduler"]}}, "NodeNames": ["n0"]},
    {"Pod": {"metadata": "x", "spec": {"schedulerName": "statictrain-scheduler"}}, "NodeNames": ["n0"]},
    {"Pod": {"metadata": {"labels": [1], "annotations": 7}, "spec": {}}, "NodeNames": ["n0"]},
    {"Pod": {"spec": {"schedulerName": "statictrain-scheduler", "containers": {"a": 1}}}, "NodeNames": ["n0"]},
    {"Pod": {"spec": {"schedulerName": "statictrain-scheduler", "containers": [None, 3, "x"]}}, "NodeNames": ["n0"]},
    {
        "Pod": {"spec": {"schedulerName": "statictrain-scheduler", "containers": [{"resources": [1]}]}},
        "NodeNames": ["n0"],
    },
    {
        "Pod": {
            "spec": {
                "schedulerName": "statictrain-scheduler",
                "containers": [{"resources": {"requests": {"nvidia.com/gpu": {"x": 1}}}}],
            }
        },
        "NodeNames": ["n0"],
    },
    {
        "Pod": {
            "spec": {
                "schedulerName": "statictrain-scheduler",
                "containers": [{"resources": {"requests": {"nvidia.com/gpu": "1e999999"}}}],
            }
        },
        "NodeNames": ["n0"],
    },
    {"Pod": {}, "Nodes": {"items": [{"metadata": [1]}, {"metadata": {"name": 5, "labels": "x"}}, 3]}},
    {"Pod": {}, "Nodes": {"items": [{"metadata": {"name": "a", "annotations": {"k": [1]}}, "status": 4}]}},
    {"Pod": {}, "NodeNames": [["nested"]]},
    {"Pod": [], "NodeNames": []},
    {"Pod": None},
    [[[[[]]]]],
    "just a string",
    12,
    None,
]


def test_malformed_nested_fields_get_valid_answers_never_500() -> None:
    """Every verb, every shape: HTTP 200/400 with a JSON answer the scheduler can read."""
    answers: list[tuple[str, int, Any]] = []
    pod = pod_obj()
    # every field of a real pod replaced by a wrong type, one at a time
    shapes: list[Any] = list(MALFORMED)
    for key in ("metadata", "spec"):
        for wrong in ([1], "x", 3, None, {"labels": [1]}):
            shapes.append({"Pod": {**pod, key: wrong}, "NodeNames": ["n0"]})
    for key in pod["spec"]:
        for wrong in ([1], "x", 3.5, {"a": [1]}):
            shapes.append({"Pod": {**pod, "spec": {**pod["spec"], key: wrong}}, "NodeNames": ["n0"]})

    async def body(session: aiohttp.ClientSession, base: str) -> None:
        for shape in shapes:
            for verb in ("filter", "prioritize"):
                status, out = await post(session, f"{base}/scheduler/{verb}", orjson.dumps(shape))
                answers.append((verb, status, out))

    serve(filled(), body)
    assert len(answers) == 2 * len(shapes)
    for verb, status, out in answers:
        if verb == "filter":
            assert status == 200 and set(out) == {"NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
        else:
            assert (status == 200 and isinstance(out, list)) or (status == 400 and out["Error"]), (status, out)
    errors = [out for verb, status, out in answers if verb == "filter" and out["Error"]]
    assert any("malformed" in e["Error"] or "ExtenderArgs" in e["Error"] for e in errors)


def test_a_body_over_the_limit_is_refused_with_an_error() -> None:
    seen: dict[str, Any] = {}
    big = orjson.dumps({"Pod": pod_obj(), "NodeNames": ["n" * 1000] * (MAX_BODY_BYTES // 1000)})
    assert len(big) > MAX_BODY_BYTES

    async def body(session: aiohttp.ClientSession, base: str) -> None:
        for verb in ("filter", "prioritize"):
            seen[verb] = await post(session, f"{base}/scheduler/{verb}", big)
        seen["after"] = await post(
            session, f"{base}/scheduler/filter", orjson.dumps({"Pod": pod_obj(), "NodeNames": ["n0"]})
        )

    serve(filled(), body)
    assert seen["filter"][0] == 413 and "NodeNames" in seen["filter"][1] and "bytes" in seen["filter"][1]["Error"]
    assert seen["prioritize"][0] == 413 and seen["prioritize"][1]["Error"]
    assert seen["after"] == (
        200,
        {"NodeNames": ["n0"], "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": ""},
    )


def test_a_body_that_never_arrives_is_answered_and_the_connection_closed() -> None:
    seen: dict[str, bytes] = {}

    async def main() -> None:
        app = build_app(filled(), NAMES, Weights(), CollectorRegistry(), body_timeout_s=0.2)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b'POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"Pod":')
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            seen["answer"] = head + await asyncio.wait_for(reader.readexactly(length), 30)
            writer.close()
        finally:
            await runner.cleanup()

    asyncio.run(main())
    head, _, payload = seen["answer"].partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408") and b"Connection: close" in head
    assert b"not received" in orjson.loads(payload)["Error"].encode()


async def _exchange(port: int, data: bytes) -> bytes:
    """Send raw bytes, read until the server closes the connection (at most 30 s: a hang check)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(1 << 20), 30)
    finally:
        writer.close()


def raw_serve(body: Callable[[int], Awaitable[None]], **kwargs: Any) -> None:
    """The app on a loopback port, for tests that speak raw HTTP to it."""

    async def main() -> None:
        runner = web.AppRunner(build_app(filled(), NAMES, Weights(), CollectorRegistry(), **kwargs))
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        try:
            await body(runner.addresses[0][1])
        finally:
            await runner.cleanup()

    asyncio.run(main())


ARGS = orjson.dumps({"Pod": pod_obj(), "NodeNames": ["n0"]})


def _post_head(headers: str, length: int = len(ARGS)) -> bytes:
    return f"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n{headers}\r\n".encode()


def test_an_encoded_body_is_refused_not_inflated(caplog: pytest.LogCaptureFixture) -> None:
    """gzip claimed but not gzip was an HTTP 500 with two tracebacks; a gzip bomb was inflated on the loop."""
    bomb = gzip.compress(b"\0" * 50_000_000, 9)
    seen: dict[str, bytes] = {}

    async def body(port: int) -> None:
        seen["not-gzip"] = await _exchange(port, _post_head("Content-Encoding: gzip\r\n") + ARGS)
        seen["bomb"] = await _exchange(port, _post_head("Content-Encoding: gzip\r\n", len(bomb)) + bomb)
        seen["unknown"] = await _exchange(port, _post_head("Content-Encoding: x-new\r\n") + ARGS)
        seen["after"] = await _exchange(port, _post_head("Connection: close\r\n") + ARGS)

    with caplog.at_level(logging.DEBUG):
        raw_serve(body, header_timeout_s=0.5)
    for case in ("not-gzip", "bomb", "unknown"):
        head, _, payload = seen[case].partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 415"), (case, head)
        assert b"uncompressed" in orjson.loads(payload)["Error"].encode()
    assert seen["after"].startswith(b"HTTP/1.1 200")
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


@pytest.mark.parametrize("value", ["\u0661\u0662", " 12", "+12", "1_2", "9" * 40, "12, 12", "0x10", "-1"])
def test_a_content_length_that_is_not_ascii_digits_is_a_400_in_one_log_line(
    value: str, caplog: pytest.LogCaptureFixture
) -> None:
    seen: dict[str, bytes] = {}

    async def body(port: int) -> None:
        head = f"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Length: {value}\r\n\r\n".encode()
        seen["bad"] = await _exchange(port, head + ARGS)
        seen["after"] = await _exchange(port, _post_head("Connection: close\r\n") + ARGS)

    with caplog.at_level(logging.DEBUG):
        raw_serve(body, header_timeout_s=0.5)
    assert seen["bad"].startswith((b"HTTP/1.0 400", b"HTTP/1.1 400")), seen["bad"][:80]
    assert seen["after"].startswith(b"HTTP/1.1 200")
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


def test_a_slow_or_silent_client_is_disconnected_after_the_header_deadline() -> None:
    """Slowloris: a request head trickled one header at a time, or nothing at all, held the
    connection for the keep-alive default (an hour here, 75 s under web.run_app)."""
    seen: dict[str, bytes] = {}

    async def trickle(port: int) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\n")
        try:
            for i in range(300):  # 30 s of headers: the hang check
                if reader.at_eof():
                    break
                writer.write(f"X-Slow-{i}: y\r\n".encode())
                await writer.drain()
                with contextlib.suppress(TimeoutError):
                    return await asyncio.wait_for(reader.read(100), 0.1) or b"closed"
            return b"still open"
        except ConnectionError:
            return b"closed"
        finally:
            writer.close()

    async def silent(port: int) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            return await asyncio.wait_for(reader.read(100), 30) or b"closed"
        except TimeoutError:
            return b"still open"
        finally:
            writer.close()

    async def body(port: int) -> None:
        seen["trickle"], seen["silent"] = await asyncio.gather(trickle(port), silent(port))
        seen["after"] = await _exchange(port, _post_head("Connection: close\r\n") + ARGS)

    raw_serve(body, header_timeout_s=0.5)
    assert seen["trickle"] == b"closed" and seen["silent"] == b"closed"
    assert seen["after"].startswith(b"HTTP/1.1 200")


def test_a_body_with_too_many_json_values_is_refused() -> None:
    """Parsing holds the loop's interpreter lock: 1.4 M nested empty arrays in 4 MB took 0.36 s."""
    nested = b'{"Pod":{"x":[' + b",".join([b"[]"] * 1_300_000) + b'],"spec":{}},"NodeNames":["n0"]}'
    seen: dict[str, Any] = {}

    async def body(session: aiohttp.ClientSession, base: str) -> None:
        seen["prioritize"] = await post(session, f"{base}/scheduler/prioritize", nested)
        seen["filter"] = await post(session, f"{base}/scheduler/filter", nested)

    serve(filled(), body)
    assert seen["prioritize"][0] == 413 and "JSON values" in seen["prioritize"][1]["Error"]
    assert seen["filter"][0] == 413 and "JSON values" in seen["filter"][1]["Error"]


class _Gate(dict[str, Any]):
    """Node cache whose first lookup waits until the test has seen /healthz answered (at most 10 s):
    scoring that runs on the event loop holds /healthz back until then, scoring in a worker does not."""

    def __init__(self, nodes: dict[str, Any]) -> None:
        super().__init__(nodes)
        self.opened = threading.Event()
        self.waited = threading.Event()

    def get(self, key: str, default: Any = None) -> Any:
        if not self.waited.is_set():
            self.waited.set()
            self.opened.wait(10)
        return super().get(key, default)


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
def test_healthz_is_answered_while_a_large_request_is_scored(verb: str) -> None:
    """A large request (here 200 KB of node names) was parsed and scored on the event loop, holding every
    other request back (a 3.7 MB prioritize: 2.3 s); now in a worker thread. No timing: the scoring
    waits at its first node lookup until /healthz has been answered."""
    names = [f"n{i}" for i in range(1000)] + [f"ghost-{i:07d}" for i in range(12_000)]
    big = orjson.dumps({"Pod": pod_obj(annotations={GPU_MODELS_ANNOTATION: "A100"}), "NodeNames": names})
    state = filled(1000)
    fresh = ClusterState()
    fresh.nodes = dict(state.nodes)
    gate = _Gate(state.nodes)
    state.nodes = gate
    order: list[str] = []
    seen: dict[str, Any] = {}

    async def body(session: aiohttp.ClientSession, base: str) -> None:
        async def large() -> None:
            seen["large"] = await post(session, f"{base}/scheduler/{verb}", big)
            order.append("large")

        task = asyncio.create_task(large())
        await asyncio.to_thread(gate.waited.wait, 30)
        async with session.get(f"{base}/healthz") as resp:
            order.append(f"healthz {resp.status}")
        gate.opened.set()
        await task

    serve(state, body)
    assert order == ["healthz 200", "large"]
    status, answer = seen["large"]
    assert status == 200
    # the same answer as the plain decision over the same cache
    args = orjson.loads(big)
    if verb == "filter":
        assert answer == filter_result(fresh, args, NAMES)
        assert len(answer["FailedNodes"]) == 12_000  # the ghosts; the cached A100 nodes pass
    else:
        assert answer == prioritize_result(fresh, args, NAMES, Weights())


def test_an_unforeseen_error_is_one_log_line_and_a_valid_answer(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Fault injection: scoring raises with a multi-line message (as the text of a client's value may)."""

    def broken(*_args: Any) -> Any:
        raise ValueError("line one\nline two\r\nline three")

    monkeypatch.setattr("statictrain_extender.server.filter_answer", broken)
    monkeypatch.setattr("statictrain_extender.server.prioritize_answer", broken)
    answers: list[tuple[int, Any]] = []
    body = orjson.dumps({"Pod": pod_obj(), "NodeNames": ["n0"]})

    async def run(session: aiohttp.ClientSession, base: str) -> None:
        for verb in ("filter", "prioritize"):
            answers.append(await post(session, f"{base}/scheduler/{verb}", body))

    with caplog.at_level(logging.WARNING, logger="statictrain_extender.server"):
        serve(filled(), run)
    (fstatus, fout), (pstatus, pout) = answers
    assert fstatus == 200 and "ValueError" in fout["Error"] and pstatus == 400 and "ValueError" in pout["Error"]
    lines = [r.getMessage() for r in caplog.records if r.name == "statictrain_extender.server"]
    assert len(lines) == 2 and all("\n" not in m and "\r" not in m for m in lines), lines
    assert not [r for r in caplog.records if r.exc_info]
