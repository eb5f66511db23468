"""Answers to kube-scheduler's filter and prioritize calls (pure over a ClusterState).

Wire format: k8s.io/kube-scheduler/extender/v1, whose Go structs have no JSON
tags, so keys are the Go field names (``Pod``, ``Nodes``, ``NodeNames``,
``FailedNodes``, ``FailedAndUnresolvableNodes``, ``Error``; ``Host``/``Score``).

A call is answered in steps so the server can run the costly ones off its event loop
(server.py): :func:`parse` and the ``*_answer`` functions are pure; :func:`reads` and
:func:`record` touch the ClusterState and run on the loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from statictrain.throughput import TABLE, JobThroughput

from .estimates import PodNote, describe
from .nodes import NodeInfo, node_from_object
from .policy import PodView, PolicyError, pod_view, violation
from .scoring import Weights, gang_cost_per_work, pack_fraction, score_nodes, score_values
from .state import ClusterState

__all__ = [
    "Args",
    "BadRequestError",
    "Estimate",
    "Reads",
    "filter_answer",
    "filter_error",
    "filter_result",
    "parse",
    "prioritize_answer",
    "prioritize_result",
    "reads",
    "record",
]

UNKNOWN_NODE = "node not in the extender's cache yet"


class BadRequestError(ValueError):
    """The request body is not an ExtenderArgs object."""


@dataclass(frozen=True, slots=True)
class Args:
    """One parsed ExtenderArgs."""

    view: PodView | str
    """The pod as the extender decides on it, or why its placement annotations cannot be read."""
    names: list[str]
    """Candidate node names, in the scheduler's order."""
    inline: dict[str, NodeInfo]
    """Nodes sent whole (when not nodeCacheCapable); empty otherwise."""


@dataclass(frozen=True, slots=True)
class Reads:
    """What prioritize reads from the ClusterState, taken on the event loop by :func:`reads`.

    The mappings are ones the loop keeps changing in place (a watch event upserts a node);
    :func:`prioritize_answer` only looks keys up in them and never iterates them, so it may run
    on another thread while the loop goes on."""

    nodes: Mapping[str, NodeInfo]
    used_gpu_milli: Mapping[str, int]
    costs: Mapping[str, float | None] | None
    """Precomputed cost per work by node (the hot path); None for inline nodes and gangs."""
    throughput: Mapping[str, float] | None
    members: list[NodeInfo]
    """Nodes of the gang's pods already bound."""
    estimates: JobThroughput | None
    unknown_throughput: float


@dataclass(frozen=True, slots=True)
class Estimate:
    """Where the chosen node's throughput figure came from, to record on the loop."""

    source: str
    note: PodNote | None


def parse(body: object, scheduler_names: frozenset[str]) -> Args:
    """Pod view, candidate node names and inline nodes (pure); raises :class:`BadRequestError`."""
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
    try:
        view: PodView | str = pod_view(pod, scheduler_names)
    except PolicyError as err:
        view = str(err)
    return Args(view, names, inline)


def filter_answer(nodes: Mapping[str, NodeInfo], args: Args) -> dict[str, Any]:
    """ExtenderFilterResult over the cached ``nodes`` (looked up only, so any thread may run it)."""
    view, names, inline = args.view, args.names, args.inline
    if isinstance(view, str):
        return {
            "NodeNames": [],
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": dict.fromkeys(names, view),
            "Error": "",
        }
    if not view.managed or not view.policy.constrained:
        return {"NodeNames": names, "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": ""}
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


def filter_error(message: str) -> dict[str, Any]:
    """An ExtenderFilterResult with ``Error`` set: the scheduler then ignores this extender's filter."""
    return {"NodeNames": None, "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": message}


def filter_result(state: ClusterState, body: object, scheduler_names: frozenset[str]) -> dict[str, Any]:
    """ExtenderFilterResult; a malformed body gets ``Error`` set (the scheduler then ignores us)."""
    try:
        args = parse(body, scheduler_names)
    except BadRequestError as err:
        return filter_error(str(err))
    return filter_answer(state.nodes, args)


def _gang(view: PodView) -> bool:
    return view.gpu_milli > 0 and not view.uniform_throughput and view.job_key is not None and view.gang_size > 1


def reads(state: ClusterState, args: Args) -> Reads:
    """Everything :func:`prioritize_answer` needs from the state (on the loop; O(1) but for a gang's members
    and a cost table built on first use, both bounded by the cluster, not by the request)."""
    view = args.view
    costs: Mapping[str, float | None] | None = None
    members: list[NodeInfo] = []
    throughput: Mapping[str, float] | None = None
    learn = None  # what the pod's speed is learned and looked up by (its job, or its workload class)
    if isinstance(view, PodView) and view.managed:
        learn = view.learn_key
        throughput = None if view.uniform_throughput else state.throughput_for(learn)
        if _gang(view) and not args.inline:
            assert view.job_key is not None
            members = state.gang_nodes(view.job_key, view.uid)
        elif not args.inline:
            costs = state.costs(state.cost_key(view.gpu_milli > 0, view.uniform_throughput, learn))
    return Reads(
        nodes=args.inline or state.nodes,
        used_gpu_milli=state.used_gpu_milli,
        costs=costs,
        throughput=throughput,
        members=members,
        estimates=state.job_estimates(learn),
        unknown_throughput=state.unknown_throughput,
    )


def prioritize_answer(args: Args, got: Reads, weights: Weights) -> tuple[list[dict[str, Any]], Estimate | None]:
    """HostPriorityList and the estimate to record (pure over ``got``: any thread may run it)."""
    view, names = args.view, args.names
    if isinstance(view, str) or not view.managed:
        return [{"Host": name, "Score": 0} for name in names], None
    gpu_pod = view.gpu_milli > 0
    if args.inline:
        infos = [args.inline[n] for n in names if n in args.inline]
        scores = score_nodes(infos, gpu_pod, got.throughput, got.used_gpu_milli, weights)
        by_name = {info.name: score for info, score in zip(infos, scores, strict=True)}
        return [{"Host": name, "Score": by_name.get(name, 0)} for name in names], _estimate(view, got, by_name)
    nodes_get = got.nodes.get
    if got.costs is None:  # a gang: $ per unit of work of the whole gang (see scoring.gang_cost_per_work)
        assert got.throughput is not None
        table, members, unknown = got.throughput, got.members, got.unknown_throughput
        costs: list[float | None] = []
        for name in names:
            info = nodes_get(name)
            costs.append(None if info is None else gang_cost_per_work(info, members, view.gang_size, table, unknown))
    else:
        # Hot path: precomputed cost per work, dictionary lookups only.
        costs_get = got.costs.get
        costs = [costs_get(name) for name in names]
    if gpu_pod:
        used_get = got.used_gpu_milli.get
        packs = [_pack(nodes_get(name), used_get(name, 0)) for name in names]
    else:
        packs = [0.0] * len(names)
    scores = score_values(costs, packs, weights)
    answer = [{"Host": name, "Score": score} for name, score in zip(names, scores, strict=True)]
    if gpu_pod and not view.uniform_throughput:
        return answer, _estimate(view, got, dict(zip(names, scores, strict=True)))
    return answer, None


def record(state: ClusterState, estimate: Estimate | None) -> None:
    """Count the estimate's source and queue its Event (on the loop)."""
    if estimate is not None:
        state.estimates.record(estimate.source, estimate.note)


def prioritize_result(
    state: ClusterState, body: object, scheduler_names: frozenset[str], weights: Weights
) -> list[dict[str, Any]]:
    """HostPriorityList, all on the calling thread; raises :class:`BadRequestError` for a malformed body."""
    args = parse(body, scheduler_names)
    answer, estimate = prioritize_answer(args, reads(state, args), weights)
    record(state, estimate)
    return answer


def _estimate(view: PodView, got: Reads, scores: Mapping[str, int]) -> Estimate:
    """The estimate's source; a note (one Event) for a job's pod."""
    if got.estimates is None and view.job_key is None:  # the common case, kept cheap: no Event for non-job pods
        return Estimate(TABLE, None)
    nodes_get = got.nodes.get
    best = max(scores, key=lambda n: scores[n], default=None)
    chosen_info = nodes_get(best) if best is not None else None
    chosen = chosen_info.gpu_family if chosen_info is not None else ""
    families = {info.gpu_family for info in map(nodes_get, scores) if info is not None}
    source, message = describe(got.estimates, families, chosen)
    note = PodNote(view.namespace, view.name, view.uid, message) if view.job_key is not None else None
    return Estimate(source, note)


def _pack(info: NodeInfo | None, used: int) -> float:
    return pack_fraction(info, used) if info is not None and used else 0.0
