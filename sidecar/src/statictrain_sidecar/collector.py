"""The one Prometheus collector of the sidecar: every family is built fresh at each scrape.

``collect()`` tails the channel up to now, queries NVML now, and yields metric
families named in ``statictrain.metrics`` with the pod's identity labels (plus
gpu, gpu_uuid and gpu_model on GPU metrics). Label sets are fixed and small:
identity values come from the pod, GPU labels from the few GPUs of the pod, and
the extra labels (direction, type, query, reason, outcome) have fixed values.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from statictrain import metrics
from statictrain.channel import CACHE_STATUSES, SETTINGS_BY
from statictrain.cost import below_label

from .nvml import GpuReading, GpuSampler, Value
from .settings import Identity
from .training import STEP_SECONDS_BUCKETS, TrainingFeed, TrainingSnapshot

__all__ = ["EXPORTED_METRICS", "GPU_LABELS", "SidecarCollector"]

GPU_LABELS = ("gpu", "gpu_uuid", "gpu_model")

_GPU_HELP: dict[str, tuple[str, str]] = {  # metric -> (type, help)
    metrics.GPU_UTILIZATION_RATIO: ("gauge", "Fraction of the last NVML sample period a kernel ran (0-1)."),
    metrics.GPU_MEMORY_UTILIZATION_RATIO: (
        "gauge",
        "Fraction of the last sample period device memory was read or written (0-1).",
    ),
    metrics.GPU_MEMORY_USED_BYTES: ("gauge", "Device memory in use."),
    metrics.GPU_MEMORY_TOTAL_BYTES: ("gauge", "Device memory installed."),
    metrics.GPU_POWER_WATTS: ("gauge", "Power draw."),
    metrics.GPU_ENERGY_JOULES_TOTAL: ("counter", "Energy used since the driver loaded."),
    metrics.GPU_TEMPERATURE_CELSIUS: ("gauge", "GPU core temperature."),
    metrics.GPU_SM_CLOCK_HERTZ: ("gauge", "SM clock."),
    metrics.GPU_PCIE_BYTES_TOTAL: ("counter", "PCIe bytes moved, by direction (tx from the GPU, rx to it)."),
    metrics.GPU_NVLINK_BYTES_TOTAL: ("counter", "NVLink data bytes over all links, by direction."),
    metrics.GPU_ECC_ERRORS_TOTAL: ("counter", "Volatile ECC errors since the driver loaded, by type."),
    metrics.GPU_XID_ERRORS_TOTAL: ("counter", "XID critical error events seen by this sidecar."),
    metrics.GPU_BUSY_SECONDS_TOTAL: (
        "counter",
        "Utilization integrated over time by the background sampler: "
        "rate() is the mean utilization without scrape aliasing.",
    ),
}


class SidecarCollector(Collector):
    """Reads the GPU sampler, the training feed and profile outcomes at each scrape."""

    def __init__(
        self,
        identity: Identity,
        gpus: GpuSampler,
        training: TrainingFeed,
        *,
        version: str,
        profile_outcomes: Callable[[], dict[str, int]] | None = None,
        dcgm: bool = False,
    ) -> None:
        self._identity = identity
        self._base = identity.label_values()
        self._gpus = gpus
        self._training = training
        self._version = version
        self._profile_outcomes = profile_outcomes
        self._dcgm = dcgm

    def describe(self) -> list[Metric]:
        """Nothing up front: registering must not query NVML."""
        return []

    def collect(self) -> Iterator[Metric]:
        """Every family, from values read now."""
        yield from self._sidecar()
        readings = self._gpus.read()
        yield from self._gpu(readings)
        yield from self._idle()
        if self._dcgm:
            yield from _dcgm(readings, self._identity)
        yield from self._train(self._training.snapshot())

    # --- families

    def _labels(self, *extra: str) -> list[str]:
        return [*Identity.LABEL_NAMES, *extra]

    def _sidecar(self) -> Iterator[Metric]:
        status = self._gpus.status
        info = GaugeMetricFamily(
            metrics.SIDECAR_INFO,
            "Sidecar build and NVML driver (value 1).",
            labels=self._labels("version", "driver_version"),
        )
        info.add_metric([*self._base, self._version, status.driver_version], 1)
        yield info
        avail = GaugeMetricFamily(
            metrics.GPU_AVAILABLE,
            "1 when NVML works and sees the pod's GPUs; 0 with "
            "the reason (disabled, nvml_missing, nvml_init_failed, no_devices, "
            "gpu_not_found, waiting_for_trainer).",
            labels=self._labels("reason"),
        )
        avail.add_metric([*self._base, status.reason], 1 if status.available else 0)
        yield avail
        if self._profile_outcomes is not None:
            outcomes = CounterMetricFamily(
                metrics.PROFILE_REQUESTS_TOTAL,
                "Profile requests by outcome (requested, rejected, expired, pruned).",
                labels=self._labels("outcome"),
            )
            for outcome, n in sorted(self._profile_outcomes().items()):
                outcomes.add_metric([*self._base, outcome], n)
            yield outcomes

    def _gpu(self, readings: list[GpuReading]) -> Iterator[Metric]:
        if not readings:
            return
        by_metric: dict[str, list[tuple[list[str], Value]]] = defaultdict(list)
        for reading in readings:
            gpu_values = reading.device.label_values()
            for v in reading.values:
                by_metric[v.metric].append((gpu_values, v))
        for name, (kind, help_text) in _GPU_HELP.items():
            rows = by_metric.get(name)
            if not rows:
                continue
            extra = [k for k, _ in rows[0][1].labels]
            family_type = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
            family = family_type(name, help_text, labels=self._labels(*GPU_LABELS, *extra))
            for gpu_values, v in rows:
                family.add_metric([*self._base, *gpu_values, *(val for _, val in v.labels)], v.value)
            yield family
        devices = {r.device.index: r.device for r in readings}
        errors = CounterMetricFamily(
            metrics.GPU_QUERY_ERRORS_TOTAL,
            "NVML queries that failed (other than not supported), by query.",
            labels=self._labels(*GPU_LABELS, "query"),
        )
        for (index, query), n in sorted(self._gpus.query_errors().items()):
            if index in devices:
                errors.add_metric([*self._base, *devices[index].label_values(), query], n)
        yield errors

    def _idle(self) -> Iterator[Metric]:
        idle = self._gpus.idle_seconds()
        if idle is None:
            return
        family = CounterMetricFamily(
            metrics.GPU_IDLE_SECONDS_TOTAL,
            "GPU-seconds, summed over the pod's GPUs, whose sampled utilization was below the ratio `below` "
            "(counted by the background sampler: cost accounting prices idle time from its increase).",
            labels=self._labels("below"),
        )
        family.add_metric([*self._base, below_label(self._gpus.idle_below)], idle)
        yield family

    def _train(self, s: TrainingSnapshot) -> Iterator[Metric]:
        labels = self._labels()
        base = self._base

        def gauge(name: str, help_text: str, value: float | None) -> Iterator[Metric]:
            if value is None:
                return
            family = GaugeMetricFamily(name, help_text, labels=labels)
            family.add_metric(base, value)
            yield family

        def counter(name: str, help_text: str, value: float) -> Metric:
            family = CounterMetricFamily(name, help_text, labels=labels)
            family.add_metric(base, value)
            return family

        yield counter(
            metrics.CHANNEL_MALFORMED_TOTAL, "Channel lines skipped as malformed.", s.malformed_total
        )
        if not self._training.configured:
            return
        up = GaugeMetricFamily(
            metrics.CHANNEL_UP,
            "1 when the trainer channel is read and its latest line was valid; 0 with the reason "
            "(waiting_for_trainer, not_a_file, unreadable, malformed).",
            labels=self._labels("reason"),
        )
        up.add_metric([*base, self._training.status], 1 if self._training.status == "ok" else 0)
        yield up
        yield counter(
            metrics.TRAIN_STEPS_TOTAL, "Step records read since the sidecar started.", s.steps_total
        )
        yield counter(
            metrics.TRAIN_TOKENS_TOTAL, "Tokens processed, as the trainer reports them.", s.tokens_total
        )
        yield counter(
            metrics.TRAIN_SAMPLES_TOTAL, "Samples processed, as the trainer reports them.", s.samples_total
        )
        hist = HistogramMetricFamily(
            metrics.TRAIN_STEP_SECONDS, "Wall seconds per optimizer step.", labels=labels
        )
        bounds = [*(_le(b) for b in STEP_SECONDS_BUCKETS), "+Inf"]
        hist.add_metric(base, list(zip(bounds, s.bucket_counts, strict=True)), s.step_seconds_sum)
        yield hist
        yield from gauge(
            metrics.TRAIN_SECONDS_SINCE_LAST_STEP,
            "Seconds since the last step record was read (since the sidecar started, before the first).",
            s.seconds_since_last_step,
        )
        yield from gauge(
            metrics.TRAIN_TOKENS_PER_SECOND, "Tokens per second over the last steps.", s.tokens_per_second
        )
        r = s.last
        if r is None:
            return
        yield from gauge(
            metrics.TRAIN_STEP, "Optimizer steps completed (global; resumes from checkpoints).", r.step
        )
        yield from gauge(
            metrics.TRAIN_LOSS,
            "Loss of the last step (NaN once a reported loss turned NaN).",
            r.loss if s.loss_reported else None,
        )
        yield from gauge(
            metrics.TRAIN_COMPILE_SECONDS,
            "Seconds spent compiling in this trainer process.",
            r.compile_seconds,
        )
        yield from gauge(
            metrics.TRAIN_COMPILE_CACHE_HIT,
            "1 when the compile cache was found and loaded.",
            1.0 if r.cache_hit else 0.0,
        )
        status = GaugeMetricFamily(
            metrics.TRAIN_COMPILE_CACHE_STATUS,
            "1, labelled with why the compile cache hit or missed (unknown: the trainer did not say).",
            labels=self._labels("status"),
        )
        known = r.cache_status if r.cache_status in CACHE_STATUSES else ("other" if r.cache_status else "unknown")
        status.add_metric([*base, known], 1.0)
        yield status
        yield from gauge(
            metrics.TRAIN_GRAPH_BREAKS, "torch.compile graph breaks in this process.", r.graph_breaks
        )
        yield from gauge(
            metrics.TRAIN_RECOMPILES, "torch.compile recompilations in this process.", r.recompiles
        )
        yield from gauge(
            metrics.TRAIN_MFU_RATIO,
            "Model FLOPs utilization estimate (0-1).",
            None if math.isnan(r.mfu) else r.mfu,
        )
        if r.settings:
            info = GaugeMetricFamily(
                metrics.TRAIN_SETTINGS_INFO,
                "1, labelled with what the trainer runs (compile mode@batch+levers) and who chose it "
                "(spec, autotune; other: the trainer said something else).",
                labels=self._labels("settings", "chosen_by"),
            )
            by = r.settings_by if r.settings_by in SETTINGS_BY else "other"
            info.add_metric([*base, r.settings, by], 1.0)
            yield info
        yield from gauge(
            metrics.TRAIN_AUTOTUNE_SPEEDUP,
            "The autotuner's pick over its first trial (the spec's batch in default mode), samples/s as it measured.",
            r.autotune_speedup if math.isfinite(r.autotune_speedup) else None,
        )
        if r.rank_seconds:
            ranks = GaugeMetricFamily(
                metrics.TRAIN_RANK_STEP_SECONDS,
                "Each rank's local seconds of the last step, before gradient synchronization (stragglers).",
                labels=self._labels("rank"),
            )
            for rank, seconds in enumerate(r.rank_seconds):
                if math.isfinite(seconds):
                    ranks.add_metric([*base, str(rank)], seconds)
            yield ranks


DCGM_LABELS = ("gpu", "UUID", "device", "modelName", "namespace", "pod")
"""dcgm-exporter's label names (with its Kubernetes pod mapping)."""
_DCGM: tuple[tuple[str, str, str, float], ...] = (
    # DCGM name, our metric, help, scale
    (metrics.DCGM_GPU_UTIL, metrics.GPU_UTILIZATION_RATIO, "GPU utilization (in %).", 100.0),
    (metrics.DCGM_POWER_USAGE, metrics.GPU_POWER_WATTS, "Power draw (in W).", 1.0),
    (metrics.DCGM_FB_USED, metrics.GPU_MEMORY_USED_BYTES, "Framebuffer memory used (in MiB).", 1.0 / 2**20),
)
DCGM_METRICS: tuple[str, ...] = tuple(name for name, *_ in _DCGM)
"""The DCGM-compatible names exported when enabled (documented in sidecar/README.md)."""


def _dcgm(readings: list[GpuReading], identity: Identity) -> Iterator[Metric]:
    """The same NVML readings as dcgm-exporter names, units and labels them."""
    for name, source, help_text, scale in _DCGM:
        family = GaugeMetricFamily(name, help_text, labels=list(DCGM_LABELS))
        for reading in readings:
            d = reading.device
            for v in reading.values:
                if v.metric == source:
                    labels = [str(d.index), d.uuid, f"nvidia{d.index}", d.model, identity.namespace, identity.pod]
                    family.add_metric(labels, v.value * scale)
        if family.samples:
            yield family


def _le(bound: float) -> str:
    return repr(float(bound))


EXPORTED_METRICS: tuple[str, ...] = (
    metrics.SIDECAR_INFO,
    metrics.GPU_AVAILABLE,
    metrics.CHANNEL_MALFORMED_TOTAL,
    metrics.CHANNEL_UP,
    metrics.PROFILE_REQUESTS_TOTAL,
    *_GPU_HELP,
    metrics.GPU_IDLE_SECONDS_TOTAL,
    metrics.GPU_QUERY_ERRORS_TOTAL,
    metrics.TRAIN_STEP,
    metrics.TRAIN_STEPS_TOTAL,
    metrics.TRAIN_STEP_SECONDS,
    metrics.TRAIN_TOKENS_TOTAL,
    metrics.TRAIN_SAMPLES_TOTAL,
    metrics.TRAIN_TOKENS_PER_SECOND,
    metrics.TRAIN_LOSS,
    metrics.TRAIN_COMPILE_SECONDS,
    metrics.TRAIN_COMPILE_CACHE_HIT,
    metrics.TRAIN_COMPILE_CACHE_STATUS,
    metrics.TRAIN_GRAPH_BREAKS,
    metrics.TRAIN_RECOMPILES,
    metrics.TRAIN_MFU_RATIO,
    metrics.TRAIN_SETTINGS_INFO,
    metrics.TRAIN_AUTOTUNE_SPEEDUP,
    metrics.TRAIN_SECONDS_SINCE_LAST_STEP,
    metrics.TRAIN_RANK_STEP_SECONDS,
)
"""Every metric name this collector can export (documented in sidecar/README.md, section Metrics)."""
