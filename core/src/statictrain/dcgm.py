"""NVIDIA dcgm-exporter's series as statictrain's GPU figures (pure): names, labels and units in one place.

dcgm-exporter names each GPU by ``gpu`` (index), ``UUID``, ``modelName`` and ``Hostname`` and, with its
kubelet pod-resources mapping on, the pod the GPU is allocated to by ``pod``, ``namespace`` and
``container``. Its fields come in DCGM's units: DCGM_FI_DEV_GPU_UTIL in percent, DCGM_FI_DEV_FB_USED in MiB,
DCGM_FI_DEV_POWER_USAGE in W, DCGM_FI_PROF_GR_ENGINE_ACTIVE as a ratio; statictrain's figures are ratios,
bytes and watts. Cost accounting reads the utilization (the one GPU figure it prices), converted to a
ratio; the anomaly detector reads it too, with the power (:data:`POWER_METRIC`) and the framebuffer in use
(:data:`FB_USED_METRIC`, in bytes: :data:`FB_USED_FACTOR`). ``container``, ``modelName`` and ``Hostname``
are not needed to attribute a series.

:func:`attribute` maps one series to the worker pod whose lifetime holds each sample, by namespace and pod
name (dcgm-exporter has no pod UID); a series it cannot attribute is ignored with a reason
(:data:`IGNORED_REASONS`), never given to another pod. :func:`attribute_all` does it for many series, per
pod UID and GPU, counting the ignored ones.

Settings: ``STATICTRAIN_DCGM_<FIELD>`` (chart values ``dcgm.*``).
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from statictrain import envconfig, metrics
from statictrain.counters import Sample

__all__ = [
    "ENV_PREFIX",
    "FB_USED_FACTOR",
    "FB_USED_METRIC",
    "IGNORED_REASONS",
    "NOT_A_WORKER",
    "NO_GPU_LABEL",
    "NO_POD_LABELS",
    "OUTSIDE_POD_LIFETIME",
    "POWER_METRIC",
    "SOURCES",
    "UNITS",
    "DcgmSettings",
    "Lifetime",
    "Pod",
    "attribute",
    "attribute_all",
]

ENV_PREFIX = "STATICTRAIN_DCGM_"
SOURCES = ("sidecar", "dcgm", "auto")
"""Where GPU utilization comes from: the sidecars' NVML sampling (default), dcgm-exporter only, or
dcgm-exporter for the pods whose sidecar exports no GPU series."""
UNITS = {"percent": 0.01, "ratio": 1.0}
"""Utilization units and their factor to a ratio."""
POWER_METRIC = metrics.DCGM_POWER_USAGE
"""The board's power draw, in watts (the sidecar's statictrain_gpu_power_watts)."""
FB_USED_METRIC = metrics.DCGM_FB_USED
"""Framebuffer in use, in MiB (the sidecar's statictrain_gpu_memory_used_bytes, times FB_USED_FACTOR)."""
FB_USED_FACTOR = 2.0**20

NO_POD_LABELS = "no-pod-labels"
"""The series has no (or an empty) pod or namespace label: the GPU is not allocated to a pod, or the
exporter runs without its pod mapping (or the labels were renamed by the scrape: see pod_label)."""
NOT_A_WORKER = "not-a-worker-pod"
"""No statictrain worker pod of that namespace and name was listed for the window."""
NO_GPU_LABEL = "no-gpu-label"
"""Neither the UUID nor the gpu label: which GPU of the pod it is cannot be told."""
OUTSIDE_POD_LIFETIME = "outside-pod-lifetime"
"""Every sample lies outside the lifetime of the pods of that name (a pod of the same name before or after)."""
IGNORED_REASONS = (NO_POD_LABELS, NOT_A_WORKER, NO_GPU_LABEL, OUTSIDE_POD_LIFETIME)


@dataclass(frozen=True)
class DcgmSettings:
    """Which dcgm-exporter series the operator reads, and their label names (one place for both)."""

    source: str = "sidecar"
    """sidecar | dcgm | auto (see SOURCES)."""
    utilization_metric: str = "DCGM_FI_DEV_GPU_UTIL"
    """The utilization series (same definition as NVML's: share of time a kernel ran)."""
    utilization_unit: str = "percent"
    """percent | ratio: ratio for DCGM_FI_PROF_GR_ENGINE_ACTIVE (graphics-engine activity, a profiling
    field not every GPU has), to price idle time from it instead."""
    pod_label: str = "pod"
    """The pod the GPU is allocated to (``exported_pod`` where the scrape kept the exporter's own pod)."""
    namespace_label: str = "namespace"
    gpu_label: str = "gpu"
    """The GPU's index, used when the series has no UUID."""
    uuid_label: str = "UUID"
    scrape_job: str = ""
    """Read only the series of this Prometheus ``job`` (dcgm-exporter's scrape job); empty: any. Set it when
    other exporters' claims could reach these names (e.g. with pod_label ``exported_pod``)."""

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"{ENV_PREFIX}SOURCE={self.source!r}: write one of {', '.join(SOURCES)}")
        if self.utilization_unit not in UNITS:
            raise ValueError(f"{ENV_PREFIX}UTILIZATION_UNIT={self.utilization_unit!r}: write percent or ratio")
        for name in ("utilization_metric", "pod_label", "namespace_label", "gpu_label", "uuid_label"):
            if not getattr(self, name):
                raise ValueError(f"{ENV_PREFIX}{name.upper()} is empty: name the series or label, or unset it")

    @property
    def reads_dcgm(self) -> bool:
        return self.source != "sidecar"

    @property
    def reads_sidecar_gpu(self) -> bool:
        return self.source != "dcgm"

    @property
    def utilization_factor(self) -> float:
        return UNITS[self.utilization_unit]

    def gpu_key(self, labels: Mapping[str, str]) -> str:
        """The GPU a series is of (UUID, else index), as the sidecar's gpu_uuid / gpu labels key it; ""
        when neither label is there."""
        return labels.get(self.uuid_label) or labels.get(self.gpu_label) or ""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> DcgmSettings:
        """Settings from ``STATICTRAIN_DCGM_*``; a bad value raises ValueError naming the variable."""
        return envconfig.fill(cls, ENV_PREFIX, os.environ if env is None else env)


class Lifetime(Protocol):
    """A worker pod as the attribution needs it (statictrain.cost.PodInfo is one)."""

    @property
    def uid(self) -> str: ...
    @property
    def started(self) -> float | None: ...
    @property
    def finished(self) -> float | None: ...


class Pod(Lifetime, Protocol):
    """A worker pod by name and lifetime (statictrain.cost.PodInfo and the operator's WorkerPod are)."""

    @property
    def name(self) -> str: ...
    @property
    def namespace(self) -> str: ...


def _alive(pod: Lifetime, t: float) -> bool:
    return pod.started is not None and pod.started <= t and (pod.finished is None or t < pod.finished)


def attribute(
    labels: Mapping[str, str],
    samples: Sequence[Sample],
    pods: Mapping[tuple[str, str], Sequence[Lifetime]],
    settings: DcgmSettings,
    scale: float = 1.0,
) -> tuple[dict[str, list[Sample]], str, str]:
    """One dcgm-exporter series -> (pod UID -> its samples times ``scale``, the GPU key, "") or ({}, "",
    the reason it is ignored).

    ``pods`` maps (namespace, pod name) to the worker pods of that name (two when a pod was replaced by one
    of the same name). Each sample goes to the pod whose [started, finished) holds it; a sample no pod of
    that name was alive for (a pod of the same name before it, not listed any more) goes to none, as a
    sidecar's series starts with its pod."""
    ns, name = labels.get(settings.namespace_label, ""), labels.get(settings.pod_label, "")
    if not ns or not name:
        return {}, "", NO_POD_LABELS
    candidates = pods.get((ns, name), ())
    if not candidates:
        return {}, "", NOT_A_WORKER
    gpu = settings.gpu_key(labels)
    if not gpu:
        return {}, "", NO_GPU_LABEL
    out: dict[str, list[Sample]] = {}
    for s in samples:
        owner = next((p for p in candidates if _alive(p, s.t)), None)
        if owner is not None:
            out.setdefault(owner.uid, []).append(Sample(s.t, s.v * scale))
    if not out:
        return {}, "", OUTSIDE_POD_LIFETIME
    return out, gpu, ""


def attribute_all(
    series: Iterable[tuple[Mapping[str, str], Sequence[Sample]]],
    pods: Iterable[Pod],
    settings: DcgmSettings,
    scale: float = 1.0,
) -> tuple[dict[str, dict[str, list[Sample]]], dict[str, list[Mapping[str, str]]]]:
    """Many dcgm-exporter series (labels, samples) -> pod UID -> GPU -> its samples times ``scale`` (in time
    order: several series of one GPU, e.g. two containers of it, are merged), and per reason the labels of the
    series that were ignored."""
    by_name: dict[tuple[str, str], list[Pod]] = defaultdict(list)
    for p in pods:
        by_name[(p.namespace, p.name)].append(p)
    out: dict[str, dict[str, list[Sample]]] = defaultdict(lambda: defaultdict(list))
    ignored: dict[str, list[Mapping[str, str]]] = defaultdict(list)
    for labels, samples in series:
        owned, gpu, reason = attribute(labels, samples, by_name, settings, scale)
        if reason:
            ignored[reason].append(labels)
        for uid, mine in owned.items():
            out[uid][gpu] = sorted([*out[uid][gpu], *mine])
    return {uid: dict(g) for uid, g in out.items()}, dict(ignored)
