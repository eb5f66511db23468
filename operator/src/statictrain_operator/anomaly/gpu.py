"""A job's GPU series from raw series: the sidecars' (by ``pod_uid``) and dcgm-exporter's (by pod name and
lifetime, ``statictrain.dcgm``), aggregated over the job's GPUs as the PromQL of queries.py does. Pure.

Each GPU counts once at each instant: the sidecar names it by ``gpu_uuid`` (else ``gpu``) under its pod UID,
dcgm-exporter by ``UUID`` (else ``gpu``) under the pod whose lifetime holds the sample; several series of one GPU
at one instant (two containers, two scrapes) are averaged first. With ``auto`` a pod whose sidecar exports the
series keeps the sidecar's, the others get dcgm-exporter's. A dcgm-exporter series that cannot be attributed
(no GPU label, every sample outside the lifetimes of the pods of its name) is returned as ignored, never
given to another pod.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence

from statictrain.dcgm import DcgmSettings, Pod, attribute_all

from statictrain_operator.anomaly.faults import Series
from statictrain_operator.anomaly.queries import GpuQuery
from statictrain_operator.prom import Series as PromSeries
from statictrain_operator.workerpods import POD_UID

__all__ = ["combine"]


def combine(
    q: GpuQuery,
    sidecar: Iterable[PromSeries],
    dcgm: Iterable[PromSeries],
    pods: Sequence[Pod],
    settings: DcgmSettings,
) -> tuple[Series, dict[str, list[Mapping[str, str]]]]:
    """The job's series (unix seconds, values) from the answers to ``q.sidecar`` and ``q.dcgm`` (range queries
    over the same steps), and per reason (statictrain.dcgm.IGNORED_REASONS) the dcgm-exporter series ignored."""
    per_gpu: dict[tuple[str, str], dict[float, list[float]]] = {}
    for s in sidecar:
        uid = s.labels.get(POD_UID, "")
        if uid:
            gpu = s.labels.get("gpu_uuid") or s.labels.get("gpu") or "0"
            for p in s.samples:
                per_gpu.setdefault((uid, gpu), {}).setdefault(p.t, []).append(p.v)
    with_sidecar = {uid for uid, _ in per_gpu}
    owned, ignored = attribute_all(((s.labels, s.samples) for s in dcgm), pods, settings, q.scale)
    for uid, gpus in owned.items():
        if uid in with_sidecar:
            continue  # auto: this pod's sidecar gives the series
        for gpu, samples in gpus.items():
            for p in samples:
                per_gpu.setdefault((uid, gpu), {}).setdefault(p.t, []).append(p.v)
    at: dict[float, list[float]] = {}
    for values in per_gpu.values():
        for t, vs in values.items():
            at.setdefault(t, []).append(statistics.fmean(vs))
    agg = max if q.aggregate == "max" else statistics.fmean
    ts = sorted(at)
    return (ts, [agg(at[t]) for t in ts]), ignored
