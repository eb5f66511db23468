from __future__ import annotations

import logging
from pathlib import Path

import pytest
from statictrain_trainer.compile_cache import CompileCache, make_key, model_fingerprint
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
