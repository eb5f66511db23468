"""Case 15 (price source down) on real components.

The real operator (a subprocess, cost part on) prices an Azure node from a real HTTP endpoint that
answers in the Azure Retail Prices API's shape, two pages long. Then the endpoint goes away: the
machine's TCP stack refuses the connections (no stubbed client). The node keeps its last known live
price, flagged stale once it is older than the allowed age: never zero, never silently the catalog's.
An operator restarted while the endpoint is still down prices the node again from the copy it saved
on disk.

The response items are written here in the API's documented shape (no recording of the real service
is reachable from this machine, see #13); HTTP, paging, the refused connections, the process restart
and the cache file are real.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from statictrain import labels

from .conftest import Operator, wait_for

pytestmark = pytest.mark.cluster

SKU, REGION = "Standard_NC24ads_A100_v4", "eastus"
LIVE = 3.1
"""The endpoint's Linux on-demand price; the shipped catalog says 3.673 for this SKU and region."""
MAX_AGE_S = 20.0


def item(price: float, sku_name: str, product: str) -> dict[str, Any]:
    return {
        "currencyCode": "USD",
        "retailPrice": price,
        "unitPrice": price,
        "armRegionName": REGION,
        "location": "US East",
        "armSkuName": SKU,
        "skuName": sku_name,
        "productName": product,
        "serviceName": "Virtual Machines",
        "type": "Consumption",
        "unitOfMeasure": "1 Hour",
        "isPrimaryMeterRegion": True,
    }


class PriceApi:
    """Two pages: a Windows meter (to be ignored) and a link to the second page with the Linux meter."""

    def __init__(self) -> None:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
                if query.get("page") == ["2"]:
                    page = {"Items": [item(LIVE, "NC24ads A100 v4", "Virtual Machines NCadsA100v4 Series")]}
                else:
                    api.filters.append(query.get("$filter", [""])[0])
                    page = {
                        "Items": [item(9.99, "NC24ads A100 v4", "Virtual Machines NCadsA100v4 Series Windows")],
                        "NextPageLink": f"{api.url}?page=2",
                    }
                body = json.dumps({"BillingCurrency": "USD", "CustomerEntityType": "Retail", **page}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        self.filters: list[str] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/retail/prices"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Close the listening socket: later connections are refused by the kernel."""
        if self.thread.is_alive():
            self.server.shutdown()
            self.server.server_close()
            self.thread.join(10)


@pytest.fixture
def price_api() -> Iterator[PriceApi]:
    api = PriceApi()
    yield api
    api.stop()


@pytest.fixture
def azure_node(cluster: Any) -> Iterator[str]:
    name = f"az-{uuid.uuid4().hex[:6]}"
    cap = {"cpu": "24", "memory": "220Gi", "pods": "110", labels.GPU_RESOURCE: "1"}
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, labels.INSTANCE_TYPE: SKU, labels.REGION: REGION},
            "annotations": {"kwok.x-k8s.io/node": "fake"},
        },
        "spec": {"taints": [{"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}]},
        "status": {"capacity": cap, "allocatable": cap},
    }
    cluster.kubectl("create", "-f", "-", input=json.dumps(node))
    yield name
    cluster.kubectl("delete", "node", name, "--wait=false", check=False)


def test_price_source_down_keeps_the_last_live_price_flagged_stale_and_survives_a_restart(
    cluster: Any,
    make_operator: Callable[..., Operator],
    price_api: PriceApi,
    azure_node: str,
    tmp_path: Path,
) -> None:
    cache = tmp_path / "prices"
    env = {
        "LIVE_PROVIDERS": "azure",
        "LIVE_AZURE_URL": price_api.url,
        "LIVE_CACHE_DIR": str(cache),
        "LIVE_REFRESH_S": "1",
        "LIVE_MAX_AGE_H": str(MAX_AGE_S / 3600),
        "INTERVAL_S": "1",
    }
    with pytest.MonkeyPatch.context() as mp:  # the operator's environment (read again by its restart below)
        for key, value in env.items():
            mp.setenv(f"STATICTRAIN_COST_{key}", value)
        mp.setenv("STATICTRAIN_PROMETHEUS_URL", cluster.prometheus_url)
        op = make_operator(parts="cost")
        _run(cluster, op, price_api, azure_node, cache)


def _run(cluster: Any, op: Operator, price_api: PriceApi, azure_node: str, cache: Path) -> None:

    def price(*, source: str, stale: bool) -> Callable[[], dict[str, str] | None]:
        def read() -> dict[str, str] | None:
            node = json.loads(cluster.kubectl("get", "node", azure_node, "-o", "json").stdout)
            ann: dict[str, str] = node["metadata"].get("annotations") or {}
            notes = ann.get(labels.PRICE_NOTES, "")
            ok = ann.get(labels.PRICE_SOURCE) == source and ("stale" in notes) == stale
            return ann if ok else None

        return read

    fresh = wait_for(price(source="live:azure", stale=False), "the node priced from the live endpoint", timeout=120)
    assert float(fresh[labels.HOURLY_COST]) == LIVE, fresh  # the Linux meter of page 2, not the Windows one
    assert SKU in price_api.filters[0] and REGION in price_api.filters[0], price_api.filters

    price_api.stop()
    wait_for(lambda: "Azure Retail Prices API unreachable" in op.logs(), "a refresh refused by the stopped endpoint")
    stale = wait_for(price(source="live:azure", stale=True), "the last live price flagged stale", timeout=120)
    assert float(stale[labels.HOURLY_COST]) == LIVE, stale

    # A restart with the endpoint still down and the node's price annotations gone: priced from the disk copy.
    op.stop()
    assert (cache / "azure.json").is_file()
    priced = (labels.HOURLY_COST, labels.PRICE_SOURCE, labels.PRICE_NOTES)
    cluster.kubectl("annotate", "node", azure_node, *(f"{k}-" for k in priced))
    op.start()
    again = wait_for(price(source="live:azure", stale=True), "the restarted operator's price from disk", timeout=120)
    assert float(again[labels.HOURLY_COST]) == LIVE, again
    assert op.logs().count("Azure Retail Prices API unreachable") >= 2  # the restarted one tried the endpoint too
