# ruff: noqa: N802  (the protocol mirrors pynvml's own function names)
"""GPU sampling through NVML, behind an injected NVML module object.

``GpuSampler`` takes the ``pynvml`` module (or a fake with the same functions in
tests) and never imports it itself. It reads cheap device queries only (no
per-process queries): utilization, memory, power, energy, temperature, SM clock,
ECC counts, and PCIe/NVLink byte counters through one field-values call. A query
that answers NVML_ERROR_NOT_SUPPORTED is dropped for that GPU for good (that
field alone goes missing); any other NVML error loses the value of that sample
and counts in ``query_errors``. XID critical errors arrive through an NVML event
set polled without waiting.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from statictrain import metrics
from statictrain.cost import IDLE_THRESHOLD

__all__ = ["GpuDevice", "GpuReading", "GpuSampler", "GpuStatus", "NvmlApi", "Value"]

# nvml.h values (a stable C ABI); written out so a fake module need not carry them.
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_TIMEOUT = 10
NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
NVML_VOLATILE_ECC = 0
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_EVENT_TYPE_XID_CRITICAL_ERROR = 0x8
NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX = 138  # KiB, cumulative
NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = 139
NVML_FI_DEV_PCIE_COUNT_TX_BYTES = 197  # bytes, cumulative
NVML_FI_DEV_PCIE_COUNT_RX_BYTES = 198
ALL_LINKS = 0xFFFFFFFF  # scopeId: sum over every NVLink
NVML_SUCCESS = 0

_VALUE_MEMBERS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")  # by nvmlValueType_t
MAX_XID_EVENTS_PER_POLL = 64


class NvmlApi(Protocol):
    """The part of ``pynvml`` the sampler calls. Errors are ``NVMLError`` with ``.value``."""

    @property
    def NVMLError(self) -> type[Exception]: ...

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlSystemGetDriverVersion(self) -> str | bytes: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any: ...
    def nvmlDeviceGetUUID(self, handle: Any) -> str | bytes: ...
    def nvmlDeviceGetName(self, handle: Any) -> str | bytes: ...
    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any: ...
    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any: ...
    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int: ...
    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> int: ...
    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int: ...
    def nvmlDeviceGetClockInfo(self, handle: Any, clock_type: int) -> int: ...
    def nvmlDeviceGetTotalEccErrors(self, handle: Any, error_type: int, counter_type: int) -> int: ...
    def nvmlDeviceGetFieldValues(self, handle: Any, field_ids: list[Any]) -> Sequence[Any]: ...
    def nvmlEventSetCreate(self) -> Any: ...
    def nvmlDeviceRegisterEvents(self, handle: Any, event_types: int, event_set: Any) -> None: ...
    def nvmlEventSetWait(self, event_set: Any, timeout_ms: int) -> Any: ...
    def nvmlEventSetFree(self, event_set: Any) -> None: ...


@dataclass(frozen=True)
class GpuDevice:
    """One GPU this sidecar reports."""

    index: int
    uuid: str
    model: str
    handle: Any = field(compare=False, repr=False)

    def label_values(self) -> list[str]:
        """Values of the GPU labels (gpu, gpu_uuid, gpu_model)."""
        return [str(self.index), self.uuid, self.model]


@dataclass(frozen=True)
class Value:
    """One sampled value: the metric it belongs to and its extra labels."""

    metric: str
    value: float
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class GpuReading:
    """Fresh values of one GPU; a field NVML could not give is absent."""

    device: GpuDevice
    values: tuple[Value, ...]


@dataclass(frozen=True)
class GpuStatus:
    """Whether GPU metrics are available, and if not, why (a short, fixed reason)."""

    available: bool
    reason: str
    """ok | disabled | nvml_missing | nvml_init_failed | no_devices | gpu_not_found | waiting_for_trainer"""
    detail: str = ""
    driver_version: str = ""


def _error_code(err: Exception) -> int | None:
    code = getattr(err, "value", None)
    return code if isinstance(code, int) else None


def _field_value(fv: Any) -> float | None:
    """The number in one nvmlFieldValue_t, None when its own return code is an error."""
    if getattr(fv, "nvmlReturn", NVML_SUCCESS) != NVML_SUCCESS:
        return None
    kind = getattr(fv, "valueType", 3)
    member = _VALUE_MEMBERS[kind] if 0 <= kind < len(_VALUE_MEMBERS) else "ullVal"
    return float(getattr(fv.value, member))


_FIELDS: tuple[tuple[int, int, str, tuple[tuple[str, str], ...], float], ...] = (
    # field id, scope id, metric, labels, scale to base unit
    (NVML_FI_DEV_PCIE_COUNT_TX_BYTES, 0, metrics.GPU_PCIE_BYTES_TOTAL, (("direction", "tx"),), 1.0),
    (NVML_FI_DEV_PCIE_COUNT_RX_BYTES, 0, metrics.GPU_PCIE_BYTES_TOTAL, (("direction", "rx"),), 1.0),
    (
        NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX,
        ALL_LINKS,
        metrics.GPU_NVLINK_BYTES_TOTAL,
        (("direction", "tx"),),
        1024.0,
    ),
    (
        NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX,
        ALL_LINKS,
        metrics.GPU_NVLINK_BYTES_TOTAL,
        (("direction", "rx"),),
        1024.0,
    ),
)


def _utilization(nvml: NvmlApi, h: Any) -> list[Value]:
    u = nvml.nvmlDeviceGetUtilizationRates(h)
    return [
        Value(metrics.GPU_UTILIZATION_RATIO, u.gpu / 100.0),
        Value(metrics.GPU_MEMORY_UTILIZATION_RATIO, u.memory / 100.0),
    ]


def _memory(nvml: NvmlApi, h: Any) -> list[Value]:
    m = nvml.nvmlDeviceGetMemoryInfo(h)
    return [
        Value(metrics.GPU_MEMORY_USED_BYTES, float(m.used)),
        Value(metrics.GPU_MEMORY_TOTAL_BYTES, float(m.total)),
    ]


def _power(nvml: NvmlApi, h: Any) -> list[Value]:
    return [Value(metrics.GPU_POWER_WATTS, nvml.nvmlDeviceGetPowerUsage(h) / 1000.0)]


def _energy(nvml: NvmlApi, h: Any) -> list[Value]:
    return [Value(metrics.GPU_ENERGY_JOULES_TOTAL, nvml.nvmlDeviceGetTotalEnergyConsumption(h) / 1000.0)]


def _temperature(nvml: NvmlApi, h: Any) -> list[Value]:
    return [Value(metrics.GPU_TEMPERATURE_CELSIUS, float(nvml.nvmlDeviceGetTemperature(h, NVML_TEMPERATURE_GPU)))]


def _sm_clock(nvml: NvmlApi, h: Any) -> list[Value]:
    return [Value(metrics.GPU_SM_CLOCK_HERTZ, nvml.nvmlDeviceGetClockInfo(h, NVML_CLOCK_SM) * 1e6)]


def _ecc(kind: int, label: str) -> Callable[[NvmlApi, Any], list[Value]]:
    def read(nvml: NvmlApi, h: Any) -> list[Value]:
        n = nvml.nvmlDeviceGetTotalEccErrors(h, kind, NVML_VOLATILE_ECC)
        return [Value(metrics.GPU_ECC_ERRORS_TOTAL, float(n), (("type", label),))]

    return read


_QUERIES: tuple[tuple[str, Callable[[NvmlApi, Any], list[Value]]], ...] = (
    ("utilization", _utilization),
    ("memory", _memory),
    ("power", _power),
    ("energy", _energy),
    ("temperature", _temperature),
    ("sm_clock", _sm_clock),
    ("ecc_corrected", _ecc(NVML_MEMORY_ERROR_TYPE_CORRECTED, "corrected")),
    ("ecc_uncorrected", _ecc(NVML_MEMORY_ERROR_TYPE_UNCORRECTED, "uncorrected")),
)


class GpuSampler:
    """NVML behind one object: open once, read fresh at each scrape, tick in the background."""

    def __init__(
        self,
        nvml: NvmlApi | None,
        *,
        select: Sequence[str] = (),
        enabled: bool = True,
        logger: logging.Logger | None = None,
        published: Callable[[], tuple[str, ...]] | None = None,
        idle_below: float = IDLE_THRESHOLD,
    ) -> None:
        """``nvml`` is the pynvml module, a fake, or None when it could not be imported.

        ``idle_below``: the utilization ratio below which a tick's seconds count as idle (``idle_seconds``).

        ``select``: GPUs to report (indices or UUIDs); else ``published``, when given, says
        which GPUs the pod's trainer runs on (pod_gpus.reader): until it names any, the
        sampler reports none (reason waiting_for_trainer) and looks again at each tick.
        Without either, every GPU NVML sees is reported.
        """
        self._nvml = nvml
        self._select = tuple(select)
        self._published = published
        self._visible: list[GpuDevice] = []
        self._enabled = enabled
        self._log = logger or logging.getLogger(__name__)
        self._lock = threading.Lock()
        self._unsupported: dict[int, set[str]] = {}
        self._unsupported_fields: dict[int, set[int]] = {}
        self._errors: dict[tuple[int, str], int] = {}
        self._xid: dict[int, int] = {}
        self._busy: dict[int, float] = {}
        self.idle_below = idle_below
        self._idle = 0.0
        self._last_tick: float | None = None
        self._event_set: Any = None
        self.devices: tuple[GpuDevice, ...] = ()
        self.status = GpuStatus(False, "not_opened")

    # --- lifecycle

    def open(self) -> GpuStatus:
        """Initialize NVML and find the GPUs; never raises. Logs one line when there is no GPU."""
        self.status = self._open()
        if self.status.available:
            self._log.info(
                "NVML %s: reporting %d GPU(s): %s",
                self.status.driver_version,
                len(self.devices),
                ", ".join(f"{d.index}={d.model}" for d in self.devices),
            )
        else:
            self._log.warning(
                "no GPU metrics (%s): %s; training metrics are still served",
                self.status.reason,
                self.status.detail,
            )
        return self.status

    def _open(self) -> GpuStatus:
        nvml = self._nvml
        if not self._enabled:
            return GpuStatus(False, "disabled", "NVML disabled by settings")
        if nvml is None:
            return GpuStatus(False, "nvml_missing", "the pynvml module could not be imported")
        try:
            nvml.nvmlInit()
        except Exception as e:  # NVMLError, or OSError from a missing libnvidia-ml.so
            return GpuStatus(False, "nvml_init_failed", f"nvmlInit failed: {e}")
        try:
            driver = _text(nvml.nvmlSystemGetDriverVersion())
            devices = [self._device(i) for i in range(nvml.nvmlDeviceGetCount())]
        except Exception as e:
            self._shutdown()
            return GpuStatus(False, "nvml_init_failed", f"listing GPUs failed: {e}")
        self._visible = devices
        if not devices:
            self._shutdown()
            return GpuStatus(False, "no_devices", "NVML works but sees no GPU in this container")
        if self._select:
            return self._choose(self._select, driver)
        if self._published is not None:
            published = self._published()
            if published:
                return self._choose(published, driver)
            return GpuStatus(
                False,
                "waiting_for_trainer",
                f"{len(devices)} GPU(s) visible; reporting those the trainer publishes once it starts",
                driver_version=driver,
            )
        self.devices = tuple(devices)
        self._register_xid_events()
        return GpuStatus(True, "ok", driver_version=driver)

    def _choose(self, wanted_ids: Sequence[str], driver: str) -> GpuStatus:
        """Keep the visible GPUs named by index or UUID; gpu_not_found when one is missing."""
        devices = self._visible
        wanted = set(wanted_ids)
        chosen = [d for d in devices if str(d.index) in wanted or d.uuid in wanted]
        missing = wanted - {str(d.index) for d in chosen} - {d.uuid for d in chosen}
        if missing:
            self._shutdown()
            seen = ", ".join(f"{d.index}={d.uuid}" for d in devices) or "none"
            return GpuStatus(
                False,
                "gpu_not_found",
                f"GPUs {sorted(missing)} asked for are not visible (visible: {seen})",
            )
        self.devices = tuple(chosen)
        self._register_xid_events()
        return GpuStatus(True, "ok", driver_version=driver)

    def _adopt_published(self) -> None:
        """While waiting for the trainer: take its GPUs as soon as it names them."""
        assert self._published is not None
        published = self._published()
        if not published:
            return
        self.status = self._choose(published, self.status.driver_version)
        if self.status.available:
            self._log.info("reporting the trainer's GPU(s): %s", ", ".join(f"{d.index}={d.uuid}" for d in self.devices))
        else:
            self._log.warning("trainer's GPUs not usable (%s): %s", self.status.reason, self.status.detail)

    def _device(self, index: int) -> GpuDevice:
        assert self._nvml is not None
        h = self._nvml.nvmlDeviceGetHandleByIndex(index)
        return GpuDevice(index, _text(self._nvml.nvmlDeviceGetUUID(h)), _text(self._nvml.nvmlDeviceGetName(h)), h)

    def _register_xid_events(self) -> None:
        assert self._nvml is not None
        try:
            es = self._nvml.nvmlEventSetCreate()
            for d in self.devices:
                self._nvml.nvmlDeviceRegisterEvents(d.handle, NVML_EVENT_TYPE_XID_CRITICAL_ERROR, es)
            self._event_set = es
        except self._nvml.NVMLError as e:
            for d in self.devices:
                self._unsupported.setdefault(d.index, set()).add("xid_events")
            self._log.info("XID events unavailable (%s): %s stays absent", e, metrics.GPU_XID_ERRORS_TOTAL)

    def close(self) -> None:
        """Free the event set and shut NVML down (safe to call twice)."""
        if self.status.reason == "waiting_for_trainer":
            self._shutdown()
            self.status = GpuStatus(False, "closed")
        nvml = self._nvml
        if nvml is not None and self._event_set is not None:
            with contextlib.suppress(nvml.NVMLError):
                nvml.nvmlEventSetFree(self._event_set)
            self._event_set = None
        if self.status.available:
            self._shutdown()
            self.status = GpuStatus(False, "closed")

    def _shutdown(self) -> None:
        if self._nvml is None:
            return
        try:
            self._nvml.nvmlShutdown()
        except Exception as e:
            self._log.debug("nvmlShutdown: %s", e)

    # --- reading

    def read(self) -> list[GpuReading]:
        """Query every supported field of every GPU now (called at each scrape)."""
        if not self.status.available:
            return []
        with self._lock:
            return [GpuReading(d, tuple(self._read_device(d))) for d in self.devices]

    def _read_device(self, d: GpuDevice) -> list[Value]:
        assert self._nvml is not None
        nvml = self._nvml
        skip = self._unsupported.setdefault(d.index, set())
        out: list[Value] = []
        for name, query in _QUERIES:
            if name in skip:
                continue
            try:
                out.extend(query(nvml, d.handle))
            except Exception as e:  # NVMLError, or a binding too old to have the call
                self._failed(d, name, e)
        if "fields" not in skip:
            out.extend(self._read_fields(d))
        if "xid_events" not in skip:
            out.append(Value(metrics.GPU_XID_ERRORS_TOTAL, float(self._xid.get(d.index, 0))))
        out.append(Value(metrics.GPU_BUSY_SECONDS_TOTAL, self._busy.get(d.index, 0.0)))
        return out

    def _read_fields(self, d: GpuDevice) -> list[Value]:
        assert self._nvml is not None
        bad = self._unsupported_fields.setdefault(d.index, set())
        wanted = [f for f in _FIELDS if f[0] not in bad]
        if not wanted:
            self._unsupported[d.index].add("fields")
            return []
        try:
            got = self._nvml.nvmlDeviceGetFieldValues(d.handle, [(fid, scope) for fid, scope, *_ in wanted])
        except Exception as e:
            self._failed(d, "fields", e)
            return []
        out: list[Value] = []
        for (fid, _scope, metric, labels, scale), fv in zip(wanted, got, strict=False):
            value = _field_value(fv)
            if value is not None:
                out.append(Value(metric, value * scale, labels))
            elif getattr(fv, "nvmlReturn", None) == NVML_ERROR_NOT_SUPPORTED:
                bad.add(fid)
            else:
                self._errors[(d.index, "fields")] = self._errors.get((d.index, "fields"), 0) + 1
        return out

    def _failed(self, d: GpuDevice, query: str, err: Exception) -> None:
        if _error_code(err) == NVML_ERROR_NOT_SUPPORTED:
            self._unsupported.setdefault(d.index, set()).add(query)
            self._log.info("GPU %d: %s not supported by NVML; that field stays absent", d.index, query)
            return
        key = (d.index, query)
        if key not in self._errors:
            self._log.warning(
                "GPU %d: NVML %s failed: %s (counted in %s)",
                d.index,
                query,
                err,
                metrics.GPU_QUERY_ERRORS_TOTAL,
            )
        self._errors[key] = self._errors.get(key, 0) + 1

    def idle_seconds(self) -> float | None:
        """GPU-seconds, summed over the reported GPUs, whose utilization sampled at a tick was below
        ``idle_below`` (each tick's reading stands for the time since the previous tick; a failed reading's
        time counts nowhere). None when utilization is not measured on every GPU: idle unknown, not 0."""
        with self._lock:
            if not self.status.available or any("utilization" in self._unsupported.get(d.index, set())
                                                for d in self.devices):  # fmt: skip
                return None
            return self._idle

    def query_errors(self) -> dict[tuple[int, str], int]:
        """Failed queries other than NOT_SUPPORTED, by (GPU index, query name)."""
        with self._lock:
            return dict(self._errors)

    def unsupported(self, index: int) -> frozenset[str]:
        """Query names NVML answered NOT_SUPPORTED for this GPU."""
        with self._lock:
            return frozenset(self._unsupported.get(index, set()))

    # --- background

    def tick(self, now: float) -> None:
        """Background sample at monotonic time ``now``: integrate busy time, drain XID events."""
        if self.status.reason == "waiting_for_trainer" and self._published is not None:
            with self._lock:
                self._adopt_published()
        if not self.status.available:
            return
        assert self._nvml is not None
        nvml = self._nvml
        with self._lock:
            dt = 0.0 if self._last_tick is None else max(0.0, now - self._last_tick)
            self._last_tick = now
            for d in self.devices:
                if "utilization" in self._unsupported.get(d.index, set()):
                    continue
                try:
                    ratio = nvml.nvmlDeviceGetUtilizationRates(d.handle).gpu / 100.0
                except Exception as e:
                    self._failed(d, "utilization", e)
                    continue
                self._busy[d.index] = self._busy.get(d.index, 0.0) + ratio * dt
                if ratio < self.idle_below:
                    self._idle += dt
            self._drain_xid_events()

    def _drain_xid_events(self) -> None:
        assert self._nvml is not None
        nvml = self._nvml
        if self._event_set is None:
            return
        by_uuid = {d.uuid: d.index for d in self.devices}
        for _ in range(MAX_XID_EVENTS_PER_POLL):
            try:
                event = nvml.nvmlEventSetWait(self._event_set, 0)
            except nvml.NVMLError as e:
                if _error_code(e) != NVML_ERROR_TIMEOUT:
                    for d in self.devices:
                        self._failed(d, "xid_events", e)
                return
            try:
                index = by_uuid.get(_text(nvml.nvmlDeviceGetUUID(event.device)))
            except nvml.NVMLError:
                index = None
            if index is None:
                continue
            self._xid[index] = self._xid.get(index, 0) + 1
            self._log.warning("GPU %d: XID %s", index, getattr(event, "eventData", "?"))


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
