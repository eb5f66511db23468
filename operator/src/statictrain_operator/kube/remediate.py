"""The Kubernetes API calls of the remediation loop: read the job, record history, apply actions, post Events.

Every action sets an absolute end state (replicas = n, suspend = true,
settings = last good, pods created before T deleted), so applying it again
after an operator restart changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, cast

from kubernetes import client
from statictrain import labels

from statictrain_operator.anomaly.history import ANNOTATION
from statictrain_operator.anomaly.remediation import ActionKind, Intent
from statictrain_operator.kube.clients import status_of
from statictrain_operator.kube.costs import emit_job_event, patch_job

COMPONENT = "statictrain-anomaly"


def read_job(custom: client.CustomObjectsApi, namespace: str, name: str) -> dict[str, Any] | None:
    """The StaticTrainingJob, or None when it is gone."""
    try:
        obj = custom.get_namespaced_custom_object(labels.GROUP, labels.VERSION, namespace, labels.PLURAL, name)
    except client.ApiException as exc:
        if status_of(exc) == 404:
            return None
        raise
    return cast(dict[str, Any], obj)


def set_annotation(custom: client.CustomObjectsApi, namespace: str, name: str, key: str, value: str) -> None:
    """Merge-patch one annotation of the job (does not change metadata.generation)."""
    patch_job(custom, namespace, name, {"metadata": {"annotations": {key: value}}})


def patch_status(custom: client.CustomObjectsApi, namespace: str, name: str, status: Mapping[str, Any]) -> None:
    """Merge-patch the job's status subresource."""
    custom.patch_namespaced_custom_object_status(
        labels.GROUP, labels.VERSION, namespace, labels.PLURAL, name, {"status": dict(status)}
    )


def restart_workers(core: client.CoreV1Api, namespace: str, job: str, created_before: datetime) -> int:
    """Delete the job's worker pods created before ``created_before``; returns how many were deleted.

    Pods created after it (the replacements) are kept, so a repeated call is harmless.
    """
    selector = f"{labels.JOB}={job},{labels.ROLE}=worker"
    pods = core.list_namespaced_pod(namespace, label_selector=selector)
    deleted = 0
    for pod in pods.items:
        meta = pod.metadata
        if meta is None or meta.name is None:
            continue
        created = meta.creation_timestamp
        if created is not None and created < created_before and meta.deletion_timestamp is None:
            try:
                core.delete_namespaced_pod(meta.name, namespace)
                deleted += 1
            except client.ApiException as exc:
                if status_of(exc) != 404:
                    raise
    return deleted


def apply_intent(
    custom: client.CustomObjectsApi, core: client.CoreV1Api, namespace: str, name: str, intent: Intent
) -> int | None:
    """Apply an intent's target; returns the job's generation after a spec change (None otherwise)."""
    target = dict(intent.target)
    if intent.action is ActionKind.RESTART_FROM_CHECKPOINT:
        restart_workers(core, namespace, name, datetime.fromisoformat(str(target["podsCreatedBefore"])))
        return None
    if intent.action is ActionKind.SCALE_DOWN:
        spec: dict[str, Any] = {"replicas": int(target["replicas"])}
    elif intent.action is ActionKind.SUSPEND:
        spec = {"suspend": True}
    else:
        spec = target
    patch_job(custom, namespace, name, {"spec": spec})
    job = read_job(custom, namespace, name)
    return None if job is None else int(job["metadata"].get("generation", 0))


def post_event(
    core: client.CoreV1Api, job: Mapping[str, Any], *, reason: str, message: str, warning: bool, now: datetime
) -> None:
    """A core/v1 Event about the job from the anomaly component."""
    emit_job_event(
        core,
        job,
        reason=reason,
        message=message,
        event_type="Warning" if warning else "Normal",
        now=now,
        component=COMPONENT,
    )


class KubeJobApi:
    """The anomaly loop's JobApi over the real API (see anomaly.evaluate.JobApi)."""

    def __init__(self, custom: client.CustomObjectsApi, core: client.CoreV1Api) -> None:
        self.custom, self.core = custom, core

    def read_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        return read_job(self.custom, namespace, name)

    def set_history(self, namespace: str, name: str, value: str) -> None:
        set_annotation(self.custom, namespace, name, ANNOTATION, value)

    def patch_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        patch_status(self.custom, namespace, name, status)

    def apply(self, namespace: str, name: str, intent: Intent) -> int | None:
        return apply_intent(self.custom, self.core, namespace, name, intent)

    def event(self, job: Mapping[str, Any], *, reason: str, message: str, warning: bool, now: datetime) -> None:
        post_event(self.core, job, reason=reason, message=message, warning=warning, now=now)


def list_jobs(custom: client.CustomObjectsApi, namespace: str | None) -> list[dict[str, Any]]:
    """StaticTrainingJobs in one namespace, or in all when ``namespace`` is None."""
    if namespace:
        res = custom.list_namespaced_custom_object(labels.GROUP, labels.VERSION, namespace, labels.PLURAL)
    else:
        res = custom.list_cluster_custom_object(labels.GROUP, labels.VERSION, labels.PLURAL)
    return list(cast(dict[str, Any], res).get("items", []))


def post_namespace_event(core: client.CoreV1Api, namespace: str, *, reason: str, message: str, now: datetime) -> None:
    """A Warning Event about a Namespace (for findings no single job owns)."""
    body = client.CoreV1Event(
        metadata=client.V1ObjectMeta(generate_name=f"{namespace}.", namespace=namespace),
        involved_object=client.V1ObjectReference(api_version="v1", kind="Namespace", name=namespace),
        reason=reason,
        message=message[:1024],
        type="Warning",
        source=client.V1EventSource(component=COMPONENT),
        first_timestamp=now,
        last_timestamp=now,
        count=1,
    )
    core.create_namespaced_event(namespace, body)


class KubeNamespaceEvents:
    """NamespaceEvents over the real API."""

    def __init__(self, core: client.CoreV1Api) -> None:
        self.core = core

    def namespace_event(self, namespace: str, *, reason: str, message: str, now: datetime) -> None:
        post_namespace_event(self.core, namespace, reason=reason, message=message, now=now)
