from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from .helpers import TEST_LABEL, ExtenderProcess, post_json, wait_for


@pytest.fixture(scope="session")
def extender(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExtenderProcess]:
    """The real extender, listening where the cluster's statictrain-scheduler profile posts."""
    log = tmp_path_factory.mktemp("extender") / "extender.log"
    proc = ExtenderProcess(cluster.kubeconfig, cluster.extender_port, cluster.prometheus_url, log)
    proc.start()
    cluster.add_scrape_target("statictrain-extender", f"127.0.0.1:{cluster.extender_port}", {})
    yield proc
    cluster.remove_scrape_target("statictrain-extender")
    proc.stop()


@pytest.fixture
def node_group(cluster: Any, extender: ExtenderProcess) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A test's own nodes: (group id, list the test appends node manifests to before calling apply)."""
    group = f"g-{uuid.uuid4().hex[:8]}"
    manifests: list[dict[str, Any]] = []
    yield group, manifests
    cluster.kubectl("delete", "nodes", "-l", f"{TEST_LABEL}={group}", "--wait=false", check=False)


def apply_nodes(cluster: Any, extender: ExtenderProcess, manifests: list[dict[str, Any]]) -> None:
    """Create the nodes, wait until kwok marks them Ready and the extender's cache knows them."""
    doc = {"apiVersion": "v1", "kind": "List", "items": manifests}
    cluster.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(doc))
    names = [m["metadata"]["name"] for m in manifests]

    def ready() -> bool:
        out = cluster.kubectl("get", "nodes", *names, "-o", "json").stdout
        items = json.loads(out)["items"]
        return len(items) == len(names) and all(
            any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))
            for n in items
        )

    wait_for(ready, 60, f"nodes {names} to be Ready")
    probe = {
        "Pod": {
            "metadata": {"annotations": {"statictrain.io/capacity-types": "spot,on-demand"}},
            "spec": {"schedulerName": "statictrain-scheduler"},
        },
        "NodeNames": names,
    }

    def cached() -> bool:
        _, result = post_json(f"{extender.base}/scheduler/filter", probe)
        return not result.get("FailedNodes")

    wait_for(cached, 30, "the extender's watch to see the new nodes")
