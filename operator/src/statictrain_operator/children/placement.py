"""Where and how big a pod is: resource requests, the scheduler, tolerations, node labels, capacity-type
affinity, and the annotations the cost-aware extender reads (GPU models, the hourly price cap)."""

from __future__ import annotations

from typing import Any

from statictrain import api, labels

from ..settings import Settings

__all__ = ["operator_placement", "resources", "worker_annotations", "worker_placement"]


def resources(spec: api.Spec) -> dict[str, Any]:
    """The trainer's requests and limits: GPUs, CPU, memory (memory is also the limit)."""
    res = spec.get("resources") or {}
    gpus = int(res.get("gpusPerReplica", 1))
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    if gpus:
        requests[labels.GPU_RESOURCE] = limits[labels.GPU_RESOURCE] = str(gpus)
    if "cpu" in res:
        requests["cpu"] = res["cpu"]
    if "memory" in res:
        requests["memory"] = limits["memory"] = res["memory"]
    out: dict[str, Any] = {}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = limits
    return out


def _affinity(spec: api.Spec) -> dict[str, Any] | None:
    capacity = (spec.get("placement") or {}).get("capacityTypes")
    if not capacity:
        return None
    term = {"matchExpressions": [{"key": labels.CAPACITY_TYPE, "operator": "In", "values": list(capacity)}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def operator_placement(settings: Settings) -> dict[str, Any]:
    """Pod-spec fields of the operator's own placement (scheduler, tolerations, node labels), for pods
    that take none of the job's (the pre-flight pod)."""
    out: dict[str, Any] = {"schedulerName": settings.scheduler_name, "tolerations": list(settings.tolerations)}
    if settings.node_selector:
        out["nodeSelector"] = dict(settings.node_selector)
    return out


def worker_placement(spec: api.Spec, settings: Settings) -> dict[str, Any]:
    """Pod-spec fields of a worker's placement: the operator's and the job's tolerations and node labels,
    the job's capacity types as a required node affinity."""
    placement = spec.get("placement") or {}
    out: dict[str, Any] = {
        "schedulerName": settings.scheduler_name,
        "tolerations": [*settings.tolerations, *placement.get("tolerations", [])],
    }
    # The admin's node labels win over the job's (a job cannot leave the nodes it is confined to).
    node_selector = {**placement.get("nodeSelector", {}), **settings.node_selector}
    if node_selector:
        out["nodeSelector"] = node_selector
    affinity = _affinity(spec)
    if affinity:
        out["affinity"] = affinity
    return out


def worker_annotations(spec: api.Spec, settings: Settings) -> dict[str, str]:
    """A worker pod's annotations: the operator's, and the extender's inputs (GPU models, hourly price cap)."""
    out = dict(settings.pod_annotations)
    models = (spec.get("resources") or {}).get("gpuModels")
    if models:
        out[api.GPU_MODELS_ANNOTATION] = ",".join(models)
    placement = spec.get("placement") or {}
    if "maxHourlyUSD" in placement:
        out[api.MAX_HOURLY_USD_ANNOTATION] = placement["maxHourlyUSD"]
    return out
