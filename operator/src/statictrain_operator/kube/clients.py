"""Building the Kubernetes API clients: in-cluster config, or a kubeconfig file."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, cast

from kubernetes import client, config


@dataclass(frozen=True)
class Clients:
    """API groups the operator uses, sharing one connection pool."""

    api: client.ApiClient
    core: client.CoreV1Api
    batch: client.BatchV1Api
    custom: client.CustomObjectsApi
    coordination: client.CoordinationV1Api


def build(kubeconfig: str | None = None, *, pool_size: int = 20) -> Clients:
    """Clients from `kubeconfig`, else in-cluster config, else the default kubeconfig."""
    cfg = client.Configuration()
    if kubeconfig:
        config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)  # type: ignore[no-untyped-call]
    else:
        try:
            config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        except config.ConfigException:
            config.load_kube_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    cfg.connection_pool_maxsize = pool_size
    api = client.ApiClient(cfg)
    return Clients(
        api,
        client.CoreV1Api(api),
        client.BatchV1Api(api),
        client.CustomObjectsApi(api),
        client.CoordinationV1Api(api),
    )


def raw(response: Any) -> dict[str, Any]:
    """The JSON body of a call made with ``_preload_content=False`` (skips model deserialization)."""
    return cast(dict[str, Any], json.loads(response.data))


def status_of(error: Exception) -> int | None:
    """HTTP status of an API error, None for anything else."""
    return error.status if isinstance(error, client.ApiException) else None
