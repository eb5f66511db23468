"""The sidecar reports exactly the GPUs its pod's trainer publishes on the channel."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from statictrain import channel, metrics
from statictrain_sidecar.collector import DCGM_METRICS, SidecarCollector
from statictrain_sidecar.nvml import GpuSampler
from statictrain_sidecar.pod_gpus import published_gpus, reader
from statictrain_sidecar.settings import Identity
from statictrain_sidecar.training import TrainingFeed, TrainingState

U0 = "GPU-aaaaaaaa-0000-0000-0000-000000000000"
U1 = "GPU-bbbbbbbb-1111-1111-1111-111111111111"


def test_waits_for_the_trainer_then_reports_only_its_gpu(tmp_path: Path, fake_nvml: Any, publish_gpus: Any) -> None:
    sampler = GpuSampler(fake_nvml(), published=reader(tmp_path))
    status = sampler.open()
    assert (status.available, status.reason) == (False, "waiting_for_trainer")
    assert sampler.read() == []
    sampler.tick(1.0)
    assert sampler.status.reason == "waiting_for_trainer"
    publish_gpus(tmp_path, [U1])
    sampler.tick(2.0)
    assert sampler.status.available
    assert [d.uuid for d in sampler.devices] == [U1]
    assert [r.device.index for r in sampler.read()] == [1]
    sampler.close()


def test_published_before_start_is_used_at_once(tmp_path: Path, fake_nvml: Any, publish_gpus: Any) -> None:
    publish_gpus(tmp_path, [U0])
    sampler = GpuSampler(fake_nvml(), published=reader(tmp_path))
    assert sampler.open().available
    assert [d.index for d in sampler.devices] == [0]


def test_published_gpu_not_visible_says_so(tmp_path: Path, fake_nvml: Any, publish_gpus: Any) -> None:
    publish_gpus(tmp_path, ["GPU-elsewhere"])
    status = GpuSampler(fake_nvml(), published=reader(tmp_path)).open()
    assert status.reason == "gpu_not_found" and "GPU-elsewhere" in status.detail


def test_explicit_selection_wins_over_published(tmp_path: Path, fake_nvml: Any, publish_gpus: Any) -> None:
    publish_gpus(tmp_path, [U1])
    sampler = GpuSampler(fake_nvml(), select=["0"], published=reader(tmp_path))
    assert sampler.open().available
    assert [d.index for d in sampler.devices] == [0]


def test_malformed_files_are_left_out(tmp_path: Path) -> None:
    folder = tmp_path / channel.GPUS_DIR
    folder.mkdir()
    (folder / "0.json").write_text(channel.encode_gpu(U0, 0))
    (folder / "1.json").write_text("{half")
    (folder / "2.json").write_text('{"uuid": "not-a-uuid"}')
    (folder / "3.json").write_text(channel.encode_gpu(U0, 3))
    assert published_gpus(tmp_path) == (U0,)
    assert published_gpus(tmp_path / "missing") == ()


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("[]", "not a JSON object"),
        ('{"v": 9, "uuid": "GPU-x"}', "unsupported schema version"),
        ('{"uuid": 3}', "uuid must be an NVML UUID"),
    ],
)
def test_decode_gpu_errors(text: str, error: str) -> None:
    with pytest.raises(channel.MalformedRecord, match=error):
        channel.decode_gpu(text)


def test_dcgm_series_only_when_enabled(fake_nvml: Any) -> None:
    identity = Identity("j", "ns", "c", "t", "j-worker-0", "uid")
    for enabled in (False, True):
        sampler = GpuSampler(fake_nvml())
        sampler.open()
        registry = CollectorRegistry(auto_describe=False)
        feed = TrainingFeed(None, TrainingState(0.0), lambda: 0.0)
        registry.register(SidecarCollector(identity, sampler, feed, version="t", dcgm=enabled))
        labels = {"gpu": "1", "UUID": U1, "device": "nvidia1", "modelName": "NVIDIA H200", "namespace": "ns",
                  "pod": "j-worker-0"}  # fmt: skip
        util = registry.get_sample_value(metrics.DCGM_GPU_UTIL, labels)
        if not enabled:
            assert util is None
            continue
        assert util == pytest.approx(10.0)  # fake GPU 1: 10 % (0.10 as a ratio)
        assert registry.get_sample_value(metrics.DCGM_POWER_USAGE, labels) == pytest.approx(100.0)
        assert registry.get_sample_value(metrics.DCGM_FB_USED, labels) == pytest.approx(60 * 1024)
        assert set(DCGM_METRICS) == {metrics.DCGM_GPU_UTIL, metrics.DCGM_POWER_USAGE, metrics.DCGM_FB_USED}


def test_readme_lists_the_dcgm_series() -> None:
    readme = (Path(__file__).resolve().parents[3] / "sidecar" / "README.md").read_text()
    for name in DCGM_METRICS:
        assert f"| `{name}` |" in readme
    assert "`DCGM_FI_PROF_GR_ENGINE_ACTIVE` is not exported" in readme


@pytest.mark.timeout(30)
def test_gpu_files_are_read_only_as_small_files_of_the_channel_folder(tmp_path: Path) -> None:
    # #33: a FIFO blocked the sampler (and the sidecar's start) forever, /dev/zero ate memory, and a
    # gpus/ folder replaced by a symlink was read wherever it pointed
    folder = tmp_path / channel.GPUS_DIR
    folder.mkdir()
    (folder / "0.json").write_text(channel.encode_gpu(U0, 0))
    os.mkfifo(folder / "1.json")
    (folder / "2.json").symlink_to("/dev/zero")
    (folder / "3.json").write_text(channel.encode_gpu(U1, 3) + " " * (1 << 20))
    (folder / "4.json").write_text(channel.encode_gpu("GPU-" + "x" * 500, 4))
    assert published_gpus(tmp_path) == (U0,)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "0.json").write_text(channel.encode_gpu(U1, 0))
    other = tmp_path / "other-stats"
    other.mkdir()
    (other / channel.GPUS_DIR).symlink_to(outside)
    assert published_gpus(other) == ()
