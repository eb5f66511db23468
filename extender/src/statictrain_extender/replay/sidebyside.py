"""Runs one replay segment for several arms at once on a real cluster: the I/O half of the work-conserving replay.

Every arm gets the same tasks in its own namespace, confined to its own copy of
the nodes. Prefilled tasks are created first and the clock starts once they are
bound (or ``prefill_timeout_s`` passed); then arrivals are created on schedule,
and each pod is deleted when its work is done on the GPU it landed on
(``Task.run_seconds``), which only the bind tells. Deletions still due at the end
of the segment are censored: the namespaces go, and the next segment waits until
their pods are gone.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import orjson
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from ..kubewatch import undecoded
from .workload import Task

__all__ = ["ArmRun", "Bound", "RunReporter", "SegmentResult", "run_segment", "scheduled_delay_s"]

log = logging.getLogger(__name__)

SEGMENT_LABEL = "statictrain.io/replay-segment"
Clock = Callable[[], float]


@dataclass(frozen=True)
class ArmRun:
    """One arm's part of a segment."""

    key: str
    namespace: str
    manifests: Mapping[str, Mapping[str, Any]]
    """Pod manifests by task name."""
    node_throughput: Mapping[str, float]
    """Relative throughput of each of the arm's nodes (unknown families: the caller's choice)."""
    class_throughput: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """Workload class -> node -> relative throughput, for classes that run at other speeds."""
    reporter: RunReporter | None = None
    """Told when each of the arm's tasks starts and stops running (e.g. to export step times)."""


class RunReporter(Protocol):
    """What a running task tells the world (step times, like a trainer's metrics)."""

    def started(self, namespace: str, name: str, node: str, task: Task, speed: float) -> None: ...

    def stopped(self, namespace: str, name: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Bound:
    """A pod as seen bound: wall seconds from the segment clock's start (negative: during the prefill)."""

    at_s: float
    node: str
    scheduled_delay_s: float | None
    """PodScheduled lastTransitionTime - creationTimestamp (server clock, whole seconds)."""
    scheduled_epoch: float | None = None
    """PodScheduled lastTransitionTime as a Unix time (whole seconds)."""


@dataclass
class SegmentResult:
    """What one segment observed, per arm and task name."""

    wall_s: float
    """Length of the segment after the prefill."""
    prefill_s: float
    started_at: float = 0.0
    """When the segment clock started, on ``run_segment``'s ``clock``."""
    bound: dict[str, dict[str, Bound]] = field(default_factory=dict)
    created: dict[str, dict[str, float]] = field(default_factory=dict)
    max_lateness_s: float = 0.0
    errors: list[str] = field(default_factory=list)


def _ts(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _scheduled_at(pod: Mapping[str, Any]) -> datetime | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "True":
            return _ts(cond.get("lastTransitionTime"))
    return None


def scheduled_delay_s(pod: Mapping[str, Any]) -> float | None:
    """Seconds from creation to the PodScheduled=True transition, by the API server's timestamps."""
    created = _ts((pod.get("metadata") or {}).get("creationTimestamp"))
    at = _scheduled_at(pod)
    if created is None or at is None:
        return None
    return max((at - created).total_seconds(), 0.0)


class _Binds(threading.Thread):
    """Watches the segment's pods; calls ``on_bind(namespace, name, Bound)`` once per pod."""

    def __init__(
        self, core: client.CoreV1Api, segment: str, clock: Clock, on_bind: Callable[[str, str, Bound], None]
    ) -> None:
        super().__init__(name=f"binds-{segment}", daemon=True)
        self.core, self.selector, self.clock, self.on_bind = core, f"{SEGMENT_LABEL}={segment}", clock, on_bind
        self.t0 = clock()
        self.seen: set[tuple[str, str]] = set()
        self._stop_event = threading.Event()
        self._stream = watch.Watch()  # type: ignore[no-untyped-call]
        self.ready = threading.Event()

    def run(self) -> None:
        version: str | None = None
        while not self._stop_event.is_set():
            try:
                if version is None:
                    body: Any = self.core.list_pod_for_all_namespaces(
                        label_selector=self.selector, _preload_content=False
                    )
                    doc = orjson.loads(body.data)
                    for pod in doc.get("items") or []:
                        self._see(pod)
                    version = doc["metadata"]["resourceVersion"]
                    self.ready.set()
                for event in self._stream.stream(  # type: ignore[no-untyped-call]
                    undecoded(self.core.list_pod_for_all_namespaces),
                    label_selector=self.selector,
                    resource_version=version,
                    timeout_seconds=60,
                ):
                    obj = event.get("raw_object") or {}
                    if event.get("type") == "ERROR":
                        version = None
                        break
                    version = (obj.get("metadata") or {}).get("resourceVersion", version)
                    self._see(obj)
            except Exception as err:  # stop() closes the stream under the thread's feet
                if self._stop_event.is_set():
                    return
                log.warning("bind watch restarted: %s", err)
                version = None

    def _see(self, pod: Mapping[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        node = (pod.get("spec") or {}).get("nodeName")
        key = (str(meta.get("namespace")), str(meta.get("name")))
        if node and key not in self.seen:
            self.seen.add(key)
            at = _scheduled_at(pod)
            bound = Bound(self.clock() - self.t0, node, scheduled_delay_s(pod), at.timestamp() if at else None)
            self.on_bind(key[0], key[1], bound)

    def stop(self) -> None:
        self._stop_event.set()
        self._stream.stop()  # type: ignore[no-untyped-call]


def run_segment(
    core: client.CoreV1Api,
    *,
    segment: str,
    arms: Sequence[ArmRun],
    tasks: Sequence[Task],
    speedup: float,
    length_s: float,
    prefill_timeout_s: float = 120.0,
    prefill_quiet_s: float = 5.0,
    drain_timeout_s: float = 600.0,
    workers: int = 16,
    clock: Clock = time.monotonic,
    wall: Clock = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> SegmentResult:
    """Replay ``tasks`` (trace seconds, compressed) in every arm at ``speedup``; see the module doc."""
    by_ns = {arm.namespace: arm for arm in arms}
    task_of = {t.name: t for t in tasks}
    for arm in arms:
        core.create_namespace({"metadata": {"name": arm.namespace, "labels": {SEGMENT_LABEL: segment}}})  # type: ignore[arg-type]
    lock = threading.Condition()
    deletions: list[tuple[float, str, str]] = []  # (wall from the segment clock, namespace, name)
    result = SegmentResult(wall_s=length_s / speedup, prefill_s=0.0)
    for arm in arms:
        result.bound[arm.key] = {}
        result.created[arm.key] = {}
    clock0: list[float] = []  # offset of the segment clock in the watch's clock, once started
    epoch0: list[float] = []  # Unix time of the segment clock's start (the API server runs on this machine)

    def on_bind(namespace: str, name: str, bound: Bound) -> None:
        arm = by_ns.get(namespace)
        task = task_of.get(name)
        if arm is None or task is None:
            return
        with lock:
            offset = clock0[0] if clock0 else None
            at = bound.at_s - offset if offset is not None else None
            if at is not None and bound.scheduled_epoch is not None:
                # The watch sees a bind late under load; the server's time (whole seconds, so +0.5) is closer.
                at = min(at, bound.scheduled_epoch + 0.5 - epoch0[0])
            seen_at = at if at is not None else float("-inf")
            result.bound[arm.key][name] = Bound(seen_at, bound.node, bound.scheduled_delay_s)
            if at is not None:
                _schedule(namespace, name, max(at, 0.0), arm, task)
            lock.notify_all()

    def _schedule(namespace: str, name: str, start: float, arm: ArmRun, task: Task) -> None:
        node = result.bound[arm.key][name].node
        speed = arm.class_throughput.get(task.workload_class, arm.node_throughput).get(node, 1.0)
        run = task.run_seconds(speed)
        if arm.reporter is not None:
            arm.reporter.started(namespace, name, node, task, speed)
        if run != float("inf"):
            heapq.heappush(deletions, (start + run / speedup, namespace, name))

    binds = _Binds(core, segment, clock, on_bind)
    binds.start()
    binds.ready.wait(30)

    def create(arm: ArmRun, name: str, when: float) -> None:
        try:
            core.create_namespaced_pod(arm.namespace, arm.manifests[name])  # type: ignore[arg-type]
        except ApiException as err:
            with lock:
                result.errors.append(f"create {arm.key}/{name}: {err.status} {err.reason}")
            return
        with lock:  # actual creation time on the segment clock (0 during the prefill); ``when`` was planned
            result.created[arm.key][name] = max(binds.clock() - binds.t0 - clock0[0], when) if clock0 else 0.0

    gone: set[tuple[str, str]] = set()

    reporters = {arm.namespace: arm.reporter for arm in arms if arm.reporter is not None}

    def delete(namespace: str, name: str) -> None:
        reporter = reporters.get(namespace)
        if reporter is not None:
            reporter.stopped(namespace, name)
        try:
            core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        except ApiException as err:
            if err.status != 404:
                with lock:
                    result.errors.append(f"delete {namespace}/{name}: {err.status} {err.reason}")
                return
        with lock:
            gone.add((namespace, name))

    prefill = [t for t in tasks if t.prefilled]
    arrivals = [t for t in tasks if not t.prefilled]
    with ThreadPoolExecutor(workers) as pool:
        p0 = binds.clock() - binds.t0
        futures: list[Future[None]] = [pool.submit(create, arm, t.name, 0.0) for t in prefill for arm in arms]
        for fut in futures:
            fut.result()
        want = len(prefill) * len(arms)
        deadline = clock() + prefill_timeout_s
        with lock:
            # All prefilled pods bound, or no new bind for prefill_quiet_s (the rest do not fit), or the timeout.
            seen, quiet_since = -1, clock()
            while clock() < deadline:
                bound_now = sum(len(b) for b in result.bound.values())
                if bound_now >= want:
                    break
                if bound_now != seen:
                    seen, quiet_since = bound_now, clock()
                elif clock() - quiet_since > prefill_quiet_s:
                    break
                lock.wait(0.5)
            clock0.append(binds.clock() - binds.t0)
            epoch0.append(wall())
            result.prefill_s = clock0[0] - p0
            for arm in arms:  # prefilled pods run from the start of the clock
                for name, bound in list(result.bound[arm.key].items()):
                    result.bound[arm.key][name] = Bound(0.0, bound.node, bound.scheduled_delay_s)
                    _schedule(arm.namespace, name, 0.0, arm, task_of[name])
        start = clock()
        result.started_at = start
        end = result.wall_s
        i = 0
        while True:
            now = clock() - start
            with lock:
                due_delete = deletions[0][0] if deletions else float("inf")
            due_create = arrivals[i].arrive_s / speedup if i < len(arrivals) else float("inf")
            due = min(due_delete, due_create)
            if due >= end:
                break
            if due > now:
                sleep(min(due - now, 0.05))
                continue
            result.max_lateness_s = max(result.max_lateness_s, now - due)
            if due_create <= due_delete:
                task = arrivals[i]
                i += 1
                for arm in arms:
                    pool.submit(create, arm, task.name, due_create)
            else:
                with lock:
                    _, namespace, name = heapq.heappop(deletions)
                pool.submit(delete, namespace, name)
        wait = end - (clock() - start)
        if wait > 0:
            sleep(wait)
        # Censor: delete what is still there, pod by pod in parallel (the API server's deletecollection
        # and the namespace controller delete one pod at a time, minutes for thousands on a busy machine).
        with lock:
            left = [
                (arm.namespace, n) for arm in arms for n in result.created[arm.key] if (arm.namespace, n) not in gone
            ]
        for fut in [pool.submit(delete, ns, n) for ns, n in left]:
            fut.result()
    binds.stop()
    for arm in arms:
        try:
            core.delete_namespace(arm.namespace, grace_period_seconds=0)
        except ApiException as err:
            result.errors.append(f"delete namespace {arm.namespace}: {err.status} {err.reason}")
    _drain(core, segment, drain_timeout_s, clock, sleep)
    return result


def _drain(
    core: client.CoreV1Api, segment: str, timeout_s: float, clock: Clock, sleep: Callable[[float], None]
) -> None:
    """Wait until the segment's pods are gone, so that the next segment starts on empty nodes."""
    deadline = clock() + timeout_s
    selector = f"{SEGMENT_LABEL}={segment}"
    while core.list_pod_for_all_namespaces(label_selector=selector, limit=1).items:
        if clock() > deadline:
            raise TimeoutError(f"pods of segment {segment} still exist after {timeout_s:.0f} s")
        sleep(2.0)
