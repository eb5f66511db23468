"""Cost before running (pure): per GPU model, $/hour, time and $ to finish a StaticTrainingJob spec.

Prices: a node's price annotations (written by the operator's price annotator:
custom, live or catalog) when present, else :func:`statictrain.pricing.price_node`
over the shipped catalog. Time to finish, per GPU model:

* ``measured``: this entrypoint's measured speed on that model from Prometheus (``history``);
* ``inferred``: measured on other models the throughput table knows
  (:mod:`statictrain.throughput`, relative per-GPU throughput, A100 = 1.0),
  scaled by the table's ratios (geometric mean over the measured models);
* unknown otherwise: the table is relative and has no absolute base, so with no
  history at all there is no time and no $ to finish. Every model the table knows
  still gets ``work_usd``, $/hour over its relative throughput (a table value),
  which ranks the models by $ per unit of work.

Assumption of ``inferred``: the job's speed scales with the table's per-GPU ratio
(same GPUs per replica and replicas on every model).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from statictrain import gpus, labels
from statictrain.pricing import Catalog, NodeFacts, capacity_type, node_gpu, price_node
from statictrain.throughput import DEFAULT_RELATIVE_THROUGHPUT, INFERRED, MEASURED, job_throughput

from statictrain_operator.cost.annotator import node_facts
from statictrain_operator.history import Speed

__all__ = [
    "JobShape",
    "Offer",
    "Option",
    "estimate",
    "infer_speeds",
    "job_shape",
    "offers_from_catalog",
    "offers_from_nodes",
    "speeds_by_family",
]

NO_HISTORY = (
    "no measured history of this entrypoint on any GPU model: time and $ to finish are unknown (the throughput table"
    " is relative, A100 = 1.0, with no absolute base); $/WORK ranks the models by the table"
)


@dataclass(frozen=True)
class JobShape:
    """What the spec says about size and length."""

    replicas: int
    gpus_per_replica: int
    gpu_models: tuple[str, ...]
    """Families the spec allows, in its order; empty: any."""
    unknown_models: tuple[str, ...]
    """Names in spec.resources.gpuModels that are no known GPU."""
    capacity_types: tuple[str, ...]
    max_steps: int | None
    max_tokens: int | None


def job_shape(doc: Mapping[str, Any]) -> JobShape:
    """Read a StaticTrainingJob manifest (already admitted by the API server, so well-formed)."""
    spec = doc.get("spec") or {}
    res = spec.get("resources") or {}
    families: list[str] = []
    unknown: list[str] = []
    for name in res.get("gpuModels") or []:
        g = gpus.from_name(str(name))
        fam = g.family if g.known else str(name).strip().upper()
        if not g.known:
            unknown.append(str(name))
        if fam not in families:
            families.append(fam)
    training = spec.get("training") or {}
    return JobShape(
        replicas=int(spec.get("replicas", 1)),
        gpus_per_replica=int(res.get("gpusPerReplica", 1)),
        gpu_models=tuple(families),
        unknown_models=tuple(unknown),
        capacity_types=tuple((spec.get("placement") or {}).get("capacityTypes") or ()),
        max_steps=int(training["maxSteps"]) if "maxSteps" in training else None,
        max_tokens=int(training["maxTokens"]) if "maxTokens" in training else None,
    )


@dataclass(frozen=True)
class Offer:
    """One way to buy GPUs of a family: a node (or catalog row) and its per-GPU price."""

    family: str
    gpu_hourly_usd: Decimal
    gpus_per_node: int
    capacity_type: str
    where: str
    """Node name, or instance type and region of a catalog row."""
    price_source: str
    """catalog | custom | live:<provider> | fallback (table values unless live or custom)."""


def _node_offer(node: Mapping[str, Any], facts: NodeFacts, catalog: Catalog, now: datetime) -> Offer:
    ann = (node.get("metadata") or {}).get("annotations") or {}
    family = node_gpu(facts).family
    if ann.get(labels.GPU_HOURLY_COST):
        return Offer(
            family,
            Decimal(ann[labels.GPU_HOURLY_COST]),
            facts.gpu_count,
            ann.get(labels.PRICE_CAPACITY_TYPE, facts.capacity_type),
            facts.name,
            f"{ann.get(labels.PRICE_SOURCE, 'annotation')} (node annotation)",
        )
    p = price_node(facts, catalog, now=now)
    return Offer(family, p.gpu_hourly_usd, facts.gpu_count, p.capacity_type, facts.name, p.source)


def offers_from_nodes(nodes: Iterable[Mapping[str, Any]], catalog: Catalog, now: datetime) -> list[Offer]:
    """An offer per GPU node (nodes without GPUs are skipped)."""
    out = []
    for node in nodes:
        facts = node_facts(node)
        if facts.gpu_count > 0:
            out.append(_node_offer(node, facts, catalog, now))
    return out


def offers_from_catalog(catalog: Catalog, region: str | None = None) -> list[Offer]:
    """An offer per priced, unflagged catalog row (and capacity type), optionally in one region."""
    out = []
    for e in catalog.entries:
        if e.flagged or (region and e.region != region):
            continue
        for cap in ("on-demand", "spot"):
            price = e.price(capacity_type(cap))
            if price is not None:
                fam = gpus.from_name(e.gpu_model).family
                where = f"{e.cloud} {e.instance_type} {e.region}"
                out.append(Offer(fam, price / e.gpu_count, e.gpu_count, cap, where, "catalog"))
    return out


@dataclass(frozen=True)
class Option:
    family: str
    hourly_usd: Decimal
    """For all the job's GPUs."""
    hours: float | None
    total_usd: Decimal | None
    offer: Offer
    nodes: int
    """Offers (nodes or catalog rows) of this family that fit one replica."""
    price_basis: str
    time_basis: str
    work_usd: Decimal | None = None
    """``hourly_usd`` / the table's throughput relative to A100: $ for an A100-hour of work (table value)."""


@dataclass(frozen=True)
class Inferred:
    """A speed on a GPU model without history, from the measured models and the table's ratios."""

    speed: Speed
    anchors: tuple[str, ...]
    """The measured models it is scaled from."""


def _infer(seconds: Mapping[str, float], table: Mapping[str, float]) -> tuple[dict[str, float], tuple[str, ...]]:
    """Seconds per unit (step or token) on every table model without a measurement, scaled by the table."""
    measured = {f: s for f, s in seconds.items() if math.isfinite(s) and s > 0}
    anchors = tuple(sorted(f for f in measured if f in table))
    if not anchors:
        return {}, ()
    jt = job_throughput(measured, table)
    unit = measured[anchors[0]] * jt.relative[anchors[0]]
    return {f: unit / jt.relative[f] for f in table if f not in measured and jt.source(f) == INFERRED}, anchors


def infer_speeds(
    measured: Mapping[str, Speed], table: Mapping[str, float] = DEFAULT_RELATIVE_THROUGHPUT
) -> dict[str, Inferred]:
    """Per table model without measured history: step time and tokens/s per pod scaled from the measured models."""
    steps, step_anchors = _infer({f: s.step_s for f, s in measured.items() if s.step_s}, table)
    per_token, token_anchors = _infer({f: 1 / s.tokens_per_s for f, s in measured.items() if s.tokens_per_s}, table)
    out = {}
    for fam in table:
        if fam in measured or (fam not in steps and fam not in per_token):
            continue
        tokens = 1 / per_token[fam] if fam in per_token else None
        anchors = tuple(sorted({*step_anchors, *token_anchors}))
        out[fam] = Inferred(Speed(tokens, steps.get(fam), 0), anchors)
    return out


def _hours_from(shape: JobShape, speed: Speed, source: str, label: str) -> tuple[float | None, str]:
    if shape.max_steps is not None and speed.step_s is not None:
        return shape.max_steps * speed.step_s / 3600, f"{label}, {speed.step_s:.3g} s/step"
    if shape.max_tokens is not None and speed.tokens_per_s is not None:
        rate = speed.tokens_per_s * shape.replicas
        return shape.max_tokens / rate / 3600, f"{label}, {speed.tokens_per_s:.4g} tokens/s per pod x replicas"
    return None, f"{source} history lacks the figure the spec's end needs (step time or tokens/s)"


def _hours(
    shape: JobShape, fam: str, speed: Speed | None, inferred: Inferred | None, table: Mapping[str, float]
) -> tuple[float | None, str]:
    if shape.max_steps is None and shape.max_tokens is None:
        return None, "spec sets neither training.maxSteps nor training.maxTokens: no end to estimate"
    if speed is not None:
        return _hours_from(shape, speed, MEASURED, f"{MEASURED}: mean of {speed.pods} pod(s) of earlier runs")
    if inferred is not None:
        ratios = ", ".join(f"{a} {table[a]:g}" for a in inferred.anchors)
        label = f"{INFERRED}: throughput table {fam} {table[fam]:g} vs measured {ratios}"
        return _hours_from(shape, inferred.speed, INFERRED, label)
    if fam not in table:
        return None, "no measured history on this GPU model, and the throughput table does not know it"
    return None, "no measured history on this GPU model: time unknown (the throughput table is only relative)"


def estimate(
    shape: JobShape,
    offers: Sequence[Offer],
    speeds: Mapping[str, Speed],
    table: Mapping[str, float] = DEFAULT_RELATIVE_THROUGHPUT,
) -> tuple[list[Option], list[str]]:
    """Options per GPU family and capacity type, cheapest first, and notes.

    ``speeds``: measured speed per GPU family; models without it are inferred from
    them by ``table`` (relative throughput per family). Per family the cheapest
    offer that fits one replica (enough GPUs per node) and an allowed capacity
    type is used. Order: known $ to finish, then $/WORK, then $/hour.
    """
    notes = [
        f"unknown GPU model {m!r}: not a GPU statictrain knows; matched by name only" for m in shape.unknown_models
    ]
    best: dict[tuple[str, str], Offer] = {}
    count: dict[tuple[str, str], int] = {}
    for o in offers:
        if shape.gpu_models and o.family not in shape.gpu_models:
            continue
        if shape.capacity_types and o.capacity_type not in shape.capacity_types:
            continue
        if o.gpus_per_node < shape.gpus_per_replica:
            continue
        key = (o.family, o.capacity_type)
        count[key] = count.get(key, 0) + 1
        if key not in best or o.gpu_hourly_usd < best[key].gpu_hourly_usd:
            best[key] = o
    missing = [m for m in shape.gpu_models if all(f != m for f, _ in best)]
    if missing:
        notes.append(f"no offer fits for {', '.join(missing)} (not in the cluster, too few GPUs per node, or capacity)")
    inferred = infer_speeds(speeds, table)
    gpus_total = shape.replicas * shape.gpus_per_replica
    options = []
    for (fam, cap), offer in best.items():
        hourly = offer.gpu_hourly_usd * gpus_total
        hours, time_basis = _hours(shape, fam, speeds.get(fam), inferred.get(fam), table)
        total = hourly * Decimal(repr(hours)) if hours is not None else None
        work = hourly / Decimal(repr(table[fam])) if fam in table else None
        kind = "table value" if offer.price_source.startswith(("catalog", "fallback")) else "quoted"
        price_basis = f"{offer.price_source} price ({kind}), {offer.capacity_type}, {offer.where}"
        options.append(Option(fam, hourly, hours, total, offer, count[(fam, cap)], price_basis, time_basis, work))
    options.sort(key=_cheapest_first)
    if not any(s.step_s or s.tokens_per_s for s in speeds.values()):
        notes.append(NO_HISTORY)
    return options, notes


def _cheapest_first(o: Option) -> tuple[int, Decimal, Decimal, str]:
    if o.total_usd is not None:
        return 0, o.total_usd, o.hourly_usd, o.family
    if o.work_usd is not None:
        return 1, o.work_usd, o.hourly_usd, o.family
    return 2, o.hourly_usd, o.hourly_usd, o.family


def speeds_by_family(per_model: Mapping[str, Speed]) -> dict[str, Speed]:
    """Sidecar GPU model names (NVML's, e.g. ``NVIDIA H100 80GB HBM3``) -> family; pods merged by weight."""
    acc: dict[str, list[tuple[Speed, str]]] = {}
    for model, sp in per_model.items():
        g = gpus.from_name(model)
        acc.setdefault(g.family if g.known else model, []).append((sp, model))
    out = {}
    for fam, items in acc.items():
        pods = sum(s.pods for s, _ in items)

        def wmean(vals: list[tuple[float | None, int]]) -> float | None:
            known = [(v, n) for v, n in vals if v is not None]
            n = sum(w for _, w in known)
            return sum(v * w for v, w in known) / n if n else None

        out[fam] = Speed(
            wmean([(s.tokens_per_s, s.pods) for s, _ in items]), wmean([(s.step_s, s.pods) for s, _ in items]), pods
        )
    return out
