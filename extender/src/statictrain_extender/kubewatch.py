"""List and watch Nodes (and Pods) into the ClusterState: the only module that talks to the API server.

The kubernetes client is synchronous, so each watch runs in its own daemon
thread and hands events to the event loop with ``call_soon_threadsafe``; the
state is only ever changed on the loop's thread.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

import orjson
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from .estimates import EVENT_REASON, PodNote
from .state import ClusterState

__all__ = ["api_client", "event_body", "start_event_writer", "start_watches", "undecoded"]

log = logging.getLogger(__name__)

_WATCH_TIMEOUT_S = 300
_RETRY_S = 2.0


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


def _watch_loop(
    list_fn: Callable[..., Any],
    *,
    on_list: Callable[[list[dict[str, Any]]], None],
    on_event: Callable[[str, dict[str, Any]], None],
    stop: threading.Event,
    kind: str,
    selectors: dict[str, str],
) -> None:
    """List, then watch from the list's resourceVersion; relist only when the watch says it must."""
    raw_fn = undecoded(list_fn)
    version: str | None = None
    while not stop.is_set():
        try:
            if version is None:
                body = orjson.loads(list_fn(_preload_content=False, **selectors).data)
                on_list(body.get("items") or [])
                version = str(body["metadata"]["resourceVersion"])
            stream = watch.Watch()  # type: ignore[no-untyped-call]
            for event in stream.stream(  # type: ignore[no-untyped-call]
                raw_fn,
                resource_version=version,
                timeout_seconds=_WATCH_TIMEOUT_S,
                allow_watch_bookmarks=True,
                **selectors,
            ):
                if stop.is_set():
                    stream.stop()  # type: ignore[no-untyped-call]
                    break
                event_type = event.get("type", "")
                obj = event.get("raw_object") or {}
                if event_type == "ERROR":  # e.g. 410 Gone: our version is too old
                    log.info("%s watch error (%s); relisting", kind, obj.get("message", obj))
                    version = None
                    break
                version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                if event_type != "BOOKMARK":
                    on_event(event_type, obj)
        except ApiException as err:
            log.warning("%s list/watch failed (%s), relisting in %.0f s", kind, err.status, _RETRY_S)
            version = None
            stop.wait(_RETRY_S)
        except (OSError, ValueError, KeyError) as err:
            log.warning("%s list/watch failed, relisting in %.0f s: %s", kind, _RETRY_S, err)
            version = None
            stop.wait(_RETRY_S)
        except Exception:  # the thread must not die silently
            log.exception("%s watch crashed, relisting", kind)
            version = None
            stop.wait(_RETRY_S)


def start_watches(
    api: client.ApiClient, state: ClusterState, loop: asyncio.AbstractEventLoop, watch_pods: bool
) -> threading.Event:
    """Start the node (and pod) watch threads; set the returned event to stop them."""
    stop = threading.Event()
    core = client.CoreV1Api(api)

    def node_event(kind: str, obj: dict[str, Any]) -> None:
        if kind == "DELETED":
            state.delete_node(str((obj.get("metadata") or {}).get("name", "")))
        else:
            state.upsert_node(obj)

    def pod_event(kind: str, obj: dict[str, Any]) -> None:
        if kind == "DELETED":
            state.delete_pod(str((obj.get("metadata") or {}).get("uid", "")))
        else:
            state.upsert_pod(obj)

    def on_loop(fn: Callable[..., None]) -> Callable[..., None]:
        def call(*args: Any) -> None:
            loop.call_soon_threadsafe(fn, *args)

        return call

    target_type = tuple[str, Callable[..., Any], Callable[..., None], Callable[..., None], dict[str, str]]
    targets: list[target_type] = [("nodes", core.list_node, state.replace_nodes, node_event, {})]
    if watch_pods:
        # Only bound pods hold GPUs on a node.
        bound = {"field_selector": "spec.nodeName!="}
        targets.append(("pods", core.list_pod_for_all_namespaces, state.replace_pods, pod_event, bound))
    for kind, list_fn, on_list, on_event, selectors in targets:
        thread = threading.Thread(
            target=_watch_loop,
            args=(list_fn,),
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
    """A daemon thread writing the queued estimate notes as Pod Events; failures are logged, never retried."""
    core = client.CoreV1Api(api)
    notes = state.estimates.notes

    def run() -> None:
        while not stop.is_set():
            try:
                note = notes.get(timeout=1.0)
            except queue.Empty:
                continue
            now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            try:
                core.create_namespaced_event(note.namespace, event_body(note, now))  # type: ignore[arg-type]
            except ApiException as err:
                log.info("event for pod %s/%s not written: %s %s", note.namespace, note.name, err.status, err.reason)
            except (OSError, ValueError) as err:
                log.info("event for pod %s/%s not written: %s", note.namespace, note.name, err)

    thread = threading.Thread(target=run, name="estimate-events", daemon=True)
    thread.start()
    return thread
