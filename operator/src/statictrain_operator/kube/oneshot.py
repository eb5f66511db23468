"""One-shot reads for the command-line tools (reports, anomalies): the port, run to completion."""

from __future__ import annotations

import asyncio
from typing import Any

from . import endpoint, port
from .http import HttpKube

__all__ = ["ClusterUnavailableError", "list_trainingjobs"]


class ClusterUnavailableError(RuntimeError):
    """The Kubernetes API cannot be reached or refuses the request."""


def list_trainingjobs(kubeconfig: str | None, namespace: str | None = None) -> list[dict[str, Any]]:
    """Every StaticTrainingJob (of one namespace, or of all); errors become ClusterUnavailableError saying
    what to check."""

    async def go() -> list[dict[str, Any]]:
        kube = HttpKube(endpoint.load(kubeconfig))
        try:
            return await kube.list(port.STJ, namespace)
        finally:
            await kube.close()

    try:
        return asyncio.run(go())
    except port.ApiError as e:
        raise ClusterUnavailableError(
            f"the API server refused to list {port.STJ.plural}: {e.status} {e.reason}"
        ) from None
    except Exception as e:  # config errors, connection refused, DNS
        raise ClusterUnavailableError(
            f"cannot reach the Kubernetes API ({type(e).__name__}: {e}); check --kubeconfig or KUBECONFIG"
        ) from None
