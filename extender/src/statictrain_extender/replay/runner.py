"""Drives a replay against a real cluster: the only replay module that talks to the API server.

One run = one namespace, one scheduler name: pods are created and deleted on
the plan's schedule (wall clock, injected), a watch records when and where
each pod is bound, and the observations go to :mod:`.accounting`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import orjson
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from ..kubewatch import undecoded
from .accounting import Observed
from .plan import Action

__all__ = ["BindWatch", "RunResult", "delete_nodes", "ensure_nodes", "run_replay"]

log = logging.getLogger(__name__)

Clock = Callable[[], float]


def _initialized(node: Mapping[str, Any]) -> bool:
    """kwok has taken the node over (it set a Ready condition, whatever its later heartbeats do)."""
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" for c in conditions)


def _list(list_fn: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """A list call as raw JSON (fast, and no typed models to unwrap)."""
    body: dict[str, Any] = orjson.loads(list_fn(*args, _preload_content=False, **kwargs).data)
    return body


def _node_items(core: client.CoreV1Api, selector: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = _list(core.list_node, label_selector=selector).get("items") or []
    return items


def ensure_nodes(
    core: client.CoreV1Api,
    manifests: Sequence[Mapping[str, Any]],
    *,
    label_selector: str,
    timeout_s: float = 300,
    workers: int = 8,
    clock: Clock = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Create the nodes that do not exist yet and wait until kwok has initialized all of them.

    ``label_selector`` must select exactly the nodes of ``manifests``.
    """
    selector = label_selector
    existing = {n["metadata"]["name"] for n in _node_items(core, selector)}
    todo = [m for m in manifests if m["metadata"]["name"] not in existing]

    def create(manifest: Mapping[str, Any]) -> None:
        try:
            core.create_node(manifest)  # type: ignore[arg-type]
        except ApiException as err:
            if err.status != 409:
                raise

    with ThreadPoolExecutor(workers) as pool:
        for fut in [pool.submit(create, m) for m in todo]:
            fut.result()
    want = {m["metadata"]["name"] for m in manifests}
    deadline = clock() + timeout_s
    while True:
        ready = {n["metadata"]["name"] for n in _node_items(core, selector) if _initialized(n)}
        if want <= ready:
            return
        if clock() > deadline:
            raise TimeoutError(f"{len(want - ready)} of {len(want)} replay nodes not Ready after {timeout_s:.0f} s")
        sleep(1.0)


def delete_nodes(core: client.CoreV1Api, label_selector: str) -> int:
    """Delete the replay's nodes; returns how many."""
    nodes = _node_items(core, label_selector)
    for node in nodes:
        try:
            core.delete_node(node["metadata"]["name"])
        except ApiException as err:
            if err.status != 404:
                raise
    return len(nodes)


@dataclass
class RunResult:
    """What one run observed."""

    observed: list[Observed]
    max_lateness_s: float
    """Largest delay between an action's planned and actual wall time."""
    errors: list[str] = field(default_factory=list)


class BindWatch(threading.Thread):
    """Records, for each pod of a namespace, the first time it is seen bound to a node."""

    def __init__(self, core: client.CoreV1Api, namespace: str, clock: Clock, t0: float) -> None:
        super().__init__(name=f"bind-watch-{namespace}", daemon=True)
        self.core, self.namespace, self.clock, self.t0 = core, namespace, clock, t0
        self.bound: dict[str, tuple[float, str]] = {}
        self.started_ok = threading.Event()
        self._stop_event = threading.Event()
        self._stream = watch.Watch()  # type: ignore[no-untyped-call]

    def run(self) -> None:
        version = _list(self.core.list_namespaced_pod, self.namespace)["metadata"]["resourceVersion"]
        while not self._stop_event.is_set():
            self.started_ok.set()
            try:
                for event in self._stream.stream(  # type: ignore[no-untyped-call]
                    undecoded(self.core.list_namespaced_pod),
                    self.namespace,
                    resource_version=version,
                    timeout_seconds=60,
                ):
                    obj = event.get("raw_object") or {}
                    version = (obj.get("metadata") or {}).get("resourceVersion", version)
                    name = (obj.get("metadata") or {}).get("name")
                    node = (obj.get("spec") or {}).get("nodeName")
                    if name and node and name not in self.bound:
                        self.bound[name] = (self.clock() - self.t0, node)
            except Exception as err:  # stop() closes the stream under the thread's feet
                if self._stop_event.is_set():
                    return
                log.warning("bind watch of %s restarted: %s", self.namespace, err)
                version = _list(self.core.list_namespaced_pod, self.namespace)["metadata"]["resourceVersion"]

    def stop(self) -> None:
        self._stop_event.set()
        self._stream.stop()  # type: ignore[no-untyped-call]


def run_replay(
    core: client.CoreV1Api,
    *,
    namespace: str,
    actions: Sequence[Action],
    manifests: Mapping[str, Mapping[str, Any]],
    gpu_milli: Mapping[str, int],
    workers: int = 16,
    settle_s: float = 5.0,
    clock: Clock = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> RunResult:
    """Replay ``actions`` in ``namespace`` (created here, deleted at the end)."""
    core.create_namespace({"metadata": {"name": namespace}})  # type: ignore[arg-type]
    created: dict[str, float] = {}
    deleted: dict[str, float] = {}
    errors: list[str] = []
    lock = threading.Lock()
    t0 = clock()
    binds = BindWatch(core, namespace, clock, t0)
    binds.start()
    binds.started_ok.wait(30)
    lateness = 0.0

    def create(name: str) -> None:
        at = clock() - t0
        try:
            core.create_namespaced_pod(namespace, manifests[name])  # type: ignore[arg-type]
        except ApiException as err:
            with lock:
                errors.append(f"create {name}: {err.status} {err.reason}")
            return
        with lock:
            created[name] = at

    def delete(name: str) -> None:
        at = clock() - t0
        try:
            core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        except ApiException as err:
            if err.status != 404:
                with lock:
                    errors.append(f"delete {name}: {err.status} {err.reason}")
        with lock:
            deleted[name] = at

    pending_creates: dict[str, Future[None]] = {}
    with ThreadPoolExecutor(workers) as pool:
        for action in actions:
            wait = action.at_s - (clock() - t0)
            if wait > 0:
                sleep(wait)
            lateness = max(lateness, (clock() - t0) - action.at_s)
            if action.kind == "create":
                pending_creates[action.pod] = pool.submit(create, action.pod)
            else:
                make = pending_creates.get(action.pod)
                if make is not None:
                    make.result()  # never delete before the create went through
                pool.submit(delete, action.pod)
    sleep(settle_s)
    binds.stop()
    try:
        core.delete_namespace(namespace, grace_period_seconds=0)
    except ApiException as err:
        errors.append(f"delete namespace {namespace}: {err.status} {err.reason}")
    observed: list[Observed] = []
    for name, at in created.items():
        bound = binds.bound.get(name)
        observed.append(
            Observed(
                name=name,
                gpu_milli=gpu_milli.get(name, 0),
                created_s=at,
                deleted_s=deleted.get(name, clock() - t0),
                bound_s=bound[0] if bound else None,
                node=bound[1] if bound else None,
            )
        )
    return RunResult(observed=observed, max_lateness_s=lateness, errors=errors)
