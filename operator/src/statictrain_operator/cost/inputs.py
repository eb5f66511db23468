"""Turn API objects and Prometheus series into the cost model's inputs (pure).

Pods become :class:`PodInfo` keyed by UID (with CPU and memory requests and their
node rank), nodes :class:`NodeInfo` priced from their annotations (or priced on the
spot when not yet annotated), GPU and CPU-only alike, and the raw samples of the
sidecar's and cAdvisor's series :class:`PodUsage` per pod UID (see
:mod:`statictrain.counters` for why raw samples). GPU utilization comes from the sidecars' series, or from
dcgm-exporter's (:mod:`statictrain.dcgm`, attributed by namespace and pod name) as the settings say.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from statictrain import labels, metrics
from statictrain.carbon import GridIntensity
from statictrain.cost import (
    DEFAULT_WEIGHTS,
    IDLE_THRESHOLD,
    NodeInfo,
    PodInfo,
    PodUsage,
    ResourcePrices,
    Window,
    below_label,
)
from statictrain.counters import Counter, Sample
from statictrain.dcgm import DcgmSettings, attribute_all
from statictrain.money import parse_usd
from statictrain.pricing import NodeFacts
from statictrain.promql import Matcher, range_duration, selector
from statictrain.quantities import parse_quantity

from statictrain_operator.cost.annotator import node_facts
from statictrain_operator.prom import Series
from statictrain_operator.workerpods import TERMINAL, finished_at, parse_time

__all__ = [
    "CADVISOR_CPU",
    "CADVISOR_MEMORY",
    "COMPLETION_INDEX",
    "COUNTERS",
    "DCGM_UTIL",
    "EPSILON_S",
    "GIB",
    "HELD",
    "INVALID_PRICE",
    "MAX_NODE_HOURLY_USD",
    "TERMINAL",
    "build_usage",
    "counters_missing_prev",
    "dcgm_utilization",
    "node_info",
    "parse_time",
    "pod_info",
    "prev_query",
    "series_key",
    "usage_queries",
]

log = logging.getLogger(__name__)
INVALID_PRICE = "node-price-annotation-invalid"
MAX_NODE_HOURLY_USD = Decimal(10_000)
"""An hourly node price at or above this is taken for a typo (the largest catalog rows are ~100 $/h)."""

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
GIB = 2.0**30


def _request(spec: Mapping[str, Any], resource: str) -> float:
    """Sum over containers of the request (else the limit, as the API server defaults it)."""
    total = 0.0
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        raw = (res.get("requests") or {}).get(resource)
        if raw is None:
            raw = (res.get("limits") or {}).get(resource)
        if raw is not None:
            total += parse_quantity(raw, what=f"container {c.get('name', '?')} {resource}")
    return total


def _rank(meta: Mapping[str, Any]) -> int:
    raw = (meta.get("annotations") or {}).get(COMPLETION_INDEX) or (meta.get("labels") or {}).get(COMPLETION_INDEX)
    return int(raw) if raw is not None and str(raw).isdigit() else 0


def pod_info(pod: Mapping[str, Any]) -> PodInfo | None:
    """The cost model's view of a worker pod; None when it is not a statictrain job's pod."""
    meta = pod.get("metadata") or {}
    lab = meta.get("labels") or {}
    job = lab.get(labels.JOB)
    if not job or not meta.get("uid"):
        return None
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    return PodInfo(
        uid=meta["uid"],
        name=meta.get("name", ""),
        namespace=meta.get("namespace", ""),
        job=job,
        node=spec.get("nodeName"),
        gpus_requested=round(_request(spec, labels.GPU_RESOURCE)),
        started=parse_time(status.get("startTime")),
        finished=finished_at(pod),
        commit=lab.get(labels.COMMIT, ""),
        team=lab.get(labels.TEAM, ""),
        cpu_requested=_request(spec, "cpu"),
        memory_requested_gib=_request(spec, "memory") / GIB,
        rank=_rank(meta),
    )


def _capacity(node: Mapping[str, Any], resource: str) -> float:
    status = node.get("status") or {}
    raw = (status.get("allocatable") or {}).get(resource) or (status.get("capacity") or {}).get(resource)
    return parse_quantity(raw, what=f"node capacity {resource}") if raw is not None else 0.0


def node_info(
    node: Mapping[str, Any],
    price_now: Callable[[NodeFacts], Decimal],
    weights: ResourcePrices = DEFAULT_WEIGHTS,
    carbon: GridIntensity | None = None,
) -> NodeInfo:
    """A node (GPU or CPU-only) with its hourly price from the annotator's annotation (or priced now if missing)
    and its grid carbon intensity (``carbon``; none without it).

    A malformed, zero or non-finite annotation is not the node's price: the node is priced now (catalog)
    and its pods' jobs are flagged ``node-price-annotation-invalid`` (logged with the node's name). A malformed
    intensity annotation is logged, and the node's carbon is unknown (flagged on its jobs)."""
    facts = node_facts(node)
    ann = (node.get("metadata") or {}).get("annotations") or {}
    raw = ann.get(labels.HOURLY_COST)
    flag = ""
    hourly: Decimal | None = None
    if raw:
        try:
            hourly = parse_usd(raw, what=f"node {facts.name} annotation {labels.HOURLY_COST}")
        except ValueError as e:
            log.warning("%s; priced from the catalog instead (jobs flagged %s)", e, INVALID_PRICE)
        if hourly is None or not 0 < hourly < MAX_NODE_HOURLY_USD:
            flag, hourly = INVALID_PRICE, None
    if hourly is None:
        hourly = price_now(facts)
    meta = node.get("metadata") or {}
    intensity, source = carbon.of(node) if carbon is not None else (None, "unknown")
    if intensity is None and source != "unknown":
        log.warning("%s; the node's carbon is unknown (jobs flagged carbon-intensity-unknown)", source)
    return NodeInfo(
        facts.name,
        hourly,
        facts.gpu_count,
        cpu=_capacity(node, "cpu"),
        memory_gib=_capacity(node, "memory") / GIB,
        present_from=parse_time(meta.get("creationTimestamp")),
        present_to=parse_time(meta.get("deletionTimestamp")),
        weights=weights,
        price_flag=flag,
        grid_intensity=intensity,
    )


# ----------------------------------------------------------------------------- Prometheus

COUNTERS = {
    "tokens": metrics.TRAIN_TOKENS_TOTAL,
    "steps": metrics.TRAIN_STEPS_TOTAL,
    "compile": metrics.TRAIN_COMPILE_SECONDS,
    "idle": metrics.GPU_IDLE_SECONDS_TOTAL,
    "energy": metrics.GPU_ENERGY_JOULES_TOTAL,
}
"""Per-process counters of the sidecar, keyed by pod_uid (compile seconds only grow within a process; the
idle counter is read at the accounting threshold only, see ``_counter_labels``). The energy counter is one
series per GPU (``gpu_uuid``) and counts from when the driver loaded, not from 0 (see ``cost``)."""
HELD = {"util": metrics.GPU_UTILIZATION_RATIO, "step": metrics.TRAIN_STEP}
"""Gauges held until their next sample, keyed by pod_uid."""
CADVISOR_CPU = "container_cpu_usage_seconds_total"
CADVISOR_MEMORY = "container_memory_working_set_bytes"
_REAL_CONTAINER = (Matcher("container", "!=", ""), Matcher("container", "!=", "POD"))
EPSILON_S = 0.001
"""Range selectors are evaluated at ``end - 1 ms``: on Prometheus' millisecond grid they then hold ``[start, end)``."""


def _counter_labels(key: str, idle_below: float) -> dict[str, str]:
    return {"below": below_label(idle_below)} if key == "idle" else {}


DCGM_UTIL = "dcgm_util"
"""The key of dcgm-exporter's utilization series among :func:`usage_queries`."""
_SIDECAR_GPU = ("util", "idle")
_SIDECARS = DcgmSettings()


def usage_queries(
    window: Window, lookback_s: float, idle_below: float = IDLE_THRESHOLD, gpu: DcgmSettings = _SIDECARS
) -> dict[str, tuple[str, float]]:
    """key -> (PromQL, evaluation time) of one accounting window: raw samples in ``[start - lookback, end)``;
    the idle counter counted below ``idle_below``. ``gpu.source`` says whose GPU series: the sidecars'
    (``util``, ``idle``), dcgm-exporter's (``dcgm_util``: every series of the metric, so the ones that
    cannot be attributed are counted), or both."""
    rng = range_duration(window.seconds + lookback_s)
    at = window.end - EPSILON_S
    out = {k: (f"{selector(m, _counter_labels(k, idle_below))}[{rng}]", at) for k, m in {**COUNTERS, **HELD}.items()
           if gpu.reads_sidecar_gpu or k not in _SIDECAR_GPU}  # fmt: skip
    if gpu.reads_dcgm:
        only = {"job": gpu.scrape_job} if gpu.scrape_job else None
        out[DCGM_UTIL] = (f"{selector(gpu.utilization_metric, only)}[{rng}]", at)
    out["cpu"] = (f"{selector(CADVISOR_CPU, matchers=_REAL_CONTAINER)}[{rng}]", at)
    out["memory"] = (f"{selector(CADVISOR_MEMORY, matchers=_REAL_CONTAINER)}[{rng}]", at)
    return out


def prev_query(
    key: str, uids: Iterable[str], window: Window, lookback_s: float, idle_below: float = IDLE_THRESHOLD
) -> tuple[str, float]:
    """The last value before the window of counter ``key`` for these pod UIDs, looking back ``lookback_s``."""
    sel = selector(COUNTERS[key], _counter_labels(key, idle_below), any_of={"pod_uid": sorted(set(uids))})
    return f"last_over_time({sel}[{range_duration(lookback_s)}])", window.start - EPSILON_S


def series_key(series_labels: Mapping[str, str]) -> str:
    """What a counter's last value further back is keyed by: its pod UID, and its GPU for per-GPU series."""
    uid = series_labels.get("pod_uid", "")
    gpu = series_labels.get("gpu_uuid")
    return f"{uid}/{gpu}" if gpu else uid


def _ms(t: float) -> int:
    return round(t * 1000)


def _counter(samples: Sequence[Sample], window: Window, prev: float | None) -> Counter:
    a, b = _ms(window.start), _ms(window.end)
    before = [s for s in samples if _ms(s.t) < a]
    inside = tuple(s for s in samples if a <= _ms(s.t) < b)
    return Counter(before[-1].v if before else prev, inside, before[-1].t if before else None)


def _held(samples: Sequence[Sample], window: Window) -> list[Sample]:
    b = _ms(window.end)
    return [s for s in samples if _ms(s.t) < b]


def counters_missing_prev(
    window: Window, series: Mapping[str, Iterable[Series]], started: Mapping[str, float | None], lookback_s: float
) -> dict[str, list[str]]:
    """Counter key -> pod UIDs whose series has no sample in the lookback before the window although the pod
    ran before it (a scrape gap longer than the lookback): their last value must be looked up further back."""
    out: dict[str, list[str]] = {}
    a = _ms(window.start)
    for key in COUNTERS:
        if key not in series:
            continue  # not read (the sidecars' idle counter when GPU utilization comes from dcgm-exporter)
        with_prev = {s.labels.get("pod_uid", "") for s in series.get(key, ()) if any(_ms(p.t) < a for p in s.samples)}
        missing = [
            uid
            for uid, t in started.items()
            if t is not None and t < window.start - lookback_s and uid not in with_prev
        ]
        if missing:
            out[key] = sorted(missing)
    return out


def dcgm_utilization(
    window: Window, series: Iterable[Series], pods: Iterable[PodInfo], settings: DcgmSettings
) -> tuple[dict[str, dict[str, list[Sample]]], dict[str, int]]:
    """dcgm-exporter's utilization series as the sidecars' are read: pod UID -> GPU -> ratio samples before
    the window's end; and per reason (statictrain.dcgm.IGNORED_REASONS) how many series were ignored."""
    held = ((s.labels, _held(s.samples, window)) for s in series)
    util, ignored = attribute_all(held, pods, settings, settings.utilization_factor)
    return util, {reason: len(of) for reason, of in ignored.items()}


def build_usage(
    window: Window,
    series: Mapping[str, Iterable[Series]],
    pod_uids: Mapping[tuple[str, str], str] | None = None,
    prevs: Mapping[str, Mapping[str, float]] | None = None,
    dcgm_util: Mapping[str, Mapping[str, Sequence[Sample]]] | None = None,
) -> dict[str, PodUsage]:
    """Per pod UID usage for ``window`` from the raw series of :func:`usage_queries`.

    ``pod_uids`` maps (namespace, pod name) to UID for cAdvisor's series (which carry
    no UID); ``prevs`` holds, per counter key and :func:`series_key`, a last value found further back;
    ``dcgm_util`` (:func:`dcgm_utilization`) is the GPU utilization of the pods whose
    sidecars gave none.
    """
    pod_uids = pod_uids or {}
    prevs = prevs or {}
    util: dict[str, dict[str, list[Sample]]] = defaultdict(lambda: defaultdict(list))
    step: dict[str, list[Sample]] = defaultdict(list)
    counters: dict[str, dict[str, list[Counter]]] = defaultdict(lambda: defaultdict(list))
    cpu: dict[str, list[Counter]] = defaultdict(list)
    mem: dict[str, list[list[Sample]]] = defaultdict(list)
    for s in series.get("util", ()):
        uid = s.labels.get("pod_uid")
        if uid:
            gpu = s.labels.get("gpu_uuid") or s.labels.get("gpu") or "0"
            util[uid][gpu] = sorted([*util[uid][gpu], *_held(s.samples, window)])  # one GPU, several series
    for uid, per_gpu in (dcgm_util or {}).items():
        if uid not in util:
            util[uid] = defaultdict(list, {g: list(v) for g, v in per_gpu.items()})
    for s in series.get("step", ()):
        uid = s.labels.get("pod_uid")
        if uid:
            step[uid] = sorted([*step[uid], *_held(s.samples, window)])
    for key in COUNTERS:
        for s in series.get(key, ()):
            uid = s.labels.get("pod_uid")
            if uid:
                counters[uid][key].append(_counter(s.samples, window, prevs.get(key, {}).get(series_key(s.labels))))
    for s in series.get("cpu", ()):
        uid = pod_uids.get((s.labels.get("namespace", ""), s.labels.get("pod", "")))
        if uid:
            cpu[uid].append(_counter(s.samples, window, None))
    for s in series.get("memory", ()):
        uid = pod_uids.get((s.labels.get("namespace", ""), s.labels.get("pod", "")))
        if uid:
            mem[uid].append(_held(s.samples, window))
    out: dict[str, PodUsage] = {}
    for uid in set(util) | set(step) | set(counters) | set(cpu) | set(mem):
        c = counters.get(uid, {})
        out[uid] = PodUsage(
            utilization=dict(util.get(uid, {})),
            tokens=c.get("tokens", []),
            steps=c.get("steps", []),
            compile_seconds=c.get("compile", []),
            step=step.get(uid, []),
            cpu_seconds=cpu.get(uid, []),
            memory_bytes=mem.get(uid, []),
            idle_gpu_seconds=c.get("idle", []),
            gpu_energy=c.get("energy", []),
        )
    return out
