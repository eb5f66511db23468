"""HttpKube's session per event loop: one loop ending (asyncio.run, LoopThread) leaves no session open.

A plain HTTP server in a thread answers every request with 404 (the port says None), so
these tests need no cluster; what they check is aiohttp's own ResourceWarning about
unclosed sessions and connectors, which the interpreter raises when those are collected.
"""

from __future__ import annotations

import asyncio
import gc
import http.server
import threading
import warnings
from collections.abc import Iterator

import pytest
from statictrain_operator.kube import port
from statictrain_operator.kube.blocking import LoopThread
from statictrain_operator.kube.endpoint import Endpoint
from statictrain_operator.kube.http import HttpKube


class _NotFound(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the pool holds a connection open after each call

    def do_GET(self) -> None:
        body = b'{"kind": "Status", "reason": "NotFound", "code": 404}'
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True  # do not wait for kept-alive connections on close


@pytest.fixture
def server() -> Iterator[str]:
    gc.collect()  # what earlier tests left is not this test's
    httpd = _Server(("127.0.0.1", 0), _NotFound)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _unclosed(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]


def test_a_second_loop_gets_its_own_session_and_the_first_is_closed_with_its_loop(server: str) -> None:
    kube = HttpKube(Endpoint(server=server))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):  # each asyncio.run is a new loop; none calls close()
            assert asyncio.run(kube.get(port.CONFIGMAPS, "ns", "missing")) is None
        del kube
        gc.collect()
    assert _unclosed(caught) == []


def test_close_closes_the_running_loops_session(server: str) -> None:
    kube = HttpKube(Endpoint(server=server))

    async def use_and_close(k: HttpKube) -> None:
        assert await k.get(port.CONFIGMAPS, "ns", "missing") is None
        await k.close()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(use_and_close(kube))
        asyncio.run(use_and_close(kube))  # usable again after close, on another loop
        del kube
        gc.collect()
    assert _unclosed(caught) == []


def test_a_loop_thread_closes_what_was_opened_on_it(server: str) -> None:
    kube = HttpKube(Endpoint(server=server))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with LoopThread() as call:
            assert call(kube.get(port.CONFIGMAPS, "ns", "missing")) is None
        del kube
        gc.collect()
    assert _unclosed(caught) == []
