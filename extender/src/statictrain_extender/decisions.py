"""Answers to kube-scheduler's filter and prioritize calls (pure over a ClusterState).

Wire format: k8s.io/kube-scheduler/extender/v1, whose Go structs have no JSON
tags, so keys are the Go field names (``Pod``, ``Nodes``, ``NodeNames``,
``FailedNodes``, ``FailedAndUnresolvableNodes``, ``Error``; ``Host``/``Score``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from statictrain.throughput import TABLE

from .estimates import PodNote, describe
from .nodes import NodeInfo, node_from_object
from .policy import PodView, PolicyError, pod_view, violation
from .scoring import Weights, gang_cost_per_work, pack_fraction, score_nodes, score_values
from .state import ClusterState

__all__ = ["BadRequestError", "filter_result", "parse_args", "prioritize_result"]

UNKNOWN_NODE = "node not in the extender's cache yet"


class BadRequestError(ValueError):
    """The request body is not an ExtenderArgs object."""


def parse_args(body: object) -> tuple[Mapping[str, Any], list[str], dict[str, NodeInfo]]:
    """Pod, candidate node names, and node objects sent inline (when not nodeCacheCapable)."""
    if not isinstance(body, dict):
        raise BadRequestError("body must be a JSON object with Pod and NodeNames (ExtenderArgs)")
    pod = body.get("Pod")
    if not isinstance(pod, dict):
        raise BadRequestError("ExtenderArgs.Pod must be a Pod object")
    names = body.get("NodeNames")
    inline: dict[str, NodeInfo] = {}
    if names is None:
        nodes = body.get("Nodes")
        items = nodes.get("items") if isinstance(nodes, dict) else None
        if not isinstance(items, list):
            raise BadRequestError("ExtenderArgs needs NodeNames (nodeCacheCapable) or Nodes.items")
        for item in items:
            if isinstance(item, dict):
                info = node_from_object(item)
                inline[info.name] = info
        names = list(inline)
    if not isinstance(names, list) or not set(map(type, names)) <= {str}:
        raise BadRequestError("ExtenderArgs.NodeNames must be a list of strings")
    return pod, names, inline


def _view(pod: Mapping[str, Any], scheduler_names: frozenset[str]) -> PodView | str:
    try:
        return pod_view(pod, scheduler_names)
    except PolicyError as err:
        return str(err)


def filter_result(state: ClusterState, body: object, scheduler_names: frozenset[str]) -> dict[str, Any]:
    """ExtenderFilterResult; a malformed body gets ``Error`` set (the scheduler then ignores us)."""
    try:
        pod, names, inline = parse_args(body)
    except BadRequestError as err:
        return {"NodeNames": None, "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": str(err)}
    view = _view(pod, scheduler_names)
    if isinstance(view, str):
        return {
            "NodeNames": [],
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": dict.fromkeys(names, view),
            "Error": "",
        }
    if not view.managed or not view.policy.constrained:
        return {"NodeNames": names, "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": ""}
    nodes = state.nodes
    passed: list[str] = []
    failed: dict[str, str] = {}
    unresolvable: dict[str, str] = {}
    for name in names:
        info = inline.get(name) or nodes.get(name)
        if info is None:
            failed[name] = UNKNOWN_NODE
            continue
        reason = violation(info, view.policy)
        if reason is None:
            passed.append(name)
        else:
            # A node's labels and price do not change by preempting pods on it.
            unresolvable[name] = reason
    return {
        "NodeNames": passed,
        "FailedNodes": failed,
        "FailedAndUnresolvableNodes": unresolvable,
        "Error": "",
    }


def prioritize_result(
    state: ClusterState, body: object, scheduler_names: frozenset[str], weights: Weights
) -> list[dict[str, Any]]:
    """HostPriorityList; raises :class:`BadRequestError` for a malformed body."""
    pod, names, inline = parse_args(body)
    view = _view(pod, scheduler_names)
    if isinstance(view, str) or not view.managed:
        return [{"Host": name, "Score": 0} for name in names]
    gpu_pod = view.gpu_milli > 0
    if inline:
        throughput = None if view.uniform_throughput else state.throughput_for(view.learn_key)
        infos = [inline[n] for n in names if n in inline]
        scores = score_nodes(infos, gpu_pod, throughput, state.used_gpu_milli, weights)
        by_name = {info.name: score for info, score in zip(infos, scores, strict=True)}
        _note(state, view, {i.name: i for i in infos}, by_name)
        return [{"Host": name, "Score": by_name.get(name, 0)} for name in names]
    nodes_get = state.nodes.get
    if gpu_pod and not view.uniform_throughput and view.job_key is not None and view.gang_size > 1:
        costs = _gang_costs(state, view, names)
    else:
        # Hot path: precomputed cost per work, dictionary lookups only.
        costs_get = state.costs(state.cost_key(gpu_pod, view.uniform_throughput, view.learn_key)).get
        costs = [costs_get(name) for name in names]
    if gpu_pod:
        used_get = state.used_gpu_milli.get
        packs = [_pack(nodes_get(name), used_get(name, 0)) for name in names]
    else:
        packs = [0.0] * len(names)
    scores = score_values(costs, packs, weights)
    if gpu_pod and not view.uniform_throughput:
        _note(state, view, state.nodes, dict(zip(names, scores, strict=True)))
    return [{"Host": name, "Score": score} for name, score in zip(names, scores, strict=True)]


def _gang_costs(state: ClusterState, view: PodView, names: list[str]) -> list[float | None]:
    """$ per unit of work of the whole gang per candidate node (see scoring.gang_cost_per_work)."""
    assert view.job_key is not None
    members = state.gang_nodes(view.job_key, view.uid)
    table = state.throughput_for(view.learn_key)
    unknown = state.unknown_throughput
    out: list[float | None] = []
    for name in names:
        info = state.nodes.get(name)
        out.append(None if info is None else gang_cost_per_work(info, members, view.gang_size, table, unknown))
    return out


def _note(state: ClusterState, view: PodView, nodes: Mapping[str, NodeInfo], scores: Mapping[str, int]) -> None:
    """Count the estimate's source; an Event for a job's pod (once per pod)."""
    estimates = state.job_estimates(view.learn_key)
    if estimates is None and view.job_key is None:  # the common case, kept cheap: no Event for non-job pods
        state.estimates.record(TABLE, None)
        return
    best = max(scores, key=lambda n: scores[n], default=None)
    chosen = nodes[best].gpu_family if best is not None and best in nodes else ""
    families = [nodes[n].gpu_family for n in scores if n in nodes]
    source, message = describe(estimates, families, chosen)
    note = PodNote(view.namespace, view.name, view.uid, message) if view.job_key is not None else None
    state.estimates.record(source, note)


def _pack(info: NodeInfo | None, used: int) -> float:
    return pack_fraction(info, used) if info is not None and used else 0.0
