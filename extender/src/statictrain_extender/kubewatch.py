"""List and watch Nodes (and Pods) into the ClusterState: the only module that talks to the API server.

Each watch runs in its own daemon thread and hands events to the event loop with
``call_soon_threadsafe``; the state is only ever changed on the loop's thread. Lists are read PAGE
objects at a time, every answer within a size and a time bound (apiread.py); a broken answer (too
large, not JSON, an event of the wrong shape, a stall, an error status) is one warning line and a
relist after _RETRY_S; objects of any shape are skipped or cached, never break the cache.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import urllib3
from kubernetes import client, config

from . import apiread
from .estimates import EVENT_REASON, PodNote
from .state import ClusterState

__all__ = ["api_client", "event_body", "start_event_writer", "start_watches", "undecoded"]

log = logging.getLogger(__name__)

PAGE = 500
"""Objects per page of a list."""
MAX_PAGE_BYTES = 64 << 20
"""A page of PAGE objects larger than this is a broken answer (a Node or Pod is a few KB, at most 1.5 MiB)."""
MAX_LIST_OBJECTS = 1_000_000
"""A list that goes on past this many objects (a server handing out continue tokens without end) is refused."""
MAX_EVENT_BYTES = 4 << 20
"""A watch event (one object: etcd's limit is 1.5 MiB) longer than this is a broken answer."""
_CONNECT_TIMEOUT_S = 10.0
_LIST_READ_TIMEOUT_S = 30.0
"""The longest wait for one socket read of a list."""
_LIST_DEADLINE_S = 120.0
"""The longest read of one page, however the server drips it."""
_WATCH_TIMEOUT_S = 300
_WATCH_SLACK_S = 60
"""A watch's socket read and its whole read end this long after the timeout asked of the server."""
_RETRY_S = 2.0
_EVENT_READ_TIMEOUT_S = 10.0
"""The longest wait for the answer to one Event's POST."""


def api_client(kubeconfig: str, pool_size: int = 32) -> client.ApiClient:
    """An API client from a kubeconfig path, or the in-cluster service account when empty.

    ``pool_size`` HTTP connections are kept, enough for the watches and a thread pool of callers.
    """
    cfg = client.Configuration()
    if kubeconfig:
        config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)  # type: ignore[no-untyped-call]
    else:
        config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    cfg.connection_pool_maxsize = pool_size
    return client.ApiClient(cfg)


def undecoded(list_fn: Callable[..., Any]) -> Callable[..., Any]:
    """The same call without a model return type, so the watch hands out raw JSON only.

    kubernetes.watch deserializes every event into typed models when it can
    find the return type; the extender reads ``raw_object`` and skips that cost.
    """

    def call(*args: Any, **kwargs: Any) -> Any:
        return list_fn(*args, **kwargs)

    return call


class _StoppedError(Exception):
    """The watches were stopped (or the event loop is gone): the thread ends."""


def _list(
    api: client.ApiClient, path: str, selectors: dict[str, str], stop: threading.Event
) -> tuple[list[dict[str, Any]], str]:
    """All objects at ``path``, PAGE at a time, and the resourceVersion to watch from."""
    items: list[dict[str, Any]] = []
    token, total = "", 0
    while True:
        query = {**selectors, "limit": str(PAGE), **({"continue": token} if token else {})}
        resp = apiread.get(api, path, query, _CONNECT_TIMEOUT_S, _LIST_READ_TIMEOUT_S)
        page = apiread.read_json(resp, MAX_PAGE_BYTES, time.monotonic() + _LIST_DEADLINE_S)
        listed = page.get("items") if isinstance(page, dict) else ()
        if not isinstance(page, dict) or not isinstance(listed, list | None):
            raise apiread.AnswerError("its answer is not a list object")
        items += [obj for obj in listed or [] if isinstance(obj, dict)]
        total += 1
        meta = page.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        more = meta.get("continue")
        token = more if isinstance(more, str) else ""
        if not token:
            version = meta.get("resourceVersion")
            if not isinstance(version, str) or not version:
                raise apiread.AnswerError("its list has no resourceVersion")
            return items, version
        if len(items) > MAX_LIST_OBJECTS or total * PAGE > MAX_LIST_OBJECTS:
            raise apiread.AnswerError(f"its list goes on past {MAX_LIST_OBJECTS} objects")
        if stop.is_set():
            raise _StoppedError


def _version(obj: dict[str, Any]) -> str | None:
    meta = obj.get("metadata")
    version = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return version if isinstance(version, str) and version else None


def _watch(
    api: client.ApiClient,
    path: str,
    selectors: dict[str, str],
    version: str,
    *,
    on_event: Callable[[str, dict[str, Any]], None],
    stop: threading.Event,
) -> tuple[str | None, int]:
    """Watch from ``version`` until the server ends the watch: the version to go on from (None: relist)
    and how many events came. AnswerError for an event that is not an object with a type and an object."""
    query = {
        **selectors,
        "watch": "true",
        "resourceVersion": version,
        "allowWatchBookmarks": "true",
        "timeoutSeconds": str(_WATCH_TIMEOUT_S),
    }
    read_s = _WATCH_TIMEOUT_S + _WATCH_SLACK_S
    resp = apiread.get(api, path, query, _CONNECT_TIMEOUT_S, read_s)
    count = 0
    for event in apiread.json_lines(resp, MAX_EVENT_BYTES, time.monotonic() + read_s):
        if stop.is_set():
            raise _StoppedError
        count += 1
        obj = event.get("object") if isinstance(event, dict) else None
        kind = event.get("type") if isinstance(event, dict) else None
        if not isinstance(kind, str) or not isinstance(obj, dict):
            raise apiread.AnswerError("a watch event is not an object with a type and an object")
        if kind == "ERROR":  # e.g. 410 Gone: our version is too old
            message = obj.get("message")
            log.info("watch of %s ended by the server (%s); relisting", path, ascii(message)[:200])
            return None, count
        version = _version(obj) or version
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            on_event(kind, obj)
        elif kind != "BOOKMARK":
            log.info("watch of %s: event of unknown type %s skipped", path, ascii(kind)[:40])
    return version, count


def _watch_loop(
    api: client.ApiClient,
    path: str,
    *,
    on_list: Callable[[list[dict[str, Any]]], None],
    on_event: Callable[[str, dict[str, Any]], None],
    stop: threading.Event,
    kind: str,
    selectors: dict[str, str],
) -> None:
    """List, then watch from the list's resourceVersion; relist when the watch says it must or an answer
    is broken (logged in one line, after _RETRY_S)."""
    version: str | None = None
    while not stop.is_set():
        try:
            if version is None:
                items, version = _list(api, path, selectors, stop)
                on_list(items)
            version, count = _watch(api, path, selectors, version, on_event=on_event, stop=stop)
            if count == 0:
                stop.wait(_RETRY_S)  # a watch that ends at once must not become a busy loop
        except _StoppedError:
            return
        except (OSError, ValueError, urllib3.exceptions.HTTPError) as err:
            log.warning("%s list/watch failed, relisting in %.1f s: %s", kind, _RETRY_S, one_line(err))
            version = None
            stop.wait(_RETRY_S)
        except Exception as err:  # the thread must not die, nor log a traceback per retry
            log.error("%s watch failed unexpectedly, relisting in %.1f s: %s", kind, _RETRY_S, one_line(err))
            version = None
            stop.wait(_RETRY_S)


def start_watches(
    api: client.ApiClient, state: ClusterState, loop: asyncio.AbstractEventLoop, watch_pods: bool
) -> threading.Event:
    """Start the node (and pod) watch threads; set the returned event to stop them."""
    stop = threading.Event()

    def node_event(kind: str, obj: dict[str, Any]) -> None:
        if kind == "DELETED":
            name = _meta(obj).get("name")
            if isinstance(name, str):
                state.delete_node(name)
        else:
            state.upsert_node(obj)

    def pod_event(kind: str, obj: dict[str, Any]) -> None:
        if kind == "DELETED":
            uid = _meta(obj).get("uid")
            if isinstance(uid, str):
                state.delete_pod(uid)
        else:
            state.upsert_pod(obj)

    def on_loop(fn: Callable[..., None]) -> Callable[..., None]:
        def call(*args: Any) -> None:
            if stop.is_set():
                raise _StoppedError
            try:
                loop.call_soon_threadsafe(fn, *args)
            except RuntimeError:  # the loop is closed: the application is gone
                raise _StoppedError from None

        return call

    target_type = tuple[str, str, Callable[..., None], Callable[..., None], dict[str, str]]
    targets: list[target_type] = [("nodes", "/api/v1/nodes", state.replace_nodes, node_event, {})]
    if watch_pods:
        # Only bound pods hold GPUs on a node.
        bound = {"fieldSelector": "spec.nodeName!="}
        targets.append(("pods", "/api/v1/pods", state.replace_pods, pod_event, bound))
    for kind, path, on_list, on_event, selectors in targets:
        thread = threading.Thread(
            target=_watch_loop,
            args=(api, path),
            kwargs={
                "on_list": on_loop(on_list),
                "on_event": on_loop(on_event),
                "stop": stop,
                "kind": kind,
                "selectors": selectors,
            },
            name=f"watch-{kind}",
            daemon=True,
        )
        thread.start()
    return stop


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def one_line(err: BaseException) -> str:
    """An exception as one line of at most 300 characters."""
    text = " ".join(str(err).split()) or type(err).__name__
    return text[:300]


def event_body(note: PodNote, now: str) -> dict[str, Any]:
    """A core/v1 Event on the pod (``kubectl describe pod`` shows it)."""
    return {
        "metadata": {"generateName": f"{note.name}.", "namespace": note.namespace},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": note.name,
            "namespace": note.namespace,
            "uid": note.uid,
        },
        "reason": EVENT_REASON,
        "message": note.message[:1024],
        "type": "Normal",
        "source": {"component": "statictrain-extender"},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


def start_event_writer(api: client.ApiClient, state: ClusterState, stop: threading.Event) -> threading.Thread:
    """A daemon thread writing the queued estimate notes as Pod Events; failures are logged, never retried
    (each POST waits at most _CONNECT_TIMEOUT_S + _EVENT_READ_TIMEOUT_S, its answer is not read)."""
    notes = state.estimates.notes

    def run() -> None:
        while not stop.is_set():
            try:
                note = notes.get(timeout=1.0)
            except queue.Empty:
                continue
            now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            path = f"/api/v1/namespaces/{quote(note.namespace, safe='')}/events"
            try:
                apiread.post(api, path, event_body(note, now), _CONNECT_TIMEOUT_S, _EVENT_READ_TIMEOUT_S)
            except (OSError, ValueError, urllib3.exceptions.HTTPError) as err:
                log.info("event for pod %s/%s not written: %s", ascii(note.namespace)[:80], ascii(note.name)[:80],
                         one_line(err))  # fmt: skip

    thread = threading.Thread(target=run, name="estimate-events", daemon=True)
    thread.start()
    return thread
