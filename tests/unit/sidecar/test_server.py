"""The assembled sidecar (app.build) serving real HTTP on a free port, with a fake NVML module."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from statictrain import metrics
from statictrain.channel import StepRecord, encode
from statictrain_sidecar.app import Clocks, Sidecar, build
from statictrain_sidecar.collector import EXPORTED_METRICS
from statictrain_sidecar.settings import Identity, Settings

GPU_IS_LOST = 15


@pytest.fixture
def sidecar(tmp_path: Path, fake_nvml: Any, gpu: Any, clock: Any) -> Iterator[Sidecar]:
    g = [gpu(0, "GPU-x"), gpu(1, "GPU-y", fail={"nvmlDeviceGetClockInfo": GPU_IS_LOST})]
    settings = Settings(
        identity=Identity("j", "ns", "c0ffee", "t", "j-worker-0", "uid-1"),
        stats_dir=tmp_path,
        port=0,
        bind="127.0.0.1",
        sample_interval_s=0.05,
    )
    s = build(settings, fake_nvml(g), Clocks(monotonic=clock, wall=lambda: 1_800_000_000.0))
    s.start()
    yield s
    s.stop()


def get(s: Sidecar, path: str, method: str = "GET") -> tuple[int, bytes, str]:
    req = urllib.request.Request(f"http://127.0.0.1:{s.port}{path}", method=method)
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


def test_healthz(sidecar: Sidecar) -> None:
    assert get(sidecar, "/healthz")[:2] == (200, b"ok\n")


def test_profile_request_over_http(sidecar: Sidecar, tmp_path: Path) -> None:
    status, body, _ = get(sidecar, "/profile?steps=4", "POST")
    assert status == 202
    ticket = json.loads(body)
    assert json.loads(Path(ticket["request"]).read_text()) == {"v": 1, "steps": 4}
    assert get(sidecar, "/profile?steps=4", "POST")[0] == 409
    assert get(sidecar, "/profile?steps=100000", "POST")[0] == 400
    # the trainer takes the request and writes its capture
    Path(ticket["request"]).unlink()
    out = Path(ticket["output"])
    out.mkdir(parents=True)
    (out / "trace.json").write_text('{"traceEvents": []}')
    listing = json.loads(get(sidecar, "/profiles")[1])
    assert [(p["id"], p["state"], p["files"]) for p in listing] == [
        (ticket["id"], "captured", ["trace.json"])
    ]
    status, body, _ = get(sidecar, f"{ticket['fetch']}trace.json")
    assert (status, body) == (200, b'{"traceEvents": []}')
    assert get(sidecar, f"{ticket['fetch']}..%2F..%2Fsteps.jsonl")[0] == 404


def test_unknown_paths_are_404(sidecar: Sidecar) -> None:
    assert get(sidecar, "/nope")[0] == 404
    assert get(sidecar, "/metrics", "POST")[0] == 404


def test_without_a_channel_profile_requests_say_what_to_set(fake_nvml: Any, clock: Any) -> None:
    s = build(Settings(port=0, bind="127.0.0.1"), fake_nvml(), Clocks(monotonic=clock))
    s.start()
    try:
        status, body, _ = get(s, "/profile?steps=1", "POST")
        assert status == 503 and b"STATICTRAIN_STATS_DIR" in body
    finally:
        s.stop()
