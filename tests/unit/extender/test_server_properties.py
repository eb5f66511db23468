"""Property tests: generated hostile requests against the real extender app on a loopback port.

The server runs on its own uvloop in a thread (as in main.py), over a filled cache; each example
speaks raw HTTP to it on a fresh connection. What always holds, whatever arrives:

- no HTTP 500, and no traceback or error-level line in the logs;
- a filter call answers an ExtenderFilterResult (200, or 4xx with Error set); a prioritize call a
  HostPriorityList with one score in 0..10 per candidate, or 4xx with Error set;
- the next valid requests are answered exactly as they were before any hostile input.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import uvloop
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from statictrain import envvars, labels
from statictrain_extender.policy import CAPACITY_TYPES_ANNOTATION, GPU_MODELS_ANNOTATION, MAX_HOURLY_ANNOTATION
from statictrain_extender.scoring import MAX_SCORE, Weights
from statictrain_extender.server import build_app
from statictrain_extender.state import ClusterState

from .builders import node_obj, pod_obj
from .hostile import HOSTILE_NUMBERS, HOSTILE_TEXT, json_values, put

NAMES = frozenset({"statictrain-scheduler"})
CACHED = [f"n{i}" for i in range(20)]
VALID = orjson.dumps(
    {
        "Pod": pod_obj(annotations={GPU_MODELS_ANNOTATION: "A100,H100", CAPACITY_TYPES_ANNOTATION: "on-demand"}),
        "NodeNames": [*CACHED, "ghost"],
    }
)


class _Bad(logging.Handler):
    """Collects records that are errors or carry a traceback."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info or record.levelno >= logging.ERROR:
            self.records.append(record)


class Server:
    """The app served on a thread's own uvloop; ``exchange`` sends raw bytes and reads until close."""

    def __init__(self) -> None:
        state = ClusterState()
        products = ["NVIDIA-A100-SXM4-40GB", "NVIDIA-H100-80GB-HBM3", "Tesla-T4"]
        state.replace_nodes(
            [
                node_obj(n, products[i % 3], capacity=("spot", "on-demand")[i % 2], hourly=f"{5 + i}.5")
                for i, n in enumerate(CACHED)
            ]
        )
        self.app = build_app(state, NAMES, Weights(), CollectorRegistry(), body_timeout_s=2, header_timeout_s=2)
        self.loop = uvloop.new_event_loop()
        self.runner = web.AppRunner(self.app)
        self.loop.run_until_complete(self.runner.setup())
        self.loop.run_until_complete(web.TCPSite(self.runner, "127.0.0.1", 0).start())
        self.port: int = self.runner.addresses[0][1]
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def exchange(self, data: bytes, *, half_close: bool = False) -> bytes:
        """With ``half_close``, the client then closes its side, as one that gives up (aiohttp drops
        the connection at that end of input); else the server's deadlines end a request cut short."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as sock:
            try:
                sock.sendall(data)
                if half_close:
                    sock.shutdown(socket.SHUT_WR)
            except OSError:  # the server answered and closed before reading it all
                pass
            chunks = []
            while True:
                try:
                    chunk = sock.recv(1 << 16)
                except ConnectionResetError:
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks)

    def post(self, verb: str, body: bytes, headers: bytes = b"") -> tuple[int, Any]:
        head = (
            f"POST /scheduler/{verb} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n"
        ).encode()
        return answer(self.exchange(head + headers + b"\r\n" + body))

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


def answer(raw: bytes) -> tuple[int, Any]:
    """(status, JSON body or None) of the first final response; (0, None) when the server sent none."""
    while raw.startswith(b"HTTP/1.1 1"):  # 100 Continue
        raw = raw.partition(b"\r\n\r\n")[2]
    if not raw:
        return 0, None
    head, _, payload = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    try:
        return status, orjson.loads(payload)
    except orjson.JSONDecodeError:
        return status, None


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[Server, _Bad, dict[str, Any]]]:
    bad = _Bad()
    root = logging.getLogger()
    root.addHandler(bad)
    old_level = root.level
    root.setLevel(logging.DEBUG)
    srv = Server()
    try:
        reference = {verb: srv.post(verb, VALID) for verb in ("filter", "prioritize")}
        assert reference["filter"][0] == 200 and reference["prioritize"][0] == 200
        yield srv, bad, reference
    finally:
        srv.close()
        root.removeHandler(bad)
        root.setLevel(old_level)


def still_served(srv: Server, bad: _Bad, reference: dict[str, Any]) -> None:
    assert not bad.records, [r.getMessage() for r in bad.records]
    for verb, want in reference.items():
        assert srv.post(verb, VALID) == want


def check_answer(verb: str, status: int, out: Any, names: object) -> None:
    assert status not in {500, 0}, (verb, status, out)
    if verb == "filter":
        assert isinstance(out, dict) and set(out) == {"NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
        assert status == 200 or (400 <= status < 500 and out["Error"]), (status, out)
        return
    if status == 200:
        assert isinstance(out, list) and all(set(h) == {"Host", "Score"} for h in out)
        assert all(isinstance(h["Score"], int) and 0 <= h["Score"] <= MAX_SCORE for h in out)
        if isinstance(names, list):
            assert [h["Host"] for h in out] == names
    else:
        assert 400 <= status < 500 and isinstance(out, dict) and out["Error"], (status, out)


# --- generated bodies

# Places in a real pod where hostile values go (the last key may be missing and is then added).
POD_PATHS: list[tuple[Any, ...]] = [
    ("spec",),
    ("metadata",),
    ("spec", "schedulerName"),
    ("spec", "containers"),
    ("spec", "containers", 0),
    ("spec", "containers", 0, "resources"),
    ("spec", "containers", 0, "resources", "requests"),
    ("spec", "containers", 0, "resources", "requests", labels.GPU_RESOURCE),
    ("spec", "containers", 0, "resources", "requests", "statictrain.io/gpu-milli"),
    ("spec", "containers", 0, "env"),
    ("metadata", "labels"),
    ("metadata", "labels", labels.JOB),
    ("metadata", "annotations"),
    ("metadata", "annotations", GPU_MODELS_ANNOTATION),
    ("metadata", "annotations", CAPACITY_TYPES_ANNOTATION),
    ("metadata", "annotations", MAX_HOURLY_ANNOTATION),
    ("metadata", "annotations", "statictrain.io/gpu-throughput"),
    ("metadata", "namespace"),
    ("metadata", "uid"),
]


@st.composite
def extender_args(draw: st.DrawFn) -> tuple[bytes, object]:
    """(body bytes, the NodeNames it sends): a real ExtenderArgs with hostile parts."""
    pod = pod_obj(gpus=draw(st.integers(0, 8)), job=draw(st.sampled_from(["gpt2", None])))
    if draw(st.booleans()):
        env = [{"name": envvars.WORLD_SIZE, "value": draw(st.sampled_from(HOSTILE_TEXT) | st.text(max_size=6))}]
        pod["spec"]["containers"][0]["env"] = env
    for path in draw(st.lists(st.sampled_from(POD_PATHS), max_size=3)):
        with contextlib.suppress(KeyError, IndexError, TypeError):  # an earlier replacement removed the parent
            put(pod, path, draw(json_values))
    body: dict[str, Any] = {"Pod": pod}
    names: object
    shape = draw(st.sampled_from(["names", "hostile-names", "inline", "hostile-top"]))
    if shape == "names":
        names = draw(st.lists(st.sampled_from([*CACHED, "ghost"]) | st.text(max_size=30), max_size=30))
        body["NodeNames"] = names
    elif shape == "hostile-names":
        names = draw(json_values)
        body["NodeNames"] = names
    elif shape == "inline":
        items: list[Any] = [node_obj(f"i{i}", hourly=draw(st.sampled_from(HOSTILE_TEXT))) for i in range(3)]
        items.extend(draw(st.lists(json_values, max_size=3)))
        body["Nodes"] = {"items": items}
        names = None
    else:
        body = draw(st.dictionaries(st.sampled_from(["Pod", "NodeNames", "Nodes"]), json_values, max_size=3))
        names = body.get("NodeNames")
    raw = orjson.dumps(body).replace(b'"__NUMBER__"', draw(st.sampled_from(HOSTILE_NUMBERS)))
    cut = draw(st.sampled_from([None, None, None, len(raw) // 2, 1]))
    return (raw if cut is None else raw[:cut]), names


@given(case=extender_args(), verb=st.sampled_from(["filter", "prioritize"]))
def test_any_generated_body_gets_a_valid_answer(
    server: tuple[Server, _Bad, dict[str, Any]], case: Any, verb: str
) -> None:
    srv, bad, reference = server
    raw, names = case
    status, out = srv.post(verb, raw)
    check_answer(verb, status, out, names)
    still_served(srv, bad, reference)


@given(data=st.binary(max_size=300), verb=st.sampled_from(["filter", "prioritize"]))
def test_any_raw_bytes_as_body_get_a_valid_answer(
    server: tuple[Server, _Bad, dict[str, Any]], data: bytes, verb: str
) -> None:
    srv, bad, reference = server
    status, out = srv.post(verb, data)
    check_answer(verb, status, out, None)
    still_served(srv, bad, reference)


@given(data=st.binary(max_size=300))
def test_any_raw_bytes_on_the_connection_never_get_a_500(
    server: tuple[Server, _Bad, dict[str, Any]], data: bytes
) -> None:
    srv, bad, reference = server
    status, _ = answer(srv.exchange(data, half_close=True))
    assert status != 500
    still_served(srv, bad, reference)


HEADER_NAMES = [
    "Content-Length", "Transfer-Encoding", "Content-Encoding", "Content-Type", "Connection", "Expect", "Host",
    "Upgrade", "Trailer", "X-Anything",
]  # fmt: skip
header_values = (
    st.sampled_from(["\u0661\u0662", " 12", "+12", "1_2", "9" * 40, "-1", "0", "chunked", "gzip", "identity, gzip"])
    | st.text(max_size=20)
).map(lambda v: v.encode("utf-8", "surrogatepass").replace(b"\r", b"").replace(b"\n", b""))


@given(
    headers=st.lists(st.tuples(st.sampled_from(HEADER_NAMES), header_values), max_size=4),
    verb=st.sampled_from(["filter", "prioritize"]),
)
def test_any_headers_never_get_a_500(
    server: tuple[Server, _Bad, dict[str, Any]], headers: list[tuple[str, bytes]], verb: str
) -> None:
    srv, bad, reference = server
    head = b"".join(name.encode() + b": " + value + b"\r\n" for name, value in headers)
    raw = f"POST /scheduler/{verb} HTTP/1.1\r\nHost: x\r\n".encode() + head + b"\r\n" + VALID
    status, out = answer(srv.exchange(raw, half_close=True))
    assert status != 500, (status, out)
    if status >= 400 and out is not None and verb == "filter" and isinstance(out, dict):
        assert out.get("Error")
    still_served(srv, bad, reference)
