"""The channel tailer: partial lines, malformed records counted and skipped, rotation and truncation."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from statictrain.channel import StepRecord, encode
from statictrain_sidecar.tailer import ChannelTailer


def rec(step: int, seconds: float = 0.25) -> str:
    return encode(StepRecord(step=step, step_seconds=seconds, tokens=100))


def test_missing_file_is_not_an_error(tmp_path: Path) -> None:
    assert ChannelTailer(tmp_path / "steps.jsonl").poll().records == []


def test_reads_only_what_was_appended(tmp_path: Path) -> None:
    path = tmp_path / "steps.jsonl"
    t = ChannelTailer(path)
    path.write_text(rec(1) + rec(2))
    assert [r.step for r in t.poll().records] == [1, 2]
    assert t.poll().records == []
    with path.open("a") as f:
        f.write(rec(3))
    assert [r.step for r in t.poll().records] == [3]


def test_partial_line_waits_for_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "steps.jsonl"
    t = ChannelTailer(path)
    line = rec(5)
    path.write_text(line[:10])
    result = t.poll()
    assert result.records == [] and result.malformed == []
    with path.open("a") as f:
        f.write(line[10:])
    assert [r.step for r in t.poll().records] == [5]


MALFORMED = [
    ("not-json", b"garbage\n"),
    ("not-an-object", b"[1, 2]\n"),
    ("newer-major-version", b'{"v": 99, "step": 1, "step_seconds": 1}\n'),
    ("missing-step-seconds", b'{"v": 1, "step": 1}\n'),
    ("bad-type", b'{"v": 1, "step": "one", "step_seconds": 1}\n'),
    ("negative-step", b'{"v": 1, "step": -1, "step_seconds": 1}\n'),
    ("not-utf8", b'{"v": 1, "step": 1, "step_seconds": 1, "x": "\xff\xfe"}\n'),
    # numbers no counter or sum may take (#33): huge, infinite, NaN, negative
    ("huge-int-tokens", b'{"v": 1, "step": 1, "step_seconds": 1, "tokens": 1' + b"0" * 400 + b"}\n"),
    ("infinite-tokens", b'{"v": 1, "step": 1, "step_seconds": 1, "tokens": 1e400}\n'),
    ("nan-tokens", b'{"v": 1, "step": 1, "step_seconds": 1, "tokens": NaN}\n'),
    ("negative-tokens", b'{"v": 1, "step": 1, "step_seconds": 1, "tokens": -1000}\n'),
    ("negative-samples", b'{"v": 1, "step": 1, "step_seconds": 1, "samples": -1}\n'),
    ("past-2**53", b'{"v": 1, "step": 1, "step_seconds": 1, "graph_breaks": 9007199254740993}\n'),
    ("huge-step", b'{"v": 1, "step": 1' + b"0" * 400 + b', "step_seconds": 1}\n'),
    ("infinite-step-seconds", b'{"v": 1, "step": 1, "step_seconds": 1e400}\n'),
    ("nan-step-seconds", b'{"v": 1, "step": 1, "step_seconds": NaN}\n'),
    ("huge-int-rank-seconds", b'{"v": 1, "step": 1, "step_seconds": 1, "rank_seconds": [1' + b"0" * 400 + b"]}\n"),
    ("too-many-ranks", b'{"v": 1, "step": 1, "step_seconds": 1, "rank_seconds": [' + b"0," * 4096 + b"0]}\n"),
    ("deep-nesting", b"[" * 60_000 + b"\n"),
    ("boolean-version", b'{"v": true, "step": 1, "step_seconds": 1}\n'),
]


@pytest.mark.parametrize("line", [c[1] for c in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_malformed_line_is_counted_and_skipped_between_good_ones(tmp_path: Path, line: Any) -> None:
    path = tmp_path / "steps.jsonl"
    path.write_bytes(rec(1).encode() + line + rec(2).encode())
    result = ChannelTailer(path).poll()
    assert [r.step for r in result.records] == [1, 2]
    assert len(result.malformed) == 1


def test_unknown_keys_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "steps.jsonl"
    path.write_text('{"v": 1, "step": 3, "step_seconds": 0.5, "from_the_future": [1]}\n')
    assert [r.step for r in ChannelTailer(path).poll().records] == [3]


def test_overlong_line_is_skipped_once_even_across_polls(tmp_path: Path) -> None:
    path = tmp_path / "steps.jsonl"
    t = ChannelTailer(path, max_line_bytes=300)
    assert len(rec(9)) < 300
    path.write_text("x" * 400)
    assert len(t.poll().malformed) == 1
    with path.open("a") as f:
        f.write("y" * 400)
    assert t.poll().malformed == []
    with path.open("a") as f:
        f.write("z\n" + rec(9))
    result = t.poll()
    assert [r.step for r in result.records] == [9]
    assert result.malformed == []


def test_truncated_file_is_read_from_the_start(tmp_path: Path) -> None:
    path = tmp_path / "steps.jsonl"
    t = ChannelTailer(path)
    path.write_text(rec(1) + rec(2) + rec(3))
    t.poll()
    path.write_text(rec(1))
    assert [r.step for r in t.poll().records] == [1]


def test_replaced_file_is_read_from_the_start(tmp_path: Path) -> None:
    path = tmp_path / "steps.jsonl"
    t = ChannelTailer(path)
    path.write_text(rec(1) + rec(2))
    t.poll()
    new = tmp_path / "new.jsonl"
    new.write_text(rec(10) + rec(11) + rec(12))
    os.replace(new, path)
    assert [r.step for r in t.poll().records] == [10, 11, 12]


def test_reads_are_bounded_per_poll(tmp_path: Path) -> None:
    path = tmp_path / "steps.jsonl"
    lines = "".join(rec(i) for i in range(1, 201))
    path.write_text(lines)
    t = ChannelTailer(path, max_read_bytes=len(lines) // 4)
    steps: list[int] = []
    polls = 0
    while (got := t.poll().records) or polls == 0:
        steps += [r.step for r in got]
        polls += 1
    assert steps == list(range(1, 201))
    assert polls >= 4


def test_a_file_truncated_and_written_again_between_polls_is_read_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "steps.jsonl"
    t = ChannelTailer(path)
    path.write_text(rec(1) + rec(2))
    t.poll()
    path.write_text("")  # truncated in place (same inode), then more than before written
    with path.open("a") as f:
        f.write(rec(10) + rec(11) + rec(12))
    result = t.poll()
    assert [r.step for r in result.records] == [10, 11, 12]
    assert result.malformed == []


def test_what_the_old_file_got_before_it_was_replaced_is_still_read(tmp_path: Path) -> None:
    path = tmp_path / "steps.jsonl"
    t = ChannelTailer(path)
    path.write_text(rec(1))
    t.poll()
    with path.open("a") as f:  # the writer's last record, then the file is replaced
        f.write(rec(2) + rec(3)[:7])
    new = tmp_path / "new.jsonl"
    new.write_text(rec(10))
    os.replace(new, path)
    result = t.poll()
    assert [r.step for r in result.records] == [2, 10]
    assert result.malformed == ["incomplete last line of a replaced channel file"]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "symlink-out", "directory"])
def test_only_a_regular_file_is_read_never_a_link_fifo_or_device(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "steps.jsonl"
    outside = tmp_path.parent / f"{tmp_path.name}-outside.jsonl"
    outside.write_text(rec(1))
    {
        "fifo": lambda: os.mkfifo(path),
        "dev-zero": lambda: path.symlink_to("/dev/zero"),
        "symlink-out": lambda: path.symlink_to(outside),
        "directory": path.mkdir,
    }[kind]()
    t = ChannelTailer(path)
    for _ in range(3):  # looked at again at every poll, never blocking
        result = t.poll()
        assert result.records == [] and result.malformed == []
        assert t.status == "not_a_file", t.detail
    (path.rmdir if kind == "directory" else path.unlink)()
    path.write_text(rec(7))
    assert [r.step for r in t.poll().records] == [7]
    assert t.status == "ok"


def test_status_says_whether_the_latest_line_was_valid(tmp_path: Path) -> None:
    path = tmp_path / "steps.jsonl"
    t = ChannelTailer(path)
    t.poll()
    assert t.status == "waiting_for_trainer"
    path.write_text(rec(1))
    t.poll()
    assert t.status == "ok"
    with path.open("a") as f:
        f.write("garbage\n" + rec(2)[:5])  # a partial line is not (yet) bad
    t.poll()
    assert t.status == "malformed"
    with path.open("a") as f:
        f.write(rec(2)[5:])
    assert [r.step for r in t.poll().records] == [2]
    assert t.status == "ok"
