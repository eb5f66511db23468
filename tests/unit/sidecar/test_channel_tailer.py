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
