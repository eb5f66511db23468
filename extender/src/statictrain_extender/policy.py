"""A pod's placement policy and the filter decision (pure).

The operator copies a job's ``spec.placement`` and ``spec.resources.gpuModels``
onto each worker pod as annotations (keys below); the extender reads only the
pod it is asked about, so a decision never needs another API call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from statictrain import envvars, labels

from .gpus import gpu_family
from .nodes import NodeInfo, as_mapping, as_text, gpu_milli_of_requests, parse_price
from .speeds import ClassKey, class_key

__all__ = [
    "CAPACITY_TYPES_ANNOTATION",
    "GPU_MODELS_ANNOTATION",
    "MAX_HOURLY_ANNOTATION",
    "THROUGHPUT_ANNOTATION",
    "PlacementPolicy",
    "PodView",
    "PolicyError",
    "pod_gpu_milli",
    "pod_view",
    "violation",
]

CAPACITY_TYPES_ANNOTATION = f"{labels.GROUP}/capacity-types"  # "spot,on-demand"
GPU_MODELS_ANNOTATION = f"{labels.GROUP}/gpu-models"  # "H100,A100"
MAX_HOURLY_ANNOTATION = f"{labels.GROUP}/max-hourly-usd"  # "100" (whole-node price cap)
# "model" (default): a faster GPU finishes the work sooner; "uniform": the pod runs
# for the same time on any GPU (services, fixed-length tasks), so only price counts.
THROUGHPUT_ANNOTATION = f"{labels.GROUP}/gpu-throughput"

_CAPACITY_TYPES = frozenset({"spot", "on-demand"})
MAX_GPU_MODELS = 64
"""Most entries in the gpu-models annotation (a job lists a handful; each filter call checks every
candidate node against the list)."""
MAX_GANG_SIZE = 100_000
"""Largest WORLD_SIZE read as a gang size; beyond it (or not plain ASCII digits) the pod is scored alone."""


class PolicyError(ValueError):
    """A placement annotation that cannot be understood; the message says what to fix."""


@dataclass(frozen=True, slots=True)
class PlacementPolicy:
    """Where a job's pods may run; empty fields mean "no constraint"."""

    capacity_types: frozenset[str] = frozenset()
    """Allowed ``karpenter.sh/capacity-type`` values."""
    gpu_families: frozenset[str] = frozenset()
    """Allowed GPU families (``H100``, ``A100``, ...)."""
    max_hourly_usd: float | None = None
    """Highest acceptable whole-node price per hour."""

    @property
    def constrained(self) -> bool:
        return bool(self.capacity_types or self.gpu_families or self.max_hourly_usd is not None)


@dataclass(frozen=True, slots=True)
class PodView:
    """The parts of a pod the extender decides on."""

    managed: bool
    """Scheduled by a statictrain profile (else it gets a neutral answer)."""
    policy: PlacementPolicy
    """Its placement policy."""
    gpu_milli: int
    """GPUs requested, in milli-GPU."""
    job_key: tuple[str, str] | None
    """(namespace, job name) for measured throughput, None when not a job's pod."""
    uniform_throughput: bool = False
    """The pod's run time does not depend on the GPU model (annotation gpu-throughput: uniform)."""
    gang_size: int = 1
    """Pods that step together (the container's WORLD_SIZE); the slowest one sets the pace."""
    uid: str = ""
    name: str = ""
    namespace: str = ""
    workload_class: str | None = None
    """Label statictrain.io/workload-class: jobs that do the same work per step (learned together)."""

    @property
    def learn_key(self) -> ClassKey | None:
        """Key of the learned throughput figures that score this pod; None when not a job's pod."""
        if self.job_key is None:
            return None
        return class_key(self.job_key[0], self.job_key[1], self.workload_class)


def _split(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _annotation(annotations: Mapping[str, Any], key: str) -> str:
    value = annotations.get(key, "")
    if not isinstance(value, str):
        raise PolicyError(f"annotation {key} must be a string, got {type(value).__name__}")
    return value


def policy_from_annotations(annotations: Mapping[str, Any]) -> PlacementPolicy:
    """Parse the placement annotations; raises :class:`PolicyError` on bad values."""
    capacity = frozenset(item.lower() for item in _split(_annotation(annotations, CAPACITY_TYPES_ANNOTATION)))
    unknown = capacity - _CAPACITY_TYPES
    if unknown:
        raise PolicyError(
            f"annotation {CAPACITY_TYPES_ANNOTATION} has {sorted(unknown)}; use a comma list of spot, on-demand"
        )
    models = _split(_annotation(annotations, GPU_MODELS_ANNOTATION))
    if len(models) > MAX_GPU_MODELS:
        raise PolicyError(
            f"annotation {GPU_MODELS_ANNOTATION} lists {len(models)} models; list at most {MAX_GPU_MODELS}"
        )
    families = frozenset(map(gpu_family, models))
    raw_max = _annotation(annotations, MAX_HOURLY_ANNOTATION)
    max_hourly: float | None = None
    if raw_max.strip():
        max_hourly = parse_price(raw_max)
        if max_hourly is None:
            raise PolicyError(
                f'annotation {MAX_HOURLY_ANNOTATION}={raw_max[:40]!r} is not a positive decimal such as "12.50"'
            )
    return PlacementPolicy(capacity_types=capacity, gpu_families=families, max_hourly_usd=max_hourly)


def _containers(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    containers = spec.get("containers")
    return [as_mapping(c) for c in containers] if isinstance(containers, list) else []


def pod_gpu_milli(spec: Mapping[str, Any]) -> int:
    """GPUs requested by a pod spec (all containers), in milli-GPU."""
    total = 0
    for container in _containers(spec):
        resources = as_mapping(container.get("resources"))
        requests = as_mapping(resources.get("requests")) or as_mapping(resources.get("limits"))
        total += gpu_milli_of_requests(requests)
    return total


def gang_size(spec: Mapping[str, Any]) -> int:
    """WORLD_SIZE from the first container that sets it as ASCII digits 1..MAX_GANG_SIZE, else 1."""
    for container in _containers(spec):
        env_list = container.get("env")
        for env in map(as_mapping, env_list if isinstance(env_list, list) else []):
            if env.get("name") == envvars.WORLD_SIZE:
                value = str(env.get("value") or "")
                digits = value.isascii() and value.isdigit() and len(value) <= len(str(MAX_GANG_SIZE))
                return int(value) if digits and 0 < int(value) <= MAX_GANG_SIZE else 1
    return 1


def pod_view(pod: Mapping[str, Any], scheduler_names: frozenset[str]) -> PodView:
    """Read a pod (camelCase JSON; a field of another type than the API's reads as absent). Raises
    :class:`PolicyError` for bad annotations of managed pods."""
    spec = as_mapping(pod.get("spec"))
    meta = as_mapping(pod.get("metadata"))
    managed = as_text(spec.get("schedulerName")) in scheduler_names
    if not managed:
        return PodView(managed=False, policy=PlacementPolicy(), gpu_milli=0, job_key=None)
    annotations = as_mapping(meta.get("annotations"))
    pod_labels = as_mapping(meta.get("labels"))
    job = as_text(pod_labels.get(labels.JOB))
    namespace = as_text(meta.get("namespace")) or "default"
    mode = (_annotation(annotations, THROUGHPUT_ANNOTATION) or "model").strip().lower()
    if mode not in ("model", "uniform"):
        raise PolicyError(f"annotation {THROUGHPUT_ANNOTATION}={mode!r} must be model or uniform")
    return PodView(
        managed=True,
        policy=policy_from_annotations(annotations),
        gpu_milli=pod_gpu_milli(spec),
        job_key=(namespace, job) if job else None,
        uniform_throughput=mode == "uniform",
        gang_size=gang_size(spec) if job else 1,
        uid=as_text(meta.get("uid")),
        name=as_text(meta.get("name")),
        namespace=namespace,
        workload_class=as_text(pod_labels.get(labels.WORKLOAD_CLASS)) or None,
    )


def violation(node: NodeInfo, policy: PlacementPolicy) -> str | None:
    """Why ``node`` breaks ``policy``, or None when it is eligible."""
    if policy.capacity_types and node.capacity_type not in policy.capacity_types:
        shown = node.capacity_type or "unlabelled"
        return f"capacity type {shown} not in {sorted(policy.capacity_types)}"
    if policy.gpu_families and node.gpu_family not in policy.gpu_families:
        shown = node.gpu_family or "no GPU"
        return f"GPU model {shown} not in {sorted(policy.gpu_families)}"
    if policy.max_hourly_usd is not None:
        if node.hourly_usd is None:
            return "node has no price annotation; cannot check max-hourly-usd"
        if node.hourly_usd > policy.max_hourly_usd:
            return f"hourly price {node.hourly_usd:.4f} above max {policy.max_hourly_usd:.4f}"
    return None
