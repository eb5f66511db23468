"""Property tests of the sidecar's HTTP surface (#33): generated hostile requests against the real
sidecar (app.build, real HTTP on a loopback port, a real stats directory with a planted symlink).

Whatever arrives on the socket: never a 500 and never a traceback, the next valid request is served,
the server's threads stay bounded, and nothing is written or deleted outside the stats directory (its
``requests/`` and ``profiles/evil`` are symlinks out of it, as a hostile trainer could plant).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from statictrain.channel import PROFILES_DIR, REQUESTS_DIR
from statictrain_sidecar import server as server_module
from statictrain_sidecar.app import Clocks, Sidecar, build
from statictrain_sidecar.settings import Identity, Settings

TOKEN = "0123456789abcdef0123456789abcdef"
ALLOWED = {100, 200, 202, 400, 401, 403, 404, 409, 411, 413, 414, 431, 501, 503, 505}
"""Every status the sidecar may answer: 500 is not among them."""


@dataclass
class Rig:
    sidecar: Sidecar
    root: Path
    stats: Path
    outside: Path


def tree(folder: Path) -> dict[str, bytes | None]:
    """Every entry below ``folder`` (links not followed) with a file's content."""
    return {
        str(p.relative_to(folder)): (p.read_bytes() if p.is_file() and not p.is_symlink() else None)
        for p in sorted(folder.rglob("*"))
    }


@pytest.fixture
def rig(tmp_path: Path, fake_nvml: Any, clock: Any) -> Iterator[Rig]:
    stats, outside = tmp_path / "stats", tmp_path / "outside"
    (outside / "p1").mkdir(parents=True)
    (outside / "p1" / "trace.json").write_text("not yours")
    (outside / "profile-old.json").write_text("{}")
    os.utime(outside / "profile-old.json", (0, 0))  # long expired, were requests/ followed
    (stats / PROFILES_DIR / "p2").mkdir(parents=True)
    (stats / PROFILES_DIR / "p2" / "trace.json").write_text("{}")
    (stats / PROFILES_DIR / "evil").symlink_to(outside / "p1")  # a hostile trainer's links
    (stats / REQUESTS_DIR).symlink_to(outside)
    (tmp_path / "token").write_text(TOKEN)
    settings = Settings(
        identity=Identity("j", "ns", "c", "t", "j-0", "uid"),
        stats_dir=stats,
        port=0,
        bind="127.0.0.1",
        sample_interval_s=0.05,
        profile_max_bytes=1 << 20,
        profile_token_file=tmp_path / "token",
    )
    s = build(settings, fake_nvml(), Clocks(monotonic=clock, wall=lambda: 1_800_000_000.0))
    s.start()
    yield Rig(s, tmp_path, stats, outside)
    s.stop()


def exchange(port: int, data: bytes) -> bytes:
    """Send ``data``, close the sending side, read the answer until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        try:
            conn.sendall(data)
            conn.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server already closed (it may answer before reading everything)
        out = b""
        try:
            while chunk := conn.recv(65536):
                out += chunk
        except ConnectionResetError:
            pass
    return out


def statuses(answer: bytes) -> list[int]:
    """The status code of every response in ``answer`` (pipelined requests give several)."""
    codes = []
    for line in answer.split(b"\r\n"):
        if line.startswith((b"HTTP/1.1 ", b"HTTP/1.0 ")) and line[9:12].isdigit():
            codes.append(int(line[9:12]))
    return codes


def still_serves(port: int) -> None:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
        assert resp.status == 200 and b"statictrain_sidecar_info" in resp.read()


def check_after(rig: Rig, answer: bytes, caplog: pytest.LogCaptureFixture, before: dict[str, bytes | None]) -> None:
    assert ALLOWED.issuperset(statuses(answer)), answer[:200]
    still_serves(rig.sidecar.port)
    bad = [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage() or r.levelno >= logging.ERROR]
    assert not bad, [r.getMessage() for r in bad]
    assert threading.active_count() <= 8 + server_module.MAX_CONNECTIONS
    assert tree(rig.outside) == before
    assert sorted(p.name for p in rig.root.iterdir()) == ["outside", "stats", "token"]


_TOKEN_CHARS = st.sampled_from("abcXYZ019-_.!#$%&'*+^`|~")
_LATIN1 = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF, blacklist_characters="\x7f"), max_size=40)
_HEADER_VALUES = st.one_of(
    _LATIN1,
    st.sampled_from(["\xb2", "\xb9\xb2", "+3", "1_2", " 12 ", "-1", "0x10", "9" * 30, "3", "0", "65537"]),
    st.sampled_from([f"Bearer {TOKEN}", "Bearer x", "gzip", "chunked", "identity, gzip"]),
    st.sampled_from(["application/openmetrics-text; version=abc", "text/plain;version=1.0.0;escaping=x"]),
)
_HEADER_NAMES = st.one_of(
    st.sampled_from(
        ["Content-Length", "Transfer-Encoding", "Content-Encoding", "Authorization", "Accept", "Connection",
         "Expect", "Host", "Content-Type"]
    ),
    st.text(_TOKEN_CHARS, min_size=1, max_size=20),
)
_PATHS = st.one_of(
    st.sampled_from(["/metrics", "/healthz", "/profiles", "/profile", "/profiles/p2/trace.json",
                     "/profiles/evil/trace.json", "/profiles/p2/..%2F..%2F..%2Foutside%2Fp1%2Ftrace.json",
                     "/profiles/%2e%2e/token", "*", "http://x/metrics", "//metrics"]),
    st.one_of(
        st.sampled_from(["1", "\xd9\xa1", "%D9%A1", "+1", "1_0", "%201%20", "0", "-1", "9" * 12, "1&steps=2"]),
        st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=12),
    ).map(lambda steps: "/profile?steps=" + steps),
    st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=30).map(lambda t: "/" + t),
)


_HOSTILE_HEADERS = st.sampled_from(
    [
        ("Accept", "application/openmetrics-text; version=abc"),
        ("Accept", "text/plain; version=1.x, application/openmetrics-text"),
        ("Content-Length", "\xb2"),
        ("Content-Length", "+3"),
        ("Content-Length", "99999999"),
        ("Content-Length", "5"),
        ("Transfer-Encoding", "chunked"),
        ("Content-Encoding", "gzip"),
        ("Authorization", f"Bearer {TOKEN}"),
        ("Expect", "100-continue"),
        ("Connection", "keep-alive"),
    ]
)


@st.composite
def requests(draw: st.DrawFn) -> bytes:
    method = draw(st.sampled_from(["GET", "GET", "POST", "HEAD", "PUT", "OPTIONS", "BREW", "get", ""]))
    version = draw(st.sampled_from(["HTTP/1.1", "HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/1.1x", ""]))
    headers = draw(st.lists(st.one_of(_HOSTILE_HEADERS, st.tuples(_HEADER_NAMES, _HEADER_VALUES)), max_size=6))
    body = draw(st.binary(max_size=200))
    head = f"{method} {draw(_PATHS)} {version}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
    return head.encode("latin-1") + b"\r\n" + body


@given(request=requests())
def test_generated_requests_never_get_a_500_nor_leave_a_traceback(
    rig: Rig, caplog: pytest.LogCaptureFixture, request: bytes
) -> None:
    caplog.clear()
    before = tree(rig.outside)
    answer = exchange(rig.sidecar.port, request)
    rig.sidecar.profiles.housekeep()  # type: ignore[union-attr]
    check_after(rig, answer, caplog, before)


@given(data=st.binary(max_size=3000), prefix=st.sampled_from([b"", b"GET /metrics HTTP/1.1\r\n", b"POST /profile"]))
def test_raw_bytes_on_the_socket_never_get_a_500_nor_leave_a_traceback(
    rig: Rig, caplog: pytest.LogCaptureFixture, data: bytes, prefix: bytes
) -> None:
    caplog.clear()
    before = tree(rig.outside)
    answer = exchange(rig.sidecar.port, prefix + data)
    check_after(rig, answer, caplog, before)


def test_the_planted_link_is_neither_served_nor_listed(rig: Rig) -> None:
    req = urllib.request.Request(
        f"http://127.0.0.1:{rig.sidecar.port}/profiles/evil/trace.json", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=30)
    assert e.value.code == 404
    e.value.close()
    listing = urllib.request.Request(
        f"http://127.0.0.1:{rig.sidecar.port}/profiles", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    with urllib.request.urlopen(listing, timeout=30) as resp:
        assert b"evil" not in resp.read()
