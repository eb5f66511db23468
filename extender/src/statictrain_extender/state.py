"""The extender's cached view of the cluster, fed by watches and the Prometheus refresher.

Requests only read it; the background tasks write it. Each field is replaced
or updated by single dict operations, so a reader on the event loop never sees
a half-built value.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from statictrain import labels
from statictrain.throughput import DEFAULT_RELATIVE_THROUGHPUT, JobThroughput

from .estimates import EstimateLog
from .nodes import NodeInfo, node_from_object
from .policy import pod_gpu_milli
from .scoring import cost_per_work
from .speeds import ClassKey, SpeedEstimator, class_key

__all__ = ["ClusterState", "CostKey", "JobKey"]

JobKey = tuple[str, str]  # (namespace, job name)
# Which cost per unit of work: "cpu" (whole-node price), "uniform" (GPU-hour
# price), "default" (default throughput table) or a workload class's learned table.
CostKey = str | ClassKey
REMEMBER_JOBS = 10_000
"""Jobs whose workload class is remembered after their pods are gone (their step times come later)."""

_DONE_PHASES = frozenset({"Succeeded", "Failed"})


class ClusterState:
    """Nodes, GPU allocations per node, and per-job measured throughput."""

    def __init__(self, unknown_throughput: float = 0.1, speeds: SpeedEstimator | None = None) -> None:
        self.nodes: dict[str, NodeInfo] = {}
        self.unknown_throughput = unknown_throughput
        # Cost per unit of work of every node, per CostKey, filled on first use and
        # kept current node by node, so a request only looks values up.
        self._costs: dict[CostKey, dict[str, float | None]] = {}
        self._pods: dict[str, tuple[str, int]] = {}  # pod uid -> (node, gpu milli)
        self.used_gpu_milli: dict[str, int] = {}
        self.speeds = speeds if speeds is not None else SpeedEstimator()
        self._throughput: dict[ClassKey, JobThroughput] = {}
        self._class_of: OrderedDict[JobKey, str] = OrderedDict()  # job -> its pods' workload class
        self._job_pods: dict[JobKey, dict[str, str]] = {}  # job -> {pod uid: node} of its bound GPU pods
        self._job_of: dict[str, JobKey] = {}
        self.estimates = EstimateLog()
        self.nodes_synced = False
        self.pods_synced = False
        self.prometheus_ok: bool | None = None  # None: never tried

    # --- nodes
    def upsert_node(self, obj: Mapping[str, Any]) -> None:
        info = node_from_object(obj)
        if info.name:
            self.nodes[info.name] = info
            for key, table in self._costs.items():
                table[info.name] = self._cost(info, key)

    def delete_node(self, name: str) -> None:
        self.nodes.pop(name, None)
        for table in self._costs.values():
            table.pop(name, None)

    def replace_nodes(self, objs: Sequence[Mapping[str, Any]]) -> None:
        fresh = {info.name: info for info in map(node_from_object, objs) if info.name}
        self.nodes = fresh
        self._costs = {}
        self.nodes_synced = True

    # --- cost per unit of work, precomputed
    def _cost(self, info: NodeInfo, key: CostKey) -> float | None:
        if key == "cpu":
            return cost_per_work(info, False, None, self.unknown_throughput)
        if key == "uniform":
            return cost_per_work(info, True, None, self.unknown_throughput)
        table = DEFAULT_RELATIVE_THROUGHPUT if key == "default" else self.throughput_for(key)  # type: ignore[arg-type]
        return cost_per_work(info, True, table, self.unknown_throughput)

    def costs(self, key: CostKey) -> dict[str, float | None]:
        """Cost per unit of work of every cached node for ``key``."""
        table = self._costs.get(key)
        if table is None:
            table = {name: self._cost(info, key) for name, info in self.nodes.items()}
            self._costs[key] = table
        return table

    def cost_key(self, gpu_pod: bool, uniform: bool, key: ClassKey | None) -> CostKey:
        if not gpu_pod:
            return "cpu"
        if uniform:
            return "uniform"
        if key is not None and key in self._throughput:
            return key
        return "default"

    # --- pods (GPU allocations)
    def upsert_pod(self, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        spec = obj.get("spec") or {}
        node = spec.get("nodeName")
        phase = (obj.get("status") or {}).get("phase")
        if not uid:
            return
        pod_labels = meta.get("labels") or {}
        if pod_labels.get(labels.JOB) and pod_labels.get(labels.WORKLOAD_CLASS):
            self._remember_class((str(meta.get("namespace") or "default"), pod_labels[labels.JOB]), pod_labels)
        if not node or phase in _DONE_PHASES:
            self.delete_pod(uid)
            return
        milli = pod_gpu_milli(spec)
        self.delete_pod(uid)
        if milli > 0:
            self._pods[uid] = (node, milli)
            self.used_gpu_milli[node] = self.used_gpu_milli.get(node, 0) + milli
            job = pod_labels.get(labels.JOB)
            if job:
                key = (str(meta.get("namespace") or "default"), job)
                self._job_pods.setdefault(key, {})[uid] = node
                self._job_of[uid] = key

    def delete_pod(self, uid: str) -> None:
        job = self._job_of.pop(uid, None)
        if job is not None:
            members = self._job_pods.get(job, {})
            members.pop(uid, None)
            if not members:
                self._job_pods.pop(job, None)
        old = self._pods.pop(uid, None)
        if old is None:
            return
        node, milli = old
        left = self.used_gpu_milli.get(node, 0) - milli
        if left > 0:
            self.used_gpu_milli[node] = left
        else:
            self.used_gpu_milli.pop(node, None)

    def gang_nodes(self, job: JobKey, exclude_uid: str) -> list[NodeInfo]:
        """Nodes (cached ones) holding the job's other bound GPU pods, one entry per pod."""
        members = self._job_pods.get(job, {})
        return [self.nodes[n] for uid, n in members.items() if uid != exclude_uid and n in self.nodes]

    def replace_pods(self, objs: Sequence[Mapping[str, Any]]) -> None:
        self._pods.clear()
        self._job_pods.clear()
        self._job_of.clear()
        self.used_gpu_milli = {}
        for obj in objs:
            self.upsert_pod(obj)
        self.pods_synced = True

    def _remember_class(self, job: JobKey, pod_labels: Mapping[str, str]) -> None:
        self._class_of[job] = str(pod_labels[labels.WORKLOAD_CLASS])
        self._class_of.move_to_end(job)
        while len(self._class_of) > REMEMBER_JOBS:
            self._class_of.popitem(last=False)

    # --- measured throughput
    def class_of(self, job: JobKey) -> ClassKey:
        """The learning key of a job: its pods' workload class, else the job itself."""
        return class_key(job[0], job[1], self._class_of.get(job))

    def set_step_seconds(
        self, table: Mapping[JobKey, Mapping[str, float]], skipped: Mapping[str, int] | None = None
    ) -> None:
        """One refresh of jobs' mean step seconds per family (and the samples its parser skipped, by reason):
        learned into their classes' figures."""
        changed = self.speeds.observe(table, self.class_of, skipped)
        for key in changed:
            estimates = self.speeds.throughput(key)
            if estimates is not None:
                self._throughput[key] = estimates
            self._costs.pop(key, None)

    def throughput_for(self, key: ClassKey | None) -> Mapping[str, float]:
        if key is None:
            return DEFAULT_RELATIVE_THROUGHPUT
        known = self._throughput.get(key)
        return known.relative if known is not None else DEFAULT_RELATIVE_THROUGHPUT

    def job_estimates(self, key: ClassKey | None) -> JobThroughput | None:
        """The class's throughput figures with their sources; None when it has no measurement."""
        return self._throughput.get(key) if key is not None else None
