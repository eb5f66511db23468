"""The extender's list and watch (kubewatch) against a loopback HTTP server playing a hostile API server.

The real client code runs (api_client from a kubeconfig, start_watches into a real ClusterState on a
running event loop); the server answers each request from a script: endless bodies and lines, garbage
JSON, a wrong Content-Length, a stall, an encoding not asked for, objects of the wrong shapes. What
always holds: the failed read is logged in one line (no traceback), memory stays within the bound of
one read, and the next good answer fills the cache.
"""

from __future__ import annotations

import asyncio
import http.server
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from statictrain_extender import kubewatch
from statictrain_extender.estimates import PodNote
from statictrain_extender.state import ClusterState

from .builders import node_obj
from .hostile import json_values

Respond = Callable[[http.server.BaseHTTPRequestHandler], None]


def json_answer(body: object, status: int = 200) -> Respond:
    def respond(h: http.server.BaseHTTPRequestHandler) -> None:
        data = orjson.dumps(body)
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    return respond


def node_list(names: list[str], version: str = "10", token: str = "") -> Respond:
    meta = {"resourceVersion": version, **({"continue": token} if token else {})}
    return json_answer({"kind": "NodeList", "metadata": meta, "items": [node_obj(n) for n in names]})


def stream(*lines: bytes, then: Callable[[], None] = lambda: None) -> Respond:
    """A body with no length (ends when the connection closes): ``lines``, then ``then()`` is run."""

    def respond(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Connection", "close")
        h.end_headers()
        for line in lines:
            h.wfile.write(line)
            h.wfile.flush()
        then()

    return respond


def endless(piece: bytes) -> Respond:
    """Bytes without end, until the client goes away."""

    def respond(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Connection", "close")
        h.end_headers()
        block = piece * (65536 // len(piece))
        while True:
            h.wfile.write(block)

    return respond


def dripped(piece: bytes, every_s: float) -> Respond:
    """``piece`` every ``every_s`` seconds without end (each socket read gets something in time)."""

    def respond(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Connection", "close")
        h.end_headers()
        while True:
            h.wfile.write(piece)
            h.wfile.flush()
            time.sleep(every_s)

    return respond


def event(kind: str, obj: object) -> bytes:
    return orjson.dumps({"type": kind, "object": obj}) + b"\n"


class ApiServer:
    """Answers each GET from its path's script (list or watch) in order; when a script is used up, an
    empty node list / a watch that ends at once."""

    def __init__(self) -> None:
        self.lists: list[Respond] = []
        self.watches: list[Respond] = []
        self.seen: list[dict[str, list[str]]] = []
        self.posts: list[Respond] = []
        self.posted: list[tuple[str, object]] = []
        self.released = threading.Event()
        self.auth: set[str] = set()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                query = parse_qs(urlsplit(self.path).query)
                outer.seen.append(query)
                outer.auth.add(self.headers.get("Authorization", ""))
                watching = query.get("watch") == ["true"]
                script = outer.watches if watching else outer.lists
                respond = script.pop(0) if script else stream() if watching else node_list([])
                try:
                    respond(self)
                except OSError:  # the client went away (it gave up on an endless body)
                    self.close_connection = True

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outer.posted.append((self.path, orjson.loads(body)))
                respond = outer.posts.pop(0) if outer.posts else json_answer({}, status=201)
                try:
                    respond(self)
                except OSError:
                    self.close_connection = True

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, args=(0.01,), daemon=True).start()
        self.port = self.httpd.server_address[1]

    def kubeconfig(self, tmp: Path) -> str:
        path = tmp / "kubeconfig"
        path.write_text(
            orjson.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{self.port}"}}],
                    "users": [{"name": "u", "user": {"token": "secret-token"}}],
                    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                    "current-context": "x",
                }
            ).decode()
        )
        return str(path)


@pytest.fixture
def api_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ApiServer]:
    # Bounds and timeouts small enough for a unit test; the code reads them at each call.
    monkeypatch.setattr(kubewatch, "MAX_PAGE_BYTES", 1 << 20, raising=False)
    monkeypatch.setattr(kubewatch, "MAX_EVENT_BYTES", 256 << 10, raising=False)
    monkeypatch.setattr(kubewatch, "_LIST_READ_TIMEOUT_S", 0.5, raising=False)
    monkeypatch.setattr(kubewatch, "_LIST_DEADLINE_S", 0.5, raising=False)
    monkeypatch.setattr(kubewatch, "_RETRY_S", 0.05, raising=False)
    monkeypatch.setattr(kubewatch, "_EVENT_READ_TIMEOUT_S", 0.5, raising=False)
    server = ApiServer()
    yield server
    server.released.set()
    server.httpd.shutdown()
    server.httpd.server_close()


def watch_until(
    server: ApiServer, tmp: Path, done: Callable[[ClusterState], bool], timeout_s: float = 30
) -> ClusterState:
    """Run the real watches into a ClusterState on a running loop until ``done`` (or a hang check)."""
    state = ClusterState()

    async def main() -> None:
        api = kubewatch.api_client(server.kubeconfig(tmp))
        stop = kubewatch.start_watches(api, state, asyncio.get_running_loop(), watch_pods=False)
        deadline = time.monotonic() + timeout_s
        while not done(state) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        stop.set()

    asyncio.run(main())
    return state


def one_line_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    records = [r for r in caplog.records if r.name == kubewatch.__name__]
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    assert all("\n" not in r.getMessage() for r in records)
    return [r.getMessage() for r in records if r.levelno >= logging.WARNING]


def test_pages_are_joined_and_the_watch_is_applied(api_server: ApiServer, tmp_path: Path) -> None:
    api_server.lists += [node_list(["a", "b"], token="next"), node_list(["c"], version="12")]
    api_server.watches += [stream(event("ADDED", node_obj("d")), event("DELETED", node_obj("a")))]
    state = watch_until(api_server, tmp_path, lambda s: set(s.nodes) == {"b", "c", "d"})
    assert set(state.nodes) == {"b", "c", "d"}
    lists = [q for q in api_server.seen if "watch" not in q]
    assert lists[0]["limit"] == [str(kubewatch.PAGE)] and lists[1]["continue"] == ["next"]
    watch = next(q for q in api_server.seen if "watch" in q)
    assert watch["resourceVersion"] == ["12"] and watch["allowWatchBookmarks"] == ["true"]
    assert api_server.auth == {"Bearer secret-token"}


def test_a_list_with_null_items_is_an_empty_list(
    api_server: ApiServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    api_server.lists.append(json_answer({"kind": "NodeList", "metadata": {"resourceVersion": "3"}, "items": None}))
    api_server.watches.append(stream(event("ADDED", node_obj("d"))))
    with caplog.at_level(logging.INFO, logger=kubewatch.__name__):
        state = watch_until(api_server, tmp_path, lambda s: "d" in s.nodes)
    assert set(state.nodes) == {"d"} and one_line_warnings(caplog) == []
    assert next(q for q in api_server.seen if "watch" in q)["resourceVersion"] == ["3"]


HOSTILE_READS: dict[str, tuple[list[Respond], list[Respond], str]] = {
    # name: (list answers, watch answers, what the warning says), then a good list follows
    "endless list body": ([endless(b" ")], [], "over"),
    "endless list of objects": ([endless(b'{"metadata":{},"items":[')], [], "over"),
    "garbage list": ([json_answer("not a list")], [], "not a list object"),
    "list not JSON": ([stream(b"{]")], [], "not JSON"),
    "wrong Content-Length": ([lambda h: (h.send_response(200), h.send_header("Content-Length", "1000"),
                              h.end_headers(), h.wfile.write(b'{"items":'))], [], "IncompleteRead"),
    "dripped list": ([dripped(b" ", 0.05)], [], "deadline"),
    "stalled list": ([stream(b'{"items": [', then=lambda: time.sleep(3))], [], "timed out"),
    "gzip not asked for": ([lambda h: (h.send_response(200), h.send_header("Content-Encoding", "gzip"),
                            h.send_header("Content-Length", "0"), h.end_headers())], [], "Content-Encoding"),
    "error with an endless body": ([lambda h: (h.send_response(500), h.end_headers(), endless(b"x")(h))], [], "500"),
    "endless watch line": ([node_list(["a"])], [endless(b"{")], "no end of line"),
    "garbage watch line": ([node_list(["a"])], [stream(b"\x00\xff garbage\n")], "not JSON"),
    "watch event of the wrong shape": ([node_list(["a"])], [stream(b'{"type": 7, "object": []}\n')], "event"),
    "watch error status": ([node_list(["a"])], [json_answer({"message": "x" * 100_000}, status=410)], "410"),
}  # fmt: skip


@pytest.mark.parametrize("case", HOSTILE_READS)
def test_a_hostile_read_fails_in_one_line_and_the_next_good_one_fills_the_cache(
    case: str, api_server: ApiServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lists, watches, says = HOSTILE_READS[case]
    api_server.lists += [*lists, node_list(["good"])]
    api_server.watches += watches
    with caplog.at_level(logging.INFO, logger=kubewatch.__name__):
        state = watch_until(api_server, tmp_path, lambda s: set(s.nodes) == {"good"})
    assert set(state.nodes) == {"good"}
    warnings = one_line_warnings(caplog)
    assert any(says in w and "relisting" in w for w in warnings), warnings


@given(
    items=st.lists(json_values | st.fixed_dictionaries({"metadata": json_values, "status": json_values}), max_size=5),
    events=st.lists(st.tuples(st.sampled_from(["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "OTHER"]), json_values)),
)
def test_objects_of_any_shape_are_skipped_or_cached_never_break_the_cache(
    items: list[Any], events: list[tuple[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Hostile objects in a list and in watch events, between good ones: the good ones are all cached.
    (Its own server per example: the fixture's monkeypatching is per test, Hypothesis runs many.)"""
    server = ApiServer()
    try:
        listed = [node_obj("first"), *items, node_obj("second")]
        server.lists.append(json_answer({"metadata": {"resourceVersion": "1"}, "items": listed}))
        lines = [event(kind, obj) for kind, obj in events if isinstance(obj, dict)]
        server.watches.append(stream(*lines, event("ADDED", node_obj("third"))))
        state = watch_until(server, tmp_path_factory.mktemp("k"), lambda s: "third" in s.nodes, timeout_s=10)
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
    assert {"first", "second", "third"} <= set(state.nodes)


def test_the_event_writer_goes_on_after_a_stalled_or_endless_answer(
    api_server: ApiServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Each Pod Event is one POST; an answer that never comes, an endless one or an error with an endless
    body costs at most a read timeout and a bounded read: the next notes are still written."""
    api_server.posts += [
        lambda h: api_server.released.wait(),  # never answers (until the test ends)
        lambda h: (h.send_response(500), h.end_headers(), endless(b"x")(h)),
        endless(b"{"),
    ]
    state = ClusterState()
    notes = [PodNote("ns", f"p{i}", f"u{i}", "m") for i in range(4)]
    for note in notes:
        state.estimates.notes.put_nowait(note)
    stop = threading.Event()
    with caplog.at_level(logging.INFO, logger=kubewatch.__name__):
        kubewatch.start_event_writer(kubewatch.api_client(api_server.kubeconfig(tmp_path)), state, stop)
        deadline = time.monotonic() + 20
        while len(api_server.posted) < len(notes) and time.monotonic() < deadline:
            time.sleep(0.02)
        stop.set()
    assert [path for path, _ in api_server.posted] == ["/api/v1/namespaces/ns/events"] * len(notes)
    assert [body["involvedObject"]["name"] for _, body in api_server.posted] == [n.name for n in notes]  # type: ignore[index]
    one_line_warnings(caplog)  # no traceback, each message one line
    reported = [r.getMessage() for r in caplog.records if "not written" in r.getMessage()]
    assert any("timed out" in m for m in reported) and any("HTTP 500" in m for m in reported), reported
