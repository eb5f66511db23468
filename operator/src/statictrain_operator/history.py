"""Measured training speed per GPU model, from the sidecars' metrics in Prometheus.

Training metrics carry the pod (``pod_uid``) but not its GPU model; GPU metrics
carry both. :func:`per_model` joins them (pure); :func:`query_speed` runs the
queries through an injected reader. Used by ``statictrain gate`` (tokens/s per
GPU model of a commit) and ``statictrain estimate`` (measured history).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from statictrain import metrics
from statictrain.promql import range_duration, selector

from statictrain_operator.prom import PromReader, Series

__all__ = ["UNKNOWN_MODEL", "Speed", "per_gpu", "per_model", "query_per_gpu", "query_speed"]

UNKNOWN_MODEL = "unknown"
"""GPU model of a pod that exported no GPU metric (no NVML, or CPU only)."""

Labels = Mapping[str, str]


@dataclass(frozen=True)
class Speed:
    """Mean speed of one worker pod on one GPU model."""

    tokens_per_s: float | None
    step_s: float | None
    pods: int


def _mean(xs: Sequence[float]) -> float | None:
    return math.fsum(xs) / len(xs) if xs else None


def per_model(
    tokens_per_s: Iterable[tuple[Labels, float]],
    step_s: Iterable[tuple[Labels, float]],
    models: Iterable[tuple[Labels, str]],
    group_label: str,
) -> dict[str, dict[str, Speed]]:
    """group (value of ``group_label``) -> GPU model -> mean per-pod speed.

    Pods are joined to their GPU model by ``pod_uid``; a pod without a GPU
    metric counts under :data:`UNKNOWN_MODEL`. Non-finite values are dropped.
    """
    model_of = {lbl.get("pod_uid", ""): m for lbl, m in models}
    acc: dict[tuple[str, str], tuple[list[float], list[float], set[str]]] = defaultdict(lambda: ([], [], set()))
    for which, values in (("tps", tokens_per_s), ("step", step_s)):
        for lbl, v in values:
            if not math.isfinite(v) or v <= 0:
                continue
            uid = lbl.get("pod_uid", "")
            tps, steps, pods = acc[(lbl.get(group_label, ""), model_of.get(uid, UNKNOWN_MODEL))]
            (tps if which == "tps" else steps).append(v)
            pods.add(uid)
    out: dict[str, dict[str, Speed]] = defaultdict(dict)
    for (group, model), (tps, steps, pods) in sorted(acc.items()):
        out[group][model] = Speed(_mean(tps), _mean(steps), len(pods))
    return dict(out)


def _last(series: list[Series]) -> list[tuple[Labels, float]]:
    return [(s.labels, s.samples[-1].v) for s in series if s.samples]


def query_speed(
    reader: PromReader, any_of: Mapping[str, Sequence[str]], at: float, span_s: float, group_label: str
) -> dict[str, dict[str, Speed]]:
    """Per-pod mean tokens/s and step time over ``[at - span_s, at]`` of the pods matching ``any_of``."""
    span = range_duration(span_s)
    pods = "commit, job_name, namespace, pod_uid"
    tps = reader.query(f"avg_over_time({selector(metrics.TRAIN_TOKENS_PER_SECOND, any_of=any_of)}[{span}])", at)
    step_sum = selector(f"{metrics.TRAIN_STEP_SECONDS}_sum", any_of=any_of)
    step_count = selector(f"{metrics.TRAIN_STEP_SECONDS}_count", any_of=any_of)
    steps = reader.query(
        f"sum by ({pods}) (increase({step_sum}[{span}])) / sum by ({pods}) (increase({step_count}[{span}]))", at
    )
    gpus = reader.query(
        f"count by ({pods}, gpu_model) "
        f"(last_over_time({selector(metrics.GPU_MEMORY_TOTAL_BYTES, any_of=any_of)}[{span}]))",
        at,
    )
    return per_model(
        _last(tps), _last(steps), [(s.labels, s.labels.get("gpu_model", UNKNOWN_MODEL)) for s in gpus], group_label
    )


def per_gpu(
    tokens_per_s: Iterable[tuple[Labels, float]], gpu_counts: Iterable[tuple[Labels, float]]
) -> dict[str, float]:
    """GPU model -> mean over pods of (the pod's tokens/s / its GPUs). ``gpu_counts``: one series per pod and
    GPU model whose value is the pod's GPU count (the ``count by (pod_uid, gpu_model)`` of GPU metrics).
    Pods without a GPU metric, or on more than one model, are left out."""
    counts: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for lbl, n in gpu_counts:
        if n > 0:
            counts[lbl.get("pod_uid", "")].append((lbl.get("gpu_model", UNKNOWN_MODEL), n))
    acc: dict[str, list[float]] = defaultdict(list)
    for lbl, v in tokens_per_s:
        found = counts.get(lbl.get("pod_uid", ""), [])
        if len(found) != 1 or not math.isfinite(v) or v <= 0:
            continue
        model, n = found[0]
        acc[model].append(v / n)
    return {model: math.fsum(vals) / len(vals) for model, vals in sorted(acc.items())}


def query_per_gpu(
    reader: PromReader, any_of: Mapping[str, Sequence[str]], at: float, span_s: float
) -> dict[str, float]:
    """Measured tokens/s per GPU per GPU model over ``[at - span_s, at]`` of the pods matching ``any_of``
    (TRAIN_TOKENS_PER_SECOND is per worker pod)."""
    span = range_duration(span_s)
    tps = reader.query(f"avg_over_time({selector(metrics.TRAIN_TOKENS_PER_SECOND, any_of=any_of)}[{span}])", at)
    gpus = reader.query(
        f"count by (pod_uid, gpu_model) "
        f"(last_over_time({selector(metrics.GPU_MEMORY_TOTAL_BYTES, any_of=any_of)}[{span}]))",
        at,
    )
    return per_gpu(_last(tps), _last(gpus))
