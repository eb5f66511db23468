"""Where the API server is and how to log in: read once in main, shared by kopf's watches and our client.

A kubeconfig file is read with the official client's loader (it resolves relative
paths, embedded certificates and exec plugins); inside a pod the service
account is used and its token re-read as it rotates. Nothing here touches
``os.environ``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from kubernetes import client, config

__all__ = ["SA_DIR", "Endpoint", "in_cluster", "load"]

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


@dataclass(frozen=True)
class Endpoint:
    """Server and credentials (the fields of kopf.ConnectionInfo the operator uses)."""

    server: str
    ca_path: str | None = None
    insecure: bool = False
    token: str | None = None
    token_path: str | None = None
    """A file holding the bearer token, re-read while running (the service account's rotating token)."""
    scheme: str | None = None
    certificate_path: str | None = None
    private_key_path: str | None = None
    username: str | None = None
    password: str | None = None

    def kopf_fields(self) -> dict[str, object]:
        """Keyword arguments of kopf.ConnectionInfo for the same server and credentials."""
        token = self.token
        if self.token_path:
            with open(self.token_path, encoding="utf-8") as f:
                token = f.read().strip()
        return {
            "server": self.server,
            "ca_path": self.ca_path,
            "insecure": self.insecure,
            "username": self.username,
            "password": self.password,
            "scheme": self.scheme,
            "token": token,
            "certificate_path": self.certificate_path,
            "private_key_path": self.private_key_path,
        }


def in_cluster() -> bool:
    """Whether this process runs in a pod with a service account token."""
    return os.path.exists(f"{SA_DIR}/token") and bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def load(kubeconfig: str | None) -> Endpoint:
    """The endpoint of ``kubeconfig``; without one, the pod's service account, else the default kubeconfig."""
    if not kubeconfig and in_cluster():
        host = os.environ["KUBERNETES_SERVICE_HOST"]
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        return Endpoint(
            server=f"https://{host}:{port}" if ":" not in host else f"https://[{host}]:{port}",
            ca_path=f"{SA_DIR}/ca.crt",
            token_path=f"{SA_DIR}/token",
        )
    cfg = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)  # type: ignore[no-untyped-call]
    header = cfg.get_api_key_with_prefix("BearerToken") or cfg.get_api_key_with_prefix("authorization")
    parts = header.split(" ", 1) if header else []
    scheme, token = (None, None) if not parts else (None, parts[0]) if len(parts) == 1 else (parts[0], parts[1])
    return Endpoint(
        server=cfg.host,
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        token=token,
        scheme=scheme,
        certificate_path=cfg.cert_file,
        private_key_path=cfg.key_file,
        username=cfg.username or None,
        password=cfg.password or None,
    )
