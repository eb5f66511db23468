from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from statictrain_trainer.compile_cache import MAX_ARTIFACT_BYTES, CompileCache, make_key, model_fingerprint
from torch import nn


def test_key_depends_on_model_settings_torch_and_device() -> None:
    fp = model_fingerprint(nn.Linear(4, 4))
    base = make_key(fp, {"mode": "default"}, "2.11.0", "cuda-sm90-NVIDIA_H200")
    assert make_key(fp, {"mode": "default"}, "2.11.0", "cuda-sm90-NVIDIA_H200") == base
    assert make_key(model_fingerprint(nn.Linear(4, 5)), {"mode": "default"}, "2.11.0", "x").workload != base.workload
    assert make_key(fp, {"mode": "max-autotune"}, "2.11.0", "x").workload != base.workload
    other_torch = make_key(fp, {"mode": "default"}, "2.12.0", "cuda-sm90-NVIDIA_H200")
    assert other_torch.workload == base.workload and other_torch.environment != base.environment
    other_gpu = make_key(fp, {"mode": "default"}, "2.11.0", "cuda-sm80-NVIDIA_A100")
    assert other_gpu.environment != base.environment


def test_fingerprint_ignores_values() -> None:
    a, b = nn.Linear(4, 4), nn.Linear(4, 4)
    assert model_fingerprint(a) == model_fingerprint(b)


def test_cache_of_another_torch_is_ignored_with_a_log_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    fp = model_fingerprint(nn.Linear(4, 4))
    old = CompileCache(tmp_path, make_key(fp, {}, "2.9.0", "cuda-sm90-NVIDIA_H200"))
    old.folder.mkdir(parents=True)
    old.artifact_path.write_bytes(b"artifacts from another torch")
    current = CompileCache(tmp_path, make_key(fp, {}, "2.11.0", "cuda-sm90-NVIDIA_H200"))
    with caplog.at_level(logging.INFO):
        loaded = current.load()
    assert not loaded.hit
    assert "compile cache ignored" in loaded.reason and "torch-2.9.0" in loaded.reason
    assert "compile cache ignored" in caplog.text


def test_corrupt_cache_is_ignored_not_fatal(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path, make_key("fp", {}, "2.11.0", "cpu"))
    cache.folder.mkdir(parents=True)
    cache.artifact_path.write_bytes(b"\x00garbage\xff" * 10)
    loaded = cache.load()
    assert not loaded.hit
    assert "failed to load" in loaded.reason or "held no artifacts" in loaded.reason


def test_miss_when_empty(tmp_path: Path) -> None:
    loaded = CompileCache(tmp_path, make_key("fp", {}, "2.11.0", "cpu")).load()
    assert not loaded.hit and "miss" in loaded.reason


def test_shared_read_only_root_is_tried_after_the_own_and_never_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own_root, shared_root = tmp_path / "own", tmp_path / "shared"
    key = make_key("fp", {}, "2.11.0", "cpu")
    seeded = CompileCache(shared_root, key)
    seeded.folder.mkdir(parents=True)
    seeded.artifact_path.write_bytes(b"\x00not artifacts")
    cache = CompileCache(own_root, key, shared=shared_root)
    loaded = cache.load()  # nothing of its own: the shared one is read (and fails to load here)
    assert not loaded.hit and str(seeded.artifact_path) in loaded.reason, loaded.reason
    cache.folder.mkdir(parents=True)
    cache.artifact_path.write_bytes(b"\x01also not artifacts")
    assert str(cache.artifact_path) in cache.load().reason  # its own first
    monkeypatch.setattr("torch.compiler.save_cache_artifacts", lambda: (b"compiled", None))
    before = sorted((p.name, p.read_bytes()) for p in shared_root.rglob("*") if p.is_file())
    assert cache.save({}) == cache.artifact_path and cache.artifact_path.read_bytes() == b"compiled"
    assert sorted((p.name, p.read_bytes()) for p in shared_root.rglob("*") if p.is_file()) == before
    empty = CompileCache(tmp_path / "own2", key, shared=tmp_path / "shared2").load()
    assert not empty.hit and empty.status == "miss_empty"


def _snapshot(root: Path) -> dict[str, bytes | str]:
    """Every name under root with its bytes (files) or its target (links)."""
    out: dict[str, bytes | str] = {}
    for p in sorted(root.rglob("*")):
        key = str(p.relative_to(root))
        out[key] = f"-> {os.readlink(p)}" if p.is_symlink() else p.read_bytes() if p.is_file() else "dir"
    return out


def test_a_workload_folder_that_links_elsewhere_is_never_read_or_written_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = make_key("fp", {}, "2.11.0", "cpu")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / f"{key.environment}.bin").write_bytes(b"someone else's file")
    cache = CompileCache(tmp_path / "cache", key)
    (tmp_path / "cache").mkdir()
    cache.folder.symlink_to(outside)
    before = _snapshot(outside)
    loaded = cache.load()
    assert not loaded.hit and loaded.status == "load_failed" and "symbolic link" in loaded.reason
    monkeypatch.setattr("torch.compiler.save_cache_artifacts", lambda: (b"compiled", None))
    assert cache.save({}) is None
    assert _snapshot(outside) == before


def test_an_artifact_that_is_a_link_is_replaced_not_written_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = CompileCache(tmp_path / "cache", make_key("fp", {}, "2.11.0", "cpu"))
    cache.folder.mkdir(parents=True)
    target = tmp_path / "target"
    target.write_bytes(b"not yours")
    cache.artifact_path.symlink_to(target)
    assert cache.load().status == "load_failed"
    monkeypatch.setattr("torch.compiler.save_cache_artifacts", lambda: (b"compiled", None))
    assert cache.save({}) is None  # its name is taken by a link: left as it is
    assert target.read_bytes() == b"not yours" and cache.artifact_path.is_symlink()


@pytest.mark.timeout(60)
def test_a_huge_or_fifo_artifact_is_ignored_unread(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path, make_key("fp", {}, "2.11.0", "cpu"))
    cache.folder.mkdir(parents=True)
    with open(cache.artifact_path, "wb") as f:
        f.truncate(MAX_ARTIFACT_BYTES + 1)  # sparse: no disk used
    loaded = cache.load()
    assert loaded.status == "load_failed" and "more than" in loaded.reason
    cache.artifact_path.unlink()
    os.mkfifo(cache.artifact_path)  # no writer: a blocking open would hang
    loaded = cache.load()
    assert loaded.status == "load_failed" and "not a plain file" in loaded.reason


def test_odd_names_of_other_environments_are_listed_safely_and_bounded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = CompileCache(tmp_path, make_key("fp", {}, "2.11.0", "cpu"))
    cache.folder.mkdir(parents=True)
    for i in range(12):
        (cache.folder / f"torch-\udcff\n{i}.bin").write_bytes(b"x")  # not UTF-8, a newline
    with caplog.at_level(logging.INFO):
        loaded = cache.load()
    assert loaded.status == "miss_other_environment" and "and 7 more" in loaded.reason
    assert loaded.reason.isascii() and "\n" not in loaded.reason
