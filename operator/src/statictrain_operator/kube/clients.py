"""Building the Kubernetes API clients: in-cluster config, or a kubeconfig file."""

from __future__ import annotations

import json
import os
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
            # Read $KUBECONFIG now: the kubernetes package fixed its default path at import time.
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=os.environ.get("KUBECONFIG"), client_configuration=cfg
            )
    cfg.connection_pool_maxsize = pool_size
    api = client.ApiClient(cfg)
    return Clients(
        api,
        client.CoreV1Api(api),
        client.BatchV1Api(api),
        client.CustomObjectsApi(api),
        client.CoordinationV1Api(api),
    )


def connection(c: Clients) -> dict[str, Any]:
    """Server and credentials of `c` (for kopf's own watch connections), as ConnectionInfo fields."""
    cfg = c.api.configuration
    header = cfg.get_api_key_with_prefix("BearerToken") or cfg.get_api_key_with_prefix("authorization")
    parts = header.split(" ", 1) if header else []
    scheme, token = (
        (None, None) if not parts else (None, parts[0]) if len(parts) == 1 else (parts[0], parts[1])
    )
    return {
        "server": cfg.host,
        "ca_path": cfg.ssl_ca_cert,
        "insecure": not cfg.verify_ssl,
        "username": cfg.username or None,
        "password": cfg.password or None,
        "scheme": scheme,
        "token": token,
        "certificate_path": cfg.cert_file,
        "private_key_path": cfg.key_file,
    }


def in_cluster() -> bool:
    """Whether this process runs in a pod with a service account token."""
    return os.path.exists("/var/run/secrets/kubernetes.io/serviceaccount/token") and bool(
        os.environ.get("KUBERNETES_SERVICE_HOST")
    )


def raw(response: Any) -> dict[str, Any]:
    """The JSON body of a call made with ``_preload_content=False`` (skips model deserialization)."""
    return cast(dict[str, Any], json.loads(response.data))


def status_of(error: Exception) -> int | None:
    """HTTP status of an API error, None for anything else."""
    return error.status if isinstance(error, client.ApiException) else None
