"""API calls of cost accounting and budgets: worker pods, StaticTrainingJobs, status, Events."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any, cast

from kubernetes import client
from statictrain import labels

from statictrain_operator.kube import trainingjobs
from statictrain_operator.kube.clients import Clients, build

log = logging.getLogger(__name__)


def read_configmap_key(core: client.CoreV1Api, namespace: str, name: str, key: str) -> str | None:
    """One key of a ConfigMap; None (logged) when the ConfigMap cannot be read."""
    try:
        cm = core.read_namespaced_config_map(name, namespace)
    except client.ApiException as e:
        log.warning("ConfigMap %s/%s unreadable: %s", namespace, name, e.reason)
        return None
    value: str | None = (cm.data or {}).get(key)
    return value


def list_worker_pods(core: client.CoreV1Api, namespace: str | None = None) -> list[dict[str, Any]]:
    """Pods labelled with a statictrain job, as plain dicts (keyed later by metadata.uid)."""
    selector = labels.JOB
    resp = (
        core.list_namespaced_pod(namespace, label_selector=selector)
        if namespace
        else core.list_pod_for_all_namespaces(label_selector=selector)
    )
    return [cast(dict[str, Any], core.api_client.sanitize_for_serialization(p)) for p in resp.items]


def list_jobs(custom: client.CustomObjectsApi, namespace: str | None = None) -> list[dict[str, Any]]:
    group, version, plural = labels.GROUP, labels.VERSION, labels.PLURAL
    if namespace:
        resp = custom.list_namespaced_custom_object(group, version, namespace, plural)
    else:
        resp = custom.list_cluster_custom_object(group, version, plural)
    return cast(list[dict[str, Any]], cast(dict[str, Any], resp).get("items", []))


def _unless_gone(call: Any, *args: Any) -> bool:
    try:
        call(*args)
    except client.ApiException as e:
        if e.status == 404:
            return False
        raise
    return True


def patch_job(custom: client.CustomObjectsApi, namespace: str, name: str, patch: Mapping[str, Any]) -> bool:
    """Merge-patch a StaticTrainingJob (spec or metadata); False when the job is gone."""
    return _unless_gone(
        custom.patch_namespaced_custom_object,
        labels.GROUP,
        labels.VERSION,
        namespace,
        labels.PLURAL,
        name,
        dict(patch),
    )


def emit_job_event(
    core: client.CoreV1Api,
    job: Mapping[str, Any],
    *,
    reason: str,
    message: str,
    event_type: str,
    now: datetime,
    component: str = "statictrain-cost",
) -> None:
    """Create a core/v1 Event about a StaticTrainingJob."""
    meta = job["metadata"]
    body = client.CoreV1Event(
        metadata=client.V1ObjectMeta(generate_name=f"{meta['name']}.", namespace=meta["namespace"]),
        involved_object=client.V1ObjectReference(
            api_version=labels.API_VERSION,
            kind=labels.KIND,
            name=meta["name"],
            namespace=meta["namespace"],
            uid=meta.get("uid"),
        ),
        reason=reason,
        message=message[:1024],
        type=event_type,
        source=client.V1EventSource(component=component),
        first_timestamp=now,
        last_timestamp=now,
        count=1,
    )
    core.create_namespaced_event(meta["namespace"], body)


def write_configmap_key(core: client.CoreV1Api, namespace: str, name: str, key: str, text: str) -> bool:
    """Create or replace one key of a ConfigMap (the operator's own); False (logged) when it cannot."""
    body = {"metadata": {"name": name, "namespace": namespace}, "data": {key: text}}
    try:
        core.patch_namespaced_config_map(name, namespace, body)
    except client.ApiException as e:
        if e.status != 404:
            log.warning("ConfigMap %s/%s not written: %s", namespace, name, e.reason)
            return False
        try:
            core.create_namespaced_config_map(
                namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data={key: text})
            )
        except client.ApiException as e2:
            log.warning("ConfigMap %s/%s not created: %s", namespace, name, e2.reason)
            return False
    return True


STATE_KEY = "state.json"


class KubeCostClient:
    """The calls of cost accounting, over the official client (implements cost.accounting.CostKube)."""

    def __init__(self, clients: Clients, clock: Any, state_configmap: str = "") -> None:
        """``state_configmap``: ``namespace/name`` of the ConfigMap holding the cost state; "" keeps none."""
        self.clients = clients
        self.core = clients.core
        self.custom = clients.custom
        self.clock = clock
        self.state_ref = tuple(state_configmap.split("/", 1)) if state_configmap else None

    def read_state(self) -> str | None:
        if self.state_ref is None:
            return None
        ns, name = self.state_ref
        try:
            cm = self.core.read_namespaced_config_map(name, ns)
        except client.ApiException as e:
            if e.status != 404:
                log.warning("cost state ConfigMap %s/%s unreadable: %s", ns, name, e.reason)
            return None
        text: str | None = (cm.data or {}).get(STATE_KEY)
        return text

    def write_state(self, text: str) -> bool:
        if self.state_ref is None:
            return True
        return write_configmap_key(self.core, self.state_ref[0], self.state_ref[1], STATE_KEY, text)

    def list_nodes(self) -> list[dict[str, Any]]:
        items = self.core.list_node().items
        return [cast(dict[str, Any], self.core.api_client.sanitize_for_serialization(n)) for n in items]

    def list_worker_pods(self) -> list[dict[str, Any]]:
        return list_worker_pods(self.core)

    def list_jobs(self) -> list[dict[str, Any]]:
        return list_jobs(self.custom)

    def patch_job_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> bool:
        return trainingjobs.patch_status(self.clients, namespace, name, status)

    def patch_job(self, namespace: str, name: str, patch: Mapping[str, Any]) -> bool:
        return patch_job(self.custom, namespace, name, patch)

    def emit_event(self, job: Mapping[str, Any], reason: str, message: str, event_type: str) -> None:
        emit_job_event(self.core, job, reason=reason, message=message, event_type=event_type, now=self.clock())


class ClusterUnavailableError(RuntimeError):
    """The Kubernetes API cannot be reached or refuses the request."""


def list_jobs_for_report(kubeconfig: str | None) -> list[dict[str, Any]]:
    """Every StaticTrainingJob, for reports; errors become ClusterUnavailableError with what to check."""
    try:
        return list_jobs(build(kubeconfig).custom)
    except client.ApiException as e:
        raise ClusterUnavailableError(
            f"the API server refused to list {labels.PLURAL}: {e.status} {e.reason}"
        ) from None
    except Exception as e:  # config errors, connection refused, DNS
        raise ClusterUnavailableError(
            f"cannot reach the Kubernetes API ({type(e).__name__}: {e}); check --kubeconfig or KUBECONFIG"
        ) from None
