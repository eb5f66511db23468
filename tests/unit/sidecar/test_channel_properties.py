"""Property tests of the trainer -> sidecar channel (#33): generated streams written to the real file
on disk, read by the real tailer and collector (a registry scraped as Prometheus would).

The oracle is the generated stream itself (which records were written, which lines were made bad by
construction), never the decoder: every valid record is exported, every bad line counted once, a
record still being written is waited for (never counted bad), no counter goes down or turns
NaN/infinite, whatever the chunking; and across replacements and truncations, every record the
tailer could have seen is exported.
"""

from __future__ import annotations

import math
import os
import tempfile
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from statictrain import metrics
from statictrain.channel import MAX_COUNT, MAX_RANKS, MAX_STEP_SECONDS, StepRecord, encode
from statictrain_sidecar.collector import SidecarCollector
from statictrain_sidecar.nvml import GpuSampler
from statictrain_sidecar.settings import Identity
from statictrain_sidecar.tailer import ChannelTailer
from statictrain_sidecar.training import TrainingFeed, TrainingState

MAX_LINE = 2048
"""The tailer's line limit in these tests (small, so overlong lines stay cheap to generate)."""
COUNTERS = (metrics.TRAIN_STEPS_TOTAL, metrics.TRAIN_TOKENS_TOTAL, metrics.TRAIN_SAMPLES_TOTAL,
            metrics.CHANNEL_MALFORMED_TOTAL, metrics.TRAIN_STEP_SECONDS + "_sum",
            metrics.TRAIN_STEP_SECONDS + "_count")


@dataclass
class Channel:
    """A real channel file read by a real tailer, feed and collector."""

    path: Path
    tailer: ChannelTailer
    registry: CollectorRegistry
    seen: dict[str, float] = field(default_factory=dict)

    def scrape(self) -> dict[str, float]:
        """Collect once (the tailer reads what is new), checking no counter went down or went non-finite."""
        values = {s.name: float(s.value) for m in self.registry.collect() for s in m.samples if s.name in COUNTERS}
        for name, value in values.items():
            assert math.isfinite(value), (name, value)
            assert value >= self.seen.get(name, 0.0), (name, value, self.seen.get(name))
        self.seen = values
        return values


@pytest.fixture
def folder() -> Iterator[Path]:
    """A directory for one test; each example writes its own channel file in it (fresh())."""
    with tempfile.TemporaryDirectory() as d:
        yield Path(d)


def fresh(folder: Path, name: str) -> Channel:
    path = folder / name
    tailer = ChannelTailer(path, max_line_bytes=MAX_LINE)
    clock = iter(range(10**9)).__next__
    feed = TrainingFeed(tailer, TrainingState(0.0), lambda: float(clock()))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SidecarCollector(Identity(), GpuSampler(None, enabled=False), feed, version="test"))
    return Channel(path, tailer, registry)


records = st.builds(
    StepRecord,
    step=st.integers(0, MAX_COUNT),
    step_seconds=st.floats(0, MAX_STEP_SECONDS),
    tokens=st.integers(0, MAX_COUNT),
    samples=st.integers(0, 2**20),
    loss=st.floats(allow_nan=True, allow_infinity=True),
    mfu=st.floats(allow_nan=True, allow_infinity=True),
    graph_breaks=st.integers(0, MAX_COUNT),
    cache_status=st.text(max_size=64),
    rank_seconds=st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=8).map(tuple),
)

_POISON_INT = ["1" + "0" * 400, "1e400", "NaN", "-Infinity", "-1", "1.5", "true", '"7"', str(MAX_COUNT + 1), "null"]
_POISON_SECONDS = ["1e400", "NaN", "-0.5", str(MAX_STEP_SECONDS * 2), "true", "null", "[]", "1" + "0" * 400]
_BASE = {"v": "1", "step": "3", "step_seconds": "0.5", "tokens": "10"}


def _obj(fields: dict[str, str]) -> bytes:
    return ("{" + ",".join(f'"{k}":{v}' for k, v in fields.items()) + "}").encode()


bad_lines = st.one_of(
    st.builds(lambda b: b"#" + b, st.binary(max_size=80).map(lambda b: b.replace(b"\n", b""))),  # not JSON
    st.builds(lambda k, v: _obj({**_BASE, k: v}),
              st.sampled_from(["step", "tokens", "samples", "graph_breaks", "recompiles", "rank", "world_size"]),
              st.sampled_from(_POISON_INT)),
    st.builds(lambda v: _obj({**_BASE, "step_seconds": v}), st.sampled_from(_POISON_SECONDS)),
    st.builds(lambda v: _obj({**_BASE, "v": v}), st.sampled_from(["2", "0", "true", '"1"', "1e400"])),
    st.sampled_from([
        _obj({**_BASE, "rank_seconds": "[1" + "0" * 400 + "]"}),
        _obj({**_BASE, "rank_seconds": "[" + ",".join(["0"] * (MAX_RANKS + 1)) + "]"}),
        _obj({"v": "1", "step": "1"}),
        b"[" * 1500,
        b'{"v":1,"step":1,"step_seconds":1,"cache_status":"\xff\xfe"}',
        b"[1,2,3]",
    ]),
    st.integers(MAX_LINE + 1, 3 * MAX_LINE).map(lambda n: _obj({**_BASE, "pad": '"' + "x" * n + '"'})),
)
"""Lines that are malformed by construction (no newline inside, never blank)."""


@given(
    items=st.lists(st.one_of(records, bad_lines), max_size=25),
    data=st.data(),
)
def test_every_valid_record_is_exported_and_every_bad_line_counted_whatever_the_chunking(
    folder: Path, items: list[StepRecord | bytes], data: st.DataObject
) -> None:
    c = fresh(folder, f"steps-{os.urandom(4).hex()}.jsonl")
    stream = b"".join((encode(i).encode() if isinstance(i, StepRecord) else i + b"\n") for i in items)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8), label="cuts"))
    try:
        with c.path.open("ab") as f:
            for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
                f.write(stream[start:end])
                f.flush()
                c.scrape()  # a partial line at the end must be waited for, not counted
        values = c.scrape()
    finally:
        c.tailer.close()
    valid = [i for i in items if isinstance(i, StepRecord)]
    assert values[metrics.TRAIN_STEPS_TOTAL] == len(valid)
    assert values[metrics.TRAIN_TOKENS_TOTAL] == float(sum(r.tokens for r in valid))
    assert values[metrics.TRAIN_SAMPLES_TOTAL] == float(sum(r.samples for r in valid))
    assert values[metrics.CHANNEL_MALFORMED_TOTAL] == len(items) - len(valid)
    assert values[metrics.TRAIN_STEP_SECONDS + "_count"] == len(valid)
    up = c.registry.get_sample_value(metrics.CHANNEL_UP, {**dict.fromkeys(Identity.LABEL_NAMES, ""),
                                                          "reason": "ok"})
    assert (up == 1) == (not items or isinstance(items[-1], StepRecord))


ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 3)),
        st.tuples(st.just("poll"), st.just(0)),
        st.tuples(st.just("replace"), st.integers(0, 3)),
        st.tuples(st.just("truncate"), st.just(0)),
    ),
    max_size=20,
)


@given(ops=ops)
def test_replaced_and_truncated_files_lose_only_what_no_reader_could_see(
    folder: Path, ops: list[tuple[str, int]]
) -> None:
    """The model: the tailer holds the file it reads; at a poll it reads that file to its end, then
    the file the path names if that is another one. Lost, by design: what a truncation removed before
    a poll, and files replaced again before any poll saw them."""
    c = fresh(folder, f"steps-{os.urandom(4).hex()}.jsonl")
    files: dict[int, list[int]] = {0: []}  # file number -> tokens of its records, in order
    current, held, read = 0, None, 0  # the path's file; the tailer's file and how many of it were read
    expected: list[int] = []
    serial = 0

    def poll() -> None:
        nonlocal held, read
        c.scrape()
        if held is not None:
            expected.extend(files[held][read:])
            read = len(files[held])
        if held != current and c.path.exists():
            held, read = current, len(files[current])
            expected.extend(files[current])

    try:
        for op, n in ops:
            if op == "append":
                with c.path.open("a") as f:
                    for _ in range(n):
                        serial += 1
                        f.write(encode(StepRecord(step=serial, step_seconds=0.1, tokens=serial)))
                        files[current].append(serial)
            elif op == "poll":
                poll()
            elif op == "replace":
                new = len(files)
                files[new] = list(range(serial + 1, serial + n + 1))
                serial += n
                tmp = c.path.with_suffix(".tmp")
                tmp.write_text("".join(encode(StepRecord(step=t, step_seconds=0.1, tokens=t)) for t in files[new]))
                os.replace(tmp, c.path)
                current = new
            else:  # truncate in place, and a poll sees it shrink (truncated and grown again: see the unit test)
                with c.path.open("r+" if c.path.exists() else "w") as f:
                    f.truncate(0)
                files[current] = []
                if held == current:
                    read = 0
                poll()
        poll()
        values = c.scrape()
    finally:
        c.tailer.close()
    assert values[metrics.TRAIN_STEPS_TOTAL] == len(expected)
    assert values[metrics.TRAIN_TOKENS_TOTAL] == float(sum(expected))
    assert values[metrics.CHANNEL_MALFORMED_TOTAL] == 0


@pytest.mark.timeout(120)
def test_memory_stays_bounded_on_a_huge_file_without_newlines(tmp_path: Path) -> None:
    path = tmp_path / "steps.jsonl"
    with path.open("wb") as f:
        for _ in range(32):
            f.write(b"x" * (1 << 20))  # 32 MiB, no newline
        f.write(b"\n" + encode(StepRecord(step=1, step_seconds=0.1)).encode())
    tailer = ChannelTailer(path)
    tracemalloc.start()
    try:
        found: list[StepRecord] = []
        malformed = 0
        for _ in range(40):
            result = tailer.poll()
            found += result.records
            malformed += len(result.malformed)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        tailer.close()
    assert [r.step for r in found] == [1] and malformed == 1
    assert peak < 8 << 20, peak  # one read (1 MiB) and one line (64 KiB) at a time, not the file
