from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
import torch
from statictrain_trainer import checkpoint
from statictrain_trainer.exitcodes import UserError


def _state(value: float) -> dict[str, object]:
    return {"model": {"w": torch.full((4,), value)}}


def test_save_then_load_latest(tmp_path: Path) -> None:
    for step in (5, 10, 15):
        checkpoint.save(tmp_path, step, _state(step), keep=5)
    found = checkpoint.load_latest(tmp_path)
    assert found is not None
    assert found.step == 15
    assert torch.equal(found.state["model"]["w"], torch.full((4,), 15.0))


def test_keeps_only_last_k(tmp_path: Path) -> None:
    for step in range(1, 7):
        checkpoint.save(tmp_path, step, _state(step), keep=2)
    assert checkpoint.list_steps(tmp_path) == [6, 5]


def test_truncated_newest_is_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    checkpoint.save(tmp_path, 5, _state(5), keep=5)
    newest = checkpoint.save(tmp_path, 10, _state(10), keep=5)
    data = newest.read_bytes()
    newest.write_bytes(data[: len(data) // 2])
    with caplog.at_level(logging.WARNING):
        found = checkpoint.load_latest(tmp_path)
    assert found is not None and found.step == 5
    assert "skipping unreadable checkpoint" in caplog.text


def test_partial_write_leftover_is_never_loaded(tmp_path: Path) -> None:
    checkpoint.save(tmp_path, 3, _state(3), keep=5)
    (tmp_path / ".tmp-step-00000009.pt-123").write_bytes(b"partial")
    found = checkpoint.load_latest(tmp_path)
    assert found is not None and found.step == 3


def test_foreign_file_with_checkpoint_name_is_skipped(tmp_path: Path) -> None:
    torch.save({"something": "else"}, checkpoint.checkpoint_path(tmp_path, 7))
    assert checkpoint.load_latest(tmp_path) is None


def test_empty_or_missing_directory(tmp_path: Path) -> None:
    assert checkpoint.load_latest(tmp_path / "absent") is None
    assert checkpoint.load_latest(tmp_path) is None


def test_files_that_can_never_be_resumed_from_do_not_make_prune_delete_new_checkpoints(tmp_path: Path) -> None:
    """#33: higher-numbered files that cannot be resumed from (garbage, a foreign torch file) used to count
    towards "keep", so every new checkpoint was written and then deleted, and a restart began at step 0."""
    (tmp_path / "step-99999999.pt").write_bytes(b"\x00not a checkpoint")
    torch.save({"something": "else"}, tmp_path / "step-99999998.pt")
    for step in (5, 10, 15):
        checkpoint.save(tmp_path, step, _state(step), keep=2)
    found = checkpoint.load_latest(tmp_path)
    assert found is not None and found.step == 15
    assert checkpoint.list_steps(tmp_path) == [15, 10]
    assert (tmp_path / "step-99999999.pt").read_bytes() == b"\x00not a checkpoint"  # not ours: left alone


def test_prune_deletes_nothing_that_is_not_its_own_checkpoint_file(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_bytes(b"keep me")
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "step-00000001.pt").mkdir()  # a directory with a checkpoint's name
    (ckpt / "step-00000002.pt").symlink_to(outside / "precious")  # a link with a checkpoint's name
    for step in (5, 10):
        checkpoint.save(ckpt, step, _state(step), keep=1)
    assert (ckpt / "step-00000001.pt").is_dir()
    assert (ckpt / "step-00000002.pt").is_symlink() and (outside / "precious").read_bytes() == b"keep me"
    found = checkpoint.load_latest(ckpt)
    assert found is not None and found.step == 10


def test_a_flipped_byte_is_caught_by_the_checksum(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    checkpoint.save(tmp_path, 5, _state(5), keep=5)
    newest = checkpoint.save(tmp_path, 10, _state(10), keep=5)
    assert newest is not None
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0x01  # same size, one bit off
    newest.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING):
        found = checkpoint.load_latest(tmp_path)
    assert found is not None and found.step == 5
    assert "checksum does not match" in caplog.text


def test_a_payload_whose_metadata_never_came_is_incomplete(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    checkpoint.save(tmp_path, 5, _state(5), keep=5)
    checkpoint.save(tmp_path, 10, _state(10), keep=5)
    (tmp_path / "step-00000010.json").unlink()  # as after a crash between the two renames
    assert checkpoint.list_steps(tmp_path) == [5]
    with caplog.at_level(logging.WARNING):
        found = checkpoint.load_latest(tmp_path)
    assert found is not None and found.step == 5
    assert "incomplete: its metadata step-00000010.json is missing" in caplog.text


def test_a_format_1_checkpoint_without_checksum_loads_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    torch.save({"format": 1, "step": 7, **_state(7)}, tmp_path / "step-00000007.pt")  # as the old trainer wrote
    with caplog.at_level(logging.WARNING):
        found = checkpoint.load_latest(tmp_path)
    assert found is not None and found.step == 7
    assert "has no checksum" in caplog.text


def _fifo(path: Path) -> None:
    os.mkfifo(path)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "metadata",
    [
        b'{"format": 2, "step": 1000000000000000000000000000000, "bytes": 1, "sha256": "x"}',
        b'{"format": 2, "step": NaN, "bytes": 1, "sha256": "x"}',
        b'{"format": 2, "step": -1, "bytes": 1, "sha256": "x"}',
        b'{"format": 2, "step": 10, "bytes": -5, "sha256": "' + b"0" * 64 + b'"}',
        b'{"format": 2, "step": 10, "bytes": Infinity, "sha256": "' + b"0" * 64 + b'"}',
        b'{"format": true, "step": 10, "bytes": 1, "sha256": "' + b"0" * 64 + b'"}',
        b"[" * 100_000,
        b'{"format": 2, "step": 1' + b"0" * 10_000 + b"}",
        b" " * (checkpoint.MAX_METADATA_BYTES + 1) + b"{}",
        b"\xff\xfe not utf-8",
        _fifo,
    ],
    ids=[
        "huge-step",
        "nan",
        "negative",
        "negative-bytes",
        "inf",
        "bool",
        "nested",
        "10k-digits",
        "too-big",
        "binary",
        "fifo",
    ],
)
def test_hostile_metadata_is_skipped_with_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, metadata: object
) -> None:
    checkpoint.save(tmp_path, 5, _state(5), keep=5)
    checkpoint.save(tmp_path, 10, _state(10), keep=5)
    meta = tmp_path / "step-00000010.json"
    meta.unlink()
    if callable(metadata):
        metadata(meta)
    else:
        assert isinstance(metadata, bytes)
        meta.write_bytes(metadata)
    with caplog.at_level(logging.WARNING):
        found = checkpoint.load_latest(tmp_path)
    assert found is not None and found.step == 5
    assert "skipping unreadable checkpoint" in caplog.text and "step-00000010.pt" in caplog.text
    checkpoint.save(tmp_path, 15, _state(15), keep=2)  # the hostile one is not counted: 15 and 5 are kept
    assert checkpoint.list_steps(tmp_path)[:1] == [15] and 5 in checkpoint.list_steps(tmp_path)


def test_a_symlinked_checkpoint_directory_is_a_user_error(tmp_path: Path) -> None:
    real = tmp_path / "real"
    checkpoint.save(real, 5, _state(5), keep=5)
    link = tmp_path / "link"
    link.symlink_to(real)
    for call in (lambda: checkpoint.load_latest(link), lambda: checkpoint.save(link, 6, _state(6), keep=1)):
        with pytest.raises(UserError, match=r"STATICTRAIN_CHECKPOINT_DIR=.*is a symbolic link or not a directory"):
            call()
    assert sorted(p.name for p in real.iterdir()) == ["step-00000005.json", "step-00000005.pt"]
    a_file = tmp_path / "a-file"
    a_file.write_bytes(b"x")
    with pytest.raises(UserError, match="is a symbolic link or not a directory"):
        checkpoint.save(a_file, 6, _state(6), keep=1)


def test_a_link_with_a_checkpoint_name_is_never_read_or_written_through(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    checkpoint.save(elsewhere, 9, _state(9), keep=5)
    before = {p.name: p.read_bytes() for p in elsewhere.iterdir()}
    ckpt = tmp_path / "ckpt"
    checkpoint.save(ckpt, 5, _state(5), keep=5)
    for name in ("step-00000009.pt", "step-00000009.json"):
        (ckpt / name).symlink_to(elsewhere / name)  # a valid checkpoint, but not in this directory
    found = checkpoint.load_latest(ckpt)
    assert found is not None and found.step == 5
    assert checkpoint.save(ckpt, 9, _state(99), keep=1) is None  # its names are taken by links: not written
    assert {p.name: p.read_bytes() for p in elsewhere.iterdir()} == before
    assert (ckpt / "step-00000009.pt").is_symlink()


def test_prune_removes_leftovers_of_interrupted_writes_only_below_what_it_keeps(tmp_path: Path) -> None:
    (tmp_path / ".tmp-step-00000002.pt-123").write_bytes(b"partial")
    (tmp_path / ".tmp-step-00000012.pt-4d2").write_bytes(b"partial")
    checkpoint.save(tmp_path, 5, _state(5), keep=2)
    assert (tmp_path / ".tmp-step-00000002.pt-123").exists()  # fewer than keep complete yet: nothing deleted
    checkpoint.save(tmp_path, 10, _state(10), keep=2)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [".tmp-step-00000012.pt-4d2", "step-00000005.json", "step-00000005.pt", "step-00000010.json",
                     "step-00000010.pt"]  # fmt: skip
