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
