from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from statictrain_trainer import checkpoint


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
