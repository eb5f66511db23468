"""Node API calls of the price annotator: list nodes, patch their price annotations."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from kubernetes import client


def list_nodes(core: client.CoreV1Api) -> list[dict[str, Any]]:
    """Every node as a plain dict (camelCase keys, as the API server writes them)."""
    items = core.list_node().items
    return [cast(dict[str, Any], core.api_client.sanitize_for_serialization(n)) for n in items]


def patch_node_annotations(core: client.CoreV1Api, name: str, annotations: Mapping[str, str | None]) -> None:
    """Merge-patch annotations on a node (None removes a key)."""
    core.patch_node(name, {"metadata": {"annotations": dict(annotations)}})
