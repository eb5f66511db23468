"""Turn API objects and Prometheus series into the cost model's inputs (pure).

Pods become :class:`PodInfo` keyed by UID, nodes :class:`NodeInfo` priced from
their annotations (or priced on the spot when not yet annotated), and the
sidecar's series :class:`PodUsage` per pod UID.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from statictrain import labels, metrics
from statictrain.cost import JobKey, NodeInfo, PodInfo, PodUsage, Sample, Window
from statictrain.money import parse_usd
from statictrain.pricing import NodeFacts
from statictrain.promql import selector

from statictrain_operator.cost.annotator import is_gpu_node, node_facts
from statictrain_operator.prom import Series

TERMINAL = ("Succeeded", "Failed")


def parse_time(text: str | None) -> float | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _gpu_request(spec: Mapping[str, Any]) -> int:
    total = 0
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        raw = (res.get("limits") or {}).get(labels.GPU_RESOURCE) or (res.get("requests") or {}).get(labels.GPU_RESOURCE)
        if raw is not None:
            total += int(str(raw))
    return total


def _finished(pod: Mapping[str, Any]) -> float | None:
    status = pod.get("status") or {}
    if status.get("phase") not in TERMINAL:
        return None
    ends = [
        parse_time(((cs.get("state") or {}).get("terminated") or {}).get("finishedAt"))
        for cs in status.get("containerStatuses") or []
    ]
    known = [e for e in ends if e is not None]
    if known:
        return max(known)
    conds = [
        parse_time(c.get("lastTransitionTime")) for c in status.get("conditions") or [] if c.get("type") == "Ready"
    ]
    known = [e for e in conds if e is not None]
    if known:
        return max(known)
    # finished, but no time says when: stop accruing (never charge a finished pod forever)
    return parse_time((pod.get("metadata") or {}).get("deletionTimestamp")) or parse_time(status.get("startTime"))


def pod_info(pod: Mapping[str, Any]) -> PodInfo | None:
    """The cost model's view of a worker pod; None when it is not a statictrain job's pod."""
    meta = pod.get("metadata") or {}
    lab = meta.get("labels") or {}
    job = lab.get(labels.JOB)
    if not job or not meta.get("uid"):
        return None
    status = pod.get("status") or {}
    return PodInfo(
        uid=meta["uid"],
        name=meta.get("name", ""),
        namespace=meta.get("namespace", ""),
        job=job,
        node=(pod.get("spec") or {}).get("nodeName"),
        gpus_requested=_gpu_request(pod.get("spec") or {}),
        started=parse_time(status.get("startTime")),
        finished=_finished(pod),
        commit=lab.get(labels.COMMIT, ""),
        team=lab.get(labels.TEAM, ""),
    )


def node_info(node: Mapping[str, Any], price_now: Callable[[NodeFacts], Decimal]) -> NodeInfo | None:
    """A GPU node with its hourly price from the annotator's annotation (or priced now if missing)."""
    if not is_gpu_node(node):
        return None
    facts = node_facts(node)
    ann = (node.get("metadata") or {}).get("annotations") or {}
    raw = ann.get(labels.HOURLY_COST)
    hourly = parse_usd(raw, what=f"node {facts.name} annotation {labels.HOURLY_COST}") if raw else price_now(facts)
    if hourly <= 0:
        hourly = price_now(facts)
    meta = node.get("metadata") or {}
    return NodeInfo(
        facts.name,
        hourly,
        facts.gpu_count,
        present_from=parse_time(meta.get("creationTimestamp")),
        present_to=parse_time(meta.get("deletionTimestamp")),
    )


# ----------------------------------------------------------------------------- Prometheus


def usage_queries() -> dict[str, str]:
    """The PromQL of one accounting run (all pods at once)."""
    return {
        "util": selector(metrics.GPU_UTILIZATION_RATIO),
        "compile": selector(metrics.TRAIN_COMPILE_SECONDS),
        "tokens": selector(metrics.TRAIN_TOKENS_TOTAL),
        "steps": f"max by (namespace, job_name) ({selector(metrics.TRAIN_STEP)})",
    }


def _split(samples: Sequence[Sample], window: Window) -> tuple[Sample | None, list[Sample]]:
    before = [s for s in samples if s.t < window.start]
    inside = [s for s in samples if window.start <= s.t < window.end]
    return (before[-1] if before else None), inside


def build_usage(window: Window, series: Mapping[str, Iterable[Series]]) -> dict[str, PodUsage]:
    """Per pod UID usage from the range-query results of :func:`usage_queries` (keys util/compile/tokens)."""
    util: dict[str, dict[str, list[Sample]]] = defaultdict(lambda: defaultdict(list))
    for s in series.get("util", ()):
        uid = s.labels.get("pod_uid")
        if not uid:
            continue
        gpu = s.labels.get("gpu_uuid") or s.labels.get("gpu") or "0"
        util[uid][gpu].extend(p for p in s.samples if p.t < window.end)  # earlier ones reach into it
    counters: dict[str, dict[str, tuple[Sample | None, list[Sample]]]] = defaultdict(dict)
    for key in ("compile", "tokens"):
        per_uid: dict[str, list[Sample]] = defaultdict(list)
        for s in series.get(key, ()):
            uid = s.labels.get("pod_uid")
            if uid:
                per_uid[uid].extend(s.samples)
        for uid, samples in per_uid.items():
            counters[uid][key] = _split(sorted(samples, key=lambda x: x.t), window)
    out: dict[str, PodUsage] = {}
    for uid in set(util) | set(counters):
        per_gpu = {gpu: sorted(samples) for gpu, samples in util.get(uid, {}).items()}
        comp = counters[uid].get("compile", (None, []))
        tok = counters[uid].get("tokens", (None, []))
        out[uid] = PodUsage(
            gpus_seen=len(per_gpu),
            utilization=per_gpu,
            compile_seconds=comp[1],
            compile_baseline=comp[0],
            tokens=tok[1],
            tokens_baseline=tok[0],
        )
    return out


def build_job_steps(window: Window, series: Iterable[Series]) -> tuple[dict[JobKey, list[Sample]], dict[JobKey, float]]:
    """Per job step samples inside the window and the last step before it."""
    steps: dict[JobKey, list[Sample]] = {}
    baselines: dict[JobKey, float] = {}
    for s in series:
        key = (s.labels.get("namespace", ""), s.labels.get("job_name", ""))
        before, inside = _split(sorted(s.samples, key=lambda x: x.t), window)
        steps[key] = inside
        if before is not None:
            baselines[key] = before.v
    return steps, baselines
