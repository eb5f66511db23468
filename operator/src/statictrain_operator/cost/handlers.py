"""kopf registration of the cost part: node price annotator and the accounting timer.

Import this module (the operator's main.py does) to register:

* ``@kopf.on.event`` on Nodes: price a GPU node whenever it appears or its
  labels change; patch only when the annotations differ (idempotent);
* ``@kopf.on.startup``: a background task that re-prices all nodes and runs
  one accounting pass every ``STATICTRAIN_COST_INTERVAL_S`` seconds, stopped on
  ``@kopf.on.cleanup`` (status.progress and status.compile are the progress part's).

Settings come from main's Runtime (read before kopf starts); API calls go
through the Kube port (cost.cluster), awaited on kopf's loop. The accounting
pass itself (allocation and Prometheus reads) runs in a worker thread between
reading the cluster and sending its writes. Handlers only translate events into
calls of the pure modules.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.request
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import IO, Any, cast

import kopf
from prometheus_client import REGISTRY, CollectorRegistry
from statictrain import labels
from statictrain.pricing import (
    Catalog,
    CustomPrice,
    FallbackPolicy,
    LiveQuotes,
    parse_catalog,
    parse_custom_prices,
    shipped_catalog_text,
)

from statictrain_operator import loops, runtime
from statictrain_operator.cost.accounting import Accountant
from statictrain_operator.cost.annotator import node_facts, plan_node_patches
from statictrain_operator.cost.cluster import ClusterCost
from statictrain_operator.cost.exporter import CostMetrics
from statictrain_operator.cost.live_prices import RefreshSchedule, load, refresh_azure
from statictrain_operator.cost.settings import CostSettings
from statictrain_operator.prom import HttpPrometheus

__all__ = ["CostRuntime", "cost_cleanup", "cost_startup", "price_node_event"]

log = logging.getLogger(__name__)


def _urlopen(url: str) -> IO[bytes]:
    return cast(IO[bytes], urllib.request.urlopen(url, timeout=30))


class CostRuntime:
    """What the handlers share, built once at startup and kept in kopf's memo."""

    def __init__(
        self,
        settings: CostSettings,
        cluster: ClusterCost,
        clock: Callable[[], datetime],
        registry: CollectorRegistry = REGISTRY,
    ) -> None:
        self.settings, self.cluster, self.clock = settings, cluster, clock
        self.catalog: Catalog = parse_catalog(shipped_catalog_text())
        self.policy = FallbackPolicy(
            default_gpu_hourly_usd=settings.default_gpu_price,
            live_max_age=timedelta(hours=settings.live_max_age_h),
        )
        self._custom: list[CustomPrice] = []
        self._live: LiveQuotes | None = load("azure", Path(settings.live_cache_dir))  # the last known, at once
        self._live_schedule = RefreshSchedule(every_s=settings.live_refresh_s)
        self.metrics = CostMetrics(registry)
        self.accountant = Accountant(
            kube=cluster,
            prom=HttpPrometheus(settings.prometheus_url),
            catalog=self.catalog,
            settings=settings,
            metrics=self.metrics,
            clock=clock,
        )

    async def refresh_prices(self, nodes: list[dict[str, Any]]) -> None:
        """Re-read custom prices and, when due, live quotes; node events reuse what this keeps."""
        ref = self.settings.custom_prices_configmap
        if ref:
            ns, name = ref.split("/")
            text = await self.cluster.read_configmap_key(ns, name, "prices.csv")
            try:
                self._custom = parse_custom_prices(text) if text else []
            except ValueError as e:
                log.warning("custom prices in ConfigMap %s ignored: %s", ref, e)
        now = self.clock()
        if "azure" in {p.strip() for p in self.settings.live_providers.split(",")}:
            facts = [node_facts(n) for n in nodes]
            skus = sorted(
                {f.instance_type for f in facts if f.instance_type and f.instance_type.startswith("Standard_")}
            )
            regions = sorted({f.region for f in facts if f.region and f.instance_type in skus})
            if skus and self._live_schedule.due(now):
                cache = Path(self.settings.live_cache_dir)
                quotes, fresh = await asyncio.to_thread(
                    refresh_azure, _urlopen, regions, skus, now, cache, base_url=self.settings.live_azure_url
                )
                self._live = quotes or self._live
                self._live_schedule = self._live_schedule.after(fresh, now)

    def price(self, nodes: list[dict[str, Any]]) -> dict[str, dict[str, str | None]]:
        """The annotation patches that price ``nodes`` (only those that change); sets the node price metrics."""
        now = self.clock()
        live = [self._live] if self._live is not None else []
        patches = plan_node_patches(nodes, self.catalog, now=now, custom=self._custom, live=live, policy=self.policy)
        for node in nodes:
            facts = node_facts(node)
            ann = (node.get("metadata") or {}).get("annotations") or {}
            merged = {**ann, **{k: v for k, v in patches.get(facts.name, {}).items() if v is not None}}
            hourly = merged.get(labels.HOURLY_COST)
            if hourly:
                source = merged.get(labels.PRICE_SOURCE, "")
                self.metrics.set_node_hourly(
                    facts.name, facts.instance_type or "", facts.capacity_type, source, float(hourly),
                    provider_id=str((node.get("spec") or {}).get("providerID") or ""),
                )  # fmt: skip
        return patches

    async def annotate(self, nodes: list[dict[str, Any]]) -> int:
        """Price ``nodes``: patch the annotations that change; returns how many nodes were patched."""
        patches = self.price(nodes)
        await asyncio.gather(*(self.cluster.patch_node_annotations(n, p) for n, p in patches.items()))
        return len(patches)

    def account(self) -> None:
        """One accounting pass over what ``cluster.load`` read (blocking: Prometheus; no Kubernetes calls)."""
        try:
            self.accountant.run_once()
        except Exception:
            self.metrics.run_failed()
            raise

    async def tick(self) -> None:
        """One pass: list the nodes and pods once, price the nodes, account every job, send the writes."""
        nodes = await self.cluster.load()
        await self.refresh_prices(nodes)
        await self.annotate(nodes)  # the accounting pass prices the same listed nodes
        try:
            await asyncio.to_thread(self.account)
        finally:
            await self.cluster.flush()


async def _tick(rt: CostRuntime) -> None:
    try:
        await rt.tick()
    except Exception:
        log.exception("cost accounting run failed; retrying next interval")


@kopf.on.startup()
async def cost_startup(memo: kopf.Memo, **_: Any) -> None:
    rt = runtime.of(memo)
    settings: CostSettings = rt.parts["cost"]
    cluster = ClusterCost(rt.kube, rt.jobs, rt.job, rt.clock, state_configmap=settings.state_configmap)
    cost = CostRuntime(settings, cluster, rt.clock)
    memo["cost_runtime"] = cost
    stop = asyncio.Event()
    loops.start_periodic(memo, "cost", loops.periodic(partial(_tick, cost), settings.interval_s, stop), stop)


@kopf.on.cleanup()
async def cost_cleanup(memo: kopf.Memo, **_: Any) -> None:
    await loops.stop_periodic(memo, "cost")


@kopf.on.event("", "v1", "nodes")
async def price_node_event(body: kopf.Body, type: str | None, memo: kopf.Memo, **_: Any) -> None:
    rt = memo.get("cost_runtime")
    if rt is None or type == "DELETED":
        return
    await rt.annotate([dict(body)])
