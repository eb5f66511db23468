"""Reading a GPU cluster trace in the Alibaba cluster-trace-gpu-v2023 ("openb") CSV format (pure).

Node list columns: ``sn,cpu_milli,memory_mib,gpu,model``.
Pod list columns: ``name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,
pod_phase,creation_time,deletion_time,scheduled_time``. Any file with these
columns works; errors name the file, the line and what to fix.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["TraceError", "TraceNode", "TracePod", "parse_nodes", "parse_pods"]

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
_DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "creation_time", "deletion_time")


class TraceError(ValueError):
    """A trace file that cannot be replayed; the message says where and why."""


@dataclass(frozen=True, slots=True)
class TraceNode:
    """One node of the trace."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str
    """GPU model code as in the trace (P100, T4, V100M16, V100M32, A10, G2, G3); "" for CPU nodes."""


@dataclass(frozen=True, slots=True)
class TracePod:
    """One pod of the trace."""

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    """Per-GPU share in milli-GPU (1000 = a whole GPU)."""
    creation_s: int
    deletion_s: int
    scheduled_s: int | None = None
    """When the trace scheduled it; None when it never was (or the column is absent)."""
    qos: str = ""
    """``LS`` (latency-sensitive service), ``BE``, ``Burstable``, ``Guaranteed``; "" when absent."""
    phase: str = ""
    """Phase at the end of the trace (``Running``, ``Failed``, ``Succeeded``, ``Pending``); "" when absent."""

    @property
    def total_gpu_milli(self) -> int:
        """GPU demand in milli-GPU: whole GPUs for multi-GPU pods, the share for single-GPU ones."""
        if self.num_gpu == 0:
            return 0
        if self.num_gpu == 1:
            return self.gpu_milli
        return self.num_gpu * 1000


def _rows(text: str, source: str, columns: Iterable[str]) -> Iterable[tuple[int, dict[str, str]]]:
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in columns if c not in (reader.fieldnames or [])]
    if missing:
        raise TraceError(f"{source}: missing column(s) {', '.join(missing)}; header is {reader.fieldnames}")
    yield from enumerate(reader, start=2)


def _int(row: dict[str, str], key: str, where: str, minimum: int = 0) -> int:
    raw = (row.get(key) or "").strip()
    try:
        value = int(float(raw)) if raw else 0
    except ValueError:
        raise TraceError(f"{where}: {key}={raw!r} is not a number") from None
    if value < minimum:
        raise TraceError(f"{where}: {key}={value} must be >= {minimum}")
    return value


def parse_nodes(text: str, source: str = "node list") -> list[TraceNode]:
    """Nodes of a node-list CSV; CPU-only rows are kept with gpus=0."""
    nodes: list[TraceNode] = []
    seen: set[str] = set()
    for line, row in _rows(text, source, NODE_COLUMNS):
        where = f"{source} line {line}"
        name = (row["sn"] or "").strip().lower()
        if not _DNS_NAME.match(name):
            raise TraceError(f"{where}: sn {name!r} must be a DNS label (letters, digits, '-', max 63)")
        if name in seen:
            raise TraceError(f"{where}: node {name} listed twice")
        seen.add(name)
        gpus = _int(row, "gpu", where)
        model = (row["model"] or "").strip()
        if gpus > 0 and not model:
            raise TraceError(f"{where}: node {name} has {gpus} GPUs but no model")
        nodes.append(TraceNode(name, _int(row, "cpu_milli", where, 1), _int(row, "memory_mib", where, 1), gpus, model))
    if not nodes:
        raise TraceError(f"{source}: no nodes")
    return nodes


def _pod(row: dict[str, str], where: str) -> TracePod:
    name = (row["name"] or "").strip().lower()
    if not _DNS_NAME.match(name):
        raise TraceError(f"{where}: name {name!r} must be a DNS label (letters, digits, '-', max 63)")
    num_gpu = _int(row, "num_gpu", where)
    gpu_milli = _int(row, "gpu_milli", where)
    if num_gpu > 0 and not 0 < gpu_milli <= 1000:
        raise TraceError(f"{where}: gpu_milli={gpu_milli} must be in 1..1000 for a GPU pod")
    created = _int(row, "creation_time", where)
    deleted = _int(row, "deletion_time", where)
    if deleted < created:
        raise TraceError(f"{where}: deletion_time {deleted} is before creation_time {created}")
    raw_scheduled = (row.get("scheduled_time") or "").strip()
    scheduled = _int(row, "scheduled_time", where) if raw_scheduled else None
    if scheduled is not None and not created <= scheduled <= deleted:
        raise TraceError(f"{where}: scheduled_time {scheduled} is outside [creation_time, deletion_time]")
    return TracePod(
        name,
        _int(row, "cpu_milli", where),
        _int(row, "memory_mib", where),
        num_gpu,
        gpu_milli,
        created,
        deleted,
        scheduled,
        (row.get("qos") or "").strip(),
        (row.get("pod_phase") or "").strip(),
    )


def parse_pods(text: str, source: str = "pod list", skipped: dict[str, int] | None = None) -> list[TracePod]:
    """Pods of a pod-list CSV, sorted by creation time.

    A bad row raises :class:`TraceError`; with ``skipped`` given, it is left out
    and counted there by reason instead (the reason is the error without its line).
    """
    pods: list[TracePod] = []
    seen: set[str] = set()
    for line, row in _rows(text, source, POD_COLUMNS):
        where = f"{source} line {line}"
        try:
            pod = _pod(row, where)
            if pod.name in seen:
                raise TraceError(f"{where}: pod {pod.name} listed twice")
        except TraceError as err:
            if skipped is None:
                raise
            reason = str(err).removeprefix(f"{where}: ")
            reason = re.sub(r"\d+|'[^']*'|openb-\S+", "N", reason)
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        seen.add(pod.name)
        pods.append(pod)
    pods.sort(key=lambda p: (p.creation_s, p.name))
    return pods
