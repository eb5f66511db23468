"""The assembled sidecar (app.build) serving real HTTP on a free port, with a fake NVML module."""

from __future__ import annotations

import json
import select
import socket
import struct
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from statictrain import metrics
from statictrain.channel import StepRecord, encode
from statictrain_sidecar import server as server_module
from statictrain_sidecar.app import Clocks, Sidecar, build
from statictrain_sidecar.collector import EXPORTED_METRICS
from statictrain_sidecar.settings import Identity, Settings, SettingsError

GPU_IS_LOST = 15
TOKEN = "0123456789abcdef0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def sidecar(tmp_path: Path, fake_nvml: Any, gpu: Any, clock: Any, publish_gpus: Any) -> Iterator[Sidecar]:
    g = [gpu(0, "GPU-x"), gpu(1, "GPU-y", fail={"nvmlDeviceGetClockInfo": GPU_IS_LOST})]
    token_file = tmp_path.parent / f"{tmp_path.name}-token"
    token_file.write_text(TOKEN + "\n")
    settings = Settings(
        profile_token_file=token_file,
        identity=Identity("j", "ns", "c0ffee", "t", "j-worker-0", "uid-1"),
        stats_dir=tmp_path,
        port=0,
        bind="127.0.0.1",
        sample_interval_s=0.05,
    )
    publish_gpus(tmp_path, [d.uuid for d in g])  # as the pod's trainer processes do
    s = build(settings, fake_nvml(g), Clocks(monotonic=clock, wall=lambda: 1_800_000_000.0))
    s.start()
    yield s
    s.stop()


def get(
    s: Sidecar, path: str, method: str = "GET", headers: dict[str, str] | None = None
) -> tuple[int, bytes, str]:
    req = urllib.request.Request(f"http://127.0.0.1:{s.port}{path}", method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read(), resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers.get("Content-Type", "")


def test_metrics_endpoint_exports_exactly_the_documented_names(sidecar: Sidecar, tmp_path: Path) -> None:
    (tmp_path / "steps.jsonl").write_text(
        encode(
            StepRecord(
                step=3,
                step_seconds=0.2,
                tokens=10,
                samples=1,
                loss=1.5,
                compile_seconds=2.0,
                mfu=0.3,
                rank_seconds=(0.1,),
                settings="default@8",
                settings_by="autotune",
                autotune_speedup=1.1,
            )
        )
        + "junk\n"
    )
    status, body, ctype = get(sidecar, "/metrics")
    assert status == 200 and ctype.startswith("text/plain")
    families = list(text_string_to_metric_families(body.decode()))
    samples = {s.name: s for f in families for s in f.samples if s.labels.get("gpu") != "1"}
    base = {
        s.name.removesuffix("_bucket").removesuffix("_count").removesuffix("_sum") for s in samples.values()
    }
    base.add(metrics.GPU_QUERY_ERRORS_TOTAL)  # only GPU 1 has failed queries
    assert base == set(EXPORTED_METRICS)
    assert samples[metrics.TRAIN_STEP].labels == {
        "job_name": "j",
        "namespace": "ns",
        "commit": "c0ffee",
        "team": "t",
        "pod": "j-worker-0",
        "pod_uid": "uid-1",
    }
    assert samples[metrics.GPU_POWER_WATTS].labels["gpu_uuid"] == "GPU-x"
    assert samples[metrics.CHANNEL_MALFORMED_TOTAL].value == 1
    for f in families:  # counters, and only counters, end in _total
        if f.type == "counter":
            assert f"{f.name}_total" in EXPORTED_METRICS
        else:
            assert not f.name.endswith("_total") and f.name in EXPORTED_METRICS
    errors = [s for f in families for s in f.samples if s.name == metrics.GPU_QUERY_ERRORS_TOTAL]
    assert [(s.labels["gpu_uuid"], s.labels["query"], s.value) for s in errors] == [("GPU-y", "sm_clock", 1)]


def test_openmetrics_when_asked(sidecar: Sidecar) -> None:
    req = urllib.request.Request(
        f"http://127.0.0.1:{sidecar.port}/metrics",
        headers={"Accept": "application/openmetrics-text; version=1.0.0"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
        assert resp.read().endswith(b"# EOF\n")


@pytest.mark.parametrize(
    "accept",
    ["application/openmetrics-text; version=abc", "text/plain; version=1.x", "text/plain;version=;q=1"],
)
def test_an_accept_header_with_a_bad_version_gets_the_text_format(sidecar: Sidecar, accept: str) -> None:
    # prometheus_client's choose_encoder raised TypeError on these: no answer at all (found while
    # writing the property test of the HTTP surface)
    status, body, ctype = get(sidecar, "/metrics", headers={"Accept": accept})
    assert status == 200 and ctype.startswith("text/plain; version=0.0.4") and b"statictrain_sidecar_info" in body


def test_healthz(sidecar: Sidecar) -> None:
    assert get(sidecar, "/healthz")[:2] == (200, b"ok (trainer channel: waiting_for_trainer)\n")


def test_profile_request_over_http(sidecar: Sidecar, tmp_path: Path) -> None:
    status, body, _ = get(sidecar, "/profile?steps=4", "POST", AUTH)
    assert status == 202
    ticket = json.loads(body)
    assert json.loads(Path(ticket["request"]).read_text()) == {"v": 1, "steps": 4}
    assert get(sidecar, "/profile?steps=4", "POST", AUTH)[0] == 409
    assert get(sidecar, "/profile?steps=100000", "POST", AUTH)[0] == 400
    # the trainer takes the request and writes its capture
    Path(ticket["request"]).unlink()
    out = Path(ticket["output"])
    out.mkdir(parents=True)
    (out / "trace.json").write_text('{"traceEvents": []}')
    listing = json.loads(get(sidecar, "/profiles", headers=AUTH)[1])
    assert [(p["id"], p["state"], p["files"]) for p in listing] == [
        (ticket["id"], "captured", ["trace.json"])
    ]
    status, body, _ = get(sidecar, f"{ticket['fetch']}trace.json", headers=AUTH)
    assert (status, body) == (200, b'{"traceEvents": []}')
    assert get(sidecar, f"{ticket['fetch']}..%2F..%2Fsteps.jsonl", headers=AUTH)[0] == 404


def test_unknown_paths_are_404(sidecar: Sidecar) -> None:
    assert get(sidecar, "/nope")[0] == 404
    assert get(sidecar, "/metrics", "POST")[0] == 404


def test_without_a_channel_profile_requests_say_what_to_set(
    fake_nvml: Any, clock: Any, tmp_path: Path
) -> None:
    (tmp_path / "token").write_text(TOKEN)
    s = build(
        Settings(port=0, bind="127.0.0.1", profile_token_file=tmp_path / "token"),
        fake_nvml(),
        Clocks(monotonic=clock),
    )
    s.start()
    try:
        status, body, _ = get(s, "/profile?steps=1", "POST", AUTH)
        assert status == 503 and b"STATICTRAIN_STATS_DIR" in body
    finally:
        s.stop()


def test_profiling_is_off_without_a_token(fake_nvml: Any, clock: Any, tmp_path: Path) -> None:
    s = build(Settings(port=0, bind="127.0.0.1", stats_dir=tmp_path), fake_nvml(), Clocks(monotonic=clock))
    s.start()
    try:
        for path, method in [("/profile?steps=1", "POST"), ("/profiles", "GET"), ("/profiles/a/b", "GET")]:
            status, body, _ = get(s, path, method, AUTH)
            assert status == 403 and b"STATICTRAIN_PROFILE_TOKEN_FILE" in body
        assert get(s, "/metrics")[0] == 200
        assert not (tmp_path / "requests").exists()
    finally:
        s.stop()


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong-token-wrong-token"}, {"Authorization": TOKEN}, {"Authorization": "Basic x"}],
)
def test_profile_endpoints_refuse_a_missing_or_wrong_token(
    sidecar: Sidecar, tmp_path: Path, headers: dict[str, str]
) -> None:
    for path, method in [("/profile?steps=1", "POST"), ("/profiles", "GET"), ("/profiles/a/b", "GET")]:
        status, body, _ = get(sidecar, path, method, headers)
        assert status == 401 and b"Bearer" in body
    assert not (tmp_path / "requests").exists()  # nothing was requested


@pytest.mark.parametrize("content", ["", "x" * 8, "tooshort\n", "two words-two-words-two"])
def test_an_unusable_token_file_is_refused_at_build(
    fake_nvml: Any, clock: Any, tmp_path: Path, content: str
) -> None:
    (tmp_path / "token").write_text(content)
    with pytest.raises(SettingsError, match="STATICTRAIN_PROFILE_TOKEN_FILE"):
        build(Settings(port=0, bind="127.0.0.1", profile_token_file=tmp_path / "token"), fake_nvml())
    with pytest.raises(SettingsError, match="cannot read"):
        build(Settings(port=0, bind="127.0.0.1", profile_token_file=tmp_path / "absent"), fake_nvml())


def raw(s: Sidecar, request: bytes) -> bytes:
    """Send bytes on a real socket; everything the server answers until it closes the connection."""
    with socket.create_connection(("127.0.0.1", s.port), timeout=30) as conn:
        conn.sendall(request)
        out = b""
        while chunk := conn.recv(65536):
            out += chunk
    return out


@pytest.mark.parametrize(
    ("length", "status"),
    [("-1", b"400"), ("abc", b"400"), ("1e3", b"400"), ("99999999", b"413"), ("65537", b"413")],
)
def test_bad_content_lengths_are_refused_and_the_connection_closed(
    sidecar: Sidecar, tmp_path: Path, length: str, status: bytes
) -> None:
    for method in (b"GET /metrics", b"POST /profile?steps=1"):
        answer = raw(sidecar, method + b" HTTP/1.1\r\nHost: x\r\nContent-Length: " + length.encode() + b"\r\n"
                     b"Authorization: Bearer " + TOKEN.encode() + b"\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 " + status), answer[:80]
        assert b"Connection: close" in answer
    assert not (tmp_path / "requests").exists()


def test_chunked_and_duplicate_lengths_are_refused(sidecar: Sidecar) -> None:
    chunked = raw(sidecar, b"POST /profile?steps=1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    assert chunked.startswith(b"HTTP/1.1 411")
    twice = raw(sidecar, b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\n")
    assert twice.startswith(b"HTTP/1.1 400")


def test_a_small_body_is_read_and_the_connection_kept(sidecar: Sidecar) -> None:
    answer = raw(
        sidecar,
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    assert answer.count(b"HTTP/1.1 200") == 2


def test_a_silent_connection_is_closed_by_the_server(
    sidecar: Sidecar, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server_module._Handler, "timeout", 0.2)
    # headers never finished, then a body shorter than its Content-Length: both end in a close
    assert raw(sidecar, b"GET /metrics HTTP/1.1\r\nHost: x\r\n") == b""
    assert raw(sidecar, b"POST /profile HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc") == b""


def metric(body: bytes, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return None


@pytest.mark.parametrize(
    "bad",
    [
        '{"v": 1, "step": 2, "step_seconds": 1, "tokens": 1' + "0" * 400 + "}",
        '{"v": 1, "step": 2, "step_seconds": 1, "tokens": 1e400}',
        '{"v": 1, "step": 2, "step_seconds": 1, "rank_seconds": [1' + "0" * 400 + "]}",
        "[" * 60_000,
        '{"v": 1, "step": 2, "step_seconds": 1, "tokens": -1000}',
    ],
    ids=["huge-int", "infinite", "huge-rank-seconds", "deep-nesting", "negative"],
)
def test_one_bad_channel_line_never_stops_the_export_nor_loses_the_records_after_it(
    sidecar: Sidecar, tmp_path: Path, bad: str
) -> None:
    # #33: these lines made every later scrape fail (200 on /healthz all the while), lost the
    # valid records read with them, or made tokens_total go down
    with (tmp_path / "steps.jsonl").open("a") as f:
        f.write(encode(StepRecord(step=1, step_seconds=0.5, tokens=7)) + bad + "\n")
        f.write(encode(StepRecord(step=3, step_seconds=0.5, tokens=5)))
    status, body, _ = get(sidecar, "/metrics")
    assert status == 200
    assert metric(body, metrics.TRAIN_STEPS_TOTAL) == 2
    assert metric(body, metrics.TRAIN_TOKENS_TOTAL) == 12
    assert metric(body, metrics.CHANNEL_MALFORMED_TOTAL) == 1
    assert metric(body, metrics.TRAIN_STEP) == 3
    assert metric(body, metrics.CHANNEL_UP, reason="ok") == 1
    with (tmp_path / "steps.jsonl").open("a") as f:
        f.write(bad + "\n")
    status, body, _ = get(sidecar, "/metrics")
    assert status == 200 and metric(body, metrics.CHANNEL_UP, reason="malformed") == 0
    assert get(sidecar, "/healthz")[:2] == (200, b"ok (trainer channel: malformed)\n")


@pytest.mark.parametrize(
    "length", [b"\xb2", b"\xb9\xb2", "\u0661\u0662".encode(), b"+3", b"1_2", b"3 3", b"0x3", b"9" * 30]
)
def test_content_lengths_are_ascii_digits_only(sidecar: Sidecar, length: bytes) -> None:
    # #33: a header is read as latin-1, so the byte b'\xb2' is '²': isdigit() let it through and
    # int() then raised (a traceback, no answer at all); int() also takes '+3' and '1_2'
    answer = raw(sidecar, b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: " + length + b"\r\n\r\nabc")
    assert answer.startswith((b"HTTP/1.1 400", b"HTTP/1.1 413")), answer[:80]
    assert get(sidecar, "/healthz")[0] == 200


def test_a_lying_content_encoding_changes_nothing(sidecar: Sidecar) -> None:
    # bodies are read and dropped, never decoded: a "gzip" body that is not gzip is just bytes
    answer = raw(sidecar, b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n"
                          b"Connection: close\r\n\r\nnope")
    assert answer.startswith(b"HTTP/1.1 200") and b"Content-Encoding" not in answer


@pytest.mark.timeout(60)
def test_a_slow_client_is_cut_off_once_its_request_takes_too_long(
    sidecar: Sidecar, monkeypatch: pytest.MonkeyPatch
) -> None:
    # slowloris (#33): one byte every 0.05 s never hit the per-read timeout, so the connection (and
    # its thread) was held for as long as the client liked
    monkeypatch.setattr(server_module, "REQUEST_DEADLINE_S", 1.0)
    request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + b"X-Slow: " + b"a" * 200 + b"\r\n\r\n"
    with socket.create_connection(("127.0.0.1", sidecar.port), timeout=30) as conn:
        sent, closed = 0, False
        for sent in range(len(request)):  # 10 s in all: the deadline must cut it off long before
            try:
                conn.send(request[sent : sent + 1])
            except OSError:
                closed = True
                break
            readable, _, _ = select.select([conn], [], [], 0.05)
            if readable:
                closed = conn.recv(1024) == b"" or True
                break
    assert closed and sent < len(request) - 1
    assert get(sidecar, "/healthz")[0] == 200


@pytest.mark.timeout(60)
def test_connections_beyond_the_cap_are_turned_away_and_service_resumes(
    sidecar: Sidecar, monkeypatch: pytest.MonkeyPatch
) -> None:
    cap = server_module.MAX_CONNECTIONS
    idle = [socket.create_connection(("127.0.0.1", sidecar.port), timeout=30) for _ in range(cap)]
    try:
        time.sleep(0.5)  # the server has accepted them all (each holds a slot until it sends or times out)
        answer = raw(sidecar, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 503") and b"connections" in answer, answer[:80]
    finally:
        for c in idle:
            c.close()
    for _ in range(100):  # slots come back as the server sees the closes
        if get(sidecar, "/healthz")[0] == 200:
            break
        time.sleep(0.1)
    assert get(sidecar, "/healthz")[0] == 200


def test_a_client_that_resets_leaves_no_traceback(sidecar: Sidecar, capfd: pytest.CaptureFixture[str]) -> None:
    for _ in range(5):
        conn = socket.create_connection(("127.0.0.1", sidecar.port), timeout=30)
        conn.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()  # RST while the server writes the answer
    assert get(sidecar, "/healthz")[0] == 200
    assert "Traceback" not in capfd.readouterr().err
