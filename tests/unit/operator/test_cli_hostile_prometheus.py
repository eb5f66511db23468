"""#33: the real ``statictrain`` commands (report, gate, estimate, advise) against a misbehaving Prometheus.

A real HTTP server on loopback (raw sockets, so it can break HTTP itself) answers every query with what an
example asks for: garbage or deep JSON, wrong shapes, NaN/Inf strings and numbers beyond any float, a
Content-Encoding that is not what it says, a body shorter than its Content-Length, a redirect, an error
status, an endless body, a stall before or in the middle of the answer. The commands run in-process through
``statictrain_cli.main.main`` (the console script's entry point) with ``--timeout 0.5``.

What always holds: the command ends; its exit status is one of ``CliExit``'s and never 70 (an internal
error: a bug); stderr holds no traceback and at most one line; the gate never passes on figures that are not
finite; ``report -o`` leaves the old output file as it was or replaces it whole (no temporary file left).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import socket
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from statictrain.exitcodes import CliExit
from statictrain_cli.flavors import run_flavors
from statictrain_cli.main import build_parser, main
from statictrain_cli.report.fetch import PARALLEL_QUERIES
from statictrain_operator.prom import MAX_RESPONSE_BYTES, HttpPrometheus

EXAMPLES = Path(__file__).resolve().parents[3] / "deploy" / "examples"
TIMEOUT_S = 0.5
ENDS_WITHIN_S = 60.0
"""Not a performance bound: a command still running after this long has no working deadline."""
CODES = {int(c) for c in CliExit}


# ---------------------------------------------------------------------------------------------- the server


@dataclass
class Answer:
    """What the server sends to every request: ``head`` then ``body``; ``endless`` streams forever after it,
    ``stall`` waits (until the test ends) after sending ``stall_after`` bytes of head + body."""

    status: str = "200 OK"
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    body: bytes = b""
    length: str = "exact"  # exact | short (Content-Length beyond the body) | none (close ends it) | lie-chunked
    endless: bool = False
    stall_after: int | None = None

    def head(self) -> bytes:
        headers = dict(self.headers)
        if self.length == "exact" and not self.endless:
            headers["Content-Length"] = str(len(self.body))
        elif self.length == "short":
            headers["Content-Length"] = str(len(self.body) + 1000)
        elif self.length == "lie-chunked":
            headers["Transfer-Encoding"] = "chunked"
        lines = [f"HTTP/1.1 {self.status}", *(f"{k}: {v}" for k, v in headers.items()), "Connection: close"]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8")  # non-ASCII header bytes, as a hostile server may


class HostilePrometheus:
    """A loopback server that reads each request whole and answers it with :attr:`answer`."""

    def __init__(self) -> None:
        self.answer = Answer()
        self.requests = 0
        self._stop = threading.Event()
        self._srv = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._srv.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._srv.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn, self.answer), daemon=True).start()

    def _serve(self, conn: socket.socket, answer: Answer) -> None:
        with conn, contextlib.suppress(OSError):
            conn.settimeout(10)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            want = next(
                (int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")), 0
            )
            while len(body) < want:
                body += conn.recv(65536)
            self.requests += 1
            out = answer.head() + answer.body
            if answer.stall_after is not None:
                conn.sendall(out[: answer.stall_after])
                self._stop.wait()
                return
            conn.sendall(out)
            while answer.endless and not self._stop.is_set():
                conn.sendall(b"[" * 65536)

    def close(self) -> None:
        self._stop.set()
        self._srv.close()


@pytest.fixture(scope="module")
def prom() -> Iterator[HostilePrometheus]:
    server = HostilePrometheus()
    yield server
    server.close()


# ---------------------------------------------------------------------------------------------- the answers

_HUGE_INT = st.integers(min_value=10**300, max_value=10**400)
_JSON_LEAF = st.none() | st.booleans() | st.floats() | _HUGE_INT | st.text(max_size=20)
_JSON = st.recursive(
    _JSON_LEAF,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=20,
)
_VALUE = st.sampled_from(
    ["NaN", "+Inf", "-Inf", "1e308", "1e999", "-5", "abc", "", "0x10", "1_0", "\u0661"]
) | st.floats().map(repr)
_TIME = st.floats() | st.integers(min_value=-(10**30), max_value=10**30) | st.sampled_from(["1", None, True])
_LABELS = st.dictionaries(
    st.sampled_from(["commit", "namespace", "job_name", "pod_uid", "gpu_model", "le", "x"]),
    st.sampled_from(["a", "b", "H100", ""]) | st.text(max_size=10) | st.integers(),
    max_size=5,
)
_SERIES = st.fixed_dictionaries(
    {"metric": _LABELS},
    optional={
        "values": st.lists(st.lists(_TIME | _VALUE, min_size=0, max_size=3), max_size=4),
        "value": st.lists(_TIME | _VALUE, max_size=3),
    },
)
_RESULT = st.lists(_SERIES, max_size=4) | _JSON


def _query_answer(result: object, rtype: str) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": rtype, "result": result}}).encode()


_JSON_BODY = st.one_of(
    st.builds(_query_answer, _RESULT, st.sampled_from(["matrix", "vector", "scalar", "string", "x"])),
    _JSON.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=300),
    st.integers(1, 3000).map(lambda n: b"[" * n * 10),  # deeper than any parser's stack
    st.just(b'{"status":"success","data":{"result":[{"metric":{},"values":[[1,"' + b"9" * 6000 + b'"]]}]}}'),
    st.just(b'{"status":"success","data":{"result":[{"metric":{},"values":[[' + b"9" * 6000 + b',"1"]]}]}}'),
)


@st.composite
def answers(draw: st.DrawFn) -> Answer:
    body = draw(_JSON_BODY)
    headers = {
        "Content-Type": draw(
            st.sampled_from(
                ["application/json", "application/json; charset=utf-8", "text/html", "", "application/json\u00e9"]
            )
        )
    }
    encoding = draw(st.sampled_from(["", "", "gzip", "gzip-lie", "deflate", "br", "identity, gzip"]))
    if encoding == "gzip":
        body = gzip.compress(body)
    if encoding:
        headers["Content-Encoding"] = encoding.replace("-lie", "")
    status = draw(
        st.sampled_from(["200 OK"] * 4 + ["400 Bad Request", "503 Service Unavailable", "302 Found", "204 No Content"])
    )
    if status.startswith("302"):
        headers["Location"] = draw(st.sampled_from(["http://127.0.0.1:1/?token=s3cr3t", "/login", "\u00e9"]))
    if draw(st.booleans()):
        headers[draw(st.sampled_from(["Content-Length", "X-Junk"]))] = draw(
            st.sampled_from(["-1", "1e3", "\u0661", "9" * 30])
        )
    length = draw(st.sampled_from(["exact", "exact", "short", "none", "lie-chunked"]))
    return Answer(status, headers, body, length)


# ---------------------------------------------------------------------------------------------- the commands


@dataclass
class Ran:
    rc: int
    out: str
    err: str


def run_cli(argv: list[str]) -> Ran:
    """``statictrain ARGV`` in-process, in a thread that must end (see ENDS_WITHIN_S)."""
    out, err = io.StringIO(), io.StringIO()
    box: list[int] = []

    def call() -> None:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            box.append(main(argv))

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(ENDS_WITHIN_S)
    assert not t.is_alive(), f"statictrain {' '.join(argv)} did not end; its --timeout bounds nothing"
    return Ran(box[0], out.getvalue(), err.getvalue())


def holds(ran: Ran) -> None:
    assert ran.rc in CODES, ran
    assert ran.rc != CliExit.INTERNAL, ran.err
    assert "Traceback" not in ran.err and ran.err.count("\n") <= 1, ran.err
    assert "s3cr3t" not in ran.err + ran.out


def report(prom: HostilePrometheus, target: Path) -> Ran:
    return run_cli(
        [
            "report",
            "--last",
            "1h",
            "--by",
            "commit",
            "--format",
            "json",
            "-o",
            str(target),
            "--no-progress",
            "--prometheus-url",
            prom.url,
            "--timeout",
            str(TIMEOUT_S),
        ]
    )


def gate(prom: HostilePrometheus) -> Ran:
    return run_cli(
        [
            "gate",
            "--commit",
            "a",
            "--baseline",
            "b",
            "--max-regression",
            "5%",
            "--last",
            "1h",
            "--prometheus-url",
            prom.url,
            "--timeout",
            str(TIMEOUT_S),
        ]
    )


def estimate(prom: HostilePrometheus) -> Ran:
    return run_cli(
        [
            "estimate",
            "-f",
            str(EXAMPLES / "one-gpu.yaml"),
            "--offline",
            "--catalog",
            "--prometheus-url",
            prom.url,
            "--timeout",
            str(TIMEOUT_S),
        ]
    )


def _kubectl(args: object, stdin: object) -> object:
    """The cluster objects advise reads (ClusterQueue, flavor, LocalQueue, nodes); Prometheus is the real one."""
    import subprocess  # noqa: PLC0415

    objs = {
        "clusterqueue": {"spec": {"resourceGroups": [{"flavors": [{"name": "f"}]}]}},
        "resourceflavor": {"metadata": {"name": "f"}, "spec": {"nodeLabels": {}}},
        "localqueues": {"items": [{"metadata": {"namespace": "ns"}, "spec": {"clusterQueue": "gpu"}}]},
        "nodes": {"items": []},
    }
    kind = list(args)[1]  # type: ignore[call-overload]
    return subprocess.CompletedProcess(list(args), 0, json.dumps(objs[kind]), "")  # type: ignore[call-overload]


def advise(prom: HostilePrometheus) -> Ran:
    args = build_parser().parse_args(
        ["advise", "flavors", "--cluster-queue", "gpu", "--prometheus-url", prom.url, "--timeout", str(TIMEOUT_S)]
    )
    out, err = io.StringIO(), io.StringIO()
    rc = run_flavors(args, stdout=out, stderr=err, kubectl=_kubectl, reader=HttpPrometheus(prom.url, TIMEOUT_S))  # type: ignore[arg-type]
    return Ran(rc, out.getvalue(), err.getvalue())


OLD = '{"old": "report"}\n'


def output_whole(target: Path, ran: Ran) -> None:
    """``-o``: the old file as it was, or (exit 0) a whole new JSON report; no temporary file left."""
    text = target.read_text(encoding="utf-8")
    if ran.rc == CliExit.OK:
        assert json.loads(text)["group_by"] == "commit"
    else:
        assert text == OLD, ran
    assert [p.name for p in target.parent.iterdir()] == [target.name]


# ---------------------------------------------------------------------------------------------- properties


@given(answer=answers())
def test_report_against_a_hostile_prometheus(
    prom: HostilePrometheus, tmp_path_factory: pytest.TempPathFactory, answer: Answer
) -> None:
    prom.answer = answer
    target = tmp_path_factory.mktemp("report") / "out.json"
    target.write_text(OLD, encoding="utf-8")
    ran = report(prom, target)
    holds(ran)
    output_whole(target, ran)


@given(answer=answers())
def test_gate_against_a_hostile_prometheus_never_passes_on_figures_that_are_not_finite(
    prom: HostilePrometheus, answer: Answer
) -> None:
    prom.answer = answer
    ran = gate(prom)
    holds(ran)
    if ran.rc == CliExit.OK:
        assert "PASS" in ran.out and not any(w in ran.out.lower() for w in ("nan", "inf")), ran.out


@given(answer=answers())
def test_estimate_against_a_hostile_prometheus(prom: HostilePrometheus, answer: Answer) -> None:
    """History is optional: whatever Prometheus sends, the estimate is printed (a note says what went wrong)."""
    prom.answer = answer
    ran = estimate(prom)
    holds(ran)
    assert ran.rc == CliExit.OK and "nan" not in ran.out.lower(), ran


@given(answer=answers())
def test_advise_against_a_hostile_prometheus(prom: HostilePrometheus, answer: Answer) -> None:
    prom.answer = answer
    ran = advise(prom)
    holds(ran)
    assert "nan" not in ran.out.lower(), ran.out


# ---------------------------------------------------------------------------------------------- time and size

_VALID = _query_answer([], "matrix")
_STALLS = {
    "no answer at all": Answer(body=_VALID, stall_after=0),
    "half a status line": Answer(body=_VALID, stall_after=7),
    "headers, no body": Answer(body=_VALID, length="exact", stall_after=len(Answer(body=_VALID).head())),
    "half the body": Answer(body=_VALID, stall_after=len(Answer(body=_VALID).head()) + 10),
}


_STALLED = [(c, a) for c in (report, gate) for a in _STALLS] + [(c, "headers, no body") for c in (estimate, advise)]


@pytest.mark.parametrize(("command", "stall"), _STALLED, ids=[f"{c.__name__}-{a}" for c, a in _STALLED])
def test_a_stalled_prometheus_ends_the_command_at_its_timeout(
    prom: HostilePrometheus, tmp_path: Path, command: Callable[..., Ran], stall: str
) -> None:
    """The --timeout bounds each request whole: a server that sends part of an answer and then nothing is cut
    off at the deadline (no verdict, exit 3), rather than waited on for a timeout per socket read."""
    prom.answer = _STALLS[stall]
    target = tmp_path / "out.json"
    target.write_text(OLD, encoding="utf-8")
    ran = command(prom, target) if command is report else command(prom)
    holds(ran)
    if command is estimate:  # history is optional there: a note, and the estimate without it
        assert ran.rc == CliExit.OK and "within 0.5 s" in ran.out, ran
    else:
        assert ran.rc == CliExit.CANNOT_JUDGE and "within 0.5 s" in ran.err, ran
    if command is report:
        output_whole(target, ran)


def test_an_endless_body_is_cut_at_the_size_limit_with_bounded_memory(prom: HostilePrometheus) -> None:
    """An answer that never ends is refused at MAX_RESPONSE_BYTES, each of the report's parallel queries holding
    up to about twice that (measured: 449 MiB peak with 4 in flight; 1.9 GiB before the queries not begun were
    cancelled on the first failure), and the command ends."""
    prom.answer = Answer(body=b"", length="none", endless=True)
    tracemalloc.start()
    try:
        ran = run_cli(
            [
                "gate",
                "--commit",
                "a",
                "--baseline",
                "b",
                "--max-regression",
                "5%",
                "--prometheus-url",
                prom.url,
                "--timeout",
                "30",
            ]
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    holds(ran)
    assert ran.rc == CliExit.CANNOT_JUDGE and "more than 64 MiB" in ran.err, ran
    assert peak < 2 * (PARALLEL_QUERIES + 1) * MAX_RESPONSE_BYTES, peak  # ~2 copies per query in flight


def test_a_gzip_bomb_is_cut_at_the_size_limit_after_decompression(prom: HostilePrometheus) -> None:
    """96 KiB on the wire that inflate to 96 MiB: the limit counts what the body decompresses to."""
    bomb = gzip.compress(b" " * (96 * 1024 * 1024), compresslevel=9)
    prom.answer = Answer(headers={"Content-Type": "application/json", "Content-Encoding": "gzip"}, body=bomb)
    ran = gate(prom)
    holds(ran)
    assert len(bomb) < 1024 * 1024 and ran.rc == CliExit.CANNOT_JUDGE and "more than 64 MiB" in ran.err, ran
