"""Fluent-ish builders of Node and Pod JSON for the extender's unit tests."""

from __future__ import annotations

from typing import Any

from statictrain import labels
from statictrain_extender.nodes import NodeInfo


def node_obj(
    name: str,
    product: str = "NVIDIA-A100-SXM4-40GB",
    gpus: int = 8,
    capacity: str = "on-demand",
    hourly: str | None = "32.77",
    *,
    gpu_hourly: str | None = None,
) -> dict[str, Any]:
    annotations: dict[str, str] = {}
    if hourly is not None:
        annotations[labels.HOURLY_COST] = hourly
    if gpu_hourly is not None:
        annotations[labels.GPU_HOURLY_COST] = gpu_hourly
    return {
        "metadata": {
            "name": name,
            "labels": {labels.GPU_PRODUCT: product, labels.CAPACITY_TYPE: capacity},
            "annotations": annotations,
        },
        "status": {"allocatable": {labels.GPU_RESOURCE: str(gpus), "cpu": "96"}},
    }


def info(
    name: str,
    family: str = "A100",
    *,
    gpus: int = 8,
    capacity: str = "on-demand",
    hourly: float | None = 32.0,
    gpu_hourly: float | None = 4.0,
) -> NodeInfo:
    return NodeInfo(
        name=name,
        gpu_family=family,
        gpus=gpus,
        capacity_type=capacity,
        hourly_usd=hourly,
        gpu_hourly_usd=gpu_hourly,
    )


def pod_obj(
    *,
    gpus: int = 1,
    scheduler: str = "statictrain-scheduler",
    annotations: dict[str, str] | None = None,
    job: str | None = "gpt2",
    uid: str = "uid-1",
    node: str | None = None,
    phase: str = "Pending",
    gpu_milli: int | None = None,
) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": "1"}
    if gpus:
        requests[labels.GPU_RESOURCE] = str(gpus)
    if gpu_milli is not None:
        requests["statictrain.io/gpu-milli"] = str(gpu_milli)
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "w", "resources": {"requests": requests, "limits": dict(requests)}}],
    }
    if node:
        spec["nodeName"] = node
    pod_labels = {labels.JOB: job} if job else {}
    return {
        "metadata": {
            "name": "p",
            "namespace": "team",
            "uid": uid,
            "labels": pod_labels,
            "annotations": annotations or {},
        },
        "spec": spec,
        "status": {"phase": phase},
    }
