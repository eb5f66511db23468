# ruff: noqa: N802  (the fake mirrors pynvml's function names)
"""A fake NVML module for the sidecar's unit tests (passed in, never patched over pynvml).

It has the functions the sampler calls, with pynvml's conventions: values in
NVML units (percent, mW, mJ, MHz, KiB for NVLink), errors as ``NVMLError`` with
``.value``, field values as structures with ``nvmlReturn``/``valueType``/``value``.
Every call is counted in ``calls`` so tests can check what was (not) asked.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from statictrain import channel
from statictrain_sidecar.collector import SidecarCollector
from statictrain_sidecar.nvml import GpuSampler
from statictrain_sidecar.settings import Identity
from statictrain_sidecar.tailer import ChannelTailer
from statictrain_sidecar.training import TrainingFeed, TrainingState

NOT_SUPPORTED = 3
TIMEOUT = 10
GPU_IS_LOST = 15
DRIVER_NOT_LOADED = 9


class FakeNVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


@dataclass
class FakeGpu:
    index: int
    uuid: str
    name: str = "NVIDIA H200"
    util_gpu: int = 87
    util_mem: int = 41
    mem_used: int = 60 * 2**30
    mem_total: int = 141 * 2**30
    power_mw: int = 612_500
    energy_mj: int = 9_876_543
    temp_c: int = 64
    sm_mhz: int = 1980
    ecc_corrected: int = 2
    ecc_uncorrected: int = 0
    pcie_tx: int = 5_000_000
    pcie_rx: int = 7_000_000
    nvlink_tx_kib: int = 300
    nvlink_rx_kib: int = 500
    fail: dict[str, int] = field(default_factory=dict)
    """function name (or field id as str) -> NVML error code it raises/returns"""


class FakeNvml:
    NVMLError = FakeNVMLError

    def __init__(
        self, gpus: Sequence[FakeGpu], *, init_error: int | None = None, events_error: int | None = None
    ) -> None:
        self.gpus = list(gpus)
        self.init_error = init_error
        self.events_error = events_error
        self.events: list[tuple[str, int]] = []  # (uuid, xid)
        self.calls: Counter[str] = Counter()
        self.shutdowns = 0

    def _call(self, name: str, gpu: FakeGpu | None = None) -> None:
        self.calls[name] += 1
        if gpu is not None and name in gpu.fail:
            raise FakeNVMLError(gpu.fail[name])

    def nvmlInit(self) -> None:
        self._call("nvmlInit")
        if self.init_error is not None:
            raise FakeNVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return "580.159.04"

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        return self.gpus[index]

    def nvmlDeviceGetUUID(self, h: FakeGpu) -> str:
        return h.uuid

    def nvmlDeviceGetName(self, h: FakeGpu) -> bytes:
        return h.name.encode()  # older pynvml returns bytes

    def nvmlDeviceGetUtilizationRates(self, h: FakeGpu) -> Any:
        self._call("nvmlDeviceGetUtilizationRates", h)
        return SimpleNamespace(gpu=h.util_gpu, memory=h.util_mem)

    def nvmlDeviceGetMemoryInfo(self, h: FakeGpu) -> Any:
        self._call("nvmlDeviceGetMemoryInfo", h)
        return SimpleNamespace(used=h.mem_used, total=h.mem_total, free=h.mem_total - h.mem_used)

    def nvmlDeviceGetPowerUsage(self, h: FakeGpu) -> int:
        self._call("nvmlDeviceGetPowerUsage", h)
        return h.power_mw

    def nvmlDeviceGetTotalEnergyConsumption(self, h: FakeGpu) -> int:
        self._call("nvmlDeviceGetTotalEnergyConsumption", h)
        return h.energy_mj

    def nvmlDeviceGetTemperature(self, h: FakeGpu, sensor: int) -> int:
        self._call("nvmlDeviceGetTemperature", h)
        assert sensor == 0
        return h.temp_c

    def nvmlDeviceGetClockInfo(self, h: FakeGpu, clock_type: int) -> int:
        self._call("nvmlDeviceGetClockInfo", h)
        assert clock_type == 1  # NVML_CLOCK_SM
        return h.sm_mhz

    def nvmlDeviceGetTotalEccErrors(self, h: FakeGpu, error_type: int, counter_type: int) -> int:
        self._call("nvmlDeviceGetTotalEccErrors", h)
        assert counter_type == 0  # volatile
        return h.ecc_corrected if error_type == 0 else h.ecc_uncorrected

    def nvmlDeviceGetFieldValues(self, h: FakeGpu, field_ids: list[Any]) -> list[Any]:
        self._call("nvmlDeviceGetFieldValues", h)
        values = {197: h.pcie_tx, 198: h.pcie_rx, 138: h.nvlink_tx_kib, 139: h.nvlink_rx_kib}
        out = []
        for fid, scope in field_ids:
            if fid in (138, 139):
                assert scope == 0xFFFFFFFF, "NVLink throughput must be summed over all links"
            ret = h.fail.get(str(fid), 0)
            out.append(
                SimpleNamespace(
                    fieldId=fid, nvmlReturn=ret, valueType=3, value=SimpleNamespace(ullVal=values[fid])
                )
            )
        return out

    def nvmlEventSetCreate(self) -> object:
        self._call("nvmlEventSetCreate")
        return object()

    def nvmlDeviceRegisterEvents(self, h: FakeGpu, event_types: int, event_set: object) -> None:
        self._call("nvmlDeviceRegisterEvents")
        assert event_types == 0x8
        if self.events_error is not None:
            raise FakeNVMLError(self.events_error)

    def nvmlEventSetWait(self, event_set: object, timeout_ms: int) -> Any:
        self._call("nvmlEventSetWait")
        assert timeout_ms == 0, "the sampler must never block on events"
        if not self.events:
            raise FakeNVMLError(TIMEOUT)
        uuid, xid = self.events.pop(0)
        gpu = next(g for g in self.gpus if g.uuid == uuid)
        return SimpleNamespace(device=gpu, eventType=0x8, eventData=xid)

    def nvmlEventSetFree(self, event_set: object) -> None:
        self._call("nvmlEventSetFree")

    def nvmlDeviceGetComputeRunningProcesses(self, h: FakeGpu) -> list[Any]:
        self._call("nvmlDeviceGetComputeRunningProcesses", h)  # the expensive per-process query
        return []


def two_gpus() -> list[FakeGpu]:
    return [
        FakeGpu(0, "GPU-aaaaaaaa-0000-0000-0000-000000000000"),
        FakeGpu(1, "GPU-bbbbbbbb-1111-1111-1111-111111111111", util_gpu=10, power_mw=100_000, temp_c=40),
    ]


@pytest.fixture
def fake_nvml() -> Callable[..., FakeNvml]:
    """Factory: fake_nvml(gpus=None, **kwargs) -> FakeNvml (two H200s by default)."""

    def make(gpus: Sequence[FakeGpu] | None = None, **kwargs: Any) -> FakeNvml:
        return FakeNvml(two_gpus() if gpus is None else gpus, **kwargs)

    return make


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def gpu() -> type[FakeGpu]:
    """The FakeGpu class, to describe GPUs in a test."""
    return FakeGpu


@dataclass
class Rig:
    """A collector wired to a fake NVML, a fake clock and an optional channel file, in a fresh registry."""

    registry: Any
    sampler: Any
    feed: Any
    identity: Any

    def value(self, name: str, **labels: str) -> float | None:
        full = {**dict(zip(self.identity.LABEL_NAMES, self.identity.label_values(), strict=True)), **labels}
        result: float | None = self.registry.get_sample_value(name, full)
        return result

    def names(self) -> set[str]:
        return {s.name for m in self.registry.collect() for s in m.samples}


@pytest.fixture
def rig(clock: FakeClock) -> Callable[..., Rig]:
    """Factory: rig(nvml, stats_dir=None, select=(), enabled=True) -> Rig (sampler already opened)."""

    def make(
        nvml: FakeNvml | None, stats_dir: Any = None, select: Sequence[str] = (), enabled: bool = True
    ) -> Rig:
        identity = Identity("gpt2-small", "team-nlp", "3f2c1ab", "nlp", "gpt2-small-worker-0", "uid-123")
        sampler = GpuSampler(nvml, select=select, enabled=enabled)
        sampler.open()
        tailer = ChannelTailer(stats_dir / "steps.jsonl") if stats_dir is not None else None
        feed = TrainingFeed(tailer, TrainingState(clock()), clock)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(SidecarCollector(identity, sampler, feed, version="test"))
        return Rig(registry, sampler, feed, identity)

    return make


def _publish_gpus(stats_dir: Path, uuids: Sequence[str]) -> None:
    folder = stats_dir / channel.GPUS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for rank, uuid in enumerate(uuids):
        (folder / f"{rank}.json").write_text(channel.encode_gpu(uuid, rank))


@pytest.fixture
def publish_gpus() -> Callable[[Path, Sequence[str]], None]:
    """publish_gpus(stats_dir, uuids): write ``gpus/<rank>.json`` as the pod's trainer processes do."""
    return _publish_gpus
